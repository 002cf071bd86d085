"""PyTorch rules: signal processing (windows, DFT, STFT, mel filter banks)."""
from __future__ import annotations

from translator.table.dtypes import norm_axis

from .node import NodeEmit, size_code
from .registry import rule


def _window(e: NodeEmit, call: str) -> str:
    size = e.scalar_code(0, "int")
    periodic = bool(e.attr("periodic"))
    return f"torch.{call}({size}, periodic={periodic}, dtype=torch.float64{{extra}}).to({e.out_dtype()})"


@rule("hann_window")
def hann_window(e: NodeEmit) -> str:
    return _window(e, "hann_window").format(extra="")


@rule("hamming_window")
def hamming_window(e: NodeEmit) -> str:
    return _window(e, "hamming_window").format(extra=", alpha=25.0 / 46.0, beta=21.0 / 46.0")


@rule("blackman_window")
def blackman_window(e: NodeEmit) -> str:
    return _window(e, "blackman_window").format(extra="")


def _as_complex(x: str, last: int) -> str:
    """[..., 2] (re, im) or [..., 1] (re) → a complex128 tensor without the last dim."""
    if last == 2:
        return f"torch.complex({x}[..., 0].double(), {x}[..., 1].double())"
    return f"{x}[..., 0].double().to(torch.complex128)"


@rule("dft")
def dft(e: NodeEmit) -> str:
    """DFT along ``axis`` of the [..., re(, im)] input; onesided / inverse pick rfft, ifft, irfft.
    Only the last (re, im) dim must be static: the signal's length may be symbolic."""
    x = e.x(0)
    rank = e.need_rank(0)
    last = e.need_dim(0, -1, "1 real or 2 real/imaginary components")
    if e.has(2) and e.const(2) is None:
        ax: int | str = f"{e.scalar_code(2, 'int')} % {rank}"
    else:
        ax = norm_axis(int(e.scalar(2)), rank) if e.has(2) else rank - 2
    inverse, onesided = bool(e.attr("inverse")), bool(e.attr("onesided"))
    c = _as_complex(x, last)
    n = f", n={e.scalar_code(1, 'int')}" if e.has(1) else ""
    if inverse and onesided:
        if not e.has(1):
            size = e.dim(0, ax) if isinstance(ax, int) else None
            n = f", n={2 * (size - 1)}" if isinstance(size, int) else f", n=2 * ({x}.shape[{ax}] - 1)"
        return f"torch.fft.irfft({c}, dim={ax}{n}).unsqueeze(-1).to({e.dtype(0)})"
    if inverse:
        return f"torch.view_as_real(torch.fft.ifft({c}, dim={ax}{n})).to({e.dtype(0)})"
    if onesided:
        return f"torch.view_as_real(torch.fft.rfft({c}.real, dim={ax}{n})).to({e.dtype(0)})"
    return f"torch.view_as_real(torch.fft.fft({c}, dim={ax}{n})).to({e.dtype(0)})"


@rule("stft")
def stft(e: NodeEmit) -> list[str]:
    """Frames of frame_length every frame_step samples, times the window, DFT of each frame."""
    x = e.x(0)
    last = e.need_dim(0, -1, "1 real or 2 real/imaginary components")  # the signal's length may be symbolic
    step = e.scalar_code(1, "int")
    if e.has(3):
        n = e.scalar_code(3, "int")
    elif e.has(2):
        n = size_code(e.dim(2, 0))
    else:
        n = size_code(e.dim(0, 1))
    frames = e.tmp("frames")
    lines = [f"{frames} = {_as_complex(x, last)}.unfold(1, {n}, {step})"]
    if e.has(2):
        lines.append(f"{frames} = {frames} * {e.x(2)}.double()")
    real = last == 1
    if e.attr("onesided") and real:
        spec = f"torch.fft.rfft({frames}.real, dim=-1)"
    else:
        spec = f"torch.fft.fft({frames}, dim=-1)"
    lines.append(f"{e.out()} = torch.view_as_real({spec}).to({e.dtype(0)})")
    return lines


@rule("mel_weight_matrix")
def mel_weight_matrix(e: NodeEmit) -> str:
    """The ONNX formula through the ``_mel_weight_matrix`` helper (float64, then the output dtype)."""
    args = [e.scalar_code(0, "int"), e.scalar_code(1, "int"), e.scalar_code(2, "float"), e.scalar_code(3, "float"),
            e.scalar_code(4, "float")]
    from translator.table.dtypes import onnx_enum

    declared = onnx_enum().get(int(e.attr("output_datatype")))  # the output's dtype when inference left it open
    out = e.out_dtype(0, e.dtype_of(declared) if declared is not None else None)
    return f"{e.helper('_mel_weight_matrix')}({', '.join(args)}).to({out})"
