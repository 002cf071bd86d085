"""Gather / scatter, selection and sorting ops: gather*, scatter*, top_k, unique, ..."""
from __future__ import annotations

import math

import numpy as np

from . import reference
from .misc import np_dtype


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _wrap(indices, dim: int) -> np.ndarray:
    """Negative indices count from the back."""
    idx = np.asarray(indices).astype(np.int64)
    return np.where(idx < 0, idx + dim, idx)


@reference("gather")
def gather(data, indices, axis=0):
    axis = _axis(axis, data.ndim)
    return np.take(data, _wrap(indices, data.shape[axis]), axis=axis)


@reference("gather_elements")
def gather_elements(data, indices, axis=0):
    axis = _axis(axis, data.ndim)
    return np.take_along_axis(data, _wrap(indices, data.shape[axis]), axis=axis)


@reference("gather_nd")
def gather_nd(data, indices, batch_dims=0):
    b = batch_dims
    k = indices.shape[-1]
    nb = math.prod(data.shape[:b])
    d = data.reshape((nb,) + data.shape[b:])
    idx = np.asarray(indices, dtype=np.int64).reshape(nb, -1, k)
    parts = [d[i][tuple(idx[i, :, j] for j in range(k))] for i in range(nb)]
    return np.stack(parts).reshape(indices.shape[:-1] + data.shape[b + k:])


def _combine(reduction: str):
    if reduction == "none":
        return lambda old, new: new
    ops = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    return ops[reduction]


@reference("scatter_elements")
def scatter_elements(data, indices, updates, axis=0, reduction="none"):
    axis = _axis(axis, data.ndim)
    idx = _wrap(indices, data.shape[axis])
    f = _combine(reduction)
    out = data.copy()
    for pos in np.ndindex(idx.shape):
        tgt = list(pos)
        tgt[axis] = idx[pos]
        tgt = tuple(tgt)
        out[tgt] = f(out[tgt], updates[pos])
    return out


@reference("scatter_nd")
def scatter_nd(data, indices, updates, reduction="none"):
    f = _combine(reduction)
    out = data.copy()
    idx = np.asarray(indices, dtype=np.int64)
    for pos in np.ndindex(idx.shape[:-1]):
        tgt = tuple(int(i) + (data.shape[j] if i < 0 else 0) for j, i in enumerate(idx[pos]))
        out[tgt] = f(out[tgt], updates[pos])
    return out


@reference("tensor_scatter")
def tensor_scatter(past_cache, update, write_indices=None, mode="linear", axis=-2):
    axis = _axis(axis, past_cache.ndim)
    max_len, seq_len = past_cache.shape[axis], update.shape[axis]
    out = past_cache.copy()
    for prefix in np.ndindex(past_cache.shape[:axis]):
        start = 0 if write_indices is None else int(np.asarray(write_indices).reshape(-1)[prefix[0]])
        for s in range(seq_len):
            c = start + s
            if mode == "circular":
                c %= max_len
            out[prefix + (c,)] = update[prefix + (s,)]
    return out


@reference("non_zero")
def non_zero(x):
    if x.ndim == 0:
        return np.zeros((0, int(bool(x))), dtype=np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@reference("one_hot")
def one_hot(indices, depth, values, axis=-1):
    d = int(np.asarray(depth).reshape(-1)[0])
    idx = _wrap(np.asarray(indices), d)
    hot = (idx[..., None] == np.arange(d)) & ((idx >= 0) & (idx < d))[..., None]
    off, on = np.asarray(values).reshape(-1)[:2]
    out = np.where(hot, on, off).astype(values.dtype)
    return np.moveaxis(out, -1, _axis(axis, idx.ndim + 1))


@reference("top_k")
def top_k(x, k, axis=-1, largest=1, sorted=1):
    axis = _axis(axis, x.ndim)
    k = int(np.asarray(k).reshape(-1)[0])
    n = x.shape[axis]
    if largest:
        # stable ascending sort of the flipped array, reversed: values descending and,
        # among equal values, the lower original index first
        flipped = np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable")
        order = n - 1 - np.flip(flipped, axis=axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(x, idx, axis=axis), idx


@reference("unique")
def unique(x, axis=None, sorted=1):
    if axis is not None:
        axis = _axis(axis, x.ndim)
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                          return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted:  # order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.argsort(order)
        y = np.take(y, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    i64 = np.int64
    return y, first.astype(i64), inverse.astype(i64), counts.astype(i64)


@reference("compress")
def compress(input, condition, axis=None):
    cond = np.asarray(condition).astype(bool).reshape(-1)
    return np.compress(cond, input, axis=axis)


@reference("trilu")
def trilu(input, k=None, upper=1):
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    rows, cols = input.shape[-2:]
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    keep = (c - r >= k) if upper else (c - r <= k)
    return np.where(keep, input, np.zeros((), dtype=input.dtype)).astype(input.dtype)


@reference("eye_like")
def eye_like(input, dtype=None, k=0):
    dt = input.dtype if dtype is None else np_dtype(dtype)
    rows, cols = input.shape
    return np.eye(rows, cols, k=k).astype(dt)
