"""PyTorch rules: elementwise ops whose torch call depends on a dtype or an attribute,
variadic ops, casts and constants."""
from __future__ import annotations

import numpy as np

from translator.compile.render import literal

from .node import NodeEmit
from .registry import rule

# ----------------------------------------------------------------------------- values
@rule("identity")
def identity(e: NodeEmit) -> str:
    """The same tensor under another name (``NodeEmit.same``)."""
    v = e.v(0)
    if v is not None and v.type.kind == "sequence":
        return f"list({e.x(0)})"
    if v is not None and v.type.kind == "optional":
        return e.x(0)
    return e.same(e.x(0))


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


@rule("constant")
def constant(e: NodeEmit) -> str:
    """A constant node: its value becomes a buffer (or an inline literal when tiny)."""
    from translator.table.dtypes import dtype_id
    from translator.ir.graph import Value, TensorType

    arr = _const_array(e)
    if arr.dtype.kind in "OSU":
        raise e.refuse("unsupported_dtype", "string constants")
    holder = Value(e.node.outputs[0].name, TensorType(dtype_id(arr.dtype), arr.shape), const=arr)
    return e.cg.ref(holder)


# ----------------------------------------------------------------------------- arithmetic
def _operands(e: NodeEmit, swapped: str | None) -> tuple[str, str, str | None]:
    """(first, second, fn): a one-element constant operand as a Python number (``e.number``),
    which torch takes second; a constant first operand is moved second by ``swapped`` (the
    same op with its operands exchanged: ``torch.add``, ``torch.rsub``), else stays a tensor.
    ``fn`` is ``swapped`` when the operands were exchanged, else None."""
    b = e.number(1, 0)
    if b is not None:
        return e.x(0), b, None
    a = e.number(0, 1) if swapped is not None else None
    if a is not None:
        return e.x(1), a, swapped
    return e.x(0), e.x(1), None


def _arithmetic(op: str, fn: str, swapped: str) -> None:
    """The rule of a two-operand ``op``: ``fn(a, b)``, a constant operand as a number."""
    def emit(e: NodeEmit) -> str:
        x, y, exchanged = _operands(e, swapped)
        return f"{exchanged or fn}({x}, {y})"

    rule(op)(emit)


_arithmetic("add", "torch.add", "torch.add")
_arithmetic("sub", "torch.sub", "torch.rsub")
_arithmetic("mul", "torch.mul", "torch.mul")


@rule("div")
def div(e: NodeEmit) -> str:
    """Integer division truncates toward zero (C semantics), floats divide."""
    x, y, _ = _operands(e, None)
    if e.is_float(0):
        return f"torch.div({x}, {y})"
    return f"torch.div({x}, {y}, rounding_mode='trunc')"


@rule("pow")
def pow_(e: NodeEmit) -> str:
    """x ** y in the dtype of x; an integer base with a float exponent truncates."""
    base, expo = e.x(0), e.x(1)
    if e.dtype_id(0) == e.dtype_id(1):
        # a constant exponent as a number: torch's tensor-scalar pow (a square is x * x), where a
        # 0-d tensor exponent is the general elementwise pow kernel
        return f"torch.pow({base}, {e.number(1, 0) or expo})"
    if e.is_float(0):
        return f"torch.pow({base}, {expo}).to({e.dtype(0)})"
    if e.is_float(1):
        return f"torch.trunc(torch.pow({base}.double(), {expo}.double())).to({e.dtype(0)})"
    return f"torch.pow({base}.long(), {expo}.long()).to({e.dtype(0)})"


def _nan_to_min(e: NodeEmit) -> tuple[object, object] | None:
    """The clip's one reader as ``quantized.rounded_in_float`` writes an 8-bit grid value:
    ``where(is_nan(x), clip_min, clip)`` (the where marked ``grid``, the is_nan read by it
    alone): (the is_nan node, the where node); else None."""
    uses = list(e.node.outputs[0].uses)
    if len(uses) != 1 or uses[0][0].op != "where" or "grid" not in uses[0][0].meta or uses[0][1] != 2:
        return None
    w = uses[0][0]
    nan = w.inputs[0].producer if w.inputs[0] is not None else None
    if nan is None or nan.op != "is_nan" or len(list(nan.outputs[0].uses)) != 1 or w.inputs[1] is not e.node.inputs[1]:
        return None
    return nan, w


@rule("clip")
def clip(e: NodeEmit) -> str:
    """``torch.clamp``; an 8-bit grid value whose NaN is the grid's minimum (``_nan_to_min``)
    is ``torch.nan_to_num`` of it, one kernel for the is_nan and the where that follow
    (``torch.isnan`` and ``torch.where`` are each 6-8x ``torch.clamp``'s time on one thread)."""
    lo = (e.number(1, 0) or e.x(1)) if e.has(1) else None
    hi = (e.number(2, 0) or e.x(2)) if e.has(2) else None
    if lo is None and hi is None:
        return f"torch.clone({e.x(0)})"
    saturated = _nan_to_min(e) if e.number(1, 0) is not None and e.number(2, 0) is not None else None
    if saturated is not None:
        for n in saturated:
            e.cg.absorbed[id(n)] = e.node.outputs[0]
        return f"torch.nan_to_num(torch.clamp({e.x(0)}, {lo}, {hi}), nan={lo})"
    if lo is not None and hi is not None:
        return f"torch.clamp({e.x(0)}, {lo}, {hi})"
    return f"torch.clamp_min({e.x(0)}, {lo})" if lo is not None else f"torch.clamp_max({e.x(0)}, {hi})"


@rule("is_inf")
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


@rule("bit_count")
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


@rule("max")
def max_(e: NodeEmit) -> str:
    xs = e.xs()
    return _fold("torch.maximum", xs) if len(xs) > 1 else f"torch.clone({xs[0]})"


@rule("min")
def min_(e: NodeEmit) -> str:
    xs = e.xs()
    return _fold("torch.minimum", xs) if len(xs) > 1 else f"torch.clone({xs[0]})"


@rule("sum")
def sum_(e: NodeEmit) -> str:
    xs = e.xs()
    return " + ".join(xs) if len(xs) > 1 else f"torch.clone({xs[0]})"


@rule("mean")
def mean(e: NodeEmit) -> str:
    xs = e.xs()
    return f"({' + '.join(xs)}) / {len(xs)}" if len(xs) > 1 else f"torch.clone({xs[0]})"


# ----------------------------------------------------------------------------- casts
@rule("cast")
def cast(e: NodeEmit) -> str:
    """Float → integer truncates toward zero; anything → bool is ``!= 0``."""
    x = e.x(0)
    out = e.node.outputs[0].type.dtype
    if out == "bool":
        return f"{x} != 0"
    return f"{x}.to({e.out_dtype()})"


_SIGNED = {1: "torch.int8", 2: "torch.int16", 4: "torch.int32", 8: "torch.int64"}


@rule("bit_cast")
def bit_cast(e: NodeEmit) -> str:
    """The cell's snippet (``x.view(dtype)``). When legalization widened one side (uint16 /
    uint32 computed in int32 / int64), the bits of the declared width are reinterpreted: a
    widened input is truncated to them first, a widened output is zero-extended from them."""
    from translator.table.dtypes import numpy_dtype

    a, b = e.dtype_id(0), e.node.outputs[0].type.dtype
    if a is None or b is None or numpy_dtype(a).itemsize == numpy_dtype(b).itemsize:
        return e.snippet()
    sa, sb = numpy_dtype(a).itemsize, numpy_dtype(b).itemsize
    w = min(sa, sb)
    bits = f"{e.x(0)}.to({_SIGNED[w]})" if sa > w else f"{e.x(0)}.view({_SIGNED[w]})"
    if sb == w:
        return f"{bits}.view({e.out_dtype()})"
    return f"torch.bitwise_and({bits}.to({e.out_dtype()}), {(1 << (8 * w)) - 1})"


# ----------------------------------------------------------------------------- reductions


# ----------------------------------------------------------------------------- in place
#: ops whose output a rule writes as a new tensor that autograd does not keep (their backward
#: reads their inputs, not their output): an in-place op may overwrite it
FRESH = frozenset({"conv", "conv_transpose", "gemm", "matmul", "add", "sub", "mul", "div", "batch_normalization", "concat"})
#: unary ops with an in-place method whose backward reads the output (or nothing)
_UNARY_IN_PLACE = {"relu": "relu_", "sigmoid": "sigmoid_", "tanh": "tanh_"}
_FLOATS = ("float32", "float64", "float16", "bfloat16")


def in_place(e: NodeEmit) -> str | None:
    """The node written in place over an operand that nothing else reads (``c.relu_()``,
    ``c.add_(skip)``), as ``nn.ReLU(inplace=True)`` does: no new tensor, so no fresh pages to
    fault in (a [1, 128, 900, 161] activation is 74 MB, and glibc hands a block that size out
    as new zeroed pages on every call). Only where that is the same computation and the same
    gradients: the operand is a new float tensor of the output's shape and dtype, written by a
    ``FRESH`` op of this graph (``Codegen.fresh_values``), read once, not a graph output; a
    relu, sigmoid or tanh (whose backward reads its output), an add (either operand) or a sub
    (the first). Else None (the rule writes it)."""
    op = e.node.op
    if op in _UNARY_IN_PLACE:
        return f"{e.x(0)}.{_UNARY_IN_PLACE[op]}()" if _overwritable(e, 0) else None
    if op not in ("add", "sub"):
        return None
    for i in ((0, 1) if op == "add" else (0,)):
        if not _overwritable(e, i):
            continue
        j = 1 - i
        other = e.number(j, i)
        if other is None:
            if e.dtype_id(j) != e.dtype_id(i):
                return None
            other = e.x(j)
        return f"{e.x(i)}.{op}_({other})"
    return None


def _overwritable(e: NodeEmit, i: int) -> bool:
    v, out = e.v(i), e.node.outputs[0]
    if v is None or id(v) not in e.cg.fresh_values or len(v.uses) != 1 or len(e.node.outputs) != 1:
        return False
    shape = v.type.shape
    return (v.type.dtype in _FLOATS and out.type.dtype == v.type.dtype and shape is not None
            and out.type.shape is not None and tuple(shape) == tuple(out.type.shape))
