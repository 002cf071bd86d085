"""Mechanisms found on the wild corpus (``bench/wild``), each on a small model of the same pattern
built here (never the downloaded files):

* a TFLite model whose inputs ``shape_signature`` declares dynamic (openWakeWord's mel front end,
  ``[-1, -1]``) keeps those dims symbolic, checked at two sizes against LiteRT;
* MediaPipe's custom op ``Convolution2DTransposeBias`` (selfie / hair segmentation) is a
  transposed convolution with bias: against a NumPy transcription of MediaPipe's kernel, and
  against LiteRT on the same model with TensorFlow's own ``TRANSPOSE_CONV``;
* basic-pitch's normalisation (a dynamic batch, a slice from an offset to the end of a static
  axis, a min reshaped by ``tf.shape`` arithmetic) converts to TFLite and runs at two batches;
* a Keras 2-style ``.h5`` with an unknown batch keeps it as the symbolic ``batch``;
* a SavedModel whose object graph holds optimizer slot variables (Keras 2 ``model.save`` with a
  compiled optimizer) is read through its serving MetaGraph (and ``DivNoNan`` spelled out).
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")
flatbuffers = pytest.importorskip("flatbuffers")


def _tflite(fn, specs, path: Path) -> Path:
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function(*specs)], fn)
    path.write_bytes(conv.convert())
    return path


def _by_target(rec: dict) -> dict:
    return {t["target"]: t for t in rec["targets"]}


def _assert_ok(rec: dict, targets: list[str]) -> None:
    by = _by_target(rec)
    for t in targets:
        assert by[t]["status"] == "ok", (t, by[t].get("reason"), by[t].get("detail"), by[t].get("check"))


# ---------------------------------------------------------------------------- 1. shape_signature
@pytest.fixture(scope="module")
def mel_like(tmp_path_factory) -> Path:
    """openWakeWord's melspectrogram pattern: [batch, samples] both -1, framed by a strided conv
    (SAME), squeezed, projected, log-compressed, normalised by the global max."""
    rng = np.random.default_rng(0)
    frames = tf.constant(rng.standard_normal((8, 1, 6)).astype(np.float32))  # width 8, 1 → 6 channels
    proj = tf.constant(rng.standard_normal((6, 4)).astype(np.float32))

    @tf.function
    def mel(x):
        y = tf.expand_dims(x, -1)  # [b, n, 1]
        y = tf.nn.conv1d(y, frames, stride=2, padding="SAME")  # [b, ceil(n/2), 6]
        y = tf.squeeze(tf.expand_dims(y, 1), [1])
        y = tf.matmul(y * y, proj)
        y = tf.math.log(tf.maximum(y, 1e-3))
        return y[:, 1:, :] - tf.reduce_max(y)

    d = tmp_path_factory.mktemp("mel")
    return _tflite(mel, [tf.TensorSpec([None, None], tf.float32, name="x")], d / "mel.tflite")


def test_tflite_shape_signature_dims_stay_symbolic(mel_like):
    from translator.frontends import tflite

    m = tflite.load(str(mel_like))
    (x,) = m.graph.inputs
    assert x.type.shape == ("x_d0", "x_d1")  # not the interpreter's default (1, 1)


def test_tflite_dynamic_dims_check_at_two_sizes_against_litert(mel_like, tmp_path):
    import opbridge

    rec = opbridge.convert(str(mel_like), to="onnx,tflite,openvino", out=str(tmp_path / "out"),
                           check_dims={"x_d0": (1, 3), "x_d1": (40, 67)})
    _assert_ok(rec, ["onnx", "tflite", "openvino"])
    by = _by_target(rec)
    assert by["onnx"]["check"]["sizes"] == [{"x_d0": 1, "x_d1": 40}, {"x_d0": 3, "x_d1": 67}]
    assert not by["onnx"].get("fixed_dims") and not by["tflite"].get("fixed_dims")


def test_reshape_to_shape_arithmetic_keeps_the_declared_static_dims(tmp_path):
    """A squeeze-excite block under a dynamic batch (EfficientNet in the ewn embedding model):
    the pooled vector is reshaped to ``[tf.shape(x)[0], 1, 1, C]``, computed; the tensor's
    declared static dims (1, 1, C) type the result, so the 1x1 conv after it converts to TFLite."""
    import keras
    import opbridge

    L = keras.layers
    keras.utils.set_random_seed(5)
    i = keras.Input((10, 8, 6), name="input_1")
    x = L.Conv2D(12, 3, padding="same", activation="swish")(i)
    s = L.Reshape((1, 1, 12))(L.GlobalAveragePooling2D()(x))
    s = L.Conv2D(4, 1, activation="swish")(s)
    s = L.Conv2D(12, 1, activation="sigmoid")(s)
    model = keras.Model(i, L.Multiply()([x, s]))
    path = tmp_path / "se.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    rec = opbridge.convert(str(path), to="onnx,tflite,openvino", out=str(tmp_path / "out"),
                           check_dims={"input_1_d0": (1, 2)})
    _assert_ok(rec, ["onnx", "tflite", "openvino"])


# ---------------------------------------------------------------------------- 2. Convolution2DTransposeBias
def _to_custom(src: Path, dst: Path, builtin: str, custom: str, edit=None) -> Path:
    """``src`` (TensorFlow's TFLite converter output) with its one ``builtin`` op rewritten as the
    custom op ``custom`` (``edit(op, options)`` then rewrites its inputs and custom options)."""
    from translator.frontends.tflite import read_model

    s, model, _ = read_model(src)
    codes = model.operatorCodes
    names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
    code = s.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = s.BuiltinOperator.CUSTOM
    code.customCode, code.version = custom, 1
    codes.append(code)
    done = 0
    for op in model.subgraphs[0].operators:
        c = codes[op.opcodeIndex]
        if names.get(max(int(c.builtinCode or 0), int(c.deprecatedBuiltinCode or 0))) != builtin:
            continue
        options = op.builtinOptions
        op.opcodeIndex = len(codes) - 1
        op.builtinOptionsType, op.builtinOptions = 0, None
        if edit is not None:
            edit(op, options, s)
        done += 1
    assert done == 1
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    dst.write_bytes(bytes(b.Output()))
    return dst


def _as_mediapipe_custom(src: Path, dst: Path) -> Path:
    """``src`` with its TRANSPOSE_CONV rewritten as MediaPipe writes it: custom op
    Convolution2DTransposeBias, inputs (x, OHWI weights, bias), the raw
    TfLiteTransposeConvParams struct (padding SAME = 1, stride_width, stride_height) as options."""

    def edit(op, o, s):
        shape_i, w_i, x_i, b_i = (list(op.inputs) + [-1])[:4]
        assert b_i >= 0, "TensorFlow's converter fused the bias into TRANSPOSE_CONV"
        pad = {s.Padding.SAME: 1, s.Padding.VALID: 2}[o.padding]
        op.inputs = [x_i, w_i, b_i]
        op.customOptions = list(struct.pack("<iii", pad, o.strideW, o.strideH))
        op.customOptionsFormat = 0

    return _to_custom(src, dst, "TRANSPOSE_CONV", "Convolution2DTransposeBias", edit)


def _mediapipe_kernel(x: np.ndarray, w: np.ndarray, bias: np.ndarray, stride: tuple[int, int], same: bool) -> np.ndarray:
    """MediaPipe's TransposeConvBias (transpose_conv_bias.cc), in NumPy: output size
    s·(in − 1) + k − pad with SAME's pad = max(0, k − (in − 1) mod s − 1); out = in·s − pad // 2 + f."""
    n, ih, iw, _ = x.shape
    oc, kh, kw, _ = w.shape
    sh, sw = stride
    ph = max(0, kh - (ih - 1) % sh - 1) if same else 0
    pw = max(0, kw - (iw - 1) % sw - 1) if same else 0
    oh, ow = sh * (ih - 1) + kh - ph, sw * (iw - 1) + kw - pw
    out = np.broadcast_to(bias.astype(np.float64), (n, oh, ow, oc)).copy()
    for y in range(ih):
        for xx in range(iw):
            for fy in range(kh):
                for fx in range(kw):
                    oy, ox = y * sh - ph // 2 + fy, xx * sw - pw // 2 + fx
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[:, oy, ox, :] += x[:, y, xx, :].astype(np.float64) @ w[:, fy, fx, :].T.astype(np.float64)
    return out.astype(np.float32)


def _deconv_model(d: Path, hw: int, k: int, padding: str, stride: int = 2) -> tuple[Path, np.ndarray, np.ndarray]:
    """x [1, hw, hw, 3] → Conv2DTranspose(4, k, stride, padding, bias) → TFLite (TRANSPOSE_CONV)."""
    rng = np.random.default_rng(hw * 10 + k)
    w_hwoi = rng.standard_normal((k, k, 4, 3)).astype(np.float32)  # tf.nn.conv2d_transpose's filter
    bias = rng.standard_normal(4).astype(np.float32)
    out = hw * stride if padding == "SAME" else (hw - 1) * stride + k

    @tf.function
    def deconv(x):
        y = tf.nn.conv2d_transpose(x, w_hwoi, [1, out, out, 4], stride, padding=padding)
        return tf.nn.bias_add(y, bias)

    path = _tflite(deconv, [tf.TensorSpec([1, hw, hw, 3], tf.float32, name="x")], d / f"deconv_{hw}_{k}_{padding}.tflite")
    return path, np.ascontiguousarray(w_hwoi.transpose(2, 0, 1, 3)), bias  # OHWI


def _reference(path: Path, x: np.ndarray) -> np.ndarray:
    from translator.compile import interpreter
    from translator.frontends import tflite
    from translator.run.harness import convert

    m = tflite.load(str(path))
    return np.asarray(interpreter.run(convert("numpy", m), {m.graph.inputs[0].name: x}, {})[0])


@pytest.mark.parametrize("hw,k,padding", [(6, 2, "SAME"), (6, 3, "SAME"), (5, 3, "VALID")])
def test_convolution2d_transpose_bias_is_a_transposed_conv(tmp_path, hw, k, padding):
    """Where MediaPipe's sizes are TensorFlow's (even inputs, VALID), the custom op's IR equals
    LiteRT running TensorFlow's own TRANSPOSE_CONV, and MediaPipe's kernel in NumPy."""
    from ai_edge_litert.interpreter import Interpreter

    src, w_ohwi, bias = _deconv_model(tmp_path, hw, k, padding)
    custom = _as_mediapipe_custom(src, tmp_path / "custom.tflite")
    x = np.random.default_rng(1).standard_normal((1, hw, hw, 3)).astype(np.float32)
    it = Interpreter(model_path=str(src))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    expected = it.get_tensor(it.get_output_details()[0]["index"])
    got = _reference(custom, x)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _mediapipe_kernel(x, w_ohwi, bias, (2, 2), padding == "SAME"), rtol=1e-5, atol=1e-5)


def test_convolution2d_transpose_bias_odd_size_follows_mediapipe(tmp_path):
    """An odd input with SAME: MediaPipe's output is s·(in − 1) + k − pad (9 for 5, k 3, s 2),
    not TensorFlow's in·s, cropped pad // 2 at the start (NumPy transcription of the kernel)."""
    src, w_ohwi, bias = _deconv_model(tmp_path, 5, 3, "SAME")
    custom = _as_mediapipe_custom(src, tmp_path / "custom.tflite")
    x = np.random.default_rng(2).standard_normal((1, 5, 5, 3)).astype(np.float32)
    want = _mediapipe_kernel(x, w_ohwi, bias, (2, 2), True)
    assert want.shape == (1, 9, 9, 4)
    np.testing.assert_allclose(_reference(custom, x), want, rtol=1e-5, atol=1e-5)


def test_convolution2d_transpose_bias_converts_on_every_target(tmp_path):
    """Checked against LiteRT on the custom-op file itself (its XNNPACK delegate runs it)."""
    import opbridge

    src, _, _ = _deconv_model(tmp_path, 6, 2, "SAME")
    custom = _as_mediapipe_custom(src, tmp_path / "custom.tflite")
    rec = opbridge.convert(str(custom), to="onnx,tflite,openvino", out=str(tmp_path / "out"))
    _assert_ok(rec, ["onnx", "tflite", "openvino"])


def test_convolution2d_transpose_bias_bad_options_are_one_line(tmp_path):
    from translator.frontends import tflite
    from translator.table.errors import FrontendError

    src, _, _ = _deconv_model(tmp_path, 6, 2, "SAME")
    custom = _as_mediapipe_custom(src, tmp_path / "custom.tflite")
    from translator.frontends.tflite import read_model

    s, model, _ = read_model(custom)
    for op in model.subgraphs[0].operators:
        if op.customOptions is not None:
            op.customOptions = list(struct.pack("<ii", 1, 2))  # truncated struct
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(bytes(b.Output()))
    with pytest.raises(FrontendError, match=r"8 bytes of options, 12 expected.*\[bad_model\]"):
        tflite.load(str(bad))


# ---------------------------------------------------------------------------- 3. basic-pitch normalisation
@pytest.fixture(scope="module")
def normalized_log(tmp_path_factory) -> Path:
    """basic-pitch's tail: a dynamic batch, x[:, 3:, :] (a begin past 0 next to the batch's
    whole range), min/max over the other axes reshaped by tf.shape(x)[0], divide_no_nan."""

    @tf.function
    def norm(x):
        y = x[:, 3:, :] * 2.0
        y = tf.math.log(y * y + 1e-10)
        lo = tf.reshape(tf.reduce_min(y, axis=[1, 2]), tf.stack([tf.shape(y)[0], 1, 1]))
        y = y - lo
        hi = tf.reshape(tf.reduce_max(y, axis=[1, 2]), tf.stack([tf.shape(y)[0], 1, 1]))
        return tf.math.divide_no_nan(y, hi)

    d = tmp_path_factory.mktemp("norm")
    return _tflite(norm, [tf.TensorSpec([None, 12, 8], tf.float32, name="x")], d / "norm.tflite")


def test_dynamic_batch_slices_convert_to_tflite_at_two_batches(normalized_log, tmp_path):
    """The batch declared -1 stays dynamic, so TensorFlow's TFLite converter does not fold the
    slice against a batch of 1 ('begin[0] + size[0] cannot exceed dimension length: 1')."""
    import opbridge

    rec = opbridge.convert(str(normalized_log), to="onnx,tflite,openvino", out=str(tmp_path / "out"),
                           check_dims={"x_d0": (1, 3)})
    _assert_ok(rec, ["onnx", "tflite", "openvino"])


def test_strided_slice_to_the_end_of_a_static_dim_ends_at_the_dim(tmp_path):
    """A static model with the same slice: the end of a static axis is the axis' size, not
    INT64_MAX (which TensorFlow's TFLite converter mis-folds next to a begin past 0)."""
    import opbridge

    @tf.function
    def f(x):
        return x[:, 3:, :] * 2.0

    path = _tflite(f, [tf.TensorSpec([1, 12, 8], tf.float32, name="x")], tmp_path / "static.tflite")
    from translator.frontends import tflite

    m = tflite.load(str(path))
    for n in m.graph.nodes:
        if n.op == "slice":
            assert max(int(e) for e in n.inputs[2].const.reshape(-1)) <= 12
    rec = opbridge.convert(str(path), to="tflite", out=str(tmp_path / "s.tflite"))
    _assert_ok(rec, ["tflite"])


# ---------------------------------------------------------------------------- 4. Keras .h5, unknown batch
@pytest.fixture(scope="module")
def keras_h5(tmp_path_factory) -> Path:
    """fer's mini-Xception pattern, input (None, 16, 16, 1): separable convs, batch norm, a
    residual, crops, an upsampling, global pooling, softmax; saved as HDF5."""
    import keras

    L = keras.layers
    keras.utils.set_random_seed(3)
    i = keras.Input((16, 16, 1), name="input_1")
    x = L.Conv2D(8, 3, strides=1, use_bias=False)(i)
    x = L.ReLU()(L.BatchNormalization()(x))
    r = L.Conv2D(16, 1, strides=2, padding="same")(x)
    x = L.SeparableConv2D(16, 3, padding="same")(x)
    x = L.MaxPooling2D(3, strides=2, padding="same")(x)
    x = L.Add()([x, r])
    x = L.Cropping2D(((1, 0), (0, 1)))(x)
    x = L.UpSampling2D()(x)
    x = L.Conv2D(7, 3, padding="same")(x)
    x = L.Flatten()(L.GlobalAveragePooling2D()(x))
    model = keras.Model(i, L.Softmax(name="predictions")(x))
    path = tmp_path_factory.mktemp("h5") / "emotion.h5"
    model.save(str(path))
    return path


def test_keras_h5_unknown_batch_stays_symbolic(keras_h5, tmp_path):
    from translator.frontends import tensorflow

    m = tensorflow.load(str(keras_h5))
    assert m.graph.inputs[0].type.shape == ("batch", 16, 16, 1)
    assert "opbridge.fixed_input_shapes" not in m.metadata and "opbridge.fixed_batch" not in m.metadata


def test_keras_h5_checks_at_batch_4(keras_h5, tmp_path):
    import opbridge

    x = np.random.default_rng(0).random((1, 16, 16, 1), dtype=np.float32)
    np.savez(tmp_path / "a.npz", input_1=x)
    rec = opbridge.convert(str(keras_h5), to="onnx,tflite,openvino", out=str(tmp_path / "out"),
                           example_inputs=str(tmp_path / "a.npz"), check_dims={"batch": (1, 4)})
    _assert_ok(rec, ["onnx", "tflite", "openvino"])
    assert _by_target(rec)["onnx"]["check"]["sizes"] == [{"batch": 1}, {"batch": 4}]


def test_a_batch_the_graph_needs_is_fixed_and_said(tmp_path):
    """A graph that cannot be read under an unknown batch (``tf.range`` over ``tf.shape(x)[0]``:
    Range has no cell, it only folds once the batch is known) is read with the batch fixed, and
    the model says so (``opbridge.fixed_batch``: why; ``opbridge.fixed_input_shapes``: to what)."""
    from translator.frontends import tensorflow

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def f(self, x):
            return {"y": x + tf.cast(tf.range(tf.shape(x)[0]), tf.float32)[:, None]}

    m = M()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.f})
    ir = tensorflow.load(str(tmp_path / "sm"))
    assert ir.graph.inputs[0].type.shape == (1, 4)
    assert "unsupported_op" in ir.metadata["opbridge.fixed_batch"] and "Range" in ir.metadata["opbridge.fixed_batch"]
    assert ir.metadata["opbridge.fixed_input_shapes"] == '{"x": [1, 4]}'


# ---------------------------------------------------------------------------- 5. SavedModel with optimizer slots
def _with_slot_variables(sm: Path) -> None:
    """Rewrite ``sm``'s object graph as Keras 2's ``model.save`` of a compiled model leaves it:
    the ``optimizer`` node (a plain user object once Keras 2 is gone) lists a slot variable of
    the weight, so ``tf.saved_model.load`` calls ``optimizer.add_slot`` on it."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((sm / "saved_model.pb").read_bytes())
    graph = proto.meta_graphs[0].object_graph_def
    root = graph.nodes[0]
    ids = {c.local_name: c.node_id for c in root.children}
    slot = graph.nodes[ids["optimizer"]].slot_variables.add()
    slot.original_variable_node_id = ids["w"]
    slot.slot_name = "m"
    slot.slot_variable_node_id = ids["w_m"]
    (sm / "saved_model.pb").write_bytes(proto.SerializeToString())


@pytest.fixture(scope="module")
def slotted_saved_model(tmp_path_factory) -> Path:
    rng = np.random.default_rng(4)

    class Model(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(rng.standard_normal((6, 3)).astype(np.float32), name="w")
            self.w_m = tf.Variable(np.zeros((6, 3), np.float32), name="w_m")
            self.optimizer = tf.Module()

        @tf.function(input_signature=[tf.TensorSpec([None, 6], tf.float32, name="input_2")])
        def serve(self, x):
            y = tf.matmul(x, self.w)
            peak = tf.reduce_max(tf.abs(y), axis=1, keepdims=True) * tf.cast(tf.reduce_max(x) > 0, tf.float32)
            return {"note": tf.math.divide_no_nan(y, peak)}

    m = Model()
    sm = tmp_path_factory.mktemp("slots") / "sm"
    tf.saved_model.save(m, str(sm), signatures={"serving_default": m.serve})
    _with_slot_variables(sm)
    with pytest.raises(AttributeError, match="add_slot"):
        tf.saved_model.load(str(sm))
    return sm


def test_saved_model_with_optimizer_slots_is_read_from_its_meta_graph(slotted_saved_model, tmp_path):
    import opbridge
    from translator.frontends import tensorflow

    m = tensorflow.load(str(slotted_saved_model))
    assert [v.name for v in m.graph.inputs] == ["input_2"] and [v.name for v in m.graph.outputs] == ["note"]
    assert m.graph.inputs[0].type.shape == ("batch", 6)
    x = np.random.default_rng(5).standard_normal((3, 6)).astype(np.float32)
    x[1] = -np.abs(x[1])  # a row whose divisor is 0: divide_no_nan gives 0
    (got,) = tensorflow.run_source(str(slotted_saved_model), {"input_2": x}, ["note"])
    w = tf.train.load_variable(str(slotted_saved_model / "variables" / "variables"), "w/.ATTRIBUTES/VARIABLE_VALUE")
    y = x @ w
    peak = np.abs(y).max(axis=1, keepdims=True) * float(x.max() > 0)
    np.testing.assert_allclose(got, np.where(peak == 0, 0, y / np.where(peak == 0, 1, peak)), rtol=1e-5, atol=1e-6)
    rec = opbridge.convert(str(slotted_saved_model), to="onnx,tflite,openvino", out=str(tmp_path / "out"),
                           check_dims={"batch": (1, 3)})
    _assert_ok(rec, ["onnx", "tflite", "openvino"])


# ---------------------------------------------------------------------------- 6. TFLite IF
def test_tflite_if_runs_the_branch_its_condition_picks(tmp_path):
    """openWakeWord's wake-word models keep a ``tf.cond`` as a TFLite ``IF`` (two subgraphs on
    the op's inputs after the condition): an IR ``if`` whose branches read the outer values,
    checked against LiteRT with one input set per branch."""
    import opbridge
    from translator.frontends import tflite

    @tf.function
    def gate(x, flag):
        return tf.cond(flag[0] > 0.0, lambda: tf.nn.relu(x) * 2.0 + 1.0,
                       lambda: tf.reduce_sum(x, -1, keepdims=True) - x)

    src = _tflite(gate, [tf.TensorSpec([2, 5], tf.float32, "x"), tf.TensorSpec([1], tf.float32, "flag")],
                  tmp_path / "if.tflite")
    s, model, _ = tflite.read_model(src)
    names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
    assert "IF" in {names.get(max(c.builtinCode, c.deprecatedBuiltinCode)) for c in model.operatorCodes}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5)).astype(np.float32)
    sets = [{"x": x, "flag": np.asarray([1.0], np.float32)}, {"x": x, "flag": np.asarray([-1.0], np.float32)}]
    targets = ["onnx", "pytorch", "tensorflow", "tflite", "openvino"]
    rec = opbridge.convert(str(src), to=",".join(targets), out=str(tmp_path / "out"), inputs=sets)
    _assert_ok(rec, targets)
    assert len(_by_target(rec)["onnx"]["check"]["sizes"]) == 2


# ---------------------------------------------------------------------------- 7. Keras 2 recurrent configs
@pytest.mark.parametrize("layer", ["LSTM", "GRU"])
def test_keras2_recurrent_config_keys_load_and_check(layer, tmp_path):
    """ethnicolr's name classifier (Keras 2.5 .h5): an embedding and an LSTM whose config holds
    ``time_major`` and ``implementation`` (gone in Keras 3) and dropout 0.2 (whose mask draw
    writes a seed variable into the frozen graph): read as inference, checked against
    TensorFlow on the same file."""
    import json

    import h5py
    import keras

    import opbridge

    keras.utils.set_random_seed(4)
    L = keras.layers
    rnn = getattr(L, layer)(12, dropout=0.2, recurrent_dropout=0.2)
    model = keras.Sequential([keras.Input((9,), name="ids"), L.Embedding(30, 8), rnn, L.Dense(4, activation="softmax")])
    path = tmp_path / "names.h5"
    model.save(str(path))
    with h5py.File(path, "r+") as f:  # what Keras 2 wrote into the same layer's config
        cfg = json.loads(f.attrs["model_config"])
        layers = cfg["config"]["layers"]
        (rc,) = [lay["config"] for lay in layers if lay["class_name"] == layer]
        rc.update(time_major=False, implementation=1)
        f.attrs["model_config"] = json.dumps(cfg)
    rec = opbridge.convert(str(path), to="onnx,tflite", out=str(tmp_path / "out"))
    _assert_ok(rec, ["onnx", "tflite"])

    with h5py.File(path, "r+") as f:
        cfg = json.loads(f.attrs["model_config"])
        (rc,) = [lay["config"] for lay in cfg["config"]["layers"] if lay["class_name"] == layer]
        rc["time_major"] = True
        f.attrs["model_config"] = json.dumps(cfg)
    from translator.frontends import tensorflow
    from translator.table.errors import FrontendError

    with pytest.raises(FrontendError, match="time_major=True"):
        tensorflow.load(str(path))


# ---------------------------------------------------------------------------- 8. dims a frontend fixed
def _unknown_time_keras(path: Path, seed: int) -> Path:
    """A Keras model over a spectrogram with an unknown time dim, input (None, 6, None, 1)."""
    import keras

    keras.utils.set_random_seed(seed)
    L = keras.layers
    model = keras.Sequential([keras.Input((6, None, 1), name="spec"), L.Conv2D(2, 3, padding="same"),
                              L.GlobalAveragePooling2D(), L.Dense(3, activation="softmax")])
    model.save(str(path))
    return path


def test_an_input_set_the_frontend_fixed_dims_against_is_skipped_with_the_reason(tmp_path):
    """tempocnn's DeepTemp (Keras 2 .h5, input (None, 40, None, 1)): the TensorFlow frontend
    fixes unknown dims other than the batch from the example inputs. A second input set with
    another length is not fed to artifacts that cannot take it: it is listed as not checked,
    with the shapes, and the first set decides."""
    import opbridge

    path = _unknown_time_keras(tmp_path / "tempo.keras", 5)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "a.npz", spec=rng.standard_normal((1, 6, 8, 1)).astype(np.float32))
    np.savez(tmp_path / "b.npz", spec=rng.standard_normal((1, 6, 5, 1)).astype(np.float32))
    rec = opbridge.convert(str(path), to="onnx", out=str(tmp_path / "out"), example_inputs=str(tmp_path / "a.npz"),
                           inputs=[str(tmp_path / "a.npz"), str(tmp_path / "b.npz")])
    _assert_ok(rec, ["onnx"])
    (why,) = _by_target(rec)["onnx"]["check"]["skipped_inputs"]
    assert "input set 2" in why and "[1, 6, 5, 1]" in why, why


# ---------------------------------------------------------------------------- 9. resource variables
@pytest.fixture(scope="module")
def ring_buffer(tmp_path_factory) -> Path:
    """micro-wake-word's streaming pattern: a variable ring buffer (initialized by CALL_ONCE),
    shifted by one frame per call (READ_VARIABLE, slice, concat, ASSIGN_VARIABLE)."""
    d = tmp_path_factory.mktemp("state")

    class Stream(tf.Module):
        def __init__(self) -> None:
            self.buf = tf.Variable(tf.constant(np.arange(12, dtype=np.float32).reshape(1, 3, 4) / 10))

        @tf.function(input_signature=[tf.TensorSpec([1, 1, 4], tf.float32, name="x")])
        def __call__(self, x):
            new = tf.concat([self.buf[:, 1:], x], axis=1)
            self.buf.assign(new)
            return {"y": tf.reduce_sum(new * 2.0, axis=1)}

    m = Stream()
    tf.saved_model.save(m, str(d / "sm"), signatures=m.__call__.get_concrete_function())
    path = d / "stream.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_saved_model(str(d / "sm")).convert())
    return path


def test_resource_variables_are_state_inputs_and_outputs(ring_buffer, tmp_path):
    import opbridge
    from translator.frontends import tflite
    from translator.ir.state import initial_state

    m = tflite.load(str(ring_buffer))
    assert [v.name for v in m.graph.inputs] == ["x", "Variable"]  # the variable's shared name
    state_in = "Variable"
    assert [v.name for v in m.graph.outputs] == ["y", f"{state_in}_out"]
    np.testing.assert_array_equal(initial_state(m.metadata)[state_in],
                                  np.arange(12, dtype=np.float32).reshape(1, 3, 4) / 10)
    assert any("stateful model" in w for w in m.warnings)
    rec = opbridge.convert(str(ring_buffer), to="onnx,tflite,openvino", out=str(tmp_path / "out"))
    _assert_ok(rec, ["onnx", "tflite", "openvino"])


def test_state_carried_by_the_caller_streams_like_the_interpreter(ring_buffer, tmp_path):
    """Three calls: LiteRT keeps its variable; the ONNX artifact is fed back its state output."""
    import onnxruntime as ort

    import opbridge
    from translator.frontends import tflite
    from translator.ir.state import initial_state

    m = tflite.load(str(ring_buffer))
    state_in = m.graph.inputs[1].name
    rec = opbridge.convert(str(ring_buffer), to="onnx", out=str(tmp_path / "s.onnx"))
    _assert_ok(rec, ["onnx"])
    sess = ort.InferenceSession(str(tmp_path / "s.onnx"))
    interp = tf.lite.Interpreter(model_path=str(ring_buffer))
    run = interp.get_signature_runner()
    state = initial_state(m.metadata)[state_in]
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = rng.standard_normal((1, 1, 4)).astype(np.float32)
        want = run(x=x)["y"]
        y, state = sess.run(["y", f"{state_in}_out"], {"x": x, state_in: state})
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)


def test_unknown_dims_are_read_at_the_first_input_set_without_example_inputs(tmp_path):
    """``convert model.keras --inputs a.npz --inputs b.npz``: a TensorFlow model with unknown
    non-batch dims needs their sizes; the first input set gives them (said), no second flag."""
    import opbridge

    path = _unknown_time_keras(tmp_path / "m.keras", 6)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "a.npz", spec=rng.standard_normal((1, 6, 8, 1)).astype(np.float32))
    said: list[str] = []
    rec = opbridge.convert(str(path), to="onnx", out=str(tmp_path / "out"), inputs=str(tmp_path / "a.npz"),
                           progress=said.append)
    _assert_ok(rec, ["onnx"])
    assert any("first input set" in s for s in said), said


# ---------------------------------------------------------------------------- complex values (RFFT2D)
@pytest.mark.parametrize("reader", ["abs", "real_imag", "cast"])
def test_an_fft_front_end_reads_through_every_target(reader, tmp_path):
    """BirdNET's and wake-word models' spectrogram front ends: framed audio, ``tf.signal.rfft``
    (TFLite's ``RFFT2D``, a complex64 result), then ``COMPLEX_ABS``, ``REAL``/``IMAG`` or a
    ``CAST`` to float (the real part), and a projection. Complex values are read as a last
    dim of (real, imaginary) pairs; every target runs the DFT (a constant DFT-matrix product
    where it has no FFT the emitter writes: Core ML, TensorFlow, TFLite, OpenVINO), checked
    against LiteRT at two batches."""
    import opbridge

    rng = np.random.default_rng(0)
    proj = tf.constant(rng.standard_normal((33, 5)).astype(np.float32))

    @tf.function
    def spec(x):
        frames = tf.signal.frame(x, 64, 32)  # [b, frames, 64]
        c = tf.signal.rfft(frames, fft_length=[64])  # [b, frames, 33] complex64
        if reader == "abs":
            m = tf.abs(c)
        elif reader == "real_imag":
            m = tf.math.real(c) * tf.math.real(c) + tf.math.imag(c)
        else:
            m = tf.cast(c, tf.float32)
        return tf.matmul(m, proj)

    src = _tflite(spec, [tf.TensorSpec([None, 256], tf.float32)], tmp_path / "m.tflite")
    res = opbridge.convert(str(src), to="all", out=str(tmp_path / "out"))
    _assert_ok(res, ["onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml"])


# ---------------------------------------------------------------------------- an unread custom op
def _with_an_unknown_custom_op(src: Path, dst: Path, builtin: str = "TANH", custom: str = "AcmeFrob") -> Path:
    """``src`` with its ``builtin`` op rewritten as a custom op no one has a kernel for (as
    MediaPipe's TransformLandmarks / Landmarks2TransformMatrix are to everyone but MediaPipe)."""
    return _to_custom(src, dst, builtin, custom)


def test_an_unknown_custom_op_is_one_refused_node_in_the_report_and_a_load_error_elsewhere(tmp_path):
    """convert (and any load) refuses the file naming the custom op; report keeps that node as
    an opaque one, typed as the file declares, refuses it on every target with the reason, and
    judges every other node (the conv before it and the pool after it convert)."""
    import json
    import subprocess
    import sys

    from translator.frontends import tflite
    from translator.table.errors import FrontendError

    @tf.function
    def net(x):
        y = tf.math.tanh(tf.nn.conv2d(x, tf.ones([3, 3, 3, 4]), 1, "SAME"))
        return tf.nn.avg_pool2d(y, 2, 2, "VALID")

    src = _tflite(net, [tf.TensorSpec([1, 8, 8, 3], tf.float32, name="x")], tmp_path / "net.tflite")
    path = _with_an_unknown_custom_op(src, tmp_path / "custom.tflite")
    with pytest.raises(FrontendError, match=r"custom op AcmeFrob.*\[unsupported_op\]"):
        tflite.load(str(path))
    m = tflite.load(str(path), keep_unread=True)
    (opaque,) = [n for n in m.graph.nodes if n.op == "opaque"]
    assert opaque.attrs["source_op"] == "custom op AcmeFrob" and opaque.outputs[0].type.shape == (1, 8, 8, 4)
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-m", "translator.cli", "report", str(path), "--json"], capture_output=True,
                       text=True, cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    for backend, b in doc["backends"].items():
        refused = [n for n in b["nodes"] if n["status"] == "unsupported"]
        assert [(n["op"], n["reason"]) for n in refused] == [("custom op AcmeFrob", "unsupported_op")], (backend, refused)
        assert {n["op"] for n in b["nodes"] if n["status"] != "unsupported"} >= {"conv", "average_pool"}, backend
    r = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(path), "--to", "onnx", "-o",
                        str(tmp_path / "out.onnx")], capture_output=True, text=True, cwd=root)
    assert r.returncode == 2 and "AcmeFrob" in r.stderr and not (tmp_path / "out.onnx").exists(), r.stderr[-500:]
