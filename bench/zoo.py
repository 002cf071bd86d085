"""The model zoo through every target (issue 12): every ONNX file ``bench/zoo_models.py``
exported (``bench/.cache/zoo/<model>/<variant>.onnx``: TorchScript ``ts`` and dynamo
exporters, static and ``-dyn``) converted by opbridge to onnx, pytorch, tensorflow, tflite,
openvino and coreml with ``--check`` (onnxruntime on the original file is the source
runtime), in a model x target table with the conversion times, totals per target and the
share that converts and checks; ``opbridge report`` on the same file is compared with what
``convert`` found (does report predict ok / refused, and the same reason?); optionally the
peers on the same files (onnx2torch, onnx2tf with onnxsim first as by default, its .tflite run
in LiteRT; OpenVINO's ONNX frontend; pnnx, its ncnn files run by this venv's ``ncnn``; their own
venvs), held to the same tolerance rule.

Every file runs in a child process with a timeout (``report`` + ``convert`` to all targets
in one child; if that child crashes or hangs, each target again in its own child), so a
crash or a hang is one cell, never the bench. Static files are checked on the cached
meaningful inputs (``inputs.npz``: token ids below the vocabulary, a 0/1 padding mask);
``-dyn`` files on convert's seeded random inputs at its check sizes. Cells: ``ok`` (checked
against onnxruntime; max error shown), ``ok~`` (structural check only), ``✗chk`` (written,
mismatch), ``✗code`` (refused: the reason code; the node is in the failure list), ``ERR``
(crash, timeout, internal error).

    python bench/zoo.py [--only bert,resnet18] [--exporters ts,dynamo,ts-dyn,dynamo-dyn]
                        [--targets onnx,...] [--peers onnx2torch,onnx2tf,openvino_fe,pnnx]
                        [--no-report] [--json out.json] [--render out.json] [--timeout 900]

Models missing from the cache are not built here: run ``python bench/zoo_models.py build``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR", "PYTHONWARNINGS": "ignore",
             "OPENVINO_TELEMETRY_DISABLE": "1", "CUDA_VISIBLE_DEVICES": ""}
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from keras_models import cell_text, peer_cells, reason_line, say, summarize_target  # noqa: E402
from keras_models import child as run_child  # noqa: E402
from zoo_models import CACHE, MODELS, VARIANTS  # noqa: E402

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")
PEERS = ("onnx2torch", "onnx2tf", "openvino_fe", "pnnx")
PEER_TARGET = {"onnx2torch": "pytorch", "onnx2tf": "tflite", "openvino_fe": "openvino", "pnnx": "ncnn"}
PEER_VENV = {"onnx2torch": HERE / ".venv-peers", "onnx2tf": HERE / ".venv-onnx2tf"}
PEER_RUNNER = {"onnx2torch": "_model_onnx2torch.py", "onnx2tf": "_model_onnx2tf.py"}
OUT = CACHE / "out"


def child(args: list[str], timeout: float) -> tuple[int | None, str]:
    """Run this file as a child (``args``): ``keras_models.child`` with this bench's quiet env."""
    return run_child(args, timeout, __file__, QUIET_ENV)


# --- workers (child processes) ------------------------------------------------------------------

def predicted(rep: dict[str, Any]) -> dict[str, Any]:
    """``report --json`` → per target: ok, or refused with the first unsupported node's reason."""
    out = {}
    for target, plan in rep.get("backends", {}).items():
        bad = [n for n in plan.get("nodes", []) if n.get("status") == "unsupported"]
        out[target] = ({"status": "refused", "reason": bad[0].get("reason", ""), "node": bad[0].get("node", ""),
                        "op": bad[0].get("op", ""), "detail": str(bad[0].get("detail", ""))[:300], "unsupported": len(bad)}
                       if bad else {"status": "ok"})
    return out


def opbridge_worker(src: str, outdir: str, targets: str, result: str, inputs: str, with_report: str,
                    checks: str = "{}") -> None:
    """``report`` (if asked) then ``convert`` with the check, in this child; onnx and
    onnxruntime are imported before the clock starts."""
    import importlib

    for mod in ("onnx", "onnxruntime"):
        importlib.import_module(mod)
    from translator.run.convert import convert
    from translator.table.errors import OpbridgeError

    rec: dict[str, Any] = {}
    if with_report == "1":
        import opbridge

        t = time.perf_counter()
        try:
            rec["report"] = predicted(opbridge.report(src, backends=targets.split(","), check_dims={
                k: tuple(v) for k, v in json.loads(checks).items()} or None))
        except Exception as exc:  # noqa: BLE001 - a refusal of the whole model is a prediction too
            code = exc.code if isinstance(exc, OpbridgeError) else f"internal_error:{type(exc).__name__}"
            rec["report"] = {t_: {"status": "refused", "reason": code, "detail": str(exc).splitlines()[0][:300]
                                  if str(exc) else ""} for t_ in targets.split(",")}
        rec["report_seconds"] = round(time.perf_counter() - t, 2)
    stamps: list[tuple[float, str]] = []
    t0 = time.perf_counter()

    def progress(msg: str) -> None:
        stamps.append((time.perf_counter() - t0, msg))

    try:
        rec.update(convert(src, targets, outdir, check=True, inputs=inputs or None, progress=progress,
                           check_dims={k: tuple(v) for k, v in json.loads(checks).items()} or None))
    except Exception as exc:  # noqa: BLE001 - the refusal is the cell's answer
        code = exc.code if isinstance(exc, OpbridgeError) else f"internal_error:{type(exc).__name__}"
        rec["refused"] = {"code": code, "detail": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    rec["stamps"] = stamps
    rec["total_seconds"] = time.perf_counter() - t0
    Path(result).write_text(json.dumps(rec, default=str))


def peers_worker(src: str, inputs: str, peers: str, result: str, timeout: str = "900") -> None:
    """Each peer on ``src``, judged against onnxruntime on the original by the rule opbridge's
    own check applies to a whole model's output (``translator.run.check.compare_output`` at the
    default rtol 1e-3 / atol 1e-5, which also passes an error within 128 eps of the output's
    largest magnitude), so both sides are held to the same bar. A peer in a subprocess gets
    ``timeout`` seconds; the result file is rewritten after every peer (a killed child keeps
    the cells it finished)."""
    import numpy as np
    import onnxruntime as ort

    from translator.run.check import compare_output

    feeds = dict(np.load(inputs)) if inputs else None
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    if feeds is None:  # -dyn files: batch 2 of seeded random values (ids below 8, as convert's check)
        rng = np.random.default_rng(0)
        feeds = {}
        for i in sess.get_inputs():
            shape = [d if isinstance(d, int) else 2 for d in i.shape]
            feeds[i.name] = (rng.integers(0, 8, size=shape).astype(np.int64) if "int64" in i.type
                             else rng.standard_normal(shape).astype(np.float32))
    expected = sess.run(None, feeds)
    out: dict[str, Any] = {}
    work = Path(result).parent / "peers"
    work.mkdir(parents=True, exist_ok=True)
    for peer in peers.split(","):
        t0 = time.perf_counter()
        try:
            got = _run_peer(peer, src, feeds, work, float(timeout))
        except subprocess.TimeoutExpired:
            out[peer] = {"status": "error", "reason": "timeout", "detail": f"{peer} ran over {float(timeout):.0f} s"}
            Path(result).write_text(json.dumps(out, default=str))
            continue
        except Exception as exc:  # noqa: BLE001 - the peer's failure is its cell
            out[peer] = {"status": "refused", "reason": type(exc).__name__, "detail": (str(exc).splitlines() or [""])[0][:300]}
            Path(result).write_text(json.dumps(out, default=str))
            continue
        if isinstance(got, dict):  # n/a or a subprocess failure
            out[peer] = got
            Path(result).write_text(json.dumps(out, default=str))
            continue
        got = [g.reshape(np.shape(e)) if np.shape(g) != np.shape(e) and np.size(g) == np.size(e)
               and np.squeeze(g).shape == np.squeeze(e).shape else g  # ncnn's blobs drop dims of 1
               for e, g in zip(expected, (np.asarray(x) for x in got))]
        diffs = [compare_output(np.asarray(e), np.asarray(g), {"rtol": 1e-3, "atol": 1e-5}) for e, g in zip(expected, got)]
        ok = len(got) == len(expected) and all(d.ok for d in diffs)
        why = "" if ok else ("output count" if len(got) != len(expected) else next(d.reason for d in diffs if not d.ok))
        errs = [float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(e, np.float64))))
                for e, g in zip(expected, got) if np.shape(g) == np.shape(e)]
        out[peer] = {"status": "ok" if ok else "check_failed", "reason": why, "max_err": max(errs) if errs else None,
                     "seconds": round(time.perf_counter() - t0, 3)}
        Path(result).write_text(json.dumps(out, default=str))


def _run_peer(peer: str, src: str, feeds: dict[str, Any], work: Path, timeout: float = 900.0) -> Any:
    """The peer's outputs (list of arrays), or a cell dict when it cannot run or failed."""
    import numpy as np

    if peer == "openvino_fe":
        from emitters.openvino.runtime import openvino

        openvino()  # telemetry off (see runtime.openvino)
        from openvino.frontend import FrontEndManager

        from emitters.openvino import compile_model, infer

        fe = FrontEndManager().load_by_framework("onnx")
        compiled = compile_model(fe.convert(fe.load(src)))
        names = [p.get_any_name() if p.get_names() else "" for p in compiled.inputs]
        vals = list(feeds.values())
        return infer(compiled, [feeds[n] if n in feeds else vals[i] for i, n in enumerate(names)])
    if peer == "pnnx":  # ncnn's own converter, its files run by the project's ncnn package
        from peers import pnnx

        if not pnnx.available():
            return {"status": "n/a", "reason": "venv_missing", "detail": "bench/.venv-pnnx not built"}
        try:
            param, weights, _ = pnnx.convert(src, feeds, work / "pnnx", timeout)
        except RuntimeError as exc:
            return {"status": "refused", "reason": "peer_failed", "detail": str(exc)[:300]}
        return pnnx.caller(pnnx._net(param, weights), feeds, pnnx.output_count(param))()
    py = PEER_VENV[peer] / "bin" / "python"
    if not py.exists():
        return {"status": "n/a", "reason": "venv_missing", "detail": f"bench/{PEER_VENV[peer].name} not built"}
    d = work / peer
    d.mkdir(parents=True, exist_ok=True)
    (d / "outputs.npz").unlink(missing_ok=True)
    np.savez(d / "inputs.npz", **feeds)
    # onnx2tf as its README runs it: onnxsim first (its default; the runner converts a copy of src)
    extra = ["--onnxsim", "1"] if peer == "onnx2tf" else []
    p = subprocess.run([str(py), str(HERE / "peers" / PEER_RUNNER[peer]), src, str(d / "inputs.npz"), str(d), "1"] + extra,
                       capture_output=True, text=True, timeout=timeout, env={**os.environ, **QUIET_ENV})
    rec = {}
    if p.returncode == 0 and p.stdout.strip():
        rec = json.loads(p.stdout.strip().splitlines()[-1])
    if p.returncode != 0 or rec.get("peer_error") or not (d / "outputs.npz").exists():
        tail = rec.get("peer_error") or (p.stderr.strip().splitlines() or ["?"])[-1]
        # a Python exception (exit 1: the converter's NotImplementedError...) is its refusal; a signal is a crash
        return {"status": "refused" if p.returncode in (0, 1) else "error", "reason": "peer_failed", "detail": str(tail)[:300]}
    with np.load(d / "outputs.npz", allow_pickle=False) as z:
        return [z[k] for k in sorted(z.files, key=lambda s: int(s.split("_")[1]))]


# --- running one file -----------------------------------------------------------------------------

def _cells_from(rec: dict[str, Any], targets: list[str], wall: float) -> list[dict[str, Any]]:
    if "refused" in rec:
        r = rec["refused"]
        st = "error" if r["code"].startswith("internal_error") else "refused"
        return [{"target": t, "status": st, "reason": r["code"], "detail": r["detail"], "wall": round(wall, 1)}
                for t in targets]
    cells = [summarize_target(rec, t, rec["stamps"]) | dims_of(t) for t in rec["targets"]]
    for c in cells:
        c["wall"], c["nodes"] = round(wall, 1), rec.get("nodes")
    return cells


def dims_of(t: dict[str, Any]) -> dict[str, Any]:
    """What convert did with symbolic input dims on this target: kept (``dynamic_dims``, and
    the sizes the check ran at) or fixed (``fixed_dims``: symbol -> size)."""
    out: dict[str, Any] = {}
    if t.get("dynamic_dims"):
        out["dynamic_dims"] = t["dynamic_dims"]
        out["check_sizes"] = (t.get("check") or {}).get("sizes")
    if t.get("fixed_dims"):
        out["fixed_dims"] = t["fixed_dims"]
    return out


def check_dims(folder: Path, src: Path | None = None) -> dict[str, list[int]]:
    """The sizes convert's check runs a dynamic file's non-batch dims at: the export's example
    size and half of it (a sequence or audio length has a floor: a conv's kernel, a patch
    size); the batch keeps convert's default sizes. The dims are named as ``src`` names them
    (the dynamo exporter calls them ``s0``, ``s1``…; the TorchScript one keeps ``seq``)."""
    meta = json.loads((folder / "meta.json").read_text()) if (folder / "meta.json").exists() else {}
    named = _input_dims(src) if src is not None else {}
    out: dict[str, list[int]] = {}
    for name, axes in (meta.get("dynamic_axes") or {}).items():
        example = (meta.get("dynamic_example_shapes") or {}).get(name) or []
        for axis, dim in axes.items():
            if dim != "batch" and int(axis) < len(example):
                size = int(example[int(axis)])
                sym = named.get(name, {}).get(int(axis), dim if not named else None)
                if sym:
                    out[sym] = [size, max(1, size // 2)]
    return out


def _input_dims(src: Path) -> dict[str, dict[int, str]]:
    """Input name → axis → its symbolic dim's name in the ONNX file ``src`` (static dims left out)."""
    import onnx

    g = onnx.load(str(src), load_external_data=False).graph
    inits = {i.name for i in g.initializer}
    return {v.name: {k: d.dim_param for k, d in enumerate(v.type.tensor_type.shape.dim) if d.dim_param}
            for v in g.input if v.name not in inits}


def run_opbridge(model: str, variant: str, src: Path, targets: list[str], timeout: float,
                 with_report: bool) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(cells, report prediction): all targets in one child; after a crash or a timeout,
    each target in its own child (so one target's crash is one cell)."""
    outdir = OUT / model / variant
    outdir.mkdir(parents=True, exist_ok=True)
    inputs = str(src.parent / "inputs.npz") if not variant.endswith("-dyn") and (src.parent / "inputs.npz").exists() else ""
    checks = json.dumps(check_dims(src.parent, src) if variant.endswith("-dyn") else {})

    def once(ts: list[str], rep: bool, tag: str) -> tuple[dict[str, Any] | None, float, int | None, str]:
        result = outdir / f"result{tag}.json"
        result.unlink(missing_ok=True)
        art = outdir / f"artifacts{tag}"
        if art.is_file():  # a one-target run's file where several targets write a folder
            art.unlink()
        t0 = time.perf_counter()
        rc, last = child(["--_opbridge", str(src), str(outdir / f"artifacts{tag}"), ",".join(ts), str(result), inputs,
                          "1" if rep else "0", checks], timeout)
        return (json.loads(result.read_text()) if result.exists() else None), time.perf_counter() - t0, rc, last

    rec, wall, rc, last = once(targets, with_report, "")
    if rec is not None:
        return _cells_from(rec, targets, wall), rec.get("report")
    say(f"{model}/{variant}: child {'timed out' if rc is None else f'exited {rc}'} ({last[:120]}); one child per target")
    cells: list[dict[str, Any]] = []
    rep: dict[str, Any] | None = {} if with_report else None
    for t in targets:
        r, w, rc1, last1 = once([t], with_report, f"-{t}")
        if r is None:
            cells.append({"target": t, "status": "error", "reason": "timeout" if rc1 is None else "crash",
                          "detail": last1 if rc1 is None else f"worker exited {rc1}: {last1}", "wall": round(w, 1)})
        else:
            cells += _cells_from(r, [t], w)
            if rep is not None and r.get("report"):
                rep.update(r["report"])
    return cells, rep


# --- the tables ---------------------------------------------------------------------------------

def zoo_cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "—"
    if c["status"] in ("refused",):
        return "✗" + str(c.get("reason", "?"))[:16]
    if c["status"] == "error":
        return "ERR:" + str(c.get("reason", "?")).replace("internal_error:", "")[:14]
    if c["status"] == "n/a":
        return "n/a"
    mark = "" if not (c.get("dynamic_dims") or c.get("fixed_dims")) else " dyn" if not c.get("fixed_dims") else " fix"
    return cell_text(c) + mark


def render(rows: list[dict[str, Any]], targets: list[str], peers: list[str]) -> str:
    head = ["model", "exporter"] + targets + [f"[{p}]" for p in peers] + ["wall s"]
    table = [head]
    for r in rows:
        cells = {c["target"]: c for c in r["opbridge"]}
        walls = [c.get("wall") for c in r["opbridge"] if c.get("wall") is not None]
        table.append([r["model"], r["exporter"]] + [zoo_cell(cells.get(t)) for t in targets]
                     + [zoo_cell(r.get("peers", {}).get(p)) for p in peers] + [f"{max(walls):.0f}" if walls else ""])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


STATUSES = ("ok", "structural", "check_failed", "refused", "error")


def totals(rows: list[dict[str, Any]], targets: list[str], peers: list[str]) -> dict[str, Any]:
    """Per target (and per exporter x target): counts by status, the share that converts and
    checks, the median and total seconds of the cells (read + emit + check)."""
    import statistics

    out: dict[str, Any] = {}

    def tally(cs: list[dict[str, Any]]) -> dict[str, Any]:
        d: dict[str, Any] = {s: sum(c["status"] == s for c in cs) for s in STATUSES} | {"cells": len(cs)}
        d["pct_ok"] = round(100.0 * d["ok"] / len(cs), 1) if cs else None
        dyn = [c for c in cs if c.get("dynamic_dims") or c.get("fixed_dims")]
        if dyn:  # files with symbolic dims: kept dynamic and checked at two sizes, or fixed
            d["dyn_kept_ok"] = sum(1 for c in dyn if c["status"] == "ok" and not c.get("fixed_dims")
                                   and len(c.get("check_sizes") or []) >= 2)
            d["dyn_fixed"] = sum(1 for c in dyn if c.get("fixed_dims"))
        secs = [c["seconds"] for c in cs if c.get("seconds") is not None]
        d["median_s"] = round(statistics.median(secs), 2) if secs else None
        d["total_s"] = round(sum(secs), 1)
        return d

    every = [c for r in rows for c in r["opbridge"] if c["target"] in targets]
    for t in targets:
        out[t] = tally([c for c in every if c["target"] == t])
    out["all"] = tally(every)
    for ex in sorted({r["exporter"] for r in rows}, key=lambda e: VARIANTS.index(e) if e in VARIANTS else 9):
        out[f"exporter {ex}"] = tally([c for r in rows if r["exporter"] == ex for c in r["opbridge"] if c["target"] in targets])
    for p in peers:
        cs = [r["peers"][p] for r in rows if r.get("peers", {}).get(p) and r["peers"][p]["status"] != "n/a"]
        na = sum(1 for r in rows if r.get("peers", {}).get(p, {}).get("status") == "n/a")
        out[f"peer {p}"] = tally(cs) | {"n/a": na}
    return out


def side_by_side(rows: list[dict[str, Any]], peers: list[str]) -> list[str]:
    lines = []
    for p in peers:
        files = [r for r in rows if r.get("peers", {}).get(p) and r["peers"][p]["status"] != "n/a"]
        if not files:
            na = [r["peers"][p].get("detail", "") for r in rows if r.get("peers", {}).get(p)]
            lines.append(f"{p}: not run ({na[0] if na else 'not asked'})")
            continue
        t = PEER_TARGET[p]
        ours = sum(1 for r in files for c in r["opbridge"] if c["target"] == t and c["status"] == "ok")
        theirs = sum(1 for r in files if r["peers"][p]["status"] == "ok")
        lines.append(f"opbridge→{t} vs {p} on {len(files)} files: ok {ours} vs {theirs}")
    return lines


NODE_RE = re.compile(r"node '([^']*)'|node (\S+) op|Node \(([^)]*)\)")


def mechanism(c: dict[str, Any]) -> tuple[str, str]:
    """(grouping key, the node named): the reason with paths, node names, numbers and shapes
    taken out, so the same mechanism on different models falls in one group."""
    line = reason_line(c)
    m = NODE_RE.search(line)
    node = next((g for g in (m.groups() if m else ()) if g), "")
    key = re.sub(r"node '[^']*'", "node …", line)
    key = re.sub(r"divergence: node \S+ op", "divergence: node … op", key)
    key = re.sub(r"(/[\w.+-]+)+\.onnx\b", "FILE", key)
    key = re.sub(r"/tmp/[\w./-]+", "TMP", key)
    key = re.sub(r"'/[^']*'", "'…'", key)            # other quoted node/tensor names (/model/...)
    key = re.sub(r"\b(onnx::|val_|_val_)\w+", "…", key)
    key = re.sub(r"\(\d+(, ?\d+)*,?\)|\[\d+(, ?\d+)*\]", "SHAPE", key)
    key = re.sub(r"-?\b\d+(\.\d+)?(e[-+]?\d+)?\b", "#", key)
    key = re.sub(r"\b(onnx|pytorch|tensorflow|tflite|openvino|coreml): ", "TARGET: ", key)  # one group across targets
    key = re.sub(r"Node \([^)]*\)", "Node (…)", key)
    key = re.sub(r"In Node, .*", "In Node, …", key)
    return f"{c['status']} {key}"[:300], node[:100]


def failures(rows: list[dict[str, Any]]) -> list[str]:
    """opbridge's failed cells grouped by mechanism, largest group first: count, the reason,
    one example node, and where (model/exporter→target)."""
    groups: dict[str, list[str]] = {}
    examples: dict[str, str] = {}
    for r in rows:
        for c in r["opbridge"]:
            if c["status"] in ("check_failed", "refused", "error"):
                key, node = mechanism(c)
                at = f"{r['model']}/{r['exporter']}→{c['target']}"
                groups.setdefault(key, []).append(at)
                if node and key not in examples:
                    examples[key] = f"{node} ({at})"
    lines = []
    for key, where in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        ex = examples.get(key)
        lines.append(f"×{len(where)} {key}" + (f"\n      e.g. node {ex}" if ex else "") + f"\n      on {', '.join(where)}")
    return lines


def by_code(rows: list[dict[str, Any]]) -> list[str]:
    """Failed cells per (status, reason code) and target: the coarse view of the mechanisms."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for r in rows:
        for c in r["opbridge"]:
            if c["status"] in ("check_failed", "refused", "error"):
                code = c.get("reason") or "?"
                code = code if c["status"] != "check_failed" else f"check_failed:{code or 'mismatch'}"
                counts.setdefault((c["status"], code), {}).setdefault(c["target"], 0)
                counts[(c["status"], code)][c["target"]] += 1
    return [f"×{sum(v.values()):3d} {st:12s} {code[:60]:60s} " + ", ".join(f"{t} {n}" for t, n in sorted(v.items()))
            for (st, code), v in sorted(counts.items(), key=lambda kv: -sum(kv[1].values()))]


def agreement(rows: list[dict[str, Any]]) -> tuple[int, int, list[str]]:
    """(pairs compared, disagreements, lines): report's prediction vs convert's outcome per
    file and target. Convert crashed/timed out: not compared. A check mismatch counts as
    converted (report predicts convertibility, not numbers). The same code on a different
    node is listed after the disagreements, not counted as one."""
    n, bad, notes = 0, [], []
    for r in rows:
        rep = r.get("report") or {}
        for c in r["opbridge"]:
            p = rep.get(c["target"])
            if p is None or c["status"] == "error":
                continue
            n += 1
            conv_refused = c["status"] == "refused"
            at = f"{r['model']}/{r['exporter']}→{c['target']}"
            if p["status"] == "refused" and not conv_refused:
                bad.append(f"{at}: report refuses ({p.get('reason')} at {p.get('op')} node {p.get('node')!r}); convert {c['status']}")
            elif p["status"] == "ok" and conv_refused:
                bad.append(f"{at}: report ok; convert refused ({c.get('reason')}: {str(c.get('detail', ''))[:160]})")
            elif conv_refused and p.get("reason") != c.get("reason"):
                bad.append(f"{at}: both refuse, reasons differ: report {p.get('reason')} at {p.get('op')}, "
                           f"convert {c.get('reason')}")
            elif conv_refused and p.get("node") and mechanism(c)[1] and p["node"] != mechanism(c)[1]:
                notes.append(f"{at}: same reason {c.get('reason')}, different node: report {p['node']!r} "
                             f"({p.get('unsupported')} unsupported), convert {mechanism(c)[1]!r}")
    return n, len(bad), bad + notes


def report(rows: list[dict[str, Any]], notes: list[str], targets: list[str], peers: list[str]) -> dict[str, Any]:
    print(render(rows, targets, peers))
    print("\nok = converted and checked against onnxruntime on the original (max error shown); ok~ = structural "
          "check only; ✗chk = written, check mismatch; ✗code = refused (reason code); ERR = crash/timeout/internal; "
          "dyn = symbolic input dims kept (checked at each size of convert's check), fix = fixed to a size")
    tot = totals(rows, targets, peers)
    print("\nTotals (cells; pct_ok = converts and checks; seconds = read + emit per cell):")
    for k, v in tot.items():
        print(f"  {k:22s} " + ", ".join(f"{s} {x}" for s, x in v.items() if x not in (0, None) or s in ("ok", "cells", "pct_ok")))
    if peers:
        print("\nPeers (same files):")
        for ln in side_by_side(rows, peers):
            print("  " + ln)
    n, nbad, bad = agreement(rows)
    if n:
        print(f"\nreport vs convert: {n - nbad}/{n} agree" + (":" if bad else ""))
        for ln in bad:
            print("  " + ln)
    if notes:
        print("\nNotes:")
        for ln in notes:
            print("  " + ln)
    codes = by_code(rows)
    if codes:
        print("\nFailures by reason code (per target):")
        for ln in codes:
            print("  " + ln)
        print("\nFailures by mechanism:")
        for ln in failures(rows):
            print("  " + ln)
    return tot


def main(argv: list[str] | None = None) -> int:
    os.environ.update({k: v for k, v in QUIET_ENV.items() if k not in os.environ})
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated model names (default: every cached model)")
    ap.add_argument("--exporters", default=",".join(VARIANTS), help="variants (default: %(default)s)")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--peers", default="", help=f"peers to run too ({','.join(PEERS)}; default none)")
    ap.add_argument("--no-report", action="store_true", help="skip `report` (and the agreement table)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child process")
    ap.add_argument("--limit", type=int, help="first N models only")
    ap.add_argument("--json", help="write the per-cell records here (rewritten after every file)")
    ap.add_argument("--render", metavar="JSON", help="print the tables of earlier (even partial) --json runs "
                    "(comma-separated; a later file's rows replace an earlier one's); no run")
    a = ap.parse_args(argv)
    targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    peers = [p.strip() for p in a.peers.split(",") if p.strip()]
    if [p for p in peers if p not in PEERS]:
        ap.error(f"unknown peer(s); known: {', '.join(PEERS)}")
    exporters = [e.strip() for e in a.exporters.split(",") if e.strip()]
    if a.render:
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        notes: list[str] = []
        for path in a.render.split(","):
            done = json.loads(Path(path).read_text())
            for r in done["rows"]:
                merged[(r["model"], r["exporter"])] = r
            notes += [n for n in done.get("notes", []) if n not in notes]
        order = {n: i for i, n in enumerate(MODELS)}
        rows = sorted((r for r in merged.values() if r["exporter"] in exporters and (not a.only or r["model"] in a.only.split(","))),
                      key=lambda r: (order.get(r["model"], 999), VARIANTS.index(r["exporter"]) if r["exporter"] in VARIANTS else 9))
        shown = sorted({c["target"] for r in rows for c in r["opbridge"]}, key=lambda t: TARGETS.index(t) if t in TARGETS else 9)
        report(rows, notes, [t for t in targets if t in shown], [p for p in PEERS if any(p in r.get("peers", {}) for r in rows)])
        print(f"\n{len(rows)} files")
        return 0
    names = [n.strip() for n in a.only.split(",")] if a.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    names = names[:a.limit] if a.limit else names
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    t_start = time.perf_counter()
    for name in names:
        meta_path = CACHE / name / "meta.json"
        if not meta_path.exists():
            notes.append(f"{name}: not exported (python bench/zoo_models.py build --only {name})")
            continue
        meta = json.loads(meta_path.read_text())
        for ex in exporters:
            rec = meta.get("exports", {}).get(ex)
            src = CACHE / name / f"{ex}.onnx"
            if rec is None:
                notes.append(f"{name}/{ex}: not exported yet")
                continue
            if not rec.get("ok") or not src.exists():
                notes.append(f"{name}/{ex}: the exporter failed: {rec.get('error', '?')[:200]}")
                continue
            say(f"{name}/{ex}: opbridge → {','.join(targets)}")
            cells, pred = run_opbridge(name, ex, src, targets, a.timeout, not a.no_report)
            row: dict[str, Any] = {"model": name, "exporter": ex, "source": str(src), "opbridge": cells,
                                   "report": pred, "peers": {}}
            say(f"{name}/{ex}:   " + "  ".join(f"{c['target']} {zoo_cell(c)}" for c in cells))
            if peers:
                res = OUT / name / ex / "peers.json"
                res.unlink(missing_ok=True)
                inputs = str(src.parent / "inputs.npz") if not ex.endswith("-dyn") else ""
                # each peer gets --timeout seconds; the child all of them
                rc, last = child(["--_peers", str(src), inputs, ",".join(peers), str(res), str(a.timeout)],
                                 a.timeout * len(peers) + 60)
                row["peers"].update(peer_cells(res, peers, rc, last))
                say(f"{name}/{ex}:   " + "  ".join(f"{p} {zoo_cell(row['peers'][p])}" for p in peers))
            rows.append(row)
            if a.json:
                Path(a.json).write_text(json.dumps({"rows": rows, "notes": notes, "partial": True}, indent=1, default=str))
    tot = report(rows, notes, targets, peers)
    say(f"done in {time.perf_counter() - t_start:.0f} s")
    if a.json:
        n, nbad, bad = agreement(rows)
        Path(a.json).write_text(json.dumps({"rows": rows, "totals": tot, "notes": notes, "report_agreement":
                                            {"pairs": n, "disagree": nbad, "lines": bad}, "partial": False},
                                           indent=1, default=str))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--_opbridge"]:
        opbridge_worker(*sys.argv[2:9])
    elif sys.argv[1:2] == ["--_peers"]:
        peers_worker(*sys.argv[2:7])
    else:
        sys.exit(main())
