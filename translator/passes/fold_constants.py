"""Constant folding of shape subgraphs.

``shape``/``size`` of a value whose shape is static become constants; then every node
of a foldable op whose inputs are all constants is evaluated once with the NumPy
reference and replaced by its result. Only small results are folded (shape arithmetic,
not weights): at most ``MAX_ELEMENTS`` elements per output.
"""
from __future__ import annotations

import numpy as np

from .. import reference
from ..errors import OpbridgeError
from ..reference._sizes import predict
from ..dtypes import dtype_id
from ..ir import Graph, Node

MAX_ELEMENTS = 1 << 16
FOLDABLE = frozenset({
    "shape", "size", "gather", "concat", "unsqueeze", "squeeze", "slice", "cast", "reshape", "add", "sub", "mul",
    "div", "range", "constant_of_shape", "reduce_prod", "reduce_sum", "equal", "where", "identity", "constant",
    "expand", "transpose", "floor", "ceil", "neg", "abs", "min", "max", "logical_not", "greater", "less", "flatten",
    # index arithmetic of exported attention (`(-1) % 3` of torch's chunk, `sqrt(head_dim)` of the scale)
    "floor_mod", "trunc_mod", "sqrt", "pow", "reciprocal", "sign", "greater_equal", "less_equal", "not_equal",
    "logical_and", "logical_or",
})


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
        if node.op not in FOLDABLE or any(True for _ in node.subgraphs()):
            continue
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
            folded += 1
            continue
        ins = [v for v in node.inputs if v is not None]
        if not all(v.is_const for v in ins):
            continue
        fn = reference.get(node.op)
        if fn is None:
            continue
        args = [None if v is None else v.const for v in node.inputs]
        sizes = predict(node.op, args, node.attrs)
        if sizes is not None and any(n > MAX_ELEMENTS for n, _ in sizes):
            continue  # not shape arithmetic (and never allocated here: Range(0, 2**40) stays a node)
        from ..interpreter import call_reference

        try:
            with np.errstate(all="ignore"):
                res = list(call_reference(node, fn, args, dict(node.attrs)))
        except OpbridgeError as exc:
            if exc.code != "bad_model":
                continue  # over budget or unsupported here: left to the backend
            raise
        arrays = [np.asarray(r) for r in res]
        if any(a.size > MAX_ELEMENTS or a.dtype.kind == "O" for a in arrays):
            continue
        _replace(graph, node, arrays)
        folded += 1
    return folded
