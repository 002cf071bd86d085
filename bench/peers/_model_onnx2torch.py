"""Model-level peer runner for bench/peers.py, run INSIDE bench/.venv-peers (onnx2torch's venv).

    python _model_onnx2torch.py MODEL.onnx INPUTS.npz OUT_DIR N [--threads T] [--ours DIR]

Converts with onnx2torch and writes OUT_DIR/outputs.npz. With ``--ours DIR`` (opbridge's
emitted ``model.py`` plus its weights as ``weights.npz`` and ``meta.json``), opbridge's
module is loaded in this same process too, so both run on the same torch build with the
same thread count and the same input tensors: each module is instantiated once, warmed
up, then the two are timed alternately (N calls each, forward only, under
``torch.inference_mode``) and opbridge's outputs go to OUT_DIR/ours_outputs.npz.
Prints one JSON line: convert_s, latency_s (median) and ours_latency_s; when onnx2torch
fails, peer_error instead of the first two (ours is still timed).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# this folder holds peer modules named like the packages (onnx2torch.py, onnx2tf.py): never import them here
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
WARMUP = 3


def load_ours(folder: Path):  # noqa: ANN201 - a torch.nn.Module (torch is imported late)
    """opbridge's generated module (standalone source) with its weights, in eval mode."""
    import torch

    meta = json.loads((folder / "meta.json").read_text())
    namespace: dict = {"__name__": "opbridge_generated"}
    exec(compile((folder / "model.py").read_text(), str(folder / "model.py"), "exec"), namespace)  # noqa: S102
    model = namespace[meta["class_name"]]()
    with np.load(folder / "weights.npz", allow_pickle=False) as z:
        model.load_state_dict({k: torch.from_numpy(z[k].copy()) for k in z.files})
    return model.eval(), meta


def as_list(out):  # noqa: ANN001, ANN201
    return list(out) if isinstance(out, (list, tuple)) else [out]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("inputs")
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("n", type=int)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    ap.add_argument("--ours", type=Path)
    args = ap.parse_args()
    import torch
    from onnx2torch import convert

    if args.threads:
        torch.set_num_threads(args.threads)
    feeds = dict(np.load(args.inputs, allow_pickle=False))
    runs, rec = {}, {}
    try:
        t = time.perf_counter()
        module = convert(args.model).eval()
        rec["convert_s"] = time.perf_counter() - t
        runs["peer"] = (module, [torch.from_numpy(x) for x in feeds.values()])
    except Exception as exc:  # noqa: BLE001 - the peer's failure is a result; ours is still timed
        if not args.ours:
            raise
        rec["peer_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    if args.ours:
        ours, meta = load_ours(args.ours)
        ours_args = [torch.from_numpy(np.asarray(feeds[name]).astype(meta["input_dtypes"].get(name, feeds[name].dtype)))
                     for name in meta["input_names"]]
        runs["ours"] = (ours, ours_args)
    times: dict[str, list[float]] = {k: [] for k in runs}
    outs = {}
    with torch.inference_mode():
        for key, (mod, a) in runs.items():
            for _ in range(WARMUP):
                outs[key] = mod(*a)
        for _ in range(args.n):  # alternate, so a burst of load from elsewhere hits both alike
            for key, (mod, a) in runs.items():
                s = time.perf_counter()
                mod(*a)
                times[key].append(time.perf_counter() - s)
    rec["threads"] = torch.get_num_threads()
    if "peer" in runs:
        np.savez(args.out_dir / "outputs.npz", *[o.numpy() for o in as_list(outs["peer"])])
        rec["latency_s"] = statistics.median(times["peer"])
    if "ours" in runs:
        np.savez(args.out_dir / "ours_outputs.npz", *[o.numpy() for o in as_list(outs["ours"])])
        rec["ours_latency_s"] = statistics.median(times["ours"])
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
