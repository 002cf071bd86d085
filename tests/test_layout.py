"""The layout pass: channels-last where the backend needs it, with the fewest transposes."""
from __future__ import annotations

import numpy as np
import pytest

from translator import reference
from translator.run.harness import compare
from translator.compile.interpreter import run as run_reference
from translator.ir.graph import Graph, Model, TensorType
from translator.compile.passes import layout, verify

RNG = np.random.default_rng(0)
CL_OPS = ("conv", "conv_transpose", "max_pool", "average_pool", "resize", "depth_to_space", "space_to_depth", "lrn",
          "batch_normalization", "instance_normalization", "global_average_pool", "global_max_pool")


def _t(shape, dtype="float32"):
    return TensorType(dtype, tuple(shape))


def _w(g: Graph, name: str, shape) -> object:
    return g.add_constant(name, RNG.standard_normal(shape).astype(np.float32), "float32")


def _conv(g: Graph, x, cin: int, cout: int, name: str):
    w = _w(g, f"{name}_W", (cout, cin, 3, 3))
    b = _w(g, f"{name}_B", (cout,))
    return g.add_node("conv", [x, w, b], {"pads": [1, 1, 1, 1]}, outputs=[f"{name}_y"], name=name).outputs[0]


def _eval(g: Graph, feeds: dict) -> list:
    """The reference on a rewritten graph: channels-last spatial/per-channel nodes run through
    their source-layout reference between transposes (axis-remapped ops need nothing)."""
    env = {id(v): feeds[v.name] for v in g.inputs}
    env.update({id(c): c.const for c in g.constants.values()})
    for n in g.nodes:
        args = [None if v is None else env[id(v)] for v in n.inputs]
        cl = layout.is_channels_last(n) and (n.op in layout.classes().spatial or n.op in layout.classes().per_channel)
        if cl:
            r = args[0].ndim
            args[0] = args[0].transpose(layout.to_first(r))
            if n.op == "resize":
                args[1:] = [None if a is None else _unpermute(a, r) for a in args[1:]]
        res = reference.get(n.op)(*args, **n.attrs)
        res = res if isinstance(res, tuple) else (res,)
        if cl:
            res = (res[0].transpose(layout.to_last(res[0].ndim)),) + tuple(res[1:])
        env.update({id(v): r_ for v, r_ in zip(n.outputs, res)})
    return [env[id(v)] for v in g.outputs]


def _unpermute(a, r):
    a = np.asarray(a)
    if a.size == r:
        return a[layout.to_first(r)]
    if a.size == 2 * r:
        return np.concatenate([a[:r][layout.to_first(r)], a[r:][layout.to_first(r)]])
    return a


def _check(g: Graph, feeds: dict, io_channels_last: bool = False) -> layout.LayoutReport:
    verify.run(g)
    expected = run_reference(Model(g), feeds)
    report = layout.run(g, CL_OPS, io_channels_last=io_channels_last)
    if io_channels_last:
        feeds = {k: v.transpose(layout.to_last(v.ndim)) if v.ndim >= 3 else v for k, v in feeds.items()}
        expected = [e.transpose(layout.to_last(e.ndim)) if e.ndim >= 3 else e for e in expected]
    got = _eval(g, feeds)
    for e, x in zip(expected, got):
        assert compare(e, x, rtol=1e-4, atol=1e-4).ok
    assert report.transposes == sum(1 for n in g.nodes if n.op == "transpose")
    return report


def _input(g: Graph, name: str = "x", shape=(1, 4, 6, 6)):
    return g.add_input(name, _t(shape)), {name: RNG.standard_normal(shape).astype(np.float32)}


def test_conv_chain_needs_one_transpose_in_and_one_out():
    g = Graph()
    x, feeds = _input(g)
    y = _conv(g, x, 4, 8, "c1")
    y = g.add_node("relu", [y], outputs=["r1"]).outputs[0]
    y = _conv(g, y, 8, 8, "c2")
    g.outputs = [g.add_node("sigmoid", [y], outputs=["out"]).outputs[0]]
    rep = _check(g, feeds)
    assert (rep.transposes, rep.inserted) == (2, 2)
    assert [n.op for n in g.nodes] == ["transpose", "conv", "relu", "conv", "sigmoid", "transpose"]
    assert all(layout.is_channels_last(n) for n in g.nodes if n.op != "transpose")
    assert g.outputs[0].name == "out" and g.outputs[0].type.shape == (1, 8, 6, 6)


def test_residual_block_keeps_the_skip_connection_channels_last():
    g = Graph()
    x, feeds = _input(g)
    a = g.add_node("relu", [_conv(g, x, 4, 4, "c0")], outputs=["a"]).outputs[0]
    y = g.add_node("relu", [_conv(g, a, 4, 4, "c1")], outputs=["b"]).outputs[0]
    y = _conv(g, y, 4, 4, "c2")
    s = g.add_node("add", [a, y], outputs=["s"]).outputs[0]
    g.outputs = [g.add_node("relu", [s], outputs=["out"]).outputs[0]]
    assert _check(g, feeds).transposes == 2


def test_bias_constant_of_lower_rank_is_permuted_and_reduction_axes_remapped():
    g = Graph()
    x, feeds = _input(g)
    y = _conv(g, x, 4, 3, "c1")
    bias = _w(g, "bias", (3, 1, 1))
    y = g.add_node("add", [y, bias], outputs=["biased"]).outputs[0]
    axes = g.add_constant("axes", np.asarray([2, 3], np.int64), "int64")
    m = g.add_node("reduce_mean", [y, axes], {"keepdims": 1}, outputs=["m"]).outputs[0]
    sm = g.add_node("softmax", [m], {"axis": 1}, outputs=["sm"]).outputs[0]
    g.outputs = [sm]
    rep = _check(g, feeds)
    assert rep.transposes == 1  # (1, 1, 1, 3) -> (1, 3, 1, 1) keeps the data order: a reshape
    assert g.nodes[-1].op == "reshape" and g.outputs[0].type.shape == (1, 3, 1, 1)
    red = next(n for n in g.nodes if n.op == "reduce_mean")
    assert red.inputs[1].const.tolist() == [1, 2]
    assert next(n for n in g.nodes if n.op == "softmax").attrs["axis"] == 3
    assert next(n for n in g.nodes if n.op == "add").inputs[1].type.shape == (1, 1, 1, 3)


@pytest.mark.parametrize("axes, transposes", [([2, 3], 0), ([-1, -2], 0), ([1], 0), ([1, 2, 3], 0), ([2], 1), ([3], 1)])
def test_a_reduction_dropping_its_axes_reads_channels_last_when_the_axes_left_keep_their_order(axes, transposes):
    """A global pool's mean over H, W (keepdims 0) gives (N, C) from NCHW and from NHWC alike:
    the conv's channels-last output goes straight in (axes remapped). A mean over H alone would
    give (N, W, C) instead of (N, C, W): that one keeps its transpose."""
    g = Graph()
    x, feeds = _input(g)
    y = _conv(g, x, 4, 3, "c1")
    ax = g.add_constant("axes", np.asarray(axes, np.int64), "int64")
    m = g.add_node("reduce_mean", [y, ax], {"keepdims": 0}, outputs=["m"]).outputs[0]
    g.outputs = [m]
    rep = _check(g, feeds)
    assert rep.transposes == transposes + 1  # + the one into the conv
    assert g.outputs[0].type.shape == tuple(s for i, s in enumerate((1, 3, 6, 6)) if i not in {a % 4 for a in axes})


def test_concat_of_two_branches_concatenates_on_the_last_axis():
    g = Graph()
    x, feeds = _input(g)
    a, b = _conv(g, x, 4, 2, "ca"), _conv(g, x, 4, 3, "cb")
    c = g.add_node("concat", [a, b], {"axis": 1}, outputs=["cat"]).outputs[0]
    g.outputs = [g.add_node("max_pool", [c], {"kernel_shape": [2, 2], "strides": [2, 2]}, outputs=["p", "idx"]).outputs[0]]
    rep = _check(g, feeds)
    assert rep.transposes == 2
    assert next(n for n in g.nodes if n.op == "concat").attrs["axis"] == 3


def test_a_layout_bound_consumer_gets_the_source_layout_back():
    g = Graph()
    x, feeds = _input(g)
    y = _conv(g, x, 4, 2, "c1")
    f = g.add_node("flatten", [y], {"axis": 1}, outputs=["flat"]).outputs[0]
    g.outputs = [f]
    rep = _check(g, feeds)
    assert rep.transposes == 2
    flat = next(n for n in g.nodes if n.op == "flatten")
    assert flat.inputs[0].producer.op == "transpose"


def test_the_models_own_nhwc_transposes_cancel_against_the_inserted_ones():
    g = Graph()
    x, feeds = _input(g, shape=(1, 6, 6, 4))
    t = g.add_node("transpose", [x], {"perm": [0, 3, 1, 2]}, outputs=["nchw"]).outputs[0]
    y = g.add_node("relu", [_conv(g, t, 4, 5, "c1")], outputs=["r"]).outputs[0]
    g.outputs = [g.add_node("transpose", [y], {"perm": [0, 2, 3, 1]}, outputs=["out"]).outputs[0]]
    rep = _check(g, feeds)
    assert rep.transposes == 0
    assert [n.op for n in g.nodes] == ["conv", "relu"]


def test_channels_last_io_needs_no_transpose_at_all():
    g = Graph()
    x, feeds = _input(g)
    y = g.add_node("relu", [_conv(g, x, 4, 4, "c1")], outputs=["r"]).outputs[0]
    g.outputs = [y]
    rep = _check(g, feeds, io_channels_last=True)
    assert rep.transposes == 0
    assert g.inputs[0].type.shape == (1, 6, 6, 4)


def test_the_cut_prefers_one_transpose_after_an_add_over_two_before_it():
    g = Graph()
    x, feeds = _input(g)
    z, more = _input(g, "z")
    s = g.add_node("add", [x, z], outputs=["s"]).outputs[0]
    g.outputs = [_conv(g, s, 4, 4, "c1")]
    rep = _check(g, {**feeds, **more})
    assert rep.transposes == 2 and rep.cut == 2
    add = next(n for n in g.nodes if n.op == "add")
    assert not layout.is_channels_last(add)


def test_without_channels_last_ops_the_graph_is_untouched():
    g = Graph()
    x, feeds = _input(g)
    y = g.add_node("relu", [x], outputs=["r"]).outputs[0]
    g.outputs = [g.add_node("softmax", [y], {"axis": 1}, outputs=["s"]).outputs[0]]
    rep = _check(g, feeds)
    assert rep.transposes == 0 and [n.op for n in g.nodes] == ["relu", "softmax"]
    assert g.nodes[1].attrs["axis"] == 1


def test_per_channel_ops_resize_and_depth_to_space():
    g = Graph()
    x, feeds = _input(g)
    y = _conv(g, x, 4, 8, "c1")
    bn = [_w(g, n, (8,)) for n in ("s", "b", "m")]
    var = g.add_constant("v", np.abs(RNG.standard_normal(8)).astype(np.float32) + 0.5, "float32")
    y = g.add_node("batch_normalization", [y, *bn, var], outputs=["bn", "bm", "bv"]).outputs[0]
    y = g.add_node("depth_to_space", [y], {"blocksize": 2}, outputs=["d2s"]).outputs[0]
    scales = g.add_constant("scales", np.asarray([1, 1, 2, 2], np.float32), "float32")
    y = g.add_node("resize", [y, None, scales], {"mode": "nearest"}, outputs=["up"]).outputs[0]
    g.outputs = [g.add_node("global_average_pool", [y], outputs=["gap"]).outputs[0]]
    assert _check(g, feeds).transposes == 2


@pytest.mark.parametrize("rank", [3, 5])
def test_conv1d_and_conv3d_use_their_own_permutation(rank):
    g = Graph()
    shape = (1, 2) + (5,) * (rank - 2)
    x, feeds = _input(g, shape=shape)
    w = _w(g, "W", (3, 2) + (3,) * (rank - 2))
    y = g.add_node("conv", [x, w], outputs=["y"]).outputs[0]
    g.outputs = [g.add_node("relu", [y], outputs=["out"]).outputs[0]]
    rep = _check(g, feeds)
    assert rep.transposes == 2
    assert g.nodes[0].attrs["perm"] == layout.to_last(rank)


def test_same_graph_same_rewrite():
    def build():
        g = Graph()
        x, _ = _input(g)
        rng_state = RNG.bit_generator.state
        y = _conv(g, x, 4, 4, "c1")
        RNG.bit_generator.state = rng_state
        g.outputs = [g.add_node("relu", [y], outputs=["out"]).outputs[0]]
        verify.run(g)
        layout.run(g, CL_OPS)
        return [(n.op, n.name, dict(n.attrs), [v.name if v else None for v in n.inputs]) for n in g.nodes]

    assert build() == build()


def test_the_op_classes_come_from_the_table():
    """relu is free because optable.yaml gives it the layout_unary trait: without it, the
    conv chain holds relu in the source layout (two more transposes)."""
    import dataclasses
    from types import MappingProxyType

    from translator.table.loader import load_tables

    tables = load_tables()
    assert "layout_unary" in tables.ops["relu"].traits
    assert layout.classes(tables).rules["relu"] is layout.CLASS_RULES["layout_unary"]
    plain = dataclasses.replace(tables, ops=MappingProxyType(
        {**tables.ops, "relu": dataclasses.replace(tables.ops["relu"], traits=frozenset())}))
    assert "relu" not in layout.classes(plain).rules

    def chain() -> tuple[Graph, dict]:
        g = Graph()
        x, feeds = _input(g)
        y = g.add_node("relu", [_conv(g, x, 4, 8, "c1")], outputs=["r1"]).outputs[0]
        g.outputs = [_conv(g, y, 8, 8, "c2")]
        verify.run(g)
        return g, feeds

    g, _ = chain()
    assert layout.run(g, CL_OPS, tables=tables).transposes == 2
    g, feeds = chain()
    expected = run_reference(Model(g), feeds)
    assert layout.run(g, CL_OPS, tables=plain).transposes == 4
    assert not layout.is_channels_last(next(n for n in g.nodes if n.op == "relu"))
    assert compare(expected[0], _eval(g, feeds)[0], rtol=1e-4, atol=1e-4).ok
