#!/usr/bin/env bash
# A peers venv only for bench/peers/jaxonnxruntime.py (never a project dependency):
# jaxonnxruntime (Google's JAX-based ONNX runtime, onnx's Backend API: prepare/run) runs in
# bench/.venv-jaxort through bench/peers/_jaxonnxruntime_runner.py. jaxonnxruntime itself
# declares only unpinned numpy/jax/jaxlib (its "all" extra wants onnx 1.12), so jax, jaxlib,
# onnx, numpy and ml_dtypes are pinned to the versions of the project's venv: the peer and
# opbridge's StableHLO backend then run the same XLA, and onnx reads the same node tests.
# absl-py is a runtime import it does not declare (jaxonnxruntime.core.onnx_utils).
# Every version is pinned: a new upstream release must not change the counts. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-jaxort
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "jaxonnxruntime==0.3.0" "jax==0.10.2" "jaxlib==0.10.2" \
  "onnx==1.23.2" "numpy==2.4.6" "ml_dtypes==0.6.0" \
  "absl-py==2.5.1"
"$VENV/bin/python" -c "import jaxonnxruntime, jax, onnx; from jaxonnxruntime.backend import Backend" >/dev/null
echo "jaxonnxruntime venv ready: bench/$VENV"
