"""MIL op evaluators (NumPy): convolution, pooling, normalization, linear algebra, padding,
resizing, recurrences, attention, quantization and lists.

One function per MIL op type, semantics from coremltools' op definitions (weight layouts:
conv ``[C_out, C_in/groups, *K]``, conv_transpose ``[C_in, C_out/groups, *K]``; pads
``[before_0, after_0, before_1, ...]`` over the spatial dims; lstm gates ``i, f, o, z``,
gru gates ``r, o, z`` with ``o = act(W_o x + R_o (r * h) + b_o)``). Sums run in float64 and
are returned in the input's dtype.
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .mil_eval import Args, EvalError, op


def _f(a: Args, name: str = "x") -> np.ndarray:
    return np.asarray(a(name))


# ----------------------------------------------------------------------------- padding of windows
def _pads(a: Args, spatial: tuple[int, ...], kernel: list[int], strides: list[int],
          dil: list[int]) -> list[tuple[int, int]]:
    kind = a.str("pad_type", "valid")
    d = len(spatial)
    if kind == "valid":
        return [(0, 0)] * d
    if kind == "custom":
        p = a.ints("pad", [0] * (2 * d))
        return [(p[2 * i], p[2 * i + 1]) for i in range(d)]
    if kind in ("same", "same_lower"):
        out = []
        for n, k, s, dl in zip(spatial, kernel, strides, dil):
            ek = (k - 1) * dl + 1
            total = max(0, s * math.ceil(n / s) - n + ek - s)
            small = total // 2
            out.append((small, total - small) if kind == "same" else (total - small, small))
        return out
    raise EvalError(f"pad_type {kind!r}")


def _windows(x: np.ndarray, kernel: list[int], strides: list[int], dil: list[int]) -> np.ndarray:
    """[n, C, *out, *kernel] windows of the (already padded) ``x``."""
    d = len(kernel)
    ek = [(k - 1) * dl + 1 for k, dl in zip(kernel, dil)]
    w = sliding_window_view(x, ek, axis=tuple(range(2, 2 + d)))
    idx = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + \
        tuple(slice(None, None, dl) for dl in dil)
    return w[idx]


# ----------------------------------------------------------------------------- convolution
def _conv_attrs(a: Args) -> tuple[np.ndarray, np.ndarray, int, list[int], list[int], list[int], int]:
    """conv/conv_transpose: x, weight, spatial rank, kernel, strides, dilations, groups."""
    x, w = _f(a), _f(a, "weight")
    d = x.ndim - 2
    return x, w, d, list(w.shape[2:]), a.ints("strides", [1] * d), a.ints("dilations", [1] * d), a.int("groups", 1)


@op("conv")
def conv(a: Args) -> np.ndarray:
    x, w, d, kernel, strides, dil, g = _conv_attrs(a)
    pads = _pads(a, x.shape[2:], kernel, strides, dil)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + pads)
    win = _windows(xp, kernel, strides, dil)  # [n, C, *out, *k]
    cin_g, cout_g = x.shape[1] // g, w.shape[0] // g
    outs = []
    for i in range(g):
        wi = win[:, i * cin_g:(i + 1) * cin_g]
        ki = w[i * cout_g:(i + 1) * cout_g].astype(np.float64)
        r = np.tensordot(wi, ki, axes=([1] + list(range(2 + d, 2 + 2 * d)), [1] + list(range(2, 2 + d))))
        outs.append(np.moveaxis(r, -1, 1))  # [n, cout_g, *out]
    y = np.concatenate(outs, axis=1)
    if a.has("bias") and a("bias") is not None:
        y = y + np.asarray(a("bias"), np.float64).reshape((1, -1) + (1,) * d)
    return y.astype(x.dtype)


@op("conv_transpose")
def conv_transpose(a: Args) -> np.ndarray:
    x, w, d, kernel, strides, dil, g = _conv_attrs(a)
    n, cin = x.shape[:2]
    cin_g, cout_g = cin // g, w.shape[1]
    full = [(i - 1) * s + (k - 1) * dl + 1 for i, s, k, dl in zip(x.shape[2:], strides, kernel, dil)]
    y = np.zeros((n, cout_g * g, *full), np.float64)
    xd = x.astype(np.float64)
    for i in range(g):
        xi = xd[:, i * cin_g:(i + 1) * cin_g]
        wi = w[i * cin_g:(i + 1) * cin_g].astype(np.float64)  # [cin_g, cout_g, *k]
        for kpos in itertools.product(*[range(k) for k in kernel]):
            contrib = np.tensordot(xi, wi[(slice(None), slice(None)) + kpos], axes=([1], [0]))  # [n, *in, cout_g]
            contrib = np.moveaxis(contrib, -1, 1)
            dst = (slice(None), slice(i * cout_g, (i + 1) * cout_g)) + tuple(
                slice(kp * dl, kp * dl + (sz - 1) * s + 1, s)
                for kp, dl, sz, s in zip(kpos, dil, x.shape[2:], strides))
            y[dst] += contrib
    kind = a.str("pad_type", "valid")
    want = a.ints("output_shape", None)
    if kind == "custom":
        p = a.ints("pad", [0] * (2 * d))
        pads = [(p[2 * j], p[2 * j + 1]) for j in range(d)]
    elif kind == "valid":
        pads = [(0, 0)] * d
    elif kind == "same":
        tot = [f - i * s for f, i, s in zip(full, x.shape[2:], strides)]
        pads = [(t // 2, t - t // 2) for t in tot]
    else:
        raise EvalError(f"conv_transpose pad_type {kind!r}")
    sizes = [f - b - e for f, (b, e) in zip(full, pads)] if not want else list(want[-d:])
    out = np.zeros((n, cout_g * g, *sizes), np.float64)
    src = tuple(slice(b, min(b + sz, f)) for (b, _), sz, f in zip(pads, sizes, full))
    got = y[(slice(None), slice(None)) + src]
    out[(slice(None), slice(None)) + tuple(slice(0, s) for s in got.shape[2:])] = got
    if a.has("bias"):
        out = out + np.asarray(a("bias"), np.float64).reshape((1, -1) + (1,) * d)
    return out.astype(x.dtype)


# ----------------------------------------------------------------------------- pooling
def _pool(a: Args, kind: str) -> np.ndarray:
    x = _f(a)
    d = x.ndim - 2
    kernel = a.ints("kernel_sizes")
    strides = a.ints("strides", [1] * d)
    pads = _pads(a, x.shape[2:], kernel, strides, [1] * d)
    if a.bool("ceil_mode", False):
        extra = []
        for n, k, s, (b, e) in zip(x.shape[2:], kernel, strides, pads):
            o = math.ceil((n + b + e - k) / s) + 1
            if (o - 1) * s >= n + b and b + e > 0:
                o -= 1
            extra.append(max(0, (o - 1) * s + k - (n + b + e)))
    else:
        extra = [0] * d
    fill = -np.inf if kind == "max" else 0.0
    xd = x.astype(np.float64)
    xp = np.pad(xd, [(0, 0), (0, 0)] + [(b, e + x_) for (b, e), x_ in zip(pads, extra)], constant_values=fill)
    win = _windows(xp, kernel, strides, [1] * d)
    axes = tuple(range(2 + d, 2 + 2 * d))
    if kind == "max":
        return win.max(axis=axes).astype(x.dtype)
    if kind == "l2":
        return np.sqrt(np.square(win).sum(axis=axes)).astype(x.dtype)
    s = win.sum(axis=axes)
    if a.bool("exclude_padding_from_average", False):
        ones = np.pad(np.ones((1, 1) + x.shape[2:]), [(0, 0), (0, 0)] + [(b, e + x_) for (b, e), x_ in zip(pads, extra)])
    else:  # the padded area counts, the ceil-mode extension does not
        ones = np.pad(np.ones((1, 1) + tuple(n + b + e for n, (b, e) in zip(x.shape[2:], pads))),
                      [(0, 0), (0, 0)] + [(0, x_) for x_ in extra])
    cnt = _windows(ones, kernel, strides, [1] * d).sum(axis=axes)
    return (s / cnt).astype(x.dtype)


op("max_pool")(lambda a: _pool(a, "max"))
op("avg_pool")(lambda a: _pool(a, "avg"))
op("l2_pool")(lambda a: _pool(a, "l2"))


# ----------------------------------------------------------------------------- normalization
def _chan(p: Any, rank: int) -> np.ndarray:
    return np.asarray(p, np.float64).reshape((1, -1) + (1,) * (rank - 2))


@op("batch_norm")
def batch_norm(a: Args) -> np.ndarray:
    x = _f(a)
    r = x.ndim
    y = (x - _chan(a("mean"), r)) / np.sqrt(_chan(a("variance"), r) + a.float("epsilon", 1e-5))
    if a.has("gamma"):
        y = y * _chan(a("gamma"), r)
    if a.has("beta"):
        y = y + _chan(a("beta"), r)
    return y.astype(x.dtype)


@op("instance_norm")
def instance_norm(a: Args) -> np.ndarray:
    x = _f(a)
    xd = x.astype(np.float64)
    ax = tuple(range(2, x.ndim))
    y = (xd - xd.mean(axis=ax, keepdims=True)) / np.sqrt(xd.var(axis=ax, keepdims=True) + a.float("epsilon", 1e-5))
    if a.has("gamma"):
        y = y * _chan(a("gamma"), x.ndim)
    if a.has("beta"):
        y = y + _chan(a("beta"), x.ndim)
    return y.astype(x.dtype)


@op("layer_norm")
def layer_norm(a: Args) -> np.ndarray:
    x = _f(a)
    xd = x.astype(np.float64)
    axes = a.ints("axes", None)
    ax = tuple(range(x.ndim)) if axes is None else tuple(sorted(i % x.ndim for i in axes))
    y = (xd - xd.mean(axis=ax, keepdims=True)) / np.sqrt(xd.var(axis=ax, keepdims=True) + a.float("epsilon", 1e-5))
    shp = [x.shape[i] if i in ax else 1 for i in range(x.ndim)]
    if a.has("gamma"):
        y = y * np.asarray(a("gamma"), np.float64).reshape(shp)
    if a.has("beta"):
        y = y + np.asarray(a("beta"), np.float64).reshape(shp)
    return y.astype(x.dtype)


@op("l2_norm")
def l2_norm(a: Args) -> np.ndarray:
    x = _f(a)
    xd = x.astype(np.float64)
    ax = tuple(range(max(0, x.ndim - 3), x.ndim))
    return (xd / np.sqrt(np.square(xd).sum(axis=ax, keepdims=True) + a.float("epsilon", 1e-6))).astype(x.dtype)


@op("local_response_norm")
def local_response_norm(a: Args) -> np.ndarray:
    x = _f(a)
    size = a.int("size")
    alpha, beta, k = a.float("alpha", 1e-4), a.float("beta", 0.75), a.float("k", 1.0)
    sq = np.square(x.astype(np.float64))
    c = x.shape[1]
    acc = np.zeros_like(sq)
    lo, hi = (size - 1) // 2, size // 2
    for i in range(c):
        acc[:, i] = sq[:, max(0, i - lo):min(c, i + hi + 1)].sum(axis=1)
    return (x / (k + alpha / size * acc) ** beta).astype(x.dtype)


# ----------------------------------------------------------------------------- linear algebra
@op("matmul")
def matmul(a: Args) -> np.ndarray:
    x, y = _f(a), _f(a, "y")
    if a.bool("transpose_x", False) and x.ndim > 1:
        x = np.swapaxes(x, -1, -2)
    if a.bool("transpose_y", False) and y.ndim > 1:
        y = np.swapaxes(y, -1, -2)
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        return np.matmul(x.astype(np.int64), y.astype(np.int64))
    return np.matmul(x.astype(np.float64), y.astype(np.float64)).astype(a.out_dtype())


@op("linear")
def linear(a: Args) -> np.ndarray:
    x, w = _f(a), _f(a, "weight")
    y = np.matmul(x.astype(np.float64), w.astype(np.float64).T)
    if a.has("bias"):
        y = y + np.asarray(a("bias"), np.float64)
    return y.astype(x.dtype)


@op("einsum")
def einsum(a: Args) -> np.ndarray:
    vals = [np.asarray(v) for v in a.many("values")]
    return np.einsum(a.str("equation"), *[v.astype(np.float64) for v in vals]).astype(vals[0].dtype)


@op("scaled_dot_product_attention")
def sdpa(a: Args) -> np.ndarray:
    q, k, v = (_f(a, n).astype(np.float64) for n in ("query", "key", "value"))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if a.has("attn_mask"):
        m = _f(a, "attn_mask")
        s = np.where(m, s, -np.inf) if m.dtype == np.bool_ else s + m
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return ((s / s.sum(axis=-1, keepdims=True)) @ v).astype(_f(a, "query").dtype)


# ----------------------------------------------------------------------------- padding
@op("pad")
def pad(a: Args) -> np.ndarray:
    x = _f(a)
    p = a.ints("pad")
    n = len(p) // 2
    width = [(0, 0)] * (x.ndim - n) + [(p[2 * i], p[2 * i + 1]) for i in range(n)]
    mode = a.str("mode", "constant")
    if mode == "constant":
        return np.pad(x, width, constant_values=np.asarray(a("constant_val", 0)).astype(x.dtype))
    if mode == "reflect":
        return np.pad(x, width, mode="reflect")
    if mode == "replicate":
        return np.pad(x, width, mode="edge")
    raise EvalError(f"pad mode {mode!r}")


# ----------------------------------------------------------------------------- resizing
def _grid(n_in: int, n_out: int, mode: str) -> np.ndarray:
    i = np.arange(n_out, dtype=np.float64)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if n_out == 1:
            g = np.array([0.0 if mode == "STRICT_ALIGN_CORNERS" else (n_in - 1) / 2])
        else:
            g = i * (n_in - 1) / (n_out - 1)
    elif mode == "DEFAULT":
        g = i * ((n_in - n_in / n_out) / (n_out - 1)) if n_out > 1 else np.zeros(1)
    elif mode == "OFFSET_CORNERS":
        delta = max(1, n_in - 1) / n_out
        g = 0.5 * delta + i * delta
    elif mode == "UNALIGN_CORNERS":
        sp = n_in / n_out
        g = i * sp + 0.5 * sp - 0.5
    else:
        raise EvalError(f"sampling_mode {mode!r}")
    return np.clip(g, 0, n_in - 1)


def _lerp_axis(x: np.ndarray, axis: int, g: np.ndarray) -> np.ndarray:
    lo = np.floor(g).astype(np.int64)
    hi = np.minimum(lo + 1, x.shape[axis] - 1)
    t = (g - lo).reshape([-1 if i == axis % x.ndim else 1 for i in range(x.ndim)])
    return np.take(x, lo, axis=axis) * (1 - t) + np.take(x, hi, axis=axis) * t


def _bilinear(x: np.ndarray, h: int, w: int, mode: str) -> np.ndarray:
    y = _lerp_axis(x.astype(np.float64), -2, _grid(x.shape[-2], h, mode))
    return _lerp_axis(y, -1, _grid(x.shape[-1], w, mode)).astype(x.dtype)


@op("resize_bilinear")
def resize_bilinear(a: Args) -> np.ndarray:
    return _bilinear(_f(a), a.int("target_size_height", 1), a.int("target_size_width", 1),
                     a.str("sampling_mode", "DEFAULT"))


def _nearest_idx(n_in: int, n_out: int, scale: float) -> np.ndarray:
    """upsample_nearest_neighbor: output i reads floor(i / scale)."""
    return np.minimum(np.floor(np.arange(n_out) / scale).astype(np.int64), n_in - 1)


def _half_pixel_idx(n_in: int, n_out: int) -> np.ndarray:
    """resize_nearest_neighbor (TF's half_pixel_centers, as coremltools' TF frontend maps it):
    output i reads floor((i + 0.5) * n_in / n_out)."""
    return np.minimum(np.floor((np.arange(n_out) + 0.5) * n_in / n_out).astype(np.int64), n_in - 1)


@op("resize_nearest_neighbor")
def resize_nearest_neighbor(a: Args) -> np.ndarray:
    x = _f(a)
    h, w = a.int("target_size_height"), a.int("target_size_width")
    y = np.take(x, _half_pixel_idx(x.shape[-2], h), axis=-2)
    return np.take(y, _half_pixel_idx(x.shape[-1], w), axis=-1)


@op("upsample_nearest_neighbor")
def upsample_nearest_neighbor(a: Args) -> np.ndarray:
    x = _f(a)
    sh, sw = a.float("scale_factor_height", 1), a.float("scale_factor_width", 1)
    h, w = int(math.floor(x.shape[-2] * sh)), int(math.floor(x.shape[-1] * sw))
    y = np.take(x, _nearest_idx(x.shape[-2], h, sh), axis=-2)
    return np.take(y, _nearest_idx(x.shape[-1], w, sw), axis=-1)


@op("upsample_bilinear")
def upsample_bilinear(a: Args) -> np.ndarray:
    x = _f(a)
    sh, sw = a.float("scale_factor_height", 1), a.float("scale_factor_width", 1)
    align = a.bool("align_corners", True)
    half = a.bool("half_pixel_centers", not align)
    h, w = int(math.floor(x.shape[-2] * sh)), int(math.floor(x.shape[-1] * sw))

    def grid(n_in: int, n_out: int, s: float) -> np.ndarray:
        i = np.arange(n_out, dtype=np.float64)
        if align:
            g = i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(1)
        elif half:
            g = (i + 0.5) / s - 0.5
        else:
            g = i / s
        return np.clip(g, 0, n_in - 1)

    y = _lerp_axis(x.astype(np.float64), -2, grid(x.shape[-2], h, sh))
    return _lerp_axis(y, -1, grid(x.shape[-1], w, sw)).astype(x.dtype)


@op("resize")
def resize(a: Args) -> np.ndarray:
    x = _f(a)
    shape = [int(v) for v in _f(a, "shape").ravel()]
    k = a.int("resized_dims")
    if k != 2 or x.ndim < 2:
        raise EvalError(f"resize of {k} dims")
    h, w = (s if s else x.shape[x.ndim - 2 + i] for i, s in enumerate(shape[-2:]))
    mode = a.str("interpolation_mode", "LINEAR")
    if mode == "LINEAR":
        return _bilinear(x, h, w, a.str("sampling_mode", "DEFAULT"))
    if mode == "NEAREST_NEIGHBOR":
        y = np.take(x, _half_pixel_idx(x.shape[-2], h), axis=-2)
        return np.take(y, _half_pixel_idx(x.shape[-1], w), axis=-1)
    raise EvalError(f"resize interpolation_mode {mode!r}")


@op("crop")
def crop(a: Args) -> np.ndarray:
    x = _f(a)
    (t, b), (le, r) = a.ints("crop_height"), a.ints("crop_width")
    return x[..., t:x.shape[-2] - b, le:x.shape[-1] - r]


# ----------------------------------------------------------------------------- recurrences
_ACTS = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh, "relu": lambda v: np.maximum(v, 0),
         "linear": lambda v: v, "softsign": lambda v: v / (1 + np.abs(v)),
         "hard_sigmoid": lambda v: np.clip(0.2 * v + 0.5, 0, 1)}


def _act(a: Args, name: str, default: str) -> Any:
    k = a.str(name, default).lower()
    if k not in _ACTS:
        raise EvalError(f"activation {k!r}")
    return _ACTS[k]


def _steps(a: Args, x: np.ndarray) -> list[int]:
    d = a.str("direction", "forward")
    if d == "bidirectional":
        raise EvalError("bidirectional recurrences are not evaluated")
    return list(range(x.shape[0]))[::-1] if d == "reverse" else list(range(x.shape[0]))


def _result(a: Args, x: np.ndarray, seq: list[np.ndarray], states: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    out = np.stack(seq) if a.bool("output_sequence", False) else seq[-1][None]
    return tuple(v.astype(x.dtype) for v in [out, *states])


@op("lstm")
def lstm(a: Args) -> tuple[np.ndarray, ...]:
    x = _f(a)
    xd = x.astype(np.float64)
    wi, wh = _f(a, "weight_ih").astype(np.float64), _f(a, "weight_hh").astype(np.float64)
    hsz = wh.shape[1]
    b = np.asarray(a("bias", np.zeros(4 * hsz)), np.float64)
    pp = np.asarray(a("peephole", np.zeros(3 * hsz)), np.float64)
    h = np.asarray(a("initial_h"), np.float64)
    c = np.asarray(a("initial_c"), np.float64)
    ra, ca, ha = _act(a, "recurrent_activation", "sigmoid"), _act(a, "cell_activation", "tanh"), _act(a, "activation", "tanh")
    clip = a.float("clip", None)
    seq = []
    for t in _steps(a, x):
        g = xd[t] @ wi.T + h @ wh.T + b
        gi, gf, go, gz = np.split(g, 4, axis=-1)
        if clip is not None:
            gi, gf, go, gz = (np.clip(v, -clip, clip) for v in (gi, gf, go, gz))
        i = ra(gi + pp[:hsz] * c)
        f = ra(gf + pp[hsz:2 * hsz] * c)
        c = f * c + i * ca(gz)
        o = ra(go + pp[2 * hsz:] * c)
        h = o * ha(c)
        seq.append(h)
    return _result(a, x, seq, [h, c])


@op("gru")
def gru(a: Args) -> tuple[np.ndarray, ...]:
    x = _f(a)
    xd = x.astype(np.float64)
    wi, wh = _f(a, "weight_ih").astype(np.float64), _f(a, "weight_hh").astype(np.float64)
    hsz = wh.shape[1]
    b = np.asarray(a("bias", np.zeros(3 * hsz)), np.float64)
    bi = np.asarray(a("input_bias", np.zeros(3 * hsz)), np.float64)
    after = a.bool("reset_after", False)
    h = np.asarray(a("initial_h"), np.float64)
    ra, oa = _act(a, "recurrent_activation", "sigmoid"), _act(a, "activation", "tanh")
    seq = []
    for t in _steps(a, x):
        gx = xd[t] @ wi.T + bi
        wr, wo, wz = np.split(wh, 3, axis=0)
        br, bo, bz = np.split(b, 3)
        xr, xo, xz = np.split(gx, 3, axis=-1)
        r = ra(xr + h @ wr.T + br)
        z = ra(xz + h @ wz.T + bz)
        o = oa(xo + r * (h @ wo.T + bo)) if after else oa(xo + (r * h) @ wo.T + bo)
        h = (1 - z) * o + z * h
        seq.append(h)
    return _result(a, x, seq, [h])


@op("rnn")
def rnn(a: Args) -> tuple[np.ndarray, ...]:
    x = _f(a)
    xd = x.astype(np.float64)
    wi, wh = _f(a, "weight_ih").astype(np.float64), _f(a, "weight_hh").astype(np.float64)
    b = np.asarray(a("bias", np.zeros(wh.shape[0])), np.float64)
    h = np.asarray(a("initial_h"), np.float64)
    act = _act(a, "activation", "tanh")
    seq = []
    for t in _steps(a, x):
        h = act(xd[t] @ wi.T + h @ wh.T + b)
        seq.append(h)
    return _result(a, x, seq, [h])


# ----------------------------------------------------------------------------- quantization
def _axis_param(p: Any, x: np.ndarray, ax: int | None) -> np.ndarray:
    p = np.asarray(p)
    if p.ndim == 0 or ax is None:
        return p
    return p.reshape([-1 if i == ax % x.ndim else 1 for i in range(x.ndim)])


@op("quantize")
def quantize(a: Args) -> np.ndarray:
    x = _f(a, "input").astype(np.float64)
    ax = a.int("axis", None)
    s = _axis_param(a("scale"), x, ax).astype(np.float64)
    z = _axis_param(a("zero_point", 0), x, ax).astype(np.float64)
    dt = a.out_dtype()
    info = np.iinfo(dt)
    return np.clip(np.round(x / s) + z, info.min, info.max).astype(dt)


@op("dequantize")
def dequantize(a: Args) -> np.ndarray:
    x = _f(a, "input").astype(np.float64)
    ax = a.int("axis", None)
    s = _axis_param(a("scale"), x, ax).astype(np.float64)
    z = _axis_param(a("zero_point", 0), x, ax).astype(np.float64)
    return ((x - z) * s).astype(a.out_dtype())


@op("constexpr_affine_dequantize")
def constexpr_affine_dequantize(a: Args) -> np.ndarray:
    q = np.asarray(a.op.attrs.get("quantized_data", a("quantized_data", None)))
    ax = int(np.asarray(a.op.attrs.get("axis", a("axis", 0))))
    s = _axis_param(a.op.attrs.get("scale", a("scale", None)), q, ax).astype(np.float64)
    z = _axis_param(a.op.attrs.get("zero_point", a("zero_point", None)), q, ax).astype(np.float64)
    return ((q.astype(np.float64) - z) * s).astype(a.out_dtype())


__all__: list[str] = []
