"""Core ML control flow decided at run time: ONNX ``If`` → MIL ``cond``, ``Loop`` (run-time trip
count or condition) and ``Scan`` → MIL ``while_loop`` (emitters/coreml/control.py).

Every model goes through ``opbridge.convert(..., to="coreml")`` with its check: the written
package is run by the project's MIL evaluator (Linux: no Core ML runtime) and compared with
the NumPy reference and onnxruntime; a pass here is numeric (never ``structural_only``), and
the written program is read back to show the control flow is there (not folded away)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

pytest.importorskip("coremltools")

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _evaluator_only(monkeypatch):
    """The numbers come from the MIL evaluator on the written package, never from
    coremltools' value inference (the fallback for programs with ops the evaluator lacks)."""
    from emitters.coreml import runtime

    monkeypatch.setattr(runtime, "VALUE_INFERENCE_FALLBACK", False)


def _save(path, nodes, inputs, outputs, inits=(), opset=17):
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, str(path))
    return path


def _vi(name, dt, shape):
    return h.make_tensor_value_info(name, dt, shape)


def _mil_ops(out_dir) -> set[str]:
    """The op types of the written package's program, nested blocks included."""
    from emitters.coreml import mil_eval

    prog = mil_eval.load(out_dir / "model.mlpackage")
    return {o.type for o in mil_eval._walk(prog.main)}  # noqa: SLF001 - the evaluator's own walk


def _convert(path, out, inputs=None) -> dict:
    """Convert to coreml with the check; assert a numeric pass of every output (reference and
    onnxruntime). Returns the target's record."""
    import opbridge

    res = opbridge.convert(str(path), to="coreml", out=str(out), inputs=inputs)
    (rec,) = res["targets"]
    assert rec["status"] == "ok", rec
    chk = rec["check"]
    assert chk["status"] == "pass", chk
    for o in chk["outputs"]:
        assert o["ok"] and o["verdict"].startswith("pass"), o  # "pass (legalized int64→int32)" too
        assert o["vs_source"] is None or o["vs_source"]["ok"], o
    assert res["written"] and res["exit"] == 0, res
    return rec


# ----------------------------------------------------------------------------- If
def _if_on_input(path):
    """y = x * 2 if c else -x (c: a bool scalar graph input)."""
    then_g = h.make_graph([h.make_node("Mul", ["x", "two"], ["t_out"])], "then", [], [_vi("t_out", T.FLOAT, [2, 3])],
                          [h.make_tensor("two", T.FLOAT, [], [2.0])])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["e_out"])], "else", [], [_vi("e_out", T.FLOAT, [2, 3])])
    return _save(path, [h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                 [_vi("c", T.BOOL, []), _vi("x", T.FLOAT, [2, 3])], [_vi("y", T.FLOAT, [2, 3])])


@pytest.mark.parametrize("c", [True, False])
def test_if_on_a_bool_input_takes_either_branch(tmp_path, c):
    src = _if_on_input(tmp_path / "m.onnx")
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    _convert(src, tmp_path / "out", {"c": np.array(c), "x": x})
    assert "cond" in _mil_ops(tmp_path / "out")
    from emitters.coreml import mil_eval

    got = mil_eval.evaluate(mil_eval.load(tmp_path / "out" / "model.mlpackage"), {"c": np.float32(c), "x": x})
    np.testing.assert_array_equal(got["y"], x * 2 if c else -x)


def _if_on_computed_predicate(path):
    """y = relu(x) + k, z = int64 argmax if sum(x) > 0.5 else (x * x - k, an int64 constant):
    two outputs, one int64 (computed in int32 on Core ML), branches reading outer values
    (x, k) and constants of their own."""
    k = h.make_tensor("k", T.FLOAT, [3], [0.5, -1.0, 2.0])
    then_g = h.make_graph([h.make_node("Relu", ["x"], ["r"]), h.make_node("Add", ["r", "k"], ["t0"]),
                           h.make_node("ArgMax", ["x"], ["t1"], axis=1, keepdims=0)], "then", [],
                          [_vi("t0", T.FLOAT, [2, 3]), _vi("t1", T.INT64, [2])])
    else_g = h.make_graph([h.make_node("Mul", ["x", "x"], ["sq"]), h.make_node("Sub", ["sq", "k"], ["e0"]),
                           h.make_node("Identity", ["seven"], ["e1"])], "else", [],
                          [_vi("e0", T.FLOAT, [2, 3]), _vi("e1", T.INT64, [2])],
                          [h.make_tensor("seven", T.INT64, [2], [7, -7])])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "half"], ["c"]),
             h.make_node("If", ["c"], ["y", "z"], then_branch=then_g, else_branch=else_g)]
    return _save(path, nodes, [_vi("x", T.FLOAT, [2, 3])], [_vi("y", T.FLOAT, [2, 3]), _vi("z", T.INT64, [2])],
                 [k, h.make_tensor("half", T.FLOAT, [], [0.5])])


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_if_on_a_computed_predicate_with_outer_values_and_constants(tmp_path, sign):
    src = _if_on_computed_predicate(tmp_path / "m.onnx")
    x = (sign * (np.abs(RNG.standard_normal((2, 3))) + 0.5)).astype(np.float32)
    rec = _convert(src, tmp_path / "out", {"x": x})
    assert [o["name"] for o in rec["check"]["outputs"]] == ["y", "z"]
    assert {"cond", "reduce_sum", "greater"} <= _mil_ops(tmp_path / "out")


def _nested_if(path):
    """y = (x + 1 if b else x - 1) if a else x * 3: an If inside the then branch."""
    inner_then = h.make_graph([h.make_node("Add", ["x", "one"], ["it"])], "inner_then", [], [_vi("it", T.FLOAT, [4])])
    inner_else = h.make_graph([h.make_node("Sub", ["x", "one"], ["ie"])], "inner_else", [], [_vi("ie", T.FLOAT, [4])])
    outer_then = h.make_graph([h.make_node("If", ["b"], ["ot"], then_branch=inner_then, else_branch=inner_else)],
                              "outer_then", [], [_vi("ot", T.FLOAT, [4])])
    outer_else = h.make_graph([h.make_node("Mul", ["x", "three"], ["oe"])], "outer_else", [], [_vi("oe", T.FLOAT, [4])],
                              [h.make_tensor("three", T.FLOAT, [], [3.0])])
    return _save(path, [h.make_node("If", ["a"], ["y"], then_branch=outer_then, else_branch=outer_else)],
                 [_vi("a", T.BOOL, [1]), _vi("b", T.BOOL, []), _vi("x", T.FLOAT, [4])], [_vi("y", T.FLOAT, [4])],
                 [h.make_tensor("one", T.FLOAT, [], [1.0])])


@pytest.mark.parametrize("a,b", [(True, True), (True, False), (False, True)])
def test_nested_if(tmp_path, a, b):
    src = _nested_if(tmp_path / "m.onnx")
    x = RNG.standard_normal(4).astype(np.float32)
    _convert(src, tmp_path / "out", {"a": np.array([a]), "b": np.array(b), "x": x})
    from emitters.coreml import mil_eval

    prog = mil_eval.load(tmp_path / "out" / "model.mlpackage")
    assert sum(o.type == "cond" for o in mil_eval._walk(prog.main)) == 2  # noqa: SLF001


def test_branches_of_different_shapes_are_refused_with_the_reason(tmp_path):
    """ONNX lets the branches return different shapes; MIL cond gives each output one type."""
    import opbridge

    then_g = h.make_graph([h.make_node("Identity", ["x"], ["t"])], "then", [], [_vi("t", T.FLOAT, [2, 3])])
    else_g = h.make_graph([h.make_node("Concat", ["x", "x"], ["e"], axis=0)], "else", [], [_vi("e", T.FLOAT, [4, 3])])
    src = _save(tmp_path / "m.onnx", [h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                [_vi("c", T.BOOL, []), _vi("x", T.FLOAT, [2, 3])], [_vi("y", T.FLOAT, ["rows", 3])])
    res = opbridge.convert(str(src), to="coreml", out=str(tmp_path / "out"), check=False)
    (rec,) = res["targets"]
    assert rec["status"] == "failed" and rec["reason"] == "type_mismatch", rec
    assert "(2, 3)" in rec["detail"] and "(4, 3)" in rec["detail"], rec
    assert not (tmp_path / "out").exists()


def test_the_plan_reports_if_as_native(tmp_path):
    from translator.compile.pipeline import plan
    from translator.frontends import load

    model = load(str(_if_on_computed_predicate(tmp_path / "m.onnx")))
    ctx = plan(model, "coreml")
    assert not ctx.refusals, ctx.refusals
    (node,) = [n for n in model.graph.nodes if n.op == "if"]
    assert ctx.how[node.name] == "native"


def test_a_large_constant_node_in_a_branch_becomes_a_weight(tmp_path):
    """A Constant node past constant folding's size limit (70,000 elements: silero's STFT basis
    is 66,048) becomes a weight of the builder (``prepare.fold_constant_nodes``)."""
    big = onnx.numpy_helper.from_array((np.arange(70000, dtype=np.float32) / 7e4), "big")
    then_g = h.make_graph([h.make_node("Constant", [], ["w"], value=big), h.make_node("Add", ["x", "w"], ["t"])], "then",
                          [], [_vi("t", T.FLOAT, [70000])])
    else_g = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", T.FLOAT, [70000])])
    src = _save(tmp_path / "m.onnx", [h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                [_vi("c", T.BOOL, []), _vi("x", T.FLOAT, [70000])], [_vi("y", T.FLOAT, [70000])])
    _convert(src, tmp_path / "out", {"c": np.array(True), "x": RNG.standard_normal(70000).astype(np.float32)})


# ----------------------------------------------------------------------------- Loop
def _runtime_loop(path):
    """for i in range(n): acc = acc * 0.5 + x * i; cnt += 1; trace[i] = acc (n: an int64 input)."""
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
         h.make_node("Mul", ["x", "fi"], ["xi"]),
         h.make_node("Mul", ["acc_in", "half"], ["decay"]),
         h.make_node("Add", ["decay", "xi"], ["acc_out"]),
         h.make_node("Add", ["cnt_in", "one"], ["cnt_out"]),
         h.make_node("Identity", ["acc_out"], ["trace"]),
         h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("acc_in", T.FLOAT, [2, 3]), _vi("cnt_in", T.INT32, [])],
        [_vi("cond_out", T.BOOL, []), _vi("acc_out", T.FLOAT, [2, 3]), _vi("cnt_out", T.INT32, []),
         _vi("trace", T.FLOAT, [2, 3])],
        [h.make_tensor("half", T.FLOAT, [], [0.5]), h.make_tensor("one", T.INT32, [], [1])])
    loop = h.make_node("Loop", ["n", "", "x", "zero"], ["acc", "cnt", "traces"], body=body)
    return _save(path, [loop], [_vi("n", T.INT64, []), _vi("x", T.FLOAT, [2, 3])],
                 [_vi("acc", T.FLOAT, [2, 3]), _vi("cnt", T.INT32, []), _vi("traces", T.FLOAT, [None, 2, 3])],
                 [h.make_tensor("zero", T.INT32, [], [0])])


@pytest.mark.parametrize("n", [1, 4])
def test_loop_with_a_run_time_trip_count(tmp_path, n):
    src = _runtime_loop(tmp_path / "m.onnx")
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    _convert(src, tmp_path / "out", {"n": np.array(n, np.int64), "x": x})
    ops = _mil_ops(tmp_path / "out")
    assert {"while_loop", "make_list", "list_write", "list_gather"} <= ops
    from emitters.coreml import mil_eval

    got = mil_eval.evaluate(mil_eval.load(tmp_path / "out" / "model.mlpackage"), {"n": np.int32(n), "x": x})
    assert got["traces"].shape == (n, 2, 3) and int(got["cnt"]) == n


def _data_loop(path):
    """while sum(acc) < 10: acc = acc * 2 (no trip count; the condition reads the data)."""
    body = h.make_graph(
        [h.make_node("Add", ["acc_in", "acc_in"], ["acc_out"]),
         h.make_node("ReduceSum", ["acc_out"], ["s"], keepdims=0),
         h.make_node("Less", ["s", "ten"], ["cond_out"])],
        "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("acc_in", T.FLOAT, [3])],
        [_vi("cond_out", T.BOOL, []), _vi("acc_out", T.FLOAT, [3])], [h.make_tensor("ten", T.FLOAT, [], [10.0])])
    return _save(path, [h.make_node("Loop", ["", "yes", "x"], ["y"], body=body)], [_vi("x", T.FLOAT, [3])],
                 [_vi("y", T.FLOAT, [3])], [h.make_tensor("yes", T.BOOL, [], [True])])


def test_loop_whose_condition_reads_the_data(tmp_path):
    src = _data_loop(tmp_path / "m.onnx")
    _convert(src, tmp_path / "out", {"x": np.array([0.1, 0.2, 0.3], np.float32)})
    assert "while_loop" in _mil_ops(tmp_path / "out")


def _cond_input_loop(path, scans=True):
    """k = k0; do { k += 1; sc[i] = k * sum(x) } while k < lim, entered only if ``go``: the
    condition is a graph input, the trip count is absent, the scan output is a scalar per
    iteration (stacked to a vector), the carried value int64 (int32 on Core ML)."""
    nodes = [h.make_node("Add", ["k_in", "one"], ["k_out"]), h.make_node("Less", ["k_out", "lim"], ["cond_out"])]
    outs = [_vi("cond_out", T.BOOL, []), _vi("k_out", T.INT64, [])]
    if scans:
        nodes += [h.make_node("Cast", ["k_out"], ["kf"], to=T.FLOAT), h.make_node("ReduceSum", ["x"], ["sx"], keepdims=0),
                  h.make_node("Mul", ["kf", "sx"], ["sc"])]
        outs.append(_vi("sc", T.FLOAT, []))
    body = h.make_graph(nodes, "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("k_in", T.INT64, [])],
                        outs, [h.make_tensor("one", T.INT64, [], [1])])
    return _save(path, [h.make_node("Loop", ["", "go", "k0"], ["k", "scs"] if scans else ["k"], body=body)],
                 [_vi("go", T.BOOL, []), _vi("k0", T.INT64, []), _vi("lim", T.INT64, []), _vi("x", T.FLOAT, [3])],
                 [_vi("k", T.INT64, [])] + ([_vi("scs", T.FLOAT, ["n"])] if scans else []))


@pytest.mark.parametrize("go,scans", [(True, True), (False, False)], ids=["runs", "never_runs"])
def test_loop_entered_on_a_condition_input(tmp_path, go, scans):
    src = _cond_input_loop(tmp_path / "m.onnx", scans)
    feeds = {"go": np.array(go), "k0": np.array(2, np.int64), "lim": np.array(6, np.int64),
             "x": RNG.standard_normal(3).astype(np.float32)}
    _convert(src, tmp_path / "out", feeds)
    assert "while_loop" in _mil_ops(tmp_path / "out")


def _nested_loops(path):
    """for i in range(n): (for j in range(i): acc += x); acc *= 0.5: the inner trip count is
    the outer iteration number."""
    inner = h.make_graph([h.make_node("Add", ["a_in", "x"], ["a_out"]), h.make_node("Identity", ["c_in"], ["c_out"])],
                         "inner", [_vi("j", T.INT64, []), _vi("c_in", T.BOOL, []), _vi("a_in", T.FLOAT, [2])],
                         [_vi("c_out", T.BOOL, []), _vi("a_out", T.FLOAT, [2])])
    outer = h.make_graph([h.make_node("Loop", ["i", "", "acc_in"], ["acc_mid"], body=inner),
                          h.make_node("Mul", ["acc_mid", "half"], ["acc_out"]),
                          h.make_node("Identity", ["cond_in"], ["cond_out"])],
                         "outer", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("acc_in", T.FLOAT, [2])],
                         [_vi("cond_out", T.BOOL, []), _vi("acc_out", T.FLOAT, [2])],
                         [h.make_tensor("half", T.FLOAT, [], [0.5])])
    return _save(path, [h.make_node("Loop", ["n", "", "x"], ["y"], body=outer)],
                 [_vi("n", T.INT64, []), _vi("x", T.FLOAT, [2])], [_vi("y", T.FLOAT, [2])])


@pytest.mark.parametrize("n", [0, 4])
def test_nested_loops(tmp_path, n):
    src = _nested_loops(tmp_path / "m.onnx")
    _convert(src, tmp_path / "out", {"n": np.array(n, np.int64), "x": np.array([1.0, 2.0], np.float32)})
    from emitters.coreml import mil_eval

    prog = mil_eval.load(tmp_path / "out" / "model.mlpackage")
    assert sum(o.type == "while_loop" for o in mil_eval._walk(prog.main)) == 2  # noqa: SLF001


def _bounded_while(path):
    """M = INT64_MAX ("no limit", as exporters write a while loop) and a data condition:
    while max(h) < 4 and at most M times: h = h + x; steps = i."""
    body = h.make_graph(
        [h.make_node("Add", ["h_in", "x"], ["h_out"]),
         h.make_node("ReduceMax", ["h_out"], ["mx"], keepdims=0),
         h.make_node("Less", ["mx", "four"], ["cond_out"]),
         h.make_node("Identity", ["i"], ["step"])],
        "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("h_in", T.FLOAT, [2, 2])],
        [_vi("cond_out", T.BOOL, []), _vi("h_out", T.FLOAT, [2, 2]), _vi("step", T.INT64, [])],
        [h.make_tensor("four", T.FLOAT, [], [4.0])])
    nodes = [h.make_node("ReduceMax", ["x"], ["m0"], keepdims=0), h.make_node("Less", ["m0", "four"], ["go"]),
             h.make_node("Loop", ["M", "go", "x"], ["y", "steps"], body=body)]
    return _save(path, nodes, [_vi("x", T.FLOAT, [2, 2])], [_vi("y", T.FLOAT, [2, 2]), _vi("steps", T.INT64, [None])],
                 [h.make_tensor("M", T.INT64, [], [2 ** 63 - 1]), h.make_tensor("four", T.FLOAT, [], [4.0])])


def test_while_loop_with_an_int64_max_trip_count(tmp_path):
    src = _bounded_while(tmp_path / "m.onnx")
    x = np.array([[0.5, 1.0], [0.25, 0.75]], np.float32)
    _convert(src, tmp_path / "out", {"x": x})
    assert "while_loop" in _mil_ops(tmp_path / "out")


def _if_in_loop(path):
    """A loop whose body branches on the iteration number's parity: acc += x (even) or acc *= -1 (odd)."""
    then_g = h.make_graph([h.make_node("Add", ["acc_in", "x"], ["t"])], "then", [], [_vi("t", T.FLOAT, [3])])
    else_g = h.make_graph([h.make_node("Neg", ["acc_in"], ["e"])], "else", [], [_vi("e", T.FLOAT, [3])])
    body = h.make_graph(
        [h.make_node("Mod", ["i", "two"], ["r"]), h.make_node("Equal", ["r", "zero"], ["even"]),
         h.make_node("If", ["even"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("acc_in", T.FLOAT, [3])],
        [_vi("cond_out", T.BOOL, []), _vi("acc_out", T.FLOAT, [3])],
        [h.make_tensor("two", T.INT64, [], [2]), h.make_tensor("zero", T.INT64, [], [0])])
    return _save(path, [h.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
                 [_vi("n", T.INT64, [1]), _vi("x", T.FLOAT, [3])], [_vi("y", T.FLOAT, [3])])


def test_if_inside_a_loop(tmp_path):
    src = _if_in_loop(tmp_path / "m.onnx")
    _convert(src, tmp_path / "out", {"n": np.array([5], np.int64), "x": RNG.standard_normal(3).astype(np.float32)})
    assert {"while_loop", "cond"} <= _mil_ops(tmp_path / "out")


def _sliding_loop(path):
    """for i in range(n): acc = acc + table[i:i+1] (a Slice at the iteration number, as ONNX's
    test_loop11) and rows[i] = acc."""
    body = h.make_graph(
        [h.make_node("Add", ["i", "one"], ["i1"]),
         h.make_node("Unsqueeze", ["i", "ax"], ["s"]), h.make_node("Unsqueeze", ["i1", "ax"], ["e"]),
         h.make_node("Slice", ["table", "s", "e"], ["row"]),
         h.make_node("Add", ["acc_in", "row"], ["acc_out"]), h.make_node("Identity", ["acc_out"], ["trace"]),
         h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", T.INT64, []), _vi("cond_in", T.BOOL, []), _vi("acc_in", T.FLOAT, [1])],
        [_vi("cond_out", T.BOOL, []), _vi("acc_out", T.FLOAT, [1]), _vi("trace", T.FLOAT, [1])],
        [h.make_tensor("one", T.INT64, [], [1]), h.make_tensor("ax", T.INT64, [1], [0])])
    return _save(path, [h.make_node("Loop", ["n", "", "acc0"], ["acc", "traces"], body=body)],
                 [_vi("n", T.INT64, []), _vi("acc0", T.FLOAT, [1]), _vi("table", T.FLOAT, [6])],
                 [_vi("acc", T.FLOAT, [1]), _vi("traces", T.FLOAT, [None, 1])])


def test_loop_slicing_at_its_iteration_number(tmp_path):
    """The slice's bounds are run-time values inside the body (``runtime_inputs.slice_runtime``);
    MIL types the slice with a symbolic dim, the carried value keeps its static type."""
    src = _sliding_loop(tmp_path / "m.onnx")
    feeds = {"n": np.array(5, np.int64), "acc0": np.zeros(1, np.float32), "table": RNG.standard_normal(6).astype(np.float32)}
    _convert(src, tmp_path / "out", feeds)
    assert {"while_loop", "slice_by_index"} <= _mil_ops(tmp_path / "out")


@pytest.mark.parametrize("starts,ends", [([1, -3], [3, 100]), ([-10, 0], [-1, 2]), ([2, 3], [1, 4])],
                         ids=["in_range", "negative_and_clamped", "empty"])
def test_slice_bounds_fed_at_run_time(tmp_path, starts, ends):
    """Starts and ends as graph inputs (constant axes and steps): ONNX's wrap and clamp
    computed in the graph."""
    nodes = [h.make_node("Slice", ["x", "s", "e", "axes", "steps"], ["y"])]
    src = _save(tmp_path / "m.onnx", nodes, [_vi("x", T.FLOAT, [4, 5]), _vi("s", T.INT64, [2]), _vi("e", T.INT64, [2])],
                [_vi("y", T.FLOAT, ["a", "b"])],
                [h.make_tensor("axes", T.INT64, [2], [0, 1]), h.make_tensor("steps", T.INT64, [2], [1, 2])])
    feeds = {"x": RNG.standard_normal((4, 5)).astype(np.float32), "s": np.array(starts, np.int64),
             "e": np.array(ends, np.int64)}
    _convert(src, tmp_path / "out", feeds)
    assert "slice_by_index" in _mil_ops(tmp_path / "out")


# ----------------------------------------------------------------------------- Scan
def _scan(path, reverse_in=0, reverse_out=0, out_axis=0):
    """A cumulative sum over axis 1 of x [2, 5, 3] (state [2, 3]), plus a scan output of
    state * 2 stacked on ``out_axis``."""
    body = h.make_graph([h.make_node("Add", ["s_in", "e"], ["s_out"]), h.make_node("Mul", ["s_out", "two"], ["o"])],
                        "body", [_vi("s_in", T.FLOAT, [2, 3]), _vi("e", T.FLOAT, [2, 3])],
                        [_vi("s_out", T.FLOAT, [2, 3]), _vi("o", T.FLOAT, [2, 3])],
                        [h.make_tensor("two", T.FLOAT, [], [2.0])])
    node = h.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1, scan_input_axes=[1],
                       scan_input_directions=[reverse_in], scan_output_directions=[reverse_out],
                       scan_output_axes=[out_axis])
    shape = [[5, 2, 3], [2, 5, 3], [2, 3, 5]][out_axis]
    return _save(path, [node], [_vi("s0", T.FLOAT, [2, 3]), _vi("x", T.FLOAT, [2, 5, 3])],
                 [_vi("s", T.FLOAT, [2, 3]), _vi("ys", T.FLOAT, shape)])


@pytest.mark.parametrize("reverse_in,reverse_out,out_axis", [(0, 0, 0), (1, 0, 1), (0, 1, 2)])
def test_scan_is_a_while_loop(tmp_path, reverse_in, reverse_out, out_axis):
    src = _scan(tmp_path / "m.onnx", reverse_in, reverse_out, out_axis)
    _convert(src, tmp_path / "out")
    assert {"while_loop", "gather", "list_write", "list_gather"} <= _mil_ops(tmp_path / "out")


# ----------------------------------------------------------------------------- what stays as it was
def test_a_counted_loop_is_still_unrolled(tmp_path):
    """A trip count that folds to a constant unrolls to straight-line MIL, as before."""
    src = _runtime_loop(tmp_path / "m.onnx")
    m = onnx.load(str(src))
    m.graph.input.pop(0)
    m.graph.initializer.append(h.make_tensor("n", T.INT64, [], [3]))
    onnx.save(m, str(tmp_path / "counted.onnx"))
    _convert(tmp_path / "counted.onnx", tmp_path / "out")
    assert "while_loop" not in _mil_ops(tmp_path / "out")
