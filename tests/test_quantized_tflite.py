"""Full-int8 TFLite models (TensorFlow's converter: int8 I/O, per-axis weights) on every target.

A small Keras net (conv, depthwise conv, add, average pool, 1x1 conv, hard swish, global
average pool, dense; 8 and 6 channels so per-axis scales matter) is converted to a full-int8 ``.tflite``
with a random representative dataset, then to onnx/pytorch/openvino/coreml with the check
against the LiteRT interpreter. The passes that make this exact are tested on their own:
``passes.requantize`` (integer convolutions, average pools and hard swish as LiteRT computes them),
``passes.transposes`` (a name keeps its layout when a transpose sinks below its producer),
``passes.legalize_dtypes`` (widening int8 to int32 keeps -128 and 127).
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

_HAVE_TF = importlib.util.find_spec("tensorflow") is not None
_HAVE_LITERT = importlib.util.find_spec("ai_edge_litert") is not None or _HAVE_TF
needs_tf = pytest.mark.xfail(not (_HAVE_TF and _HAVE_LITERT), strict=True,
                             reason="tensorflow (the converter) and LiteRT (the oracle) are not installed")

TARGETS = {"onnx": "onnxruntime", "pytorch": "torch", "openvino": "openvino", "coreml": "coremltools"}


def _build(path, int8_io: bool = True) -> str:
    import tensorflow as tf

    keras = tf.keras
    keras.utils.set_random_seed(0)
    L = keras.layers
    x = keras.Input((12, 12, 3), batch_size=1)
    a = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    b = L.DepthwiseConv2D(3, padding="same")(a)
    c = L.Add()([a, b])
    d = L.AveragePooling2D(3, strides=2, padding="same")(c)  # border windows average fewer than 9
    e = L.Activation("hard_swish")(L.Conv2D(6, 1)(d))
    f = L.GlobalAveragePooling2D()(e)
    y = L.Dense(5)(f)
    model = keras.Model(x, y)
    rng = np.random.default_rng(0)

    def rep():
        for _ in range(16):
            yield [rng.standard_normal((1, 12, 12, 3)).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if int8_io:
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    with open(path, "wb") as fh:
        fh.write(conv.convert())
    return str(path)


@pytest.fixture(scope="module")
def int8_model(tmp_path_factory):
    if not (_HAVE_TF and _HAVE_LITERT):
        pytest.fail("tensorflow / LiteRT missing")
    return _build(tmp_path_factory.mktemp("int8") / "net.tflite")


@needs_tf
def test_reference_is_litert_exact(int8_model):
    """With ``exact_int8`` the IR (convolutions and average pools rewritten) computes what
    LiteRT's integer kernels do."""
    from translator.run import check
    from translator.compile import interpreter
    from translator.frontends import tflite
    from translator.run.harness import convert

    m = tflite.load(int8_model, exact_int8=True)
    ops = m.op_histogram()
    assert ops.get("conv", 0) >= 4  # 3 convolutions + the average pool's window sum
    assert "hard_swish" not in ops and ops.get("gather", 0) == 1  # the kernel's table
    weights = [n.inputs[1] for n in m.graph.nodes if n.op == "conv"]
    assert all(w.is_const and w.type.dtype == "float32" for w in weights)  # integers, no dequantize on them
    for n in m.graph.nodes:  # every quantization divides by 1: the scale is a float32 product before it
        if n.op == "quantize_linear":
            assert float(np.asarray(n.inputs[1].const)) == 1.0
    feeds = check.random_inputs(m, seed=3)
    feeds = {k: np.random.default_rng(3).integers(-128, 128, size=v.shape).astype(v.dtype) for k, v in feeds.items()}
    expected = interpreter.run(convert("numpy", m.clone()), feeds, {})
    got = tflite.run_source(int8_model, feeds, [v.name for v in m.graph.outputs])
    assert [e.dtype for e in expected] == [np.dtype(np.int8)]
    np.testing.assert_array_equal(expected[0], got[0])


@needs_tf
def test_default_reading_keeps_the_quantized_form(int8_model):
    """By default the int8 tensors stay int8: weights are int8 constants behind a
    dequantization, no integer arithmetic is emulated in float (no rounding table, no scale-1
    quantization)."""
    from translator.frontends import tflite

    m = tflite.load(int8_model)
    assert "opbridge.exact_int8" not in m.metadata
    ops = m.op_histogram()
    assert ops.get("hard_swish") == 1 and "gather" not in ops
    for n in m.graph.nodes:
        if n.op == "conv":
            w = n.inputs[1].producer
            assert w is not None and w.op == "dequantize_linear" and w.inputs[0].type.dtype == "int8", n.name


@needs_tf
@pytest.mark.parametrize("exact", [False, True], ids=["qdq", "exact_int8"])
@pytest.mark.parametrize("target", list(TARGETS))
def test_convert_and_check(int8_model, target, exact, tmp_path):
    if importlib.util.find_spec(TARGETS[target]) is None:
        pytest.xfail(f"{TARGETS[target]} is not installed")
    from translator.run.convert import convert

    res = convert(int8_model, target, str(tmp_path / f"net.{target}"), check=True,
                  source_options={"exact_int8": True} if exact else None)
    t = res["targets"][0]
    assert t["status"] == "ok", t
    outs = t["check"]["outputs"]
    assert outs and all(o["ok"] for o in outs), outs
    # integer kernels requantize their own way: within one quantization step of LiteRT;
    # the exact mode's rewrite gives exact agreement
    assert all(o["vs_source"]["max_abs"] <= (0 if exact else 1) for o in outs), outs
    if target == "onnx" and not exact:  # int8 weights, and the integer kernels onnxruntime fuses
        import onnx
        import onnxruntime as ort

        m = onnx.load(t["output"])
        assert {i.data_type for i in m.graph.initializer if len(i.dims) == 4} == {onnx.TensorProto.INT8}
        so = ort.SessionOptions()  # the user's default session: every optimizer on
        so.optimized_model_filepath = str(tmp_path / "opt.onnx")
        ort.InferenceSession(t["output"], so, providers=["CPUExecutionProvider"])
        ops = [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
        assert "Conv" not in ops and "Gemm" not in ops and ops.count("QLinearConv") == 3, ops
        assert t["integer_kernels"]["integer"] == t["integer_kernels"]["total"] == 4, t["integer_kernels"]


def _qconv_graph(bias: bool = True):
    """dequantize(x) -> conv(per-axis dequantized weights, int32 bias) -> quantize, by hand."""
    from translator.ir.graph import Graph, Model, TensorType

    rng = np.random.default_rng(1)
    g = Graph("q")
    x = g.add_input("x", TensorType("int8", (1, 3, 5, 5)))
    s_x, z_x = np.float32(0.02), np.int8(-5)
    w = rng.integers(-127, 128, size=(4, 3, 3, 3)).astype(np.int8)
    s_w = (rng.random(4) * 0.01 + 0.001).astype(np.float32)
    dx = g.add_node("dequantize_linear", [x, g.add_constant("sx", np.asarray(s_x), "float32"),
                                          g.add_constant("zx", np.asarray(z_x), "int8")], {},
                    types=[TensorType("float32", (1, 3, 5, 5))]).outputs[0]
    dw = g.add_node("dequantize_linear", [g.add_constant("w", w, "int8"), g.add_constant("sw", s_w, "float32"),
                                          g.add_constant("zw", np.zeros(4, np.int8), "int8")], {"axis": 0},
                    types=[TensorType("float32", w.shape)]).outputs[0]
    ins = [dx, dw]
    b = rng.integers(-3000, 3000, size=4).astype(np.int32)
    if bias:
        ins.append(g.add_node("dequantize_linear", [g.add_constant("b", b, "int32"), g.add_constant("sb", s_x * s_w, "float32"),
                                                    g.add_constant("zb", np.zeros(4, np.int32), "int32")], {"axis": 0},
                              types=[TensorType("float32", (4,))]).outputs[0])
    y = g.add_node("conv", ins, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
                   types=[TensorType("float32", (1, 4, 5, 5))]).outputs[0]
    s_o, z_o = np.float32(0.05), np.int8(3)
    q = g.add_node("quantize_linear", [y, g.add_constant("so", np.asarray(s_o), "float32"),
                                       g.add_constant("zo", np.asarray(z_o), "int8")], {},
                   types=[TensorType("int8", (1, 4, 5, 5))]).outputs[0]
    g.outputs.append(q)
    return Model(g), (s_x, z_x, w, s_w, b if bias else np.zeros(4, np.int64), s_o, z_o)


@pytest.mark.parametrize("bias", [True, False])
def test_requantize_conv_is_integer_exact(bias):
    """acc = conv(q - zp, w) + b in integers; y = round_half_even(acc * f32(f32(s_x*s_w)/s_out)) + zp."""
    from translator.compile import interpreter
    from translator.compile.passes import requantize

    m, (s_x, z_x, w, s_w, b, s_o, z_o) = _qconv_graph(bias)
    assert requantize.run(m.graph) == 1
    assert "dequantize_linear" not in {n.op for n in m.graph.nodes if n.op == "conv"}
    xq = np.random.default_rng(2).integers(-128, 128, size=(1, 3, 5, 5)).astype(np.int8)
    got = interpreter.run(m, {"x": xq}, {})[0]
    xp = np.pad(xq.astype(np.int64) - int(z_x), [(0, 0), (0, 0), (1, 1), (1, 1)])
    acc = np.zeros((1, 4, 5, 5), np.int64)
    for i in range(5):
        for j in range(5):
            acc[0, :, i, j] = np.tensordot(w.astype(np.int64), xp[0, :, i:i + 3, j:j + 3], axes=([1, 2, 3], [0, 1, 2]))
    acc += b.reshape(1, 4, 1, 1)
    mult = ((np.float32(s_x) * s_w).astype(np.float32) / np.float32(s_o)).astype(np.float32)
    want = np.clip(np.rint(acc.astype(np.float32) * mult.reshape(1, 4, 1, 1)) + int(z_o), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(got, want)


def test_requantize_leaves_other_patterns():
    """A conv whose output is also read in float (not only quantized) is not rewritten."""
    from translator.compile.passes import requantize

    m, _ = _qconv_graph()
    conv = next(n for n in m.graph.nodes if n.op == "conv")
    m.graph.outputs.append(conv.outputs[0])
    before = sorted(n.op for n in m.graph.nodes)
    assert requantize._match(m.graph, conv) is None
    requantize.run(m.graph)  # only the quantization's division becomes a product by the reciprocal
    assert conv.inputs[1].producer.op == "dequantize_linear"
    assert sorted(n.op for n in m.graph.nodes) == sorted(before + ["mul"])


def test_average_pool_rounds_half_away_from_zero():
    """LiteRT's int8 average pool: (sum + count/2) / count truncated, over the in-bounds elements."""
    from translator.compile import interpreter
    from translator.ir.graph import Graph, Model, TensorType
    from translator.compile.passes import requantize

    g = Graph("p")
    x = g.add_input("x", TensorType("int8", (1, 2, 4, 4)))
    s, z = np.float32(0.1), np.int8(-3)
    dx = g.add_node("dequantize_linear", [x, g.add_constant("s", np.asarray(s), "float32"), g.add_constant("z", np.asarray(z), "int8")],
                    {}, types=[TensorType("float32", (1, 2, 4, 4))]).outputs[0]
    p = g.add_node("average_pool", [dx], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                          "count_include_pad": 0}, types=[TensorType("float32", (1, 2, 2, 2))]).outputs[0]
    q = g.add_node("quantize_linear", [p, g.add_constant("s2", np.asarray(s), "float32"), g.add_constant("z2", np.asarray(z), "int8")],
                   {}, types=[TensorType("int8", (1, 2, 2, 2))]).outputs[0]
    g.outputs.append(q)
    m = Model(g)
    assert requantize.run(g) == 1
    xq = np.random.default_rng(5).integers(-128, 128, size=(1, 2, 4, 4)).astype(np.int8)
    got = interpreter.run(m, {"x": xq}, {})[0]
    want = np.zeros((1, 2, 2, 2), np.int64)
    for c in range(2):
        for i in range(2):
            for j in range(2):
                win = xq[0, c, max(2 * i - 1, 0):2 * i + 2, max(2 * j - 1, 0):2 * j + 2].astype(np.int64)
                acc, n = int(win.sum()), win.size
                want[0, c, i, j] = (acc + n // 2) // n if acc > 0 else -((-acc + n // 2) // n)
    np.testing.assert_array_equal(got, want.astype(np.int8))


def test_sunk_transpose_keeps_the_name_and_layout():
    """quantize(transpose(x)) -> transpose(quantize(x)): the name stays on the value in the old layout."""
    from translator.ir.graph import Graph, TensorType
    from translator.compile.passes import transposes

    g = Graph("t")
    x = g.add_input("x", TensorType("float32", (1, 2, 3, 4)))
    t = g.add_node("transpose", [x], {"perm": [0, 2, 3, 1]}, types=[TensorType("float32", (1, 3, 4, 2))]).outputs[0]
    q = g.add_node("quantize_linear", [t, g.add_constant("s", np.asarray(0.1, np.float32), "float32"),
                                       g.add_constant("z", np.asarray(0, np.int8), "int8")], {},
                   outputs=["named"], types=[TensorType("int8", (1, 3, 4, 2))]).outputs[0]
    r = g.add_node("relu", [q], {}, types=[TensorType("int8", (1, 3, 4, 2))]).outputs[0]
    g.outputs.append(r)
    transposes.run(g)
    named = next(v for n in g.nodes for v in n.outputs if v.name == "named")
    assert named.producer.op == "transpose" and named.type.shape == (1, 3, 4, 2)


def test_widening_int8_keeps_the_extremes():
    """int8 -> int32 legalization: -128 (a zero point of a ReLU output) and 127 stay."""
    from translator.ir.graph import Graph, TensorType
    from translator.compile.passes import legalize_dtypes

    g = Graph("l")
    x = g.add_input("x", TensorType("float32", (3,)))
    zp = g.add_constant("zp", np.asarray([-128, 0, 127], np.int8), "int8")
    y = g.add_node("quantize_linear", [x, g.add_constant("s", np.asarray([0.1] * 3, np.float32), "float32"), zp],
                   {"axis": 0}, types=[TensorType("int8", (3,))]).outputs[0]
    g.outputs.append(y)
    legalize_dtypes.run(g, "coreml", legal=frozenset({"float32", "int32", "bool"}))
    assert zp.const.dtype == np.int32 and zp.const.tolist() == [-128, 0, 127]


@needs_tf
def test_cli_exact_int8_reaches_the_frontend(int8_model, tmp_path, capsys):
    """``convert --exact-int8``: the written ONNX model holds no int8 weight (LiteRT's integer
    arithmetic written in float ops) and agrees with the interpreter exactly."""
    import json

    import onnx

    from translator.cli.main import main

    out = tmp_path / "exact.onnx"
    assert main(["convert", int8_model, "--to", "onnx", "-o", str(out), "--exact-int8", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)["targets"][0]
    assert all(o["vs_source"]["max_abs"] == 0 for o in rec["check"]["outputs"]), rec
    m = onnx.load(str(out))
    assert onnx.TensorProto.INT8 not in {i.data_type for i in m.graph.initializer if len(i.dims) == 4}


def test_delegated_nodes_are_those_between_each_delegates_inputs_and_outputs():
    """Two XNNPACK partitions around a node it left alone: each DELEGATE node stands for the
    original nodes from its input tensors to its output tensors, no further."""
    from emitters.tflite.runtime import delegated_nodes

    def op(i, name, ins, outs):
        return {"index": i, "op_name": name, "inputs": np.asarray(ins), "outputs": np.asarray(outs)}

    ops = [op(0, "CONV_2D", [0, 10], [1]), op(1, "ADD", [1, 11], [2]),       # partition A: 0 -> 2
           op(2, "CUSTOM", [2], [3]),                                          # left to LiteRT
           op(3, "CONV_2D", [3, 12, -1], [4]), op(4, "SOFTMAX", [4], [5]),      # partition B: 3 -> 5
           op(5, "DELEGATE", [0], [2]), op(6, "DELEGATE", [3], [5])]
    assert delegated_nodes(ops) == {0, 1, 3, 4}
    assert delegated_nodes(ops[:5]) == set()  # not delegated at all (e.g. no default delegate)
    from emitters.tflite.runtime import delegated_share

    assert delegated_share(ops) == {"nodes": 5, "delegated": 4, "partitions": 2, "left": {"CUSTOM": 1}}
    assert delegated_share(ops[:5]) == {"nodes": 5, "delegated": 0, "partitions": 0,
                                   "left": {"ADD": 1, "CONV_2D": 2, "CUSTOM": 1, "SOFTMAX": 1}}


@needs_tf
def test_integer_kernels_count_only_the_integer_ops_xnnpack_takes(int8_model, tmp_path):
    """A full-int8 model's convolutions and dense layer run in XNNPACK's quantized path; the
    16x8 form (int16 activations) reads integers too, but XNNPACK leaves those kernels to
    LiteRT's reference builtins, and the count says so."""
    import tensorflow as tf

    from emitters.tflite.runtime import integer_kernels

    k = integer_kernels(int8_model)
    assert k.integer == k.total == 4 and "XNNPACK runs 4 of the 4 integer ones" in k.how, k
    keras = tf.keras
    keras.utils.set_random_seed(0)
    L = keras.layers
    x = keras.Input((12, 12, 3), batch_size=1)
    model = keras.Model(x, L.Dense(5)(L.GlobalAveragePooling2D()(L.Conv2D(8, 3, padding="same")(x))))
    rng = np.random.default_rng(0)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([rng.standard_normal((1, 12, 12, 3)).astype(np.float32)] for _ in range(8))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    path = tmp_path / "a16w8.tflite"
    path.write_bytes(conv.convert())
    k = integer_kernels(path)
    assert (k.integer, k.total) == (0, 2) and "2 left to the builtin kernels" in k.how, k


@needs_tf
@pytest.mark.parametrize("int8_io", [True, False], ids=["int8_io", "float_io"])
def test_a_full_int8_tflite_comes_back_as_the_same_integer_kernels(int8_io, tmp_path):
    """TFLite → TFLite: the interface keeps the source's dtypes (int8 I/O stays int8 with the
    source's scale and zero point: the converter is told, not widened to int32 with the first
    and last layers in float), the global average pool is one int8 MEAN over H and W as in the
    source (no transpose before it, not one MEAN per axis, each requantizing), every integer op
    runs in XNNPACK, and the output is LiteRT's on the source: exactly with the int8 interface,
    within a step with float I/O (the float input's quantization is the converter's own)."""
    from ai_edge_litert.interpreter import Interpreter

    from translator.run.convert import convert

    src = _build(tmp_path / "src.tflite", int8_io=int8_io)
    res = convert(src, "tflite", str(tmp_path / "net.tflite"), check=True)
    t = res["targets"][0]
    assert t["status"] == "ok", t
    it = Interpreter(model_path=t["output"])
    ops = [o["op_name"] for o in it._get_ops_details()]
    assert ops.count("MEAN") == 1 and "TRANSPOSE" not in ops, ops
    io = {d["dtype"] for d in it.get_input_details() + it.get_output_details()}
    assert io == ({np.int8} if int8_io else {np.float32}), io
    if int8_io:
        src_in = Interpreter(model_path=src).get_input_details()[0]["quantization"]
        assert it.get_input_details()[0]["quantization"] == src_in
    k = t["integer_kernels"]
    assert k["integer"] == k["total"] == 4 and "XNNPACK runs 4 of the 4" in k["how"], k
    if int8_io:
        assert all(o["vs_source"]["max_abs"] == 0 for o in t["check"]["outputs"]), t["check"]["outputs"]
    else:
        assert all(o["quantization"]["max_steps"] <= 1 for o in t["check"]["outputs"]), t["check"]["outputs"]


@pytest.mark.parametrize("mixed", [False, True], ids=["int8_both_sides", "int8_in_uint8_out_too"])
def test_a_quantized_interface_is_kept_on_both_sides_or_neither(mixed):
    """An int8 input read only by its dequantization and an int8 output of a quantization
    become the fake-quant pairs the converter makes int8 again (the model's names kept). When
    an 8-bit side cannot (a second output in uint8: the converter takes one interface type),
    neither side is rewritten: a streaming model's state would otherwise leave as int32 and
    come back as int8."""
    import json

    from emitters.tflite.quant import QUANTIZED_IO, quantized_interface
    from translator.ir.graph import Graph, Model, TensorType

    g = Graph("io")
    x = g.add_input("x", TensorType("int8", (1, 4)))
    s, z = g.add_constant("s", np.asarray(0.1, np.float32), "float32"), g.add_constant("z", np.asarray(3, np.int8), "int8")
    d = g.add_node("dequantize_linear", [x, s, z], {}, types=[TensorType("float32", (1, 4))]).outputs[0]
    r = g.add_node("relu", [d], {}, types=[TensorType("float32", (1, 4))]).outputs[0]
    y = g.add_node("quantize_linear", [r, s, z], {}, outputs=["y"], types=[TensorType("int8", (1, 4))]).outputs[0]
    g.outputs = [y]
    if mixed:
        zu = g.add_constant("zu", np.asarray(128, np.uint8), "uint8")
        g.outputs.append(g.add_node("quantize_linear", [r, s, zu], {}, outputs=["y2"],
                                    types=[TensorType("uint8", (1, 4))]).outputs[0])
    m = Model(g)
    done = quantized_interface(m)
    if mixed:
        assert done == {} and QUANTIZED_IO not in (m.metadata or {}) and x.type.dtype == "int8"
        return
    assert done == {"inputs": "int8", "outputs": "int8"} == json.loads(m.metadata[QUANTIZED_IO])
    assert x.type.dtype == "float32" and x.uses[0][0].op == "quantize_linear"
    assert [v.name for v in g.outputs] == ["y"] and g.outputs[0].producer.op == "dequantize_linear"


def _dynamic_range(tmp_path) -> tuple[Path, Path]:
    """A Keras net of a depthwise conv, two convs and a dense layer as TensorFlow's converter
    writes it without representative data (dynamic range: int8 weights, float activations,
    LiteRT's hybrid kernels), and its float conversion: the two paths."""
    import tensorflow as tf

    keras = tf.keras
    keras.utils.set_random_seed(0)
    L = keras.layers
    x = keras.Input((16, 16, 128), batch_size=1)
    y = L.DepthwiseConv2D(3, padding="same", activation="relu")(x)  # 1,152 weights: quantized too
    y = L.Dense(10)(L.Flatten()(L.Conv2D(32, 3, strides=2, padding="same", activation="relu")(
        L.Conv2D(32, 3, padding="same", activation="relu")(y))))
    model = keras.Model(x, y)
    flt = tmp_path / "float.tflite"
    flt.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    src = tmp_path / "dynamic.tflite"
    src.write_bytes(conv.convert())
    return src, flt


@needs_tf
def test_a_dynamic_range_tflite_comes_back_with_int8_weights_and_hybrid_kernels(tmp_path):
    """A dynamic-range .tflite (TensorFlow's converter without representative data: int8
    weights, float activations, LiteRT's hybrid kernels) converted to tflite keeps its weights
    int8 and its kernels hybrid (``quantized.weight_only_model``; the frontend's spelled-out
    run-time rounding of their inputs taken out, ``hybrid_as_weight_only``): the same kernels
    as the source (a depthwise one too), LiteRT's own result, a file well under the float
    model's (it was written with float weights and the rounding in float ops). OpenVINO, which
    has no hybrid kernel, takes the inputs unrounded, within twice the source's own rounding."""
    import tensorflow as tf

    from emitters.tflite.runtime import integer_kernels
    from translator.run.convert import convert

    src, flt = _dynamic_range(tmp_path)
    want = integer_kernels(src)
    assert want.integer == want.total == 4 and "4 hybrid" in want.how, want
    t = convert(str(src), "tflite", str(tmp_path / "out.tflite"), check=True)["targets"][0]
    assert t["status"] == "ok", t
    got = integer_kernels(t["output"])
    assert (got.integer, got.total) == (4, 4) and "4 hybrid" in got.how, got
    ops = {o["op_name"] for o in tf.lite.Interpreter(model_path=t["output"])._get_ops_details()}
    # the same kernels, not LiteRT's run-time rounding spelled out around them (hybrid_as_weight_only)
    assert "DEPTHWISE_CONV_2D" in ops and not ops & {"FLOOR", "SIGN", "ABS", "REDUCE_MAX"}, ops
    assert all(o["vs_source"]["max_abs"] < 1e-5 for o in t["check"]["outputs"]), t["check"]["outputs"]
    size = Path(t["output"]).stat().st_size / flt.stat().st_size
    assert size < 0.4, size  # int8 weights (the float model's file is the float weights)
    if importlib.util.find_spec("openvino") is not None:  # no hybrid kernel: int8 weights, float inputs
        ov = convert(str(src), "openvino", str(tmp_path / "ov"), check=True)["targets"][0]
        assert ov["status"] == "ok" and any("dynamic activation rounding" in n for n in ov["check"]["notes"]), ov
        k = ov["integer_kernels"]  # the IR keeps the weights int8; the CPU plugin decompresses them
        assert k["integer"] == k["total"] == 4 and k["stored_only"], k


@needs_tf
def test_a_dynamic_range_tflite_runs_onnxruntimes_integer_kernels_on_onnx(tmp_path, monkeypatch):
    """A dynamic-range .tflite → ONNX: each hybrid layer becomes onnxruntime's own dynamic
    quantization (``quantized.hybrid_as_dynamic_integer``: DynamicQuantizeLinear → ConvInteger /
    MatMulInteger over the source's int8 weights), so onnxruntime runs all four as integer
    kernels (the depthwise one too) as LiteRT does; it was four float kernels over weights
    dequantized when loaded. The check holds it to twice the source's own input rounding.
    ``--float-quantization`` writes LiteRT's rounding in float ops, and convert falls back to
    that when the integer model fails the check (the artifact says ``dynamic_range``)."""
    import onnx

    from emitters.onnx.runtime import integer_kernels
    from translator.run import convert as conv_mod

    src, _ = _dynamic_range(tmp_path)
    t = conv_mod.convert(str(src), "onnx", str(tmp_path / "int.onnx"), check=True)["targets"][0]
    assert t["status"] == "ok", t
    k = integer_kernels(tmp_path / "int.onnx")
    assert k.integer == k.total == 4, k
    ops = {n.op_type for n in onnx.load(str(tmp_path / "int.onnx")).graph.node}
    assert {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"} <= ops and "Floor" not in ops, ops
    t = conv_mod.convert(str(src), "onnx", str(tmp_path / "flt.onnx"), check=True,
                         options={"float_quantization": True})["targets"][0]
    assert t["status"] == "ok" and integer_kernels(tmp_path / "flt.onnx").integer == 0, t
    real, seen = conv_mod._check_at_sizes, []

    def failing(build, tg, feeds, rec, artifact, *rest):
        b = real(build, tg, feeds, rec, artifact, *rest)
        seen.append(sorted(conv_mod._features(artifact)))
        return {**b, "status": "fail"} if seen[-1] else b  # as if the integer kernels had strayed

    monkeypatch.setattr(conv_mod, "_check_at_sizes", failing)
    t = conv_mod.convert(str(src), "onnx", str(tmp_path / "q.onnx"), check=True)["targets"][0]
    assert seen == [["dynamic_range"], []] and t["status"] == "ok", (seen, t)
    assert any("--float-quantization" in w for w in t["warnings"]) and t["integer_kernels"]["integer"] == 0, t


@needs_tf
def test_the_delegated_share_counts_an_int8_models_integer_compute(int8_model):
    """The delegate's share over the nodes that compute values counts a quantized model's
    int8 nodes (it counted float outputs only: an int8-I/O model had none)."""
    from emitters.tflite.runtime import delegation

    d = delegation(int8_model)  # every node computes int8 (its HARD_SWISH is left to the builtin kernels)
    assert d["compute_nodes"] == d["nodes"] >= 5 and d["compute_delegated"] == d["delegated"] > 0, d
