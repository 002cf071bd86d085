"""What every part of the Core ML backend shares: coremltools (imported lazily and quietly),
MIL dtype names, literals for the builder script, node checks, and the artifact's shape.

Imports only ``translator`` and ``registry`` (no family, no ``codegen``), so every module of
the package can use it without an import cycle.
"""
from __future__ import annotations

import contextlib
import io
import logging
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import numpy as np

from translator.table.dtypes import norm_axis, numpy_dtype, onnx_enum
from translator.ir.graph import Node, Value
from translator.compile.render import literal

from .registry import NAME, Refusal

#: the deployment target when none is given (``convert --target``)
DEFAULT_TARGET = "iOS17"
#: the file name MIL errors point into (the rendered builder script)
SCRIPT = "<opbridge coreml builder.py>"
#: Core ML I/O dtype per MIL dtype: coremltools exchanges bool tensors as fp32 at the boundary
IO_DTYPE = {"fp32": "FLOAT32", "fp16": "FLOAT16", "int32": "INT32", "bool": "FLOAT32"}

Check = Callable[[Node], "Refusal | None"]


@lru_cache(maxsize=1)
def ct() -> Any:
    """coremltools, imported once and quietly (it probes TensorFlow and PyTorch on import)."""
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        import coremltools
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    return coremltools


def deployment_target(name: str) -> str:
    """``name`` if it is one of coremltools' ``ct.target`` members (any case), else a refusal."""
    from translator.table.errors import OpbridgeError

    known = [t for t in dir(ct().target) if not t.startswith("_")]
    for t in known:
        if t.lower() == str(name).lower():
            return t
    raise OpbridgeError("bad_option", f"unknown Core ML deployment target {str(name)!r} (known: {', '.join(known)})")


# ----------------------------------------------------------------------------- the artifact
@dataclass
class Port:
    """A model input or output: IR name, Core ML name, dtypes before/after legalization, shape."""

    name: str
    coreml: str
    dtype: str
    legal: str
    shape: tuple[Any, ...] | None


@dataclass
class CoreMLArtifact:
    source: str
    weights: dict[str, np.ndarray]
    target: str
    inputs: list[Port]
    outputs: list[Port]
    #: legalizations and other reported changes
    warnings: list[str] = field(default_factory=list)
    decomposed: list[tuple[str, str]] = field(default_factory=list)
    #: MIL op name → IR op id, to name the IR op behind a MIL error
    origin: dict[str, str] = field(default_factory=dict)
    #: the saved, normalized .mlpackage (a temporary directory owned by the artifact)
    package: Path | None = None
    #: what the reloaded package declares: {"inputs": [(name, dtype, shape)], "outputs": [...]}
    interface: dict[str, Any] = field(default_factory=dict)
    namespace: dict[str, Any] = field(default_factory=dict, repr=False)
    #: flexible input dims (``ct.RangeDim``, 1 to unbounded): label → the default size
    flexible: dict[str, int] = field(default_factory=dict)


# ----------------------------------------------------------------------------- literals and types
def plain(x: Any) -> Any:
    """NumPy scalars and arrays as plain Python data (lists, int, float, bool)."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return x


def lit(x: Any) -> str:
    """``render.literal`` of a value that may hold NumPy scalars or arrays (sequences as lists)."""
    return literal(plain(x))


def np_dtype(dtype: str | None) -> Any:
    return numpy_dtype(dtype or "float32")


def np_lit(arr: Any, dtype: str) -> str:
    """A typed NumPy literal: ``np.array(<data>, dtype='float32')``."""
    return f"np.array({lit(np.asarray(arr))}, dtype={literal(np.dtype(np_dtype(dtype)).name)})"


def mil_dtype(dtype: str) -> str:
    """IR dtype id → MIL dtype string (``fp32``), as coremltools names it."""
    from coremltools.converters.mil.mil import types

    return types.builtin_to_string(types.numpy_type_to_builtin_type(np_dtype(dtype)))


def onnx_to_dtype(to: int) -> str | None:
    return onnx_enum().get(int(to))


def contiguous(a: np.ndarray) -> np.ndarray:
    """C-contiguous, rank kept (``np.ascontiguousarray`` turns a 0-d array into shape (1,))."""
    return np.asarray(a) if a.flags.c_contiguous else np.ascontiguousarray(a)


# ----------------------------------------------------------------------------- node facts and checks
def const_of(v: Value | None) -> np.ndarray | None:
    return None if v is None or not v.is_const else np.asarray(v.const)


def static_shape(v: Value | None) -> tuple[int, ...] | None:
    if v is None or v.type.shape is None or not all(isinstance(d, int) for d in v.type.shape):
        return None
    return tuple(int(d) for d in v.type.shape)


def axis(a: Any, rank: int) -> int:
    """An attribute's axis in ``[0, rank)`` (``dtypes.norm_axis``; verification checked the range)."""
    return norm_axis(int(a), rank)


def need_const(*idx: int) -> Check:
    """A check: inputs ``idx`` (when present) are constants."""

    def check(node: Node) -> Refusal | None:
        for i in idx:
            if i < len(node.inputs) and node.inputs[i] is not None and not node.inputs[i].is_const:
                return Refusal("requires_constant_input", f"input {i} must be a constant for Core ML")
        return None

    return check


def need_rank(*idx: int) -> Check:
    def check(node: Node) -> Refusal | None:
        for i in idx:
            if i < len(node.inputs) and node.inputs[i] is not None and node.inputs[i].type.rank is None:
                return Refusal("dynamic_shape", f"input {i} has an unknown rank")
        return None

    return check


def all_of(*checks: Check) -> Check:
    def check(node: Node) -> Refusal | None:
        for c in checks:
            why = c(node)
            if why is not None:
                return why
        return None

    return check


__all__ = ["NAME", "DEFAULT_TARGET", "SCRIPT", "IO_DTYPE", "Check", "Port", "CoreMLArtifact", "ct",
           "deployment_target", "plain", "lit", "np_dtype", "np_lit", "mil_dtype", "onnx_to_dtype", "contiguous",
           "const_of", "static_shape", "axis", "need_const", "need_rank", "all_of"]
