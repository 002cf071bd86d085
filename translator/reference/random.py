"""Random generator references (numpy Generator; ``seed`` makes the result reproducible).

The values can never match another implementation's generator; only shape, dtype and the
distribution are meaningful for comparisons.
"""
from __future__ import annotations

import numpy as np

from . import reference
from .elementwise import narrow, onnx_dtype


def _rng(seed):
    """A Generator seeded from the float ``seed`` attribute's bits (fresh entropy if None)."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(int(np.array(seed, dtype=np.float64).view(np.uint64)))


def _out_dtype(dtype, like=None):
    return onnx_dtype(dtype) if dtype is not None else np.asarray(like).dtype


@reference("random_normal")
def random_normal(shape, dtype=1, mean=0.0, scale=1.0, seed=None):
    return narrow(_rng(seed).normal(mean, scale, size=tuple(shape)), onnx_dtype(dtype))


@reference("random_normal_like")
def random_normal_like(input, dtype=None, mean=0.0, scale=1.0, seed=None):  # noqa: A002
    shape = np.shape(input)
    return narrow(_rng(seed).normal(mean, scale, size=shape), _out_dtype(dtype, input))


@reference("random_uniform")
def random_uniform(shape, dtype=1, high=1.0, low=0.0, seed=None):
    return narrow(_rng(seed).uniform(low, high, size=tuple(shape)), onnx_dtype(dtype))


@reference("random_uniform_like")
def random_uniform_like(input, dtype=None, high=1.0, low=0.0, seed=None):  # noqa: A002
    shape = np.shape(input)
    return narrow(_rng(seed).uniform(low, high, size=shape), _out_dtype(dtype, input))


@reference("bernoulli")
def bernoulli(input, dtype=None, seed=None):  # noqa: A002
    """1 with probability ``input`` (elementwise), else 0, in ``dtype`` (default: input's)."""
    p = np.asarray(input).astype(np.float64)
    return narrow(_rng(seed).uniform(0.0, 1.0, size=p.shape) < p, _out_dtype(dtype, input))


@reference("multinomial")
def multinomial(input, dtype=6, sample_size=1, seed=None):  # noqa: A002
    """``sample_size`` class indices per batch row, drawn from softmax(input row) (the input
    holds unnormalized log-probabilities), shape (batch, sample_size), int32 by default."""
    logits = np.asarray(input).astype(np.float64)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    rng = _rng(seed)
    out = np.stack([rng.choice(p.shape[-1], size=sample_size, p=row) for row in p])
    return narrow(out, onnx_dtype(dtype))
