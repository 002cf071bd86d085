"""The TFLite frontend: models written by TensorFlow's own converter, checked against LiteRT.

Every model here is built by ``tf.lite.TFLiteConverter`` (float32 and full-integer int8 with a
representative dataset of random inputs), read by ``translator/frontends/tflite.py`` and
checked with ``translator.run.check.check_model`` on several targets, where the LiteRT
interpreter's outputs on the original file decide (``source_mismatch`` otherwise).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

tf = pytest.importorskip("tensorflow")  # noqa: F841 - installed in the venv; the models are built with it

#: onnxruntime 1.32's QDQS8ToU8Transformer rewrites an int8 QuantizeLinear of opset >= 21 into
#: a node ORT's own type inference rejects ("output_dtype INT8 does not match y_zero_point type UINT8")
def _keras_to_tflite(model, path: Path, int8: str | None = None, shape=None) -> Path:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        rng = np.random.default_rng(0)

        def rep():
            for _ in range(16):
                yield [rng.standard_normal(shape).astype(np.float32)]

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if int8 in ("io", "uint8"):
            conv.inference_input_type = conv.inference_output_type = tf.int8 if int8 == "io" else tf.uint8
    elif shape == "float16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    path.write_bytes(conv.convert())
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("tflite")
    tf.keras.utils.set_random_seed(7)
    L = tf.keras.layers
    cnn = tf.keras.Sequential([tf.keras.Input((12, 12, 3), batch_size=1), L.Conv2D(6, 3, padding="same", activation="relu"),
                               L.MaxPool2D(), L.Conv2D(8, 3, strides=2, padding="valid", activation="relu"),
                               L.Flatten(), L.Dense(5)])
    dw = tf.keras.Sequential([tf.keras.Input((9, 9, 4), batch_size=1),
                              L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, activation="relu6"),
                              L.AveragePooling2D(2, padding="same"), L.GlobalAveragePooling2D()])
    a = tf.keras.Input((4, 6), batch_size=1, name="left")
    b = tf.keras.Input((4, 6), batch_size=1, name="right")
    c = L.Concatenate(axis=-1)([a, b])
    c = L.Reshape((6, 8))(c)
    c = L.Softmax(axis=-1)(c)
    cat = tf.keras.Model([a, b], [c, L.Add()([a, b])])
    q = tf.keras.Sequential([tf.keras.Input((10, 10, 3), batch_size=1), L.Conv2D(8, 3, padding="same", activation="relu"),
                             L.DepthwiseConv2D(3, padding="same"), L.MaxPool2D(), L.Flatten(), L.Dense(4), L.Softmax()])
    return {
        "cnn": _keras_to_tflite(cnn, d / "cnn.tflite"),
        "dw": _keras_to_tflite(dw, d / "dw.tflite"),
        "cat": _keras_to_tflite(cat, d / "cat.tflite"),
        "int8": _keras_to_tflite(q, d / "int8.tflite", int8="io", shape=(1, 10, 10, 3)),
        "int8_float_io": _keras_to_tflite(q, d / "int8f.tflite", int8="float", shape=(1, 10, 10, 3)),
        "uint8_io": _keras_to_tflite(q, d / "uint8.tflite", int8="uint8", shape=(1, 10, 10, 3)),
        "float16_weights": _keras_to_tflite(q, d / "fp16.tflite", shape="float16"),
    }


def _check(path: Path, backends: list[str], options: dict[str, dict] | None = None) -> dict:
    """Each backend's report against LiteRT on the source; ``options``: a backend's conversion
    options (``{"onnx": {"float_quantization": True}}``)."""
    from translator.compile.pipeline import compile
    from translator.run.check import check_model, model_loader

    load = model_loader(str(path))
    made = {b: compile(load(), b, **o).artifact for b, o in (options or {}).items()}
    res = check_model(load, backends, source=str(path), artifacts=made)
    assert res["source"] == "LiteRT interpreter", res["source"]
    return {r.backend: r for r in res["backends"]}


def _assert_pass(reports: dict, backend: str) -> None:
    r = reports[backend]
    assert r.status == "pass", f"{backend}: {r.reason} {r.detail} {r.first_divergence}"
    assert all(o.vs_source is not None and o.vs_source.ok for o in r.outputs)


# ----------------------------------------------------------------------------- the table is the mapping
def test_every_handler_resolves_in_the_reverse_index():
    from translator.frontends import tflite_ops
    from translator.table.loader import load_tables

    rev = load_tables().reverse_index("tflite")
    assert [b for b in tflite_ops.HANDLERS if b not in rev] == []
    assert tflite_ops.check_handlers() == []  # each builtin's IR op is one of its cells


# ----------------------------------------------------------------------------- float models
def test_cnn_matches_litert_on_four_targets(models):
    reports = _check(models["cnn"], ["numpy", "onnx", "pytorch", "openvino"])
    for b in reports:
        _assert_pass(reports, b)


def test_cnn_transposes_cancel(models):
    from translator.frontends import tflite
    from translator.compile.pipeline import compile

    m = tflite.load(str(models["cnn"]))
    before = sum(1 for n in m.graph.nodes if n.op == "transpose")
    after = sum(1 for n in compile(m, "onnx").model.graph.nodes if n.op == "transpose")
    # two convolutions and a pool, each wrapped in two; left: the input's NHWC→NCHW and the one before Flatten's reshape
    assert (before, after) == (6, 2)


def test_depthwise_and_pooling(models):
    reports = _check(models["dw"], ["numpy", "onnx"])
    for b in reports:
        _assert_pass(reports, b)


def test_signature_names_and_order_are_kept(models):
    from translator.frontends import tflite

    m = tflite.load(str(models["cat"]))
    assert sorted(v.name for v in m.graph.inputs) == ["left", "right"]
    _, outs, sd = tflite.io_names(tflite.read_model(str(models["cat"]))[1])
    assert sd is not None and [v.name for v in m.graph.outputs] == [n for _, n in outs]
    reports = _check(models["cat"], ["numpy", "onnx"])
    for b in reports:
        _assert_pass(reports, b)


# ----------------------------------------------------------------------------- quantized models
def test_int8_model_is_carried_as_qdq(models):
    from translator.frontends import tflite

    m = tflite.load(str(models["int8"]))
    hist = m.op_histogram()
    assert hist.get("quantize_linear", 0) >= 4 and hist.get("dequantize_linear", 0) >= 4
    assert [v.type.dtype for v in m.graph.inputs] == ["int8"] and [v.type.dtype for v in m.graph.outputs] == ["int8"]
    atol = json.loads(m.metadata["opbridge.source_atol"])
    assert list(atol) == [m.graph.outputs[0].name]


def _openvino_int8(which: str) -> object:
    from translator.ir import cpu

    # measured on an AMD EPYC with AVX2 and no VNNI (2026-12-01): OpenVINO 2026's first integer
    # convolution of these two came out up to 91 (float input) and 10 (uint8 input) steps off LiteRT,
    # the int8-input one exact; on a CPU with VNNI all three matched LiteRT
    marks = [] if cpu.exact_int8_products() or which == "int8" else [pytest.mark.xfail(
        strict=True, reason=f"OpenVINO's integer convolution on {cpu.describe()} is not LiteRT's exact product")]
    return pytest.param(which, marks=marks, id=which)


@pytest.mark.parametrize("which", [_openvino_int8(w) for w in ["int8", "int8_float_io", "uint8_io"]])
def test_int8_matches_litert(models, which):
    reports = _check(models[which], ["numpy", "openvino"])
    _assert_pass(reports, "numpy")
    _assert_pass(reports, "openvino")


def test_a_mismatch_of_openvinos_int8_kernels_names_the_cpu(models):
    """Where OpenVINO's integer kernels part from LiteRT on a CPU without VNNI, the check says
    which CPU it ran on and why that matters; on a CPU with VNNI the model passes."""
    from translator.ir import cpu

    r = _check(models["int8_float_io"], ["openvino"])["openvino"]
    if cpu.exact_int8_products():
        assert r.status == "pass", (r.reason, r.detail)
    else:
        assert r.status == "fail" and any("without VNNI" in n and "OpenVINO" in n for n in r.notes), r.notes


def test_float16_weights_become_casts(models):
    from translator.frontends import tflite

    assert tflite.load(str(models["float16_weights"])).op_histogram().get("cast", 0) >= 3
    reports = _check(models["float16_weights"], ["numpy", "onnx"])
    for b in reports:
        _assert_pass(reports, b)


def test_int8_on_onnxruntime(models):
    """onnxruntime's QDQS8ToU8Transformer rejects int8 QuantizeLinear at opset >= 21; opbridge
    turns it off (translator.ir.ort_run.DISABLED_OPTIMIZERS)."""
    _assert_pass(_check(models["int8_float_io"], ["onnx"]), "onnx")


# ----------------------------------------------------------------------------- hostile input
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("damage", ["truncated", "identifier", "empty"])
def test_hostile_files_exit_2_with_one_line_and_write_nothing(models, tmp_path, damage):
    data = models["cnn"].read_bytes()
    bad = tmp_path / "bad.tflite"
    bad.write_bytes({"truncated": data[: len(data) // 3], "identifier": data[:4] + b"XXXX" + data[8:],
                     "empty": b""}[damage])
    out = tmp_path / "out"
    p = _cli("convert", str(bad), "--to", "onnx", "-o", str(out), "--quiet")
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "bad.tflite" in lines[0] and "[bad_model]" in lines[0], p.stderr
    assert not out.exists()


def test_unmapped_builtins_are_all_named_in_one_line(tmp_path):
    from translator.table.errors import FrontendError
    from translator.frontends import tflite

    @tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32), tf.TensorSpec([4], tf.int32)])
    def f(x, seg):
        return tf.math.segment_sum(x, seg), tf.linalg.diag(x)

    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()], f)
    path = tmp_path / "unmapped.tflite"
    path.write_bytes(conv.convert())
    with pytest.raises(FrontendError) as e:
        tflite.load(str(path))
    msg = str(e.value)
    assert e.value.code == "unsupported_op" and "\n" not in msg
    assert "SEGMENT_SUM" in msg and "MATRIX_DIAG" in msg and "node '" in msg


# ----------------------------------------------------------------------------- recurrences: WHILE, UNPACK, hybrid weights
@pytest.fixture(scope="module")
def rnn_models(tmp_path_factory):
    """A Keras LSTM (a WHILE loop in the .tflite), the same with int8 weights only (LiteRT's
    hybrid FULLY_CONNECTED) and an unrolled one (UNPACK of the sequence)."""
    d = tmp_path_factory.mktemp("tflite_rnn")
    tf.keras.utils.set_random_seed(3)
    L = tf.keras.layers
    lstm = tf.keras.Sequential([tf.keras.Input((5, 3), batch_size=1), L.LSTM(6), L.Dense(2)])
    unrolled = tf.keras.Sequential([tf.keras.Input((4, 3), batch_size=1), L.LSTM(5, unroll=True)])
    hybrid = tf.lite.TFLiteConverter.from_keras_model(lstm)
    hybrid.optimizations = [tf.lite.Optimize.DEFAULT]  # no representative data: int8 weights, float activations
    (d / "hybrid.tflite").write_bytes(hybrid.convert())
    return {"lstm": _keras_to_tflite(lstm, d / "lstm.tflite"), "hybrid": d / "hybrid.tflite",
            "unrolled": _keras_to_tflite(unrolled, d / "unrolled.tflite")}


def test_keras_lstm_while_loop_matches_litert_natively_and_unrolled(rnn_models):
    """WHILE → the IR loop (cond inlined before the loop and after the body); ONNX keeps the
    loop, Core ML (no subgraphs in MIL) gets it unrolled: both agree with LiteRT."""
    from translator.frontends import tflite
    from translator.compile.pipeline import compile as compile_to

    m = tflite.load(str(rnn_models["lstm"]))
    (loop,) = [n for n in m.graph.nodes if n.op == "loop"]
    body = loop.attrs["body"]
    assert [v.type.dtype for v in body.inputs[:2]] == ["int64", "bool"] and body.outputs[0].type.dtype == "bool"
    assert "loop" in {n.op for n in compile_to(m, "onnx").model.graph.nodes}
    reports = _check(rnn_models["lstm"], ["onnx", "coreml"])
    for b in reports:
        _assert_pass(reports, b)


def test_hybrid_weights_quantize_the_input_per_row_like_litert(rnn_models):
    """int8 weights with float activations: LiteRT quantizes each input row at run time; the
    IR spells that out, so the result matches LiteRT to float rounding, not to 1e-3."""
    reports = _check(rnn_models["hybrid"], ["onnx"])
    _assert_pass(reports, "onnx")
    assert max(o.vs_source.max_abs for o in reports["onnx"].outputs) < 1e-5


@pytest.mark.parametrize("layer", ["conv1x1", "conv1x1_s2", "conv3x3", "depthwise3x3"])
def test_hybrid_convolutions_quantize_their_input_like_litert(layer, tmp_path):
    """int8 weights (per channel) with float activations on a convolution: LiteRT's builtin
    kernels quantize each batch item at run time, but a 1x1 stride-1 CONV_2D runs on XNNPACK
    as a dynamically quantized fully connected op, quantized per pixel. Two batch items of
    different ranges tell the three granularities apart (per tensor, per batch, per pixel)."""
    L = tf.keras.layers
    tf.keras.utils.set_random_seed(5)
    make = {"conv1x1": lambda: L.Conv2D(48, 1), "conv1x1_s2": lambda: L.Conv2D(48, 1, strides=2),
            "conv3x3": lambda: L.Conv2D(48, 3, padding="same"),
            "depthwise3x3": lambda: L.DepthwiseConv2D(3, padding="same", depth_multiplier=2)}[layer]
    m = tf.keras.Sequential([tf.keras.Input((6, 6, 96), batch_size=2), make()])
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]  # weights > 1024 elements: int8, activations float
    path = tmp_path / f"{layer}.tflite"
    path.write_bytes(conv.convert())
    from translator.frontends import tflite

    model = tflite.load(str(path))
    assert model.metadata.get("opbridge.rounding") == "hybrid"
    # the rounding as the frontend spells it (ONNX's default is onnxruntime's dynamic quantization)
    reports = _check(path, ["onnx", "tflite"], {"onnx": {"float_quantization": True}})
    for b in ("onnx", "tflite"):
        _assert_pass(reports, b)
    assert max(o.vs_source.max_abs for o in reports["onnx"].outputs) < 1e-4


def test_unrolled_lstm_unpack_matches_litert(rnn_models):
    from translator.frontends import tflite

    assert "split" in tflite.load(str(rnn_models["unrolled"])).op_histogram()
    reports = _check(rnn_models["unrolled"], ["onnx"])
    _assert_pass(reports, "onnx")
