"""Real TFLite and Keras models nobody here wrote (issue 13): Keras applications with random
weights and Keras attention / recurrent models (``bench/keras_zoo.py``), each as ``.keras``,
SavedModel, TensorFlow's own float32 ``.tflite`` and full-int8 ``.tflite``, converted by
opbridge to onnx, pytorch, openvino and coreml with ``--check`` against the source runtime
(TensorFlow for Keras/SavedModel, the TFLite interpreter for .tflite), side by side with the
peers on the same files: tf2onnx (``--tflite`` and ``--saved-model``), tflite2onnx, and
OpenVINO reading the TFLite file (and the SavedModel) directly.

Every opbridge conversion and every peer file runs in a child process with a timeout, so a
crash or a hang is one cell (``error``), never the bench. Cells: ``ok`` (checked against the
source runtime), ``ok~`` (Core ML: written and structurally checked only, Core ML does not
run on Linux; counted apart), ``✗chk`` (written, the check found a mismatch: max error
shown), ``refused`` (a one-line reason: unmapped op…), ``error`` (a crash, a timeout, an
internal error). Peers are judged on the same inputs against the same source runtime with
the check's default tolerance (rtol 1e-3, atol 1e-5; an int8 output ±1 step; a float output
of a quantized model atol 1% of its range).

    python bench/keras_models.py [--only resnet50,lstm] [--formats keras,savedmodel,tflite,int8]
                                 [--targets onnx,...] [--peers tf2onnx,tflite2onnx,openvino]
                                 [--json out.json] [--timeout 900]

Peer venvs: ``bench/setup_peer_tf2onnx.sh``, ``bench/setup_peer_tflite2onnx.sh``; a peer
whose venv is missing is reported as such, per file.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR",
             "PYTHONWARNINGS": "ignore", "KERAS_BACKEND": "tensorflow", "OPENVINO_TELEMETRY_DISABLE": "1"}
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from keras_zoo import CACHE, FORMATS, MODELS  # noqa: E402
from keras_peers import PEERS, peer_applies, run_peers_worker  # noqa: E402

TARGETS = ("onnx", "pytorch", "openvino", "coreml")
OUT = CACHE / "out"


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def child(args: list[str], timeout: float, script: str = __file__,
          env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run ``script`` (this file) as a child (``args``, the quiet ``env``); (return code or None
    on timeout, last stderr line without native log lines)."""
    try:
        proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(QUIET_ENV if env is None else env)}, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("W0000", "I0000", "WARNING: All"))]
    return proc.returncode, (lines[-1] if lines else "")


def peer_cells(result: Path, peers: list[str], rc: int | None, last: str) -> dict[str, dict[str, Any]]:
    """Each peer's cell from a peers child's result file; a peer the child did not report is an
    error cell (crash or timeout, with the child's last stderr line)."""
    got = json.loads(result.read_text()) if result.exists() else {}
    return {p: got.get(p) or {"status": "error", "reason": "crash" if rc else "timeout",
                              "detail": last if rc is None else f"worker exited {rc}: {last}"} for p in peers}


# --- opbridge worker (child process) ---------------------------------------------------------

def opbridge_worker(src: str, outdir: str, targets: str, result: str) -> None:
    """``convert`` with the check, in this child; the framework the frontend reads with is
    imported before the clock starts (as the peers' times exclude their imports)."""
    import importlib

    for mod in (("ai_edge_litert.interpreter", "ai_edge_litert.schema_py_generated") if src.endswith(".tflite")
                else ("tensorflow", "keras")):
        importlib.import_module(mod)
    from translator.run.convert import convert

    stamps: list[tuple[float, str]] = []
    t0 = time.perf_counter()

    def progress(msg: str) -> None:
        stamps.append((time.perf_counter() - t0, msg))

    rec: dict[str, Any] = {}
    try:
        rec = convert(src, targets, outdir, check=True, progress=progress)
    except Exception as exc:  # noqa: BLE001 - the refusal is the cell's answer
        from translator.table.errors import OpbridgeError

        code = exc.code if isinstance(exc, OpbridgeError) else f"internal_error:{type(exc).__name__}"
        rec = {"refused": {"code": code, "detail": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}}
    rec["stamps"] = stamps
    rec["total_seconds"] = time.perf_counter() - t0
    Path(result).write_text(json.dumps(rec, default=str))


def read_seconds(stamps: list[list[Any]]) -> float | None:
    for t, msg in stamps:
        if msg.startswith("read ") and " nodes in " in msg:
            return float(t)
    return None


def summarize_target(rec: dict[str, Any], t: dict[str, Any], stamps: list[list[Any]]) -> dict[str, Any]:
    """One opbridge cell from the convert record of target ``t``."""
    name = t["target"]
    cell: dict[str, Any] = {"target": name}
    emit = next((float(m.split("(")[-1].split(" s)")[0]) for _, m in stamps
                 if m.startswith(f"{name}: emitted (")), None)
    rs = read_seconds(stamps)
    cell["seconds"] = round(rs + emit, 3) if rs is not None and emit is not None else None
    chk = t.get("check") or {}
    errs = [o["vs_source"]["max_abs"] for o in chk.get("outputs", []) if o.get("vs_source")]
    cell["max_err"] = max(errs) if errs else None
    refs = [o["max_abs"] for o in chk.get("outputs", []) if o.get("max_abs") is not None]
    cell["max_err_ref"] = max(refs) if refs else None
    st = t["status"]
    if st == "ok":
        cell["status"] = "structural" if t.get("check_note", "").startswith("structural_only") else "ok"
        if cell["status"] == "ok" and not errs:
            cell["status"], cell["reason"] = "error", f"no comparison with the source runtime ({chk.get('source', '')})"
    elif st == "check_failed":
        cell["status"] = "check_failed"
        cell["reason"] = chk.get("reason", "")
        cell["detail"] = chk.get("detail", "")
        if chk.get("first_divergence"):
            cell["first_divergence"] = chk["first_divergence"]
    else:
        reason = t.get("reason", "")
        cell["status"] = "error" if (reason.startswith("internal_error") or st == "check_error") else "refused"
        cell["reason"], cell["detail"] = reason, t.get("detail", "")
    return cell


def run_opbridge(model: str, fmt: str, src: Path, targets: list[str], timeout: float) -> list[dict[str, Any]]:
    outdir = OUT / model / fmt
    outdir.mkdir(parents=True, exist_ok=True)
    result = outdir / "result.json"
    result.unlink(missing_ok=True)
    t0 = time.perf_counter()
    rc, last = child(["--_opbridge", str(src), str(outdir / "artifacts"), ",".join(targets), str(result)], timeout)
    wall = time.perf_counter() - t0
    if not result.exists():
        why = last if rc is None else f"worker exited {rc}: {last}"
        return [{"target": t, "status": "error", "reason": "crash" if rc else "timeout", "detail": why} for t in targets]
    rec = json.loads(result.read_text())
    if "refused" in rec:
        r = rec["refused"]
        st = "error" if r["code"].startswith("internal_error") else "refused"
        return [{"target": t, "status": st, "reason": r["code"], "detail": r["detail"], "wall": wall} for t in targets]
    cells = [summarize_target(rec, t, rec["stamps"]) for t in rec["targets"]]
    for c in cells:
        c["wall"], c["nodes"] = round(wall, 1), rec.get("nodes")
    return cells


# --- the table ---------------------------------------------------------------------------------

def fmt_err(x: Any) -> str:
    return "" if x is None else f" {x:.1e}"


def cell_text(c: dict[str, Any] | None) -> str:
    if c is None:
        return "—"
    st = c["status"]
    if st == "ok":
        return "ok" + fmt_err(c.get("max_err"))
    if st == "structural":
        return "ok~"
    if st == "check_failed":
        return "✗chk" + fmt_err(c.get("max_err"))
    if st == "n/a":
        return "—"
    return st


def reason_line(c: dict[str, Any]) -> str:
    bits = [c.get("reason", ""), c.get("detail", "")]
    fd = c.get("first_divergence")
    if fd:
        bits.append(f"first divergence: node {fd.get('node')} op {fd.get('op')} max_abs {fd.get('max_abs')}"
                    if "node" in fd else str(fd))
    return ": ".join(b for b in bits if b)


def render(rows: list[dict[str, Any]], targets: list[str], peers: list[str]) -> str:
    cols = [f"ob→{t}" for t in targets] + peers
    head = ["model", "format"] + cols
    table = [head]
    for r in rows:
        cells = {f"ob→{c['target']}": c for c in r["opbridge"]}
        cells.update({p: r["peers"].get(p) for p in peers})
        fmtname = r["format"] + ("(" + r["int8_mode"] + ")" if r["format"] == "int8" and r.get("int8_mode") not in
                                 (None, "int8") else "")
        table.append([r["model"], fmtname] + [cell_text(cells.get(k)) for k in cols])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def totals(rows: list[dict[str, Any]], targets: list[str], peers: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in targets:
        cs = [c for r in rows for c in r["opbridge"] if c["target"] == t]
        out[f"opbridge→{t}"] = {s: sum(c["status"] == s for c in cs)
                                for s in ("ok", "structural", "check_failed", "refused", "error")} | {"files": len(cs)}
    for p in peers:
        cs = [r["peers"][p] for r in rows if r["peers"].get(p) and r["peers"][p]["status"] != "n/a"]
        out[p] = {s: sum(c["status"] == s for c in cs) for s in ("ok", "check_failed", "refused", "error")} | {"files": len(cs)}
    return out


def side_by_side(rows: list[dict[str, Any]]) -> list[str]:
    """opbridge → onnx vs tf2onnx / tflite2onnx, opbridge → openvino vs OpenVINO's own reader,
    on the files each peer takes: success counts, time ratio (peer/ours, geometric mean over
    the files both converted) and the worst max error of each side."""
    import math

    pairs = [("onnx", "tf2onnx"), ("onnx", "tflite2onnx"), ("openvino", "openvino")]
    lines = []
    for target, peer in pairs:
        files = [r for r in rows if r["peers"].get(peer) and r["peers"][peer]["status"] != "n/a"]
        if not files:
            continue
        ours = [next((c for c in r["opbridge"] if c["target"] == target), None) for r in files]
        theirs = [r["peers"][peer] for r in files]
        n_ours = sum(1 for c in ours if c and c["status"] == "ok")
        n_theirs = sum(1 for c in theirs if c["status"] == "ok")
        ratios = [p["seconds"] / o["seconds"] for o, p in zip(ours, theirs)
                  if o and o.get("seconds") and p.get("seconds") and o["status"] in ("ok", "check_failed")
                  and p["status"] in ("ok", "check_failed")]
        gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None
        e_ours = max((c["max_err"] for c in ours if c and c["status"] == "ok" and c.get("max_err") is not None), default=None)
        e_theirs = max((c["max_err"] for c in theirs if c["status"] == "ok" and c.get("max_err") is not None), default=None)
        lines.append(f"opbridge→{target} vs {peer} on {len(files)} files: ok {n_ours} vs {n_theirs}; "
                     f"time peer/ours {'n/a' if gm is None else f'{gm:.2f}x'} (geo-mean over {len(ratios)}); "
                     f"worst max error of the passes {fmt_err(e_ours).strip() or 'n/a'} vs {fmt_err(e_theirs).strip() or 'n/a'}")
    return lines


def mechanism(c: dict[str, Any]) -> tuple[str, str]:
    """(grouping key, an example): the reason with the file path and node name taken out."""
    import re

    line = reason_line(c)
    node = re.search(r"node '([^']*)'", line)
    key = re.sub(r"node '[^']*'", "node …", line)
    key = re.sub(r"(/[\w.+-]+)+\.(tflite|keras)\b|(/[\w.+-]+)+/saved_model\b", "FILE", key)
    key = re.sub(r"\b\d+\.\d+(e[-+]?\d+)?\b", "#", key)
    key = re.sub(r"divergence: node \S+ op", "divergence: node … op", key)  # the example keeps the name
    key = re.sub(r"Node \([^)]*\)", "Node (…)", key)
    key = re.sub(r"/tmp/[\w.-]+/", "TMP/", key)
    key = re.sub(r"In Node, .*", "In Node, …", key)
    key = re.sub(r"(cannot delete op) \S+ with output 0: \S+", r"\1 …", key)
    key = re.sub(r"bad number -?\d+", "bad number #", key)
    if not node:
        node = re.search(r"divergence: node (\S+) op", line) or re.search(r"Node \(([^)]*)\)", line)
    return f"{c['status']} {key}", (node.group(1)[:100] if node else "")


def failures(rows: list[dict[str, Any]]) -> list[str]:
    """Failures grouped by mechanism: (side, status, reason) → the model/format(/target) list."""
    groups: dict[tuple[str, str], list[str]] = {}
    examples: dict[tuple[str, str], str] = {}
    for r in rows:
        where = f"{r['model']}/{r['format']}"
        cells = [("opbridge", c, f"{where}→{c['target']}") for c in r["opbridge"]]
        cells += [(p, c, where) for p, c in r["peers"].items() if c]
        for side, c, at in cells:
            if c["status"] in ("check_failed", "refused", "error"):
                key, ex = mechanism(c)
                groups.setdefault((side, key), []).append(at)
                if ex and (side, key) not in examples:
                    examples[(side, key)] = f"{ex} ({at})"
    lines = []
    for (side, why), where in sorted(groups.items(), key=lambda kv: (kv[0][0] != "opbridge", -len(kv[1]))):
        ex = examples.get((side, why))
        lines.append(f"[{side}] ×{len(where)} {why[:400]}" + (f"\n      e.g. node {ex}" if ex else "")
                     + f"\n      on {', '.join(where)}")
    return lines


# --- main ------------------------------------------------------------------------------------------

def ensure_built(name: str, timeout: float) -> dict[str, Any] | None:
    meta = CACHE / name / "meta.json"
    if not meta.exists():
        say(f"{name}: building (keras_zoo)")
        try:
            subprocess.run([sys.executable, str(HERE / "keras_zoo.py"), name], capture_output=True, text=True,
                           timeout=timeout, env={**os.environ, **QUIET_ENV}, cwd=str(ROOT))
        except subprocess.TimeoutExpired:
            pass
    return json.loads(meta.read_text()) if meta.exists() else None


def report(rows: list[dict[str, Any]], notes: list[str], targets: list[str], peers: list[str]) -> dict[str, Any]:
    print(render(rows, targets, peers))
    print("\nok = checked against the source runtime (max error shown); ok~ = Core ML written and structurally "
          "checked only (no Core ML runtime on Linux); ✗chk = written, check mismatch; — = not applicable")
    tot = totals(rows, targets, peers)
    print("\nTotals per target / peer:")
    for k, v in tot.items():
        print(f"  {k:22s} " + ", ".join(f"{s} {n}" for s, n in v.items()))
    print("\nSide by side (same files):")
    for ln in side_by_side(rows):
        print("  " + ln)
    if notes:
        print("\nSource notes:")
        for n in notes:
            print("  " + n)
    fails = failures(rows)
    if fails:
        print("\nFailures by mechanism:")
        for ln in fails:
            print("  " + ln)
    return tot


def main(argv: list[str] | None = None) -> int:
    # quiet frameworks in this process (not at import: a test importing the bench keeps its env);
    # the runtimes keep their default settings (oneDNN on), as a user runs them
    os.environ.update({k: v for k, v in QUIET_ENV.items() if k not in os.environ})
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated model names (default: all): " + ",".join(MODELS))
    ap.add_argument("--formats", default=",".join(FORMATS), help="source formats (default: %(default)s)")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--peers", default=",".join(PEERS), help="peers (default: %(default)s; '' for none)")
    ap.add_argument("--no-opbridge", action="store_true", help="peers only")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child process")
    ap.add_argument("--order", choices=("model", "format"), default="model",
                    help="model-major (default) or format-major: every model's first format, then the next")
    ap.add_argument("--limit", type=int, help="first N models only")
    ap.add_argument("--json", help="write the per-cell records here (rewritten after every file)")
    ap.add_argument("--render", metavar="JSON", help="print the tables of earlier (even partial) --json runs (comma-separated); no run")
    a = ap.parse_args(argv)
    targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    peers = [p.strip() for p in a.peers.split(",") if p.strip()]
    if a.render:
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        notes, partial = [], []
        for path in a.render.split(","):  # several runs: a later run's file replaces an earlier one's
            done = json.loads(Path(path).read_text())
            for r in done["rows"]:  # a peers-only (--no-opbridge) or opbridge-only run keeps the other side
                old = merged.get((r["model"], r["format"]))
                if old is not None and not r["opbridge"]:
                    r["opbridge"] = old["opbridge"]
                if old is not None and all(c.get("status") == "n/a" for c in r["peers"].values()):
                    r["peers"] = old["peers"]
                merged[(r["model"], r["format"])] = r
            notes += [n for n in done.get("notes", []) if n not in notes]
            partial += [path] if done.get("partial") else []
        order = {n: i for i, n in enumerate(MODELS)}
        rows = sorted(merged.values(), key=lambda r: (order.get(r["model"], 99), list(FORMATS).index(r["format"])))
        report(rows, notes, targets, peers)
        print(f"\n{len(rows)} files" + (f"; partial runs: {', '.join(partial)}" if partial else ""))
        return 0
    names = [n.strip() for n in a.only.split(",")] if a.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    names = names[:a.limit] if a.limit else names
    formats = [f.strip() for f in a.formats.split(",") if f.strip()]
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    t_start = time.perf_counter()
    metas: dict[str, dict[str, Any] | None] = {}
    pairs = ([(n, f) for f in formats for n in names] if a.order == "format" else
             [(n, f) for n in names for f in formats])
    for name, fmt in pairs:
        if name not in metas:  # built when first needed (another builder may hold its lock)
            meta = metas[name] = ensure_built(name, a.timeout)
            if meta is None:
                notes.append(f"{name}: could not be built (see python bench/keras_zoo.py {name})")
            elif meta.get("float32_error"):
                notes.append(f"{name}: TF's converter refused float32: {meta['float32_error']}")
            if meta is not None and meta.get("int8_mode") != "int8":
                notes.append(f"{name}: full int8 (int8 I/O) not possible: {'; '.join(meta['int8_fallback_reasons'])}"
                             f" → int8 file is {meta.get('int8_mode') or 'absent'}")
        meta = metas[name]
        if meta is not None:
            src = CACHE / name / FORMATS[fmt]
            if not src.exists():
                continue
            row: dict[str, Any] = {"model": name, "format": fmt, "source": str(src), "int8_mode": meta.get("int8_mode"),
                                   "opbridge": [], "peers": {}}
            if not a.no_opbridge:
                say(f"{name}/{fmt}: opbridge → {','.join(targets)}")
                row["opbridge"] = run_opbridge(name, fmt, src, targets, a.timeout)
                say(f"{name}/{fmt}:   " + "  ".join(f"{c['target']} {cell_text(c)}" for c in row["opbridge"]))
            todo = [p for p in peers if peer_applies(p, fmt)]
            row["peers"] = {p: {"status": "n/a"} for p in peers if p not in todo}
            if todo:
                say(f"{name}/{fmt}: peers {','.join(todo)}")
                res = OUT / name / fmt / "peers.json"
                res.parent.mkdir(parents=True, exist_ok=True)
                res.unlink(missing_ok=True)
                rc, last = child(["--_peers", str(src), fmt, ",".join(todo), str(res)], a.timeout * 2)
                row["peers"].update(peer_cells(res, todo, rc, last))
                say(f"{name}/{fmt}:   " + "  ".join(f"{p} {cell_text(row['peers'][p])}" for p in todo))
            rows.append(row)
            if a.json:
                Path(a.json).write_text(json.dumps({"rows": rows, "notes": notes, "partial": True}, indent=1, default=str))
    tot = report(rows, notes, targets, peers)
    say(f"done in {time.perf_counter() - t_start:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "totals": tot, "side_by_side": side_by_side(rows),
                                            "notes": notes, "partial": False}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--_opbridge"]:
        opbridge_worker(*sys.argv[2:6])
    elif sys.argv[1:2] == ["--_peers"]:
        run_peers_worker(*sys.argv[2:6])
    else:
        sys.exit(main())
