"""Python lowerings to TensorFlow: convolution, pooling, resize, normalization, control flow.

Spatial ops arrive channels-last (``N D1 … Dk C``) from the layout pass
(``node.meta["layout"] == "channels_last"``; ``channels_last`` below is the predicate the
pass asks); per-channel ops handle either layout. Geometry (pads, output sizes, resize
weights) follows the NumPy reference's own helpers, evaluated once at conversion time.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from translator.ir import Node

from .tensorflow_ops import both, is_float, lowering, needs_rank, norm_axis, rank_of

SPATIAL_RANKS = {"conv": (3, 4, 5), "conv_transpose": (3, 4, 5), "average_pool": (3, 4, 5), "max_pool": (3, 4, 5),
                 "lp_pool": (3, 4, 5), "depth_to_space": (4,), "space_to_depth": (4,), "lrn": (4,),
                 "resize": (3, 4, 5), "upsample": (3, 4, 5)}


def channels_last(node: Node) -> bool:
    ranks = SPATIAL_RANKS.get(node.op)
    return ranks is not None and rank_of(node, 0) in ranks


def _needs_cl(n: Node) -> tuple[str, str] | None:
    r = rank_of(n, 0)
    if r not in SPATIAL_RANKS.get(n.op, ()):
        return "rank_limit", f"TensorFlow runs {n.op} on rank {SPATIAL_RANKS[n.op]} (channels-last); input has rank {r}"
    return None


def _static_spatial(n: Node) -> tuple[str, str] | None:
    x = n.inputs[0]
    s = None if x is None else x.type.shape
    if s is None or not all(isinstance(d, int) for d in s[1:]):
        return "dynamic_shape", "needs static spatial dimensions"
    return None


def _float_only(n: Node) -> tuple[str, str] | None:
    d = n.inputs[0].type.dtype if n.inputs[0] is not None else None
    if d is not None and not is_float(d):
        return "unsupported_dtype", f"TensorFlow {n.op} takes floating-point inputs; the input is {d}"
    return None


def _spatial_shape(c: Any) -> list[int]:
    """The spatial dims of input 0 (channels-last: dims 1..r-2)."""
    s = c.static_shape(0)
    return list(s[1:-1]) if c.channels_last else list(s[2:])


def _ints(v: Any, n: int, default: int) -> list[int]:
    return [int(x) for x in v] if v else [default] * n


def _check_cl(c: Any) -> None:
    if not c.channels_last:
        c.unsupported("rank_limit", "TensorFlow runs this op channels-last; the layout pass did not place it so")


# ----------------------------------------------------------------------------- convolution
def _conv_pads(c: Any, k_sp: list[int], strides: list[int], dil: list[int]) -> list[int]:
    from translator.reference.conv import _conv_pads as ref_pads

    auto = c.attr("auto_pad", "NOTSET")
    nd = len(k_sp)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        return ref_pads(_spatial_shape(c), k_sp, strides, dil, None, auto)
    pads = c.attr("pads")
    return [int(p) for p in pads] if pads and auto != "VALID" else [0] * (2 * nd)


def _is_same_upper(c: Any, k_sp: list[int], strides: list[int], dil: list[int]) -> bool:
    """Explicit pads that are exactly TensorFlow's SAME (extra padding at the end)."""
    from translator.reference.conv import _conv_pads as ref_pads

    pads = c.attr("pads")
    s = c.shape(0)
    if not pads or not any(pads) or s is None:
        return False
    spatial = list(s[1:-1]) if c.channels_last else list(s[2:])
    if not all(isinstance(d, int) for d in spatial):
        return False
    return [int(p) for p in pads] == ref_pads(spatial, k_sp, strides, dil, None, "SAME_UPPER")


def _pad_input(c: Any, x: str, pads: list[int], nd: int, value: str | None = None) -> tuple[list[str], str]:
    if not any(pads):
        return [], x
    widths = [[0, 0]] + [[pads[i], pads[i + nd]] for i in range(nd)] + [[0, 0]]
    name = c.tmp("padded")
    cv = f", constant_values={value}" if value is not None else ""
    return [f"{name} = tf.pad({x}, {c.lit(widths)}{cv})"], name


def _kernel_shape(c: Any, k: int = 1) -> list[int]:
    ks = c.attr("kernel_shape")
    if ks:
        return [int(v) for v in ks]
    w = c.static_shape(k)
    return list(w[2:])


def _filter(c: Any, k: int, perm: list[int]) -> str:
    """Input ``k`` (a filter) transposed by ``perm``: folded at conversion time when constant."""
    w = c.const(k)
    if w is not None:
        return c.weight(np.ascontiguousarray(np.asarray(w).transpose(perm)), f"{c.node.name}_filter")
    return f"tf.transpose({c.i(k)}, {c.lit(perm)})"


def _subsample(c: Any, x: str, strides: list[int], nd: int) -> str:
    parts = [":"] + [f"::{s}" for s in strides] + [":"]
    return f"{x}[{', '.join(parts)}]"


@lowering("conv", accepts=both(_needs_cl, _float_only, needs_rank(1)))
def conv(c: Any) -> list[str]:
    _check_cl(c)
    r = c.rank(0)
    nd = r - 2
    k_sp = _kernel_shape(c)
    strides = _ints(c.attr("strides"), nd, 1)
    dil = _ints(c.attr("dilations"), nd, 1)
    group = int(c.attr("group", 1))
    auto = c.attr("auto_pad", "NOTSET")
    lines: list[str] = []
    x = c.i(0)
    if auto == "SAME_UPPER" or (auto == "NOTSET" and _is_same_upper(c, k_sp, strides, dil)):
        padding = "SAME"
    else:
        pads = _conv_pads(c, k_sp, strides, dil)
        more, x = _pad_input(c, x, pads, nd)
        lines += more
        padding = "VALID"
    both_sd = any(s > 1 for s in strides) and any(d > 1 for d in dil)
    run_strides = [1] * nd if both_sd else strides
    y = c.tmp("conv")
    w = c.const(1)
    if nd == 2 and group > 1 and w is not None and w.shape[1] == 1:  # depthwise: one filter set per input channel
        # (C·m, 1, kh, kw) -> (kh, kw, C, m): output channel c·m + k reads input channel c, as in ONNX
        dw = np.ascontiguousarray(np.asarray(w).reshape(group, w.shape[0] // group, *w.shape[2:]).transpose(2, 3, 0, 1))
        filt = c.weight(dw, f"{c.node.name}_filter")
        lines.append(f"{y} = tf.nn.depthwise_conv2d({x}, {filt}, strides={[1, *run_strides, 1]}, "
                     f"padding={c.lit(padding)}, dilations={dil})")
    elif group == 1 or nd == 2 or (nd == 1 and group > 1):
        filt = _filter(c, 1, [*range(2, r), 1, 0])  # (M, C/g, *k) -> (*k, C/g, M)
        lines.append(f"{y} = tf.nn.convolution({x}, {filt}, strides={run_strides}, padding={c.lit(padding)}, "
                     f"dilations={dil})")
    else:  # grouped 3-D convolution: one per group
        filt = _filter(c, 1, [*range(2, r), 1, 0])
        xs, ws = c.tmp("xs"), c.tmp("ws")
        lines += [f"{xs} = tf.split({x}, {group}, axis=-1)", f"{ws} = tf.split({filt}, {group}, axis=-1)",
                  f"{y} = tf.concat([tf.nn.convolution(a, b, strides={run_strides}, padding={c.lit(padding)}, "
                  f"dilations={dil}) for a, b in zip({xs}, {ws})], axis=-1)"]
    if both_sd:
        y2 = c.tmp("strided")
        lines.append(f"{y2} = {_subsample(c, y, strides, nd)}")
        y = y2
    lines.append(f"{c.o()} = {y} + {c.i(2)}" if c.has(2) else f"{c.o()} = {y}")
    return lines


def _dilate_filter(c: Any, w: str, shape: list[int], dil: list[int]) -> tuple[list[str], str, list[int]]:
    """Insert zeros between the taps of a (*k, out, in) filter (TensorFlow's CPU kernels lack dilation here)."""
    lines: list[str] = []
    for i, d in enumerate(dil):
        if d == 1:
            continue
        k = shape[i]
        name = c.tmp(f"dil{i}")
        pads = [[0, 0]] * (len(shape) + 1)
        pads[i + 1] = [0, d - 1]
        new_shape = list(shape)
        new_shape[i] = k * d
        cut = [":"] * len(shape)
        cut[i] = f":{(k - 1) * d + 1}"
        lines.append(f"{name} = tf.reshape(tf.pad(tf.expand_dims({w}, {i + 1}), {c.lit(pads)}), "
                     f"{c.lit(new_shape)})[{', '.join(cut)}]")
        shape = list(shape)
        shape[i] = (k - 1) * d + 1
        w = name
    return lines, w, shape


@lowering("conv_transpose", accepts=both(_needs_cl, _float_only, _static_spatial, needs_rank(1)))
def conv_transpose(c: Any) -> list[str]:
    from translator.reference.conv import _transpose_geometry

    _check_cl(c)
    r = c.rank(0)
    nd = r - 2
    w_shape = list(c.static_shape(1))
    k_sp = w_shape[2:]
    strides = _ints(c.attr("strides"), nd, 1)
    dil = _ints(c.attr("dilations"), nd, 1)
    out_pad = _ints(c.attr("output_padding"), nd, 0)
    group = int(c.attr("group", 1))
    in_sp = _spatial_shape(c)
    full, begins, out_sp = _transpose_geometry(in_sp, k_sp, strides, dil, out_pad, c.attr("pads"),
                                               c.attr("auto_pad", "NOTSET"), c.attr("output_shape"))
    m = w_shape[1] * group
    lines: list[str] = []
    filt = _filter(c, 1, [*range(2, r), 1, 0])  # (C, M/g, *k) -> (*k, M/g, C)
    fshape = k_sp + [w_shape[1], w_shape[0]]
    more, filt, fshape = _dilate_filter(c, filt, fshape, dil)
    lines += more
    n = c.static_shape(0)[0]
    x = c.i(0)
    y = c.tmp("deconv")
    if group == 1:
        lines.append(f"{y} = tf.nn.conv_transpose({x}, {filt}, {c.lit([n] + full + [m])}, strides={strides}, "
                     f"padding='VALID')")
    else:
        xs, ws = c.tmp("xs"), c.tmp("ws")
        lines += [f"{xs} = tf.split({x}, {group}, axis=-1)", f"{ws} = tf.split({filt}, {group}, axis=-1)",
                  f"{y} = tf.concat([tf.nn.conv_transpose(a, b, {c.lit([n] + full + [m // group])}, "
                  f"strides={strides}, padding='VALID') for a, b in zip({xs}, {ws})], axis=-1)"]
    lo = [min(b, 0) for b in begins]
    hi = [max(begins[i] + out_sp[i] - full[i], 0) for i in range(nd)]
    if any(lo) or any(hi):
        y2 = c.tmp("extended")
        lines.append(f"{y2} = tf.pad({y}, {c.lit([[0, 0]] + [[-lo[i], hi[i]] for i in range(nd)] + [[0, 0]])})")
        y = y2
    crop = [":"] + [f"{begins[i] - lo[i]}:{begins[i] - lo[i] + out_sp[i]}" for i in range(nd)] + [":"]
    if any(begins[i] - lo[i] != 0 or out_sp[i] != full[i] - lo[i] + hi[i] for i in range(nd)):
        y = f"{y}[{', '.join(crop)}]"
    lines.append(f"{c.o()} = {y} + {c.i(2)}" if c.has(2) else f"{c.o()} = {y}")
    return lines


# ----------------------------------------------------------------------------- pooling
def _pool_geometry(c: Any) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    from translator.reference.pool import _geometry

    in_sp = _spatial_shape(c)
    k = [int(v) for v in c.attr("kernel_shape")]
    strides, dil, begins, ends, out = _geometry(in_sp, k, c.attr("strides"), c.attr("dilations"), c.attr("pads"),
                                                c.attr("auto_pad", "NOTSET"), c.attr("ceil_mode", 0))
    return in_sp, k, list(strides), list(dil), list(begins), list(out)


def _pooled(c: Any, x: str, kind: str, k: list[int], strides: list[int], dil: list[int], begins: list[int],
            out: list[int], in_sp: list[int], fill: str | None) -> tuple[list[str], str]:
    """Pool ``x`` padded by ``begins`` and exactly as much at the end as the windows reach."""
    nd = len(k)
    need = [(out[i] - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 for i in range(nd)]
    tail = [max(need[i] - begins[i] - in_sp[i], 0) for i in range(nd)]
    lines, xp = _pad_input(c, x, begins + tail, nd, fill)
    both_sd = any(s > 1 for s in strides) and any(d > 1 for d in dil)
    y = c.tmp("pool")
    if all(d == 1 for d in dil):
        fn = "tf.nn.max_pool" if kind == "MAX" else "tf.nn.avg_pool"
        lines.append(f"{y} = {fn}({xp}, {k}, {strides}, 'VALID')")
        return lines, y
    lines.append(f"{y} = tf.nn.pool({xp}, {k}, {c.lit(kind)}, strides={[1] * nd if both_sd else strides}, "
                 f"padding='VALID', dilations={dil})")
    if both_sd:
        y2 = c.tmp("strided")
        lines.append(f"{y2} = {_subsample(c, y, strides, nd)}")
        y = y2
    return lines, y


def _pool_check(n: Node) -> tuple[str, str] | None:
    return both(_needs_cl, _static_spatial)(n)


def _max_pool_check(n: Node) -> tuple[str, str] | None:
    if len(n.outputs) > 1 and (n.outputs[1].uses or (n.graph is not None and n.outputs[1] in n.graph.outputs)):
        return "unsupported_attribute_value", "max_pool indices output (TensorFlow numbers them channels-last)"
    return _pool_check(n)


@lowering("max_pool", accepts=_max_pool_check)
def max_pool(c: Any) -> list[str]:
    _check_cl(c)
    in_sp, k, strides, dil, begins, out = _pool_geometry(c)
    dt = c.dtype(0)
    fill = "float('-inf')" if is_float(dt) else f"{c.tf(dt)}.min"
    lines, y = _pooled(c, c.i(0), "MAX", k, strides, dil, begins, out, in_sp, fill)
    return lines + [f"{c.o(0)} = {y}"]


def _window_counts(in_sp: list[int], k: list[int], strides: list[int], dil: list[int], begins: list[int],
                   ends: list[int], out: list[int], include_pad: bool) -> np.ndarray:
    """How many elements each window averages: inside the input, or inside input + explicit pads."""
    counts = np.ones(out)
    for i in range(len(k)):
        pos = np.arange(out[i])[:, None] * strides[i] - begins[i] + np.arange(k[i])[None, :] * dil[i]
        lo, hi = (-begins[i], in_sp[i] + ends[i]) if include_pad else (0, in_sp[i])
        shape = [1] * len(k)
        shape[i] = out[i]
        counts = counts * ((pos >= lo) & (pos < hi)).sum(1).reshape(shape)
    return counts


@lowering("average_pool", "lp_pool", accepts=both(_pool_check, _float_only))
def average_pool(c: Any) -> list[str]:
    from translator.reference.pool import _geometry

    _check_cl(c)
    in_sp, k, strides, dil, begins, out = _pool_geometry(c)
    _, _, _, ends, _ = _geometry(in_sp, k, c.attr("strides"), c.attr("dilations"), c.attr("pads"),
                                 c.attr("auto_pad", "NOTSET"), c.attr("ceil_mode", 0))
    x = c.i(0)
    lines: list[str] = []
    p = float(c.attr("p", 2)) if c.node.op == "lp_pool" else None
    if p is not None:
        src = c.tmp("pow")
        lines.append(f"{src} = tf.math.pow(tf.math.abs({x}), {c.lit(p)})")
        x = src
    more, y = _pooled(c, x, "AVG", k, strides, dil, begins, out, in_sp, None)
    lines += more
    total = int(np.prod(k))
    if p is not None:
        return lines + [f"{c.o()} = tf.math.pow({y} * {c.lit(float(total))}, {c.lit(1.0 / p)})"]
    include = bool(c.attr("count_include_pad", 0))
    counts = _window_counts(in_sp, k, strides, dil, begins, list(ends), out, include)
    if (counts == total).all():
        return lines + [f"{c.o()} = {y}"]
    scale = (total / counts).reshape([1] + out + [1]).astype(np.dtype(c.dtype(0)) if c.dtype(0) != "bfloat16"
                                                         else np.float32)
    return lines + [f"{c.o()} = {y} * {c.weight(scale, c.node.name + '_count')}"]


def _spatial_axes(c: Any) -> list[int]:
    r = c.rank(0)
    return list(range(1, r - 1)) if c.channels_last else list(range(2, r))


@lowering("global_average_pool", "global_max_pool", "global_lp_pool", accepts=needs_rank(0))
def global_pool(c: Any) -> list[str]:
    axes = _spatial_axes(c)
    x = c.i(0)
    if c.node.op == "global_average_pool":
        return [f"{c.o()} = tf.math.reduce_mean({x}, axis={axes}, keepdims=True)"]
    if c.node.op == "global_max_pool":
        return [f"{c.o()} = tf.math.reduce_max({x}, axis={axes}, keepdims=True)"]
    p = float(c.attr("p", 2))
    return [f"{c.o()} = tf.math.pow(tf.math.reduce_sum(tf.math.pow(tf.math.abs({x}), {c.lit(p)}), axis={axes}, "
            f"keepdims=True), {c.lit(1.0 / p)})"]


# ----------------------------------------------------------------------------- data movement (channels-last)
def _crd(ch: int, bs: int) -> list[int]:
    """Channel order CRD (c*bs*bs + i*bs + j) taken from DCR ((i*bs + j)*C' + c), C' = ch / bs²."""
    cp = ch // (bs * bs)
    return [ij * cp + cc for cc in range(cp) for ij in range(bs * bs)]


@lowering("space_to_depth", accepts=_needs_cl)
def space_to_depth(c: Any) -> list[str]:
    _check_cl(c)
    bs = int(c.attr("blocksize"))
    y = f"tf.nn.space_to_depth({c.i(0)}, {bs})"
    if c.attr("mode", "DCR") == "CRD":
        y = f"tf.gather({y}, {c.lit(_crd(c.static_shape(0)[-1] * bs * bs, bs))}, axis=-1)"
    return [f"{c.o()} = {y}"]


@lowering("depth_to_space", accepts=_needs_cl)
def depth_to_space(c: Any) -> list[str]:
    _check_cl(c)
    bs = int(c.attr("blocksize"))
    x = c.i(0)
    if c.attr("mode", "DCR") == "CRD":  # reorder channels c*bs*bs + i*bs + j -> (i*bs + j)*C' + c
        ch = c.static_shape(0)[-1]
        cp = ch // (bs * bs)
        perm = [cc * bs * bs + ij for ij in range(bs * bs) for cc in range(cp)]
        x = f"tf.gather({x}, {c.lit(perm)}, axis=-1)"
    return [f"{c.o()} = tf.nn.depth_to_space({x}, {bs})"]


# ----------------------------------------------------------------------------- resize
def _resize_check(n: Node) -> tuple[str, str] | None:
    why = _static_spatial(n)
    if why is not None:
        return why
    return None


def _narrowed(c: Any, y: str, dt: str) -> str:
    """A value computed in a wider float back to ``dt``: integers rounded and saturated first."""
    if not is_float(dt):
        info = np.iinfo(np.dtype(dt))
        y = f"tf.clip_by_value(tf.math.round({y}), {float(info.min)}, {float(info.max)})"
    return f"tf.cast({y}, {c.tf(dt)})"


@lowering("resize", "upsample", accepts=_resize_check)
def resize(c: Any) -> list[str]:
    """Separable: each resized axis is a gather (nearest) or an (out, in) weight matrix —
    the reference's own per-axis weights, so every mode and coordinate transform is exact."""
    from translator.reference.vision import _axis_weights, _resize_plan

    if any(c.has(k) and c.const(k) is None for k in (1, 2, 3)):
        return resize_dynamic(c)
    shape = list(c.static_shape(0))
    r = len(shape)
    if c.node.op == "upsample":
        scales = [float(v) for v in np.asarray(c.const(1)).reshape(-1)]
        mode = "linear" if c.attr("mode", "nearest") != "nearest" else "nearest"
        attrs = dict(mode=mode, ctm="asymmetric", nearest_mode="floor", cubic_a=-0.75, antialias=0, exclude=0,
                     extrap=0.0, policy="stretch", axes=None)
        roi, sizes = None, None
    else:
        attrs = dict(mode=c.attr("mode", "nearest"), ctm=c.attr("coordinate_transformation_mode", "half_pixel"),
                     nearest_mode=c.attr("nearest_mode", "round_prefer_floor"), cubic_a=float(c.attr("cubic_coeff_a", -0.75)),
                     antialias=int(c.attr("antialias", 0)), exclude=int(c.attr("exclude_outside", 0)),
                     extrap=float(c.attr("extrapolation_value", 0.0)),
                     policy=c.attr("keep_aspect_ratio_policy", "stretch"), axes=c.attr("axes"))
        roi = c.const(1)
        scales = c.const(2) if c.has(2) and np.asarray(c.const(2)).size else None
        sizes = c.const(3) if c.has(3) else None
    axes = list(range(r)) if attrs["axes"] is None else [norm_axis(a, r) for a in attrs["axes"]]
    n = len(axes)
    in_sz = [shape[a] for a in axes]
    roi_v = np.asarray(roi, np.float64).reshape(-1) if roi is not None and np.asarray(roi).size \
        else np.array([0.0] * n + [1.0] * n)
    sc, out_sz = _resize_plan(in_sz, scales, sizes, attrs["policy"])
    dt = c.dtype(0)
    work = "tf.float64" if dt == "float64" else "tf.float32"
    y = c.i(0)
    lines: list[str] = []
    outside = []
    letters = "abcdefgh"[:r]
    widened = False
    for k, a in enumerate(axes):
        m, out_mask = _axis_weights(in_sz[k], out_sz[k], sc[k], roi_v[k], roi_v[n + k], attrs["mode"], attrs["ctm"],
                                    attrs["nearest_mode"], attrs["cubic_a"], attrs["antialias"], attrs["exclude"])
        if out_mask.any():
            outside.append((a, out_mask))
        if m.shape[0] == m.shape[1] and np.array_equal(m, np.eye(m.shape[0])):
            continue
        nxt = c.tmp(f"axis{a}")
        if attrs["mode"] == "nearest":
            lines.append(f"{nxt} = tf.gather({y}, {c.lit(np.argmax(m, axis=1).tolist())}, axis={a})")
        else:
            src = y
            if not widened and dt not in ("float32", "float64"):
                src, widened = f"tf.cast({y}, {work})", True
            mat = c.weight(m.astype(np.float64 if work == "tf.float64" else np.float32), f"{c.node.name}_w{a}")
            eq = f"{letters},{'z' + letters[a]}->{letters.replace(letters[a], 'z')}"
            lines.append(f"{nxt} = tf.einsum({c.lit(eq)}, {src}, {mat})")
        y = nxt
    if widened:
        y = _narrowed(c, y, dt)
    if outside:
        mask = np.zeros([1] * r, dtype=bool)
        for a, om in outside:
            shp = [1] * r
            shp[a] = om.size
            mask = mask | om.reshape(shp)
        extrap = np.asarray(attrs["extrap"]).astype(np.float32 if not is_float(dt) else np.dtype(dt) if dt != "bfloat16" else np.float32)
        y = f"tf.where({c.weight(mask, c.node.name + '_outside')}, tf.cast({c.weight(extrap, c.node.name + '_extrap')}, {c.tf(dt)}), {y})"
    return lines + [f"{c.o()} = {y if y != c.i(0) else f'tf.identity({y})'}"]


_COORD = {  # ONNX coordinate_transformation_mode: output index i -> input coordinate (float32 math)
    "half_pixel": "({i} + 0.5) / {s} - 0.5",
    "half_pixel_symmetric": "{n} / 2 * (1 - {o} / ({s} * {n})) + ({i} + 0.5) / {s} - 0.5",
    "pytorch_half_pixel": "tf.where({n} * {s} > 1, ({i} + 0.5) / {s} - 0.5, tf.zeros_like({i}))",
    "align_corners": "tf.where({n} * {s} > 1, {i} * ({n} - 1) / ({n} * {s} - 1), tf.zeros_like({i}))",
    "asymmetric": "{i} / {s}",
    "tf_crop_and_resize": "tf.where({n} * {s} > 1, {r0} * ({n} - 1) + {i} * ({r1} - {r0}) * ({n} - 1) / ({n} * {s} - 1), "
                          "tf.zeros_like({i}) + 0.5 * ({r0} + {r1}) * ({n} - 1))",
}
_NEAREST = {"round_prefer_ceil": "tf.math.floor({x} + 0.5)", "floor": "tf.math.floor({x})",
            "ceil": "tf.math.ceil({x})", "round_prefer_floor": "tf.math.ceil({x} - 0.5)"}


def resize_dynamic(c: Any) -> list[str]:
    """Resize with runtime scales / sizes / roi: the reference's per-axis weights computed in TensorFlow."""
    shape = list(c.static_shape(0))
    r = len(shape)
    mode = c.attr("mode", "nearest")
    ctm = c.attr("coordinate_transformation_mode", "half_pixel")
    if c.node.op == "upsample":
        mode = "linear" if mode != "nearest" else "nearest"
        ctm, nearest_mode, cubic_a, exclude, extrap, policy, axes_attr = "asymmetric", "floor", -0.75, 0, 0.0, "stretch", None
        antialias = 0
        scales_in, sizes_in, roi_in = c.i(1), None, None
    else:
        nearest_mode = c.attr("nearest_mode", "round_prefer_floor")
        cubic_a, exclude = float(c.attr("cubic_coeff_a", -0.75)), int(c.attr("exclude_outside", 0))
        antialias = int(c.attr("antialias", 0))
        extrap, policy = float(c.attr("extrapolation_value", 0.0)), c.attr("keep_aspect_ratio_policy", "stretch")
        axes_attr = c.attr("axes")
        scales_in = c.i(2) if c.has(2) else None
        sizes_in = c.i(3) if c.has(3) else None
        roi_in = c.i(1) if c.has(1) else None
    axes = list(range(r)) if axes_attr is None else [norm_axis(a, r) for a in axes_attr]
    n = len(axes)
    sc, outs, roi = c.tmp("scales"), c.tmp("sizes"), c.tmp("roi")
    in_sz = c.lit([float(shape[a]) for a in axes])
    lines = []
    use_sizes = sizes_in is not None and (scales_in is None or (c.shape(3) or [0])[0] != 0)
    if use_sizes:
        want = f"tf.cast(tf.reshape({sizes_in}, [-1]), tf.float32)"
        if policy == "stretch":
            lines += [f"{sc} = {want} / {in_sz}", f"{outs} = tf.cast({want}, tf.int64)"]
        else:
            red = "tf.math.reduce_min" if policy == "not_larger" else "tf.math.reduce_max"
            lines += [f"{sc} = tf.fill([{n}], {red}({want} / {in_sz}))",
                      f"{outs} = tf.cast(tf.math.floor({sc} * {in_sz} + 0.5), tf.int64)"]
    else:
        lines += [f"{sc} = tf.cast(tf.reshape({scales_in}, [-1]), tf.float32)",
                  f"{outs} = tf.cast(tf.math.floor({in_sz} * {sc}), tf.int64)"]
    if roi_in is not None:
        lines.append(f"{roi} = tf.cast(tf.reshape({roi_in}, [-1]), tf.float32)")
        lines.append(f"{roi} = tf.cond(tf.size({roi}) > 0, lambda: {roi}, lambda: tf.constant({c.lit([0.0] * n + [1.0] * n)}))")
    else:
        lines.append(f"{roi} = tf.constant({c.lit([0.0] * n + [1.0] * n)})")
    dt = c.dtype(0)
    work = "tf.float64" if dt == "float64" else "tf.float32"
    y = c.i(0)
    outside = c.tmp("outside")
    lines.append(f"{outside} = tf.zeros([1] * {r}, tf.bool)")
    widened = False
    for k, a in enumerate(axes):
        i, x = c.tmp(f"i{a}"), c.tmp(f"x{a}")
        coord = _COORD[ctm].format(i=i, s=f"{sc}[{k}]", n=f"{float(shape[a])}", o=f"tf.cast({outs}[{k}], tf.float32)",
                                   r0=f"{roi}[{k}]", r1=f"{roi}[{n + k}]")
        lines += [f"{i} = tf.range(tf.cast({outs}[{k}], tf.float32))", f"{x} = tf.cast({coord}, {c.wide_float})"]
        bshape = [1] * r
        bshape[a] = -1
        if ctm == "tf_crop_and_resize":
            lines.append(f"{outside} = tf.math.logical_or({outside}, tf.reshape(({x} < 0) | ({x} > {shape[a] - 1}), {bshape}))")
        nxt = c.tmp(f"axis{a}")
        if mode == "nearest":
            idx = f"tf.cast(tf.clip_by_value({_NEAREST[nearest_mode].format(x=x)}, 0, {shape[a] - 1}), tf.int64)"
            lines.append(f"{nxt} = tf.gather({y}, {idx}, axis={a})")
        else:
            support = 1 if mode == "linear" else 2
            # antialias stretches the filter by 1/scale; an output exists only for scale >= 1/in
            reach = support + 1 if not antialias else support * shape[a] + 2
            taps, d, w, m = c.tmp("taps"), c.tmp("d"), c.tmp("w"), c.tmp("m")
            stretch = f" * tf.cast(tf.math.minimum({sc}[{k}], 1.0), {c.wide_float})" if antialias else ""
            lines += [f"{taps} = tf.math.floor({x})[:, None] + tf.range({-reach}, {reach + 1}, dtype={c.wide_float})[None, :]",
                      f"{d} = ({taps} - {x}[:, None]){stretch}"]
            if mode == "linear":
                lines.append(f"{w} = tf.math.maximum(1.0 - tf.math.abs({d}), 0.0)")
            else:
                a_ = c.lit(cubic_a)
                lines += [f"{d} = tf.math.abs({d})",
                          f"{w} = tf.where({d} <= 1, (({a_} + 2) * {d} - ({a_} + 3)) * {d} * {d} + 1, "
                          f"tf.where({d} < 2, (({a_} * {d} - 5 * {a_}) * {d} + 8 * {a_}) * {d} - 4 * {a_}, tf.zeros_like({d})))"]
            lines.append(f"{w} = {w} / tf.math.reduce_sum({w}, axis=1, keepdims=True)")
            if exclude:
                lines += [f"{w} = tf.where(({taps} >= 0) & ({taps} < {shape[a]}), {w}, tf.zeros_like({w}))",
                          f"{w} = {w} / tf.math.reduce_sum({w}, axis=1, keepdims=True)"]
            lines.append(f"{m} = tf.math.reduce_sum(tf.one_hot(tf.cast(tf.clip_by_value({taps}, 0, {shape[a] - 1}), tf.int64), "
                         f"{shape[a]}, dtype={c.wide_float}) * {w}[..., None], axis=1)")
            src = y
            if not widened and dt not in ("float32", "float64"):
                src, widened = f"tf.cast({y}, {work})", True
            letters = "abcdefgh"[:r]
            eq = f"{letters},{'z' + letters[a]}->{letters.replace(letters[a], 'z')}"
            lines.append(f"{nxt} = tf.einsum({c.lit(eq)}, {src}, tf.cast({m}, {work}))")
        y = nxt
    if widened:
        y = _narrowed(c, y, dt)
    if ctm == "tf_crop_and_resize":
        y = f"tf.where({outside}, tf.cast({c.lit(extrap)}, {c.tf(dt)}), {y})"
    return lines + [f"{c.o()} = {y}"]


# ----------------------------------------------------------------------------- normalization
def _channel_param(c: Any, expr: str) -> str:
    """A per-channel (C,) parameter shaped to broadcast over input 0's channel axis."""
    if c.channels_last:
        return expr
    r = c.rank(0)
    return f"tf.reshape({expr}, {c.lit([-1] + [1] * (r - 2))})"


@lowering("batch_normalization", accepts=needs_rank(0))
def batch_normalization(c: Any) -> list[str]:
    eps = float(c.attr("epsilon", 1e-5))
    x = c.i(0)
    if c.attr("training_mode", 0):  # batch statistics; running statistics updated with momentum
        axes = [k for k in range(c.rank(0)) if k != (c.rank(0) - 1 if c.channels_last else 1)]
        mean, var, mom = c.tmp("mean"), c.tmp("var"), float(c.attr("momentum", 0.9))
        s, b = _channel_param(c, c.i(1)), _channel_param(c, c.i(2))
        lines = [f"{mean}, {var} = tf.nn.moments({x}, axes={axes})",
                 f"{c.o(0)} = ({x} - {_channel_param(c, mean)}) * tf.math.rsqrt({_channel_param(c, var)} + "
                 f"{c.lit(eps)}) * {s} + {b}"]
        for k, (stat, src) in enumerate(((mean, 3), (var, 4)), start=1):
            if len(c.node.outputs) > k:
                lines.append(f"{c.o(k)} = tf.cast({c.i(src)} * {c.lit(mom)} + tf.cast({stat}, {c.i(src)}.dtype) * "
                             f"{c.lit(1 - mom)}, {c.tf(c.out_dtype(k))})")
        return lines
    consts = [c.const(k) for k in (1, 2, 3, 4)]
    if all(v is not None for v in consts) and c.dtype(0) != "bfloat16":
        scale, bias, mean, var = (np.asarray(v, np.float64) for v in consts)
        a = scale / np.sqrt(var + eps)
        b = bias - mean * a
        dt = np.dtype(c.dtype(0))
        mul = c.weight(a.astype(dt), c.node.name + "_mul")
        add = c.weight(b.astype(dt), c.node.name + "_add")
        return [f"{c.o(0)} = {x} * {_channel_param(c, mul)} + {_channel_param(c, add)}"]
    s, b, m, v = (_channel_param(c, c.i(k)) for k in (1, 2, 3, 4))
    return [f"{c.o(0)} = ({x} - {m}) * tf.math.rsqrt({v} + {c.lit(eps)}) * {s} + {b}"]


@lowering("instance_normalization", accepts=both(needs_rank(0), _float_only))
def instance_normalization(c: Any) -> list[str]:
    eps = float(c.attr("epsilon", 1e-5))
    axes = _spatial_axes(c)
    dt = c.dtype(0)
    x = c.i(0) if dt in ("float32", "float64") else f"tf.cast({c.i(0)}, tf.float32)"
    mean, var = c.tmp("mean"), c.tmp("var")
    work = "tf.float64" if dt == "float64" else "tf.float32"
    s = _channel_param(c, f"tf.cast({c.i(1)}, {work})")
    b = _channel_param(c, f"tf.cast({c.i(2)}, {work})")
    y = f"({x} - {mean}) * tf.math.rsqrt({var} + {c.lit(eps)}) * {s} + {b}"
    return [f"{mean}, {var} = tf.nn.moments({x}, axes={axes}, keepdims=True)",
            f"{c.o()} = {y if dt in ('float32', 'float64') else f'tf.cast({y}, {c.tf(dt)})'}"]


@lowering("lrn", accepts=both(needs_rank(0), _float_only))
def lrn(c: Any) -> list[str]:
    size = int(c.attr("size"))
    alpha, beta, bias = float(c.attr("alpha", 1e-4)), float(c.attr("beta", 0.75)), float(c.attr("bias", 1.0))
    x = c.i(0)
    if c.channels_last and size % 2 == 1 and c.rank(0) == 4:
        return [f"{c.o()} = tf.nn.local_response_normalization({x}, depth_radius={(size - 1) // 2}, "
                f"bias={c.lit(bias)}, alpha={c.lit(alpha / size)}, beta={c.lit(beta)})"]
    r = c.rank(0)
    axis = r - 1 if c.channels_last else 1
    ch = c.static_shape(0)[axis]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    widths = [[0, 0]] * r
    widths[axis] = [lo, hi]
    sq = c.tmp("sq")
    cut = [":"] * r
    cut[axis] = "{j}:{j} + " + str(ch)
    window = "[" + ", ".join(cut) + "]"
    return [f"{sq} = tf.pad(tf.math.square({x}), {c.lit(widths)})",
            f"{sq} = tf.add_n([{sq}{window.replace('{j}', 'j')} for j in range({size})])",
            f"{c.o()} = {x} / tf.math.pow({c.lit(bias)} + {c.lit(alpha / size)} * {sq}, {c.lit(beta)})"]


@lowering("layer_normalization", accepts=needs_rank(0))
def layer_normalization(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", -1), r)
    eps = float(c.attr("epsilon", 1e-5))
    x = c.i(0)
    mean, var, inv = c.tmp("mean"), c.tmp("var"), c.tmp("inv_std")
    y = f"({x} - {mean}) * {inv} * {c.i(1)}" + (f" + {c.i(2)}" if c.has(2) else "")
    lines = [f"{mean}, {var} = tf.nn.moments({x}, axes={list(range(a, r))}, keepdims=True)",
             f"{inv} = tf.math.rsqrt({var} + {c.lit(eps)})", f"{c.o(0)} = {y}"]
    for k, stat in ((1, mean), (2, inv)):  # statistics: stash_type float32 unless typed otherwise
        if len(c.node.outputs) > k:
            dt = c.out_dtypes.get(k) or c.node.outputs[k].type.dtype or "float32"
            lines.append(f"{c.o(k)} = tf.cast({stat}, {c.tf(dt)})")
    return lines


@lowering("lp_normalization", accepts=needs_rank(0))
def lp_normalization(c: Any) -> list[str]:
    a = norm_axis(c.attr("axis", -1), c.rank(0))
    x = c.i(0)
    p = int(c.attr("p", 2))
    norm = (f"tf.math.reduce_sum(tf.math.abs({x}), axis={a}, keepdims=True)" if p == 1
            else f"tf.math.sqrt(tf.math.reduce_sum(tf.math.square({x}), axis={a}, keepdims=True))")
    return [f"{c.o()} = tf.math.divide_no_nan({x}, {norm})"]


# ----------------------------------------------------------------------------- control flow
@lowering("if")
def if_(c: Any) -> list[str]:
    then_fn, else_fn = c.tmp("then"), c.tmp("else")
    lines = c.body(c.attr("then_branch"), then_fn, []) + c.body(c.attr("else_branch"), else_fn, [])
    outs = c.outs() + ("," if len(c.node.outputs) == 1 else "")
    return lines + [f"{outs} = tf.cond({'tf.reshape(tf.cast(' + c.i(0) + ', tf.bool), [])'}, {then_fn}, {else_fn})"]


def _loop_check(n: Node) -> tuple[str, str] | None:
    body = n.attrs.get("body")
    if body is None:
        return "verifier", "loop without a body"
    for v in list(body.inputs) + list(body.outputs):
        if v.type.kind != "tensor":
            return "unsupported_dtype", f"loop-carried {v.type.kind} values"
    return None


@lowering("loop", accepts=_loop_check)
def loop(c: Any) -> list[str]:
    """ONNX Loop → tf.while_loop over (iteration, condition, carried values…, scan accumulators…)."""
    body = c.attr("body")
    n_carried = len(c.node.inputs) - 2
    n_scan = len(body.outputs) - 1 - n_carried
    fn, cond_fn, step_fn = c.tmp("body"), c.tmp("loop_cond"), c.tmp("loop_step")
    lines = c.body(body, fn, list(body.inputs))
    it_dt = c.tf(body.inputs[0].type.dtype or "int64") if body.inputs else "tf.int64"
    trip = f"tf.cast(tf.reshape({c.i(0)}, []), {it_dt})" if c.has(0) else None
    cond0 = f"tf.reshape(tf.cast({c.i(1)}, tf.bool), [])" if c.has(1) else "tf.constant(True)"
    carried = [c.i(2 + k) for k in range(n_carried)]
    it, go, res_ = c.tmp("i"), c.tmp("cond"), c.tmp("r")
    vs = [c.tmp(f"v{k}") for k in range(n_carried)]
    ss = [c.tmp(f"s{k}") for k in range(n_scan)]
    sig = ", ".join([it, go] + vs + ss)
    if trip is None:
        test = go
    elif c.has(1):
        test = f"tf.logical_and({it} < {trip}, {go})"
    else:
        test = f"{it} < {trip}"
    lines.append(f"def {cond_fn}({sig}):")
    lines.append(f"    return {test}")
    lines.append(f"def {step_fn}({sig}):")
    lines.append(f"    {res_} = {fn}({', '.join([it, go] + vs)})")
    new = [f"{res_}[{1 + k}]" for k in range(n_carried)]
    new += [f"{ss[k]}.write(tf.cast({it}, tf.int32), {res_}[{1 + n_carried + k}])" for k in range(n_scan)]
    lines.append(f"    return ({', '.join([f'{it} + 1', f'tf.reshape(tf.cast({res_}[0], tf.bool), [])'] + new)},)")
    accs = []
    for k in range(n_scan):
        t = body.outputs[1 + n_carried + k].type
        shape = "None" if t.shape is None else c.lit([d if isinstance(d, int) else None for d in t.shape])
        accs.append(f"tf.TensorArray({c.tf(t.dtype)}, size=0, dynamic_size=True, element_shape={shape})")
    init = ", ".join([f"tf.constant(0, {it_dt})", cond0] + carried + accs)
    inv = ", ".join(["tf.TensorShape([])", "tf.TensorShape([])"] + ["tf.TensorShape(None)"] * n_carried
                    + ["tf.TensorShape(None)"] * n_scan)
    res = c.tmp("loop")
    lines.append(f"{res} = tf.while_loop({cond_fn}, {step_fn}, ({init},), shape_invariants=({inv},))")
    for k in range(n_carried):
        lines.append(f"{c.o(k)} = {res}[{2 + k}]")
    for k in range(n_scan):
        lines.append(f"{c.o(n_carried + k)} = {res}[{2 + n_carried + k}].stack()")
    return lines


def _scan_check(n: Node) -> tuple[str, str] | None:
    m = int(n.attrs.get("num_scan_inputs", 0))
    ins = [v for v in n.inputs if v is not None]
    scans = ins[len(ins) - m:]
    axes = list(n.attrs.get("scan_input_axes") or [0] * m)
    for v, a in zip(scans, axes):
        s = v.type.shape
        if s is None or not isinstance(s[norm_axis(a, len(s))], int):
            return "dynamic_shape", "scan needs a static sequence length"
    return None


@lowering("scan", accepts=_scan_check)
def scan(c: Any) -> list[str]:
    """ONNX Scan, unrolled over its (static) sequence length."""
    body = c.attr("body")
    m = int(c.attr("num_scan_inputs"))
    ins = [c.i(k) for k in range(len(c.node.inputs)) if c.has(k)]
    n_state = len(ins) - m
    n_out = len(body.outputs) - n_state
    in_axes = list(c.attr("scan_input_axes") or [0] * m)
    in_dirs = list(c.attr("scan_input_directions") or [0] * m)
    out_axes = list(c.attr("scan_output_axes") or [0] * n_out)
    out_dirs = list(c.attr("scan_output_directions") or [0] * n_out)
    scan_vals = [v for v in c.node.inputs if v is not None][n_state:]
    ranks = [v.type.rank for v in scan_vals]
    length = scan_vals[0].type.shape[norm_axis(in_axes[0], ranks[0])]
    fn = c.tmp("body")
    lines = c.body(body, fn, list(body.inputs))
    state, acc, t, res_, j = c.tmp("state"), c.tmp("acc"), c.tmp("t"), c.tmp("r"), c.tmp("j")
    lines.append(f"{state} = [{', '.join(ins[:n_state])}]")
    lines.append(f"{acc} = [[] for _ in range({n_out})]")
    lines.append(f"for {t} in range({length}):")
    slices = []
    for k in range(m):
        a = norm_axis(in_axes[k], ranks[k])
        idx = f"{length - 1} - {t}" if in_dirs[k] else t
        slices.append(f"tf.gather({ins[n_state + k]}, {idx}, axis={a})")
    lines.append(f"    {res_} = {fn}(*{state}, {', '.join(slices)})")
    lines.append(f"    {state} = list({res_}[:{n_state}])")
    lines.append(f"    for {j} in range({n_out}):")
    lines.append(f"        {acc}[{j}].append({res_}[{n_state} + {j}])")
    for k in range(n_state):
        lines.append(f"{c.o(k)} = {state}[{k}]")
    for j in range(n_out):
        t = body.outputs[n_state + j].type
        a = norm_axis(out_axes[j], (t.rank or 0) + 1)
        seq = f"{acc}[{j}][::-1]" if out_dirs[j] else f"{acc}[{j}]"
        lines.append(f"{c.o(n_state + j)} = tf.stack({seq}, axis={a})")
    return lines
