"""Gathers by constant indices that pick a regular run of elements, as reshapes and slices.

torch.export writes tensor indexing such as BERT's ``attention_mask[:, None, None, :]`` as a
``GatherND`` with a constant index tensor (``[1, 1, 1, 16, 2]``: element ``(0, j)`` at
position ``j``). The indices, read as offsets into the data's leading dims, are ``0, 1, …``:
the gather is a reshape. Every target runs a reshape or a strided slice on its fastest path,
where a general gather is a lookup kernel (ncnn has none; XNNPACK does not take GATHER_ND).

``gather_nd`` with ``batch_dims = 0``, static data dims and constant indices becomes
``reshape(slice(reshape(data, [n, *rest]), s, s + (k-1)·d + 1, step d), out_shape)`` when its
``k`` offsets (row-major over the indexed dims, negative indices wrapped) are ``s, s+d, …``
with ``d ≥ 1``; the slice is left out when it takes every row, a reshape when it changes
nothing. Out-of-range indices (an invalid model) leave the node as it is.
"""
from __future__ import annotations

import numpy as np

from ...ir.graph import Graph, Node, Value


def _progression(offsets: np.ndarray) -> tuple[int, int] | None:
    """(start, step) when ``offsets`` is ``start, start + step, …`` with step ≥ 1 (any start for one)."""
    if offsets.size == 0:
        return None
    if offsets.size == 1:
        return int(offsets[0]), 1
    d = np.diff(offsets)
    step = int(d[0])
    return (int(offsets[0]), step) if step >= 1 and bool(np.all(d == step)) else None


def _plan(node: Node) -> tuple[list[int], int, int, int, list[int]] | None:
    """(rows shape ``[n, *rest]``, start, step, rows gathered, output shape) for a regular ``gather_nd``."""
    if int(node.attrs.get("batch_dims", 0) or 0) != 0 or len(node.inputs) < 2:
        return None
    data, idx = node.inputs[0], node.inputs[1]
    shape = data.type.shape if data is not None else None
    if idx is None or not idx.is_const or shape is None or not all(isinstance(d, (int, np.integer)) for d in shape):
        return None
    ind = np.asarray(idx.const)
    if ind.dtype.kind not in "iu" or ind.ndim < 1 or not 1 <= ind.shape[-1] <= len(shape):
        return None
    k = ind.shape[-1]
    lead = [int(d) for d in shape[:k]]
    flat = ind.reshape(-1, k).astype(np.int64)
    bound = np.asarray(lead, dtype=np.int64)
    if np.any(flat < -bound) or np.any(flat >= bound):
        return None
    flat = np.where(flat < 0, flat + bound, flat)
    offsets = np.asarray(np.ravel_multi_index(tuple(flat.T), lead) if flat.size else np.zeros(0), dtype=np.int64)
    run = _progression(offsets)
    if run is None:
        return None
    rest = [int(d) for d in shape[k:]]
    return ([int(np.prod(lead, dtype=np.int64))] + rest, run[0], run[1], int(offsets.size),
            list(ind.shape[:-1]) + rest)


def run(graph: Graph) -> int:
    """Every regular constant-index ``gather_nd`` of ``graph`` rewritten; how many."""
    done = 0
    for node in list(graph.nodes):
        if node.op != "gather_nd" or node.graph is not graph:
            continue
        plan = _plan(node)
        if plan is None:
            continue
        rows, start, step, count, out_shape = plan
        data = node.inputs[0]
        name = node.name

        def reshape(v: Value, shape: list[int], suffix: str) -> Value:
            c = graph.add_constant(f"{name}_{suffix}", np.array(shape, np.int64), "int64")
            return graph.add_node("reshape", [v, c], name=f"{name}_{suffix}", before=node).outputs[0]

        x = data
        if start == 0 and step == 1 and count == rows[0]:  # every row in order: one reshape, or nothing
            if list(data.type.shape) != out_shape:
                x = reshape(x, out_shape, "shape")
        else:
            if list(data.type.shape) != rows:
                x = reshape(x, rows, "rows")
            end = start + (count - 1) * step + 1
            consts = [graph.add_constant(f"{name}_{k}", np.array([v], np.int64), "int64")
                      for k, v in (("start", start), ("end", end), ("axis", 0), ("step", step))]
            x = graph.add_node("slice", [x, *consts], name=f"{name}_slice", before=node).outputs[0]
            if [count] + rows[1:] != out_shape:
                x = reshape(x, out_shape, "shape")
        if x is data and any(o is node.outputs[0] for o in graph.outputs):
            x = graph.add_node("identity", [x], name=f"{name}_identity", before=node).outputs[0]  # the names stay apart
        graph.replace_node(node, [x])
        done += 1
    return done


__all__ = ["run"]
