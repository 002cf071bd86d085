"""Convolutions (N-D, grouped, dilated), their quantized / deformable / transposed forms, col2im."""
from __future__ import annotations

import itertools
import math

import numpy as np

from . import reference


def _conv_pads(in_sp, k_sp, strides, dilations, pads, auto_pad) -> list[int]:
    """Explicit [begins..., ends...] pads for Conv-style auto_pad (output = ceil(in / stride))."""
    nd = len(in_sp)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for i in range(nd):
            out = -(-in_sp[i] // strides[i])
            total = max((out - 1) * strides[i] + (k_sp[i] - 1) * dilations[i] + 1 - in_sp[i], 0)
            small = total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else total - small)
            ends.append(total - begins[-1])
        return begins + ends
    if auto_pad == "VALID" or pads is None:
        return [0] * (2 * nd)
    return list(pads)


#: inputs larger than this are convolved one batch element at a time (the padded copy and
#: the products' temporaries of an 800x800 feature map are hundreds of MB each in float64)
_CHUNK_BYTES = 1 << 27


def _conv_float(x, w, strides, pads, dilations, group):
    """Cross-correlation of x (N, C, *S) with w (M, C/group, *K), float64 or int64 math."""
    if x.shape[0] > 1 and x.nbytes > _CHUNK_BYTES:
        return np.concatenate([_conv_float(x[i:i + 1], w, strides, pads, dilations, group) for i in range(x.shape[0])])
    nd = x.ndim - 2
    k_sp = w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    out_sp = [(xp.shape[2 + i] - dilations[i] * (k_sp[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    n, c, m = x.shape[0], x.shape[1], w.shape[0]
    if group < 1 or c % group or m % group or w.shape[1] * group != c:
        raise ValueError(f"group {group} does not fit {c} input channels and weights of shape {tuple(w.shape)}")
    if any(s < 1 for s in strides) or any(d < 1 for d in dilations):
        raise ValueError(f"strides {list(strides)} and dilations {list(dilations)} must be positive")
    cg, mg = c // group, m // group
    y = np.zeros((n, group, mg, *out_sp), dtype=np.result_type(x.dtype, w.dtype))
    xg = xp.reshape(n, group, cg, *xp.shape[2:])
    wg = w.reshape(group, mg, cg, *k_sp)
    for kpos in np.ndindex(*k_sp):  # one product per kernel position, every group at once
        window = tuple(slice(kpos[i] * dilations[i], kpos[i] * dilations[i] + strides[i] * (out_sp[i] - 1) + 1,
                             strides[i]) for i in range(nd))
        patch = xg[(slice(None), slice(None), slice(None)) + window]  # (N, G, cg, *out)
        # optimize: a matrix product (BLAS) per group instead of einsum's own loops (7x here)
        y += np.einsum("ngc...,gmc->ngm...", patch, wg[(Ellipsis,) + kpos], optimize=True)
    return y.reshape(n, m, *out_sp)


def _conv_int(xi, wi, strides, pads, dilations, group):
    """``_conv_float`` of int64 operands; in float64 (faster kernels) when every partial sum is
    an integer below 2^53, so the result is exact either way."""
    reach = float(np.abs(xi).max(initial=0)) * float(np.abs(wi).max(initial=0)) * max(wi[:1].size, 1)
    if reach < 2.0 ** 53:
        xf = xi.astype(np.float64)
        del xi  # the caller's int64 copy is its own; this frame's reference goes before the products
        y = _conv_float(xf, wi.astype(np.float64), strides, pads, dilations, group)
        return np.rint(y).astype(np.int64)
    return _conv_float(xi, wi, strides, pads, dilations, group)


def _defaults(x, w, strides, dilations, pads, auto_pad):
    nd = x.ndim - 2
    strides = list(strides) if strides else [1] * nd
    dilations = list(dilations) if dilations else [1] * nd
    pads = _conv_pads(x.shape[2:], w.shape[2:], strides, dilations, pads, auto_pad)
    return strides, dilations, pads


@reference("conv")
def conv(X, W, B=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    strides, dilations, pads = _defaults(X, W, strides, dilations, pads, auto_pad)
    y = _conv_float(X.astype(np.float64), W.astype(np.float64), strides, pads, dilations, group)
    if B is not None:
        y += B.astype(np.float64).reshape((1, -1) + (1,) * (X.ndim - 2))
    return y.astype(X.dtype)


def _zero_point(zp, nd_out: int):
    """A scalar or per-output-channel zero point, shaped to broadcast over (M, C/g, *K)."""
    if zp is None:
        return np.int64(0)
    zp = np.asarray(zp).astype(np.int64)
    return zp.reshape((-1,) + (1,) * (nd_out - 1)) if zp.ndim == 1 and zp.size > 1 else zp.reshape(())


@reference("conv_integer")
def conv_integer(x, w, x_zero_point=None, w_zero_point=None, auto_pad="NOTSET", dilations=None, group=1,
                 kernel_shape=None, pads=None, strides=None):
    strides, dilations, pads = _defaults(x, w, strides, dilations, pads, auto_pad)
    xi = x.astype(np.int64) - _zero_point(x_zero_point, 1)
    wi = w.astype(np.int64) - _zero_point(w_zero_point, w.ndim)
    return _conv_int(xi, wi, strides, pads, dilations, group).astype(np.int32)


@reference("qlinear_conv")
def qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None,
                 auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    strides, dilations, pads = _defaults(x, w, strides, dilations, pads, auto_pad)
    nd = x.ndim - 2
    xi = x.astype(np.int64) - _zero_point(x_zero_point, 1)
    wi = w.astype(np.int64) - _zero_point(w_zero_point, w.ndim)
    acc = _conv_int(xi, wi, strides, pads, dilations, group)
    if B is not None:
        acc = acc + B.astype(np.int64).reshape((1, -1) + (1,) * nd)
    ws = np.asarray(w_scale, dtype=np.float64).reshape(-1)
    ws = ws.reshape((1, -1) + (1,) * nd) if ws.size > 1 else ws.reshape(())
    real = acc * (float(np.asarray(x_scale)) * ws) / float(np.asarray(y_scale))
    q = np.rint(real) + int(np.asarray(y_zero_point))
    info = np.iinfo(y_zero_point.dtype)
    return np.clip(q, info.min, info.max).astype(y_zero_point.dtype)


def _transpose_geometry(in_sp, k_sp, strides, dilations, out_pad, pads, auto_pad, output_shape):
    """(full, begins, out): the uncropped output size, the crop start and the output size."""
    nd = len(in_sp)
    full = [strides[i] * (in_sp[i] - 1) + out_pad[i] + (k_sp[i] - 1) * dilations[i] + 1 for i in range(nd)]
    if output_shape is None and auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        p = list(pads) if pads and auto_pad != "VALID" else [0] * (2 * nd)
        return full, p[:nd], [full[i] - p[i] - p[i + nd] for i in range(nd)]
    out = list(output_shape)[-nd:] if output_shape is not None else [in_sp[i] * strides[i] for i in range(nd)]
    total = [full[i] - out[i] for i in range(nd)]
    begins = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    return full, begins, out


@reference("conv_transpose")
def conv_transpose(X, W, B=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None,
                   output_padding=None, output_shape=None, pads=None, strides=None):
    nd = X.ndim - 2
    in_sp, k_sp = X.shape[2:], W.shape[2:]
    strides = list(strides) if strides else [1] * nd
    dilations = list(dilations) if dilations else [1] * nd
    out_pad = list(output_padding) if output_padding else [0] * nd
    full, begins, out_sp = _transpose_geometry(in_sp, k_sp, strides, dilations, out_pad, pads, auto_pad, output_shape)
    n, c = X.shape[:2]
    cg, mg = c // group, W.shape[1]
    x, w = X.astype(np.float64), W.astype(np.float64)
    y = np.zeros((n, mg * group, *full))
    for g in range(group):  # every input pixel scatters kernel * value onto the output
        for kpos in np.ndindex(*k_sp):
            contrib = np.einsum("nc...,cm->nm...", x[:, g * cg:(g + 1) * cg], w[g * cg:(g + 1) * cg][(Ellipsis,) + kpos])
            window = tuple(slice(kpos[i] * dilations[i], kpos[i] * dilations[i] + strides[i] * (in_sp[i] - 1) + 1,
                                 strides[i]) for i in range(nd))
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + window] += contrib
    # crop to the output window (zero-extending first where pads are negative)
    lo = [min(b, 0) for b in begins]
    hi = [max(begins[i] + out_sp[i] - full[i], 0) for i in range(nd)]
    y = np.pad(y, [(0, 0), (0, 0)] + [(-lo[i], hi[i]) for i in range(nd)])
    y = y[(Ellipsis,) + tuple(slice(begins[i] - lo[i], begins[i] - lo[i] + out_sp[i]) for i in range(nd))]
    if B is not None:
        y = y + B.astype(np.float64).reshape((1, -1) + (1,) * nd)
    return y.astype(X.dtype)


def _sample_linear(img, coords):
    """N-linear interpolation of img (C, *S) at float coords (nd arrays of one shape); 0 outside."""
    nd = len(coords)
    base = [np.floor(c) for c in coords]
    out = np.zeros((img.shape[0],) + coords[0].shape)
    for corner in itertools.product((0, 1), repeat=nd):
        idx = [(base[i] + corner[i]).astype(np.int64) for i in range(nd)]
        weight = np.ones(coords[0].shape)
        valid = np.ones(coords[0].shape, dtype=bool)
        for i in range(nd):
            frac = coords[i] - base[i]
            weight = weight * (frac if corner[i] else 1.0 - frac)
            valid &= (idx[i] >= 0) & (idx[i] < img.shape[1 + i])
        safe = tuple(np.where(valid, idx[i], 0) for i in range(nd))
        out += img[(slice(None),) + safe] * (weight * valid)
    return out


@reference("deform_conv")
def deform_conv(X, W, offset, B=None, mask=None, dilations=None, group=1, kernel_shape=None, offset_group=1,
                pads=None, strides=None):
    nd = X.ndim - 2
    n, c = X.shape[:2]
    m, k_sp = W.shape[0], W.shape[2:]
    strides = list(strides) if strides else [1] * nd
    dilations = list(dilations) if dilations else [1] * nd
    pads = list(pads) if pads else [0] * (2 * nd)
    out_sp = [(X.shape[2 + i] + pads[i] + pads[i + nd] - dilations[i] * (k_sp[i] - 1) - 1) // strides[i] + 1
              for i in range(nd)]
    nk = math.prod(k_sp)
    x = X.astype(np.float64)
    off = offset.astype(np.float64).reshape(n, offset_group, nk, nd, *out_sp)
    msk = (np.ones((n, offset_group, nk, *out_sp)) if mask is None
           else mask.astype(np.float64).reshape(n, offset_group, nk, *out_sp))
    grid = np.meshgrid(*[np.arange(o) for o in out_sp], indexing="ij")
    cols = np.zeros((n, c, nk, *out_sp))  # sampled input for every kernel tap and output position
    cpo = c // offset_group
    for b in range(n):
        for og in range(offset_group):
            img = x[b, og * cpo:(og + 1) * cpo]
            for ki, kpos in enumerate(np.ndindex(*k_sp)):
                coords = [grid[i] * strides[i] - pads[i] + kpos[i] * dilations[i] + off[b, og, ki, i]
                          for i in range(nd)]
                cols[b, og * cpo:(og + 1) * cpo, ki] = _sample_linear(img, coords) * msk[b, og, ki]
    cg, mg = c // group, m // group
    w = W.astype(np.float64).reshape(m, cg, nk)
    y = np.zeros((n, m, *out_sp))
    for g in range(group):
        y[:, g * mg:(g + 1) * mg] = np.einsum("nck...,mck->nm...", cols[:, g * cg:(g + 1) * cg], w[g * mg:(g + 1) * mg])
    if B is not None:
        y += B.astype(np.float64).reshape((1, -1) + (1,) * nd)
    return y.astype(X.dtype)


@reference("col2im")
def col2im(input, image_shape, block_shape, dilations=None, pads=None, strides=None):
    img = [int(v) for v in image_shape]
    blk = [int(v) for v in block_shape]
    nd = len(img)
    strides = list(strides) if strides else [1] * nd
    dilations = list(dilations) if dilations else [1] * nd
    pads = list(pads) if pads else [0] * (2 * nd)
    n = input.shape[0]
    c = input.shape[1] // math.prod(blk)
    padded = [img[i] + pads[i] + pads[i + nd] for i in range(nd)]
    nblocks = [(padded[i] - dilations[i] * (blk[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    cols = input.astype(np.float64).reshape(n, c, math.prod(blk), *nblocks)
    y = np.zeros((n, c, *padded))
    for ki, kpos in enumerate(np.ndindex(*blk)):
        window = tuple(slice(kpos[i] * dilations[i], kpos[i] * dilations[i] + strides[i] * (nblocks[i] - 1) + 1,
                             strides[i]) for i in range(nd))
        y[(slice(None), slice(None)) + window] += cols[:, :, ki]
    y = y[(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + img[i]) for i in range(nd))]
    return y.astype(input.dtype)


@reference("causal_conv_with_state")
def causal_conv_with_state(input, weight, bias=None, past_state=None, activation="none"):
    b, c, length = input.shape
    k = weight.shape[-1]
    past = np.zeros((b, c, k - 1)) if past_state is None else past_state.astype(np.float64)
    full = np.concatenate([past, input.astype(np.float64)], axis=2)  # (B, C, k - 1 + L)
    w = weight.astype(np.float64).reshape(c, k)
    y = np.zeros((b, c, length))
    for j in range(k):
        y += full[:, :, j:j + length] * w[None, :, j:j + 1]
    if bias is not None:
        y += bias.astype(np.float64)[None, :, None]
    if activation in ("silu", "swish"):
        y = y / (1.0 + np.exp(-y))
    present = full[:, :, full.shape[2] - (k - 1):]
    return y.astype(input.dtype), present.astype(input.dtype)
