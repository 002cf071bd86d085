"""Export the benchmark models to ONNX with random weights (no downloads).

Runs in the peers' venv (bench/setup_peers.sh: torchvision lives there, never in the
project). Files go to bench/.cache/models/ and are never committed.

    bench/.venv-peers/bin/python bench/export_models.py [--models resnet18,...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / ".cache" / "models"


def build(name: str):
    import torch
    import torchvision

    torch.manual_seed(0)
    if name == "transformer_encoder":
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0)
        return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval(), torch.randn(1, 16, 64)
    ctor = getattr(torchvision.models, name)
    return ctor(weights=None).eval(), torch.randn(1, 3, 224, 224)


def export(name: str, opset: int) -> Path:
    import torch

    model, x = build(name)
    path = OUT / f"{name}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".onnx.tmp")
    with torch.no_grad():
        try:
            torch.onnx.export(model, (x,), str(tmp), input_names=["input"], output_names=["output"],
                              opset_version=opset, dynamo=False)
        except TypeError:
            torch.onnx.export(model, (x,), str(tmp), input_names=["input"], output_names=["output"], opset_version=opset)
    tmp.replace(path)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18")
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()
    for name in args.models.split(","):
        print(f"exported {export(name, args.opset)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
