"""Tricky semantics of the NumPy reference (arithmetic, cast, reduce, quantize ...),
checked against hand-computed values."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from translator import reference


def ref(op_id):
    fn = reference.get(op_id)
    assert fn is not None, f"no reference for {op_id}"
    return fn


def arr(values, dtype):
    return np.array(values, dtype=dtype)


# --- integer and float arithmetic -------------------------------------------------------


def test_floor_mod_takes_the_sign_of_the_divisor():
    np.testing.assert_array_equal(ref("floor_mod")(arr([-7, 7, -7], np.int32), arr([3, -3, -3], np.int32)),
                                  arr([2, -2, -1], np.int32))
    np.testing.assert_array_equal(ref("floor_mod")(arr([-7.5], np.float32), arr([2.0], np.float32)), [0.5])


def test_trunc_mod_takes_the_sign_of_the_dividend():
    np.testing.assert_array_equal(ref("trunc_mod")(arr([-7, 7, -7], np.int32), arr([3, -3, -3], np.int32)),
                                  arr([-1, 1, -1], np.int32))
    np.testing.assert_array_equal(ref("trunc_mod")(arr([-7.5], np.float64), arr([2.0], np.float64)), [-1.5])


def test_floor_mod_float_special_cases():
    y = ref("floor_mod")(arr([0.0, 1.0, -1.0, np.inf, 5.0], np.float64), arr([-3.0, np.inf, np.inf, 2.0, 0.0], np.float64))
    assert y[0] == 0 and np.signbit(y[0])          # +-0 takes the sign of the divisor
    assert y[1] == 1.0 and y[2] == np.inf           # x finite, y inf: x (same sign) else y
    assert np.isnan(y[3]) and np.isnan(y[4])


def test_integer_div_truncates_toward_zero():
    y = ref("div")(arr([-7, 7, -7, 7, -6], np.int32), arr([2, -2, -2, 2, 3], np.int32))
    np.testing.assert_array_equal(y, arr([-3, -3, 3, 3, -2], np.int32))
    assert y.dtype == np.int32
    np.testing.assert_array_equal(ref("div")(arr([255], np.uint8), arr([2], np.uint8)), arr([127], np.uint8))


def test_integer_add_wraps():
    y = ref("add")(arr([127], np.int8), arr([1], np.int8))
    assert y.dtype == np.int8 and y[0] == -128


def test_round_is_half_to_even():
    y = ref("round")(arr([0.5, 1.5, 2.5, -0.5, -2.5, 2.6], np.float32))
    np.testing.assert_array_equal(y, arr([0.0, 2.0, 2.0, -0.0, -2.0, 3.0], np.float32))


def test_pow_keeps_the_base_dtype():
    assert ref("pow")(arr([2], np.int32), arr([10], np.int64)).tolist() == [1024]
    y = ref("pow")(arr([2, 9], np.int32), arr([0.5, 0.5], np.float32))
    assert y.dtype == np.int32 and y.tolist() == [1, 3]   # 1.414.. truncates to 1
    y = ref("pow")(arr([2.0], np.float32), arr([3], np.int64))
    assert y.dtype == np.float32 and y[0] == 8.0


def test_clip_min_greater_than_max_gives_max():
    y = ref("clip")(arr([-5.0, 0.0, 5.0], np.float32), np.float32(2.0), np.float32(1.0))
    np.testing.assert_array_equal(y, [1.0, 1.0, 1.0])
    assert ref("clip")(arr([-128, 5], np.int8), None, np.int8(3)).tolist() == [-128, 3]


def test_bfloat16_is_computed_wide_and_cast_back():
    y = ref("exp")(arr([0.0, 1.0], ml_dtypes.bfloat16))
    assert y.dtype == ml_dtypes.bfloat16
    assert float(y[1]) == float(ml_dtypes.bfloat16(np.e))


def test_comparisons_return_bool_and_argmax_int64():
    assert ref("less")(arr([1, 3], np.uint8), arr([2, 2], np.uint8)).dtype == np.bool_
    assert ref("not_equal")(arr(["a", "b"], object), arr(["a", "c"], object)).tolist() == [False, True]
    y = ref("arg_max")(arr([[1, 3, 3]], np.float32), axis=1, keepdims=0)
    assert y.dtype == np.int64 and y.tolist() == [1]
    assert ref("arg_max")(arr([[1, 3, 3]], np.float32), axis=1, select_last_index=1).tolist() == [[2]]


# --- bitwise ----------------------------------------------------------------------------


def test_bit_shift_signed_and_out_of_range():
    right = ref("bit_shift_right")(arr([-8, -8, 8, -1], np.int8), arr([1, 8, 9, -1], np.int8))
    np.testing.assert_array_equal(right, arr([-4, -1, 0, -1], np.int8))   # arithmetic; sign fill
    left = ref("bit_shift_left")(arr([64, 1, 1], np.int8), arr([1, 8, -1], np.int8))
    np.testing.assert_array_equal(left, arr([-128, 0, 0], np.int8))       # bits past the sign drop


def test_bit_count_counts_twos_complement_bits():
    assert ref("bit_count")(arr([-1, 0, 7, 256], np.int16)).tolist() == [16, 0, 3, 1]


def test_bit_cast_reinterprets_bits():
    assert ref("bit_cast")(arr([1.0], np.float32), to=6).tolist() == [0x3F800000]
    assert ref("bit_cast")(arr([-1, 7], ml_dtypes.int4), to=21).astype(int).tolist() == [15, 7]


# --- cast -------------------------------------------------------------------------------


def test_cast_float_to_int_truncates_and_int_narrowing_wraps():
    assert ref("cast")(arr([2.9, -2.9], np.float32), to=6).tolist() == [2, -2]
    assert ref("cast")(arr([200], np.int16), to=3).tolist() == [-56]
    assert ref("cast")(arr([-9.0, 8.0], np.float32), to=22).astype(int).tolist() == [7, -8]  # int4


def test_cast_float8_saturation():
    x = arr([1e6, -np.inf, np.nan, 0.47], np.float32)
    sat = ref("cast")(x, to=17).astype(np.float32)                  # float8e4m3fn
    assert sat[0] == 448 and sat[1] == -448 and np.isnan(sat[2]) and sat[3] == 0.46875
    raw = ref("cast")(x, to=17, saturate=0).astype(np.float32)
    assert np.isnan(raw[0]) and np.isnan(raw[1])
    e5 = ref("cast")(x, to=19, saturate=0).astype(np.float32)       # float8e5m2 keeps inf
    assert e5[0] == np.inf and e5[1] == -np.inf


def test_cast_to_e8m0_rounds_up_and_saturates():
    y = ref("cast")(arr([0.0, 0.124, 1.1, 2.0], np.float32), to=24).astype(np.float64)
    assert y.tolist() == [2.0**-127, 0.125, 2.0, 2.0]


def test_cast_strings():
    y = ref("cast")(arr(["1e-5", "+INF", "-inf", "NaN", "3.5"], object), to=1)
    assert y.dtype == np.float32 and y[0] == np.float32(1e-5) and y[1] == np.inf and y[2] == -np.inf
    assert np.isnan(y[3]) and y[4] == 3.5
    assert ref("cast")(arr([1.5, -np.inf], np.float32), to=8).tolist() == ["1.5", "-INF"]


# --- reductions and scans -------------------------------------------------------------


def test_reductions_over_an_empty_set():
    empty = np.zeros((2, 0, 4), np.float32)
    axes = arr([1], np.int64)
    assert ref("reduce_sum")(empty, axes).tolist() == [[[0.0] * 4]] * 2
    assert ref("reduce_prod")(empty, axes, keepdims=0).tolist() == [[1.0] * 4] * 2
    assert np.all(ref("reduce_max")(empty, axes) == -np.inf)
    assert np.all(ref("reduce_log_sum")(empty, axes) == -np.inf)
    assert ref("reduce_min")(np.zeros((0,), bool), keepdims=0).tolist() is True


def test_reduce_noop_with_empty_axes_still_applies_the_elementwise_part():
    x = arr([[1.0, -2.0]], np.float32)
    np.testing.assert_array_equal(ref("reduce_sum_square")(x, None, noop_with_empty_axes=1), [[1.0, 4.0]])
    np.testing.assert_array_equal(ref("reduce_sum")(x, arr([], np.int64)), [[-1.0]])


def test_cumulative_exclusive_reverse():
    x = arr([1, 2, 3], np.int32)
    axis = np.int64(0)
    assert ref("cum_sum")(x, axis, exclusive=1).tolist() == [0, 1, 3]
    assert ref("cum_sum")(x, axis, exclusive=1, reverse=1).tolist() == [5, 3, 0]
    assert ref("cum_prod")(x, axis, reverse=1).tolist() == [6, 6, 3]
    assert ref("cum_prod")(x, axis, exclusive=1).tolist() == [1, 1, 2]


def test_hardmax_picks_the_first_maximum():
    y = ref("hardmax")(arr([[3.0, 1.0, 3.0]], np.float32))
    assert y.tolist() == [[1.0, 0.0, 0.0]]


def test_nll_mean_ignores_and_weights():
    log_p = np.log(arr([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]], np.float64))
    target = arr([0, 1, 2], np.int64)
    weight = arr([1.0, 2.0, 3.0], np.float64)
    y = ref("negative_log_likelihood_loss")(log_p, target, weight, ignore_index=2)
    expected = (-np.log(0.5) * 1.0 - np.log(0.8) * 2.0) / 3.0   # ignored row: no loss, no weight
    assert abs(float(y) - expected) < 1e-12


# --- quantization -----------------------------------------------------------------------


def test_quantize_rounds_half_to_even_and_saturates():
    y = ref("quantize_linear")(arr([2.5, 3.5, -2.5, 1000.0, -1000.0], np.float32), np.float32(1.0), np.int8(0))
    assert y.dtype == np.int8 and y.tolist() == [2, 4, -2, 127, -128]
    u = ref("quantize_linear")(arr([-3.0, 300.0], np.float32), np.float32(1.0))   # default uint8
    assert u.dtype == np.uint8 and u.tolist() == [0, 255]


def test_dynamic_quantize_linear_hand_example():
    y, scale, zp = ref("dynamic_quantize_linear")(arr([0.0, 2.0, -1.0], np.float32))
    assert scale.dtype == np.float32 and abs(float(scale) - 3.0 / 255.0) < 1e-9
    assert zp.dtype == np.uint8 and int(zp) == 85
    assert y.tolist() == [85, 255, 0]


def test_dequantize_per_axis():
    x = arr([[0, 10], [0, 10]], np.uint8)
    y = ref("dequantize_linear")(x, arr([1.0, 0.5], np.float32), arr([0, 10], np.uint8), axis=0)
    assert y.dtype == np.float32 and y.tolist() == [[0.0, 10.0], [-5.0, 0.0]]


# --- seed-only ops and attention --------------------------------------------------------


def test_seed_only_formulas():
    x = arr([0.5, -1.0], np.float32)
    np.testing.assert_allclose(ref("scaled_tanh")(x, alpha=2.0, beta=3.0), 2.0 * np.tanh(3.0 * x), rtol=1e-6)
    np.testing.assert_allclose(ref("affine")(x, alpha=2.0, beta=3.0), 2.0 * x + 3.0)
    np.testing.assert_allclose(ref("parametric_softplus")(x, alpha=2.0, beta=3.0), 2.0 * np.log1p(np.exp(3.0 * x)), rtol=1e-6)
    np.testing.assert_array_equal(ref("threshold")(x, min_value=0.0), [0.5, 0.0])
    np.testing.assert_allclose(ref("root")(arr([27.0, 16.0], np.float32), arr([3.0, 4.0], np.float32)), [3.0, 2.0], rtol=1e-6)
    # cos_grad follows the verified erratum: d/dx cos(x) = -sin(x)
    np.testing.assert_allclose(ref("cos_grad")(arr([2.0], np.float32), arr([0.5], np.float32)), [-2.0 * np.sin(0.5)], rtol=1e-6)


def test_attention_fully_masked_row_is_zero_not_nan():
    q = np.ones((1, 1, 2, 4), np.float32)
    mask = np.array([[False, False], [True, True]])
    y, _, _, probs = ref("attention")(q, q, q, mask, qk_matmul_output_mode=3)
    assert not np.isnan(y).any()
    assert y[0, 0, 0].tolist() == [0.0] * 4 and probs[0, 0, 0].tolist() == [0.0, 0.0]
    assert probs[0, 0, 1].tolist() == [0.5, 0.5]


def test_random_ops_honor_seed_shape_and_dtype():
    a = ref("random_normal")(shape=[2, 3], dtype=10, seed=5.0)
    b = ref("random_normal")(shape=[2, 3], dtype=10, seed=5.0)
    assert a.shape == (2, 3) and a.dtype == np.float16
    np.testing.assert_array_equal(a, b)
    m = ref("multinomial")(arr([[0.0, -np.inf]], np.float32), sample_size=5, seed=1.0)
    assert m.dtype == np.int32 and m.tolist() == [[0] * 5]


@pytest.mark.parametrize("op_id", ["gelu", "mish", "softplus", "selu", "celu", "sigmoid"])
def test_activations_keep_float16(op_id):
    assert ref(op_id)(arr([-1.0, 0.0, 2.0], np.float16)).dtype == np.float16


def test_the_reference_keeps_numpys_runtime_warnings_quiet():
    """An empty reduction is NaN by the op's semantics, not a warning on the user's terminal
    (the fuzzer found ``Mean of empty slice`` breaking the one-line error of a refused model)."""
    import warnings

    from translator.compile import interpreter
    from translator.run.harness import single_op_model

    model, feeds = single_op_model("global_average_pool", [np.zeros((1, 2, 0, 3), np.float32)], {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = interpreter.run(model, feeds)[0]
    assert out.shape == (1, 2, 1, 1) and np.isnan(out).all()


def test_integer_convolution_is_exact_at_the_extremes_of_its_operands():
    """conv_integer computes in float64 when every partial sum stays an integer below 2^53:
    the same int32 as int64 arithmetic, at the largest uint8/int8 magnitudes, and int64
    arithmetic past that bound."""
    import numpy as np

    from translator.reference.conv import _conv_float, _conv_int, conv_integer

    rng = np.random.default_rng(0)
    x = rng.choice(np.array([0, 255], np.uint8), (1, 64, 9, 9))
    w = rng.choice(np.array([-128, 127], np.int8), (8, 64, 3, 3))
    want = _conv_float(x.astype(np.int64) - 3, w.astype(np.int64), [1, 1], [1, 1, 1, 1], [1, 1], 1)
    got = conv_integer(x, w, np.uint8(3), None, pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(got, want.astype(np.int32))
    big = np.full((1, 1, 2, 2), 2 ** 40, np.int64)
    np.testing.assert_array_equal(_conv_int(big, big[:, :, :1, :1] // 2 ** 30, [1, 1], [0] * 4, [1, 1], 1),
                                  big * (2 ** 10))
