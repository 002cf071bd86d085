"""More ATen handlers of the PyTorch frontend: ops the IR has no single op for (written as
short expansions, each docstring says which IR ops), norms, scatters and creation ops."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import TensorType, Value
from .pytorch_aten import _adaptive_axiswise, advanced_index
from .pytorch_ops import Ctx, _reduce, aten, static_int


@aten("aten.atan2.default", op="atan")
def _atan2(ctx: Ctx, y: Any, x: Any) -> Value:
    """atan2(y, x): atan(y / x), ±π where x < 0 (by the sign of y), ±π/2 where x = 0, 0 where both are 0."""
    dt = ctx.out_dtype()
    Y, X = ctx.t(y, dt), ctx.t(x, dt)
    zero = ctx.const(0.0, dt, "zero")
    a = ctx.emit(ctx.op(), [ctx.emit("div", [Y, X])])
    pi = ctx.const(np.pi, dt, "pi")
    y_neg = ctx.emit("less", [Y, zero])
    shift = ctx.emit("where", [y_neg, ctx.emit("neg", [pi]), pi])
    a = ctx.emit("where", [ctx.emit("less", [X, zero]), ctx.emit("add", [a, shift]), a])
    half = ctx.emit("where", [y_neg, ctx.const(-np.pi / 2, dt), ctx.const(np.pi / 2, dt)])
    half = ctx.emit("where", [ctx.emit("equal", [Y, zero]), zero, half])
    return ctx.emit("where", [ctx.emit("equal", [X, zero]), half, a])


@aten("aten.lerp.Scalar", "aten.lerp.Tensor", op="add")
def _lerp(ctx: Ctx, a: Any, b: Any, w: Any) -> Value:
    """a + w·(b - a)."""
    dt = ctx.out_dtype()
    A = ctx.t(a, dt)
    return ctx.emit(ctx.op(), [A, ctx.emit("mul", [ctx.t(w, dt), ctx.emit("sub", [ctx.t(b, dt), A])])])


@aten("aten.addcmul.default", "aten.addcdiv.default", op="add")
def _addc(ctx: Ctx, x: Any, t1: Any, t2: Any, value: Any = 1) -> Value:
    """x + value·t1·t2 (addcdiv: t1 / t2)."""
    dt = ctx.out_dtype()
    p = ctx.emit("mul" if "addcmul" in ctx.aten else "div", [ctx.t(t1, dt), ctx.t(t2, dt)])
    if value != 1:
        p = ctx.emit("mul", [p, ctx.const(value, dt)])
    return ctx.emit(ctx.op(), [ctx.t(x, dt), p])


def _scaled(ctx: Ctx, v: Value, k: Any, dt: str) -> Value:
    return v if k == 1 else ctx.emit("mul", [v, ctx.const(k, dt)])


@aten("aten.addmv.default", "aten.addbmm.default", "aten.baddbmm.default", "aten.addr.default", op="matmul")
def _addmv(ctx: Ctx, x: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Value:
    """beta·x + alpha·(a @ b): addmv (matrix·vector), baddbmm (batched), addbmm (batched, summed over
    the batch), addr (outer product: a[:, None] · b[None, :])."""
    dt = ctx.out_dtype()
    A, B = ctx.t(a, dt), ctx.t(b, dt)
    if "addr" in ctx.aten:
        prod = ctx.emit("mul", [ctx.emit("unsqueeze", [A, ctx.ints([1], "axes")]),
                                ctx.emit("unsqueeze", [B, ctx.ints([0], "axes")])])
    else:
        prod = ctx.emit(ctx.op(), [A, B])
        if "addbmm" in ctx.aten:
            prod = ctx.emit("reduce_sum", [prod, ctx.ints([0], "axes")], {"keepdims": 0})
    prod = _scaled(ctx, prod, alpha, dt)
    if beta == 0:
        X = ctx.emit("expand", [ctx.t(x, dt), ctx.ints(ctx.shape(ctx.node), "shape")])
        return ctx.emit("add", [ctx.emit("mul", [X, ctx.const(0, dt)]), prod])
    return ctx.emit("add", [_scaled(ctx, ctx.t(x, dt), beta, dt), prod])


@aten("aten.hypot.default", op="sqrt")
def _hypot(ctx: Ctx, a: Any, b: Any) -> Value:
    """sqrt(a² + b²)."""
    dt = ctx.out_dtype()
    A, B = ctx.t(a, dt), ctx.t(b, dt)
    return ctx.emit(ctx.op(), [ctx.emit("add", [ctx.emit("mul", [A, A]), ctx.emit("mul", [B, B])])])


@aten("aten.frac.default", op="floor")
def _frac(ctx: Ctx, x: Any) -> Value:
    """x - trunc(x), trunc as sign(x)·floor(|x|)."""
    X = ctx.t(x, ctx.out_dtype())
    t = ctx.emit("mul", [ctx.emit("sign", [X]), ctx.emit(ctx.op(), [ctx.emit("abs", [X])])])
    return ctx.emit("sub", [X, t])


@aten("aten.sgn.default", op="sign")
def _sgn(ctx: Ctx, x: Any) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x, ctx.out_dtype())])


@aten("aten.round.decimals", op="round")
def _round_decimals(ctx: Ctx, x: Any, decimals: int = 0) -> Value:
    """round(x·10^d) / 10^d."""
    dt = ctx.out_dtype()
    k = ctx.const(10.0 ** int(decimals), dt, "scale")
    return ctx.emit("div", [ctx.emit(ctx.op(), [ctx.emit("mul", [ctx.t(x, dt), k])]), k])


@aten("aten.log_sigmoid_forward.default", op="softplus")
def _log_sigmoid(ctx: Ctx, x: Any) -> list:
    """log σ(x) = -softplus(-x) (the second output, a buffer, is never read)."""
    X = ctx.t(x, ctx.out_dtype())
    return [ctx.emit("neg", [ctx.emit(ctx.op(), [ctx.emit("neg", [X])])]), None]


@aten("aten.logit.default", op="log")
def _logit(ctx: Ctx, x: Any, eps: Any = None) -> Value:
    """log(x / (1 - x)), x clipped to [eps, 1 - eps] when eps is given."""
    dt = ctx.out_dtype()
    X = ctx.t(x, dt)
    if eps is not None:
        X = ctx.emit("clip", [X, ctx.const(eps, dt), ctx.const(1 - eps, dt)])
    return ctx.emit(ctx.op(), [ctx.emit("div", [X, ctx.emit("sub", [ctx.const(1.0, dt), X])])])


@aten("aten.std.correction", op="sqrt")
def _std(ctx: Ctx, x: Any, dim: Any = None, correction: Any = None, keepdim: bool = False) -> Value:
    """sqrt of the variance (aten.var.correction's expansion)."""
    from .pytorch_ops import HANDLERS

    saved = ctx.aten
    ctx.aten = "aten.var.correction"
    try:
        var = HANDLERS["aten.var.correction"](ctx, x, dim, correction=correction, keepdim=keepdim)
    finally:
        ctx.aten = saved
    return ctx.emit(ctx.op(), [var])


@aten("aten.linalg_vector_norm.default", op="reduce_l2")
def _vector_norm(ctx: Ctx, x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Value:
    """ord 2 / 1: reduce_l2 / reduce_l1; ±inf: reduce_max / reduce_min of |x|; 0: count of non-zeros;
    other p: (Σ|x|^p)^(1/p)."""
    dt = ctx.out_dtype()
    X = ctx.t(x, dt)
    o = float(ord)
    if ctx.rank(x) == 0:
        return ctx.emit("abs", [X]) if o != 0 else ctx.cast(ctx.emit("not_equal", [X, ctx.const(0, dt)]), dt)
    if o == 2:
        return _reduce(ctx, x, dim, keepdim, ctx.op())
    if o == 1:
        return _reduce(ctx, x, dim, keepdim, "reduce_l1")
    r = ctx.rank(x)
    axes = ctx.axes(dim, r) if dim not in (None, [], ()) else list(range(r))
    A = ctx.ints(axes, "axes")
    kd = {"keepdims": int(bool(keepdim))}
    ab = ctx.emit("abs", [X])
    if r == 0:
        return ab if o != 0 else ctx.cast(ctx.emit("not_equal", [X, ctx.const(0, dt)]), dt)
    if o == float("inf"):
        return ctx.emit("reduce_max", [ab, A], kd)
    if o == float("-inf"):
        return ctx.emit("reduce_min", [ab, A], kd)
    if o == 0:
        nz = ctx.cast(ctx.emit("not_equal", [X, ctx.const(0, dt)]), dt)
        return ctx.emit("reduce_sum", [nz, A], kd)
    s = ctx.emit("reduce_sum", [ctx.emit("pow", [ab, ctx.const(o, dt)]), A], kd)
    return ctx.emit("pow", [s, ctx.const(1.0 / o, dt)])


@aten("aten.masked_fill.Scalar", "aten.masked_fill.Tensor", op="where")
def _masked_fill(ctx: Ctx, x: Any, mask: Any, value: Any) -> Value:
    dt = ctx.out_dtype()
    return ctx.emit(ctx.op(), [ctx.t(mask, "bool"), ctx.t(value, dt), ctx.t(x, dt)])


@aten("aten.scatter.src", "aten.scatter.value", "aten.scatter_add.default", "aten.scatter.reduce",
      "aten.scatter.value_reduce", "aten.scatter_reduce.two", op="scatter_elements")
def _scatter(ctx: Ctx, x: Any, dim: int, index: Any, src: Any, reduce: Any = None, include_self: bool = True) -> Value:
    dt = ctx.out_dtype()
    r = ctx.rank(x)
    S = ctx.t(src, dt)
    if not isinstance(ctx.v(src), Value) or ctx.rank(src) != ctx.rank(index) or ctx.shape(src) != ctx.shape(index):
        if isinstance(ctx.v(src), Value) and ctx.shape(src) != ctx.shape(index):
            starts = [0] * ctx.rank(index)
            S = ctx.emit("slice", [S, ctx.ints(starts, "s"), ctx.ints(ctx.shape(index), "e"),
                                   ctx.ints(list(range(ctx.rank(index))), "a")])
        else:
            S = ctx.emit("expand", [S, ctx.ints(ctx.shape(index), "shape")])
    red = {"aten.scatter_add.default": "add"}.get(ctx.aten, "none")
    if reduce is not None:
        red = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min"}.get(reduce)
        if red is None:
            raise ctx.fail("unsupported_attribute_value", f"scatter reduce={reduce!r}")
    if r == 0:
        return ctx.emit("identity", [S])
    X, I = ctx.t(x, dt), ctx.t(index, "int64")
    attrs = {"axis": int(dim) % r}
    if not include_self and red != "none":  # the written places start from the reduction's identity
        neutral = {"add": 0.0, "mul": 1.0, "max": -np.inf, "min": np.inf}[red]
        if not dt.startswith("float"):
            info = np.iinfo(self_np(dt))
            neutral = {"add": 0, "mul": 1, "max": info.min, "min": info.max}[red]
        fill = ctx.const(np.full([int(d) for d in ctx.shape(index)], neutral), dt, "neutral")
        X = ctx.emit(ctx.op(), [X, I, fill], {**attrs, "reduction": "none"})
    return ctx.emit(ctx.op(), [X, I, S], {**attrs, "reduction": red})


def self_np(dt: str) -> Any:
    from ..table.dtypes import numpy_dtype

    return numpy_dtype(dt)


@aten("aten.diagonal.default", "aten.diagonal_copy.default", op="gather")
def _diagonal(ctx: Ctx, x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Value:
    """The diagonal of two axes, appended last: the two axes moved last (transpose) and merged
    (reshape), then a gather of the constant flat positions i·B + i + offset."""
    r = ctx.rank(x)
    shape = [int(d) for d in ctx.shape(x)]
    a, b = int(dim1) % r, int(dim2) % r
    others = [i for i in range(r) if i not in (a, b)]
    A, B = shape[a], shape[b]
    off = int(offset)
    rows = range(max(0, -off), max(0, min(A, B - off)))
    flat = [i * B + i + off for i in rows]
    X = ctx.t(x)
    perm = others + [a, b]
    if perm != list(range(r)):
        X = ctx.emit("transpose", [X], {"perm": perm})
    X = ctx.emit("reshape", [X, ctx.ints([shape[o] for o in others] + [A * B], "shape")])
    return ctx.emit(ctx.op(), [X, ctx.const(np.asarray(flat, dtype=np.int64), "int64", "diag")], {"axis": len(others)})


@aten("aten.index_put.default", op="scatter_nd")
def _index_put(ctx: Ctx, x: Any, indices: list, values: Any, accumulate: bool = False) -> Value:
    """x[indices] = values: the indexed axes moved first (transpose), the index tensors broadcast
    and stacked, the values broadcast to the indexing result and laid out the same way,
    scatter_nd, the axes moved back."""

    dt = ctx.out_dtype()
    X, idx, perm, result, b, k = advanced_index(ctx, x, indices)
    X = ctx.cast(X, dt)
    V = ctx.t(values, dt)
    if list(ctx.shape(values)) != result:
        V = ctx.emit("expand", [V, ctx.ints(result, "shape")])
    if k:
        n = len(result)
        V = ctx.emit("transpose", [V], {"perm": list(range(k, k + b)) + list(range(k)) + list(range(k + b, n))})
    Y = ctx.emit(ctx.op(), [X, idx, V], {"reduction": "add" if accumulate else "none"})
    if perm != list(range(len(perm))):
        Y = ctx.emit("transpose", [Y], {"perm": [perm.index(i) for i in range(len(perm))]})
    return Y


@aten("aten.fill.Scalar", "aten.fill.Tensor", "aten.new_zeros.default", "aten.new_ones.default",
      "aten.new_full.default", "aten.new_empty.default", "aten.empty_strided.default", "aten.empty_permuted.default",
      op="constant_of_shape")
def _fill(ctx: Ctx, *args: Any, **kw: Any) -> Value:
    """A tensor of one value: static shape → a constant; ``fill.Tensor``: the value expanded."""
    dt = ctx.out_dtype()
    shape = ctx.shape(ctx.node)
    value = {"aten.new_zeros.default": 0, "aten.new_ones.default": 1, "aten.new_empty.default": 0,
             "aten.empty_strided.default": 0, "aten.empty_permuted.default": 0}.get(ctx.aten)
    if value is None:
        value = args[2] if ctx.aten == "aten.new_full.default" else args[1]
    v = ctx.v(value)
    if isinstance(v, Value):
        return ctx.emit("expand", [ctx.cast(v, dt), ctx.shape_value(shape)])
    if not all(isinstance(d, int) for d in shape):
        raise ctx.fail("dynamic_shape", "a filled tensor of dynamic shape")
    return ctx.const(np.full(shape, v), dt, "fill")


@aten("aten.copy.default", op="expand")
def _copy(ctx: Ctx, x: Any, src: Any, non_blocking: bool = False) -> Value:
    """x's shape and dtype, src's values: src cast and expanded."""
    return ctx.emit(ctx.op(), [ctx.t(src, ctx.out_dtype()), ctx.shape_value(ctx.shape(x))])


@aten("aten.logsumexp.default", op="reduce_log_sum_exp")
def _logsumexp(ctx: Ctx, x: Any, dim: Any = (), keepdim: bool = False) -> Value:
    return _reduce(ctx, x, dim, keepdim)


@aten("aten.col2im.default", op="col2im")
def _col2im(ctx: Ctx, x: Any, output_size: list, kernel: list, dilation: list, padding: list, stride: list) -> Value:
    p = [int(v) for v in padding]
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.ints(output_size, "image"), ctx.ints(kernel, "block")],
                    {"dilations": [int(v) for v in dilation], "pads": p + p, "strides": [int(v) for v in stride]})


@aten("aten.fmin.default", "aten.fmax.default", op="min")
def _fmin(ctx: Ctx, a: Any, b: Any) -> Value:
    """min/max ignoring NaN: where(isnan(a), b, where(isnan(b), a, min(a, b)))."""
    dt = ctx.promote(a, b)
    A, B = ctx.t(a, dt), ctx.t(b, dt)
    m = ctx.emit(ctx.op() if "fmin" in ctx.aten else "max", [A, B])
    if not dt.startswith("float"):
        return m
    m = ctx.emit("where", [ctx.emit("is_nan", [B]), A, m])
    return ctx.emit("where", [ctx.emit("is_nan", [A]), B, m])


@aten("aten.copysign.Tensor", "aten.copysign.Scalar", op="abs")
def _copysign(ctx: Ctx, a: Any, b: Any) -> Value:
    """|a| with b's sign: where(b < 0, -|a|, |a|) (a negative zero in b counts as positive)."""
    dt = ctx.out_dtype()
    m = ctx.emit(ctx.op(), [ctx.t(a, dt)])
    neg = ctx.emit("less", [ctx.t(b, dt), ctx.const(0.0, dt)])
    return ctx.emit("where", [neg, ctx.emit("neg", [m]), m])


@aten("aten.ldexp.Tensor", op="pow")
def _ldexp(ctx: Ctx, a: Any, b: Any) -> Value:
    """a · 2^b."""
    dt = ctx.out_dtype()
    return ctx.emit("mul", [ctx.t(a, dt), ctx.emit(ctx.op(), [ctx.const(2.0, dt), ctx.t(b, dt)])])


@aten("aten.view_copy.default", op="reshape")
def _view_copy(ctx: Ctx, x: Any, shape: list) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.shape_value(shape, minus_one_for_sym=True)])


@aten("aten.narrow_copy.default", op="slice")
def _narrow_copy(ctx: Ctx, x: Any, dim: int, start: int, length: int) -> Value:
    r = ctx.rank(x)
    return ctx.emit(ctx.op(), [ctx.t(x), ctx.ints([int(start)], "s"), ctx.ints([int(start) + int(length)], "e"),
                               ctx.ints([int(dim) % r], "axes")])


@aten("aten.adaptive_max_pool2d.default", "aten.adaptive_max_pool3d.default", op="reduce_max")
def _adaptive_max(ctx: Ctx, x: Any, out_size: list) -> list:
    """Adaptive max pooling (values only: the indices are refused when read)."""
    if ctx.used(1):
        raise ctx.fail("unsupported_attribute_value", "adaptive max pooling indices")
    return [_adaptive_axiswise(ctx, x, out_size, ctx.op()), None]


@aten("aten._native_batch_norm_legit_functional.default", "aten._batch_norm_with_update_functional.default",
      op="batch_normalization")
def _batch_norm_train(ctx: Ctx, x: Any, w: Any, b: Any, rmean: Any, rvar: Any, *rest: Any) -> list:
    """Training-mode batch norm (the batch's own statistics): (x - mean) / sqrt(var + eps) · w + b,
    mean and biased var over every axis but 1; the saved statistics and the updated running
    statistics ((1 - momentum) · running + momentum · batch, the variance unbiased) when read."""
    with_update = "_batch_norm_with_update" in ctx.aten  # (x, w, b, rmean, rvar, momentum, eps)
    momentum, eps = (rest[0], rest[1]) if with_update else (rest[1], rest[2])
    dt = ctx.out_dtype()
    X = ctx.t(x, dt)
    r = ctx.rank(x)
    axes = [a for a in range(r) if a != 1]
    A = ctx.ints(axes, "axes")
    mean = ctx.emit("reduce_mean", [X, A], {"keepdims": 1})
    d = ctx.emit("sub", [X, mean])
    var = ctx.emit("reduce_mean", [ctx.emit("mul", [d, d]), A], {"keepdims": 1})
    rstd = ctx.emit("reciprocal", [ctx.emit("sqrt", [ctx.emit("add", [var, ctx.const(float(eps), dt)])])])
    y = ctx.emit("mul", [d, rstd])
    bshape = [-1] + [1] * (r - 2)
    if w is not None:
        y = ctx.emit("mul", [y, ctx.emit("reshape", [ctx.t(w, dt), ctx.ints(bshape, "shape")])])
    if b is not None:
        y = ctx.emit("add", [y, ctx.emit("reshape", [ctx.t(b, dt), ctx.ints(bshape, "shape")])])
    flat = ctx.ints([-1], "flat")
    outs: list[Any] = [y, None, None]
    if ctx.used(1) or ctx.used(2):
        outs = [y, ctx.emit("reshape", [mean, flat]), ctx.emit("reshape", [rstd, flat])]
    if with_update:
        outs.append(ctx.const(np.zeros(0), "uint8", "reserve"))  # the reserve buffer (empty on CPU)
    first = len(outs)
    if (ctx.used(first) or ctx.used(first + 1)) and rmean is not None and rvar is not None:
        count = int(np.prod([int(ctx.shape(x)[a]) for a in axes]))
        m = float(momentum)
        keep = ctx.const(1.0 - m, dt, "keep")
        mom = ctx.const(m, dt, "momentum")
        unbiased = ctx.emit("mul", [ctx.emit("reshape", [var, flat]), ctx.const(count / max(count - 1, 1), dt, "n")])
        for run, batch in ((rmean, ctx.emit("reshape", [mean, flat])), (rvar, unbiased)):
            outs.append(ctx.emit("add", [ctx.emit("mul", [ctx.t(run, dt), keep]), ctx.emit("mul", [batch, mom])]))
    else:
        outs += [None, None]
    return outs


@aten("aten._native_batch_norm_legit.no_stats", op="batch_normalization")
def _batch_norm_no_stats(ctx: Ctx, x: Any, w: Any, b: Any, training: bool, momentum: float, eps: float) -> list:
    """Batch norm over the batch's own statistics with no running ones (what ``instance_norm``
    and ``group_norm`` decompose to: the input reshaped so each instance is a channel)."""
    return _batch_norm_train(ctx, x, w, b, None, None, training, momentum, eps)[:3]


@aten("aten.erfc.default", op="erf")
def _erfc(ctx: Ctx, x: Any) -> Value:
    """1 - erf(x)."""
    dt = ctx.out_dtype()
    return ctx.emit("sub", [ctx.const(1.0, dt), ctx.emit(ctx.op(), [ctx.t(x, dt)])])


@aten("aten.signbit.default", op="less")
def _signbit(ctx: Ctx, x: Any) -> Value:
    """x < 0 (a negative zero reads as positive)."""
    X = ctx.t(x)
    return ctx.emit(ctx.op(), [X, ctx.const(0, X.type.dtype or "float32")])


@aten("aten.angle.default", op="where")
def _angle(ctx: Ctx, x: Any) -> Value:
    """The angle of a real number: π where x < 0, else 0 (NaN stays NaN)."""
    dt = ctx.out_dtype()
    X = ctx.t(x, dt)
    a = ctx.emit(ctx.op(), [ctx.emit("less", [X, ctx.const(0.0, dt)]), ctx.const(np.pi, dt), ctx.const(0.0, dt)])
    return ctx.emit(ctx.op(), [ctx.emit("is_nan", [X]), X, a]) if dt.startswith("float") else a


@aten("aten.unfold.default", op="gather")
def _unfold(ctx: Ctx, x: Any, dim: int, size: int, step: int) -> Value:
    """Sliding windows: gather with an [n, size] index table on ``dim``, the window axis moved last."""
    r = ctx.rank(x)
    if r == 0:
        return ctx.emit("reshape", [ctx.t(x), ctx.ints([1], "shape")])
    axis = int(dim) % r
    n_in = int(ctx.shape(x)[axis])
    n = (n_in - int(size)) // int(step) + 1
    table = np.arange(n)[:, None] * int(step) + np.arange(int(size))[None, :]
    g = ctx.emit(ctx.op(), [ctx.t(x), ctx.const(table, "int64", "windows")], {"axis": axis})
    perm = list(range(axis + 1)) + list(range(axis + 2, r + 1)) + [axis + 1]
    return ctx.emit("transpose", [g], {"perm": perm})


@aten("aten.slice_scatter.default", "aten.select_scatter.default", op="scatter_elements")
def _slice_scatter(ctx: Ctx, x: Any, src: Any, dim: int = 0, *args: Any) -> Value:
    """x with src written into a slice (select_scatter: one index) of ``dim``: scatter_elements
    with a constant index tensor of src's shape."""
    dt = ctx.out_dtype()
    r = ctx.rank(x)
    axis = int(dim) % r
    n = int(ctx.shape(x)[axis])
    S = ctx.t(src, dt)
    if ctx.aten == "aten.select_scatter.default":
        pos = [int(args[0]) % n]
        S = ctx.emit("unsqueeze", [S, ctx.ints([axis], "axes")])
        shape = list(ctx.shape(src))
        shape.insert(axis, 1)
    else:
        start = 0 if len(args) < 1 or args[0] is None else int(args[0])
        end = n if len(args) < 2 or args[1] is None else int(args[1])
        step = 1 if len(args) < 3 else int(args[2])
        pos = list(range(n))[slice(start, end, step)]
        shape = list(ctx.shape(src))
    if not pos:
        return ctx.emit("identity", [ctx.t(x, dt)])
    view = [1] * r
    view[axis] = len(pos)
    idx = np.broadcast_to(np.asarray(pos, dtype=np.int64).reshape(view), [int(d) for d in shape])
    return ctx.emit(ctx.op(), [ctx.t(x, dt), ctx.const(np.ascontiguousarray(idx), "int64", "index"), S], {"axis": axis})


# ---------------------------------------------------------------------------- creation and sizes
@aten("aten.scalar_tensor.default", op="constant")
def _scalar_tensor(ctx: Ctx, s: Any, **kw: Any) -> Value:
    v = ctx.v(s)
    if isinstance(v, Value):
        return ctx.emit("reshape", [ctx.cast(v, ctx.out_dtype()), ctx.ints([], "scalar")])
    return ctx.const(np.asarray(v), ctx.out_dtype(), "scalar")


@aten("aten.full.default", "aten.zeros.default", "aten.ones.default", "aten.empty.memory_format",
      op="constant_of_shape")
def _full(ctx: Ctx, size: list, value: Any = None, **kw: Any) -> Value:
    """A constant when the size is static; constant_of_shape otherwise. ``empty`` is zeros."""
    dt = ctx.out_dtype()
    fill = {"aten.zeros.default": 0, "aten.ones.default": 1, "aten.empty.memory_format": 0}.get(ctx.aten, value)
    vals = [ctx.v(s) for s in size]
    if all(isinstance(s, int) for s in vals):
        return ctx.const(np.full(vals, fill), dt, "full")
    from ..table.dtypes import numpy_dtype

    return ctx.emit(ctx.op(), [ctx.shape_value(vals)], {"value": np.asarray([fill]).astype(numpy_dtype(dt))})


@aten("aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default", "aten.empty_like.default",
      op="constant_of_shape")
def _full_like(ctx: Ctx, x: Any, value: Any = None, **kw: Any) -> Value:
    fill = {"aten.zeros_like.default": 0, "aten.ones_like.default": 1, "aten.empty_like.default": 0}.get(ctx.aten, value)
    dt = ctx.out_dtype()
    shape = ctx.shape(x)
    if all(isinstance(s, int) for s in shape):
        return ctx.const(np.full(shape, fill), dt, "full")
    from ..table.dtypes import numpy_dtype

    return ctx.emit(ctx.op(), [ctx.emit("shape", [ctx.t(x)])], {"value": np.asarray([fill]).astype(numpy_dtype(dt))})


@aten("aten.arange.start_step", "aten.arange.default", "aten.arange.start", op="range")
def _arange(ctx: Ctx, *args: Any, **kw: Any) -> Value:
    dt = ctx.out_dtype()
    vals = [ctx.v(a) for a in args]
    if ctx.aten == "aten.arange.default":
        vals = [0, vals[0], 1]
    elif ctx.aten == "aten.arange.start":
        vals = [vals[0], vals[1], 1]
    if all(isinstance(v, (int, float)) for v in vals):
        from ..table.dtypes import numpy_dtype

        return ctx.const(np.arange(*vals).astype(numpy_dtype(dt)), dt, "arange")
    parts = [ctx.const(v, dt) if isinstance(v, (int, float)) else
             ctx.emit("reshape", [ctx.cast(v, dt), ctx.ints([], "scalar")]) for v in vals]
    return ctx.emit(ctx.op(), parts)


@aten("aten.sym_size.int", op="shape")
def _sym_size(ctx: Ctx, x: Any, dim: int) -> Any:
    k = static_int(ctx.meta())
    if k is not None:
        return k
    d = int(dim) % ctx.rank(x)
    return ctx.emit(ctx.op(), [ctx.t(x)], {"start": d, "end": d + 1}, types=[TensorType("int64", (1,))])


@aten("aten.sym_numel.default", op="size")
def _sym_numel(ctx: Ctx, x: Any) -> Any:
    k = static_int(ctx.meta())
    if k is not None:
        return k
    return ctx.emit("reshape", [ctx.emit(ctx.op(), [ctx.t(x)]), ctx.ints([1], "shape")])
