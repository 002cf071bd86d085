"""The builder a Python decomposition writes its steps with (``unroll``, ``spectral``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..table.dtypes import numpy_dtype


class Steps:
    """Adds the nodes of ``at``'s decomposition before it (named after it, marked as decomposed
    from it) and remembers them."""

    def __init__(self, graph: Graph, at: Node) -> None:
        self.g, self.at, self.nodes = graph, at, []
        self.memo: dict[Any, Value] = {}
        self.dt = at.inputs[0].type.dtype or "float32"

    def op(self, op: str, *ins: Value | None, **attrs: Any) -> Value:
        n = self.g.add_node(op, list(ins), attrs, outputs=1, name=f"{self.at.name}/{op}{len(self.nodes)}",
                            before=self.at)
        n.meta["decomposed_from"] = self.at.op
        n.meta["decomposed_root"] = self.at.meta.get("decomposed_root", self.at.name)
        self.nodes.append(n)
        return n.outputs[0]

    def const(self, arr: Any, name: str, dtype: str | None = None) -> Value:
        """A constant; small ones (indices, slice bounds) are shared across the steps."""
        dtype = dtype or self.dt
        data = np.array(arr, dtype=numpy_dtype(dtype), order="C")  # (ascontiguousarray makes 0-d 1-d)
        key = (dtype, data.shape, data.tobytes()) if data.size <= 16 else None
        if key is not None and key in self.memo:
            return self.memo[key]
        v = self.g.add_constant(f"{self.at.name}_{name}", data, dtype)
        if key is not None:
            self.memo[key] = v
        return v

    def index(self, i: int) -> Value:
        return self.const(np.asarray(i, np.int64), f"t{i}", "int64")


__all__ = ["Steps"]
