"""Runtime helpers for generated PyTorch modules (ONNX semantics beyond one torch call).

The PyTorch emitter copies a helper (and the helpers it calls) into a generated module
only when a node needs it, so each function here stands alone: it uses only ``torch``,
``F`` (torch.nn.functional), ``math`` and the other helpers of this file. Values that
are known when the model is converted never come here; helpers serve inputs whose value
is only known at run time (a dynamic ``axes``, ``starts``, ``pads`` ...), ops that are
loops by nature (Loop, Scan, recurrent cells), and ops whose own torch kernel is many times
slower than other torch ops computing the same (max pooling).
"""
import math

import torch
import torch.nn.functional as F


def _reduce_axes(x, axes, noop):
    """ONNX reduction axes (a run-time tensor) as sorted non-negative dims; [] = no reduction."""
    dims = sorted({int(a) % x.dim() for a in axes.reshape(-1).tolist()}) if x.dim() else []
    if not dims and not noop:
        dims = list(range(x.dim()))
    return dims


def _reduce_prod(x, dims, keepdim):
    """The product over several dims (torch.prod takes one): move them last, flatten, prod."""
    if not dims:
        return x.clone()
    rest = [d for d in range(x.dim()) if d not in dims]
    y = x.permute(rest + list(dims)).reshape([x.shape[d] for d in rest] + [-1]).prod(-1, dtype=x.dtype)
    if keepdim:
        y = y.reshape([1 if d in dims else x.shape[d] for d in range(x.dim())])
    return y


def _max_pool(x, kernel, strides, dilations, begins, ends, ceil_mode, low):
    """ONNX MaxPool (no indices) as the maximum of strided views, one spatial axis at a time:
    the same values as F.max_poolNd (a maximum is exact, NaN propagates), 4-20x sooner on one
    CPU thread (a 2x2 pool of [1, 64, 160, 160]: 1.7 ms against 25 ms). ``begins``/``ends``:
    pads per spatial axis, filled with ``low``; ``ceil_mode`` (static sizes only): a last partial
    window counts when it starts inside the input or its begin pad. Traced by torch.export or
    torch.compile (whose compilers write their own pooling loop, and whose guards cannot
    follow the views at run-time sizes), it is torch's max pool."""
    nd = len(kernel)
    spans = [dilations[d] * (kernel[d] - 1) + 1 for d in range(nd)]
    extra = [0] * nd
    for d in range(nd if ceil_mode else 0):
        size = x.shape[2 + d] + begins[d] + ends[d]
        n = (size - spans[d]) // strides[d] + 1
        if (size - spans[d]) % strides[d] and n * strides[d] < x.shape[2 + d] + begins[d]:
            extra[d] = n * strides[d] + spans[d] - size
    pads = []
    for d in reversed(range(nd)):
        pads += [begins[d], ends[d] + extra[d]]
    if any(p != 0 for p in pads):
        x = F.pad(x, pads, value=low)
    if torch.compiler.is_compiling() and not ceil_mode:
        return (F.max_pool1d, F.max_pool2d, F.max_pool3d)[nd - 1](x, kernel, strides, 0, dilations)
    for d in range(nd):
        windows = x.unfold(2 + d, spans[d], strides[d])  # the window on a new last axis
        y = windows[..., 0]
        for j in range(1, kernel[d]):
            y = torch.maximum(y, windows[..., j * dilations[d]])
        x = y
    return x


def _dilated_conv(conv, x):
    """``conv(x)`` for a dilated Conv1d/Conv2d layer (groups 1, zero padding): for a batch-1
    input of at most 20480 values (whose 2-D kernel is not larger than 3 on both sides) torch
    runs its native dilated loop (slow_conv_dilated), 4x slower than one matrix product over
    the taps, which this computes instead; any other input, or a traced program, is the layer."""
    nd = x.dim() - 2
    k = conv.weight.shape[2:]
    if (torch.compiler.is_compiling() or x.shape[0] != 1 or x.numel() > 20480
            or (nd == 2 and k[0] > 3 and k[1] > 3)):
        return conv(x)
    pads = []
    for d in reversed(range(nd)):
        pads += [conv.padding[d], conv.padding[d]]
    cols = F.pad(x, pads) if any(p != 0 for p in pads) else x
    for d in range(nd):
        span = conv.dilation[d] * (k[d] - 1) + 1
        cols = cols.unfold(2 + d, span, conv.stride[d])[..., ::conv.dilation[d]]
    out = cols.shape[2:2 + nd]  # cols: [1, C, *out, *taps]
    cols = cols[0].permute([0, *range(1 + nd, 1 + 2 * nd), *range(1, 1 + nd)]).reshape(-1, math.prod(out))
    y = torch.matmul(conv.weight.reshape(conv.weight.shape[0], -1), cols)
    if conv.bias is not None:
        y = y + conv.bias[:, None]
    return y.reshape(1, -1, *out)


def _reshape(x, shape, allowzero):
    """ONNX Reshape with a run-time shape: 0 copies the input dim unless allowzero."""
    dims = [int(d) for d in shape.reshape(-1).tolist()]
    if not allowzero:
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


def _unsqueeze(x, axes):
    """ONNX Unsqueeze with axes counted on the output rank (a list, or an int for one axis)."""
    axes = [axes] if isinstance(axes, int) else [int(a) for a in axes]
    rank = x.dim() + len(axes)
    for a in sorted(a % rank for a in axes):
        x = x.unsqueeze(a)
    return x


def _slice(x, starts, ends, axes=None, steps=None):
    """ONNX Slice with run-time bounds (negative steps walk backwards, bounds are clamped)."""
    starts = [int(v) for v in starts.reshape(-1).tolist()]
    ends = [int(v) for v in ends.reshape(-1).tolist()]
    axes = list(range(len(starts))) if axes is None else [int(a) % x.dim() for a in axes.reshape(-1).tolist()]
    steps = [1] * len(starts) if steps is None else [int(v) for v in steps.reshape(-1).tolist()]
    for start, end, a, step in zip(starts, ends, axes, steps):
        dim = x.shape[a]
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            x = x.narrow(a, start, max(end - start, 0))[(slice(None),) * a + (slice(None, None, step),)]
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            x = x.index_select(a, torch.arange(start, end, step, dtype=torch.int64))
    return x


def _split_sizes(dim, parts):
    """ONNX Split into ``parts`` outputs: ceil-sized chunks, the last one smaller."""
    chunk = -(-dim // parts)
    return [chunk] * (parts - 1) + [max(dim - chunk * (parts - 1), 0)]


def _reflect_index(pos, dim):
    """Source positions of reflect padding: the axis mirrored at its ends, without repeating them."""
    if dim == 1:
        return torch.zeros_like(pos)
    period = 2 * (dim - 1)
    j = pos % period
    return torch.where(j >= dim, period - j, j)


def _pad(x, pads, value=None, axes=None, mode="constant"):
    """ONNX Pad with run-time pads (constant: F.pad; reflect/edge/wrap: index_select per axis)."""
    rank = x.dim()
    axes = list(range(rank)) if axes is None else [int(a) % rank for a in axes.reshape(-1).tolist()]
    p = [int(v) for v in pads.reshape(-1).tolist()]
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = p[i], p[i + len(axes)]
    if mode == "constant":
        flat = []
        for d in reversed(range(rank)):
            flat += [begin[d], end[d]]
        fill = 0 if value is None or value.numel() == 0 else value.reshape(-1)[0].item()
        return F.pad(x, flat, value=fill)
    for d in range(rank):
        b, e = begin[d], end[d]
        if b < 0 or e < 0:
            x = x.narrow(d, max(-b, 0), x.shape[d] - max(-b, 0) - max(-e, 0))
            b, e = max(b, 0), max(e, 0)
        if b == 0 and e == 0:
            continue
        dim = x.shape[d]
        pos = torch.arange(-b, dim + e)
        if mode == "edge":
            idx = pos.clamp(0, dim - 1)
        elif mode == "wrap":
            idx = pos % dim
        else:
            idx = _reflect_index(pos, dim)
        x = x.index_select(d, idx)
    return x


def _loop(trip, cond, body, n_scan, *states):
    """ONNX Loop: body(i, cond, *states) -> (cond, *states, *scan elements) while i < trip and cond."""
    limit = None if trip is None else int(trip.reshape(-1)[0])
    keep = True if cond is None else bool(cond.reshape(-1)[0])
    n = len(states)
    scans = [[] for _ in range(n_scan)]
    i = 0
    while (limit is None or i < limit) and keep:
        outs = body(torch.tensor(i, dtype=torch.int64), torch.tensor(keep), *states)
        keep = bool(outs[0].reshape(-1)[0])
        states = tuple(outs[1:1 + n])
        for acc, value in zip(scans, outs[1 + n:]):
            acc.append(value)
        i += 1
    stacked = [torch.stack(acc) if acc else torch.zeros((0,), dtype=torch.float32) for acc in scans]
    return (*states, *stacked)


def _scan(body, states, xs, scan_input_axes=None, scan_input_directions=None, scan_output_axes=None,
          scan_output_directions=None):
    """ONNX Scan: body(*states, *elements) -> (*states, *scan elements), one step per slice."""
    m, n = len(xs), len(states)
    in_axes = [a % x.dim() for a, x in zip(scan_input_axes or [0] * m, xs)]
    in_dirs = scan_input_directions or [0] * m
    length = xs[0].shape[in_axes[0]] if m else 0
    accs = []
    for t in range(length):
        elems = [x.select(a, length - 1 - t if d else t) for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = body(*states, *elems)
        states = list(outs[:n])
        if not accs:
            accs = [[] for _ in outs[n:]]
        for acc, value in zip(accs, outs[n:]):
            acc.append(value)
    k = len(accs)
    out_axes = scan_output_axes or [0] * k
    out_dirs = scan_output_directions or [0] * k
    stacked = []
    for acc, a, d in zip(accs, out_axes, out_dirs):
        acc = acc[::-1] if d else acc
        stacked.append(torch.stack(acc, dim=a % (acc[0].dim() + 1)))
    return (*states, *stacked)


def _activation(name, alphas, betas):
    """An ONNX recurrent activation by name; takes its alpha / beta from the front of the lists
    (the ONNX defaults when they run out)."""
    defaults = {"affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None),
                "scaledtanh": (1.0, 1.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}
    name = name.lower()
    da, db = defaults.get(name, (None, None))
    alpha = alphas.pop(0) if da is not None and alphas else da
    beta = betas.pop(0) if db is not None and betas else db
    if name == "relu":
        return torch.relu
    if name == "tanh":
        return torch.tanh
    if name == "sigmoid":
        return torch.sigmoid
    if name == "affine":
        return lambda x: alpha * x + beta
    if name == "leakyrelu":
        return lambda x: torch.where(x >= 0, x, alpha * x)
    if name == "thresholdedrelu":
        return lambda x: torch.where(x > alpha, x, torch.zeros_like(x))
    if name == "scaledtanh":
        return lambda x: alpha * torch.tanh(beta * x)
    if name == "hardsigmoid":
        return lambda x: torch.clamp(alpha * x + beta, 0.0, 1.0)
    if name == "elu":
        return lambda x: torch.where(x >= 0, x, alpha * torch.expm1(x))
    if name == "softsign":
        return lambda x: x / (1 + torch.abs(x))
    if name == "softplus":
        return lambda x: torch.log1p(torch.exp(x))
    raise ValueError(f"unknown activation {name!r}")


def _recurrence(kind, x, w, r, b, lens, h0, c0, p, acts, alphas, betas, clip, direction, layout,
                linear_before_reset, input_forget):
    """ONNX RNN / GRU / LSTM (gate orders: z r h for GRU, i o f c for LSTM), computed in float64.

    Returns (Y, Y_h, Y_c): Y is (T, D, B, H) (layout 1: (B, T, D, H)), zero past each
    sequence's length; Y_h / Y_c are the states after each sequence's last step."""
    dtype = x.dtype
    if layout:
        x = x.transpose(0, 1)
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    x, w, r = x.double(), w.double(), r.double()
    steps, batch = x.shape[0], x.shape[1]
    num_dir, hidden = w.shape[0], r.shape[-1]
    gates = {"rnn": 1, "gru": 3, "lstm": 4}[kind]
    b = torch.zeros(num_dir, 2 * gates * hidden, dtype=torch.float64) if b is None else b.double()
    lens = torch.full((batch,), steps, dtype=torch.int64) if lens is None else lens.long()
    alphas, betas = list(alphas), list(betas)
    fns = [_activation(name, alphas, betas) for name in acts]
    per = len(fns) // num_dir

    def cl(v):
        return v if clip is None else torch.clamp(v, -clip, clip)

    y = torch.zeros(steps, num_dir, batch, hidden, dtype=torch.float64)
    h_final = torch.zeros(num_dir, batch, hidden, dtype=torch.float64)
    c_final = torch.zeros(num_dir, batch, hidden, dtype=torch.float64)
    rows = torch.arange(batch)
    for d in range(num_dir):
        f = fns[d * per:(d + 1) * per]
        backward = direction == "reverse" or (direction == "bidirectional" and d == 1)
        h = torch.zeros(batch, hidden, dtype=torch.float64) if h0 is None else h0[d].double()
        c = torch.zeros(batch, hidden, dtype=torch.float64) if c0 is None else c0[d].double()
        wb, rb = b[d, :gates * hidden], b[d, gates * hidden:]
        for step in range(steps):
            active = step < lens
            t = (lens - 1 - step).clamp(min=0) if backward else torch.full((batch,), step, dtype=torch.int64)
            xt = x[t.clamp(max=steps - 1), rows]
            if kind == "rnn":
                new_h, new_c = f[0](cl(xt @ w[d].T + h @ r[d].T + wb + rb)), c
            elif kind == "gru":
                gx = xt @ w[d].T + wb
                rw = r[d]
                z = f[0](cl(gx[:, :hidden] + h @ rw[:hidden].T + rb[:hidden]))
                rt = f[0](cl(gx[:, hidden:2 * hidden] + h @ rw[hidden:2 * hidden].T + rb[hidden:2 * hidden]))
                if linear_before_reset:
                    hh = f[1](cl(gx[:, 2 * hidden:] + rt * (h @ rw[2 * hidden:].T + rb[2 * hidden:])))
                else:
                    hh = f[1](cl(gx[:, 2 * hidden:] + (rt * h) @ rw[2 * hidden:].T + rb[2 * hidden:]))
                new_h, new_c = (1 - z) * hh + z * h, c
            else:
                peep = torch.zeros(3 * hidden, dtype=torch.float64) if p is None else p[d].double()
                pre = xt @ w[d].T + h @ r[d].T + wb + rb
                i = f[0](cl(pre[:, :hidden] + peep[:hidden] * c))
                if input_forget:
                    fg = 1 - i
                else:
                    fg = f[0](cl(pre[:, 2 * hidden:3 * hidden] + peep[2 * hidden:] * c))
                new_c = fg * c + i * f[1](cl(pre[:, 3 * hidden:]))
                o = f[0](cl(pre[:, hidden:2 * hidden] + peep[hidden:2 * hidden] * new_c))
                new_h = o * f[2](new_c)
            mask = active.unsqueeze(1)
            h, c = torch.where(mask, new_h, h), torch.where(mask, new_c, c)
            y[t[active], d, rows[active]] = new_h[active]
        h_final[d], c_final[d] = h, c
    if layout:
        y, h_final, c_final = y.permute(2, 0, 1, 3), h_final.transpose(0, 1), c_final.transpose(0, 1)
    return y.to(dtype), h_final.to(dtype), c_final.to(dtype)


def _rnn_flat_weights(order, w, r, b):
    """ONNX W (D, G*H, I), R (D, G*H, H), B (D, 2*G*H) known only at run time as torch's
    flat weights, per direction [w_ih, w_hh, b_ih, b_hh]: the gate blocks put in torch's order
    (``order``: ONNX block index of each torch block); no B → no biases."""
    num_dir, hidden, gates = w.shape[0], r.shape[-1], len(order)
    idx = torch.tensor(order, dtype=torch.int64)

    def blocks(m):
        return m.unflatten(1, (gates, hidden)).index_select(1, idx).flatten(1, 2).contiguous()

    w, r = blocks(w), blocks(r)
    if b is not None:
        wb = blocks(b[:, :gates * hidden].unsqueeze(-1)).squeeze(-1)
        rb = blocks(b[:, gates * hidden:].unsqueeze(-1)).squeeze(-1)
    out = []
    for d in range(num_dir):
        out += [w[d], r[d]] + ([] if b is None else [wb[d], rb[d]])
    return out


def _rnn_native(kind, x, weights, h0, c0, bidirectional, reverse, layout):
    """ONNX RNN / GRU / LSTM with the default activations through torch's own recurrent
    kernels (torch.lstm / torch.gru / torch.rnn_tanh / torch.rnn_relu, one layer), computed in
    the input's dtype. ``weights`` are torch's flat weights (gate blocks already in torch's
    order, 2 or 4 tensors per direction). Returns (Y, Y_h, Y_c) in the ONNX layout: Y is
    (T, D, B, H) (layout 1: (B, T, D, H)); Y_c is None except for LSTM."""
    num_dir = 2 if bidirectional else 1
    hidden = weights[1].shape[1]
    time = 1 if layout else 0
    batch = x.shape[1 - time]
    if layout:
        h0 = None if h0 is None else h0.transpose(0, 1)
        c0 = None if c0 is None else c0.transpose(0, 1)
    h0 = x.new_zeros(num_dir, batch, hidden) if h0 is None else h0.to(x.dtype).contiguous()
    if reverse:
        x = x.flip(time)
    biases = len(weights) == 4 * num_dir
    c = None
    if kind == "lstm":
        c0 = x.new_zeros(num_dir, batch, hidden) if c0 is None else c0.to(x.dtype).contiguous()
        y, h, c = torch.lstm(x, (h0, c0), weights, biases, 1, 0.0, False, bidirectional, bool(layout))
    elif kind == "gru":
        y, h = torch.gru(x, h0, weights, biases, 1, 0.0, False, bidirectional, bool(layout))
    elif kind == "rnn_relu":
        y, h = torch.rnn_relu(x, h0, weights, biases, 1, 0.0, False, bidirectional, bool(layout))
    else:
        y, h = torch.rnn_tanh(x, h0, weights, biases, 1, 0.0, False, bidirectional, bool(layout))
    if reverse:
        y = y.flip(time)
    y = y.unflatten(2, (num_dir, hidden))
    if layout:
        h = h.transpose(0, 1)
        c = None if c is None else c.transpose(0, 1)
    else:
        y = y.transpose(1, 2)
    return y, h, c


def _resize_coords(out_len, in_len, scale, ctm, roi_start, roi_end):
    """ONNX Resize: the input coordinate of every output index (float32 math, as runtimes do)."""
    i = torch.arange(out_len, dtype=torch.float32)
    s = torch.tensor(scale, dtype=torch.float32)
    resized = in_len * scale
    if ctm == "half_pixel":
        x = (i + 0.5) / s - 0.5
    elif ctm == "half_pixel_symmetric":
        adjustment = out_len / (scale * in_len)
        x = in_len / 2 * (1 - adjustment) + (i + 0.5) / s - 0.5
    elif ctm == "pytorch_half_pixel":
        x = (i + 0.5) / s - 0.5 if resized > 1 else torch.zeros_like(i)
    elif ctm == "align_corners":
        x = i * (in_len - 1) / (resized - 1) if resized > 1 else torch.zeros_like(i)
    elif ctm == "asymmetric":
        x = i / s
    elif ctm == "tf_crop_and_resize":
        start, end = torch.tensor(roi_start, dtype=torch.float32), torch.tensor(roi_end, dtype=torch.float32)
        if resized > 1:
            x = start * (in_len - 1) + i * (end - start) * (in_len - 1) / (resized - 1)
        else:
            x = torch.full_like(i, 0.5) * (start + end) * (in_len - 1)
    else:
        raise ValueError(f"unknown coordinate_transformation_mode {ctm!r}")
    return x.double()


def _resize_matrix(in_len, out_len, scale, roi_start, roi_end, mode, ctm, nearest_mode, cubic_a, exclude_outside,
                   antialias):
    """(out_len, in_len) interpolation weights of one axis, and the outputs sampled outside it."""
    x = _resize_coords(out_len, in_len, scale, ctm, roi_start, roi_end)
    if ctm == "tf_crop_and_resize":
        outside = (x < 0) | (x > in_len - 1)
    else:
        outside = torch.zeros(out_len, dtype=torch.bool)
    m = torch.zeros(out_len, in_len, dtype=torch.float64)
    if mode == "nearest":
        if nearest_mode == "round_prefer_ceil":
            idx = torch.floor(x + 0.5)
        elif nearest_mode == "floor":
            idx = torch.floor(x)
        elif nearest_mode == "ceil":
            idx = torch.ceil(x)
        else:
            idx = torch.ceil(x - 0.5)
        m[torch.arange(out_len), idx.clamp(0, in_len - 1).long()] = 1.0
        return m, outside
    support = 1.0 if mode == "linear" else 2.0
    fs = min(scale, 1.0) if antialias else 1.0
    reach = int(math.ceil(support / fs)) + 1
    taps = torch.floor(x).unsqueeze(1) + torch.arange(-reach, reach + 1, dtype=torch.float64)
    d = (taps - x.unsqueeze(1)).abs() * fs
    if mode == "linear":
        w = torch.clamp(1.0 - d, min=0.0)
    else:
        a = cubic_a
        near = ((a + 2) * d - (a + 3)) * d * d + 1
        far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        w = torch.where(d <= 1, near, torch.where(d < 2, far, torch.zeros_like(d)))
    w = w / w.sum(1, keepdim=True)
    if exclude_outside:
        w = torch.where((taps >= 0) & (taps < in_len), w, torch.zeros_like(w))
        w = w / w.sum(1, keepdim=True)
    m.scatter_add_(1, taps.clamp(0, in_len - 1).long(), w)
    return m, outside


def _resize(x, axes, scales, sizes, roi, mode, ctm, nearest_mode, cubic_a, exclude_outside, extrapolation_value,
            antialias):
    """ONNX Resize, separable: one interpolation matrix per resized axis (float64 math);
    integer outputs are rounded and saturated."""
    n = len(axes)
    y = x.double()
    outside = torch.zeros([1] * x.dim(), dtype=torch.bool)
    for k, a in enumerate(axes):
        m, out_mask = _resize_matrix(x.shape[a], sizes[k], scales[k], roi[k], roi[n + k], mode, ctm, nearest_mode,
                                     cubic_a, exclude_outside, antialias)
        y = torch.movedim(torch.tensordot(m, y, dims=([1], [a])), 0, a)
        shape = [1] * x.dim()
        shape[a] = sizes[k]
        outside = outside | out_mask.reshape(shape)
    y = torch.where(outside, torch.tensor(extrapolation_value, dtype=torch.float64), y)
    if x.dtype.is_floating_point:
        return y.to(x.dtype)
    info = torch.iinfo(x.dtype)
    return torch.clamp(torch.round(y), info.min, info.max).to(x.dtype)


def _reduce_extreme(x, dims, keepdim, largest):
    """amax / amin that gives -inf / +inf (the integer limit, False / True) over an empty set."""
    if all(x.shape[d] > 0 for d in dims):
        return torch.amax(x, dim=dims, keepdim=keepdim) if largest else torch.amin(x, dim=dims, keepdim=keepdim)
    shape = [1 if d in dims else n for d, n in enumerate(x.shape) if keepdim or d not in dims]
    if x.dtype == torch.bool:
        fill = not largest
    elif x.dtype.is_floating_point:
        fill = -math.inf if largest else math.inf
    else:
        fill = torch.iinfo(x.dtype).min if largest else torch.iinfo(x.dtype).max
    return torch.full(shape, fill, dtype=x.dtype)


def _resize_onnx(x, roi, scales, sizes, axes, policy, mode, ctm, nearest_mode, cubic_a, exclude_outside,
                 extrapolation_value, antialias):
    """ONNX Resize with run-time roi / scales / sizes: the output sizes and scales per resized
    axis (sizes with keep_aspect_ratio_policy, or floor(in * scale)), then ``_resize``."""
    rank = x.dim()
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    in_sz = [x.shape[a] for a in axes]
    if sizes is not None and sizes.numel():
        want = [int(v) for v in sizes.reshape(-1).tolist()]
        if policy == "stretch":
            sc = [w / i for w, i in zip(want, in_sz)]
        else:
            s = (min if policy == "not_larger" else max)(w / i for w, i in zip(want, in_sz))
            sc, want = [s] * len(axes), [int(math.floor(s * i + 0.5)) for i in in_sz]
    else:
        sc = [float(v) for v in scales.reshape(-1).tolist()]
        want = [int(math.floor(i * s)) for i, s in zip(in_sz, sc)]
    n = len(axes)
    r = [0.0] * n + [1.0] * n
    if roi is not None and roi.numel():
        r = [float(v) for v in roi.reshape(-1).tolist()]
        if len(r) == 2 * rank and n != rank:
            r = [r[a] for a in axes] + [r[rank + a] for a in axes]
    return _resize(x, axes, sc, want, r, mode, ctm, nearest_mode, cubic_a, exclude_outside, extrapolation_value,
                   antialias)


def _center_crop_pad(x, shape, axes=None):
    """ONNX CenterCropPad: crop (start rounded down) or zero-pad (extra element at the end) per axis."""
    rank = x.dim()
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    for a, target in zip(axes, [int(v) for v in shape.reshape(-1).tolist()]):
        dim = x.shape[a]
        if target < dim:
            x = x.narrow(a, (dim - target) // 2, target)
        elif target > dim:
            pads = [0, 0] * (rank - 1 - a) + [(target - dim) // 2, target - dim - (target - dim) // 2]
            x = F.pad(x, pads)
    return x


def _grow(x, shape):
    """Zero-extend ``x`` at the end of every axis up to ``shape``."""
    pads = []
    for d in reversed(range(x.dim())):
        pads += [0, int(shape[d]) - x.shape[d]]
    return F.pad(x, pads)


def _linear_attention(q, k, v, past_state, decay, beta, q_heads, kv_heads, scale, update_rule, state_dtype):
    """ONNX LinearAttention, one time step at a time in float64: the state S (B, Hkv, Dk, Dv) decays
    by exp(decay) (gated rules), then takes k v^T (linear / gated) or the delta-rule correction
    beta k (v - S^T k); each query head reads scale * q S of its key/value head."""
    b, t = q.shape[0], q.shape[1]
    dk, dv = q.shape[2] // q_heads, v.shape[2] // kv_heads
    scale = scale if scale else 1.0 / math.sqrt(dk)
    qq = q.double().reshape(b, t, q_heads, dk)
    kk = k.double().reshape(b, t, kv_heads, dk)
    vv = v.double().reshape(b, t, kv_heads, dv)
    s = torch.zeros(b, kv_heads, dk, dv, dtype=torch.float64) if past_state is None else past_state.double()
    if decay is not None:
        decay = decay.double().reshape(b, t, kv_heads, -1)
    if beta is not None:
        beta = beta.double().reshape(b, t, -1).expand(b, t, kv_heads)
    group = q_heads // kv_heads
    out = torch.zeros(b, t, q_heads, dv, dtype=torch.float64)
    for i in range(t):
        kt, vt = kk[:, i], vv[:, i]
        if update_rule in ("gated", "gated_delta"):
            s = torch.exp(decay[:, i]).unsqueeze(-1) * s
        if update_rule in ("linear", "gated"):
            s = s + kt.unsqueeze(-1) * vt.unsqueeze(-2)
        else:
            pred = torch.einsum("bhkv,bhk->bhv", s, kt)
            s = s + beta[:, i].reshape(b, kv_heads, 1, 1) * kt.unsqueeze(-1) * (vt - pred).unsqueeze(-2)
        out[:, i] = scale * torch.einsum("bhk,bhkv->bhv", qq[:, i], s.repeat_interleave(group, dim=1))
    return out.reshape(b, t, q_heads * dv).to(q.dtype), s.to(state_dtype)


def _mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
    """ONNX MelWeightMatrix [dft_length // 2 + 1, num_mel_bins] in float64: band edge k sits at
    mel(lower) + k * (mel(upper) - mel(lower)) / (num_mel_bins + 2) on the mel scale
    2595 log10(1 + f / 700), snapped down to the DFT bin floor((dft_length + 1) * f / rate);
    filter i rises from edge i to 1 at edge i + 1 and falls to 0 at edge i + 2."""
    lo = 2595.0 * math.log10(1.0 + lower_edge_hertz / 700.0)
    hi = 2595.0 * math.log10(1.0 + upper_edge_hertz / 700.0)
    step = (hi - lo) / (num_mel_bins + 2)
    hz = 700.0 * (10.0 ** ((lo + step * torch.arange(num_mel_bins + 2, dtype=torch.float64)) / 2595.0) - 1.0)
    edges = torch.floor((dft_length + 1) * hz / sample_rate).double()
    left, center, right = edges[:-2], edges[1:-1], edges[2:]
    j = torch.arange(dft_length // 2 + 1, dtype=torch.float64).reshape(-1, 1)
    rise = (j - left) / torch.clamp_min(center - left, 1.0)
    fall = (right - j) / torch.clamp_min(right - center, 1.0)
    return torch.where((j >= left) & (j < center), rise,
                       torch.where(j == center, torch.ones_like(rise),
                                   torch.where((j > center) & (j <= right), fall, torch.zeros_like(rise))))
