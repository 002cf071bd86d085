"""PyTorch rules: convolutions, pooling, normalization, resampling, matrix products, activations
with parameters, losses and dropout."""
from __future__ import annotations

import math

import numpy as np

from translator.table.dtypes import norm_axis
from translator.compile.render import literal

from .node import WIDE, NodeEmit, Size, ceildiv, f32, floordiv, minus, onnx_float, paren, plus, sizes_code, \
    times
from .registry import rule

_SAME = ("SAME_UPPER", "SAME_LOWER")


def torch_pads(begins: list, ends: list) -> list:
    """Per-axis (begin, end) pads of the trailing axes as F.pad wants them: last axis first."""
    out: list = []
    for b, t in zip(reversed(begins), reversed(ends)):
        out += [b, t]
    return out


def pads_code(begins: list[Size], ends: list[Size]) -> str:
    """F.pad's pad list: a literal, or a list display when a pad is computed at run time."""
    return sizes_code(torch_pads(begins, ends))


def static(sizes: list[Size]) -> bool:
    return all(isinstance(a, int) for a in sizes)


def ints_attr(e: NodeEmit, name: str, n: int, default: int) -> list[int]:
    v = e.attr(name)
    return [int(a) for a in v] if v else [default] * n


def same_pads(size: Size, stride: int, ext: int, upper: bool) -> tuple[Size, Size]:
    """(begin, end) of ONNX SAME padding on one axis: the total is
    max((ceil(size / stride) - 1) * stride + ext - size, 0) = max(ext - 1 - (size - 1) % stride, 0),
    SAME_UPPER puts its odd pad at the end, SAME_LOWER at the beginning. A symbolic size is read
    at run time, except where the pad is the same for every size: at stride 1 (ext - 1), and a
    half whose value is one number over the total's range [max(ext - stride, 0), ext - 1]."""
    if isinstance(size, int) or stride == 1:
        total = max((-(-size // stride) - 1) * stride + ext - size, 0) if isinstance(size, int) else ext - 1
        low: Size = total // 2
        high: Size = total - total // 2
    else:
        lo, hi = max(ext - stride, 0), ext - 1
        rem = f"({size} - 1) % {stride}"

        def half(k: int) -> Size:  # (total + k) // 2, the total clamped at 0 only where it can be negative
            total = f"{ext - 1 + k} - {rem}" if ext >= stride else plus(f"torch.sym_max({ext - 1} - {rem}, 0)", k)
            return floordiv(total, 2)

        low = lo // 2 if lo // 2 == hi // 2 else half(0)
        high = (lo + 1) // 2 if (lo + 1) // 2 == (hi + 1) // 2 else half(1)
    return (low, high) if upper else (high, low)


def explicit_pads(e: NodeEmit, nd: int, ext: list[int], strides: list[int]) -> tuple[list[Size], list[Size]]:
    """(begins, ends) from ``pads`` / ``auto_pad`` (SAME_*: output = ceil(input / stride)). A
    SAME pad of a symbolic spatial dim is an expression of the input's run-time size."""
    auto_pad = str(e.attr("auto_pad") or "NOTSET")
    if auto_pad in _SAME:
        begins: list[Size] = []
        ends: list[Size] = []
        for i in range(nd):
            b, t = same_pads(e.dim(0, 2 + i), strides[i], ext[i], auto_pad == "SAME_UPPER")
            begins.append(b)
            ends.append(t)
        return begins, ends
    if auto_pad == "VALID":
        return [0] * nd, [0] * nd
    pads = ints_attr(e, "pads", 2 * nd, 0)
    return pads[:nd], pads[nd:]


def kernel_of(e: NodeEmit, i: int, nd: int) -> list[int]:
    """The kernel's spatial size: the trailing dims of the weights (input ``i``), else the
    ``kernel_shape`` attribute."""
    w = e.dims(i)
    if w is not None and len(w) == nd + 2 and static(list(w[2:])):
        return [int(d) for d in w[2:]]
    if e.attr("kernel_shape"):
        return [int(d) for d in e.attr("kernel_shape")]
    raise e.refuse("dynamic_shape", f"the kernel size: input {i}'s spatial dims or kernel_shape")


def conv_extents(e: NodeEmit, i: int, nd: int, dil: list[int]) -> list[int]:
    """The dilated kernel extents as far as the pads need them: SAME computes with them, explicit
    pads do not (then weights of any shape are fine)."""
    if str(e.attr("auto_pad") or "NOTSET") not in _SAME:
        return [1] * nd
    k = kernel_of(e, i, nd)
    return [(k[j] - 1) * dil[j] + 1 for j in range(nd)]


def spatial(e: NodeEmit, nd: int) -> None:
    if nd not in (1, 2, 3):
        raise e.refuse("rank_limit", f"torch has {nd}-D convolution/pooling only for 1, 2 or 3 spatial dims")


_DEFAULTS = {"stride": 1, "padding": 0, "output_padding": 0, "dilation": 1, "groups": 1, "ceil_mode": False}


def torch_kwargs(**kw: object) -> str:
    """``, key=value`` for every argument that differs from torch's default."""
    out = ""
    for k, v in kw.items():
        d = _DEFAULTS.get(k)
        if d is not None and (v == d or (isinstance(v, list) and all(x == d for x in v))):
            continue
        out += f", {k}={literal(v)}"
    return out


# ----------------------------------------------------------------------------- layers
def own_weight(e: NodeEmit, i: int, rank: int | None = None) -> np.ndarray | None:
    """Input ``i`` as a layer's own parameter: a float32 constant (of ``rank``) that no other
    node reads; else None (a shared, quantized or computed weight stays a buffer or a value)."""
    v = e.v(i)
    if v is None or not v.is_const or v.type.dtype != "float32" or len(v.uses) != 1 \
            or e.cg.scope.lookup(v) is not None:
        return None
    arr = np.asarray(v.const, dtype=np.float32)
    return arr if rank is None or arr.ndim == rank else None


def layer_name(e: NodeEmit, i: int) -> str:
    """A layer's attribute name (sanitized by the code generator): its weight's name without
    ``.weight`` (``layer1.0.conv1``), else the node's scope path without the op's own name and
    without the scopes the next one repeats (torch.onnx's ``/layer1/layer1.0/conv1/Conv`` →
    ``layer1.0.conv1``)."""
    v = e.v(i)
    name = v.name if v is not None else ""
    name = name[:-len("_fused")] if name.endswith("_fused") else name  # a batch norm folded in (passes/fuse)
    if name.endswith(".weight") and len(name) > len(".weight"):
        return name[:-len(".weight")]
    parts = [p for p in (e.node.name or "").split("/") if p]
    if len(parts) >= 2:
        parts = parts[:-1]
    keep = [p for k, p in enumerate(parts) if not (k + 1 < len(parts) and parts[k + 1].startswith(p + "."))]
    return ".".join(keep) or e.node.op


# ----------------------------------------------------------------------------- convolutions
@rule("conv")
def conv(e: NodeEmit) -> str:
    nd = e.need_rank(1) - 2
    spatial(e, nd)
    x, kw = conv_input(e, nd)
    w_own = own_weight(e, 1, nd + 2)
    b_own = own_weight(e, 2, 1) if e.has(2) else None
    if w_own is not None and (b_own is not None or not e.has(2)):
        return conv_layer(e, nd, x, kw, w_own, b_own)
    b = e.x(2) if e.has(2) else "None"
    return f"F.conv{nd}d({x}, {e.x(1)}, {b}{torch_kwargs(**kw)})"


def conv_input(e: NodeEmit, nd: int) -> tuple[str, dict[str, object]]:
    """A convolution's input (asymmetric pads applied by ``F.pad``) and torch's keyword
    arguments for it (``torch_kwargs`` drops those at their defaults)."""
    x = e.x(0)
    strides = ints_attr(e, "strides", nd, 1)
    dil = ints_attr(e, "dilations", nd, 1)
    begins, ends = explicit_pads(e, nd, conv_extents(e, 1, nd, dil), strides)
    kw: dict[str, object] = {"stride": strides}
    if begins == ends and static(begins):
        kw["padding"] = [int(p) for p in begins]
    else:
        x = f"F.pad({x}, {pads_code(begins, ends)})"
    kw["dilation"] = dil
    kw["groups"] = int(e.attr("group"))
    return x, kw


def conv_layer(e: NodeEmit, nd: int, x: str, kw: dict[str, object], w: np.ndarray, b: np.ndarray | None) -> str:
    """``conv`` as a ``torch.nn.Conv{nd}d`` submodule holding its own weight (and bias):
    what a PyTorch user writes, ``state_dict`` keys ``<layer>.weight`` / ``<layer>.bias``."""
    groups = int(kw["groups"])  # type: ignore[call-overload]
    cin, cout, kernel = int(w.shape[1]) * groups, int(w.shape[0]), [int(k) for k in w.shape[2:]]
    ctor = f"torch.nn.Conv{nd}d({cin}, {cout}, {literal(kernel)}{torch_kwargs(**kw)}" + \
        (", bias=False)" if b is None else ")")
    params = {"weight": w} if b is None else {"weight": w, "bias": b}
    layer = e.cg.submodule(layer_name(e, 1), ctor, params)
    if groups == 1 and nd in (1, 2) and any(int(d) > 1 for d in kw["dilation"]):  # type: ignore[union-attr]
        return f"{e.helper('_dilated_conv')}({layer}, {x})"  # torch's small-input dilated loop is slow
    return f"{layer}({x})"


def linear_layer(e: NodeEmit, x: str, weight: np.ndarray, bias: np.ndarray | None, wi: int) -> str:
    """A product with a constant ``[out, in]`` ``weight`` as a ``torch.nn.Linear`` submodule."""
    n_out, n_in = int(weight.shape[0]), int(weight.shape[1])
    ctor = f"torch.nn.Linear({n_in}, {n_out}" + (", bias=False)" if bias is None else ")")
    params = {"weight": np.ascontiguousarray(weight)} if bias is None else \
        {"weight": np.ascontiguousarray(weight), "bias": bias}
    return f"{e.cg.submodule(layer_name(e, wi), ctor, params)}({x})"


#: a model runs channels-last when at least this share of its 2-D filters' weights is in
#: convolutions oneDNN runs faster over NHWC (``channels_last``)
CHANNELS_LAST_SHARE = 0.5


def channels_last(modules: list[tuple[str, str, dict[str, np.ndarray]]]) -> bool:
    """Whether the module's 2-D convolution filters are held channels-last (so that oneDNN runs
    them, and the elementwise ops between them, over NHWC tensors; the outputs of a convolution
    over a channels-last filter are channels-last, and what reads them keeps that).

    oneDNN's NHWC kernels vectorize over channels: measured on one CPU thread, a chain of
    convolutions with 16 or more output channels, over 16 or more input channels per group
    or one (depthwise, or a single input plane), ran 1.1–2.2× sooner so, and whole OCR
    detectors and speech-quality CNNs 0.46–0.9× the time; narrow ones (1–8 channels:
    a pitch tracker's 1 × 256 filters over a single plane) ran up to 1.4× slower. So a model
    goes channels-last when most of its filter weights (Cout · Cin/groups · kernel) are in the
    wide kind. ``modules``: ``Codegen.modules``."""
    total = wide = 0
    for _, ctor, params in modules:
        w = params.get("weight")
        if not ctor.startswith("torch.nn.Conv2d(") or w is None or w.ndim != 4:
            continue
        cout, cin_g = int(w.shape[0]), int(w.shape[1])
        volume = int(w.size)
        total += volume
        if cout >= 16 and (cin_g == 1 or cin_g >= 16):
            wide += volume
    return total > 0 and wide >= CHANNELS_LAST_SHARE * total


def _tiling_deconvolution(e: NodeEmit, nd: int, k: list[int], strides: list[int], dil: list[int], out_pad: list[int],
                          group: int, auto_pad: str, output_shape: object) -> list[str] | None:
    """A transposed convolution whose kernel equals its stride (no dilation, pads or output
    padding: the upsampling of segmentation heads, paddle's DB detectors) tiles the output:
    each input pixel writes its own ``k``-sized block, ``x[c] · W[c, o]``. Written as that
    product (one GEMM over the pixels and a copy into place; depthwise, one broadcast
    multiply), which torch's own CPU kernel for it does not do: 11 ms for a 2x2 depthwise
    one over [1, 24, 160, 160] on one thread. 1-D and 2-D, groups 1 or depthwise; None otherwise."""
    w = e.const(1)
    pads = ints_attr(e, "pads", 2 * nd, 0) if auto_pad != "VALID" else [0] * (2 * nd)
    if nd not in (1, 2) or w is None or k != strides or any(d != 1 for d in dil) or any(out_pad) or any(pads) \
            or output_shape is not None or auto_pad not in ("NOTSET", "VALID") or e.rank(0) != nd + 2:
        return None
    c, per = int(w.shape[0]), int(w.shape[1])
    x, wt, y = e.x(0), e.x(1), e.out()
    if group == c and per == 1:  # depthwise: out[c, i·s + a] = x[c, i] · W[c, 0, a]
        cut = "[:, :, :, None, :, None]" if nd == 2 else "[:, :, :, None]"
        code = f"({x}{cut} * {wt}.reshape({literal([1, c, 1, k[0], 1, k[1]] if nd == 2 else [1, c, 1, k[0]])}))"
        lines = [f"{y} = {code}.flatten(4, 5).flatten(2, 3)" if nd == 2 else f"{y} = {code}.flatten(2, 3)"]
    elif group == 1:  # out[o, i·s + a] = Σ_c x[c, i] · W[c, o, a]
        blocks = [per] + k
        perm = [0, 3, 1, 4, 2, 5] if nd == 2 else [0, 2, 1, 3]
        flat = ".flatten(4, 5).flatten(2, 3)" if nd == 2 else ".flatten(2, 3)"
        rows = f"{x}.permute({literal([0] + list(range(2, nd + 2)) + [1])})"
        lines = [f"{y} = torch.matmul({rows}, {wt}.reshape({c}, {int(np.prod(blocks))}))"
                 f".unflatten(-1, {literal(blocks)}).permute({literal(perm)}){flat}"]
    else:
        return None
    if e.has(2):
        lines.append(f"{y} = {y} + {e.x(2)}.reshape({literal([1, -1] + [1] * nd)})")
    return lines


@rule("conv_transpose")
def conv_transpose(e: NodeEmit) -> list[str]:
    """ONNX output window: the full transposed convolution (plus output_padding at the end)
    cropped at ``pads`` / sized by ``output_shape``; torch's own padding when symmetric.

    torch's result is the full output without output_padding, so the crop is (-begin,
    output_padding - end) per axis whatever the input size: explicit pads and SAME (total
    output_padding + extent - stride) are numbers; with ``output_shape`` the total is
    stride * (in - 1) + output_padding + extent - out, read at run time for a symbolic dim."""
    x, w = e.x(0), e.x(1)
    nd = e.need_rank(1) - 2
    spatial(e, nd)
    k = kernel_of(e, 1, nd)
    strides = ints_attr(e, "strides", nd, 1)
    dil = ints_attr(e, "dilations", nd, 1)
    out_pad = ints_attr(e, "output_padding", nd, 0)
    group = int(e.attr("group"))
    auto_pad = str(e.attr("auto_pad") or "NOTSET")
    output_shape = e.attr("output_shape")
    ext = [(k[i] - 1) * dil[i] + 1 for i in range(nd)]
    y = e.out()
    begins: list[Size]
    ends: list[Size]
    tiled = _tiling_deconvolution(e, nd, k, strides, dil, out_pad, group, auto_pad, output_shape)
    if tiled is not None:
        return tiled
    if output_shape is None and auto_pad not in _SAME:
        pads = ints_attr(e, "pads", 2 * nd, 0) if auto_pad != "VALID" else [0] * (2 * nd)
        begins, ends = list(pads[:nd]), list(pads[nd:])
        if begins == ends and all(p >= 0 for p in pads[:nd]) and \
                all(o < max(s, d) for o, s, d in zip(out_pad, strides, dil)):
            kw: dict[str, object] = {"stride": strides, "padding": pads[:nd], "output_padding": out_pad,
                                     "groups": group, "dilation": dil}
            b = e.x(2) if e.has(2) else "None"
            return [f"{y} = F.conv_transpose{nd}d({x}, {w}, {b}{torch_kwargs(**kw)})"]
    else:
        if output_shape is None:  # SAME: output = input * stride
            totals: list[Size] = [out_pad[i] + ext[i] - strides[i] for i in range(nd)]
        else:
            out = [int(o) for o in list(output_shape)[-nd:]]
            totals = [plus(times(strides[i], plus(e.dim(0, 2 + i), -1)), out_pad[i] + ext[i] - out[i])
                      for i in range(nd)]
        # SAME_UPPER: the odd pad at the end; SAME_LOWER and explicit output_shape: at the beginning
        halves = [(floordiv(t, 2), floordiv(plus(t, 1), 2)) for t in totals]  # t // 2, t - t // 2
        begins, ends = ([lo for lo, _ in halves], [hi for _, hi in halves]) if auto_pad == "SAME_UPPER" else \
            ([hi for _, hi in halves], [lo for lo, _ in halves])
    crop = torch_pads([minus(0, b) for b in begins], [minus(o, t) for o, t in zip(out_pad, ends)])
    kw = {"stride": strides, "groups": group, "dilation": dil}
    lines = [f"{y} = F.pad(F.conv_transpose{nd}d({x}, {w}{torch_kwargs(**kw)}), {sizes_code(crop)})"]
    if e.has(2):
        lines.append(f"{y} = {y} + {e.x(2)}.reshape({literal([1, -1] + [1] * nd)})")
    return lines


# ----------------------------------------------------------------------------- pooling
def _pool_geometry(e: NodeEmit) -> tuple[int, list[int], list[int], list[int], list[Size], list[Size], bool]:
    """(nd, kernel, strides, dilations, begins, ends, ceil_mode). SAME fixes the output at
    ceil(in / stride) and its pads make the padded input exactly that long, so ceil_mode
    changes nothing there and is dropped."""
    kernel = [int(k) for k in e.attr("kernel_shape")]
    nd = len(kernel)
    spatial(e, nd)
    strides = ints_attr(e, "strides", nd, 1)
    dil = ints_attr(e, "dilations", nd, 1)
    ext = [(kernel[i] - 1) * dil[i] + 1 for i in range(nd)]
    begins, ends = explicit_pads(e, nd, ext, strides)
    ceil_mode = bool(e.attr("ceil_mode")) and str(e.attr("auto_pad") or "NOTSET") not in _SAME
    return nd, kernel, strides, dil, begins, ends, ceil_mode


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


def _ceil_cut(e: NodeEmit, nd: int, strides: list[int], begins: list[Size]) -> str:
    """``[:, :, :n, ...]`` keeping the windows that start inside the input or its left pad
    (n = ceil((in + begin) / stride)): what ONNX's ceil_mode keeps of a pool over an input
    padded at the end; a subscript past the size keeps everything."""
    return "[" + ", ".join([":", ":"] + [f":{ceildiv(plus(e.dim(0, 2 + i), begins[i]), strides[i])}"
                                         for i in range(nd)]) + "]"


def _torch_can_pad(kernel: list[int], dil: list[int], begins: list[Size], ends: list[Size]) -> bool:
    """torch pools pad symmetrically, by at most half the (dilated) kernel (and by numbers)."""
    return static(begins) and begins == ends and \
        all(2 * int(b) <= (k - 1) * d + 1 for b, k, d in zip(begins, kernel, dil))


def _sum_pool(e: NodeEmit, x: str, counted: str) -> tuple[str, str]:
    """(window sums of x, window counts) by depthwise convolution with a ones kernel.
    counted: 'input' (count_include_pad=0) or 'padded' (input + explicit pads)."""
    nd, kernel, strides, dil, pad_b, pad_e, ceil_mode = _pool_geometry(e)
    shape = e.dims(0)
    if shape is None or not static(list(shape[1:])) or not static(pad_b + pad_e):
        return _sum_pool_dynamic(e, x, counted)
    in_sp, c = [int(d) for d in shape[2:]], int(shape[1])
    begins, ends = [int(b) for b in pad_b], [int(t) for t in pad_e]
    out = _pool_out(tuple(in_sp), kernel, strides, dil, begins, ends, ceil_mode, str(e.attr("auto_pad") or "NOTSET"))
    need = [(out[i] - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(nd)]
    tail = [max(need[i] - in_sp[i] - begins[i] - ends[i], 0) for i in range(nd)]
    crop = [min(need[i] - in_sp[i] - begins[i] - ends[i], 0) for i in range(nd)]
    full_ends = [ends[i] + tail[i] + crop[i] for i in range(nd)]
    kw = torch_kwargs(stride=strides, dilation=dil)
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


def _sum_pool_dynamic(e: NodeEmit, x: str, counted: str) -> tuple[str, str]:
    """``_sum_pool`` of an input whose spatial (or channel) dims are only known at run time:
    the pads (SAME ones read from the input's size) and, in ceil_mode, stride - 1 more zeros at
    the end, so a floor-mode convolution yields every ceil-mode window; ``_ceil_cut`` then
    drops a last window that would start in the right padding."""
    nd, kernel, strides, dil, begins, ends, ceil_mode = _pool_geometry(e)
    x0 = e.x(0)
    c = e.dim(0, 1)
    extra = [s - 1 if ceil_mode else 0 for s in strides]
    padded_ends = [plus(t, a) for t, a in zip(ends, extra)]
    kw = torch_kwargs(stride=strides, dilation=dil)
    dt = e.dtype(0)
    ones_k = f"torch.ones({sizes_code([c, 1] + kernel)}, dtype={dt})"
    sums = f"F.conv{nd}d(F.pad({x}, {pads_code(begins, padded_ends)}), {ones_k}{kw}, groups={paren(c)})"
    unit = f"torch.ones_like({x0}[:1, :1], dtype={dt})"
    if counted == "input":
        mask = f"F.pad({unit}, {pads_code(begins, padded_ends)})"
    else:
        mask = f"F.pad({unit}, {pads_code(begins, ends)}, value=1.0)" if any(a != 0 for a in begins + ends) else unit
        if any(extra):
            mask = f"F.pad({mask}, {literal(torch_pads([0] * nd, extra))})"
    counts = f"F.conv{nd}d({mask}, torch.ones({literal([1, 1] + kernel)}, dtype={dt}){kw})"
    if ceil_mode:
        cut = _ceil_cut(e, nd, strides, begins)
        sums, counts = sums + cut, counts + cut
    return sums, counts


@rule("average_pool")
def average_pool(e: NodeEmit) -> str:
    x = e.x(0)
    nd, kernel, strides, dil, begins, ends, ceil_mode = _pool_geometry(e)
    cip = bool(e.attr("count_include_pad"))
    if dil == [1] * nd and _torch_can_pad(kernel, dil, begins, ends):
        kw = {"padding": begins, "ceil_mode": ceil_mode, "count_include_pad": cip}
        return f"F.avg_pool{nd}d({x}, {literal(kernel)}, {literal(strides)}{torch_kwargs(**kw)})"
    sums, counts = _sum_pool(e, x, "padded" if cip else "input")
    return f"{sums} / {counts}"


@rule("lp_pool")
def lp_pool(e: NodeEmit) -> str:
    """(sum over the window of |x| ** p) ** (1 / p); padding counts as zeros."""
    p = float(e.attr("p"))
    sums, _ = _sum_pool(e, f"torch.abs({e.x(0)}) ** {literal(p)}", "input")
    return f"{sums} ** {literal(1.0 / p)}"


@rule("max_pool")
def max_pool(e: NodeEmit) -> list[str]:
    """Without indices and with pads known when converting: the maximum of strided views
    (``_max_pool``). Otherwise torch pools when torch can pad, else the input is padded with the
    dtype's lowest value first (SAME pads of symbolic dims computed from its run-time size). Indices: flat
    over (N, C, *spatial), row-major (storage_order 0) or column-major spatial (1)."""
    x = e.x(0)
    nd, kernel, strides, dil, begins, ends, ceil_mode = _pool_geometry(e)
    want_idx = e.n_out() > 1
    spatial = e.dims(0)
    fixed = spatial is not None and static(list(spatial[2:]))
    if not want_idx and static(begins + ends) and (fixed or not ceil_mode) and \
            not (ceil_mode and str(e.attr("auto_pad") or "") in _SAME):
        # torch's max pool kernels are slow on CPU: the maximum of strided views (``_max_pool``);
        # pads known when converting, ceil_mode at static sizes (its last window is a branch on
        # the size, which torch.export would guard)
        low = "-float('inf')" if e.is_float(0) else f"torch.iinfo({e.dtype(0)}).min"
        return [f"{e.out()} = {e.helper('_max_pool')}({x}, {literal(kernel)}, {literal(strides)}, {literal(dil)}, "
                f"{sizes_code(begins)}, {sizes_code(ends)}, {ceil_mode}, {low})"]
    y = e.out()
    kw: dict[str, object] = {"ceil_mode": ceil_mode} if ceil_mode else {}
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
        src = f"F.pad({x}, {pads_code(begins, ends)}, value={low})"
        sliced = ""
        if ceil_mode:
            shape = e.dims(0)
            if shape is not None and static(list(shape[2:])) and static(begins + ends):
                out = _pool_out(tuple(int(d) for d in shape[2:]), kernel, strides, dil, [int(b) for b in begins],
                                [int(t) for t in ends], True, str(e.attr("auto_pad") or ""))
                sliced = "[" + ", ".join([":", ":"] + [f":{o}" for o in out]) + "]"
            else:
                sliced = _ceil_cut(e, nd, strides, begins)
    call = f"F.max_pool{nd}d({src}, {literal(kernel)}, {literal(strides)}{torch_kwargs(**kw)}"
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


@rule("max_unpool")
def max_unpool(e: NodeEmit) -> list[str]:
    """Scatter the values to their (n, c, spatial) flat index in the default output, then
    zero-extend to ``output_shape``. The default output's symbolic dims are read at run time."""
    x, idx = e.x(0), e.x(1)
    kernel = [int(k) for k in e.attr("kernel_shape")]
    nd = len(kernel)
    strides = ints_attr(e, "strides", nd, 1)
    pads = ints_attr(e, "pads", 2 * nd, 0)
    default = [e.dim(0, 0), e.dim(0, 1)] + [plus(times(strides[i], plus(e.dim(0, 2 + i), -1)),
                                                 kernel[i] - pads[i] - pads[i + nd]) for i in range(nd)]
    y = e.out()
    fixed = [d for d in default if isinstance(d, int)]
    zeros = (f"torch.zeros({math.prod(fixed)}, dtype={e.dtype(0)})" if len(fixed) == len(default) else
             f"torch.zeros({sizes_code(default)}, dtype={e.dtype(0)}).reshape(-1)")
    lines = [f"{y} = {zeros}.scatter(0, {idx}.reshape(-1), {x}.reshape(-1)).reshape({sizes_code(default)})"]
    if e.has(2):
        target = e.ints(2)
        if target is None or len(fixed) != len(default):
            return lines + [f"{y} = {e.helper('_grow')}({y}, {e.ints_code(2)})"]
        grow = [t - d for t, d in zip(target, fixed)]
        if any(grow):
            lines.append(f"{y} = F.pad({y}, {literal(torch_pads([0] * len(grow), grow))})")
    return lines


@rule("col2im")
def col2im(e: NodeEmit) -> str:
    img, blk = e.ints_code(1), e.ints_code(2)
    nd = e.need_dim(1, 0, "the number of image dims")
    if nd != 2:
        raise e.refuse("rank_limit", "torch folds 2-D images only (F.fold)")
    pads = ints_attr(e, "pads", 4, 0)
    if pads[:2] != pads[2:]:
        raise e.refuse("unsupported_attribute_value", "F.fold pads symmetrically")
    kw = {"dilation": ints_attr(e, "dilations", 2, 1), "padding": pads[:2], "stride": ints_attr(e, "strides", 2, 1)}
    return f"F.fold({e.x(0)}, {img}, {blk}{torch_kwargs(**kw)})"


# ----------------------------------------------------------------------------- normalization
@rule("batch_normalization")
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
    """(normalized axes, their sizes when static: the leading ones may be symbolic)."""
    rank = e.need_rank(0)
    start = norm_axis(a, rank)
    tail = [e.dim(0, d) for d in range(start, rank)]
    sizes = [d for d in tail if isinstance(d, int)]
    return list(range(start, rank)), (sizes if len(sizes) == len(tail) else None)


@rule("layer_normalization")
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
    stash = onnx_float(int(e.attr("stash_type") or 1))
    if e.n_out() > 1:
        lines.append(f"{e.out(1)} = {m}.to({e.out_dtype(1, stash)})")
    if e.n_out() > 2:
        lines.append(f"{e.out(2)} = {inv}.to({e.out_dtype(2, stash)})")
    return lines


@rule("rms_normalization")
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


@rule("group_normalization")
def group_normalization(e: NodeEmit) -> str:
    return (f"F.group_norm({e.x(0)}, {int(e.attr('num_groups'))}, {e.x(1)}, {e.x(2)}, "
            f"eps={literal(float(e.attr('epsilon')))})")


@rule("lrn")
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


def _loss_kw(e: NodeEmit, weight_index: int) -> str:
    kw = f", reduction={literal(str(e.attr('reduction')))}"
    if e.has(weight_index):
        kw = f", weight={e.x(weight_index)}" + ("" if e.dtype_id(0) in ("float32", "float64") else ".float()") + kw
    ignore = e.attr("ignore_index")
    if ignore is not None:
        kw += f", ignore_index={int(ignore)}"
    return kw


@rule("negative_log_likelihood_loss")
def negative_log_likelihood_loss(e: NodeEmit) -> str:
    x = e.x(0) if e.dtype_id(0) in ("float32", "float64") else f"{e.x(0)}.float()"
    return f"F.nll_loss({x}, {e.x(1)}.long(){_loss_kw(e, 2)}).to({e.dtype(0)})"


@rule("softmax_cross_entropy_loss")
def softmax_cross_entropy_loss(e: NodeEmit) -> list[str]:
    """(loss, log_prob): NLL of log_softmax(scores, axis=1)."""
    x = e.x(0) if e.dtype_id(0) in ("float32", "float64") else f"{e.x(0)}.float()"
    lp = e.tmp("log_prob")
    lines = [f"{lp} = torch.log_softmax({x}, dim=1)",
             f"{e.out(0)} = F.nll_loss({lp}, {e.x(1)}.long(){_loss_kw(e, 2)}).to({e.dtype(0)})"]
    if e.n_out() > 1:
        lines.append(f"{e.out(1)} = {lp}.to({e.dtype(0)})")
    return lines


@rule("dropout")
def dropout(e: NodeEmit) -> list[str]:
    """Inference (no or false training_mode): a copy and an all-true mask. Training mode with a
    run-time flag: F.dropout and the mask of kept elements."""
    x = e.x(0)
    y = e.out(0)
    training = e.scalar(2) if e.has(2) else False
    if e.has(2) and training is None:
        ratio = e.scalar_code(1, "float") if e.has(1) else "0.5"
        keep = e.tmp("keep")
        lines = [f"{keep} = torch.rand({x}.shape) >= {ratio} if bool({e.x(2)}) else torch.ones({x}.shape, dtype=torch.bool)",
                 f"{y} = torch.where({keep}, {x} / (1 - {ratio}) if bool({e.x(2)}) else {x}, torch.zeros_like({x}))"]
        if e.n_out() > 1:
            lines.append(f"{e.out(1)} = {keep}")
        return lines
    if training and (e.scalar(1) if e.has(1) else 0.5):
        raise e.refuse("unsupported_attribute_value", "dropout in training mode draws random numbers")
    lines = [f"{y} = torch.clone({x})"]
    if e.n_out() > 1:
        lines.append(f"{e.out(1)} = torch.ones_like({x}, dtype=torch.bool)")
    return lines


_INTERP = {3: "linear", 4: "bilinear", 5: "trilinear"}


def _resize_plan(e: NodeEmit, rank: int, axes: list[int],
                 shape: tuple) -> tuple[list[float], list[int | None], bool] | None:
    """(scales, output sizes, from_sizes) of the resized axes, or None if not constant. By
    scales, the output size of a symbolic dim is None (floor(in * scale) at run time); by
    sizes, every resized dim must be static (the scales derive from it)."""
    in_sz = [shape[a] for a in axes]
    sizes = e.const(3) if e.has(3) else None
    if sizes is not None and sizes.size:
        if not all(isinstance(i, int) for i in in_sz):
            return None
        want = [int(v) for v in sizes.reshape(-1)]
        policy = str(e.attr("keep_aspect_ratio_policy"))
        if policy == "stretch":
            return [w / i for w, i in zip(want, in_sz)], want, True
        s = (min if policy == "not_larger" else max)(w / i for w, i in zip(want, in_sz))
        return [s] * len(axes), [int(math.floor(s * i + 0.5)) for i in in_sz], False
    if e.has(3) and sizes is None:
        return None
    scales = e.const(2) if e.has(2) else None
    if scales is None:
        return None
    sc = [float(v) for v in scales.reshape(-1)]
    return sc, [int(math.floor(i * s)) if isinstance(i, int) else None for i, s in zip(in_sz, sc)], False


def _interpolate(e: NodeEmit, rank: int, axes: list[int], scales: list[float], out: list[int | None],
                 from_sizes: bool, shape: tuple) -> str | None:
    """F.interpolate when it computes exactly what ONNX asks for, else None. By scales it
    takes symbolic spatial dims (torch sizes its output floor(in * scale) as ONNX does)."""
    mode, ctm = str(e.attr("mode")), str(e.attr("coordinate_transformation_mode"))
    if rank not in (3, 4, 5) or e.attr("exclude_outside") or ctm == "tf_crop_and_resize":
        return None
    spatial = {a: (s, o) for a, s, o in zip(axes, scales, out)}
    for a in (0, 1):  # batch and channels stay as they are
        if a in spatial and spatial[a][1] != shape[a] and not (spatial[a][0] == 1.0 and not from_sizes):
            return None
    sc = [spatial.get(a, (1.0, shape[a]))[0] for a in range(2, rank)]
    sz = [spatial.get(a, (1.0, shape[a]))[1] for a in range(2, rank)]
    if from_sizes and not all(isinstance(d, int) for d in sz):
        return None
    # an output size torch cannot know here is > 1 wherever the scale is at least 2
    more_than_one = all(o > 1 if isinstance(o, int) else s >= 2 for o, s in zip(sz, sc))
    antialias = bool(e.attr("antialias")) and any(s < 1 for s in sc)
    if mode == "nearest":
        nm = str(e.attr("nearest_mode"))
        if ctm == "asymmetric" and nm == "floor":
            kind = "'nearest'"
        elif ctm == "half_pixel" and nm == "round_prefer_ceil":
            kind = "'nearest-exact'"
        else:
            return None
        extra = ""
    else:
        if ctm == "align_corners":
            corners = True
        elif ctm == "half_pixel" or (ctm == "pytorch_half_pixel" and more_than_one):
            corners = False
        else:
            return None
        if mode == "cubic":
            if rank != 4 or float(e.attr("cubic_coeff_a")) != -0.75 or antialias:
                return None
            kind = "'bicubic'"
        else:
            if antialias and rank != 4:
                return None
            kind = f"'{_INTERP[rank]}'"
        extra = f", align_corners={corners}" + (", antialias=True" if antialias else "")
    target = f"size={literal(sz)}" if from_sizes else f"scale_factor={literal(sc)}"
    x = e.x(0)
    if not e.is_float(0):
        return None
    return f"F.interpolate({x}, {target}, mode={kind}{extra})"


@rule("resize")
def resize(e: NodeEmit) -> str:
    x = e.x(0)
    shape = e.dims(0)  # symbolic dims outside the resized axes are fine
    if shape is None:
        raise e.refuse("dynamic_shape", "input 0 needs a known rank")
    rank = len(shape)
    axes = [norm_axis(int(a), rank) for a in (e.attr("axes") or range(rank))]
    plan = _resize_plan(e, rank, axes, shape)
    if plan is not None and not (e.has(1) and e.const(1) is None):
        scales, out, from_sizes = plan
        fast = _interpolate(e, rank, axes, scales, out, from_sizes, shape)
        if fast is not None:
            return fast
    if plan is None or (e.has(1) and e.const(1) is None) or None in plan[1]:
        args = [e.x(i) if e.has(i) else "None" for i in (1, 2, 3)]
        args += [literal(axes), literal(str(e.attr("keep_aspect_ratio_policy")))] + _resize_args(e)
        return f"{e.helper('_resize_onnx')}({x}, {', '.join(args)})"
    roi = e.const(1) if e.has(1) else None
    n = len(axes)
    roi_v = [float(v) for v in roi.reshape(-1)] if roi is not None and roi.size else [0.0] * n + [1.0] * n
    if len(roi_v) == 2 * rank and n != rank:
        roi_v = [roi_v[a] for a in axes] + [roi_v[rank + a] for a in axes]
    args = [literal(axes), literal(scales), literal(out), literal(roi_v)] + _resize_args(e)
    return f"{e.helper('_resize')}({x}, {', '.join(args)})"


def _resize_args(e: NodeEmit) -> list[str]:
    """mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside,
    extrapolation_value, antialias as literals (the tail of ``_resize``'s arguments)."""
    return [literal(str(e.attr("mode"))), literal(str(e.attr("coordinate_transformation_mode"))),
            literal(str(e.attr("nearest_mode"))), literal(float(e.attr("cubic_coeff_a"))),
            literal(bool(e.attr("exclude_outside"))), literal(float(e.attr("extrapolation_value"))),
            literal(bool(e.attr("antialias")))]


@rule("upsample")
def upsample(e: NodeEmit) -> str:
    """Upsample (opset 7-9): nearest = floor(i / scale), linear with asymmetric coordinates."""
    x = e.x(0)
    sc = e.const(1)
    if sc is None:
        raise e.refuse("requires_constant_input", "upsample needs constant scales")
    scales = [float(v) for v in sc.reshape(-1)]
    rank = len(scales)
    if str(e.attr("mode")) == "nearest" and rank in (3, 4, 5) and scales[:2] == [1.0, 1.0] and e.is_float(0):
        return f"F.interpolate({x}, scale_factor={literal(scales[2:])}, mode='nearest')"
    mode = "nearest" if str(e.attr("mode")) == "nearest" else "linear"
    shape = e.dims(0)
    if shape is None or not static(list(shape)):  # the output sizes floor(in * scale) at run time
        args = ["None", e.x(1), "None", "None", literal("stretch"), literal(mode), literal("asymmetric"),
                literal("floor"), "-0.75", "False", "0.0", "False"]
        return f"{e.helper('_resize_onnx')}({x}, {', '.join(args)})"
    out = [int(math.floor(int(d) * s)) for d, s in zip(shape, scales)]
    args = [literal(list(range(rank))), literal(scales), literal(out), literal([0.0] * rank + [1.0] * rank),
            literal(mode), literal("asymmetric"), literal("floor"), "-0.75", "False", "0.0", "False"]
    return f"{e.helper('_resize')}({x}, {', '.join(args)})"


@rule("grid_sample")
def grid_sample(e: NodeEmit) -> str:
    mode = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic",
            "bilinear": "bilinear", "bicubic": "bicubic"}[str(e.attr("mode"))]
    rank = e.need_rank(0)
    if rank not in (4, 5) or (rank == 5 and mode == "bicubic"):
        raise e.refuse("rank_limit", "F.grid_sample samples 2-D (and 3-D without cubic) images")
    x = f32(e, 0)  # grid_sample wants X and grid in one float dtype, at least float32 here
    computes_in = e.dtype_id(0) if e.dtype_id(0) in WIDE else "float32"
    grid = e.x(1) if e.dtype_id(1) == computes_in else f"{e.x(1)}.to({x}.dtype)"
    y = (f"F.grid_sample({x}, {grid}, mode={literal(mode)}, padding_mode={literal(str(e.attr('padding_mode')))}, "
         f"align_corners={bool(e.attr('align_corners'))})")
    return y if e.dtype_id(0) in WIDE else f"{y}.to({e.dtype(0)})"


@rule("affine_grid")
def affine_grid(e: NodeEmit) -> str:
    return f"F.affine_grid({e.x(0)}, {e.ints_code(1)}, align_corners={bool(e.attr('align_corners'))})"


@rule("causal_conv_with_state")
def causal_conv_with_state(e: NodeEmit) -> list[str]:
    """Depthwise causal conv1d over [past_state, input]; present_state = the last k - 1 steps."""
    x, w = e.x(0), e.x(1)
    k = e.need_dim(1, -1, "the kernel size")
    full = e.tmp("full")
    past = e.x(3) if e.has(3) else f"torch.zeros({x}.shape[0], {x}.shape[1], {k - 1}, dtype={x}.dtype)"
    y = e.out(0)
    lines = [f"{full} = torch.cat([{past}, {x}], dim=2)",
             f"{y} = F.conv1d({full}, {w}.reshape({x}.shape[1], 1, {k}), {e.x(2) if e.has(2) else 'None'}, "
             f"groups={x}.shape[1])"]
    if str(e.attr("activation")) in ("silu", "swish"):
        lines.append(f"{y} = F.silu({y})")
    if e.n_out() > 1:
        lines.append(f"{e.out(1)} = {full}[:, :, {full}.shape[2] - {k - 1}:]")
    return lines


@rule("swiglu")
def swiglu(e: NodeEmit) -> str:
    alpha = float(e.attr("alpha"))
    a = e.x(0)
    gate = f"F.silu({a})" if alpha == 1.0 else f"{a} * torch.sigmoid({literal(alpha)} * {a})"
    return f"{gate} * {e.x(1)}"


@rule("threshold")
def threshold(e: NodeEmit) -> str:
    """max(x, min_value) in x's dtype (an integer x takes the truncated bound)."""
    v = float(e.attr("min_value"))
    return f"torch.clamp_min({e.x(0)}, {literal(v if e.is_float(0) else int(v))})"


@rule("selu")
def selu(e: NodeEmit) -> str:
    alpha, gamma = float(e.attr("alpha")), float(e.attr("gamma"))
    x = e.x(0)
    if abs(alpha - 1.6732632423543772) < 1e-6 and abs(gamma - 1.0507009873554805) < 1e-6:
        return f"F.selu({x})"
    return f"{literal(gamma)} * torch.where({x} > 0, {x}, {literal(alpha)} * torch.expm1({x}))"


@rule("swish")
def swish(e: NodeEmit) -> str:
    alpha = float(e.attr("alpha"))
    if alpha == 1.0:
        return f"F.silu({e.x(0)})"
    return f"{e.x(0)} * torch.sigmoid({literal(alpha)} * {e.x(0)})"


@rule("shrink")
def shrink(e: NodeEmit) -> str:
    """x - bias where x > lambd, x + bias where x < -lambd, else 0 (in x's dtype)."""
    x, bias, lambd = e.x(0), float(e.attr("bias")), float(e.attr("lambd"))
    zero = f"torch.zeros_like({x})"
    if e.is_float(0):
        return f"torch.where({x} > {literal(lambd)}, {x} - {literal(bias)}, torch.where({x} < {literal(-lambd)}, {x} + {literal(bias)}, {zero}))"
    wide = f"{x}.double()"
    return (f"torch.where({x} > {literal(lambd)}, {wide} - {literal(bias)}, torch.where({x} < {literal(-lambd)}, "
            f"{wide} + {literal(bias)}, {zero}.double())).to({e.dtype(0)})")


@rule("hardmax")
def hardmax(e: NodeEmit) -> str:
    """1 at the first maximum along ``axis``."""
    x, a = e.x(0), int(e.attr("axis"))
    return f"F.one_hot(torch.argmax({x}, dim={a}), {x}.shape[{a}]).movedim(-1, {a}).to({e.dtype(0)})"


@rule("gemm")
def gemm(e: NodeEmit) -> str:
    """alpha * A' @ B' + beta * C; ``A @ B' + C`` with a constant B and a constant C of one
    value per column is a ``torch.nn.Linear``."""
    w = own_weight(e, 1, 2)
    c = own_weight(e, 2) if e.has(2) else None
    if w is not None and not e.attr("transA") and float(e.attr("alpha")) == 1.0 and e.is_float(0) \
            and e.dtype_id(0) == "float32" and (not e.has(2) or float(e.attr("beta")) == 1.0 and c is not None):
        weight = w if e.attr("transB") else w.T
        if c is None or c.size == weight.shape[0] and (c.ndim == 1 or c.ndim == 2 and c.shape[0] == 1):
            return linear_layer(e, e.x(0), weight, None if c is None else c.reshape(-1), 1)
    a = e.x(0) + (".T" if e.attr("transA") else "")
    b = e.x(1) + (".T" if e.attr("transB") else "")
    alpha, beta = float(e.attr("alpha")), float(e.attr("beta"))
    y = f"torch.matmul({a}, {b})"
    if alpha != 1.0:
        y = f"{literal(alpha)} * {y}"
    if e.has(2):
        c = e.x(2) if beta == 1.0 else f"{literal(beta)} * {e.x(2)}"
        y = f"{y} + {c}"
    return y


@rule("einsum")
def einsum(e: NodeEmit) -> str:
    return f"torch.einsum({literal(str(e.attr('equation')))}, {', '.join(e.xs())})"


@rule("det")
def det(e: NodeEmit) -> str:
    """torch.linalg.det has no half-precision kernel on CPU: float16 / bfloat16 go through float32."""
    if e.dtype_id(0) in ("float32", "float64"):
        return f"torch.linalg.det({e.x(0)})"
    return f"torch.linalg.det({e.x(0)}.float()).to({e.dtype(0)})"


@rule("matmul")
def matmul(e: NodeEmit) -> str:
    """A product with a constant float32 matrix of its own is a ``torch.nn.Linear`` (its
    weight, the matrix transposed, stored ``[out, in]``); else the cell's snippet."""
    w = own_weight(e, 1, 2)
    if w is not None and e.dtype_id(0) == "float32" and (e.rank(0) or 0) >= 2:
        bias, add = _bias_after(e, int(w.shape[1]))
        if add is not None:
            e.cg.absorbed[id(add)] = e.node.outputs[0]
        return linear_layer(e, e.x(0), w.T, bias, 1)
    return e.snippet()


def _bias_after(e: NodeEmit, n: int) -> tuple[np.ndarray | None, object]:
    """The product's one reader when it is an ``add`` of a float32 constant of ``n`` values that
    nothing else reads (torch.onnx writes ``nn.Linear`` on a 3-D input as MatMul + Add): (that
    bias, the add node), which the ``torch.nn.Linear`` then adds; else (None, None)."""
    out = e.node.outputs[0]
    g = e.node.graph
    if len(out.uses) != 1 or g is None or any(o is out for o in g.outputs):
        return None, None
    add, k = out.uses[0]
    if add.op != "add" or len(add.inputs) != 2 or add.graph is not g:
        return None, None
    b = add.inputs[1 - k]
    if b is None or not b.is_const or b.type.dtype != "float32" or len(b.uses) != 1 or add.inputs[0] is add.inputs[1]:
        return None, None
    arr = np.asarray(b.const, dtype=np.float32)
    if arr.size != n or arr.ndim != 1 or add.outputs[0].type.shape != out.type.shape:
        return None, None
    return arr, add
