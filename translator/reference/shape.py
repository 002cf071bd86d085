"""Shape manipulation and data movement: reshape, transpose, slice, pad, split, ..."""
from __future__ import annotations

import math

import numpy as np

from . import reference
from .misc import is_float


def _ints(t) -> list[int]:
    """A 1-D (or scalar) integer tensor as a Python list."""
    return [int(v) for v in np.asarray(t).reshape(-1)]


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


@reference("reshape")
def reshape(data, shape, allowzero=0):
    dims = _ints(shape)
    if not allowzero:
        dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return np.reshape(data, dims)


@reference("flatten")
def flatten(x, axis=1):
    axis = _axis(axis, x.ndim)
    rows = math.prod(x.shape[:axis])
    return x.reshape(rows, math.prod(x.shape[axis:]))


@reference("squeeze")
def squeeze(data, axes=None):
    if axes is None:
        return np.squeeze(data)
    return np.squeeze(data, axis=tuple(_axis(a, data.ndim) for a in _ints(axes)))


@reference("unsqueeze")
def unsqueeze(data, axes):
    rank = data.ndim + len(_ints(axes))
    out = data
    for a in sorted(_axis(a, rank) for a in _ints(axes)):
        out = np.expand_dims(out, a)
    return out


@reference("transpose")
def transpose(data, perm=None):
    return np.transpose(data, None if perm is None else list(perm)).copy()


@reference("expand")
def expand(x, shape):
    target = np.broadcast_shapes(x.shape, tuple(_ints(shape)))
    return np.broadcast_to(x, target).copy()


@reference("concat")
def concat(*inputs, axis):
    return np.concatenate(inputs, axis=axis)


def _split_sizes(dim: int, split, num_outputs) -> list[int]:
    if split is not None:
        return _ints(split)
    if num_outputs is None:
        raise ValueError("split: give the split input or num_outputs (the legacy form that splits "
                         "evenly into as many outputs as the node has is not the newest ONNX form)")
    chunk = -(-dim // num_outputs)  # ceil: every chunk but the last has this size
    return [chunk] * (num_outputs - 1) + [max(dim - chunk * (num_outputs - 1), 0)]


@reference("split")
def split(x, split=None, axis=0, num_outputs=None):
    axis = _axis(axis, x.ndim)
    sizes = _split_sizes(x.shape[axis], split, num_outputs)
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"split sizes {sizes} do not add up to the axis' length {x.shape[axis]}")
    bounds = np.cumsum([0] + sizes)
    return tuple(np.take(x, np.arange(bounds[i], bounds[i + 1]), axis=axis) for i in range(len(sizes)))


def _slice_bounds(start: int, end: int, step: int, dim: int) -> slice:
    """ONNX Slice clamping rules, returned as a Python slice that means the same thing."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return slice(start, end, step)
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


@reference("slice")
def slice_(data, starts, ends, axes=None, steps=None):
    starts, ends = _ints(starts), _ints(ends)
    axes = list(range(len(starts))) if axes is None else [_axis(a, data.ndim) for a in _ints(axes)]
    steps = [1] * len(starts) if steps is None else _ints(steps)
    index = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a] = _slice_bounds(s, e, st, data.shape[a])
    return data[tuple(index)].copy()


@reference("tile")
def tile(x, repeats):
    return np.tile(x, _ints(repeats))


@reference("pad")
def pad(data, pads, constant_value=None, axes=None, mode="constant"):
    rank = data.ndim
    axes = list(range(rank)) if axes is None else [_axis(a, rank) for a in _ints(axes)]
    p = _ints(pads)
    n = len(axes)
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = p[i], p[i + n]
    # negative pads crop first
    crop = tuple(slice(max(-b, 0), data.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end)))
    x = data[crop]
    width = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if mode == "constant":
        if constant_value is None or np.asarray(constant_value).size == 0:
            value = "" if data.dtype == object else np.zeros((), dtype=data.dtype)
        else:
            value = np.asarray(constant_value).reshape(-1)[0]
        out = np.full([s + b + e for s, (b, e) in zip(x.shape, width)], value, dtype=data.dtype)
        out[tuple(slice(b, b + s) for s, (b, _) in zip(x.shape, width))] = x
        return out
    if mode not in ("reflect", "edge", "wrap"):
        raise ValueError(f"pad: unknown mode {mode!r}")
    return np.pad(x, width, mode=mode)


@reference("shape")
def shape(data, start=0, end=None):
    dims = np.array(data.shape, dtype=np.int64)
    rank = len(dims)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = rank if end is None else min(max(end + rank if end < 0 else end, 0), rank)
    return dims[start:end].copy()


@reference("size")
def size(data):
    return np.array(data.size, dtype=np.int64)


@reference("range")
def range_(start, limit, delta, stash_type=1):
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))  # scalars
    dtype = start.dtype
    if not is_float(dtype):
        s, l, d = int(start), int(limit), int(delta)
        n = max(-(-(l - s) // d), 0)  # d == 0: ZeroDivisionError, reported as a bad model
        return (s + np.arange(n, dtype=np.int64) * d).astype(dtype)
    n = max(math.ceil((float(limit) - float(start)) / float(delta)), 0)
    if dtype.itemsize < 4 and stash_type != 1:
        # float16 / bfloat16 without stash: successive additions in the native type
        out, cur = [], start
        for _ in range(n):
            out.append(cur)
            cur = np.asarray(cur + delta).astype(dtype)
        return np.array(out, dtype=dtype)
    wd = np.float64 if dtype == np.float64 else np.float32
    return (wd(start) + np.arange(n, dtype=wd) * wd(delta)).astype(dtype)


@reference("depth_to_space")
def depth_to_space(x, blocksize, mode="DCR"):
    b, c, h, w = x.shape
    bs = blocksize
    if mode == "DCR":
        tmp = x.reshape(b, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:  # CRD
        tmp = x.reshape(b, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return tmp.reshape(b, c // (bs * bs), h * bs, w * bs)


@reference("space_to_depth")
def space_to_depth(x, blocksize, mode="DCR"):
    b, c, h, w = x.shape
    bs = blocksize
    tmp = x.reshape(b, c, h // bs, bs, w // bs, bs)
    if mode == "DCR":  # blocks outermost: channel index = (by * bs + bx) * c + ch
        tmp = tmp.transpose(0, 3, 5, 1, 2, 4)
    else:  # CRD: channel index = ch * bs * bs + by * bs + bx
        tmp = tmp.transpose(0, 1, 3, 5, 2, 4)
    return tmp.reshape(b, c * bs * bs, h // bs, w // bs)


@reference("reverse_sequence")
def reverse_sequence(x, sequence_lens, batch_axis=1, time_axis=0):
    out = x.copy()
    for i, n in enumerate(_ints(sequence_lens)):
        src = [slice(None)] * x.ndim
        src[batch_axis], src[time_axis] = i, slice(n - 1, None, -1) if n > 0 else slice(0, 0)
        dst = [slice(None)] * x.ndim
        dst[batch_axis], dst[time_axis] = i, slice(0, n)
        out[tuple(dst)] = x[tuple(src)]
    return out


@reference("reverse")
def reverse(x, axes=None):
    if axes is None:
        return np.flip(x).copy()
    return np.flip(x, axis=tuple(_axis(a, x.ndim) for a in _ints(axes))).copy()
