"""PyTorch lowerings: elementwise ops whose torch call depends on a dtype or attribute,
variadic ops, casts and constants, reductions."""
from __future__ import annotations

import numpy as np

from .pytorch_ops import NodeEmit, axis, check, literal, lowering

# ----------------------------------------------------------------------------- values
@lowering("identity")
def identity(e: NodeEmit) -> str:
    v = e.v(0)
    if v is not None and v.type.kind == "sequence":
        return f"list({e.x(0)})"
    if v is not None and v.type.kind == "optional":
        return e.x(0)
    return f"torch.clone({e.x(0)})"


def _const_array(e: NodeEmit) -> np.ndarray:
    a = e.node.attrs
    if "value" in a:
        return np.asarray(a["value"])
    if "value_float" in a:
        return np.asarray(a["value_float"], dtype=np.float32)
    if "value_floats" in a:
        return np.asarray(a["value_floats"], dtype=np.float32)
    if "value_int" in a:
        return np.asarray(a["value_int"], dtype=np.int64)
    if "value_ints" in a:
        return np.asarray(a["value_ints"], dtype=np.int64)
    raise e.refuse("unsupported_attribute_value", f"constant with attributes {sorted(a)} (strings, sparse)")


@lowering("constant")
def constant(e: NodeEmit) -> str:
    """A constant node: its value becomes a buffer (or an inline literal when tiny)."""
    from translator.dtypes import dtype_id
    from translator.ir import Value, TensorType

    arr = _const_array(e)
    if arr.dtype.kind in "OSU":
        raise e.refuse("unsupported_dtype", "string constants")
    holder = Value(e.node.outputs[0].name, TensorType(dtype_id(arr.dtype), arr.shape), const=arr)
    return e.cg.ref(holder)


@lowering("constant_of_shape")
def constant_of_shape(e: NodeEmit) -> str:
    value = e.attr("value")
    fill = 0.0 if value is None else np.asarray(value).reshape(-1)[0].item()
    return f"torch.full({e.ints_code(0)}, {literal(fill)}, dtype={e.out_dtype()})"


# ----------------------------------------------------------------------------- arithmetic
@lowering("div")
def div(e: NodeEmit) -> str:
    """Integer division truncates toward zero (C semantics), floats divide."""
    if e.is_float(0):
        return f"torch.div({e.x(0)}, {e.x(1)})"
    return f"torch.div({e.x(0)}, {e.x(1)}, rounding_mode='trunc')"


@lowering("pow")
def pow_(e: NodeEmit) -> str:
    """x ** y in the dtype of x; an integer base with a float exponent truncates."""
    base, expo = e.x(0), e.x(1)
    if e.dtype_id(0) == e.dtype_id(1):
        return f"torch.pow({base}, {expo})"
    if e.is_float(0):
        return f"torch.pow({base}, {expo}).to({e.dtype(0)})"
    if e.is_float(1):
        return f"torch.trunc(torch.pow({base}.double(), {expo}.double())).to({e.dtype(0)})"
    return f"torch.pow({base}.long(), {expo}.long()).to({e.dtype(0)})"


@lowering("clip")
def clip(e: NodeEmit) -> str:
    lo = e.x(1) if e.has(1) else None
    hi = e.x(2) if e.has(2) else None
    if lo is None and hi is None:
        return f"torch.clone({e.x(0)})"
    if lo is not None and hi is not None:
        return f"torch.clamp({e.x(0)}, {lo}, {hi})"
    return f"torch.clamp_min({e.x(0)}, {lo})" if lo is not None else f"torch.clamp_max({e.x(0)}, {hi})"


@lowering("threshold")
def threshold(e: NodeEmit) -> str:
    """max(x, min_value) in x's dtype (an integer x takes the truncated bound)."""
    v = float(e.attr("min_value"))
    return f"torch.clamp_min({e.x(0)}, {literal(v if e.is_float(0) else int(v))})"


@lowering("is_inf")
def is_inf(e: NodeEmit) -> str:
    neg, pos = bool(e.attr("detect_negative")), bool(e.attr("detect_positive"))
    x = e.x(0)
    if neg and pos:
        return f"torch.isinf({x})"
    if pos:
        return f"torch.isposinf({x})"
    if neg:
        return f"torch.isneginf({x})"
    return f"torch.zeros_like({x}, dtype=torch.bool)"


@lowering("bit_count")
def bit_count(e: NodeEmit) -> str:
    """Set bits of the two's complement representation: sum of (x >> i) & 1 (arithmetic
    shifts keep the low bits of negative numbers)."""
    x = e.x(0)
    if e.dtype_id(0) == "bool":
        return f"torch.clone({x})"
    bits = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64}[e.dtype_id(0) or ""]
    return f"torch.stack([({x} >> i) & 1 for i in range({bits})]).sum(0).to({e.dtype(0)})"


def _fold(fn: str, xs: list[str]) -> str:
    out = xs[0]
    for x in xs[1:]:
        out = f"{fn}({out}, {x})"
    return out


@lowering("max")
def max_(e: NodeEmit) -> str:
    xs = e.xs()
    return _fold("torch.maximum", xs) if len(xs) > 1 else f"torch.clone({xs[0]})"


@lowering("min")
def min_(e: NodeEmit) -> str:
    xs = e.xs()
    return _fold("torch.minimum", xs) if len(xs) > 1 else f"torch.clone({xs[0]})"


@lowering("sum")
def sum_(e: NodeEmit) -> str:
    xs = e.xs()
    return " + ".join(xs) if len(xs) > 1 else f"torch.clone({xs[0]})"


@lowering("mean")
def mean(e: NodeEmit) -> str:
    xs = e.xs()
    return f"({' + '.join(xs)}) / {len(xs)}" if len(xs) > 1 else f"torch.clone({xs[0]})"


@lowering("selu")
def selu(e: NodeEmit) -> str:
    alpha, gamma = float(e.attr("alpha")), float(e.attr("gamma"))
    x = e.x(0)
    if abs(alpha - 1.6732632423543772) < 1e-6 and abs(gamma - 1.0507009873554805) < 1e-6:
        return f"F.selu({x})"
    return f"{literal(gamma)} * torch.where({x} > 0, {x}, {literal(alpha)} * torch.expm1({x}))"


@lowering("swish")
def swish(e: NodeEmit) -> str:
    alpha = float(e.attr("alpha"))
    if alpha == 1.0:
        return f"F.silu({e.x(0)})"
    return f"{e.x(0)} * torch.sigmoid({literal(alpha)} * {e.x(0)})"


@lowering("shrink")
def shrink(e: NodeEmit) -> str:
    """x - bias where x > lambd, x + bias where x < -lambd, else 0 (in x's dtype)."""
    x, bias, lambd = e.x(0), float(e.attr("bias")), float(e.attr("lambd"))
    zero = f"torch.zeros_like({x})"
    if e.is_float(0):
        return f"torch.where({x} > {literal(lambd)}, {x} - {literal(bias)}, torch.where({x} < {literal(-lambd)}, {x} + {literal(bias)}, {zero}))"
    wide = f"{x}.double()"
    return (f"torch.where({x} > {literal(lambd)}, {wide} - {literal(bias)}, torch.where({x} < {literal(-lambd)}, "
            f"{wide} + {literal(bias)}, {zero}.double())).to({e.dtype(0)})")


@lowering("hardmax")
def hardmax(e: NodeEmit) -> str:
    """1 at the first maximum along ``axis``."""
    x, a = e.x(0), int(e.attr("axis"))
    return f"F.one_hot(torch.argmax({x}, dim={a}), {x}.shape[{a}]).movedim(-1, {a}).to({e.dtype(0)})"


@lowering("gemm")
def gemm(e: NodeEmit) -> str:
    """alpha * A' @ B' + beta * C."""
    a = e.x(0) + (".T" if e.attr("transA") else "")
    b = e.x(1) + (".T" if e.attr("transB") else "")
    alpha, beta = float(e.attr("alpha")), float(e.attr("beta"))
    y = f"torch.matmul({a}, {b})"
    if alpha != 1.0:
        y = f"{literal(alpha)} * {y}"
    if e.has(2):
        c = e.x(2) if beta == 1.0 else f"{literal(beta)} * {e.x(2)}"
        y = f"{y} + {c}"
    return y


@lowering("einsum")
def einsum(e: NodeEmit) -> str:
    return f"torch.einsum({literal(str(e.attr('equation')))}, {', '.join(e.xs())})"


# ----------------------------------------------------------------------------- casts
@lowering("cast")
def cast(e: NodeEmit) -> str:
    """Float → integer truncates toward zero; anything → bool is ``!= 0``."""
    x = e.x(0)
    out = e.node.outputs[0].type.dtype
    if out == "bool":
        return f"{x} != 0"
    return f"{x}.to({e.out_dtype()})"


@check("bit_cast")
def _bit_cast_check(node) -> str | None:
    from translator.dtypes import numpy_dtype

    a, b = node.inputs[0].type.dtype, node.outputs[0].type.dtype
    if a and b and numpy_dtype(a).itemsize != numpy_dtype(b).itemsize:
        return f"bit_cast between {a} and {b} (a legalized dtype changed the width)"
    return None


@check("cast", "cast_like")
def _cast_check(node) -> str | None:
    for v in (node.inputs[0], node.outputs[0]):
        if v is not None and v.type.dtype == "string":
            return "torch has no string tensors"
    return None


# ----------------------------------------------------------------------------- reductions
def _noop(e: NodeEmit) -> bool:
    return e.has(1) and e.ints(1) == [] and bool(e.attr("noop_with_empty_axes"))


def _dims(e: NodeEmit) -> list[int] | None:
    """The reduced axes, sorted and non-negative; None when only known at run time."""
    rank = e.rank(0)
    axes = e.ints(1) if e.has(1) else []
    if axes is None or rank is None:
        return None
    if not axes:
        return list(range(rank))
    return sorted({axis(a, rank) for a in axes})


def _reduction(e: NodeEmit, expr: str) -> str | list[str]:
    """``expr`` with {x}, {dims}, {keep}, {dt} filled; empty axes with noop is a copy. Axes
    known only at run time go through ``_reduce_axes`` (an empty list then means a copy)."""
    x, keep, dt = e.x(0), bool(e.attr("keepdims")), e.dtype(0)
    if _noop(e):
        return f"torch.clone({x})"
    dims = _dims(e)
    if dims is not None:
        return expr.format(x=x, dims=literal(dims), keep=keep, dt=dt)
    if not (e.has(1) and e.ints(1) is None):
        axes = e.ints(1) if e.has(1) else []
        return expr.format(x=x, dims=literal(axes) if axes else f"list(range({x}.dim()))", keep=keep, dt=dt)
    d = e.tmp("dims")
    call = expr.format(x=x, dims=d, keep=keep, dt=dt)
    return [f"{d} = {e.helper('_reduce_axes')}({x}, {e.x(1)}, {bool(e.attr('noop_with_empty_axes'))})",
            f"{e.out()} = {call} if {d} else torch.clone({x})"]


@lowering("reduce_sum")
def reduce_sum(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.sum({x}, dim={dims}, keepdim={keep}, dtype={dt})")


@lowering("reduce_mean")
def reduce_mean(e: NodeEmit) -> str | list[str]:
    if e.is_float(0):
        return _reduction(e, "torch.mean({x}, dim={dims}, keepdim={keep})")
    return _reduction(e, "torch.div(torch.sum({x}, dim={dims}, keepdim={keep}), "
                      "max(1, math.prod({x}.shape[d] for d in {dims})), rounding_mode='trunc').to({dt})")


@lowering("reduce_sum_square")
def reduce_sum_square(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.sum({x} * {x}, dim={dims}, keepdim={keep}, dtype={dt})")


@lowering("reduce_l1")
def reduce_l1(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.sum(torch.abs({x}), dim={dims}, keepdim={keep}, dtype={dt})")


@lowering("reduce_l2")
def reduce_l2(e: NodeEmit) -> str | list[str]:
    if e.is_float(0):
        return _reduction(e, "torch.sqrt(torch.sum({x} * {x}, dim={dims}, keepdim={keep}))")
    return _reduction(e, "torch.sqrt(torch.sum({x} * {x}, dim={dims}, keepdim={keep}).double()).to({dt})")


@lowering("reduce_log_sum")
def reduce_log_sum(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.log(torch.sum({x}, dim={dims}, keepdim={keep}))")


@lowering("reduce_log_sum_exp")
def reduce_log_sum_exp(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.logsumexp({x}, dim={dims}, keepdim={keep})")


@lowering("reduce_prod")
def reduce_prod(e: NodeEmit) -> str | list[str]:
    """torch.prod reduces one dim at a time: the product over a flattened copy of the axes."""
    return _reduction(e, f"{e.helper('_reduce_prod')}({{x}}, {{dims}}, {{keep}})")


def _extreme(e: NodeEmit, fn: str, empty: str) -> str | list[str]:
    """amax/amin; an empty reduction gives -inf/+inf (or the integer limit)."""
    shape, dims = e.shape(0), _dims(e)
    if shape is not None and dims is not None and not _noop(e) and any(shape[d] == 0 for d in dims):
        keep = bool(e.attr("keepdims"))
        out = [1 if d in dims else n for d, n in enumerate(shape) if keep or d not in dims]
        d = e.dtype_id(0) or ""
        if d.startswith(("float", "bfloat")):
            value = empty
        elif d == "bool":
            value = "False" if fn == "amax" else "True"
        else:
            value = f"torch.iinfo({e.dtype(0)}).{'min' if fn == 'amax' else 'max'}"
        return f"torch.full({literal(out)}, {value}, dtype={e.dtype(0)})"
    if shape is None or dims is None:
        return _reduction(e, f"{e.helper('_reduce_extreme')}({{x}}, {{dims}}, {{keep}}, {fn == 'amax'})")
    return _reduction(e, f"torch.{fn}({{x}}, dim={{dims}}, keepdim={{keep}})")


@lowering("reduce_max")
def reduce_max(e: NodeEmit) -> str | list[str]:
    return _extreme(e, "amax", "-float('inf')")


@lowering("reduce_min")
def reduce_min(e: NodeEmit) -> str | list[str]:
    return _extreme(e, "amin", "float('inf')")


def _arg(e: NodeEmit, fn: str) -> str:
    x, a = e.x(0), int(e.attr("axis"))
    keep = bool(e.attr("keepdims"))
    if e.attr("select_last_index"):
        return f"{x}.shape[{a}] - 1 - torch.{fn}(torch.flip({x}, [{a}]), dim={a}, keepdim={keep})"
    return f"torch.{fn}({x}, dim={a}, keepdim={keep})"


@lowering("arg_max")
def arg_max(e: NodeEmit) -> str:
    return _arg(e, "argmax")


@lowering("arg_min")
def arg_min(e: NodeEmit) -> str:
    return _arg(e, "argmin")


def _cumulative(e: NodeEmit, fn: str, identity: str) -> list[str]:
    x = e.x(0)
    a = str(int(e.scalar(1))) if e.const(1) is not None else f"int({e.x(1)})"
    y = e.out()
    src = f"torch.flip({x}, [{a}])" if e.attr("reverse") else x
    lines = [f"{y} = torch.{fn}({src}, dim={a}, dtype={e.dtype(0)})"]
    if e.attr("exclusive"):
        lines.append(f"{y} = torch.cat([torch.full_like({y}.narrow({a}, 0, 1), {identity}), "
                     f"{y}.narrow({a}, 0, {y}.shape[{a}] - 1)], dim={a})")
    if e.attr("reverse"):
        lines.append(f"{y} = torch.flip({y}, [{a}])")
    return lines


@lowering("cum_sum")
def cum_sum(e: NodeEmit) -> list[str]:
    return _cumulative(e, "cumsum", "0")


@lowering("cum_prod")
def cum_prod(e: NodeEmit) -> list[str]:
    return _cumulative(e, "cumprod", "1")



@lowering("det")
def det(e: NodeEmit) -> str:
    """torch.linalg.det has no half-precision kernel on CPU: float16 / bfloat16 go through float32."""
    if e.dtype_id(0) in ("float32", "float64"):
        return f"torch.linalg.det({e.x(0)})"
    return f"torch.linalg.det({e.x(0)}.float()).to({e.dtype(0)})"
