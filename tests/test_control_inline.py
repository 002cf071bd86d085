"""``passes/control``: an ``if`` whose condition folds to a constant becomes the branch it
takes, so targets without control flow (Core ML) convert it, and the result is exact."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h


def _guarded(path, batch):
    """y = relu(x) * 2 if x.shape[0] > 1 else x - 1 (the kind of size guard exporters emit)."""
    two = h.make_tensor("two", T.FLOAT, [], [2.0])
    one = h.make_tensor("one", T.FLOAT, [], [1.0])
    then_g = h.make_graph([h.make_node("Relu", ["x"], ["r"]), h.make_node("Mul", ["r", "two"], ["t_out"])], "then",
                          [], [h.make_tensor_value_info("t_out", T.FLOAT, None)], [two])
    else_g = h.make_graph([h.make_node("Sub", ["x", "one"], ["e_out"])], "else",
                          [], [h.make_tensor_value_info("e_out", T.FLOAT, None)], [one])
    nodes = [h.make_node("Shape", ["x"], ["s"]),
             h.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             h.make_node("Greater", ["n", "onei"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [batch, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [batch, 4])],
                     [h.make_tensor("zero", T.INT64, [], [0]), h.make_tensor("onei", T.INT64, [], [1])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("target", ["pytorch", "openvino", "coreml"])
def test_constant_if_is_inlined_on_folding_targets(tmp_path, batch, target):
    from translator.frontends import load
    from translator.compile.pipeline import compile

    model = load(str(_guarded(tmp_path / "m.onnx", batch)))
    done = compile(model, target)
    ops = done.model.op_histogram()
    assert "if" not in ops and ("mul" in ops) == (batch > 1) and ("sub" in ops) == (batch == 1), ops
    assert "if" in model.op_histogram()  # the caller's IR is untouched


def test_core_ml_converts_a_size_guard_and_checks(tmp_path):
    import opbridge

    src = _guarded(tmp_path / "m.onnx", 3)
    res = opbridge.convert(str(src), to="coreml,onnx", out=str(tmp_path / "out"))
    assert res["written"], res
    for r in res["targets"]:
        assert r["status"] == "ok" and r["check"]["status"] == "pass", r


def test_a_data_dependent_if_is_kept():
    from translator.ir.graph import Graph, TensorType
    from translator.compile.passes.control import inline_constant_ifs

    g = Graph()
    c = g.add_input("c", TensorType("bool", ()))
    then_g, else_g = Graph("then"), Graph("else")
    node = g.add_node("if", [c], {"then_branch": then_g, "else_branch": else_g}, outputs=0)
    assert inline_constant_ifs(g) == 0 and node in g.nodes
    c2 = g.add_constant("k", np.array(True), "bool")
    node.replace_input(0, c2)
    assert inline_constant_ifs(g) == 1 and node not in g.nodes
