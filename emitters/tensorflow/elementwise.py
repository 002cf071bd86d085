"""TensorFlow rules for elementwise ops one snippet line cannot express (division, casts,
bit operations, variadic min/max/sum, clip).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .helpers import is_float, is_int
from .registry import rule


@rule("div")
def div(c: Any) -> list[str]:
    fn = "tf.truncatediv" if is_int(c.dtype(0)) else "tf.math.divide"
    return [f"{c.o()} = {fn}({c.i(0)}, {c.i(1)})"]


@rule("is_inf")
def is_inf(c: Any) -> list[str]:
    pos, neg = bool(c.attr("detect_positive", 1)), bool(c.attr("detect_negative", 1))
    x = c.i(0)
    if pos and neg:
        return [f"{c.o()} = tf.math.is_inf({x})"]
    if pos or neg:
        cmp = "tf.math.greater" if pos else "tf.math.less"
        return [f"{c.o()} = tf.math.logical_and(tf.math.is_inf({x}), {cmp}({x}, 0))"]
    return [f"{c.o()} = tf.zeros_like({x}, dtype=tf.bool)"]


@rule("bit_count")
def bit_count(c: Any) -> list[str]:
    if c.dtype(0) == "bool":
        return [f"{c.o()} = tf.identity({c.i(0)})"]
    return [f"{c.o()} = tf.cast(tf.raw_ops.PopulationCount(x={c.i(0)}), {c.tf(c.dtype(0))})"]


@rule("bit_shift_left", "bit_shift_right")
def bit_shift(c: Any) -> list[str]:
    """Shifts of < 0 or >= the bit width give 0 (left) or the sign fill (right), as the reference."""
    x, y = c.i(0), c.i(1)
    bits = int(np.dtype(c.dtype(0)).itemsize * 8)
    valid, shift = c.tmp("valid"), c.tmp("shift")
    left = c.node.op == "bit_shift_left"
    fn = "tf.bitwise.left_shift" if left else "tf.bitwise.right_shift"
    fill = f"tf.zeros_like({shift})" if left or c.dtype(0).startswith("uint") else \
        f"tf.where({x} < 0, tf.ones_like({shift}) * -1, tf.zeros_like({shift}))"
    return [f"{valid} = tf.math.logical_and({y} >= 0, {y} < {bits})",
            f"{shift} = {fn}({x}, tf.where({valid}, {y}, tf.zeros_like({y})))",
            f"{c.o()} = tf.where({valid}, {shift}, {fill})"]


_CHAIN = {"sum": "tf.math.add", "max": "tf.math.maximum", "min": "tf.math.minimum"}


@rule("sum", "max", "min")
def chain(c: Any) -> list[str]:
    """Variadic with broadcasting: a chain of the binary op."""
    fn = _CHAIN[c.node.op]
    xs = [c.i(k) for k in range(len(c.node.inputs)) if c.has(k)]
    expr = xs[0] if len(xs) > 1 else f"tf.identity({xs[0]})"
    for x in xs[1:]:
        expr = f"{fn}({expr}, {x})"
    return [f"{c.o()} = {expr}"]


@rule("clip")
def clip(c: Any) -> list[str]:
    expr = c.i(0)
    if c.has(1):
        expr = f"tf.math.maximum({expr}, {c.i(1)})"
    if c.has(2):
        expr = f"tf.math.minimum({expr}, {c.i(2)})"
    return [f"{c.o()} = {expr if expr != c.i(0) else f'tf.identity({expr})'}"]


def _cast_check(n: Node) -> Refusal | None:
    src = n.inputs[0].type.dtype if n.inputs[0] is not None else None
    dst = n.outputs[0].type.dtype
    if dst == "string" and src is not None and is_float(src):
        return Refusal("unsupported_dtype", "TensorFlow formats floats as strings differently from ONNX")
    if src == "string" and dst is not None and not (is_float(dst) or is_int(dst)):
        return Refusal("unsupported_dtype", f"no TensorFlow conversion from string to {dst}")
    return None


def cast_lines(c: Any, x: str, src: str, dst: str) -> list[str]:
    out = c.o()
    if src == dst:
        return [f"{out} = tf.identity({x})"]
    if src == "string":
        direct = dst in ("float32", "float64", "int32", "int64")
        number = f"tf.strings.to_number({x}, out_type={c.tf(dst if direct else 'float64')})"
        return [f"{out} = {number if direct else f'tf.cast({number}, {c.tf(dst)})'}"]
    if dst == "string":
        src_expr = f"tf.cast({x}, tf.int32)" if src == "bool" else x
        return [f"{out} = tf.strings.as_string({src_expr})"]
    return [f"{out} = tf.cast({x}, {c.tf(dst)})"]


@rule("cast", check=_cast_check)
def cast(c: Any) -> list[str]:
    return cast_lines(c, c.i(0), c.dtype(0), c.out_dtype())


@rule("cast_like", check=_cast_check)
def cast_like(c: Any) -> list[str]:
    return cast_lines(c, c.i(0), c.dtype(0), c.dtype(1))


@rule("bit_cast")
def bit_cast(c: Any) -> list[str]:
    if "bool" in (c.dtype(0), c.out_dtype()):  # one byte holding 0 or 1 either way
        return [f"{c.o()} = tf.cast({c.i(0)}, {c.tf(c.out_dtype())})"]
    return [f"{c.o()} = tf.bitcast({c.i(0)}, {c.tf(c.out_dtype())})"]
