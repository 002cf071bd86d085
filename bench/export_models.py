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


#: torchvision's own init leaves these with (near-)zero logits (ViT's head is zero-initialized,
#: MobileNet/EfficientNet logits are ~1e-10): their weights are re-drawn by ``randomize``.
DEGENERATE_INIT = frozenset({"mobilenet_v3_large", "mobilenet_v3_small", "efficientnet_b0", "vit_small"})
SUITE = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "vit_small", "transformer_encoder", "gpt2_blocks")


def _gpt2_blocks(n_layer: int = 2, d: int = 64, heads: int = 4, vocab: int = 256, ctx: int = 32):
    """A GPT-2-style decoder stack in plain torch: token + position embeddings, pre-LN blocks with
    causal self-attention and a GELU MLP, final LN and a tied LM head."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q = q.view(b, t, heads, d // heads).transpose(1, 2)
            k = k.view(b, t, heads, d // heads).transpose(1, 2)
            v = v.view(b, t, heads, d // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (d // heads) ** 0.5)
            att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
            self.blocks = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln = nn.LayerNorm(d)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            return self.ln(x) @ self.wte.weight.t()

    return GPT().eval(), torch.randint(0, vocab, (1, ctx))


def randomize(model) -> None:
    """Random weights that keep activations O(1) (torchvision's inits leave e.g. ViT's head at
    zero and MobileNet's logits near 1e-10, which would make any comparison trivial)."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.randn(m.weight.shape, generator=g) * (1.0 / fan_in) ** 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.02)
            elif isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
                if m.weight is not None:
                    m.weight.copy_(0.5 + 0.5 * torch.rand(m.weight.shape, generator=g))
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                    m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=g))


def build(name: str):
    import torch
    import torchvision

    torch.manual_seed(0)
    if name == "transformer_encoder":
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0)
        return torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval(), torch.randn(1, 16, 64)
    if name == "gpt2_blocks":
        return _gpt2_blocks()
    if name == "vit_small":  # a smaller ViT config (vit_b_16 is 86M parameters)
        from torchvision.models.vision_transformer import VisionTransformer

        return VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=6, hidden_dim=384,
                                 mlp_dim=1536).eval(), torch.randn(1, 3, 224, 224)
    ctor = getattr(torchvision.models, name)
    return ctor(weights=None).eval(), torch.randn(1, 3, 224, 224)


def export(name: str, opset: int) -> Path:
    import torch

    model, x = build(name)
    if name in DEGENERATE_INIT:
        randomize(model)
    if hasattr(torch.backends, "mha"):  # the fused MHA fast path has no ONNX export
        torch.backends.mha.set_fastpath_enabled(False)
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
    ap.add_argument("--models", default="resnet18", help=f"comma-separated, or 'suite' ({', '.join(SUITE)})")
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()
    names: list[str] = []
    for item in args.models.split(","):
        for name in (SUITE if item == "suite" else (item,)):
            if name not in names:
                names.append(name)
    for name in names:
        print(f"exported {export(name, args.opset)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
