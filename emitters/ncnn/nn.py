"""ncnn rules for the ops whose table snippet was written for one proof sample's rank:
convolutions and pooling by spatial rank (1-D, 2-D, 3-D layer types).

Each rule reads its input in the batch-dropped form ``B`` and writes its output so; a
convolution's weights must be constants (ncnn stores them in ``model.bin``, a 4-byte
raw-float32 tag first, then the bias untagged).
"""
from __future__ import annotations

import math

import numpy as np

from .codegen import NodeEmit, live, raw, refuse, tagged
from .registry import rule


def _pads(e: NodeEmit, spatial: int, kernel: list[int], strides: list[int], dilations: list[int]) -> list[int]:
    """Explicit begin/end pads (ONNX order: begins then ends), ``auto_pad`` resolved on the
    shapes by the reference's rule (``reference.conv._conv_pads``)."""
    from translator.reference.conv import _conv_pads

    auto = e.attr("auto_pad") or "NOTSET"
    if isinstance(auto, bytes):
        auto = auto.decode()
    pads = _conv_pads(list(e.shape(0)[2:spatial + 2]), kernel, strides, dilations, e.attr("pads"), auto)
    return [int(p) for p in pads]


@rule("conv")
def conv(e: NodeEmit) -> None:
    w = e.const(1)
    b = e.const(2)
    dynamic = w is None or (e.value(2) is not None and b is None)
    wshape = e.shape(1)
    spatial = len(wshape) - 2
    if spatial not in (1, 2):
        raise refuse("rank_limit", f"a {spatial}-D convolution (ncnn's Convolution3D is not written here)")
    group = int(e.attr("group") or 1)
    kernel = list(wshape[2:])
    strides = [int(s) for s in (e.attr("strides") or [1] * spatial)]
    dil = [int(d) for d in (e.attr("dilations") or [1] * spatial)]
    pads = _pads(e, spatial, kernel, strides, dil)
    cout = int(wshape[0])
    cin = int(e.shape(0)[1])
    depthwise = group > 1
    ltype = {1: "Convolution1D", 2: "Convolution"}[spatial] + ("DepthWise" if depthwise and spatial == 2 else "")
    if spatial == 1 and depthwise:
        ltype = "ConvolutionDepthWise1D"
    params = [f"0={cout}", f"1={kernel[-1]}", f"2={dil[-1]}", f"3={strides[-1]}", f"4={pads[spatial - 1]}",
              f"15={pads[-1]}", f"5={int(e.value(2) is not None)}", f"6={math.prod(wshape)}"]
    if spatial == 2:
        params += [f"11={kernel[0]}", f"12={dil[0]}", f"13={strides[0]}", f"14={pads[0]}", f"16={pads[2]}"]
    if depthwise:
        params.append(f"7={group}")
    if cin != wshape[1] * group:
        raise refuse("rank_limit", f"conv: {cin} input channels against a weight of {list(wshape)}")
    n = int(e.shape(0)[0])
    if spatial == 1 and n > 1 and not dynamic:
        return _conv1d_over_batch(e, params, depthwise, group, w, b)
    x = e.input(0, "B")
    y = e.top()
    if dynamic:  # the weight (and bias) as blobs: ncnn's dynamic_weight
        extra = [e.input(1, "F")] + ([e.input(2, "F")] if e.value(2) is not None else [])
        e.add(ltype, [x] + extra, [y], params[:-1] + ["19=1"])
    else:
        e.add(ltype, [x], [y], params, (tagged(w), raw(b) if b is not None else b""))
    e.output(0, y, "B")


@rule("conv_transpose")
def conv_transpose(e: NodeEmit) -> None:
    """``Deconvolution`` (1-D/2-D, ``DepthWise`` for groups) over a constant weight and bias,
    stored as ncnn reads them: per group, the ONNX ``[in, out, k...]`` kernel as ``[out, in,
    k...]``. The output window (pads, ``auto_pad``, ``output_shape``, ``output_padding``) is
    resolved on the static shapes into ncnn's crop of the full output. A weight computed at run
    time goes through the table's snippet (ncnn's dynamic weight), which adds no bias."""
    from translator.reference.conv import _transpose_geometry

    w, b = e.const(1), e.const(2)
    if w is None:
        if e.value(2) is not None:
            raise refuse("requires_constant_input", "conv_transpose over a run-time weight with a bias: ncnn's "
                                                    "dynamic-weight Deconvolution adds no bias")
        e.snippet()
        return
    if e.value(2) is not None and b is None:
        raise refuse("requires_constant_input", "conv_transpose: ncnn stores the bias as a weight")
    wshape = list(w.shape)
    nd = len(wshape) - 2
    if nd not in (1, 2):
        raise refuse("rank_limit", f"a {nd}-D transposed convolution (ncnn's Deconvolution3D is not written here)")
    group = int(e.attr("group") or 1)
    strides = [int(v) for v in (e.attr("strides") or [1] * nd)]
    dil = [int(v) for v in (e.attr("dilations") or [1] * nd)]
    out_pad = [int(v) for v in (e.attr("output_padding") or [0] * nd)]
    auto = e.attr("auto_pad") or "NOTSET"
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    in_sp, out_sp = list(e.shape(0)[2:]), list(e.out_shape(0)[2:])
    full, begins, _ = _transpose_geometry(in_sp, wshape[2:], strides, dil, out_pad, e.attr("pads"), auto,
                                          e.attr("output_shape"))
    ends = [full[i] - begins[i] - out_sp[i] for i in range(nd)]
    if min(begins + ends) < 0:
        raise refuse("unsupported_attribute_value", f"conv_transpose: an output window past the full output "
                                                    f"(crop {begins} / {ends}): ncnn's Deconvolution only crops")
    cin, per = wshape[0], wshape[1]
    cout = per * group
    kernel = wshape[2:]
    # [g, in/g, out/g, k...] → [g, out/g, in/g, k...]
    kern = np.ascontiguousarray(w.reshape([group, cin // group, per] + kernel).swapaxes(1, 2))
    params = [f"0={cout}", f"1={kernel[-1]}", f"2={dil[-1]}", f"3={strides[-1]}", f"4={begins[-1]}",
              f"15={ends[-1]}", f"18={out_pad[-1]}", f"5={int(b is not None)}", f"6={w.size}"]
    if nd == 2:
        params += [f"11={kernel[0]}", f"12={dil[0]}", f"13={strides[0]}", f"14={begins[0]}", f"16={ends[0]}",
                   f"19={out_pad[0]}"]
    ltype = "Deconvolution" + ("DepthWise" if group > 1 else "") + ("1D" if nd == 1 else "")
    if group > 1:
        params.append(f"7={group}")
    if int(e.shape(0)[1]) != cin:
        raise refuse("rank_limit", f"conv_transpose: {e.shape(0)[1]} input channels against a weight of {wshape}")
    x = e.input(0, "B")
    y = e.top()
    e.add(ltype, [x], [y], params, (tagged(kern), raw(b) if b is not None else b""))
    e.output(0, y, "B")


def _conv1d_over_batch(e: NodeEmit, params: list[str], depthwise: bool, group: int, w: np.ndarray,
                       b: np.ndarray | None) -> None:
    """A 1-D convolution over a batch of N > 1 ([N, C, L], a streaming model's frames) as one
    2-D convolution with a 1 x k kernel over the batch moved to the rows ([C, N, L], one
    ``Permute`` each way), instead of one layer per item: the same products, in one layer."""
    from translator.proofs.ncnn import _order

    swap = f"0={_order([1, 0, 2], 3)}"
    x, t, y = e.top(), e.top(), e.top()
    e.add("Permute", [e.input(0, "F")], [x], [swap])
    params = [p for p in params if not p.startswith("7=")] + ["11=1", "12=1", "13=1", "14=0", "16=0"]
    if depthwise:
        params.append(f"7={group}")
    e.add("ConvolutionDepthWise" if depthwise else "Convolution", [x], [t], params,
          (tagged(w), raw(b) if b is not None else b""))
    e.add("Permute", [t], [y], [swap])
    e.output(0, y, "F")


def _pool(e: NodeEmit, kind: int) -> None:
    rank = len(e.shape(0))
    spatial = rank - 2
    if len(e.node.outputs) > 1 and e.node.outputs[1] is not None:
        raise refuse("unsupported_attribute_value", "MaxPool's Indices output: ncnn's Pooling gives no argmax")
    if spatial not in (1, 2):
        raise refuse("rank_limit", f"{spatial}-D pooling (ncnn's Pooling3D is not written here)")
    kernel = [int(k) for k in e.attr("kernel_shape")]
    strides = [int(s) for s in (e.attr("strides") or [1] * spatial)]
    dil = [int(d) for d in (e.attr("dilations") or [1] * spatial)]
    if any(d != 1 for d in dil):
        raise refuse("unsupported_attribute_value", "ncnn's Pooling has no dilation")
    if len(e.node.outputs) > 1 and e.node.outputs[1].uses:
        raise refuse("unsupported_attribute_value", "ncnn's Pooling gives no indices")
    pads = _pads(e, spatial, kernel, strides, dil)
    ceil = int(e.attr("ceil_mode") or 0)
    params = [f"0={kind}", f"1={kernel[-1]}", f"2={strides[-1]}", f"3={pads[spatial - 1]}"]
    if spatial == 2:
        params += [f"11={kernel[0]}", f"12={strides[0]}", f"13={pads[0]}", f"14={pads[3]}", f"15={pads[2]}"]
    else:
        params += [f"14={pads[1]}"]
    params.append(f"5={0 if ceil else 1}")
    if kind == 1:
        params.append(f"6={int(e.attr('count_include_pad') or 0)}")
    x = e.input(0, "B")
    y = e.top()
    e.add("Pooling" if spatial == 2 else "Pooling1D", [x], [y], params)
    e.output(0, y, "B")


@rule("max_pool")
def max_pool(e: NodeEmit) -> None:
    _pool(e, 0)


@rule("average_pool")
def average_pool(e: NodeEmit) -> None:
    _pool(e, 1)


def _global(e: NodeEmit, kind: int) -> None:
    spatial = len(e.shape(0)) - 2
    ltype = {1: "Pooling1D", 2: "Pooling", 3: "Pooling3D"}.get(spatial)
    if ltype is None:
        raise refuse("rank_limit", f"global pooling over {spatial} dims")
    x = e.input(0, "B")
    y = e.top()
    e.add(ltype, [x], [y], [f"0={kind}", "4=1"])
    e.output(0, y, "B")


@rule("global_average_pool")
def global_average_pool(e: NodeEmit) -> None:
    _global(e, 1)


@rule("global_max_pool")
def global_max_pool(e: NodeEmit) -> None:
    _global(e, 0)


def _rows(e: NodeEmit, shape: tuple, axis: int) -> tuple[str, bool]:
    """The input as ncnn's norms read it: normalized over its last one or two dims; more are
    flattened into rows first (a ``Reshape``). Returns (blob, whether it was flattened)."""
    from .codegen import shape_params

    x = e.input(0, "F")
    if len(shape) - axis <= 2:
        return x, False
    rows = (math.prod(shape[:axis]) or 1, math.prod(shape[axis:]))
    y = e.top()
    e.add("Reshape", [x], [y], shape_params(rows))
    return y, True


def _unrows(e: NodeEmit, y: str, shape: tuple, rows: bool) -> str:
    from .codegen import shape_params

    if not rows:
        return y
    z = e.top()
    e.add("Reshape", [y], [z], shape_params(tuple(shape)))
    return z


@rule("layer_normalization")
def layer_normalization(e: NodeEmit) -> None:
    """``LayerNorm`` over the last dims (its gamma and beta as weights when constant; else
    without them, then ``BinaryOp`` with the scale and bias blobs); Mean and InvStdDev, when
    read, as ``Reduction`` layers."""
    shape = e.shape(0)
    r = len(shape)
    axis = int(e.attr("axis") if e.attr("axis") is not None else -1) % r
    eps = float(e.attr("epsilon") if e.attr("epsilon") is not None else 1e-5)
    size = math.prod(shape[axis:])
    scale, bias = e.const(1), e.const(2)
    norm_shape = tuple(shape[axis:])
    fixed = scale is not None and (e.value(2) is None or bias is not None) and \
        np.shape(scale) in (norm_shape, (size,)) and (bias is None or np.shape(bias) in (norm_shape, (size,)))
    x, rows = _rows(e, shape, axis)
    y = e.top()
    if fixed:
        b = bias if bias is not None else np.zeros(size, np.float32)
        e.add("LayerNorm", [x], [y], [f"0={size}", f"1={eps!r}", "2=1"], (raw(scale), raw(b)))
    else:
        e.add("LayerNorm", [x], [y], [f"0={size}", f"1={eps!r}", "2=0"])
        y = _unrows(e, y, shape, rows)
        t = e.top()
        e.add("BinaryOp", [y, e.input(1, "F", r)], [t], ["0=2"])
        y = t
        if e.value(2) is not None:
            t = e.top()
            e.add("BinaryOp", [y, e.input(2, "F", r)], [t], ["0=0"])
            y = t
    if fixed:
        y = _unrows(e, y, shape, rows)
    e.output(0, y, "F")
    outs = e.node.outputs
    if len(outs) > 1 and (live(outs[1]) or (len(outs) > 2 and live(outs[2]))):
        axes = "-23303=" + ",".join([str(r - axis)] + [str(a) for a in range(axis, r)])
        x2 = e.input(0, "F")
        mean = e.top()
        e.add("Reduction", [x2], [mean], ["0=3", "1=0", axes, "4=1", "5=1"])
        e.output(1, mean, "F")
        if len(outs) > 2 and live(outs[2]):
            d, sq, var, ve, inv = (e.top() for _ in range(5))
            e.add("BinaryOp", [e.input(0, "F"), mean], [d], ["0=1"])
            e.add("BinaryOp", [d, d], [sq], ["0=2"])
            e.add("Reduction", [sq], [var], ["0=3", "1=0", axes, "4=1", "5=1"])
            e.add("BinaryOp", [var], [ve], ["0=0", "1=1", f"2={eps!r}"])
            e.add("UnaryOp", [ve], [inv], ["0=6"])
            e.output(2, inv, "F")


@rule("instance_normalization")
def instance_normalization(e: NodeEmit) -> None:
    """The table's ``InstanceNorm`` over (c, h, w) blobs; a 1-D input ([1, C, L], a speech
    model's frames) held as (C, 1, L) around it, since ncnn reads a 2-D blob's rows as its
    channels' count of 1."""
    from .codegen import shape_params

    shape = e.shape(0)
    if len(shape) != 3 or shape[0] != 1:
        return e.snippet()
    scale, bias = e.need_const(1, "scale"), e.need_const(2, "B")
    c, n = shape[1], shape[2]
    eps = float(e.attr("epsilon") if e.attr("epsilon") is not None else 1e-5)
    x, y, t = e.top(), e.top(), e.top()
    e.add("Reshape", [e.input(0, "B")], [x], shape_params((c, 1, n)))
    e.add("InstanceNorm", [x], [y], [f"0={c}", f"1={eps!r}", "2=1"],
          (raw(np.broadcast_to(scale, (c,))), raw(np.broadcast_to(bias, (c,)))))
    e.add("Reshape", [y], [t], shape_params((c, n)))
    e.output(0, t, "B")


@rule("rms_normalization")
def rms_normalization(e: NodeEmit) -> None:
    """``RMSNorm`` over the last dims (its scale as a weight when constant of the normalized
    size; else without it, then ``BinaryOp`` with the scale blob)."""
    shape = e.shape(0)
    r = len(shape)
    axis = int(e.attr("axis") if e.attr("axis") is not None else -1) % r
    eps = float(e.attr("epsilon") if e.attr("epsilon") is not None else 1e-5)
    size = math.prod(shape[axis:])
    scale = e.const(1)
    x, rows = _rows(e, shape, axis)
    y = e.top()
    if scale is not None and np.shape(scale) in (tuple(shape[axis:]), (size,)):
        e.add("RMSNorm", [x], [y], [f"0={size}", f"1={eps!r}", "2=1"], raw(scale))
        y = _unrows(e, y, shape, rows)
    else:
        e.add("RMSNorm", [x], [y], [f"0={size}", f"1={eps!r}", "2=0"])
        y = _unrows(e, y, shape, rows)
        t = e.top()
        e.add("BinaryOp", [y, e.input(1, "F", r)], [t], ["0=2"])
        y = t
    e.output(0, y, "F")


@rule("trilu")
def trilu(e: NodeEmit) -> None:
    """The input times a constant 0/1 mask of its last two dims (``MemoryData``, ``BinaryOp``):
    the triangle is known when the network is written (static shapes, ``k`` constant)."""
    shape = e.shape(0)
    if len(shape) < 2:
        raise refuse("rank_limit", "trilu needs two dims")
    k = e.const(1)
    if e.value(1) is not None and k is None:
        raise refuse("requires_constant_input", "trilu's k is computed at run time: the mask is written as a constant")
    k = int(np.asarray(k).reshape(-1)[0]) if k is not None else 0
    ones = np.ones(shape[-2:], np.float32)
    mask = np.triu(ones, k) if int(e.attr("upper") if e.attr("upper") is not None else 1) else np.tril(ones, k)
    r = len(shape)
    x = e.input(0, "F")
    m = e.top()
    from .codegen import shape_params

    e.add("MemoryData", [], [m], shape_params((1,) * (r - 2) + shape[-2:] if r <= 4 else shape[-2:]),
          raw(mask))
    y = e.top()
    e.add("BinaryOp", [x, m], [y], ["0=2"])
    e.output(0, y, "F")


@rule("clip")
def clip(e: NodeEmit) -> None:
    """Constant bounds: one ``Clip`` (an omitted bound is the float range's end); bounds
    computed at run time: ``BinaryOp`` max and min with their blobs."""
    lo, hi = e.const(1), e.const(2)
    form = "B" if e.net.forms(e.node.inputs[0]) == {"B"} else "F"
    x = e.input(0, form)
    dynamic = [i for i in (1, 2) if e.value(i) is not None and e.const(i) is None]
    if not dynamic:
        big = float(np.finfo(np.float32).max)
        low = float(np.asarray(lo).reshape(-1)[0]) if lo is not None else -big
        high = float(np.asarray(hi).reshape(-1)[0]) if hi is not None else big
        y = e.top()
        e.add("Clip", [x], [y], [f"0={low!r}", f"1={high!r}"])
        e.output(0, y, form)
        return
    r = len(e.shape(0))
    y = x
    for i, kind in ((1, 4), (2, 5)):
        if e.value(i) is None:
            continue
        t = e.top()
        e.add("BinaryOp", [y, e.input(i, "F" if form == "F" else "B", r)], [t], [f"0={kind}"])
        y = t
    e.output(0, y, form)


def _per_axis(e: NodeEmit, i: int, rank: int, axis: int, form: str) -> str | None:
    """Input ``i`` (a scale or zero point: scalar, or 1-D along ``axis``) as a blob that
    broadcasts against a rank-``rank`` value held in ``form``; None when omitted."""
    from .codegen import shape_params

    a = e.const(i)
    if e.value(i) is None:
        return None
    if a is None:
        raise refuse("requires_constant_input", "a quantization's scale and zero point are written as constants")
    a = np.asarray(a, np.float32)
    shape = [1] * rank
    if a.size > 1:
        shape[axis] = a.size
    if form == "B":
        shape = shape[1:] or [1]
    m = e.top()
    e.add("MemoryData", [], [m], shape_params(tuple(shape)), raw(a.reshape(-1)))
    return m


@rule("dequantize_linear")
def dequantize_linear(e: NodeEmit) -> None:
    """``(x - zero_point) * scale`` in float32 (``BinaryOp``; the integers as float32 values):
    ncnn's own int8 layers need its calibration tables, so the model runs in float."""
    if e.attr("block_size"):
        raise refuse("unsupported_attribute_value", "blocked dequantization is not written for ncnn")
    shape = e.shape(0)
    r = max(len(shape), 1)
    axis = int(e.attr("axis") if e.attr("axis") is not None else 1) % r
    form = "B" if e.net.forms(e.node.inputs[0]) == {"B"} and axis > 0 else "F"
    x = e.input(0, form)
    zp = _per_axis(e, 2, r, axis, form)
    if zp is not None:
        t = e.top()
        e.add("BinaryOp", [x, zp], [t], ["0=1"])
        x = t
    y = e.top()
    e.add("BinaryOp", [x, _per_axis(e, 1, r, axis, form)], [y], ["0=2"])
    e.output(0, y, form)


@rule("quantize_linear")
def quantize_linear(e: NodeEmit) -> None:
    """``clamp(round(x / scale) + zero_point)`` in float32 (``BinaryOp``, ``UnaryOp`` round,
    ``Clip`` to the output dtype's range): the integers as float32 values."""
    if e.attr("block_size"):
        raise refuse("unsupported_attribute_value", "blocked quantization is not written for ncnn")
    dst = e.node.outputs[0].type.dtype
    if dst not in ("int8", "uint8", "int16", "uint16"):
        raise refuse("unsupported_dtype", f"quantization to {dst}: not written for ncnn")
    shape = e.shape(0)
    r = max(len(shape), 1)
    axis = int(e.attr("axis") if e.attr("axis") is not None else 1) % r
    form = "B" if e.net.forms(e.node.inputs[0]) == {"B"} and axis > 0 else "F"
    x = e.input(0, form)
    q, rq = e.top(), e.top()
    e.add("BinaryOp", [x, _per_axis(e, 1, r, axis, form)], [q], ["0=3"])
    e.add("UnaryOp", [q], [rq], ["0=18"])
    zp = _per_axis(e, 2, r, axis, form)
    if zp is not None:
        t = e.top()
        e.add("BinaryOp", [rq, zp], [t], ["0=0"])
        rq = t
    info = np.iinfo(dst)
    y = e.top()
    e.add("Clip", [rq], [y], [f"0={float(info.min)!r}", f"1={float(info.max)!r}"])
    e.output(0, y, form)


@rule("resize", "upsample")
def resize(e: NodeEmit) -> None:
    """``Interp`` to the output's static height and width (scales or sizes, whichever the
    model gave, have already decided them): nearest (asymmetric, floor, as ncnn picks),
    bilinear and bicubic with half-pixel or align-corners coordinates."""
    shape, out = e.shape(0), e.out_shape(0)
    if len(shape) != 4 or tuple(out[:2]) != tuple(shape[:2]):
        raise refuse("unsupported_attribute_value", "ncnn's Interp resizes the last two dims of a 4-D value only")
    mode = e.attr("mode") or "nearest"
    mode = mode.decode() if isinstance(mode, bytes) else mode
    coord = e.attr("coordinate_transformation_mode") or ("asymmetric" if e.node.op == "upsample" else "half_pixel")
    coord = coord.decode() if isinstance(coord, bytes) else coord
    kind = {"nearest": 1, "linear": 2, "bilinear": 2, "cubic": 3}.get(mode)
    if kind is None:
        raise refuse("unsupported_attribute_value", f"resize mode {mode!r}")
    if kind == 1:
        near = e.attr("nearest_mode") or "round_prefer_floor"
        near = near.decode() if isinstance(near, bytes) else near
        steps = [o // i if i and o % i == 0 else 0 for o, i in zip(out[2:], shape[2:])]  # integer upscales
        same = (coord == "asymmetric" and (near == "floor" or near == "round_prefer_floor" and 0 < max(steps) <= 2
                                           and min(steps) > 0)) or \
            (coord in ("half_pixel", "pytorch_half_pixel") and near in ("round_prefer_floor", "round_prefer_ceil")
             and min(steps) > 0)
        if not same:  # ncnn picks floor(dst * in / out); these modes pick the same pixels only as above
            raise refuse("unsupported_attribute_value", f"nearest resize with {coord} coordinates and {near} "
                                                        "rounding: ncnn's picks floor(asymmetric)")
        align = 0
    elif coord == "align_corners":
        align = 1
    elif coord in ("half_pixel", "pytorch_half_pixel"):
        align = 0
    else:
        raise refuse("unsupported_attribute_value", f"{mode} resize with {coord} coordinates: ncnn's Interp has "
                                                    "half-pixel and align-corners")
    if kind == 3 and float(e.attr("cubic_coeff_a") if e.attr("cubic_coeff_a") is not None else -0.75) != -0.75:
        raise refuse("unsupported_attribute_value", "bicubic with a coefficient other than -0.75")
    if e.attr("antialias"):
        raise refuse("unsupported_attribute_value", "antialiased resize")
    x = e.input(0, "B")
    y = e.top()
    e.add("Interp", [x], [y], [f"0={kind}", f"3={out[2]}", f"4={out[3]}", f"6={align}"])
    e.output(0, y, "B")


@rule("where")
def where(e: NodeEmit) -> None:
    """The table's snippet (products with the 0/1 mask), except where one branch is a constant of
    infinities of one sign (PyTorch's attention mask fills with -inf): the mask's products would
    give 0 * inf = NaN, so the other branch is held to ``min`` (``max`` for +inf) with a blob of
    +-inf made from the condition ((c - 0.5) scaled past float32's range: exact)."""
    for k, other in ((1, "Y"), (2, "X")):
        c = e.const(k)
        if c is None or not np.size(c) or not np.all(np.isinf(c)) or not (np.all(c > 0) or np.all(c < 0)):
            continue
        neg = bool(np.all(c < 0))
        plus = (k == 2) == neg  # +inf where the condition holds (else its negation)
        e.snippet(f"BinaryOp {{condition}} -> h 0={1 if plus else 7} 1=1 2=0.5 ; "
                  "BinaryOp h -> g 0=2 1=1 2=1.0e38 ; BinaryOp g -> m 0=2 1=1 2=1.0e38 ; "
                  f"BinaryOp {{{other}}} m -> output 0={5 if neg else 4}")
        return
    e.snippet()


@rule("pow")
def pow_(e: NodeEmit) -> None:
    """A constant scalar exponent as the layer it is (square, sqrt, reciprocal, identity) or as
    ``BinaryOp`` pow with the scalar as a parameter; a tensor exponent as ``BinaryOp`` pow
    between blobs (the trial holds it to the reference: a negative base is NaN in ncnn's pow)."""
    b = e.const(1)
    form = "B" if e.net.forms(e.node.inputs[0]) == {"B"} and len(e.out_shape(0)) == len(e.shape(0)) else "F"
    y = e.top()
    if b is not None and np.size(b) == 1 and len(e.out_shape(0)) == len(e.shape(0)):
        p = float(np.asarray(b).reshape(-1)[0])
        x = e.input(0, form)
        if p in (3.0, 4.0):  # ncnn's pow of a negative base is not the power: products instead
            sq = e.top()
            e.add("UnaryOp", [x], [sq], ["0=4"])
            if p == 3.0:
                e.add("BinaryOp", [sq, e.input(0, form)], [y], ["0=2"])
            else:
                e.add("UnaryOp", [sq], [y], ["0=4"])
        else:
            layer = {2.0: ("UnaryOp", ["0=4"]), 0.5: ("UnaryOp", ["0=5"]), -1.0: ("UnaryOp", ["0=15"]),
                     1.0: ("Noop", [])}.get(p, ("BinaryOp", ["0=6", "1=1", f"2={p!r}"]))
            e.add(layer[0], [x], [y], layer[1])
    else:
        r = len(e.out_shape(0))
        e.add("BinaryOp", [e.input(0, "F", r), e.input(1, "F", r)], [y], ["0=6"])
        form = "F"
    e.output(0, y, form)


@rule("prelu")
def prelu(e: NodeEmit) -> None:
    """ncnn's ``PReLU`` (a slope per channel, or one): a constant slope that broadcasts
    along the channel dim (dim 1) only; otherwise the table's composite."""
    shape, slope = e.shape(0), e.const(1)
    if slope is None or len(shape) < 2 or shape[0] != 1:
        return e.snippet()
    s = np.asarray(slope, np.float32)
    lead = (1,) * (len(shape) - s.ndim) + s.shape
    channels = shape[1]
    if s.size != 1 and not (lead[1] == channels and s.size == channels):
        return e.snippet()
    x = e.input(0, "B")
    y = e.top()
    e.add("PReLU", [x], [y], [f"0={s.size}"], raw(s.reshape(-1)))
    e.output(0, y, "B")


def _inner_product(e: NodeEmit, a_shape: tuple, weight: np.ndarray, bias: np.ndarray | None) -> None:
    """``InnerProduct`` over the last dim: ``weight`` (N, K), ``bias`` (N,) or None. A of one
    row is held batch-dropped (a 1-D blob); of several rows as a 2-D blob (ncnn multiplies
    each row)."""
    from .codegen import shape_params

    form = "B" if len(a_shape) >= 2 and all(d == 1 for d in a_shape[:-1]) else "F"
    x = e.input(0, form)
    rows = math.prod(a_shape[:-1])
    if form == "B" and len(a_shape) > 2:  # (1, 1, K) → (K,)
        flat = e.top()
        e.add("Reshape", [x], [flat], shape_params((a_shape[-1],)))
        x = flat
    elif form == "F" and len(a_shape) != 2:  # (B, M, K) → (B*M, K): ncnn multiplies each row of a 2-D blob
        flat = e.top()
        e.add("Reshape", [x], [flat], shape_params((rows, a_shape[-1])))
        x = flat
    y = e.top()
    n = weight.shape[0]
    params = [f"0={n}", f"1={int(bias is not None)}", f"2={weight.size}"]
    e.add("InnerProduct", [x], [y], params, (tagged(weight), raw(bias) if bias is not None else b""))
    out = e.out_shape(0)
    if form == "B" and len(out) > 2 or form == "F" and len(out) != 2:
        z = e.top()
        e.add("Reshape", [y], [z], shape_params(tuple(out[1:] if form == "B" else out)))
        y = z
    e.output(0, y, form)


@rule("gemm")
def gemm(e: NodeEmit) -> None:
    """A constant B: ncnn's ``InnerProduct`` (alpha folded into the weight, beta·C into the
    bias); otherwise the ``Gemm`` layer of the table's snippet."""
    b, c = e.const(1), e.const(2)
    if b is None or int(e.attr("transA") or 0) or (e.value(2) is not None and c is None) or len(e.shape(0)) != 2:
        text = e.cell_snippet()
        # no C: the Gemm layer with two bottoms (ncnn adds no bias then)
        return e.snippet(text if e.value(2) is not None else text.replace(" {C}", "", 1))
    alpha = float(e.attr("alpha") if e.attr("alpha") is not None else 1.0)
    beta = float(e.attr("beta") if e.attr("beta") is not None else 1.0)
    w = np.asarray(b, np.float32)
    w = (w if int(e.attr("transB") or 0) else w.T) * alpha
    n = w.shape[0]
    bias = None
    if c is not None:
        cc = np.asarray(c, np.float32)
        if cc.size not in (1, n) or (cc.ndim == 2 and cc.shape[0] != 1):
            return e.snippet()
        bias = np.broadcast_to(cc.reshape(-1), (n,)) * beta
    _inner_product(e, e.shape(0), np.ascontiguousarray(w), None if bias is None else np.ascontiguousarray(bias))


@rule("matmul")
def matmul(e: NodeEmit) -> None:
    """A constant 2-D B: ncnn's ``InnerProduct`` over A's last dim; otherwise ``MatMul``."""
    b = e.const(1)
    a_shape = e.shape(0)
    if b is None or np.ndim(b) != 2 or len(a_shape) < 2:
        return e.snippet()
    _inner_product(e, a_shape, np.ascontiguousarray(np.asarray(b, np.float32).T), None)
