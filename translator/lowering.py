"""Per (op, backend): native → registered Python lowering → table decomposition → Unsupported.

``lower_for(graph, backend)`` rewrites the graph in place so that every node is either
native on the backend (its cell in ``optable.yaml`` has ``status: native``) or has a
registered Python lowering for it; other nodes are replaced by their op's
``decomposition`` (declarative SSA over IR ops, expanded recursively). What is left is
refused with ``Unsupported(op, backend, reason_code, detail)``.

A decomposition body is a list of steps ``{op, in, out, attrs}``. Inputs name the op's
signature inputs, earlier step outputs, ``"@attr"`` (an attribute of the node as a
constant tensor), or numeric literals (a scalar constant of the first input's dtype).
Step attributes may be ``"@attr"`` references too.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from .errors import Unsupported
from .ir import Graph, Node, TensorType, Value
from .tables import Op, Tables, load_tables

Lowering = Callable[[Node], bool]
#: (backend, op id) → Python lowering registered by an emitter; returns False to decline.
LOWERINGS: dict[tuple[str, str], Lowering] = {}
MAX_DEPTH = 8


def register_lowering(backend: str, op_id: str) -> Callable[[Lowering], Lowering]:
    def deco(fn: Lowering) -> Lowering:
        LOWERINGS[(backend, op_id)] = fn
        return fn

    return deco


def native_ops(backend: str, tables: Tables | None = None) -> frozenset[str]:
    """The ops a backend supports: exactly the keys of its table column with status native."""
    tables = tables or load_tables()
    return frozenset(op.id for op in tables.ops.values()
                     if (c := op.backends.get(backend)) is not None and c.status == "native")


def how(op: Op, backend: str, extra_native: Iterable[str] = ()) -> str:
    """'native' | 'lowering' | 'decomposed' | 'unsupported' for an op on a backend."""
    cell = op.backends.get(backend)
    if op.id in extra_native or (cell is not None and cell.status == "native"):
        return "native"
    if (backend, op.id) in LOWERINGS:
        return "lowering"
    if op.decomposition:
        return "decomposed"
    return "unsupported"


def lower_for(graph: Graph, backend: str, supported: frozenset[str] | None = None,
              tables: Tables | None = None) -> list[tuple[str, str]]:
    """Decompose what the backend lacks; returns the (node name, op) pairs decomposed."""
    tables = tables or load_tables()
    supported = supported if supported is not None else native_ops(backend, tables)
    done: list[tuple[str, str]] = []
    _lower_graph(graph, backend, supported, tables, done, 0)
    return done


def _lower_graph(graph: Graph, backend: str, supported: frozenset[str], tables: Tables,
                 done: list[tuple[str, str]], depth: int) -> None:
    for node in list(graph.nodes):
        for sub in node.subgraphs():
            _lower_graph(sub, backend, supported, tables, done, depth)
        if node.op in supported:
            continue
        fn = LOWERINGS.get((backend, node.op))
        if fn is not None and fn(node):
            continue
        op = tables.ops.get(node.op)
        if op is None:
            raise Unsupported(node.op, backend, "unsupported_op", "op is not in optable.yaml", node.name)
        if not op.decomposition:
            cell = op.backends.get(backend)
            why = (cell.notes or "the table marks it unavailable") if cell and cell.status == "unavailable" else \
                "no native mapping and no decomposition in optable.yaml"
            raise Unsupported(node.op, backend, "unsupported_op", why, node.name)
        if depth >= MAX_DEPTH:
            raise Unsupported(node.op, backend, "unsupported_op", "decomposition nests too deep", node.name)
        new_nodes = expand(graph, node, op, tables)
        done.append((node.name, node.op))
        _lower_nodes(graph, new_nodes, backend, supported, tables, done, depth + 1)


def _lower_nodes(graph: Graph, nodes: list[Node], backend: str, supported: frozenset[str], tables: Tables,
                 done: list[tuple[str, str]], depth: int) -> None:
    for node in nodes:
        if node.op in supported:
            continue
        fn = LOWERINGS.get((backend, node.op))
        if fn is not None and fn(node):
            continue
        op = tables.ops.get(node.op)
        if op is None or not op.decomposition or depth >= MAX_DEPTH:
            raise Unsupported(node.op, backend, "unsupported_op",
                              "no native mapping and no decomposition in optable.yaml", node.name)
        new_nodes = expand(graph, node, op, tables)
        done.append((node.name, node.op))
        _lower_nodes(graph, new_nodes, backend, supported, tables, done, depth + 1)


def _literal(graph: Graph, value: Any, like: Value | None, name: str) -> Value:
    import numpy as np

    from .dtypes import numpy_dtype

    dtype = like.type.dtype if like is not None and like.type.dtype else "float32"
    arr = np.asarray(value, dtype=numpy_dtype(dtype))
    return graph.add_constant(name, arr, dtype)


def expand(graph: Graph, node: Node, op: Op, tables: Tables) -> list[Node]:
    """Replace ``node`` by its op's decomposition; returns the inserted nodes."""
    import numpy as np

    from .dtypes import dtype_id

    assert op.decomposition is not None
    sig = op.signature
    env: dict[str, Value | None] = {}
    if sig is not None:
        ins = list(node.inputs)
        k = 0
        for port in sig.inputs:
            if port.variadic:
                env[port.name] = None
                for j, v in enumerate(ins[k:]):
                    env[f"{port.name}{j}"] = v
                k = len(ins)
            else:
                env[port.name] = ins[k] if k < len(ins) else None
                k += 1
    attrs: dict[str, Any] = {}
    if sig is not None:
        attrs = {a.name: a.default for a in sig.attributes}
    attrs.update(node.attrs)
    first = next((v for v in node.inputs if v is not None), None)
    inserted: list[Node] = []
    last_outs: tuple[Value, ...] = ()
    for i, step in enumerate(op.decomposition):
        vals: list[Value | None] = []
        for ref in step.ins:
            if isinstance(ref, str) and ref.startswith("@"):
                a = attrs.get(ref[1:])
                if a is None:
                    vals.append(None)
                else:
                    arr = np.asarray(a)
                    vals.append(graph.add_constant(f"{node.name}_{ref[1:]}", arr, dtype_id(arr.dtype))
                                if arr.dtype.kind in "iub" else _literal(graph, a, first, f"{node.name}_{ref[1:]}"))
            elif isinstance(ref, str):
                if ref not in env:
                    raise Unsupported(node.op, "ir", "verifier", f"decomposition refers to unknown value {ref!r}", node.name)
                vals.append(env[ref])
            elif ref is None:
                vals.append(None)
            else:
                vals.append(_literal(graph, ref, first, f"{node.name}_c{i}"))
        step_attrs = {k: (attrs.get(v[1:]) if isinstance(v, str) and v.startswith("@") else _thaw(v))
                      for k, v in step.attrs.items()}
        step_attrs = {k: v for k, v in step_attrs.items() if v is not None}
        new = graph.add_node(step.op, vals, step_attrs, outputs=[f"{node.name}_{o}" for o in step.outs],
                             name=f"{node.name}/{step.op}{i}", before=node)
        new.meta["decomposed_from"] = node.op
        inserted.append(new)
        for o, v in zip(step.outs, new.outputs):
            env[o] = v
        last_outs = new.outputs
    results = [env.get(p.name) for p in sig.outputs] if sig is not None else list(last_outs)
    for old, new_v in zip(node.outputs, results):
        if new_v is None:
            continue
        new_v.type = old.type if old.type.dtype is not None else new_v.type
        graph.replace_all_uses_with(old, new_v)
    graph.remove_node(node)
    return inserted


def _thaw(v: Any) -> Any:
    if hasattr(v, "items"):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


__all__ = ["LOWERINGS", "register_lowering", "native_ops", "how", "lower_for", "expand", "TensorType"]
