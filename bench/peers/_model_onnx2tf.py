"""Model-level peer runner for bench/peers.py, run INSIDE bench/.venv-onnx2tf (onnx2tf's own venv).

    python _model_onnx2tf.py MODEL.onnx INPUTS.npz OUT_DIR N [--threads T] [--onnxsim 1]
                             [--ours OURS.tflite --ours-inputs X.npz]
Converts a copy of MODEL.onnx (onnx2tf rewrites its input file in place: op names, onnxsim)
with onnx2tf (not_use_onnxsim=True unless ``--onnxsim 1``: onnx2tf's default, which runs
onnxsim first; inputs kept in their ONNX layout), runs the float32 .tflite N times in LiteRT
(``ai_edge_litert``; tf.lite if it is missing), writes OUT_DIR/outputs.npz in the ONNX
output order (a channels-last output onnx2tf transposed is transposed back, counted in
``outputs_transposed``) and prints one JSON line: convert_s, latency_s (median), transposes
(TRANSPOSE ops in the .tflite), ops (the interpreter's op list once XNNPACK was applied; with
``--ours``, also ours_latency_s and ours_ops). A failed conversion ends with exit 1 and, as the last stderr
line, the exception's type and first line.
"""
from __future__ import annotations

import json
import os
import re
import shutil
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
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # onnx2tf runs onnxsim as a command: this venv's bin must be on PATH
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    import onnx
    import onnx2tf

    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:  # an older peer venv: TensorFlow's own TFLite interpreter
        import tensorflow as tf

        Interpreter = tf.lite.Interpreter  # noqa: N806

    feeds = dict(np.load(inputs, allow_pickle=False))
    # onnx2tf downloads sample images into its working directory for NHWC-looking 3-channel inputs;
    # a seeded stand-in there keeps it offline (bench/peers/onnx2tf.py: offline_sample_data)
    out_dir.mkdir(parents=True, exist_ok=True)
    sample = out_dir / "calibration_image_sample_data_20x128x128x3_float32.npy"
    if not sample.is_file():
        np.save(sample, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))
    # onnx2tf overwrites the file it is given (op names, onnxsim): it gets a copy, never the original
    src = out_dir / "model.onnx"
    shutil.copyfile(model, src)
    graph = onnx.load(str(src), load_external_data=False).graph
    onnx_outputs = [o.name for o in graph.output]
    out_shapes = [[d.dim_value if d.HasField("dim_value") else None for d in o.type.tensor_type.shape.dim]
                  for o in graph.output]
    # inputs with run-time dims get the feed's sizes, as onnx2tf's README has users do for a
    # dynamic model (-ois / overwrite_input_shape); without it onnx2tf fixes them to 1
    dynamic = {i.name for i in graph.input
               if any(not d.HasField("dim_value") for d in i.type.tensor_type.shape.dim)}
    ois = [f"{k}:{','.join(str(n) for n in v.shape)}" for k, v in feeds.items() if k in dynamic and v.ndim]
    os.chdir(out_dir)
    t = time.perf_counter()
    try:
        onnx2tf.convert(input_onnx_file_path=str(src), output_folder_path=str(out_dir / "tf"),
                        not_use_onnxsim=opts.get("--onnxsim") != "1", non_verbose=True,
                        overwrite_input_shape=ois or None,
                        # keep the source layout for image-like inputs (onnx2tf accepts only 3-D to 5-D names here)
                        keep_ncw_or_nchw_or_ncdhw_input_names=[k for k, v in feeds.items() if 3 <= v.ndim <= 5] or None)
        convert_s = time.perf_counter() - t
        tfl = sorted((out_dir / "tf").glob("*_float32.tflite"))[0]
    except BaseException as exc:  # noqa: BLE001 - the converter's failure is the peer's answer
        import traceback

        traceback.print_exc()
        # onnx2tf logs its error and calls sys.exit(1) inside an except block: name that error
        root = exc.__context__ if isinstance(exc, SystemExit) and exc.__context__ is not None else exc
        first = (str(root).strip().splitlines() or [""])[0][:200]
        print(f"{type(root).__name__}: {first}", file=sys.stderr)
        return 1
    interp = Interpreter(model_path=str(tfl), num_threads=threads)
    interp.allocate_tensors()
    details = interp.get_input_details()
    by_name = {re.sub(r"^serving_default_|:\d+$", "", d["name"]): d for d in details}
    fed(interp, [(by_name.get(name) or by_name.get(re.sub(r"[^\w]", "_", name)) or details[i], x)
                 for i, (name, x) in enumerate(feeds.items())])
    timed = [interp]
    if "--ours" in opts:  # opbridge's flatbuffer in this same process and TFLite build, timed alike
        ours = Interpreter(model_path=opts["--ours"], num_threads=threads)
        ours.allocate_tensors()
        sig = ours.get_signature_runner().get_input_details()
        fed(ours, [(sig[key], x) for key, x in dict(np.load(opts["--ours-inputs"], allow_pickle=False)).items()])
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
    outs, transposed = ordered_outputs(interp, onnx_outputs, out_shapes)
    np.savez(out_dir / "outputs.npz", *outs)
    ops = interp._get_ops_details()  # noqa: SLF001 - the interpreter's op list
    rec = {"convert_s": convert_s, "latency_s": statistics.median(times[0]),
           "transposes": sum(1 for o in ops if o["op_name"] == "TRANSPOSE"), "outputs_transposed": transposed}
    # each interpreter's op list after the delegate was applied: which nodes XNNPACK took is
    # worked out from it in the project's venv (emitters.tflite.runtime.delegation)
    rec["ops"] = op_list(interp)
    if len(times) > 1:
        rec["ours_latency_s"] = statistics.median(times[1])
        rec["ours_ops"] = op_list(timed[1])
    print(json.dumps(rec))
    return 0


def fed(interp, pairs: list) -> None:
    """Each (input detail, array) set; a flatbuffer that kept run-time dims (ours: dynamic dims
    stay dynamic; onnx2tf's where it did not fix them) is first sized to the arrays."""
    if any(tuple(d["shape"]) != x.shape for d, x in pairs):
        for d, x in pairs:
            interp.resize_tensor_input(d["index"], list(x.shape))
        interp.allocate_tensors()
    for d, x in pairs:
        interp.set_tensor(d["index"], x.astype(d["dtype"]))


def op_list(interp) -> list[dict]:
    """The op list as plain data, as emitters.tflite.runtime.op_list gives it (this venv
    cannot import the project)."""
    floats = {int(t["index"]) for t in interp.get_tensor_details()  # float, or a quantized model's 8/16-bit ints
              if np.dtype(t["dtype"]).kind == "f" or np.dtype(t["dtype"]).kind in "iu" and np.dtype(t["dtype"]).itemsize <= 2}
    return [{"index": int(o["index"]), "op_name": o["op_name"], "inputs": [int(i) for i in o["inputs"]],
             "outputs": [int(i) for i in o["outputs"]], "compute": any(int(i) in floats for i in o["outputs"])}
            for o in interp._get_ops_details()]  # noqa: SLF001 - the interpreter's op list


def ordered_outputs(interp, names: list[str], shapes: list[list[int | None]]) -> tuple[list[np.ndarray], int]:
    """The interpreter's outputs in the ONNX graph's output order (onnx2tf names them
    ``Identity``, ``Identity_1``... in that order, or keeps the ONNX names), and how many were
    channels-last versions of a channels-first ONNX output, transposed back."""
    details = interp.get_output_details()
    plain = {re.sub(r"^StatefulPartitionedCall:|:\d+$", "", d["name"]): d for d in details}
    if all(n in plain for n in names):
        details = [plain[n] for n in names]
    elif all(re.fullmatch(r"Identity(_\d+)?", k) for k in plain):
        details = sorted(plain.values(), key=lambda d: int((re.findall(r"_(\d+)$", d["name"].split(":")[0]) or ["0"])[0]))
    outs, transposed = [], 0
    for d, shape in zip(details, shapes + [[]] * len(details)):
        y = interp.get_tensor(d["index"])
        if 3 <= y.ndim <= 5 and len(shape) == y.ndim and None not in shape and list(y.shape) != shape:
            back = y.transpose(0, y.ndim - 1, *range(1, y.ndim - 1))
            if list(back.shape) == shape:
                y, transposed = back, transposed + 1
        outs.append(y)
    return outs, transposed


if __name__ == "__main__":
    sys.exit(main())
