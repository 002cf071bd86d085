"""MLX rules: reductions (guarded against empty inputs), shapes made from values."""
from __future__ import annotations

import math

import numpy as np

from translator.compile.render import literal

from .codegen import NodeEmit, mx_dtype
from .registry import rule

#: what a reduction over no elements gives (ONNX: the reduction's identity)
_EMPTY = {"reduce_sum": 0.0, "reduce_sum_square": 0.0, "reduce_l1": 0.0, "reduce_l2": 0.0, "reduce_prod": 1.0,
          "reduce_max": float("-inf"), "reduce_min": float("inf"), "reduce_log_sum": float("-inf"),
          "reduce_log_sum_exp": float("-inf"), "reduce_mean": float("nan")}


@rule(*_EMPTY)
def reduce(e: NodeEmit) -> str:
    """The cell's snippet, except on an empty input: MLX's CPU reduction over a zero-length
    axis can spin forever, so the module writes the identity in the reduced shape itself."""
    x, code = e.x(0), e.snippet()
    v = e.v(0)
    if v is not None and v.type.shape is not None:
        code = _staged(e, v, e.const(1) if e.v(1) is not None else None) or code
    if v is not None and v.type.is_static and math.prod(int(d) for d in v.type.shape) > 0:
        return code
    axes = e.x(1) if e.v(1) is not None else "None"
    given = e.const(1)
    if e.v(1) is None or given is not None:
        listed = [] if given is None else [int(a) for a in given.reshape(-1)]
        if not listed and e.attr("noop_with_empty_axes"):
            return code
        sel, empty = literal(listed or None), f"{x}.size == 0"
    else:
        sel = f"None if {axes}.size == 0 else {axes}.tolist()"
        empty = f"{x}.size == 0" + (f" and {axes}.size > 0" if e.attr("noop_with_empty_axes") else "")
    fill = _EMPTY[e.node.op]
    return (f"{e.helper('_reduce_empty')}({x}, {sel}, {bool(e.attr('keepdims'))}, {literal(fill)}) "
            f"if {empty} else {code}")


#: a float32 sum or mean over more values than this, across several axes, is written one axis at a time
STAGED_ABOVE = 4096


def _staged(e: NodeEmit, v, axes_const) -> str | None:
    """``_staged`` for a float32 ``reduce_sum`` / ``reduce_mean`` / ``global_average_pool`` over
    two or more constant axes, unless their static extents hold at most ``STAGED_ABOVE`` values
    (a symbolic extent: the helper decides at run time); else None (the cell's snippet)."""
    op = e.node.op
    if op not in ("reduce_sum", "reduce_mean", "global_average_pool") or v.type.dtype != "float32":
        return None
    shape = [int(d) if isinstance(d, (int, np.integer)) else None for d in v.type.shape]
    if op == "global_average_pool":
        axes, keep = list(range(2, len(shape))), True
    else:
        if axes_const is None and e.v(1) is not None:
            return None
        axes = [int(a) % len(shape) for a in np.asarray(axes_const).reshape(-1)] if axes_const is not None else []
        if not axes:
            if e.attr("noop_with_empty_axes"):
                return None
            axes = list(range(len(shape)))
        keep = bool(e.attr("keepdims"))
    sizes = [shape[a] for a in set(axes)]
    if len(sizes) < 2 or (None not in sizes and math.prod(sizes) <= STAGED_ABOVE):
        return None  # a symbolic extent: the helper decides at run time
    fn = "mx.sum" if op == "reduce_sum" else "mx.mean"
    return f"{e.helper('_staged')}({fn}, {e.x(0)}, {literal(sorted(set(axes)))}, {keep})"


@rule("global_average_pool")
def global_average_pool(e: NodeEmit) -> str:
    """The cell's ``mx.mean`` over the spatial axes, one axis at a time past ``STAGED_ABOVE``
    values (``_staged``)."""
    v, code = e.v(0), e.snippet()
    return (_staged(e, v, None) if v is not None and v.type.shape is not None else None) or code


@rule("constant_of_shape")
def constant_of_shape(e: NodeEmit) -> str:
    """``mx.full`` of the shape input's values with the one-element ``value`` (default 0.0)."""
    value = e.attr("value")
    fill = 0.0 if value is None else np.asarray(value).reshape(-1)[0].item()
    dt = mx_dtype(e.node.outputs[0].type.dtype or (np.asarray(value).dtype.name if value is not None else "float32"))
    return f"mx.full({e.x(0)}.tolist(), {literal(fill)}, dtype={dt})"


@rule("range")
def range_(e: NodeEmit) -> str:
    """``mx.arange`` of the scalar inputs' values; half-precision ranges are counted in float32
    (``stash_type``) and then cast, as ONNX computes them."""
    dt = mx_dtype(e.dtype_id(0))
    args = ", ".join(f"{e.x(i)}.item()" for i in range(3))
    if e.dtype_id(0) in ("float16", "bfloat16"):
        return f"mx.astype(mx.arange({args}, dtype=mx.float32), {dt})"
    return f"mx.arange({args}, dtype={dt})"


@rule("slice")
def slice_(e: NodeEmit) -> str:
    """The shared ``_slice`` helper: bounds as Python ints clamped to the axis (MLX takes 32-bit
    slice indices only; ONNX writes "to the end" as INT64_MAX)."""
    ins = [e.x(i) if e.v(i) is not None else "None" for i in range(5)]
    host = [a if a == "None" else f"np.array({a})" for a in ins[1:]]
    return f"{e.helper('_slice')}({ins[0]}, {', '.join(host)})"


@rule("dequantize_linear")
def dequantize_linear(e: NodeEmit) -> str:
    """The shared ``_dequantize`` helper over ``mlx.core``: per tensor, per axis or blocked."""
    zero = "None" if e.v(2) is None else e.x(2)
    out = mx_dtype(e.node.outputs[0].type.dtype or e.v(1).type.dtype)
    return (f"{e.helper('_dequantize')}(mx, {e.x(0)}, {e.x(1)}, {zero}, {int(e.attr('axis'))}, "
            f"{int(e.attr('block_size') or 0)}, {out})")
