"""Core ML rules: reductions (``reduce_*``), over constant axes or axes fed at run time."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node

from .mil import lit, need_rank, np_dtype, np_lit, static_shape
from .registry import Refusal, rule
from .shape import _axes_input

if TYPE_CHECKING:
    from .codegen import Gen


def _reduce_check(node: Node) -> Refusal | None:
    why = need_rank(0)(node)
    if why is not None or len(node.inputs) < 2 or node.inputs[1] is None or node.inputs[1].is_const:
        return why
    # runtime axes: MIL reduces over constant axes only; ``_reduce_runtime_axes`` reduces every
    # axis under a mask, which needs the input's static shape and the number of axes
    if static_shape(node.inputs[0]) is None or static_shape(node.inputs[1]) is None:
        return Refusal("requires_constant_input", "runtime reduction axes need a static input shape and axes length")
    return None


#: per-axis MIL reduction of a reduction over several runtime axes (the op applied axis after
#: axis gives the same value), with an elementwise step before or after where it does not
_PER_AXIS = {"reduce_sum_square": ("square", "reduce_sum", None), "reduce_log_sum": (None, "reduce_sum", "log")}


#: what a reduction over an empty axis gives (before ``_PER_AXIS``'s step after)
_EMPTY_REDUCTION = {"reduce_sum": 0.0, "reduce_l1_norm": 0.0, "reduce_l2_norm": 0.0, "reduce_prod": 1.0,
                    "reduce_mean": float("nan"), "reduce_max": -np.inf, "reduce_min": np.inf,
                    "reduce_log_sum_exp": -np.inf}


def _reduce_runtime_axes(gen: Gen, node: Node, x: str, fn: str, keep: bool, bool_out: bool) -> None:
    """Axes known only at run time (their count is static): each axis ``i`` is reduced with
    ``keep_dims`` and ``select``ed where ``i`` is one of the axes (the reduced value then
    broadcasts along ``i``); the result is sliced to length 1 on the reduced axes and, without
    ``keepdims``, reshaped to the kept dims (found by sorting ``flag * rank + i``). An empty
    input gives the reduction's identity (``_EMPTY_REDUCTION``) in the result's shape."""
    shape = static_shape(node.inputs[0])
    assert shape is not None
    r = len(shape)
    k = int(np.prod(static_shape(node.inputs[1]) or (0,)))

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    pre, per, post = _PER_AXIS.get(fn, (None, fn, None))
    if pre is not None:
        x = step(pre, f"mb.{pre}(x={x}")
    ax = step("axes_pos", f"mb.add(x={gen.var(node.inputs[1])}, y=np.int32({r})")
    ax = step("axes_norm", f"mb.mod(x={ax}, y=np.int32({r})")
    ax = step("axes_col", f"mb.expand_dims(x={ax}, axes=[-1]")
    hit = step("axes_hit", "mb.cast(x=" + step("axes_eq", f"mb.equal(x={ax}, y=np.arange({r}, dtype=np.int32)") +
               ", dtype='int32'")
    flags = step("flags", f"mb.reduce_max(x={hit}, axes=[0], keep_dims=False")
    flagb = step("flagb", f"mb.cast(x={flags}, dtype='bool'")
    end = step("end", f"mb.select(cond={flagb}, a=np.int32(1), b={np_lit(list(shape), 'int32')}")
    dims = end
    if not keep:  # the kept dims in order: sorting flag * rank + i puts them first
        key = step("key", "mb.add(x=" + step("flag_rank", f"mb.mul(x={flags}, y=np.int32({r})") +
                   f", y=np.arange({r}, dtype=np.int32)")
        kept = step("kept", "mb.slice_by_size(x=" + step("order", f"mb.argsort(x={key}, ascending=True") +
                    f", begin=np.array([0], dtype=np.int32), size=[{r - k}]")
        dims = step("dims", f"mb.gather(x={np_lit(list(shape), 'int32')}, indices={kept}, axis=0")
    if 0 in shape:  # an empty input: the reduction's identity, in the result's shape (empty or not)
        dt = "int32" if bool_out else (node.inputs[0].type.dtype or "float32")
        ident = _EMPTY_REDUCTION[per] if not bool_out else float(per == "reduce_min")
        if np.dtype(np_dtype(dt)).kind in "iu" and abs(ident) == np.inf:
            ident = np.iinfo(np.int32).max if ident > 0 else np.iinfo(np.int32).min
        y = step("empty", f"mb.fill(shape={dims}, value={np_lit(ident, dt)}")
    else:
        y = x
        for i in range(r):
            fi = step(f"flag{i}", f"mb.slice_by_size(x={flagb}, begin=np.array([{i}], dtype=np.int32), size=[1]")
            red = step(f"red{i}", f"mb.{per}(x={y}, axes=[{i}], keep_dims=True")
            y = step(f"sel{i}", f"mb.select(cond={fi}, a={red}, b={y}")
        y = step("sliced", f"mb.slice_by_index(x={y}, begin={np_lit([0] * r, 'int32')}, end={end}")
        if not keep:
            y = step("reshaped", f"mb.reshape(x={y}, shape={dims}")
    if bool_out:
        gen.emit(f"{gen.out(node)} = mb.cast(x={y}, dtype='bool', name={gen.name(node)})")
    elif post is not None:
        dt = node.inputs[0].type.dtype or "float32"
        gen.emit(f"{gen.out(node)} = mb.{post}(x={y}, epsilon={np_lit(0.0, dt)}, name={gen.name(node)})")
    else:
        gen.emit(f"{gen.out(node)} = mb.identity(x={y}, name={gen.name(node)})")


@rule("reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min", "reduce_l1", "reduce_l2",
          "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square", check=_reduce_check, any_dtype=True)
def _reduce(gen: Gen, node: Node) -> None:
    r = node.inputs[0].type.rank
    axes = _axes_input(node, 1) if len(node.inputs) > 1 and node.inputs[1] is not None else None
    x = gen.var(node.inputs[0])
    if node.inputs[0].type.dtype == "bool" and node.op in ("reduce_max", "reduce_min"):  # any / all
        t, tn = gen.tmp(node, "int")
        gen.emit(f"{t} = mb.cast(x={x}, dtype='int32', name={tn})")
        x = t
    runtime = axes is None and len(node.inputs) > 1 and node.inputs[1] is not None
    if runtime and 0 < int(np.prod(static_shape(node.inputs[1]) or (0,))) < r:
        _reduce_runtime_axes(gen, node, x, gen.cell_name(node), bool(int(gen.attr(node, "keepdims"))),
                             node.inputs[0].type.dtype == "bool" and node.op in ("reduce_max", "reduce_min"))
        return
    if runtime:  # no axes (noop or every axis), or as many as the rank (no duplicates: every axis)
        axes = list(range(r)) if static_shape(node.inputs[1]) != (0,) else []
    if not axes:
        if int(gen.attr(node, "noop_with_empty_axes")):
            gen.emit(f"{gen.out(node)} = mb.identity(x={x}, name={gen.name(node)})")
            return
        axes = list(range(r))
    axes = sorted({norm_axis(a, r) for a in axes})
    keep = bool(int(gen.attr(node, "keepdims")))
    if node.inputs[0].type.dtype == "bool" and node.op in ("reduce_max", "reduce_min"):
        t, tn = gen.tmp(node, "reduced")
        gen.emit(f"{t} = mb.{gen.cell_name(node)}(x={x}, axes={lit(axes)}, keep_dims={keep}, name={tn})")
        gen.emit(f"{gen.out(node)} = mb.cast(x={t}, dtype='bool', name={gen.name(node)})")
        return
    gen.emit(f"{gen.out(node)} = mb.{gen.cell_name(node)}(x={x}, axes={lit(axes)}, keep_dims={keep}, name={gen.name(node)})")
