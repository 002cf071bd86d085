"""Model-level peer runner for bench/peers.py, run INSIDE bench/.venv-onnx2tf (onnx2tf's own venv).

    python _model_onnx2tf.py MODEL.onnx INPUTS.npz OUT_DIR N
Converts with onnx2tf (not_use_onnxsim=True, inputs kept in their ONNX layout), runs the
float32 .tflite N times with the TFLite interpreter, writes OUT_DIR/outputs.npz and prints
one JSON line: convert_s, latency_s (median), transposes (TRANSPOSE ops in the .tflite).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# this folder holds peer modules named like the packages (onnx2torch.py, onnx2tf.py): never import them here
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def main() -> int:
    model, inputs, out_dir, n = sys.argv[1], sys.argv[2], Path(sys.argv[3]).resolve(), int(sys.argv[4])
    model = str(Path(model).resolve())  # this runner changes directory below
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import onnx2tf
    import tensorflow as tf

    feeds = dict(np.load(inputs, allow_pickle=False))
    # onnx2tf downloads sample images into its working directory for NHWC-looking 3-channel inputs;
    # a seeded stand-in there keeps it offline (bench/peers/onnx2tf.py: offline_sample_data)
    out_dir.mkdir(parents=True, exist_ok=True)
    sample = out_dir / "calibration_image_sample_data_20x128x128x3_float32.npy"
    if not sample.is_file():
        np.save(sample, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
    os.chdir(out_dir)
    t = time.perf_counter()
    onnx2tf.convert(input_onnx_file_path=model, output_folder_path=str(out_dir / "tf"), not_use_onnxsim=True,
                    non_verbose=True, keep_ncw_or_nchw_or_ncdhw_input_names=list(feeds))
    convert_s = time.perf_counter() - t
    tfl = sorted((out_dir / "tf").glob("*_float32.tflite"))[0]
    interp = tf.lite.Interpreter(model_path=str(tfl))
    interp.allocate_tensors()
    details = interp.get_input_details()
    by_name = {d["name"]: d for d in details}
    for i, (name, x) in enumerate(feeds.items()):
        d = by_name.get(name) or details[i]
        interp.set_tensor(d["index"], x.astype(d["dtype"]))
    times = []
    for _ in range(n):
        s = time.perf_counter()
        interp.invoke()
        times.append(time.perf_counter() - s)
    outs = [interp.get_tensor(o["index"]) for o in interp.get_output_details()]
    np.savez(out_dir / "outputs.npz", *outs)
    ops = interp._get_ops_details()  # noqa: SLF001 - the interpreter's op list
    print(json.dumps({"convert_s": convert_s, "latency_s": statistics.median(times),
                      "transposes": sum(1 for o in ops if o["op_name"] == "TRANSPOSE")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
