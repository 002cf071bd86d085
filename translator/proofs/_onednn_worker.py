"""The oneDNN prover's worker: runs one-op programs in PyTorch or TensorFlow (both carry oneDNN)
in a process started with ONEDNN_VERBOSE=1, so the primitives oneDNN executes are printed on
stdout between the markers this worker writes.

Protocol (one request per stdin line, JSON): {"id", "op", "attrs", "inputs": npz path, "out": npz path}.
Answer on stdout: ``@@BEGIN <id>``, whatever oneDNN prints, ``@@END <id> ok`` or ``@@END <id> err <reason>``.
Each recipe calls the framework entry point that lands in the oneDNN primitive named in the op's cell.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import traceback

import numpy as np

_libc = ctypes.CDLL(None)


def _flush() -> None:
    sys.stdout.flush()
    _libc.fflush(None)


# ----------------------------------------------------------------------------- PyTorch (mkldnn tensors / ops)
def _t(x):
    import torch

    return torch.from_numpy(np.ascontiguousarray(x))


def _mk(x):
    return _t(x).to_mkldnn()


def _dense(y):
    return y.to_dense().numpy()


def _pads2(pads, nd=2):
    pads = list(pads or [0] * (2 * nd))
    if pads[:nd] != pads[nd:]:
        raise ValueError(f"asymmetric pads {pads}: the PyTorch entry point takes symmetric padding only")
    return pads[:nd]


def relu(x, **a):
    import torch

    return [_dense(torch.relu(_mk(x)))]


def sigmoid(x, **a):
    import torch

    return [_dense(torch.sigmoid(_mk(x)))]


def tanh(x, **a):
    import torch

    return [_dense(torch.tanh(_mk(x)))]


def gelu(x, approximate="none", **a):
    import torch.nn.functional as F

    return [_dense(F.gelu(_mk(x), approximate=approximate))]


def softmax(x, axis=-1, **a):
    import torch

    return [_dense(torch.softmax(_mk(x), int(axis)))]


def add(a_, b_, **a):
    if np.shape(a_) != np.shape(b_):
        raise ValueError("the mkldnn add takes equal shapes only")
    return [_dense(_mk(a_) + _mk(b_))]


def mul(a_, b_, **a):
    if np.shape(a_) != np.shape(b_):
        raise ValueError("the mkldnn mul takes equal shapes only")
    return [_dense(_mk(a_) * _mk(b_))]


def sum(*xs, **a):  # noqa: A001 - the op's id
    acc = _mk(xs[0])
    for x in xs[1:]:
        acc = acc + _mk(x)
    return [_dense(acc)]


def max_pool(x, kernel_shape, strides=None, pads=None, dilations=None, ceil_mode=0, auto_pad="NOTSET", storage_order=0, **a):
    import torch.nn.functional as F

    nd = len(kernel_shape)
    if auto_pad not in ("NOTSET", "VALID") or nd != 2:
        raise ValueError("2-D explicit padding only")
    y = F.max_pool2d(_mk(x), list(kernel_shape), list(strides or [1] * nd), _pads2(pads, nd),
                     list(dilations or [1] * nd), bool(ceil_mode))
    return [_dense(y)]


def average_pool(x, kernel_shape, strides=None, pads=None, ceil_mode=0, count_include_pad=0, auto_pad="NOTSET", dilations=None, **a):
    import torch.nn.functional as F

    nd = len(kernel_shape)
    if auto_pad not in ("NOTSET", "VALID") or nd != 2 or any(d != 1 for d in (dilations or [1])):
        raise ValueError("2-D, undilated, explicit padding only")
    y = F.avg_pool2d(_mk(x), list(kernel_shape), list(strides or [1] * nd), _pads2(pads, nd), bool(ceil_mode), bool(count_include_pad))
    return [_dense(y)]


def _as4d(x):
    x = np.asarray(x)
    return x.reshape(x.shape[:2] + (int(np.prod(x.shape[2:])), 1)) if x.ndim != 4 else x


def global_average_pool(x, **a):
    import torch.nn.functional as F

    y = _dense(F.adaptive_avg_pool2d(_mk(_as4d(x)), 1))
    return [y.reshape(x.shape[:2] + (1,) * (x.ndim - 2))]


def global_max_pool(x, **a):
    import torch.nn.functional as F

    x4 = _as4d(x)
    y = _dense(F.max_pool2d(_mk(x4), list(x4.shape[2:])))
    return [y.reshape(x.shape[:2] + (1,) * (x.ndim - 2))]


def batch_normalization(x, scale, bias, mean, var, epsilon=1e-5, training_mode=0, momentum=0.9, **a):
    import torch.nn.functional as F

    if training_mode:
        raise ValueError("inference mode only")
    y = F.batch_norm(_mk(x), _t(mean), _t(var), _t(scale), _t(bias), False, 0.0, float(epsilon))
    return [_dense(y)]


def identity(x, **a):
    return [_dense(_mk(x))]


def gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0, **a):
    import torch

    if alpha != 1.0 or beta != 1.0:
        raise ValueError("alpha/beta other than 1 are not inner_product parameters")
    A = A.T if transA else A
    W = B if transB else B.T  # inner_product weights are (N, K)
    if C is not None and np.ndim(C) > 1 and not (np.ndim(C) == 2 and np.shape(C)[0] == 1):
        raise ValueError("a 2-D C is not an inner_product bias")
    bias = None if C is None else _mk(np.broadcast_to(np.asarray(C).reshape(-1), (W.shape[0],)).copy())
    return [_dense(torch.ops.aten.mkldnn_linear(_mk(A), _mk(W), bias))]


def conv(X, W, B=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None, strides=None, **a):
    import torch

    nd = X.ndim - 2
    if auto_pad not in ("NOTSET", "VALID"):
        raise ValueError("explicit padding only")
    y = torch.ops.aten.mkldnn_convolution(_t(X), _t(W), None if B is None else _t(B), _pads2(pads, nd),
                                          list(strides or [1] * nd), list(dilations or [1] * nd), int(group))
    return [y.numpy()]


def conv_transpose(X, W, B=None, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, output_padding=None,
                   output_shape=None, pads=None, strides=None, **a):
    import torch

    nd = X.ndim - 2
    if auto_pad not in ("NOTSET", "VALID") or output_shape:
        raise ValueError("explicit padding only")
    y = torch.ops.mkldnn._convolution_transpose_pointwise(
        _t(X), _t(W), None if B is None else _t(B), _pads2(pads, nd), list(output_padding or [0] * nd),
        list(strides or [1] * nd), list(dilations or [1] * nd), int(group), "none", [], "")
    return [y.numpy()]


def prelu(x, slope, **a):
    import torch

    s = np.asarray(slope)
    s = s.reshape((1,) * (x.ndim - s.ndim) + s.shape)
    return [_dense(torch.ops.aten._prelu_kernel(_mk(x), _mk(s)))]


def transpose(x, perm=None, **a):
    """Axis swaps on the mkldnn tensor: each ``_mkldnn_transpose`` is a oneDNN reorder between
    permuted memory descriptors (the data moves there)."""
    import torch

    p = list(perm) if perm is not None else list(range(x.ndim))[::-1]
    t, cur = _mk(x), list(range(x.ndim))
    for i, want in enumerate(p):
        j = cur.index(want)
        if j != i:
            t = torch.ops.aten._mkldnn_transpose(t, i, j)
            cur[i], cur[j] = cur[j], cur[i]
    return [_dense(t)]


def mean(*xs, **a):
    acc = _mk(xs[0])
    for x in xs[1:]:
        acc = acc + _mk(x)  # sum primitive
    k = np.full(np.shape(xs[0]), 1.0 / len(xs), dtype=np.asarray(xs[0]).dtype)
    return [_dense(acc * _mk(k))]  # binary_mul by 1/n


def scaled_tanh(x, alpha=1.0, beta=1.0, **a):
    import torch

    dt = np.asarray(x).dtype
    t = torch.tanh(_mk(x) * _mk(np.full(x.shape, beta, dt)))
    return [_dense(t * _mk(np.full(x.shape, alpha, dt)))]


def swiglu(A, B, alpha=1.0, **a):
    import torch

    dt = np.asarray(A).dtype
    g = torch.sigmoid(_mk(A) * _mk(np.full(A.shape, alpha, dt)))
    return [_dense(g * _mk(A) * _mk(B))]


def instance_normalization(x, scale, bias, epsilon=1e-5, **a):
    import torch.nn.functional as F

    n, c = x.shape[:2]
    xr = np.ascontiguousarray(x.reshape((1, n * c) + x.shape[2:] + ((1,) if x.ndim == 3 else ())))
    y = F.batch_norm(_mk(xr), None, None, _t(np.tile(scale, n)), _t(np.tile(bias, n)), True, 0.0, float(epsilon))
    return [_dense(y).reshape(x.shape)]


def mean_variance_normalization(x, axes=(0, 2, 3), **a):
    import torch.nn.functional as F

    if list(axes) != [0] + list(range(2, x.ndim)):
        raise ValueError("the batch_normalization statistics run over every axis but the channel axis")
    # (x - mean) / (std + 1e-9) equals batch normalization with eps 0 away from std ~ 1e-9
    c = x.shape[1]
    one, zero = np.ones(c, x.dtype), np.zeros(c, x.dtype)  # ideep's batch norm wants scale/shift: identity ones
    y = F.batch_norm(_mk(x), None, None, _t(one), _t(zero), True, 0.0, 1e-12)  # eps must be > 0 in training mode
    return [_dense(y)]


def lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, hidden_size=None,
         direction="forward", layout=0, activations=None, clip=None, input_forget=0, **a):
    import torch

    if direction != "forward" or layout or activations or clip or input_forget or P is not None \
            or sequence_lens is not None:
        raise ValueError("forward, default activations, no peepholes/clip/lengths only")
    H = int(hidden_size or R.shape[-1])
    order = np.concatenate([np.arange(k * H, (k + 1) * H) for k in (0, 2, 3, 1)])  # ONNX iofc -> torch ifco
    m = torch.nn.LSTM(X.shape[-1], H)
    with torch.no_grad():
        m.weight_ih_l0.copy_(_t(W[0][order]))
        m.weight_hh_l0.copy_(_t(R[0][order]))
        b = np.zeros((8 * H,), X.dtype) if B is None else B[0]
        m.bias_ih_l0.copy_(_t(b[:4 * H][order]))
        m.bias_hh_l0.copy_(_t(b[4 * H:][order]))
        h0 = _t(np.zeros((1, X.shape[1], H), X.dtype) if initial_h is None else initial_h)
        c0 = _t(np.zeros((1, X.shape[1], H), X.dtype) if initial_c is None else initial_c)
        y, (h, c) = m(_t(X), (h0, c0))
    return [y.numpy()[:, None], h.numpy(), c.numpy()]


# ----------------------------------------------------------------------------- TensorFlow (its oneDNN build)
def _tf():
    import tensorflow as tf

    return tf


def _tf_run(fn, *xs):
    tf = _tf()
    spec = [tf.TensorSpec(np.shape(x), tf.as_dtype(np.asarray(x).dtype)) for x in xs]
    f = tf.function(fn, input_signature=spec)  # graph mode: TF's oneDNN rewrites/fusions apply
    y = f(*[tf.constant(x) for x in xs])
    return [np.asarray(v) for v in (y if isinstance(y, (list, tuple)) else [y])]


def matmul(a_, b_, **a):
    if a_.ndim < 3 or b_.ndim < 3:
        raise ValueError("2-D matmul goes to TF's sgemm path, not the matmul primitive")
    return _tf_run(lambda u, v: _tf().linalg.matmul(u, v), a_, b_)


def einsum(*xs, equation, **a):
    return _tf_run(lambda *t: _tf().einsum(equation, *t), *xs)


def swish(x, alpha=1.0, **a):
    if alpha != 1.0:
        raise ValueError("TF fuses only x*sigmoid(x) into eltwise_swish")
    return _tf_run(lambda t: t * _tf().sigmoid(t), x)


def mish(x, **a):
    return _tf_run(lambda t: t * _tf().tanh(_tf().nn.softplus(t)), x)


def depth_to_space(x, blocksize, mode="DCR", **a):
    n, c, h, w = x.shape
    b = int(blocksize)
    tf = _tf()
    if mode == "DCR":
        f = lambda t: tf.reshape(tf.transpose(tf.reshape(t, [n, b, b, c // b // b, h, w]), [0, 3, 4, 1, 5, 2]),
                                 [n, c // b // b, h * b, w * b])
    else:
        f = lambda t: tf.reshape(tf.transpose(tf.reshape(t, [n, c // b // b, b, b, h, w]), [0, 1, 4, 2, 5, 3]),
                                 [n, c // b // b, h * b, w * b])
    return _tf_run(f, x)


def space_to_depth(x, blocksize, **a):
    n, c, h, w = x.shape
    b = int(blocksize)
    tf = _tf()
    return _tf_run(lambda t: tf.reshape(tf.transpose(tf.reshape(t, [n, c, h // b, b, w // b, b]), [0, 3, 5, 1, 2, 4]),
                                        [n, c * b * b, h // b, w // b]), x)


def affine_grid(theta, size, align_corners=0, **a):
    n, _, h, w = [int(v) for v in np.asarray(size).reshape(-1)]
    if np.asarray(size).size != 4:
        raise ValueError("2-D grids only")

    def lin(k):
        return np.linspace(-1.0, 1.0, k) if align_corners else (2.0 * np.arange(k) + 1.0) / k - 1.0
    ys, xs = np.meshgrid(lin(h), lin(w), indexing="ij")
    base = np.stack([xs.ravel(), ys.ravel(), np.ones(h * w)], axis=-1).astype(theta.dtype)  # the static base grid
    base = np.ascontiguousarray(np.broadcast_to(base, (n, h * w, 3)))
    tf = _tf()
    g = _tf_run(lambda b_, t: tf.linalg.matmul(b_, t, transpose_b=True), base, np.ascontiguousarray(theta))[0]
    return [g.reshape(n, h, w, 2)]


RECIPES = {f.__name__: f for f in (relu, sigmoid, tanh, gelu, softmax, add, mul, sum, max_pool, average_pool,
                                   global_average_pool, global_max_pool, batch_normalization, identity, gemm, conv,
                                   conv_transpose, prelu, transpose, matmul, einsum, swish, mish, mean, scaled_tanh, swiglu,
                                   instance_normalization, mean_variance_normalization, lstm, depth_to_space,
                                   space_to_depth, affine_grid)}
#: which framework's oneDNN each recipe runs
VIA = {k: ("tensorflow" if k in ("matmul", "einsum", "swish", "mish", "depth_to_space", "space_to_depth",
                                  "affine_grid") else "pytorch") for k in RECIPES}


def main() -> None:
    import torch  # noqa: F401 - loaded once, before the first request

    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        rid = req["id"]
        out.write(f"@@BEGIN {rid}\n")
        _flush()
        try:
            data = np.load(req["inputs"], allow_pickle=False)
            xs = [None if f"a{i}" not in data else data[f"a{i}"] for i in range(req["n"])]
            while xs and xs[-1] is None:
                xs.pop()
            ys = RECIPES[req["op"]](*xs, **req["attrs"])
            np.savez(req["out"], **{f"y{i}": np.asarray(y) for i, y in enumerate(ys)})
            status = "ok"
        except Exception as exc:  # noqa: BLE001 - the reason goes back to the prover
            status = "err " + (f"{type(exc).__name__}: {exc}".replace("\n", " ")[:400] or traceback.format_exc(limit=1))
        _flush()
        out.write(f"@@END {rid} {status}\n")
        _flush()


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
