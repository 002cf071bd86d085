"""Evaluate an IR graph with the NumPy reference (the oracle of every comparison).

Ops without a reference function are first replaced by their table decomposition
(``lowering.lower`` for the ``numpy`` target), so composite ops are evaluated through
their decomposition. Subgraph attributes become callables ``body(*inputs)``.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Mapping

import numpy as np

from ..table import budget
from .. import reference
from ..table.errors import OpbridgeError, Unsupported
from ..ir.evaluate import call_reference
from ..ir.graph import Graph, Model, Value


def prepare(model: Model) -> Model:
    """Decompose every op that has no reference function (in place)."""
    from .lowering import lower
    from ..table.loader import load_tables
    from .target import Compilation, get

    lower(model.graph, Compilation(get("numpy"), load_tables()))
    return model


#: ``perturb(node, args) -> args``: a hook that may change a node's arguments before it runs
Perturb = Callable[[Any, list], list]


def _body(g: Graph, outer: dict[int, Any], trace: dict[str, Any] | None,
          perturb: Perturb | None = None) -> Callable[..., list[Any]]:
    def body(*inputs: Any) -> list[Any]:
        env = dict(outer)
        for v, x in zip(g.inputs, inputs):
            env[id(v)] = x
        _run(g, env, trace, perturb)
        return _outputs(g, env)

    return body


def _last_uses(g: Graph) -> dict[int, list[int]]:
    """node index -> the ids of the values of ``g``'s env whose last reader it is (a node with
    subgraphs reads every outer value its subgraphs read); graph outputs are never listed."""
    last: dict[int, int] = {}
    for i, node in enumerate(g.nodes):
        for v in node.inputs:
            if v is not None:
                last[id(v)] = i
        for sub in node.subgraphs():
            for inner in sub.walk():
                for v in inner.inputs:
                    if v is not None:
                        last[id(v)] = i
    keep = {id(v) for v in g.outputs}
    by_node: dict[int, list[int]] = {}
    for vid, i in last.items():
        if vid not in keep:
            by_node.setdefault(i, []).append(vid)
    for i, node in enumerate(g.nodes):  # outputs nobody reads go at once
        by_node.setdefault(i, []).extend(id(v) for v in node.outputs if id(v) not in last and id(v) not in keep)
    return by_node


def _run(g: Graph, env: dict[int, Any], trace: dict[str, Any] | None, perturb: Perturb | None = None) -> None:
    """Each node in order; a value is dropped from ``env`` after its last reader (a model
    at full image size holds only its live values, not every intermediate)."""
    for c in g.constants.values():
        env[id(c)] = c.const
    dead = _last_uses(g)
    for i, node in enumerate(g.nodes):
        fn = reference.get(node.op)
        if fn is None:
            raise Unsupported(node.op, "numpy", "no_reference", "no reference function", node.name)
        args = []
        for v in node.inputs:
            if v is None:
                args.append(None)
            elif id(v) in env:
                args.append(env[id(v)])
            else:
                raise OpbridgeError("verifier", f"value {v.name!r} used before it is computed", node=node.name,
                                    op=node.op)
        kwargs = {}
        for k, a in node.attrs.items():
            if isinstance(a, Graph):
                kwargs[k] = _body(a, env, None, perturb)
            elif isinstance(a, list) and a and all(isinstance(x, Graph) for x in a):
                kwargs[k] = [_body(x, env, None, perturb) for x in a]
            else:
                kwargs[k] = a
        budget.check_time(node=node.name, op=node.op)
        if perturb is not None:
            args = perturb(node, args)
        res = call_reference(node, fn, args, kwargs)
        for v, r in zip(node.outputs, res):
            env[id(v)] = r
            if trace is not None:
                trace[v.name] = r
        for vid in dead.get(i, ()):
            env.pop(vid, None)


def run(model: Model, feeds: Mapping[str, Any], trace: dict[str, Any] | None = None,
        perturb: Perturb | None = None) -> list[Any]:
    """Outputs in graph order; ``trace`` (if given) receives every intermediate value by name;
    ``perturb`` (if given) may change each node's arguments before it runs."""
    g = model.graph
    env: dict[int, Any] = {}
    for v in g.inputs:
        if v.name not in feeds:
            raise OpbridgeError("bad_model", f"no value fed for input {v.name!r}")
        env[id(v)] = feeds[v.name]
    # NaN/Inf and empty reductions are values of the semantics, not news for the user:
    # NumPy's floating-point flags and its RuntimeWarnings (``Mean of empty slice``) stay quiet
    with np.errstate(all="ignore"), warnings.catch_warnings(), budget.run_scope():
        warnings.simplefilter("ignore", RuntimeWarning)
        _run(g, env, trace, perturb)
    return _outputs(g, env)


def _outputs(g: Graph, env: dict[int, Any]) -> list[Any]:
    missing = [v for v in g.outputs if id(v) not in env]
    if missing:
        p = missing[0].producer
        raise OpbridgeError("bad_model", f"graph output {missing[0].name!r} of graph {g.name!r} is never computed"
                            + (" (its node gives fewer outputs than it declares)" if p is not None else ""),
                            node=p.name if p is not None else None, op=p.op if p is not None else None)
    return [env[id(v)] for v in g.outputs]


def output_values(model: Model) -> list[Value]:
    return list(model.graph.outputs)
