"""Dynamic-range ("hybrid") TFLite kernels: float activations, int8 weights.

LiteRT runs a ``FULLY_CONNECTED`` whose weights are quantized but whose input is float by
quantizing the input at run time, row by row (each row of the input flattened to
``[-1, depth]``), multiplying in integers and scaling the sums back. The frontend spells the
input's quantization out with IR ops so the targets compute what LiteRT computes (within
float rounding) instead of the float product with dequantized weights (about 1e-3 apart
after a few recurrent steps):

* asymmetric (``asymmetric_quantize_inputs``): ``rmin = min(0, min(row))``,
  ``rmax = max(0, max(row))``, ``scale = (rmax - rmin) / 255``, zero point
  ``round(-128 - rmin / scale)`` clamped to int8, ``q = clamp(round(zp + x / scale), -128, 127)``;
  a row of zeros gives zeros;
* symmetric: ``scale = max|row| / 127``, ``q = clamp(round(x * 127 / max|row|), -127, 127)``;

rounding half away from zero (``TfLiteRound``); then ``x ≈ (q - zp) · scale``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Value


from ..ir.graph import HYBRID_ROUNDING as HYBRID  # the node meta marking the spelled-out rounding


def _emit(ctx: Any, op: str, ins: list[Value], attrs: dict[str, Any] | None = None) -> Value:
    out = ctx.emit(op, ins, attrs, role="hybrid")[0]
    out.producer.meta[HYBRID] = True
    return out


def _round_away(ctx: Any, v: Value) -> Value:
    """round half away from zero: sign(v) · floor(|v| + 0.5)."""
    half = ctx.const(np.asarray(0.5, np.float32), "half")
    mag = _emit(ctx, "floor", [_emit(ctx, "add", [_emit(ctx, "abs", [v]), half])])
    return _emit(ctx, "mul", [_emit(ctx, "sign", [v]), mag])


def quantize_rows(ctx: Any, x: Value, asymmetric: bool, axes_list: list[int] | None = None) -> Value:
    """``x`` ([rows, depth], float32) as LiteRT's hybrid kernels see it: quantized to int8 per
    row and dequantized again (computed in float32). ``axes_list``: the axes one row spans
    (default the last; a convolution's row is a whole batch item, ``[1, 2, 3]``)."""
    f = np.float32
    ctx.rounding = True  # the check widens by the rounding spread (check.rounding_spread)
    axes = ctx.i64(axes_list or [-1], "row_axes")
    zero = ctx.const(np.asarray(0.0, f), "zero")

    def op(name: str, *ins: Value, **attrs: Any) -> Value:
        return _emit(ctx, name, list(ins), attrs or None)

    if asymmetric:
        rmin = op("min", op("reduce_min", x, axes, keepdims=1), zero)
        rmax = op("max", op("reduce_max", x, axes, keepdims=1), zero)
        span = op("sub", rmax, rmin)
        flat = op("equal", span, zero)
        scale = op("where", flat, ctx.const(np.asarray(1.0, f), "one"), op("div", span, ctx.const(np.asarray(255.0, f), "q255")))
        zp = op("clip", _round_away(ctx, op("sub", ctx.const(np.asarray(-128.0, f), "qmin"), op("div", rmin, scale))),
                ctx.const(np.asarray(-128.0, f), "lo"), ctx.const(np.asarray(127.0, f), "hi"))
        inv = op("reciprocal", scale)
        q = op("clip", _round_away(ctx, op("add", zp, op("mul", x, inv))),
               ctx.const(np.asarray(-128.0, f), "lo"), ctx.const(np.asarray(127.0, f), "hi"))
        return op("mul", op("sub", q, zp), scale)
    rng = op("reduce_max", op("abs", x), axes, keepdims=1)
    flat = op("equal", rng, zero)
    safe = op("where", flat, ctx.const(np.asarray(1.0, f), "one"), rng)
    q = op("clip", _round_away(ctx, op("mul", x, op("div", ctx.const(np.asarray(127.0, f), "q127"), safe))),
           ctx.const(np.asarray(-127.0, f), "lo"), ctx.const(np.asarray(127.0, f), "hi"))
    return op("mul", q, op("div", safe, ctx.const(np.asarray(127.0, f), "q127")))


def quantize_conv_input(ctx: Any, x: Value, w_index: int, pointwise: bool = False) -> Value:
    """A hybrid ``CONV_2D``/``DEPTHWISE_CONV_2D`` input (NCHW, as the IR conv reads it) as LiteRT's default interpreter
    quantizes it (ai-edge-litert 2.3, measured against ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``):

    * ``pointwise`` (a 1x1 ``CONV_2D`` with stride 1) runs on the XNNPACK delegate as a
      dynamically quantized fully connected op: asymmetric, per pixel (over C, axis 1);
    * every other hybrid convolution runs on the builtin kernels, per batch item over all of
      H, W and C: asymmetric when the weights are quantized per channel
      (``EvalHybridPerChannel``), symmetric when per tensor (``EvalHybrid``)."""
    if pointwise:
        return quantize_rows(ctx, x, True, [1])
    q = ctx.quant(w_index)
    per_channel = q is not None and len(q[0]) > 1
    return quantize_rows(ctx, x, per_channel, [1, 2, 3])


def is_hybrid(ctx: Any, x_index: int, w_index: int) -> bool:
    """A float input read against quantized integer weights (LiteRT's hybrid path)."""
    return (ctx.quant(w_index) is not None and ctx.quant(x_index) is None
            and ctx.np_dtype(x_index) == np.float32 and ctx.np_dtype(w_index).kind == "i")
