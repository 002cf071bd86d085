#!/usr/bin/env bash
# A peers venv only for bench/peers/pnnx.py (never a project dependency): pnnx, ncnn's own
# converter (PyTorch/ONNX → ncnn .param/.bin). Its wheel carries a standalone executable
# (onnxruntime and libtorch inside) that converts an ONNX file without importing anything;
# the wheel's declared torch dependency is only for its Python export API, which the peer
# does not use, so it is installed without dependencies. The ncnn files it writes are run by
# the project's own ncnn package, the same runtime opbridge's ncnn target is checked with.
# The version is pinned: a new upstream release must not change the counts. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-pnnx
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --no-deps "pnnx==20261020"
EXE=$("$VENV/bin/python" -c "import os, importlib.util as u; print(os.path.join(os.path.dirname(u.find_spec('pnnx').origin), 'pnnx'))")
test -x "$EXE"
echo "pnnx venv ready: bench/$VENV ($EXE)"
