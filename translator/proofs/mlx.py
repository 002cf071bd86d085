"""Prover of the ``mlx`` column: runs a cell's snippet in MLX (``mlx.core`` as ``mx``,
``mlx.nn`` as ``nn``) on the sample and returns the evaluated arrays.

A proven cell carries a ``snippet``: one Python expression over ``mx`` and ``nn`` in the
one snippet grammar (translator/table/snippets.py). Inputs are bound as ``mx.array`` values under
identifiers this module chooses (``_in0``, ``_in1``...; an omitted optional input is ``None``),
attributes are rendered as Python literals, ``{$T}`` as ``mx.<dtype>``. Inputs that MLX
takes as Python values (shapes, axes, pads) are read in the snippet with ``.tolist()``.
The expression's value is an array or a tuple/list of arrays (the op's outputs in order).

``provable`` requires every name of the cell to appear in the snippet (``mlx.core.abs`` as
``mx.abs``, ``mlx.nn.gelu`` as ``nn.gelu``, an array method or property such as
``mlx.core.array.shape`` as ``.shape``): the proof runs the named functions. Every output
must be an ``mx.array`` that MLX computed (``mx.eval``), converted to NumPy afterwards.
"""
from __future__ import annotations

import builtins
import re
import warnings
from typing import Any

import numpy as np

from . import ProofError, dist_version, importable, sample_node

API = "mlx"
EXTRA = "mlx"

_PREFIXES = (("mlx.core.", "mx."), ("mlx.nn.", "nn."))
#: Python builtins a snippet may use (plain data helpers; nothing that reaches the system)
_BUILTINS = {n: getattr(builtins, n) for n in ("len", "range", "tuple", "list", "int", "float", "bool", "zip",
                                              "min", "max", "slice", "reversed", "sorted", "enumerate", "abs")}


def missing() -> str | None:
    return importable("mlx.core", "mlx.nn", hint="pip install 'opbridge[mlx]'")


def version() -> str:
    return dist_version("mlx") or "mlx (unknown version)"


def resolves(name: str) -> bool:
    """``mlx.core.abs``, ``mlx.nn.gelu``, ``mlx.core.fast.rms_norm``: an attribute path of the
    installed package."""
    import importlib

    parts = name.split(".")
    if len(parts) < 3 or parts[0] != "mlx" or parts[1] not in ("core", "nn"):
        return False
    try:
        obj: Any = importlib.import_module(f"mlx.{parts[1]}")
    except Exception:  # noqa: BLE001
        return False
    for p in parts[2:]:
        if not hasattr(obj, p):
            return False
        obj = getattr(obj, p)
    return True


def _spelled(name: str) -> str | None:
    for full, short in _PREFIXES:
        if name.startswith(full):
            return short + name[len(full):]
    return None


def provable(op, cell) -> bool:
    text = getattr(cell, "snippet", None)
    if not text or op.signature is None:
        return False
    return all(_used(n, text) for n in cell.names)


def _used(name: str, text: str) -> bool:
    """Whether the snippet calls ``name``: ``mlx.core.abs`` as ``mx.abs``; a method or property of
    an array (``mlx.core.array.shape``) as ``.shape``; an ``x.at[...]`` method
    (``mlx.core.ArrayAt.add``) as ``.at[...].add``."""
    for cls in ("mlx.core.array.", "mlx.core.ArrayAt."):
        if name.startswith(cls):
            attr = re.escape(name[len(cls):])
            if cls.endswith("ArrayAt.") and ".at[" not in text:
                return False
            return re.search(r"\." + attr + r"(?!\w)", text) is not None
    short = _spelled(name)
    return short is not None and re.search(r"(?<![\w.])" + re.escape(short) + r"(?!\w)", text) is not None


class _Binder:
    def value(self, v) -> str:
        return "None" if v is None else v.name

    def attr(self, name: str, value: Any) -> str:
        from ..compile.render import literal

        return str(literal(value))

    def dtype(self, dtype_id: str) -> str:
        if not re.fullmatch(r"[a-z0-9_]+", dtype_id):
            raise ProofError(f"no MLX spelling for dtype {dtype_id!r}")
        return f"mx.{'bool_' if dtype_id == 'bool' else dtype_id}"


def run(op, cell, sample) -> list[np.ndarray]:
    import mlx.core as mx
    import mlx.nn as nn

    from ..table.snippets import SnippetError, expand

    try:
        code = expand(cell.snippet, sample_node(op, sample, "_in"), op, _Binder())
    except SnippetError as e:
        raise ProofError(str(e)) from e
    env: dict[str, Any] = {"__builtins__": _BUILTINS, "mx": mx, "nn": nn}
    for i, x in enumerate(sample.inputs):
        if x is not None:
            env[f"_in{i}"] = mx.array(np.asarray(x))
    try:
        with warnings.catch_warnings():  # a dead branch such as None[0] (an omitted input) warns at compile time
            warnings.simplefilter("ignore", SyntaxWarning)
            compiled = compile(code, f"<mlx snippet of {op.id}>", "eval")
        out = eval(compiled, env)  # noqa: S307 - the table's snippet, inputs bound by name
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        foreign = [type(o).__name__ for o in outs if o is not None and not isinstance(o, mx.array)]
        if foreign:  # every output must be an array MLX computed
            raise ProofError(f"the snippet returned {foreign}, not mlx arrays")
        arrays = [o for o in outs if isinstance(o, mx.array)]
        mx.eval(*arrays)
    except ProofError:
        raise
    except Exception as e:  # noqa: BLE001 - the runtime's rejection is the proof's result
        raise ProofError(f"mlx rejected {code!r}: {type(e).__name__}: {e}") from e
    res = []
    for o in outs:
        if isinstance(o, mx.array):
            res.append(np.array(o, copy=True))
        else:
            res.append(o if o is None else np.asarray(o))
    if sample.outputs is not None:
        res = res[: sample.outputs]
    return res
