"""Signal processing references: windows, DFT, STFT, mel weight matrix."""
from __future__ import annotations

import numpy as np

from . import reference
from .elementwise import narrow, onnx_dtype


def _cosine_window(size, periodic, output_datatype, a0, a1, a2):
    """a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1."""
    size = int(np.ravel(size)[0])
    denom = size if periodic else size - 1
    angle = 2.0 * np.pi * np.arange(size) / denom
    w = a0 - a1 * np.cos(angle) + a2 * np.cos(2.0 * angle)
    return narrow(w, onnx_dtype(output_datatype))


@reference("hann_window")
def hann_window(size, output_datatype=1, periodic=1):
    return _cosine_window(size, periodic, output_datatype, 0.5, 0.5, 0.0)


@reference("hamming_window")
def hamming_window(size, output_datatype=1, periodic=1):
    return _cosine_window(size, periodic, output_datatype, 25.0 / 46.0, 21.0 / 46.0, 0.0)


@reference("blackman_window")
def blackman_window(size, output_datatype=1, periodic=1):
    return _cosine_window(size, periodic, output_datatype, 0.42, 0.5, 0.08)


def _complex(x):
    """[..., 1] (real) or [..., 2] (real, imag) -> a complex128 array without the last dim."""
    x = np.asarray(x).astype(np.float64)
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


def _pairs(c, dt):
    """complex array -> [..., 2] (real, imag) in dtype ``dt``."""
    return narrow(np.stack([c.real, c.imag], axis=-1), dt)


@reference("dft")
def dft(input, dft_length=None, axis=None, inverse=0, onesided=0):  # noqa: A002
    """DFT along ``axis`` (default -2, counted on the input including its last [re, im] dim).

    onesided=0: full complex (inverse: divided by n). onesided=1, inverse=0: RFFT of the
    real part (n // 2 + 1 bins). onesided=1, inverse=1: IRFFT, real output [..., 1], whose
    default length is 2 * (dim - 1)."""
    x = np.asarray(input)
    ax = (-2 if axis is None else int(np.ravel(axis)[0])) % x.ndim
    c = _complex(x)
    dim = c.shape[ax]
    if dft_length is not None:
        n = int(np.ravel(dft_length)[0])
    else:
        n = 2 * (dim - 1) if (inverse and onesided) else dim
    if inverse and onesided:
        return narrow(np.fft.irfft(c, n=n, axis=ax)[..., np.newaxis], x.dtype)
    if inverse:
        return _pairs(np.fft.ifft(c, n=n, axis=ax), x.dtype)
    if onesided:
        return _pairs(np.fft.rfft(c.real, n=n, axis=ax), x.dtype)
    return _pairs(np.fft.fft(c, n=n, axis=ax), x.dtype)


@reference("stft")
def stft(signal, frame_step, window=None, frame_length=None, onesided=1):
    """Frames of ``frame_length`` every ``frame_step`` samples, times ``window``, DFT of each:
    output [batch, frames, bins, 2] with bins = frame_length // 2 + 1 when onesided."""
    x = np.asarray(signal)
    c = _complex(x)  # [batch, length]
    step = int(np.ravel(frame_step)[0])
    if frame_length is not None:
        n = int(np.ravel(frame_length)[0])
    else:
        n = np.shape(window)[0] if window is not None else c.shape[1]
    w = np.ones(n) if window is None else np.asarray(window).astype(np.float64)
    count = (c.shape[1] - n) // step + 1
    frames = np.stack([c[:, f * step:f * step + n] * w for f in range(count)], axis=1)
    real_input = x.shape[-1] == 1 and np.isrealobj(w)
    spectrum = np.fft.rfft(frames.real, axis=-1) if (onesided and real_input) else np.fft.fft(frames, axis=-1)
    return _pairs(spectrum, x.dtype)


@reference("mel_weight_matrix")
def mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz,
                      output_datatype=1):
    """[dft_length // 2 + 1, num_mel_bins] triangular filters with peak 1.

    Band edge k (k = 0 .. num_mel_bins + 1) sits at mel(lower) + k * step on the mel scale
    mel(f) = 2595 log10(1 + f / 700), with step = (mel(upper) - mel(lower)) / (num_mel_bins + 2)
    (the divisor used by the ONNX test data and onnxruntime, so the last edge stays below
    ``upper_edge_hertz``), snapped down to a DFT bin: floor((dft_length + 1) * f / sample_rate).
    Filter i rises linearly from edge i to edge i + 1 (value 1) and falls to 0 at edge i + 2."""
    mels, n = int(num_mel_bins), int(dft_length)
    rate = float(sample_rate)
    lo = 2595.0 * np.log10(1.0 + float(lower_edge_hertz) / 700.0)
    hi = 2595.0 * np.log10(1.0 + float(upper_edge_hertz) / 700.0)
    step = (hi - lo) / (mels + 2)
    hz = 700.0 * (10.0 ** ((lo + step * np.arange(mels + 2)) / 2595.0) - 1.0)
    edges = np.floor((n + 1) * hz / rate).astype(np.int64)
    out = np.zeros((n // 2 + 1, mels))
    for i in range(mels):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        for j in range(left, min(right, out.shape[0] - 1) + 1):
            if j < center:
                out[j, i] = (j - left) / (center - left)
            elif j == center:
                out[j, i] = 1.0
            else:
                out[j, i] = (right - j) / (right - center)
    return narrow(out, onnx_dtype(output_datatype))
