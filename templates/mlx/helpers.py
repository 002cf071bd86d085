"""Runtime helpers of the generated MLX modules: each function is copied into a module
(``templates/mlx/module.py.j2``) only when its code calls it. Plain ``mlx.core``; no opbridge
import. Every name starts with an underscore, which no name sanitized from a model does."""
import itertools
import math

import numpy as np
import mlx.core as mx


def _reduce_empty(x, axis, keepdims, value):
    """A reduction of the empty ``x`` over ``axis`` (None: all): ``value`` in the reduced shape."""
    axes = range(x.ndim) if axis is None else [a % x.ndim for a in axis]
    shape = [1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes]
    return mx.full(shape, value, dtype=x.dtype)


def _staged(reduce, x, axes, keepdims):
    """``mx.sum`` or ``mx.mean`` of ``x`` over ``axes`` one axis at a time, the innermost first:
    MLX's CPU reduction adds a long run in float32 one value after another (the mean of 320 x 320
    values is off by about 1e-5 of itself, 100 times NumPy's error); a run one axis long keeps the
    error to that axis's length."""
    axes = sorted({a % x.ndim for a in axes}, reverse=True)
    if math.prod(x.shape[a] for a in axes) <= 4096:
        return reduce(x, axis=axes, keepdims=keepdims)
    for a in axes:
        x = reduce(x, axis=a, keepdims=True)
    return x if keepdims else mx.squeeze(x, axis=axes)


def _same_pads(x, kernel, strides, dilations, pads, auto_pad):
    """(begin, end) pads of the spatial axes of the channels-first ``x``: explicit ``pads``, or
    what ``auto_pad`` (SAME_UPPER, SAME_LOWER: output ceil(in / stride); VALID: none) makes."""
    n = len(kernel)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(n):
            size = x.shape[2 + i]
            total = max((-(-size // strides[i]) - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size, 0)
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
            end.append(total - begin[-1])
        return begin, end
    if auto_pad == "VALID" or not pads:
        return [0] * n, [0] * n
    return list(pads[:n]), list(pads[n:])


def _pool(x, kind, kernel, strides, pads, dilations, ceil_mode, auto_pad, count_include_pad=0, p=2,
          storage_order=0, indices=False):
    """ONNX pooling of the channels-first ``x`` (``kind``: max, avg or lp): the windows are
    strided slices of the padded input, one per kernel offset, reduced elementwise; ``indices``
    also gives the max's flat index into ``x`` (``storage_order`` 1: column-major spatial)."""
    n = len(kernel)
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    begin, end = _same_pads(x, kernel, strides, dilations, pads, auto_pad)
    size = x.shape[2:]
    out, tail = [], []
    for i in range(n):
        span = (kernel[i] - 1) * dilations[i] + 1
        room = size[i] + begin[i] + end[i] - span
        o = (-(-room // strides[i]) if ceil_mode else room // strides[i]) + 1
        if ceil_mode and (o - 1) * strides[i] >= size[i] + begin[i]:
            o -= 1  # a window may not start in the end padding
        out.append(o)
        tail.append(max((o - 1) * strides[i] + span - size[i] - begin[i], 0))
    width = [(0, 0), (0, 0)] + [(begin[i], tail[i]) for i in range(n)]
    work = x if kind == "max" else mx.astype(x, mx.float32)
    if kind == "max":
        low = float("-inf") if mx.issubdtype(x.dtype, mx.floating) else mx.iinfo(x.dtype).min
        padded = mx.pad(work, width, constant_values=low)
    else:
        padded = mx.pad(mx.abs(work) ** p if kind == "lp" else work, width)
    inside = mx.pad(mx.ones(size, dtype=mx.float32), width[2:])
    counted = mx.pad(mx.ones([size[i] + begin[i] + min(end[i], tail[i]) for i in range(n)], dtype=mx.float32),
                     [(0, tail[i] - min(end[i], tail[i])) for i in range(n)])
    result = count = best = None
    for k in itertools.product(*[range(v) for v in kernel]):
        window = tuple(slice(k[i] * dilations[i], k[i] * dilations[i] + (out[i] - 1) * strides[i] + 1, strides[i])
                       for i in range(n))
        v = padded[(slice(None), slice(None)) + window]
        c = (counted if count_include_pad else inside)[window]
        if result is None:
            result, count = v, c
            if indices:
                best = _pool_index(k, out, strides, dilations, begin, size, storage_order)
                best = mx.broadcast_to(best, v.shape)
        elif kind == "max":
            if indices:
                best = mx.where(v > result, _pool_index(k, out, strides, dilations, begin, size, storage_order), best)
            result = mx.maximum(result, v)
        else:
            result, count = result + v, count + c
    if kind == "avg":
        result = result / count
    elif kind == "lp":
        result = result ** (1.0 / p)
    result = mx.astype(result, x.dtype)
    if not indices:
        return result
    base = mx.reshape(mx.arange(x.shape[0] * x.shape[1], dtype=mx.int64), x.shape[:2] + (1,) * n)
    return result, best + base * math.prod(size)


def _pool_index(k, out, strides, dilations, begin, size, storage_order):
    """The flat spatial index of kernel offset ``k`` in every output window (unpadded input)."""
    n = len(k)
    flat = mx.zeros([1] * (n + 2), dtype=mx.int64)
    for i in (range(n) if not storage_order else reversed(range(n))):
        pos = mx.arange(out[i], dtype=mx.int64) * strides[i] - begin[i] + k[i] * dilations[i]
        flat = flat * size[i] + mx.reshape(pos, [1, 1] + [-1 if j == i else 1 for j in range(n)])
    return flat


def _nll(logp, target, weight, ignore_index, reduction):
    """ONNX NegativeLogLikelihoodLoss of the log-probabilities ``logp`` (N, C, ...): each element
    is -logp[target] * weight[target] (0 where target == ignore_index); ``mean`` divides the sum
    by the summed weights of the elements kept."""
    keep = mx.ones(target.shape, dtype=mx.bool_) if ignore_index is None else target != ignore_index
    safe = mx.where(keep, target, 0)
    picked = mx.squeeze(mx.take_along_axis(logp, mx.expand_dims(safe, 1), axis=1), 1)
    w = mx.ones(picked.shape, dtype=logp.dtype) if weight is None else mx.take(weight, safe)
    w = mx.where(keep, w, mx.zeros_like(w))
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return mx.sum(loss)
    return mx.sum(loss) / mx.sum(w)


def _resize(x, roi, scales, sizes, axes, mode, ctm, nearest_mode, cubic_a, exclude_outside, extrapolation,
            policy="stretch"):
    """ONNX Resize: ``_resize_plan``'s per-axis gathers (indices and weights computed with NumPy
    from the shapes), blended in the input's dtype."""
    plan = _resize_plan(x.shape, roi, scales, sizes, axes, mode, ctm, nearest_mode, cubic_a, exclude_outside, policy)
    for k, m, taps, outside in plan:
        shape = [m if a == k else 1 for a in range(x.ndim)]
        y = None
        for idx, w in taps:
            term = mx.take(x, mx.array(idx), axis=k)
            if w is not None:
                term = term * mx.reshape(mx.array(np.asarray(w, np.float32)).astype(x.dtype), shape)
            y = term if y is None else y + term
        if outside is not None:
            y = mx.where(mx.reshape(mx.array(outside), shape), mx.array(extrapolation).astype(x.dtype), y)
        x = y
    return x


def _rnn(kind, x, w, r, b, h0, c0, p, hidden, direction, layout, linear_before_reset):
    """ONNX RNN / GRU / LSTM with their default activations, every direction and layout, initial
    states and peepholes: the input projection of every step at once, then a Python loop over
    the steps (MLX is eager). Returns (Y, Y_h, Y_c)."""
    if layout:
        x = mx.swapaxes(x, 0, 1)
        h0 = None if h0 is None else mx.swapaxes(h0, 0, 1)
        c0 = None if c0 is None else mx.swapaxes(c0, 0, 1)
    steps, batch, hsz = x.shape[0], x.shape[1], hidden
    n = {"lstm": 4, "gru": 3, "rnn": 1}[kind]
    ys, hs, cs = [], [], []
    for d in range(w.shape[0]):
        back = direction == "reverse" or d == 1
        wb = mx.zeros((n * hsz,), x.dtype) if b is None else b[d][: n * hsz]
        rb = mx.zeros((n * hsz,), x.dtype) if b is None else b[d][n * hsz:]
        rt = mx.transpose(r[d])
        xw = mx.matmul(x, mx.transpose(w[d])) + wb
        h = mx.zeros((batch, hsz), x.dtype) if h0 is None else h0[d]
        c = mx.zeros((batch, hsz), x.dtype) if c0 is None else c0[d]
        out = [None] * steps
        for t in (range(steps - 1, -1, -1) if back else range(steps)):
            if kind == "lstm":
                g = xw[t] + mx.matmul(h, rt) + rb
                gi, go, gf, gc = (g[:, k * hsz:(k + 1) * hsz] for k in range(4))
                if p is not None:
                    gi, gf = gi + p[d][:hsz] * c, gf + p[d][2 * hsz:] * c
                c = mx.sigmoid(gf) * c + mx.sigmoid(gi) * mx.tanh(gc)
                if p is not None:
                    go = go + p[d][hsz:2 * hsz] * c
                h = mx.sigmoid(go) * mx.tanh(c)
            elif kind == "gru":
                xz, xr, xh = (xw[t][:, k * hsz:(k + 1) * hsz] for k in range(3))
                rz, rr, rh = (rt[:, k * hsz:(k + 1) * hsz] for k in range(3))
                bz, br, bh = (rb[k * hsz:(k + 1) * hsz] for k in range(3))
                z = mx.sigmoid(xz + mx.matmul(h, rz) + bz)
                reset = mx.sigmoid(xr + mx.matmul(h, rr) + br)
                if linear_before_reset:
                    cand = mx.tanh(xh + reset * (mx.matmul(h, rh) + bh))
                else:
                    cand = mx.tanh(xh + mx.matmul(reset * h, rh) + bh)
                h = (1 - z) * cand + z * h
            else:
                h = mx.tanh(xw[t] + mx.matmul(h, rt) + rb)
            out[t] = h
        ys.append(mx.stack(out))
        hs.append(h)
        cs.append(c)
    y, yh, yc = mx.stack(ys, axis=1), mx.stack(hs), mx.stack(cs)
    if layout:
        y, yh, yc = mx.transpose(y, (2, 0, 1, 3)), mx.swapaxes(yh, 0, 1), mx.swapaxes(yc, 0, 1)
    return y, yh, yc


def _loop(body, trip, cond, carried, n_scan, scan_empty):
    """ONNX Loop on the host: ``body(i, cond, *carried)`` → (cond, *carried, *scan items) while
    ``i < trip`` (None: no bound) and ``cond`` (None: true); returns the final carried values,
    then each scan output's items stacked on a new first axis. ``scan_empty`` gives each scan
    output's (shape, dtype) when the body never ran."""
    carried = tuple(carried)
    scans = [[] for _ in range(n_scan)]
    go = True if cond is None else bool(mx.reshape(cond, (-1,))[0].item())
    bound = None if trip is None else int(mx.reshape(trip, (-1,))[0].item())
    i = 0
    while go and (bound is None or i < bound):
        r = body(mx.array(i, dtype=mx.int64), mx.array(go), *carried)
        go = bool(mx.reshape(r[0], (-1,))[0].item())
        carried = tuple(r[1:1 + len(carried)])
        for k in range(n_scan):
            scans[k].append(r[1 + len(carried) + k])
        i += 1
    stacked = [mx.stack(s) if s else mx.zeros(shape, dtype=dtype) for s, (shape, dtype) in zip(scans, scan_empty)]
    return (*carried, *stacked)
