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
        folded += fold_node(graph, node) or finite_dequantized(graph, node)
    return folded


def _finite_dequantize(v: object) -> bool:
    """Whether ``v`` is a ``dequantize_linear`` of an integer tensor with finite constant
    scales: every value it holds is finite."""
    p = getattr(v, "producer", None)
    if p is None or p.op != "dequantize_linear" or len(p.inputs) < 2 or p.inputs[1] is None or not p.inputs[1].is_const:
        return False
    x = p.inputs[0]
    return x is not None and (x.type.dtype or "").startswith(("int", "uint")) \
        and bool(np.all(np.isfinite(np.asarray(p.inputs[1].const, dtype=np.float64))))


def finite_dequantized(graph: Graph, node: Node) -> bool:
    """A test for NaN or infinity of a dequantized integer (finite scales) is false
    everywhere: ``is_nan``/``is_inf`` of it becomes a constant (static shape), and a ``where``
    whose condition is a constant of one value becomes the branch it picks when that branch
    already has the result's shape and dtype. (An exporter's ``masked_fill(isnan(p), 0)``
    after an attention softmax that a quantizer wrapped in QDQ: the select has nothing to
    select, and TFLite has no int8 select of that form.)"""
    if node.op in ("is_nan", "is_inf") and node.inputs and _finite_dequantize(node.inputs[0]) \
            and node.inputs[0].type.is_static:
        _replace(graph, node, [np.zeros(tuple(node.inputs[0].type.shape), dtype=bool)])
        return True
    if node.op == "where" and len(node.inputs) == 3 and node.inputs[0] is not None and node.inputs[0].is_const:
        c = np.asarray(node.inputs[0].const)
        if c.size and (c.all() or not c.any()):
            pick = node.inputs[1] if c.all() else node.inputs[2]
            out = node.outputs[0]
            if pick is not None and pick.type.is_static and out.type.is_static \
                    and tuple(pick.type.shape) == tuple(out.type.shape) and pick.type.dtype == out.type.dtype \
                    and not any(o is out for o in graph.outputs):
                graph.replace_all_uses_with(out, pick)
                graph.remove_node(node)
                return True
    return False


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


def prune(graph: Graph) -> int:
    """Nodes whose outputs nothing reads (no use in this graph or a subgraph, not a graph
    output) are removed, last first, so a chain that fed only them goes too: what a folded
    branch left behind (silero VAD's ``Shape → Gather → Equal`` that chose an ``If``'s branch
    stays in the graph after the branch is inlined, computed on every call). ONNX ops have no
    side effects; a random op whose draw nothing reads is not observable either."""
    removed = 0
    outputs = {id(v) for v in graph.outputs}
    for node in reversed(list(graph.nodes)):
        if node.outputs and all(not v.uses and id(v) not in outputs for v in node.outputs):
            graph.remove_node(node)
            removed += 1
    return removed
