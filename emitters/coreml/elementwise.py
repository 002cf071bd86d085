"""Core ML rules: casts, is_inf, variadic sum/max/min, clip, round, bit shifts, pow, matmul and gemm
(the one-line elementwise ops are snippets in their optable cells)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.table.errors import Unsupported
from translator.ir.graph import Node
from translator.compile.render import literal

from .mil import const_of, lit, mil_dtype, need_rank, np_dtype, np_lit, onnx_to_dtype
from .registry import NAME, rule

if TYPE_CHECKING:
    from .codegen import Gen


# ----------------------------------------------------------------------------- elementwise
@rule("cast", "cast_like", any_dtype=True)
def _cast(gen: Gen, node: Node) -> None:
    src = node.inputs[0]
    to = node.outputs[0].type.dtype
    if to is None and node.op == "cast":
        to = onnx_to_dtype(node.attrs["to"])
    if to is None:
        raise Unsupported(node.op, NAME, "unsupported_dtype", "unknown target dtype", node.name)
    if src.type.dtype == to:
        gen.emit(f"{gen.out(node)} = mb.identity(x={gen.var(src)}, name={gen.name(node)})")
    else:
        gen.emit(f"{gen.out(node)} = mb.cast(x={gen.var(src)}, dtype={literal(mil_dtype(to))}, name={gen.name(node)})")


@rule("is_inf")
def _is_inf(gen: Gen, node: Node) -> None:
    pos, neg = int(gen.attr(node, "detect_positive")), int(gen.attr(node, "detect_negative"))
    x, dt = gen.var(node.inputs[0]), node.inputs[0].type.dtype
    if pos != neg:
        gen.emit(f"{gen.out(node)} = mb.equal(x={x}, y={np_lit(np.inf if pos else -np.inf, dt)}, name={gen.name(node)})")
        return
    a, an = gen.tmp(node, "abs")
    gen.emit(f"{a} = mb.abs(x={x}, name={an})")
    # both: |x| == inf; neither: |x| < -1, false everywhere (NaN included)
    fn, y = ("equal", np_lit(np.inf, dt)) if pos else ("less", np_lit(-1, dt))
    gen.emit(f"{gen.out(node)} = mb.{fn}(x={a}, y={y}, name={gen.name(node)})")


@rule("sum", "max", "min")
def _variadic(gen: Gen, node: Node) -> None:
    fn = {"sum": "add", "max": "maximum", "min": "minimum"}[node.op]
    ins = [v for v in node.inputs if v is not None]
    if len(ins) == 1:
        gen.emit(f"{gen.out(node)} = mb.identity(x={gen.var(ins[0])}, name={gen.name(node)})")
        return
    acc = gen.var(ins[0])
    for i, v in enumerate(ins[1:], 1):
        last = i == len(ins) - 1
        var, nm = (gen.out(node), gen.name(node)) if last else gen.tmp(node, f"acc{i}")
        gen.emit(f"{var} = mb.{fn}(x={acc}, y={gen.var(v)}, name={nm})")
        acc = var


@rule("clip", any_dtype=True)
def _clip(gen: Gen, node: Node) -> None:
    """Constant float bounds: MIL clip; otherwise max(x, lo) then min(., hi) (any dtype, any bounds)."""
    x = node.inputs[0]
    dt = x.type.dtype
    lo_v = node.inputs[1] if len(node.inputs) > 1 else None
    hi_v = node.inputs[2] if len(node.inputs) > 2 else None
    if dt in ("float32", "float16") and all(v is None or v.is_const for v in (lo_v, hi_v)) and (lo_v or hi_v):
        lo = float(const_of(lo_v)) if lo_v is not None else float(np.finfo(np_dtype(dt)).min)
        hi = float(const_of(hi_v)) if hi_v is not None else float(np.finfo(np_dtype(dt)).max)
        gen.emit(f"{gen.out(node)} = mb.clip(x={gen.var(x)}, alpha={np_lit(lo, dt)}, beta={np_lit(hi, dt)}, "
                 f"name={gen.name(node)})")
        return
    steps = [(fn, v) for fn, v in (("maximum", lo_v), ("minimum", hi_v)) if v is not None]
    acc = gen.var(x)
    if not steps:
        gen.emit(f"{gen.out(node)} = mb.identity(x={acc}, name={gen.name(node)})")
    for i, (fn, v) in enumerate(steps):
        var, nm = (gen.out(node), gen.name(node)) if i == len(steps) - 1 else gen.tmp(node, fn)
        gen.emit(f"{var} = mb.{fn}(x={acc}, y={gen.var(v)}, name={nm})")
        acc = var


@rule("round")
def _round(gen: Gen, node: Node) -> None:
    gen.emit(f"{gen.out(node)} = mb.round(x={gen.var(node.inputs[0])}, name={gen.name(node)})")


#: bits of the integer dtypes a shift's width comes from (Core ML computes them in int32)
_WIDTH = {"int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "int32": 32}


@rule("bit_shift_left", "bit_shift_right")
def _shift(gen: Gen, node: Node) -> None:
    """x * 2^s (left) or floor(x / 2^s) (right, arithmetic) in int32. A shift outside
    [0, width) of the model's dtype (8/16 bits before legalization) gives what ONNX says:
    0 to the left, the sign fill (-1 for a negative x, else 0) to the right."""
    x, y = node.inputs[0], node.inputs[1]
    dt = x.type.dtype
    source = (node.meta.get("source_dtypes") or [dt])[0]
    width = _WIDTH.get(source, 32)
    fn = "mul" if node.op == "bit_shift_left" else "floor_div"
    c = const_of(y)
    if c is not None and c.size and c.min() >= 0 and c.max() < width:
        p, pn = gen.tmp(node, "pow2")
        gen.emit(f"{p} = mb.pow(x={np_lit(2, dt)}, y={gen.var(y)}, name={pn})")
        gen.emit(f"{gen.out(node)} = mb.{fn}(x={gen.var(x)}, y={p}, name={gen.name(node)})")
        return

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    yv = gen.var(y)
    outside = step("outside", "mb.logical_or(x=" + step("negative", f"mb.less(x={yv}, y={np_lit(0, dt)}") + ", y=" +
                   step("too_wide", f"mb.greater_equal(x={yv}, y={np_lit(width, dt)}"))
    safe = step("shift", f"mb.select(cond={outside}, a={np_lit(0, dt)}, b={yv}")
    shifted = step("shifted", f"mb.{fn}(x={gen.var(x)}, y=" + step("pow2", f"mb.pow(x={np_lit(2, dt)}, y={safe}"))
    if node.op == "bit_shift_left":
        fill = np_lit(0, dt)
    else:
        # -1 where x < 0, else 0: a cast of the comparison (a select of two scalars would be typed
        # as a scalar by coremltools, whatever the shape of its condition)
        negative = step("is_negative", f"mb.less(x={gen.var(x)}, y={np_lit(0, dt)}")
        fill = step("sign_fill", "mb.mul(x=" + step("negative_int", f"mb.cast(x={negative}, dtype={lit(mil_dtype(dt))}")
                    + f", y={np_lit(-1, dt)}")
    gen.emit(f"{gen.out(node)} = mb.select(cond={outside}, a={fill}, b={shifted}, name={gen.name(node)})")


@rule("pow")
def _pow(gen: Gen, node: Node) -> None:
    """MIL pow takes one dtype; an exponent of another dtype is cast to the base's."""
    x, y = node.inputs[0], node.inputs[1]
    yv = gen.var(y)
    if y.type.dtype != x.type.dtype:
        t, tn = gen.tmp(node, "exponent")
        gen.emit(f"{t} = mb.cast(x={yv}, dtype={literal(mil_dtype(x.type.dtype))}, name={tn})")
        yv = t
    gen.emit(f"{gen.out(node)} = mb.pow(x={gen.var(x)}, y={yv}, name={gen.name(node)})")


@rule("matmul", check=need_rank(0, 1))
def _matmul(gen: Gen, node: Node) -> None:
    """numpy matmul: a 1-D operand gets a unit axis for the product, removed afterwards."""
    a, b = node.inputs[0], node.inputs[1]
    av, bv = gen.var(a), gen.var(b)
    if a.type.rank == 1 and b.type.rank == 1:  # a dot product: MIL squeeze to rank 0 has no value inference
        t, tn = gen.tmp(node, "products")
        gen.emit(f"{t} = mb.mul(x={av}, y={bv}, name={tn})")
        gen.emit(f"{gen.out(node)} = mb.reduce_sum(x={t}, axes=[0], keep_dims=False, name={gen.name(node)})")
        return
    squeeze = []
    if a.type.rank == 1:
        t, tn = gen.tmp(node, "row")
        gen.emit(f"{t} = mb.expand_dims(x={av}, axes=[0], name={tn})")
        av = t
        squeeze.append(-2)
    if b.type.rank == 1:
        t, tn = gen.tmp(node, "col")
        gen.emit(f"{t} = mb.expand_dims(x={bv}, axes=[-1], name={tn})")
        bv = t
        squeeze.append(-1)
    if not squeeze:
        gen.emit(f"{gen.out(node)} = mb.matmul(x={av}, y={bv}, name={gen.name(node)})")
        return
    t, tn = gen.tmp(node, "mm")
    gen.emit(f"{t} = mb.matmul(x={av}, y={bv}, name={tn})")
    out_rank = max(a.type.rank, b.type.rank) + (1 if len(squeeze) == 2 else 0)
    axes = sorted(out_rank + ax for ax in squeeze)
    gen.emit(f"{gen.out(node)} = mb.squeeze(x={t}, axes={lit(axes)}, name={gen.name(node)})")


@rule("gemm")
def _gemm(gen: Gen, node: Node) -> None:
    a, b = node.inputs[0], node.inputs[1]
    c = node.inputs[2] if len(node.inputs) > 2 else None
    alpha, beta = float(gen.attr(node, "alpha")), float(gen.attr(node, "beta"))
    ta, tb = bool(gen.attr(node, "transA")), bool(gen.attr(node, "transB"))
    dt = a.type.dtype
    last_mm = c is None and alpha == 1.0
    mm, mmn = (gen.out(node), gen.name(node)) if last_mm else gen.tmp(node, "matmul")
    gen.emit(f"{mm} = mb.matmul(x={gen.var(a)}, y={gen.var(b)}, transpose_x={ta}, transpose_y={tb}, name={mmn})")
    acc = mm
    if alpha != 1.0:
        last = c is None
        var, nm = (gen.out(node), gen.name(node)) if last else gen.tmp(node, "alpha")
        gen.emit(f"{var} = mb.mul(x={acc}, y={np_lit(alpha, dt)}, name={nm})")
        acc = var
    if c is not None:
        cv = gen.var(c)
        if beta != 1.0:
            sc, scn = gen.tmp(node, "beta")
            gen.emit(f"{sc} = mb.mul(x={cv}, y={np_lit(beta, dt)}, name={scn})")
            cv = sc
        gen.emit(f"{gen.out(node)} = mb.add(x={acc}, y={cv}, name={gen.name(node)})")
