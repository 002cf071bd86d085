"""Conversion time and peak memory on synthetic graphs of 1k, 10k and 100k nodes.

Each (size, backend) runs in its own process (so peak RSS is that conversion's own),
converting a chain of cheap ops (Add / Mul / Relu / Neg / Abs on a [1, 8] tensor with
small constants): ONNX frontend → IR → verifier → lowering → emitter, no execution.
Each is converted k times (``-k``, default 3) and the best run counts, so a moment of
load from other processes does not decide. Prints CPU and wall seconds and peak MB per
size and backend, and per backend the ratio time(largest) / time(second largest) on CPU
seconds (wall beside): linear growth is 10 for 100k / 10k, the limit 12. Exits 1 when a
ratio is over the limit or a conversion failed.

    python bench/scale.py [--sizes 1000,10000,100000] [--backends onnx,...] [-k 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

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


def measure(path: str, backend: str, repeat: int) -> dict:
    """Child process: convert ``repeat`` times, report the best wall and CPU seconds and peak RSS.

    Each conversion starts from the file (frontend → IR → verifier → lowering → emitter);
    the previous one's objects are freed first. The best of a few runs filters out the
    moments another process had the CPU; CPU time (this process, all its threads) is
    what another process's load disturbs least, so the ratios are taken on it.
    """
    import gc
    import resource
    import time

    sys.path.insert(0, str(ROOT))
    from translator.frontends.onnx import load_onnx
    from translator.harness import backend_module

    mod = backend_module(backend)
    # warm-up on the bundled model: imports, table loading and runtime probes are not conversion time
    mod.emit(load_onnx(ROOT / "examples" / "models" / "tiny_cnn.onnx"))
    wall, cpu, nodes = [], [], 0
    for _ in range(repeat):
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        model = load_onnx(path)
        artifact = mod.emit(model)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
        nodes = len(model.graph.nodes)
        del model, artifact
    return {"seconds": min(wall), "cpu_seconds": min(cpu), "runs": repeat,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, "nodes": nodes}


#: tflite (TF's MLIR converter) and coreml (coremltools) convert a 10k-node chain in minutes and
#: need gigabytes at 100k: measured only when asked for (--backends tflite,coreml)
DEFAULT_BACKENDS = ("onnx", "pytorch", "tensorflow", "openvino")
LIMIT = 12.0  # time(100k) / time(10k); linear growth is 10


def available_backends() -> list[str]:
    import importlib.util

    sys.path.insert(0, str(ROOT))
    from translator.harness import BACKENDS

    return [b for b in BACKENDS if b != "numpy" and importlib.util.find_spec(f"emitters.{b}") is not None]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--backends", help=f"comma-separated (default: {','.join(DEFAULT_BACKENDS)})")
    ap.add_argument("-k", "--repeat", type=int, default=3, help="conversions per (size, backend); the best counts")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], args.child[1], int(args.child[2]))))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    avail = available_backends()
    backends = args.backends.split(",") if args.backends else [b for b in DEFAULT_BACKENDS if b in avail]
    results: dict = {}
    if not args.json:
        print(f"best of {args.repeat} conversions per (size, backend), each (size, backend) in a fresh process; "
              f"ratios on CPU seconds (wall seconds beside)", flush=True)
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            path = Path(d) / f"chain_{n}.onnx"
            build_model(n, path)
            for b in backends:
                p = subprocess.run([sys.executable, __file__, "--child", str(path), b, str(args.repeat)],
                                   capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
                if p.returncode != 0:
                    results.setdefault(b, {})[n] = {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
                else:
                    results.setdefault(b, {})[n] = json.loads(p.stdout.strip().splitlines()[-1])
                r = results[b][n]
                if not args.json:
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
