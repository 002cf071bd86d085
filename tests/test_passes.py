"""The cross-cutting passes: constant folding, dtype legalization, verifier."""
from __future__ import annotations

import numpy as np
import pytest

from translator.table.errors import Unsupported, VerifyError
from translator.compile.interpreter import run
from translator.ir.graph import Graph, Model, TensorType
from translator.compile.passes import fold_constants, legalize_dtypes, verify


def _model(g: Graph) -> Model:
    return Model(g, source="<test>")


def test_fold_shape_subgraph_into_a_constant():
    g = Graph()
    x = g.add_input("x", TensorType("float32", (2, 3, 4)))
    shp = g.add_node("shape", [x], outputs=["s"]).outputs[0]
    idx = g.add_constant("i", np.asarray([0], dtype=np.int64), "int64")
    first = g.add_node("gather", [shp, idx], outputs=["d0"]).outputs[0]
    minus1 = g.add_constant("m1", np.asarray([-1], dtype=np.int64), "int64")
    tgt = g.add_node("concat", [first, minus1], {"axis": 0}, outputs=["tgt"]).outputs[0]
    y = g.add_node("reshape", [x, tgt], outputs=["y"]).outputs[0]
    g.outputs = [y]
    before = run(_model(g), {"x": np.ones((2, 3, 4), np.float32)})[0]
    assert fold_constants.run(g) == 3
    assert [n.op for n in g.nodes] == ["reshape"]
    assert g.nodes[0].inputs[1].const.tolist() == [2, -1]
    after = run(_model(g), {"x": np.ones((2, 3, 4), np.float32)})[0]
    assert after.shape == before.shape == (2, 12)


def _int64_graph(const: int) -> Graph:
    g = Graph()
    x = g.add_input("x", TensorType("int64", (3,)))
    c = g.add_constant("c", np.asarray([const, 1, 2], dtype=np.int64), "int64")
    y = g.add_node("add", [x, c], outputs=["y"], types=[TensorType("int64", (3,))]).outputs[0]
    g.outputs = [y]
    return g


def test_legalize_int64_for_a_backend_without_it():
    g = _int64_graph(5)
    warnings = legalize_dtypes.run(g, "coreml")
    assert g.inputs[0].type.dtype == "int32" and g.outputs[0].type.dtype == "int32"
    assert any("input 'x' int64 -> int32" in w for w in warnings)
    out = run(_model(g), {"x": np.asarray([1, 2, 3], np.int32)})[0]
    assert out.tolist() == [6, 3, 5] and out.dtype == np.int32


def test_legalize_refuses_constants_out_of_range():
    g = _int64_graph(2**40)
    with pytest.raises(Unsupported) as ei:
        legalize_dtypes.run(g, "coreml")
    assert ei.value.code == "unsupported_dtype" and "'c'" in str(ei.value)


def test_legalize_is_a_noop_where_every_dtype_is_native():
    g = _int64_graph(5)
    assert legalize_dtypes.run(g, "onnx") == []
    assert g.inputs[0].type.dtype == "int64"


def test_verifier_names_the_node_and_the_two_shapes():
    g = Graph()
    a = g.add_input("a", TensorType("float32", (2, 3)))
    b = g.add_input("b", TensorType("float32", (4,)))
    g.outputs = list(g.add_node("add", [a, b], outputs=["y"], name="bad_add").outputs)
    with pytest.raises(VerifyError) as ei:
        verify.run(g)
    msg = str(ei.value)
    assert ei.value.code == "broadcast_mismatch" and "bad_add" in msg and "(2, 3)" in msg and "(4,)" in msg


@pytest.mark.parametrize("build, code", [
    (lambda g, a: g.add_node("relu", [a], {"alpha": 1.0}), "unsupported_attribute_value"),
    (lambda g, a: g.add_node("add", [a]), "verifier"),
    (lambda g, a: g.add_node("no_such_op", [a]), "unsupported_op"),
    (lambda g, a: g.add_node("add", [a, g.add_input("i", TensorType("int32", (2,)))]), "type_mismatch"),
    (lambda g, a: g.add_node("sqrt", [g.add_input("s", TensorType("string", (2,)))]), "type_mismatch"),
])
def test_verifier_rejects(build, code):
    g = Graph()
    a = g.add_input("a", TensorType("float32", (2,)))
    node = build(g, a)
    g.outputs = list(node.outputs)
    with pytest.raises(VerifyError) as ei:
        verify.run(g)
    assert ei.value.code == code


def test_a_constant_resize_folds_and_shapes_follow(tmp_path):
    """DETR's default pixel mask: a Resize whose inputs are all constants (64x64 -> 2x2
    nearest) folds like shape arithmetic, and a ``shape`` of what it feeds folds next."""
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    from translator.frontends.onnx import load_onnx
    from translator.compile.pipeline import fold

    inits = [nh.from_array(np.ones((1, 1, 64, 64), np.float32), "mask"),
             nh.from_array(np.array([1, 1, 1 / 32, 1 / 32], np.float32), "scales")]
    nodes = [h.make_node("Resize", ["mask", "", "scales"], ["small"], mode="nearest"),
             h.make_node("Mul", ["x", "small"], ["y"]), h.make_node("Shape", ["small"], ["s"])]
    g = h.make_graph(nodes, "m", [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 2, 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 1, 2, 2]), h.make_tensor_value_info("s", T.INT64, [4])],
                     inits)
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    model = load_onnx(path)
    fold(model.graph)
    assert [n.op for n in model.graph.nodes] == ["mul"]
    s = next(v for v in model.graph.outputs if v.name == "s")
    assert s.is_const and s.const.tolist() == [1, 1, 2, 2]


def test_random_and_quantize_ops_never_fold():
    from translator.compile.passes.fold_constants import foldable

    assert foldable("resize") and foldable("matmul") and foldable("shape")
    assert not foldable("random_normal") and not foldable("dequantize_linear") and not foldable("loop")


# --- passes/fuse: a convolution's affine tail folded into its weights --------------------------------
def _conv_tail(tail: str, c: int = 4, bias: bool = True, conv_dims: int = 2, twice: bool = False,
               add_shape: tuple[int, ...] | None = None) -> Graph:
    """x → conv (constant weights, optional bias) → ``tail`` (batch_normalization, or an add of a
    constant of ``add_shape``); ``twice``: the conv's output also feeds a relu that is an output."""
    rng = np.random.default_rng(c + conv_dims)
    g = Graph()
    sp = (6,) * conv_dims
    x = g.add_input("x", TensorType("float32", (2, 3) + sp))
    w = g.add_constant("w", rng.standard_normal((c, 3) + (3,) * conv_dims).astype(np.float32), "float32")
    ins = [x, w] + ([g.add_constant("b", rng.standard_normal(c).astype(np.float32), "float32")] if bias else [])
    y = g.add_node("conv", ins, {"pads": [1] * (2 * conv_dims)}, outputs=["y"], name="the_conv").outputs[0]
    if tail == "batch_normalization":
        stats = [rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c), rng.uniform(0.5, 2.0, c)]
        params = [g.add_constant(f"p{i}", s.astype(np.float32), "float32") for i, s in enumerate(stats)]
        z = g.add_node("batch_normalization", [y, *params], {"epsilon": 1e-3}, outputs=["z"], name="bn").outputs[0]
    else:
        k = g.add_constant("k", rng.standard_normal(add_shape).astype(np.float32), "float32")
        z = g.add_node("add", [k, y], outputs=["z"], name="bias_add").outputs[0]
    g.outputs = [z]
    if twice:
        g.outputs.append(g.add_node("relu", [y], outputs=["r"]).outputs[0])
    from translator.ir.infer import infer

    infer(g)
    return g


@pytest.mark.parametrize("tail,kw", [
    ("batch_normalization", {}), ("batch_normalization", {"bias": False}), ("batch_normalization", {"conv_dims": 1}),
    ("batch_normalization", {"conv_dims": 3}), ("add", {"add_shape": (1, 4, 1, 1)}), ("add", {"add_shape": (4, 1, 1)}),
    ("add", {"add_shape": (1,), "bias": False}), ("add", {"add_shape": ()}),
])
def test_a_convolutions_batch_norm_or_per_channel_add_becomes_its_weights(tail, kw):
    from translator.compile.passes import fuse

    g = _conv_tail(tail, **kw)
    feeds = {"x": np.random.default_rng(0).standard_normal(g.inputs[0].type.shape).astype(np.float32)}
    before = run(_model(g), feeds)[0]
    assert fuse.run(g) == 1
    assert [n.op for n in g.nodes] == ["conv"] and g.nodes[0].name == "the_conv" and len(g.nodes[0].inputs) == 3
    assert g.outputs[0].name == "z"  # the result keeps what the model calls it
    np.testing.assert_allclose(run(_model(g), feeds)[0], before, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("why,tail,kw", [
    ("the conv's output is used twice", "batch_normalization", {"twice": True}),
    ("a constant along the last axis is not per channel", "add", {"add_shape": (6,)}),
    ("a full-size constant is not a bias", "add", {"add_shape": (1, 4, 6, 6)}),
])
def test_what_is_not_a_per_channel_affine_tail_stays(why, tail, kw):
    from translator.compile.passes import fuse

    g = _conv_tail(tail, **kw)
    assert fuse.run(g) == 0, why
    assert [n.op for n in g.nodes][:2] == ["conv", tail], why


def test_quantized_weights_are_not_folded_into_float_ones():
    from translator.compile.passes import fuse

    g = Graph()
    x = g.add_input("x", TensorType("float32", (1, 3, 5, 5)))
    q = g.add_constant("wq", np.ones((2, 3, 1, 1), np.int8), "int8")
    s = g.add_constant("s", np.asarray(0.1, np.float32), "float32")
    z = g.add_constant("zp", np.asarray(0, np.int8), "int8")
    w = g.add_node("dequantize_linear", [q, s, z], outputs=["w"]).outputs[0]
    y = g.add_node("conv", [x, w], outputs=["y"]).outputs[0]
    k = g.add_constant("k", np.ones((1, 2, 1, 1), np.float32), "float32")
    g.outputs = [g.add_node("add", [y, k], outputs=["out"]).outputs[0]]
    assert fuse.run(g) == 0


def test_the_report_says_the_batch_norm_is_folded_and_the_reference_computes_it_as_written():
    from translator.run import report as R

    g = _conv_tail("batch_normalization")
    plans = {p.backend: p for p in R.plan_model(_model(g), ["numpy", "pytorch", "openvino"])}
    for b in ("pytorch", "openvino"):
        assert {n.node: n.status for n in plans[b].nodes} == {"the_conv": "native", "bn": "folded"}, b
    assert {n.node: n.status for n in plans["numpy"].nodes}["bn"] != "folded"


@pytest.mark.parametrize("scale, folds", [(0.5, True), (float("inf"), False)], ids=["finite", "infinite_scale"])
def test_a_nan_test_of_a_dequantized_integer_is_false_and_its_select_picks_the_value(scale, folds):
    """``where(is_nan(p), 0, p)`` over ``p = dequantize_linear(q)``: a finite scale makes every
    value of ``p`` finite, so the test folds to False and the select to ``p``; an infinite
    scale (onnxruntime's quantizer on a -inf attention mask) can make NaN, and both stay."""
    g = Graph()
    x = g.add_input("x", TensorType("float32", (2, 3)))
    s = g.add_constant("s", np.asarray(scale, dtype=np.float32), "float32")
    z = g.add_constant("z", np.asarray(0, dtype=np.uint8), "uint8")
    q = g.add_node("quantize_linear", [x, s, z], outputs=["q"], types=[TensorType("uint8", (2, 3))]).outputs[0]
    p = g.add_node("dequantize_linear", [q, s, z], outputs=["p"], types=[TensorType("float32", (2, 3))]).outputs[0]
    nan = g.add_node("is_nan", [p], outputs=["n"], types=[TensorType("bool", (2, 3))]).outputs[0]
    zero = g.add_constant("zero", np.asarray(0.0, dtype=np.float32), "float32")
    y = g.add_node("where", [nan, zero, p], outputs=["w"], types=[TensorType("float32", (2, 3))]).outputs[0]
    r = g.add_node("relu", [y], outputs=["y"], types=[TensorType("float32", (2, 3))]).outputs[0]
    g.outputs = [r]
    feeds = {"x": np.asarray([[0.0, 1.0, 2.5], [3.0, 60.0, 127.0]], np.float32)}
    before = run(_model(g), feeds)[0]
    fold_constants.run(g)
    ops = [n.op for n in g.nodes]
    if folds:
        assert ops == ["quantize_linear", "dequantize_linear", "relu"], ops
    else:
        assert "is_nan" in ops and "where" in ops, ops
    np.testing.assert_array_equal(run(_model(g), feeds)[0], before)


def _gather_nd_graph(shape: tuple, idx: np.ndarray) -> Graph:
    g = Graph()
    x = g.add_input("x", TensorType("float32", shape))
    i = g.add_constant("i", idx.astype(np.int64), "int64")
    y = g.add_node("gather_nd", [x, i], {"batch_dims": 0}, outputs=["y"]).outputs[0]
    g.outputs = [y]
    return g


def _mask_index(n: int) -> np.ndarray:
    """torch.export's ``mask[:, None, None, :]`` of a ``[1, n]`` mask: element ``(0, j)`` at ``j``."""
    return np.stack([np.zeros(n, np.int64), np.arange(n)], axis=-1).reshape(1, 1, 1, n, 2)


@pytest.mark.parametrize("shape, idx, ops", [
    ((1, 16), _mask_index(16), ["reshape"]),                                            # every element, in order
    ((6, 3), np.array([[1], [3], [5]]), ["slice"]),                                    # every other row
    ((2, 3, 4), np.array([[1, 0], [1, 1], [1, 2]]), ["reshape", "slice"]),             # a run of rows, flattened
    ((4, 5), np.array([[-1, 2]]), ["reshape", "slice"]),                                # one element, negative index
    ((2, 3, 4), np.array([[[1, 1, 0], [1, 1, 2]]]), ["reshape", "slice", "reshape"]),  # a strided pair, kept [1, 2]
    ((5, 2), np.array([[0], [1], [2], [3], [4]]), []),                                 # the identity
])
def test_a_gather_by_constant_indices_in_a_regular_run_is_a_reshape_or_slice(shape, idx, ops):
    from translator.compile.passes import static_index
    from translator.ir.infer import infer

    g = _gather_nd_graph(shape, idx)
    feed = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    before = run(_model(g), feed)[0]
    assert static_index.run(g) == 1
    infer(g)
    assert [n.op for n in g.nodes if n.op != "identity"] == ops
    after = run(_model(g), feed)[0]
    np.testing.assert_array_equal(after, before)


@pytest.mark.parametrize("shape, idx", [
    ((6, 3), np.array([[3], [1]])),          # descending
    ((6, 3), np.array([[0], [1], [3]])),     # not one step
    ((6, 3), np.array([[6]])),               # out of range (an invalid model: left to the runtime)
])
def test_a_gather_by_irregular_constant_indices_stays(shape, idx):
    from translator.compile.passes import static_index

    g = _gather_nd_graph(shape, idx)
    assert static_index.run(g) == 0
    assert [n.op for n in g.nodes] == ["gather_nd"]


def test_prune_removes_what_nothing_reads_and_keeps_what_an_output_or_a_subgraph_reads():
    """A chain whose end nothing reads goes whole (a folded branch's condition: Shape → Gather
    → Equal); a graph output, a node a subgraph reads, and a node with one read output of two
    stay; ``fold`` runs it with the other folding passes."""
    from translator.compile.pipeline import fold

    g = Graph()
    x = g.add_input("x", TensorType("float32", ("n", 3)))
    shp = g.add_node("shape", [x], outputs=["s"]).outputs[0]
    idx = g.add_constant("i", np.asarray(0, dtype=np.int64), "int64")
    d0 = g.add_node("gather", [shp, idx], outputs=["d0"]).outputs[0]
    one = g.add_constant("one", np.asarray(1, dtype=np.int64), "int64")
    g.add_node("equal", [d0, one], outputs=["eq"])                       # read by nothing
    y = g.add_node("relu", [x], outputs=["y"]).outputs[0]
    top = g.add_node("top_k", [x, g.add_constant("k", np.asarray([1], np.int64), "int64")], {"axis": 1},
                     outputs=["values", "indices"])                        # only its values are read
    inner = g.add_node("neg", [x], outputs=["inner"]).outputs[0]           # read in a subgraph only
    body = Graph("then")
    body.outputs = [body.add_node("identity", [inner], outputs=["t"]).outputs[0]]
    other = Graph("else")
    other.outputs = [other.add_node("identity", [top.outputs[0]], outputs=["e"]).outputs[0]]
    cond = g.add_input("c", TensorType("bool", ()))
    z = g.add_node("if", [cond], {"then_branch": body, "else_branch": other}, outputs=["z"]).outputs[0]
    g.outputs = [y, z]
    assert fold_constants.prune(g) == 3
    assert sorted(n.op for n in g.nodes) == ["if", "neg", "relu", "top_k"]
    g2 = Graph()
    x2 = g2.add_input("x", TensorType("float32", (2,)))
    g2.add_node("sigmoid", [g2.add_node("exp", [x2], outputs=["a"]).outputs[0]], outputs=["b"])
    g2.outputs = [g2.add_node("relu", [x2], outputs=["r"]).outputs[0]]
    fold(g2)
    assert [n.op for n in g2.nodes] == ["relu"]
