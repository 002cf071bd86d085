"""Linear algebra references: matmul, gemm, einsum, det and the integer matmuls."""
from __future__ import annotations

import numpy as np

from . import reference
from .elementwise import is_float, narrow, wide


def _float_or_int(fn, *xs):
    """fn over float64 copies of float inputs (cast back), or over the ints as they are."""
    dt = np.asarray(xs[0]).dtype
    if is_float(dt):
        return narrow(fn(*(wide(x).astype(np.float64) for x in xs)), dt)
    return narrow(fn(*(np.asarray(x) for x in xs)), dt)


@reference("matmul")
def matmul(A, B):
    """numpy.matmul semantics (1-D operands promoted and squeezed, batch dims broadcast)."""
    return _float_or_int(np.matmul, A, B)


@reference("gemm")
def gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0):
    """alpha * A' @ B' + beta * C, with A' = A.T if transA, B' = B.T if transB."""
    def fn(a, b, *c):
        y = alpha * ((a.T if transA else a) @ (b.T if transB else b))
        return y + beta * c[0] if c else y

    return _float_or_int(fn, A, B, *([] if C is None else [C]))


@reference("einsum")
def einsum(*inputs, equation):
    return _float_or_int(lambda *xs: np.einsum(equation.replace(" ", ""), *xs), *inputs)


@reference("det")
def det(X):
    """Determinant of the last two (square) dims."""
    return _float_or_int(np.linalg.det, X)


def _row(v, like):
    """A per-row zero point / scale (M,) as (M, 1); a scalar stays a scalar."""
    v = np.asarray(v)
    return v.reshape(-1, 1) if v.ndim == 1 and np.ndim(like) >= 2 else v


@reference("matmul_integer")
def matmul_integer(A, B, a_zero_point=None, b_zero_point=None):
    """(A - a_zero_point) @ (B - b_zero_point) in int32; a_zero_point may be per row of A,
    b_zero_point per column of B."""
    a = np.asarray(A).astype(np.int64)
    b = np.asarray(B).astype(np.int64)
    if a_zero_point is not None:
        a = a - _row(a_zero_point, a).astype(np.int64)
    if b_zero_point is not None:
        b = b - np.asarray(b_zero_point).astype(np.int64)
    return np.matmul(a, b).astype(np.int32)


@reference("qlinear_matmul")
def qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    """Quantized matmul: saturate(round_half_even(real / y_scale) + y_zero_point), where
    real = ((a - a_zp) * a_scale) @ ((b - b_zp) * b_scale); per-row a_*, per-column b_*."""
    a64 = (np.asarray(a).astype(np.float64) - _row(a_zero_point, a).astype(np.float64)) \
        * _row(a_scale, a).astype(np.float64)
    b64 = (np.asarray(b).astype(np.float64) - np.asarray(b_zero_point).astype(np.float64)) \
        * np.asarray(b_scale).astype(np.float64)
    real = np.matmul(a64, b64) / np.asarray(y_scale).astype(np.float64)
    out_dt = np.asarray(y_zero_point).dtype
    info = np.iinfo(out_dt)
    q = np.rint(real) + np.asarray(y_zero_point).astype(np.float64)
    return np.clip(q, info.min, info.max).astype(out_dt)
