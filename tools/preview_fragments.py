"""Preview a backend's pending fragments merged into a copy of optable.yaml (never the original).

``tools/fragments/cells_<backend>.yaml`` ({op_id: cell}) adds or replaces that backend's
cells; ``tools/fragments/xfail_<backend>.yaml`` ({op_id: [{reason, dtype?}]}) adds
expected failures. The result is written to ``--out`` and checked by the strict loader,
so the fragments can be measured (``OPBRIDGE_OPTABLE=<out> ...``) before the lead
merges them into the table.

    python tools/preview_fragments.py tensorflow tflite --out /tmp/optable.preview.yaml
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CELL_KEYS = ("status", "name", "seed", "attrs", "dtypes", "rank", "notes", "source", "verified")


def merge(doc: dict, backend: str) -> tuple[int, int]:
    by_id = {o["id"]: o for o in doc["ops"]}
    frag = ROOT / "tools" / "fragments"
    n_cells = n_xfail = 0
    cells = frag / f"cells_{backend}.yaml"
    if cells.is_file():
        for op_id, cell in (yaml.safe_load(cells.read_text(encoding="utf-8")) or {}).items():
            if op_id not in by_id:
                raise SystemExit(f"{cells}: unknown op id {op_id!r}")
            unknown = set(cell) - set(CELL_KEYS)
            if unknown:
                raise SystemExit(f"{cells}: {op_id}: unknown keys {sorted(unknown)}")
            by_id[op_id].setdefault("backends", {})[backend] = {k: cell[k] for k in CELL_KEYS if k in cell}
            n_cells += 1
    xfails = frag / f"xfail_{backend}.yaml"
    if xfails.is_file():
        for op_id, entries in (yaml.safe_load(xfails.read_text(encoding="utf-8")) or {}).items():
            if op_id not in by_id:
                raise SystemExit(f"{xfails}: unknown op id {op_id!r}")
            lst = by_id[op_id].setdefault("xfail", [])
            for e in entries:
                item = {"backend": backend, "reason": e["reason"], **({"dtype": e["dtype"]} if "dtype" in e else {})}
                if item not in lst:
                    lst.append(item)
                    n_xfail += 1
    return n_cells, n_xfail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("backends", nargs="+")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    doc = yaml.safe_load((ROOT / "optable.yaml").read_text(encoding="utf-8"))
    for b in args.backends:
        print(f"{b}: cells {{}}, xfails {{}}".format(*merge(doc, b)))
    args.out.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100000), encoding="utf-8")
    os.environ["OPBRIDGE_OPTABLE"] = str(args.out)
    os.environ.setdefault("OPBRIDGE_CACHE", str(args.out.parent / ".opbridge-preview-cache"))
    sys.path.insert(0, str(ROOT))
    from translator.tables import load_tables

    t = load_tables()
    print(f"{args.out}: {len(t.ops)} ops, strict load ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
