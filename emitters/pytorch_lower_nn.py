"""PyTorch lowerings: convolutions, pooling, normalization, resampling."""
from __future__ import annotations

import math

from .pytorch_ops import ONNX_FLOAT, NodeEmit, axis, literal, lowering

_SAME = ("SAME_UPPER", "SAME_LOWER")


def torch_pads(begins: list[int], ends: list[int]) -> list[int]:
    """Per-axis (begin, end) pads of the trailing axes as F.pad wants them: last axis first."""
    out: list[int] = []
    for b, t in zip(reversed(begins), reversed(ends)):
        out += [b, t]
    return out


def _ints_attr(e: NodeEmit, name: str, n: int, default: int) -> list[int]:
    v = e.attr(name)
    return [int(a) for a in v] if v else [default] * n


def _explicit_pads(e: NodeEmit, nd: int, ext: list[int], strides: list[int]) -> tuple[list[int], list[int]]:
    """(begins, ends) from ``pads`` / ``auto_pad`` (SAME_*: output = ceil(input / stride))."""
    auto_pad = str(e.attr("auto_pad") or "NOTSET")
    if auto_pad in _SAME:
        in_sp = e.need_shape(0)[2:]
        begins, ends = [], []
        for i in range(nd):
            out = -(-in_sp[i] // strides[i])
            total = max((out - 1) * strides[i] + ext[i] - in_sp[i], 0)
            begins.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
            ends.append(total - begins[-1])
        return begins, ends
    if auto_pad == "VALID":
        return [0] * nd, [0] * nd
    pads = _ints_attr(e, "pads", 2 * nd, 0)
    return pads[:nd], pads[nd:]


def _spatial(e: NodeEmit, nd: int) -> None:
    if nd not in (1, 2, 3):
        raise e.refuse("rank_limit", f"torch has {nd}-D convolution/pooling only for 1, 2 or 3 spatial dims")


_DEFAULTS = {"stride": 1, "padding": 0, "output_padding": 0, "dilation": 1, "groups": 1, "ceil_mode": False}


def _kwargs(**kw: object) -> str:
    """``, key=value`` for every argument that differs from torch's default."""
    out = ""
    for k, v in kw.items():
        d = _DEFAULTS.get(k)
        if d is not None and (v == d or (isinstance(v, list) and all(x == d for x in v))):
            continue
        out += f", {k}={literal(v)}"
    return out


# ----------------------------------------------------------------------------- convolutions
@lowering("conv")
def conv(e: NodeEmit) -> str:
    x, w = e.x(0), e.x(1)
    nd = e.need_rank(1) - 2
    _spatial(e, nd)
    k = list(e.need_shape(1)[2:]) if e.shape(1) else _ints_attr(e, "kernel_shape", nd, 1)
    strides = _ints_attr(e, "strides", nd, 1)
    dil = _ints_attr(e, "dilations", nd, 1)
    begins, ends = _explicit_pads(e, nd, [(k[i] - 1) * dil[i] + 1 for i in range(nd)], strides)
    kw: dict[str, object] = {}
    if strides != [1] * nd:
        kw["stride"] = strides
    if begins == ends:
        if any(begins):
            kw["padding"] = begins
    else:
        x = f"F.pad({x}, {literal(torch_pads(begins, ends))})"
    if dil != [1] * nd:
        kw["dilation"] = dil
    if int(e.attr("group")) != 1:
        kw["groups"] = int(e.attr("group"))
    b = e.x(2) if e.has(2) else "None"
    return f"F.conv{nd}d({x}, {w}, {b}{_kwargs(**kw)})"


@lowering("conv_transpose")
def conv_transpose(e: NodeEmit) -> list[str]:
    """ONNX output window: the full transposed convolution (plus output_padding at the end)
    cropped at ``pads`` / sized by ``output_shape``; torch's own padding when symmetric."""
    x, w = e.x(0), e.x(1)
    nd = e.need_rank(1) - 2
    _spatial(e, nd)
    k = list(e.need_shape(1)[2:])
    strides = _ints_attr(e, "strides", nd, 1)
    dil = _ints_attr(e, "dilations", nd, 1)
    out_pad = _ints_attr(e, "output_padding", nd, 0)
    group = int(e.attr("group"))
    auto_pad = str(e.attr("auto_pad") or "NOTSET")
    output_shape = e.attr("output_shape")
    in_sp = e.shape(0)[2:] if e.shape(0) else None
    y = e.out()
    if output_shape is None and auto_pad not in _SAME:
        pads = _ints_attr(e, "pads", 2 * nd, 0) if auto_pad != "VALID" else [0] * (2 * nd)
        begins, ends = pads[:nd], pads[nd:]
        if begins == ends and all(p >= 0 for p in begins) and all(o < max(s, d) for o, s, d in zip(out_pad, strides, dil)):
            kw: dict[str, object] = {"stride": strides, "padding": begins, "output_padding": out_pad,
                                     "groups": group, "dilation": dil}
            b = e.x(2) if e.has(2) else "None"
            return [f"{y} = F.conv_transpose{nd}d({x}, {w}, {b}{_kwargs(**kw)})"]
    if in_sp is None:
        raise e.refuse("dynamic_shape", "conv_transpose with output_shape / auto_pad needs static input shapes")
    full = [strides[i] * (in_sp[i] - 1) + out_pad[i] + (k[i] - 1) * dil[i] + 1 for i in range(nd)]
    if output_shape is None and auto_pad not in _SAME:
        out = [full[i] - begins[i] - ends[i] for i in range(nd)]
    else:
        out = list(output_shape)[-nd:] if output_shape is not None else [in_sp[i] * strides[i] for i in range(nd)]
        total = [full[i] - out[i] for i in range(nd)]
        begins = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    torch_full = [f - o for f, o in zip(full, out_pad)]
    crop = torch_pads([-b for b in begins], [b + o - f for b, o, f in zip(begins, out, torch_full)])
    kw = {"stride": strides, "groups": group, "dilation": dil}
    lines = [f"{y} = F.pad(F.conv_transpose{nd}d({x}, {w}{_kwargs(**kw)}), {literal(crop)})"]
    if e.has(2):
        lines.append(f"{y} = {y} + {e.x(2)}.reshape({literal([1, -1] + [1] * nd)})")
    return lines


def _zp(e: NodeEmit, i: int, nd_w: int | None = None) -> str:
    """A zero point as int64, per output channel shaped for the weight when it is a vector."""
    if not e.has(i):
        return "0"
    zp = f"{e.x(i)}.long()"
    shape = e.shape(i)
    if nd_w is not None and shape is not None and len(shape) == 1 and shape[0] > 1:
        return f"{zp}.reshape({literal([-1] + [1] * (nd_w - 1))})"
    return f"{zp}.reshape(())" if shape is not None and len(shape) <= 1 else zp


def _int_conv(e: NodeEmit, xi: int, wi: int, xzp: int, wzp: int) -> tuple[str, int]:
    """The integer convolution (x - x_zp) * (w - w_zp) computed exactly in float64."""
    nd = e.need_rank(wi) - 2
    _spatial(e, nd)
    k = list(e.need_shape(wi)[2:])
    strides = _ints_attr(e, "strides", nd, 1)
    dil = _ints_attr(e, "dilations", nd, 1)
    begins, ends = _explicit_pads(e, nd, [(k[i] - 1) * dil[i] + 1 for i in range(nd)], strides)
    xs = f"({e.x(xi)}.long() - {_zp(e, xzp)}).double()"
    ws = f"({e.x(wi)}.long() - {_zp(e, wzp, nd + 2)}).double()"
    if begins != ends or any(begins):
        xs = f"F.pad({xs}, {literal(torch_pads(begins, ends))})"
    kw = {"stride": strides, "dilation": dil, "groups": int(e.attr("group"))}
    return f"F.conv{nd}d({xs}, {ws}{_kwargs(**kw)})", nd


@lowering("conv_integer")
def conv_integer(e: NodeEmit) -> str:
    code, _ = _int_conv(e, 0, 1, 2, 3)
    return f"{code}.to(torch.int32)"


@lowering("qlinear_conv")
def qlinear_conv(e: NodeEmit) -> list[str]:
    """saturate(round(acc * x_scale * w_scale / y_scale) + y_zp), acc the integer convolution."""
    acc, nd = _int_conv(e, 0, 3, 2, 5)
    y = e.out()
    lines = [f"{y} = {acc}"]
    if e.has(8):
        lines.append(f"{y} = {y} + {e.x(8)}.double().reshape({literal([1, -1] + [1] * nd)})")
    ws = f"{e.x(4)}.double().reshape(-1)"
    ws = f"({ws}.reshape({literal([1, -1] + [1] * nd)}) if {e.x(4)}.numel() > 1 else {ws}[0])"
    out = e.dtype(7)
    lines.append(f"{y} = torch.round({y} * ({e.x(1)}.double() * {ws}) / {e.x(6)}.double()) + {e.x(7)}.double()")
    lines.append(f"{y} = torch.clamp({y}, torch.iinfo({out}).min, torch.iinfo({out}).max).to({out})")
    return lines


# ----------------------------------------------------------------------------- pooling
def _pool_geometry(e: NodeEmit) -> tuple[int, list[int], list[int], list[int], list[int], list[int], bool]:
    kernel = [int(k) for k in e.attr("kernel_shape")]
    nd = len(kernel)
    _spatial(e, nd)
    strides = _ints_attr(e, "strides", nd, 1)
    dil = _ints_attr(e, "dilations", nd, 1)
    ext = [(kernel[i] - 1) * dil[i] + 1 for i in range(nd)]
    begins, ends = _explicit_pads(e, nd, ext, strides)
    return nd, kernel, strides, dil, begins, ends, bool(e.attr("ceil_mode"))


def _pool_out(in_sp: tuple[int, ...], kernel: list[int], strides: list[int], dil: list[int], begins: list[int],
              ends: list[int], ceil_mode: bool, auto_pad: str) -> list[int]:
    """ONNX pooling output sizes (a window may not start in the right padding)."""
    out = []
    for i in range(len(in_sp)):
        ext = (kernel[i] - 1) * dil[i] + 1
        if auto_pad in _SAME:
            out.append(-(-in_sp[i] // strides[i]))
            continue
        span = in_sp[i] + begins[i] + ends[i] - ext
        o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
        if ceil_mode and (o - 1) * strides[i] >= in_sp[i] + begins[i]:
            o -= 1
        out.append(o)
    return out


def _torch_can_pad(kernel: list[int], dil: list[int], begins: list[int], ends: list[int]) -> bool:
    """torch pools pad symmetrically, by at most half the (dilated) kernel."""
    return begins == ends and all(2 * b <= (k - 1) * d + 1 for b, k, d in zip(begins, kernel, dil))


def _sum_pool(e: NodeEmit, x: str, counted: str) -> tuple[str, str]:
    """(window sums of x, window counts) by depthwise convolution with a ones kernel.
    counted: 'input' (count_include_pad=0) or 'padded' (input + explicit pads)."""
    nd, kernel, strides, dil, begins, ends, ceil_mode = _pool_geometry(e)
    shape = e.need_shape(0)
    in_sp, c = list(shape[2:]), shape[1]
    out = _pool_out(tuple(in_sp), kernel, strides, dil, begins, ends, ceil_mode, str(e.attr("auto_pad") or "NOTSET"))
    need = [(out[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(nd)]
    tail = [max(need[i] - in_sp[i] - begins[i] - ends[i], 0) for i in range(nd)]
    crop = [min(need[i] - in_sp[i] - begins[i] - ends[i], 0) for i in range(nd)]
    full_ends = [ends[i] + tail[i] + crop[i] for i in range(nd)]
    kw = _kwargs(stride=strides, dilation=dil)
    dt = e.dtype(0)
    ones_k = f"torch.ones({literal([c, 1] + kernel)}, dtype={dt})"
    sums = f"F.conv{nd}d(F.pad({x}, {literal(torch_pads(begins, full_ends))}), {ones_k}{kw}, groups={c})"
    if counted == "input":
        mask = f"F.pad(torch.ones({literal([1, 1] + in_sp)}, dtype={dt}), {literal(torch_pads(begins, full_ends))})"
    else:
        padded = [in_sp[i] + begins[i] + ends[i] + crop[i] for i in range(nd)]
        mask = f"F.pad(torch.ones({literal([1, 1] + padded)}, dtype={dt}), {literal(torch_pads([0] * nd, tail))})"
    counts = f"F.conv{nd}d({mask}, torch.ones({literal([1, 1] + kernel)}, dtype={dt}){kw})"
    return sums, counts


@lowering("average_pool")
def average_pool(e: NodeEmit) -> str:
    x = e.x(0)
    nd, kernel, strides, dil, begins, ends, ceil_mode = _pool_geometry(e)
    cip = bool(e.attr("count_include_pad"))
    if dil == [1] * nd and _torch_can_pad(kernel, dil, begins, ends):
        kw = {"padding": begins, "ceil_mode": ceil_mode, "count_include_pad": cip}
        return f"F.avg_pool{nd}d({x}, {literal(kernel)}, {literal(strides)}{_kwargs(**kw)})"
    sums, counts = _sum_pool(e, x, "padded" if cip else "input")
    return f"{sums} / {counts}"


@lowering("lp_pool")
def lp_pool(e: NodeEmit) -> str:
    """(sum over the window of |x| ** p) ** (1 / p); padding counts as zeros."""
    p = float(e.attr("p"))
    sums, _ = _sum_pool(e, f"torch.abs({e.x(0)}) ** {literal(p)}", "input")
    return f"{sums} ** {literal(1.0 / p)}"


@lowering("max_pool")
def max_pool(e: NodeEmit) -> list[str]:
    """torch pools when torch can pad; otherwise the input is padded with the dtype's lowest
    value first. Indices: flat over (N, C, *spatial), row-major (storage_order 0) or
    column-major spatial (1)."""
    x = e.x(0)
    nd, kernel, strides, dil, begins, ends, ceil_mode = _pool_geometry(e)
    want_idx = e.n_out() > 1
    y = e.out()
    kw = {"ceil_mode": ceil_mode} if ceil_mode else {}
    if dil != [1] * nd:
        kw = {"dilation": dil, **kw}
    if _torch_can_pad(kernel, dil, begins, ends):
        if any(begins):
            kw = {"padding": begins, **kw}
        src, sliced = x, ""
    else:
        if want_idx:
            raise e.refuse("unsupported_attribute_value", "max_pool indices with pads torch cannot apply")
        low = "-float('inf')" if e.is_float(0) else f"torch.iinfo({e.dtype(0)}).min"
        src = f"F.pad({x}, {literal(torch_pads(begins, ends))}, value={low})"
        shape = e.shape(0)
        sliced = ""
        if ceil_mode and shape is not None:
            out = _pool_out(tuple(shape[2:]), kernel, strides, dil, begins, ends, True, str(e.attr("auto_pad") or ""))
            sliced = "[" + ", ".join([":", ":"] + [f":{o}" for o in out]) + "]"
    call = f"F.max_pool{nd}d({src}, {literal(kernel)}, {literal(strides)}{_kwargs(**kw)}"
    if not want_idx:
        return [f"{y} = {call}){sliced}"]
    i = e.out(1)
    lines = [f"{y}, {i} = {call}, return_indices=True)"]
    if e.attr("storage_order"):
        if nd != 2:
            raise e.refuse("unsupported_attribute_value", "storage_order=1 for non-2-D pools")
        lines.append(f"{i} = ({i} % {x}.shape[3]) * {x}.shape[2] + {i} // {x}.shape[3]")
    lines.append(f"{i} = {i} + (torch.arange({x}.shape[0] * {x}.shape[1]) * math.prod({x}.shape[2:]))"
                 f".reshape({x}.shape[0], {x}.shape[1]{', 1' * nd})")
    return lines


@lowering("max_unpool")
def max_unpool(e: NodeEmit) -> list[str]:
    """Scatter the values to their (n, c, spatial) flat index in the default output, then
    zero-extend to ``output_shape``."""
    x, idx = e.x(0), e.x(1)
    shape = e.need_shape(0)
    nd = len(shape) - 2
    kernel = [int(k) for k in e.attr("kernel_shape")]
    strides = _ints_attr(e, "strides", nd, 1)
    pads = _ints_attr(e, "pads", 2 * nd, 0)
    default = list(shape[:2]) + [(shape[2 + i] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + nd] for i in range(nd)]
    y = e.out()
    lines = [f"{y} = torch.zeros({math.prod(default)}, dtype={e.dtype(0)}).scatter(0, {idx}.reshape(-1), "
             f"{x}.reshape(-1)).reshape({literal(default)})"]
    if e.has(2):
        target = e.ints(2)
        if target is None:
            return lines + [f"{y} = {e.helper('_grow')}({y}, {e.x(2)}.tolist())"]
        grow = [t - d for t, d in zip(target, default)]
        if any(grow):
            lines.append(f"{y} = F.pad({y}, {literal(torch_pads([0] * len(grow), grow))})")
    return lines


@lowering("col2im")
def col2im(e: NodeEmit) -> str:
    img, blk = e.ints_code(1), e.ints_code(2)
    nd = e.need_shape(1)[0]
    if nd != 2:
        raise e.refuse("rank_limit", "torch folds 2-D images only (F.fold)")
    pads = _ints_attr(e, "pads", 4, 0)
    if pads[:2] != pads[2:]:
        raise e.refuse("unsupported_attribute_value", "F.fold pads symmetrically")
    kw = {"dilation": _ints_attr(e, "dilations", 2, 1), "padding": pads[:2], "stride": _ints_attr(e, "strides", 2, 1)}
    return f"F.fold({e.x(0)}, {img}, {blk}{_kwargs(**kw)})"


# ----------------------------------------------------------------------------- normalization
@lowering("batch_normalization")
def batch_normalization(e: NodeEmit) -> list[str]:
    x, scale, b, mean, var = (e.x(i) for i in range(5))
    eps = float(e.attr("epsilon"))
    y = e.out()
    if not e.attr("training_mode"):
        return [f"{y} = F.batch_norm({x}, {mean}, {var}, {scale}, {b}, training=False, eps={literal(eps)})"]
    rank = e.need_rank(0)
    dims = [0] + list(range(2, rank))
    ch = literal([1, -1] + [1] * (rank - 2))
    m, v = e.tmp("batch_mean"), e.tmp("batch_var")
    mom = float(e.attr("momentum"))
    lines = [f"{m} = {x}.mean({literal(dims)})",
             f"{v} = {x}.var({literal(dims)}, unbiased=False)",
             f"{y} = ({x} - {m}.reshape({ch})) / torch.sqrt({v}.reshape({ch}) + {literal(eps)}) * {scale}.reshape({ch}) "
             f"+ {b}.reshape({ch})"]
    if e.n_out() > 1:
        lines.append(f"{e.out(1)} = {mean} * {literal(mom)} + {m} * {literal(1 - mom)}")
    if e.n_out() > 2:
        lines.append(f"{e.out(2)} = {var} * {literal(mom)} + {v} * {literal(1 - mom)}")
    return lines


def _normalized(e: NodeEmit, a: int) -> tuple[list[int], list[int] | None]:
    rank = e.need_rank(0)
    start = axis(a, rank)
    shape = e.shape(0)
    return list(range(start, rank)), (list(shape[start:]) if shape is not None else None)


@lowering("layer_normalization")
def layer_normalization(e: NodeEmit) -> list[str]:
    """F.layer_norm when only Y is wanted and Scale/B match the normalized shape; otherwise the
    statistics explicitly (Mean, InvStdDev in the stash dtype)."""
    x, scale = e.x(0), e.x(1)
    eps = float(e.attr("epsilon"))
    dims, norm_shape = _normalized(e, int(e.attr("axis")))
    y = e.out()
    b = e.x(2) if e.has(2) else "None"
    fits = norm_shape is not None and e.shape(1) == tuple(norm_shape) and (not e.has(2) or e.shape(2) == tuple(norm_shape))
    if e.n_out() == 1 and fits:
        return [f"{y} = F.layer_norm({x}, {literal(norm_shape)}, {scale}, {b}, eps={literal(eps)})"]
    xf = x if e.dtype_id(0) in ("float32", "float64") else f"{x}.float()"
    m, inv = e.tmp("mean"), e.tmp("inv_std")
    lines = [f"{m} = {xf}.mean({literal(dims)}, keepdim=True)",
             f"{inv} = torch.rsqrt(({xf} - {m}).square().mean({literal(dims)}, keepdim=True) + {literal(eps)})",
             f"{y} = (({xf} - {m}) * {inv}).to({e.dtype(0)}) * {scale}" + (f" + {b}" if e.has(2) else "")]
    stash = ONNX_FLOAT.get(int(e.attr("stash_type") or 1), "torch.float32")
    if e.n_out() > 1:
        lines.append(f"{e.out(1)} = {m}.to({e.out_dtype(1, stash)})")
    if e.n_out() > 2:
        lines.append(f"{e.out(2)} = {inv}.to({e.out_dtype(2, stash)})")
    return lines


@lowering("rms_normalization")
def rms_normalization(e: NodeEmit) -> str:
    x, scale = e.x(0), e.x(1)
    eps = float(e.attr("epsilon"))
    dims, norm_shape = _normalized(e, int(e.attr("axis")))
    out = e.out_dtype()
    if norm_shape is not None and e.shape(1) == tuple(norm_shape) and e.dtype_id(0) == e.dtype_id(1):
        return f"F.rms_norm({x}, {literal(norm_shape)}, {scale}, eps={literal(eps)})"
    xf = f"{x}.float()"
    return (f"(({xf} * torch.rsqrt({xf}.square().mean({literal(dims)}, keepdim=True) + {literal(eps)}))"
            f".to({e.dtype(0)}).to({out}) * {scale}).to({out})")


@lowering("group_normalization")
def group_normalization(e: NodeEmit) -> str:
    return (f"F.group_norm({e.x(0)}, {int(e.attr('num_groups'))}, {e.x(1)}, {e.x(2)}, "
            f"eps={literal(float(e.attr('epsilon')))})")


@lowering("lrn")
def lrn(e: NodeEmit) -> str:
    """x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)//2, c + ceil((size-1)/2)]) ** beta."""
    x, size = e.x(0), int(e.attr("size"))
    alpha, beta, bias = (float(e.attr(n)) for n in ("alpha", "beta", "bias"))
    if size % 2 == 1:
        v = e.v(0)
        if v is not None and v.type.dtype in ("float16", "bfloat16"):
            # torch's CPU avg_pool3d (inside local_response_norm) has no half kernels: compute in float32
            half = "torch.float16" if v.type.dtype == "float16" else "torch.bfloat16"
            return (f"F.local_response_norm({x}.float(), {size}, alpha={literal(alpha)}, beta={literal(beta)}, "
                    f"k={literal(bias)}).to({half})")
        return f"F.local_response_norm({x}, {size}, alpha={literal(alpha)}, beta={literal(beta)}, k={literal(bias)})"
    rank = e.need_rank(0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    window = f"F.pad({x} * {x}, {literal([0, 0] * (rank - 2) + [lo, hi])}).unfold(1, {size}, 1).sum(-1)"
    return f"{x} / ({literal(bias)} + {literal(alpha / size)} * {window}) ** {literal(beta)}"
