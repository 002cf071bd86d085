"""Helpers every OpenVINO family module shares: attributes with signature defaults, ranks,
int64 constants and dims computed in the graph (``g`` is the node's ``codegen.Gen``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node
from translator.compile.registry import Refusal

if TYPE_CHECKING:
    from .codegen import Gen

#: a rule's check: None (fine) or why not
Check = Callable[[Node], "Refusal | None"]
INT64_MAX = np.iinfo(np.int64).max


def attr(node: Node, name: str, default: Any = None) -> Any:
    """An attribute of the node, else the op's signature default, else ``default``."""
    if name in node.attrs:
        return node.attrs[name]
    from translator.table.loader import load_tables

    op = load_tables().ops.get(node.op)
    if op is not None and op.signature is not None:
        a = op.signature.attribute(name)
        if a is not None and a.default is not None:
            return a.default
    return default


def rank_of(node: Node, i: int = 0) -> int | None:
    v = node.inputs[i] if i < len(node.inputs) else None
    return None if v is None else v.type.rank


def needs_rank(what: str) -> Check:
    """A check refusing (dynamic_shape) a node whose first input has an unknown rank."""
    return lambda n: None if rank_of(n) is not None else Refusal("dynamic_shape", f"{what} needs the input rank")


def np_dtype(dtype: str) -> Any:
    from translator.table.dtypes import numpy_dtype

    return numpy_dtype(dtype)


def i64(g: "Gen", value: Any) -> str:
    """An int64 constant."""
    return g.const(np.asarray(value, dtype=np.int64), "int64")


def scalar_i64(g: "Gen", var: str, dtype: str) -> str:
    """A one-element integer tensor → an int64 scalar."""
    if dtype != "int64":
        var = g.let(f"ops.convert({var}, ov.Type.i64)")
    return g.let(f"ops.reshape({var}, {i64(g, np.zeros(0))}, False)")


def as_i64(g: "Gen", var: str, dtype: str) -> str:
    return var if dtype == "int64" else g.let(f"ops.convert({var}, ov.Type.i64)")


def used(node: Node, i: int) -> bool:
    """Output ``i`` exists and is read (by a node or as a graph output)."""
    if i >= len(node.outputs):
        return False
    v = node.outputs[i]
    return bool(v.uses) or (node.graph is not None and any(o is v for o in node.graph.outputs))


def all_axes(g: "Gen", i: int = 0) -> str:
    """int64 [0, 1, ..., rank-1] of input ``i`` (dynamic when the rank is unknown)."""
    r = g.t(i).rank
    if r is not None:
        return i64(g, np.arange(r))
    x = g.x(i)
    rk = g.let(f"ops.reshape(ops.shape_of(ops.shape_of({x})), {i64(g, np.zeros(0))}, False)")
    return g.let(f"ops.range({i64(g, 0)}, {rk}, {i64(g, 1)}, 'i64')")


def all_along(g: "Gen", cond: str, axes: str, keep: bool) -> str:
    """Logical AND of a bool expression over ``axes`` (True on empty sets), via ReduceMin of 0/1
    bytes: the CPU plugin has no ReduceLogicalAnd with run-time axes."""
    return g.let(f"ops.convert(ops.reduce_min(ops.convert({cond}, ov.Type.u8), {axes}, {keep}), ov.Type.boolean)")


def dim(g: "Gen", x: str, axis: int) -> str:
    """The size of ``x`` along ``axis`` as an int64 scalar (computed in the graph)."""
    return g.let(f"ops.gather(ops.shape_of({x}), {i64(g, axis)}, {i64(g, 0)})")


def static_out(node: Node, i: int = 0) -> list[int] | None:
    """The output's shape when the IR knows it statically."""
    t = node.outputs[i].type
    return [int(d) for d in t.shape] if t.is_static and t.shape is not None else None


__all__ = ["Check", "INT64_MAX", "Refusal", "all_along", "all_axes", "as_i64", "attr", "dim", "i64", "needs_rank",
           "norm_axis", "np_dtype", "rank_of", "scalar_i64", "static_out", "used"]
