"""``opbridge report DIR`` against one ``opbridge report MODEL`` per file, in the same run (issue 26).

The folder report judges every model in a process pool (every core, or ``--workers``); each
file is then reported on its own, one process after another, as a user would. Per (model,
target) the two must say the same: the verdict, the node counts, the dims a target fixes and
the refused groups (reason, op, node count, remedy); a model neither can read must fail with
the same reason code. Prints the agreement, the folder's wall time against the per-model runs'
sum, and every disagreement.

    python bench/report_dir.py [FOLDER] [--workers N] [--json out.json]

FOLDER defaults to the wild corpus (``bench/.cache/wild/models``; ``bench/wild/fetch.py``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "bench" / ".cache" / "wild" / "models"
CODE = re.compile(r"\[([a-z_]+)\]\s*$")


def opbridge(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def groups(problems: list[dict[str, Any]], backend: str | None = None) -> list[tuple[Any, ...]]:
    """Refused groups as comparable tuples (a per-model report lists the nodes, the folder counts them)."""
    out = []
    for p in problems:
        if backend is not None and p.get("backend") != backend:
            continue
        n = p["nodes"] if isinstance(p["nodes"], int) else len(p["nodes"])
        out.append((p["reason"], p["op"], n, p.get("remedy", "")))
    return out


def compare(row: dict[str, Any], one: subprocess.CompletedProcess) -> list[str]:
    """What the folder's row and the model's own report disagree on (empty: they agree)."""
    if "error" in row:
        m = CODE.search(one.stderr.strip().splitlines()[-1]) if one.returncode and one.stderr.strip() else None
        if m is None or m.group(1) != row["reason"]:
            return [f"folder: {row['reason']}; alone: exit {one.returncode} {one.stderr.strip()[-200:]!r}"]
        return []
    if one.returncode != 0:
        return [f"folder judged it; alone: exit {one.returncode} {one.stderr.strip()[-200:]!r}"]
    doc = json.loads(one.stdout)
    bad = []
    for backend, b in row["backends"].items():
        own = doc["backends"].get(backend)
        if own is None:
            bad.append(f"{backend}: missing from the model's own report")
            continue
        if own["counts"] != b["counts"]:
            bad.append(f"{backend}: counts {b['counts']} vs {own['counts']}")
        if own["fixed_dims"] != b["fixed_dims"]:
            bad.append(f"{backend}: fixed dims {b['fixed_dims']} vs {own['fixed_dims']}")
        if groups(doc.get("problems", []), backend) != groups(b["problems"]):
            bad.append(f"{backend}: refused groups {groups(b['problems'])[:3]} vs "
                       f"{groups(doc.get('problems', []), backend)[:3]}")
    return bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(DEFAULT))
    ap.add_argument("--workers", type=int, help="the folder report's worker processes (default: every core)")
    ap.add_argument("--json", help="write the figures and every disagreement here")
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    if not folder.is_dir():
        print(f"report_dir: {folder} is not a folder (fetch the corpus: python bench/wild/fetch.py)", file=sys.stderr)
        return 2
    t = time.perf_counter()
    r = opbridge("report", str(folder), "--json", *(["--workers", str(args.workers)] if args.workers else []))
    folder_s = time.perf_counter() - t
    if r.returncode != 0:
        print(f"report_dir: the folder report failed (exit {r.returncode}): {r.stderr.strip()[-400:]}", file=sys.stderr)
        return 2
    rows = json.loads(r.stdout)["models"]
    print(f"folder report: {len(rows)} models in {folder_s:.1f} s "
          f"({args.workers or os.cpu_count()} workers)", flush=True)
    alone_s, pairs, disagree = 0.0, 0, []
    for i, row in enumerate(rows, 1):
        t = time.perf_counter()
        one = opbridge("report", row["model"], "--json")
        alone_s += time.perf_counter() - t
        bad = compare(row, one)
        pairs += 1 if "error" in row else len(row["backends"])
        disagree += [f"{Path(row['model']).name}: {b}" for b in bad]
        print(f"  [{i}/{len(rows)}] {Path(row['model']).name}: {'agrees' if not bad else 'DISAGREES'}", flush=True)
    n_bad = len({line.split(":")[0] + ":" + line.split(":")[1].strip() for line in disagree})  # (model, target)
    print(f"\nreport DIR vs report MODEL: {pairs - n_bad}/{pairs} (model, target) pairs agree "
          f"(a model neither reads counts once)")
    print(f"wall: folder {folder_s:.1f} s; the same models one by one {alone_s:.1f} s "
          f"(x{alone_s / folder_s:.1f})")
    for line in disagree:
        print("  " + line)
    if args.json:
        Path(args.json).write_text(json.dumps({"models": len(rows), "pairs": pairs, "disagree": disagree,
                                               "folder_seconds": round(folder_s, 1),
                                               "alone_seconds": round(alone_s, 1)}, indent=1))
    return 0 if not disagree else 1


if __name__ == "__main__":
    sys.exit(main())
