"""Reductions (``axes`` as an optional second input), arg max/min, cumulative ops, losses."""
from __future__ import annotations

import numpy as np

from . import reference
from .elementwise import is_float, narrow, wide


def _axes(data, axes, noop_with_empty_axes):
    """The axes to reduce as a sorted tuple; () means no reduction at all."""
    if axes is None or np.size(axes) == 0:
        return () if noop_with_empty_axes else tuple(range(data.ndim))
    return tuple(sorted({int(a) % data.ndim for a in np.ravel(axes)}))


def _reduce(fn, data, axes, keepdims, noop_with_empty_axes, pre=None, post=None):
    """post(fn(pre(data), over the axes)) in float64 (floats) or the input dtype (ints)."""
    x = np.asarray(data)
    a = wide(x)
    ax = _axes(x, axes, noop_with_empty_axes)
    with np.errstate(all="ignore"):
        if pre is not None:
            a = pre(a)
        y = fn(a, axis=ax, keepdims=bool(keepdims))
        if post is not None:
            y = post(y)
    return narrow(y, x.dtype)


@reference("reduce_sum")
def reduce_sum(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    return _reduce(np.sum, data, axes, keepdims, noop_with_empty_axes)


@reference("reduce_mean")
def reduce_mean(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    """The mean (an empty set gives NaN)."""
    return _reduce(np.mean, data, axes, keepdims, noop_with_empty_axes)


@reference("reduce_prod")
def reduce_prod(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    return _reduce(np.prod, data, axes, keepdims, noop_with_empty_axes)


@reference("reduce_sum_square")
def reduce_sum_square(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    return _reduce(np.sum, data, axes, keepdims, noop_with_empty_axes, pre=np.square)


@reference("reduce_l1")
def reduce_l1(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    return _reduce(np.sum, data, axes, keepdims, noop_with_empty_axes, pre=np.abs)


@reference("reduce_l2")
def reduce_l2(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    return _reduce(np.sum, data, axes, keepdims, noop_with_empty_axes, pre=np.square, post=np.sqrt)


@reference("reduce_log_sum")
def reduce_log_sum(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    """log(sum(x)) (an empty set gives -inf)."""
    return _reduce(np.sum, data, axes, keepdims, noop_with_empty_axes, post=np.log)


@reference("reduce_log_sum_exp")
def reduce_log_sum_exp(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    """log(sum(exp(x))), shifted by the max for stability (an empty set gives -inf)."""

    def lse(a, axis, keepdims):
        m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0.0)
        s = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
        return s if keepdims else np.squeeze(s, axis=axis)

    return _reduce(lse, data, axes, keepdims, noop_with_empty_axes)


def _extreme(fn, data, axes, keepdims, noop_with_empty_axes, empty_value):
    """max/min with ``initial`` so that an empty set gives -inf/+inf (or the int limit)."""
    x = np.asarray(data)
    work = x.astype(np.uint8) if x.dtype == np.bool_ else x
    if is_float(work.dtype):
        init = empty_value
    else:
        info = np.iinfo(work.dtype)
        init = info.min if empty_value < 0 else info.max
        if x.dtype == np.bool_:
            init = 0 if empty_value < 0 else 1
    y = _reduce(lambda a, axis, keepdims: fn(a, axis=axis, keepdims=keepdims, initial=init),
                work, axes, keepdims, noop_with_empty_axes)
    return narrow(y, x.dtype)


@reference("reduce_max")
def reduce_max(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    """max (bools: False < True; an empty set gives -inf or the dtype minimum)."""
    return _extreme(np.max, data, axes, keepdims, noop_with_empty_axes, -np.inf)


@reference("reduce_min")
def reduce_min(data, axes=None, keepdims=1, noop_with_empty_axes=0):
    """min (bools: False < True; an empty set gives +inf or the dtype maximum)."""
    return _extreme(np.min, data, axes, keepdims, noop_with_empty_axes, np.inf)


def _arg(fn, data, axis, keepdims, select_last_index):
    a = wide(data)
    axis = axis % a.ndim
    if select_last_index:
        idx = a.shape[axis] - 1 - fn(np.flip(a, axis), axis=axis)
    else:
        idx = fn(a, axis=axis)
    if keepdims:
        idx = np.expand_dims(idx, axis)
    return np.asarray(idx, dtype=np.int64)


@reference("arg_max")
def arg_max(data, axis=0, keepdims=1, select_last_index=0):
    return _arg(np.argmax, data, axis, keepdims, select_last_index)


@reference("arg_min")
def arg_min(data, axis=0, keepdims=1, select_last_index=0):
    return _arg(np.argmin, data, axis, keepdims, select_last_index)


def _cumulative(fn, identity, x, axis, exclusive, reverse):
    x = np.asarray(x)
    ax = int(np.ravel(axis)[0]) % x.ndim
    a = wide(x)
    if reverse:
        a = np.flip(a, ax)
    with np.errstate(all="ignore"):
        y = fn(a, axis=ax, dtype=a.dtype)
    if exclusive:  # shift by one along the axis, the identity in front
        head = np.full_like(np.take(y, [0], axis=ax), identity)
        y = np.concatenate([head, np.take(y, np.arange(y.shape[ax] - 1), axis=ax)], axis=ax)
    if reverse:
        y = np.flip(y, ax)
    return narrow(y, x.dtype)


@reference("cum_sum")
def cum_sum(x, axis, exclusive=0, reverse=0):
    return _cumulative(np.cumsum, 0, x, axis, exclusive, reverse)


@reference("cum_prod")
def cum_prod(x, axis, exclusive=0, reverse=0):
    return _cumulative(np.cumprod, 1, x, axis, exclusive, reverse)


# --- losses ---------------------------------------------------------------------------


def _nll(log_prob, target, weight, reduction, ignore_index):
    """-log_prob[n, target[n, ...], ...] * weight[target], reduced like ONNX (float64)."""
    target = np.asarray(target).astype(np.int64)
    mask = np.ones(target.shape, dtype=bool) if ignore_index is None else target != ignore_index
    safe = np.where(mask, target, 0)
    picked = np.squeeze(np.take_along_axis(log_prob, np.expand_dims(safe, 1), axis=1), 1)
    w = np.ones(target.shape) if weight is None else wide(weight).astype(np.float64)[safe]
    w = np.where(mask, w, 0.0)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.sum(loss)
    with np.errstate(all="ignore"):
        return np.sum(loss) / np.sum(w)


@reference("negative_log_likelihood_loss")
def negative_log_likelihood_loss(input, target, weight=None, reduction="mean", ignore_index=None):  # noqa: A002
    x = np.asarray(input)
    return narrow(_nll(wide(x).astype(np.float64), target, weight, reduction, ignore_index), x.dtype)


@reference("softmax_cross_entropy_loss")
def softmax_cross_entropy_loss(scores, labels, weights=None, reduction="mean", ignore_index=None):
    """(loss, log_prob): NLL of log_softmax(scores, axis=1)."""
    x = np.asarray(scores)
    a = wide(x).astype(np.float64)
    s = a - np.max(a, axis=1, keepdims=True)
    log_prob = s - np.log(np.sum(np.exp(s), axis=1, keepdims=True))
    loss = _nll(log_prob, labels, weights, reduction, ignore_index)
    return narrow(loss, x.dtype), narrow(log_prob, x.dtype)
