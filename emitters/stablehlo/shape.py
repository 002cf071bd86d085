"""StableHLO rules for the ops whose shape input a model computes from its symbolic dims
(``Shape → Gather/Slice → Concat → Reshape``, as exporters write a reshape that keeps the
batch and sequence): where the IR's shape inference knows the output's dims as sizes and
graph-input dims, the code takes those (``Codegen.sized``: ``x.shape[j]``, a symbolic
dimension of the export) instead of reading the computed shape with NumPy, so the dims stay
symbolic. Any other shape input is written by the column's snippet (read with NumPy)."""
from __future__ import annotations

from .codegen import RULE_STATIC_PORTS, NodeEmit, computed
from .registry import rule


@rule("reshape")
def reshape(e: NodeEmit) -> str:
    """The inferred output shape when the shape input is computed, else the snippet."""
    dims = e.cg.sized(e.node.outputs[0]) if computed(e.v(1)) else None
    return f"jnp.reshape({e.x(0)}, {dims})" if dims is not None else e.snippet()


@rule("expand")
def expand(e: NodeEmit) -> str:
    """``jnp.broadcast_to`` the inferred output shape when the shape input is computed, else the snippet."""
    dims = e.cg.sized(e.node.outputs[0]) if computed(e.v(1)) else None
    return f"jnp.broadcast_to({e.x(0)}, {dims})" if dims is not None else e.snippet()


RULE_STATIC_PORTS["reshape"] = frozenset({"shape"})
RULE_STATIC_PORTS["expand"] = frozenset({"shape"})
