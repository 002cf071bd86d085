"""The table and the code agree, both ways, for every target.

Per target column (``python -m translator.compile.lint [--backend B]``):

1. ``rule without cell``: a rule (``translator.compile.registry``) or a snippet for an op whose cell is
   missing or ``unavailable``;
2. ``cell without code``: a ``native``/``composite`` cell with neither a rule nor a snippet,
   unless it declares ``unimplemented: <reason>`` (a visible, reasoned gap);
3. ``snippet names another function``: a ``native`` cell whose own snippet does not call (one
   of) the function(s) the cell names, in the target's spelling: ``Target.extra["spell"]``
   maps a cell name to the text the snippet must contain (``opset16.relu`` → ``ops.relu``).

Exit code 1 when anything is found, one line per finding.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Callable

from .registry import RULES, snippet_of


@dataclass(frozen=True)
class Finding:
    backend: str
    op: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.backend}/{self.op}: {self.kind}: {self.detail}"


def _spelled(target: Any) -> Callable[[str], str] | None:
    spell = target.extra.get("spell") if target.extra else None
    return spell if callable(spell) else None


def lint_target(target: Any, tables: Any) -> list[Finding]:
    out: list[Finding] = []
    cols = target.columns
    coded = {op for (op, b) in RULES if b in cols}
    for op_id in sorted(coded):
        op = tables.ops.get(op_id)
        cell = op.backends.get(target.name) if op is not None else None
        if op is None:
            out.append(Finding(target.name, op_id, "rule without cell", "the op is not in optable.yaml"))
        elif cell is None or cell.status == "unavailable":
            # a rule registered for a shared column (tflite reuses tensorflow's) only counts in its own
            if any((op_id, c) in RULES for c in cols[:1]) or cols == (target.name,):
                out.append(Finding(target.name, op_id, "rule without cell",
                                   f"a rule exists but the {target.name} cell is {cell.status if cell else 'missing'}"))
    spell = _spelled(target)
    for op in tables.ops.values():
        cell = op.backends.get(target.name)
        if cell is None:
            continue
        own_snippet = cell.snippet
        if own_snippet and cell.status == "unavailable":
            out.append(Finding(target.name, op.id, "rule without cell", "a snippet in an unavailable cell"))
        if cell.status not in ("native", "composite"):
            continue
        has_code = op.id in coded or snippet_of(op, cols) is not None
        if not has_code and not cell.unimplemented:
            out.append(Finding(target.name, op.id, "cell without code",
                               f"the {cell.status} cell ({', '.join(cell.names) or 'no name'}) has no rule and no snippet"))
        if has_code and cell.unimplemented:
            out.append(Finding(target.name, op.id, "stale unimplemented", "the cell declares a gap but code exists"))
        if spell is not None and cell.status == "native" and own_snippet and cell.names:
            if not any(spell(n) in own_snippet for n in cell.names):
                out.append(Finding(target.name, op.id, "snippet names another function",
                                   f"the cell names {', '.join(cell.names)}; the snippet is {own_snippet}"))
    return out


def lint(backends: list[str] | None = None, tables: Any = None) -> list[Finding]:
    from ..table.loader import load_tables
    from .target import get, names

    tables = tables or load_tables()
    found: list[Finding] = []
    for name in backends or names(include_reference=False):
        found += lint_target(get(name), tables)
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m translator.compile.lint", description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", action="append", help="a target (repeatable; default: every target)")
    args = ap.parse_args(argv)
    found = lint(args.backend)
    for f in found:
        print(f)
    print(f"{len(found)} finding(s)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
