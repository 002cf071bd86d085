"""SpaceToBatchND / BatchToSpaceND as IR reshapes: the shape arithmetic, shared by the
TFLite and TensorFlow frontends (each emits the ops with its own context).

Both work on a static channels-last shape ``[N, S1, …, Sm, *rest]`` with ``m`` block sizes:

* space → batch: pad the spatial dims, reshape ``[N, P1/b1, b1, …, *rest]``, move the
  blocks to the front, reshape ``[b1·…·bm·N, P1/b1, …, *rest]``;
* batch → space: reshape ``[b1, …, bm, N', S1, …, *rest]``, interleave each block with its
  spatial dim, reshape ``[N', S1·b1, …, *rest]``, then crop.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SpaceToBatch:
    pads: list[int] | None  #: ONNX-style pads over every dim (begins, then ends), None when no padding
    split: list[int]
    perm: list[int]
    out: list[int]


@dataclass(frozen=True)
class BatchToSpace:
    split: list[int]
    perm: list[int]
    full: list[int]  #: the shape before the crop
    crop: tuple[list[int], list[int], list[int]] | None  #: (starts, ends, axes), None when nothing is cropped


def space_to_batch(shape: list[int], block: list[int], pads: np.ndarray) -> SpaceToBatch:
    """``pads``: [m, 2] (begin, end) per spatial dim."""
    m = len(block)
    flat = None
    if pads.any():
        full = np.zeros((len(shape), 2), np.int64)
        full[1:1 + m] = pads
        flat = [int(v) for v in np.concatenate([full[:, 0], full[:, 1]])]
    sp = [shape[1 + k] + int(pads[k].sum()) for k in range(m)]
    rest = shape[1 + m:]
    split = [shape[0]] + [d for k in range(m) for d in (sp[k] // block[k], block[k])] + rest
    perm = [2 + 2 * k for k in range(m)] + [0] + [1 + 2 * k for k in range(m)] + list(range(1 + 2 * m, len(split)))
    out = [int(np.prod(block)) * shape[0]] + [sp[k] // block[k] for k in range(m)] + rest
    return SpaceToBatch(flat, split, perm, out)


def batch_to_space(shape: list[int], block: list[int], crops: np.ndarray) -> BatchToSpace:
    """``crops``: [m, 2] (begin, end) per spatial dim."""
    m = len(block)
    n = shape[0] // int(np.prod(block))
    rest = shape[1 + m:]
    split = block + [n] + shape[1:]
    perm = [m] + [d for k in range(m) for d in (m + 1 + k, k)] + list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    full = [n] + [shape[1 + k] * block[k] for k in range(m)] + rest
    crop = None
    if crops.any():
        crop = ([int(crops[k, 0]) for k in range(m)], [full[1 + k] - int(crops[k, 1]) for k in range(m)],
                list(range(1, 1 + m)))
    return BatchToSpace(split, perm, full, crop)
