#!/usr/bin/env bash
# The coreml backend's node-test peer (bench/peers/coremltools_torch.py): ONNX -> onnx2torch ->
# coremltools' PyTorch frontend, in the peers' venv (never a project dependency). Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
bash ./setup_peers.sh
.venv-peers/bin/python -m pip install --quiet "coremltools==9.0" "onnx2torch==1.5.15"
echo "coreml peer ready: bench/.venv-peers (coremltools, onnx2torch)"
