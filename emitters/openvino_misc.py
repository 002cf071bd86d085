"""OpenVINO lowerings of ONNX ops OpenVINO has no single op for: signal windows,
CenterCropPad, AffineGrid, RotaryEmbedding."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.ir import Node

from .openvino_ops import i64, lowering, rank_of, static_out

if TYPE_CHECKING:
    from .openvino import Gen

#: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1
_WINDOWS = {"hann_window": (0.5, 0.5, 0.0), "hamming_window": (25.0 / 46.0, 21.0 / 46.0, 0.0),
            "blackman_window": (0.42, 0.5, 0.08)}


@lowering(*_WINDOWS)
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


def _crop_pad_check(node: Node) -> tuple[str, str] | None:
    x = node.inputs[0]
    if x is None or not x.type.is_static or static_out(node) is None:
        return ("dynamic_shape", "center_crop_pad needs static input and output shapes")
    return None


@lowering("center_crop_pad", check=_crop_pad_check)
def _center_crop_pad(g: "Gen", node: Node) -> None:
    # per axis: crop a centered window (start rounded down) or pad zeros (the odd one at the end)
    shape = [int(d) for d in g.t(0).shape or ()]
    out = static_out(node) or []
    starts, stops, pb, pe = [], [], [], []
    for dim, target in zip(shape, out):
        start = (dim - target) // 2 if target < dim else 0
        starts.append(start)
        stops.append(start + min(dim, target))
        before = (target - dim) // 2 if target > dim else 0
        pb.append(before)
        pe.append(max(target - dim, 0) - before)
    x = g.x(0)
    if starts != [0] * len(shape) or stops != shape:
        x = g.let(f"ops.slice({x}, {i64(g, starts)}, {i64(g, stops)}, {i64(g, [1] * len(shape))})")
    if any(pb) or any(pe):
        x = g.let(f"ops.pad({x}, {i64(g, pb)}, {i64(g, pe)}, 'constant')")
    g.bind(0, x)


def _affine_check(node: Node) -> tuple[str, str] | None:
    if static_out(node) is None:
        return ("dynamic_shape", "affine_grid needs a static output shape (a constant size)")
    return None


@lowering("affine_grid", check=_affine_check)
def _affine_grid(g: "Gen", node: Node) -> None:
    # grid[n, ..., :] = theta[n] @ (x, y[, z], 1): a constant base grid times theta
    out = static_out(node) or []
    n, spatial, nd = out[0], out[1:-1], out[-1]

    def base(length: int) -> np.ndarray:
        if int(g.a("align_corners")):
            return np.linspace(-1.0, 1.0, length) if length > 1 else np.zeros(1)
        return (np.arange(length) * 2.0 + 1.0) / length - 1.0

    mesh = np.meshgrid(*[base(s) for s in spatial], indexing="ij")
    homog = np.stack(list(reversed(mesh)) + [np.ones(mesh[0].shape)], axis=-1).reshape(-1, nd + 1)
    grid = g.const(homog, g.dtype(0))
    y = g.let(f"ops.matmul({grid}, {g.x(0)}, False, True)")
    g.out(0, f"ops.reshape({y}, {i64(g, [n] + spatial + [nd])}, False)")


def _rotary_check(node: Node) -> tuple[str, str] | None:
    x = node.inputs[0]
    if x is None or not x.type.is_static or rank_of(node) not in (3, 4):
        return ("dynamic_shape", "rotary_embedding needs a static 3-D or 4-D input")
    return None


@lowering("rotary_embedding", check=_rotary_check)
def _rotary(g: "Gen", node: Node) -> None:
    # pairs (x1, x2) of the first `rot` features become (x1 cos - x2 sin, x1 sin + x2 cos)
    shape = [int(d) for d in g.t(0).shape or ()]
    x = g.x(0)
    if len(shape) == 3:  # (batch, seq, heads * size) -> (batch, seq, heads, size)
        heads = int(g.a("num_heads"))
        x = g.let(f"ops.reshape({x}, {i64(g, [shape[0], shape[1], heads, -1])}, False)")
    else:  # (batch, heads, seq, size) -> (batch, seq, heads, size)
        x = g.let(f"ops.transpose({x}, {i64(g, [0, 2, 1, 3])})")
    size = shape[-1] if len(shape) == 4 else shape[2] // int(g.a("num_heads"))
    rot = int(g.a("rotary_embedding_dim") or 0) or size
    cos, sin = g.x(1), g.x(2)
    if g.x(3) is not None:
        cos = g.let(f"ops.gather({cos}, {g.x(3)}, {i64(g, 0)})")
        sin = g.let(f"ops.gather({sin}, {g.x(3)}, {i64(g, 0)})")
    cos = g.let(f"ops.unsqueeze({cos}, {i64(g, [2])})")
    sin = g.let(f"ops.unsqueeze({sin}, {i64(g, [2])})")

    def part(start: int, stop: int, step: int = 1) -> str:
        return g.let(f"ops.slice({x}, {i64(g, [start])}, {i64(g, [stop])}, {i64(g, [step])}, {i64(g, [3])})")

    interleaved = bool(int(g.a("interleaved")))
    x1, x2 = (part(0, rot, 2), part(1, rot, 2)) if interleaved else (part(0, rot // 2), part(rot // 2, rot))
    real = g.let(f"ops.subtract(ops.multiply({x1}, {cos}), ops.multiply({x2}, {sin}))")
    imag = g.let(f"ops.add(ops.multiply({x1}, {sin}), ops.multiply({x2}, {cos}))")
    if interleaved:
        pair = f"ops.concat([ops.unsqueeze({real}, {i64(g, [4])}), ops.unsqueeze({imag}, {i64(g, [4])})], 4)"
        rotated = g.let(f"ops.reshape({pair}, {i64(g, [0, 0, 0, rot])}, True)")
    else:
        rotated = g.let(f"ops.concat([{real}, {imag}], 3)")
    y = rotated if rot == size else g.let(f"ops.concat([{rotated}, {part(rot, size)}], 3)")
    if len(shape) == 3:
        g.out(0, f"ops.reshape({y}, {i64(g, shape)}, False)")
    else:
        g.out(0, f"ops.transpose({y}, {i64(g, [0, 2, 1, 3])})")
