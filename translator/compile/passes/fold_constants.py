"""Constant folding.

``shape``/``size`` of a value whose shape is static become constants; then every node
whose inputs are all constants is evaluated once with the NumPy reference and replaced by
its result: any deterministic op (shape arithmetic, a constant Resize of a default mask…)
except quantize/dequantize (quantized weights stay so) and control flow. A result is folded
when it is small (at most ``MAX_ELEMENTS`` elements per output) or no larger than the
constants it is computed from (weight preprocessing such as timm's weight standardization, a
transposed or reshaped weight: the model does not grow), up to ``MAX_WEIGHT_ELEMENTS``; an
Expand or ConstantOfShape that would materialize a large tensor stays a node.
"""
from __future__ import annotations

import numpy as np

from ... import reference
from ...table.errors import OpbridgeError
from ...reference._sizes import predict
from ...table.dtypes import dtype_id
from ...ir.graph import Graph, Node

MAX_ELEMENTS = 1 << 16
MAX_WEIGHT_ELEMENTS = 1 << 24
#: never folded, whatever their inputs: quantized weights stay quantized (the artifact keeps
#: int8 weights and their scales), and the Python-level control flow keeps its subgraphs
KEPT = frozenset({"quantize_linear", "dequantize_linear", "dynamic_quantize_linear", "if", "loop", "scan"})


def foldable(op: str) -> bool:
    """Any deterministic op with a reference function (the table's ``random`` trait is not)."""
    from ...table.loader import load_tables

    entry = load_tables().ops.get(op)
    return entry is not None and op not in KEPT and "random" not in entry.traits


def _replace(graph: Graph, node: Node, arrays: list[np.ndarray]) -> None:
    for v, arr in zip(node.outputs, arrays):
        c = graph.add_constant(v.name + "_folded", arr, dtype_id(arr.dtype))
        if any(o is v for o in graph.outputs):
            old = v.name
            v.name, c.name = f"{old}__folded_away", old
        graph.replace_all_uses_with(v, c)
    graph.remove_node(node)


def run(graph: Graph) -> int:
    folded = 0
    for node in list(graph.nodes):
        folded += fold_node(graph, node)
    return folded


def fold_nodes(graph: Graph, nodes: list[Node]) -> set[int]:
    """Fold the given nodes (in order: a folded one makes its consumers' inputs constant);
    returns the ids of those folded (removed from ``graph``)."""
    done: set[int] = set()
    for node in nodes:
        if fold_node(graph, node):
            done.add(id(node))
    return done


def fold_node(graph: Graph, node: Node) -> bool:
    """Replace ``node`` by constants when its inputs are constants (see the module docstring)."""
    if not foldable(node.op) or any(True for _ in node.subgraphs()) \
            or any(v.type.kind != "tensor" for v in node.outputs):
        return False
    if node.op in ("shape", "size") and node.inputs[0] is not None and node.inputs[0].type.is_static \
            and not node.inputs[0].is_const:
        shp = np.asarray(node.inputs[0].type.shape, dtype=np.int64)
        if node.op == "size":
            arrays = [np.asarray(int(np.prod(shp)), dtype=np.int64)]
        else:
            r = len(shp)
            start = int(node.attrs.get("start", 0))
            end = int(node.attrs.get("end", r))
            arrays = [shp[slice(start, end)]]
        _replace(graph, node, arrays)
        return True
    ins = [v for v in node.inputs if v is not None]
    if not all(v.is_const for v in ins):
        return False
    fn = reference.get(node.op)
    if fn is None:
        return False
    args = [None if v is None else v.const for v in node.inputs]
    # a result no larger than the node's tensors together (inputs and attributes: a
    # Constant's value, paddle2onnx's weights, a Concat of two LSTM directions) allocates
    # nothing the model does not already hold: weights fold wherever they are built
    held = [a for a in args if a is not None] + [a for a in node.attrs.values() if isinstance(a, np.ndarray)]
    limit = max(MAX_ELEMENTS, min(MAX_WEIGHT_ELEMENTS, sum(int(np.size(a)) for a in held)))
    sizes = predict(node.op, args, node.attrs)
    if sizes is not None and any(n > limit for n, _ in sizes):
        return False  # not shape arithmetic (and never allocated here: Range(0, 2**40) stays a node)
    from ...ir.evaluate import call_reference

    try:
        with np.errstate(all="ignore"):
            res = list(call_reference(node, fn, args, dict(node.attrs)))
    except OpbridgeError as exc:
        if exc.code != "bad_model":
            return False  # over budget or unsupported here: left to the backend
        raise
    arrays = [np.asarray(r) for r in res]
    if any(a.size > limit or a.dtype.kind in "OUS" for a in arrays):
        return False
    _replace(graph, node, arrays)
    return True
