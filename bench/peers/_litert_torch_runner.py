"""The TFLite peer of bench/torch_modules.py, run INSIDE bench/.venv-litert-torch
(bench/setup_peer_litert_torch.sh): litert-torch (formerly ai-edge-torch) converts the same
module (bench/torch_zoo_defs.py, same seed, same torch build) to a .tflite.

    python _litert_torch_runner.py MODEL OUT_DIR N [--threads T] [--ours OURS.tflite --ours-inputs X.npz]

Builds MODEL, times ``litert_torch.convert(module, (x,))`` and its serialization, runs the
.tflite in one LiteRT interpreter (``ai_edge_litert``) on the example input, writes
OUT_DIR/outputs.npz (the peer's outputs) and OUT_DIR/eager.npz (eager PyTorch in this venv,
to prove both sides built the same module), and prints one JSON line: convert_s, latency_s
(median of N ``invoke`` calls after a warm-up), tflite_ops, and, with --ours, opbridge's
.tflite timed in the same interpreter build, alternately (ours_latency_s, ours_outputs.npz).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent.parent
# this folder holds peer modules named like packages: never import them here; bench/ for torch_zoo_defs
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(BENCH))


def _interpreter(path: str, threads: int | None):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=path, num_threads=threads)
    it.allocate_tensors()
    return it


def main() -> int:
    name, out_dir, n = sys.argv[1], Path(sys.argv[2]).resolve(), int(sys.argv[3])
    opts = dict(zip(sys.argv[4::2], sys.argv[5::2]))
    threads = int(opts["--threads"]) if "--threads" in opts else None
    out_dir.mkdir(parents=True, exist_ok=True)
    import torch

    from torch_zoo_defs import build

    if threads:
        torch.set_num_threads(threads)
    module, x = build(name)
    with torch.no_grad():
        eager = module(x)
    np.savez(out_dir / "eager.npz", eager.numpy())
    import litert_torch

    t = time.perf_counter()
    edge = litert_torch.convert(module, (x,))
    path = out_dir / "peer.tflite"
    edge.export(str(path))
    convert_s = time.perf_counter() - t
    interp = _interpreter(str(path), threads)
    d = interp.get_input_details()[0]
    interp.set_tensor(d["index"], x.numpy().astype(d["dtype"]))
    timed = [interp]
    if "--ours" in opts:
        ours = _interpreter(opts["--ours"], threads)
        sig = ours.get_signature_runner().get_input_details()
        for key, arr in dict(np.load(opts["--ours-inputs"], allow_pickle=False)).items():
            ours.set_tensor(sig[key]["index"], arr.astype(sig[key]["dtype"]))
        timed.append(ours)
    for it in timed:
        for _ in range(3):
            it.invoke()
    times: list[list[float]] = [[] for _ in timed]
    for r in range(n):  # alternate which one goes first, so load falls on both alike
        order = list(enumerate(timed)) if r % 2 == 0 else list(reversed(list(enumerate(timed))))
        for j, it in order:
            s = time.perf_counter()
            it.invoke()
            times[j].append(time.perf_counter() - s)
    np.savez(out_dir / "outputs.npz", *[interp.get_tensor(o["index"]) for o in interp.get_output_details()])
    ops = interp._get_ops_details()  # noqa: SLF001 - the interpreter's op list
    rec = {"convert_s": convert_s, "latency_s": statistics.median(times[0]), "tflite_ops": len(ops),
           "transposes": sum(1 for o in ops if o["op_name"] == "TRANSPOSE"), "torch": torch.__version__,
           "litert_torch": getattr(litert_torch, "__version__", "")}
    if len(timed) > 1:
        rec["ours_latency_s"] = statistics.median(times[1])
        outs = timed[1].get_signature_runner()  # ours: outputs in signature order
        rec["ours_output_keys"] = sorted(outs.get_output_details())
        np.savez(out_dir / "ours_outputs.npz", *[timed[1].get_tensor(outs.get_output_details()[k]["index"])
                                                 for k in rec["ours_output_keys"]])
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.exit(main())
