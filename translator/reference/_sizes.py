"""Output sizes of reference ops computed from their arguments, before anything is allocated.

``predict(op, args, kwargs)`` returns ``[(elements, itemsize or None), ...]`` for the
outputs (or the largest intermediate) an op is about to allocate, for the ops whose
output size follows from input *values* or attributes rather than from input sizes
(Range, ConstantOfShape, Expand, Tile, Pad, Resize, OneHot, ...) and for broadcasting
ops (two small inputs can broadcast to a huge output). ``None``: no prediction (the
result is checked after the op instead). A prediction never refuses a valid model: a
rule that cannot make sense of its arguments predicts nothing and the op itself reports
what is wrong. Used by the interpreter and the constant folder against ``translator.table.budget``.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..table.errors import OpbridgeError

RULES: dict[str, Callable[..., Any]] = {}


def rule(*ops: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op in ops:
            RULES[op] = fn
        return fn

    return deco


def _ints(t: Any) -> list[int]:
    return [int(v) for v in np.asarray(t).reshape(-1)]


def _isz(x: Any, default: int | None = None) -> int | None:
    try:
        dt = np.asarray(x).dtype if not hasattr(x, "dtype") else x.dtype
        return None if dt.kind == "O" else int(dt.itemsize)
    except Exception:  # noqa: BLE001
        return default


def _prod(dims: Any) -> int:
    return math.prod(max(int(d), 0) for d in dims)


def _bcast(shapes: list[tuple[int, ...]]) -> list[int] | None:
    """Broadcast shape with Python ints (no NumPy overflow); None when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            j = rank - len(s) + i
            if d == 1:
                continue
            if out[j] == 1:
                out[j] = d
            elif out[j] != d:
                return None
    return out


# ----------------------------------------------------------------------------- value-driven sizes
@rule("range")
def _range(start, limit, delta, **_):
    s, l, d = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
    if np.asarray(start).dtype.kind in "iu":
        s, l, d = int(s), int(l), int(d)
        if d == 0:
            raise OpbridgeError("bad_model", "range: delta is 0")
        n = max(-(-(l - s) // d), 0)
    else:
        s, l, d = float(s), float(l), float(d)
        if d == 0 or not math.isfinite(s) or not math.isfinite(l) or not math.isfinite(d):
            raise OpbridgeError("bad_model", f"range: start {s}, limit {l}, delta {d} give no finite length")
        n = max(math.ceil((l - s) / d), 0)
    return [(n, _isz(start))]


@rule("constant_of_shape")
def _constant_of_shape(shape, value=None, **_):
    dims = _ints(shape)
    if any(d < 0 for d in dims):
        raise OpbridgeError("bad_model", f"constant_of_shape: negative dimension in {tuple(dims)}")
    return [(_prod(dims), 4 if value is None else _isz(value))]


@rule("expand")
def _expand(x, shape, **_):
    out = _bcast([tuple(x.shape), tuple(_ints(shape))])
    return None if out is None else [(_prod(out), _isz(x))]


@rule("tile")
def _tile(x, repeats, **_):
    r = _ints(repeats)
    if len(r) != x.ndim:
        return None
    return [(_prod(d * k for d, k in zip(x.shape, r)), _isz(x))]


@rule("pad")
def _pad(data, pads, constant_value=None, axes=None, **_):
    rank = data.ndim
    ax = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in _ints(axes)]
    p = _ints(pads)
    if len(p) != 2 * len(ax) or any(not 0 <= a < rank for a in ax):
        return None
    dims = list(data.shape)
    for i, a in enumerate(ax):
        dims[a] = dims[a] + p[i] + p[i + len(ax)]
    return [(_prod(dims), _isz(data))]


@rule("resize", "upsample")
def _resize(X, roi=None, scales=None, sizes=None, axes=None, keep_aspect_ratio_policy="stretch", **_):
    rank = X.ndim
    ax = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    dims = list(X.shape)
    if sizes is not None and np.asarray(sizes).size:
        want = _ints(sizes)
        if len(want) != len(ax):
            return None
        if keep_aspect_ratio_policy == "stretch":
            for a, w in zip(ax, want):
                dims[a] = w
        else:
            s = max(w / max(dims[a], 1) for a, w in zip(ax, want))
            for a in ax:
                dims[a] = int(math.floor(s * dims[a] + 0.5))
    elif scales is not None and np.asarray(scales).size:
        sc = [float(v) for v in np.asarray(scales).reshape(-1)]
        if len(sc) != len(ax) or not all(math.isfinite(v) for v in sc):
            return None
        for a, v in zip(ax, sc):
            dims[a] = int(math.floor(dims[a] * v))
    else:
        return None
    return [(_prod(dims), 8)]  # computed in float64


@rule("one_hot")
def _one_hot(indices, depth, values, **_):
    d = int(np.asarray(depth).reshape(-1)[0])
    return [(np.asarray(indices).size * max(d, 0), 8)]


@rule("random_normal", "random_uniform")
def _random(shape=None, **_):
    return None if shape is None else [(_prod(shape), 8)]


@rule("multinomial")
def _multinomial(input, sample_size=1, **_):  # noqa: A002
    return [(int(np.asarray(input).shape[0]) * int(sample_size), 8)]


@rule("max_unpool")
def _max_unpool(X, I, output_shape=None, **_):
    return None if output_shape is None else [(_prod(_ints(output_shape)), _isz(X))]


@rule("roi_align")
def _roi_align(X, rois, batch_indices, output_height=1, output_width=1, **_):
    return [(rois.shape[0] * X.shape[1] * int(output_height) * int(output_width), 8)]


@rule("max_roi_pool")
def _max_roi_pool(X, rois, pooled_shape, **_):
    return [(rois.shape[0] * X.shape[1] * _prod(pooled_shape), _isz(X))]


@rule("dft")
def _dft(input, dft_length=None, axis=None, **_):  # noqa: A002
    if dft_length is None:
        return None
    x = np.asarray(input)
    ax = (-2 if axis is None else int(np.ravel(axis)[0])) % x.ndim
    dims = list(x.shape)
    dims[ax] = int(np.ravel(dft_length)[0])
    dims[-1] = 2
    return [(_prod(dims), 16)]


@rule("hann_window", "hamming_window", "blackman_window")
def _window(size, **_):
    return [(int(np.asarray(size).reshape(-1)[0]), 8)]


@rule("mel_weight_matrix")
def _mel(num_mel_bins, dft_length, *_, **__):
    return [((int(np.asarray(dft_length).reshape(-1)[0]) // 2 + 1) * int(np.asarray(num_mel_bins).reshape(-1)[0]), 8)]


@rule("center_crop_pad")
def _center_crop_pad(x, shape, axes=None, **_):
    target = _ints(shape)
    ax = list(axes) if axes else list(range(len(target)))
    dims = list(x.shape)
    for a, d in zip(ax, target):
        if -len(dims) <= a < len(dims):
            dims[a] = d
    return [(_prod(dims), _isz(x))]


@rule("affine_grid")
def _affine_grid(theta, size, **_):
    dims = _ints(size)
    return [(_prod([dims[0], *dims[2:]]) * max(len(dims) - 2, 0), 8)] if len(dims) >= 3 else None


@rule("col2im")
def _col2im(input, image_shape, block_shape, **_):  # noqa: A002
    blk = max(_prod(_ints(block_shape)), 1)
    return [(input.shape[0] * (input.shape[1] // blk) * _prod(_ints(image_shape)), 8)]


@rule("conv", "max_pool", "average_pool", "lp_pool")
def _conv(X, *rest, pads=None, **_):
    """The padded input (what the reference materializes)."""
    nd = X.ndim - 2
    if not pads or len(pads) != 2 * nd or nd < 1:
        return None
    dims = list(X.shape[:2]) + [X.shape[2 + i] + int(pads[i]) + int(pads[i + nd]) for i in range(nd)]
    return [(_prod(dims), 8)]


@rule("conv_transpose")
def _conv_transpose(X, W, B=None, output_shape=None, strides=None, dilations=None, group=1, **_):
    nd = X.ndim - 2
    if nd < 1 or W.ndim != X.ndim:
        return None
    st = list(strides) if strides else [1] * nd
    dil = list(dilations) if dilations else [1] * nd
    full = [(X.shape[2 + i] - 1) * int(st[i]) + (W.shape[2 + i] - 1) * int(dil[i]) + 1 for i in range(nd)]
    if output_shape is not None:
        full = [max(a, int(b)) for a, b in zip(full, list(output_shape)[-nd:])]
    return [(X.shape[0] * W.shape[1] * int(group) * _prod(full), 8)]


@rule("gather")
def _gather(data, indices, axis=0, **_):
    r = data.ndim
    a = axis + r if axis < 0 else axis
    if not 0 <= a < r:
        return None
    return [(np.asarray(indices).size * _prod(data.shape[:a] + data.shape[a + 1:]), _isz(data))]


@rule("matmul", "matmul_integer")
def _matmul(A, B, *_, **__):
    if A.ndim < 2 or B.ndim < 2:
        return None
    batch = _bcast([tuple(A.shape[:-2]), tuple(B.shape[:-2])])
    return None if batch is None else [(_prod(batch) * A.shape[-2] * B.shape[-1], 8)]


@rule("gemm")
def _gemm(A, B, C=None, transA=0, transB=0, **_):
    if A.ndim != 2 or B.ndim != 2:
        return None
    m = A.shape[1] if transA else A.shape[0]
    n = B.shape[0] if transB else B.shape[1]
    return [(m * n, 8)]


# ----------------------------------------------------------------------------- broadcasting ops
_MULTI: frozenset[str] | None = None


def _multidirectional() -> frozenset[str]:
    global _MULTI
    if _MULTI is None:
        try:
            from ..table.loader import load_tables

            _MULTI = frozenset(o.id for o in load_tables().ops.values() if o.broadcast == "multidirectional")
        except Exception:  # noqa: BLE001 - no tables: no broadcast predictions
            _MULTI = frozenset()
    return _MULTI


def predict(op: str, args: list[Any], kwargs: dict[str, Any]) -> list[tuple[int, int | None]] | None:
    fn = RULES.get(op)
    try:
        if fn is not None:
            return fn(*args, **{k: v for k, v in kwargs.items() if not callable(v)})
        if op in _multidirectional():
            arrays = [a for a in args if isinstance(a, np.ndarray)]
            if len(arrays) >= 2:
                out = _bcast([tuple(a.shape) for a in arrays])
                if out is not None:
                    return [(_prod(out), max((_isz(a) or 8) for a in arrays))]
    except OpbridgeError:
        raise
    except Exception:  # noqa: BLE001 - the op itself reports malformed arguments
        return None
    return None
