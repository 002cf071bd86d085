"""Model-level peer runner for bench/peers.py, run INSIDE bench/.venv-peers (onnx2torch's venv).

    python _model_onnx2torch.py MODEL.onnx INPUTS.npz OUT_DIR N
Converts with onnx2torch, runs the module N times under no_grad, writes
OUT_DIR/outputs.npz and prints one JSON line: convert_s, latency_s (median).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# this folder holds peer modules named like the packages (onnx2torch.py, onnx2tf.py): never import them here
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def main() -> int:
    model, inputs, out_dir, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    import torch
    from onnx2torch import convert

    feeds = dict(np.load(inputs, allow_pickle=False))
    t = time.perf_counter()
    module = convert(model).eval()
    convert_s = time.perf_counter() - t
    args = [torch.from_numpy(x) for x in feeds.values()]
    times = []
    with torch.no_grad():
        for _ in range(n):
            s = time.perf_counter()
            out = module(*args)
            times.append(time.perf_counter() - s)
    outs = out if isinstance(out, (list, tuple)) else [out]
    np.savez(out_dir / "outputs.npz", *[o.numpy() for o in outs])
    print(json.dumps({"convert_s": convert_s, "latency_s": statistics.median(times)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
