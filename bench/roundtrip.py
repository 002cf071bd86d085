"""Round trip over the ONNX backend node tests: ONNX → opbridge TFLite → TFLite frontend → onnx / pytorch / openvino.

For every case of ``bench/nodetests.py`` (the same enumeration, ``load_cases``) the direct
conversion ONNX → opbridge → TFLite is judged exactly as ``nodetests.py --backend tflite``
judges it (the written ``.tflite`` run by the interpreter, outputs compared with the case's
expected outputs). For each case it passes, the written ``.tflite`` is read back by
opbridge's TFLite frontend (``translator/frontends/tflite.py``) and converted to each
target; the targets' written artifacts run on the same inputs (fed as the ``.tflite``'s
signature takes them) and are compared with the case's expected outputs under the same
rules. Printed per target: round-trip passes / direct-TFLite passes and the ratio (goal ≥ 0.9).

    python bench/roundtrip.py [--targets onnx,pytorch,openvino] [--cases REGEX] [--limit N] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from nodetests import load_cases  # noqa: E402
from peers._common import check_outputs, feeds_for  # noqa: E402
from translator.run.harness import classify  # noqa: E402

TARGETS = ("onnx", "pytorch", "openvino")


def direct(case: Any) -> tuple[str, str, Any]:
    """``nodetests.run_opbridge_built(case, "tflite")``'s verdict, keeping the artifact."""
    from translator.run.artifact_io import output_ports, run_written
    from translator.frontends.onnx import from_proto
    from translator.run.harness import convert

    names = [o.name for o in case.model.graph.output]
    artifact = None
    try:
        artifact = convert("tflite", from_proto(case.model, ".", case.name))
        legalized = ""
        for inputs, expected in case.data_sets:
            got = run_written("tflite", artifact, feeds_for(case.model, inputs))
            ok, why = check_outputs(expected, got, names, output_ports("tflite", artifact))
            if not ok:
                return "fail", why, artifact
            legalized = legalized or why
        return ("pass_legalized", legalized, artifact) if legalized else ("pass", "", artifact)
    except Exception as exc:  # noqa: BLE001 - every failure is counted with its reason
        return (*classify(exc), artifact)


def round_trip(case: Any, artifact: Any, targets: list[str], workdir: Path) -> dict[str, tuple[str, ...]]:
    """The written ``.tflite`` → TFLite frontend → each target, judged on the case's data sets."""
    from emitters.tensorflow.runtime import feed_arrays, restore_outputs
    from translator.run.artifact_io import output_ports, run_written, save
    from translator.frontends import tflite
    from translator.run.harness import convert

    path = workdir / "model.tflite"
    save("tflite", artifact, path)
    try:
        ir = tflite.load(str(path))
    except Exception as exc:  # noqa: BLE001
        st, why = classify(exc)
        return {t: ("frontend_" + st, why, _line(exc)) for t in targets}
    ports = output_ports("tflite", artifact)
    keys = [p.key for p in artifact.outputs]
    out: dict[str, tuple[str, ...]] = {}
    for t in targets:
        try:
            built = convert(t, ir)
            names = [v.name for v in ir.graph.outputs]
            if sorted(names) != sorted(keys):
                out[t] = ("fail", "output_names")
                continue
            legalized = ""
            status: tuple[str, ...] = ("pass", "")
            for inputs, expected in case.data_sets:
                feeds = feed_arrays(artifact, feeds_for(case.model, inputs))  # as the .tflite's signature takes them
                got = dict(zip(names, run_written(t, built, feeds)))
                values = restore_outputs(artifact, [got[k] for k in keys])
                ok, why = check_outputs(expected, values, None, ports)
                if not ok:
                    status = ("fail", why)
                    break
                legalized = legalized or why
            out[t] = status if status[0] == "fail" else (("pass_legalized", legalized) if legalized else ("pass", ""))
        except Exception as exc:  # noqa: BLE001
            out[t] = (*classify(exc), _line(exc))
    return out


def _line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--cases", help="regex on case names")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    ap.add_argument("--rerun", metavar="PREV.json",
                    help="a finished run's --json: run again only its cases whose round trip failed on some "
                         "target (the other rows are kept as they are), and print the merged figures")
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    warnings.filterwarnings("ignore")
    targets = [t for t in args.targets.split(",") if t]

    t0 = time.perf_counter()
    cases = load_cases(args.cases, args.limit)
    kept: dict[str, dict[str, Any]] = {}
    if args.rerun:
        prev = json.loads(Path(args.rerun).read_text())["results"]
        kept = {r["case"]: r for r in prev if not any(not v[0].startswith("pass") for v in r.get("round_trip", {}).values())}
        names = {r["case"] for r in prev}
        cases = [c for c in cases if c.name in names]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="opbridge-roundtrip-") as d:
        for i, case in enumerate(cases):
            if case.name in kept:
                results.append(kept[case.name])
                continue
            status, reason, artifact = direct(case)
            row: dict[str, Any] = {"case": case.name, "direct": status, "reason": reason}
            if status in ("pass", "pass_legalized"):
                row["round_trip"] = {t: list(v) for t, v in round_trip(case, artifact, targets, Path(d)).items()}
            results.append(row)
            if args.json_out and (i + 1) % 25 == 0:  # partial results stay readable during a long run
                _write(args.json_out, {"partial": True, "done": i + 1, "cases": len(cases), "results": results})
            if not args.quiet and ((i + 1) % 50 == 0 or i + 1 == len(cases)):
                direct_n = sum(1 for r in results if "round_trip" in r)
                got = {t: sum(1 for r in results if r.get("round_trip", {}).get(t, [""])[0].startswith("pass"))
                       for t in targets}
                print(f"  {i + 1}/{len(cases)} cases, direct tflite passes {direct_n}, round trip "
                      + ", ".join(f"{t} {n}" for t, n in got.items()), file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - t0
    direct_pass = [r for r in results if "round_trip" in r]
    summary: dict[str, Any] = {"cases": len(cases), "direct_tflite_pass": len(direct_pass), "targets": {},
                               "seconds": round(elapsed, 1)}
    print(f"round trip ONNX → opbridge TFLite → TFLite frontend → target: {len(cases)} cases, "
          f"direct TFLite passes {len(direct_pass)}")
    for t in targets:
        ok = [r for r in direct_pass if r["round_trip"][t][0].startswith("pass")]
        reasons = Counter(f"{r['round_trip'][t][0]}:{r['round_trip'][t][1]}" for r in direct_pass
                          if not r["round_trip"][t][0].startswith("pass"))
        ratio = len(ok) / len(direct_pass) if direct_pass else float("nan")
        summary["targets"][t] = {"pass": len(ok), "ratio": round(ratio, 4), "reasons": dict(reasons.most_common())}
        top = ", ".join(f"{k} {v}" for k, v in reasons.most_common(8))
        print(f"  {t}: {len(ok)}/{len(direct_pass)} = {ratio:.3f}" + (f"   (failures: {top})" if top else ""))
    print(f"{elapsed:.1f} s")
    if args.json_out:
        _write(args.json_out, {**summary, "results": results})
    return 0


def _write(path: str, doc: dict[str, Any]) -> None:
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
