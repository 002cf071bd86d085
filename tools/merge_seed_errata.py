"""Append the seed-against-seed errata (tools/fragments/seed_params_errata.yaml, written by
tools/ingest_params.py) to the ``errata`` of the table ops whose ONNX cell names that op.

Idempotent: an entry already present (same field and seed text) is not added twice.

    python tools/merge_seed_errata.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from extend_tables import HEADER, reorder  # noqa: E402
from ingest_seeds import dump  # noqa: E402


def main() -> int:
    doc = yaml.safe_load((ROOT / "optable.yaml").read_text(encoding="utf-8"))
    frag = yaml.safe_load((ROOT / "tools" / "fragments" / "seed_params_errata.yaml").read_text(encoding="utf-8"))
    by_onnx: dict[str, dict] = {}
    for op in doc["ops"]:
        cell = (op.get("backends") or {}).get("onnx") or {}
        names = cell.get("name")
        for n in names if isinstance(names, list) else [names]:
            if n:
                by_onnx.setdefault(str(n), op)
    added = 0
    for onnx_name, entries in frag.items():
        op = by_onnx.get(onnx_name)
        if op is None:
            print(f"no table op has ONNX name {onnx_name!r}", file=sys.stderr)
            return 2
        errata = op.setdefault("errata", [])
        for e in entries:
            if any(x.get("field") == e["field"] and x.get("seed") == e["seed"] for x in errata):
                continue
            errata.append({k: e[k] for k in ("field", "seed", "verified", "note", "source") if k in e})
            added += 1
    doc["ops"] = [reorder(op) for op in doc["ops"]]
    (ROOT / "optable.yaml").write_text(dump(doc, HEADER), encoding="utf-8")
    print(f"errata added {added}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
