"""Pooling: average / max / lp / sum pools, their global forms, max_unpool."""
from __future__ import annotations

import math

import numpy as np

from . import reference


def _geometry(in_sp, kernel, strides, dilations, pads, auto_pad, ceil_mode):
    """(strides, dilations, pads_begin, pads_end, out_spatial) by the ONNX pooling shape rules."""
    nd = len(in_sp)
    strides = list(strides) if strides else [1] * nd
    dilations = list(dilations) if dilations else [1] * nd
    ext = [(kernel[i] - 1) * dilations[i] + 1 for i in range(nd)]  # effective kernel extent
    rnd = math.ceil if ceil_mode else math.floor
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-in_sp[i] // strides[i]) for i in range(nd)]
        begins, ends = [], []
        for i in range(nd):
            total = max((out[i] - 1) * strides[i] + ext[i] - in_sp[i], 0)
            begins.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
            ends.append(total - begins[-1])
        return strides, dilations, begins, ends, out
    if auto_pad == "VALID":
        out = [rnd((in_sp[i] - ext[i]) / strides[i]) + 1 for i in range(nd)]
        return strides, dilations, [0] * nd, [0] * nd, out
    p = list(pads) if pads else [0] * (2 * nd)
    out = []
    for i in range(nd):
        o = rnd((in_sp[i] + p[i] + p[i + nd] - ext[i]) / strides[i]) + 1
        if ceil_mode and (o - 1) * strides[i] >= in_sp[i] + p[i]:
            o -= 1  # a window may not start in the right padding
        out.append(o)
    return strides, dilations, p[:nd], p[nd:], out


def _windows(x, kernel, strides, dilations, begins, ends, out):
    """Window values (N, C, *out, K), plus masks: inside the input, inside input + explicit pads."""
    nd = x.ndim - 2
    in_sp = x.shape[2:]
    need = [(out[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 for i in range(nd)]
    tail = [max(need[i] - begins[i] - in_sp[i], 0) for i in range(nd)]
    width = [(0, 0), (0, 0)] + [(begins[i], tail[i]) for i in range(nd)]
    xp = np.pad(x, width)
    inside = np.pad(np.ones(in_sp, dtype=bool), width[2:])
    counted = np.zeros(inside.shape, dtype=bool)
    counted[tuple(slice(0, begins[i] + in_sp[i] + ends[i]) for i in range(nd))] = True
    vals, ins, cnt, coords = [], [], [], []
    for kpos in np.ndindex(*kernel):
        window = tuple(slice(kpos[i] * dilations[i], kpos[i] * dilations[i] + strides[i] * (out[i] - 1) + 1,
                             strides[i]) for i in range(nd))
        vals.append(xp[(slice(None), slice(None)) + window])
        ins.append(inside[window])
        cnt.append(counted[window])
        coords.append([np.arange(out[i]) * strides[i] - begins[i] + kpos[i] * dilations[i] for i in range(nd)])
    return np.stack(vals, -1), np.stack(ins, -1), np.stack(cnt, -1), coords


def _pool(X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode):
    geo = _geometry(X.shape[2:], kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    return _windows(X.astype(np.float64), list(kernel_shape), *geo)


@reference("average_pool")
def average_pool(X, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape=None,
                 pads=None, strides=None):
    vals, inside, counted, _ = _pool(X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    total = np.where(inside, vals, 0.0).sum(-1)
    n = (counted if count_include_pad else inside).sum(-1)
    return (total / n).astype(X.dtype)


@reference("sum_pool")
def sum_pool(X, auto_pad="NOTSET", ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape=None,
             pads=None, strides=None):
    vals, inside, _, _ = _pool(X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    return np.where(inside, vals, 0.0).sum(-1).astype(X.dtype)


@reference("lp_pool")
def lp_pool(X, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None, p=2, pads=None, strides=None):
    vals, inside, _, _ = _pool(X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    total = (np.abs(np.where(inside, vals, 0.0)) ** p).sum(-1)
    return (total ** (1.0 / p)).astype(X.dtype)


@reference("max_pool")
def max_pool(X, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None, pads=None,
             storage_order=0, strides=None):
    vals, inside, _, coords = _pool(X, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    masked = np.where(inside, vals, -np.inf)
    arg = np.argmax(masked, axis=-1)  # first maximum in window order
    y = np.take_along_axis(masked, arg[..., None], -1)[..., 0]
    # flat index of the chosen element in the (unpadded) input, batch and channel included
    n, c = X.shape[:2]
    in_sp = X.shape[2:]
    nd = len(in_sp)
    out_sp = y.shape[2:]
    spatial = [np.zeros(y.shape, dtype=np.int64) for _ in range(nd)]
    for ki, kc in enumerate(coords):
        sel = arg == ki
        for i in range(nd):
            shp = [1] * nd
            shp[i] = out_sp[i]
            spatial[i] = np.where(sel, kc[i].reshape(shp), spatial[i])
    order = range(nd) if not storage_order else reversed(range(nd))
    flat = np.zeros(y.shape, dtype=np.int64)
    for i in order:
        flat = flat * in_sp[i] + spatial[i]
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * math.prod(in_sp)
    flat = flat + base.reshape((n, c) + (1,) * nd)
    return y.astype(X.dtype), flat


@reference("max_unpool")
def max_unpool(X, I, output_shape=None, kernel_shape=None, pads=None, strides=None):
    nd = X.ndim - 2
    strides = list(strides) if strides else [1] * nd
    p = list(pads) if pads else [0] * (2 * nd)
    default = list(X.shape[:2]) + [(X.shape[2 + i] - 1) * strides[i] + kernel_shape[i] - p[i] - p[i + nd]
                                   for i in range(nd)]
    shape = default if output_shape is None else [int(v) for v in np.asarray(output_shape).reshape(-1)]
    # indices address the default (unpadded) output; an explicit output_shape only grows
    # the canvas, each value keeps its (n, c, spatial) coordinates
    coords = np.unravel_index(np.asarray(I, dtype=np.int64).reshape(-1), default)
    out = np.zeros(shape, dtype=X.dtype)
    out[coords] = X.reshape(-1)
    return out


def _spatial_axes(x):
    return tuple(range(2, x.ndim))


@reference("global_average_pool")
def global_average_pool(X):
    return X.astype(np.float64).mean(axis=_spatial_axes(X), keepdims=True).astype(X.dtype)


@reference("global_max_pool")
def global_max_pool(X):
    return X.max(axis=_spatial_axes(X), keepdims=True)


@reference("global_lp_pool")
def global_lp_pool(X, p=2):
    total = (np.abs(X.astype(np.float64)) ** p).sum(axis=_spatial_axes(X), keepdims=True)
    return (total ** (1.0 / p)).astype(X.dtype)
