"""Cold-start cost of ``opbridge query`` against ``python -c pass``, side by side.

Runs N fresh processes of each, interleaved in one run, and prints the medians and
their ratio (target ≤ 3: nothing heavy may be imported on the query path, and a query
reads two small index files however large the tables grow). The first, untimed call
builds the query index cache (keyed by the tables' stamps), as any user's first call does.

    python bench/query_cold.py [-n 30] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def opbridge_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("opbridge")
    if exe.is_file():
        return [str(exe)]
    found = shutil.which("opbridge")
    return [found] if found else [sys.executable, "-m", "translator.cli"]


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    query = opbridge_cmd() + ["query", "conv", "--backend", "openvino"]
    baseline = [sys.executable, "-c", "pass"]
    subprocess.run(query, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)  # builds the index cache
    q, b = [], []
    for _ in range(args.n):
        q.append(timed(query))
        b.append(timed(baseline))
    mq, mb = statistics.median(q), statistics.median(b)
    res = {"n": args.n, "command": " ".join(query[-4:]), "query_median_s": round(mq, 4),
           "python_pass_median_s": round(mb, 4), "ratio": round(mq / mb, 2), "target": 3}
    if args.json:
        print(json.dumps(res))
    else:
        print(f"opbridge {res['command']}: median {mq * 1000:.1f} ms over {args.n} cold runs")
        print(f"python -c pass: median {mb * 1000:.1f} ms")
        print(f"ratio {res['ratio']} (target <= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
