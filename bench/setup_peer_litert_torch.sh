#!/usr/bin/env bash
# The TFLite peer of bench/torch_modules.py (never a project dependency): Google's
# litert-torch (formerly ai-edge-torch), PyTorch module -> .tflite, in its own venv because it
# pins its own stack (torch<2.15, ai-edge-litert 2.3, litert-converter, torchao, jax,
# transformers). The CPU build of torch 2.13.0 (the project's) is pinned so that both sides
# build the same modules with the same seeds on one torch build. bench/torch_modules.py runs
# bench/peers/_litert_torch_runner.py in this venv as a subprocess. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-litert-torch
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "torch==2.13.0+cpu" "litert-torch==0.10.0" "ai-edge-litert==2.3.0" "numpy==2.4.6"
"$VENV/bin/python" -c "import torch, litert_torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
echo "litert-torch venv ready: bench/$VENV"
