"""MIL op evaluators (NumPy): element-wise, activations, reductions, tensor and shape ops.

One function per MIL op type (``mil_eval.op`` registers it), following the op definitions
of coremltools (``coremltools.converters.mil.mil.ops.defs``): arguments by their MIL names,
defaults as documented there. Float math runs in the input's dtype (fp32 as Core ML).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .mil_eval import Args, EvalError, op


def _f(a: Args, name: str = "x") -> np.ndarray:
    return np.asarray(a(name))


def _axis(ax: int, rank: int) -> int:
    return ax + rank if ax < 0 else ax


# ----------------------------------------------------------------------------- element-wise binary
_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "pow": np.power, "mod": np.mod, "floor_div": np.floor_divide,
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
    "greater": np.greater, "greater_equal": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


def _binary(fn: Any) -> Any:
    def run(a: Args) -> np.ndarray:
        x, y = _f(a), _f(a, "y")
        with np.errstate(all="ignore"):
            return fn(x, y)
    return run


for _name, _fn in _BINARY.items():
    op(_name)(_binary(_fn))


@op("real_div")
def real_div(a: Args) -> np.ndarray:
    x, y = _f(a), _f(a, "y")
    with np.errstate(all="ignore"):
        if x.dtype.kind in "iu" and y.dtype.kind in "iu":  # as coremltools' value inference: x / y cast back
            return np.trunc(np.true_divide(x, y)).astype(np.result_type(x, y))
        return np.true_divide(x, y)


# ----------------------------------------------------------------------------- element-wise unary
def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)


_UNARY = {
    "abs": np.abs, "acos": np.arccos, "asin": np.arcsin, "atan": np.arctan, "atanh": np.arctanh,
    "acosh": np.arccosh, "asinh": np.arcsinh, "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh, "erf": _erf,
    "exp": np.exp, "exp2": np.exp2, "floor": np.floor, "round": np.round, "sign": np.sign, "sin": np.sin,
    "sinh": np.sinh, "sqrt": np.sqrt, "square": np.square, "tan": np.tan, "tanh": np.tanh,
    "logical_not": np.logical_not, "identity": lambda x: x, "relu": lambda x: np.maximum(x, 0).astype(x.dtype),
    "relu6": lambda x: np.clip(x, 0, 6).astype(x.dtype), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "softsign": lambda x: x / (1 + np.abs(x)), "silu": lambda x: x / (1 + np.exp(-x)),
    "softplus": lambda x: np.logaddexp(0, x).astype(x.dtype),
}


def _unary(fn: Any) -> Any:
    def run(a: Args) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(_f(a))
    return run


for _name, _fn in _UNARY.items():
    op(_name)(_unary(_fn))


@op("clip")
def clip(a: Args) -> np.ndarray:
    return np.minimum(np.maximum(_f(a), _f(a, "alpha")), _f(a, "beta"))


@op("threshold")
def threshold(a: Args) -> np.ndarray:
    return np.maximum(_f(a), _f(a, "alpha"))


@op("inverse")
def inverse(a: Args) -> np.ndarray:
    x = _f(a)
    with np.errstate(all="ignore"):
        return (1 / (x + x.dtype.type(a.float("epsilon", 1e-4)))).astype(x.dtype)


@op("log")
def log(a: Args) -> np.ndarray:
    x = _f(a)
    with np.errstate(all="ignore"):
        return np.log(x + x.dtype.type(a.float("epsilon", 1e-45)))


@op("rsqrt")
def rsqrt(a: Args) -> np.ndarray:
    x = _f(a)
    with np.errstate(all="ignore"):
        return (1 / np.sqrt(x + x.dtype.type(a.float("epsilon", 1e-12)))).astype(x.dtype)


@op("cast")
def cast(a: Args) -> np.ndarray:
    x = _f(a)
    want = a.out_dtype()
    if np.dtype(want).kind in "iu" and x.dtype.kind == "f":
        x = np.trunc(x)  # float → int truncates toward zero
    return x.astype(want)


# ----------------------------------------------------------------------------- activations
@op("leaky_relu")
def leaky_relu(a: Args) -> np.ndarray:
    x = _f(a)
    return np.where(x >= 0, x, x * x.dtype.type(a.float("alpha", 0.01)))


@op("elu")
def elu(a: Args) -> np.ndarray:
    x = _f(a)
    with np.errstate(all="ignore"):
        return np.where(x > 0, x, x.dtype.type(a.float("alpha", 1.0)) * np.expm1(x)).astype(x.dtype)


@op("gelu")
def gelu(a: Args) -> np.ndarray:
    x = _f(a)
    mode = a.str("mode", "EXACT")
    if mode == "EXACT":
        return (0.5 * x * (1 + _erf(x / np.sqrt(x.dtype.type(2))))).astype(x.dtype)
    if mode == "TANH_APPROXIMATION":
        return (0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))).astype(x.dtype)
    if mode == "SIGMOID_APPROXIMATION":
        return (x / (1 + np.exp(-1.702 * x))).astype(x.dtype)
    raise EvalError(f"gelu mode {mode!r}")


@op("linear_activation")
def linear_activation(a: Args) -> np.ndarray:
    x = _f(a)
    return (x * _f(a, "alpha") + _f(a, "beta")).astype(x.dtype)


@op("scaled_tanh")
def scaled_tanh(a: Args) -> np.ndarray:
    x = _f(a)
    return (_f(a, "alpha") * np.tanh(_f(a, "beta") * x)).astype(x.dtype)


@op("sigmoid_hard")
def sigmoid_hard(a: Args) -> np.ndarray:
    x = _f(a)
    return np.clip(_f(a, "alpha") * x + _f(a, "beta"), 0, 1).astype(x.dtype)


@op("clamped_relu")
def clamped_relu(a: Args) -> np.ndarray:
    x = _f(a)
    y = np.where(x >= 0, x, x * _f(a, "alpha"))
    return np.minimum(y, _f(a, "beta")).astype(x.dtype)


@op("thresholded_relu")
def thresholded_relu(a: Args) -> np.ndarray:
    x = _f(a)
    return np.where(x > x.dtype.type(a.float("alpha", 1.0)), x, 0).astype(x.dtype)


def _per_channel(p: np.ndarray, rank: int) -> np.ndarray:
    return p.reshape((1, -1) + (1,) * (rank - 2)) if p.ndim == 1 and rank >= 2 else p


@op("prelu")
def prelu(a: Args) -> np.ndarray:
    x = _f(a)
    al = _per_channel(_f(a, "alpha"), x.ndim)
    return np.where(x >= 0, x, x * al).astype(x.dtype)


@op("softplus_parametric")
def softplus_parametric(a: Args) -> np.ndarray:
    x = _f(a)
    al, be = _per_channel(_f(a, "alpha"), x.ndim), _per_channel(_f(a, "beta"), x.ndim)
    return (al * np.logaddexp(0, be * x)).astype(x.dtype)


@op("softmax")
def softmax(a: Args) -> np.ndarray:
    x = _f(a)
    ax = a.int("axis", -1)
    e = np.exp(x - np.max(x, axis=ax, keepdims=True))
    return (e / np.sum(e, axis=ax, keepdims=True)).astype(x.dtype)


# ----------------------------------------------------------------------------- reductions
def _axes(a: Args, x: np.ndarray) -> tuple[int, ...]:
    ax = a("axes", None)
    if ax is None:
        return tuple(range(x.ndim))
    return tuple(_axis(int(i), x.ndim) for i in np.asarray(ax).ravel())


def _reduce(fn: Any) -> Any:
    def run(a: Args) -> np.ndarray:
        x = _f(a)
        with np.errstate(all="ignore"):
            r = fn(x, _axes(a, x), a.bool("keep_dims", False))
        return np.asarray(r).astype(x.dtype)
    return run


_REDUCE = {
    "reduce_sum": lambda x, ax, k: np.sum(x, axis=ax, keepdims=k),
    "reduce_mean": lambda x, ax, k: np.mean(x, axis=ax, keepdims=k),
    "reduce_max": lambda x, ax, k: np.max(x, axis=ax, keepdims=k),
    "reduce_min": lambda x, ax, k: np.min(x, axis=ax, keepdims=k),
    "reduce_prod": lambda x, ax, k: np.prod(x, axis=ax, keepdims=k),
    "reduce_l1_norm": lambda x, ax, k: np.sum(np.abs(x), axis=ax, keepdims=k),
    "reduce_l2_norm": lambda x, ax, k: np.sqrt(np.sum(np.square(x), axis=ax, keepdims=k)),
    "reduce_sum_square": lambda x, ax, k: np.sum(np.square(x), axis=ax, keepdims=k),
    "reduce_log_sum": lambda x, ax, k: np.log(np.sum(x, axis=ax, keepdims=k)),
    "reduce_log_sum_exp": lambda x, ax, k: _logsumexp(x, ax, k),
}


def _logsumexp(x: np.ndarray, ax: tuple[int, ...], keep: bool) -> np.ndarray:
    m = np.max(x, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    r = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    return r if keep else np.squeeze(r, axis=ax)


for _name, _fn in _REDUCE.items():
    op(_name)(_reduce(_fn))


def _arg(fn: Any) -> Any:
    def run(a: Args) -> np.ndarray:
        x = _f(a)
        ax = _axis(a.int("axis", -1), x.ndim)
        r = fn(x, axis=ax)
        return np.expand_dims(r, ax) if a.bool("keep_dims", False) else r
    return run


op("reduce_argmax")(_arg(np.argmax))
op("reduce_argmin")(_arg(np.argmin))


# ----------------------------------------------------------------------------- shape and layout
@op("shape")
def shape(a: Args) -> np.ndarray:
    return np.array(_f(a).shape, dtype=np.int32)


@op("reshape")
def reshape(a: Args) -> np.ndarray:
    x = _f(a)
    want = [int(s) for s in _f(a, "shape").ravel()]
    n = len(want)
    for i, s in enumerate(want):
        if s == 0:  # iOS17: matches x.shape counted from the right, else 1
            j = x.ndim - (n - i)
            want[i] = x.shape[j] if 0 <= j < x.ndim else 1
    return x.reshape(want)


@op("expand_dims")
def expand_dims(a: Args) -> np.ndarray:
    x = _f(a)
    axes = a.ints("axes")
    rank = x.ndim + len(axes)
    for ax in sorted(_axis(i, rank) for i in axes):
        x = np.expand_dims(x, ax)
    return x


@op("squeeze")
def squeeze(a: Args) -> np.ndarray:
    x = _f(a)
    axes = a.ints("axes", None)
    if axes is None:
        return np.squeeze(x)
    return np.squeeze(x, axis=tuple(_axis(i, x.ndim) for i in axes))


@op("transpose")
def transpose(a: Args) -> np.ndarray:
    return np.transpose(_f(a), a.ints("perm"))


@op("flatten2d")
def flatten2d(a: Args) -> np.ndarray:
    x = _f(a)
    ax = _axis(a.int("axis", 1), x.ndim)
    return x.reshape(int(np.prod(x.shape[:ax], dtype=np.int64)), -1) if x.size else \
        x.reshape(int(np.prod(x.shape[:ax])), int(np.prod(x.shape[ax:])))


@op("concat")
def concat(a: Args) -> np.ndarray:
    vals = [np.asarray(v) for v in a.many("values")]
    ax = a.int("axis")
    if a.bool("interleave", False):
        ax = _axis(ax, vals[0].ndim)
        stacked = np.stack(vals, axis=ax + 1)
        shp = list(vals[0].shape)
        shp[ax] = -1
        return stacked.reshape(shp)
    return np.concatenate(vals, axis=ax)


@op("split")
def split(a: Args) -> list[np.ndarray]:
    x = _f(a)
    ax = _axis(a.int("axis"), x.ndim)
    sizes = a.ints("split_sizes", None)
    if sizes is None:
        n = a.int("num_splits")
        sizes = [x.shape[ax] // n] * n
    return np.split(x, np.cumsum(sizes)[:-1], axis=ax)


@op("stack")
def stack(a: Args) -> np.ndarray:
    return np.stack([np.asarray(v) for v in a.many("values")], axis=a.int("axis"))


@op("tile")
def tile(a: Args) -> np.ndarray:
    return np.tile(_f(a), a.ints("reps"))


@op("reverse")
def reverse(a: Args) -> np.ndarray:
    x = _f(a)
    axes = a.ints("axes", None)
    return np.flip(x, axis=None if axes is None else tuple(axes)).copy()


@op("reverse_sequence")
def reverse_sequence(a: Args) -> np.ndarray:
    x = _f(a).copy()
    lengths = [int(v) for v in _f(a, "lengths").ravel()]
    sa, ba = _axis(a.int("seq_axis", 0), x.ndim), _axis(a.int("batch_axis", 0), x.ndim)
    out = x.copy()
    for b, n in enumerate(lengths):
        src = [slice(None)] * x.ndim
        src[ba] = b
        src[sa] = slice(0, n)
        out[tuple(src)] = np.flip(x[tuple(src)], axis=sa - (1 if ba < sa else 0))
    return out


@op("slice_by_index")
def slice_by_index(a: Args) -> np.ndarray:
    x = _f(a)
    r = x.ndim
    begin, end = a.ints("begin"), a.ints("end")
    stride = a.ints("stride", [1] * r)
    bm = [bool(v) for v in np.asarray(a("begin_mask", np.zeros(r, bool))).ravel()]
    em = [bool(v) for v in np.asarray(a("end_mask", np.zeros(r, bool))).ravel()]
    sm = [bool(v) for v in np.asarray(a("squeeze_mask", np.zeros(r, bool))).ravel()]
    idx: list[Any] = []
    for i in range(r):
        if sm[i]:
            idx.append(begin[i])
            continue
        b = None if bm[i] else begin[i]
        e = None if em[i] else end[i]
        idx.append(slice(b, e, stride[i]))
    return np.asarray(x[tuple(idx)])


@op("slice_by_size")
def slice_by_size(a: Args) -> np.ndarray:
    x = _f(a)
    begin, size = a.ints("begin"), a.ints("size")
    idx = tuple(slice(b + (x.shape[i] if b < 0 else 0), None if s == -1 else b + (x.shape[i] if b < 0 else 0) + s)
                for i, (b, s) in enumerate(zip(begin, size)))
    return x[idx]


@op("fill")
def fill(a: Args) -> np.ndarray:
    v = np.asarray(a("value", np.float32(0.0)))
    return np.full([int(s) for s in _f(a, "shape").ravel()], v, dtype=a.out_dtype())


@op("fill_like")
def fill_like(a: Args) -> np.ndarray:
    v = np.asarray(a("value", np.float32(0.0)))
    return np.full(_f(a, "ref_tensor").shape, v, dtype=a.out_dtype())


@op("range_1d")
def range_1d(a: Args) -> np.ndarray:
    start, end, step = _f(a, "start"), _f(a, "end"), _f(a, "step")
    return np.arange(start, end, step).astype(np.result_type(start, end, step))


@op("select")
def select(a: Args) -> np.ndarray:
    return np.where(_f(a, "cond").astype(bool), _f(a, "a"), _f(a, "b"))


@op("band_part")
def band_part(a: Args) -> np.ndarray:
    x = _f(a)
    lo, up = a.int("lower", -1), a.int("upper", -1)
    m = np.arange(x.shape[-2])[:, None]
    n = np.arange(x.shape[-1])[None, :]
    keep = ((lo < 0) | (m - n <= lo)) & ((up < 0) | (n - m <= up))
    return np.where(keep, x, np.zeros((), x.dtype))


@op("cumsum")
def cumsum(a: Args) -> np.ndarray:
    x = _f(a)
    ax = _axis(a.int("axis", 0), x.ndim)
    rev = a.bool("reverse", False)
    y = np.flip(x, ax) if rev else x
    c = np.cumsum(y, axis=ax, dtype=x.dtype)
    if a.bool("exclusive", False):
        c = c - y
    return np.flip(c, ax).copy() if rev else c


@op("one_hot")
def one_hot(a: Args) -> np.ndarray:
    idx = _f(a, "indices").astype(np.int64)
    depth = a.int("one_hot_vector_size")
    on, off = _f(a, "on_value") if a.has("on_value") else 1, _f(a, "off_value") if a.has("off_value") else 0
    ax = _axis(a.int("axis", -1), idx.ndim + 1)
    hot = np.expand_dims(idx, ax) == np.arange(depth).reshape([-1 if i == ax else 1 for i in range(idx.ndim + 1)])
    return np.where(hot, on, off).astype(a.out_dtype())


@op("non_zero")
def non_zero(a: Args) -> np.ndarray:
    return np.argwhere(_f(a)).astype(np.int32)


@op("argsort")
def argsort(a: Args) -> np.ndarray:
    x = _f(a)
    ax = a.int("axis", -1)
    if a.bool("ascending", False):
        return np.argsort(x, axis=ax, kind="stable").astype(np.int32)
    return np.argsort(-x if x.dtype.kind == "f" else -x.astype(np.int64), axis=ax, kind="stable").astype(np.int32)


@op("topk")
def topk(a: Args) -> Any:
    x = _f(a)
    ax = _axis(a.int("axis", -1), x.ndim)
    k = a.int("k", 1)
    k = x.shape[ax] if k == -1 else k
    asc = a.bool("ascending", False)
    key = x if asc else (-x if x.dtype.kind == "f" else -x.astype(np.int64))
    order = np.argsort(key, axis=ax, kind="stable")
    idx = np.take(order, np.arange(k), axis=ax)
    vals = np.take_along_axis(x, idx, axis=ax)
    if len(a.outs) == 1:
        return vals
    return vals, idx.astype(a.out_dtype(1))


# ----------------------------------------------------------------------------- gather and scatter
def _positive(idx: np.ndarray, n: int) -> np.ndarray:
    idx = idx.astype(np.int64)
    return np.where(idx < 0, idx + n, idx)


@op("gather")
def gather(a: Args) -> np.ndarray:
    x, idx = _f(a), _f(a, "indices")
    ax = _axis(a.int("axis", 0), x.ndim)
    bd = a.int("batch_dims", 0)
    idx = _positive(idx, x.shape[ax])
    if bd == 0:
        return np.take(x, idx, axis=ax)
    lead = x.shape[:bd]
    out = [np.take(x[b], idx[b], axis=ax - bd) for b in np.ndindex(*lead)]
    return np.stack(out).reshape(lead + out[0].shape) if out else np.zeros((0,), x.dtype)


@op("gather_along_axis")
def gather_along_axis(a: Args) -> np.ndarray:
    x = _f(a)
    ax = _axis(a.int("axis", 0), x.ndim)
    return np.take_along_axis(x, _positive(_f(a, "indices"), x.shape[ax]), axis=ax)


@op("gather_nd")
def gather_nd(a: Args) -> np.ndarray:
    x, idx = _f(a), _f(a, "indices").astype(np.int64)
    bd = a.int("batch_dims", 0)
    lead = x.shape[:bd]
    k = idx.shape[-1]
    inner = x.shape[bd + k:]
    out = np.empty(idx.shape[:-1] + inner, dtype=x.dtype)
    for pos in np.ndindex(*idx.shape[:-1]):
        b = pos[:bd]
        where = tuple(int(i) + (x.shape[bd + j] if i < 0 else 0) for j, i in enumerate(idx[pos]))
        out[pos] = x[b + where]
    assert out.shape[:bd] == lead
    return out


_SCATTER = {"update": lambda old, new: new, "add": np.add, "sub": np.subtract, "mul": np.multiply,
            "div": np.true_divide, "max": np.maximum, "min": np.minimum}


def _mode(a: Args, default: str) -> Any:
    m = a.str("mode", default)
    if m not in _SCATTER:
        raise EvalError(f"scatter mode {m!r}")
    return _SCATTER[m]


@op("scatter")
def scatter(a: Args) -> np.ndarray:
    data = _f(a, "data").copy()
    ax = _axis(a.int("axis", 0), data.ndim)
    idx = _positive(_f(a, "indices"), data.shape[ax]).ravel()
    upd = _f(a, "updates")
    f = _mode(a, "add")
    for j, i in enumerate(idx):
        dst = [slice(None)] * data.ndim
        dst[ax] = int(i)
        src = [slice(None)] * upd.ndim
        src[ax] = j
        data[tuple(dst)] = f(data[tuple(dst)], upd[tuple(src)])
    return data


@op("scatter_along_axis")
def scatter_along_axis(a: Args) -> np.ndarray:
    data = _f(a, "data").copy()
    ax = _axis(a.int("axis", 0), data.ndim)
    idx = _positive(_f(a, "indices"), data.shape[ax])
    upd = _f(a, "updates")
    f = _mode(a, "add")
    for pos in np.ndindex(*idx.shape):
        dst = list(pos)
        dst[ax] = int(idx[pos])
        data[tuple(dst)] = f(data[tuple(dst)], upd[pos])
    return data


@op("scatter_nd")
def scatter_nd(a: Args) -> np.ndarray:
    data = _f(a, "data").copy()
    idx = _f(a, "indices").astype(np.int64)
    upd = _f(a, "updates")
    f = _mode(a, "add")
    for pos in np.ndindex(*idx.shape[:-1]):
        where = tuple(int(i) + (data.shape[j] if i < 0 else 0) for j, i in enumerate(idx[pos]))
        data[where] = f(data[where], upd[pos])
    return data


# ----------------------------------------------------------------------------- space and depth
@op("depth_to_space")
def depth_to_space(a: Args) -> np.ndarray:
    x = _f(a)
    b = a.int("block_size")
    n, c, h, w = x.shape
    y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(n, c // (b * b), h * b, w * b)


@op("space_to_depth")
def space_to_depth(a: Args) -> np.ndarray:
    x = _f(a)
    b = a.int("block_size")
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)


@op("pixel_shuffle")
def pixel_shuffle(a: Args) -> np.ndarray:
    x = _f(a)
    r = a.int("upscale_factor")
    n, c, h, w = x.shape
    y = x.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (r * r), h * r, w * r)


@op("pixel_unshuffle")
def pixel_unshuffle(a: Args) -> np.ndarray:
    x = _f(a)
    r = a.int("downscale_factor")
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4)
    return y.reshape(n, c * r * r, h // r, w // r)


@op("space_to_batch")
def space_to_batch(a: Args) -> np.ndarray:
    x = _f(a)
    bs = a.ints("block_shape")
    pads = np.asarray(a("paddings")).reshape(2, 2)
    x = np.pad(x, [(0, 0), (0, 0), tuple(pads[0]), tuple(pads[1])])
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // bs[0], bs[0], w // bs[1], bs[1]).transpose(3, 5, 0, 1, 2, 4)
    return y.reshape(n * bs[0] * bs[1], c, h // bs[0], w // bs[1])


@op("batch_to_space")
def batch_to_space(a: Args) -> np.ndarray:
    x = _f(a)
    bs = a.ints("block_shape")
    crops = np.asarray(a("crops")).reshape(2, 2)
    n, c, h, w = x.shape
    nb = n // (bs[0] * bs[1])
    y = x.reshape(bs[0], bs[1], nb, c, h, w).transpose(2, 3, 4, 0, 5, 1).reshape(nb, c, h * bs[0], w * bs[1])
    return y[:, :, crops[0, 0]:h * bs[0] - crops[0, 1], crops[1, 0]:w * bs[1] - crops[1, 1]]


# ----------------------------------------------------------------------------- lists (loops and sequences)
@op("make_list")
def make_list(a: Args) -> list:
    # elem_shape: one int32 tensor, or (as the builder writes a Python list) one scalar per dim; a
    # string dim is a symbol (the elements' run-time size): no element exists before it is written
    shape = [v for e in a.many("elem_shape") for v in np.asarray(e).ravel()] if a.has("elem_shape") else None
    shape = None if shape is None or any(isinstance(v, (str, np.str_)) for v in shape) else [int(v) for v in shape]
    dt = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32, "bool": np.bool_}[a.str("dtype", "fp32")]
    n = a.int("init_length", 1)
    return [np.zeros(shape, dt) if shape is not None else None for _ in range(n)]


@op("list_length")
def list_length(a: Args) -> np.ndarray:
    return np.int32(len(a("ls")))


@op("list_read")
def list_read(a: Args) -> np.ndarray:
    v = a("ls")[a.int("index")]
    if v is None:
        raise EvalError("list_read of an element never written")
    return v


@op("list_write")
def list_write(a: Args) -> list:
    ls, i = list(a("ls")), a.int("index")
    ls.extend([None] * (i + 1 - len(ls)))
    ls[i] = np.asarray(a("value"))
    return ls


@op("list_gather")
def list_gather(a: Args) -> np.ndarray:
    ls = a("ls")
    idx = [int(i) for i in np.asarray(a("indices")).ravel()]
    if not idx:  # nothing gathered (a loop that ran zero times): [0, *element shape]
        elem = next((np.asarray(v) for v in ls if v is not None), None)
        if elem is None:
            raise EvalError("list_gather of no indices from a list without an element shape")
        return np.zeros((0, *elem.shape), elem.dtype)
    return np.stack([ls[i] for i in idx])


@op("list_scatter")
def list_scatter(a: Args) -> list:
    ls, vals = list(a("ls")), np.asarray(a("value"))
    for j, i in enumerate(int(v) for v in np.asarray(a("indices")).ravel()):
        ls.extend([None] * (i + 1 - len(ls)))
        ls[i] = vals[j]
    return ls


__all__: list[str] = []
