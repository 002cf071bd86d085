"""A symbolic batch (and sequence) stays dynamic on tensorflow, tflite and openvino for the
ops whose rules once needed fully static shapes: recurrences (LSTM / GRU read the batch and
sequence sizes at run time: ``tf.shape`` / a ``tf.while_loop``, OpenVINO ``ShapeOf``), pools
(only the spatial dims are static) and the MobileViT unfold (a reshape to a run-time shape
whose result the IR knows up to the batch, then a transpose: TFLite's reshape takes one
dynamic dim), and a Resize whose ``sizes`` are computed at run time from ``Shape`` (the batch
and channels kept, the spatial sizes known: ``passes/shape_values`` narrows it to the spatial
axes). Each artifact is checked at sizes 1 and 3 (``translator.ir.dims.CHECK_SIZES``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest


TARGETS = ("pytorch", "tensorflow", "tflite", "openvino")


def _save(path: Path, nodes: list, x_shape: list, y_shape: list, inits: list) -> Path:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, y_shape)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def _w(name: str, shape: tuple, seed: int) -> object:
    from onnx import numpy_helper as nh

    return nh.from_array((np.random.default_rng(seed).standard_normal(shape) * 0.3).astype(np.float32), name)


def _recurrent(op: str, direction: str, seq: object, extra: dict | None = None) -> Callable[[Path], Path]:
    def build(path: Path) -> Path:
        from onnx import helper as h

        gates, hidden, feat = {"LSTM": 4, "GRU": 3}[op], 5, 6
        nd = 2 if direction == "bidirectional" else 1
        inits = [_w("W", (nd, gates * hidden, feat), 1), _w("R", (nd, gates * hidden, hidden), 2),
                 _w("B", (nd, 2 * gates * hidden), 3)]
        nodes = [h.make_node(op, ["x", "W", "R", "B"], ["yall", "y"], hidden_size=hidden, direction=direction,
                             **(extra or {}))]
        return _save(path, nodes, [seq, "batch", feat], [nd, "batch", hidden], inits)

    return build


def _maxpool(path: Path) -> Path:
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "Wc"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("MaxPool", ["c"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    return _save(path, nodes, ["batch", 3, 9, 9], ["batch", 4, 5, 5], [_w("Wc", (4, 3, 3, 3), 4)])


def _unfold(path: Path) -> Path:
    """MobileViT's unfold: (B, C, H, W) → (B·C·H/2, 2, W/2, 2) → T(0,2,1,3) → (B, C, N, 4) →
    T(0,3,2,1), the target shapes computed from ``Shape(x)[0]`` at run time."""
    from onnx import TensorProto as T
    from onnx import helper as h

    C, H, W = 8, 8, 8

    def i64(name: str, v: list) -> object:
        return h.make_node("Constant", [], [name], value=h.make_tensor(name, T.INT64, [len(v)], v))

    nodes = [h.make_node("Shape", ["x"], ["s"]), i64("i0", [0]), h.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             i64("k1", [C * H // 2]), i64("k2", [2]), i64("k3", [W // 2]), h.make_node("Mul", ["b", "k1"], ["bc"]),
             h.make_node("Concat", ["bc", "k2", "k3", "k2"], ["sh1"], axis=0),
             h.make_node("Reshape", ["x", "sh1"], ["r1"]),
             h.make_node("Transpose", ["r1"], ["t1"], perm=[0, 2, 1, 3]),
             i64("c", [C]), i64("n", [H * W // 4]), i64("p", [4]),
             h.make_node("Concat", ["b", "c", "n", "p"], ["sh2"], axis=0),
             h.make_node("Reshape", ["t1", "sh2"], ["r2"]),
             h.make_node("Transpose", ["r2"], ["y"], perm=[0, 3, 2, 1])]
    return _save(path, nodes, ["batch", C, H, W], ["batch", 4, H * W // 4, C], [])


def _resize_to_shape_of(mode: str) -> Callable[[Path], Path]:
    """FCN / DeepLab's head: ``Resize(y, sizes=Concat(Shape(y)[0:2], Shape(image)[2:4]))``."""
    def build(path: Path) -> Path:
        from onnx import TensorProto as T
        from onnx import helper as h

        def i64(name: str, v: list) -> object:
            return h.make_node("Constant", [], [name], value=h.make_tensor(name, T.INT64, [len(v)], v))

        nodes = [h.make_node("Conv", ["x", "Wc"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                 h.make_node("Shape", ["c"], ["sc"]), i64("z", [0]), i64("two", [2]), i64("four", [4]),
                 h.make_node("Slice", ["sc", "z", "two"], ["nc"]),
                 h.make_node("Shape", ["x"], ["sx"]), h.make_node("Slice", ["sx", "two", "four"], ["hw"]),
                 h.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
                 h.make_node("Resize", ["c", "", "", "sizes"], ["y"], mode=mode,
                             coordinate_transformation_mode="half_pixel" if mode == "linear" else "asymmetric",
                             nearest_mode="floor")]
        return _save(path, nodes, ["batch", 3, 10, 10], ["batch", 4, 10, 10], [_w("Wc", (4, 3, 3, 3), 5)])

    return build


def _deconv_then_resize_by_scales(path: Path) -> Path:
    """DPT's neck: a ConvTranspose (its output shape carries the run-time batch) then a Resize by
    constant scales ``[1, 1, 2, 2]`` (a scale of 1 on the symbolic batch)."""
    from onnx import TensorProto as T
    from onnx import helper as h

    sc = h.make_node("Constant", [], ["sc"], value=h.make_tensor("sc", T.FLOAT, [4], [1.0, 1.0, 2.0, 2.0]))
    nodes = [h.make_node("ConvTranspose", ["x", "Wt"], ["d"], kernel_shape=[2, 2], strides=[2, 2]), sc,
             h.make_node("Resize", ["d", "", "sc"], ["y"], mode="linear", coordinate_transformation_mode="align_corners")]
    return _save(path, nodes, ["batch", 3, 5, 5], ["batch", 4, 20, 20], [_w("Wt", (3, 4, 2, 2), 6)])


def _reshape_by_shape_of_then_resize(path: Path) -> Path:
    """SegFormer's decode head: flatten to ``(b, C, -1)`` and back to ``(b, C, H, W)`` with shapes
    built from ``Shape(x)`` at run time, then a Resize to sizes ``Concat(Shape(r)[0:2], [12, 12])``."""
    from onnx import TensorProto as T
    from onnx import helper as h

    def i64(name: str, v: list) -> object:
        return h.make_node("Constant", [], [name], value=h.make_tensor(name, T.INT64, [len(v)], v))

    nodes = [h.make_node("Shape", ["x"], ["s"]), i64("i0", [0]), i64("i2", [2]), i64("i3", [3]), i64("c", [4]),
             i64("m1", [-1]), i64("z", [0]), i64("two", [2]), i64("hw", [12, 12]),
             h.make_node("Gather", ["s", "i0"], ["b"], axis=0), h.make_node("Gather", ["s", "i2"], ["h"], axis=0),
             h.make_node("Gather", ["s", "i3"], ["w"], axis=0),
             h.make_node("Concat", ["b", "c", "m1"], ["flat"], axis=0), h.make_node("Reshape", ["x", "flat"], ["f"]),
             h.make_node("Concat", ["b", "c", "h", "w"], ["back"], axis=0), h.make_node("Reshape", ["f", "back"], ["r"]),
             h.make_node("Shape", ["r"], ["sr"]), h.make_node("Slice", ["sr", "z", "two"], ["nc"]),
             h.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             h.make_node("Resize", ["r", "", "", "sizes"], ["y"], mode="linear")]
    return _save(path, nodes, ["batch", 4, 6, 6], ["batch", 4, 12, 12], [])


def _broadcast_to_own_shape(path: Path) -> Path:
    """jax2tf's layer norm through tf2onnx (Magika): the mean ``[b, 1]`` broadcast back with
    ``Expand(m, Cast<int64>(Concat(Slice(Cast<int32>(Shape(m)), 0, 1), [1])))`` (its own shape)
    before the subtraction; the shape is computed in int32 between two casts."""
    from onnx import TensorProto as T
    from onnx import helper as h

    def const(name: str, v: list, t: int = T.INT64) -> object:
        return h.make_node("Constant", [], [name], value=h.make_tensor(name, t, [len(v)], v))

    nodes = [h.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1), h.make_node("Shape", ["m"], ["s64"]),
             h.make_node("Cast", ["s64"], ["s32"], to=T.INT32), const("z", [0]), const("one", [1]),
             const("unit", [1], T.INT32), h.make_node("Slice", ["s32", "z", "one"], ["b"]),
             h.make_node("Concat", ["b", "unit"], ["shape32"], axis=0),
             h.make_node("Cast", ["shape32"], ["shape"], to=T.INT64), h.make_node("Expand", ["m", "shape"], ["mb"]),
             h.make_node("Sub", ["x", "mb"], ["y"])]
    return _save(path, nodes, ["batch", 8], ["batch", 8], [])


def _softmax_flattened_and_back(path: Path, batch: object = "batch") -> Path:
    """An opset-11 exporter's softmax over the last axis (paddle2onnx's classifiers): Flatten at
    axis 1, Softmax, Reshape back to ``Shape`` of the value it flattened."""
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Flatten", ["a"], ["f"], axis=1),
             h.make_node("Softmax", ["f"], ["s"], axis=1), h.make_node("Shape", ["a"], ["sa"]),
             h.make_node("Reshape", ["s", "sa"], ["y"])]
    return _save(path, nodes, [batch, 6], [batch, 6], [])


def _split_heads(path: Path, allowzero: int = 0) -> Path:
    """Attention's split and merge of heads at run-time sizes, as torch.onnx writes them: the
    targets of both reshapes concatenated from ``Gather(Shape(x))`` and constants (the dynamo
    exporter's with ``allowzero=1``)."""
    from onnx import helper as h
    from onnx import numpy_helper as nh

    ints = [nh.from_array(np.array(v, np.int64), n) for n, v in
            (("i0", 0), ("i1", 1), ("ax0", [0]), ("two", [2]), ("eight", [8]), ("minus1", [-1]))]
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             h.make_node("Gather", ["s", "i1"], ["q"], axis=0), h.make_node("Unsqueeze", ["b", "ax0"], ["bu"]),
             h.make_node("Unsqueeze", ["q", "ax0"], ["qu"]),
             h.make_node("Concat", ["bu", "qu", "two", "eight"], ["t1"], axis=0),
             h.make_node("Reshape", ["x", "t1"], ["r"], allowzero=allowzero),
             h.make_node("Transpose", ["r"], ["p"], perm=[0, 2, 1, 3]),
             h.make_node("Concat", ["bu", "two", "minus1"], ["t2"], axis=0),
             h.make_node("Reshape", ["p", "t2"], ["y"], allowzero=allowzero)]
    return _save(path, nodes, ["batch", "seq", 16], ["batch", 2, None], ints)


MODELS = {
    "split_heads": _split_heads,
    "split_heads_allowzero": lambda path: _split_heads(path, allowzero=1),
    "broadcast_to_own_shape": _broadcast_to_own_shape,
    "softmax_flattened_and_back": _softmax_flattened_and_back,
    "deconv_then_resize_by_scales": _deconv_then_resize_by_scales,
    "reshape_by_shape_of_then_resize": _reshape_by_shape_of_then_resize,
    "resize_linear_to_shape_of_input": _resize_to_shape_of("linear"),
    "resize_nearest_to_shape_of_input": _resize_to_shape_of("nearest"),
    "lstm_dynamic_seq": _recurrent("LSTM", "forward", "seq"),
    "lstm_reverse_static_seq": _recurrent("LSTM", "reverse", 4),
    "gru_bidirectional_dynamic_seq": _recurrent("GRU", "bidirectional", "seq", {"linear_before_reset": 1}),
    "maxpool": _maxpool,
    "mobilevit_unfold": _unfold,
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_symbolic_batch_stays_dynamic_and_checks_at_two_sizes(tmp_path, name):
    from conftest import convert_keeping_batch

    model = MODELS[name](tmp_path / f"{name}.onnx")
    by = convert_keeping_batch(model, TARGETS, tmp_path / "out")
    for t in TARGETS:
        rec = by[t]
        if "seq" in rec["dynamic_dims"]["x"]:
            assert [s["seq"] for s in rec["check"]["sizes"]] == [1, 3], (t, rec)


def test_an_expand_to_its_own_run_time_shape_goes(tmp_path):
    """The shape arithmetic is followed through both casts, so the ``expand`` is seen to be the
    identity and leaves the graph: no ``BROADCAST_TO`` (which XNNPACK does not take) in TFLite."""
    from translator.compile.pipeline import fold
    from translator.frontends import load

    model = load(str(_broadcast_to_own_shape(tmp_path / "m.onnx")))
    fold(model.graph)  # what every folding target runs first
    assert "expand" not in {n.op for n in model.graph.nodes}
    assert [n.op for n in model.graph.nodes] == ["reduce_mean", "sub"]
    from conftest import convert_keeping_batch

    rec = convert_keeping_batch(tmp_path / "m.onnx", ("tflite",), tmp_path / "out")["tflite"]
    assert rec["delegation"]["delegated"] == rec["delegation"]["compute_delegated"] > 0
    assert "BROADCAST_TO" not in rec["delegation"]["left"], rec["delegation"]


def test_a_reshape_back_to_the_shape_it_came_from_goes(tmp_path):
    """The flatten of a matrix and the reshape to ``Shape(a)`` of a value computed from ``a`` by
    shape-keeping ops are the identity whatever the (here unnamed) batch: both leave the graph,
    and with them the run-time shape arithmetic (a RESHAPE to a run-time shape is one node
    XNNPACK does not take)."""
    from translator.compile.pipeline import fold
    from translator.frontends import load

    model = load(str(_softmax_flattened_and_back(tmp_path / "m.onnx", batch=None)))
    fold(model.graph)
    assert [n.op for n in model.graph.nodes] == ["relu", "softmax"]


@pytest.mark.parametrize("allowzero", [0, 1])
def test_a_reshape_to_a_shape_a_constant_can_state_takes_that_constant(tmp_path, allowzero):
    """A reshape target computed from ``Shape`` whose entries are sizes, the input's own dims in
    place and one other is a constant (``0`` copies, ``-1`` is solved; a target without a zero
    entry reshapes the same without ``allowzero``, which the copies need): the shape arithmetic
    leaves the graph (in PyTorch a tensor op and a host sync per forward each; on TFLite builtin
    kernels); the artifacts check at two batch and sequence sizes (``split_heads`` above)."""
    from translator.compile.pipeline import fold
    from translator.frontends import load

    model = load(str(_split_heads(tmp_path / "m.onnx", allowzero)))
    fold(model.graph)
    assert [n.op for n in model.graph.nodes] == ["reshape", "transpose", "reshape"]
    reshapes = [n for n in model.graph.nodes if n.op == "reshape"]
    assert all(n.inputs[1].is_const and not n.attrs.get("allowzero") for n in reshapes)
    assert [np.asarray(n.inputs[1].const).tolist() for n in reshapes] == [[0, 0, 2, 8], [0, 2, -1]]


def test_a_reshape_to_another_values_dim_is_solved_by_minus_one(tmp_path):
    """One entry that is not the input's own dim in place (here another input's size) is written
    ``-1``; two such entries are left to the run-time shape (a constant cannot state them)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    from translator.compile.pipeline import fold
    from translator.frontends import load

    def build(second_free: bool) -> Path:
        ints = [nh.from_array(np.array(0, np.int64), "i0"), nh.from_array(np.array([0], np.int64), "ax0"),
                nh.from_array(np.array([8], np.int64), "eight")]
        nodes = [h.make_node("Shape", ["w"], ["s"]), h.make_node("Gather", ["s", "i0"], ["n"], axis=0),
                 h.make_node("Unsqueeze", ["n", "ax0"], ["nu"]),
                 h.make_node("Concat", ["nu", "nu" if second_free else "eight"], ["t"], axis=0),
                 h.make_node("Reshape", ["x", "t"], ["y"])]
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["a", 16]),
                                      h.make_tensor_value_info("w", T.FLOAT, ["n"])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], ints)
        path = tmp_path / f"m{int(second_free)}.onnx"
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
        return path

    model = load(str(build(False)))
    fold(model.graph)
    assert [n.op for n in model.graph.nodes] == ["reshape"]
    assert np.asarray(model.graph.nodes[0].inputs[1].const).tolist() == [-1, 8]
    model = load(str(build(True)))
    fold(model.graph)
    assert not model.graph.nodes[-1].inputs[1].is_const
