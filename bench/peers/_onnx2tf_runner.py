"""Runs inside bench/.venv-onnx2tf (onnx2tf 1.28.8 + tensorflow-cpu), never in the project's venv.

Protocol (one JSON object per line on stdin, one reply per line on stdout):
request  {"model": path.onnx, "inputs": path.npz, "outputs": path.npz, "work": dir, "names": [input names]}
reply    {"status": "ok", "outputs": [output names in the .npz order]}
         {"status": "unsupported"|"error", "reason": "..."}
Each model is converted with ``onnx2tf.convert(not_use_onnxsim=True)`` (onnxsim would take ~7 s
per case and rewrite the input file), inputs kept in their ONNX layout, and the float32
.tflite it writes is run with the TFLite interpreter. Converter chatter goes to stderr.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from pathlib import Path


def _serve(out) -> None:
    import numpy as np
    import onnx2tf
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    for line in sys.stdin:
        req = json.loads(line)
        work = Path(req["work"])
        shutil.rmtree(work, ignore_errors=True)
        with np.load(req["inputs"], allow_pickle=False) as data:
            # only N C D1..Dk inputs (rank 3-5) can be "kept" channels-first; onnx2tf asserts otherwise
            keep = [n for i, n in enumerate(req["names"]) if data[f"i{i}"].ndim in (3, 4, 5)]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                onnx2tf.convert(input_onnx_file_path=req["model"], output_folder_path=str(work), not_use_onnxsim=True,
                                non_verbose=True, copy_onnx_input_output_names_to_tflite=True,
                                keep_ncw_or_nchw_or_ncdhw_input_names=keep or None)
            tfl = sorted(work.glob("*_float32.tflite"))
            if not tfl:
                raise RuntimeError("no float32 .tflite written")
        except BaseException as exc:  # noqa: BLE001 - onnx2tf may sys.exit on a conversion error
            out.write(json.dumps({"status": "unsupported", "reason": f"convert_error:{type(exc).__name__}"}) + "\n")
            out.flush()
            continue
        try:
            interp = tf.lite.Interpreter(model_path=str(tfl[0]))
            interp.allocate_tensors()
            details = interp.get_input_details()
            by_name = {d["name"]: d for d in details}
            with np.load(req["inputs"], allow_pickle=False) as data:
                for i, name in enumerate(req["names"]):
                    d = by_name.get(name) or details[i]
                    x = data[f"i{i}"]
                    if tuple(d["shape"]) != x.shape:
                        interp.resize_tensor_input(d["index"], x.shape)
                        interp.allocate_tensors()
                    interp.set_tensor(d["index"], x.astype(d["dtype"]))
            interp.invoke()
            outs = interp.get_output_details()
            np.savez(req["outputs"], **{f"o{k}": interp.get_tensor(o["index"]) for k, o in enumerate(outs)})
            out.write(json.dumps({"status": "ok", "outputs": [o["name"] for o in outs]}) + "\n")
        except Exception as exc:  # noqa: BLE001
            out.write(json.dumps({"status": "error", "reason": f"runtime_error:{type(exc).__name__}"}) + "\n")
        out.flush()


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # our onnx2tf.py is not onnx2tf
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints cannot corrupt the replies
    _serve(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
