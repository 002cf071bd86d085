"""Activation references (computed in float64, returned in the input dtype)."""
from __future__ import annotations

import numpy as np

from . import reference
from .elementwise import erf64, float_map, is_float, narrow


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    """log(1 + exp(x)) without overflow for large x."""
    return np.logaddexp(0.0, x)


@reference("relu")
def relu(x):
    x = np.asarray(x)
    if is_float(x.dtype):
        return float_map(lambda a: np.maximum(a, 0.0), x)
    return narrow(np.maximum(x, 0), x.dtype)


@reference("leaky_relu")
def leaky_relu(x, alpha=0.01):
    return float_map(lambda a: np.where(a < 0, alpha * a, a), x)


@reference("prelu")
def prelu(x, slope):
    """x if x >= 0 else slope * x; ``slope`` broadcasts (unidirectionally) to ``x``."""
    x = np.asarray(x)
    if is_float(x.dtype):
        return float_map(lambda a, s: np.where(a < 0, s * a, a), x, slope)
    return narrow(np.where(x < 0, np.asarray(slope) * x, x), x.dtype)


@reference("thresholded_relu")
def thresholded_relu(x, alpha=1.0):
    return float_map(lambda a: np.where(a > alpha, a, 0.0), x)


@reference("elu")
def elu(x, alpha=1.0):
    return float_map(lambda a: np.where(a < 0, alpha * (np.exp(a) - 1.0), a), x)


@reference("celu")
def celu(x, alpha=1.0):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return float_map(lambda a: np.maximum(a, 0.0) + np.minimum(0.0, alpha * np.expm1(a / alpha)), x)


@reference("selu")
def selu(x, alpha=1.67326319217681884765625, gamma=1.05070102214813232421875):
    return float_map(lambda a: gamma * np.where(a > 0, a, alpha * (np.exp(a) - 1.0)), x)


@reference("sigmoid")
def sigmoid(x):
    return float_map(_sigmoid, x)


@reference("hard_sigmoid")
def hard_sigmoid(x, alpha=0.2, beta=0.5):
    return float_map(lambda a: np.clip(alpha * a + beta, 0.0, 1.0), x)


@reference("hard_swish")
def hard_swish(x):
    """x * max(0, min(1, x / 6 + 0.5))."""
    return float_map(lambda a: a * np.clip(a / 6.0 + 0.5, 0.0, 1.0), x)


@reference("swish")
def swish(x, alpha=1.0):
    return float_map(lambda a: a * _sigmoid(alpha * a), x)


@reference("softplus")
def softplus(x):
    return float_map(_softplus, x)


@reference("parametric_softplus")
def parametric_softplus(x, alpha=1.0, beta=1.0):
    """alpha * log(1 + exp(beta * x)) (seed formula)."""
    return float_map(lambda a: alpha * _softplus(beta * a), x)


@reference("softsign")
def softsign(x):
    return float_map(lambda a: a / (1.0 + np.abs(a)), x)


@reference("mish")
def mish(x):
    return float_map(lambda a: a * np.tanh(_softplus(a)), x)


@reference("gelu")
def gelu(x, approximate="none"):
    if approximate == "tanh":
        return float_map(lambda a: 0.5 * a * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (a + 0.044715 * a**3))), x)
    return float_map(lambda a: 0.5 * a * (1.0 + erf64(a / np.sqrt(2.0))), x)


@reference("scaled_tanh")
def scaled_tanh(x, alpha=1.0, beta=1.0):
    """alpha * tanh(beta * x) (seed formula)."""
    return float_map(lambda a: alpha * np.tanh(beta * a), x)


@reference("affine")
def affine(x, alpha=1.0, beta=0.0):
    """alpha * x + beta (seed formula)."""
    return float_map(lambda a: alpha * a + beta, x)


@reference("shrink")
def shrink(x, bias=0.0, lambd=0.5):
    """x - bias if x > lambd, x + bias if x < -lambd, else 0 (ints allowed)."""
    x = np.asarray(x)
    a = x.astype(np.float64)
    y = np.where(a > lambd, a - bias, np.where(a < -lambd, a + bias, 0.0))
    return narrow(y, x.dtype)


# --- along one axis (opset 13 forms: a single ``axis``, default -1) --------------------


@reference("softmax")
def softmax(x, axis=-1):
    def fn(a):
        e = np.exp(a - np.max(a, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis, keepdims=True)

    return float_map(fn, x)


@reference("log_softmax")
def log_softmax(x, axis=-1):
    def fn(a):
        s = a - np.max(a, axis=axis, keepdims=True)
        return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))

    return float_map(fn, x)


@reference("hardmax")
def hardmax(x, axis=-1):
    """1 at the first maximum along ``axis``, 0 elsewhere."""
    x = np.asarray(x)
    first = np.expand_dims(np.argmax(x.astype(np.float64), axis=axis), axis)
    idx = np.arange(x.shape[axis]).reshape([-1 if d == axis % x.ndim else 1 for d in range(x.ndim)])
    return narrow(idx == first, x.dtype)
