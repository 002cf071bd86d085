"""Run the ONNX backend node tests (a peer's test suite) through opbridge.

Every case of the installed ``onnx`` package (``onnx.backend.test.loader.load_model_tests``,
1,884 on onnx 1.23.2) goes ONNX frontend → IR → backend B, and is compared with the
case's expected outputs (rtol 1e-3, atol 1e-5 for floats; exact otherwise). The artifact
is judged as written: saved, loaded back with the framework's own API and run
(``translator.run.artifact_io.run_written``); each output must have the declared dtype and
name, and exactly the declared outputs must come back. An output the artifact documents
in another dtype (TFLite's int64 as int32…) is a ``pass_legalized``, counted apart with
the legalization named; its values must still be those of the declared dtype. Peers run
side by side in the same process on the same cases: ``onnxruntime`` runs the original
model natively; ``onnx_reference`` runs it in onnx's own Python reference evaluator
(the peer of our NumPy reference: ``--backend numpy --peers onnxruntime,onnx_reference``).

    python bench/nodetests.py --backend onnx [--json out.json] [--cases REGEX] [--limit N]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from translator.run.harness import classify  # noqa: E402
from translator.compile.target import names  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers._common import ATOL, RTOL, as_value, check_outputs, feeds_for  # noqa: E402,F401



def load_cases(pattern: str | None, limit: int | None) -> list[Any]:
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    if pattern:
        rx = re.compile(pattern)
        cases = [c for c in cases if rx.search(c.name)]
    cases.sort(key=lambda c: c.name)
    return cases[:limit] if limit else cases


def run_opbridge(case: Any, backend: str) -> tuple[str, str]:
    status, reason, _ = run_opbridge_built(case, backend)
    return status, reason


def run_opbridge_built(case: Any, backend: str) -> tuple[str, str, bool]:
    """(status, reason, built): ``built`` = the backend's artifact was emitted for every data
    set (for coreml: converted by coremltools, saved and loaded back), whatever running it gave."""
    from translator.run.artifact_io import output_ports, run_written
    from translator.frontends.onnx import from_proto
    from translator.run.harness import convert
    built = False
    names = [o.name for o in case.model.graph.output]
    legalized = ""
    try:
        for inputs, expected in case.data_sets:
            ir = from_proto(case.model, ".", case.name)
            built = False
            artifact = convert(backend, ir)
            built = True
            got = run_written(backend, artifact, feeds_for(case.model, inputs))  # the written file, run
            ok, why = check_outputs(expected, got, names, output_ports(backend, artifact))
            if not ok:
                return "fail", why, built
            legalized = legalized or why
        return ("pass_legalized", legalized, built) if legalized else ("pass", "", built)
    except Exception as exc:  # noqa: BLE001 - every failure is counted with its reason
        return (*classify(exc), built)


def load_peers() -> dict[str, Any]:
    """Peers are modules in bench/peers/ exposing ``run(case) -> (status, reason)``."""
    import importlib

    out = {}
    for f in sorted((Path(__file__).parent / "peers").glob("*.py")):
        if f.stem.startswith("_"):
            continue
        mod = importlib.import_module(f"peers.{f.stem}")
        out[f.stem] = mod.run
    return out


PEERS = load_peers()


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    counts = Counter(r["status"] for r in results)
    reasons = Counter(r["reason"] for r in results if r["status"] not in ("pass", "pass_legalized"))
    legalized = Counter(r["reason"] for r in results if r["status"] == "pass_legalized")
    return {"counts": {k: counts.get(k, 0) for k in ("pass", "pass_legalized", "fail", "unsupported", "error")},
            "reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
            "legalized": dict(sorted(legalized.items(), key=lambda kv: (-kv[1], kv[0])))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", required=True, choices=names())
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--cases", help="regex on case names")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--peers", default="onnxruntime",
                    help=f"comma-separated peers ({', '.join(PEERS)}), or 'none'")
    ap.add_argument("--quiet", "-q", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore")

    t0 = time.perf_counter()
    cases = load_cases(args.cases, args.limit)
    peers = [] if args.peers == "none" else [p for p in args.peers.split(",") if p]
    results: list[dict[str, Any]] = []
    peer_results: dict[str, list[dict[str, Any]]] = {p: [] for p in peers}
    for i, case in enumerate(cases):
        status, reason, built = run_opbridge_built(case, args.backend)
        results.append({"case": case.name, "status": status, "reason": reason, "built": built})
        for p in peers:
            ps, pr = PEERS[p](case)
            peer_results[p].append({"case": case.name, "status": ps, "reason": pr})
        if not args.quiet and (i + 1) % 100 == 0:
            done = Counter(r["status"] for r in results)
            print(f"  {i + 1}/{len(cases)} cases, pass {done['pass']}, legalized {done['pass_legalized']}",
                  file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - t0
    ours = summarize(results)
    report = {"backend": args.backend, "cases": len(cases), **ours,
              "peers": {p: summarize(r) for p, r in peer_results.items()},
              "seconds": round(elapsed, 1), "results": results,
              # extra keys: what was built (for coreml: converted, saved, reloaded) vs. numerically checked
              "built_and_saved": sum(1 for r in results if r["built"]),
              "numerically_verified": ours["counts"]["pass"] + ours["counts"]["pass_legalized"],
              "structural_only": sum(1 for r in results if r["reason"] == "structural_only")}
    for p, r in peer_results.items():
        report["peers"][p]["results"] = r
    print(f"backend {args.backend}: {len(cases)} cases  " +
          "  ".join(f"{k} {v}" for k, v in ours["counts"].items()))
    print(f"built and saved {report['built_and_saved']}, numerically verified {report['numerically_verified']}, "
          f"structural only {report['structural_only']}")
    for p in peers:
        c = report["peers"][p]["counts"]
        ratio = ours["counts"]["pass"] / c["pass"] if c["pass"] else float("nan")
        print(f"peer {p}: " + "  ".join(f"{k} {v}" for k, v in c.items()) + f"   (opbridge/peer pass ratio {ratio:.3f})")
    if ours["legalized"]:
        print("legalized passes: " + ", ".join(f"{k} {v}" for k, v in ours["legalized"].items()))
    top = list(ours["reasons"].items())[:12]
    if top:
        print("reasons: " + ", ".join(f"{k} {v}" for k, v in top))
    print(f"{elapsed:.1f} s")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
