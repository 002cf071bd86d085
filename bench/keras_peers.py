"""The peers of ``bench/keras_models.py`` on one source file, run in the bench's peer worker
(a child process): the source runtime's outputs on seeded inputs (the TFLite interpreter for
``.tflite``, TensorFlow for a SavedModel), then each peer's conversion (timed without the
interpreter start and imports), its output run (onnxruntime for ONNX, OpenVINO CPU at f32 for
OpenVINO) and compared with the source on the same inputs.

* ``tf2onnx`` (``bench/.venv-tf2onnx``): ``python -m tf2onnx.convert --tflite X`` /
  ``--saved-model DIR``, the CLI's own ``main`` timed inside that venv;
* ``tflite2onnx`` (``bench/.venv-tflite2onnx``): ``tflite2onnx.convert(tflite, onnx)``;
* ``openvino``: ``openvino.convert_model`` on the ``.tflite`` file or the SavedModel folder.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEERS = ("tf2onnx", "tflite2onnx", "openvino")
APPLIES = {"tf2onnx": ("savedmodel", "tflite", "int8"), "tflite2onnx": ("tflite", "int8"),
           "openvino": ("savedmodel", "tflite", "int8")}
VENVS = {"tf2onnx": HERE / ".venv-tf2onnx", "tflite2onnx": HERE / ".venv-tflite2onnx"}
SETUP = {"tf2onnx": "bench/setup_peer_tf2onnx.sh", "tflite2onnx": "bench/setup_peer_tflite2onnx.sh"}
PEER_TIMEOUT = 600.0

_TF2ONNX = """
import sys, time
import tf2onnx.convert as c
sys.argv = ["tf2onnx.convert"] + sys.argv[1:]
t = time.perf_counter()
try:
    c.main()
except SystemExit as e:
    if e.code not in (0, None):
        raise
print("KB_SECONDS", time.perf_counter() - t, flush=True)
"""
_TFLITE2ONNX = """
import sys, time
import tflite2onnx
t = time.perf_counter()
tflite2onnx.convert(sys.argv[1], sys.argv[2])
print("KB_SECONDS", time.perf_counter() - t, flush=True)
"""


def peer_applies(peer: str, fmt: str) -> bool:
    return fmt in APPLIES.get(peer, ())


# --- the source runtime -----------------------------------------------------------------------

def _normal(shape: Any, seed: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed).standard_normal(tuple(int(d) for d in shape)).astype(np.float32)


def tflite_source(src: str) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    """(inputs, outputs, output info) of the TFLite interpreter on seeded inputs: standard
    normal, quantized with the input's own scale / zero point when the input is int8."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=src)
    it.allocate_tensors()
    feeds = []
    for i, d in enumerate(it.get_input_details()):
        x = _normal(d["shape"], i)
        if d["dtype"] in (np.int8, np.uint8):
            scale, zp = d["quantization"]
            info = np.iinfo(d["dtype"])
            x = np.clip(np.round(x / scale) + zp, info.min, info.max).astype(d["dtype"])
        else:
            x = x.astype(d["dtype"])
        it.set_tensor(d["index"], x)
        feeds.append(x)
    it.invoke()
    outs = [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]
    info = [{"dtype": str(d["dtype"].__name__), "quantization": list(d["quantization"])} for d in it.get_output_details()]
    return feeds, outs, info


def savedmodel_source(src: str) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    import numpy as np
    import tensorflow as tf

    fn = tf.saved_model.load(src).signatures["serving_default"]
    specs = fn.structured_input_signature[1]
    names = sorted(specs)
    feeds = [_normal(specs[n].shape, i) for i, n in enumerate(names)]
    res = fn(**{n: tf.constant(x) for n, x in zip(names, feeds)})
    keys = sorted(res)
    return feeds, [np.asarray(res[k]) for k in keys], [{"dtype": str(res[k].dtype.name)} for k in keys]


# --- comparison -----------------------------------------------------------------------------------

def compare(ref: list[Any], got: list[Any], quantized: bool) -> tuple[str, str, float | None]:
    """(status, detail, max error): an int8 output may differ by one step; a float output of a
    quantized model by 1% of its range; otherwise rtol 1e-3, atol 1e-5."""
    import numpy as np

    if len(got) != len(ref):
        return "check_failed", f"{len(got)} outputs, the source has {len(ref)}", None
    worst = 0.0
    bad = ""
    for i, (e, g) in enumerate(zip(ref, got)):
        e, g = np.asarray(e), np.asarray(g)
        if e.size == g.size and e.shape != g.shape and e.squeeze().shape == g.squeeze().shape:
            g = g.reshape(e.shape)
        if e.shape != g.shape:
            return "check_failed", f"output {i}: shape {g.shape} != source {e.shape}", None
        if e.dtype.kind in "iu":
            if g.dtype.kind not in "iu":
                return "check_failed", f"output {i}: dtype {g.dtype} != source {e.dtype}", None
            d = np.abs(e.astype(np.int64) - g.astype(np.int64))
            ok = d <= 1
        else:
            d = np.abs(e.astype(np.float64) - g.astype(np.float64))
            if quantized:
                ok = d <= 0.01 * max(float(np.abs(e).max()), 1e-6)
            else:
                ok = d <= 1e-5 + 1e-3 * np.abs(e.astype(np.float64))
            ok |= np.isnan(e) & np.isnan(g)
        m = float(np.nanmax(d)) if d.size else 0.0
        worst = max(worst, m)
        if not ok.all() and not bad:
            bad = f"output {i}: {int((~ok).sum())} of {ok.size} elements out of tolerance, max abs {m:.3g}"
    return ("check_failed", bad, worst) if bad else ("ok", "", worst)


# --- the peers ------------------------------------------------------------------------------------

def _venv_peer(peer: str, code: str, args: list[str]) -> tuple[float | None, str]:
    """Run ``code`` in the peer's venv; (conversion seconds or None, the reason on failure)."""
    py = VENVS[peer] / "bin" / "python"
    if not py.exists():
        return None, f"venv missing: run {SETUP[peer]}"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"}
    try:
        proc = subprocess.run([str(py), "-c", code, *args], capture_output=True, text=True, timeout=PEER_TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {PEER_TIMEOUT:.0f} s"
    secs = [ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("KB_SECONDS")]
    errs = [ln.strip() for ln in proc.stderr.splitlines()
            if (" - ERROR - " in ln or "Error" in ln or "error:" in ln) and "log messages" not in ln]
    unsupported = [ln.split("Unsupported ops:", 1)[1].strip() for ln in proc.stderr.splitlines() if "Unsupported ops:" in ln]
    if unsupported:  # tf2onnx logs the ops it cannot convert and still writes a model
        errs = [f"unsupported ops: {unsupported[0][:300]}"] + errs
    if proc.returncode != 0 or not secs:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        why = tail[-1] if tail else f"exit {proc.returncode}"
        return None, (why if not errs or errs[-1] == why else f"{errs[0][:200]} … {why}")[:500]
    return float(secs[-1]), ("; ".join(e[:200] for e in errs[:2]) if errs else "")


def _run_onnx(path: str, feeds: list[Any]) -> list[Any]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, feeds)))


def _onnx_peer(peer: str, src: str, fmt: str, feeds: list[Any], ref: list[Any], work: str) -> dict[str, Any]:
    out = os.path.join(work, f"{peer}.onnx")
    if peer == "tf2onnx":
        args = ["--saved-model" if fmt == "savedmodel" else "--tflite", src, "--output", out]
        secs, why = _venv_peer(peer, _TF2ONNX, args)
    else:
        secs, why = _venv_peer(peer, _TFLITE2ONNX, [src, out])
    if secs is None or not os.path.exists(out):
        return {"status": "refused", "reason": "convert_error", "detail": why}
    rec: dict[str, Any] = {"seconds": round(secs, 3)}
    if why:
        rec["warnings"] = why
    try:
        got = _run_onnx(out, feeds)
    except Exception as exc:  # noqa: BLE001 - the written model does not run
        if why.startswith("unsupported ops:"):  # the converter said so: a refusal, not a crash
            return {**rec, "status": "refused", "reason": "unsupported_op", "detail": why.split("; ")[0]}
        return {**rec, "status": "error", "reason": "onnxruntime", "detail": str(exc).strip().splitlines()[0][:400]}
    st, detail, err = compare(ref, got, fmt == "int8")
    return {**rec, "status": st, "detail": detail, "max_err": err, **({"reason": "mismatch"} if detail else {})}


def _openvino_peer(src: str, fmt: str, feeds: list[Any], ref: list[Any]) -> dict[str, Any]:
    import sys

    sys.path.insert(0, str(HERE.parent))
    from emitters.openvino.runtime import compile_model, infer, openvino

    ov = openvino()  # telemetry off (see runtime.openvino)

    t0 = time.perf_counter()
    try:
        model = ov.convert_model(src)
    except Exception as exc:  # noqa: BLE001 - OpenVINO's refusal is the answer
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        ops = [ln for ln in lines if "No conversion rule" in ln or "not supported" in ln.lower()]
        return {"status": "refused", "reason": "convert_error", "detail": (ops or lines or [type(exc).__name__])[0][:400]}
    secs = time.perf_counter() - t0
    try:
        got = infer(compile_model(model), feeds)
    except Exception as exc:  # noqa: BLE001
        return {"status": "error", "reason": "openvino_run", "detail": str(exc).strip().splitlines()[0][:400],
                "seconds": round(secs, 3)}
    st, detail, err = compare(ref, got, fmt == "int8")
    return {"status": st, "detail": detail, "max_err": err, "seconds": round(secs, 3),
            **({"reason": "mismatch"} if detail else {})}


def run_peers_worker(src: str, fmt: str, peers: str, result: str) -> None:
    out: dict[str, Any] = {}
    try:
        feeds, ref, info = savedmodel_source(src) if fmt == "savedmodel" else tflite_source(src)
    except Exception as exc:  # noqa: BLE001 - no source outputs: every peer cell says why
        why = f"the source runtime failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        Path(result).write_text(json.dumps({p: {"status": "error", "reason": "source", "detail": why}
                                            for p in peers.split(",")}))
        return
    with tempfile.TemporaryDirectory(prefix="kb-peers-") as work:
        for p in peers.split(","):
            try:
                out[p] = (_openvino_peer(src, fmt, feeds, ref) if p == "openvino"
                          else _onnx_peer(p, src, fmt, feeds, ref, work))
            except Exception as exc:  # noqa: BLE001 - one peer's bug is its cell
                out[p] = {"status": "error", "reason": type(exc).__name__, "detail": str(exc).splitlines()[0][:300]}
            out[p]["source_outputs"] = info
            Path(result).write_text(json.dumps(out, default=str))
