"""Dynamic-batch exports once refused although their static export converted (zoo ts-dyn cells):

* a ``Slice`` on an inner axis (CoAtNet's q/k/v split) and a ``Pad`` of the last axis only
  (EfficientViT's ``F.pad(v, (0, 1), value=1)``), whose exported value_info names the batch
  ``unk__N``: shape inference keeps the named ``batch`` it infers (``translator.ir.infer``), so the
  reshape after them knows its output up to the batch and TFLite's conv sees static channels
  (before: ``TFLite builtins lack tf.Conv2D here``);
* a ``ConstantOfShape`` / ``Expand`` to a shape computed from ``Shape(x)`` (EdgeNeXt's
  ``zeros(B, H, W)`` mask, its XCA temperature ``expand``): their outputs take the shape's
  partial value (``passes/shape_values``), for the same reason;
* a reshape to a run-time shape under two symbolic dims: TensorFlow's ``tf.reshape`` gets the
  dims the IR knows as constants, so its shape inference (and TFLite's conv) keeps them;
* a ``Conv`` with ``auto_pad=SAME_UPPER`` (ConvMixer) and an ``AveragePool`` torch cannot pad
  itself: PyTorch needs only the spatial (and channel) dims static, not the batch (before:
  ``input 0 needs a static shape``).

Each model keeps a symbolic batch, converts to the target(s) that refused it and checks at
sizes 1 and 3 (``translator.ir.dims.CHECK_SIZES``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest



def _save(path: Path, nodes: list, x_shape: list, y_shape: list, inits: list, info: dict | None = None) -> Path:
    """``info``: exported value_info (name → shape), as the TorchScript exporter writes it."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    vi = [h.make_tensor_value_info(k, T.FLOAT, s) for k, s in (info or {}).items()]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, y_shape)], inits, value_info=vi)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def _w(name: str, shape: tuple, seed: int) -> object:
    from onnx import numpy_helper as nh

    return nh.from_array((np.random.default_rng(seed).standard_normal(shape) * 0.3).astype(np.float32), name)


def _i64(name: str, v: list) -> object:
    from onnx import TensorProto as T
    from onnx import helper as h

    return h.make_node("Constant", [], [name], value=h.make_tensor(name, T.INT64, [len(v)], v))


def _batch_then(tail: list[int]) -> list:
    """Nodes computing ``sh = Concat(Shape(x)[0], tail)`` (a run-time target shape)."""
    from onnx import helper as h

    return [h.make_node("Shape", ["x"], ["s"]), _i64("i0", [0]), h.make_node("Gather", ["s", "i0"], ["b"], axis=0),
            _i64("tail", tail), h.make_node("Concat", ["b", "tail"], ["sh"], axis=0)]


def _slice_inner_axis(path: Path) -> Path:
    """CoAtNet attention: q, k, v sliced from axis 2, attention, then ``reshape(B, -1, 8, 8)`` from
    ``Shape(x)[0]`` and a 1x1 conv; value_info calls the slices' batch ``unk__N``."""
    from onnx import helper as h

    nodes = _batch_then([-1, 4, 4]) + [
        _i64("a2", [2]), _i64("z", [0]), _i64("e1", [8]), _i64("e2", [16]), _i64("e3", [24]),
        h.make_node("Slice", ["x", "z", "e1", "a2"], ["q"]), h.make_node("Slice", ["x", "e1", "e2", "a2"], ["k"]),
        h.make_node("Slice", ["x", "e2", "e3", "a2"], ["v"]),
        h.make_node("Transpose", ["q"], ["qt"], perm=[0, 1, 3, 2]), h.make_node("MatMul", ["qt", "k"], ["att"]),
        h.make_node("Softmax", ["att"], ["p"], axis=-1), h.make_node("MatMul", ["v", "p"], ["o"]),
        h.make_node("Reshape", ["o", "sh"], ["r"]), h.make_node("Conv", ["r", "Wc"], ["y"], kernel_shape=[1, 1])]
    info = {"q": ["unk__1", 2, 8, 16], "k": ["unk__2", 2, 8, 16], "v": ["unk__3", 2, 8, 16],
            "qt": ["unk__4", 2, 16, 8], "att": ["unk__5", 2, 16, 16], "p": ["unk__5", 2, 16, 16],
            "o": ["unk__6", 2, 8, 16], "r": ["batch", "unk__7", 4, 4]}
    return _save(path, nodes, ["batch", 2, 24, 16], ["batch", 6, 4, 4], [_w("Wc", (6, 16, 1, 1), 1)], info)


def _pad_last_axis(path: Path) -> Path:
    """EfficientViT's lite attention: ``F.pad(v, (0, 1), value=1)`` on the last axis, matmuls, then
    ``reshape(B, -1, 4, 4)`` and a 1x1 conv; value_info calls the padded batch ``unk__N``."""
    from onnx import helper as h

    from onnx import TensorProto as T

    one = h.make_node("Constant", [], ["one"], value=h.make_tensor("one", T.FLOAT, [], [1.0]))
    nodes = _batch_then([-1, 4, 4]) + [
        one, _i64("pads", [0, 0, 0, 0, 0, 0, 0, 1]), h.make_node("Pad", ["x", "pads", "one"], ["vp"]),
        h.make_node("Transpose", ["x"], ["xt"], perm=[0, 1, 3, 2]), h.make_node("MatMul", ["xt", "vp"], ["kv"]),
        h.make_node("MatMul", ["x", "kv"], ["o"]),
        h.make_node("Reshape", ["o", "sh"], ["r"]), h.make_node("Conv", ["r", "Wc"], ["y"], kernel_shape=[1, 1])]
    info = {"vp": ["unk__1", 2, 16, 9], "kv": ["unk__2", 2, 8, 9], "o": ["unk__3", 2, 16, 9],
            "r": ["batch", "unk__4", 4, 4]}
    return _save(path, nodes, ["batch", 2, 16, 8], ["batch", 5, 4, 4], [_w("Wc", (5, 18, 1, 1), 2)], info)


def _constant_of_shape_mask(path: Path) -> Path:
    """EdgeNeXt's positional encoding: ``mask = ones(B, H, W)`` from ``Shape(x)[[0, 2, 3]]``, its
    running sum, broadcast with x, then ``reshape(B, -1, H, W)`` (B from ``Shape(x)``) and a 1x1
    conv: the product's batch must be known as x's for the ``-1`` to solve to the channels."""
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Shape", ["x"], ["s"]), _i64("bhw", [0, 2, 3]), h.make_node("Gather", ["s", "bhw"], ["sh"]),
             h.make_node("ConstantOfShape", ["sh"], ["m"], value=h.make_tensor("v", T.FLOAT, [1], [1.0])),
             _i64("ax", [1]), h.make_node("CumSum", ["m", "ax"], ["cs"]), h.make_node("Unsqueeze", ["cs", "ax"], ["u"]),
             h.make_node("Mul", ["x", "u"], ["p"]),
             _i64("z", [0]), _i64("one", [1]), _i64("m1", [-1]), _i64("hw", [6, 6]),
             h.make_node("Slice", ["s", "z", "one"], ["b"]), h.make_node("Concat", ["b", "m1", "hw"], ["sh4"], axis=0),
             h.make_node("Reshape", ["p", "sh4"], ["r"]), h.make_node("Conv", ["r", "Wc"], ["y"], kernel_shape=[1, 1])]
    info = {"m": ["unk__0", "unk__1", "unk__2"], "cs": ["unk__0", "unk__1", "unk__2"],
            "u": ["unk__0", 1, "unk__1", "unk__2"], "p": ["unk__3", 3, "unk__4", "unk__5"],
            "r": ["unk__3", "unk__6", 6, 6]}
    return _save(path, nodes, ["batch", 3, 6, 6], ["batch", 2, 6, 6], [_w("Wc", (2, 3, 1, 1), 3)], info)


def _expand_to_shape_of(path: Path) -> Path:
    """EdgeNeXt's XCA temperature: ``t.expand(B, C, N, W)`` from ``Shape(x)``, then
    ``reshape(B, -1, 4, 4)`` and a 1x1 conv."""
    from onnx import helper as h

    nodes = [h.make_node("Shape", ["x"], ["s"]), _i64("z", [0]), _i64("three", [3]), _i64("w", [8]),
             h.make_node("Slice", ["s", "z", "three"], ["lead"]), h.make_node("Concat", ["lead", "w"], ["esh"], axis=0),
             h.make_node("Expand", ["x", "esh"], ["e"]), _i64("i0", [0]),
             h.make_node("Gather", ["s", "i0"], ["b"], axis=0), _i64("tail", [-1, 4, 4]),
             h.make_node("Concat", ["b", "tail"], ["sh"], axis=0),
             h.make_node("Reshape", ["e", "sh"], ["r"]), h.make_node("Conv", ["r", "Wc"], ["y"], kernel_shape=[1, 1])]
    info = {"e": ["unk__0", 2, 4, "unk__1"], "r": ["batch", "unk__2", 4, 4]}
    return _save(path, nodes, ["batch", 2, 4, 1], ["batch", 3, 4, 4], [_w("Wc", (3, 4, 1, 1), 4)], info)


def _same_conv_and_sum_pool(path: Path) -> Path:
    """ConvMixer's depthwise ``padding="same"`` conv (``auto_pad=SAME_UPPER``, an even kernel pads
    unevenly) and an average pool with uneven pads (a window sum by convolution in PyTorch)."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "Wc"], ["c"], kernel_shape=[4, 4], group=4, auto_pad="SAME_UPPER"),
             h.make_node("AveragePool", ["c"], ["y"], kernel_shape=[3, 3], pads=[0, 0, 1, 1], count_include_pad=0)]
    return _save(path, nodes, ["batch", 4, 7, 7], ["batch", 4, 6, 6], [_w("Wc", (4, 1, 4, 4), 5)])


def _reshape_two_symbols(path: Path) -> Path:
    """A reshape to ``Concat(Shape(x)[0:2], [4, 4])`` under two symbolic dims (batch and height),
    to channels first and a 1x1 conv: TensorFlow's reshape gets the known dims as constants
    (``tf.stack``), so TFLite's conv sees its channels."""
    from onnx import helper as h

    nodes = [h.make_node("Shape", ["x"], ["s"]), _i64("z", [0]), _i64("two", [2]), _i64("tail", [4, 4]),
             h.make_node("Slice", ["s", "z", "two"], ["lead"]), h.make_node("Concat", ["lead", "tail"], ["sh"], axis=0),
             h.make_node("Reshape", ["x", "sh"], ["r"]), h.make_node("Transpose", ["r"], ["rt"], perm=[0, 2, 1, 3]),
             h.make_node("Conv", ["rt", "Wc"], ["y"], kernel_shape=[1, 1])]
    return _save(path, nodes, ["batch", "h", 8, 2], ["batch", 3, "h", 4], [_w("Wc", (3, 4, 1, 1), 6)])


CASES = {
    "reshape_two_symbols": (_reshape_two_symbols, ("tflite", "tensorflow")),
    "slice_inner_axis": (_slice_inner_axis, ("tflite",)),
    "pad_last_axis": (_pad_last_axis, ("tflite",)),
    "constant_of_shape_mask": (_constant_of_shape_mask, ("tflite",)),
    "expand_to_shape_of": (_expand_to_shape_of, ("tflite",)),
    "same_conv_and_sum_pool": (_same_conv_and_sum_pool, ("pytorch",)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dynamic_batch_converts_where_it_was_refused(tmp_path, name):
    from conftest import convert_keeping_batch

    build, targets = CASES[name]
    convert_keeping_batch(build(tmp_path / f"{name}.onnx"), targets, tmp_path / "out")


def test_inferred_batch_replaces_an_anonymous_dim():
    """The unit behind the first two models: a stale ``unk__N`` (or unknown) dim takes the named
    symbol inferred now; a named symbol and a size are kept."""
    from translator.ir.graph import Graph, TensorType
    from translator.ir.infer import infer

    g = Graph("g")
    x = g.add_input("x", TensorType("float32", ("batch", 2, 24, 16)))
    s = g.add_constant("s", np.asarray([0], np.int64), "int64")
    e = g.add_constant("e", np.asarray([8], np.int64), "int64")
    a = g.add_constant("a", np.asarray([2], np.int64), "int64")
    pads = g.add_constant("p", np.asarray([0, 0, 0, 0, 0, 0, 0, 1], np.int64), "int64")
    q = g.add_node("slice", [x, s, e, a], {}, types=[TensorType("float32", ("unk__1", 2, 8, 16))]).outputs[0]
    p = g.add_node("pad", [x, pads], {"mode": "constant"}, types=[TensorType("float32", (None, 2, 24, 17))]).outputs[0]
    kept = g.add_node("slice", [x, s, e, a], {}, types=[TensorType("float32", ("n", 2, 8, 16))]).outputs[0]
    infer(g)
    assert q.type.shape == ("batch", 2, 8, 16)
    assert p.type.shape == ("batch", 2, 24, 17)
    assert kept.type.shape == ("n", 2, 8, 16)
