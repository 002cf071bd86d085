"""Runtime helpers of the generated JAX modules: each function is copied into a module
(``templates/stablehlo/module.py.j2``) only when its code calls it. Plain ``jax.numpy`` /
``jax.lax``; no opbridge import. Every name starts with an underscore, which no name sanitized
from a model does. The column's snippets call the first two as ``hlo.logistic`` and
``hlo.batch_norm_inference`` (the StableHLO ops of those names, which JAX writes as
``logistic`` and as the batch-norm arithmetic), and the third as ``DT``."""
import numpy as np
import jax
import jax.numpy as jnp
from jax import lax


def _hlo_logistic(x):
    return lax.logistic(x)


def _hlo_batch_norm_inference(x, scale, offset, mean, variance, epsilon, feature_index):
    shape = [-1 if i == feature_index else 1 for i in range(x.ndim)]
    inv = lax.rsqrt(jnp.reshape(variance, shape) + jnp.asarray(epsilon, x.dtype))
    return (x - jnp.reshape(mean, shape)) * inv * jnp.reshape(scale, shape) + jnp.reshape(offset, shape)


def _DT(d):
    """An ONNX element type (TensorProto enum or dtype name) as the NumPy dtype JAX takes."""
    names = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
             10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 14: "complex64", 15: "complex128",
             16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
             21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2"}
    name = names[int(d)] if isinstance(d, (int, np.integer)) else str(d)
    return jnp.dtype(name)


def _resize(x, roi, scales, sizes, axes, mode, ctm, nearest_mode, cubic_a, exclude_outside, extrapolation,
            policy="stretch"):
    """ONNX Resize: ``_resize_plan``'s per-axis gathers (indices and weights computed with NumPy
    when the function is traced: the shapes are static), blended in the input's dtype."""
    plan = _resize_plan(x.shape, roi, scales, sizes, axes, mode, ctm, nearest_mode, cubic_a, exclude_outside, policy)
    for k, m, taps, outside in plan:
        shape = [m if a == k else 1 for a in range(x.ndim)]
        y = None
        for idx, w in taps:
            term = jnp.take(x, idx, axis=k)
            if w is not None:
                term = term * jnp.reshape(jnp.asarray(w, x.dtype), shape)
            y = term if y is None else y + term
        if outside is not None:
            y = jnp.where(jnp.reshape(jnp.asarray(outside), shape), jnp.asarray(extrapolation, x.dtype), y)
        x = y
    return x


def _pool(x, kind, kernel, strides, dilations, begin, end, inside):
    """Max or average pooling over the spatial axes (2 on): ``begin``/``end`` pads per axis
    (``end`` includes a ceil_mode's extra window), ``inside`` per axis the (first, last) padded
    positions an average counts (its explicit pads when count_include_pad, else the input)."""
    window = (1, 1) + tuple(kernel)
    step = (1, 1) + tuple(strides)
    dil = (1, 1) + tuple(dilations)
    pads = [(0, 0), (0, 0)] + list(zip(begin, end))
    if kind == "max":
        low = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
        return lax.reduce_window(x, jnp.array(low, x.dtype), lax.max, window, step, pads, window_dilation=dil)
    total = lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, window, step, pads, window_dilation=dil)
    count = np.ones((), np.float64)
    for a, (k, s, d, b, e, (lo, hi)) in enumerate(zip(kernel, strides, dilations, begin, end, inside)):
        n = x.shape[2 + a] + b + e
        mask = ((np.arange(n) >= lo) & (np.arange(n) < hi)).astype(np.float64)
        out = total.shape[2 + a]
        per = np.array([mask[o * s + np.arange(k) * d].sum() for o in range(out)])
        count = np.multiply.outer(count, per)
    return total / jnp.asarray(count, x.dtype)


def _depthwise(x, w, b, strides, pads, dilations):
    """A depthwise convolution over static sizes (``w``: [C·m, 1, k...], output channel o reads
    input channel o // m) as the sum of its kernel's taps: each a strided slice of the padded
    input times one weight per channel, which XLA fuses into one loop (its grouped convolution
    on the CPU is a generic loop, tens of times slower)."""
    nd = x.ndim - 2
    m = w.shape[0] // x.shape[1]
    dtype = x.dtype
    if dtype in (jnp.float16, jnp.bfloat16):  # summed in float32, as the convolution accumulates
        x, w, b = x.astype(jnp.float32), w.astype(jnp.float32), None if b is None else b.astype(jnp.float32)
    if m > 1:
        x = jnp.repeat(x, m, axis=1)
    xp = jnp.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    kernel = w.shape[2:]
    out = [(xp.shape[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(nd)]
    y = None
    for pos in np.ndindex(*kernel):
        start = [0, 0] + [pos[i] * dilations[i] for i in range(nd)]
        limit = list(xp.shape[:2]) + [start[2 + i] + (out[i] - 1) * strides[i] + 1 for i in range(nd)]
        tap = lax.slice(xp, start, limit, [1, 1] + list(strides)) * jnp.reshape(w[(slice(None), 0) + pos],
                                                                               (1, -1) + (1,) * nd)
        y = tap if y is None else y + tap
    return (y if b is None else y + jnp.reshape(b, (1, -1) + (1,) * nd)).astype(dtype)


def _pool_symbolic(x, kind, kernel, strides, dilations, pads, counted):
    """``_pool`` (floor mode) over spatial sizes known only when traced (symbolic in the
    export): ``pads`` the (begin, end) per axis, or "SAME_UPPER" / "SAME_LOWER" resolved on the
    traced sizes; an average divides each window by the number of input positions it covers
    (``counted``: padded positions too, the whole kernel)."""
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if isinstance(pads, str):
        same = lax.padtype_to_pads(x.shape[2:], span, strides, "SAME")  # the odd pad at the end
        pads = [(lo, hi) if pads == "SAME_UPPER" else (hi, lo) for lo, hi in same]
    window, step, dil = (1, 1) + tuple(kernel), (1, 1) + tuple(strides), (1, 1) + tuple(dilations)
    full = [(0, 0), (0, 0)] + [tuple(p) for p in pads]
    if kind == "max":
        low = -jnp.inf if jnp.issubdtype(x.dtype, jnp.floating) else jnp.iinfo(x.dtype).min
        return lax.reduce_window(x, jnp.array(low, x.dtype), lax.max, window, step, full, window_dilation=dil)
    total = lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, window, step, full, window_dilation=dil)
    if counted:
        return total / jnp.asarray(float(np.prod(kernel)), x.dtype)
    count = lax.reduce_window(jnp.ones(x.shape[2:], x.dtype), jnp.zeros((), x.dtype), lax.add, tuple(kernel),
                              tuple(strides), [tuple(p) for p in pads], window_dilation=tuple(dilations))
    return total / count


def _cast(x, dtype, saturate):
    """ONNX Cast: to a float8 type, values past its largest finite number saturate to it
    (``saturate``); to a 4-bit integer, the integer part wraps around as NumPy's ml_dtypes
    cast does; otherwise JAX's conversion."""
    dtype = jnp.dtype(dtype)
    if dtype.name.startswith("float8") and dtype.name != "float8_e8m0fnu" and saturate:
        big = float(jnp.finfo(dtype).max)
        x = jnp.clip(x.astype(jnp.promote_types(x.dtype, jnp.float32)), -big, big)
    elif dtype.name in ("int4", "uint4") and x.dtype.name not in ("int4", "uint4", "bool"):
        lo = -8 if dtype.name == "int4" else 0
        whole = jnp.trunc(x).astype(jnp.int64) if jnp.issubdtype(x.dtype, jnp.floating) else x.astype(jnp.int64)
        x = jnp.mod(whole - lo, 16) + lo
    return lax.convert_element_type(x, dtype)


def _quantize(x, scale, zero, axis, block, dtype, saturate):
    """ONNX QuantizeLinear: round half to even of x / scale, plus the zero point, saturated
    into ``dtype`` (an integer type; a float8 type saturates to its largest finite value)."""
    s = _quant_param(jnp, scale, x, axis, block).astype(jnp.float32)
    dtype = jnp.dtype(dtype)
    z = 0 if zero is None else _quant_param(jnp, zero, x, axis, block).astype(jnp.float32)
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        y = lax.round(x.astype(jnp.float32) / s, lax.RoundingMethod.TO_NEAREST_EVEN) + z
        return lax.clamp(jnp.float32(info.min), y, jnp.float32(info.max)).astype(dtype)
    y = x.astype(jnp.float32) / s + z
    if saturate and dtype.name != "float8_e8m0fnu":
        big = float(jnp.finfo(dtype).max)
        y = jnp.clip(y, -big, big)
    return y.astype(dtype)
