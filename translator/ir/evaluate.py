"""One reference op evaluated for a node under the resource budget (``call_reference``):
the interpreter, constant folding and the static loop unroller all evaluate through it, and
it imports none of them.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..table import budget
from ..table.errors import OpbridgeError, Unsupported
from .graph import Node
from ..reference._sizes import predict


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


__all__ = ["call_reference"]
