"""Core ML: operands MIL takes as constants but a model feeds at run time (reduction axes,
squeeze/unsqueeze axes, split sizes, top-k k, cumsum axis, one-hot depth, conv_transpose
weights), and the small dtypes MIL lacks (float8, float4, int4/2), computed in wider ones and
rounded in the graph. The NumPy reference (``translator.compile.interpreter``) decides every value;
each artifact is run as written (saved, loaded back: the MIL evaluator on Linux)."""
from __future__ import annotations

import numpy as np
import pytest

from emitters import coreml
from translator.compile import interpreter
from translator.run.harness import compare, single_op_model

RNG = np.random.default_rng(3)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _written(art, feeds):
    from translator.run.artifact_io import run_written

    return run_written("coreml", art, feeds)


def _check(model, feeds) -> list[np.ndarray]:
    got = _written(coreml.emit(model), feeds)
    want = interpreter.run(model, feeds)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype and compare(w, g).ok
    return got


_REDUCTIONS = ["reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min", "reduce_l1", "reduce_l2",
               "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square"]


@pytest.mark.parametrize("op", _REDUCTIONS)
@pytest.mark.parametrize("axes,keepdims", [([-1], 1), ([0, 2], 0), ([1], 0), ([], 1)])
def test_runtime_reduction_axes_match_the_reference(op, axes, keepdims):
    """Axes fed at run time (MIL reduces over constant axes only): every axis is reduced
    under a mask, then sliced and reshaped to the kept dims; the NumPy reference decides."""
    x = np.abs(_f32(2, 3, 4)) + 0.5
    model, feeds = single_op_model(op, [x, np.asarray(axes, np.int64)], {"keepdims": keepdims})
    (y,) = _written(coreml.emit(model), feeds)
    (want,) = interpreter.run(model, feeds)
    assert y.shape == np.asarray(want).shape and compare(want, y).ok


@pytest.mark.parametrize("op,fill", [("reduce_sum", 0.0), ("reduce_prod", 1.0), ("reduce_max", -np.inf),
                                     ("reduce_log_sum", -np.inf)])
def test_runtime_reduction_of_an_empty_axis_is_the_identity(op, fill):
    x = np.zeros((2, 0, 3), np.float32)
    model, feeds = single_op_model(op, [x, np.asarray([1], np.int64)], {"keepdims": 1})
    (y,) = _written(coreml.emit(model), feeds)
    assert y.shape == (2, 1, 3) and np.all(y == fill)
    model, feeds = single_op_model(op, [x, np.asarray([2], np.int64)], {"keepdims": 0})
    (y,) = _written(coreml.emit(model), feeds)
    assert y.shape == (2, 0)


_SMALL = ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1"]


@pytest.mark.parametrize("dtype", _SMALL)
@pytest.mark.parametrize("saturate", [1, 0])
def test_small_float_casts_round_in_the_graph(dtype, saturate):
    """float8 / float4 results are computed in fp32 and rounded onto the format's values in
    the graph (ties to even, subnormals, saturation or the overflow value, NaN); the runner
    then retypes exactly. The NumPy reference (ml_dtypes) decides."""
    import ml_dtypes

    from translator.table.dtypes import numpy_dtype, onnx_enum_of

    info = ml_dtypes.finfo(numpy_dtype(dtype))
    top, tiny = float(info.max), float(info.smallest_subnormal)
    grid = np.arange(-300, 301, dtype=np.float32)
    x = np.concatenate([grid * tiny / 4, grid * top / 200, [top * 1.03, top * 1.1, -top * 3, np.inf, -np.inf,
                                                            np.nan, 0.0, 1e30, -1e-30]]).astype(np.float32)
    if saturate == 0 and dtype == "float4e2m1":
        saturate = 1  # float4 has no overflow value: always saturates
    model, feeds = single_op_model("cast", [x], {"to": onnx_enum_of()[dtype], "saturate": saturate})
    art = coreml.emit(model)
    assert art.outputs[0].dtype == dtype and art.outputs[0].legal == "float32"
    assert any(dtype in w for w in art.warnings)
    (y,) = _written(art, feeds)
    (want,) = interpreter.run(model, feeds)
    assert y.dtype == np.asarray(want).dtype
    assert np.array_equal(y.astype(np.float32), np.asarray(want).astype(np.float32), equal_nan=True)


@pytest.mark.parametrize("dtype", ["int4", "uint4", "int2", "uint2"])
def test_sub_byte_integers_are_computed_in_int32_and_wrap(dtype):
    from translator.table.dtypes import numpy_dtype, onnx_enum_of

    x = np.asarray([-9.7, -8.0, -2.5, -0.5, 0.0, 1.9, 3.0, 7.2, 8.0, 15.9, 16.5], np.float32)
    model, feeds = single_op_model("cast", [x], {"to": onnx_enum_of()[dtype]})
    (y,) = _written(coreml.emit(model), feeds)
    (want,) = interpreter.run(model, feeds)
    assert y.dtype == numpy_dtype(dtype) and y.astype(np.int32).tolist() == np.asarray(want).astype(np.int32).tolist()
    back, feeds = single_op_model("cast", [np.asarray(want)], {"to": onnx_enum_of()["float32"]})
    (z,) = _written(coreml.emit(back), feeds)
    assert z.tolist() == np.asarray(want).astype(np.float32).tolist()


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], []])
def test_runtime_unsqueeze_axes(axes):
    model, feeds = single_op_model("unsqueeze", [_f32(2, 3), np.asarray(axes, np.int64)], {})
    _check(model, feeds)


@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 5), [-2]), ((1, 3, 1, 5), [0, 2]), ((3, 1, 4), [1]),
                                        ((2, 1), [])])
def test_runtime_squeeze_axes(shape, axes):
    model, feeds = single_op_model("squeeze", [_f32(*shape), np.asarray(axes, np.int64)], {})
    _check(model, feeds)


@pytest.mark.parametrize("axis,sizes", [(0, [2, 4]), (1, [1, 2, 3]), (-1, [0, 6])])
def test_runtime_split_sizes(axis, sizes):
    x = _f32(6, 6)
    model, feeds = single_op_model("split", [x, np.asarray(sizes, np.int64)], {"axis": axis},
                                   n_outputs=len(sizes))
    _check(model, feeds)


@pytest.mark.parametrize("largest,axis,k", [(1, -1, 2), (0, 0, 3), (1, 1, 4)])
def test_runtime_top_k_breaks_ties_by_the_lower_index(largest, axis, k):
    x = np.asarray([[3, 1, 3, 2], [0, 0, 5, 5], [2, 2, 2, 1], [1, 4, 4, 0]], np.float32)
    model, feeds = single_op_model("top_k", [x, np.asarray([k], np.int64)], {"largest": largest, "axis": axis},
                                   n_outputs=2)
    _check(model, feeds)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 1)])
def test_runtime_cumsum_axis(axis, exclusive, reverse):
    model, feeds = single_op_model("cum_sum", [_f32(3, 4), np.asarray(axis, np.int32)],
                                   {"exclusive": exclusive, "reverse": reverse})
    _check(model, feeds)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_runtime_one_hot_depth_and_values(axis):
    idx = np.asarray([[0, -1, 7], [3, 9, -4]], np.int64)  # 9 and -7.. are outside [-depth, depth): all off
    model, feeds = single_op_model("one_hot", [idx, np.asarray([8], np.int64), np.asarray([2, 5], np.int32)],
                                   {"axis": axis})
    _check(model, feeds)


def test_conv_transpose_with_a_runtime_weight():
    model, feeds = single_op_model("conv_transpose", [_f32(1, 2, 4, 4), _f32(2, 3, 3, 3)], {"strides": [2, 2]})
    _check(model, feeds)
