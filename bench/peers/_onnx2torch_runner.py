"""Runs inside bench/.venv-peers (torch 2.14 + onnx2torch), never in the project's venv.

Protocol (one JSON object per line on stdin, one reply per line on stdout):
request  {"model": path.onnx, "inputs": path.npz, "outputs": path.npz, "meta": {name: {"dtype": ...}}}
reply    {"status": "ok", "outputs": [{"kind": "tensor"|"list"|"none", "n": k, "dtype": ...}, ...]}
         {"status": "unsupported"|"error", "reason": "..."}
Arrays travel as .npz files written and read without pickle; bfloat16 travels as float32 and
is cast back on the other side (NumPy alone has no bfloat16). Everything the converter or
the model prints goes to stderr, so stdout carries only replies.
"""
from __future__ import annotations

import json
import os
import sys
import warnings


def _to_torch(arr, dtype, torch):
    t = torch.from_numpy(arr.copy())
    return t.to(torch.bfloat16) if dtype == "bfloat16" else t


def _from_torch(t, torch):
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.float().numpy(), "bfloat16"
    return t.resolve_conj().numpy(), str(t.dtype).replace("torch.", "")


def _serve(out) -> None:
    import numpy as np
    import onnx
    import torch
    from onnx2torch import convert

    torch.set_num_threads(1)
    for line in sys.stdin:
        req = json.loads(line)
        try:
            model = onnx.load(req["model"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = convert(model)
        except Exception as exc:  # noqa: BLE001 - a converter gap is the answer
            out.write(json.dumps({"status": "unsupported", "reason": f"convert_error:{type(exc).__name__}"}) + "\n")
            out.flush()
            continue
        try:
            with np.load(req["inputs"], allow_pickle=False) as data:
                args = [_to_torch(data[name], req["meta"][name]["dtype"], torch) for name in req["meta"]]
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = module(*args)
            res = list(res) if isinstance(res, (tuple, list)) else [res]
            arrays, meta = {}, []
            for i, r in enumerate(res):
                if r is None:
                    meta.append({"kind": "none"})
                elif isinstance(r, (list, tuple)):
                    dts = []
                    for j, t in enumerate(r):
                        arrays[f"o{i}_{j}"], dt = _from_torch(t, torch)
                        dts.append(dt)
                    meta.append({"kind": "list", "n": len(r), "dtypes": dts})
                else:
                    arrays[f"o{i}"], dt = _from_torch(r, torch)
                    meta.append({"kind": "tensor", "dtype": dt})
            np.savez(req["outputs"], **arrays)
            out.write(json.dumps({"status": "ok", "outputs": meta}) + "\n")
        except Exception as exc:  # noqa: BLE001
            out.write(json.dumps({"status": "error", "reason": f"runtime_error:{type(exc).__name__}"}) + "\n")
        out.flush()


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # our onnx2torch.py is not onnx2torch
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints cannot corrupt the replies
    _serve(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
