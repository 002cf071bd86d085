"""onnxruntime's ``com.microsoft`` contrib ops: fused and quantized forms of standard ops.

Each is written over the standard references (``conv``, ``lstm``, ``layer_normalization``,
the pools, ``dequantize_linear``/``quantize_linear``) with the contrib op's own semantics,
as its ContribOperators.md entry and onnxruntime's CPU kernel define them:

* the fused activations compute in float64 and round once to the input dtype;
* the ``qlinear_*`` ops dequantize to float32 (``(x - zero_point) * scale``), compute in
  float32 and requantize with ``quantize_linear`` (round half to even, saturate): the
  table's decompositions, so a target agrees to the bit; onnxruntime's integer kernels
  may round a half-way value the other way (one quantization step);
* ``dynamic_quantize_lstm`` is the float LSTM of the dequantized weights; onnxruntime also
  quantizes X and the hidden state to uint8 at run time, a rounding this reference does not
  model (its outputs differ by ~1e-3 on unit-scale data).
"""
from __future__ import annotations

import numpy as np

from . import reference
from .activation import gelu, hard_sigmoid, leaky_relu, relu, sigmoid, swish
from .conv import conv
from .elementwise import float_map, narrow
from .normalization import layer_normalization
from .pool import average_pool, global_average_pool
from .quantize import dequantize_linear, quantize_linear
from .rnn import lstm

_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def _conv_attrs(attrs: dict) -> dict:
    return {k: v for k, v in attrs.items() if k in _CONV_ATTRS}


# ----------------------------------------------------------------------------- FusedConv
@reference("conv_relu")
def conv_relu(X, W, B=None, **attrs):
    return relu(conv(X, W, B, **_conv_attrs(attrs)))


@reference("conv_tanh")
def conv_tanh(X, W, B=None, **attrs):
    return float_map(np.tanh, conv(X, W, B, **_conv_attrs(attrs)))


@reference("conv_sigmoid")
def conv_sigmoid(X, W, B=None, **attrs):
    return sigmoid(conv(X, W, B, **_conv_attrs(attrs)))


@reference("conv_leaky_relu")
def conv_leaky_relu(X, W, B=None, alpha=0.01, **attrs):
    return leaky_relu(conv(X, W, B, **_conv_attrs(attrs)), alpha)


@reference("conv_clip")
def conv_clip(X, W, B=None, min=None, max=None, **attrs):  # noqa: A002 - the attribute names
    y = conv(X, W, B, **_conv_attrs(attrs))
    return float_map(lambda a: np.minimum(np.maximum(a, min), max), y)


@reference("conv_hard_sigmoid")
def conv_hard_sigmoid(X, W, B=None, alpha=0.2, beta=0.5, **attrs):
    return hard_sigmoid(conv(X, W, B, **_conv_attrs(attrs)), alpha, beta)


# ----------------------------------------------------------------------------- transformer fusions
@reference("scaled_matmul")
def scaled_matmul(A, B, alpha=1.0):
    """alpha * (A @ B), numpy.matmul broadcasting, one rounding to the input dtype."""
    return float_map(lambda a, b: alpha * np.matmul(a, b), A, B)


@reference("gelu_tanh")
def gelu_tanh(X):
    return gelu(X, approximate="tanh")


@reference("quick_gelu")
def quick_gelu(X, alpha=1.702):
    return swish(X, alpha)


@reference("bias_gelu")
def bias_gelu(A, B):
    """gelu(A + B) (erf form); the sum is rounded to the input dtype first, as a separate Add."""
    return gelu(narrow(np.asarray(A) + np.asarray(B), np.asarray(A).dtype))


@reference("bias_residual_add")
def bias_residual_add(X, bias, skip):
    dt = np.asarray(X).dtype
    return narrow(narrow(np.asarray(X) + np.asarray(bias), dt) + np.asarray(skip), dt)


@reference("skip_layer_normalization")
def skip_layer_normalization(input, skip, gamma, beta=None, epsilon=1e-12):  # noqa: A002 - the port name
    """(layer_norm(input + skip) over the last axis, mean, inv_std_var, input + skip)."""
    x = np.asarray(input)
    s = narrow(x + np.asarray(skip), x.dtype)
    y, mean, inv_std = layer_normalization(s, gamma, beta, axis=-1, epsilon=epsilon)
    return y, mean, inv_std, s


@reference("skip_rms_normalization")
def skip_rms_normalization(input, skip, gamma, epsilon=1e-12):  # noqa: A002 - the port name
    """(rms_norm(input + skip) * gamma over the last axis, no mean, inv_std_var, input + skip)."""
    x = np.asarray(input)
    s = narrow(x + np.asarray(skip), x.dtype)
    a = s.astype(np.float64)
    inv_std = 1.0 / np.sqrt((a * a).mean(axis=-1, keepdims=True) + epsilon)
    return narrow(a * inv_std * np.asarray(gamma).astype(np.float64), x.dtype), None, narrow(inv_std, np.float32), s


# ----------------------------------------------------------------------------- quantized
@reference("matmul_integer_to_float")
def matmul_integer_to_float(A, B, a_scale, b_scale, a_zero_point=None, b_zero_point=None):
    """dequantize(A) @ dequantize(B): per tensor, or per column (the last axis) of each."""
    a = dequantize_linear(A, a_scale, a_zero_point, axis=-1)
    b = dequantize_linear(B, b_scale, b_zero_point, axis=-1)
    return narrow(np.matmul(a, b), a.dtype)


def _requantized(fn, y_scale, y_zero_point, *xs):
    """quantize_linear(fn(dequantized xs)) with float32 arithmetic, as the decompositions."""
    return quantize_linear(narrow(fn(*xs), np.float32), y_scale, y_zero_point)


@reference("qlinear_add")
def qlinear_add(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point=None):
    a, b = dequantize_linear(A, A_scale, A_zero_point), dequantize_linear(B, B_scale, B_zero_point)
    return _requantized(np.add, C_scale, _zp(C_zero_point, A), a, b)


@reference("qlinear_mul")
def qlinear_mul(A, A_scale, A_zero_point, B, B_scale, B_zero_point, C_scale, C_zero_point=None):
    a, b = dequantize_linear(A, A_scale, A_zero_point), dequantize_linear(B, B_scale, B_zero_point)
    return _requantized(np.multiply, C_scale, _zp(C_zero_point, A), a, b)


@reference("qlinear_sigmoid")
def qlinear_sigmoid(X, X_scale, X_zero_point=None, Y_scale=None, Y_zero_point=None):
    return quantize_linear(sigmoid(dequantize_linear(X, X_scale, X_zero_point)), Y_scale, _zp(Y_zero_point, X))


@reference("qlinear_leaky_relu")
def qlinear_leaky_relu(X, X_scale, X_zero_point=None, Y_scale=None, Y_zero_point=None, alpha=0.01):
    return quantize_linear(leaky_relu(dequantize_linear(X, X_scale, X_zero_point), alpha), Y_scale,
                           _zp(Y_zero_point, X))


@reference("qlinear_average_pool")
def qlinear_average_pool(X, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None, channels_last=0,
                         **attrs):
    if channels_last:
        raise ValueError("qlinear_average_pool: channels_last=1 (NHWC) is not supported")
    y = average_pool(dequantize_linear(X, x_scale, x_zero_point), **attrs)
    return quantize_linear(y, y_scale, _zp(y_zero_point, X))


@reference("qlinear_global_average_pool")
def qlinear_global_average_pool(X, x_scale, x_zero_point, y_scale, y_zero_point, channels_last=0):
    if channels_last:
        raise ValueError("qlinear_global_average_pool: channels_last=1 (NHWC) is not supported")
    y = global_average_pool(dequantize_linear(X, x_scale, x_zero_point))
    return quantize_linear(y, y_scale, y_zero_point)


@reference("qlinear_concat")
def qlinear_concat(Y_scale, Y_zero_point, *inputs, axis):
    """concat of the (tensor, scale, zero point) triples, requantized to Y's scale/zero point."""
    if len(inputs) % 3:
        raise ValueError("qlinear_concat: inputs come in (tensor, scale, zero point) triples")
    parts = [dequantize_linear(inputs[i], inputs[i + 1], inputs[i + 2]) for i in range(0, len(inputs), 3)]
    return quantize_linear(np.concatenate(parts, axis=axis), Y_scale, Y_zero_point)


def _zp(zero_point, like):
    """An omitted output zero point: 0 of the quantized input's dtype (not quantize_linear's uint8)."""
    return np.zeros((), np.asarray(like).dtype) if zero_point is None else zero_point


@reference("dynamic_quantize_lstm")
def dynamic_quantize_lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None,
                          W_scale=None, W_zero_point=None, R_scale=None, R_zero_point=None, **attrs):
    """onnxruntime's DynamicQuantizeLSTM as it computes: W, R dequantized ((q - zero_point) *
    scale, per direction [D] or per gate column [D, 4*hidden], stored [D, input, 4*hidden]);
    X quantized to uint8 once over the whole tensor, and the hidden state over the whole
    [batch, hidden] matrix before every step (``dynamic_quantize_linear``'s range and
    rounding: onnxruntime's sequential path; split over threads it quantizes per chunk of
    rows, so the check runs it with one thread), each product taken on the dequantized values
    (what its integer GEMM scales back to). Float32; gates i, o, f, c as ONNX LSTM."""
    if attrs.get("input_forget") or attrs.get("clip") is not None or attrs.get("activations") \
            or attrs.get("activation_alpha") or attrs.get("activation_beta") or int(attrs.get("layout", 0) or 0):
        raise ValueError("dynamic_quantize_lstm: only the default activations, no clip, input_forget=0, layout=0")
    X = np.asarray(X, np.float32)
    T, batch = X.shape[:2]
    if sequence_lens is not None and not np.all(np.asarray(sequence_lens) == T):
        raise ValueError("dynamic_quantize_lstm: sequence_lens shorter than the sequence is not supported")

    def weights(q, scale, zp):
        shape = (np.asarray(q).shape[0], 1, -1)
        return ((np.asarray(q).astype(np.float32) - np.asarray(zp).astype(np.float32).reshape(shape))
                * np.asarray(scale, np.float32).reshape(shape))  # [D, rows, 4H]

    Wd, Rd = weights(W, W_scale, W_zero_point), weights(R, R_scale, R_zero_point)
    D, H = Rd.shape[0], Rd.shape[1]
    Bd = np.zeros((D, 8 * H), np.float32) if B is None else np.asarray(B, np.float32)
    Pd = None if P is None else np.asarray(P, np.float32)
    sig = lambda v: (1.0 / (1.0 + np.exp(-v))).astype(np.float32)  # noqa: E731
    Xq = _dq(X)
    direction = attrs.get("direction", "forward")
    Y = np.zeros((T, D, batch, H), np.float32)
    hs, cs = np.zeros((D, batch, H), np.float32), np.zeros((D, batch, H), np.float32)
    for d in range(D):
        h = np.zeros((batch, H), np.float32) if initial_h is None else np.asarray(initial_h, np.float32)[d]
        c = np.zeros((batch, H), np.float32) if initial_c is None else np.asarray(initial_c, np.float32)[d]
        bias = Bd[d, :4 * H] + Bd[d, 4 * H:]
        backward = direction == "reverse" or (direction == "bidirectional" and d == 1)
        for t in (range(T - 1, -1, -1) if backward else range(T)):
            g = Xq[t] @ Wd[d] + _dq(h) @ Rd[d] + bias
            gi, go, gf, gc = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
            if Pd is not None:
                gi, gf = gi + Pd[d, :H] * c, gf + Pd[d, 2 * H:] * c
            c = sig(gf) * c + sig(gi) * np.tanh(gc)
            o = sig(go + (Pd[d, H:2 * H] * c if Pd is not None else 0))
            h = (o * np.tanh(c)).astype(np.float32)
            Y[t, d] = h
        hs[d], cs[d] = h, c
    return Y, hs, cs


#: (rng, eps) while the check measures the rounding spread (``run.check.rounding_spread``): the
#: run-time quantizations inside an op (DynamicQuantizeLSTM's hidden state, every step) are
#: jittered like the graph's own rounding ops; None otherwise
JITTER: list = [None]


def _dq(x):
    """``x`` quantized and dequantized as ``dynamic_quantize_linear`` does it (uint8 over the
    range [min(0, x), max(0, x)], round half to even)."""
    if JITTER[0] is not None and x.size:
        rng, eps = JITTER[0]
        x = (x * (1.0 + eps * rng.uniform(-1.0, 1.0, x.shape))).astype(np.float32)
    lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    scale = np.float32((hi - lo) / np.float32(255))
    if scale == 0:
        return np.zeros_like(x, np.float32)
    zp = np.clip(np.rint(-lo / scale), 0, 255)
    return ((np.clip(np.rint(x / scale) + zp, 0, 255) - zp) * scale).astype(np.float32)
