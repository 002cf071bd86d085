"""Normalization references (statistics in float64, results in the input dtype)."""
from __future__ import annotations

import numpy as np

from . import reference
from .elementwise import narrow, onnx_dtype, wide


def _f64(x):
    return wide(x).astype(np.float64)


def _channel(v, ndim):
    """A per-channel vector (C,) shaped to broadcast against (N, C, D1, ...)."""
    return _f64(v).reshape([1, -1] + [1] * (ndim - 2))


@reference("batch_normalization")
def batch_normalization(X, scale, B, input_mean, input_var, epsilon=1e-5, momentum=0.9, training_mode=0):
    """Y (inference), or (Y, running_mean, running_var) with batch statistics (training)."""
    x = np.asarray(X)
    a = _f64(x)
    if not training_mode:
        y = (a - _channel(input_mean, a.ndim)) / np.sqrt(_channel(input_var, a.ndim) + epsilon)
        return narrow(y * _channel(scale, a.ndim) + _channel(B, a.ndim), x.dtype)
    axes = tuple(d for d in range(a.ndim) if d != 1)
    mean, var = a.mean(axis=axes), a.var(axis=axes)  # population variance
    y = (a - _channel(mean, a.ndim)) / np.sqrt(_channel(var, a.ndim) + epsilon)
    y = y * _channel(scale, a.ndim) + _channel(B, a.ndim)
    stat_dt = np.asarray(input_mean).dtype
    running_mean = _f64(input_mean) * momentum + mean * (1 - momentum)
    running_var = _f64(input_var) * momentum + var * (1 - momentum)
    return narrow(y, x.dtype), narrow(running_mean, stat_dt), narrow(running_var, stat_dt)


@reference("instance_normalization")
def instance_normalization(input, scale, B, epsilon=1e-5):  # noqa: A002
    """Normalize each (n, c) over the spatial axes, then per-channel scale and bias."""
    x = np.asarray(input)
    a = _f64(x)
    axes = tuple(range(2, a.ndim))
    y = (a - a.mean(axis=axes, keepdims=True)) / np.sqrt(a.var(axis=axes, keepdims=True) + epsilon)
    return narrow(y * _channel(scale, a.ndim) + _channel(B, a.ndim), x.dtype)


@reference("layer_normalization")
def layer_normalization(X, Scale, B=None, axis=-1, epsilon=1e-5, stash_type=1):
    """(Y, Mean, InvStdDev) over axes [axis, rank); Mean/InvStdDev keep those axes as 1."""
    x = np.asarray(X)
    a = _f64(x)
    axes = tuple(range(axis % a.ndim, a.ndim))
    mean = a.mean(axis=axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(((a - mean) ** 2).mean(axis=axes, keepdims=True) + epsilon)
    y = narrow((a - mean) * inv_std, x.dtype)  # the stage-1 result is cast back to T
    y = _f64(y) * _f64(Scale)
    if B is not None:
        y = y + _f64(B)
    stash = onnx_dtype(stash_type)
    return narrow(y, x.dtype), narrow(mean, stash), narrow(inv_std, stash)


@reference("group_normalization")
def group_normalization(X, scale, bias, num_groups, epsilon=1e-5, stash_type=1):
    """Normalize each (n, group of C/num_groups channels); then per-channel scale and bias."""
    x = np.asarray(X)
    a = _f64(x)
    g = a.reshape(a.shape[0], num_groups, -1)
    g = (g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + epsilon)
    y = _f64(narrow(g.reshape(a.shape), x.dtype))
    return narrow(y * _channel(scale, a.ndim) + _channel(bias, a.ndim), x.dtype)


@reference("rms_normalization")
def rms_normalization(X, scale, axis=-1, epsilon=1e-5, stash_type=1):
    """X / sqrt(mean(X**2 over [axis, rank)) + epsilon) * scale, in the dtype of ``scale``."""
    x = np.asarray(X)
    a = _f64(x)
    axes = tuple(range(axis % a.ndim, a.ndim))
    normalized = narrow(a / np.sqrt(np.mean(a * a, axis=axes, keepdims=True) + epsilon), x.dtype)
    return narrow(_f64(normalized) * _f64(scale), np.asarray(scale).dtype)


@reference("lrn")
def lrn(X, size, alpha=0.0001, beta=0.75, bias=1.0):
    """x / (bias + alpha / size * sum of x**2 over the channel window) ** beta."""
    x = np.asarray(X)
    a = _f64(x)
    C = a.shape[1]
    sq = a * a
    square_sum = np.zeros_like(a)
    for c in range(C):
        lo, hi = max(0, c - (size - 1) // 2), min(C - 1, c + -(-(size - 1) // 2))
        square_sum[:, c] = sq[:, lo:hi + 1].sum(axis=1)
    return narrow(a / (bias + alpha / size * square_sum) ** beta, x.dtype)


@reference("lp_normalization")
def lp_normalization(input, axis=-1, p=2):  # noqa: A002
    """x / ||x||_p along ``axis`` (p is 1 or 2); a zero norm gives 0."""
    x = np.asarray(input)
    a = _f64(x)
    norm = np.sum(np.abs(a), axis=axis, keepdims=True) if p == 1 else \
        np.sqrt(np.sum(a * a, axis=axis, keepdims=True))
    with np.errstate(all="ignore"):
        y = np.where(norm == 0, 0.0, a / norm)
    return narrow(y, x.dtype)


@reference("mean_variance_normalization")
def mean_variance_normalization(X, axes=(0, 2, 3)):
    """(x - mean) / (sqrt(E[x**2] - mean**2) + 1e-9) over ``axes`` (the ONNX function body)."""
    x = np.asarray(X)
    a = _f64(x)
    axes = tuple(axes)
    mean = a.mean(axis=axes, keepdims=True)
    std = np.sqrt(np.mean(a * a, axis=axes, keepdims=True) - mean**2)
    return narrow((a - mean) / (std + 1e-9), x.dtype)
