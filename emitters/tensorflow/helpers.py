"""Shared helpers of the TensorFlow families: node checks (``Refusal`` or None), dtype tests,
the backend-wide value-kind check (``accepts``), which nodes compute float16/bfloat16 in
float32 (``widens``) and which run channels-last (``channels_last``, the layout predicate).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import numpy as np

from translator.ir.graph import Node
from translator.compile.registry import Refusal

Check = Callable[[Node], "Refusal | None"]


@lru_cache(maxsize=None)
def tf_dtype_names() -> dict[str, str]:
    """dtype id → ``tf.<name>`` from the ``tensorflow`` column of dtypes.yaml."""
    from translator.table.loader import load_tables

    out = {}
    for d in load_tables().dtypes.values():
        c = d.backends.get("tensorflow")
        if c is not None and c.status == "native" and c.names:
            out[d.id] = "tf." + c.names[0].split(".", 1)[1]
    return out


def accepts(node: Node, ctx: Any = None) -> Refusal | None:
    """The backend-wide check (``Target.accepts``): TensorFlow code handles tensors only."""
    for v in node.outputs:
        if v.type.kind != "tensor":
            return Refusal("unsupported_dtype", f"{v.type.kind} values have no TensorFlow mapping here")
    for v in node.inputs:
        if v is not None and v.type.kind != "tensor":
            return Refusal("unsupported_dtype", f"{v.type.kind} values have no TensorFlow mapping here")
    return None


def widens(node: Node, tables: Any) -> bool:
    """Arithmetic on float16/bfloat16 runs in float32 and is rounded back after the op (the
    ops whose optable entry has the ``widen_half`` trait)."""
    op = tables.ops.get(node.op)
    if op is None or "widen_half" not in op.traits:
        return False
    return any(v is not None and v.type.dtype in ("float16", "bfloat16") for v in node.inputs)


def is_int(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("int") or dtype.startswith("uint"))


def is_float(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("float") or dtype == "bfloat16")


def const_ints(node: Node, k: int) -> list[int] | None:
    v = node.inputs[k] if k < len(node.inputs) else None
    if v is None or v.const is None:
        return None
    return [int(x) for x in np.asarray(v.const).reshape(-1)]


def rank_of(node: Node, k: int = 0) -> int | None:
    v = node.inputs[k] if k < len(node.inputs) else None
    return None if v is None else v.type.rank


def needs_rank(*ks: int) -> Check:
    def check(n: Node) -> Refusal | None:
        for k in ks:
            if k < len(n.inputs) and n.inputs[k] is not None and rank_of(n, k) is None:
                return Refusal("dynamic_shape", f"input {k} has an unknown rank")
        return None

    return check


def both(*checks: Check) -> Check:
    def check(n: Node) -> Refusal | None:
        for c in checks:
            why = c(n)
            if why is not None:
                return why
        return None

    return check


def scalar(expr: str, dtype: str | None = None) -> str:
    """A scalar from a 0-D or 1-element tensor expression (optionally cast)."""
    s = f"tf.reshape({expr}, [])"
    return f"tf.cast({s}, {dtype})" if dtype else s


SPATIAL_RANKS = {"conv": (3, 4, 5), "conv_transpose": (3, 4, 5), "average_pool": (3, 4, 5), "max_pool": (3, 4, 5),
                 "lp_pool": (3, 4, 5), "depth_to_space": (4,), "space_to_depth": (4,), "lrn": (4,),
                 "resize": (3, 4, 5), "upsample": (3, 4, 5)}


def channels_last(node: Node) -> bool:
    ranks = SPATIAL_RANKS.get(node.op)
    return ranks is not None and rank_of(node, 0) in ranks


def static_dims(*ks: int) -> Any:
    def check(n: Node) -> Refusal | None:
        for k in ks:
            v = n.inputs[k] if k < len(n.inputs) else None
            if v is not None and (v.type.shape is None or not all(isinstance(d, int) for d in v.type.shape)):
                return Refusal("dynamic_shape", f"input {k} needs a static shape")
        return None

    return check
