"""OpenVINO rules of elementwise ops: casts (with ONNX's int4 wrap-around), the variadic
Sum / Max / Min / Mean, Clip with optional bounds, bit shifts with ONNX's out-of-range results.
One-line elementwise ops are snippets in their optable.yaml cells."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from translator.ir.graph import Node

from .helpers import np_dtype
from .registry import rule

if TYPE_CHECKING:
    from .codegen import Gen


#: ONNX casts into these keep the low bits (floats truncated first); OpenVINO's Convert does
#: not wrap, so the wrap-around is computed in the graph: ((x + lo) mod 2^n) - lo
_WRAPPED = {"int4": (16, 8), "uint4": (16, 0)}


@rule("cast")
def _cast(g: "Gen", node: Node) -> None:
    to, src = g.out_dtype(0), g.dtype(0)
    if to in _WRAPPED and src not in _WRAPPED and src != "bool":
        span, lo = _WRAPPED[to]
        x = g.let(f"ops.convert({g.x(0)}, {g.ty('int64')})")  # floats truncate toward zero
        if lo:
            x = g.let(f"ops.add({x}, {g.const(lo, 'int64')})")
        x = g.let(f"ops.floor_mod({x}, {g.const(span, 'int64')})")
        if lo:
            x = g.let(f"ops.subtract({x}, {g.const(lo, 'int64')})")
        g.out(0, f"ops.convert({x}, {g.ty(to)})")
        return
    g.out(0, f"ops.convert({g.x(0)}, {g.ty(to)})")


@rule("cast_like")
def _cast_like(g: "Gen", node: Node) -> None:
    if g.out_dtype(0) in _WRAPPED:  # the wrap-around of cast (convert_like does not wrap either)
        _cast(g, node)
    else:
        g.out(0, f"ops.convert_like({g.x(0)}, {g.x(1)})")


# ----------------------------------------------------------------------------- variadic elementwise
def _fold(fn: str) -> Callable[["Gen", Node], None]:
    def lower(g: "Gen", node: Node) -> None:
        xs = g.xs()
        acc = xs[0]
        for x in xs[1:-1]:
            acc = g.let(f"ops.{fn}({acc}, {x})")
        if len(xs) > 1:
            g.out(0, f"ops.{fn}({acc}, {xs[-1]})")
        else:
            g.bind(0, acc)

    return lower


rule("sum")(_fold("add"))
rule("max")(_fold("maximum"))
rule("min")(_fold("minimum"))


@rule("mean")
def _mean(g: "Gen", node: Node) -> None:
    xs = g.xs()
    acc = xs[0]
    for x in xs[1:]:
        acc = g.let(f"ops.add({acc}, {x})")
    g.out(0, f"ops.divide({acc}, {g.const(len(xs), g.dtype(0))})")


@rule("clip")
def _clip(g: "Gen", node: Node) -> None:
    y = g.x(0)
    lo, hi = g.x(1), g.x(2)
    if lo is not None:
        y = g.let(f"ops.maximum({y}, {lo})")
    if hi is not None:
        y = g.let(f"ops.minimum({y}, {hi})")
    g.bind(0, y)


# ----------------------------------------------------------------------------- bit shifts
@rule("bit_shift_left", "bit_shift_right")
def _bit_shift(g: "Gen", node: Node) -> None:
    # a shift < 0 or >= the bit width gives 0 (left) or the sign fill (right), as in ONNX
    x, y, dt = g.x(0), g.x(1), g.dtype(0)
    bits = np.dtype(np_dtype(dt)).itemsize * 8
    zero = g.const(0, dt)
    valid = g.let(f"ops.logical_and(ops.greater_equal({y}, {zero}), ops.less({y}, {g.const(bits, dt)}))")
    left = node.op == "bit_shift_left"
    shifted = g.let(f"ops.bitwise_{'left' if left else 'right'}_shift({x}, ops.select({valid}, {y}, {zero}))")
    fill = zero
    if not left and np.dtype(np_dtype(dt)).kind == "i":
        fill = g.let(f"ops.select(ops.less({x}, {zero}), {g.const(-1, dt)}, {zero})")
    g.out(0, f"ops.select({valid}, {shifted}, {fill})")
