"""Core ML rules: linear quantization (quantize_linear, dequantize_linear, dynamic_quantize_linear).

MIL ``quantize`` / ``dequantize`` (iOS17) take int8/uint8 data, constant scales and zero
points, per tensor (scalars) or per axis (vectors). Runtime scales / zero points and 16-bit or
int32 data are composed from elementwise MIL ops instead (real_div, round, add, clip, cast;
exact while the integers fit fp32, i.e. up to 2^24). Dtype legalization turns the int8/uint8
values of the IR into int32 before lowering, so ``note_quant_dtypes`` records the quantized
dtype of each node first (``node.meta["coreml_qdtype"]``, from the target's ``prepare``); the
rule casts at the border.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.table.dtypes import norm_axis
from translator.ir.graph import Graph, Node
from translator.compile.render import literal

from .mil import const_of, lit, mil_dtype, static_shape
from .registry import Refusal, rule

if TYPE_CHECKING:
    from .codegen import Gen


#: the quantized dtypes MIL quantize/dequantize take
QDTYPES = ("uint8", "int8")
#: integer data the composed lowering takes, and its saturation range
INT_RANGE = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
             "int32": (-2**31, 2**31 - 1)}
#: what the division / product is computed in: the scale's dtype (ONNX), one MIL has
FDTYPES = ("float32", "float16")


def note_quant_dtypes(graph: Graph) -> None:
    """Before dtype legalization: the quantized dtype (quantize_linear's output,
    dequantize_linear's input) and the scale's dtype of each node, in ``node.meta``."""
    for node in graph.nodes:
        if node.op == "quantize_linear":
            node.meta["coreml_qdtype"] = node.outputs[0].type.dtype
        elif node.op == "dequantize_linear":
            node.meta["coreml_qdtype"] = node.inputs[0].type.dtype
        else:
            continue
        node.meta["coreml_scale_dtype"] = node.inputs[1].type.dtype


def _axis_in(a: int, rank: int) -> int | None:
    """``a`` in ``[0, rank)`` taken modulo the rank, as onnxruntime and the reference take it
    (ONNX's default axis 1 on a 1-D bias is its only axis: onnxruntime's QDQ bias, one scale
    per element); None for a rank-0 input."""
    return a % rank if rank > 0 else None


def quant_dtype(node: Node) -> str | None:
    """The quantized dtype: noted before legalization, else (a quantize/dequantize a
    decomposition wrote after it) the model dtype of its output / input, else the value's own."""
    if "coreml_qdtype" in node.meta:
        return node.meta["coreml_qdtype"]
    if node.op == "quantize_linear":
        return node.model_dtype()
    return (node.meta.get("source_in_dtypes") or [None])[0] or node.inputs[0].type.dtype  # a decomposition's step


def _quant_plan(node: Node) -> str | Refusal:
    """"native" (MIL quantize/dequantize: int8/uint8 data, constant scale and zero point, rank
    >= 1), "composed" (elementwise MIL ops: runtime scale / zero point, 16-bit or int32 data),
    or a Refusal."""
    q = quant_dtype(node)
    if q not in INT_RANGE:
        return Refusal("unsupported_dtype", f"{q} data: Core ML computes in int32/fp16/fp32 only")
    if node.meta.get("coreml_scale_dtype", node.inputs[1].type.dtype) not in FDTYPES:
        return Refusal("unsupported_dtype", "the scale must be float32 or float16 (the division / product is done in its dtype)")
    if int(node.attrs.get("block_size", 0) or 0):
        return Refusal("unsupported_attribute_value", "block_size: quantized per tensor or per axis here, not per block")
    if node.op == "quantize_linear" and int(node.attrs.get("precision", 0) or 0):
        return Refusal("unsupported_attribute_value", "precision: the division is done in the scale's dtype here")
    shape = node.inputs[0].type.shape  # symbolic dims are fine: the rank and the quantized axis matter
    if shape is None:
        return Refusal("dynamic_shape", f"{node.op} needs a known input rank")
    params = [v for v in node.inputs[1:3] if v is not None]
    for v in params:
        ps = static_shape(v)
        axis = _axis_in(int(node.attrs.get("axis", 1)), len(shape))
        if ps is None or len(ps) > 1 or (len(ps) == 1 and ps[0] != 1 and not (axis is not None and (
                ps[0] == shape[axis] or not isinstance(shape[axis], int)))):
            return Refusal("unsupported_attribute_value", "scale / zero point: a scalar or one value per element of axis")
    if q in QDTYPES and shape and all(v.is_const for v in params):
        return "native"
    return "composed"


def _quant_check(node: Node) -> Refusal | None:
    plan = _quant_plan(node)
    return plan if isinstance(plan, Refusal) else None


def _param(gen: Gen, node: Node, i: int, to: str) -> str | None:
    """Input ``i`` (scale / zero point) cast to ``to`` and shaped to broadcast along axis."""
    v = node.inputs[i] if i < len(node.inputs) else None
    if v is None:
        return None
    var = gen.var(v)
    if v.type.dtype != to:
        t, tn = gen.tmp(node, f"p{i}_{to}")
        gen.emit(f"{t} = mb.cast(x={var}, dtype={literal(mil_dtype(to))}, name={tn})")
        var = t
    r = node.inputs[0].type.rank
    if v.type.rank == 1 and r > 1:
        axis = _axis_in(int(gen.attr(node, "axis")), r)
        t, tn = gen.tmp(node, f"p{i}_axis")
        gen.emit(f"{t} = mb.reshape(x={var}, shape={lit([-1 if d == axis else 1 for d in range(r)])}, name={tn})")
        var = t
    return var


def _composed(gen: Gen, node: Node, q: str) -> None:
    """quantize: clip(round_half_even(x / scale) + zp, range of q) (division in the scale's
    dtype, the sum in fp32: integers stay exact); dequantize: (x - zp) * scale in fp32."""
    x, out = node.inputs[0], node.outputs[0]
    scale_dt = node.inputs[1].type.dtype

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    if node.op == "quantize_linear":
        xv = gen.var(x) if x.type.dtype == scale_dt else step("x", f"mb.cast(x={gen.var(x)}, dtype={literal(mil_dtype(scale_dt))}")
        acc = step("rounded", f"mb.round(x=" + step("divided", f"mb.real_div(x={xv}, y={_param(gen, node, 1, scale_dt)}"))
        if scale_dt != "float32":
            acc = step("rounded32", f"mb.cast(x={acc}, dtype='fp32'")
        zp = _param(gen, node, 2, "float32")
        if zp is not None:
            acc = step("shifted", f"mb.add(x={acc}, y={zp}")
        lo, hi = INT_RANGE[q]
        acc = step("saturated", f"mb.clip(x={acc}, alpha=np.float32({lit(float(lo))}), beta=np.float32({lit(float(hi))})")
    else:
        acc = step("x32", f"mb.cast(x={gen.var(x)}, dtype='fp32'")
        zp = _param(gen, node, 2, "float32")
        if zp is not None:
            acc = step("centered", f"mb.sub(x={acc}, y={zp}")
        acc = step("scaled", f"mb.mul(x={acc}, y={_param(gen, node, 1, 'float32')}")
    gen.emit(f"{gen.out(node)} = mb.cast(x={acc}, dtype={literal(mil_dtype(out.type.dtype))}, name={gen.name(node)})")


def _params(gen: Gen, node: Node, scale_dt: str, q: str) -> str:
    """MIL scale / zero_point / axis arguments (constants in the weights, in MIL's dtypes)."""
    x = node.inputs[0]
    scale = np.asarray(const_of(node.inputs[1])).astype(np.dtype(scale_dt))
    zp_v = node.inputs[2] if len(node.inputs) > 2 else None
    zp = None if zp_v is None else np.asarray(const_of(zp_v)).astype(np.dtype(q))
    if scale.size == 1 and (zp is None or zp.size == 1):  # one value (a [1] tensor too) is per tensor
        scale, zp = scale.reshape(()), None if zp is None else zp.reshape(())
    args = f"scale={gen.const(node, 'scale', scale)}"
    if zp is not None:
        args += f", zero_point={gen.const(node, 'zp', zp)}"
    if scale.ndim == 1:
        args += f", axis={lit(_axis_in(int(gen.attr(node, 'axis')), x.type.rank))}"
    return args


def _into_output(gen: Gen, node: Node, produced: str, call: str, key: str) -> None:
    """Emit ``call`` (without its ``name=``) as the node's output when it produces the output's
    dtype, else into a temporary cast to the (legalized) output dtype."""
    out = node.outputs[0]
    same = out.type.dtype == produced
    var, nm = (gen.out(node), gen.name(node)) if same else gen.tmp(node, key)
    gen.emit(f"{var} = {call}, name={nm})")
    if not same:
        gen.emit(f"{gen.out(node)} = mb.cast(x={var}, dtype={literal(mil_dtype(out.type.dtype))}, name={gen.name(node)})")


def _operand(gen: Gen, node: Node, q: str, to_scale: bool) -> tuple[str, str, str]:
    """(scale dtype, MIL scale/zero-point arguments, the data variable): the data cast to the
    scale's dtype (quantize) or to its quantized dtype ``q`` (dequantize) when it differs."""
    x = node.inputs[0]
    scale_dt = node.inputs[1].type.dtype
    args = _params(gen, node, scale_dt, q)
    xv = gen.var(x)
    want = mil_dtype(scale_dt) if to_scale else q
    if x.type.dtype != (scale_dt if to_scale else q):
        t, tn = gen.tmp(node, "x" if to_scale else "q")
        gen.emit(f"{t} = mb.cast(x={xv}, dtype={literal(want)}, name={tn})")
        xv = t
    return scale_dt, args, xv


@rule("quantize_linear", check=_quant_check, any_dtype=True)
def _quantize(gen: Gen, node: Node) -> None:
    """y = saturate(round_half_even(x / scale) + zero_point), divided in the scale's dtype;
    MIL's uint8/int8 result is cast to the legalized output dtype."""
    q = quant_dtype(node)
    if _quant_plan(node) == "composed":
        _composed(gen, node, q)
        return
    _, args, xv = _operand(gen, node, q, to_scale=True)
    _into_output(gen, node, q, f"mb.quantize(input={xv}, {args}, output_dtype={literal(q)}", "q")


@rule("dequantize_linear", check=_quant_check, any_dtype=True)
def _dequantize(gen: Gen, node: Node) -> None:
    """y = (x - zero_point) * scale in the scale's dtype; legalized int32 data is cast back to
    its int8/uint8 first (its values are in range: inputs are range-checked at the boundary)."""
    q = quant_dtype(node)
    if _quant_plan(node) == "composed":
        _composed(gen, node, q)
        return
    if node.inputs[0].is_const:  # a quantized weight: stored as its int8/uint8 values, dequantized at load
        _into_output(gen, node, node.inputs[1].type.dtype, _load_time(gen, node, q), "dq")
        return
    scale_dt, args, xv = _operand(gen, node, q, to_scale=False)
    _into_output(gen, node, scale_dt, f"mb.dequantize(input={xv}, {args}", "dq")


def _load_time(gen: Gen, node: Node, q: str) -> str:
    """``constexpr_affine_dequantize`` (iOS16+) of a constant: the package stores the 8-bit
    values (a quarter of the float weight), Core ML dequantizes them when it loads the model."""
    x = node.inputs[0]
    data = np.asarray(const_of(x)).astype(np.dtype(q))
    scale = np.asarray(const_of(node.inputs[1])).astype(np.dtype(node.inputs[1].type.dtype))
    zp_v = node.inputs[2] if len(node.inputs) > 2 else None
    zp = np.zeros(scale.shape, np.dtype(q)) if zp_v is None else np.asarray(const_of(zp_v)).astype(np.dtype(q))
    axis = 0
    if scale.size == 1 and zp.size == 1:
        scale, zp = scale.reshape(()), zp.reshape(())
    else:
        axis = _axis_in(int(gen.attr(node, "axis")), x.type.rank) or 0
        scale, zp = scale.reshape(-1), np.broadcast_to(zp.reshape(-1), scale.reshape(-1).shape).copy()
    return (f"mb.constexpr_affine_dequantize(quantized_data={gen.const(node, 'q', data)}, "
            f"zero_point={gen.const(node, 'zp', zp)}, scale={gen.const(node, 'scale', scale)}, axis={lit(axis)}")


@rule("dynamic_quantize_linear", check=lambda n: None if n.inputs[0].type.dtype == "float32" and n.inputs[0].type.rank
          else Refusal("unsupported_dtype", "dynamic_quantize_linear takes a float32 tensor of rank >= 1"))
def _dynamic_quantize(gen: Gen, node: Node) -> None:
    """lo = min(0, min(x)), hi = max(0, max(x)), scale = (hi - lo) / 255 (fp32),
    zp = clip(round_half_even(-lo / scale), 0, 255), y = clip(round_half_even(x / scale) + zp, 0, 255);
    an all-zero x (scale 0) divides by 1 instead: y = 0, zp = 0, as in ONNX."""
    x = node.inputs[0]
    xv, axes = gen.var(x), lit(list(range(x.type.rank)))

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    def f32(v: float) -> str:
        return f"np.float32({lit(float(v))})"

    lo = step("lo", f"mb.minimum(x=" + step("min", f"mb.reduce_min(x={xv}, axes={axes}, keep_dims=False") + f", y={f32(0)}")
    hi = step("hi", f"mb.maximum(x=" + step("max", f"mb.reduce_max(x={xv}, axes={axes}, keep_dims=False") + f", y={f32(0)}")
    outs = node.outputs
    scale_var, scale_name = (gen.out(node, 1), gen.name(node, 1)) if len(outs) > 1 else gen.tmp(node, "scale")
    rng = step("range", f"mb.sub(x={hi}, y={lo}")
    gen.emit(f"{scale_var} = mb.real_div(x={rng}, y={f32(255)}, name={scale_name})")
    zero = step("scale_zero", f"mb.equal(x={scale_var}, y={f32(0)}")
    safe = step("scale_safe", f"mb.select(cond={zero}, a={f32(1)}, b={scale_var}")
    neg_lo = step("neg_lo", f"mb.mul(x={lo}, y={f32(-1)}")
    zp = step("zp_f", "mb.clip(x=" + step("zp_round", "mb.round(x=" + step("zp_div", f"mb.real_div(x={neg_lo}, y={safe}")) +
              f", alpha={f32(0)}, beta={f32(255)}")
    y = step("y_round", "mb.round(x=" + step("y_div", f"mb.real_div(x={xv}, y={safe}"))
    y = step("y_f", "mb.clip(x=" + step("y_shift", f"mb.add(x={y}, y={zp}") + f", alpha={f32(0)}, beta={f32(255)}")
    for i, v in ((0, y), (2, zp)):
        if i < len(outs):
            gen.emit(f"{gen.out(node, i)} = mb.cast(x={v}, dtype={literal(mil_dtype(outs[i].type.dtype))}, "
                     f"name={gen.name(node, i)})")


__all__ = ["note_quant_dtypes", "QDTYPES"]


def integer_plan(node: Node, ctx: object) -> tuple[str, str]:
    """What the package stores for compute node ``node`` (``report``; structural: Core ML's
    kernels are not inspectable off macOS)."""
    from translator.compile.quantized import quantized_operands

    if quantized_operands(node).weight is not None:
        return "int8 weights", "constexpr_affine_dequantize: the weight stored as 8 bits, dequantized at load"
    return "float", "no 8-bit weight"
