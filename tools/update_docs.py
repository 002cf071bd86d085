"""Regenerate the README's support summary, docs/SUPPORT.md and docs/DECOMPOSITIONS.md from the tables.

    python tools/update_docs.py [--check]     # --check: exit 1 when a file would change
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from translator.run.report import README_BEGIN, README_END, readme_section, support_doc, table_matrix  # noqa: E402


DECOMP_INTRO = """# Decompositions

Generated from `optable.yaml` by `tools/update_docs.py` (a test fails when this file drifts).

An op's optional `decomposition` rewrites one node into other table ops. The lowering
(translator/compile/lowering.py) uses it when a backend has no native cell and no registered
Python lowering for the op, and only when `when` holds for the node. Every decomposition
is executed against the op's NumPy reference by `tests/test_decompositions.py`, and through
every backend that needs it by the generated `tests/test_ops.py`.

```yaml
decomposition:
  comment: one line of math          # shown by `opbridge query`
  when:                              # optional; all listed conditions must hold
    attrs: {approximate: none}       #   attribute values (defaults from the signature)
    dtype_kind: [float]              #   kind of an input: float, int, uint, bool, complex
    dtype_of: X                      #   ... of this input (default: the first)
    present: [B]                     #   optional inputs that must be given
  body:                              # SSA steps; `in` names signature ports, earlier `out`s or literals
  - {op: div, in: [X, 1.4142135623730951], out: xs}
  - {op: erf, in: [xs], out: er, attrs: {}}
  - {op: cast, in: [B], out: bf, attrs: {to: 1}, if_present: [B]}  # left out without B: bf absent
```

| op | decomposition | when | uses |
|---|---|---|---|
"""


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _val(v: object) -> str:
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if hasattr(v, "items"):
        return ", ".join(f"{k}={x}" for k, x in sorted(v.items()))  # type: ignore[attr-defined]
    return str(v)


def decompositions_doc() -> str:
    from translator.table.loader import load_tables

    rows = []
    for op in sorted(load_tables().ops.values(), key=lambda o: o.id):
        if not op.decomposition:
            continue
        when = op.decomposition_when or {}
        cond = "; ".join(f"{k}: {_val(v)}" for k, v in sorted(when.items()) if v) if when else "always"
        uses = ", ".join(sorted({s.op for s in op.decomposition}))
        rows.append(f"| `{op.id}` | {_md(op.decomposition_comment or '')} | {_md(cond)} | {uses} |")
    return DECOMP_INTRO + "\n".join(rows) + f"\n\n{len(rows)} decompositions.\n"


def expected() -> dict[Path, str]:
    m = table_matrix()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    i, j = readme.index(README_BEGIN), readme.index(README_END) + len(README_END)
    return {ROOT / "README.md": readme[:i] + readme_section(m) + readme[j:], ROOT / "docs" / "SUPPORT.md": support_doc(m),
            ROOT / "docs" / "DECOMPOSITIONS.md": decompositions_doc()}


def main() -> int:
    check = "--check" in sys.argv
    stale = []
    for path, text in expected().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(path)
            if not check:
                path.write_text(text, encoding="utf-8")
    if check and stale:
        print("out of date: " + ", ".join(str(p.relative_to(ROOT)) for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
