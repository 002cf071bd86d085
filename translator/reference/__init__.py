"""The NumPy reference: one plain function per IR primitive, the oracle of every test.

Contract of a reference function (registered with ``@reference("op_id")``):

* positional arguments: the node's inputs in the op's signature order (the newest
  ONNX form of the op: e.g. ``reduce_sum(data, axes=None)``, ``split(x, split=None)``),
  ``None`` for an omitted optional input; variadic inputs are spread (``sum(*xs)``);
* keyword arguments: the node's attributes, IR names (= ONNX attribute names), only
  those present on the node: the function applies the defaults itself;
* a graph attribute arrives as a Python callable ``body(*inputs) -> list[outputs]``;
* sequences are Python lists of arrays; an empty optional is ``None``;
* returns one array (single output) or a tuple (several outputs). Results keep the
  dtype the op defines (compute in float64 only where the op's semantics allow, then
  cast back).

Functions live one module per family (``elementwise.py``, ``reduce.py``, ...) and are
imported lazily: ``get(op_id)`` imports every family module on first use.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Callable

REGISTRY: dict[str, Callable[..., Any]] = {}
_LOADED = False


def reference(*op_ids: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op_id in op_ids:
            if op_id in REGISTRY:
                raise ValueError(f"reference for {op_id!r} registered twice")
            REGISTRY[op_id] = fn
        return fn

    return deco


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    _LOADED = True


def get(op_id: str) -> Callable[..., Any] | None:
    _load_all()
    return REGISTRY.get(op_id)


def implemented() -> list[str]:
    _load_all()
    return sorted(REGISTRY)
