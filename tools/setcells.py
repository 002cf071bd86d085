"""Write (op, API) cells into optable.yaml without reformatting the rest of the file.

    python tools/setcells.py CELLS.yaml [--dry-run]

CELLS.yaml maps op ids to ``{api: cell}`` (a cell as docs/TABLES.md describes it, or null to
remove the cell); the special key ``_errata`` holds a list of errata to add to the op
(``{field, seed, verified, note, source}``: an erratum already there is not added twice). Each cell's text replaces the old one in place; a new cell goes where the
column order (constants.API_KEYS) puts it. Everything else in optable.yaml keeps its bytes.

Several people (or helpers) may fill different columns at the same time: the tool holds an
exclusive lock on optable.yaml while it reads, merges and writes, validates the result with
the strict loader before anything is written (a bad cell names its op and key and changes
nothing), and replaces the file atomically.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from translator.table.constants import API_KEYS  # noqa: E402

KEY_ORDER = ("status", "name", "seed", "attrs", "dtypes", "rank", "notes", "source", "verified", "snippet",
             "unimplemented", "reads")
_OP_RE = re.compile(r"^- id: (\S+)\s*$")
_CELL_RE = re.compile(r"^    ([a-z0-9_]+):\s*$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def cell_text(api: str, cell: dict[str, Any]) -> list[str]:
    unknown = set(cell) - set(KEY_ORDER)
    if unknown:
        raise ValueError(f"cell {api}: unknown keys {sorted(unknown)}")
    ordered = {k: cell[k] for k in KEY_ORDER if k in cell}
    text = yaml.safe_dump({api: ordered}, sort_keys=False, allow_unicode=True, width=10**6,
                          default_flow_style=False)
    return ["    " + ln if ln else ln for ln in text.rstrip("\n").split("\n")]


def keep_seed(old: dict[str, Any], cell: dict[str, Any]) -> dict[str, Any]:
    """A correction adds a source (and an erratum); it never drops what a seed said: the old
    cell's seed citations and raw ``seed`` text are carried into the new cell."""
    old_src = old.get("source") or []
    old_src = [old_src] if isinstance(old_src, str) else list(old_src)
    src = cell.get("source") or []
    src = [src] if isinstance(src, str) else list(src)
    lost = [x for x in old_src if x.startswith("seed:") and x not in src]
    if not lost and ("seed" not in old or "seed" in cell):
        return cell
    cell = dict(cell)
    if lost:
        src = src + lost
        cell["source"] = src[0] if len(src) == 1 else src
    if "seed" in old and "seed" not in cell:
        cell["seed"] = old["seed"]
    return cell


def _add_errata(op_id: str, block: list[str], errata: list[dict[str, Any]]) -> list[str]:
    have = (yaml.safe_load("\n".join(block))[0] or {}).get("errata") or []
    add = [e for e in errata if e not in have]
    if not add:
        return block
    text = yaml.safe_dump(add, sort_keys=False, allow_unicode=True, width=10**6, default_flow_style=False)
    items = ["  " + ln for ln in text.rstrip("\n").split("\n")]
    try:
        e = next(i for i, ln in enumerate(block) if ln == "  errata:")
    except StopIteration:
        b = next(i for i, ln in enumerate(block) if ln == "  backends:")
        return block[:b] + ["  errata:"] + items + block[b:]
    end = next((i for i in range(e + 1, len(block)) if block[i].strip() and _indent(block[i]) <= 2
                and not block[i].startswith("  - ")), len(block))
    return block[:end] + items + block[end:]


def merge(text: str, cells: dict[str, dict[str, Any]]) -> str:
    lines = text.split("\n")
    starts = [i for i, ln in enumerate(lines) if _OP_RE.match(ln)]
    where = {_OP_RE.match(lines[i]).group(1): i for i in starts}
    missing = sorted(set(cells) - set(where))
    if missing:
        raise ValueError(f"unknown op ids {missing}")
    order = {a: k for k, a in enumerate(API_KEYS)}
    # edit from the bottom up so earlier indices stay valid
    for op_id in sorted(cells, key=lambda o: -where[o]):
        start = where[op_id]
        end = next((s for s in starts if s > start), len(lines))
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1
        block = lines[start:end]
        try:
            b = next(i for i, ln in enumerate(block) if ln == "  backends:")
        except StopIteration:
            block.append("  backends:")
            b = len(block) - 1
        b_end = next((i for i in range(b + 1, len(block)) if block[i].strip() and _indent(block[i]) <= 2), len(block))
        # the existing cells: api -> (first, last+1) within block
        spans: dict[str, tuple[int, int]] = {}
        i = b + 1
        while i < b_end:
            m = _CELL_RE.match(block[i])
            if not m:
                raise ValueError(f"op {op_id}: unexpected line in backends: {block[i]!r}")
            j = i + 1
            while j < b_end and (not block[j].strip() or _indent(block[j]) > 4):
                j += 1
            spans[m.group(1)] = (i, j)
            i = j
        new: dict[str, list[str]] = {a: block[s:e] for a, (s, e) in spans.items()}
        errata = cells[op_id].get("_errata") or []
        for api, cell in cells[op_id].items():
            if api == "_errata":
                continue
            if api not in order:
                raise ValueError(f"op {op_id}: unknown API {api!r}")
            if cell is None:
                new.pop(api, None)
            else:
                if api in new:
                    cell = keep_seed(yaml.safe_load("\n".join(ln[4:] for ln in new[api]))[api], cell)
                new[api] = cell_text(api, cell)
        body = [ln for api in sorted(new, key=lambda a: order.get(a, len(order))) for ln in new[api]]
        block = block[:b + 1] + body + block[b_end:]
        if errata:
            block = _add_errata(op_id, block, errata)
        lines[start:end] = block
    return "\n".join(lines)


def apply(cells_path: str | os.PathLike[str], optable: Path = ROOT / "optable.yaml", dry_run: bool = False) -> int:
    with open(cells_path, encoding="utf-8") as f:
        cells = yaml.safe_load(f) or {}
    if not isinstance(cells, dict) or not all(isinstance(v, dict) for v in cells.values()):
        raise ValueError(f"{cells_path}: expected a mapping op id -> {{api: cell}}")
    with open(str(optable) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = optable.read_text(encoding="utf-8")
        out = merge(text, cells)
        fd, tmp = tempfile.mkstemp(dir=optable.parent, prefix=".optable.", suffix=".yaml")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(out)
            from translator.table.loader import load_tables

            load_tables(tmp, use_cache=False)  # the strict loader: a bad cell raises, nothing is written
            if dry_run:
                os.unlink(tmp)
            else:
                os.replace(tmp, optable)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return sum(len(v) for v in cells.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cells")
    ap.add_argument("--dry-run", action="store_true", help="validate only")
    a = ap.parse_args(argv)
    try:
        n = apply(a.cells, dry_run=a.dry_run)
    except Exception as e:  # noqa: BLE001  one line, exit 2
        print(f"setcells: {a.cells}: {e}".splitlines()[0], file=sys.stderr)
        return 2
    print(f"{'validated' if a.dry_run else 'wrote'} {n} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main())
