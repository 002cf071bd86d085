"""Conversion time and peak memory on synthetic graphs of 1k, 10k and 100k nodes.

Each backend runs in its own process, converting a chain of cheap ops (Add / Mul / Relu /
Neg / Abs on a [1, 8] tensor with small constants): ONNX frontend → IR → verifier → lowering → emitter, no execution.

One timed sample of a size is a batch of back-to-back conversions, so that every sample
lasts about as long as one conversion of the largest size (a 10k graph is converted 10
times in a row per sample, capped at ``--max-batch``); the per-conversion time is the
batch time divided by its length. Between conversions the previous one's objects are
collected, untimed, as before a single conversion. Samples of equal length see the
machine's noise alike: the minimum of a few one-second samples would otherwise be
systematically luckier than the minimum of a few ten-second ones, which biases the ratio
upwards. Each size gets k
samples (``-k``, default 3), in rounds that take the sizes in turn, and the best counts.
Peak RSS per size is read after its first conversion (the first round goes smallest
first). Prints CPU and wall seconds per conversion and peak MB per size and backend, and
per backend the ratio time(largest) / time(second largest) on CPU seconds (wall beside):
linear growth is 10 for 100k / 10k, the limit 12. Exits 1 when a ratio is over the limit
or a conversion failed.

    python bench/scale.py [--sizes 1000,10000,100000] [--backends onnx,...] [-k 3] [--max-batch 10] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OPS = ("Add", "Mul", "Relu", "Neg", "Abs")


def build_model(n: int, path: Path) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    prev = "x"
    for i in range(n):
        op = OPS[i % len(OPS)]
        out = f"t{i}"
        if op in ("Add", "Mul"):
            c = f"c{i}"
            inits.append(numpy_helper.from_array(np.full((1, 8), 1.0 + (i % 7) * 1e-3, np.float32), c))
            nodes.append(helper.make_node(op, [prev, c], [out], name=f"n{i}"))
        else:
            nodes.append(helper.make_node(op, [prev], [out], name=f"n{i}"))
        prev = out
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save_model(m, str(path))


def measure(paths: list[str], batches: list[int], backend: str, repeat: int) -> dict:
    """Child process (one per backend): take ``repeat`` samples of each model, in rounds
    that take the sizes in turn (ascending), so a spell of load from other processes falls
    on all sizes alike; report per size the best per-conversion wall and CPU seconds, the
    batch length, and the peak RSS.

    A sample converts a model ``batch`` times back to back (``batches``, one per path,
    from ``batch_lengths``). Each conversion starts from the
    file (frontend → IR → verifier → lowering → emitter); the previous one's objects are
    freed first. The peak RSS of a size is read right after its first conversion: the
    first round runs the sizes smallest first, so it is that conversion's own high-water
    mark. CPU time (this process, all its threads) is what another process's load disturbs
    least, so the ratios are taken on it.
    """
    import gc
    import resource
    import time

    sys.path.insert(0, str(ROOT))
    from translator.frontends.onnx import load_onnx
    from translator.run.harness import convert

    # warm-up on the bundled model: imports, table loading and runtime probes are not conversion time
    convert(backend, load_onnx(ROOT / "examples" / "models" / "tiny_cnn.onnx"))
    out: dict = {p: {"seconds": float("inf"), "cpu_seconds": float("inf"), "runs": repeat} for p in paths}
    for _ in range(repeat):
        for p, batch in zip(paths, batches):
            r = out[p]
            cpu = wall = 0.0
            for _k in range(batch):
                gc.collect()  # the previous conversion's objects (IR graphs are cyclic): not timed
                w, c = time.perf_counter(), time.process_time()
                model = load_onnx(p)
                artifact = convert(backend, model)
                cpu, wall = cpu + time.process_time() - c, wall + time.perf_counter() - w
                r["nodes"] = len(model.graph.nodes)
                if "peak_mb" not in r:
                    r["peak_mb"] = _peak_mb(resource)
                del model, artifact
            cpu, wall = cpu / batch, wall / batch
            r["cpu_seconds"], r["seconds"] = min(r["cpu_seconds"], cpu), min(r["seconds"], wall)
            r["batch"] = batch
    return out


def batch_lengths(sizes: list[int], max_batch: int) -> list[int]:
    """Conversions per timed sample: about as many as make one conversion of the largest size."""
    return [max(1, min(max_batch, max(sizes) // n)) for n in sizes]


def _peak_mb(resource: Any) -> float:
    """This process's peak RSS: VmHWM (its own since exec; ``ru_maxrss`` starts from the
    parent's at fork, and the parent has built the largest model), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


#: tflite (TensorFlow's converter, in segments above 20k nodes) and coreml (coremltools' pass
#: pipeline) take about a minute per 10k nodes, so a 100k conversion takes 8-11 minutes: they run
#: only when asked for (--backends tflite,coreml -k 1 --max-batch 1, about 25 minutes)
DEFAULT_BACKENDS = ("onnx", "pytorch", "tensorflow", "openvino")
LIMIT = 12.0  # time(100k) / time(10k); linear growth is 10


def available_backends() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from translator.compile.target import names

    return names(include_reference=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--backends", help=f"comma-separated (default: {','.join(DEFAULT_BACKENDS)})")
    ap.add_argument("-k", "--repeat", type=int, default=3, help="timed samples per (size, backend); the best counts")
    ap.add_argument("--max-batch", type=int, default=10,
                    help="most conversions in one timed sample of a small size (default 10)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0].split(","), [int(b) for b in args.child[1].split(",")], args.child[2],
                                 int(args.child[3]))))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    avail = available_backends()
    backends = args.backends.split(",") if args.backends else [b for b in DEFAULT_BACKENDS if b in avail]
    results: dict = {}
    if not args.json:
        print((f"best of {args.repeat} samples" if args.repeat > 1 else "one sample") + " per (size, backend), a sample = "
              + ", ".join(f"{b} x {n:,}" for n, b in zip(sorted(sizes), batch_lengths(sorted(sizes), args.max_batch)))
              + " nodes back to back; one process per backend, sizes taken in turn in each round; seconds per "
              "conversion, ratios on CPU seconds (wall seconds beside)", flush=True)
        if "onnx" in backends:
            from emitters.onnx import FULL_CHECK_MAX_NODES

            print(f"onnx: onnx.checker full_check up to {FULL_CHECK_MAX_NODES:,} nodes, its structural check above "
                  f"(emitters/onnx/codegen.py)", flush=True)
    sizes.sort()
    with tempfile.TemporaryDirectory() as d:
        paths = [str(Path(d) / f"chain_{n}.onnx") for n in sizes]
        for n, path in zip(sizes, paths):
            build_model(n, Path(path))
        batches = batch_lengths(sizes, args.max_batch)
        for b in backends:
            p = subprocess.run([sys.executable, __file__, "--child", ",".join(paths),
                                ",".join(map(str, batches)), b, str(args.repeat)],
                               capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
            if p.returncode != 0:
                results[b] = {n: {"error": (p.stderr.strip().splitlines() or ["?"])[-1]} for n in sizes}
            else:
                per = json.loads(p.stdout.strip().splitlines()[-1])
                results[b] = {n: per[path] for n, path in zip(sizes, paths)}
            if not args.json:
                for n in sizes:
                    r = results[b][n]
                    print(f"{b:10s} {n:>7d} nodes: " + (
                        f"{r['cpu_seconds']:8.2f} s CPU {r['seconds']:8.2f} s wall {r['peak_mb']:8.0f} MB peak"
                        if "seconds" in r else f"error: {r['error']}"), flush=True)
    ratios, wall_ratios = {}, {}
    big, small = max(sizes), sorted(sizes)[-2] if len(sizes) > 1 else None
    for b, per in results.items():
        if small and "seconds" in per.get(small, {}) and "seconds" in per.get(big, {}):
            ratios[b] = round(per[big]["cpu_seconds"] / per[small]["cpu_seconds"], 2)
            wall_ratios[b] = round(per[big]["seconds"] / per[small]["seconds"], 2)
    limit = LIMIT * (big / small) / 10 if small else None
    failed = sorted(b for b, r in ratios.items() if limit is not None and r > limit)
    errors = sorted(b for b, per in results.items() if any("error" in r for r in per.values()))
    if args.json:
        print(json.dumps({"repeat": args.repeat, "results": results, "ratio_cpu": ratios, "ratio_wall": wall_ratios,
                          "sizes": [small, big], "limit": limit, "over_limit": failed, "errors": errors}, indent=2))
    else:
        for b, r in ratios.items():
            print(f"{b}: time({big})/time({small}) = {r} CPU, {wall_ratios[b]} wall (linear: {big / small:g}, "
                  f"limit {limit:g}){'  OVER' if b in failed else ''}")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
