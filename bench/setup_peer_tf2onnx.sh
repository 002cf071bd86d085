#!/usr/bin/env bash
# The peer venv of bench/keras_models.py for tf2onnx (never a project dependency): tf2onnx
# imports TensorFlow even for --tflite, and its pins (protobuf) differ from the project's, so it
# runs as a subprocess (`python -m tf2onnx.convert`) from its own environment. tf2onnx 1.17.0 is
# the newest release; it is pinned beside the same TensorFlow the project uses so that it reads
# the SavedModels the bench writes. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-tf2onnx
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "tf2onnx==${TF2ONNX_VERSION:-1.17.0}" \
  "tensorflow-cpu==${TF2ONNX_TF_VERSION:-2.21.0}" "onnx==1.23.2" "numpy<2.5"
"$VENV/bin/python" -c "import tf2onnx, tensorflow as tf; print('tf2onnx', tf2onnx.__version__, 'tensorflow', tf.__version__)"
echo "tf2onnx venv ready: bench/$VENV"
