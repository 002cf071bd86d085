"""TensorFlow rules for quantize_linear / dequantize_linear.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .helpers import Check, needs_rank, rank_of
from .registry import rule


def needs_const(*ks: int, rank: int | None = 0) -> Check:
    def check(n: Node) -> Refusal | None:
        for k in ks:
            if k < len(n.inputs) and n.inputs[k] is not None and n.inputs[k].const is None:  # type: ignore[union-attr]
                return Refusal("requires_constant_input", f"input {k} must be a constant for TensorFlow")
        if rank is not None and rank_of(n, rank) is None:
            return Refusal("dynamic_shape", f"input {rank} has an unknown rank")
        return None

    return check


def _quant_check(n: Node) -> Refusal | None:
    if n.attrs.get("block_size", 0):
        return needs_const(rank=0)(n) or _static_axis(n)
    return needs_rank(0, 1)(n)


def _static_axis(n: Node) -> Refusal | None:
    s = n.inputs[0].type.shape if n.inputs[0] is not None else None
    if s is None or not isinstance(s[norm_axis(n.attrs.get("axis", 1), len(s))], int):
        return Refusal("dynamic_shape", "blocked quantization needs the blocked axis' size")
    return None


def _per_axis(c: Any, expr: str, k: int) -> str:
    """A per-axis (1-D) or blocked parameter shaped to broadcast over input 0."""
    block = int(c.attr("block_size", 0))
    if block:
        a = norm_axis(c.attr("axis", 1), c.rank(0))
        dim = c.shape(0)[a]
        cut = [":"] * c.rank(0)
        cut[a] = f":{dim}"
        return f"tf.repeat({expr}, {block}, axis={a})[{', '.join(cut)}]"
    if c.rank(k) != 1 or (c.shape(k)[0] == 1):
        return expr
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 1), r)
    shape = [1] * r
    shape[a] = -1
    return f"tf.reshape({expr}, {c.lit(shape)})"


@rule("quantize_linear", check=_quant_check)
def quantize_linear(c: Any) -> list[str]:
    from translator.table.dtypes import numpy_dtype

    out_dt = c.out_dtype()
    source = (c.node.meta.get("source_dtypes") or [None])[0] or out_dt  # saturate to the model's type
    info = np.iinfo(numpy_dtype(source))
    work = "tf.float64" if c.dtype(0) == "float64" else "tf.float32"
    scale = _per_axis(c, f"tf.cast({c.i(1)}, {work})", 1)
    q = f"tf.math.round(tf.cast({c.i(0)}, {work}) / {scale})"
    if c.has(2):
        q = f"{q} + {_per_axis(c, f'tf.cast({c.i(2)}, {work})', 2)}"
    return [f"{c.o()} = tf.cast(tf.clip_by_value({q}, {float(info.min)}, {float(info.max)}), {c.tf(out_dt)})"]


@rule("dequantize_linear", check=_quant_check)
def dequantize_linear(c: Any) -> list[str]:
    work = "tf.float64" if c.out_dtype() == "float64" else "tf.float32"
    x = f"tf.cast({c.i(0)}, {work})"
    if c.has(2):
        x = f"({x} - {_per_axis(c, f'tf.cast({c.i(2)}, {work})', 2)})"
    return [f"{c.o()} = tf.cast({x} * {_per_axis(c, f'tf.cast({c.i(1)}, {work})', 1)}, {c.tf(c.out_dtype())})"]


def integer_plan(node, ctx) -> tuple[str, str]:
    """TensorFlow runs the quantize/dequantize pairs and every kernel in float; an 8-bit weight
    is stored as such (``report``)."""
    from translator.compile.quantized import quantized_operands

    if quantized_operands(node).weight is not None:
        return "int8 weights", "stored as int8, dequantized in the graph; float kernel (TensorFlow has no integer QDQ kernels)"
    return "float", "TensorFlow has no integer kernels for QDQ: it computes in float"
