"""Real PyTorch modules → every target, checked against eager PyTorch, peers side by side.

The suite of bench/peers.py (ResNet-50, MobileNetV3-Large, EfficientNet-B0, a small ViT, a
``torch.nn.TransformerEncoder``, GPT-2 blocks; ``--only resnet18,mobilenet_v3_small`` adds two)
as ``nn.Module``s with fixed seeds (bench/torch_zoo_defs.py: torchvision's architectures in
plain torch, torchvision does not import beside the project's CPU torch), not ONNX files.

opbridge, per model: ``translator.run.convert.convert(module, TARGETS, out, example_inputs=(x,),
check=True, inputs=...)`` in this process: the status of every target and the check's error
against eager PyTorch (``vs_source``). Then, for the figures: the frontend (``torch.export`` →
IR) timed once, each target compiled again in memory (conversion time = frontend + compile,
saving excluded, as for the peers), the written artifact read back by the target's own loader
and run on the example input (max error against eager, latency: median of N calls after a
warm-up, all of one model's runtimes called alternately so load from other processes falls on
all alike). Core ML has no runtime on Linux: its check evaluates the MIL program when
coremltools can (``ok``), else it is ``structural`` (built and serialized, no number), counted
apart; no latency.

Peers on the same modules, same inputs:

| target | peer | where |
|---|---|---|
| tflite | litert-torch 0.10.0 (formerly ai-edge-torch) | bench/.venv-litert-torch (bench/setup_peer_litert_torch.sh), subprocess; ours timed there too, same LiteRT build, alternately |
| coreml | coremltools ``ct.convert(torch.export.export(...))`` (mlprogram) | this process; structural: converted or not, time |
| openvino | ``openvino.convert_model(module, example_input=x)`` | this process; both compiled with the same CPU config and timed alternately |

Ratios: conversion time peer/ours (> 1: ours is faster), latency ours/peer (< 1: ours is faster).

    python bench/torch_modules.py [--only a,b] [--targets onnx,tflite,...] [-n 10] [--threads 1]
                                  [--no-peers] [--json out.json] [-v]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))
from peers import timing  # noqa: E402 - bench/peers.py's timing (the package shadows its name)

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")
PEER_OF = {"tflite": "litert-torch", "coreml": "coremltools", "openvino": "ov.convert_model"}
LITERT_VENV = BENCH / ".venv-litert-torch"
LITERT_RUNNER = BENCH / "peers" / "_litert_torch_runner.py"
#: reasons that are the converter's own bug, not a refusal with a reason
ERROR_REASONS = ("internal_error", "runtime_error")


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def first_line(exc: BaseException) -> str:
    s = str(exc).strip()
    return (s.splitlines()[0] if s else type(exc).__name__)[:300]


def max_err(expected: list[np.ndarray], got: list[Any]) -> float | None:
    """max |got - expected| over the outputs; None when the shapes disagree."""
    if len(got) != len(expected):
        return None
    worst = 0.0
    for e, g in zip(expected, got):
        g = np.asarray(g)
        if g.shape != e.shape:
            return None
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64)))) if e.size else 0.0)
    return worst


# ---------------------------------------------------------------- opbridge

def classify_target(rec: dict[str, Any]) -> dict[str, Any]:
    """convert()'s record of one target → the bench's cell."""
    out: dict[str, Any] = {"status": rec["status"]}
    check = rec.get("check") or {}
    vs = [o["vs_source"]["max_abs"] for o in check.get("outputs", []) if o.get("vs_source")]
    if vs and all(v is not None for v in vs):
        out["vs_source"] = max(vs)
    ref = [o["max_abs"] for o in check.get("outputs", []) if o.get("max_abs") is not None]
    if ref:
        out["vs_reference"] = max(ref)
    if rec["status"] == "ok" and rec.get("check_note", "").startswith("structural_only"):
        out["status"] = "structural"
        out["detail"] = rec["check_note"]
    elif rec["status"] == "check_failed":
        out["detail"] = check.get("detail", "") or "; ".join(
            f"{o['name']}: {o.get('reason') or o.get('verdict')}" for o in check.get("outputs", []) if not o.get("ok"))
        out["check_status"] = check.get("status")
    elif rec["status"] in ("failed", "check_error"):
        reason = rec.get("reason", "")
        out["status"] = "error" if (reason in ERROR_REASONS or rec["status"] == "check_error") else "refused"
        out["reason"], out["detail"] = reason, rec.get("detail", "")
    for key in ("transposes", "warnings", "output"):
        if key in rec:
            out[key] = rec[key]
    return out


def run_ours(name: str, module: Any, x: Any, feeds: dict[str, np.ndarray], targets: list[str],
             out_dir: Path) -> tuple[dict[str, dict[str, Any]], float]:
    """convert() with the check → per-target cells; the whole call's seconds."""
    from translator.run.convert import convert
    from translator.table.errors import OpbridgeError

    t = time.perf_counter()
    try:
        res = convert(module, ",".join(targets), str(out_dir), example_inputs=(x,), check=True, inputs=feeds,
                      progress=lambda s: say(f"  [{name}] {s}"))
    except Exception as exc:  # noqa: BLE001 - the model could not be read: every target gets the reason
        code = exc.code if isinstance(exc, OpbridgeError) else "internal_error"
        cell = {"status": "error" if code in ERROR_REASONS else "refused", "reason": code,
                "detail": first_line(exc), "stage": "frontend"}
        return {tg: dict(cell) for tg in targets}, time.perf_counter() - t
    return {r["target"]: classify_target(r) for r in res["targets"]}, time.perf_counter() - t


def prepare_ours(module: Any, x: Any, cells: dict[str, dict[str, Any]]) -> tuple[float | None, dict[str, Any]]:
    """Frontend timed once; each written target compiled again in memory (timed) and its written
    file read back by the target's loader. → (frontend_s, {target: loaded artifact})."""
    from translator.run.check import model_loader
    from translator.compile.pipeline import compile
    from translator.compile.target import get

    written = [t for t, c in cells.items() if c.get("output")]
    if not written:
        return None, {}
    t = time.perf_counter()
    try:
        build = model_loader(module, example_inputs=(x,))
    except Exception as exc:  # noqa: BLE001 - convert() read it: should not happen, recorded
        for tg in written:
            cells[tg]["timing_error"] = first_line(exc)
        return None, {}
    frontend_s = time.perf_counter() - t
    loaded = {}
    for tg in written:
        target = get(tg)
        try:
            t = time.perf_counter()
            art = compile(build(), target).artifact
            cells[tg]["compile_s"] = time.perf_counter() - t
            cells[tg]["convert_s"] = frontend_s + cells[tg]["compile_s"]
            loaded[tg] = target.load(Path(cells[tg]["output"]), art) if target.load is not None else art
        except Exception as exc:  # noqa: BLE001
            cells[tg]["timing_error"] = first_line(exc)
    return frontend_s, loaded


# ---------------------------------------------------------------- peers

def peer_litert(name: str, work: Path, n: int, threads: int, ours_tflite: Any, feeds: dict[str, np.ndarray],
                eager: list[np.ndarray]) -> dict[str, Any]:
    """litert-torch in its venv; ours (when written) timed there alongside."""
    py = LITERT_VENV / "bin" / "python"
    if not py.exists():
        return {"ok": False, "error": "bench/.venv-litert-torch missing (run bench/setup_peer_litert_torch.sh)"}
    work.mkdir(parents=True, exist_ok=True)
    cmd = [str(py), str(LITERT_RUNNER), name, str(work), str(n), "--threads", str(threads)]
    if ours_tflite is not None:
        from emitters.tensorflow import feed_arrays

        (work / "ours.tflite").write_bytes(ours_tflite.tflite)
        np.savez(work / "ours_inputs.npz", **feed_arrays(ours_tflite, feeds))
        cmd += ["--ours", str(work / "ours.tflite"), "--ours-inputs", str(work / "ours_inputs.npz")]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": "timed out after 1800 s"}
    lines = [ln for ln in p.stdout.strip().splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        errs = [ln for ln in p.stderr.strip().splitlines() if ln.strip() and not ln.startswith((" ", "W", "I0"))]
        return {"ok": False, "error": ((errs or p.stderr.strip().splitlines() or ["?"])[-1])[:300]}
    rec = json.loads(lines[-1])
    rec["ok"] = True
    with np.load(work / "outputs.npz", allow_pickle=False) as z:
        rec["max_err"] = max_err(eager, [z[k] for k in sorted(z.files, key=lambda s: int(s.split("_")[1]))])
    with np.load(work / "eager.npz", allow_pickle=False) as z:
        rec["same_module"] = max_err(eager, [z["arr_0"]]) == 0.0
    return rec


def peer_coreml(module: Any, x: Any) -> dict[str, Any]:
    """coremltools' PyTorch frontend on ``torch.export`` (its documented path); TorchScript
    tracing tried when that fails (marked ``via``). Structural: converted or not."""
    import coremltools as ct
    import torch

    rec: dict[str, Any] = {}
    t = time.perf_counter()
    try:
        ep = torch.export.export(module, (x,)).run_decompositions({})  # coremltools takes the ATen dialect
        ct.convert(ep, convert_to="mlprogram", skip_model_load=True)
        return {"ok": True, "convert_s": time.perf_counter() - t, "via": "torch.export"}
    except Exception as exc:  # noqa: BLE001 - a peer's failure is a result
        rec["export_error"] = first_line(exc)
    t = time.perf_counter()
    try:
        traced = torch.jit.trace(module, (x,), check_trace=False)
        ct.convert(traced, inputs=[ct.TensorType(shape=tuple(x.shape), dtype=x.numpy().dtype)],
                   convert_to="mlprogram", skip_model_load=True)
        rec.update(ok=True, convert_s=time.perf_counter() - t, via="torch.jit.trace")
    except Exception as exc:  # noqa: BLE001
        rec.update(ok=False, error=f"torch.export: {rec['export_error']}; jit.trace: {first_line(exc)}")
    return rec


def peer_openvino(module: Any, x: Any) -> tuple[dict[str, Any], Any]:
    """``ov.convert_model(module, example_input=x)`` (its TorchScript path); when that fails,
    ``ov.convert_model`` on the ``torch.export`` program (marked ``via``)."""
    from emitters.openvino.runtime import openvino

    ov = openvino()  # telemetry off (see runtime.openvino)
    import torch

    t = time.perf_counter()
    try:
        model = ov.convert_model(module, example_input=x)
        return {"ok": True, "convert_s": time.perf_counter() - t}, model
    except Exception as exc:  # noqa: BLE001
        first = first_line(exc)
    t = time.perf_counter()
    try:
        model = ov.convert_model(torch.export.export(module, (x,)))
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": f"module: {first}; torch.export: {first_line(exc)}"}, None
    return {"ok": True, "convert_s": time.perf_counter() - t, "via": "torch.export",
            "module_error": first}, model


# ---------------------------------------------------------------- one model

def _ort_call(path: str, feeds: dict[str, np.ndarray], threads: int):
    import onnxruntime as ort

    from translator.ir.ort_run import session_options

    so = session_options()
    so.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feed = {i.name: feeds[i.name] for i in sess.get_inputs()}
    return lambda: sess.run(None, feed)


def _tf_call(path: str, art: Any, feeds: dict[str, np.ndarray]):
    """The SavedModel's ``serving_default`` on tensors made once; outputs back in the source
    layout and order by the emitter's own ``restore_outputs``."""
    import tensorflow as tf

    from emitters.tensorflow.runtime import feed_arrays, load_saved, restore_outputs

    sig = load_saved(path)
    args = {k: tf.constant(v) for k, v in feed_arrays(art, feeds).items()}

    def call():
        res = sig(**args)
        return restore_outputs(art, [res[p.key].numpy() for p in art.outputs])

    return call


def bench_model(name: str, targets: list[str], n: int, threads: int, peers: bool, tmp: Path) -> dict[str, Any]:
    import torch

    from torch_zoo_defs import build
    from translator.frontends.pytorch import forward_names

    torch.set_num_threads(threads)
    module, x = build(name)
    with torch.no_grad():
        eager = [module(x).numpy()]
    feeds = {forward_names(module)[0]: x.numpy()}
    work = tmp / name
    say(f"[{name}] opbridge: convert to {','.join(targets)} with the check")
    cells, convert_all_s = run_ours(name, module, x, feeds, targets, work / "ours")
    frontend_s, loaded = prepare_ours(module, x, cells)
    row: dict[str, Any] = {"model": name, "input": list(x.shape), "frontend_s": frontend_s,
                           "convert_call_s": convert_all_s, "targets": cells, "peers": {}}
    from emitters.openvino import CPU_CONFIG, core, infer
    from translator.compile.target import get

    config = dict(CPU_CONFIG, INFERENCE_NUM_THREADS=threads)
    calls: dict[str, Any] = {}

    def eager_call():
        with torch.no_grad():
            return [module(x).numpy()]

    calls["eager"] = eager_call
    for tg, art in loaded.items():
        if tg in ("coreml", "tflite"):  # coreml: no runtime here; tflite: timed beside the peer
            continue
        try:
            if tg == "onnx":  # one onnxruntime session on the written file (the target's run makes one per call)
                calls[tg] = _ort_call(cells[tg]["output"], feeds, threads)
            elif tg == "tensorflow":  # the written SavedModel's serving signature, called with ready tensors
                calls[tg] = _tf_call(cells[tg]["output"], art, feeds)
            elif tg == "openvino":
                cm = core().compile_model(art.model, "CPU", config)
                req = cm.create_infer_request()
                vals = [np.asarray(feeds[nm]) for nm, _ in art.inputs]
                calls[tg] = (lambda cm=cm, req=req, vals=vals: infer(cm, vals, req))
            else:
                calls[tg] = (lambda f=get(tg).prepared(art): f(feeds))
            cells[tg]["max_err"] = max_err(eager, calls[tg]())
        except Exception as exc:  # noqa: BLE001
            cells[tg]["run_error"] = first_line(exc)
            calls.pop(tg, None)
    if peers and "openvino" in targets:
        say(f"[{name}] peer ov.convert_model")
        rec, model = peer_openvino(module, x)
        if model is not None:
            try:
                cm = core().compile_model(model, "CPU", config)
                req = cm.create_infer_request()
                calls["openvino_peer"] = (lambda cm=cm, req=req: infer(cm, [x.numpy()], req))
                rec["max_err"] = max_err(eager, calls["openvino_peer"]())
            except Exception as exc:  # noqa: BLE001
                rec.update(ok=False, error=f"compile/run: {first_line(exc)}")
        row["peers"]["openvino"] = rec
    if peers and "coreml" in targets:
        say(f"[{name}] peer coremltools")
        row["peers"]["coreml"] = peer_coreml(module, x)
    say(f"[{name}] latency: {', '.join(calls)} ({n} runs each, alternating)")
    lat = timing().timed(calls, n)
    row["eager_latency_s"] = lat.pop("eager")
    if "openvino_peer" in lat:
        row["peers"]["openvino"]["latency_s"] = lat.pop("openvino_peer")
    for tg, s in lat.items():
        cells[tg]["latency_s"] = s
    if "tflite" in targets:
        art = loaded.get("tflite")
        if peers:
            say(f"[{name}] peer litert-torch (subprocess)")
            rec = peer_litert(name, work / "litert", n, threads, art, feeds, eager)
            if "ours_latency_s" in rec:
                cells["tflite"]["latency_s"] = rec.pop("ours_latency_s")
            rec.pop("ours_output_keys", None)
            row["peers"]["tflite"] = rec
        if art is not None:
            try:
                call = get("tflite").prepared(art)
                cells["tflite"]["max_err"] = max_err(eager, call(feeds))
                if "latency_s" not in cells["tflite"]:  # no peer run: ours alone, in this process
                    cells["tflite"]["latency_s"] = timing().timed({"t": lambda: call(feeds)}, n)["t"]
            except Exception as exc:  # noqa: BLE001
                cells["tflite"]["run_error"] = first_line(exc)
    scale = float(max(np.max(np.abs(e)) for e in eager))
    row["eager_max_abs"] = scale
    return row


# ---------------------------------------------------------------- report

def fmt_cell(c: dict[str, Any]) -> str:
    st = c["status"]
    err = c.get("vs_source", c.get("max_err"))
    if st == "ok":
        return f"ok {err:.0e}" if err is not None else "ok"
    if st == "structural":
        return "struct"
    if st == "check_failed":
        return f"FAIL {err:.1e}" if err is not None else "FAIL"
    return f"{'refused' if st == 'refused' else 'ERROR'}:{c.get('reason', '?')}"


def mechanism(c: dict[str, Any]) -> list[str]:
    """Failure mechanism keys of one cell, for grouping (an unmapped ATen op each)."""
    detail = c.get("detail", "")
    m = re.search(r"ATen op\(s\) with no IR op in optable\.yaml: ([^\n]*?)(?: \(| \[|$)", detail)
    if m:
        return [f"unmapped ATen op {op.strip()}" for op in m.group(1).split(",") if op.strip()]
    if c["status"] == "check_failed":
        return [f"check failed: {re.sub(r'[0-9.e+-]{3,}', 'N', detail)[:140]}"]
    return [f"{c.get('reason', c['status'])}: {re.sub(r'[0-9]+', 'N', detail)[:160]}"]


def ms(s: float | None) -> str:
    return f"{1000 * s:.2f}" if s is not None else "-"


def secs(s: float | None) -> str:
    return f"{s:6.2f}s" if s is not None else "     -"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def report(rows: list[dict[str, Any]], targets: list[str]) -> None:
    w = max([len(r["model"]) for r in rows] + [5])
    print(f"{'model':{w}s} " + " ".join(f"{t:>14s}" for t in targets))
    for r in rows:
        print(f"{r['model']:{w}s} " + " ".join(f"{fmt_cell(r['targets'][t]):>14s}" for t in targets))
    print("cells: ok <max |ours - eager|> | struct: Core ML built, no number on Linux | FAIL <error>: the check "
          "found a mismatch | refused:<reason> | ERROR:<reason>")
    print("totals (ok / structural / check failed / refused / error, of models):")
    for t in targets:
        st = [r["targets"][t]["status"] for r in rows]
        print(f"  {t:11s} {st.count('ok')} / {st.count('structural')} / {st.count('check_failed')} / "
              f"{st.count('refused')} / {st.count('error')} of {len(rows)}")
    print("conversion s (frontend + compile) and latency ms (median), ours vs eager PyTorch:")
    for r in rows:
        parts = [f"frontend {r['frontend_s']:.2f}s" if r.get("frontend_s") is not None else "frontend -",
                 f"eager {ms(r.get('eager_latency_s'))}ms"]
        for t in targets:
            c = r["targets"][t]
            if c.get("convert_s") is not None:
                parts.append(f"{t} {c['convert_s']:.2f}s/{ms(c.get('latency_s'))}ms"
                             f"(x{ratio(c.get('latency_s'), r.get('eager_latency_s'))})")
        print(f"  {r['model']:{w}s} " + ", ".join(parts))
    peer_targets = [t for t in targets if t in PEER_OF and any(t in r["peers"] for r in rows)]
    for t in peer_targets:
        print(f"{t}: opbridge vs {PEER_OF[t]} (conv ratio peer/ours, lat ratio ours/peer)")
        conv_r, lat_r, n_ours, n_peer = [], [], 0, 0
        for r in rows:
            c, p = r["targets"][t], r["peers"].get(t)
            if p is None:
                continue
            ours_ok = c["status"] in ("ok", "structural")
            n_ours += ours_ok
            n_peer += bool(p.get("ok"))
            cr = (p["convert_s"] / c["convert_s"]) if ours_ok and p.get("ok") and c.get("convert_s") else None
            lr = (c["latency_s"] / p["latency_s"]) if ours_ok and p.get("latency_s") and c.get("latency_s") else None
            conv_r += [cr] if cr else []
            lat_r += [lr] if lr else []
            perr = "" if not p.get("ok") else (f" err {p['max_err']:.1e}" if p.get("max_err") is not None else "")
            via = p.get("via") if (t, p.get("via")) not in (("coreml", "torch.export"),) else None
            print(f"  {r['model']:{w}s} ours {fmt_cell(c):14s} conv {secs(c.get('convert_s'))} "
                  f"lat {ms(c.get('latency_s')):>7s}ms | peer {'ok' if p.get('ok') else 'FAIL':4s}{perr} conv "
                  f"{secs(p.get('convert_s'))} lat {ms(p.get('latency_s')):>7s}ms{f' (via {via})' if via else ''}")
            if cr or lr:
                print(f"    ratios: conv peer/ours {cr and f'{cr:.2f}' or '-'}, lat ours/peer {lr and f'{lr:.2f}' or '-'}")
            if not p.get("ok"):
                print(f"    peer: {p.get('error', '')}")
        med = (lambda v: f"{statistics.median(v):.2f}" if v else "-")
        print(f"  success: ours {n_ours}, {PEER_OF[t]} {n_peer} of {sum(1 for r in rows if t in r['peers'])}; "
              f"median conv ratio peer/ours {med(conv_r)}, median lat ratio ours/peer {med(lat_r)}")
    groups: dict[str, list[str]] = {}
    for r in rows:
        for t in targets:
            c = r["targets"][t]
            if c["status"] in ("ok", "structural"):
                continue
            for key in mechanism(c):
                groups.setdefault(key, []).append(f"{r['model']}/{t}")
    if groups:
        print("failures by mechanism:")
        for key, where in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            models = sorted({w.split('/')[0] for w in where})
            print(f"  [{len(where)} cells, {len(models)} models] {key}  <- {', '.join(where[:8])}"
                  f"{' ...' if len(where) > 8 else ''}")


def main() -> int:
    from torch_zoo_defs import MODELS, SUITE

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help=f"comma-separated models (default the suite; known: {', '.join(MODELS)})")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("-n", type=int, default=10, help="latency runs (median) after a warm-up")
    ap.add_argument("--threads", type=int, default=1,
                    help="inference threads of every runtime (torch, onnxruntime, TensorFlow, OpenVINO, LiteRT)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("-v", "--verbose", action="store_true", help="let third-party log lines through")
    args = ap.parse_args()
    models = [m for m in args.only.split(",") if m] or list(SUITE)
    bad = [m for m in models if m not in MODELS]
    targets = [t for t in args.targets.split(",") if t]
    bad += [t for t in targets if t not in TARGETS]
    if bad:
        ap.error(f"unknown {', '.join(bad)}")
    if not args.verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("TQDM_DISABLE", "1")  # coremltools' progress bars
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
    if "tensorflow" in targets:  # TensorFlow's thread pools, like the other runtimes' (before TF starts)
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory(prefix="opbridge-torch-bench-") as tmp:
        for name in models:
            t = time.perf_counter()
            try:
                row = bench_model(name, targets, args.n, args.threads, not args.no_peers, Path(tmp))
            except Exception as exc:  # noqa: BLE001 - one model's crash (ours or the bench's) is a row
                row = {"model": name, "bench_error": first_line(exc), "peers": {},
                       "targets": {tg: {"status": "error", "reason": "bench_error", "detail": first_line(exc)}
                                   for tg in targets}}
            row["wall_s"] = time.perf_counter() - t
            say(f"[{name}] " + " ".join(f"{tg}={fmt_cell(row['targets'][tg])}" for tg in targets)
                + f" ({row['wall_s']:.0f}s)")
            rows.append(row)
    report(rows, targets)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
