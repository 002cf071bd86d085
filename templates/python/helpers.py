"""Helpers shared by the generated Python modules of several backends (StableHLO's JAX module,
MLX's module): NumPy-only ones that compute, from static shapes and attributes, what the
framework-specific helper then applies, and ones written over an array module ``xp`` whose
names ``jax.numpy`` and ``mlx.core`` share. Copied into a module only when used; every name
starts with an underscore, which no name sanitized from a model does."""
import numpy as np


def _resize_plan(shape, roi, scales, sizes, axes, mode, ctm, nearest_mode, cubic_a, exclude_outside,
                 policy="stretch"):
    """ONNX Resize as per-axis gathers: for every resized axis, (axis, its taps: each a pair of
    source indices and their weights, or None where the value is outside a
    tf_crop_and_resize window). Nearest takes one tap of weight None, linear two, cubic four."""
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    scales = None if scales is None or np.size(scales) == 0 else np.asarray(scales, np.float32).reshape(-1)
    sizes = None if sizes is None or np.size(sizes) == 0 else np.asarray(sizes, np.int64).reshape(-1)
    roi = None if roi is None or np.size(roi) == 0 else np.asarray(roi, np.float64).reshape(-1)
    keep = None
    if sizes is not None and policy != "stretch":  # one scale for every axis, the output sizes rounded
        ratios = [np.float32(sizes[j]) / np.float32(shape[k]) for j, k in enumerate(axes)]
        keep = min(ratios) if policy == "not_larger" else max(ratios)
    plan = []
    for j, k in enumerate(axes):
        n = shape[k]
        if keep is not None:
            s = keep
            m = int(np.floor(np.float64(s) * n + 0.5))
        elif sizes is not None:
            m = int(sizes[j])
            s = np.float32(m) / np.float32(n)
        else:
            s = scales[j]
            m = int(np.floor(np.float64(n) * np.float64(s)))
        if m == n and s == 1 and ctm != "tf_crop_and_resize":
            continue
        i = np.arange(m, dtype=np.float64)
        s = np.float64(s)
        if ctm == "half_pixel":
            c = (i + 0.5) / s - 0.5
        elif ctm == "pytorch_half_pixel":
            c = (i + 0.5) / s - 0.5 if m > 1 else np.zeros(m)
        elif ctm == "align_corners":
            c = i * (n - 1) / (n * s - 1) if m > 1 else np.zeros(m)
        elif ctm == "asymmetric":
            c = i / s
        elif ctm == "tf_half_pixel_for_nn":
            c = (i + 0.5) / s
        elif ctm == "half_pixel_symmetric":
            c = (n / 2) * (1 - m / (s * n)) + (i + 0.5) / s - 0.5
        elif ctm == "tf_crop_and_resize":
            lo, hi = roi[j], roi[j + len(axes)]
            c = lo * (n - 1) + i * (hi - lo) * (n - 1) / (m - 1) if m > 1 else np.full(m, 0.5 * (lo + hi) * (n - 1))
        else:
            raise ValueError(f"Resize: coordinate_transformation_mode {ctm!r}")
        if mode == "nearest":
            r = {"round_prefer_floor": np.ceil(c - 0.5), "round_prefer_ceil": np.floor(c + 0.5), "floor": np.floor(c),
                 "ceil": np.ceil(c)}[nearest_mode]
            taps = [(r, None)]
        elif mode == "linear":
            cc = np.clip(c, 0, n - 1)
            base = np.floor(cc)
            t = cc - base
            taps = [(base, 1 - t), (base + 1, t)]
        else:
            a = cubic_a
            base = np.floor(c)
            t = c - base
            points = [base - 1, base, base + 1, base + 2]
            weights = [((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                       ((a + 2) * t - (a + 3)) * t * t + 1,
                       ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1,
                       ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a]
            if exclude_outside:
                weights = [np.where((p >= 0) & (p <= n - 1), w, 0.0) for p, w in zip(points, weights)]
                total = sum(weights)
                weights = [w / total for w in weights]
            taps = list(zip(points, weights))
        taps = [(np.clip(p, 0, n - 1).astype(np.int32), w) for p, w in taps]
        outside = (c < 0) | (c > n - 1) if ctm == "tf_crop_and_resize" else None
        plan.append((k, m, taps, outside))
    return plan



def _attention(xp, softmax, q, k, v, mask, past_k, past_v, nonpad, q_heads, kv_heads, scale, softcap, causal, left,
               right, mode):
    """ONNX Attention over the array module ``xp`` (``jax.numpy`` or ``mlx.core``, which share
    these names) and its ``softmax``: MHA/GQA/MQA, KV cache, bool or additive masks, causal and
    windowed, nonpad lengths, softcap; in float32 or wider: scores = scale Q Kᵀ → softcap →
    mask → softmax (a fully masked row gives zeros) → @ V. Returns (Y, present_key,
    present_value, the scores at ``mode``); 3-D inputs (B, S, H·D) are split into heads and Y
    joined back."""
    dtype = q.dtype
    wide = xp.float32 if dtype in (xp.float16, xp.bfloat16) else dtype
    rank = q.ndim

    def heads(x, h):
        return x if x.ndim == 4 else xp.transpose(xp.reshape(x, (x.shape[0], x.shape[1], h, -1)), (0, 2, 1, 3))

    q, k, v = heads(q, q_heads).astype(wide), heads(k, kv_heads).astype(wide), heads(v, kv_heads).astype(wide)
    if past_k is not None and past_v is not None:
        k = xp.concatenate([past_k.astype(wide), k], axis=2)
        v = xp.concatenate([past_v.astype(wide), v], axis=2)
    present_k, present_v = k, v
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = xp.repeat(k, group, axis=1), xp.repeat(v, group, axis=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = xp.matmul(q, xp.swapaxes(k, -1, -2)) * scale
    stages = [scores]
    if softcap:
        scores = softcap * xp.tanh(scores / softcap)
    stages.append(scores)
    kv_len, q_len = k.shape[2], q.shape[2]
    allowed = []
    if mask is not None:
        pad = [(0, 0)] * (mask.ndim - 1) + [(0, kv_len - mask.shape[-1])]
        if mask.dtype == xp.bool_:
            allowed.append(xp.pad(mask, pad, constant_values=False))
        else:
            scores = scores + xp.pad(mask.astype(wide), pad, constant_values=-float("inf"))
    if causal or left >= 0 or right >= 0 or nonpad is not None:
        if nonpad is not None and past_k is None:
            offset = xp.reshape(nonpad.astype(xp.int64) - q_len, (-1, 1, 1, 1))
        else:
            offset = past_k.shape[2] if past_k is not None else 0
        pos = offset + xp.reshape(xp.arange(q_len), (-1, 1))
        key = xp.arange(kv_len)
        if causal:
            allowed.append(key <= pos)
        if left >= 0:
            allowed.append(key >= pos - left)
        if right >= 0:
            allowed.append(key <= pos + right)
        if nonpad is not None:
            allowed.append(key < xp.reshape(nonpad, (-1, 1, 1, 1)))
    if allowed:
        ok = allowed[0]
        for a in allowed[1:]:
            ok = xp.logical_and(ok, a)
        scores = xp.where(ok, scores, xp.array(-float("inf"), wide))
    stages.append(scores)
    probs = softmax(scores, axis=-1)
    probs = xp.where(xp.isnan(probs), xp.array(0.0, wide), probs)
    stages.append(probs)
    y = xp.matmul(probs, v)
    if rank == 3:
        y = xp.reshape(xp.transpose(y, (0, 2, 1, 3)), (y.shape[0], y.shape[2], -1))
    return y.astype(dtype), present_k.astype(dtype), present_v.astype(dtype), stages[mode].astype(dtype)


def _quant_param(xp, p, x, axis, block):
    """A scale or zero point shaped to broadcast against ``x`` (``xp``: the array module): per
    tensor, per ``axis``, or per block of ``block`` elements along ``axis``."""
    if p.ndim == 0 or (p.size == 1 and not block):
        return xp.reshape(p, ())
    axis = axis % x.ndim
    if block:
        return xp.repeat(p, block, axis=axis)[tuple(slice(0, x.shape[axis]) if a == axis else slice(None)
                                                    for a in range(x.ndim))]
    return xp.reshape(p, [-1 if a == axis else 1 for a in range(x.ndim)])


def _dequantize(xp, x, scale, zero, axis, block, dtype):
    """ONNX DequantizeLinear: (x - zero point) · scale in float32 or wider, returned as ``dtype``."""
    s = _quant_param(xp, scale, x, axis, block)
    wide = xp.float32 if s.dtype in (xp.float16, xp.bfloat16) else s.dtype
    z = 0 if zero is None else _quant_param(xp, zero, x, axis, block).astype(wide)
    return ((x.astype(wide) - z) * s.astype(wide)).astype(dtype)


def _slice(x, starts, ends, axes, steps):
    """ONNX Slice with bounds read as Python ints, clamped to the axis (Python's slice semantics;
    an INT64_MAX end is the axis' size, which runtimes with 32-bit slice indices need)."""
    starts = np.asarray(starts).reshape(-1).tolist()
    ends = np.asarray(ends).reshape(-1).tolist()
    axes = range(len(starts)) if axes is None else [a % x.ndim for a in np.asarray(axes).reshape(-1).tolist()]
    steps = [1] * len(starts) if steps is None else np.asarray(steps).reshape(-1).tolist()
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        n = x.shape[a]
        index[a] = slice(int(max(-n - 1, min(n, s))), int(max(-n - 1, min(n, e))), int(st))
    return x[tuple(index)]



def _first_outputs(value, n):
    """The first ``n`` outputs of an op's code (a model may leave trailing optional outputs out)."""
    if isinstance(value, (tuple, list)):
        return value[0] if n == 1 else tuple(value[:n])
    return value
