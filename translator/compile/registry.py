"""The one lowering registry: (op id, backend) → ``Rule``; one refusal type ``Refusal``.

A backend package registers its Python code generators here (``emitters/<backend>/registry.py``
re-exports ``rule`` bound to its name); one-line code lives in the table instead, as the
``snippet`` of the op's cell (``translator/table/snippets.py``). An op is supported on a backend
when its cell says ``native`` or ``composite`` AND a rule or a snippet exists
(``supported``); ``translator/compile/lint.py`` checks both directions.

A rule's ``check`` answers whether it can emit one node: ``None``, or a ``Refusal``
(reason code, detail). A check never raises to carry its reason: the pipeline decides what a
refusal means (the table's decomposition, else a one-line ``Unsupported``).

This module is a leaf: it imports nothing from the project but the IR and the tables'
types, so every backend's families can import it without a cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:
    from ..ir.graph import Node
    from ..table.loader import Tables


@dataclass(frozen=True)
class Refusal:
    """Why a backend does not take a node: a reason code (docs/TABLES.md) and one line."""

    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.detail} [{self.code}]"


Check = Callable[["Node"], "Refusal | None"]


@dataclass(frozen=True)
class Rule:
    """A backend's Python code generator for one op (its signature is the backend's own)."""

    backend: str
    op: str
    fn: Callable[..., Any]
    check: Check | None = None
    #: the rule also takes dtypes outside its cell's ``dtypes`` (it casts or composes itself)
    any_dtype: bool = False


#: (op id, backend) → rule
RULES: dict[tuple[str, str], Rule] = {}


def rule(backend: str, *ops: str, check: Check | None = None,
         any_dtype: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as ``backend``'s code generator for ``ops`` (twice is an error)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            if (op, backend) in RULES and RULES[(op, backend)].fn is not fn:
                raise ValueError(f"{backend}: a rule for {op!r} is registered twice")
            RULES[(op, backend)] = Rule(backend, op, fn, check, any_dtype)
        return fn

    return deco


def binder(backend: str) -> Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """``rule`` bound to one backend: ``rule = binder("pytorch")`` in its registry module."""

    def bound(*ops: str, check: Check | None = None, any_dtype: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return rule(backend, *ops, check=check, any_dtype=any_dtype)

    return bound


def rules(backend: str | Iterable[str]) -> dict[str, Rule]:
    """op id → rule of one backend (or of several, the first listed winning)."""
    names = [backend] if isinstance(backend, str) else list(backend)
    out: dict[str, Rule] = {}
    for name in reversed(names):
        out.update({op: r for (op, b), r in RULES.items() if b == name})
    return out


def refusal(why: "Refusal | tuple[str, str] | str | None", code: str = "unsupported_attribute_value") -> Refusal | None:
    """A check's answer as a Refusal (a bare string gets ``code``)."""
    if why is None or isinstance(why, Refusal):
        return why
    if isinstance(why, tuple):
        return Refusal(str(why[0]), str(why[1]))
    return Refusal(code, str(why))


def code_columns(target: Any) -> tuple[str, ...]:
    cols = getattr(target, "code_columns", None) or ()
    return tuple(cols) or (target.name,)


def snippet_of(op: Any, columns: Iterable[str]) -> str | None:
    """The snippet a target emits for ``op``: the first of its code columns whose cell has one."""
    for col in columns:
        cell = op.backends.get(col)
        if cell is not None and getattr(cell, "snippet", None):
            return cell.snippet
    return None


def supported(target: Any, tables: "Tables") -> frozenset[str]:
    """Ops a target emits itself: its cell says native or composite AND it has a rule or a snippet."""
    cols = code_columns(target)
    have = rules(cols)
    out = set()
    for op in tables.ops.values():
        cell = op.backends.get(target.name)
        if cell is None or cell.status not in ("native", "composite"):
            continue
        if op.id in have or snippet_of(op, cols) is not None:
            out.add(op.id)
    return frozenset(out)
