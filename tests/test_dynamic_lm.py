"""A causal LM's attention mask on TFLite with a dynamic batch and sequence length.

TorchScript exports of the zoo's causal LMs (gpt2, llama, mistral, qwen2, phi) build the
mask at run time from the sequence length (``Range`` -> comparisons -> ``And``) and apply
it as ``Where(allowed, 0, -inf)``; a query row that sees no key (a padding position) gives
``Softmax`` = NaN, which ``IsNaN -> Where`` zeroes. TensorFlow's TFLite converter writes
``-inf`` constants as ``-FLT_MAX``: the row then becomes a uniform softmax and the outputs
differ (``emitters/tflite/infinities.py`` restores them). The model here has that pattern
with key 0 hidden from every query, so query row 0 is always fully masked, whatever the
random inputs; it is checked at batch/seq 1 and 3. It also holds an empty int64 constant
(the exporters' ``Concat`` of an empty shape part), the value whose marking as an output
made the first-divergence search crash on TFLite (``Invalid tensor size.``).
"""
from __future__ import annotations

import types
from pathlib import Path

import numpy as np
import pytest

from translator.ir import dims

INF_NODE = "bias_neg_inf"


def _masked_attention(path: Path) -> Path:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    def const(name: str, value: np.ndarray) -> object:
        return h.make_node("Constant", [], [name], name=name, value=nh.from_array(value, name))

    nodes = [
        const("zero_i", np.array(0, np.int64)), const("one_i", np.array(1, np.int64)),
        const("axis1", np.array(1, np.int64)), const("ax0", np.array([0], np.int64)),
        const("ax1", np.array([1], np.int64)), const("empty", np.zeros((0,), np.int64)),
        const("zero_f", np.array([0.0], np.float32)), const(INF_NODE, np.array([-np.inf], np.float32)),
        h.make_node("Shape", ["x"], ["shape"]),
        h.make_node("Gather", ["shape", "axis1"], ["seq"], axis=0),
        h.make_node("Range", ["zero_i", "seq", "one_i"], ["pos"]),
        h.make_node("Unsqueeze", ["pos", "ax1"], ["qpos"]),  # [seq, 1]
        h.make_node("Unsqueeze", ["pos", "ax0"], ["kpos"]),  # [1, seq]
        h.make_node("LessOrEqual", ["kpos", "qpos"], ["causal"]),
        h.make_node("Greater", ["kpos", "zero_i"], ["not_pad"]),  # key 0 is padding
        h.make_node("And", ["causal", "not_pad"], ["allowed"]),
        h.make_node("Where", ["allowed", "zero_f", INF_NODE], ["bias"]),
        h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        h.make_node("MatMul", ["x", "xt"], ["scores"]),
        h.make_node("Add", ["scores", "bias"], ["masked"]),
        h.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        h.make_node("IsNaN", ["probs"], ["nan"]),
        h.make_node("Where", ["nan", "zero_f", "probs"], ["att"]),
        h.make_node("MatMul", ["att", "x"], ["ctx"]),
        h.make_node("Shape", ["ctx"], ["ctx_shape"]),
        h.make_node("Concat", ["ctx_shape", "empty"], ["same_shape"], axis=0),
        h.make_node("Reshape", ["ctx", "same_shape"], ["y"]),
    ]
    g = h.make_graph(nodes, "masked_attention", [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["batch", "seq", 4])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def _ort(model: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_fully_masked_rows_match_onnxruntime_at_two_sizes(tmp_path):
    import opbridge

    model = _masked_attention(tmp_path / "m.onnx")
    res = opbridge.convert(str(model), to="tflite", out=str(tmp_path / "m.tflite"))
    rec = res["targets"][0]
    assert rec["status"] == "ok", rec
    assert rec["dynamic_dims"]["x"] == ["batch", "seq"], rec
    assert rec["check"]["status"] == "pass", rec
    assert [(s["batch"], s["seq"]) for s in rec["check"]["sizes"]] == [(1, 1), (3, 3)] == \
        [(n, n) for n in dims.CHECK_SIZES], rec
    # the written flatbuffer at a third size: query row 0 sees no key -> zeros, as onnxruntime gives
    from emitters.tflite.runtime import quiet_stderr

    import tensorflow as tf

    with quiet_stderr():
        run = tf.lite.Interpreter(model_path=str(tmp_path / "m.tflite")).get_signature_runner()
    x = np.random.default_rng(1).standard_normal((2, 5, 4)).astype(np.float32)
    with quiet_stderr():
        got = next(iter(run(x=x).values()))
    want = _ort(model, x)
    assert np.all(want[:, 0] == 0) and np.all(got[:, 0] == 0), got[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_first_divergence_names_the_saturated_constant(tmp_path, monkeypatch):
    """Without the restore, the check fails and names the ``-inf`` constant (the marked
    model, empty constant included, runs on TFLite at the dynamic sizes)."""
    import opbridge
    from emitters.tflite import infinities

    monkeypatch.setattr(infinities, "restore", lambda flat, artifact: flat)
    model = _masked_attention(tmp_path / "m.onnx")
    res = opbridge.convert(str(model), to="tflite", out=str(tmp_path / "m.tflite"))
    rec = res["targets"][0]
    assert rec["status"] == "check_failed", rec
    fd = rec["check"]["first_divergence"]
    assert fd is not None and "error" not in fd, fd
    assert (fd["node"], fd["op"], fd["reason"]) == (INF_NODE, "constant", "infinities differ"), fd


def test_ambiguous_extremes_stay_saturated_with_a_warning():
    from emitters.tflite import infinities

    art = types.SimpleNamespace(weights={"a": np.array([-np.inf, 1], np.float32),
                                         "b": np.array([-infinities.FLT_MAX], np.float32)},
                                source="", warnings=[])
    flat = np.array([-infinities.FLT_MAX], np.float32).tobytes()
    assert infinities.restore(flat, art) == flat
    assert len(art.warnings) == 1 and "-inf" in art.warnings[0], art.warnings
    art2 = types.SimpleNamespace(weights={"a": np.array([1.0], np.float32)}, source="x = float('-inf')", warnings=[])
    assert infinities._signs(art2) == ({-1}, set())


@pytest.mark.parametrize("literal", ["3.4028234663852886e+38", "tf.float32.max"])
def test_finite_extreme_in_source_is_ambiguous(literal):
    from emitters.tflite import infinities

    art = types.SimpleNamespace(weights={}, source=f"a = float('inf')\nb = {literal}", warnings=[])
    assert infinities._signs(art) == ({1}, {1, -1})
