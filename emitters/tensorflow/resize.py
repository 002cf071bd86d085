"""TensorFlow rules for Resize and Upsample: separable per resized axis, with constant
operands (the reference's own per-axis weights: a gather for nearest, an einsum with an
(out, in) matrix otherwise) or run-time ones (the same weights computed in TensorFlow).
A nearest resize by a whole factor whose index map is "each element repeated" (PyTorch's and
Paddle's 2× upsampling) is written as copies concatenated and merged (``_repeated``), at
static or run-time sizes.
Only the resized axes need static sizes: a symbolic batch outside ``axes`` passes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .helpers import is_float, needs_rank
from .registry import rule


def _resize_check(n: Node) -> Refusal | None:
    """A known rank; symbolic sizes on resized axes are read at run time (``resize_dynamic``)."""
    return needs_rank(0)(n)


def _resize_shape(c: Any) -> list:
    """Input 0's shape (symbolic dims as they are)."""
    s = c.shape(0)
    if s is None:
        c.static_shape(0)
    return list(s)


def _resized_axes_static(c: Any, shape: list) -> bool:
    axes = c.attr("axes") if c.node.op == "resize" else None
    return all(isinstance(shape[norm_axis(a, len(shape))], int) for a in (range(len(shape)) if axes is None else axes))


def _narrowed(c: Any, y: str, dt: str) -> str:
    """A value computed in a wider float back to ``dt``: integers rounded and saturated first."""
    if not is_float(dt):
        info = np.iinfo(np.dtype(dt))
        y = f"tf.clip_by_value(tf.math.round({y}), {float(info.min)}, {float(info.max)})"
    return f"tf.cast({y}, {c.tf(dt)})"


#: the largest whole factor a nearest resize is written as repeated copies for
MAX_REPEAT = 8


def _repeat_factor(scale: float, ctm: str, nearest_mode: str) -> int | None:
    """The whole factor ``s`` when a nearest resize by the constant ``scale`` takes input
    ``i // s`` at output ``i`` at any axis length: each element repeated ``s`` times. Only the
    transforms whose source coordinate does not depend on the length (``i / s`` and
    ``(i + ½) / s − ½``: the map repeats with period ``s``), read from the reference's own
    index map at every length up to ``4·s``."""
    from translator.reference.vision import _axis_weights

    s = int(round(scale))
    if ctm not in ("asymmetric", "half_pixel", "pytorch_half_pixel") or not 2 <= s <= MAX_REPEAT \
            or float(scale) != float(s):
        return None
    for n in range(1, 4 * s + 1):
        m, _ = _axis_weights(n, n * s, float(s), 0.0, 1.0, "nearest", ctm, nearest_mode, -0.75, 0, 0)
        if not np.array_equal(np.argmax(m, axis=1), np.repeat(np.arange(n), s)):
            return None
    return s


def _repeated(c: Any, y: str, a: int, s: int, shape: list, lines: list[str]) -> str:
    """``y`` (of ``shape``: ints, or anything else for a dim read at run time) with each element along axis
    ``a`` repeated ``s`` times: a new axis after ``a`` holding ``s`` copies (a concatenation),
    merged into ``a`` (a reshape). Both are ops the XNNPACK delegate takes at static shapes,
    where a gather is not."""
    t, nxt = c.tmp(f"copies{a}"), c.tmp(f"axis{a}")
    lines.append(f"{t} = tf.expand_dims({y}, {a + 1})")
    lines.append(f"{t} = tf.concat([{', '.join([t] * s)}], axis={a + 1})")
    if all(isinstance(d, int) for d in shape):
        target = c.lit([int(d) * (s if k == a else 1) for k, d in enumerate(shape)])
    else:  # the dims known stay literals (a convolution after it needs its channels)
        target = "tf.stack([" + ", ".join(
            str(-1 if k == a else int(d)) if k == a or isinstance(d, int) else f"tf.shape({y})[{k}]"
            for k, d in enumerate(shape)) + "])"
    lines.append(f"{nxt} = tf.reshape({t}, {target})")
    return nxt


@rule("resize", "upsample", check=_resize_check)
def resize(c: Any) -> list[str]:
    """Separable: each resized axis is a gather (nearest) or an (out, in) weight matrix —
    the reference's own per-axis weights, so every mode and coordinate transform is exact."""
    from translator.reference.vision import _axis_weights, _resize_plan

    shape = _resize_shape(c)
    if any(c.has(k) and c.const(k) is None for k in (1, 2, 3)) or not _resized_axes_static(c, shape):
        return resize_dynamic(c)
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
    known = list(shape)  # the dims as each axis is resized in turn
    for k, a in enumerate(axes):
        m, out_mask = _axis_weights(in_sz[k], out_sz[k], sc[k], roi_v[k], roi_v[n + k], attrs["mode"], attrs["ctm"],
                                    attrs["nearest_mode"], attrs["cubic_a"], attrs["antialias"], attrs["exclude"])
        if out_mask.any():
            outside.append((a, out_mask))
        if m.shape[0] == m.shape[1] and np.array_equal(m, np.eye(m.shape[0])):
            continue
        rep = out_sz[k] // in_sz[k] if in_sz[k] and out_sz[k] % in_sz[k] == 0 else 0
        if attrs["mode"] == "nearest" and 2 <= rep <= MAX_REPEAT and not out_mask.any() and \
                np.array_equal(np.argmax(m, axis=1), np.repeat(np.arange(in_sz[k]), rep)):  # the map itself says so
            y = _repeated(c, y, a, rep, known, lines)
            known[a] = out_sz[k]
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
        y, known[a] = nxt, out_sz[k]
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
    shape = _resize_shape(c)
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
    lines = []
    # each resized axis's input size: a literal, or read from the run-time shape
    size = {a: float(shape[a]) if isinstance(shape[a], int) else f"tf.cast(tf.shape({c.i(0)})[{a}], tf.float32)"
            for a in axes}
    if all(isinstance(v, float) for v in size.values()):
        in_sz = c.lit([size[a] for a in axes])
    else:
        in_sz = c.tmp("in_sizes")
        lines.append(f"{in_sz} = tf.stack([{', '.join(str(size[a]) for a in axes)}])")
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
    const_scales = c.const(2) if c.node.op == "resize" and c.has(2) and c.const(2) is not None else None
    unit = set()  # axes a constant scale of 1 leaves as they are (no gather: their static size stays known)
    if const_scales is not None and np.asarray(const_scales).size == n and not use_sizes and ctm != "tf_crop_and_resize":
        unit = {axes[k] for k, v in enumerate(np.asarray(const_scales, np.float64).reshape(-1)) if v == 1.0}
    out_shape = c.node.outputs[0].type.shape
    if use_sizes and policy == "stretch" and ctm != "tf_crop_and_resize" and out_shape is not None:
        # run-time sizes that copy an axis's own size (paddle2onnx writes Concat(Shape(x)[:2],
        # Shape(y)[2:])): its scale is exactly 1, and the gather would hide its size (the
        # channels a convolution after it needs)
        unit |= {a for a in axes if out_shape[a] is not None and out_shape[a] == shape[a]}
    known = list(shape)  # the dims as each axis is resized in turn (ints where static)
    for k, a in enumerate(axes):
        if a in unit:
            continue
        rep = (_repeat_factor(float(np.asarray(const_scales, np.float64).reshape(-1)[k]), ctm, nearest_mode)
               if mode == "nearest" and const_scales is not None and not use_sizes and np.asarray(const_scales).size == n
               else None)
        if rep is not None:  # a constant whole scale: each element repeated, at any run-time size
            y = _repeated(c, y, a, rep, known, lines)
            known[a] = known[a] * rep if isinstance(known[a], int) else None
            continue
        i, x = c.tmp(f"i{a}"), c.tmp(f"x{a}")
        nk = f"{in_sz}[{k}]" if not isinstance(size[a], float) else f"{size[a]}"  # the input size, float
        hi = f"{shape[a] - 1}" if isinstance(shape[a], int) else f"({nk} - 1)"
        depth = f"{shape[a]}" if isinstance(shape[a], int) else f"tf.cast({nk}, tf.int32)"
        coord = _COORD[ctm].format(i=i, s=f"{sc}[{k}]", n=nk, o=f"tf.cast({outs}[{k}], tf.float32)",
                                   r0=f"{roi}[{k}]", r1=f"{roi}[{n + k}]")
        lines += [f"{i} = tf.range(tf.cast({outs}[{k}], tf.float32))", f"{x} = tf.cast({coord}, {c.wide_float})"]
        bshape = [1] * r
        bshape[a] = -1
        if ctm == "tf_crop_and_resize":
            lines.append(f"{outside} = tf.math.logical_or({outside}, tf.reshape(({x} < 0) | ({x} > {hi}), {bshape}))")
        nxt = c.tmp(f"axis{a}")
        if mode == "nearest":
            idx = f"tf.cast(tf.clip_by_value({_NEAREST[nearest_mode].format(x=x)}, 0, tf.cast({hi}, {c.wide_float})), tf.int64)"
            lines.append(f"{nxt} = tf.gather({y}, {idx}, axis={a})")
        else:
            support = 1 if mode == "linear" else 2
            # antialias stretches the filter by 1/scale; an output exists only for scale >= 1/in
            if antialias and not isinstance(shape[a], int):
                c.unsupported("dynamic_shape", f"antialiased resize needs a static size on axis {a}")
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
                lines += [f"{w} = tf.where(({taps} >= 0) & ({taps} < tf.cast({hi} + 1, {c.wide_float})), {w}, tf.zeros_like({w}))",
                          f"{w} = {w} / tf.math.reduce_sum({w}, axis=1, keepdims=True)"]
            lines.append(f"{m} = tf.math.reduce_sum(tf.one_hot(tf.cast(tf.clip_by_value({taps}, 0, tf.cast({hi}, {c.wide_float})), "
                         f"tf.int64), {depth}, dtype={c.wide_float}) * {w}[..., None], axis=1)")
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
