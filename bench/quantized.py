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

    python bench/quantized.py [--only cnn,mlp] [--targets onnx,...] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
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


def _calibration(shape: tuple[int, ...], n: int = 8) -> Any:
    from onnxruntime.quantization import CalibrationDataReader

    rng = np.random.default_rng(1)

    class Data(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(n)]

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
                quantize_static(str(fp), str(q), _calibration(shape), quant_format=fmt, per_channel=per_channel,
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
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def quantized(target: str, path: Path) -> tuple[bool, str]:
    """(whether the artifact runs / stores integers, how that was read)."""
    if target == "tflite":
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(str(path))
        types = {t["index"]: t["dtype"] for t in it.get_tensor_details()}
        kernels = [o for o in it._get_ops_details()
                   if o["op_name"] in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL")]
        n = sum(1 for o in kernels if types[o["inputs"][0]] in (np.int8, np.uint8, np.int16))
        return bool(kernels) and n == len(kernels), f"{n}/{len(kernels)} int8 kernels"
    if target == "openvino":
        import openvino as ov

        core = ov.Core()
        xml = next(path.rglob("*.xml")) if path.is_dir() else path
        rt = core.compile_model(core.read_model(str(xml)), "CPU", {"INFERENCE_NUM_THREADS": 1}).get_runtime_model()
        kinds = []
        for op in rt.get_ops():
            info = op.get_rt_info()
            kind = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
            if kind in ("Convolution", "FullyConnected", "MatMul"):
                kinds.append(info["runtimePrecision"].astype(str).lower())
        n = sum(1 for p in kinds if p in ("u8", "i8"))
        return bool(kinds) and n == len(kinds), f"{n}/{len(kinds)} u8/i8 kernels"
    if target == "onnx":
        import onnx
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        with tempfile.TemporaryDirectory() as d:
            so.optimized_model_filepath = os.path.join(d, "opt.onnx")
            ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            ops = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
        integer = sum(1 for o in ops if re.match(r"QLinear|QGemm|MatMulInteger|ConvInteger|DynamicQuantize|MatMulIntegerToFloat", o))
        floats = sum(1 for o in ops if o in ("Conv", "MatMul", "Gemm", "FusedConv", "FusedMatMul", "FusedGemm"))
        return integer > 0 and floats == 0, f"{integer} integer / {floats} float kernels"
    if target == "pytorch":
        from safetensors.numpy import load_file

        ws = load_file(str(next(path.rglob("*.safetensors"))))
        big = [a for a in ws.values() if a.size >= 256]
        n = sum(1 for a in big if a.dtype in (np.int8, np.uint8))
        return bool(big) and n * 2 >= len(big), f"{n}/{len(big)} int8 weights"
    if target == "coreml":
        text = (path / "builder.py").read_text() if (path / "builder.py").exists() else ""
        n = text.count("constexpr_affine_dequantize(")
        layers = sum(text.count(f"mb.{op}(") for op in ("conv", "linear", "matmul"))
        return n > 0 and n >= layers, f"{n} int8 weights / {layers} conv+linear+matmul (structural_only)"
    if target == "tensorflow":
        return False, "float kernels (TensorFlow runs QDQ as float)"
    return False, ""


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


def run(entries: list[dict[str, Any]], targets: list[str], json_out: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="opbridge_quantized_"))
    try:
        for e in entries:
            row = {**e, "cells": {}}
            for t in targets:
                t0 = time.perf_counter()
                out = work / f"{Path(e['file']).stem}_{e['form'].replace(' ', '_')}_{t}"
                rec = _convert(e["file"], t, out, e["inputs"])
                cell: dict[str, Any] = {"status": rec.get("status"), "seconds": round(time.perf_counter() - t0, 1)}
                if rec.get("status") != "ok":
                    cell.update(reason=rec.get("reason"), detail=(rec.get("detail") or "")[:160])
                else:
                    cell["check"] = _steps(rec)
                    try:
                        cell["quantized"], cell["how"] = quantized(t, out)
                    except Exception as exc:  # noqa: BLE001 - the inspection itself failed: said, not hidden
                        cell["quantized"], cell["how"] = False, f"not inspected: {type(exc).__name__}: {str(exc)[:80]}"
                    if e["float"]:
                        fout = work / f"{Path(e['file']).stem}_{e['form'].replace(' ', '_')}_{t}_float"
                        frec = _convert(e["float"], t, fout, None, check=False)
                        if frec.get("status") == "ok":
                            cell["size_ratio"] = round(_size(out) / max(_size(fout), 1), 3)
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
    return f"{'q' if c.get('quantized') else 'f'}{ratio} ({c.get('how')}; {c.get('check')})"


def summary(rows: list[dict[str, Any]], targets: list[str]) -> str:
    lines = ["", f"{'target':<10} {'converts':>9} {'quantized':>10} {'size ratio (median, max)':>26}"]
    for t in targets:
        cs = [r["cells"][t] for r in rows if t in r["cells"]]
        ok = [c for c in cs if c.get("status") == "ok"]
        q = [c for c in ok if c.get("quantized")]
        ratios = sorted(c["size_ratio"] for c in ok if "size_ratio" in c)
        med = f"{ratios[len(ratios) // 2]:.2f}, {ratios[-1]:.2f}" if ratios else "-"
        lines.append(f"{t:<10} {len(ok):>4}/{len(cs):<4} {len(q):>5}/{len(cs):<4} {med:>26}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated model names")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--json", help="write the cells here")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    targets = [t for t in a.targets.split(",") if t]
    rows = run(build(set(a.only.split(",")) if a.only else None), targets, a.json)
    print(summary(rows, targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
