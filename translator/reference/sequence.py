"""Sequences (Python lists of arrays) and optionals (an array, a list, or None when empty)."""
from __future__ import annotations

import numpy as np

from ..table import budget
from . import reference


def _pos(position, n: int, default: int) -> int:
    if position is None:
        return default
    p = int(np.asarray(position).reshape(-1)[0])
    return p + n if p < 0 else p


@reference("sequence_construct")
def sequence_construct(*inputs):
    return [np.asarray(x).copy() for x in inputs]


@reference("sequence_empty")
def sequence_empty(dtype=None):
    return []


@reference("sequence_length")
def sequence_length(input_sequence):
    return np.array(len(input_sequence), dtype=np.int64)


@reference("sequence_at")
def sequence_at(input_sequence, position):
    return input_sequence[_pos(position, len(input_sequence), 0)].copy()


@reference("sequence_insert")
def sequence_insert(input_sequence, tensor, position=None):
    seq = list(input_sequence)
    seq.insert(_pos(position, len(seq), len(seq)), np.asarray(tensor).copy())
    return seq


@reference("sequence_erase")
def sequence_erase(input_sequence, position=None):
    seq = list(input_sequence)
    del seq[_pos(position, len(seq), len(seq) - 1)]
    return seq


@reference("sequence_map")
def sequence_map(input_sequence, *additional_inputs, body):
    results: list[list] = []
    for i in range(len(input_sequence)):
        budget.loop_iteration("sequence_map")
        args = [input_sequence[i]] + [a[i] if isinstance(a, list) else a for a in additional_inputs]
        outs = body(*args)
        if not results:
            results = [[] for _ in outs]
        for acc, o in zip(results, outs):
            acc.append(np.asarray(o))
    return tuple(results) if results else ([],)


@reference("concat_from_sequence")
def concat_from_sequence(input_sequence, axis, new_axis=0):
    if new_axis:
        return np.stack(input_sequence, axis=axis)
    return np.concatenate(input_sequence, axis=axis)


@reference("split_to_sequence")
def split_to_sequence(input, split=None, axis=0, keepdims=1):
    axis = axis + input.ndim if axis < 0 else axis
    dim = input.shape[axis]
    if split is None:
        parts = [np.take(input, [i], axis=axis) for i in range(dim)]
        return parts if keepdims else [np.squeeze(p, axis=axis) for p in parts]
    split = np.asarray(split)
    if split.ndim == 0:  # chunks of that size, the last one may be smaller
        size = int(split)
        bounds = list(range(0, dim, size)) + [dim]
    else:
        bounds = [0] + np.cumsum(split.astype(np.int64)).tolist()
    return [np.take(input, np.arange(bounds[i], bounds[i + 1]), axis=axis) for i in range(len(bounds) - 1)]


@reference("optional")
def optional(input=None, type=None):
    return input


@reference("optional_get_element")
def optional_get_element(input):
    if input is None:
        raise ValueError("optional_get_element: the optional is empty")
    return input


@reference("optional_has_element")
def optional_has_element(input=None):
    return np.array(input is not None)
