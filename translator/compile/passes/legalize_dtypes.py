"""Dtype legalization, driven by the backend's column of ``dtypes.yaml``.

A value whose dtype the backend lacks (its cell is not ``native``) takes the first
substitute in ``SUBSTITUTES`` that the backend has: ``int64 → int32`` (constants are
range-checked: a value that does not fit is ``unsupported_dtype`` with the tensor's
name), ``float64 → float32``, ... Graph inputs and outputs are legalized too, and every
change is returned as a warning line: legalization is reported, never silent.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...table.dtypes import numpy_dtype
from ...table.errors import Unsupported
from ...ir.graph import Graph, TensorType, Value
from ...table.loader import Tables, load_tables

SUBSTITUTES: dict[str, tuple[str, ...]] = {
    "int64": ("int32",), "uint64": ("uint32", "int32"), "uint32": ("int64", "int32"), "int16": ("int32",),
    "uint16": ("int32",), "int8": ("int32",), "uint8": ("int32",), "float64": ("float32",),
    "bfloat16": ("float32",), "float16": ("float32",), "bool": ("uint8", "int32"),
}
CAST_OPS = ("cast",)


def backend_dtypes(backend: str, tables: Tables) -> frozenset[str]:
    return frozenset(d.id for d in tables.dtypes.values()
                     if (c := d.backends.get(backend)) is not None and c.status == "native")


def _target(dtype: str, legal: frozenset[str], backend: str, what: str) -> str:
    for sub in SUBSTITUTES.get(dtype, ()):
        if sub in legal:
            return sub
    raise Unsupported("cast", backend, "unsupported_dtype", f"{what}: {dtype} has no legal substitute on {backend}")


def _only_slice_bounds(v: Value) -> bool:
    """Whether every use of ``v`` is a slice's starts or ends (TorchScript writes
    -9223372036854775807 for "from the end"): slice clamps bounds to the dim, so any bound
    beyond int32's range selects exactly what that range's limit selects."""
    return bool(v.uses) and all(n.op == "slice" and i in (1, 2) for n, i in v.uses)


def _retype(v: Value, new: str) -> None:
    v.type = TensorType(new, v.type.shape, v.type.kind, v.type.elem)


def _quantized_operand(v: Any) -> bool:
    """An 8-bit constant read only as the integer data or zero point of (de)quantizations:
    those ops carry its quantized dtype (``source_in_dtypes``), and a writer that keeps the
    model quantized stores it in 8 bits again (Core ML's ``constexpr_affine_dequantize``,
    TFLite's int8 tensors), so the widening is no change of the artifact to report."""
    return str(v.type.dtype) in ("int8", "uint8") and bool(v.uses) and all(
        n.op in ("quantize_linear", "dequantize_linear") and i in (0, 2) and not (n.op == "quantize_linear" and i == 0)
        for n, i in v.uses)


def run(graph: Graph, backend: str, tables: Tables | None = None,
        legal: frozenset[str] | None = None, top: bool = True) -> list[str]:
    """``legal``: the backend's dtypes when they differ from its column (e.g. per deployment target);
    ``top``: ``graph`` is the model's (a subgraph's inputs and outputs are its body values)."""
    tables = tables or load_tables()
    legal = backend_dtypes(backend, tables) if legal is None else legal
    warnings: list[str] = []
    enum_of: dict[str, int] = {}
    try:
        from ...table.dtypes import onnx_enum_of

        enum_of = onnx_enum_of(tables)
    except ImportError:
        pass
    for v in list(graph.values()):
        d = v.type.dtype
        if d is None or d in legal or v.type.kind != "tensor":
            continue
        if v.is_const and not v.uses and v not in graph.outputs:  # left over by folding: never emitted
            continue
        new = _target(d, legal, backend, f"value {v.name!r}")
        if v.is_const:
            arr = np.asarray(v.const)
            target = numpy_dtype(new)
            if arr.dtype.kind in "iu" and np.dtype(target).kind in "iu" and arr.size:
                info = np.iinfo(target)
                src = np.iinfo(arr.dtype)
                # ONNX's "to the end" sentinels (INT64_MAX / INT64_MIN, e.g. slice ends) saturate when
                # narrowing; a widening (int8 -> int32) keeps every value (-128 is a zero point there)
                if info.bits < src.bits:
                    arr = np.where(arr == src.max, info.max, np.where(arr == src.min, info.min, arr)).astype(arr.dtype)
                if _only_slice_bounds(v):  # any bound beyond ±2^31 means "past that end": clamp (no dim is longer)
                    arr = np.clip(arr, info.min, info.max).astype(arr.dtype)
                if arr.min() < info.min or arr.max() > info.max:
                    raise Unsupported("cast", backend, "unsupported_dtype",
                                      f"constant {v.name!r} ({d}) has values outside {new}'s range")
            v.const = arr.astype(target)
        kind = "constant" if v.is_const else "value"
        if top and v in graph.inputs:
            kind = "input"
        elif top and v in graph.outputs:
            kind = "output"
        if kind in ("input", "output") or kind == "constant" and not _quantized_operand(v):
            warnings.append(f"{backend}: {kind} {v.name!r} {d} -> {new}")
        _retype(v, new)
    for node in graph.nodes:
        if node.op in CAST_OPS and "to" in node.attrs and enum_of:
            to = next((k for k, e in enum_of.items() if e == int(node.attrs["to"])), None)
            if to is not None and to not in legal:
                new = _target(to, legal, backend, f"cast node {node.name!r}")
                node.attrs["to"] = enum_of[new]
                warnings.append(f"{backend}: cast {node.name!r} to {to} -> {new}")
    return warnings
