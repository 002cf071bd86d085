"""The ATen handlers of the PyTorch frontend (registered into ``pytorch_ops.HANDLERS``).

Each ``@aten(...)`` names the core-ATen overloads a handler reads and the IR op whose
pytorch cell lists them (``reads``). A handler that needs several IR ops (no single IR op
has the ATen op's meaning) says so in its docstring.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Value
from .pytorch_ops import INT64_MAX, Ctx, _binary, _bool_in, _bool_out, _logical, _reduce, _unary, aten

# ---------------------------------------------------------------------------- elementwise
_UNARY = {
    "abs": "abs", "neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos",
    "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "erf": "erf", "ceil": "ceil",
    "floor": "floor", "sigmoid": "sigmoid", "relu": "relu", "reciprocal": "reciprocal", "sign": "sign",
    "round": "round", "hardswish": "hard_swish", "silu": "swish", "mish": "mish",
}
for _a, _op in _UNARY.items():
    aten(f"aten.{_a}.default", op=_op)(_unary)
aten("aten.logical_not.default", op="logical_not")(_bool_in)
aten("aten.isnan.default", op="is_nan")(_bool_out)
aten("aten.isinf.default", op="is_inf")(_bool_out)

for _a, _op in {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "maximum": "max", "minimum": "min",
                "fmod": "trunc_mod", "remainder": "floor_mod", "eq": "equal", "ne": "not_equal", "gt": "greater",
                "lt": "less", "ge": "greater_equal", "le": "less_equal", "bitwise_and": "bitwise_and",
                "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor"}.items():
    names = [f"aten.{_a}.Tensor", f"aten.{_a}.Scalar"] if _a not in ("maximum", "minimum") else [f"aten.{_a}.default"]
    aten(*names, op=_op)(_binary)
for _a in ("logical_and", "logical_or", "logical_xor"):
    aten(f"aten.{_a}.default", op=_a)(_logical)


@aten("aten.bitwise_not.default", op="bitwise_not")
def _bitwise_not(ctx: Ctx, x: Any) -> Value:
    X = ctx.t(x)
    return ctx.emit("logical_not" if X.type.dtype == "bool" else ctx.op(), [X])


@aten("aten.pow.Tensor_Tensor", "aten.pow.Tensor_Scalar", "aten.pow.Scalar", op="pow")
def _pow(ctx: Ctx, a: Any, b: Any) -> Value:
    dt = ctx.out_dtype()
    return ctx.emit(ctx.op(), [ctx.t(a, dt), ctx.t(b, dt)])


@aten("aten.div.Tensor_mode", op="div")
def _div_mode(ctx: Ctx, a: Any, b: Any, rounding_mode: str | None = None) -> Value:
    """Rounded division: floats divide then floor (``floor``) or truncate (``trunc``:
    sign(q)·floor(|q|)); integers subtract the remainder first ((a - mod(a, b)) / b, exact)."""
    dt = ctx.promote(a, b)
    A, B = ctx.t(a, dt), ctx.t(b, dt)
    if rounding_mode is None:
        return ctx.emit(ctx.op(), [A, B])
    if dt.startswith("float") or dt == "bfloat16":
        q = ctx.emit(ctx.op(), [A, B])
        if rounding_mode == "floor":
            return ctx.emit("floor", [q])
        return _trunc_value(ctx, q)
    r = ctx.emit("floor_mod" if rounding_mode == "floor" else "trunc_mod", [A, B])
    return ctx.emit(ctx.op(), [ctx.emit("sub", [A, r]), B])


def _trunc_value(ctx: Ctx, q: Value) -> Value:
    return ctx.emit("mul", [ctx.emit("sign", [q]), ctx.emit("floor", [ctx.emit("abs", [q])])])


@aten("aten.trunc.default", op="floor")
def _trunc(ctx: Ctx, x: Any) -> Value:
    """Truncation as sign(x)·floor(|x|) (no IR op rounds toward zero)."""
    return _trunc_value(ctx, ctx.t(x, ctx.out_dtype()))


@aten("aten.rsqrt.default", op="reciprocal")
def _rsqrt(ctx: Ctx, x: Any) -> Value:
    """1 / sqrt(x): sqrt, then reciprocal."""
    return ctx.emit(ctx.op(), [ctx.emit("sqrt", [ctx.t(x, ctx.out_dtype())])])


@aten("aten.expm1.default", op="exp")
def _expm1(ctx: Ctx, x: Any) -> Value:
    """exp(x) - 1: exp, then sub."""
    dt = ctx.out_dtype()
    return ctx.emit("sub", [ctx.emit(ctx.op(), [ctx.t(x, dt)]), ctx.const(1.0, dt)])


@aten("aten.log1p.default", "aten.log2.default", "aten.log10.default", op="log")
def _log_variants(ctx: Ctx, x: Any) -> Value:
    """log1p: log(1 + x); log2 / log10: log(x) / log(base)."""
    dt = ctx.out_dtype()
    X = ctx.t(x, dt)
    if ctx.aten == "aten.log1p.default":
        return ctx.emit(ctx.op(), [ctx.emit("add", [X, ctx.const(1.0, dt)])])
    base = 2.0 if "log2" in ctx.aten else 10.0
    return ctx.emit("div", [ctx.emit(ctx.op(), [X]), ctx.const(np.log(base), dt)])


@aten("aten.exp2.default", op="pow")
def _exp2(ctx: Ctx, x: Any) -> Value:
    """2 ** x: pow with a constant base."""
    dt = ctx.out_dtype()
    return ctx.emit(ctx.op(), [ctx.const(2.0, dt), ctx.t(x, dt)])


@aten("aten.gelu.default", op="gelu")
def _gelu(ctx: Ctx, x: Any, approximate: str = "none") -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x)], {"approximate": approximate})


@aten("aten.leaky_relu.default", op="leaky_relu")
def _leaky_relu(ctx: Ctx, x: Any, negative_slope: float = 0.01) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x)], {"alpha": float(negative_slope)})


@aten("aten.elu.default", op="elu")
def _elu(ctx: Ctx, x: Any, alpha: float = 1.0, scale: float = 1.0, input_scale: float = 1.0) -> Value:
    """scale · elu(x); with an ``input_scale`` other than 1: where(x > 0, x, alpha·(exp(input_scale·x) - 1))."""
    dt = ctx.out_dtype()
    X = ctx.t(x, dt)
    if input_scale == 1:
        y = ctx.emit(ctx.op(), [X], {"alpha": float(alpha)})
    else:
        e = ctx.emit("exp", [ctx.emit("mul", [X, ctx.const(input_scale, dt)])])
        neg = ctx.emit("mul", [ctx.emit("sub", [e, ctx.const(1.0, dt)]), ctx.const(alpha, dt)])
        y = ctx.emit("where", [ctx.emit("greater", [X, ctx.const(0.0, dt)]), X, neg])
    if scale != 1:
        y = ctx.emit("mul", [y, ctx.const(scale, dt)])
    return y


@aten("aten.softplus.default", op="softplus")
def _softplus(ctx: Ctx, x: Any, beta: float = 1.0, threshold: float = 20.0) -> Value:
    """softplus(β·x)/β; above ``threshold`` (β·x) the input itself (a where)."""
    dt = ctx.out_dtype()
    X = ctx.t(x, dt)
    bx = X if beta == 1 else ctx.emit("mul", [X, ctx.const(beta, dt)])
    y = ctx.emit(ctx.op(), [bx])
    if beta != 1:
        y = ctx.emit("div", [y, ctx.const(beta, dt)])
    big = ctx.emit("greater", [bx, ctx.const(threshold, dt)])
    return ctx.emit("where", [big, X, y])


@aten("aten.hardsigmoid.default", op="hard_sigmoid")
def _hardsigmoid(ctx: Ctx, x: Any) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x)], {"alpha": 1.0 / 6.0, "beta": 0.5})


@aten("aten.clamp.default", "aten.clamp_min.default", "aten.clamp_max.default", "aten.hardtanh.default", op="clip")
def _clamp(ctx: Ctx, x: Any, lo: Any = None, hi: Any = None) -> Value:
    dt = ctx.out_dtype()
    if ctx.aten == "aten.clamp_max.default":
        lo, hi = None, lo
    if ctx.aten == "aten.hardtanh.default":
        lo = -1.0 if lo is None else lo
        hi = 1.0 if hi is None else hi
    X = ctx.t(x, dt)
    if lo is not None and hi is not None and lo > hi:  # torch: every element becomes max
        return ctx.emit("add", [ctx.emit("mul", [X, ctx.const(0, dt)]), ctx.const(hi, dt)])
    return ctx.emit(ctx.op(), [X, None if lo is None else ctx.const(lo, dt, "min"),
                               None if hi is None else ctx.const(hi, dt, "max")])


@aten("aten.clamp.Tensor", op="max")
def _clamp_tensor(ctx: Ctx, x: Any, lo: Any = None, hi: Any = None) -> Value:
    """clamp with tensor bounds: max(x, lo), then min(·, hi)."""
    dt = ctx.out_dtype()
    y = ctx.t(x, dt)
    if lo is not None:
        y = ctx.emit(ctx.op(), [y, ctx.t(lo, dt)])
    if hi is not None:
        y = ctx.emit("min", [y, ctx.t(hi, dt)])
    return y


@aten("aten.where.self", op="where")
def _where(ctx: Ctx, c: Any, a: Any, b: Any) -> Value:
    dt = ctx.promote(a, b)
    return ctx.emit(ctx.op(), [ctx.t(c, "bool"), ctx.t(a, dt), ctx.t(b, dt)])


@aten("aten._softmax.default", "aten._log_softmax.default", op="softmax")
def _softmax(ctx: Ctx, x: Any, dim: int, half_to_float: bool = False) -> Value:
    op = ctx.op() if "_log_" not in ctx.aten else "log_softmax"
    if ctx.rank(x) == 0:
        flat = ctx.emit("reshape", [ctx.t(x), ctx.ints([1], "shape")])
        return ctx.emit("reshape", [ctx.emit(op, [flat], {"axis": 0}), ctx.ints([], "scalar")])
    return ctx.emit(op, [ctx.t(x)], {"axis": int(dim)})


# ---------------------------------------------------------------------------- matrix products and NN
@aten("aten.mm.default", "aten.bmm.default", op="matmul")
def _mm(ctx: Ctx, a: Any, b: Any) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(a), ctx.t(b)])


@aten("aten.addmm.default", op="gemm")
def _addmm(ctx: Ctx, bias: Any, a: Any, b: Any, beta: float = 1, alpha: float = 1) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(a), ctx.t(b), ctx.t(bias)], {"alpha": float(alpha), "beta": float(beta)})


@aten("aten.convolution.default", op="conv")
def _convolution(ctx: Ctx, x: Any, w: Any, b: Any, stride: list, padding: list, dilation: list, transposed: bool,
                 output_padding: list, groups: int) -> Value:
    k = [int(d) for d in ctx.shape(w)[2:]]
    n = len(k)

    def full(v: Any) -> list[int]:
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return [int(x) for x in (v * n if len(v) == 1 else v)]

    pads = full(padding)
    attrs = {"strides": full(stride), "pads": pads + pads, "dilations": full(dilation), "group": int(groups),
             "kernel_shape": k}
    inputs = [ctx.t(x), ctx.t(w)] + ([ctx.t(b)] if b is not None else [])
    if transposed:
        attrs["output_padding"] = full(output_padding)
        return ctx.emit("conv_transpose", inputs, attrs)
    return ctx.emit(ctx.op(), inputs, attrs)


@aten("aten._native_batch_norm_legit_no_training.default", op="batch_normalization")
def _batch_norm(ctx: Ctx, x: Any, w: Any, b: Any, mean: Any, var: Any, momentum: float, eps: float) -> list:
    c = ctx.shape(mean)[0]
    dt = ctx.out_dtype()
    W = ctx.t(w) if w is not None else ctx.const(np.ones(c), dt, "scale")
    B = ctx.t(b) if b is not None else ctx.const(np.zeros(c), dt, "bias")
    y = ctx.emit(ctx.op(), [ctx.t(x), W, B, ctx.t(mean), ctx.t(var)], {"epsilon": float(eps)})
    return [y, None, None]


@aten("aten.native_layer_norm.default", op="layer_normalization")
def _layer_norm(ctx: Ctx, x: Any, shape: list, w: Any, b: Any, eps: float) -> list:
    dt = ctx.out_dtype()
    norm = [int(s) for s in shape]
    W = ctx.t(w) if w is not None else ctx.const(np.ones(norm), dt, "scale")
    inputs = [ctx.t(x), W] + ([ctx.t(b)] if b is not None else [])
    n = 3 if ctx.used(1) or ctx.used(2) else 1
    out = ctx.emit(ctx.op(), inputs, {"axis": -len(norm), "epsilon": float(eps)}, n=n)
    return out if n == 3 else [out, None, None]


@aten("aten.native_group_norm.default", op="group_normalization")
def _group_norm(ctx: Ctx, x: Any, w: Any, b: Any, n: Any, c: int, hw: Any, group: int, eps: float) -> list:
    dt = ctx.out_dtype()
    c = int(c)
    W = ctx.t(w) if w is not None else ctx.const(np.ones(c), dt, "scale")
    B = ctx.t(b) if b is not None else ctx.const(np.zeros(c), dt, "bias")
    y = ctx.emit(ctx.op(), [ctx.t(x), W, B], {"num_groups": int(group), "epsilon": float(eps)})
    if not (ctx.used(1) or ctx.used(2)):
        return [y, None, None]
    # the statistics (N, group): x viewed as (N, group, -1), mean and 1/sqrt(biased var + eps)
    n_, g = ctx.shape(x)[0], int(group)
    xs = ctx.emit("reshape", [ctx.t(x, dt), ctx.ints([n_, g, -1], "shape")])
    A = ctx.ints([2], "axes")
    mean = ctx.emit("reduce_mean", [xs, A], {"keepdims": 1})
    d = ctx.emit("sub", [xs, mean])
    var = ctx.emit("reduce_mean", [ctx.emit("mul", [d, d]), A], {"keepdims": 0})
    rstd = ctx.emit("reciprocal", [ctx.emit("sqrt", [ctx.emit("add", [var, ctx.const(float(eps), dt)])])])
    return [y, ctx.emit("squeeze", [mean, A]), rstd]


def _spatial(v: Any, n: int, default: list[int] | None = None) -> list[int]:
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    if not v and default is not None:
        return list(default)
    return [int(x) for x in (v * n if len(v) == 1 else v)]


@aten("aten.max_pool2d_with_indices.default", "aten.max_pool3d_with_indices.default", op="max_pool")
def _max_pool(ctx: Ctx, x: Any, kernel: list, stride: Any = (), padding: Any = 0, dilation: Any = 1,
              ceil_mode: bool = False) -> list:
    """max_pool; the indices (only when read) are ONNX's flat indices modulo each plane's size
    (PyTorch counts within the plane)."""
    n = 3 if "3d" in ctx.aten else 2
    k = _spatial(kernel, n)
    p = _spatial(padding, n)
    attrs = {"kernel_shape": k, "strides": _spatial(stride, n, k), "pads": p + p,
             "dilations": _spatial(dilation, n), "ceil_mode": int(bool(ceil_mode))}
    X, unbatched = _batched(ctx, x, n)
    if not ctx.used(1):
        return [_unbatched(ctx, ctx.emit(ctx.op(), [X], attrs), unbatched), None]
    y, idx = ctx.emit(ctx.op(), [X], attrs, n=2)
    plane = int(np.prod([int(d) for d in ctx.shape(x)[-n:]]))
    idx = ctx.emit("floor_mod", [idx, ctx.const(plane, "int64", "plane")])
    return [_unbatched(ctx, y, unbatched), _unbatched(ctx, idx, unbatched)]


def _batched(ctx: Ctx, x: Any, n: int) -> tuple[Value, bool]:
    """An unbatched (C, spatial...) input gets a batch axis for the IR's N, C, spatial ops."""
    X = ctx.t(x)
    if ctx.rank(x) == n + 1:
        return ctx.emit("unsqueeze", [X, ctx.ints([0], "axes")]), True
    return X, False


def _unbatched(ctx: Ctx, y: Value, unbatched: bool) -> Value:
    return ctx.emit("squeeze", [y, ctx.ints([0], "axes")]) if unbatched else y


@aten("aten.avg_pool1d.default", "aten.avg_pool2d.default", "aten.avg_pool3d.default", op="average_pool")
def _avg_pool(ctx: Ctx, x: Any, kernel: list, stride: Any = (), padding: Any = 0, ceil_mode: bool = False,
              count_include_pad: bool = True, divisor_override: Any = None) -> Value:
    if divisor_override is not None:
        return _window_sum_pool(ctx, x, kernel, stride, padding, divisor_override)
    n = 3 if "3d" in ctx.aten else 1 if "1d" in ctx.aten else 2
    k = _spatial(kernel, n)
    p = _spatial(padding, n)
    X, unbatched = _batched(ctx, x, n)
    y = ctx.emit(ctx.op(), [X], {"kernel_shape": k, "strides": _spatial(stride, n, k), "pads": p + p,
                                 "ceil_mode": int(bool(ceil_mode)), "count_include_pad": int(bool(count_include_pad))})
    return _unbatched(ctx, y, unbatched)


def _window_sum_pool(ctx: Ctx, x: Any, kernel: Any, stride: Any, padding: Any, divisor: Any) -> Value:
    """avg_pool with divisor_override: each window's sum / divisor. The sum is a depthwise conv
    with a ones kernel; ceil_mode's partial windows are extra zeros at the end (the output size
    is the export's)."""
    n = 3 if "3d" in ctx.aten else 1 if "1d" in ctx.aten else 2
    k, p = _spatial(kernel, n), _spatial(padding, n)
    st = _spatial(stride, n, k)
    dt = ctx.out_dtype()
    X, unbatched = _batched(ctx, x, n)
    c = int(ctx.shape(x)[-n - 1])
    ins = [int(d) for d in ctx.shape(x)[-n:]]
    outs = [int(d) for d in ctx.shape(ctx.node)[-n:]]
    ends = [max(0, (o - 1) * s_ + kk - (i + 2 * pp)) + pp for o, s_, kk, i, pp in zip(outs, st, k, ins, p)]
    w = ctx.const(np.ones([c, 1] + k), dt, "ones")
    y = ctx.emit("conv", [X, w], {"kernel_shape": k, "strides": st, "pads": p + ends, "group": c})
    y = ctx.emit("mul", [y, ctx.const(1.0 / float(divisor), dt, "scale")])
    return _unbatched(ctx, y, unbatched)


@aten("aten._adaptive_avg_pool2d.default", "aten._adaptive_avg_pool3d.default", op="global_average_pool")
def _adaptive_avg(ctx: Ctx, x: Any, out_size: list) -> Value:
    """1×1 output: global_average_pool; an output size dividing the input: average_pool with
    kernel = stride = input / output."""
    n = len(out_size)
    shape = ctx.shape(x)[-n:]
    out = [int(s) for s in out_size]
    if all(o == 1 for o in out):
        return ctx.emit(ctx.op(), [ctx.t(x)])
    if not all(isinstance(s, int) and s % o == 0 for s, o in zip(shape, out)):

        return _adaptive_axiswise(ctx, x, out, "reduce_mean")
    k = [s // o for s, o in zip(shape, out)]
    return ctx.emit("average_pool", [ctx.t(x)], {"kernel_shape": k, "strides": k})


@aten("aten.upsample_nearest1d.vec", "aten.upsample_nearest2d.vec", "aten.upsample_nearest3d.vec",
      "aten.upsample_bilinear2d.vec", "aten.upsample_linear1d.vec", "aten.upsample_trilinear3d.vec",
      "aten.upsample_bicubic2d.vec", op="resize")
def _upsample(ctx: Ctx, x: Any, output_size: Any, *rest: Any) -> Value:
    """nearest: ``asymmetric`` coordinates, ``floor`` rounding (PyTorch's ``nearest``);
    linear/cubic: ``align_corners`` or ``pytorch_half_pixel``; the output size from the export."""
    if "nearest" in ctx.aten:
        align, scales = False, rest[0] if rest else None
        attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    else:
        align, scales = (rest[0] if rest else False), (rest[1] if len(rest) > 1 else None)
        attrs = {"mode": "cubic" if "bicubic" in ctx.aten else "linear",
                 "coordinate_transformation_mode": "align_corners" if align else "pytorch_half_pixel"}
        if "bicubic" in ctx.aten:
            attrs["cubic_coeff_a"] = -0.75
    out_shape = ctx.shape(ctx.node)
    if all(isinstance(d, int) for d in out_shape):
        return ctx.emit(ctx.op(), [ctx.t(x), None, None, ctx.ints(out_shape, "sizes")], attrs)
    if scales is None:
        raise ctx.fail("dynamic_shape", "upsampling to a size given per call with dynamic input dims")
    s = [1.0, 1.0] + [float(f) for f in scales]
    return ctx.emit(ctx.op(), [ctx.t(x), None, ctx.const(np.asarray(s), "float32", "scales")], attrs)


@aten("aten.grid_sampler_2d.default", op="grid_sample")
def _grid_sample(ctx: Ctx, x: Any, grid: Any, mode: int, padding: int, align_corners: bool) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.t(grid)],
                    {"mode": ("linear", "nearest", "cubic")[mode], "padding_mode": ("zeros", "border", "reflection")[padding],
                     "align_corners": int(bool(align_corners))})


@aten("aten._prelu_kernel.default", op="prelu")
def _prelu(ctx: Ctx, x: Any, w: Any) -> Value:
    r = ctx.rank(x)
    W = ctx.t(w)
    if r >= 2 and ctx.rank(w) == 1:
        W = ctx.emit("reshape", [W, ctx.ints([-1] + [1] * (r - 2), "shape")])
    return ctx.emit(ctx.op(), [ctx.t(x), W])


# ---------------------------------------------------------------------------- reductions
@aten("aten.sum.dim_IntList", "aten.sum.default", op="reduce_sum")
def _sum(ctx: Ctx, x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Value:
    return _reduce(ctx, x, dim, keepdim)


@aten("aten.mean.dim", "aten.mean.default", op="reduce_mean")
def _mean(ctx: Ctx, x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Value:
    return _reduce(ctx, x, dim, keepdim)


@aten("aten.prod.dim_int", "aten.prod.default", op="reduce_prod")
def _prod(ctx: Ctx, x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Value:
    return _reduce(ctx, x, dim, keepdim)


@aten("aten.amax.default", op="reduce_max")
def _amax(ctx: Ctx, x: Any, dim: Any = (), keepdim: bool = False) -> Value:
    return _reduce(ctx, x, dim, keepdim)


@aten("aten.amin.default", op="reduce_min")
def _amin(ctx: Ctx, x: Any, dim: Any = (), keepdim: bool = False) -> Value:
    return _reduce(ctx, x, dim, keepdim)


@aten("aten.any.dim", "aten.any.dims", "aten.any.default", "aten.all.dim", "aten.all.dims", "aten.all.default",
      op="reduce_max")
def _any_all(ctx: Ctx, x: Any, dim: Any = None, keepdim: bool = False) -> Value:
    """any / all: the input as float32 0/1, reduce_max / reduce_min, back to bool."""
    X = ctx.cast(ctx.cast(ctx.t(x), "bool"), "float32")
    if ctx.rank(x) == 0:
        return ctx.cast(X, "bool")
    axes = ctx.axes(dim, ctx.rank(x)) if dim not in (None, [], ()) else list(range(ctx.rank(x)))
    op = ctx.op() if ".any." in ctx.aten else "reduce_min"
    r = ctx.emit(op, [X, ctx.ints(axes, "axes")], {"keepdims": int(bool(keepdim))})
    return ctx.cast(r, "bool")


@aten("aten.argmax.default", "aten.argmin.default", op="arg_max")
def _argmax(ctx: Ctx, x: Any, dim: Any = None, keepdim: bool = False) -> Value:
    op = ctx.op() if "argmax" in ctx.aten else "arg_min"
    X = ctx.t(x)
    if dim is None:
        X = ctx.emit("reshape", [X, ctx.ints([-1], "shape")])
        y = ctx.emit(op, [X], {"axis": 0, "keepdims": 0})
        if keepdim:
            y = ctx.emit("reshape", [y, ctx.ints([1] * ctx.rank(x), "shape")])
        return y
    if ctx.rank(x) == 0:
        return ctx.const(0, "int64")
    return ctx.emit(op, [X], {"axis": int(dim), "keepdims": int(bool(keepdim))})


@aten("aten.max.dim", "aten.min.dim", op="reduce_max")
def _max_dim(ctx: Ctx, x: Any, dim: int, keepdim: bool = False) -> list:
    """(values, indices): reduce_max/min and arg_max/min on the same axis."""
    is_max = ".max." in ctx.aten
    X = ctx.t(x)
    if ctx.rank(x) == 0:
        return [ctx.emit("identity", [X]), ctx.const(0, "int64")]
    axis = int(dim) % ctx.rank(x)
    vals = ctx.emit(ctx.op() if is_max else "reduce_min", [X, ctx.ints([axis], "axes")], {"keepdims": int(bool(keepdim))})
    idx = ctx.emit("arg_max" if is_max else "arg_min", [X], {"axis": axis, "keepdims": int(bool(keepdim))}) \
        if ctx.used(1) else None
    return [vals, idx]


@aten("aten.max.default", "aten.min.default", op="reduce_max")
def _max_all(ctx: Ctx, x: Any) -> Value:
    return _reduce(ctx, x, None, False, ctx.op() if ".max." in ctx.aten else "reduce_min")


@aten("aten.var.correction", "aten.var_mean.correction", op="reduce_mean")
def _var(ctx: Ctx, x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Any:
    """Variance: mean, the centred squares summed, divided by N - correction (var_mean: both)."""
    dt = ctx.out_dtype()
    r = ctx.rank(x)
    axes = ctx.axes(dim, r) if dim not in (None, [], ()) else list(range(r))
    shape = ctx.shape(x)
    if not all(isinstance(shape[a], int) for a in axes):
        raise ctx.fail("dynamic_shape", "variance over a dynamic dimension")
    count = int(np.prod([shape[a] for a in axes])) if axes else 1
    corr = 1 if correction is None else float(correction)
    X = ctx.t(x, dt)
    A = ctx.ints(axes, "axes")
    mean = ctx.emit(ctx.op(), [X, A], {"keepdims": 1})
    d = ctx.emit("sub", [X, mean])
    ss = ctx.emit("reduce_sum", [ctx.emit("mul", [d, d]), A], {"keepdims": int(bool(keepdim))})
    var = ctx.emit("div", [ss, ctx.const(max(count - corr, 0), dt, "n")])
    if ctx.aten == "aten.var.correction":
        return var
    m = mean if keepdim else ctx.emit(ctx.op(), [X, A], {"keepdims": 0})
    return [var, m]


@aten("aten.cumsum.default", "aten.cumprod.default", op="cum_sum")
def _cumsum(ctx: Ctx, x: Any, dim: int, dtype: Any = None) -> Value:
    op = ctx.op() if "cumsum" in ctx.aten else "cum_prod"
    X = ctx.t(x, ctx.out_dtype())
    if ctx.rank(x) == 0:
        return ctx.emit("identity", [X])
    return ctx.emit(op, [X, ctx.const(int(dim) % ctx.rank(x), "int64", "axis")])


@aten("aten.topk.default", op="top_k")
def _topk(ctx: Ctx, x: Any, k: Any, dim: int = -1, largest: bool = True, sorted: bool = True) -> list:
    K = ctx.ints([k], "k") if isinstance(ctx.v(k), int) else ctx.cast(ctx.v(k), "int64")
    if ctx.rank(x) == 0:
        X = ctx.emit("reshape", [ctx.t(x), ctx.ints([1])])
        v, i = ctx.emit(ctx.op(), [X, K], {"axis": 0, "largest": int(bool(largest)), "sorted": 1}, n=2)
        return [ctx.emit("reshape", [v, ctx.ints([])]), ctx.emit("reshape", [i, ctx.ints([])])]
    return ctx.emit(ctx.op(), [ctx.t(x), K], {"axis": int(dim), "largest": int(bool(largest)), "sorted": 1}, n=2)


@aten("aten.sort.default", "aten.sort.stable", op="top_k")
def _sort(ctx: Ctx, x: Any, *args: Any, **kw: Any) -> list:
    """sort: top_k over the whole axis (largest first when descending)."""
    if ctx.aten == "aten.sort.stable":
        dim, desc = kw.get("dim", -1), kw.get("descending", False)
    else:
        dim = args[0] if args else kw.get("dim", -1)
        desc = args[1] if len(args) > 1 else kw.get("descending", False)
    if ctx.rank(x) == 0:
        return [ctx.emit("identity", [ctx.t(x)]), ctx.const(0, "int64")]
    n = ctx.shape(x)[int(dim)]
    if not isinstance(n, int):
        raise ctx.fail("dynamic_shape", "sort along a dynamic dimension")
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.ints([n], "k")], {"axis": int(dim), "largest": int(bool(desc)), "sorted": 1},
                    n=2)


# ---------------------------------------------------------------------------- shapes and indexing
@aten("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", op="reshape")
def _view(ctx: Ctx, x: Any, shape: list) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.shape_value(shape, minus_one_for_sym=True)])


@aten("aten.permute.default", "aten.permute_copy.default", op="transpose")
def _permute(ctx: Ctx, x: Any, dims: list) -> Value:
    r = ctx.rank(x)
    return ctx.emit(ctx.op(), [ctx.t(x)], {"perm": [int(d) % r if r else 0 for d in dims]})


@aten("aten.transpose.int", "aten.transpose_copy.int", "aten.t.default", "aten.t_copy.default", op="transpose")
def _transpose(ctx: Ctx, x: Any, d0: int = 0, d1: int = 1) -> Value:
    """Two axes swapped (``t``: the two axes of a matrix; rank < 2 unchanged)."""
    r = ctx.rank(x)
    if r < 2:
        return ctx.emit("identity", [ctx.t(x)])
    perm = list(range(r))
    a, b = int(d0) % r, int(d1) % r
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.emit(ctx.op(), [ctx.t(x)], {"perm": perm})


@aten("aten.expand.default", "aten.expand_copy.default", op="expand")
def _expand(ctx: Ctx, x: Any, size: list, implicit: bool = False) -> Value:
    vals = [ctx.v(s) for s in size]
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.shape_value([1 if (isinstance(s, int) and s == -1) else s
                                                          for s in vals])])


@aten("aten.slice.Tensor", "aten.slice_copy.Tensor", op="slice")
def _slice(ctx: Ctx, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Value:
    r = ctx.rank(x)
    dim = int(dim) % r
    n = ctx.shape(x)[dim]
    start = 0 if start is None else ctx.v(start)
    end = INT64_MAX if end is None else ctx.v(end)
    if isinstance(n, int):
        if isinstance(end, int):
            end = min(end, n) if end >= 0 else max(end, -n - 1)
        if isinstance(start, int):
            start = min(start, n) if start >= 0 else max(start, -n)
    if isinstance(n, int) and isinstance(start, int) and isinstance(end, int) and start == 0 and end >= n and step == 1:
        return ctx.emit("identity", [ctx.t(x)])
    S = ctx.shape_value([start])
    E = ctx.shape_value([end])
    return ctx.emit(ctx.op(), [ctx.t(x), S, E, ctx.ints([dim], "axes"), ctx.ints([int(step)], "steps")])


@aten("aten.select.int", "aten.select_copy.int", op="gather")
def _select(ctx: Ctx, x: Any, dim: int, index: Any) -> Value:
    r = ctx.rank(x)
    i = ctx.v(index)
    I = ctx.const(np.asarray(i), "int64", "index") if isinstance(i, int) else \
        ctx.emit("reshape", [ctx.cast(i, "int64"), ctx.ints([], "scalar")])
    return ctx.emit(ctx.op(), [ctx.t(x), I], {"axis": int(dim) % r})


@aten("aten.index_select.default", op="gather")
def _index_select(ctx: Ctx, x: Any, dim: int, index: Any) -> Value:
    r = ctx.rank(x)
    if r == 0:
        return ctx.emit("identity", [ctx.t(x)])
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.t(index, "int64")], {"axis": int(dim) % r})


@aten("aten.embedding.default", op="gather")
def _embedding(ctx: Ctx, w: Any, idx: Any, *_: Any) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(w), ctx.t(idx, "int64")], {"axis": 0})


@aten("aten.gather.default", op="gather_elements")
def _gather(ctx: Ctx, x: Any, dim: int, index: Any, sparse_grad: bool = False) -> Value:
    r = ctx.rank(x)
    if r == 0:
        return ctx.emit("identity", [ctx.t(x)])
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.t(index, "int64")], {"axis": int(dim) % r})


def advanced_index(ctx: Ctx, x: Any, indices: list) -> tuple[Value, Value, list[int], list[int], int, int]:
    """PyTorch's advanced indexing as gather_nd/scatter_nd operands: (x with the indexed axes moved
    first, the index tensors broadcast and stacked on a new last axis, that permutation, the
    indexing result's shape in PyTorch's order, the broadcast index rank b, and k: the result's
    index block starts at axis k when the indexed axes are adjacent, else at 0)."""
    given = [(i, a) for i, a in enumerate(indices) if a is not None]
    for _, a in given:
        if ctx.meta(a).dtype.is_floating_point or str(ctx.meta(a).dtype) == "torch.bool":
            raise ctx.fail("unsupported_attribute_value", "indexing with a boolean mask (data-dependent shape)")
    r = ctx.rank(x)
    shape = list(ctx.shape(x))
    axes = [i for i, _ in given]
    others = [i for i in range(r) if i not in axes]
    perm = axes + others
    X = ctx.t(x)
    if perm != list(range(r)):
        X = ctx.emit("transpose", [X], {"perm": perm})
    target = list(np.broadcast_shapes(*[tuple(ctx.shape(a)) for _, a in given]))
    parts = []
    for _, a in given:
        A = ctx.t(a, "int64")
        if list(ctx.shape(a)) != target:
            A = ctx.emit("expand", [A, ctx.ints(target, "shape")])
        parts.append(ctx.emit("unsqueeze", [A, ctx.ints([-1], "axes")]))
    idx = parts[0] if len(parts) == 1 else ctx.emit("concat", parts, {"axis": -1})
    adjacent = axes == list(range(axes[0], axes[0] + len(axes)))
    k = axes[0] if adjacent else 0
    rest = [shape[o] for o in others]
    result = rest[:k] + target + rest[k:]
    return X, idx, perm, result, len(target), k


@aten("aten.index.Tensor", op="gather")
def _index(ctx: Ctx, x: Any, indices: list) -> Value:
    """One index tensor: gather on its axis. Several: the indexed axes moved first (transpose),
    the index tensors broadcast and stacked, gather_nd, the index block moved back to where
    PyTorch puts it (a transpose). Boolean masks (data-dependent shapes) are refused."""
    given = [(i, a) for i, a in enumerate(indices) if a is not None]
    if len(given) == 1 and not (ctx.meta(given[0][1]).dtype.is_floating_point
                                or str(ctx.meta(given[0][1]).dtype) == "torch.bool"):
        axis, a = given[0]
        return ctx.emit(ctx.op(), [ctx.t(x), ctx.t(a, "int64")], {"axis": axis})
    X, idx, _, result, b, k = advanced_index(ctx, x, indices)
    R = ctx.emit("gather_nd", [X, idx])
    if k:
        n = len(result)
        R = ctx.emit("transpose", [R], {"perm": list(range(b, b + k)) + list(range(b)) + list(range(b + k, n))})
    return R


@aten("aten.squeeze.dims", "aten.squeeze.dim", "aten.squeeze.default", "aten.squeeze_copy.dims",
      "aten.squeeze_copy.dim", "aten.squeeze_copy.default", op="squeeze")
def _squeeze(ctx: Ctx, x: Any, dims: Any = None) -> Value:
    """Only the listed axes of size 1 (PyTorch leaves the others; the IR would refuse them)."""
    shape = ctx.shape(x)
    r = len(shape)
    axes = list(range(r)) if dims is None else ctx.axes(dims, r)
    axes = sorted({a for a in axes if r and shape[a] == 1})
    if not axes:
        return ctx.emit("identity", [ctx.t(x)])
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.ints(axes, "axes")])


@aten("aten.unsqueeze.default", "aten.unsqueeze_copy.default", op="unsqueeze")
def _unsqueeze(ctx: Ctx, x: Any, dim: int) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.ints([int(dim) % (ctx.rank(x) + 1)], "axes")])


@aten("aten.cat.default", op="concat")
def _cat(ctx: Ctx, tensors: list, dim: int = 0) -> Value:
    dt = ctx.out_dtype()
    keep = [a for a in tensors if not (ctx.rank(a) == 1 and ctx.shape(a)[0] == 0)] or list(tensors[:1])
    r = ctx.rank(keep[0])
    return ctx.emit(ctx.op(), [ctx.t(a, dt) for a in keep], {"axis": int(dim) % r if r else 0})


@aten("aten.split_with_sizes.default", "aten.split.Tensor", "aten.split_with_sizes_copy.default",
      "aten.split_copy.Tensor", op="split")
def _split(ctx: Ctx, x: Any, sizes: Any, dim: int = 0) -> list:
    r = ctx.rank(x)
    axis = int(dim) % r
    n = ctx.shape(x)[axis]
    if ctx.aten in ("aten.split.Tensor", "aten.split_copy.Tensor"):
        if not isinstance(n, int):
            raise ctx.fail("dynamic_shape", "split of a dynamic dimension")
        sizes = [min(int(sizes), n - i) for i in range(0, n, int(sizes))] or [0]
    sizes = [int(s) for s in sizes]
    if len(sizes) == 1:
        return [ctx.emit("identity", [ctx.t(x)])]
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.ints(sizes, "split")], {"axis": axis}, n=len(sizes))


@aten("aten.unbind.int", "aten.unbind_copy.int", op="split")
def _unbind(ctx: Ctx, x: Any, dim: int = 0) -> list:
    """unbind: split into size-1 pieces, each squeezed."""
    r = ctx.rank(x)
    axis = int(dim) % r
    n = int(ctx.shape(x)[axis])
    parts = [ctx.t(x)] if n == 1 else ctx.emit(ctx.op(), [ctx.t(x), ctx.ints([1] * n, "split")], {"axis": axis}, n=n)
    return [ctx.emit("squeeze", [p, ctx.ints([axis], "axes")]) for p in parts]


@aten("aten.clone.default", "aten.alias.default", "aten.lift_fresh_copy.default", "aten.detach.default",
      "aten.contiguous.default", "aten.alias_copy.default", "aten.detach_copy.default", op="identity")
def _identity(ctx: Ctx, x: Any, *_: Any, **__: Any) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x)])


@aten("aten._to_copy.default", op="cast")
def _to_copy(ctx: Ctx, x: Any, **kw: Any) -> Value:
    dt = ctx.out_dtype()
    X = ctx.t(x)
    if X.type.dtype == dt:
        return ctx.emit("identity", [X])
    return ctx.emit(ctx.op(), [X], {"to": ctx.onnx_code(dt)})


@aten("aten.constant_pad_nd.default", "aten.reflection_pad1d.default", "aten.reflection_pad2d.default",
      "aten.reflection_pad3d.default", "aten.replication_pad1d.default", "aten.replication_pad2d.default",
      "aten.replication_pad3d.default", op="pad")
def _pad(ctx: Ctx, x: Any, pad: list, value: float = 0.0) -> Value:
    """PyTorch's pad list (last axis first, begin/end pairs) → ONNX pads (all begins, then all ends)."""
    r = ctx.rank(x)
    pad = [int(p) for p in pad]
    begins, ends = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        begins[r - 1 - i] = pad[2 * i]
        ends[r - 1 - i] = pad[2 * i + 1]
    mode = "reflect" if "reflection" in ctx.aten else "edge" if "replication" in ctx.aten else "constant"
    inputs = [ctx.t(x), ctx.ints(begins + ends, "pads")]
    if mode == "constant":
        inputs.append(ctx.const(value, ctx.out_dtype(), "value"))
    return ctx.emit(ctx.op(), inputs, {"mode": mode})


@aten("aten.flip.default", op="slice")
def _flip(ctx: Ctx, x: Any, dims: list) -> Value:
    """A slice with step -1 on each flipped axis (from the last element to before the first)."""
    r = ctx.rank(x)
    if not dims or r == 0:
        return ctx.emit("identity", [ctx.t(x)])
    axes = [int(d) % r for d in dims]
    n = len(axes)
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.ints([-1] * n, "starts"), ctx.ints([-INT64_MAX] * n, "ends"),
                               ctx.ints(axes, "axes"), ctx.ints([-1] * n, "steps")])


@aten("aten.repeat.default", op="tile")
def _repeat(ctx: Ctx, x: Any, repeats: list) -> Value:
    r = ctx.rank(x)
    X = ctx.t(x)
    if len(repeats) > r:
        X = ctx.emit("reshape", [X, ctx.ints([1] * (len(repeats) - r) + [int(d) for d in ctx.shape(x)], "shape")])
    return ctx.emit(ctx.op(), [X, ctx.ints([int(v) for v in repeats], "repeats")])


@aten("aten.tril.default", "aten.triu.default", op="trilu")
def _tril(ctx: Ctx, x: Any, diagonal: int = 0) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.const(int(diagonal), "int64", "k")], {"upper": int("triu" in ctx.aten)})


@aten("aten.pixel_shuffle.default", op="depth_to_space")
def _pixel_shuffle(ctx: Ctx, x: Any, r: int) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x)], {"blocksize": int(r), "mode": "CRD"})


@aten("aten.nonzero.default", op="non_zero")
def _nonzero(ctx: Ctx, x: Any) -> Value:
    """non_zero gives (rank, N); PyTorch (N, rank): a transpose."""
    return ctx.emit("transpose", [ctx.emit(ctx.op(), [ctx.t(x)])], {"perm": [1, 0]})


def _adaptive_axiswise(ctx: Ctx, x: Any, out_size: list, reduce_op: str) -> Value:
    """Adaptive pooling of any output size, one spatial axis at a time (mean and max are
    separable over the rectangular windows): window i of n over an axis of size s is
    [floor(i·s/n), ceil((i+1)·s/n)), each a slice and a keepdims reduction, concatenated."""
    X = ctx.t(x)
    r = ctx.rank(x)
    shape = ctx.shape(x)
    k = len(out_size)
    for j, n in enumerate(int(o) for o in out_size):
        axis = r - k + j
        s = shape[axis]
        if not isinstance(s, int):
            raise ctx.fail("dynamic_shape", "adaptive pooling over a dynamic dimension")
        if n == s:
            continue
        A = ctx.ints([axis], "axes")
        parts = []
        for i in range(n):
            lo, hi = (i * s) // n, -((-(i + 1) * s) // n)
            piece = ctx.emit("slice", [X, ctx.ints([lo], "s"), ctx.ints([hi], "e"), A])
            parts.append(ctx.emit(reduce_op, [piece, A], {"keepdims": 1}))
        X = parts[0] if n == 1 else ctx.emit("concat", parts, {"axis": axis})
    return X
