"""Constants and dropout, plus the small dtype helpers the other family modules share."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from . import reference

# ONNX TensorProto.DataType enum -> NumPy dtype (attributes such as ``dtype`` carry it).
_ONNX_DTYPES = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
    7: np.int64, 8: object, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
    13: np.uint64, 14: np.complex64, 15: np.complex128, 16: ml_dtypes.bfloat16,
    17: ml_dtypes.float8_e4m3fn, 18: ml_dtypes.float8_e4m3fnuz, 19: ml_dtypes.float8_e5m2,
    20: ml_dtypes.float8_e5m2fnuz, 21: ml_dtypes.uint4, 22: ml_dtypes.int4,
    23: ml_dtypes.float4_e2m1fn, 24: ml_dtypes.float8_e8m0fnu,
}


def np_dtype(d) -> np.dtype:
    """A dtype attribute (ONNX enum int, dtype name, or NumPy dtype) as a NumPy dtype."""
    if isinstance(d, (int, np.integer)):
        return np.dtype(_ONNX_DTYPES[int(d)])
    if isinstance(d, str):
        return np.dtype(getattr(ml_dtypes, d, None) or d)
    return np.dtype(d)


def is_float(dt) -> bool:
    """True for every floating dtype, including the ml_dtypes ones (bfloat16, float8...)."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        return True
    if dt.kind == "V":
        try:
            ml_dtypes.finfo(dt)
            return True
        except (ValueError, TypeError):
            return False
    return False


def work_dtype(dt) -> np.dtype:
    """The dtype to compute in: float64 for floats (any width), else the dtype itself."""
    return np.dtype(np.float64) if is_float(dt) else np.dtype(dt)


@reference("constant")
def constant(value=None, sparse_value=None, value_float=None, value_floats=None, value_int=None,
             value_ints=None, value_string=None, value_strings=None):
    if value is not None:
        return np.array(value)
    if sparse_value is not None:
        raise NotImplementedError("constant: sparse_value is not supported by the reference")
    if value_float is not None:
        return np.array(value_float, dtype=np.float32)
    if value_floats is not None:
        return np.array(value_floats, dtype=np.float32)
    if value_int is not None:
        return np.array(value_int, dtype=np.int64)
    if value_ints is not None:
        return np.array(value_ints, dtype=np.int64)
    if value_string is not None:
        return np.array(value_string, dtype=object)
    if value_strings is not None:
        return np.array(list(value_strings), dtype=object)
    raise ValueError("constant: no value attribute given")


@reference("constant_of_shape")
def constant_of_shape(shape, value=None):
    fill = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value)
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    return np.full(dims, fill.reshape(-1)[0], dtype=fill.dtype)


@reference("dropout")
def dropout(data, ratio=None, training_mode=None, seed=None):
    ratio = 0.5 if ratio is None else float(np.asarray(ratio))
    training = False if training_mode is None else bool(np.asarray(training_mode))
    if not training or ratio == 0.0:
        return data.copy(), np.ones(data.shape, dtype=bool)
    rng = np.random.default_rng(seed)
    mask = rng.uniform(0.0, 1.0, data.shape) >= ratio
    out = data.astype(np.float64) * mask / (1.0 - ratio)
    return out.astype(data.dtype), mask
