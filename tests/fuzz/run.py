"""The fuzz runner: each case runs ``opbridge`` as a user would, in a folder of its own,
and is judged from the outside.

    python -m tests.fuzz.run --cases 2000 --seed 0 [--workers 2] [--json out.json]

A fork server: this process imports the light part of opbridge once (onnx, NumPy, the
tables), then forks one child per case, which chdirs into the case's folder, points file
descriptors 1 and 2 at files, and runs ``translator.cli.main()`` exactly as the console
script does. The parent enforces the wall-time budget (the child is killed: a *hang*) and
reads the child's peak RSS from ``wait4``. Per case it asserts:

* the exit code is 0, 1 or 2 (not a signal, not 130);
* no traceback on either stream;
* exit 2: stderr is exactly one line and names a reason code ``[code]``;
* exit 2: nothing at ``-o`` and no scratch folder left; no file anywhere in the case's
  folder but the inputs and the output (no file outside the output folder);
* no ``PWNED`` canary (every payload that would run creates one): no code execution;
* exit 0 from ``convert``/``check``: every target's check passed (or was
  ``structural_only``), never "ok" with a check that could not run;
* peak RSS under the memory budget, wall time under the time budget.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fuzz.cases import Case, generate  # noqa: E402

REASON = re.compile(r"\[([a-z_]+(?::[A-Za-z_.]+)?)\]")
VIOLATIONS = ("code_execution", "traceback", "hang", "memory", "partial_output", "stray_file", "exit_code",
              "exit0_unchecked", "stderr_not_one_line", "no_reason_code")


def _preload() -> None:
    """What every case needs anyway, imported once in the parent (no framework that
    starts threads at import: TensorFlow, PyTorch, OpenVINO and coremltools load in the child)."""
    import numpy  # noqa: F401
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401

    from translator.run import check, report
    from translator.cli import main as cli, models as cli_models  # noqa: F401
    from translator.frontends import onnx as _fo  # noqa: F401
    from translator.table.loader import load_tables

    load_tables()
    if os.environ.get("OPBRIDGE_FUZZ_PRELOAD", "1") != "0":
        # the frameworks too (coremltools imports TensorFlow and PyTorch to probe them): a
        # child then starts in ~10 ms instead of ~10 s. Their import starts no thread that
        # holds a lock across fork; a child that hung on one would be counted as a hang.
        from translator.cli.main import filter_native_stderr, quiet_frameworks

        quiet_frameworks()
        import openvino  # noqa: F401
        import torch  # noqa: F401

        from emitters.coreml.mil import ct as _ct

        _ct()
        import tensorflow  # noqa: F401
        del filter_native_stderr


def _child(case: Case, workdir: Path, logs: Path, mem_limit: int) -> None:
    """In the forked child: run the command as the console script would, then _exit."""
    code = 2
    try:
        os.chdir(workdir)
        out = os.open(logs / "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(logs / "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", closefd=False)
        if mem_limit:
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
        argv = [a.format(model=case.model, out="out") for a in case.argv]
        sys.argv = ["opbridge", *argv]
        from translator.cli import main as cli

        code = cli.main()
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else 2
    except BaseException:  # noqa: BLE001 - a traceback escaping main() is a finding, shown as such
        import traceback

        traceback.print_exc()
        code = 99
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()  # the stderr filter drains here
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 2)


def _judge(case: Case, workdir: Path, logs: Path, status: int | None, hung: bool, seconds: float,
           maxrss_mb: float, mem_budget_mb: float) -> dict[str, Any]:
    out = (logs / "stdout").read_text(encoding="utf-8", errors="replace") if (logs / "stdout").exists() else ""
    err = (logs / "stderr").read_text(encoding="utf-8", errors="replace") if (logs / "stderr").exists() else ""
    rec: dict[str, Any] = {"id": case.id, "family": case.family, "notes": case.notes, "argv": case.argv,
                           "model": case.model, "seconds": round(seconds, 2), "maxrss_mb": round(maxrss_mb),
                           "violations": []}
    v = rec["violations"]
    exit_code = None
    if hung:
        v.append("hang")
    elif status is not None:
        if os.WIFSIGNALED(status):
            exit_code = -os.WTERMSIG(status)
        else:
            exit_code = os.WEXITSTATUS(status)
    rec["exit"] = exit_code
    if not hung and exit_code not in (0, 1, 2):
        v.append("exit_code")
    if "Traceback (most recent call last)" in out or "Traceback (most recent call last)" in err:
        v.append("traceback")
    found = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*"))
    if any(Path(f).name == "PWNED" for f in found):
        v.append("code_execution")
    inputs = set(case.files)
    allowed = inputs | {d for f in inputs for d in (str(p) for p in Path(f).parents) if d != "."}
    outputs = [f for f in found if f == "out" or f.startswith("out/")]
    stray = [f for f in found if f not in allowed and f not in outputs and Path(f).name != "PWNED"]
    if stray:
        v.append("stray_file" if exit_code != 2 else "partial_output")
        rec["stray"] = stray[:5]
    if exit_code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if len(lines) != 1:
            v.append("stderr_not_one_line")
        m = REASON.search(err)
        if not m:
            v.append("no_reason_code")
        rec["reason"] = m.group(1) if m else None
        if outputs:
            v.append("partial_output")
        rec["stderr"] = err.strip()[:300]
    if exit_code == 0 and case.argv[0] in ("convert", "check"):
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
            v.append("exit0_unchecked")
        if doc is not None:
            checks = ([t.get("check") for t in doc.get("targets", [])] if case.argv[0] == "convert"
                      else [b for b in doc.get("backends", [])])
            for c in checks:
                if not c or not (c["status"] == "pass" or c.get("reason") == "structural_only"):
                    v.append("exit0_unchecked")
                    break
    if maxrss_mb > mem_budget_mb:
        v.append("memory")
    return rec


#: the budgets the children run under (translator/table/budget.py reads them from the environment):
#: smaller than the defaults so a loop bomb is refused in seconds, not a minute
CHILD_BUDGET = {"OPBRIDGE_MAX_LOOP_ITERS": "20000", "OPBRIDGE_TIME_LIMIT": "60"}


def run_cases(cases: list[Case], workers: int = 2, timeout: float = 180.0, mem_budget_mb: float = 6144,
              root: Path | None = None, progress: bool = True) -> dict[str, Any]:
    for k, v in CHILD_BUDGET.items():
        os.environ.setdefault(k, v)
    _preload()
    root = Path(root or tempfile.mkdtemp(prefix="opbridge-fuzz-"))
    root.mkdir(parents=True, exist_ok=True)
    # address space per child: the budget plus room for the preloaded frameworks' ~2 GB of
    # mappings and thread stacks, and small enough that two children cannot exhaust the machine
    phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    mem_limit = int(min(mem_budget_mb * 2 ** 20 + 3 * 2 ** 30, phys * 0.8 / max(1, workers)))
    running: dict[int, tuple[Case, Path, Path, float]] = {}
    records: list[dict[str, Any]] = []
    todo = list(cases)
    t_start = time.monotonic()

    def finish(pid: int, status: int | None, rusage: Any, hung: bool) -> None:
        case, workdir, logs, t0 = running.pop(pid)
        maxrss = (rusage.ru_maxrss / 1024.0) if rusage is not None else 0.0
        rec = _judge(case, workdir, logs, status, hung, time.monotonic() - t0, maxrss, mem_budget_mb)
        records.append(rec)
        if not rec["violations"]:
            shutil.rmtree(workdir.parent, ignore_errors=True)
        else:
            rec["folder"] = str(workdir.parent)
        if progress and (len(records) % 50 == 0 or rec["violations"]):
            mark = f" {case.id}: {','.join(rec['violations'])}" if rec["violations"] else ""
            print(f"[fuzz] {len(records)}/{len(cases)} ({time.monotonic() - t_start:.0f} s){mark}", file=sys.stderr,
                  flush=True)

    while todo or running:
        while todo and len(running) < workers:
            case = todo.pop(0)
            base = root / case.id
            workdir, logs = base / "case", base / "logs"
            workdir.mkdir(parents=True)
            logs.mkdir()
            for name, data in case.files.items():
                (workdir / name).parent.mkdir(parents=True, exist_ok=True)
                (workdir / name).write_bytes(data)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(case, workdir, logs, mem_limit)
            running[pid] = (case, workdir, logs, time.monotonic())
        for pid, (case, _, _, t0) in list(running.items()):
            got, status, rusage = os.wait4(pid, os.WNOHANG)
            if got:
                finish(pid, status, rusage, False)
            elif time.monotonic() - t0 > timeout:
                os.kill(pid, signal.SIGKILL)
                _, status, rusage = os.wait4(pid, 0)
                finish(pid, status, rusage, True)
        time.sleep(0.02)
    return summarize(records, time.monotonic() - t_start)


def _targets(records: list[dict[str, Any]]) -> list[str]:
    from tests.fuzz.cases import TARGETS

    names = set(TARGETS)
    return [next((a for a in r["argv"] if a in names), None)
            or next((a.split(",")[-1] for a in r["argv"] if a.startswith("numpy,")), "report") for r in records]


def summarize(records: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    viol = Counter(x for r in records for x in r["violations"])
    exits = Counter(str(r["exit"]) for r in records)
    reasons = Counter(r.get("reason") for r in records if r.get("exit") == 2)
    targets = Counter(_targets(records))
    by_target: dict[str, float] = Counter()
    for r, t in zip(records, _targets(records)):
        by_target[f"{t}:{r['exit']}"] += r["seconds"]
    return {"cases": len(records), "seconds": round(seconds, 1),
            "case_seconds": {k: round(v, 1) for k, v in sorted(by_target.items())},
            "violations": {k: viol.get(k, 0) for k in VIOLATIONS},
            "exit_codes": dict(sorted(exits.items())), "families": dict(Counter(r["family"] for r in records)),
            "family_exits": dict(sorted(Counter(f"{r['family']}:{r['exit']}" for r in records).items())),
            "hostile_refusals": [{"id": r["id"], "notes": r["notes"], "stderr": r.get("stderr")}
                                 for r in records if r["family"] == "hostile" and r.get("exit") == 2][:40],
            "targets": dict(targets), "reasons": dict(reasons.most_common()),
            "internal_errors": [r for r in records if r.get("reason") == "internal_error"][:50],
            "max_rss_mb": max((r["maxrss_mb"] for r in records), default=0),
            "max_seconds": max((r["seconds"] for r in records), default=0),
            "failures": [r for r in records if r["violations"]][:100]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per case (then: a hang)")
    ap.add_argument("--memory-mb", type=float, default=6144, help="peak RSS budget per case")
    ap.add_argument("--family", help="only this family (corrupt, mutate, hostile, bomb)")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--keep", help="folder for the cases (default: a temp folder; failing cases are kept)")
    args = ap.parse_args(argv)
    cases = generate(args.cases, args.seed)
    if args.family:
        cases = [c for c in cases if c.family == args.family]
    res = run_cases(cases, args.workers, args.timeout, args.memory_mb, Path(args.keep) if args.keep else None)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1, default=str) + "\n", encoding="utf-8")
    print(json.dumps({k: res[k] for k in ("cases", "seconds", "case_seconds", "violations", "exit_codes", "family_exits", "targets",
                                          "reasons", "max_rss_mb", "max_seconds")}, indent=1))
    for f in res["failures"][:20]:
        print(f"FAIL {f['id']} {f['violations']} {f['notes']} {f.get('stderr', '')[:200]!r}", file=sys.stderr)
    return 1 if any(res["violations"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
