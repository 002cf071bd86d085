"""Linear quantization references: quantize_linear, dequantize_linear, dynamic_quantize_linear."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from . import reference
from .elementwise import cast_to, is_float, narrow, onnx_dtype


def _expand(param, x, axis, block_size):
    """A scale / zero point shaped to broadcast against ``x``: a scalar (per tensor), a 1-D
    vector along ``axis`` (per axis), or a blocked tensor repeated ``block_size`` times."""
    p = np.asarray(param)
    if p.ndim == 0:
        return p
    axis = axis % x.ndim
    if block_size:
        return np.take(np.repeat(p, block_size, axis=axis), np.arange(x.shape[axis]), axis=axis)
    if p.ndim == 1:
        return p.reshape([-1 if d == axis else 1 for d in range(x.ndim)])
    return p


def _saturate_int(v, dt):
    info = ml_dtypes.iinfo(dt)
    return np.clip(v, info.min, info.max).astype(np.int64).astype(dt)


@reference("quantize_linear")
def quantize_linear(x, y_scale, y_zero_point=None, axis=1, block_size=0, output_dtype=0,
                    precision=0, saturate=1):
    """saturate(round_half_even(x / y_scale) + y_zero_point); the division is done in the
    ``precision`` dtype (default: the dtype of y_scale). Output dtype: y_zero_point's, else
    ``output_dtype``, else uint8."""
    x = np.asarray(x)
    if y_zero_point is not None:
        out_dt = np.asarray(y_zero_point).dtype
    else:
        out_dt = onnx_dtype(output_dtype) if output_dtype else np.dtype(np.uint8)
    scale = _expand(y_scale, x, axis, block_size)
    calc_dt = onnx_dtype(precision) if precision else scale.dtype
    if not is_float(calc_dt) or calc_dt.name.startswith("float8"):
        calc_dt = np.dtype(np.float32)
    with np.errstate(all="ignore"):
        q = (x.astype(calc_dt) / scale.astype(calc_dt)).astype(np.float64)
    zp = 0.0 if y_zero_point is None else _expand(y_zero_point, x, axis, block_size).astype(np.float64)
    if is_float(out_dt):
        return cast_to(q + zp, out_dt, saturate=saturate)
    return _saturate_int(np.rint(q) + zp, out_dt)


@reference("dequantize_linear")
def dequantize_linear(x, x_scale, x_zero_point=None, axis=1, block_size=0, output_dtype=0):
    """(x - x_zero_point) * x_scale in ``output_dtype`` (default: the dtype of x_scale)."""
    x = np.asarray(x)
    scale = _expand(x_scale, x, axis, block_size)
    out_dt = onnx_dtype(output_dtype) if output_dtype else scale.dtype
    v = x.astype(np.float64)
    if x_zero_point is not None:
        v = v - _expand(x_zero_point, x, axis, block_size).astype(np.float64)
    return narrow(v * scale.astype(np.float64), out_dt)


@reference("dynamic_quantize_linear")
def dynamic_quantize_linear(x):
    """(y uint8, y_scale float32, y_zero_point uint8) from the range [min(0, x), max(0, x)]."""
    x = np.asarray(x).astype(np.float32)
    lo = np.minimum(0.0, x.min(initial=0.0)).astype(np.float32)
    hi = np.maximum(0.0, x.max(initial=0.0)).astype(np.float32)
    scale = np.float32((hi - lo) / np.float32(255))
    if scale == 0:
        return np.zeros(x.shape, np.uint8), np.array(scale, np.float32), np.array(0, np.uint8)
    zp = np.clip(np.rint(-lo / scale), 0, 255)
    y = np.clip(np.rint(x / scale) + zp, 0, 255)
    return y.astype(np.uint8), np.array(scale, np.float32), np.array(zp, np.uint8)
