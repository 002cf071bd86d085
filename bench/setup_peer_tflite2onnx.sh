#!/usr/bin/env bash
# The peer venv of bench/keras_models.py for tflite2onnx 0.4.1 (the last release, 2021; never a
# project dependency). It needs only the `tflite` schema package, onnx and numpy; it runs as a
# subprocess (`tflite2onnx.convert(tflite_path, onnx_path)`) from its own environment so that
# its old pins cannot touch the project's. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-tflite2onnx
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "tflite2onnx==0.4.1" "tflite==2.18.0" "onnx==1.23.2" \
  "numpy${TFLITE2ONNX_NUMPY:-<2.5}"
"$VENV/bin/python" -c "import tflite2onnx; print('tflite2onnx', tflite2onnx.__version__)"
echo "tflite2onnx venv ready: bench/$VENV"
