"""PyTorch rules: quantization, integer matrix products and convolutions."""
from __future__ import annotations

import numpy as np

from translator.table.dtypes import norm_axis
from translator.compile.render import literal

from .node import NodeEmit, onnx_float
from .nn import conv_extents, explicit_pads, ints_attr, pads_code, spatial, torch_kwargs
from .registry import rule


def _per_axis(e: NodeEmit, i: int, like: int) -> str:
    """A scale / zero point shaped to broadcast against input ``like``: scalar (per tensor),
    vector along ``axis`` (per axis), or blocks of ``block_size`` along ``axis``."""
    p = e.x(i)
    shape = e.shape(i)
    rank = e.need_rank(like)
    block = int(e.attr("block_size") or 0)
    if shape is None:
        raise e.refuse("dynamic_shape", "scale / zero point need a static shape")
    if len(shape) == 0 or (len(shape) == 1 and shape[0] == 1 and not block):
        return f"{p}.reshape(())" if len(shape) else p
    a = norm_axis(int(e.attr("axis")), rank)  # per axis or per block: the axis is in range
    if block:
        return f"{p}.repeat_interleave({block}, dim={a}).narrow({a}, 0, {e.x(like)}.shape[{a}])"
    if len(shape) == 1:
        return f"{p}.reshape({literal([-1 if d == a else 1 for d in range(rank)])})"
    return p


def _operand(e: NodeEmit, i: int, like: int, calc: str) -> str:
    """A scale or zero point as an operand computed in ``calc``: a one-element constant as a
    Python number (the float32 value exactly; torch computes in the tensor's dtype either way),
    else the tensor broadcast against input ``like`` (``_per_axis``) and converted."""
    c = e.const(i)
    if c is not None and c.size == 1 and not int(e.attr("block_size") or 0) and c.dtype.kind in "iuf":
        return literal(float(c.reshape(-1)[0]))
    return f"{_per_axis(e, i, like)}.to({calc})"


def _unit(e: NodeEmit, i: int) -> bool:
    """Whether input ``i`` is the constant scale 1 (``quantized.integer_domain``'s integers)."""
    c = e.const(i)
    return c is not None and c.size == 1 and float(c.reshape(-1)[0]) == 1.0


@rule("quantize_linear")
def quantize_linear(e: NodeEmit) -> str:
    """saturate(round_half_even(x / y_scale) + y_zero_point), the division in y_scale's dtype."""
    out = e.out_dtype()
    calc = e.dtype(1)
    prec = int(e.attr("precision") or 0)
    if prec:
        calc = onnx_float(prec, calc)
    q = f"torch.round({e.x(0)}.to({calc}) / {_operand(e, 1, 0, calc)})"
    if _unit(e, 1) and not prec:
        q = f"torch.round({e.x(0)}.to({calc}))"
    if e.has(2):
        q = f"{q} + {_operand(e, 2, 0, calc)}"
    lo, hi = e.out_range()
    return f"torch.clamp({q}, {lo}, {hi}).to({out})"


@rule("dequantize_linear")
def dequantize_linear(e: NodeEmit) -> str:
    """(x - x_zero_point) * x_scale in the output dtype (computed in float32, or float64 for
    32-bit integers)."""
    out = e.out_dtype()
    calc = "torch.float64" if e.dtype_id(0) in ("int32", "uint32", "int64") else "torch.float32"
    v = f"{e.x(0)}.to({calc})"
    if e.has(2):
        v = f"({v} - {_operand(e, 2, 0, calc)})"
    if _unit(e, 1):
        return f"{v}.to({out})"
    return f"({v} * {_operand(e, 1, 0, calc)}).to({out})"


@rule("dynamic_quantize_linear")
def dynamic_quantize_linear(e: NodeEmit) -> list[str]:
    """uint8 quantization over [min(0, x), max(0, x)]: scale = range / 255, zp = round(-lo / scale)."""
    x = e.x(0)
    y, s, zp = e.out(0), e.out(1), e.out(2)
    lo, hi, safe = e.tmp("lo"), e.tmp("hi"), e.tmp("scale_safe")
    return [f"{lo} = torch.clamp_max({x}.min(), 0.0)",
            f"{hi} = torch.clamp_min({x}.max(), 0.0)",
            f"{s} = (({hi} - {lo}) / 255.0).to(torch.float32)",
            f"{safe} = torch.where({s} == 0, torch.ones_like({s}), {s})",
            f"{zp} = torch.clamp(torch.round(-{lo} / {safe}), 0, 255)",
            f"{y} = torch.clamp(torch.round({x} / {safe}) + {zp}, 0, 255).to(torch.uint8)",
            f"{zp} = {zp}.to(torch.uint8)"]


def _row_zp(e: NodeEmit, i: int, of: int) -> str:
    """A per-row zero point (M,) of a matrix as (M, 1); scalars stay scalars."""
    if not e.has(i):
        return "0"
    zp = f"{e.x(i)}.long()"
    shape = e.shape(i)
    if shape is not None and len(shape) == 1 and shape[0] > 1 and (e.rank(of) or 0) >= 2:
        return f"{zp}.reshape(-1, 1)"
    return zp


def int_mm_operands(node) -> bool:  # noqa: ANN001 - an IR Node
    """Whether ``matmul_integer`` ``node`` is ``torch._int_mm`` in the module (``matmul_integer``,
    ``integer_plan``): an 8-bit activation, a constant 2-D 8-bit matrix, per-tensor zero points
    (the matrix's a constant)."""
    ins = list(node.inputs) + [None] * (4 - len(node.inputs))
    a, w, za, zw = ins[:4]
    if a is None or a.type.dtype not in ("int8", "uint8") or w is None or not w.is_const:
        return False
    wc = np.asarray(w.const)
    zshape = za.type.shape if za is not None else ()
    return wc.dtype in (np.int8, np.uint8) and wc.ndim == 2 and (zw is None or zw.is_const and np.asarray(zw.const).size == 1) \
        and zshape is not None and (len(zshape) == 0 or tuple(zshape) == (1,))


def _int8_product(e: NodeEmit) -> list[str] | None:
    """``matmul_integer`` as ``torch._int_mm`` where it can be (see ``matmul_integer``)."""
    if not int_mm_operands(e.node):
        return None
    w = e.const(1)
    zw = e.const(3) if e.has(3) else np.zeros((), np.int64)
    k, n = w.shape
    base = f"{e.v(1).name}_int8"
    shifted = w.dtype == np.uint8
    w8 = f"({e.x(1)}.to(torch.int16) - 128).to(torch.int8)" if shifted else e.x(1)  # W - 128 for a u8 matrix
    shift = 128 if e.dtype_id(0) == "uint8" else 0
    ca = f"({shift} - {e.x(2)}.to(torch.int32).reshape(()))" if e.has(2) else str(shift)  # A - z_a = rows + ca
    # a u8 matrix moved onto int8 and the column sums, computed once when the weights load (``_prepare``)
    exprs = ([(w8, [k, n], "int8")] if shifted else []) + ([(f"{w8}.to(torch.int32).sum(0)", [n], "int32")] if ca != "0" else [])
    prepared = e.cg.prepared_tensors(f"({', '.join(x for x, _, _ in exprs)},)", base,
                                     [(sh, dt) for _, sh, dt in exprs]) if exprs else []
    if shifted:
        w8 = prepared[0]
    sums = prepared[-1] if ca != "0" else ""
    cw = (128 if w.dtype == np.uint8 else 0) - int(zw.reshape(-1)[0])  # W - z_w = w8 + cw
    rows, out = e.tmp("rows"), e.out()
    lines = [f"{rows} = ({e.x(0)} ^ 128).view(torch.int8)" if e.dtype_id(0) == "uint8" else f"{rows} = {e.x(0)}",
             f"{out} = torch._int_mm({rows}.reshape(-1, {k}), {w8}).reshape({rows}.shape[:-1] + ({n},))"]
    if ca != "0":
        lines.append(f"{out} = {out} + {ca} * {sums}")
    if cw:
        lines.append(f"{out} = {out} + {cw} * ({rows}.sum(-1, keepdim=True, dtype=torch.int32) + {k} * {ca})")
    return lines


@rule("matmul_integer")
def matmul_integer(e: NodeEmit) -> "str | list[str]":
    """8-bit activations times a constant 8-bit matrix (zero points per tensor):
    ``torch._int_mm`` (oneDNN's int8 GEMM, int32 results) of ``a = A - o_a`` and ``w = W - o_w``,
    both int8 (a u8 activation by flipping its top bit: ``u ^ 128`` read as int8 is ``u - 128``;
    a u8 matrix shifted once when the weights load), and the zero points given back in int32:
    ``(A - z_a)(W - z_w) = a·w + c_a·colsum(w) + c_w·(rowsum(a) + K·c_a)`` with
    ``c = o - z``. Anything else as the int64 product."""
    fast = _int8_product(e)
    if fast is not None:
        return fast
    a = f"({e.x(0)}.long() - {_row_zp(e, 2, 0)})"
    b = f"({e.x(1)}.long() - {e.x(3)}.long())" if e.has(3) else f"{e.x(1)}.long()"
    return f"torch.matmul({a}, {b}).to(torch.int32)"


@rule("qlinear_matmul")
def qlinear_matmul(e: NodeEmit) -> list[str]:
    """saturate(round(((a - a_zp) * a_scale) @ ((b - b_zp) * b_scale) / y_scale) + y_zp) in float64."""
    def row(i: int) -> str:
        shape = e.shape(i)
        v = f"{e.x(i)}.double()"
        return f"{v}.reshape(-1, 1)" if shape is not None and len(shape) == 1 and shape[0] > 1 else v

    y = e.out()
    out = e.dtype(7)
    a = f"(({e.x(0)}.double() - {row(2)}) * {row(1)})"
    b = f"(({e.x(3)}.double() - {e.x(5)}.double()) * {e.x(4)}.double())"
    return [f"{y} = torch.round(torch.matmul({a}, {b}) / {e.x(6)}.double()) + {e.x(7)}.double()",
            f"{y} = torch.clamp({y}, torch.iinfo({out}).min, torch.iinfo({out}).max).to({out})"]


# ----------------------------------------------------------------------------- losses


# ----------------------------------------------------------------------------- signal


# ----------------------------------------------------------------------------- dropout


def _zp(e: NodeEmit, i: int, nd_w: int | None = None) -> str:
    """A zero point as int64, per output channel shaped for the weight when it is a vector."""
    if not e.has(i):
        return "0"
    zp = f"{e.x(i)}.long()"
    shape = e.shape(i)
    if nd_w is not None and shape is not None and len(shape) == 1 and shape[0] > 1:
        return f"{zp}.reshape({literal([-1] + [1] * (nd_w - 1))})"
    return f"{zp}.reshape(())" if shape is not None and len(shape) <= 1 else zp


def _int_conv(e: NodeEmit, xi: int, wi: int, xzp: int, wzp: int) -> tuple[str, int]:
    """The integer convolution (x - x_zp) * (w - w_zp) computed exactly in float64."""
    nd = e.need_rank(wi) - 2
    spatial(e, nd)
    strides = ints_attr(e, "strides", nd, 1)
    dil = ints_attr(e, "dilations", nd, 1)
    begins, ends = explicit_pads(e, nd, conv_extents(e, wi, nd, dil), strides)
    xs = f"({e.x(xi)}.long() - {_zp(e, xzp)}).double()"
    ws = f"({e.x(wi)}.long() - {_zp(e, wzp, nd + 2)}).double()"
    if begins != ends or any(begins):
        xs = f"F.pad({xs}, {pads_code(begins, ends)})"
    kw = {"stride": strides, "dilation": dil, "groups": int(e.attr("group"))}
    return f"F.conv{nd}d({xs}, {ws}{torch_kwargs(**kw)})", nd


@rule("conv_integer")
def conv_integer(e: NodeEmit) -> str:
    code, _ = _int_conv(e, 0, 1, 2, 3)
    return f"{code}.to(torch.int32)"


@rule("qlinear_conv")
def qlinear_conv(e: NodeEmit) -> list[str]:
    """saturate(round(acc * x_scale * w_scale / y_scale) + y_zp), acc the integer convolution."""
    acc, nd = _int_conv(e, 0, 3, 2, 5)
    y = e.out()
    lines = [f"{y} = {acc}"]
    if e.has(8):
        lines.append(f"{y} = {y} + {e.x(8)}.double().reshape({literal([1, -1] + [1] * nd)})")
    ws = f"{e.x(4)}.double().reshape(-1)"
    ws = f"({ws}.reshape({literal([1, -1] + [1] * nd)}) if {e.x(4)}.numel() > 1 else {ws}[0])"
    out = e.dtype(7)
    lines.append(f"{y} = torch.round({y} * ({e.x(1)}.double() * {ws}) / {e.x(6)}.double()) + {e.x(7)}.double()")
    lines.append(f"{y} = torch.clamp({y}, torch.iinfo({out}).min, torch.iinfo({out}).max).to({out})")
    return lines


def integer_plan(node, ctx) -> tuple[str, str]:
    """What the module stores for compute node ``node`` (``report``)."""
    from translator.compile.quantized import quantized_operands

    if node.op == "matmul_integer" and int_mm_operands(node):
        return "int8 weights", "stored as int8; int8 x int8 -> int32 product (torch._int_mm, oneDNN's int8 GEMM)"
    if quantized_operands(node).weight is not None:
        return "int8 weights", "stored as int8, dequantized once at load; float kernel"
    return "float", "no 8-bit weight"
