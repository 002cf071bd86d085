"""bench/torch_zoo_defs.py builds torchvision's architectures without torchvision: their
parameter counts are torchvision's published ones, and builds are deterministic. And the
report of bench/torch_modules.py groups failures by mechanism (one key per unmapped ATen op)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

torch = pytest.importorskip("torch")

#: torchvision.models' parameter counts (the model cards of torchvision's weights)
PUBLISHED = {"resnet18": 11_689_512, "resnet50": 25_557_032, "mobilenet_v3_large": 5_483_032,
             "mobilenet_v3_small": 2_542_856, "efficientnet_b0": 5_288_548}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_torchvision(name):
    from torch_zoo_defs import build

    model, x = build(name)
    assert sum(p.numel() for p in model.parameters()) == PUBLISHED[name]
    assert tuple(x.shape) == (1, 3, 224, 224)


def test_build_is_deterministic():
    from torch_zoo_defs import build

    (m1, x1), (m2, x2) = build("mobilenet_v3_small"), build("mobilenet_v3_small")
    assert torch.equal(x1, x2)
    with torch.no_grad():
        y1, y2 = m1(x1), m2(x2)
    assert torch.equal(y1, y2)
    assert float(y1.std()) > 1e-3  # not a degenerate (near-constant) output


def test_failures_grouped_by_unmapped_aten_op():
    from torch_modules import fmt_cell, mechanism

    cell = {"status": "refused", "reason": "unsupported_op",
            "detail": "M: node 'x': op aten.foo.default: ATen op(s) with no IR op in optable.yaml: "
                      "aten.foo.default, aten.bar.Tensor [unsupported_op]"}
    assert mechanism(cell) == ["unmapped ATen op aten.foo.default", "unmapped ATen op aten.bar.Tensor"]
    assert fmt_cell(cell) == "refused:unsupported_op"
    assert fmt_cell({"status": "check_failed", "vs_source": 0.25}) == "FAIL 2.5e-01"
