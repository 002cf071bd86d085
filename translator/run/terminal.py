"""Text for the terminal: escaping names from a model, tables, one-line internal errors.

A leaf module: ``cli`` and ``cli_models`` both use it, so neither imports the other back.
"""
from __future__ import annotations

if False:  # typing only (annotations are strings): typing costs milliseconds at import on the query path
    from typing import Any

_UNSAFE = None


def safe(text: Any) -> str:
    """``text`` for a terminal: control characters (newlines included), DEL, C1 controls,
    line/paragraph separators and bidirectional overrides are shown escaped, so a name
    from a model can neither move the cursor nor fake a line of output."""
    global _UNSAFE
    if _UNSAFE is None:
        import re

        _UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def table(rows: list[list[str]], header: list[str]) -> str:
    rows = [[safe(c) for c in r] for r in rows]
    widths = [len(h) for h in header]
    for r in rows:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    cap = [min(w, 60) for w in widths]

    def fmt(r: list[str]) -> str:
        cells = [(c if len(c) <= cap[i] else c[: cap[i] - 1] + "…").ljust(cap[i]) for i, c in enumerate(r)]
        return "  ".join(cells).rstrip()

    lines = [fmt(header), "  ".join("-" * w for w in cap)]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines)


def internal_error_line(exc: BaseException) -> str:
    """One line for an unexpected exception: its type, message, and the node when known."""
    where = next((f"node {n!r}: " for n in (getattr(exc, "node", None),) if n), "")
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return f"{where}{type(exc).__name__}{': ' + msg if msg else ''} [internal_error]"
