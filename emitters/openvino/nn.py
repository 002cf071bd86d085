"""OpenVINO rules of NN ops: linear algebra, convolution, pooling, normalization,
resize, sampling, detection, losses, activations with parameters, einsum, global pooling,
dropout, AffineGrid."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.ir.graph import Node, TensorType

from .helpers import Refusal, attr, dim, i64, needs_rank, norm_axis, rank_of, static_out, used
from .registry import rule

if TYPE_CHECKING:
    from .codegen import Gen

_AUTO_PAD = {"NOTSET": "explicit", "SAME_UPPER": "same_upper", "SAME_LOWER": "same_lower", "VALID": "valid"}
_FLOAT32_COMPUTE = ("float16", "bfloat16")


def _args(g: "Gen", *values: object) -> str:
    """Plain values as comma-separated Python literals."""
    return ", ".join(g.lit(v) for v in values)


def _window(g: "Gen", n: int) -> tuple[list[int], list[int], list[int], list[int], str]:
    """strides, dilations, pads_begin, pads_end, auto_pad of a conv/pool node with n spatial dims."""
    strides = [int(s) for s in (g.a("strides") or [1] * n)]
    dilations = [int(d) for d in (g.a("dilations") or [1] * n)]
    pads = [int(p) for p in (g.a("pads") or [0] * (2 * n))]
    auto = _AUTO_PAD[g.a("auto_pad", "NOTSET")]
    return strides, dilations, pads[:n], pads[n:], auto


def bias(g: "Gen", y: str, b: str | None, n: int) -> str:
    """y + B reshaped to [1, C, 1, ...] (n spatial dims)."""
    if b is None:
        return y
    return g.let(f"ops.add({y}, ops.reshape({b}, {i64(g, [1, -1] + [1] * n)}, False))")


def static_w(node: Node) -> Refusal | None:
    w = node.inputs[1] if len(node.inputs) > 1 else None
    if w is None or not w.type.is_static:
        return Refusal("dynamic_shape", "the weights need a static shape")
    return None


def _grouped(g: "Gen", w: str, group: int, wi: int = 1) -> str:
    """Weights [O, I/G, *K] (input ``wi``'s shape) → [G, O/G, I/G, *K] (OpenVINO's grouped filter layout)."""
    shape = list(g.t(wi).shape or ())
    return g.let(f"ops.reshape({w}, {i64(g, [group, -1] + shape[1:])}, False)")


# ----------------------------------------------------------------------------- linear algebra
@rule("matmul")
def _matmul(g: "Gen", node: Node) -> None:
    g.out(0, f"ops.matmul({g.x(0)}, {g.x(1)}, False, False)")


@rule("gemm")
def _gemm(g: "Gen", node: Node) -> None:
    # Y = alpha * A' B' + beta * C
    dt = g.dtype(0)
    y = g.let(f"ops.matmul({g.x(0)}, {g.x(1)}, {bool(g.a('transA'))}, {bool(g.a('transB'))})")
    alpha, beta = float(g.a("alpha")), float(g.a("beta"))
    if alpha != 1.0:
        y = g.let(f"ops.multiply({y}, {g.const(alpha, dt)})")
    c = g.x(2)
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = g.let(f"ops.multiply({c}, {g.const(beta, dt)})")
        y = g.let(f"ops.add({y}, {c})")
    g.bind(0, y)


# ----------------------------------------------------------------------------- convolution
def convolve(g: "Gen", x: str, w: str, wi: int = 1) -> str:
    """The node's convolution of ``x`` by ``w`` (weights shaped like input ``wi``: 1 for Conv
    and ConvInteger, 3 for QLinearConv), grouped if asked."""
    n = g.rank(wi) - 2
    strides, dilations, pb, pe, auto = _window(g, n)
    group = int(g.a("group"))
    if group == 1:
        return g.let(f"ops.convolution({x}, {w}, {_args(g, strides, pb, pe, dilations, auto)})")
    return g.let(f"ops.group_convolution({x}, {_grouped(g, w, group, wi)}, {_args(g, strides, pb, pe, dilations, auto)})")


@rule("conv", check=static_w)
def _conv(g: "Gen", node: Node) -> None:
    g.bind(0, bias(g, convolve(g, g.x(0), g.x(1)), g.x(2), g.rank(1) - 2))


def _conv_transpose_check(node: Node) -> Refusal | None:
    why = static_w(node)
    if why:
        return why
    x = node.inputs[0]
    same = attr(node, "auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER")
    needs_static = attr(node, "output_shape") is not None or same
    if needs_static and (x.type.shape is None or not all(isinstance(d, int) for d in x.type.shape[2:])):
        return Refusal("dynamic_shape", "output_shape / SAME padding needs static spatial input dims")
    return None


@rule("conv_transpose", check=_conv_transpose_check)
def _conv_transpose(g: "Gen", node: Node) -> None:
    wshape = list(g.t(1).shape or ())
    n = len(wshape) - 2
    kernel = wshape[2:]
    strides, dilations, pb, pe, auto = _window(g, n)
    out_pad = [int(p) for p in (g.a("output_padding") or [0] * n)]
    out_shape = g.a("output_shape")
    if auto in ("same_upper", "same_lower") or out_shape is not None:
        # ONNX: total = stride*(in-1) + output_padding + (k-1)*d + 1 - out; SAME_UPPER puts the odd pixel at the end
        xs = list(g.t(0).shape or ())[2:]
        want = [int(v) for v in out_shape[-n:]] if out_shape is not None else [xs[i] * strides[i] for i in range(n)]
        pb, pe = [], []
        for i in range(n):
            total = strides[i] * (xs[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - want[i]
            if total < 0:
                out_pad[i] -= total
                total = 0
            small, big = total // 2, total - total // 2
            pb.append(small if auto == "same_upper" else big)
            pe.append(big if auto == "same_upper" else small)
        auto = "explicit"
    elif auto == "valid":
        pb, pe, auto = [0] * n, [0] * n, "explicit"
    group = int(g.a("group"))
    x, w = g.x(0), g.x(1)
    fn = "convolution_backprop_data"
    if group > 1:
        w, fn = _grouped(g, w, group), "group_convolution_backprop_data"
    y = g.let(f"ops.{fn}({x}, {w}, {g.lit(strides)}, pads_begin={g.lit(pb)}, pads_end={g.lit(pe)}, "
              f"dilations={g.lit(dilations)}, auto_pad={g.lit(auto)}, output_padding={g.lit(out_pad)})")
    g.bind(0, bias(g, y, g.x(2), n))


def _deform_check(node: Node) -> Refusal | None:
    return static_w(node)


@rule("deform_conv", check=_deform_check)
def _deform_conv(g: "Gen", node: Node) -> None:
    n = g.rank(1) - 2
    strides, dilations, pb, pe, _ = _window(g, n)
    mask = g.x(4)
    tail = f", mask={mask}" if mask is not None else ""
    y = g.let(f"ops.deformable_convolution({g.x(0)}, {g.x(2)}, {g.x(1)}, {_args(g, strides, pb, pe, dilations)}{tail}, "
              f"group={int(g.a('group'))}, deformable_group={int(g.a('offset_group'))}, "
              f"bilinear_interpolation_pad=True)")
    g.bind(0, bias(g, y, g.x(3), n))


# ----------------------------------------------------------------------------- pooling
def _rounding(g: "Gen") -> str:
    # ONNX ceil_mode drops a last window that would start in the end padding: OpenVINO's ceil_torch
    return "ceil_torch" if int(g.a("ceil_mode")) else "floor"


def _pool_check(node: Node) -> Refusal | None:
    if rank_of(node, 0) is None:
        return Refusal("dynamic_shape", "pooling needs the input rank")
    if node.op == "max_pool" and int(attr(node, "storage_order", 0)) and used(node, 1):
        x = node.inputs[0]
        if x.type.rank != 4 or not all(isinstance(d, int) for d in (x.type.shape or ())[2:]):
            return Refusal("dynamic_shape", "column-major (storage_order=1) indices need a 2-D pool with static H, W")
    return None


def _pool_window(g: "Gen") -> tuple:
    """strides, dilations, pads begin/end, auto_pad, kernel and rounding type of a pooling node."""
    strides, dilations, pb, pe, auto = _window(g, g.rank(0) - 2)
    return strides, dilations, pb, pe, auto, [int(k) for k in g.a("kernel_shape")], _rounding(g)


@rule("average_pool", check=_pool_check)
def _average_pool(g: "Gen", node: Node) -> None:
    strides, dilations, pb, pe, auto, kernel, rounding = _pool_window(g)
    exclude = not bool(int(g.a("count_include_pad")))
    # dilations always spelled out: avg_pool without them crashes compile_model (2026.4)
    g.out(0, f"ops.avg_pool({g.x(0)}, {_args(g, strides, pb, pe, kernel, exclude, rounding, auto, dilations)})")


@rule("max_pool", check=_pool_check)
def _max_pool(g: "Gen", node: Node) -> None:
    strides, dilations, pb, pe, auto, kernel, rounding = _pool_window(g)
    t = g.let(f"ops.max_pool({g.x(0)}, {_args(g, strides, dilations, pb, pe, kernel, rounding, auto)}, 'i64', 0)")
    g.out(0, f"{t}.output(0)")
    if len(node.outputs) > 1:
        idx = f"{t}.output(1)"
        if int(g.a("storage_order")) and used(node, 1):
            # row-major flat index -> column-major: base + w * H + h, with h = i // W % H, w = i % W
            h, w = (int(d) for d in (g.t(0).shape or ())[2:])
            hh = g.let(f"ops.floor_mod(ops.divide({idx}, {i64(g, w)}), {i64(g, h)})")
            ww = g.let(f"ops.floor_mod({idx}, {i64(g, w)})")
            base = g.let(f"ops.subtract({idx}, ops.add(ops.multiply({hh}, {i64(g, w)}), {ww}))")
            idx = g.let(f"ops.add({base}, ops.add(ops.multiply({ww}, {i64(g, h)}), {hh}))")
        g.bind(1, idx)


@rule("lp_pool", check=_pool_check)
def _lp_pool(g: "Gen", node: Node) -> None:
    # (sum over the window of |x|^p)^(1/p) = (avg_pool(|x|^p, pads counted) * prod(kernel))^(1/p)
    n = g.rank(0) - 2
    strides, dilations, pb, pe, auto = _window(g, n)
    kernel = [int(k) for k in g.a("kernel_shape")]
    rounding = _rounding(g)
    p, dt = float(g.a("p")), g.dtype(0)
    xp = g.let(f"ops.power(ops.absolute({g.x(0)}), {g.const(p, dt)})")
    avg = g.let(f"ops.avg_pool({xp}, {_args(g, strides, pb, pe, kernel, False, rounding, auto, dilations)})")
    s = g.let(f"ops.multiply({avg}, {g.const(float(np.prod(kernel)), dt)})")
    g.out(0, f"ops.power({s}, {g.const(1.0 / p, dt)})")


@rule("max_roi_pool")
def _max_roi_pool(g: "Gen", node: Node) -> None:
    shape = [int(s) for s in g.a("pooled_shape")]
    g.out(0, f"ops.roi_pooling({g.x(0)}, {g.x(1)}, {g.lit(shape)}, {float(g.a('spatial_scale'))}, 'max')")


# ----------------------------------------------------------------------------- normalization
def _f32(g: "Gen", x: str, dt: str) -> str:
    return g.let(f"ops.convert({x}, ov.Type.f32)") if dt in _FLOAT32_COMPUTE else x


def _back(g: "Gen", y: str, dt: str) -> str:
    return g.let(f"ops.convert({y}, {g.ty(dt)})") if dt in _FLOAT32_COMPUTE else y


@rule("batch_normalization",
          check=lambda n: None if rank_of(n) is not None or not int(attr(n, "training_mode", 0))
          else Refusal("dynamic_shape", "training mode needs the input rank"))
def _batch_norm(g: "Gen", node: Node) -> None:
    xs = [g.x(i) for i in range(5)]
    eps = float(g.a("epsilon"))
    if not int(g.a("training_mode")):
        g.out(0, f"ops.batch_norm_inference({xs[0]}, {xs[1]}, {xs[2]}, {xs[3]}, {xs[4]}, {eps})")
        return
    # batch statistics (population variance) normalize; running = input * momentum + batch * (1 - momentum)
    r, dt = g.rank(0), g.dtype(0)
    axes = i64(g, [0] + list(range(2, r)))
    chan = i64(g, [-1] + [1] * (r - 2))
    mean = g.let(f"ops.reduce_mean({xs[0]}, {axes}, True)")
    d = g.let(f"ops.subtract({xs[0]}, {mean})")
    var = g.let(f"ops.reduce_mean(ops.multiply({d}, {d}), {axes}, True)")
    y = g.let(f"ops.divide({d}, ops.sqrt(ops.add({var}, {g.const(eps, dt)})))")
    y = g.let(f"ops.add(ops.multiply({y}, ops.reshape({xs[1]}, {chan}, False)), ops.reshape({xs[2]}, {chan}, False))")
    g.bind(0, y)
    m = float(g.a("momentum"))
    for i, (stat, running) in enumerate(((mean, xs[3]), (var, xs[4])), start=1):
        if i < len(node.outputs):
            sdt = g.dtype(3)
            batch = g.let(f"ops.convert(ops.reshape({stat}, {i64(g, [-1])}, False), {g.ty(sdt)})")
            g.out(i, f"ops.add(ops.multiply({running}, {g.const(m, sdt)}), "
                     f"ops.multiply({batch}, {g.const(1 - m, sdt)}))")


@rule("instance_normalization",
          check=needs_rank("instance normalization"))
def _instance_norm(g: "Gen", node: Node) -> None:
    r = g.rank(0)
    y = g.let(f"ops.mvn({g.x(0)}, {i64(g, np.arange(2, r))}, True, {float(g.a('epsilon'))}, 'inside_sqrt')")
    shape = i64(g, [-1] + [1] * (r - 2))
    y = g.let(f"ops.multiply({y}, ops.reshape({g.x(1)}, {shape}, False))")
    g.out(0, f"ops.add({y}, ops.reshape({g.x(2)}, {shape}, False))")


@rule("layer_normalization",
          check=needs_rank("layer normalization"))
def _layer_norm(g: "Gen", node: Node) -> None:
    # Y = (x - mean) / sqrt(var + epsilon) * Scale + B over axes [axis, rank); Mean and InvStdDev kept
    r, dt = g.rank(0), g.dtype(0)
    axis = norm_axis(int(g.a("axis")), r)
    axes = i64(g, np.arange(axis, r))
    x = _f32(g, g.x(0), dt)
    eps = float(g.a("epsilon"))
    if not (used(node, 1) or used(node, 2)):
        y = g.let(f"ops.mvn({x}, {axes}, True, {eps}, 'inside_sqrt')")
    else:
        mean = g.let(f"ops.reduce_mean({x}, {axes}, True)")
        d = g.let(f"ops.subtract({x}, {mean})")
        var = g.let(f"ops.reduce_mean(ops.multiply({d}, {d}), {axes}, True)")
        ct = "float32" if dt in _FLOAT32_COMPUTE else dt
        inv = g.let(f"ops.divide({g.const(1.0, ct)}, ops.sqrt(ops.add({var}, {g.const(eps, ct)})))")
        y = g.let(f"ops.multiply({d}, {inv})")
        stash = "float32" if int(g.a("stash_type", 1)) == 1 else dt
        for i, var in ((1, mean), (2, inv)):
            if i < len(node.outputs):
                out = node.outputs[i]
                if out.type.dtype is None:  # Mean / InvStdDev are in the stash type
                    out.type = TensorType(stash, out.type.shape)
                g.out(i, f"ops.convert({var}, {g.ty(g.out_dtype(i))})")
    y = _back(g, y, dt)
    y = g.let(f"ops.multiply({y}, {g.x(1)})")
    if g.x(2) is not None:
        y = g.let(f"ops.add({y}, {g.x(2)})")
    g.bind(0, y)


@rule("rms_normalization", check=needs_rank("rms normalization"))
def _rms_norm(g: "Gen", node: Node) -> None:
    # y = x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale
    r, dt = g.rank(0), g.dtype(0)
    axis = norm_axis(int(g.a("axis")), r)
    x = _f32(g, g.x(0), dt)
    ms = g.let(f"ops.reduce_mean(ops.multiply({x}, {x}), {i64(g, np.arange(axis, r))}, True)")
    eps = g.const(float(g.a("epsilon")), "float32" if dt in _FLOAT32_COMPUTE else dt)
    y = _back(g, g.let(f"ops.divide({x}, ops.sqrt(ops.add({ms}, {eps})))"), dt)
    g.out(0, f"ops.multiply({y}, ops.convert_like({g.x(1)}, {y}))")


@rule("group_normalization")
def _group_norm(g: "Gen", node: Node) -> None:
    g.out(0, f"ops.group_normalization({g.x(0)}, {g.x(1)}, {g.x(2)}, {int(g.a('num_groups'))}, "
             f"{float(g.a('epsilon'))})")


@rule("mean_variance_normalization")
def _mvn(g: "Gen", node: Node) -> None:
    axes = [int(a) for a in g.a("axes")]
    g.out(0, f"ops.mvn({g.x(0)}, {i64(g, axes)}, True, 1e-09, 'outside_sqrt')")


@rule("lrn")
def _lrn(g: "Gen", node: Node) -> None:
    g.out(0, f"ops.lrn({g.x(0)}, {i64(g, [1])}, {float(g.a('alpha'))}, {float(g.a('beta'))}, "
             f"{float(g.a('bias'))}, {int(g.a('size'))})")


@rule("lp_normalization", check=lambda n: None if int(attr(n, "p", 2)) in (1, 2) else Refusal("unsupported_attribute_value", "p must be 1 or 2"))
def _lp_norm(g: "Gen", node: Node) -> None:
    # x / ||x||_p along axis; a zero norm gives 0
    x, dt = g.x(0), g.dtype(0)
    norm = g.let(f"ops.reduce_l{int(g.a('p'))}({x}, {i64(g, [int(g.a('axis'))])}, True)")
    zero = g.const(0, dt)
    g.out(0, f"ops.select(ops.equal({norm}, {zero}), {zero}, ops.divide({x}, {norm}))")


# ----------------------------------------------------------------------------- resize
_RESIZE_MODES = {"nearest": "nearest", "linear": "linear_onnx", "cubic": "cubic"}
_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners")


def _resize_check(node: Node) -> Refusal | None:
    if attr(node, "coordinate_transformation_mode", "half_pixel") not in _COORD_MODES:
        return f"OpenVINO Interpolate has no {attr(node, 'coordinate_transformation_mode')!r} coordinate mode"
    if int(attr(node, "exclude_outside", 0)):
        return Refusal("unsupported_attribute_value", "OpenVINO Interpolate has no exclude_outside")
    if attr(node, "keep_aspect_ratio_policy", "stretch") != "stretch":
        return Refusal("unsupported_attribute_value", "keep_aspect_ratio_policy other than stretch")
    return None


@rule("resize", check=_resize_check)
def _resize(g: "Gen", node: Node) -> None:
    mode = _RESIZE_MODES[g.a("mode")]
    antialias = bool(int(g.a("antialias", 0)))
    if antialias and mode == "linear_onnx":
        mode = "linear"
    sizes, scales = g.x(3), g.x(2)
    if sizes is not None:
        target, calc = sizes, "sizes"
    else:
        target, calc = scales, "scales"
    axes = g.a("axes")
    tail = f", axes={i64(g, [int(a) for a in axes])}" if axes is not None else ""
    g.out(0, f"ops.interpolate({g.x(0)}, {target}, {g.lit(mode)}, {g.lit(calc)}, "
             f"coordinate_transformation_mode={g.lit(g.a('coordinate_transformation_mode'))}, "
             f"nearest_mode={g.lit(g.a('nearest_mode'))}, antialias={g.lit(antialias)}, "
             f"cube_coeff={float(g.a('cubic_coeff_a'))}{tail})")


@rule("upsample")
def _upsample(g: "Gen", node: Node) -> None:
    mode = "nearest" if g.a("mode") == "nearest" else "linear_onnx"
    g.out(0, f"ops.interpolate({g.x(0)}, {g.x(1)}, {g.lit(mode)}, 'scales', "
             f"coordinate_transformation_mode='asymmetric', nearest_mode='floor')")


# ----------------------------------------------------------------------------- sampling, detection
_GRID_MODES = {"linear": "bilinear", "bilinear": "bilinear", "cubic": "bicubic", "bicubic": "bicubic",
               "nearest": "nearest"}


@rule("grid_sample",
          check=lambda n: None if rank_of(n) == 4 else Refusal("rank_limit", "OpenVINO GridSample is 2-D (rank-4 input) only"))
def _grid_sample(g: "Gen", node: Node) -> None:
    attrs = {"align_corners": bool(int(g.a("align_corners"))), "mode": _GRID_MODES[g.a("mode")],
             "padding_mode": g.a("padding_mode")}
    g.out(0, f"ops.grid_sample({g.x(0)}, {g.x(1)}, {g.lit(attrs)})")


@rule("roi_align")
def _roi_align(g: "Gen", node: Node) -> None:
    # ONNX half_pixel shifts by -0.5 like OpenVINO's half_pixel_for_nn (its half_pixel also rescales)
    aligned = {"half_pixel": "half_pixel_for_nn",
               "output_half_pixel": "asymmetric"}[g.a("coordinate_transformation_mode")]
    g.out(0, f"ops.roi_align({g.x(0)}, {g.x(1)}, {g.x(2)}, {int(g.a('output_height'))}, "
             f"{int(g.a('output_width'))}, {int(g.a('sampling_ratio'))}, {float(g.a('spatial_scale'))}, "
             f"{g.lit(g.a('mode'))}, {g.lit(aligned)})")


@rule("non_max_suppression")
def _nms(g: "Gen", node: Node) -> None:
    args = [g.x(i) for i in range(5)]
    opt = ", ".join(f"{k}={v}" for k, v in zip(("max_output_boxes_per_class", "iou_threshold", "score_threshold"),
                                                args[2:]) if v is not None)
    enc = "center" if int(g.a("center_point_box")) else "corner"
    t = g.let(f"ops.non_max_suppression({args[0]}, {args[1]}, {opt + ', ' if opt else ''}box_encoding={g.lit(enc)}, "
              f"sort_result_descending=False, output_type='i64')")
    g.out(0, f"ops.slice({t}.output(0), {i64(g, [0])}, {t}.output(2), {i64(g, [1])})")


@rule("col2im",
          check=lambda n: None if n.inputs[1].type.shape == (2,) else Refusal("rank_limit", "OpenVINO Col2Im is 2-D only"))
def _col2im(g: "Gen", node: Node) -> None:
    n = 2
    c = g.cval(2)
    if c is not None:
        n = int(c.size)
    strides = [int(s) for s in (g.a("strides") or [1] * n)]
    dilations = [int(d) for d in (g.a("dilations") or [1] * n)]
    pads = [int(p) for p in (g.a("pads") or [0] * (2 * n))]
    g.out(0, f"ops.col2im({g.x(0)}, {g.x(1)}, {g.x(2)}, {_args(g, strides, dilations, pads[:n], pads[n:])})")


@rule("unique")
def _unique(g: "Gen", node: Node) -> None:
    axis = g.a("axis")
    ax = f", {i64(g, int(axis))}" if axis is not None else ", None"
    t = g.let(f"ops.unique({g.x(0)}{ax}, {bool(int(g.a('sorted')))}, 'i64', 'i64')")
    g.outs(t)


# ----------------------------------------------------------------------------- losses
def _nll(g: "Gen", logp: str, dt: str, target: str, target_dt: str, weight: str | None) -> str:
    """-logp[n, target[n, ...], ...] * weight[target], reduced as the node's ``reduction`` says.

    Targets equal to ``ignore_index`` contribute 0 and do not count in the mean.
    """
    t = target if target_dt == "int64" else g.let(f"ops.convert({target}, ov.Type.i64)")
    ignore = g.a("ignore_index")
    mask = None
    if ignore is not None:
        mask = g.let(f"ops.not_equal({t}, {i64(g, int(ignore))})")
        t = g.let(f"ops.select({mask}, {t}, {i64(g, 0)})")
    picked = g.let(f"ops.squeeze(ops.gather_elements({logp}, ops.unsqueeze({t}, {i64(g, [1])}), 1), {i64(g, [1])})")
    w = g.let(f"ops.gather({weight}, {t}, {i64(g, 0)})") if weight is not None else None
    if mask is not None:
        m = g.let(f"ops.convert({mask}, {g.ty(dt)})")
        w = g.let(f"ops.multiply({w}, {m})") if w is not None else m
    loss = g.let(f"ops.negative({picked})" if w is None else f"ops.negative(ops.multiply({picked}, {w}))")
    reduction = g.a("reduction")
    if reduction == "none":
        return loss
    axes = g.let(f"ops.range({i64(g, 0)}, ops.reshape(ops.shape_of(ops.shape_of({loss})), {i64(g, [])}, False), "
                 f"{i64(g, 1)}, 'i64')")
    total = g.let(f"ops.reduce_sum({loss}, {axes}, False)")
    if reduction == "sum":
        return total
    if w is None:
        return g.let(f"ops.reduce_mean({loss}, {axes}, False)")
    return g.let(f"ops.divide({total}, ops.reduce_sum({w}, {axes}, False))")


@rule("negative_log_likelihood_loss")
def _nll_loss(g: "Gen", node: Node) -> None:
    g.bind(0, _nll(g, g.x(0), g.dtype(0), g.x(1), g.dtype(1), g.x(2)))


@rule("softmax_cross_entropy_loss")
def _softmax_ce(g: "Gen", node: Node) -> None:
    dt = g.dtype(0)
    x = _f32(g, g.x(0), dt)
    logp = g.let(f"ops.log_softmax({x}, 1)")
    weight = g.x(2)
    if weight is not None and dt in _FLOAT32_COMPUTE:
        weight = g.let(f"ops.convert({weight}, ov.Type.f32)")
    g.bind(0, _back(g, _nll(g, logp, "float32" if dt in _FLOAT32_COMPUTE else dt, g.x(1), g.dtype(1), weight), dt))
    if len(node.outputs) > 1:
        g.bind(1, _back(g, logp, dt))


# ----------------------------------------------------------------------------- activations with parameters
@rule("prelu")
def _prelu(g: "Gen", node: Node) -> None:
    """OpenVINO's PRelu (which the CPU plugin fuses into the convolution before it) over a
    float input. Its slope follows numpy's broadcasting except that a 1-D slope as long as the
    data's axis 1 goes along that axis: ONNX's 1-D slope goes along the last axis, so one of
    rank 1 and length > 1 is written as [1, C]. Integer inputs (and an unknown rank):
    ``x < 0 ? x * slope : x``."""
    x, s = g.x(0), g.x(1)
    rank, srank = g.t(0).rank, g.t(1).rank
    if g.dtype(0) not in ("float32", "float16", "bfloat16") or rank is None or srank is None:
        g.out(0, f"ops.select(ops.less({x}, {g.const(0, g.dtype(0))}), ops.multiply({x}, {s}), {x})")
        return
    shape = g.t(1).shape
    if srank == 1 and rank > 1 and not (shape is not None and shape[0] == 1):
        s = g.let(f"ops.unsqueeze({s}, {i64(g, [0])})")
    g.out(0, f"ops.prelu({x}, {s})")


@rule("gelu")
def _gelu(g: "Gen", node: Node) -> None:
    mode = {"none": "erf", "tanh": "tanh"}[g.a("approximate")]
    g.out(0, f"ops.gelu({g.x(0)}, {g.lit(mode)})")


@rule("celu")
def _celu(g: "Gen", node: Node) -> None:
    # celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = alpha * elu(x / alpha, 1)
    alpha = float(g.a("alpha"))
    a = g.const(alpha, g.dtype(0))
    g.out(0, f"ops.multiply({a}, ops.elu(ops.divide({g.x(0)}, {a}), 1.0))")


@rule("hardmax")
def _hardmax(g: "Gen", node: Node) -> None:
    # one_hot(argmax(x, axis), depth = x.shape[axis], on = 1, off = 0, axis)
    x, axis = g.x(0), int(g.a("axis"))
    t = g.let(f"ops.topk({x}, {i64(g, 1)}, {axis}, 'max', 'value', 'i64', True)")
    idx = g.let(f"ops.squeeze({t}.output(1), {i64(g, [axis])})")
    dt = g.dtype(0)
    g.out(0, f"ops.one_hot({idx}, {dim(g, x, axis)}, {g.const(1, dt)}, {g.const(0, dt)}, {axis})")


# ----------------------------------------------------------------------------- einsum
@rule("einsum")
def _einsum(g: "Gen", node: Node) -> None:
    equation = str(g.a("equation")).replace(" ", "")  # OpenVINO rejects the spaces ONNX allows
    g.out(0, f"ops.einsum([{', '.join(g.xs())}], {g.lit(equation)})")


# ----------------------------------------------------------------------------- global pooling, dropout
@rule("global_average_pool", "global_max_pool", "global_lp_pool",
          check=lambda n: None if rank_of(n) is not None else Refusal("dynamic_shape", "global pooling needs the input rank"))
def _global_pool(g: "Gen", node: Node) -> None:
    axes = i64(g, np.arange(2, g.rank(0)))
    x = g.x(0)
    if node.op == "global_average_pool":
        g.out(0, f"ops.reduce_mean({x}, {axes}, True)")
    elif node.op == "global_max_pool":
        g.out(0, f"ops.reduce_max({x}, {axes}, True)")
    else:
        p = int(g.a("p"))
        if p in (1, 2):
            g.out(0, f"ops.reduce_l{p}({x}, {axes}, True)")
        else:  # (sum |x|^p)^(1/p)
            dt = g.dtype(0)
            s = g.let(f"ops.reduce_sum(ops.power(ops.absolute({x}), {g.const(p, dt)}), {axes}, True)")
            g.out(0, f"ops.power({s}, {g.const(1.0 / p, dt)})")


def _dropout_check(node: Node) -> Refusal | None:
    tm = node.inputs[2] if len(node.inputs) > 2 else None
    if tm is None or (tm.is_const and not bool(np.asarray(tm.const))):
        return None
    ratio = node.inputs[1] if len(node.inputs) > 1 else None
    if ratio is not None and ratio.is_const and float(np.asarray(ratio.const)) == 0.0:
        return None
    return Refusal("unsupported_attribute_value", "dropout in training mode is random")


@rule("dropout", check=_dropout_check)
def _dropout(g: "Gen", node: Node) -> None:
    x = g.x(0)
    g.bind(0, x)
    if len(node.outputs) > 1:
        g.out(1, f"ops.broadcast(ops.constant(True), ops.shape_of({x}))")


# ----------------------------------------------------------------------------- affine grid
def _affine_check(node: Node) -> Refusal | None:
    if static_out(node) is None:
        return Refusal("dynamic_shape", "affine_grid needs a static output shape (a constant size)")
    return None


@rule("affine_grid", check=_affine_check)
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
