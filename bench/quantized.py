"""Quantized in, quantized out (issue 24): does a quantized model stay quantized on each target?

The corpus, built here deterministically into ``bench/.cache/quantized/`` (seeded random
weights, no downloads):

* four float ONNX models exported by ``torch.onnx`` — a CNN (conv, BN, ReLU, pool, linear),
  a MobileNet-style net (depthwise separable blocks), a ResNet-style net (residual adds) and
  an MLP — each quantized by onnxruntime's ``quantize_static`` as QDQ per tensor, QDQ per
  channel and QOperator, and the MLP by ``quantize_dynamic`` too;
* a Keras CNN converted by TensorFlow's converter to a full-int8 ``.tflite`` (representative
  data, int8 kernels, float I/O);
* nine architectures of the zoo (``ZOO``: five timm CNNs, ConvNeXt, ViT, BERT, an LSTM; the
  static torch.onnx exports of ``bench/zoo_models.py``) quantized by onnxruntime: per-channel
  QDQ and QOperator for the CNNs, per-channel QDQ and ``quantize_dynamic`` for the
  transformers, QDQ and dynamic for the LSTM;
* four Keras applications (``KERAS``, from ``bench/keras_zoo.py``) as TensorFlow's converter
  quantizes them: full int8 with float I/O and dynamic-range (int8 weights);
* every quantized model of the wild corpus in its cache (QDQ, dynamic, int8; ``bench/.cache/wild``),
  on the corpus' own inputs (no float original: no size ratio).

Each quantized model and its float original go to every target with ``opbridge convert``
(the check against the source runtime). Per cell: ``q`` when the artifact is quantized —
TFLite: its CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED / BATCH_MATMUL read int8;
OpenVINO: the CPU plugin's compiled model runs its Convolution / FullyConnected / MatMul in
u8/i8 (runtime precision); ONNX: onnxruntime's optimized session graph has integer kernels
(QLinearConv, QLinearMatMul, QGemm, MatMulInteger, ConvInteger, DynamicQuantize*); PyTorch:
the weights file holds int8 tensors; Core ML: int8 weights (``constexpr_affine_dequantize``
or int8 constants; structural only: Core ML does not run on Linux) — else ``f`` (float) —
then the artifact's size as a ratio of the float model's conversion to the same target (one float
conversion per model and target, shared by its forms), and
the check (``ok``; for an output a DequantizeLinear computes, the error in quantization steps
and the share of exact values the check notes). Totals per target, the acceptance's figures:
how many conversions come out quantized, the size ratios (and how many are <= 0.35x), how many
quantized outputs are within 1 step and >= 99% exact, and of the ops the source runs as integer
kernels in its own runtime, the share the target runs as integer kernels (TFLite: those XNNPACK
takes, plus LiteRT's hybrid kernels) or stores int8 where it has none. A conversion counts as
quantized when it runs as many integer kernels as the source does (int8 storage: half the weight
tensors or more, and as many as the source's integer ops).

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
    python bench/quantized.py --render A.json,B.json   # the summary of runs made in parts
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


def feeds_reader(rng: np.random.Generator, feeds: dict[str, np.ndarray], count: int = 8) -> Any:
    """onnxruntime's calibration data for a model with named inputs ``feeds`` (the zoo's
    ``inputs.npz``): float inputs redrawn from a normal of the same mean and spread, integer
    inputs (token ids, masks) shuffled along their last axis, ``count`` samples from ``rng``."""
    from onnxruntime.quantization import CalibrationDataReader

    def one() -> dict[str, np.ndarray]:
        out = {}
        for k, v in feeds.items():
            if v.dtype.kind == "f":
                out[k] = (v.mean() + v.std() * rng.standard_normal(v.shape)).astype(v.dtype)
            else:
                out[k] = np.take(v, rng.permutation(v.shape[-1]), axis=-1) if v.ndim else v
        return out

    class Data(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = [one() for _ in range(count)]

        def get_next(self):  # noqa: ANN201
            return self.left.pop() if self.left else None

    return Data()


#: architectures of the zoo (``bench/zoo_models.py``, torch.onnx static exports with seeded
#: weights) and the onnxruntime forms each is quantized in: per-channel QDQ (onnxruntime's
#: advice for CNNs) and QOperator for the CNNs, per-channel QDQ and dynamic quantization for
#: the transformers, both static and dynamic for the LSTM
ZOO = {"resnet18": ("qdq_pc", "qop"), "mobilenetv3_small_100": ("qdq_pc", "qop"), "efficientnet_b0": ("qdq_pc", "qop"),
       "ghostnet_100": ("qdq_pc", "qop"), "repvgg_a0": ("qdq_pc", "qop"), "convnext": ("qdq_pc", "qop"),
       "vit": ("qdq_pc", "dynamic"), "bert": ("qdq_pc", "dynamic"), "lstm_2layer": ("qdq", "dynamic")}
#: Keras applications of ``bench/keras_zoo.py`` (random weights, seeded) as TensorFlow's
#: converter quantizes them: full int8 with float I/O, and dynamic-range (int8 weights)
KERAS = ("mobilenet_v3_small", "resnet50", "efficientnet_v2_b0", "convnext_tiny")
ZOO_CACHE = HERE / ".cache" / "zoo"
FORMS = {"qdq": ("QDQ", False), "qdq_pc": ("QDQ", True), "qop": ("QOperator", False)}


def _zoo(only: set[str] | None) -> list[dict[str, Any]]:
    """The zoo architectures quantized by onnxruntime (built once into the cache). A zoo model
    that is not built here (``bench/zoo_models.py build``) is said, not skipped silently."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    out: list[dict[str, Any]] = []
    for name, forms in ZOO.items():
        if only and name not in only:
            continue
        fp, feeds = ZOO_CACHE / name / "ts.onnx", ZOO_CACHE / name / "inputs.npz"
        if not fp.exists():
            print(f"{name:<24} not in the zoo cache ({fp}): build it with bench/zoo_models.py build", flush=True)
            continue
        for form in forms:
            q = CACHE / f"zoo_{name}_{form}.onnx"
            if not q.exists():
                if form == "dynamic":
                    quantize_dynamic(str(fp), str(q), weight_type=QuantType.QInt8)
                else:
                    fmt, per_channel = FORMS[form]
                    with np.load(feeds, allow_pickle=False) as z:
                        data = {k: z[k] for k in z.files}
                    quantize_static(str(fp), str(q), feeds_reader(np.random.default_rng(1), data),
                                    quant_format=getattr(QuantFormat, fmt), per_channel=per_channel,
                                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
            out.append({"model": name, "form": form, "file": str(q), "float": str(fp), "inputs": str(feeds),
                        "family": "zoo"})
    return out


def _keras_apps(only: set[str] | None) -> list[dict[str, Any]]:
    """The Keras applications as TensorFlow's converter quantizes them (built once, each
    conversion in a child process as ``bench/keras_zoo.py`` makes them)."""
    import keras_zoo

    out: list[dict[str, Any]] = []
    for name in KERAS:
        if only and name not in only:
            continue
        meta = keras_zoo.build(name)
        fp = keras_zoo.paths(name)["tflite"]
        feeds = CACHE / f"keras_{name}.npz"
        for form, mode in (("tflite int8", "int8_float_io"), ("tflite dynamic", "int8_weights_only")):
            q = CACHE / f"keras_{name}_{mode}.tflite"
            if not q.exists():
                err = keras_zoo._tflite_child(name, mode, q, tuple(meta["input_shape"]))
                if err:
                    print(f"{name:<24} {form}: TensorFlow's converter failed: {err}", flush=True)
                    continue
            if not feeds.exists():
                from translator import frontends

                iname = frontends.load(str(q)).graph.inputs[0].name
                np.savez(feeds, **{iname: keras_zoo.calibration(tuple(meta["input_shape"]), seed=7)[0]})
            out.append({"model": name, "form": form, "file": str(q), "float": str(fp), "inputs": str(feeds),
                        "family": "keras"})
    return out


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
    out += _zoo(only) + _keras_apps(only)
    return out + _wild(only)


def _wild(only: set[str] | None) -> list[dict[str, Any]]:
    """Every quantized model of the wild corpus (QDQ, dynamic, int8; not the float16 ones) that
    is in its cache (``bench/wild/fetch.py``), with the corpus' own inputs at its first size,
    named as opbridge reads the file. There is no float original to compare sizes with."""
    import wild

    from translator import frontends

    models = HERE / ".cache" / "wild" / "models"
    out: list[dict[str, Any]] = []
    for m in wild.load_corpus():
        if m.get("quantized") not in ("qdq", "dynamic", "int8") or (only and m["id"] not in only):
            continue
        path = next(iter(sorted(models.glob(f"{m['id']}.*"))), None)
        if path is None:
            print(f"{m['id']:<24} not in the wild cache: fetch it with bench/wild/fetch.py", flush=True)
            continue
        feeds = CACHE / f"wild_{m['id']}.npz"
        if not feeds.exists():
            arrays = wild.make_inputs(m, "a")
            have = [i.name for i in frontends.load(str(path)).graph.inputs]
            names = {h: w for w, h in wild.match_names(have, list(arrays)).items()}  # in the model's order
            np.savez(feeds, **{h: arrays[names[h]] for h in have if h in names})
        out.append({"model": m["id"], "form": f"{m['quantized']} (wild)", "file": str(path), "float": None,
                    "inputs": str(feeds), "family": "wild"})
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
    the graph and variables of a SavedModel (not the readable ``assets.extra`` copy), else
    every file."""
    if path.is_file():
        return path.stat().st_size
    files = [p for p in path.rglob("*") if p.is_file()]
    ir = [p for p in files if p.suffix in (".xml", ".bin")]
    pkg = [p for p in files if any(q.suffix == ".mlpackage" for q in p.parents)]
    saved = [p for p in files if p.name == "saved_model.pb" or p.parent.name == "variables"]
    return sum(p.stat().st_size for p in (ir or pkg or saved or files))


def quantized(target: str, path: Path, source: int | None = None) -> tuple[bool, str]:
    """(whether the artifact runs / stores integers, how that was read): the target's own
    ``integer_kernels`` (what ``convert`` records), judged by ``_verdict``."""
    k = _kernels(target, path)
    return _verdict(k, source), k.how


def _verdict(k: Any, source: int | None = None) -> bool:
    """Integer kernels: as many as the source runs in its own runtime (``source``: onnxruntime's
    optimized graph, LiteRT), else all of them; int8 storage (PyTorch, TensorFlow, Core ML, an
    OpenVINO IR without integer layers): at least half of the weight tensors, and as many as
    the source's integer ops."""
    if k.total <= 0 or k.integer <= 0:
        return False
    if k.stored:
        return k.integer * 2 >= k.total and (source is None or k.integer >= min(source, k.total))
    return k.integer >= (min(source, k.total) if source else k.total)


# ---------------------------------------------------------------------------- how fast?
#: targets whose int8 artifact is timed against the float conversion of the same model
TIMED = ("onnx", "tflite", "openvino")


def runner(target: str, path: Path, feeds: dict[str, np.ndarray] | np.ndarray, precision: str | None = None) -> Any:
    """One inference of the artifact at ``path`` on ``feeds`` (the model's inputs by name, in
    its order; an array for a one-input model) as a zero-argument callable: one thread, in the
    runtime a user deploys it with and its default settings (LiteRT with XNNPACK; OpenVINO's
    CPU plugin; onnxruntime with every graph optimization). An input is matched by its name,
    else by its position (converters rename inputs). ``precision``: OpenVINO's inference
    precision hint instead of the plugin's default (which is bf16 for float models on a CPU
    with AVX512_BF16 or AMX)."""
    arrays = list(feeds.values()) if isinstance(feeds, dict) else [feeds]
    named = feeds if isinstance(feeds, dict) else {}

    def pick(names: list[str]) -> list[np.ndarray]:
        return [named[n] if n in named else arrays[i] for i, n in enumerate(names)]

    if target == "tflite":
        from ai_edge_litert.interpreter import Interpreter

        it = Interpreter(str(path), num_threads=1)
        it.allocate_tensors()
        ds = it.get_input_details()
        xs = [_as_input(v, d["dtype"], d.get("quantization")) for v, d in zip(pick([d["name"] for d in ds]), ds)]

        def once() -> None:
            for d, v in zip(ds, xs):
                it.set_tensor(d["index"], v)
            it.invoke()
        return once
    if target == "openvino":
        from emitters.openvino.runtime import openvino

        ov = openvino()  # telemetry off (see runtime.openvino)

        core = ov.Core()
        xml = next(path.rglob("*.xml")) if path.is_dir() else path
        cfg: dict[str, Any] = {"INFERENCE_NUM_THREADS": 1}
        if precision:
            cfg["INFERENCE_PRECISION_HINT"] = precision
        req = core.compile_model(core.read_model(str(xml)), "CPU", cfg).create_infer_request()
        xs = pick([p.get_any_name() for p in req.model_inputs])
        return lambda: req.infer(xs)
    if target == "onnx":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        fd = dict(zip(names, pick(names)))
        return lambda: sess.run(None, fd)
    raise ValueError(target)


def latency(target: str, paths: dict[str, Path], feeds: dict[str, np.ndarray] | np.ndarray,
            runs: int = 30, precision: dict[str, str] | None = None) -> dict[str, float]:
    """Median seconds of one inference of each artifact (by key) on ``feeds``: ``runner`` each,
    timed by the benches' shared ``timed`` (warm-up, then the artifacts called alternately
    ``runs`` times, so a burst of load from elsewhere hits all of them alike)."""
    from peers import timing

    return timing().timed({k: runner(target, p, feeds, (precision or {}).get(k)) for k, p in paths.items()}, runs)


def _source_outputs(path: Path, feeds: dict[str, np.ndarray], alternative: bool) -> dict[str, np.ndarray]:
    """The source model's outputs by name in its own runtime, one thread: the default kernels
    (onnxruntime with every graph optimization: QDQ groups fused into integer kernels; LiteRT
    with XNNPACK), or with ``alternative`` the runtime's other path for the same file
    (onnxruntime with graph optimizations off: each QDQ group run as written, float ops
    between QuantizeLinear/DequantizeLinear; LiteRT's builtin kernels without the delegate)."""
    arrays = list(feeds.values())
    if str(path).endswith(".onnx"):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        if alternative:
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        names = [i.name for i in sess.get_inputs()]
        fd = {n: feeds[n] if n in feeds else arrays[i] for i, n in enumerate(names)}
        return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, fd)))
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES if alternative else OpResolverType.AUTO
    it = Interpreter(str(path), num_threads=1, experimental_op_resolver_type=kind)
    it.allocate_tensors()
    ds = it.get_input_details()
    for i, d in enumerate(ds):
        it.set_tensor(d["index"], _as_input(feeds.get(d["name"], arrays[i]), d["dtype"], d.get("quantization")))
    it.invoke()
    out = {}
    for d in it.get_output_details():
        v = it.get_tensor(d["index"])
        scale, zp = d.get("quantization") or (0.0, 0)
        out[d["name"]] = (v.astype(np.float64) - zp) * scale if v.dtype.kind in "iu" and scale else v
    return out


def source_spread(e: dict[str, Any], rec: dict[str, Any]) -> list[float] | None:
    """How far the source runtime moves from itself between its two kernel paths
    (``_source_outputs``), in steps of each quantized output the check of ``rec`` measured:
    [max steps, share of exact values], the worst output. The floor for any other runtime's
    integer kernels: onnxruntime's fused QDQ kernels and its unfused graph, or LiteRT with and
    without XNNPACK, disagree by this much on the same file and inputs."""
    feeds = _feeds(e["inputs"])
    q = [(i, o.get("name"), o["quantization"]["step"]) for i, o in
         enumerate((rec.get("check") or {}).get("outputs") or []) if o.get("quantization")]
    if not feeds or not q:
        return None
    a = _source_outputs(Path(e["file"]), feeds, False)
    b = _source_outputs(Path(e["file"]), feeds, True)
    worst, exact = 0.0, 1.0
    for i, name, step in q:
        key = name if name in a and name in b else (list(a)[i] if i < len(a) and len(a) == len(b) else None)
        if key is None or np.shape(a[key]) != np.shape(b[key]):
            return None
        err = np.abs(np.asarray(a[key], np.float64) - np.asarray(b[key], np.float64)) / step
        worst = max(worst, float(err.max()) if err.size else 0.0)
        exact = min(exact, 1.0 - float((err > 0.5).mean()) if err.size else 1.0)
    return [round(worst, 3), round(exact, 5)]


def _ov_float_precision() -> str:
    """The inference precision OpenVINO's CPU plugin picks for a float model on this machine."""
    try:
        from emitters.openvino.runtime import openvino

        hint = openvino().Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
        return str(getattr(hint, "type_name", None) or hint)
    except Exception as exc:  # noqa: BLE001 - said, not hidden
        return f"unknown ({type(exc).__name__})"


def _as_input(x: np.ndarray, dtype: Any, quant: Any) -> np.ndarray:
    """``x`` as the tensor a TFLite input takes (quantized by its own parameters if integer)."""
    if np.dtype(dtype).kind == "f":
        return x.astype(dtype)
    scale, zp = quant if quant and quant[0] else (1.0, 0)
    info = np.iinfo(dtype)
    return np.clip(np.rint(x / scale) + zp, info.min, info.max).astype(dtype)


def _feeds(inputs: str | None) -> dict[str, np.ndarray] | None:
    """The inputs file's arrays by name, in its order."""
    if not inputs:
        return None
    with np.load(inputs, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _one_input(inputs: str | None) -> np.ndarray | None:
    feeds = _feeds(inputs)
    return next(iter(feeds.values())) if feeds and len(feeds) == 1 else None


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
    try:
        q, how = quantized(target, made)
    except Exception as exc:  # noqa: BLE001 - written but not even loadable here: the peer's cell says so
        return {"error": f"written, does not load: {type(exc).__name__}: {' '.join(str(exc).split())[:140]}"}
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


def _steps_figures(rec: dict[str, Any]) -> list[float] | None:
    """[max error in quantization steps, share of exact values] over the quantized outputs
    the check measured in steps, or None when no output is quantized."""
    q = [o["quantization"] for o in (rec.get("check") or {}).get("outputs") or [] if o.get("quantization")]
    return [max(x["max_steps"] for x in q), min(x["exact_share"] for x in q)] if q else None


def _kernels(target: str, path: Path) -> Any:
    from translator.compile.target import get

    return get(target).integer_kernels(path)


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
    floats: dict[tuple[str, str], Path | None] = {}
    work = Path(tempfile.mkdtemp(prefix="opbridge_quantized_"))
    try:
        for e in entries:
            row = {**e, "cells": {}}
            try:  # the source itself in its own runtime: how integer the conversions can be
                src = "onnx" if e["file"].endswith(".onnx") else "tflite"
                sk = _kernels(src, Path(e["file"]))
                row["source_kernels"], row["source_ops"] = sk.how, [sk.integer, sk.total]
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
                    cell["steps"] = _steps_figures(rec)
                    if cell["steps"] is not None and "source_spread" not in row:
                        try:
                            row["source_spread"] = source_spread(e, rec)
                        except Exception as exc:  # noqa: BLE001 - said in the row, not hidden
                            row["source_spread_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
                    try:
                        k = _kernels(t, out)
                        cell["quantized"], cell["how"] = _verdict(k, (row.get("source_ops") or [None])[0]), k.how
                        cell["int_ops"] = [k.integer, k.total, bool(k.stored)]
                    except Exception as exc:  # noqa: BLE001 - the inspection itself failed: said, not hidden
                        cell["quantized"], cell["how"] = False, f"not inspected: {type(exc).__name__}: {str(exc)[:80]}"
                    if e["float"]:
                        key = (e["float"], t)  # one float conversion per model and target, for every form
                        if key not in floats:
                            fout = work / f"float{len(floats)}_{Path(e['float']).stem}_{t}"
                            floats[key] = fout if _convert(e["float"], t, fout, None, check=False).get("status") == "ok" else None
                        fout = floats[key]
                        if fout is not None:
                            cell["size_ratio"] = round(_size(out) / max(_size(fout), 1), 3)
                            x = _one_input(e["inputs"])
                            feeds = _feeds(e["inputs"])
                            if timed and t in TIMED and feeds:
                                try:
                                    f32 = {"float_f32": fout} if t == "openvino" else {}
                                    s_ = latency(t, {"int8": out, "float": fout, **f32}, feeds,
                                                 precision={"float_f32": "f32"})
                                    q_s, f_s = s_["int8"], s_["float"]
                                    cell.update(ms_int8=round(1e3 * q_s, 3), ms_float=round(1e3 * f_s, 3),
                                                speedup=round(f_s / q_s, 2))
                                    if f32:  # the float model held to f32 (the plugin's default may be bf16)
                                        cell.update(ms_float_f32=round(1e3 * s_["float_f32"], 3),
                                                    speedup_f32=round(s_["float_f32"] / q_s, 2))
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
            if row.get("source_spread"):
                m_, x_ = row["source_spread"]
                print(f"{e['model']:<24} {e['form']:<12} spread     the source runtime against itself (other kernel "
                      f"path): max {m_:.2f} steps, {100 * x_:.2f}% exact", flush=True)
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
    if "speedup_f32" in c:
        fast += f", float held to f32 {c['ms_float_f32']:.2f} ms ({c['speedup_f32']:.2f}x)"
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
    lines = ["", f"{'target':<10} {'converts':>9} {'quantized':>10} {'size ratio (median, max)':>26} {'<=0.35x':>8}"
                 f" {'<=1 step':>9} {'>=99% exact':>12} {'integer ops':>16}"]
    for t in targets:
        cs = [r["cells"][t] for r in rows if t in r["cells"]]
        ok = [c for c in cs if c.get("status") == "ok"]
        q = [c for c in ok if c.get("quantized")]
        ratios = sorted(c["size_ratio"] for c in ok if "size_ratio" in c)
        med = f"{ratios[len(ratios) // 2]:.2f}, {ratios[-1]:.2f}" if ratios else "-"
        small = f"{sum(r <= 0.35 for r in ratios)}/{len(ratios)}"
        stepped = [c["steps"] for c in ok if c.get("steps")]
        one = f"{sum(m <= 1.0 for m, _ in stepped)}/{len(stepped)}"
        exact = f"{sum(e >= 0.99 for _, e in stepped)}/{len(stepped)}"
        # of the ops the source runs as integer kernels, how many the target does (or stores int8)
        pairs = [(min(c["int_ops"][0], r["source_ops"][0]), r["source_ops"][0]) for r in rows
                 for c in [r["cells"].get(t, {})] if c.get("status") == "ok" and c.get("int_ops") and r.get("source_ops")]
        n_int, n_all = sum(a for a, _ in pairs), sum(b for _, b in pairs)
        share = f"{n_int}/{n_all} ({100 * n_int / n_all:.0f}%)" if n_all else "- (none counted)"
        lines.append(f"{t:<10} {len(ok):>4}/{len(cs):<4} {len(q):>5}/{len(cs):<4} {med:>26} {small:>8} {one:>9}"
                     f" {exact:>12} {share:>16}")
    lines += ["(<=1 step, >=99% exact: over the conversions whose outputs are quantized, in steps of their "
              "quantization, against the source runtime; integer ops: of the ops the source runs as integer "
              "kernels in its own runtime, how many the target runs as integer kernels, or stores int8 where it "
              "has no integer kernels (pytorch, tensorflow, coreml), each conversion capped at the source's count)"]
    spread = [r for r in rows if r.get("source_spread")]
    if spread:
        lines += ["", f"the source runtime against itself, on {len(spread)} models whose outputs are quantized "
                      "(onnxruntime: fused integer kernels vs graph optimizations off; LiteRT: XNNPACK vs its "
                      "builtin kernels): <=1 step on "
                      f"{sum(r['source_spread'][0] <= 1.0 for r in spread)}, >=99% exact on "
                      f"{sum(r['source_spread'][1] >= 0.99 for r in spread)}",
                  f"{'target':<10} {'<=max(1 step, source spread)':>30} {'exact >= min(99%, source own)':>31}"]
        for t in targets:
            got = [(r["cells"][t]["steps"], r["source_spread"]) for r in spread
                   if r["cells"].get(t, {}).get("status") == "ok" and r["cells"][t].get("steps")]
            a_ = sum(c[0] <= max(1.0, s_[0]) for c, s_ in got)
            b_ = sum(c[1] >= min(0.99, s_[1]) for c, s_ in got)
            lines.append(f"{t:<10} {f'{a_}/{len(got)}':>30} {f'{b_}/{len(got)}':>31}")
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
                slower = sorted((c["speedup"], m, f) for m, f, tt, c in timed if tt == t and c["speedup"] <= 1)
                if slower:
                    lines.append("             not faster: " + ", ".join(f"{m} {f} {v:.2f}x" for v, m, f in slower))
                sp32 = sorted(c["speedup_f32"] for _, _, tt, c in timed if tt == t and "speedup_f32" in c)
                if sp32:
                    lines.append(f"             against the float model held to f32 (INFERENCE_PRECISION_HINT; the "
                                 f"plugin's default on this CPU: {_ov_float_precision()}): faster on "
                                 f"{sum(1 for v in sp32 if v > 1)}/{len(sp32)}; speedup min {sp32[0]:.2f}, "
                                 f"median {sp32[len(sp32) // 2]:.2f}, max {sp32[-1]:.2f}")
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
    ap.add_argument("--render", help="comma-separated JSON files of earlier runs (e.g. two halves run side by "
                                     "side): print their summary together instead of running")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    targets = [t for t in a.targets.split(",") if t]
    if a.render:
        rows = [r for f in a.render.split(",") for r in json.loads(Path(f).read_text())["rows"]]
        print(summary(rows, targets))
        return 0
    rows = run(build(set(a.only.split(",")) if a.only else None), targets, a.json, timed=not a.no_latency, peers=not a.no_peers)
    print(summary(rows, targets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
