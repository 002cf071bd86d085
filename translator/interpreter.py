"""Evaluate an IR graph with the NumPy reference (the oracle of every comparison).

Ops without a reference function are first replaced by their table decomposition
(``lowering.lower_for(graph, "numpy", ...)``), so composite ops are evaluated through
their decomposition. Subgraph attributes become callables ``body(*inputs)``.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from . import reference
from .errors import OpbridgeError, Unsupported
from .ir import Graph, Model, Value
from .lowering import lower_for


def prepare(model: Model) -> Model:
    """Decompose every op that has no reference function (in place)."""
    lower_for(model.graph, "numpy", frozenset(reference.implemented()), cell_constraints=False)
    return model


def _body(g: Graph, outer: dict[int, Any], trace: dict[str, Any] | None) -> Callable[..., list[Any]]:
    def body(*inputs: Any) -> list[Any]:
        env = dict(outer)
        for v, x in zip(g.inputs, inputs):
            env[id(v)] = x
        _run(g, env, trace)
        return [env[id(v)] for v in g.outputs]

    return body


def _run(g: Graph, env: dict[int, Any], trace: dict[str, Any] | None) -> None:
    for c in g.constants.values():
        env[id(c)] = c.const
    for node in g.nodes:
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
                raise OpbridgeError("verifier", f"value {v.name!r} used before it is computed", node=node.name)
        kwargs = {}
        for k, a in node.attrs.items():
            if isinstance(a, Graph):
                kwargs[k] = _body(a, env, None)
            elif isinstance(a, list) and a and all(isinstance(x, Graph) for x in a):
                kwargs[k] = [_body(x, env, None) for x in a]
            else:
                kwargs[k] = a
        try:
            res = fn(*args, **kwargs)
        except OpbridgeError:
            raise
        except NotImplementedError as exc:
            raise Unsupported(node.op, "numpy", "unsupported_attribute_value", str(exc) or "not implemented", node.name) from None
        if not isinstance(res, tuple):
            res = (res,)
        for v, r in zip(node.outputs, res):
            env[id(v)] = r
            if trace is not None:
                trace[v.name] = r


def run(model: Model, feeds: Mapping[str, Any], trace: dict[str, Any] | None = None) -> list[Any]:
    """Outputs in graph order; ``trace`` (if given) receives every intermediate value by name."""
    import numpy as np

    g = model.graph
    env: dict[int, Any] = {}
    for v in g.inputs:
        if v.name not in feeds:
            raise OpbridgeError("bad_model", f"no value fed for input {v.name!r}")
        env[id(v)] = feeds[v.name]
    with np.errstate(all="ignore"):
        _run(g, env, trace)
    return [env[id(v)] for v in g.outputs]


def output_values(model: Model) -> list[Value]:
    return list(model.graph.outputs)
