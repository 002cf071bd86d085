"""The benchmark suite as PyTorch modules, with fixed seeds: imported by bench/torch_modules.py
(the project's venv) and by its litert-torch peer (bench/peers/_litert_torch_runner.py, in
bench/.venv-litert-torch), so both sides build the same weights on the same torch build.

The suite is bench/export_models.py's (the ONNX files of bench/peers.py). torchvision is not
importable beside the project's CPU torch 2.13.0 (the only torchvision built for it on the
index is the CUDA wheel, whose ``torchvision::nms`` registration fails on a CPU torch), so the
torchvision architectures are written here with plain ``torch.nn``, layer for layer as their
published configurations (ResNet-18/50, MobileNetV3 large/small, EfficientNet-B0, a small
ViT); the transformer encoder is ``torch.nn.TransformerEncoder`` and the GPT-2 blocks are
export_models' own definition. Only torch is imported, and only inside functions.

    from torch_zoo_defs import build
    module, example = build("resnet50")   # eval mode, seeded weights, seeded example input
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SUITE = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "vit_small", "transformer_encoder", "gpt2_blocks")
EXTRA = ("resnet18", "mobilenet_v3_small")
MODELS = SUITE + EXTRA
SEED = 0


def _nn():
    import torch
    from torch import nn

    return torch, nn


def _conv_bn_act(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act=None, eps: float = 1e-5):
    _, nn = _nn()
    layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout, eps=eps)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


# ---------------------------------------------------------------- ResNet (He et al. 2015; v1.5 strides)

def _resnet(kind: str, layers: tuple[int, ...], num_classes: int = 1000):
    torch, nn = _nn()

    class Basic(nn.Module):
        expansion = 1

        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(_conv_bn_act(cin, width, 3, stride, act=nn.ReLU), _conv_bn_act(width, width, 3))
            self.short = (None if stride == 1 and cin == width else _conv_bn_act(cin, width, 1, stride))
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.body(x) + (x if self.short is None else self.short(x)))

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.body = nn.Sequential(_conv_bn_act(cin, width, 1, act=nn.ReLU),
                                      _conv_bn_act(width, width, 3, stride, act=nn.ReLU),
                                      _conv_bn_act(width, cout, 1))
            self.short = None if stride == 1 and cin == cout else _conv_bn_act(cin, cout, 1, stride)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.body(x) + (x if self.short is None else self.short(x)))

    block = Basic if kind == "basic" else Bottleneck

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(_conv_bn_act(3, 64, 7, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1))
            stages, cin = [], 64
            for i, n in enumerate(layers):
                width = 64 * 2 ** i
                for j in range(n):
                    stages.append(block(cin, width, 2 if (j == 0 and i > 0) else 1))
                    cin = width * block.expansion
            self.stages = nn.Sequential(*stages)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, num_classes)
            for m in self.modules():  # torchvision's init
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))

    return ResNet()


# ---------------------------------------------------------------- MobileNetV3 (Howard et al. 2019)

def _divisible(v: float, d: int = 8) -> int:
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def _squeeze_excite(nn, channels: int, squeeze: int, act, gate):
    class SE(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1, self.fc2 = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1)
            self.act, self.gate = act(), gate()

        def forward(self, x):
            return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))

    return SE()


#: (kernel, expanded, out, squeeze-excite, hard-swish, stride)
MNV3_LARGE = ((3, 16, 16, 0, 0, 1), (3, 64, 24, 0, 0, 2), (3, 72, 24, 0, 0, 1), (5, 72, 40, 1, 0, 2),
              (5, 120, 40, 1, 0, 1), (5, 120, 40, 1, 0, 1), (3, 240, 80, 0, 1, 2), (3, 200, 80, 0, 1, 1),
              (3, 184, 80, 0, 1, 1), (3, 184, 80, 0, 1, 1), (3, 480, 112, 1, 1, 1), (3, 672, 112, 1, 1, 1),
              (5, 672, 160, 1, 1, 2), (5, 960, 160, 1, 1, 1), (5, 960, 160, 1, 1, 1))
MNV3_SMALL = ((3, 16, 16, 1, 0, 2), (3, 72, 24, 0, 0, 2), (3, 88, 24, 0, 0, 1), (5, 96, 40, 1, 1, 2),
              (5, 240, 40, 1, 1, 1), (5, 240, 40, 1, 1, 1), (5, 120, 48, 1, 1, 1), (5, 144, 48, 1, 1, 1),
              (5, 288, 96, 1, 1, 2), (5, 576, 96, 1, 1, 1), (5, 576, 96, 1, 1, 1))


def _mobilenet_v3(config, last: int, num_classes: int = 1000):
    torch, nn = _nn()
    eps = 1e-3

    class Block(nn.Module):
        def __init__(self, cin: int, k: int, exp: int, cout: int, se: int, hs: int, stride: int) -> None:
            super().__init__()
            act = nn.Hardswish if hs else nn.ReLU
            layers = [] if exp == cin else [_conv_bn_act(cin, exp, 1, act=act, eps=eps)]
            layers.append(_conv_bn_act(exp, exp, k, stride, groups=exp, act=act, eps=eps))
            if se:
                layers.append(_squeeze_excite(nn, exp, _divisible(exp // 4), nn.ReLU, nn.Hardsigmoid))
            layers.append(_conv_bn_act(exp, cout, 1, eps=eps))
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    class MobileNetV3(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            blocks, cin = [_conv_bn_act(3, 16, 3, 2, act=nn.Hardswish, eps=eps)], 16
            for k, exp, cout, se, hs, stride in config:
                blocks.append(Block(cin, k, exp, cout, se, hs, stride))
                cin = cout
            blocks.append(_conv_bn_act(cin, 6 * cin, 1, act=nn.Hardswish, eps=eps))
            self.features = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Linear(6 * cin, last), nn.Hardswish(), nn.Dropout(0.2),
                                            nn.Linear(last, num_classes))

        def forward(self, x):
            return self.classifier(torch.flatten(self.pool(self.features(x)), 1))

    return MobileNetV3()


# ---------------------------------------------------------------- EfficientNet-B0 (Tan & Le 2019)

#: (expand ratio, kernel, stride, out channels, repeats)
EFFNET_B0 = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
             (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))


def _efficientnet_b0(num_classes: int = 1000):
    torch, nn = _nn()
    eps = 1e-3

    class MBConv(nn.Module):
        def __init__(self, cin: int, ratio: int, k: int, stride: int, cout: int) -> None:
            super().__init__()
            exp = cin * ratio
            layers = [] if ratio == 1 else [_conv_bn_act(cin, exp, 1, act=nn.SiLU, eps=eps)]
            layers += [_conv_bn_act(exp, exp, k, stride, groups=exp, act=nn.SiLU, eps=eps),
                       _squeeze_excite(nn, exp, max(1, cin // 4), nn.SiLU, nn.Sigmoid),
                       _conv_bn_act(exp, cout, 1, eps=eps)]
            self.body = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout  # stochastic depth is the identity in eval

        def forward(self, x):
            y = self.body(x)
            return x + y if self.residual else y

    class EfficientNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            blocks, cin = [_conv_bn_act(3, 32, 3, 2, act=nn.SiLU, eps=eps)], 32
            for ratio, k, stride, cout, n in EFFNET_B0:
                for j in range(n):
                    blocks.append(MBConv(cin, ratio, k, stride if j == 0 else 1, cout))
                    cin = cout
            blocks.append(_conv_bn_act(cin, 1280, 1, act=nn.SiLU, eps=eps))
            self.features = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

        def forward(self, x):
            return self.classifier(torch.flatten(self.pool(self.features(x)), 1))

    return EfficientNet()


# ---------------------------------------------------------------- ViT (Dosovitskiy et al. 2020), small config

def _vit(image: int = 224, patch: int = 16, layers: int = 4, heads: int = 6, hidden: int = 384, mlp: int = 1536,
         num_classes: int = 1000):
    torch, nn = _nn()

    class EncoderBlock(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden, eps=1e-6), nn.LayerNorm(hidden, eps=1e-6)
            self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(hidden, mlp), nn.GELU(), nn.Linear(mlp, hidden))

        def forward(self, x):
            y = self.ln1(x)
            y, _ = self.attn(y, y, y, need_weights=False)
            x = x + y
            return x + self.mlp(self.ln2(x))

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            tokens = (image // patch) ** 2 + 1
            self.conv_proj = nn.Conv2d(3, hidden, patch, patch)
            self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
            self.pos_embedding = nn.Parameter(torch.empty(1, tokens, hidden).normal_(std=0.02))
            self.layers = nn.Sequential(*(EncoderBlock() for _ in range(layers)))
            self.ln = nn.LayerNorm(hidden, eps=1e-6)
            self.head = nn.Linear(hidden, num_classes)

        def forward(self, x):
            x = self.conv_proj(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
            return self.head(self.ln(self.layers(x))[:, 0])

    return ViT()


# ---------------------------------------------------------------- the suite

def build(name: str):
    """``(module in eval mode, example input)``, deterministic: the same weights and input on
    every call and in every venv with the same torch build."""
    import torch

    from export_models import DEGENERATE_INIT, _gpt2_blocks, randomize

    if name not in MODELS:
        raise KeyError(f"unknown model {name!r} (known: {', '.join(MODELS)})")
    torch.manual_seed(SEED)
    if name == "gpt2_blocks":
        model, _ = _gpt2_blocks()
    elif name == "transformer_encoder":
        layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0)
        model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    elif name.startswith("resnet"):
        model = _resnet("basic", (2, 2, 2, 2)) if name == "resnet18" else _resnet("bottleneck", (3, 4, 6, 3))
    elif name == "mobilenet_v3_large":
        model = _mobilenet_v3(MNV3_LARGE, 1280)
    elif name == "mobilenet_v3_small":
        model = _mobilenet_v3(MNV3_SMALL, 1024)
    elif name == "efficientnet_b0":
        model = _efficientnet_b0()
    else:
        model = _vit()
    model = model.eval()
    if name in DEGENERATE_INIT:
        randomize(model)
    return model, example_input(name)


def example_input(name: str):
    import torch

    g = torch.Generator().manual_seed(SEED + 1)
    if name == "gpt2_blocks":
        return torch.randint(0, 256, (1, 32), generator=g)
    if name == "transformer_encoder":
        return torch.randn(1, 16, 64, generator=g)
    return torch.randn(1, 3, 224, 224, generator=g)
