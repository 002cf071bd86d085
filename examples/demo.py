"""The `make demo` tour: queries, then the bundled model checked on every backend available.

Until every emitter exists, the backends are the NumPy reference and ONNX (onnxruntime).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"


def run(*args: str) -> int:
    print(f"\n$ opbridge {' '.join(args)}", flush=True)
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], cwd=ROOT).returncode


def main() -> int:
    rc = 0
    rc |= run("query", "conv", "--backend", "onnx", "--backend", "pytorch", "--backend", "openvino")
    rc |= run("query", "Mod", "--backend", "onnx", "--backend", "numpy")
    rc |= run("dtype", "bfloat16", "--backend", "pytorch", "--backend", "coreml")
    rc |= run("check", str(MODEL.relative_to(ROOT)), "--backends", "numpy,onnx")
    return rc


if __name__ == "__main__":
    sys.exit(main())
