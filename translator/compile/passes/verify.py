"""The verifier: every node is a known op, with its signature's inputs, attributes and types.

Runs before any emitter (``translator.compile.pipeline.prepare``). Errors are ``VerifyError``
with a reason code and the node's name: ``unsupported_op`` (not in the table),
``verifier`` (wrong input count, missing required attribute), ``unsupported_attribute_value``
(an attribute the op does not have), ``type_mismatch`` (a dtype outside the op's
constraint, or inputs sharing a type variable with different dtypes),
``broadcast_mismatch`` (shapes that do not broadcast; from ``infer``).
"""
from __future__ import annotations

from ...table.errors import VerifyError
from ...ir.infer import infer
from ...ir.graph import OPAQUE, Graph, Node
from ...table.loader import Tables, load_tables


def verify_node(node: Node, tables: Tables) -> None:
    if node.op == OPAQUE:
        return  # what the frontend could not read: lowering refuses it with the frontend's reason
    op = tables.ops.get(node.op)
    if op is None:
        raise VerifyError("unsupported_op", f"op {node.op!r} is not in optable.yaml", node=node.name)
    sig = op.signature
    if sig is None:
        return
    ins = list(node.inputs)
    variadic = any(p.variadic for p in sig.inputs)
    if not variadic and len(ins) > len(sig.inputs):
        raise VerifyError("verifier", f"{len(ins)} inputs, the op takes at most {len(sig.inputs)}", node=node.name, op=node.op)
    bound: dict[str, tuple[str, str]] = {}
    hetero = any(True for _ in node.subgraphs())
    k = 0
    for p in sig.inputs:
        vals = ins[k:] if p.variadic else ins[k:k + 1]
        k = len(ins) if p.variadic else k + 1
        if not p.optional and (not vals or vals[0] is None):
            raise VerifyError("verifier", f"required input {p.name!r} is missing", node=node.name, op=node.op)
        for v in vals:
            if v is None or v.type.dtype is None or v.type.kind != "tensor":
                continue
            allowed = tables.expand_dtypes(sig.types.get(p.type, (p.type,)))
            if allowed and v.type.dtype not in allowed:
                raise VerifyError("type_mismatch", f"input {p.name!r} is {v.type.dtype}, allowed: {', '.join(allowed)}",
                                  node=node.name, op=node.op)
            if p.variadic and hetero:
                continue  # a loop's/scan's state values are each their own type (ONNX: heterogeneous V)
            prev = bound.get(p.type)
            if prev is not None and prev[1] != v.type.dtype:
                raise VerifyError("type_mismatch", f"inputs {prev[0]!r} ({prev[1]}) and {p.name!r} ({v.type.dtype}) "
                                  f"must have the same type {p.type}", node=node.name, op=node.op)
            bound.setdefault(p.type, (p.name, v.type.dtype))
    names = {a.name for a in sig.attributes}
    for a in node.attrs:
        if a not in names:
            raise VerifyError("unsupported_attribute_value", f"attribute {a!r} is not an attribute of {op.id}",
                              node=node.name, op=node.op)
    for a in sig.attributes:
        if a.required and a.name not in node.attrs:
            raise VerifyError("verifier", f"required attribute {a.name!r} is missing", node=node.name, op=node.op)


def _itemsize(dtype: str | None) -> int | None:
    from ...table.dtypes import numpy_dtype

    try:
        dt = numpy_dtype(dtype) if dtype else None
    except Exception:  # noqa: BLE001 - a dtype NumPy cannot hold: only the element count is budgeted
        return None
    return dt.itemsize if dt is not None and dt.kind != "O" else None


def check_sizes(node: Node) -> None:
    """Every statically known output of ``node`` within the resource budget
    (``translator/table/budget.py``), before any backend builds or folds it: a converter asked to
    materialize a 2^41-element ConstantOfShape would hang or exhaust memory."""
    from ...table import budget

    for v in node.outputs:
        shape = v.type.shape if v.type.kind == "tensor" else None
        if shape is not None and all(isinstance(d, int) and d >= 0 for d in shape):  # (a dead branch may infer -1)
            budget.check_tensor(shape, _itemsize(v.type.dtype), f"output {v.name!r} of shape {tuple(shape)}",
                                node=node.name, op=node.op)


def run(graph: Graph, tables: Tables | None = None) -> None:
    tables = tables or load_tables()
    infer(graph, tables)  # raises broadcast_mismatch
    for node in graph.nodes:
        verify_node(node, tables)
        check_sizes(node)
        for sub in node.subgraphs():
            run(sub, tables)
