"""Image / geometry ops: resize, upsample, grid_sample, affine_grid, roi pools, NMS, center_crop_pad."""
from __future__ import annotations

import itertools
import math

import numpy as np

from . import reference
from .misc import is_float


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _cast_back(y, dtype):
    if is_float(dtype):
        return y.astype(dtype)
    info = np.iinfo(dtype)
    return np.clip(np.rint(y), info.min, info.max).astype(dtype)


# ---------------------------------------------------------------- resize

def _cubic(s, a):
    s = np.abs(s)
    return np.where(s <= 1, ((a + 2) * s - (a + 3)) * s * s + 1,
                    np.where(s < 2, ((a * s - 5 * a) * s + 8 * a) * s - 4 * a, 0.0))


def _source_coord(i, in_len, out_len, scale, mode, roi_start, roi_end):
    """Output index i (array) -> fractional input coordinate, per coordinate_transformation_mode.

    ``length_resized`` of the ONNX formulas is the fractional ``in_len * scale`` (what the
    ONNX test data uses with ``scales``); it equals ``out_len`` when ``sizes`` is given."""
    resized = in_len * scale
    if mode == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adjustment = out_len / (scale * in_len)
        offset = in_len / 2 * (1 - adjustment)
        return offset + (i + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if resized > 1 else np.zeros_like(i)
    if mode == "align_corners":
        return i * (in_len - 1) / (resized - 1) if resized > 1 else np.zeros_like(i)
    if mode == "asymmetric":
        return i / scale
    if mode == "tf_crop_and_resize":
        if resized > 1:
            return roi_start * (in_len - 1) + i * (roi_end - roi_start) * (in_len - 1) / (resized - 1)
        return np.full(i.shape, 0.5 * (roi_start + roi_end) * (in_len - 1))
    raise ValueError(f"resize: unknown coordinate_transformation_mode {mode!r}")


def _nearest(x, nearest_mode):
    if nearest_mode == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if nearest_mode == "floor":
        return np.floor(x)
    if nearest_mode == "ceil":
        return np.ceil(x)
    return np.ceil(x - 0.5)  # round_prefer_floor: halves go down


def _axis_weights(in_len, out_len, scale, roi_start, roi_end, mode, ctm, nearest_mode, cubic_a,
                  antialias, exclude_outside):
    """(out_len, in_len) interpolation matrix for one axis, and the mask of outputs that
    fall outside the input (only tf_crop_and_resize extrapolates)."""
    # coordinates in float32, as runtimes compute them: decides exact ties for "nearest"
    f32 = np.float32
    i = np.arange(out_len, dtype=f32)
    x = _source_coord(i, in_len, out_len, f32(scale), ctm, f32(roi_start), f32(roi_end)).astype(np.float64)
    outside = (x < 0) | (x > in_len - 1) if ctm == "tf_crop_and_resize" else np.zeros(out_len, dtype=bool)
    m = np.zeros((out_len, in_len))
    if mode == "nearest":
        idx = np.clip(_nearest(x, nearest_mode), 0, in_len - 1).astype(np.int64)
        m[np.arange(out_len), idx] = 1.0
        return m, outside
    support = 1.0 if mode == "linear" else 2.0
    fs = min(scale, 1.0) if antialias else 1.0  # antialias stretches the filter when shrinking
    reach = int(math.ceil(support / fs)) + 1
    for o in range(out_len):
        taps = np.arange(math.floor(x[o]) - reach, math.floor(x[o]) + reach + 1)
        d = (taps - x[o]) * fs
        w = np.maximum(1.0 - np.abs(d), 0.0) if mode == "linear" else _cubic(d, cubic_a) * (np.abs(d) < 2)
        w = w / w.sum()
        if exclude_outside:
            w = np.where((taps >= 0) & (taps < in_len), w, 0.0)
            w = w / w.sum()
        np.add.at(m[o], np.clip(taps, 0, in_len - 1), w)
    return m, outside


def _resize_plan(in_sz, scales, sizes, policy):
    """(scales, output sizes) of the resized axes."""
    n = len(in_sz)
    if sizes is None or not np.asarray(sizes).size:
        sc = [float(v) for v in np.asarray(scales).reshape(-1)]
        return sc, [int(math.floor(in_sz[k] * sc[k])) for k in range(n)]
    want = [int(v) for v in np.asarray(sizes).reshape(-1)]
    if policy == "stretch":
        return [want[k] / in_sz[k] for k in range(n)], want
    s = (min if policy == "not_larger" else max)(want[k] / in_sz[k] for k in range(n))
    return [s] * n, [int(math.floor(s * in_sz[k] + 0.5)) for k in range(n)]  # round half up


@reference("resize")
def resize(X, roi=None, scales=None, sizes=None, antialias=0, axes=None, coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, keep_aspect_ratio_policy="stretch",
           mode="nearest", nearest_mode="round_prefer_floor"):
    """Separable: one (out, in) weight matrix per resized axis.

    With ``scales`` the output size is ``floor(in * scale)`` for every mode, including
    tf_crop_and_resize (what onnxruntime and the ONNX reference do; the spec text's
    ``floor(in * (roi_end - roi_start) * scale)`` is not what runtimes produce)."""
    rank = X.ndim
    axes = list(range(rank)) if axes is None else [_axis(a, rank) for a in axes]
    n = len(axes)
    in_sz = [X.shape[a] for a in axes]
    roi_v = (np.asarray(roi, dtype=np.float64).reshape(-1) if roi is not None and np.asarray(roi).size
             else np.array([0.0] * n + [1.0] * n))
    sc, out_sz = _resize_plan(in_sz, scales, sizes, keep_aspect_ratio_policy)
    y = X.astype(np.float64)
    outside = np.zeros((1,) * rank, dtype=bool)  # broadcastable: any axis sampled out of range
    for k, a in enumerate(axes):
        m, out_mask = _axis_weights(in_sz[k], out_sz[k], sc[k], roi_v[k], roi_v[n + k], mode,
                                    coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
                                    antialias, exclude_outside)
        y = np.moveaxis(np.tensordot(m, y, axes=([1], [a])), 0, a)
        shape = [1] * rank
        shape[a] = out_sz[k]
        outside = outside | out_mask.reshape(shape)
    y = np.where(outside, extrapolation_value, y)
    return _cast_back(y, X.dtype)


@reference("upsample")
def upsample(X, scales, mode="nearest"):
    sc = [float(v) for v in np.asarray(scales).reshape(-1)]
    if mode == "nearest":
        return resize(X, scales=np.array(sc), mode="nearest", coordinate_transformation_mode="asymmetric",
                      nearest_mode="floor")
    return resize(X, scales=np.array(sc), mode="linear", coordinate_transformation_mode="asymmetric")


# ---------------------------------------------------------------- grid sampling

def _reflect(x, lo, hi):
    """Reflect coordinates into [lo, hi] as many times as needed."""
    span = hi - lo
    if span <= 0:
        return np.zeros_like(x)
    d = np.abs(x - lo)
    flips = np.floor(d / span)
    extra = d - flips * span
    return np.where(flips % 2 == 0, lo + extra, hi - extra)


def _grid_taps(x, idx, padding_mode, bounds):
    """Values of x (N, C, *S) at integer taps idx (one int array (N, *out) per spatial dim),
    resolved by the padding mode: zeros outside, clamped (border) or reflected."""
    nd = len(idx)
    sizes = x.shape[2:]
    valid = np.ones(idx[0].shape, dtype=bool)
    safe = []
    for i, t in enumerate(idx):
        if padding_mode == "border":
            t = np.clip(t, 0, sizes[i] - 1)
        elif padding_mode == "reflection":
            t = np.clip(np.rint(_reflect(t.astype(np.float64), *bounds[i])), 0, sizes[i] - 1).astype(np.int64)
        valid &= (t >= 0) & (t < sizes[i])
        safe.append(np.clip(t, 0, sizes[i] - 1))
    n_idx = np.arange(x.shape[0]).reshape((-1,) + (1,) * nd)
    vals = np.moveaxis(x[(n_idx, slice(None)) + tuple(safe)], -1, 1)  # (N, C, *out)
    return vals * np.expand_dims(valid, 1)


@reference("grid_sample")
def grid_sample(X, grid, align_corners=0, mode="linear", padding_mode="zeros"):
    """Nearest rounds halves to even; linear / nearest first move the sampling point by the
    padding mode, cubic (A = -0.75) resolves each of its 4^r taps by the padding mode."""
    nd = X.ndim - 2
    sizes = X.shape[2:]
    x = X.astype(np.float64)
    # grid's last axis lists coordinates innermost-first (x = W, y = H, z = D): unnormalize
    g = [grid[..., nd - 1 - i].astype(np.float64) for i in range(nd)]
    coords = [(c + 1) / 2 * (L - 1) if align_corners else ((c + 1) * L - 1) / 2 for c, L in zip(g, sizes)]
    bounds = [(0.0, L - 1.0) if align_corners else (-0.5, L - 0.5) for L in sizes]
    if mode != "cubic" and padding_mode == "border":
        coords = [np.clip(c, 0, L - 1) for c, L in zip(coords, sizes)]
    elif mode != "cubic" and padding_mode == "reflection":
        coords = [np.clip(_reflect(c, *b), 0, L - 1) for c, b, L in zip(coords, bounds, sizes)]
    if mode == "nearest":
        return _cast_back(_grid_taps(x, [np.rint(c).astype(np.int64) for c in coords], padding_mode, bounds),
                          X.dtype)
    base = [np.floor(c) for c in coords]
    offsets = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
    y = 0.0
    for offs in itertools.product(offsets, repeat=nd):
        w = np.ones(coords[0].shape)
        for i in range(nd):
            d = coords[i] - (base[i] + offs[i])
            w = w * (np.maximum(1.0 - np.abs(d), 0.0) if mode == "linear" else _cubic(d, -0.75))
        taps = [(base[i] + offs[i]).astype(np.int64) for i in range(nd)]
        y = y + _grid_taps(x, taps, padding_mode, bounds) * np.expand_dims(w, 1)
    return _cast_back(np.asarray(y), X.dtype)


@reference("affine_grid")
def affine_grid(theta, size, align_corners=0):
    dims = [int(v) for v in np.asarray(size).reshape(-1)]
    n, spatial = dims[0], dims[2:]
    nd = len(spatial)

    def base(L):
        if align_corners:
            return np.linspace(-1.0, 1.0, L) if L > 1 else np.zeros(1)
        return (np.arange(L) * 2.0 + 1.0) / L - 1.0

    mesh = np.meshgrid(*[base(L) for L in spatial], indexing="ij")  # per spatial dim (D, H, W order)
    homog = np.stack([m for m in reversed(mesh)] + [np.ones(mesh[0].shape)], axis=-1)  # (..., x, y, z, 1)
    out = np.einsum("...j,nij->n...i", homog, theta.astype(np.float64))
    return out.reshape((n, *spatial, nd)).astype(theta.dtype)


# ---------------------------------------------------------------- region ops

def _bilinear_terms(img, y, x):
    """RoiAlign's sampling: the four weighted corner terms (C, 4) at (y, x); zeros outside."""
    H, W = img.shape[1:]
    if y < -1.0 or y > H or x < -1.0 or x > W:
        return np.zeros((img.shape[0], 4))
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= H - 1:
        y0 = y1 = H - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= W - 1:
        x0 = x1 = W - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1.0 - ly, 1.0 - lx
    return np.stack([hy * hx * img[:, y0, x0], hy * lx * img[:, y0, x1],
                     ly * hx * img[:, y1, x0], ly * lx * img[:, y1, x1]], axis=1)


@reference("roi_align")
def roi_align(X, rois, batch_indices, coordinate_transformation_mode="half_pixel", mode="avg", output_height=1,
              output_width=1, sampling_ratio=0, spatial_scale=1.0):
    """Max mode follows the ONNX reference behaviour: the maximum over the individual
    weighted corner terms of all samples in a bin (not over interpolated values)."""
    x = X.astype(np.float64)
    C = X.shape[1]
    shift = 0.5 if coordinate_transformation_mode == "half_pixel" else 0.0
    out = np.zeros((rois.shape[0], C, output_height, output_width))
    for r, roi in enumerate(rois.astype(np.float64)):
        img = x[int(batch_indices[r])]
        x1, y1, x2, y2 = roi * spatial_scale - shift
        rw, rh = x2 - x1, y2 - y1
        if coordinate_transformation_mode != "half_pixel":
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / output_height, rw / output_width
        gh = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rh / output_height))
        gw = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rw / output_width))
        count = max(gh * gw, 1)
        for ph in range(output_height):
            for pw in range(output_width):
                terms = [_bilinear_terms(img, y1 + ph * bh + (iy + 0.5) * bh / gh, x1 + pw * bw + (ix + 0.5) * bw / gw)
                         for iy in range(gh) for ix in range(gw)]
                if mode == "avg":
                    out[r, :, ph, pw] = sum(t.sum(axis=1) for t in terms) / count
                else:
                    out[r, :, ph, pw] = np.max(np.concatenate(terms, axis=1), axis=1) if terms else 0.0
    return out.astype(X.dtype)


def _round_half_away(v: float) -> int:
    return int(math.floor(v + 0.5)) if v >= 0 else -int(math.floor(-v + 0.5))


@reference("max_roi_pool")
def max_roi_pool(X, rois, pooled_shape, spatial_scale=1.0):
    ph_n, pw_n = pooled_shape
    N, C, H, W = X.shape
    out = np.zeros((rois.shape[0], C, ph_n, pw_n), dtype=X.dtype)
    for r, roi in enumerate(np.asarray(rois, dtype=np.float64)):
        b = int(roi[0])
        x1, y1, x2, y2 = (_round_half_away(v * spatial_scale) for v in roi[1:])
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        bh, bw = rh / ph_n, rw / pw_n
        for i in range(ph_n):
            hs = min(max(int(math.floor(i * bh)) + y1, 0), H)
            he = min(max(int(math.ceil((i + 1) * bh)) + y1, 0), H)
            for j in range(pw_n):
                ws = min(max(int(math.floor(j * bw)) + x1, 0), W)
                we = min(max(int(math.ceil((j + 1) * bw)) + x1, 0), W)
                if he > hs and we > ws:
                    out[r, :, i, j] = X[b, :, hs:he, ws:we].max(axis=(1, 2))
    return out


def _corners(box, center_point_box):
    if center_point_box:
        xc, yc, w, h = box
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    y1, x1, y2, x2 = box
    return min(y1, y2), min(x1, x2), max(y1, y2), max(x1, x2)


def _iou(a, b) -> float:
    ih = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    iw = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = ih * iw
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


@reference("non_max_suppression")
def non_max_suppression(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None,
                        center_point_box=0):
    limit = 0 if max_output_boxes_per_class is None else int(np.asarray(max_output_boxes_per_class).reshape(-1)[0])
    iou_t = 0.0 if iou_threshold is None else float(np.asarray(iou_threshold).reshape(-1)[0])
    score_t = None if score_threshold is None else float(np.asarray(score_threshold).reshape(-1)[0])
    selected = []
    for b in range(boxes.shape[0]):
        corners = [_corners([float(v) for v in box], center_point_box) for box in boxes[b]]
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(np.float64)
            order = [int(i) for i in np.argsort(-s, kind="stable") if score_t is None or s[i] > score_t]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if all(_iou(corners[i], corners[k]) <= iou_t for k in kept):
                    kept.append(i)
            selected += [[b, c, i] for i in kept]
    return np.array(selected, dtype=np.int64).reshape(-1, 3)


@reference("center_crop_pad")
def center_crop_pad(input_data, shape, axes=None):
    rank = input_data.ndim
    axes = list(range(rank)) if axes is None else [_axis(a, rank) for a in axes]
    out = input_data
    for a, target in zip(axes, [int(v) for v in np.asarray(shape).reshape(-1)]):
        dim = out.shape[a]
        idx = [slice(None)] * rank
        if target < dim:  # crop, window start rounded down
            start = (dim - target) // 2
            idx[a] = slice(start, start + target)
            out = out[tuple(idx)]
        elif target > dim:  # pad with zeros, the odd extra element goes to the end
            before = (target - dim) // 2
            new_shape = list(out.shape)
            new_shape[a] = target
            padded = np.zeros(new_shape, dtype=out.dtype)
            idx[a] = slice(before, before + dim)
            padded[tuple(idx)] = out
            out = padded
    return out.copy()


@reference("image_decoder")
def image_decoder(encoded_stream, pixel_format="RGB"):
    raise NotImplementedError("image_decoder: no image decoding library (PIL / OpenCV) is available "
                              "in this environment, so the reference cannot decode images")
