"""Symbolic input dims: which a model has, fixing them to sizes, and the sizes a check runs at.

A dim is named by its symbol (``batch``, ``sequence``: ONNX ``dim_param``, ``torch.export.Dim``)
or, when it has none, by ``<input>:<axis>``. The pipeline fixes dims before it folds
(``pipeline._passes``): every symbolic dim for a target whose artifacts declare static input
shapes (``Target.dynamic_dims`` False), and the ones the user names (``convert --fix-dim
batch=1``) for any target. What was fixed is reported per target (``Compilation.fixed_dims``);
the rest stays dynamic in the artifact, and ``convert --check`` runs it at two sizes
(``CHECK_SIZES``).
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Iterable

from ..table.errors import OpbridgeError

if TYPE_CHECKING:
    from .graph import Model

#: the sizes a dynamic dim is checked at (``convert --check``)
CHECK_SIZES = (1, 3)


def label(input_name: str, axis: int, dim: object) -> str:
    return dim if isinstance(dim, str) and dim else f"{input_name}:{axis}"


def symbolic(model: "Model") -> dict[str, list[str]]:
    """Input name → the labels of its symbolic dims (inputs with none are left out)."""
    out: dict[str, list[str]] = {}
    for v in model.graph.inputs:
        shape = v.type.shape if v.type.kind == "tensor" else None
        dims = [label(v.name, i, d) for i, d in enumerate(shape or ()) if not isinstance(d, int)]
        if dims:
            out[v.name] = dims
    return out


def parse(specs: Iterable[str] | None) -> dict[str, int]:
    """``["batch=1", "x:1=16"]`` → ``{"batch": 1, "x:1": 16}`` (one-line errors for bad specs)."""
    sizes: dict[str, int] = {}
    for spec in specs or ():
        name, sep, value = str(spec).rpartition("=")
        if not sep or not name:
            raise OpbridgeError("bad_option", f"--fix-dim {spec!r}: expected NAME=SIZE (a dim symbol or INPUT:AXIS)")
        try:
            size = int(value)
        except ValueError:
            size = 0
        if size < 1:
            raise OpbridgeError("bad_option", f"--fix-dim {spec!r}: the size must be a positive integer")
        sizes[name] = size
    return sizes


def parse_check(specs: Iterable[str] | None) -> dict[str, tuple[int, ...]]:
    """``["samples=400,800"]`` → ``{"samples": (400, 800)}``: the sizes a dynamic dim is checked
    at instead of ``CHECK_SIZES`` (an audio length below a conv's kernel cannot run at 1)."""
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs or ():
        name, sep, value = str(spec).rpartition("=")
        try:
            sizes = tuple(int(x) for x in value.split(","))
        except ValueError:
            sizes = ()
        if not sep or not name or len(sizes) != len(CHECK_SIZES) or min(sizes) < 1:
            raise OpbridgeError("bad_option", f"--check-dim {spec!r}: expected NAME={','.join(['SIZE'] * len(CHECK_SIZES))} "
                                "with positive sizes")
        out[name] = sizes
    return out


def fix(model: "Model", sizes: dict[str, int], every: bool, default: int = 1,
        defaults: dict[str, int] | None = None) -> dict[str, int]:
    """Replace symbolic input dims in place: those named in ``sizes``, and all others too
    (with their size in ``defaults``, else ``default``) when ``every``. Returns label → size of what was fixed. A name in
    ``sizes`` that the model does not have is an error (a typo must not pass silently)."""
    known = {d for dims in symbolic(model).values() for d in dims}
    unknown = sorted(set(sizes) - known)
    if unknown:
        have = ", ".join(sorted(known)) or "none"
        raise OpbridgeError("bad_option", f"--fix-dim {', '.join(unknown)}: the model has no such symbolic input "
                            f"dim (it has: {have})")
    fixed: dict[str, int] = {}
    for v in model.graph.inputs:
        t = v.type
        if t.kind != "tensor" or not t.shape:
            continue
        shape = list(t.shape)
        for i, d in enumerate(shape):
            if isinstance(d, int):
                continue
            name = label(v.name, i, d)
            if name in sizes or every:
                shape[i] = fixed[name] = sizes.get(name, (defaults or {}).get(name, default))
        if shape != list(t.shape):
            v.type = dataclasses.replace(t, shape=tuple(shape))
    named = {k: n for k, n in fixed.items() if ":" not in k}
    if named:  # the same symbol is the same size everywhere: values typed with it follow
        for node in model.graph.walk():
            for v in node.outputs:
                s = v.type.shape if v.type.kind == "tensor" else None
                if s and any(isinstance(d, str) and d in named for d in s):
                    v.type = dataclasses.replace(v.type, shape=tuple(named.get(d, d) if isinstance(d, str) else d
                                                                      for d in s))
    return fixed


def sizes_in(model: "Model", feeds: "dict[str, object] | None") -> dict[str, int]:
    """Each symbolic input dim's size in ``feeds`` (arrays by input name), by its label."""
    out: dict[str, int] = {}
    for v in model.graph.inputs:
        shape = v.type.shape if v.type.kind == "tensor" else None
        a = (feeds or {}).get(v.name)
        for i, d in enumerate(shape or ()):
            if not isinstance(d, int) and a is not None and i < getattr(a, "ndim", 0):
                out[label(v.name, i, d)] = int(a.shape[i])
    return out


def sizes_for(model: "Model", run: int, custom: dict[str, tuple[int, ...]] | None = None) -> dict[str, int]:
    """Every symbolic dim of ``model`` at its size for check run ``run`` (an index into
    ``CHECK_SIZES``, or into the dim's own sizes in ``custom``)."""
    return {d: (custom or {}).get(d, CHECK_SIZES)[run] for dims in symbolic(model).values() for d in dims}


__all__ = ["CHECK_SIZES", "symbolic", "parse", "parse_check", "fix", "sizes_for", "label"]
