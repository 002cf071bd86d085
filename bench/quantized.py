"""Quantized in, quantized out (issue 24): does a quantized model stay quantized on each target?

The corpus, built here deterministically into ``bench/.cache/quantized/`` (seeded random
weights, no downloads):

* four float ONNX models exported by ``torch.onnx`` — a CNN (conv, BN, ReLU, pool, linear),
  a MobileNet-style net (depthwise separable blocks), a ResNet-style net (residual adds) and
  an MLP — each quantized by onnxruntime's ``quantize_static`` as QDQ per tensor, QDQ per
  channel and QOperator, and the MLP by ``quantize_dynamic`` too;
* a Keras CNN converted by TensorFlow's converter to a full-int8 ``.tflite`` (representative
  data, int8 kernels, float I/O);
* the quantized QDQ models of the wild corpus that are in its cache (``bench/.cache/wild``).

Each quantized model and its float original go to every target with ``opbridge convert``
(the check against the source runtime). Per cell: ``q`` when the artifact is quantized —
TFLite: its CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED / BATCH_MATMUL read int8;
OpenVINO: the CPU plugin's compiled model runs its Convolution / FullyConnected / MatMul in
u8/i8 (runtime precision); ONNX: onnxruntime's optimized session graph has integer kernels
(QLinearConv, QLinearMatMul, QGemm, MatMulInteger, ConvInteger, DynamicQuantize*); PyTorch:
the weights file holds int8 tensors; Core ML: int8 weights (``constexpr_affine_dequantize``
or int8 constants; structural only: Core ML does not run on Linux) — else ``f`` (float) —
then the artifact's size as a ratio of the float model's conversion to the same target, and
the check (``ok``; for an output a DequantizeLinear computes, the error in quantization steps
and the share of exact values the check notes). Totals per target: how many conversions come
out quantized, the size ratios, the checks.

Latency (issue 24's acceptance): on onnx, tflite and openvino the int8 artifact and the float
conversion of the same model are timed on the same input, one thread, called alternately, median
of 30 runs, in the runtime's default settings (LiteRT with XNNPACK, OpenVINO's CPU plugin, onnxruntime with
every optimization); the summary prints the speedups. The peers in the same run, on the same files:
OpenVINO's own ONNX reader on each quantized ONNX file, onnx2tf (its newest release that
installs beside TensorFlow 2.21 here, 1.28.8: 1.29.x pins onnxsim 0.4.36 and onnxruntime
1.23.0) on each quantized ONNX file for TFLite, tf2onnx ``--tflite`` on each quantized .tflite
for ONNX — each judged as ours are (quantized or not, size against our float conversion,
latency, error against the source runtime).

    python bench/quantized.py [--only cnn,mlp] [--targets onnx,...] [--json out.json] [--no-latency]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / ".cache" / "quantized"
TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


# ---------------------------------------------------------------------------- the corpus
def _torch_models() -> dict[str, tuple[Any, tuple[int, ...]]]:
    import torch
    from torch import nn

    def cbr(i: int, o: int, s: int = 1, g: int = 1) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(i, o, 3, s, 1, groups=g, bias=False), nn.BatchNorm2d(o), nn.ReLU())

    class Res(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.a, self.b = cbr(c, c), nn.Sequential(nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c))

        def forward(self, x):  # noqa: ANN001, ANN201
            return torch.relu(x + self.b(self.a(x)))

    head = lambda c: nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10))  # noqa: E731
    return {
        "cnn": (nn.Sequential(cbr(3, 32), cbr(32, 64, 2), cbr(64, 64), head(64)), (1, 3, 64, 64)),
        "mobilenet": (nn.Sequential(cbr(3, 32, 2), cbr(32, 32, g=32), nn.Conv2d(32, 64, 1), nn.ReLU(),
                                    cbr(64, 64, 2, g=64), nn.Conv2d(64, 128, 1), nn.ReLU(), head(128)), (1, 3, 64, 64)),
        "resnet": (nn.Sequential(cbr(3, 64, 2), Res(64), Res(64), head(64)), (1, 3, 64, 64)),
        "mlp": (nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)),
                (4, 256)),
    }


def calibration_reader(rng: np.random.Generator, shape: tuple[int, ...], count: int = 8) -> Any:
    """onnxruntime's static quantizer's calibration data: ``count`` seeded random inputs for one
    input ``x``, drawn from ``rng`` when the reader is made (the corpus here and the tests)."""
    from onnxruntime.quantization import CalibrationDataReader

    class Data(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(count)]

        def get_next(self):  # noqa: ANN201
            return self.left.pop() if self.left else None

    return Data()


def build(only: set[str] | None) -> list[dict[str, Any]]:
    """The corpus entries (built once into the cache): name, form, quantized file, float file, inputs."""
    import torch
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    CACHE.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    out: list[dict[str, Any]] = []
    for name, (mod, shape) in _torch_models().items():
        if only and name not in only:
            continue
        mod.eval()
        for p in mod.modules():  # batch norms with statistics of their own, as a trained net has
            if isinstance(p, torch.nn.BatchNorm2d):
                p.running_mean.uniform_(-0.1, 0.1)
                p.running_var.uniform_(0.5, 1.5)
        fp = CACHE / f"{name}.onnx"
        feeds = CACHE / f"{name}.npz"
        if not fp.exists():
            torch.onnx.export(mod, (torch.randn(*shape),), str(fp), input_names=["x"], output_names=["y"],
                              opset_version=17, dynamo=False)
            np.savez(feeds, x=np.random.default_rng(2).standard_normal(shape).astype(np.float32))
        forms = {"qdq": (QuantFormat.QDQ, False), "qdq_pc": (QuantFormat.QDQ, True), "qop": (QuantFormat.QOperator, False)}
        for form, (fmt, per_channel) in forms.items():
            q = CACHE / f"{name}_{form}.onnx"
            if not q.exists():
                quantize_static(str(fp), str(q), calibration_reader(np.random.default_rng(1), shape),
                                quant_format=fmt, per_channel=per_channel,
                                activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            out.append({"model": name, "form": form, "file": str(q), "float": str(fp), "inputs": str(feeds)})
        if name == "mlp":
            q = CACHE / f"{name}_dynamic.onnx"
            if not q.exists():
                quantize_dynamic(str(fp), str(q), weight_type=QuantType.QInt8)
            out.append({"model": name, "form": "dynamic", "file": str(q), "float": str(fp), "inputs": str(feeds)})
    if not only or "keras_cnn" in only:
        out.append(_keras_int8())
    wild = HERE / "wild" / "corpus.json"
    models = HERE / ".cache" / "wild" / "models"
    for m in json.loads(wild.read_text())["models"] if wild.exists() else []:
        path = models / f"{m['id']}.onnx"
        if m.get("quantized") == "qdq" and path.exists() and (not only or m["id"] in only):
            out.append({"model": m["id"], "form": "qdq (wild)", "file": str(path), "float": None, "inputs": None})
    return out


def _keras_int8() -> dict[str, Any]:
    import tensorflow as tf

    q, f = CACHE / "keras_cnn_int8.tflite", CACHE / "keras_cnn.tflite"
    feeds = CACHE / "keras_cnn.npz"
    if not q.exists():
        tf.keras.utils.set_random_seed(0)
        layers = tf.keras.layers
        model = tf.keras.Sequential([tf.keras.Input((64, 64, 3), batch_size=1), layers.Conv2D(32, 3, padding="same"),
                                     layers.BatchNormalization(), layers.ReLU(), layers.DepthwiseConv2D(3, 2, "same"),
                                     layers.Conv2D(64, 1), layers.ReLU(), layers.Conv2D(64, 3, 2, "same"), layers.ReLU(),
                                     layers.GlobalAveragePooling2D(), layers.Dense(10)])
        rng = np.random.default_rng(3)
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        f.write_bytes(conv.convert())
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([rng.standard_normal((1, 64, 64, 3)).astype(np.float32)] for _ in range(16))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        q.write_bytes(conv.convert())
    if not feeds.exists():
        from translator.frontends import tflite as _  # noqa: F401 - the input name the IR gives
        from translator import frontends

        name = frontends.load(str(q)).graph.inputs[0].name
        np.savez(feeds, **{name: np.random.default_rng(4).standard_normal((1, 64, 64, 3)).astype(np.float32)})
    return {"model": "keras_cnn", "form": "tflite int8", "file": str(q), "float": str(f), "inputs": str(feeds)}


# ---------------------------------------------------------------------------- is it quantized?
def _size(path: Path) -> int:
    """Bytes of what is deployed: the IR (``.xml`` + ``.bin``) of an OpenVINO folder, the
    ``.mlpackage`` of a Core ML folder (not the readable ``builder.py`` and its weight copy),
    else every file."""
    if path.is_file():
        return path.stat().st_size
    files = [p for p in path.rglob("*") if p.is_file()]
    ir = [p for p in files if p.suffix in (".xml", ".bin")]
    pkg = [p for p in files if any(q.suffix == ".mlpackage" for q in p.parents)]
    return sum(p.stat().st_size for p in (ir or pkg or files))


def quantized(target: str, path: Path) -> tuple[bool, str]:
    """(whether the artifact runs / stores integers, how that was read): the target's own
    ``integer_kernels`` (what ``convert`` records). Integer kernels must be all of them; int8
    storage (PyTorch, Core ML), at least half of the weight tensors."""
    from translator.compile.target import get

    k = get(target).integer_kernels(path)
    ok = k.integer * 2 >= k.total > 0 if k.stored else k.integer == k.total > 0
    return ok, k.how


# ---------------------------------------------------------------------------- how fast?
#: targets whose int8 artifact is timed against the float conversion of the same model
TIMED = ("onnx", "tflite", "openvino")


def runner(target: str, path: Path, x: np.ndarray) -> Any:
    """One inference of the artifact at ``path`` on input ``x`` (the model's single input) as a
    zero-argument callable: one thread, in the runtime a user deploys it with and its default
    settings (LiteRT with XNNPACK; OpenVINO's CPU plugin; onnxruntime with every graph
    optimization)."""
    if target == "tflite":
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(str(path), num_threads=1)
        it.allocate_tensors()
        d = it.get_input_details()[0]
        xin = _as_input(x, d["dtype"], d.get("quantization"))

        def once() -> None:
            it.set_tensor(d["index"], xin)
            it.invoke()
        return once
    if target == "openvino":
        from emitters.openvino.runtime import openvino

        ov = openvino()  # telemetry off (see runtime.openvino)

        core = ov.Core()
        xml = next(path.rglob("*.xml")) if path.is_dir() else path
        req = core.compile_model(core.read_model(str(xml)), "CPU", {"INFERENCE_NUM_THREADS": 1}).create_infer_request()
        return lambda: req.infer([x])
    if target == "onnx":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        return lambda: sess.run(None, {name: x})
    raise ValueError(target)


def latency(target: str, paths: dict[str, Path], x: np.ndarray, runs: int = 30) -> dict[str, float]:
    """Median seconds of one inference of each artifact (by key) on ``x``: ``runner`` each,
    timed by the benches' shared ``timed`` (warm-up, then the artifacts called alternately
    ``runs`` times, so a burst of load from elsewhere hits all of them alike)."""
    from peers import timing

    return timing().timed({k: runner(target, p, x) for k, p in paths.items()}, runs)


def _as_input(x: np.ndarray, dtype: Any, quant: Any) -> np.ndarray:
    """``x`` as the tensor a TFLite input takes (quantized by its own parameters if integer)."""
    if np.dtype(dtype).kind == "f":
        return x.astype(dtype)
    scale, zp = quant if quant and quant[0] else (1.0, 0)
    info = np.iinfo(dtype)
    return np.clip(np.rint(x / scale) + zp, info.min, info.max).astype(dtype)


def _one_input(inputs: str | None) -> np.ndarray | None:
    if not inputs:
        return None
    with np.load(inputs, allow_pickle=False) as z:
        arrays = [z[k] for k in z.files]
    return arrays[0] if len(arrays) == 1 else None


def _ov_reader(e: dict[str, Any], work: Path, fout: Path, x: np.ndarray | None) -> dict[str, Any]:
    """The peer on the same file: OpenVINO's own ONNX reader (``ov.convert_model``) saved as
    IR (weights compressed to int8 where it can, its default), then the same inspection, size
    ratio against our float conversion, latency and error against onnxruntime on the file."""
    from emitters.openvino.runtime import openvino

    ov = openvino()  # telemetry off (see runtime.openvino)

    out = work / f"{Path(e['file']).stem}_ov_reader"
    out.mkdir(exist_ok=True)
    try:
        ov.save_model(ov.convert_model(e["file"]), str(out / "model.xml"))
        q, how = quantized("openvino", out)
        cell: dict[str, Any] = {"quantized": q, "how": how, "size_ratio": round(_size(out) / max(_size(fout), 1), 3)}
        if x is not None:
            import onnxruntime as ort

            core = ov.Core()
            got = core.compile_model(core.read_model(str(out / "model.xml")), "CPU",
                                     {"INFERENCE_NUM_THREADS": 1}).create_infer_request().infer([x])
            sess = ort.InferenceSession(e["file"], providers=["CPUExecutionProvider"])
            want = sess.run(None, {sess.get_inputs()[0].name: x})[0]
            cell["max_abs_vs_onnxruntime"] = float(np.max(np.abs(np.asarray(list(got.values())[0], np.float64) - want)))
            cell["ms"] = round(1e3 * latency("openvino", {"peer": out}, x)["peer"], 3)
        return cell
    except Exception as exc:  # noqa: BLE001 - the peer's failure is its cell
        return {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}


#: the peers' own venvs (bench/setup_peer_onnx2tf.sh, bench/setup_peer_tf2onnx.sh)
ONNX2TF_PY = HERE / ".venv-onnx2tf" / "bin" / "python"
TF2ONNX_PY = HERE / ".venv-tf2onnx" / "bin" / "python"
PEER_ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore", "CUDA_VISIBLE_DEVICES": ""}


def _peer_cell(target: str, made: Path, fout: Path, x: np.ndarray | None, want: np.ndarray | None) -> dict[str, Any]:
    """A peer's artifact judged as ours are: integer kernels, size against our float
    conversion, latency, error against the source runtime."""
    q, how = quantized(target, made)
    cell: dict[str, Any] = {"quantized": q, "how": how, "size_ratio": round(_size(made) / max(_size(fout), 1), 3)}
    if x is not None:
        try:
            cell["ms"] = round(1e3 * latency(target, {"peer": made}, x)["peer"], 3)
            if want is not None:
                got = _run_one(target, made, x)
                if got.shape == want.shape:
                    cell["max_abs_vs_source"] = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
                else:
                    cell["max_abs_vs_source"] = f"shape {got.shape} vs {want.shape}"
        except Exception as exc:  # noqa: BLE001 - written but not runnable here (e.g. select TF ops): said
            cell["run_error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:140]}"
    return cell


def _run_one(target: str, path: Path, x: np.ndarray) -> np.ndarray:
    """The first output of the artifact on ``x`` (onnxruntime or LiteRT)."""
    if target == "onnx":
        import onnxruntime as ort

        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return np.asarray(sess.run(None, {sess.get_inputs()[0].name: x})[0])
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(str(path))
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], _as_input(x, d["dtype"], d.get("quantization")))
    it.invoke()
    o = it.get_output_details()[0]
    y = it.get_tensor(o["index"])
    scale, zp = o.get("quantization") or (0.0, 0)
    return (y.astype(np.float64) - zp) * scale if np.dtype(y.dtype).kind in "iu" and scale else y


def _peer_onnx2tf(e: dict[str, Any], work: Path, fout: Path, x: np.ndarray | None) -> dict[str, Any]:
    """onnx2tf on the quantized ONNX file, as its README runs it (``onnx2tf -i model.onnx``,
    without onnxsim, the input kept NCHW): the .tflite it writes for the model as it is
    (``*_float32.tflite``: onnx2tf's own int8 outputs re-calibrate the float graph)."""
    import subprocess

    if not ONNX2TF_PY.is_file():
        return {"error": "onnx2tf's venv is missing (sh bench/setup_peer_onnx2tf.sh)"}
    import onnx
    from peers.onnx2tf import offline_sample_data

    out = work / f"{Path(e['file']).stem}_onnx2tf"
    name = onnx.load(e["file"], load_external_data=False).graph.input[0].name
    out.mkdir(exist_ok=True)
    offline_sample_data(out)
    copy = out / Path(e["file"]).name  # onnx2tf rewrites the file it is given (a com.microsoft op's domain)
    shutil.copyfile(e["file"], copy)
    r = subprocess.run([str(ONNX2TF_PY), "-m", "onnx2tf", "-i", str(copy), "-o", str(out), "-nuo", "-n",
                        "-kat", name], capture_output=True, text=True, env=PEER_ENV, cwd=out, timeout=900)
    made = sorted(out.glob("*_float32.tflite"))
    if r.returncode or not made:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        return {"error": f"onnx2tf: {tail[0][:160]}"}
    want = None
    if x is not None:
        want = _run_one("onnx", Path(e["file"]), x)
    return _peer_cell("tflite", made[0], fout, x, want)


def _peer_tf2onnx(e: dict[str, Any], work: Path, fout: Path, x: np.ndarray | None) -> dict[str, Any]:
    """tf2onnx on the quantized .tflite (``python -m tf2onnx.convert --tflite``)."""
    import subprocess

    if not TF2ONNX_PY.is_file():
        return {"error": "tf2onnx's venv is missing (sh bench/setup_peer_tf2onnx.sh)"}
    made = work / f"{Path(e['file']).stem}_tf2onnx.onnx"
    r = subprocess.run([str(TF2ONNX_PY), "-m", "tf2onnx.convert", "--tflite", e["file"], "--output", str(made)],
                       capture_output=True, text=True, env=PEER_ENV, timeout=900)
    if r.returncode or not made.is_file():
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        return {"error": f"tf2onnx: {tail[0][:160]}"}
    return _peer_cell("onnx", made, fout, x, _run_one("tflite", Path(e["file"]), x) if x is not None else None)


# ---------------------------------------------------------------------------- the run
def _convert(src: str, target: str, out: Path, inputs: str | None, check: bool = True) -> dict[str, Any]:
    import opbridge

    kw: dict[str, Any] = {"inputs": inputs} if inputs and check else {}
    try:
        res = opbridge.convert(src, to=target, out=str(out), check=check, **kw)
        return res["targets"][0]
    except Exception as exc:  # noqa: BLE001 - a refusal is a cell
        return {"status": "failed", "reason": getattr(exc, "code", type(exc).__name__), "detail": str(exc)[:200]}


def _steps(rec: dict[str, Any]) -> str:
    """The check of a quantized output in quantization steps (max, share of exact values)."""
    q = [o["quantization"] for o in (rec.get("check") or {}).get("outputs") or [] if o.get("quantization")]
    if not q:
        return "checked"
    worst, exact = max(x["max_steps"] for x in q), min(x["exact_share"] for x in q)
    return f"max {worst:.2f} steps, {100 * exact:.2f}% exact"


def run(entries: list[dict[str, Any]], targets: list[str], json_out: str | None,
        timed: bool = True, peers: bool = True) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="opbridge_quantized_"))
    try:
        for e in entries:
            row = {**e, "cells": {}}
            try:  # the source itself in its own runtime: how integer the conversions can be
                src = "onnx" if e["file"].endswith(".onnx") else "tflite"
                row["source_kernels"] = quantized(src, Path(e["file"]))[1]
            except Exception as exc:  # noqa: BLE001
                row["source_kernels"] = f"not inspected: {type(exc).__name__}"
            print(f"{e['model']:<24} {e['form']:<12} source     {row['source_kernels']}", flush=True)
            for t in targets:
                t0 = time.perf_counter()
                out = work / f"{Path(e['file']).stem}_{e['form'].replace(' ', '_')}_{t}"
                rec = _convert(e["file"], t, out, e["inputs"])
                cell: dict[str, Any] = {"status": rec.get("status"), "seconds": round(time.perf_counter() - t0, 1)}
                if rec.get("status") != "ok":
                    cell.update(reason=rec.get("reason"), detail=(rec.get("detail") or "")[:160])
                else:
                    cell["check"] = _steps(rec)
                    fell = [w for w in rec.get("warnings") or () if "--float-quantization" in w]
                    if fell:  # convert's fallback: the int8 model failed the check, written in float ops
                        cell["fallback"] = fell[0][:300]
                    try:
                        cell["quantized"], cell["how"] = quantized(t, out)
                    except Exception as exc:  # noqa: BLE001 - the inspection itself failed: said, not hidden
                        cell["quantized"], cell["how"] = False, f"not inspected: {type(exc).__name__}: {str(exc)[:80]}"
                    if e["float"]:
                        fout = work / f"{Path(e['file']).stem}_{e['form'].replace(' ', '_')}_{t}_float"
                        frec = _convert(e["float"], t, fout, None, check=False)
                        if frec.get("status") == "ok":
                            cell["size_ratio"] = round(_size(out) / max(_size(fout), 1), 3)
                            x = _one_input(e["inputs"])
                            if timed and t in TIMED and x is not None:
                                try:
                                    s_ = latency(t, {"int8": out, "float": fout}, x)
                                    q_s, f_s = s_["int8"], s_["float"]
                                    cell.update(ms_int8=round(1e3 * q_s, 3), ms_float=round(1e3 * f_s, 3),
                                                speedup=round(f_s / q_s, 2))
                                except Exception as exc:  # noqa: BLE001 - said in the cell, not hidden
                                    cell["latency_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
                            if t == "openvino" and e["file"].endswith(".onnx"):
                                cell["peer_openvino_reader"] = _ov_reader(e, work, fout, x if timed else None)
                            if peers and t == "tflite" and e["file"].endswith(".onnx"):
                                cell["peer_onnx2tf"] = _peer_onnx2tf(e, work, fout, x if timed else None)
                            if peers and t == "onnx" and e["file"].endswith(".tflite"):
                                cell["peer_tf2onnx"] = _peer_tf2onnx(e, work, fout, x if timed else None)
                row["cells"][t] = cell
                print(f"{e['model']:<24} {e['form']:<12} {t:<10} {_cell(cell)}", flush=True)
            rows.append(row)
            if json_out:
                Path(json_out).write_text(json.dumps({"rows": rows}, indent=1, sort_keys=True))
    finally:  # the artifacts are measured above; gigabytes of them must not outlive the run
        shutil.rmtree(work, ignore_errors=True)
    return rows


def _cell(c: dict[str, Any]) -> str:
    if c.get("status") != "ok":
        return f"✗{c.get('reason')}: {c.get('detail', '')[:80]}"
    ratio = f" {c['size_ratio']:.2f}x" if "size_ratio" in c else ""
    fast = f", {c['ms_int8']:.2f} ms vs float {c['ms_float']:.2f} ms ({c['speedup']:.2f}x)" if "speedup" in c else ""
    peer = c.get("peer_openvino_reader")
    seen = ""
    if peer:
        seen = (f"; OpenVINO's reader: {'q' if peer.get('quantized') else 'f'} {peer.get('size_ratio', 0):.2f}x"
                f" ({peer.get('how')})" + (f", {peer['ms']:.2f} ms, max abs vs ORT {peer['max_abs_vs_onnxruntime']:.3g}"
                                           if "ms" in peer else "")) if "error" not in peer else f"; OpenVINO's reader: {peer['error']}"
    for key, label in (("peer_onnx2tf", "onnx2tf"), ("peer_tf2onnx", "tf2onnx")):
        p = c.get(key)
        if p:
            seen += (f"; {label}: {p['error']}" if "error" in p else
                     f"; {label}: {'q' if p.get('quantized') else 'f'} {p.get('size_ratio', 0):.2f}x ({p.get('how')})"
                     + (f", {p['ms']:.2f} ms" if "ms" in p else "")
                     + (f", max abs vs source {p['max_abs_vs_source']}" if "max_abs_vs_source" in p else "")
                     + (f", does not run: {p['run_error'][:90]}" if "run_error" in p else ""))
    fell = f"; {c['fallback']}" if c.get("fallback") else ""
    return f"{'q' if c.get('quantized') else 'f'}{ratio} ({c.get('how')}; {c.get('check')}{fast}){seen}{fell}"


def summary(rows: list[dict[str, Any]], targets: list[str]) -> str:
    lines = ["", f"{'target':<10} {'converts':>9} {'quantized':>10} {'size ratio (median, max)':>26}"]
    for t in targets:
        cs = [r["cells"][t] for r in rows if t in r["cells"]]
        ok = [c for c in cs if c.get("status") == "ok"]
        q = [c for c in ok if c.get("quantized")]
        ratios = sorted(c["size_ratio"] for c in ok if "size_ratio" in c)
        med = f"{ratios[len(ratios) // 2]:.2f}, {ratios[-1]:.2f}" if ratios else "-"
        lines.append(f"{t:<10} {len(ok):>4}/{len(cs):<4} {len(q):>5}/{len(cs):<4} {med:>26}")
    timed = [(r["model"], r["form"], t, r["cells"][t]) for r in rows for t in targets
             if "speedup" in r["cells"].get(t, {})]
    if timed:
        lines += ["", "int8 artifact vs the float conversion, one thread, median of 30 runs (speedup = float ms / int8 ms):"]
        for t in [t for t in TIMED if t in targets]:
            sp = sorted(c["speedup"] for _, _, tt, c in timed if tt == t)
            if sp:
                faster = sum(1 for v in sp if v > 1)
                lines.append(f"  {t:<10} faster on {faster}/{len(sp)}; speedup min {sp[0]:.2f}, median "
                             f"{sp[len(sp) // 2]:.2f}, max {sp[-1]:.2f}")
    peers = [(r, r["cells"]["openvino"]["peer_openvino_reader"]) for r in rows
             if "peer_openvino_reader" in r["cells"].get("openvino", {})]
    if peers:
        ours_q = sum(1 for r, _ in peers if r["cells"]["openvino"].get("quantized"))
        theirs_q = sum(1 for _, p in peers if p.get("quantized"))
        lines += ["", f"OpenVINO on the same ONNX files: opbridge quantized {ours_q}/{len(peers)}, "
                      f"OpenVINO's own reader {theirs_q}/{len(peers)}"]
        both = [(r["cells"]["openvino"], p) for r, p in peers if "ms" in p and "ms_int8" in r["cells"]["openvino"]]
        if both:
            ratios = sorted(p["ms"] / c["ms_int8"] for c, p in both)
            lines.append(f"  latency, reader ms / opbridge ms: median {ratios[len(ratios) // 2]:.2f} "
                         f"(min {ratios[0]:.2f}, max {ratios[-1]:.2f}) over {len(ratios)}")
    for key, target, label in (("peer_onnx2tf", "tflite", "onnx2tf (ONNX -> TFLite)"),
                               ("peer_tf2onnx", "onnx", "tf2onnx --tflite (TFLite -> ONNX)")):
        got = [(r["cells"][target], r["cells"][target][key]) for r in rows if key in r["cells"].get(target, {})]
        if got:
            ours = sum(1 for c, _ in got if c.get("quantized"))
            theirs = sum(1 for _, p in got if p.get("quantized"))
            errors = sum(1 for _, p in got if "error" in p)
            lines.append(f"{label} on the same files: opbridge quantized {ours}/{len(got)}, the peer {theirs}/{len(got)}"
                         + (f" ({errors} failed)" if errors else ""))
            both = [(c, p) for c, p in got if "ms" in p and "ms_int8" in c]
            if both:
                ratios = sorted(p["ms"] / c["ms_int8"] for c, p in both)
                lines.append(f"  latency, peer ms / opbridge ms: median {ratios[len(ratios) // 2]:.2f} "
                             f"(min {ratios[0]:.2f}, max {ratios[-1]:.2f}) over {len(ratios)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--json", help="write the cells here")
    ap.add_argument("--no-latency", action="store_true", help="skip the timings (int8 vs float, the peer's)")
    ap.add_argument("--no-peers", action="store_true", help="skip onnx2tf and tf2onnx (OpenVINO's reader always runs)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    targets = [t for t in a.targets.split(",") if t]
    rows = run(build(set(a.only.split(",")) if a.only else None), targets, a.json, timed=not a.no_latency, peers=not a.no_peers)
    print(summary(rows, targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
