"""OpenVINO rules of ONNX quantization: (De)QuantizeLinear (per tensor, per axis,
blocked), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.

Quantized values are plain integer tensors; the arithmetic is float32 (exact for the
integer products involved) with ``round`` half to even and a clamp to the output type.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from translator.compile.quantized import activation_pair
from translator.ir.graph import Node, Value

from .helpers import Refusal, all_axes, attr, i64, norm_axis
from .nn import bias, convolve, static_w
from .registry import rule

if TYPE_CHECKING:
    from .codegen import Gen

#: the saturation range of each integer output type
QRANGE = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
          "uint4": (0, 15), "int4": (-8, 7), "int32": (-2147483648, 2147483647)}


def _f32(g: "Gen", x: str) -> str:
    return g.let(f"ops.convert({x}, ov.Type.f32)")


def _along(g: "Gen", v: str, i: int, axis: int, rank: int | None, block: int = 0) -> str:
    """Input ``i`` (a scale or zero point) made to broadcast against a rank-``rank`` tensor.

    Scalars pass; a 1-D tensor lies along ``axis``; a blocked one (same rank as x, the axis
    divided in blocks of ``block``) is repeated ``block`` times along the axis and cut to
    x's size (input 0's static shape).
    """
    t = ((g.v(i).type.shape) if g.v(i) is not None else None) or ()
    if rank is None or len(t) == 0 or t == (1,) and not block:
        return v
    axis = norm_axis(axis, rank)
    if not block:
        shape = [1] * rank
        shape[axis] = -1
        return g.let(f"ops.reshape({v}, {i64(g, shape)}, False)")
    dims = [int(d) for d in t]
    size = int((g.t(0).shape or ())[axis])
    tiled = dims[:axis + 1] + [block] + dims[axis + 1:]
    merged = dims[:axis] + [dims[axis] * block] + dims[axis + 1:]
    rep = g.let(f"ops.reshape(ops.broadcast(ops.unsqueeze({v}, {i64(g, [axis + 1])}), {i64(g, tiled)}), "
                f"{i64(g, merged)}, False)")
    return g.let(f"ops.slice({rep}, {i64(g, [0])}, {i64(g, [size])}, {i64(g, [1])}, {i64(g, [axis])})")


def _quant_check(node: Node) -> Refusal | None:
    if int(attr(node, "block_size", 0)):
        x = node.inputs[0]
        if x is None or not x.type.is_static or not node.inputs[1].type.is_static:
            return Refusal("dynamic_shape", "blocked quantization needs static shapes")
    return None


def prepare(model: "Any", ctx: "Any") -> None:
    """onnxruntime's dynamic quantization of a MatMul (``DynamicQuantizeLinear → MatMulInteger``,
    which OpenVINO has no kernel for: the emulation ran a float matmul between rounding ops) is
    read as the matmul of an int8 weight (``quantized.dynamic_model_as_weight_only``; a
    dynamic-range ``.tflite``'s hybrid kernels likewise): OpenVINO's compressed-weight pattern,
    whose FullyConnected keeps the weights int8 and decompresses them in the kernel (runtime
    precision i8); ``DynamicQuantizeLSTM`` as one LSTMSequence over its int8 weights dequantized.
    The activation is no longer rounded to 8 bits: the check holds the output to twice the
    source's own rounding, and ``convert`` writes the exact emulation (``float_quantization``)
    when it strays further."""
    from translator.compile.quantized import dynamic_model_as_weight_only

    dynamic_model_as_weight_only(model, ctx)


@rule("dequantize_linear", check=_quant_check)
def _dequantize(g: "Gen", node: Node) -> None:
    # y = (x - zero_point) * scale, in the scale's type
    pair = None if g.em.options.get("float_quantization") else activation_pair(node)
    if pair is not None and _convolution_sum(pair.x):
        pair = None
    if pair is not None:  # an activation's quantize-dequantize pair: one FakeQuantize, which the CPU
        # plugin's low-precision transformations run as integer kernels (with the int8 weights);
        # with float_quantization (convert's fallback when they stray past the check), the pair's
        # arithmetic as written
        g.em.features.add("fake_quant")
        low, high = g.const(np.float32(pair.low), "float32"), g.const(np.float32(pair.high), "float32")
        fq = f"ops.fake_quantize({g.var_of(pair.x)}, {low}, {high}, {low}, {high}, {pair.levels})"
        for kind, arg in pair.moves:
            fq = f"ops.reshape({fq}, {i64(g, list(arg))}, False)" if kind == "reshape" \
                else f"ops.transpose({fq}, {i64(g, list(arg))})"
        g.out(0, fq)
        return
    axis, r, block = int(g.a("axis")), g.t(0).rank, int(g.a("block_size", 0))
    out_t = g.ty(g.out_dtype(0))
    x = g.let(f"ops.convert({g.x(0)}, {out_t})")
    zv = g.v(2) if g.x(2) is not None else None
    if zv is not None and not (zv.is_const and not np.asarray(zv.const).any()):  # a zero point of 0 subtracts nothing
        zp = _const_along(g, 2, axis, r, block, g.out_dtype(0)) or \
            _along(g, g.let(f"ops.convert({g.x(2)}, {out_t})"), 2, axis, r, block)
        x = g.let(f"ops.subtract({x}, {zp})")
    scale = _const_along(g, 1, axis, r, block, g.out_dtype(0)) or \
        f"ops.convert({_along(g, g.x(1), 1, axis, r, block)}, {out_t})"
    g.out(0, f"ops.multiply({x}, {scale})")


#: ops whose output OpenVINO's CPU plugin fuses a following sum into (its post-ops)
_SUMMED_INTO = ("conv", "qlinear_conv", "conv_integer")


def _convolution_sum(x: Value) -> bool:
    """Whether ``x`` (a value quantized by an activation pair) is the sum of a requantized
    convolution output and another quantized value (a residual connection). The CPU plugin
    folds ``Convolution → FakeQuantize → Add → FakeQuantize`` into the convolution's
    post-ops, where the sum's requantization rounds otherwise than onnxruntime's QLinearAdd: a
    ResNet's next convolution was a step off on 17 % of its values. Written as the explicit
    quantization (``Divide``, ``Round`` half to even, ``Clamp``, ``Convert`` to u8) and its
    dequantization, the sum stays a node of its own and the convolutions stay u8/i8. Only for
    a u8 grid (onnxruntime's static quantizer's activations): with an i8 one, the CPU plugin of
    OpenVINO 2026.4 finds no implementation for the explicit form under its default bf16
    inference precision ("No suitable implementations"), and the FakeQuantize stays."""
    p = x.producer
    if p is None or p.op != "add":
        return False
    if not any(u.op == "quantize_linear" and u.model_dtype() == "uint8"
               for u, _ in x.uses):
        return False
    for v in p.inputs:
        dq = v.producer if v is not None else None
        if dq is None or dq.op != "dequantize_linear" or dq.inputs[0] is None:
            continue
        q = dq.inputs[0].producer
        if q is not None and q.op == "quantize_linear" and q.inputs[0] is not None:
            q = q.inputs[0].producer
        if q is not None and q.op in _SUMMED_INTO:
            return True
    return False


def _const_along(g: "Gen", i: int, axis: int, rank: int | None, block: int, dtype: str) -> str | None:
    """Input ``i`` (a constant scale or zero point) as one constant of ``dtype`` already shaped
    to broadcast along ``axis`` (``_along`` builds the reshape in the graph): a quantized weight
    is then OpenVINO's compressed-weight pattern, Constant(i8) → Convert → [Subtract] → Multiply
    by constants, with no Convert/Reshape of its parameters in the IR. None when not constant
    (or blocked)."""
    v = g.v(i)
    if v is None or not v.is_const or block or rank is None:
        return None
    arr = np.asarray(v.const)
    if arr.ndim and arr.size > 1:
        shape = [1] * rank
        shape[norm_axis(axis, rank)] = -1
        arr = arr.reshape(shape)
    return g.const(arr, dtype)


def quantize(g: "Gen", y: str, scale: str, zp: str | None, out: str) -> str:
    """saturate(round_half_even(y / scale) + zp) as ``out`` (y, scale, zp already float32)."""
    lo, hi = QRANGE[out]
    q = g.let(f"ops.round(ops.divide({y}, {scale}), 'half_to_even')")
    if zp is not None:
        q = g.let(f"ops.add({q}, {zp})")
    return f"ops.convert(ops.clamp({q}, {float(lo)}, {float(hi)}), {g.ty(out)})"


@rule("quantize_linear",
          check=lambda n: _quant_check(n) or (None if n.outputs[0].type.dtype in QRANGE
                                                else f"quantizing to {n.outputs[0].type.dtype}"))
def _quantize(g: "Gen", node: Node) -> None:
    axis, r, block = int(g.a("axis")), g.t(0).rank, int(g.a("block_size", 0))
    scale = _along(g, _f32(g, g.x(1)), 1, axis, r, block)
    zp = _along(g, _f32(g, g.x(2)), 2, axis, r, block) if g.x(2) is not None else None
    g.out(0, quantize(g, _f32(g, g.x(0)), scale, zp, g.out_dtype(0)))


@rule("dynamic_quantize_linear")
def _dynamic_quantize(g: "Gen", node: Node) -> None:
    # scale = (max(0, max x) - min(0, min x)) / 255, zero point = saturate(round(-min / scale)), uint8
    x = g.x(0)
    axes = all_axes(g, 0)
    zero = g.const(0.0, "float32")
    lo = g.let(f"ops.minimum(ops.reduce_min({x}, {axes}, False), {zero})")
    hi = g.let(f"ops.maximum(ops.reduce_max({x}, {axes}, False), {zero})")
    scale = g.let(f"ops.divide(ops.subtract({hi}, {lo}), {g.const(255.0, 'float32')})")
    safe = g.let(f"ops.select(ops.equal({scale}, {zero}), {g.const(1.0, 'float32')}, {scale})")
    zp = g.let(f"ops.clamp(ops.round(ops.divide(ops.negative({lo}), {safe}), 'half_to_even'), 0.0, 255.0)")
    g.out(0, quantize(g, x, safe, zp, "uint8"))
    g.bind(1, scale)
    g.out(2, f"ops.convert({zp}, ov.Type.u8)")


def _centered(g: "Gen", x: int, zp: int, axis: int) -> str:
    """Input ``x`` minus zero point ``zp`` (1-D zero points along ``axis`` of x), as float32."""
    v = _f32(g, g.x(x))
    if g.x(zp) is None:
        return v
    return g.let(f"ops.subtract({v}, {_along(g, _f32(g, g.x(zp)), zp, axis, g.t(x).rank)})")


@rule("matmul_integer")
def _matmul_integer(g: "Gen", node: Node) -> None:
    # (A - a_zero_point) @ (B - b_zero_point) in int32; a per-row zero point lies along A's rows
    a = _centered(g, 0, 2, -2)
    b = _centered(g, 1, 3, -1)
    g.out(0, f"ops.convert(ops.matmul({a}, {b}, False, False), ov.Type.i32)")


@rule("conv_integer", check=static_w)
def _conv_integer(g: "Gen", node: Node) -> None:
    # conv(x - x_zero_point, w - w_zero_point) in int32; a per-channel w zero point lies along axis 0
    x = _centered(g, 0, 2, 1)
    w = _centered(g, 1, 3, 0)
    g.out(0, f"ops.convert({convolve(g, x, w)}, ov.Type.i32)")


@rule("qlinear_matmul", check=lambda n: None if n.outputs[0].type.dtype in QRANGE else Refusal("unsupported_dtype", "output type"))
def _qlinear_matmul(g: "Gen", node: Node) -> None:
    # y = quantize((a - a_zp) a_scale @ (b - b_zp) b_scale, y_scale, y_zp); a per row, b per column
    ra, rb = g.t(0).rank, g.t(3).rank
    a = g.let(f"ops.multiply({_centered(g, 0, 2, -2)}, {_along(g, _f32(g, g.x(1)), 1, -2, ra)})")
    b = g.let(f"ops.multiply({_centered(g, 3, 5, -1)}, {_along(g, _f32(g, g.x(4)), 4, -1, rb)})")
    y = g.let(f"ops.matmul({a}, {b}, False, False)")
    g.out(0, quantize(g, y, _f32(g, g.x(6)), _f32(g, g.x(7)), g.out_dtype(0)))


@rule("qlinear_conv", check=lambda n: static_w(n) or (None if n.outputs[0].type.dtype in QRANGE else Refusal("unsupported_dtype", "output type")))
def _qlinear_conv(g: "Gen", node: Node) -> None:
    # y = quantize(conv((x - x_zp) x_scale, (w - w_zp) w_scale) + B x_scale w_scale, y_scale, y_zp)
    x = g.let(f"ops.multiply({_centered(g, 0, 2, 1)}, {_f32(g, g.x(1))})")
    wscale = _along(g, _f32(g, g.x(4)), 4, 0, g.t(3).rank)
    w = g.let(f"ops.multiply({_centered(g, 3, 5, 0)}, {wscale})")
    y = convolve(g, x, w, 3)
    n = g.rank(3) - 2
    if g.x(8) is not None:
        b = g.let(f"ops.multiply(ops.multiply({_f32(g, g.x(8))}, {_f32(g, g.x(1))}), "
                  f"ops.reshape({_f32(g, g.x(4))}, {i64(g, [-1])}, False))")
        y = bias(g, y, b, n)
    g.out(0, quantize(g, y, _f32(g, g.x(6)), _f32(g, g.x(7)), g.out_dtype(0)))


def integer_plan(node: Node, ctx: object) -> tuple[str, str]:
    """How the CPU plugin will run compute node ``node`` (``report``): u8/i8 where the input is
    a FakeQuantize (a per-tensor 8-bit pair) and the weight an 8-bit constant."""
    from translator.compile.quantized import quantized_operands

    if node.op == "qlinear_conv":
        return "integer", "QLinearConv as FakeQuantize and int8 weight: the CPU plugin runs it in u8/i8"
    if node.op in ("conv_integer", "matmul_integer", "matmul_integer_to_float"):
        return "int8 weights", ("dynamic quantization: read as the matmul of an int8 weight, which the CPU "
                                "plugin decompresses in its FullyConnected kernel; the product in float")
    q = quantized_operands(node)
    if q.activation is not None and q.weight is not None:
        return "integer", ("FakeQuantize" if q.activation_pair else "8-bit dequantized") + \
            " input and int8 weight: the low-precision transformations run it in u8/i8"
    if q.weight is not None:
        return "int8 weights", "float kernel over the int8 weight (the input is not a per-tensor 8-bit pair)"
    return "float", "no 8-bit weight"
