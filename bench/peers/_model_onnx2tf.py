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
    opts = dict(zip(sys.argv[5::2], sys.argv[6::2]))  # --threads N, --ours OURS.tflite --ours-inputs X.npz
    threads = int(opts["--threads"]) if "--threads" in opts else None
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
                    non_verbose=True,
                    # keep the source layout for image-like inputs (onnx2tf accepts only 3-D to 5-D names here)
                    keep_ncw_or_nchw_or_ncdhw_input_names=[k for k, v in feeds.items() if 3 <= v.ndim <= 5] or None)
    convert_s = time.perf_counter() - t
    tfl = sorted((out_dir / "tf").glob("*_float32.tflite"))[0]
    interp = tf.lite.Interpreter(model_path=str(tfl), num_threads=threads)
    interp.allocate_tensors()
    details = interp.get_input_details()
    by_name = {d["name"]: d for d in details}
    for i, (name, x) in enumerate(feeds.items()):
        d = by_name.get(name) or details[i]
        interp.set_tensor(d["index"], x.astype(d["dtype"]))
    timed = [interp]
    if "--ours" in opts:  # opbridge's flatbuffer in this same process and TFLite build, timed alike
        ours = tf.lite.Interpreter(model_path=opts["--ours"], num_threads=threads)
        ours.allocate_tensors()
        sig = ours.get_signature_runner().get_input_details()
        for key, x in dict(np.load(opts["--ours-inputs"], allow_pickle=False)).items():
            ours.set_tensor(sig[key]["index"], x.astype(sig[key]["dtype"]))
        timed.append(ours)
    for it in timed:  # warm-up
        for _ in range(3):
            it.invoke()
    times: list[list[float]] = [[] for _ in timed]
    for r in range(n):  # alternate which one goes first, so load falls on both alike
        order = list(enumerate(timed)) if r % 2 == 0 else list(reversed(list(enumerate(timed))))
        for j, it in order:
            s = time.perf_counter()
            it.invoke()
            times[j].append(time.perf_counter() - s)
    outs = [interp.get_tensor(o["index"]) for o in interp.get_output_details()]
    np.savez(out_dir / "outputs.npz", *outs)
    ops = interp._get_ops_details()  # noqa: SLF001 - the interpreter's op list
    rec = {"convert_s": convert_s, "latency_s": statistics.median(times[0]),
           "transposes": sum(1 for o in ops if o["op_name"] == "TRANSPOSE")}
    if len(times) > 1:
        rec["ours_latency_s"] = statistics.median(times[1])
    print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
