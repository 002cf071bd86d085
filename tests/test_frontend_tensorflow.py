"""The TensorFlow/Keras frontend: SavedModel folders and .keras files in, checked against TensorFlow.

Small Keras models are built once (module fixture), saved both ways, read through the table's
tensorflow column and checked on numpy + onnx with TensorFlow's outputs decisive."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HAVE_TF = importlib.util.find_spec("tensorflow") is not None and importlib.util.find_spec("keras") is not None
needs_tf = pytest.mark.xfail(not HAVE_TF, strict=True, reason="tensorflow/keras are not installed")


def _models() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    layers = keras.layers
    out = {}
    keras.utils.set_random_seed(0)
    i = keras.Input((12,), name="features")
    out["dense"] = keras.Model(i, layers.Dense(6)(layers.Dense(8, activation="relu")(i)))

    i = keras.Input((16, 16, 3), name="image")
    x = layers.Conv2D(8, 3, padding="same", use_bias=False)(i)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(8, 3, strides=2, padding="valid", activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    out["cnn"] = keras.Model(i, layers.Dense(5, activation="softmax")(x))

    i = keras.Input((15, 15, 4), name="image")
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2)(i)
    x = layers.AveragePooling2D(2, padding="same")(x)
    out["depthwise"] = keras.Model(i, layers.SeparableConv2D(6, 3, padding="same", activation="relu6")(x))

    i = keras.Input((8, 16), name="tokens")
    a = layers.MultiHeadAttention(2, 8)(i, i)
    x = layers.LayerNormalization()(i + a)
    x = layers.Dense(16, activation="gelu")(x)
    out["attention"] = keras.Model(i, layers.LayerNormalization()(x + layers.Dense(16)(x)))

    i = keras.Input((6, 6, 4), name="z")
    x = layers.Conv2DTranspose(5, 3, strides=2, padding="same")(i)
    x = layers.Conv2DTranspose(3, 2, strides=2, padding="valid", activation="relu")(x)
    x = layers.UpSampling2D(interpolation="bilinear")(x)
    out["decoder"] = keras.Model(i, layers.UpSampling2D()(x))

    i = keras.Input((10,), dtype="int32", name="ids")  # Embedding, dilated causal Conv1D (SpaceToBatchND), slices
    x = layers.Embedding(20, 8)(i)
    x = layers.Conv1D(6, 3, padding="causal", dilation_rate=2, activation="swish")(x)
    x = layers.LayerNormalization()(layers.MaxPooling1D(2)(x))
    x = layers.Concatenate()([layers.GlobalAveragePooling1D()(x), layers.GlobalMaxPooling1D()(x)])
    out["sequence"] = keras.Model(i, layers.Dense(3, activation="sigmoid")(layers.Reshape((3, 4))(x)[:, 1:, ::-1]))

    i = keras.Input((7, 3), name="seq")
    out["lstm"] = keras.Model(i, layers.LSTM(5)(i))
    i = keras.Input((7, 3), name="seq")
    x = layers.Bidirectional(layers.LSTM(4, return_sequences=True))(i)  # go_backwards: reversed input
    x = layers.GRU(4, return_sequences=True, go_backwards=True)(x)
    out["gru"] = keras.Model(i, layers.Dense(2)(x))

    for name, m in out.items():  # BatchNormalization statistics that are not the identity
        for layer in m.layers:
            if isinstance(layer, layers.BatchNormalization):
                c = layer.moving_mean.shape[0]
                import numpy as np

                rng = np.random.default_rng(1)
                layer.moving_mean.assign(rng.standard_normal(c).astype("float32"))
                layer.moving_variance.assign(rng.uniform(0.5, 2, c).astype("float32"))
    return out


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    if not HAVE_TF:
        pytest.fail("tensorflow is not installed")
    root = tmp_path_factory.mktemp("tf_models")
    paths = {}
    for name, m in _models().items():
        m.save(str(root / f"{name}.keras"))
        m.export(str(root / f"{name}_sm"), verbose=False)
        paths[name] = (str(root / f"{name}.keras"), str(root / f"{name}_sm"))
    return paths


def _check(path: str, backends: list[str]) -> dict:
    from translator.run.check import check_model, model_loader

    res = check_model(model_loader(path), backends, source=path)
    assert res["source"].startswith("TensorFlow"), res["source"]
    for r in res["backends"]:
        assert r.status == "pass", (path, r.backend, r.reason, r.detail)
        for o in r.outputs:
            assert o.vs_source is not None and o.vs_source.ok, (path, r.backend, o.name)
    return res


@needs_tf
@pytest.mark.parametrize("name", ["dense", "cnn", "depthwise", "attention", "decoder", "sequence", "lstm", "gru"])
@pytest.mark.parametrize("form", ["keras", "savedmodel"])
def test_keras_model_matches_tensorflow(saved, name, form):
    path = saved[name][0 if form == "keras" else 1]
    _check(path, ["numpy", "onnx"])


@needs_tf
def test_cnn_other_targets(saved):
    """One model through pytorch, openvino and tflite too (each runtime is installed here)."""
    _check(saved["cnn"][1], ["pytorch", "openvino", "tflite"])


@needs_tf
def test_recurrent_layers_read_as_lstm_and_gru(saved):
    """Keras LSTM/GRU While loops are recognised as the IR's lstm/gru ops (weights from the loop's constants)."""
    from translator.frontends import tensorflow

    assert tensorflow.load(saved["lstm"][0]).op_histogram().get("lstm") == 1
    hist = tensorflow.load(saved["gru"][1]).op_histogram()
    assert hist.get("gru") == 1 and hist.get("lstm") == 2, hist
    _check(saved["lstm"][1], ["pytorch", "openvino"])


@needs_tf
def test_names_and_layout(saved):
    """Signature names are kept; NHWC convolutions read as NCHW IR convs between transposes."""
    from translator.frontends import detect, tensorflow

    keras_path, sm_path = saved["cnn"]
    assert detect(sm_path) is tensorflow and detect(keras_path) is tensorflow
    m = tensorflow.load(sm_path)
    assert [v.name for v in m.graph.inputs] == ["image"]
    assert [v.name for v in m.graph.outputs] == ["output_0"]
    assert m.graph.inputs[0].type.shape == ("batch", 16, 16, 3)  # the unknown batch stays symbolic
    hist = m.op_histogram()
    assert hist["conv"] == 2 and hist["max_pool"] == 1
    assert m.source_format == "tensorflow"


@needs_tf
def test_unmapped_op_is_one_line_and_exit_2(tmp_path):
    """Ops no cell reads (MatrixDeterminant, Digamma): exit 2, one line naming the first node and
    listing every unmapped type, nothing written."""
    import tensorflow as tf

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([2, 3, 3], tf.float32, name="x")])
        def f(self, x):
            return {"y": tf.raw_ops.MatrixDeterminant(input=x) + tf.raw_ops.Digamma(x=x[:, 0, 0])}

    m = M()
    tf.saved_model.save(m, str(tmp_path / "sm"), signatures={"serving_default": m.f})
    out = tmp_path / "out.onnx"
    r = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(tmp_path / "sm"), "--to", "onnx",
                        "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "unsupported_op" in ln]
    assert len(lines) == 1, r.stdout + r.stderr
    assert "MatrixDeterminant" in lines[0] and "Digamma" in lines[0] and "node '" in lines[0]
    assert not out.exists()


@needs_tf
def test_unrecognised_while_loop_is_refused_by_name(tmp_path):
    """A While loop that is not a Keras LSTM/GRU cell is refused naming the node, never guessed."""
    import tensorflow as tf

    from translator.table.errors import FrontendError
    from translator.frontends import tensorflow

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([4], tf.float32, name="x")])
        def f(self, x):
            _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0 + 1.0), (tf.constant(0), x))
            return {"y": y}

    m = M()
    tf.saved_model.save(m, str(tmp_path / "loop"), signatures={"serving_default": m.f})
    with pytest.raises(FrontendError) as e:
        tensorflow.load(str(tmp_path / "loop"))
    msg = str(e.value)
    assert e.value.code == "unsupported_op" and "While" in msg and "node '" in msg and "\n" not in msg


def test_every_handler_resolves_in_the_table():
    """The table is the mapping: every handled TF graph op is read by a cell naming the handler's IR op."""
    from translator.frontends.tensorflow_ops import HANDLERS
    from translator.table.loader import load_tables

    rev = load_tables().reverse_index("tensorflow")
    missing = {tf_op: op for tf_op, (op, _) in HANDLERS.items() if op not in [o for o, _ in rev.get(tf_op, ())]}
    assert not missing, missing


@needs_tf
def test_reads_are_real_tensorflow_ops():
    import tensorflow as tf

    from translator.frontends.tensorflow_ops import HANDLERS

    assert [k for k in HANDLERS if not hasattr(tf.raw_ops, k)] == []


def test_matches_never_imports_tensorflow(tmp_path):
    code = ("import sys; from translator.frontends import tensorflow as t; "
            f"print(t.matches({str(tmp_path)!r}), t.matches('a.keras'), 'tensorflow' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.split() == ["False", "True", "False"], r.stderr


def _rnn_models() -> dict:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras

    layers = keras.layers
    keras.utils.set_random_seed(3)
    out = {}
    i = keras.Input((6, 3), name="seq")  # stacked bidirectional: reversed inputs (ReverseV2), 4 LSTM loops
    x = layers.Bidirectional(layers.LSTM(4, return_sequences=True))(i)
    out["bilstm"] = keras.Model(i, layers.Bidirectional(layers.LSTM(3))(x))
    i = keras.Input((6, 3), name="seq")
    out["lstm_nobias"] = keras.Model(i, layers.LSTM(5, use_bias=False, return_sequences=True)(i))
    i = keras.Input((6, 3), name="seq")
    out["lstm_relu"] = keras.Model(i, layers.LSTM(5, activation="relu")(i))
    i = keras.Input((6, 3), name="seq")  # GRU cells TensorFlow writes differently: no bias; r applied before R
    x = layers.GRU(4, use_bias=False, return_sequences=True)(i)
    out["gru_variants"] = keras.Model(i, layers.GRU(3, reset_after=False)(x))
    i = keras.Input((6, 3), name="seq")  # unroll=True: no loop, Unpack into steps
    out["lstm_unrolled"] = keras.Model(i, layers.LSTM(4, unroll=True)(i))
    return out


@pytest.fixture(scope="module")
def saved_rnn(tmp_path_factory):
    """Recurrent models saved as the Keras benchmark saves them: a SavedModel with a static batch of 1
    (TensorFlow then writes the LSTM cell's sum as BiasAdd(x@W, Squeeze(h@R)) + bias)."""
    if not HAVE_TF:
        pytest.fail("tensorflow is not installed")
    import tensorflow as tf

    root = tmp_path_factory.mktemp("tf_rnn")
    paths = {}
    for name, m in _rnn_models().items():
        shape = tuple(1 if d is None else int(d) for d in m.inputs[0].shape)
        m.save(str(root / f"{name}.keras"))
        m.export(str(root / f"{name}_sm"), verbose=False, input_signature=[tf.TensorSpec(shape, tf.float32, name="seq")])
        paths[name] = (str(root / f"{name}.keras"), str(root / f"{name}_sm"))
    return paths


@needs_tf
@pytest.mark.parametrize("name", ["bilstm", "lstm_nobias"])
@pytest.mark.parametrize("form", ["keras", "savedmodel"])
def test_static_batch_lstm_matches_tensorflow(saved_rnn, name, form):
    """LSTM loops are matched by the cell's structure, not one op list: the .keras form and the
    SavedModel's rewritten sum both read as the IR's lstm (no bias: a zero bias)."""
    from translator.frontends import tensorflow

    path = saved_rnn[name][0 if form == "keras" else 1]
    hist = tensorflow.load(path).op_histogram()
    assert hist.get("lstm") == (4 if name == "bilstm" else 1), hist
    _check(path, ["numpy", "onnx"])


@needs_tf
def test_bidirectional_lstm_savedmodel_other_targets(saved_rnn):
    _check(saved_rnn["bilstm"][1], ["pytorch", "openvino"])


@needs_tf
@pytest.mark.parametrize("form", ["keras", "savedmodel"])
def test_gru_without_bias_and_reset_before_matches_tensorflow(saved_rnn, form):
    """GRU cells are matched by structure too: use_bias=False (zero bias) and reset_after=False
    (the IR's linear_before_reset=0) read as the IR's gru."""
    from translator.frontends import tensorflow

    path = saved_rnn["gru_variants"][0 if form == "keras" else 1]
    m = tensorflow.load(path)
    grus = [n for n in m.graph.nodes if n.op == "gru"]
    assert sorted(n.attrs["linear_before_reset"] for n in grus) == [0, 1], [n.attrs for n in grus]
    _check(path, ["numpy", "onnx"] if form == "keras" else ["pytorch", "openvino"])


@needs_tf
def test_unrolled_lstm_steps_are_typed(saved_rnn):
    """An unrolled LSTM's Unpack (split + squeeze) has its parts typed from TensorFlow's shapes,
    so targets that need every rank (Core ML) take it."""
    from translator.frontends import tensorflow

    m = tensorflow.load(saved_rnn["lstm_unrolled"][1])
    parts = [v for n in m.graph.nodes if n.op == "split" and n.attrs.get("num_outputs") == 6 for v in n.outputs]
    assert parts and all(v.type.shape == (1, 1, 3) and v.type.dtype == "float32" for v in parts), \
        [v.type for v in parts]
    _check(saved_rnn["lstm_unrolled"][0], ["numpy", "coreml"])


@needs_tf
@pytest.mark.parametrize("form", ["keras", "savedmodel"])
def test_lstm_with_other_activation_is_refused(saved_rnn, form):
    """An LSTM whose cell is not the default sigmoid/tanh one is refused naming the loop and why."""
    from translator.table.errors import FrontendError
    from translator.frontends import tensorflow

    with pytest.raises(FrontendError) as e:
        tensorflow.load(saved_rnn["lstm_relu"][0 if form == "keras" else 1])
    msg = str(e.value)
    assert e.value.code == "unsupported_op" and "While" in msg and "node '" in msg, msg
    assert "gate activations" in msg and "Relu x2" in msg and "not a GRU cell" in msg, msg
