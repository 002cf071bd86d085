"""``einsum`` written as transposes, reshapes, matmuls and sums (``compile/einsum.py``): the
expansion evaluated by the NumPy interpreter equals ``np.einsum`` over equations of the shapes
exporters write (attention's bhqd,bhkd->bhqk, tf2onnx's BERT projections, ellipses, a sum, a
transpose, three operands, a broadcast batch); what it cannot write is refused with a reason;
ncnn (no usable Einsum layer) converts one through it."""
from __future__ import annotations

import numpy as np
import pytest

from translator.ir.graph import Graph, Model, TensorType

CASES = [("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
         ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
         ("BTNH,DNH->BTD", [(1, 3, 2, 4), (5, 2, 4)]),
         ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
         ("bij,bjk->bik", [(1, 3, 4), (3, 4, 5)]),
         ("ij->ji", [(3, 4)]),
         ("ij->", [(3, 4)]),
         ("i,i->", [(4,), (4,)]),
         ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
         ("bnd,ndh->bnh", [(2, 3, 4), (3, 4, 5)]),
         ("ab,cd->abcd", [(2, 3), (4, 5)]),
         ("abc,abd->cd", [(2, 3, 4), (2, 3, 5)])]


def _model(eq: str, shapes: list[tuple[int, ...]]) -> tuple[Model, dict[str, np.ndarray]]:
    g = Graph("einsum")
    rng = np.random.default_rng(0)
    feeds, ins = {}, []
    for k, s in enumerate(shapes):
        v = g.add_input(f"x{k}", TensorType("float32", s))
        feeds[v.name] = rng.standard_normal(s).astype(np.float32)
        ins.append(v)
    node = g.add_node("einsum", ins, {"equation": eq}, outputs=["y"])
    g.outputs.append(node.outputs[0])
    return Model(g), feeds


@pytest.mark.parametrize("eq,shapes", CASES, ids=[c[0] for c in CASES])
def test_the_expansion_computes_einsum(eq, shapes):
    from translator.compile import einsum, interpreter
    from translator.ir.infer import infer
    from translator.table.loader import load_tables

    model, feeds = _model(eq, shapes)
    infer(model.graph, load_tables())
    (node,) = model.graph.nodes
    assert einsum.why_not(node) is None
    new = einsum.expand(model.graph, node)
    assert {n.op for n in new} <= {"transpose", "reshape", "matmul", "reduce_sum"}
    assert all(n.op != "einsum" for n in model.graph.nodes)
    infer(model.graph, load_tables())
    (got,) = interpreter.run(model, feeds)
    want = np.einsum(eq, *[feeds[f"x{k}"] for k in range(len(shapes))])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("eq,shapes,why", [("ii->i", [(3, 3)], "diagonal"),
                                           ("ij,jk->ik", [(3, 1), (4, 5)], "broadcasts")])
def test_what_it_cannot_write_is_refused_with_a_reason(eq, shapes, why):
    from translator.compile import einsum

    model, _ = _model(eq, shapes)
    (node,) = model.graph.nodes
    assert why in einsum.why_not(node)


def test_ncnn_converts_an_attention_einsum_through_it(tmp_path):
    pytest.importorskip("ncnn", reason="the ncnn target needs ncnn: pip install 'opbridge[ncnn]'")
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    import opbridge

    g = h.make_graph([h.make_node("Einsum", ["q", "k"], ["y"], equation="bhqd,bhkd->bhqk")], "g",
                     [h.make_tensor_value_info("q", T.FLOAT, [1, 2, 3, 4]),
                      h.make_tensor_value_info("k", T.FLOAT, [1, 2, 5, 4])], [h.make_tensor_value_info("y", T.FLOAT, None)])
    src = tmp_path / "e.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    (rec,) = opbridge.convert(str(src), to="ncnn", out=str(tmp_path / "out"))["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
