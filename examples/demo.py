"""The `make demo` tour: a few queries, the bundled ONNX model converted to every target with
the check, and a non-ONNX input (the bundled `.tflite`, made by TensorFlow's own converter)
converted back to ONNX, PyTorch and OpenVINO and checked against the TFLite interpreter.

Quiet: opbridge's own lines only (frameworks' log lines are filtered unless `-v`).
Exit status: non-zero if any step fails.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"
TFLITE = ROOT / "examples" / "models" / "tiny_cnn.tflite"


def run(*args: str) -> int:
    print(f"\n$ opbridge {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], cwd=ROOT).returncode


def main() -> int:
    t0 = time.perf_counter()
    rc = 0
    with tempfile.TemporaryDirectory(prefix="opbridge-demo-") as out:
        rc |= run("query", "conv", "--backend", "onnx", "--backend", "pytorch", "--backend", "tflite")
        rc |= run("query", "Mod", "--backend", "onnx", "--backend", "numpy")
        rc |= run("dtype", "bfloat16", "--backend", "pytorch", "--backend", "coreml")
        rc |= run("convert", str(MODEL.relative_to(ROOT)), "--to", "all", "-o", f"{out}/from_onnx", "-q")
        rc |= run("convert", str(TFLITE.relative_to(ROOT)), "--to", "onnx,pytorch,openvino", "-o",
                  f"{out}/from_tflite", "-q")
    print(f"\ndemo {'done' if rc == 0 else 'FAILED'} in {time.perf_counter() - t0:.0f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
