"""The DFT as one product with a constant matrix, for a target with no FFT of its own.

ONNX ``DFT`` (the IR's ``dft``) of a signal of static length ``L`` along one axis, real
(``[..., L, 1]``) or complex (``[..., L, 2]``, real and imaginary parts), is linear in the
signal: ``Y[k] = s · Σ_n x[n] e^{∓2πi nk/L}`` (``-`` forward, ``+`` inverse with ``s = 1/L``),
``k < L // 2 + 1`` when one-sided. With the (real, imaginary) pairs of the input flattened
to ``[..., c·L]`` and those of the output to ``[..., 2K]``, it is ``x @ W`` for a constant
``W`` of ``c·L × 2K`` entries (cos and sin of the angles, computed in float64), then a
reshape to ``[..., K, 2]``. The signal axis is moved next to the last one and back around it,
and the input is cut or zero-padded to ``dft_length`` first, as ONNX does.

Used by the lowering step where a target has no code for ``dft`` (Core ML has no FFT;
TensorFlow, TFLite and OpenVINO have one the emitters do not write yet): every target runs a
matmul. ``L`` must be static (the matrix is a constant); the inverse one-sided form (a real
output from half a spectrum) is not written here.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value

#: the largest matrix written (entries): a 4096-point DFT of a complex signal
MAX_ENTRIES = 2 * 4096 * 2 * 4096


def _const_int(v: Value | None) -> int | None:
    if v is None:
        return None
    if not v.is_const or np.asarray(v.const).size != 1:
        raise ValueError
    return int(np.asarray(v.const).reshape(-1)[0])


def _geometry(node: Node) -> tuple[int, int, int, int, int] | str:
    """(rank, signal axis, input length, DFT length, 1 or 2 input parts), or why not."""
    x = node.inputs[0] if node.inputs else None
    shape = x.type.shape if x is not None else None
    if shape is None or len(shape) < 2:
        return "the input rank must be known"
    r = len(shape)
    try:
        axis = _const_int(node.inputs[2] if len(node.inputs) > 2 else None)
        length = _const_int(node.inputs[1] if len(node.inputs) > 1 else None)
    except ValueError:
        return "dft_length and axis must be constants"
    axis = (-2 if axis is None else axis) % r
    if axis == r - 1:
        return "the signal axis cannot be the (real, imaginary) axis"
    parts, n = shape[-1], shape[axis]
    if parts not in (1, 2):
        return "the last dim must be 1 (real) or 2 (complex) and static"
    if not isinstance(n, int):
        return "the signal length must be static (the DFT matrix is a constant)"
    if int(node.attrs.get("inverse", 0)) and int(node.attrs.get("onesided", 0)):
        return "the inverse one-sided DFT is not written as a matrix product"
    length = int(n) if length is None else length
    if length < 1:
        return "dft_length must be positive"
    return r, axis, n, length, int(parts)


def why_not(node: Node) -> str | None:
    g = _geometry(node)
    if isinstance(g, str):
        return g
    _, _, _, length, parts = g
    bins = length // 2 + 1 if int(node.attrs.get("onesided", 0)) else length
    if parts * length * 2 * bins > MAX_ENTRIES:
        return f"a {length}-point DFT matrix is too large to be a constant"
    return None


def matrix(length: int, bins: int, parts: int, inverse: bool, dtype: np.dtype) -> np.ndarray:
    """``W`` of ``parts·length × 2·bins``: row ``parts·n + j`` (j = 0 real, 1 imaginary part of
    x[n]) gives column ``2k`` (real) and ``2k + 1`` (imaginary) of Y[k]."""
    n = np.arange(length, dtype=np.float64)[:, None]
    k = np.arange(bins, dtype=np.float64)[None, :]
    ang = 2.0 * np.pi * ((n * k) % length) / length  # the product reduced first: exact angles
    sign = 1.0 if inverse else -1.0
    cos, sin = np.cos(ang), sign * np.sin(ang)
    w = np.zeros((length, parts, bins, 2))
    w[:, 0, :, 0], w[:, 0, :, 1] = cos, sin  # (a)(cos + i·sin) for the real part a
    if parts == 2:
        w[:, 1, :, 0], w[:, 1, :, 1] = -sin, cos  # (i·b)(cos + i·sin) for the imaginary part b
    if inverse:
        w /= length
    return w.reshape(length * parts, bins * 2).astype(dtype)


def expand(graph: Graph, node: Node) -> list[Node]:
    """Replace the ``dft`` ``node`` by the transposes, slice/pad, reshapes and matmul above."""
    from ..table.dtypes import numpy_dtype
    from .steps import Steps

    r, axis, n, length, parts = _geometry(node)  # type: ignore[misc]
    b = Steps(graph, node)
    inverse, onesided = bool(int(node.attrs.get("inverse", 0))), bool(int(node.attrs.get("onesided", 0)))
    bins = length // 2 + 1 if onesided else length
    x = node.inputs[0]
    perm = list(range(r))
    if axis != r - 2:  # the signal axis next to the (real, imaginary) one
        perm[axis], perm[r - 2] = perm[r - 2], perm[axis]
        x = b.op("transpose", x, perm=perm)
    if n > length:
        x = b.op("slice", x, b.const([0], "start", "int64"), b.const([length], "end", "int64"),
                 b.const([r - 2], "axes", "int64"))
    elif n < length:
        pads = [0] * (2 * r)
        pads[r + r - 2] = length - n
        x = b.op("pad", x, b.const(pads, "pads", "int64"))
    flat = b.op("reshape", x, b.const([0] * (r - 2) + [length * parts], "flat", "int64"))
    w = b.const(matrix(length, bins, parts, inverse, numpy_dtype(b.dt)), "dft_matrix")
    y = b.op("matmul", flat, w)
    y = b.op("reshape", y, b.const([0] * (r - 2) + [bins, 2], "pairs", "int64"))
    if axis != r - 2:
        y = b.op("transpose", y, perm=perm)  # a swap is its own inverse
    graph.replace_node(node, [y], keep_types=True)
    return b.nodes


__all__ = ["why_not", "expand", "matrix", "MAX_ENTRIES"]
