"""The IR's edit API keeps producer/consumer links exact; iteration is deterministic."""
from __future__ import annotations

import numpy as np
import pytest

from translator.ir.graph import Graph, TensorType


def _chain():
    g = Graph()
    x = g.add_input("x", TensorType("float32", (2,)))
    a = g.add_node("relu", [x], outputs=["a"]).outputs[0]
    b = g.add_node("neg", [a], outputs=["b"]).outputs[0]
    c = g.add_node("add", [a, b], outputs=["c"]).outputs[0]
    g.outputs = [c]
    return g, x, a, b, c


def test_values_know_producer_and_consumers():
    g, x, a, b, c = _chain()
    assert a.producer.op == "relu" and x.producer is None
    assert [n.op for n in a.consumers()] == ["neg", "add"]
    assert a.uses == [(g.nodes[1], 0), (g.nodes[2], 0)]


def test_replace_all_uses_and_remove():
    g, x, a, b, c = _chain()
    g.replace_all_uses_with(a, x)
    assert a.uses == [] and [n.op for n in x.consumers()] == ["relu", "neg", "add"]
    g.remove_node(a.producer)
    assert [n.op for n in g.nodes] == ["neg", "add"]


def test_remove_refuses_a_node_still_in_use():
    g, x, a, b, c = _chain()
    with pytest.raises(ValueError, match="still used"):
        g.remove_node(a.producer)


def test_toposort_orders_producers_first_and_detects_cycles():
    g, x, a, b, c = _chain()
    g.nodes.reverse()
    g.toposort()
    assert [n.op for n in g.nodes] == ["relu", "neg", "add"]
    g.nodes[0].replace_input(0, c)
    with pytest.raises(ValueError, match="cycle"):
        g.toposort()


def test_unique_names_and_constants_are_not_copied():
    g = Graph()
    arr = np.arange(6, dtype=np.float32)
    c = g.add_constant("w", arr, "float32")
    d = g.add_constant("w", arr, "float32")
    assert c.name == "w" and d.name == "w_1"
    assert c.const is arr


def test_insert_before_keeps_order():
    g, x, a, b, c = _chain()
    n = g.add_node("abs", [x], outputs=["z"], before=b.producer)
    assert [m.op for m in g.nodes] == ["relu", "abs", "neg", "add"]
    assert n.graph is g


def test_pending_edits_apply_in_order():
    """Insertions before a node (also before one just inserted) and removals are recorded
    and applied in one pass when ``nodes`` is read; the order is what eager edits give."""
    g, x, a, b, c = _chain()
    relu, neg = a.producer, b.producer
    p = g.add_node("abs", [x], outputs=["p"], before=neg)
    q = g.add_node("exp", [x], outputs=["q"], before=neg)
    r = g.add_node("sin", [x], outputs=["r"], before=q)  # before a node not yet placed
    g.replace_all_uses_with(a, x)
    g.remove_node(relu)
    gone = g.add_node("cos", [x], outputs=["s"], before=neg)
    g.remove_node(gone)  # inserted and removed before any read
    assert [n.op for n in g.nodes] == ["abs", "sin", "exp", "neg", "add"]
    assert p.graph is g and r.graph is g and relu.graph is None and gone.graph is None
    with pytest.raises(ValueError, match="not in graph"):
        g.add_node("abs", [x], before=relu)
    with pytest.raises(ValueError, match="not in graph"):
        g.remove_node(relu)
    assert len(g) == 5


def _edit_seconds(n: int) -> float:
    """Decompose-like edits on an n-node chain: per node, insert two nodes before it, reroute,
    remove it. The collector is paused, as the passes run (its full passes walk the whole
    process heap, which other tests in this worker have grown)."""
    import time

    from translator.ir.gcpause import gc_paused

    with gc_paused():
        g = Graph()
        v = g.add_input("x", TensorType("float32", (1,)))
        for _ in range(n):
            v = g.add_node("relu", [v], outputs=["t"]).outputs[0]
        g.outputs = [v]
        t = time.process_time()
        for node in list(g.nodes):
            first = g.add_node("neg", [node.inputs[0]], outputs=["t"], before=node)
            second = g.add_node("neg", first.outputs, outputs=["t"], before=node)
            g.replace_all_uses_with(node.outputs[0], second.outputs[0])
            g.remove_node(node)
        assert len(g.nodes) == 2 * n
        return time.process_time() - t


def test_edits_and_names_take_linear_time():
    """10x the nodes costs about 10x (quadratic edits or name scans would cost ~100x); all
    values here share one name root, the worst case for suffix scans. Best of 3 each."""
    _edit_seconds(1_000)  # warm-up
    small = min(_edit_seconds(4_000) for _ in range(3))
    big = min(_edit_seconds(40_000) for _ in range(3))
    assert big / small < 30, f"4k → 40k nodes: {big / small:.1f}x the time"


def test_a_reshape_zero_copies_an_unknown_dim_as_unknown():
    """``Reshape(x, [0, 20, 120])`` of an ``x`` whose shape is not known yet: the 0 copies x's
    dim, so the output's first dim is unknown, never the size 0 (paddle2onnx's attention
    reshapes; a 0 kept there once became a literal zero-size reshape after folding)."""
    from translator.ir.infer import infer

    g = Graph("g")
    x = g.add_input("x", TensorType("float32", None))
    s = g.add_constant("s", np.array([0, 20, 120], np.int64), "int64")
    y = g.add_node("reshape", [x, s], outputs=["y"]).outputs[0]
    g.outputs.append(y)
    infer(g)
    assert y.type.shape == (None, 20, 120)


def test_a_reshape_to_a_run_time_shape_has_the_shapes_length_as_rank():
    """``Reshape(x, Shape(z))`` with nothing of the shape known but its length: the rank is
    known (paddle2onnx's softmax is Flatten → Softmax → Reshape(Shape(x)); a rank-needing
    rule after it must not see an unknown rank)."""
    from translator.ir.infer import infer

    g = Graph()
    x = g.add_input("x", TensorType("float32", ("n", 6)))
    z = g.add_input("z", TensorType("float32", (None, None, None)))
    s = g.add_node("shape", [z], outputs=["s"]).outputs[0]
    y = g.add_node("reshape", [x, s], outputs=["y"]).outputs[0]
    g.outputs = [y]
    infer(g)
    assert y.type.shape is not None and len(y.type.shape) == 3


def test_a_declared_shape_the_computation_contradicts_gives_way():
    """A value typed from a stale declaration (rank 2; a size 1 where 4 is computed) takes the
    computed type; a symbolic dim where the computation knows nothing stays."""
    from translator.ir.infer import infer

    g = Graph()
    x = g.add_input("x", TensorType("float32", ("n", 6)))
    z = g.add_input("z", TensorType("float32", (None, None, None)))
    s = g.add_node("shape", [z], outputs=["s"]).outputs[0]
    y = g.add_node("reshape", [x, s], outputs=["y"]).outputs[0]
    y.type = TensorType("float32", (1, "seqlen"))
    w = g.add_input("w", TensorType("float32", (4, 1)))
    q = g.add_node("relu", [w], outputs=["q"]).outputs[0]
    q.type = TensorType("float32", (1, 1))
    g.outputs = [y, q]
    infer(g)
    assert y.type.shape is not None and len(y.type.shape) == 3
    assert q.type.shape == (4, 1)


@pytest.mark.parametrize("layout", [0, 1])
def test_recurrences_type_their_outputs_from_x(layout):
    """LSTM outputs typed from X (a frontend's anonymous dims give way once X is static)."""
    from translator.ir.infer import infer

    g = Graph()
    x = g.add_input("x", TensorType("float32", (25, 1, 8) if layout == 0 else (1, 25, 8)))
    w = g.add_constant("w", np.zeros((2, 16, 8), np.float32), "float32")
    r = g.add_constant("r", np.zeros((2, 16, 4), np.float32), "float32")
    n = g.add_node("lstm", [x, w, r], outputs=["y", "yh", "yc"], attrs={"hidden_size": 4, "direction": "bidirectional",
                                                                       "layout": layout})
    for v in n.outputs:  # what a frontend declared: anonymous dims where X's are
        if layout == 0:
            v.type = TensorType("float32", ("unk__1", 2, None, 4) if v.name == "y" else (2, None, 4))
        else:
            v.type = TensorType("float32", (None, "unk__1", 2, 4) if v.name == "y" else (None, 2, 4))
    g.outputs = list(n.outputs)
    infer(g)
    if layout == 0:
        assert [v.type.shape for v in n.outputs] == [(25, 2, 1, 4), (2, 1, 4), (2, 1, 4)]
    else:
        assert [v.type.shape for v in n.outputs] == [(1, 25, 2, 4), (1, 2, 4), (1, 2, 4)]


def test_weights_concatenated_from_constants_fold():
    """A Concat of two constant LSTM directions (paddle2onnx) is a weight: it folds although it
    is larger than any one of its inputs (it holds no more than they do together)."""
    from translator.compile.passes import fold_constants

    g = Graph()
    a = g.add_constant("a", np.ones((1, 256, 512), np.float32), "float32")
    b = g.add_constant("b", np.ones((1, 256, 512), np.float32), "float32")
    y = g.add_node("concat", [a, b], outputs=["y"], attrs={"axis": 0}).outputs[0]
    g.outputs = [y]
    assert fold_constants.run(g) == 1 and g.outputs[0].const.shape == (2, 256, 512)


def test_a_reshape_to_a_concat_of_constants_and_run_time_parts_knows_the_constant_dims():
    """``Reshape(x, Concat([0], [1], n, [120]))`` (paddle2onnx's SVTR blocks): the output is
    (x's dim 0, 1, ?, 120), so the channels a conv after it reads stay known."""
    from translator.ir.infer import infer

    g = Graph()
    x = g.add_input("x", TensorType("float32", ("b", None, 120)))
    n = g.add_input("n", TensorType("int64", (1,)))
    parts = [g.add_constant(f"c{i}", np.array([v], np.int64), "int64") for i, v in enumerate((0, 1, 120))]
    s = g.add_node("concat", [parts[0], parts[1], n, parts[2]], outputs=["s"], attrs={"axis": 0}).outputs[0]
    y = g.add_node("reshape", [x, s], outputs=["y"]).outputs[0]
    g.outputs = [y]
    infer(g)
    assert y.type.shape == ("b", 1, None, 120)


def test_same_padding_convolutions_and_pools_type_their_output():
    """auto_pad SAME: ceil(in / stride) on each spatial axis (paddle2onnx v6 OCR models; Core ML's
    fixed dims must reach every value)."""
    from translator.ir.infer import infer

    g = Graph()
    x = g.add_input("x", TensorType("float32", (1, 4, 31, 32)))
    w = g.add_constant("w", np.zeros((6, 4, 2, 2), np.float32), "float32")
    c = g.add_node("conv", [x, w], outputs=["c"], attrs={"auto_pad": "SAME_UPPER", "strides": [2, 2]}).outputs[0]
    p = g.add_node("max_pool", [c], outputs=["p"], attrs={"auto_pad": "SAME_LOWER", "kernel_shape": [3, 3],
                                                           "strides": [2, 3]}).outputs[0]
    g.outputs = [p]
    infer(g)
    assert c.type.shape == (1, 6, 16, 16) and p.type.shape == (1, 6, 8, 6)


def test_a_transpose_of_an_unknown_rank_has_its_perms_rank():
    """DeepFilterNet's GRU input: Transpose(perm=[1, 0, 2]) of a Reshape to a run-time shape of
    unknown length; the perm says the rank (3), which the recurrence needs."""
    from translator.ir.infer import infer

    g = Graph()
    x = g.add_input("x", TensorType("float32", None))
    y = g.add_node("transpose", [x], {"perm": [1, 0, 2]}, outputs=["y"]).outputs[0]
    g.outputs = [y]
    infer(g)
    assert y.type.shape == (None, None, None)


@pytest.mark.parametrize("eq, shapes, want", [
    ("btgi,gih->btgh", [(1, "S", 32, 96), (32, 96, 16)], (1, "S", 32, 16)),  # DeepFilterNet's grouped linear
    ("...ij,jk->...ik", [("b", 2, 3, 4), (4, 5)], ("b", 2, 3, 5)),
    ("ij,jk", [(3, 4), (4, 5)], None),  # implicit output: not typed here
    ("bi,bi->b", [(1, 4), (7, 4)], (7,)),  # a broadcast 1 takes the other size
])
def test_einsum_types_its_output(eq, shapes, want):
    from translator.ir.infer import infer

    g = Graph()
    ins = [g.add_input(f"x{k}", TensorType("float32", s)) for k, s in enumerate(shapes)]
    y = g.add_node("einsum", ins, {"equation": eq}, outputs=["y"]).outputs[0]
    g.outputs = [y]
    infer(g)
    assert y.type.shape == want


def test_einsum_broadcasts_the_ellipsis_dims():
    from translator.ir.infer import infer

    g = Graph()
    a = g.add_input("a", TensorType("float32", (2, 1, 3, 4)))
    b = g.add_input("b", TensorType("float32", (3, 4, 5)))
    y = g.add_node("einsum", [a, b], {"equation": "...ij,...jk->...ik"}, outputs=["y"]).outputs[0]
    g.outputs = [y]
    infer(g)
    assert y.type.shape == (2, 3, 3, 5)


def test_quantize_and_dequantize_take_their_datas_shape():
    """pipecat's QDQ model declares a QuantizeLinear output [unk__7, 6, 64, 400]; with the batch
    fixed its input is static, and so must the output be (Core ML needs static shapes there)."""
    from translator.ir.infer import infer

    g = Graph()
    x = g.add_input("x", TensorType("float32", (1, 6)))
    s = g.add_constant("s", np.asarray(0.5, np.float32), "float32")
    z = g.add_constant("z", np.asarray(0, np.int8), "int8")
    q = g.add_node("quantize_linear", [x, s, z], outputs=["q"]).outputs[0]
    q.type = TensorType("int8", ("unk__7", 6))
    d = g.add_node("dequantize_linear", [q, s, z], outputs=["d"]).outputs[0]
    g.outputs = [d]
    infer(g)
    assert q.type.shape == (1, 6) and d.type.shape == (1, 6)


def test_a_module_imported_while_the_collector_is_paused_is_frozen_out_of_its_passes():
    """A framework imported on first use inside a paused region (TensorFlow: 400k objects) is
    not walked by the collector's next pass: the outermost pause freezes what is alive when
    a module was imported in it; without an import nothing is frozen."""
    import gc
    import sys

    from translator.ir.gcpause import gc_paused

    gc.unfreeze()
    with gc_paused():
        with gc_paused():
            [[] for _ in range(1000)]
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    name = "translator_gcpause_probe_module"
    sys.modules.pop(name, None)
    try:
        with gc_paused():
            import types

            sys.modules[name] = types.ModuleType(name)  # as an import adds it
            keep = [[] for _ in range(1000)]
        assert gc.get_freeze_count() >= len(keep) and gc.isenabled()
    finally:
        sys.modules.pop(name, None)
        gc.unfreeze()
