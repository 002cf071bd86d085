#!/usr/bin/env bash
# The peers' own virtual environment, used only by bench/ (never a project dependency):
# torchvision (model zoo for exports; PyPI's torchvision does not import beside the CPU
# torch 2.13.0 the project uses, so this venv pins torch 2.14.1 + torchvision 0.29.1),
# onnxscript for torch.onnx.export, and onnx2torch (the PyTorch emitter's peer: it imports
# torchvision at module level, so it lives here, installed without its dependencies, and
# bench/peers/onnx2torch.py runs it through bench/peers/_onnx2torch_runner.py). Every
# version is pinned: a new upstream release must not change the exported suite. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-peers
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "torch==2.14.1" "torchvision==0.29.1" "onnx==1.23.2" "onnxscript==0.7.2" "onnx-ir==1.1.0" "numpy==2.4.6"
"$VENV/bin/python" -m pip install --quiet --no-deps "onnx2torch==1.5.15"
# triton (pulled by the CUDA torch build) segfaults when TensorFlow is imported in the same process
"$VENV/bin/python" -m pip uninstall --quiet -y triton || true
echo "peers venv ready: bench/$VENV"
