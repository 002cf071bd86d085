"""Regenerate the README's support summary and docs/SUPPORT.md from the tables.

    python tools/update_docs.py [--check]     # --check: exit 1 when a file would change
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from translator.report import README_BEGIN, README_END, readme_section, support_doc, table_matrix  # noqa: E402


def expected() -> dict[Path, str]:
    m = table_matrix()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    i, j = readme.index(README_BEGIN), readme.index(README_END) + len(README_END)
    return {ROOT / "README.md": readme[:i] + readme_section(m) + readme[j:], ROOT / "docs" / "SUPPORT.md": support_doc(m)}


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
