"""``loop`` unrolled statically: for targets whose native loop is refused (Core ML's MIL emitter
lowers no subgraphs), when the trip count is known by constant folding.

ONNX Loop semantics (the IR's ``loop``): inputs ``M`` (optional trip count), ``cond``
(optional), the carried values; body ``(iter, cond, carried...) -> (cond, carried..., scans...)``;
it runs while ``iter < M`` and ``cond`` (the body's cond output decides the next step).

* ``loop_trips(node)``: a dry run of the body on constants only. Per iteration the body's
  nodes whose inputs are all known (constants, the iteration number, the condition, carried
  values that stayed constant) are evaluated with the NumPy reference, exactly as constant
  folding would; the condition must come out constant after every iteration (or ``M`` be a
  constant with the condition constant too). Returns the trip count, or why not: the node,
  the condition not constant at iteration k, more than ``LOOP_CAP`` iterations, more than
  ``NODE_CAP`` nodes inlined, scan outputs of a loop that runs zero times (no element shape).
* ``expand_loop(graph, node)``: the body inlined that many times before the node (each
  copy's constant sub-expressions folded on the way: counters, indices, the condition), the
  carried values threaded through, each scan output stacked along a new axis 0
  (``unsqueeze`` + ``concat``); the loop's outputs are replaced by the last carried values
  and the stacked scans.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..table.dtypes import dtype_id, numpy_dtype
from ..ir.graph import Graph, Node, Value, clone_graph

#: most iterations unrolled (a longer loop stays a loop, or is refused where it must be unrolled)
LOOP_CAP = 4096
#: most nodes inlined in all (iterations × the body's nodes)
NODE_CAP = 200_000


def _evaluate(node: Node, args: list[Any]) -> list[np.ndarray] | None:
    """The node's outputs computed from constant inputs (``args``), as constant folding would
    compute them (the same ops, the same size limit); None when it would not fold."""
    from .. import reference
    from ..table.errors import OpbridgeError
    from ..ir.evaluate import call_reference
    from .passes.fold_constants import MAX_ELEMENTS, foldable
    from ..reference._sizes import predict

    if not foldable(node.op) or any(True for _ in node.subgraphs()) or any(v.type.kind != "tensor" for v in node.outputs):
        return None
    fn = reference.get(node.op)
    if fn is None:
        return None
    sizes = predict(node.op, args, node.attrs)
    if sizes is not None and any(n > MAX_ELEMENTS for n, _ in sizes):
        return None
    try:
        with np.errstate(all="ignore"):
            res = list(call_reference(node, fn, args, dict(node.attrs)))
    except OpbridgeError:
        return None
    arrays = [np.asarray(r) for r in res]
    if len(arrays) != len(node.outputs) or any(a.size > MAX_ELEMENTS or a.dtype.kind in "OUS" for a in arrays):
        return None
    return arrays


def _static_shape(node: Node) -> list[np.ndarray] | None:
    """``shape``/``size`` of a value whose shape is static (its data need not be known)."""
    x = node.inputs[0] if node.inputs else None
    if node.op not in ("shape", "size") or x is None or not x.type.is_static:
        return None
    shp = np.asarray(x.type.shape, dtype=np.int64)
    if node.op == "size":
        return [np.asarray(int(np.prod(shp)), dtype=np.int64)]
    r = len(shp)
    return [shp[slice(int(node.attrs.get("start", 0)), int(node.attrs.get("end", r)))]]


def _fold(node: Node, args: list[Any]) -> list[np.ndarray] | None:
    """The node's outputs when its inputs are known (``args``: arrays, None for an omitted input)."""
    return _static_shape(node) if node.op in ("shape", "size") else _evaluate(node, args)


def _scalar(v: Value | None) -> np.ndarray | None:
    return None if v is None or not v.is_const else np.asarray(v.const).reshape(-1)


def loop_trips(node: Node) -> tuple[int | None, str | None]:
    """(the number of iterations, None), or (None, why the trip count is not known statically)."""
    body = node.attrs.get("body")
    if not isinstance(body, Graph):
        return None, "the loop has no body graph"
    ins = list(node.inputs) + [None] * max(0, 2 - len(node.inputs))
    m_v, c_v, init = ins[0], ins[1], ins[2:]
    n = len(init)
    if len(body.inputs) != 2 + n or len(body.outputs) < 1 + n:
        return None, "the body's inputs/outputs do not match the loop's carried values"
    trip = None
    if m_v is not None:
        m = _scalar(m_v)
        if m is None or m.size != 1:
            return None, "the trip count M is not a constant"
        trip = int(m[0])
    keep = True
    if c_v is not None:
        c = _scalar(c_v)
        if c is None or c.size != 1:
            return None, "the initial condition is not a constant"
        keep = bool(c[0])
    n_scan = len(body.outputs) - 1 - n
    state: list[np.ndarray | None] = [None if v is None or not v.is_const else np.asarray(v.const) for v in init]
    it_dt = numpy_dtype(body.inputs[0].type.dtype or "int64")
    body_nodes = body.nodes
    i = 0
    while (trip is None or i < trip) and keep:
        if i >= LOOP_CAP:
            return None, f"it runs more than {LOOP_CAP} iterations (not unrolled)"
        if (i + 1) * max(len(body_nodes), 1) > NODE_CAP:
            return None, f"unrolling it would inline more than {NODE_CAP} nodes"
        env: dict[int, np.ndarray] = {id(body.inputs[0]): np.asarray(i, dtype=it_dt),
                                      id(body.inputs[1]): np.asarray(keep)}
        for v, s in zip(body.inputs[2:], state):
            if s is not None:
                env[id(v)] = s

        def known(v: Value | None) -> Any:
            if v is None:
                return None
            if id(v) in env:
                return env[id(v)]
            return v.const if v.is_const else _UNKNOWN

        for bn in body_nodes:
            args = [known(v) for v in bn.inputs]
            if any(a is _UNKNOWN for a in args) and bn.op not in ("shape", "size"):
                continue
            res = _fold(bn, [None if a is _UNKNOWN else a for a in args])
            if res is not None:
                env.update((id(o), r) for o, r in zip(bn.outputs, res))
        c = known(body.outputs[0])
        if c is _UNKNOWN or c is None or np.asarray(c).size != 1:
            return None, f"its condition is not a constant after iteration {i} (it depends on data)"
        keep = bool(np.asarray(c).reshape(-1)[0])
        state = [None if (a := known(v)) is _UNKNOWN else a for v in body.outputs[1:1 + n]]
        i += 1
    if i == 0 and n_scan:
        return None, "it runs zero times and has scan outputs (their element shape is unknown)"
    return i, None


_UNKNOWN = object()


def loop_why_not(node: Node) -> str | None:
    """Why ``node`` (a ``loop``) is not unrolled; None when it is (the trip count is kept in
    ``node.meta["unroll_trips"]`` for ``expand_loop``)."""
    trips, why = loop_trips(node)
    if why is not None:
        return why
    node.meta["unroll_trips"] = trips
    return None


def expand_loop(graph: Graph, node: Node) -> list[Node]:
    """Replace ``node`` (a ``loop`` whose trip count ``loop_trips`` knows) by its body inlined
    once per iteration; returns the inserted nodes."""
    trips = node.meta.pop("unroll_trips", None)
    if trips is None:
        trips, why = loop_trips(node)
        if why is not None:
            raise ValueError(f"loop {node.name!r} cannot be unrolled: {why}")
    body: Graph = node.attrs["body"]
    init = list(node.inputs[2:])
    n = len(init)
    inserted: list[Node] = []
    root = node.meta.get("decomposed_root", node.name)
    consts: dict[int, Value] = {}

    def add(op: str, ins: list[Value | None], attrs: dict[str, Any], outs: list[str], name: str,
            types: list[Any] | None = None, meta: dict[str, Any] | None = None) -> Node:
        new = graph.add_node(op, ins, attrs, outputs=outs, name=name, types=types, before=node)
        new.meta.update(meta or {})
        new.meta["decomposed_from"] = "loop"
        new.meta["decomposed_root"] = root
        inserted.append(new)
        return new

    def constant(arr: np.ndarray, name: str) -> Value:
        return graph.add_constant(name, np.asarray(arr), dtype_id(np.asarray(arr).dtype))

    it_dt = numpy_dtype(body.inputs[0].type.dtype or "int64")
    state: list[Value | None] = init
    scans: list[list[Value]] = [[] for _ in body.outputs[1 + n:]]
    for i in range(trips):
        m: dict[int, Value] = {id(body.inputs[0]): constant(np.asarray(i, it_dt), f"{node.name}/iter{i}"),
                               id(body.inputs[1]): constant(np.asarray(True), f"{node.name}/cond{i}")}
        for v, s in zip(body.inputs[2:], state):
            if s is not None:
                m[id(v)] = s

        def get(v: Value | None) -> Value | None:
            if v is None:
                return None
            if id(v) in m:
                return m[id(v)]
            if v.is_const and v.graph is body:  # the body's own constants: copied once, shared by the iterations
                if id(v) not in consts:
                    c = graph.add_constant(v.name, v.const, v.type.dtype or "float32")
                    c.type = v.type
                    consts[id(v)] = c
                return consts[id(v)]
            return v  # a value of an enclosing graph

        for bn in body.nodes:
            ins = [get(v) for v in bn.inputs]
            attrs: dict[str, Any] = {}
            for k, a in bn.attrs.items():
                if isinstance(a, Graph):
                    a = clone_graph(a, _outer_map(bn, get))
                elif isinstance(a, list) and a and all(isinstance(x, Graph) for x in a):
                    a = [clone_graph(x, _outer_map(bn, get)) for x in a]
                attrs[k] = a
            res = None
            if all(v is None or v.is_const for v in ins) or bn.op in ("shape", "size"):
                res = _fold(bn, [None if v is None else v.const for v in ins])
            if res is not None:
                for o, r in zip(bn.outputs, res):
                    m[id(o)] = constant(r, f"{node.name}/{i}/{o.name}")
                continue
            new = add(bn.op, ins, attrs, [f"{o.name}_{i}" for o in bn.outputs], f"{node.name}/{i}/{bn.name}",
                      types=[o.type for o in bn.outputs], meta=bn.meta)
            for o, no in zip(bn.outputs, new.outputs):
                m[id(o)] = no
        outs = [get(v) for v in body.outputs]
        state = outs[1:1 + n]
        for acc, v in zip(scans, outs[1 + n:]):
            assert v is not None
            acc.append(v)
    results: list[Value | None] = list(state)
    for k, acc in enumerate(scans):
        axis0 = constant(np.asarray([0], np.int64), f"{node.name}/scan_axis")
        parts = [add("unsqueeze", [v, axis0], {}, [f"{v.name}_s"], f"{node.name}/scan{k}/unsqueeze{j}").outputs[0]
                 for j, v in enumerate(acc)]
        results.append(add("concat", parts, {"axis": 0}, [f"{node.name}_scan{k}"], f"{node.name}/scan{k}").outputs[0]
                       if len(parts) > 1 else parts[0])
    mine = {id(o) for nd in inserted for o in nd.outputs}
    for k, v in enumerate(results):  # an output that is not computed here (an input, a constant) gets its own node
        if v is not None and id(v) not in mine:
            results[k] = add("identity", [v], {}, [f"{node.outputs[k].name}_u"], f"{node.name}/out{k}",
                             types=[v.type]).outputs[0]
    graph.replace_node(node, results)
    return inserted


def _outer_map(bn: Node, get: Any) -> dict[int, Value]:
    """For a nested subgraph of body node ``bn``: the body values it reads, mapped to their copies."""
    out: dict[int, Value] = {}
    for sub in bn.subgraphs():
        for inner in sub.walk():
            for v in inner.inputs:
                if v is not None:
                    w = get(v)
                    if w is not None and w is not v:
                        out[id(v)] = w
    return out


__all__ = ["LOOP_CAP", "NODE_CAP", "loop_trips", "loop_why_not", "expand_loop"]
