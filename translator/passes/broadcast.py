"""Explicit broadcasting, for backends whose elementwise ops need equal ranks.

Every input of a multidirectional op whose (static) rank is lower than the output's is
reshaped with ``unsqueeze`` to add leading 1-dims (numpy's implicit rule made explicit).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, TensorType
from ..tables import Tables, load_tables

requires = ("verified",)
ensures = ("equal_ranks",)


def run(graph: Graph, tables: Tables | None = None) -> int:
    tables = tables or load_tables()
    inserted = 0
    for node in list(graph.nodes):
        op = tables.ops.get(node.op)
        if op is None or op.broadcast != "multidirectional" or node.op == "expand":
            continue
        ranks = [v.type.rank for v in node.inputs if v is not None]
        if any(r is None for r in ranks) or len(set(ranks)) <= 1:
            continue
        top = max(r for r in ranks if r is not None)
        for i, v in enumerate(node.inputs):
            if v is None or v.type.rank == top:
                continue
            assert v.type.shape is not None
            k = top - len(v.type.shape)
            axes = graph.add_constant(f"{node.name}_bcast_axes{i}", np.arange(k, dtype=np.int64), "int64")
            u = graph.add_node("unsqueeze", [v, axes], {}, outputs=[f"{v.name}_r{top}"], name=f"{node.name}/bcast{i}",
                               types=[TensorType(v.type.dtype, (1,) * k + tuple(v.type.shape))], before=node)
            node.replace_input(i, u.outputs[0])
            inserted += 1
    return inserted
