"""The check's rounding spread: a model that quantizes at run time (QDQ, dynamic quantization,
TFLite's hybrid kernels) rounds values that land one ulp from a tie on either side,
depending on the backend's summation order; the reference re-run with those roundings
jittered measures how far each output moves, and the check allows twice that.

* values exactly at or next to a tie move the output by one quantization step, values far
  from ties do not move it at all;
* a float model gets no spread (its tolerance is unchanged);
* the spread is bounded by the steps the roundings can take: it does not open the
  tolerance to a wrong conversion.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from translator.run import check


def _qdq(path, scale=0.1):
    """y = 10 * dequantize(quantize(x, scale)) + x"""
    g = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
         helper.make_node("Mul", ["d", "ten"], ["m"]),
         helper.make_node("Add", ["m", "x"], ["y"])],
        "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])],
        [helper.make_tensor("s", TensorProto.FLOAT, [], [scale]), helper.make_tensor("z", TensorProto.INT8, [], [0]),
         helper.make_tensor("ten", TensorProto.FLOAT, [], [10.0])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    return path


def _spread(path, x):
    from translator.compile import interpreter
    from translator.run.harness import convert

    model = convert("numpy", check.model_loader(str(path))())
    feeds = {"x": x.astype(np.float32)}
    return check.rounding_spread(model, feeds, interpreter.run(model, feeds))


def test_ties_move_by_one_step_and_values_far_from_ties_do_not(tmp_path):
    src = _qdq(tmp_path / "qdq.onnx")
    ties = (np.arange(8) + 0.5) * 0.1  # x / scale lands on k + 0.5 (within float32 rounding)
    (s_ties,) = _spread(src, ties)
    assert 0.99 <= s_ties <= 1.01, s_ties  # one step of 0.1, times 10
    (s_far,) = _spread(src, (np.arange(8) + 0.25) * 0.1)
    assert s_far == 0.0


def test_a_float_model_has_no_spread(tmp_path):
    g = helper.make_graph([helper.make_node("Floor", ["x"], ["y"])], "f",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    src = tmp_path / "floor.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(src))
    assert _spread(src, np.asarray([0.5, 1.5, 2.0, 2.9999999])) is None
    res = check.check_model(check.model_loader(str(src)), ["onnx"])
    assert "rounding_spread" not in res


def test_the_widened_tolerance_is_bounded_by_the_steps(tmp_path):
    """Random inputs: the spread is at most one step per rounding (10 x 0.1 here), so an
    artifact off by more than two steps still fails."""
    src = _qdq(tmp_path / "qdq.onnx")
    rng = np.random.default_rng(0)
    (s,) = _spread(src, rng.uniform(-3, 3, 8))
    assert 0.0 <= s <= 1.01
    tol = check._widened({"rtol": 1e-3, "atol": 1e-5}, [s], 0)
    assert tol["atol"] <= 2.02
    e = np.zeros(8, np.float32)
    assert not check.compare_output(e, e + 2.5, tol).ok


def test_check_reports_the_spread_of_a_quantized_model(tmp_path):
    src = _qdq(tmp_path / "qdq.onnx")
    res = check.check_model(check.model_loader(str(src)), ["onnx"], feeds={"x": np.linspace(-1, 1, 8, dtype=np.float32)})
    assert set(res["rounding_spread"]) == {"y"}
    assert check.report_json(res)["rounding_spread"] == res["rounding_spread"]
    assert res["backends"][0].status == "pass"
