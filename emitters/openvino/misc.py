"""OpenVINO rules of the ONNX signal windows (Hann, Hamming, Blackman): OpenVINO has no
window op, and they fit no other family: the cosine sums computed in float32."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.ir.graph import Node

from .helpers import i64
from .registry import rule

if TYPE_CHECKING:
    from .codegen import Gen

#: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1
_WINDOWS = {"hann_window": (0.5, 0.5, 0.0), "hamming_window": (25.0 / 46.0, 21.0 / 46.0, 0.0),
            "blackman_window": (0.42, 0.5, 0.08)}


@rule(*_WINDOWS)
def _window(g: "Gen", node: Node) -> None:
    a0, a1, a2 = _WINDOWS[node.op]
    f = "float32"
    size = g.let(f"ops.convert(ops.reshape({g.x(0)}, {i64(g, [])}, False), ov.Type.f32)")
    n = g.let(f"ops.range({g.const(0.0, f)}, {size}, {g.const(1.0, f)}, ov.Type.f32)")
    denom = size if int(g.a("periodic")) else g.let(f"ops.subtract({size}, {g.const(1.0, f)})")
    angle = g.let(f"ops.multiply({n}, ops.divide({g.const(2.0 * np.pi, f)}, {denom}))")
    w = g.let(f"ops.subtract({g.const(a0, f)}, ops.multiply({g.const(a1, f)}, ops.cos({angle})))")
    if a2:
        w = g.let(f"ops.add({w}, ops.multiply({g.const(a2, f)}, ops.cos(ops.multiply({angle}, {g.const(2.0, f)}))))")
    g.out(0, f"ops.convert({w}, {g.ty(g.out_dtype(0))})")
