"""PyTorch lowerings: quantization, integer matmuls, losses, windows and Fourier transforms, dropout."""
from __future__ import annotations

from .pytorch_ops import ONNX_FLOAT, NodeEmit, axis, literal, lowering



def _per_axis(e: NodeEmit, i: int, like: int) -> str:
    """A scale / zero point shaped to broadcast against input ``like``: scalar (per tensor),
    vector along ``axis`` (per axis), or blocks of ``block_size`` along ``axis``."""
    p = e.x(i)
    shape = e.shape(i)
    rank = e.need_rank(like)
    a = axis(int(e.attr("axis")), rank)
    block = int(e.attr("block_size") or 0)
    if shape is None:
        raise e.refuse("dynamic_shape", "scale / zero point need a static shape")
    if len(shape) == 0 or (len(shape) == 1 and shape[0] == 1 and not block):
        return f"{p}.reshape(())" if len(shape) else p
    if block:
        return f"{p}.repeat_interleave({block}, dim={a}).narrow({a}, 0, {e.x(like)}.shape[{a}])"
    if len(shape) == 1:
        return f"{p}.reshape({literal([-1 if d == a else 1 for d in range(rank)])})"
    return p


@lowering("quantize_linear")
def quantize_linear(e: NodeEmit) -> str:
    """saturate(round_half_even(x / y_scale) + y_zero_point), the division in y_scale's dtype."""
    out = e.out_dtype()
    scale = _per_axis(e, 1, 0)
    calc = e.dtype(1)
    prec = int(e.attr("precision") or 0)
    if prec in ONNX_FLOAT:
        calc = ONNX_FLOAT[prec]
    q = f"torch.round({e.x(0)}.to({calc}) / {scale}.to({calc}))"
    if e.has(2):
        q = f"{q} + {_per_axis(e, 2, 0)}.to({calc})"
    lo, hi = e.out_range()
    return f"torch.clamp({q}, {lo}, {hi}).to({out})"


@lowering("dequantize_linear")
def dequantize_linear(e: NodeEmit) -> str:
    """(x - x_zero_point) * x_scale in the output dtype (computed in float32, or float64 for
    32-bit integers)."""
    out = e.out_dtype()
    calc = "torch.float64" if e.dtype_id(0) in ("int32", "uint32", "int64") else "torch.float32"
    v = f"{e.x(0)}.to({calc})"
    if e.has(2):
        v = f"({v} - {_per_axis(e, 2, 0)}.to({calc}))"
    return f"({v} * {_per_axis(e, 1, 0)}.to({calc})).to({out})"


@lowering("dynamic_quantize_linear")
def dynamic_quantize_linear(e: NodeEmit) -> list[str]:
    """uint8 quantization over [min(0, x), max(0, x)]: scale = range / 255, zp = round(-lo / scale)."""
    x = e.x(0)
    y, s, zp = e.out(0), e.out(1), e.out(2)
    lo, hi, safe = e.tmp("lo"), e.tmp("hi"), e.tmp("scale_safe")
    return [f"{lo} = torch.clamp_max({x}.min(), 0.0)",
            f"{hi} = torch.clamp_min({x}.max(), 0.0)",
            f"{s} = (({hi} - {lo}) / 255.0).to(torch.float32)",
            f"{safe} = torch.where({s} == 0, torch.ones_like({s}), {s})",
            f"{zp} = torch.clamp(torch.round(-{lo} / {safe}), 0, 255)",
            f"{y} = torch.clamp(torch.round({x} / {safe}) + {zp}, 0, 255).to(torch.uint8)",
            f"{zp} = {zp}.to(torch.uint8)"]


def _row_zp(e: NodeEmit, i: int, of: int) -> str:
    """A per-row zero point (M,) of a matrix as (M, 1); scalars stay scalars."""
    if not e.has(i):
        return "0"
    zp = f"{e.x(i)}.long()"
    shape = e.shape(i)
    if shape is not None and len(shape) == 1 and shape[0] > 1 and (e.rank(of) or 0) >= 2:
        return f"{zp}.reshape(-1, 1)"
    return zp


@lowering("matmul_integer")
def matmul_integer(e: NodeEmit) -> str:
    a = f"({e.x(0)}.long() - {_row_zp(e, 2, 0)})"
    b = f"({e.x(1)}.long() - {e.x(3)}.long())" if e.has(3) else f"{e.x(1)}.long()"
    return f"torch.matmul({a}, {b}).to(torch.int32)"


@lowering("qlinear_matmul")
def qlinear_matmul(e: NodeEmit) -> list[str]:
    """saturate(round(((a - a_zp) * a_scale) @ ((b - b_zp) * b_scale) / y_scale) + y_zp) in float64."""
    def row(i: int) -> str:
        shape = e.shape(i)
        v = f"{e.x(i)}.double()"
        return f"{v}.reshape(-1, 1)" if shape is not None and len(shape) == 1 and shape[0] > 1 else v

    y = e.out()
    out = e.dtype(7)
    a = f"(({e.x(0)}.double() - {row(2)}) * {row(1)})"
    b = f"(({e.x(3)}.double() - {e.x(5)}.double()) * {e.x(4)}.double())"
    return [f"{y} = torch.round(torch.matmul({a}, {b}) / {e.x(6)}.double()) + {e.x(7)}.double()",
            f"{y} = torch.clamp({y}, torch.iinfo({out}).min, torch.iinfo({out}).max).to({out})"]


# ----------------------------------------------------------------------------- losses
def _loss_kw(e: NodeEmit, weight_index: int) -> str:
    kw = f", reduction={literal(str(e.attr('reduction')))}"
    if e.has(weight_index):
        kw = f", weight={e.x(weight_index)}" + ("" if e.dtype_id(0) in ("float32", "float64") else ".float()") + kw
    ignore = e.attr("ignore_index")
    if ignore is not None:
        kw += f", ignore_index={int(ignore)}"
    return kw


@lowering("negative_log_likelihood_loss")
def negative_log_likelihood_loss(e: NodeEmit) -> str:
    x = e.x(0) if e.dtype_id(0) in ("float32", "float64") else f"{e.x(0)}.float()"
    return f"F.nll_loss({x}, {e.x(1)}.long(){_loss_kw(e, 2)}).to({e.dtype(0)})"


@lowering("softmax_cross_entropy_loss")
def softmax_cross_entropy_loss(e: NodeEmit) -> list[str]:
    """(loss, log_prob): NLL of log_softmax(scores, axis=1)."""
    x = e.x(0) if e.dtype_id(0) in ("float32", "float64") else f"{e.x(0)}.float()"
    lp = e.tmp("log_prob")
    lines = [f"{lp} = torch.log_softmax({x}, dim=1)",
             f"{e.out(0)} = F.nll_loss({lp}, {e.x(1)}.long(){_loss_kw(e, 2)}).to({e.dtype(0)})"]
    if e.n_out() > 1:
        lines.append(f"{e.out(1)} = {lp}.to({e.dtype(0)})")
    return lines


# ----------------------------------------------------------------------------- signal
def _window(e: NodeEmit, call: str) -> str:
    size = e.scalar_code(0, "int")
    periodic = bool(e.attr("periodic"))
    return f"torch.{call}({size}, periodic={periodic}, dtype=torch.float64{{extra}}).to({e.out_dtype()})"


@lowering("hann_window")
def hann_window(e: NodeEmit) -> str:
    return _window(e, "hann_window").format(extra="")


@lowering("hamming_window")
def hamming_window(e: NodeEmit) -> str:
    return _window(e, "hamming_window").format(extra=", alpha=25.0 / 46.0, beta=21.0 / 46.0")


@lowering("blackman_window")
def blackman_window(e: NodeEmit) -> str:
    return _window(e, "blackman_window").format(extra="")


def _as_complex(x: str, last: int) -> str:
    """[..., 2] (re, im) or [..., 1] (re) → a complex128 tensor without the last dim."""
    if last == 2:
        return f"torch.complex({x}[..., 0].double(), {x}[..., 1].double())"
    return f"{x}[..., 0].double().to(torch.complex128)"


@lowering("dft")
def dft(e: NodeEmit) -> str:
    """DFT along ``axis`` of the [..., re(, im)] input; onesided / inverse pick rfft, ifft, irfft."""
    x = e.x(0)
    shape = e.need_shape(0)
    rank = len(shape)
    if e.has(2) and e.const(2) is None:
        ax: int | str = f"{e.scalar_code(2, 'int')} % {rank}"
    else:
        ax = axis(int(e.scalar(2)), rank) if e.has(2) else rank - 2
    inverse, onesided = bool(e.attr("inverse")), bool(e.attr("onesided"))
    c = _as_complex(x, shape[-1])
    n = f", n={e.scalar_code(1, 'int')}" if e.has(1) else ""
    if inverse and onesided:
        if not e.has(1):
            n = f", n={2 * (shape[ax] - 1)}" if isinstance(ax, int) else f", n=2 * ({x}.shape[{ax}] - 1)"
        return f"torch.fft.irfft({c}, dim={ax}{n}).unsqueeze(-1).to({e.dtype(0)})"
    if inverse:
        return f"torch.view_as_real(torch.fft.ifft({c}, dim={ax}{n})).to({e.dtype(0)})"
    if onesided:
        return f"torch.view_as_real(torch.fft.rfft({c}.real, dim={ax}{n})).to({e.dtype(0)})"
    return f"torch.view_as_real(torch.fft.fft({c}, dim={ax}{n})).to({e.dtype(0)})"


@lowering("stft")
def stft(e: NodeEmit) -> list[str]:
    """Frames of frame_length every frame_step samples, times the window, DFT of each frame."""
    x = e.x(0)
    shape = e.need_shape(0)
    step = e.scalar_code(1, "int")
    if e.has(3):
        n = e.scalar_code(3, "int")
    elif e.has(2):
        n = str(e.need_shape(2)[0])
    else:
        n = str(shape[1])
    frames = e.tmp("frames")
    lines = [f"{frames} = {_as_complex(x, shape[-1])}.unfold(1, {n}, {step})"]
    if e.has(2):
        lines.append(f"{frames} = {frames} * {e.x(2)}.double()")
    real = shape[-1] == 1
    if e.attr("onesided") and real:
        spec = f"torch.fft.rfft({frames}.real, dim=-1)"
    else:
        spec = f"torch.fft.fft({frames}, dim=-1)"
    lines.append(f"{e.out()} = torch.view_as_real({spec}).to({e.dtype(0)})")
    return lines


# ----------------------------------------------------------------------------- dropout
@lowering("dropout")
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
