"""Dtype ids (``dtypes.yaml``) ↔ NumPy / ml_dtypes types."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from .loader import load_tables


@lru_cache(maxsize=None)
def numpy_dtype(dtype_id: str) -> Any:
    """The NumPy dtype that holds values of ``dtype_id`` (``numpy`` field of dtypes.yaml)."""
    d = load_tables().dtypes.get(dtype_id)
    if d is None:
        raise KeyError(f"unknown dtype {dtype_id!r}")
    if d.numpy is None:
        raise TypeError(f"dtype {dtype_id!r} has no NumPy holder")
    if d.numpy.startswith("ml_dtypes."):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, d.numpy.split(".", 1)[1]))
    if d.numpy in ("object", "str"):
        return np.dtype(object)
    return np.dtype(d.numpy)


@lru_cache(maxsize=None)
def _by_numpy() -> dict[Any, str]:
    out: dict[Any, str] = {}
    for d in load_tables().dtypes.values():
        if d.numpy is None or d.kind == "string":
            continue
        try:
            out.setdefault(numpy_dtype(d.id), d.id)
        except (TypeError, AttributeError):
            continue
    return out


def dtype_id(np_dtype: Any) -> str:
    """The dtype id of a NumPy dtype (object/str arrays are ``string``)."""
    dt = np.dtype(np_dtype)
    if dt.kind in "OSU":
        return "string"
    try:
        return _by_numpy()[dt]
    except KeyError:
        raise TypeError(f"NumPy dtype {dt} has no entry in dtypes.yaml") from None


def onnx_dtype_map(tables: Any) -> dict[int, str]:
    """TensorProto enum → dtype id, from the ``onnx`` cells of ``dtypes.yaml``."""
    import onnx

    out: dict[int, str] = {}
    for d in tables.dtypes.values():
        cell = d.backends.get("onnx")
        if cell is None or cell.status != "native":
            continue
        for n in cell.names:
            enum_name = n.rsplit(".", 1)[-1]
            if hasattr(onnx.TensorProto, enum_name):
                out.setdefault(int(getattr(onnx.TensorProto, enum_name)), d.id)
    return out


def onnx_enum() -> dict[int, str]:
    """ONNX ``TensorProto`` data type number → dtype id (the one map; from dtypes.yaml's onnx column)."""
    return onnx_dtype_map(load_tables())


def onnx_enum_of(tables: Any = None) -> dict[str, int]:
    """dtype id → ONNX ``TensorProto`` number: ``onnx_dtype_map`` inverted (a Cast node's ``to``)."""
    return {v: k for k, v in (onnx_dtype_map(tables) if tables is not None else onnx_enum()).items()}


def norm_axis(axis: int, rank: int) -> int:
    """A possibly negative axis as a non-negative one (the one copy). ``rank`` itself is let
    through (Flatten's axis may equal the rank); which axes an op takes is checked when the IR
    is verified, before any emitter runs."""
    a = int(axis)
    if not -rank <= a <= rank:
        raise ValueError(f"axis {a} out of range for rank {rank}")
    return a + rank if a < 0 else a
