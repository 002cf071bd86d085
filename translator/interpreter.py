"""Evaluate an IR graph with the NumPy reference (the oracle of every comparison).

Ops without a reference function are first replaced by their table decomposition
(``lowering.lower`` for the ``numpy`` target), so composite ops are evaluated through
their decomposition. Subgraph attributes become callables ``body(*inputs)``.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Mapping

import numpy as np

from . import budget, reference
from .errors import OpbridgeError, Unsupported
from .ir import Graph, Model, Node, Value
from .reference._sizes import predict


def prepare(model: Model) -> Model:
    """Decompose every op that has no reference function (in place)."""
    from .lowering import lower
    from .tables import load_tables
    from .target import Compilation, get

    lower(model.graph, Compilation(get("numpy"), load_tables()))
    return model


def _body(g: Graph, outer: dict[int, Any], trace: dict[str, Any] | None) -> Callable[..., list[Any]]:
    def body(*inputs: Any) -> list[Any]:
        env = dict(outer)
        for v, x in zip(g.inputs, inputs):
            env[id(v)] = x
        _run(g, env, trace)
        return _outputs(g, env)

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
                raise OpbridgeError("verifier", f"value {v.name!r} used before it is computed", node=node.name,
                                    op=node.op)
        kwargs = {}
        for k, a in node.attrs.items():
            if isinstance(a, Graph):
                kwargs[k] = _body(a, env, None)
            elif isinstance(a, list) and a and all(isinstance(x, Graph) for x in a):
                kwargs[k] = [_body(x, env, None) for x in a]
            else:
                kwargs[k] = a
        budget.check_time(node=node.name, op=node.op)
        res = call_reference(node, fn, args, kwargs)
        for v, r in zip(node.outputs, res):
            env[id(v)] = r
            if trace is not None:
                trace[v.name] = r


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _check_sizes(node: Node, args: list[Any], kwargs: dict[str, Any], b: budget.Budget) -> None:
    """Refuse, before the op allocates it, an output over the budget: predicted from the
    arguments (``reference/_sizes.py``), else the node's statically known output shape."""
    sizes = predict(node.op, args, kwargs)
    if sizes is not None:
        for n, itemsize in sizes:
            if n > b.max_elements or (itemsize and n * itemsize > b.max_bytes):
                budget.check_tensor(n, itemsize, "output")
        return
    for v in node.outputs:
        shp = v.type.shape
        if shp and v.type.kind == "tensor" and all(isinstance(d, int) for d in shp) \
                and (math.prod(shp) > b.max_elements or min(shp) < 0):
            budget.check_tensor(shp, None, f"output {v.name!r}")


def _check_result(res: tuple, b: budget.Budget) -> None:
    for r in res:
        if isinstance(r, np.ndarray) and (r.size > b.max_elements or r.nbytes > b.max_bytes):
            budget.check_tensor(r.size, None if r.dtype.kind == "O" else r.dtype.itemsize, "output")


def call_reference(node: Node, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any],
                   check_sizes: bool = True) -> tuple:
    """``fn(*args, **kwargs)`` for ``node`` under the resource budget; the results as a tuple.

    Every failure is an ``OpbridgeError`` naming the node and its op: the op's own
    ``OpbridgeError`` (``too_large`` from the budget, ...), ``NotImplementedError`` as
    ``unsupported_attribute_value``, ``MemoryError`` as ``too_large`` and anything else a
    malformed model makes NumPy raise (IndexError, ValueError, ZeroDivisionError,
    TypeError, KeyError, RecursionError...) as ``bad_model`` with the exception's text."""
    try:
        b = budget.current()
        if check_sizes:
            _check_sizes(node, args, kwargs, b)
        res = fn(*args, **kwargs)
        if not isinstance(res, tuple):
            res = (res,)
        if check_sizes:
            _check_result(res, b)
        return res
    except Unsupported:
        raise
    except OpbridgeError as exc:
        if exc.node is not None:
            raise
        raise OpbridgeError(exc.code, exc.detail, node=node.name, op=node.op, where=exc.where) from None
    except NotImplementedError as exc:
        raise Unsupported(node.op, "numpy", "unsupported_attribute_value", str(exc) or "not implemented", node.name) from None
    except MemoryError:
        raise OpbridgeError("too_large", "out of memory evaluating the node", node=node.name, op=node.op) from None
    except Exception as exc:  # noqa: BLE001 - a malformed model: one line naming the node
        raise OpbridgeError("bad_model", _one_line(exc), node=node.name, op=node.op) from None


def run(model: Model, feeds: Mapping[str, Any], trace: dict[str, Any] | None = None) -> list[Any]:
    """Outputs in graph order; ``trace`` (if given) receives every intermediate value by name."""
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
        _run(g, env, trace)
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
