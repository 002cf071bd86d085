"""Sparse TFLite constants (the ``sparsity`` field of a tensor) expanded to dense arrays.

The TFLite converter's sparsity pass stores a weight as its nonzero values plus TACO-style
metadata: the dims (each original dim, plus one extra dim per block dim of a block-sparse
weight) are walked in ``traversal_order``; every level is either DENSE (all ``dense_size``
positions) or SPARSE_CSR (the positions ``array_indices[segments[p]:segments[p+1]]`` of the
parent position ``p``). The value at the end of the walk is the next stored value. A
``DENSIFY`` op turns such a tensor into the dense one at run time; the frontend does the
same at load time, so every target sees an ordinary constant.
"""
from __future__ import annotations

from typing import Any

import numpy as np

DENSE, SPARSE_CSR = 0, 1


def _vector(v: Any) -> np.ndarray:
    """The values of a union ``Int32Vector``/``Uint16Vector``/``Uint8Vector`` (empty for none)."""
    vals = getattr(v, "values", None)
    return np.asarray(vals if vals is not None else [], dtype=np.int64)


def densify(values: np.ndarray, shape: tuple[int, ...], sparsity: Any) -> np.ndarray:
    """The dense array of ``shape`` that the stored ``values`` (1-D) and ``sparsity`` describe;
    ``ValueError`` with the reason when the metadata does not describe ``len(values)`` values."""
    rank = len(shape)
    order = [int(d) for d in (sparsity.traversalOrder if sparsity.traversalOrder is not None else range(rank))]
    block_map = [int(d) for d in (sparsity.blockMap if sparsity.blockMap is not None else [])]
    meta = list(sparsity.dimMetadata or [])
    n_dims = rank + len(block_map)
    if len(meta) != n_dims or sorted(order) != list(range(n_dims)):
        raise ValueError(f"sparsity metadata for {n_dims} dims has {len(meta)} levels and traversal order {order}")
    # walk the levels: pos = the flat position reached so far, coords = the index per expanded dim
    pos = np.zeros(1, dtype=np.int64)
    coords = np.zeros((1, n_dims), dtype=np.int64)
    block_size = [1] * n_dims
    for level, dim in enumerate(order):
        m = meta[level]
        if int(m.format) == DENSE:
            size = int(m.denseSize)
            if dim >= rank:
                block_size[dim] = size
            idx = np.tile(np.arange(size, dtype=np.int64), len(pos))
            pos = (pos[:, None] * size + np.arange(size, dtype=np.int64)).reshape(-1)
            coords = np.repeat(coords, size, axis=0)
        elif int(m.format) == SPARSE_CSR:
            seg, ind = _vector(m.arraySegments), _vector(m.arrayIndices)
            if len(pos) and (pos.max() + 1 >= len(seg)):
                raise ValueError(f"level {level}: {len(seg)} segments for parent position {int(pos.max())}")
            starts, ends = seg[pos], seg[pos + 1]
            counts = ends - starts
            if (counts < 0).any() or (len(counts) and ends.max() > len(ind)):
                raise ValueError(f"level {level}: segments {seg.tolist()[:8]}… do not index {len(ind)} indices")
            # the positions starts[k] .. ends[k]-1 for every parent k, in order
            new = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
            coords = np.repeat(coords, counts, axis=0)
            idx, pos = ind[new], new
        else:
            raise ValueError(f"level {level}: unknown dimension format {int(m.format)}")
        coords[:, dim] = idx
    if len(pos) != values.size:
        raise ValueError(f"the metadata walks {len(pos)} values, the buffer holds {values.size}")
    full = coords[:, :rank].copy()
    for b, orig in enumerate(block_map):
        full[:, orig] = full[:, orig] * block_size[rank + b] + coords[:, rank + b]
    if any((full[:, d] >= shape[d]).any() for d in range(rank)):
        raise ValueError(f"an index lies outside the dense shape {list(shape)}")
    out = np.zeros(shape, dtype=values.dtype)
    out[tuple(full[:, d] for d in range(rank))] = values.reshape(-1)[pos]
    return out
