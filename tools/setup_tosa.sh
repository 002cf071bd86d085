#!/usr/bin/env sh
# The TOSA runtime for translator/proofs/tosa.py: the PyPI wheel tosa-tools (Arm's reference
# model `tosa_reference_model`, the serializer, and the `tosa-opt` / MLIR<->flatbuffer tools).
# Its pins (flatbuffers 25.2.10, ml-dtypes 0.5.3, numpy < 2.2) clash with the main venv
# (TensorFlow), so it gets its own venv, .venv-tosa (gitignored), called as a subprocess.
# Idempotent: a venv that already has these exact versions is left alone.
set -eu
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
VENV="${OPBRIDGE_TOSA_VENV:-.venv-tosa}"
PINS="tosa-tools==2026.8.0 numpy==2.1.3 flatbuffers==25.2.10 ml-dtypes==0.5.3 jsonschema==4.24.0 semver==3.0.4 \
  attrs==26.1.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 typing_extensions==4.16.0"
STAMP="$VENV/.stamp"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$PINS" ]; then
    echo "$VENV is up to date ($PINS)"
    exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install --quiet $PINS
"$VENV/bin/python" -c "import tosa_reference_model, tosa_serializer" 
echo "$PINS" > "$STAMP"
echo "$VENV ready ($PINS)"
