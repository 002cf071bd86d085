"""The static unrolling of ``loop`` (translator/compile/unroll_loop.py): a loop whose trip count folds
to a constant is inlined iteration by iteration (exact against onnxruntime), a loop whose
condition depends on data is refused with the reason, and Core ML (which lowers no
subgraphs) uses the unrolled form."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from translator.compile import interpreter, unroll
from translator.frontends.onnx import from_proto
from translator.ir.infer import infer
from translator.table.loader import load_tables

T = TensorProto


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def _counted_loop(m: int | None, limit: int | None = None):
    """acc += table[i] * x_state; a scan output of every acc; an int32 counter carried
    beside the float state (heterogeneous carried values). ``m``: a constant trip count M;
    ``limit``: the body's condition is ``counter < limit`` (a while loop) instead of ``cond_in``."""
    cond_nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"])] if limit is None else [
        helper.make_node("Less", ["cnt_out", "limit"], ["cond_out"])]
    body = helper.make_graph(
        [helper.make_node("Add", ["cnt_in", "one"], ["cnt_out"]),
         helper.make_node("Gather", ["table", "i"], ["row"]),
         helper.make_node("Mul", ["row", "acc_in"], ["prod"]),
         helper.make_node("Add", ["acc_in", "prod"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["trace"]), *cond_nodes],
        "body",
        [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
         helper.make_tensor_value_info("cnt_in", T.INT32, []), helper.make_tensor_value_info("acc_in", T.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("cnt_out", T.INT32, []),
         helper.make_tensor_value_info("acc_out", T.FLOAT, [2, 3]), helper.make_tensor_value_info("trace", T.FLOAT, [2, 3])],
        [helper.make_tensor("one", T.INT32, [], [1]), helper.make_tensor("limit", T.INT32, [], [limit or 0])])
    table = helper.make_tensor("table", T.FLOAT, [8, 3], (np.arange(24, dtype=np.float32) / 10).tolist())
    inits = [table, helper.make_tensor("zero", T.INT32, [], [0]), helper.make_tensor("yes", T.BOOL, [], [True])]
    if m is not None:
        inits.append(helper.make_tensor("M", T.INT64, [], [m]))
    loop = helper.make_node("Loop", ["M" if m is not None else "", "yes", "zero", "x"], ["cnt", "y", "ys"], body=body)
    return _model([loop], [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                  [helper.make_tensor_value_info("cnt", T.INT32, []), helper.make_tensor_value_info("y", T.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("ys", T.FLOAT, [None, 2, 3])], inits)


def _ort(proto, feeds):
    import onnxruntime as ort

    s = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _unrolled(proto):
    m = from_proto(proto)
    g = m.graph
    (node,) = [n for n in g.nodes if n.op == "loop"]
    why = unroll.why_not(node)
    if why is None:
        unroll.expand(g, node)
        infer(g, load_tables())
    return m, why


@pytest.mark.parametrize("m,limit,trips", [(5, None, 5), (None, 3, 3), (6, 4, 4), (0, None, 0)],
                         ids=["for_M5", "while_lt3", "M6_stops_at_4", "M0"])
def test_static_trip_count_unrolls_exactly(m, limit, trips):
    proto = _counted_loop(m, limit)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    if trips == 0:  # zero iterations and a scan output: the element shape is unknown, so it stays a loop
        node = next(n for n in from_proto(proto).graph.nodes if n.op == "loop")
        assert "zero times" in unroll.why_not(node)
        return
    model, why = _unrolled(proto)
    assert why is None
    assert not any(n.op == "loop" for n in model.graph.walk())
    want = _ort(proto, {"x": x})
    got = interpreter.run(model, {"x": x}, {})
    assert int(got[0]) == trips == int(want[0])
    np.testing.assert_array_equal(np.asarray(got[1]), want[1])
    assert np.asarray(got[2]).shape == (trips, 2, 3)
    np.testing.assert_array_equal(np.asarray(got[2]), want[2])


def _data_loop():
    """while sum(acc) < 10: acc = acc * 2 (the condition reads the data)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "acc_in"], ["acc_out"]),
         helper.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "ten"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
         helper.make_tensor_value_info("acc_in", T.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("acc_out", T.FLOAT, [3])],
        [helper.make_tensor("ten", T.FLOAT, [], [10.0])])
    loop = helper.make_node("Loop", ["", "yes", "x"], ["y"], body=body)
    return _model([loop], [helper.make_tensor_value_info("x", T.FLOAT, [3])], [helper.make_tensor_value_info("y", T.FLOAT, [3])],
                  [helper.make_tensor("yes", T.BOOL, [], [True])])


def test_data_dependent_condition_is_refused_with_the_reason():
    _, why = _unrolled(_data_loop())
    assert why is not None and "condition is not a constant after iteration 0" in why and "depends on data" in why


def test_trip_count_over_the_cap_is_refused():
    node = next(n for n in from_proto(_counted_loop(unroll.LOOP_CAP + 1)).graph.nodes if n.op == "loop")
    assert f"more than {unroll.LOOP_CAP} iterations" in unroll.why_not(node)


def _coreml_ready():
    import importlib.util

    return importlib.util.find_spec("coremltools") is not None


@pytest.mark.xfail(not _coreml_ready(), strict=True, reason="coremltools is not installed")
def test_coreml_unrolls_the_counted_loop_and_runs_the_data_dependent_one_as_a_while_loop(tmp_path):
    import onnx

    from translator.run.convert import convert

    ok = tmp_path / "counted.onnx"
    onnx.save(_counted_loop(5), ok)
    res = convert(str(ok), "coreml", str(tmp_path / "counted.mlpackage"), check=True)
    (rec,) = res["targets"]
    assert rec["status"] == "ok", rec
    bad = tmp_path / "data.onnx"
    onnx.save(_data_loop(), bad)
    res = convert(str(bad), "coreml", str(tmp_path / "data.mlpackage"), check=True)
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec  # MIL while_loop (coreml/control.py)
