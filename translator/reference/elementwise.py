"""Elementwise references: arithmetic, comparison, logical, bitwise, math, cast.

Floating inputs narrower than float64 (float32, float16, bfloat16, float8 ...) are computed
in float64 and cast back to the input dtype; integer arithmetic keeps the input dtype and
wraps around like two's complement hardware.
"""
from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np

from . import reference

# ONNX TensorProto.DataType code -> NumPy / ml_dtypes dtype.
ONNX_DTYPES = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 8: np.dtype(object),
    9: np.dtype(np.bool_), 10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32),
    13: np.dtype(np.uint64), 14: np.dtype(np.complex64), 15: np.dtype(np.complex128),
    16: np.dtype(ml_dtypes.bfloat16), 17: np.dtype(ml_dtypes.float8_e4m3fn),
    18: np.dtype(ml_dtypes.float8_e4m3fnuz), 19: np.dtype(ml_dtypes.float8_e5m2),
    20: np.dtype(ml_dtypes.float8_e5m2fnuz), 21: np.dtype(ml_dtypes.uint4), 22: np.dtype(ml_dtypes.int4),
    23: np.dtype(ml_dtypes.float4_e2m1fn), 24: np.dtype(ml_dtypes.float8_e8m0fnu),
    25: np.dtype(ml_dtypes.uint2), 26: np.dtype(ml_dtypes.int2), 27: np.dtype(ml_dtypes.float6_e2m3fn),
    28: np.dtype(ml_dtypes.float6_e3m2fn),
}

_FLOAT8_SATURATING = {"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"}
_SUB_BYTE_INTS = {"int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}


def onnx_dtype(code: int) -> np.dtype:
    """The NumPy dtype of an ONNX ``TensorProto.DataType`` code."""
    return ONNX_DTYPES[int(code)]


def is_float(dt) -> bool:
    """float16/32/64 and every ml_dtypes floating type (bfloat16, float8, float4 ...)."""
    dt = np.dtype(dt)
    return dt.kind == "f" or (dt.kind == "V" and "float" in dt.name)


def is_int(dt) -> bool:
    dt = np.dtype(dt)
    return dt.kind in "iu" or dt.name in _SUB_BYTE_INTS


def wide(x):
    """The array itself, or in float64 when it is a floating array."""
    x = np.asarray(x)
    return x.astype(np.float64) if is_float(x.dtype) and x.dtype != np.float64 else x


def narrow(y, dt):
    """``y`` as an array of dtype ``dt`` (0-d results stay arrays)."""
    return np.asarray(y).astype(dt)


def float_map(fn, *xs):
    """Apply ``fn`` in float64 to float inputs, return in the first input's dtype."""
    dt = np.asarray(xs[0]).dtype
    with np.errstate(all="ignore"):
        return narrow(fn(*(wide(x) for x in xs)), dt)


# ---------------------------------------------------------------------------------------
# arithmetic


def _binary(fn, a, b):
    a, b = np.asarray(a), np.asarray(b)
    if is_float(a.dtype):
        return float_map(fn, a, b)
    with np.errstate(all="ignore"):
        return narrow(fn(a, b), a.dtype)


@reference("add")
def add(a, b):
    return _binary(np.add, a, b)


@reference("sub")
def sub(a, b):
    return _binary(np.subtract, a, b)


@reference("mul")
def mul(a, b):
    return _binary(np.multiply, a, b)


def _trunc_div_int(a, b):
    """Integer division rounding toward zero (C semantics); x / 0 gives 0."""
    with np.errstate(all="ignore"):
        q = np.floor_divide(a, b)
        r = a - q * b
    fix = (r != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


@reference("div")
def div(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if is_float(a.dtype):
        return float_map(np.divide, a, b)
    return narrow(_trunc_div_int(a, b), a.dtype)


@reference("floor_mod")
def floor_mod(a, b):
    """Mod with fmod=0: result has the sign of the divisor (Python ``%``)."""
    return _binary(np.mod, a, b)


@reference("trunc_mod")
def trunc_mod(a, b):
    """Mod with fmod=1: result has the sign of the dividend (C ``fmod``)."""
    return _binary(np.fmod, a, b)


@reference("pow")
def pow_(x, y):
    """x ** y in the dtype of ``x`` (the exponent may have any numeric type)."""
    x, y = np.asarray(x), np.asarray(y)
    if is_float(x.dtype):
        with np.errstate(all="ignore"):
            return narrow(np.power(wide(x), wide(y).astype(np.float64)), x.dtype)
    if is_int(y.dtype) and not (y < 0).any():
        return narrow(np.power(x.astype(np.int64), y.astype(np.int64)), x.dtype)
    with np.errstate(all="ignore"):
        return narrow(np.trunc(np.power(x.astype(np.float64), y.astype(np.float64))), x.dtype)


@reference("root")
def root(x, exponent):
    """The ``exponent``-th root: x ** (1 / exponent)."""
    return float_map(lambda a, e: np.power(a, 1.0 / e), x, exponent)


@reference("neg")
def neg(x):
    return _unary_any(np.negative, x)


@reference("abs")
def abs_(x):
    return _unary_any(np.abs, x)


@reference("sign")
def sign(x):
    return _unary_any(np.sign, x)


@reference("reciprocal")
def reciprocal(x):
    return float_map(lambda a: 1.0 / a, x)


def _unary_any(fn, x):
    x = np.asarray(x)
    if is_float(x.dtype):
        return float_map(fn, x)
    with np.errstate(all="ignore"):
        return narrow(fn(x), x.dtype)


def _variadic(fn, xs):
    dt = np.asarray(xs[0]).dtype
    with np.errstate(all="ignore"):
        return narrow(functools.reduce(fn, [wide(x) for x in xs]), dt)


@reference("max")
def max_(*xs):
    """Elementwise maximum of all inputs (NaN propagates)."""
    return _variadic(np.maximum, xs)


@reference("min")
def min_(*xs):
    """Elementwise minimum of all inputs (NaN propagates)."""
    return _variadic(np.minimum, xs)


@reference("sum")
def sum_(*xs):
    return _variadic(np.add, xs)


@reference("mean")
def mean(*xs):
    dt = np.asarray(xs[0]).dtype
    return narrow(functools.reduce(np.add, [wide(x) for x in xs]) / len(xs), dt)


@reference("clip")
def clip(x, min=None, max=None):  # noqa: A002 - ONNX input names
    """min(max(x, min), max); a missing bound is unbounded; min > max gives max."""
    y = wide(x)
    with np.errstate(all="ignore"):
        if min is not None:
            y = np.maximum(y, wide(min))
        if max is not None:
            y = np.minimum(y, wide(max))
    return narrow(y, np.asarray(x).dtype)


@reference("threshold")
def threshold(x, min_value):
    """max(x, min_value) (not ThresholdedRelu)."""
    return _binary(np.maximum, x, np.asarray(min_value))


@reference("identity")
def identity(x):
    """Tensors, sequences (lists) and optionals (None) pass through unchanged."""
    if isinstance(x, list):
        return [np.array(e, copy=True) for e in x]
    return None if x is None else np.array(x, copy=True)


# ---------------------------------------------------------------------------------------
# math


def _unary_float(op_id, fn, doc):
    def ref(x):
        return float_map(fn, x)

    ref.__name__ = op_id
    ref.__doc__ = doc
    reference(op_id)(ref)
    return ref


erf64 = np.vectorize(math.erf, otypes=[np.float64])


for _op_id, _fn, _doc in [
    ("acos", np.arccos, "arccos"), ("acosh", np.arccosh, "arccosh"), ("asin", np.arcsin, "arcsin"),
    ("asinh", np.arcsinh, "arcsinh"), ("atan", np.arctan, "arctan"), ("atanh", np.arctanh, "arctanh"),
    ("cos", np.cos, "cos"), ("cosh", np.cosh, "cosh"), ("sin", np.sin, "sin"), ("sinh", np.sinh, "sinh"),
    ("tan", np.tan, "tan"), ("tanh", np.tanh, "tanh"), ("exp", np.exp, "e ** x"),
    ("log", np.log, "natural logarithm"), ("sqrt", np.sqrt, "square root"),
    ("ceil", np.ceil, "round toward +inf"), ("floor", np.floor, "round toward -inf"),
    ("round", np.round, "round half to even (numpy.round)"), ("erf", erf64, "Gauss error function"),
]:
    _unary_float(_op_id, _fn, _doc)


@reference("cos_grad")
def cos_grad(dx, x):
    """Gradient of cos: -sin(x) * dx (the seed formula drops the minus sign; see the erratum)."""
    return float_map(lambda g, a: -np.sin(a) * g, dx, x)


@reference("is_nan")
def is_nan(x):
    return np.isnan(wide(x))


@reference("is_inf")
def is_inf(x, detect_negative=1, detect_positive=1):
    w = wide(x)
    return (np.isposinf(w) & bool(detect_positive)) | (np.isneginf(w) & bool(detect_negative))


# ---------------------------------------------------------------------------------------
# comparison and logical


def _compare(fn, a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == object or b.dtype == object:
        return np.asarray(np.vectorize(fn, otypes=[bool])(a, b), dtype=bool)
    return np.asarray(fn(wide(a), wide(b)), dtype=bool)


@reference("equal")
def equal(a, b):
    return _compare(lambda x, y: x == y, a, b)


@reference("not_equal")
def not_equal(a, b):
    return _compare(lambda x, y: x != y, a, b)


@reference("greater")
def greater(a, b):
    return _compare(lambda x, y: x > y, a, b)


@reference("greater_equal")
def greater_equal(a, b):
    return _compare(lambda x, y: x >= y, a, b)


@reference("less")
def less(a, b):
    return _compare(lambda x, y: x < y, a, b)


@reference("less_equal")
def less_equal(a, b):
    return _compare(lambda x, y: x <= y, a, b)


@reference("logical_and")
def logical_and(a, b):
    return np.logical_and(a, b)


@reference("logical_or")
def logical_or(a, b):
    return np.logical_or(a, b)


@reference("logical_xor")
def logical_xor(a, b):
    return np.logical_xor(a, b)


@reference("logical_not")
def logical_not(x):
    return np.logical_not(x)


@reference("where")
def where(condition, x, y):
    x, y = np.asarray(x), np.asarray(y)
    return narrow(np.where(np.asarray(condition, dtype=bool), x, y), x.dtype)


# ---------------------------------------------------------------------------------------
# bitwise


@reference("bitwise_and")
def bitwise_and(a, b):
    return np.bitwise_and(a, b)


@reference("bitwise_or")
def bitwise_or(a, b):
    return np.bitwise_or(a, b)


@reference("bitwise_xor")
def bitwise_xor(a, b):
    return np.bitwise_xor(a, b)


@reference("bitwise_not")
def bitwise_not(x):
    return np.invert(x)


def _unsigned(dt):
    return np.dtype(f"u{np.dtype(dt).itemsize}")


@reference("bit_shift_left")
def bit_shift_left(x, y):
    """x << y on the two's complement bits; a shift < 0 or >= bit width gives 0."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    bits = x.dtype.itemsize * 8
    valid = (y >= 0) & (y < bits)
    u = _unsigned(x.dtype)
    out = np.left_shift(x.astype(u), np.where(valid, y, 0).astype(u))
    return np.where(valid, out, 0).astype(u).view(x.dtype)


@reference("bit_shift_right")
def bit_shift_right(x, y):
    """x >> y, arithmetic for signed types; a shift < 0 or >= bit width gives the sign fill."""
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    bits = x.dtype.itemsize * 8
    valid = (y >= 0) & (y < bits)
    out = np.right_shift(x, np.where(valid, y, 0).astype(x.dtype))
    fill = np.where(x < 0, -1, 0).astype(x.dtype) if x.dtype.kind == "i" else np.zeros_like(x)
    return np.where(valid, out, fill).astype(x.dtype)


@reference("bit_count")
def bit_count(x):
    """Number of set bits of each element's two's complement representation (input dtype)."""
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return x.copy()
    return np.bitwise_count(x.view(_unsigned(x.dtype))).astype(x.dtype)


# ---------------------------------------------------------------------------------------
# cast


def _to_string(x):
    """Numbers -> plain decimal strings ("314.15926", "NaN", "INF", "-INF")."""
    x = np.asarray(x)
    if is_float(x.dtype):
        x = x if x.dtype == np.float64 else x.astype(np.float32)

    def fmt(v):
        if x.dtype.kind != "f":
            return str(int(v))
        if np.isnan(v):
            return "NaN"
        if np.isinf(v):
            return "INF" if v > 0 else "-INF"
        return np.format_float_positional(v, trim="-")

    return np.array([fmt(v) for v in x.ravel()], dtype=object).reshape(x.shape)


def _from_string(x):
    return np.array([float(s) for s in np.asarray(x).ravel()], dtype=np.float64).reshape(np.shape(x))


def _to_e8m0(x, saturate, round_mode):
    """float -> float8e8m0 (a bare power of two 2**(code-127); code 255 is NaN)."""
    with np.errstate(all="ignore"):
        v = np.abs(wide(x).astype(np.float64))
        e = np.floor(np.log2(v))
        frac = v / np.exp2(e)
        if round_mode == "up":
            e = e + (frac > 1)
        elif round_mode == "nearest":
            e = e + (frac >= 1.5)
        code = e + 127
        nan = np.isnan(v)
        if saturate:
            code = np.clip(np.nan_to_num(code, posinf=254, neginf=0), 0, 254)
        else:
            nan = nan | (code < 0) | (code > 254) | np.isinf(v)
        code = np.where(nan, 255, np.nan_to_num(code))
    return code.astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)


def cast_to(x, dt, saturate=1, round_mode="up"):
    """ONNX Cast of ``x`` to the NumPy dtype ``dt`` (shared by cast / cast_like / quantize)."""
    x, dt = np.asarray(x), np.dtype(dt)
    if dt == object:
        return x.astype(object) if x.dtype == object else _to_string(x)
    if x.dtype == object:
        x = _from_string(x)
    with np.errstate(all="ignore"):
        if dt == np.bool_:
            return wide(x) != 0
        if dt.name in _FLOAT8_SATURATING and saturate:
            limit = float(ml_dtypes.finfo(dt).max)
            w = x.astype(np.float64)
            return np.where(np.isnan(w), w, np.clip(w, -limit, limit)).astype(dt)
        if dt.name == "float8_e8m0fnu":
            return _to_e8m0(x, saturate, round_mode)
        if dt.name in _SUB_BYTE_INTS or (dt.kind in "iu" and is_float(x.dtype)):
            # floats truncate toward zero; out-of-range integers keep their low bits
            ints = np.trunc(wide(x)).astype(np.int64) if is_float(x.dtype) else x.astype(np.int64)
            return ints.astype(dt)
        return x.astype(dt)


@reference("cast")
def cast(x, to, saturate=1, round_mode="up"):
    return cast_to(x, onnx_dtype(to), saturate, round_mode)


@reference("cast_like")
def cast_like(x, target_type, saturate=1, round_mode="up"):
    return cast_to(x, np.asarray(target_type).dtype, saturate, round_mode)


def _bits(x):
    """The raw bits of each element as uint64 (sub-byte types: their low bits)."""
    x = np.asarray(x)
    if x.dtype.name in _SUB_BYTE_INTS:
        n, _ = _SUB_BYTE_INTS[x.dtype.name]
        return (x.astype(np.int64) & ((1 << n) - 1)).astype(np.uint64)
    if x.dtype.itemsize == 1 and x.dtype.name.startswith(("float4", "float6")):
        return x.view(np.uint8).astype(np.uint64)
    return x.view(_unsigned(x.dtype)).astype(np.uint64)


@reference("bit_cast")
def bit_cast(x, to):
    """Reinterpret the (little endian) bits of ``x`` as dtype ``to`` (same bit width)."""
    x, dt = np.asarray(x), onnx_dtype(to)
    if dt.name in _SUB_BYTE_INTS:
        n, signed = _SUB_BYTE_INTS[dt.name]
        b = _bits(x).astype(np.int64)
        return (b - ((b >> (n - 1)) << n) if signed else b).astype(dt)
    if dt == np.bool_:
        return _bits(x).astype(np.uint8).view(np.bool_)
    if x.dtype.name in _SUB_BYTE_INTS:
        return _bits(x).astype(np.uint8).view(dt)
    return np.ascontiguousarray(x).view(dt).reshape(x.shape)
