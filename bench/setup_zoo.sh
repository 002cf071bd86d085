#!/usr/bin/env bash
# The zoo's own virtual environment (bench/.venv-zoo, gitignored; never a project dependency):
# transformers and timm build the zoo's architectures from config objects with random weights
# (bench/zoo_models.py, run as a subprocess); torch.onnx exports them (TorchScript and dynamo).
#
# torch is installed FIRST and pinned everywhere after it by a constraints file: the CPU
# build 2.13.0 (the project's own; a bare "torch" or a range would pull the multi-GB CUDA
# build). torchvision has no CPU build for torch 2.13.0 on the index, so timm is installed
# with --no-deps plus its other dependencies (huggingface_hub, safetensors, pyyaml, pillow). timm
# 1.0.31 does NOT import without torchvision (timm.layers.create_norm and timm.data import it at
# module level). torchvision 0.28.0 (the release for torch 2.13) is installed --no-deps: its
# _C.so links libtorch_cuda and does not load, so its import fails registering kernels for the
# missing C ops ("operator torchvision::nms does not exist"); bench/zoo_models.py skips those
# two registration modules, and all of torchvision's Python (models, transforms) then works.
# Every version is pinned: a new upstream release must not change the exported zoo. Idempotent.
# pip runs under /tmp/w/pip.lock when that directory exists (shared machines).
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv-zoo
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
LOCK=/tmp/w/pip.lock
pip_() {
  if [ -d "$(dirname "$LOCK")" ]; then flock "$LOCK" "$VENV/bin/python" -m pip "$@"; else "$VENV/bin/python" -m pip "$@"; fi
}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
CONSTRAINTS="$VENV/constraints.txt"
cat > "$CONSTRAINTS" <<'EOF'
torch==2.13.0
numpy==2.4.6
onnx==1.23.2
onnxscript==0.7.2
onnx-ir==1.1.0
transformers==5.24.0
tokenizers==0.23.3
huggingface-hub==2.4.0
safetensors==0.8.0
timm==1.0.31
pyyaml==6.0.3
pillow==13.0.0
torchvision==0.28.0
EOF
pip_ install --quiet "torch==2.13.0"
pip_ install --quiet -c "$CONSTRAINTS" "numpy==2.4.6" "onnx==1.23.2" "onnxscript==0.7.2" "onnx-ir==1.1.0" \
  "transformers==5.24.0" "huggingface-hub==2.4.0" "safetensors==0.8.0" "pyyaml==6.0.3"
pip_ install --quiet -c "$CONSTRAINTS" --no-deps "timm==1.0.31"
pip_ install --quiet -c "$CONSTRAINTS" --no-deps "torchvision==0.28.0"
pip_ install --quiet -c "$CONSTRAINTS" "pillow==13.0.0"  # timm imports PIL at module level (torchvision would have pulled it)
"$VENV/bin/python" - <<'EOF'
import sys, types
for mod in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
    sys.modules[mod] = types.ModuleType(mod)
import torch, transformers, timm, onnx, onnxscript
assert torch.__version__.startswith("2.13.0"), torch.__version__
assert "+cpu" in torch.__version__ or not torch.cuda.is_available(), torch.__version__
print("zoo venv ready:", "torch", torch.__version__, "transformers", transformers.__version__, "timm", timm.__version__,
      "onnx", onnx.__version__, "onnxscript", onnxscript.__version__)
EOF
