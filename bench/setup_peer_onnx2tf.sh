#!/usr/bin/env bash
# A second peers venv, only for bench/peers/onnx2tf.py (never a project dependency):
# onnx2tf runs as a subprocess in its own environment. onnx2tf==1.28.8 resolves cleanly
# when pinned in the same pip command as the project's stack (tensorflow-cpu, onnx, numpy).
# Its runtime imports that it does not declare are installed alongside (onnxruntime: onnx2tf imports it at
# run time; without it every bench/wild model failed with ModuleNotFoundError), and onnxsim (onnx2tf runs
# it first by default; bench/zoo.py uses that default). Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-onnx2tf
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "onnx2tf==1.28.8" "tensorflow-cpu==2.21.0" "onnx==1.23.2" "numpy<2.5" \
  onnx_graphsurgeon sng4onnx psutil tf_keras ai-edge-litert "onnxsim==0.8.1" "onnxruntime==1.32.0"
echo "onnx2tf venv ready: bench/$VENV"
