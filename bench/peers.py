"""Real models, opbridge and the peers that target the same backend, side by side in one run.

For each model of the suite (bench/export_models.py, cached in bench/.cache/models) and
each backend, opbridge converts (frontend → IR → emitter → saved artifact) and runs the
result; the peer for that backend does the same in its own venv (subprocess):

| backend | peer | where |
|---|---|---|
| pytorch | onnx2torch 1.5.15 | bench/.venv-peers (bench/setup_peers.sh) |
| tflite | onnx2tf 1.28.8 (not_use_onnxsim=True) | bench/.venv-onnx2tf (bench/setup_peer_onnx2tf.sh) |
| openvino | OpenVINO's ONNX frontend, what openvino.convert_model runs (OPBRIDGE_OV_CONVERT_MODEL=1: convert_model itself) | this process |

Printed per (model, backend): success, conversion seconds (opbridge: frontend → in-memory artifact;
saving it is timed apart), max abs diff against
onnxruntime on the same inputs, emitted-model latency (median of N runs), TFLite
transpose counts, and every figure as a ratio opbridge / peer.

Latency is inference only and measured alike on both sides: each model is loaded or
compiled once, warmed up, then only the calls are timed, on the same inputs with the
same thread count (``--threads``, default 1). PyTorch: opbridge's generated module and
onnx2torch's run in the same process of the peers venv (one torch build), timed
alternately. OpenVINO: both ``ov.Model``s compiled with the same CPU config (f32
inference precision, the thread count), one reused infer request each, timed
alternately. TFLite: one interpreter each at TFLite's default thread count (onnx2tf's
in its venv, timed on ``invoke``; ours through ``tflite.runner``, whose calls also copy
the inputs in and the outputs out).

Recurrent models (``--models recurrent``, or ``lstm_2l_h256`` / ``gru_2l_h256`` by name): a
2-layer ``nn.LSTM`` / ``nn.GRU`` (input 64, hidden 256, sequence 100, batch 1, seed 0)
exported in this run with ``torch.onnx.export`` (the TorchScript exporter), converted by
opbridge to PyTorch; the emitted module (through its runner: NumPy in, NumPy out) and
onnxruntime on the original ONNX file are timed alternately in this process, with
``torch.set_num_threads(T)`` and onnxruntime's ``intra_op_num_threads=T``
(``inter_op_num_threads=1``, sequential), T = ``--threads``; the row prints the ratio
opbridge / onnxruntime of the medians (the goal: ≤ 1.5) and of the fastest runs (the
minimum of each side's N runs: the least disturbed by other processes on a shared machine),
the exported torch module's own latency for reference, and with T = 1 also the medians of the calling thread's CPU time (both sides run
on it), which other processes' load on a shared machine does not inflate.

    python bench/peers.py [--models suite|recurrent|a,b] [--backends pytorch,tflite,openvino] [-n 20]
                          [--threads 1] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODELS = ROOT / "bench" / ".cache" / "models"
SUITE = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "vit_small", "transformer_encoder", "gpt2_blocks")
PEER_OF = {"pytorch": "onnx2torch", "tflite": "onnx2tf", "openvino": "openvino_fe", "ncnn": "pnnx"}
VENV = {"onnx2torch": ROOT / "bench" / ".venv-peers", "onnx2tf": ROOT / "bench" / ".venv-onnx2tf"}
RUNNER = {"onnx2torch": "_model_onnx2torch.py", "onnx2tf": "_model_onnx2tf.py"}
WARMUP = 3


def inputs_for(path: Path) -> dict[str, np.ndarray]:
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tt.shape.dim]  # -1, 0: unknown
        if tt.elem_type == onnx.TensorProto.INT64:
            feeds[i.name] = rng.integers(0, 200, size=shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def onnxruntime_outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def max_abs(expected: list[np.ndarray], got: list[np.ndarray]) -> float | None:
    worst = 0.0
    for e, g in zip(expected, got):
        g = np.asarray(g)
        if g.shape != e.shape and g.size == e.size and g.ndim == 3:
            g = g.transpose(0, 2, 1)  # a channels-last 3-D output from a peer
        if g.shape != e.shape:
            return None
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64)))))
    return worst


SAVE_S: dict[str, float] = {}  # backend → seconds its last artifact took to save


def convert_ours(backend: str, path: Path, out_dir: Path,
                 feeds: dict[str, np.ndarray] | None = None) -> tuple[Any, Any, float]:
    """(target, artifact, seconds): frontend → IR → emitter (an in-memory artifact,
    for a static-shape target with its symbolic dims fixed to ``feeds``' sizes,
    as onnx2torch's and OpenVINO's conversions give an in-memory model; a target that keeps
    symbolic dims but refuses them for this model, with them fixed to ``feeds``' sizes); the
    artifact is then saved, timed apart (``SAVE_S``, printed as ``save``)."""
    from translator.frontends.onnx import load_onnx
    from translator import reference
    from translator.run.harness import convert
    from translator.compile.target import get

    target = get(backend)
    # warm-up, as the peers' imports are done before they are timed: imports (constant
    # folding's reference ops are imported on first use), table loading, runtime probes
    reference.implemented()
    convert(backend, load_onnx(ROOT / "examples" / "models" / "tiny_cnn.onnx"))
    t = time.perf_counter()
    model = load_onnx(path)
    options = {}
    if feeds is not None and not target.dynamic_dims:  # a static-shape target is written for the timed inputs
        from translator.ir.dims import sizes_in

        options["fix_dims"] = sizes_in(model, feeds)
    try:
        art = convert(backend, model, **options)
    except Exception as exc:  # noqa: BLE001 - only a symbolic-dims refusal is retried
        from translator.ir.dims import sizes_in
        from translator.run.harness import classify

        # a target that keeps symbolic dims but cannot run this model with them: fixed to the
        # timed inputs' sizes, as ``convert`` falls back (it fixes the fewest dims it can)
        if feeds is None or not target.dynamic_dims or classify(exc)[1] != "dynamic_shape":
            raise
        model = load_onnx(path)
        art = convert(backend, model, fix_dims=sizes_in(model, feeds))
    convert_s = time.perf_counter() - t
    redo = _fallback_options(backend, path, feeds, art)
    if redo:  # what ``convert`` writes: the form it fell back to when the first failed its check
        t = time.perf_counter()
        art = convert(backend, load_onnx(path), **options, **redo)
        convert_s += time.perf_counter() - t  # (both conversions: what convert spends, its checks aside)
    t = time.perf_counter()
    if target.save is not None:
        target.save(art, out_dir / f"ours_{backend}")
    elif hasattr(art, "save"):
        art.save(out_dir / f"ours_{backend}")
    SAVE_S[backend] = time.perf_counter() - t
    return target, art, convert_s


def _fallback_options(backend: str, path: Path, feeds: dict[str, np.ndarray] | None, art: Any) -> dict[str, Any]:
    """The options ``convert`` fell back to for this model when its first form failed the
    check (``fell_back_to`` in its record: ``float_recurrence``, ``float_quantization``), found
    by running ``convert`` with its check on ``feeds`` (untimed), so the bench times the
    artifact a user gets; {} when the artifact has no such fallback or the first form passed."""
    import tempfile

    import opbridge
    from translator.run.convert import _fallbacks, _features

    if not _fallbacks(_features(art)):
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        (rec,) = opbridge.convert(str(path), to=backend, out=str(Path(tmp) / "out"), inputs=feeds)["targets"]
    return dict(rec.get("fell_back_to") or {})


def samples(calls: dict[str, Any], n: int, clock: Any = time.perf_counter) -> dict[str, list[float]]:
    """Seconds of each call of each zero-argument callable: warmed up, then called alternately
    (n times each, the order reversed every round), so a burst of load from another process hits
    all of them alike; Python's garbage collector is off while they run.
    ``clock``: wall-clock by default; ``time.thread_time`` counts only this thread's CPU time
    (what a single-threaded call costs whatever else the machine runs)."""
    import gc

    for fn in calls.values():
        for _ in range(WARMUP):
            fn()
    times: dict[str, list[float]] = {k: [] for k in calls}
    order = list(calls.items())
    gc.collect()
    gc.disable()  # a collection of the bench's own heap (a conversion's objects) lands on no call
    try:
        for r in range(n):
            for k, fn in (order if r % 2 == 0 else order[::-1]):  # neither call always runs first
                s = clock()
                fn()
                times[k].append(clock() - s)
    finally:
        gc.enable()
    return times


def timed(calls: dict[str, Any], n: int, clock: Any = time.perf_counter) -> dict[str, float]:
    """Median seconds of each zero-argument callable (``samples``)."""
    return {k: statistics.median(v) for k, v in samples(calls, n, clock).items()}


def compare_pytorch(path: Path, feeds: dict[str, np.ndarray], n: int, out_dir: Path,
                    threads: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """opbridge's module and onnx2torch's, timed in one process of the peers venv (same torch
    build, same thread count, same input tensors); ours also run here once through its runner."""
    try:
        target, art, convert_s = convert_ours("pytorch", path, out_dir, feeds)
        ours: dict[str, Any] = {"ok": True, "convert_s": convert_s, "outputs": target.prepared(art)(feeds)}
    except Exception as exc:  # noqa: BLE001 - a failed conversion is a result; the peer still runs
        return failed(exc), run_subprocess_peer("onnx2torch", path, feeds, n, out_dir, ["--threads", str(threads)])
    folder = out_dir / "ours_for_peer_venv"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(art.source)
    np.savez(folder / "weights.npz", **{k: np.asarray(v) for k, v in art.weights.items()})
    (folder / "meta.json").write_text(json.dumps({"class_name": art.class_name, "input_names": art.input_names,
                                                  "input_dtypes": art.input_dtypes}))
    theirs = run_subprocess_peer("onnx2torch", path, feeds, n, out_dir, ["--threads", str(threads), "--ours", str(folder)])
    if theirs.get("ok"):
        ours["latency_s"] = theirs.pop("ours_latency_s")
        ours["outputs"] = theirs.pop("ours_outputs")
        for i, d in art.output_dtypes.items():
            ours["outputs"][i] = ours["outputs"][i].astype(d)
        if "peer_error" in theirs:  # onnx2torch failed; ours was timed all the same
            theirs = {"ok": False, "error": theirs["peer_error"]}
    else:  # no peers venv: ours alone, in this process
        import torch

        torch.set_num_threads(threads)
        call = target.prepared(art)
        ours["latency_s"] = timed({"ours": lambda: call(feeds)}, n)["ours"]
    return ours, theirs


def compare_openvino(path: Path, feeds: dict[str, np.ndarray], n: int, out_dir: Path,
                     threads: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """opbridge's ov.Model and OpenVINO's own conversion of the ONNX file, compiled with the
    same CPU config (f32 inference precision, same thread count), run through the same
    infer path with one reused request each, timed alternately."""
    import openvino as ov

    from emitters.openvino import CPU_CONFIG, core, infer

    config = dict(CPU_CONFIG, INFERENCE_NUM_THREADS=threads)
    compiled = {}
    try:
        target, art, convert_s = convert_ours("openvino", path, out_dir, feeds)
        ours: dict[str, Any] = {"ok": True, "convert_s": convert_s, "outputs": target.prepared(art)(feeds)}
        compiled["ours"] = core().compile_model(art.model, "CPU", config)
    except Exception as exc:  # noqa: BLE001 - a failed conversion is a result; the peer still runs
        ours = failed(exc)
    try:
        t = time.perf_counter()
        if os.environ.get("OPBRIDGE_OV_CONVERT_MODEL") == "1":
            peer_model = ov.convert_model(str(path))
        else:  # what convert_model runs for an ONNX file, minus its telemetry subprocess (peers/openvino_fe.py)
            from openvino.frontend import FrontEndManager

            fe = FrontEndManager().load_by_framework("onnx")
            peer_model = fe.convert(fe.load(str(path)))
        theirs: dict[str, Any] = {"ok": True, "convert_s": time.perf_counter() - t}
        compiled["peer"] = core().compile_model(peer_model, "CPU", config)
    except Exception as exc:  # noqa: BLE001
        theirs = failed(exc)
    calls = {}
    for key, cm in compiled.items():
        names = [p.get_any_name() if p.get_names() else "" for p in cm.inputs]
        vals = [feeds[nm] if nm in feeds else list(feeds.values())[i] for i, nm in enumerate(names)]
        req = cm.create_infer_request()
        calls[key] = (lambda cm=cm, vals=vals, req=req: infer(cm, vals, req))
    if theirs["ok"]:
        theirs["outputs"] = calls["peer"]()
    lat = timed(calls, n)
    for key, rec in (("ours", ours), ("peer", theirs)):
        if key in lat:
            rec["latency_s"] = lat[key]
    return ours, theirs


def compare_tflite(path: Path, feeds: dict[str, np.ndarray], n: int, out_dir: Path,
                   threads: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both flatbuffers run in the onnx2tf venv's process (one TFLite build), each in one
    ``tf.lite.Interpreter`` with ``threads`` threads, inputs set once, warmed up, then only
    ``invoke()`` timed, the two alternating. Our outputs come from ``tflite.runner``."""
    extra = ["--threads", str(threads)]
    try:
        target, art, convert_s = convert_ours("tflite", path, out_dir, feeds)
        call = target.prepared(art)
        ours = {"ok": True, "convert_s": convert_s, "transposes": art.transposes, "outputs": call(feeds)}
        from emitters.tensorflow import feed_arrays

        work = out_dir / "ours_for_timing"
        work.mkdir(parents=True, exist_ok=True)
        (work / "model.tflite").write_bytes(art.tflite)
        np.savez(work / "inputs.npz", **feed_arrays(art, feeds))
        extra += ["--ours", str(work / "model.tflite"), "--ours-inputs", str(work / "inputs.npz")]
    except Exception as exc:  # noqa: BLE001 - a failed conversion is a result; the peer still runs
        ours = failed(exc)
    theirs = run_subprocess_peer("onnx2tf", path, feeds, n, out_dir, extra)
    from emitters.tflite.runtime import allocated_ops, delegated_share

    if theirs.get("ops"):  # the share of nodes XNNPACK took, both read from the peer venv's LiteRT
        theirs["delegation"] = delegated_share(theirs.pop("ops"))
    if ours.get("ok"):
        if "ours_latency_s" in theirs:
            ours["latency_s"] = theirs.pop("ours_latency_s")
            ours["delegation"] = delegated_share(theirs.pop("ours_ops"))
        else:  # the peer failed before timing: ours alone, the same way, in this venv's TFLite
            ours["latency_s"] = timed({"ours": lambda: call(feeds)}, n)["ours"]
            ops = allocated_ops(art.tflite)
            if ops is not None:
                ours["delegation"] = delegated_share(ops)
    return ours, theirs


#: recurrent models built in the run: name → (torch.nn class, layers, input, hidden, sequence, batch)
RECURRENT = {"lstm_2l_h256": ("LSTM", 2, 64, 256, 100, 1), "gru_2l_h256": ("GRU", 2, 64, 256, 100, 1)}


def export_recurrent(name: str, out_dir: Path) -> tuple[Path, Any]:
    """The recurrent model ``name`` (a torch module, seed 0) and its export with
    torch.onnx.export (the TorchScript exporter)."""
    import warnings

    import torch

    kind, layers, inp, hidden, seq, batch = RECURRENT[name]
    torch.manual_seed(0)
    layer = getattr(torch.nn, kind)(inp, hidden, num_layers=layers).eval()

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = layer

        def forward(self, x: Any) -> Any:
            return self.rnn(x)[0]

    path = out_dir / f"{name}.onnx"
    net = Net().eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and batch-size notes
        torch.onnx.export(net, (torch.zeros(seq, batch, inp),), str(path), dynamo=False,
                          input_names=["x"], output_names=["y"])
    return path, net


def compare_recurrent(path: Path, feeds: dict[str, np.ndarray], n: int, out_dir: Path, threads: int,
                      module: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """opbridge's emitted PyTorch module against onnxruntime on the original file, timed
    alternately in this process with the same thread count on both sides; ``module`` (the
    torch module that was exported) is timed alongside as a reference (``torch_module_s``)."""
    import onnxruntime as ort
    import torch

    torch.set_num_threads(threads)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    theirs: dict[str, Any] = {"ok": True, "outputs": sess.run(None, feeds)}
    calls = {"onnxruntime": lambda: sess.run(None, feeds)}
    try:
        target, art, convert_s = convert_ours("pytorch", path, out_dir, feeds)
        call = target.prepared(art)
        ours: dict[str, Any] = {"ok": True, "convert_s": convert_s, "outputs": call(feeds),
                                "native_kernel": "_rnn_native(" in art.source.split("\nclass ")[-1]}
        calls["ours"] = lambda: call(feeds)
    except Exception as exc:  # noqa: BLE001 - a failed conversion is a result; onnxruntime is still timed
        ours = failed(exc)
    if module is not None:
        args = [torch.from_numpy(v) for v in feeds.values()]

        def direct() -> Any:
            with torch.no_grad():
                return module(*args)

        calls["torch_module"] = direct
    raw = samples(calls, n)
    lat = {k: statistics.median(v) for k, v in raw.items()}
    theirs["latency_s"], theirs["min_s"] = lat["onnxruntime"], min(raw["onnxruntime"])
    if "torch_module" in lat:
        theirs["torch_module_s"] = lat["torch_module"]
    if "ours" in lat:  # the minimum: the run least disturbed by other processes, on each side
        ours["latency_s"], ours["min_s"] = lat["ours"], min(raw["ours"])
    if threads == 1:  # both run on the calling thread: its CPU time is immune to other processes' load
        cpu = timed(calls, n, time.thread_time)
        theirs["cpu_s"] = cpu["onnxruntime"]
        if "ours" in cpu:
            ours["cpu_s"] = cpu["ours"]
    return ours, theirs


def failed(exc: BaseException) -> dict[str, Any]:
    return {"ok": False, "error": str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__}


def compare_ncnn(path: Path, feeds: dict[str, np.ndarray], n: int, out_dir: Path,
                 threads: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """opbridge's ncnn files and pnnx's (ncnn's own converter, bench/.venv-pnnx) for the same
    ONNX file, both loaded by the project's ncnn package with the same options (CPU, fp32,
    ``threads`` threads) and timed alternately. pnnx's files are fed as its generated script
    feeds them (``in0``..., a batch of 1 dropped) and read at ``out0``..."""
    from peers import pnnx

    os.environ["OPBRIDGE_NCNN_THREADS"] = str(threads)
    calls = {}
    try:
        target, art, convert_s = convert_ours("ncnn", path, out_dir, feeds)
        call = target.prepared(art)
        ours: dict[str, Any] = {"ok": True, "convert_s": convert_s, "outputs": call(feeds)}
        calls["ours"] = lambda: call(feeds)
    except Exception as exc:  # noqa: BLE001 - a failed conversion is a result; the peer still runs
        ours = failed(exc)
    try:
        param, weights, convert_s = pnnx.convert(path, feeds, out_dir / "pnnx")
        net = pnnx._net(param, weights)
        net.opt.num_threads = threads
        peer_call = pnnx.caller(net, feeds, len(onnxruntime_outputs(path, feeds)))
        theirs: dict[str, Any] = {"ok": True, "convert_s": convert_s, "outputs": peer_call()}
        calls["peer"] = peer_call
    except Exception as exc:  # noqa: BLE001
        theirs = failed(exc)
    lat = timed(calls, n)
    for key, rec in (("ours", ours), ("peer", theirs)):
        if key in lat:
            rec["latency_s"] = lat[key]
    return ours, theirs


COMPARE = {"pytorch": compare_pytorch, "openvino": compare_openvino, "tflite": compare_tflite, "ncnn": compare_ncnn}


def run_subprocess_peer(peer: str, path: Path, feeds: dict[str, np.ndarray], n: int, out_dir: Path,
                        extra: list[str] | None = None) -> dict[str, Any]:
    py = VENV[peer] / "bin" / "python"
    if not py.exists():
        return {"ok": False, "error": f"{peer} venv missing (run bench/setup_peers.sh / setup_peer_onnx2tf.sh)"}
    work = out_dir / peer
    work.mkdir(parents=True, exist_ok=True)
    np.savez(work / "inputs.npz", **feeds)
    p = subprocess.run([str(py), str(ROOT / "bench" / "peers" / RUNNER[peer]), str(path), str(work / "inputs.npz"),
                        str(work), str(n)] + (extra or []), capture_output=True, text=True, timeout=1800,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"ok": False, "error": tail[:300]}
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    for key, file in (("outputs", "outputs.npz"), ("ours_outputs", "ours_outputs.npz")):
        if (work / file).exists():
            with np.load(work / file, allow_pickle=False) as z:
                rec[key] = [z[k] for k in sorted(z.files, key=lambda s: int(s.split("_")[1]))]
    rec["ok"] = True
    return rec


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}"


def recurrent_row(name: str, tmp: Path, n: int, threads: int) -> dict[str, Any]:
    """Export, convert, check and time one recurrent model; prints its row."""
    out_dir = tmp / name
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"{name}: exporting, converting, timing ({n} runs)", file=sys.stderr, flush=True)
    path, module = export_recurrent(name, out_dir)
    feeds = inputs_for(path)
    ours, theirs = compare_recurrent(path, feeds, n, out_dir, threads, module)
    expected = theirs.pop("outputs")
    if ours.get("ok"):
        ours["max_abs"] = max_abs(expected, ours.pop("outputs"))
        ours["save_s"] = SAVE_S.pop("pytorch", None)
    o, t = ours, theirs
    kind, layers, inp, hidden, seq, batch = RECURRENT[name]
    print(f"{name:20s} pytorch   ours: {'ok' if o['ok'] else 'FAIL'} "
          f"{'torch kernel' if o.get('native_kernel') else 'python loop'} conv {o.get('convert_s', float('nan')):.2f}s "
          f"lat {1000 * o.get('latency_s', float('nan')):.2f}ms diff {o.get('max_abs')} | onnxruntime (original): "
          f"lat {1000 * t['latency_s']:.2f}ms | ratio lat {ratio(o.get('latency_s'), t['latency_s'])} (goal <= 1.5), "
          f"of the fastest runs {ratio(o.get('min_s'), t.get('min_s'))} | "
          f"torch.nn.{kind} itself {1000 * t.get('torch_module_s', float('nan')):.2f}ms | thread CPU time: ours "
          f"{1000 * o.get('cpu_s', float('nan')):.2f}ms onnxruntime {1000 * t.get('cpu_s', float('nan')):.2f}ms ratio "
          f"{ratio(o.get('cpu_s'), t.get('cpu_s'))} ("
          f"{kind} {layers} layers, input {inp}, hidden {hidden}, seq {seq}, batch {batch}, {threads} thread(s) each)",
          flush=True)
    if not o["ok"]:
        print(f"    ours: {o['error']}")
    return {"model": name, "backend": "pytorch", "peer": "onnxruntime", "threads": threads, "ours": ours,
            "peer_result": theirs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="suite")
    ap.add_argument("--backends", default="pytorch,tflite,openvino")
    ap.add_argument("-n", type=int, default=20, help="latency runs (median), after a warm-up")
    ap.add_argument("--threads", type=int, default=1, help="inference threads, the same for opbridge and the peer")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    models = SUITE if args.models == "suite" else tuple(RECURRENT) if args.models == "recurrent" \
        else args.models.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            if name in RECURRENT:
                rows.append(recurrent_row(name, Path(tmp), args.n, args.threads))
                continue
            path = MODELS / f"{name}.onnx"
            if not path.exists():
                print(f"{name}: missing {path} (run bench/export_models.py --models suite in bench/.venv-peers)")
                continue
            feeds = inputs_for(path)
            expected = onnxruntime_outputs(path, feeds)
            for b in args.backends.split(","):
                out_dir = Path(tmp) / name / b
                out_dir.mkdir(parents=True, exist_ok=True)
                peer = PEER_OF.get(b)
                ours, theirs = COMPARE[b](path, feeds, args.n, out_dir, args.threads)
                if ours.get("ok") and b in SAVE_S:
                    ours["save_s"] = SAVE_S.pop(b)
                for r in (ours, theirs):
                    if r.get("ok") and "outputs" in r:
                        r["max_abs"] = max_abs(expected, r.pop("outputs"))
                rows.append({"model": name, "backend": b, "peer": peer, "ours": ours, "peer_result": theirs})
                o, t = ours, theirs
                print(f"{name:20s} {b:9s} ours: {'ok' if o['ok'] else 'FAIL'} "
                      f"conv {o.get('convert_s', float('nan')):.2f}s (save {o.get('save_s', float('nan')):.2f}s) "
                      f"lat {1000 * o.get('latency_s', float('nan')):.2f}ms "
                      f"diff {o.get('max_abs')} tr {o.get('transposes', '-')} | {peer}: {'ok' if t['ok'] else 'FAIL'} "
                      f"conv {t.get('convert_s', float('nan')):.2f}s lat {1000 * t.get('latency_s', float('nan')):.2f}ms "
                      f"diff {t.get('max_abs')} tr {t.get('transposes', '-')} | ratios conv "
                      f"{ratio(o.get('convert_s'), t.get('convert_s'))} lat {ratio(o.get('latency_s'), t.get('latency_s'))}"
                      f" tr {ratio(o.get('transposes'), t.get('transposes'))}", flush=True)
                for r in (o, t):
                    if not r["ok"]:
                        print(f"    {'ours' if r is o else peer}: {r['error']}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1, default=float) + "\n")
    ok_ours = sum(1 for r in rows if r["ours"]["ok"])
    ok_peer = sum(1 for r in rows if r["peer_result"]["ok"])
    print(f"converted: opbridge {ok_ours}/{len(rows)}, peers {ok_peer}/{len(rows)}")
    lat = [r["ours"]["latency_s"] / r["peer_result"]["latency_s"] for r in rows
           if r["ours"].get("latency_s") and r["peer_result"].get("latency_s")]
    if lat:
        print(f"latency ratio opbridge/peer: median {statistics.median(lat):.2f}, worst {max(lat):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
