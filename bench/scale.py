"""Conversion time and peak memory on synthetic graphs of 1k, 10k and 100k nodes.

Each (size, backend) runs in its own process (so peak RSS is that conversion's own),
converting a chain of cheap ops (Add / Mul / Relu / Neg / Abs on a [1, 8] tensor with
small constants): ONNX frontend → IR → verifier → lowering → emitter, no execution.
Prints seconds and MB per size and backend, and the ratio time(100k) / time(10k)
(linear growth is 10; the target is ≤ 12).

    python bench/scale.py [--sizes 1000,10000,100000] [--backends onnx,...] [--json]
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


def measure(path: str, backend: str) -> dict:
    """Child process: convert once, report seconds and peak RSS."""
    import resource
    import time

    sys.path.insert(0, str(ROOT))
    from translator.frontends.onnx import load_onnx
    from translator.harness import backend_module

    mod = backend_module(backend)
    # warm-up on the bundled model: imports, table loading and runtime probes are not conversion time
    mod.emit(load_onnx(ROOT / "examples" / "models" / "tiny_cnn.onnx"))
    t = time.perf_counter()
    model = load_onnx(path)
    mod.emit(model)
    secs = time.perf_counter() - t
    return {"seconds": secs, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "nodes": len(model.graph.nodes)}


def available_backends() -> list[str]:
    import importlib.util

    sys.path.insert(0, str(ROOT))
    from translator.harness import BACKENDS

    return [b for b in BACKENDS if b != "numpy" and importlib.util.find_spec(f"emitters.{b}") is not None]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--backends")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = args.backends.split(",") if args.backends else available_backends()
    results: dict = {}
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            path = Path(d) / f"chain_{n}.onnx"
            build_model(n, path)
            for b in backends:
                p = subprocess.run([sys.executable, __file__, "--child", str(path), b], capture_output=True, text=True,
                                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
                if p.returncode != 0:
                    results.setdefault(b, {})[n] = {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
                else:
                    results.setdefault(b, {})[n] = json.loads(p.stdout.strip().splitlines()[-1])
                r = results[b][n]
                if not args.json:
                    print(f"{b:10s} {n:>7d} nodes: " + (f"{r['seconds']:8.2f} s  {r['peak_mb']:8.0f} MB peak"
                                                       if "seconds" in r else f"error: {r['error']}"), flush=True)
    ratios = {}
    for b, per in results.items():
        if 10000 in per and 100000 in per and "seconds" in per[10000] and "seconds" in per[100000]:
            ratios[b] = round(per[100000]["seconds"] / per[10000]["seconds"], 2)
    if args.json:
        print(json.dumps({"results": results, "ratio_100k_over_10k": ratios}, indent=2))
    else:
        for b, r in ratios.items():
            print(f"{b}: time(100k)/time(10k) = {r} (target <= 12)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
