"""Per-builtin handlers of the TFLite frontend: options → IR attributes, layout, fused activations.

``HANDLERS[builtin](ctx, op) -> [Value per output]``; ``IR_OPS[builtin]`` is the IR op the
handler emits for it, which must be one of the builtin's entries in
``load_tables().reverse_index("tflite")`` (``check_handlers``; the frontend refuses a builtin
that has no entry). Handlers compute on float views of quantized tensors (``ctx.input``);
the frontend quantizes their results. Channels-last ops transpose into NCHW and back
(``ctx.nchw``/``ctx.nhwc``); the pipeline's ``transposes`` pass cancels the pairs.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir.graph import Value
from . import blocks, tflite_hybrid

Handler = Callable[[Any, Any], list]
HANDLERS: dict[str, Handler] = {}
IR_OPS: dict[str, str] = {}


def handles(*builtins: str, ir: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for b in builtins:
            HANDLERS[b] = fn
            IR_OPS[b] = ir
        return fn

    return deco


def check_handlers(tables: Any = None) -> list[str]:
    """Handlers whose builtin/IR op pair is not in the table's reverse index (should be none)."""
    from ..table.loader import load_tables

    from .tflite_custom import check_custom

    tables = tables or load_tables()
    rev = tables.reverse_index("tflite")
    return [f"{b} → {ir}" for b, ir in sorted(IR_OPS.items()) if ir not in [o for o, _ in rev.get(b, [])]] + \
        check_custom(tables)


def _opts(op: Any) -> Any:
    return op.builtinOptions


def _opt(op: Any, name: str, default: Any = None) -> Any:
    o = op.builtinOptions
    v = getattr(o, name, None) if o is not None else None
    return default if v is None else v


def _ins(ctx: Any, op: Any) -> list[Value | None]:
    return [ctx.input(int(i)) for i in op.inputs]


# ----------------------------------------------------------------------------- elementwise
_BINARY = {"ADD": "add", "SUB": "sub", "MUL": "mul", "DIV": "div", "POW": "pow", "MAXIMUM": "max", "MINIMUM": "min",
           "FLOOR_MOD": "floor_mod", "EQUAL": "equal", "NOT_EQUAL": "not_equal", "GREATER": "greater",
           "GREATER_EQUAL": "greater_equal", "LESS": "less", "LESS_EQUAL": "less_equal", "LOGICAL_AND": "logical_and",
           "LOGICAL_OR": "logical_or", "BITWISE_XOR": "bitwise_xor", "RIGHT_SHIFT": "bit_shift_right"}


def _binary(ctx: Any, op: Any) -> list:
    a, b = _ins(ctx, op)[:2]
    y = ctx.emit(IR_OPS[ctx.builtin], [a, b])[0]
    return [ctx.activation(y, _opt(op, "fusedActivationFunction", 0))]


for _b, _ir in _BINARY.items():
    handles(_b, ir=_ir)(_binary)

_UNARY = {"ABS": "abs", "CEIL": "ceil", "COS": "cos", "EXP": "exp", "FLOOR": "floor", "HARD_SWISH": "hard_swish",
          "LOG": "log", "LOGICAL_NOT": "logical_not", "LOGISTIC": "sigmoid", "NEG": "neg", "RELU": "relu",
          "SIGN": "sign", "SIN": "sin", "SQRT": "sqrt", "TANH": "tanh", "ROUND": "round", "ELU": "elu"}


def _unary(ctx: Any, op: Any) -> list:
    return ctx.emit(IR_OPS[ctx.builtin], _ins(ctx, op)[:1])


for _b, _ir in _UNARY.items():
    handles(_b, ir=_ir)(_unary)


@handles("LEAKY_RELU", ir="leaky_relu")
def _leaky_relu(ctx: Any, op: Any) -> list:
    return ctx.emit("leaky_relu", _ins(ctx, op)[:1], {"alpha": float(_opt(op, "alpha", 0.2))})


@handles("GELU", ir="gelu")
def _gelu(ctx: Any, op: Any) -> list:
    return ctx.emit("gelu", _ins(ctx, op)[:1], {"approximate": "tanh" if _opt(op, "approximate", False) else "none"})


@handles("RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", ir="clip")
def _relu_n(ctx: Any, op: Any) -> list:
    x = _ins(ctx, op)[0]
    lo, hi = {"RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}[ctx.builtin]
    dt = np.dtype(x.type.dtype or "float32")
    return ctx.emit("clip", [x, ctx.const(np.asarray(lo, dt), "lo"), ctx.const(np.asarray(hi, dt), "hi")])


@handles("PRELU", ir="prelu")
def _prelu(ctx: Any, op: Any) -> list:
    return ctx.emit("prelu", _ins(ctx, op)[:2])


@handles("SQUARE", ir="mul")
def _square(ctx: Any, op: Any) -> list:
    x = _ins(ctx, op)[0]
    return ctx.emit("mul", [x, x])


@handles("SQUARED_DIFFERENCE", ir="mul")
def _squared_difference(ctx: Any, op: Any) -> list:
    a, b = _ins(ctx, op)[:2]
    d = ctx.emit("sub", [a, b])[0]
    return ctx.emit("mul", [d, d])


@handles("FLOOR_DIV", ir="div")
def _floor_div(ctx: Any, op: Any) -> list:
    """Floats: floor(a / b); integers: (a - floor_mod(a, b)) / b, which divides exactly."""
    a, b = _ins(ctx, op)[:2]
    if (a.type.dtype or "float32").startswith(("float", "bfloat")):
        return ctx.emit("floor", [ctx.emit("div", [a, b])[0]])
    r = ctx.emit("floor_mod", [a, b])[0]
    return ctx.emit("div", [ctx.emit("sub", [a, r])[0], b])


@handles("RSQRT", ir="sqrt")
def _rsqrt(ctx: Any, op: Any) -> list:
    r = ctx.emit("sqrt", _ins(ctx, op)[:1])[0]
    return ctx.emit("reciprocal", [r])


@handles("ADD_N", ir="sum")
def _add_n(ctx: Any, op: Any) -> list:
    return ctx.emit("sum", _ins(ctx, op))


@handles("CAST", ir="cast")
def _cast(ctx: Any, op: Any) -> list:
    x = _ins(ctx, op)[0]
    if is_complex(ctx, int(op.inputs[0])):  # complex to real keeps the real part (TensorFlow's cast)
        x = _part(ctx, x, 0)
    return [ctx.cast(x, ctx.dtype(int(op.outputs[0])))]


# ----------------------------------------------------------------------------- complex values
# A complex64 tensor is a float32 value with a last dim of 2 (real, imaginary), as ONNX's DFT
# writes it: RFFT2D makes one, SQUEEZE and RESHAPE move it, COMPLEX_ABS/REAL/IMAG/CAST read it.
COMPLEX_READERS = frozenset({"SQUEEZE", "RESHAPE", "CAST", "COMPLEX_ABS", "REAL", "IMAG"})


def is_complex(ctx: Any, i: int) -> bool:
    return i >= 0 and ctx.type_names.get(ctx.tensor(i).type) in ("COMPLEX64", "COMPLEX128")


def _part(ctx: Any, x: Value, k: int) -> Value:
    return ctx.emit("gather", [x, ctx.i64(k, "part")], {"axis": -1}, role="part")[0]


@handles("RFFT2D", ir="dft")
def _rfft2d(ctx: Any, op: Any) -> list:
    """A real 2-D FFT of the two innermost dims, to ``fft_length`` (cut or zero-padded): a
    one-sided DFT of the rows, then a full one of the columns (none for one row to one)."""
    x = ctx.input(int(op.inputs[0]))
    fh, fw = (int(v) for v in np.asarray(ctx.const_of(int(op.inputs[1]), "fft_length")).reshape(-1))
    dims = ctx.dims(int(op.inputs[0]))
    pairs = ctx.emit("unsqueeze", [x, ctx.i64([len(dims)], "axes")], role="real")[0]
    y = ctx.emit("dft", [pairs, ctx.i64(fw, "width"), ctx.i64(-2, "axis")], {"onesided": 1}, role="rows")[0]
    if not (fh == 1 and dims[-2] == 1):
        y = ctx.emit("dft", [y, ctx.i64(fh, "height"), ctx.i64(-3, "axis")])[0]
    return [y]


@handles("COMPLEX_ABS", ir="sqrt")
def _complex_abs(ctx: Any, op: Any) -> list:
    x = ctx.input(int(op.inputs[0]))
    sq = ctx.emit("mul", [x, x], role="square")[0]
    return ctx.emit("sqrt", ctx.emit("reduce_sum", [sq, ctx.i64([-1], "axes")], {"keepdims": 0}, role="sum"))


@handles("REAL", "IMAG", ir="gather")
def _real_imag(ctx: Any, op: Any) -> list:
    return [_part(ctx, ctx.input(int(op.inputs[0])), 0 if ctx.builtin == "REAL" else 1)]


@handles("SELECT", "SELECT_V2", ir="where")
def _select(ctx: Any, op: Any) -> list:
    return ctx.emit("where", _ins(ctx, op)[:3])


@handles("DEQUANTIZE", ir="dequantize_linear")
def _dequantize(ctx: Any, op: Any) -> list:
    i = int(op.inputs[0])
    x = ctx.input(i)  # a quantized tensor's float view is its dequantization
    if ctx.quant(i) is None and x.type.dtype != "float32":  # float16 weights
        return [ctx.cast(x, ctx.dtype(int(op.outputs[0])))]
    return [x]


@handles("DENSIFY", ir="identity")
def _densify(ctx: Any, op: Any) -> list:
    return [ctx.input(int(op.inputs[0]))]  # the sparse constant is dense once read (tflite_sparse)


@handles("QUANTIZE", ir="quantize_linear")
def _quantize(ctx: Any, op: Any) -> list:
    return [ctx.input(int(op.inputs[0]))]  # the frontend quantizes with the output tensor's parameters


# ----------------------------------------------------------------------------- softmax & normalization
@handles("SOFTMAX", ir="softmax")
def _softmax(ctx: Any, op: Any) -> list:
    x = _ins(ctx, op)[0]
    beta = float(_opt(op, "beta", 1.0))
    if beta != 1.0:
        x = ctx.emit("mul", [x, ctx.const(np.asarray(beta, np.float32), "beta")])[0]
    return ctx.emit("softmax", [x], {"axis": -1})


@handles("LOG_SOFTMAX", ir="log_softmax")
def _log_softmax(ctx: Any, op: Any) -> list:
    return ctx.emit("log_softmax", _ins(ctx, op)[:1], {"axis": -1})


@handles("L2_NORMALIZATION", ir="lp_normalization")
def _l2norm(ctx: Any, op: Any) -> list:
    y = ctx.emit("lp_normalization", _ins(ctx, op)[:1], {"axis": -1, "p": 2})[0]
    return [ctx.activation(y, _opt(op, "fusedActivationFunction", 0))]


@handles("LOCAL_RESPONSE_NORMALIZATION", ir="lrn")
def _lrn(ctx: Any, op: Any) -> list:
    r = int(_opt(op, "radius", 5))
    size = 2 * r + 1
    y = ctx.emit("lrn", [ctx.nchw(_ins(ctx, op)[0])], {"size": size, "bias": float(_opt(op, "bias", 1.0)),
                                                       "alpha": float(_opt(op, "alpha", 1.0)) * size,
                                                       "beta": float(_opt(op, "beta", 0.5))})[0]
    return [ctx.nhwc(y)]


# ----------------------------------------------------------------------------- convolution & pooling
def _same_pads(ins: tuple[int, ...], ks: list[int], strides: list[int], dils: list[int]) -> list[int]:
    """TFLite's SAME padding as explicit begins + ends (the extra pixel at the end)."""
    begins, ends = [], []
    for n, k, s, d in zip(ins, ks, strides, dils):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        begins.append(total // 2)
        ends.append(total - total // 2)
    return begins + ends


def _pads(ctx: Any, op: Any, spatial: tuple[int | None, ...], ks: list[int], strides: list[int],
          dils: list[int]) -> dict[str, Any]:
    """``pads`` (explicit) of a conv/pool, or ``auto_pad: SAME_UPPER`` (TFLite's SAME) where a
    strided spatial dim is dynamic: its pads depend on the size (at stride 1 they do not)."""
    pad = ctx.pad_names.get(_opt(op, "padding", 0), "SAME")
    if pad == "VALID":
        return {"pads": [0] * (2 * len(spatial))}
    if pad != "SAME":
        raise ctx.fail("unsupported_attribute_value", f"padding {pad}")
    if any(n is None and s != 1 for n, s in zip(spatial, strides)):
        return {"auto_pad": "SAME_UPPER"}
    return {"pads": _same_pads(tuple(1 if n is None else n for n in spatial), ks, strides, dils)}


@handles("CONV_2D", ir="conv")
def _conv2d(ctx: Any, op: Any) -> list:
    xi, wi, bi = (list(op.inputs) + [-1])[:3]
    x = ctx.input(int(xi))
    ishape, wshape = ctx.dims(int(xi)), ctx.shape(int(wi))  # NHWC, OHWI
    ks = list(wshape[1:3])
    strides = [int(_opt(op, "strideH", 1)), int(_opt(op, "strideW", 1))]
    dils = [int(_opt(op, "dilationHFactor", 1)), int(_opt(op, "dilationWFactor", 1))]
    w = ctx.weight(int(wi), [0, 3, 1, 2])
    xn = ctx.nchw(x)
    if tflite_hybrid.is_hybrid(ctx, int(xi), int(wi)):  # int8 weights, float input: quantized at run time
        xn = tflite_hybrid.quantize_conv_input(ctx, xn, int(wi), pointwise=ks == [1, 1] and strides == [1, 1])
    group = ishape[3] // wshape[3] if wshape[3] and ishape[3] is not None else 1
    attrs = {"kernel_shape": ks, "strides": strides, "dilations": dils, "group": group,
             **_pads(ctx, op, tuple(ishape[1:3]), ks, strides, dils)}
    y = ctx.emit("conv", [xn, w, ctx.input(int(bi))], attrs)[0]
    return [ctx.nhwc(ctx.activation(y, _opt(op, "fusedActivationFunction", 0)))]


@handles("DEPTHWISE_CONV_2D", ir="conv")
def _depthwise(ctx: Any, op: Any) -> list:
    xi, wi, bi = (list(op.inputs) + [-1])[:3]
    x = ctx.input(int(xi))
    ishape, wshape = ctx.dims(int(xi)), ctx.shape(int(wi))  # NHWC, 1 H W (C*M)
    ks = list(wshape[1:3])
    strides = [int(_opt(op, "strideH", 1)), int(_opt(op, "strideW", 1))]
    dils = [int(_opt(op, "dilationHFactor", 1)), int(_opt(op, "dilationWFactor", 1))]
    w = ctx.weight(int(wi), [3, 0, 1, 2])
  # (C*M) 1 H W: group = C
    channels = ishape[3] if ishape[3] is not None else wshape[3] // max(int(_opt(op, "depthMultiplier", 1)), 1)
    attrs = {"kernel_shape": ks, "strides": strides, "dilations": dils, "group": int(channels),
             **_pads(ctx, op, tuple(ishape[1:3]), ks, strides, dils)}
    xn = ctx.nchw(x)
    if tflite_hybrid.is_hybrid(ctx, int(xi), int(wi)):  # int8 weights, float input: quantized per batch item
        xn = tflite_hybrid.quantize_conv_input(ctx, xn, int(wi))
    y = ctx.emit("conv", [xn, w, ctx.input(int(bi))], attrs)[0]
    return [ctx.nhwc(ctx.activation(y, _opt(op, "fusedActivationFunction", 0)))]


@handles("TRANSPOSE_CONV", ir="conv_transpose")
def _transpose_conv(ctx: Any, op: Any) -> list:
    si, wi, xi, bi = (list(op.inputs) + [-1])[:4]
    out_shape = [int(d) for d in ctx.const_of(int(si), "output shape")]  # NHWC
    ishape, wshape = ctx.static_spatial(int(xi)), ctx.shape(int(wi))  # NHWC, O H W I
    ks = list(wshape[1:3])
    strides = [int(_opt(op, "strideH", 1)), int(_opt(op, "strideW", 1))]
    pad = ctx.pad_names.get(_opt(op, "padding", 0), "SAME")
    begins, ends, extra = [], [], []
    for n, o, k, s in zip(ishape[1:3], out_shape[1:3], ks, strides):
        total = max((n - 1) * s + k - o, 0) if pad == "SAME" else 0
        b, e = total // 2, total - total // 2
        full = (n - 1) * s + k - b - e
        begins.append(b)
        ends.append(e)
        extra.append(o - full)
    if any(e < 0 for e in extra):  # VALID with a smaller output: TFLite crops the end
        ends = [e - min(x, 0) for e, x in zip(ends, extra)]
        extra = [max(x, 0) for x in extra]
    w = ctx.weight(int(wi), [3, 0, 1, 2])  # I O H W
    attrs = {"kernel_shape": ks, "strides": strides, "pads": begins + ends, "output_padding": extra}
    y = ctx.emit("conv_transpose", [ctx.nchw(ctx.input(int(xi))), w, ctx.input(int(bi))], attrs)[0]
    return [ctx.nhwc(ctx.activation(y, _opt(op, "fusedActivationFunction", 0)))]


@handles("AVERAGE_POOL_2D", ir="average_pool")
@handles("MAX_POOL_2D", ir="max_pool")
def _pool(ctx: Any, op: Any) -> list:
    xi = int(op.inputs[0])
    ishape = ctx.dims(xi)
    ks = [int(_opt(op, "filterHeight", 1)), int(_opt(op, "filterWidth", 1))]
    strides = [int(_opt(op, "strideH", 1)), int(_opt(op, "strideW", 1))]
    attrs: dict[str, Any] = {"kernel_shape": ks, "strides": strides,
                             **_pads(ctx, op, tuple(ishape[1:3]), ks, strides, [1, 1])}
    if ctx.builtin == "AVERAGE_POOL_2D":
        attrs["count_include_pad"] = 0
    y = ctx.emit(IR_OPS[ctx.builtin], [ctx.nchw(ctx.input(xi))], attrs)[0]
    return [ctx.nhwc(ctx.activation(y, _opt(op, "fusedActivationFunction", 0)))]


@handles("FULLY_CONNECTED", ir="gemm")
def _fully_connected(ctx: Any, op: Any) -> list:
    """Gemm on the input flattened to [-1, depth]; keep_num_dims restores the leading dims."""
    xi, wi, bi = (list(op.inputs) + [-1])[:3]
    x0, w, b = ctx.input(int(xi)), ctx.input(int(wi)), ctx.input(int(bi))
    units, depth = ctx.shape(int(wi))
    x = x0
    if len(ctx.shape(int(xi))) != 2:
        x = ctx.emit("reshape", [x0, ctx.i64([-1, depth], "shape")])[0]
    if tflite_hybrid.is_hybrid(ctx, int(xi), int(wi)):  # int8 weights, float input: quantized per row at run time
        x = tflite_hybrid.quantize_rows(ctx, x, bool(_opt(op, "asymmetricQuantizeInputs", False)))
    y = ctx.emit("gemm", [x, w, b], {"transB": 1})[0]
    y = ctx.activation(y, _opt(op, "fusedActivationFunction", 0))
    lead = ctx.dims(int(xi))[:-1]
    if _opt(op, "keepNumDims", False) and len(lead) != 1:
        shape = ctx.i64([*lead, units], "shape") if None not in lead else ctx.emit("concat", [
            _shape_slice(ctx, x0, 0, len(lead)), ctx.i64([units], "units")], {"axis": 0})[0]
        y = ctx.emit("reshape", [y, shape])[0]
    return [y]


def _shape_slice(ctx: Any, v: Value, start: int, end: int) -> Value:
    """``shape(v)[start:end]`` computed at run time (int64)."""
    s = ctx.emit("shape", [v])[0]
    return ctx.emit("slice", [s, ctx.i64([start], "start"), ctx.i64([end], "end"), ctx.i64([0], "axis")])[0]


@handles("BATCH_MATMUL", ir="matmul")
def _batch_matmul(ctx: Any, op: Any) -> list:
    a, b = _ins(ctx, op)[:2]

    def adj(v: Value) -> Value:
        r = len(ctx.shape_of(v))
        return ctx.transpose(v, [*range(r - 2), r - 1, r - 2])

    if _opt(op, "adjX", False):
        a = adj(a)
    if _opt(op, "adjY", False):
        b = adj(b)
    return ctx.emit("matmul", [a, b])


# ----------------------------------------------------------------------------- shapes & data movement
@handles("RESHAPE", ir="reshape")
def _reshape(ctx: Any, op: Any) -> list:
    """The shape operand when there is one (constant or not), else the option, else the output's shape."""
    x = ctx.input(int(op.inputs[0]))
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        shape = ctx.data(int(op.inputs[1]))
        if shape is None:
            if is_complex(ctx, int(op.inputs[0])):
                raise ctx.fail("unsupported_dtype", "RESHAPE of a complex tensor to a run-time shape")
            return ctx.emit("reshape", [x, ctx.as_int64(ctx.input(int(op.inputs[1])))])
        dims = [int(d) for d in np.asarray(shape).reshape(-1)]
    elif _opt(op, "newShape", None) is not None and len(_opt(op, "newShape")):
        dims = [int(d) for d in _opt(op, "newShape")]
    else:  # the output's declared shape, a dynamic dim as -1 (one at most)
        dims = [-1 if d is None else d for d in ctx.dims(int(op.outputs[0]))]
        if dims.count(-1) > 1:
            raise ctx.fail("dynamic_shape", f"RESHAPE without a shape operand to {dims} (several dynamic dims)")
    if is_complex(ctx, int(op.inputs[0])):
        dims = dims + [2]  # the (real, imaginary) pairs stay last
    xshape = ctx.dims(int(op.inputs[0]))
    if not dims and xshape and all(d == 1 for d in xshape):  # to a scalar: squeeze (some runtimes crash on shape [])
        return ctx.emit("squeeze", [x, ctx.i64(list(range(len(xshape))), "axes")])
    return ctx.emit("reshape", [x, ctx.i64(dims, "shape")], {"allowzero": 1} if 0 in dims else {})


@handles("SQUEEZE", ir="squeeze")
def _squeeze(ctx: Any, op: Any) -> list:
    x = ctx.input(int(op.inputs[0]))
    r = len(ctx.shape(int(op.inputs[0])))
    dims = [int(d) % r for d in (_opt(op, "squeezeDims", None) if _opt(op, "squeezeDims", None) is not None else [])]
    if not dims:  # every dim declared 1 (a dynamic one is not, whatever its default size)
        dims = [i for i, d in enumerate(ctx.dims(int(op.inputs[0]))) if d == 1]
    return ctx.emit("squeeze", [x, ctx.i64(dims, "axes")])


@handles("EXPAND_DIMS", ir="unsqueeze")
def _expand_dims(ctx: Any, op: Any) -> list:
    x = ctx.input(int(op.inputs[0]))
    axis = int(np.asarray(ctx.const_of(int(op.inputs[1]), "axis")).reshape(-1)[0])
    r = len(ctx.shape(int(op.inputs[0]))) + 1
    return ctx.emit("unsqueeze", [x, ctx.i64([axis % r], "axes")])


@handles("TRANSPOSE", ir="transpose")
def _transpose(ctx: Any, op: Any) -> list:
    perm = [int(p) for p in ctx.const_of(int(op.inputs[1]), "permutation")]
    return [ctx.transpose(ctx.input(int(op.inputs[0])), perm)]


@handles("CONCATENATION", ir="concat")
def _concat(ctx: Any, op: Any) -> list:
    ins = _ins(ctx, op)
    r = len(ctx.shape(int(op.outputs[0])))
    y = ctx.emit("concat", ins, {"axis": int(_opt(op, "axis", 0)) % max(r, 1)})[0]
    return [ctx.activation(y, _opt(op, "fusedActivationFunction", 0))]


@handles("PACK", ir="concat")
def _pack(ctx: Any, op: Any) -> list:
    r = len(ctx.shape(int(op.outputs[0])))
    axis = int(_opt(op, "axis", 0)) % r
    parts = [ctx.emit("unsqueeze", [v, ctx.i64([axis], "axes")])[0] for v in _ins(ctx, op)]
    return ctx.emit("concat", parts, {"axis": axis})


@handles("SPLIT", ir="split")
def _split(ctx: Any, op: Any) -> list:
    axis = int(np.asarray(ctx.const_of(int(op.inputs[0]), "axis")).reshape(-1)[0])
    x = ctx.input(int(op.inputs[1]))
    r = len(ctx.shape(int(op.inputs[1])))
    n = len(op.outputs)
    return ctx.emit("split", [x], {"axis": axis % r, "num_outputs": n}, n=n)


@handles("SPLIT_V", ir="split")
def _split_v(ctx: Any, op: Any) -> list:
    x = ctx.input(int(op.inputs[0]))
    shape = ctx.dims(int(op.inputs[0]))
    axis = int(np.asarray(ctx.const_of(int(op.inputs[2]), "axis")).reshape(-1)[0]) % len(shape)
    if ctx.data(int(op.inputs[1])) is None:  # computed sizes (no -1 among them: TFLite resolves it statically)
        return ctx.emit("split", [x, ctx.as_int64(ctx.input(int(op.inputs[1])))], {"axis": axis}, n=len(op.outputs))
    sizes = [int(s) for s in ctx.const_of(int(op.inputs[1]), "size_splits")]
    n = len(op.outputs)
    if -1 in sizes:
        k, rest = sizes.index(-1), sum(s for s in sizes if s != -1)
        if shape[axis] is None:  # the rest of a dynamic dim: shape(x)[axis] - the given sizes
            left = ctx.emit("sub", [_shape_slice(ctx, x, axis, axis + 1), ctx.i64([rest], "given")])[0]
            parts = [ctx.i64(sizes[:k], "before"), left, ctx.i64(sizes[k + 1:], "after")]
            split = ctx.emit("concat", [p for p in parts if p.type.shape != (0,)], {"axis": 0})[0]
            return ctx.emit("split", [x, split], {"axis": axis}, n=n)
        sizes[k] = shape[axis] - rest
    return ctx.emit("split", [x, ctx.i64(sizes, "split")], {"axis": axis}, n=n)


@handles("SLICE", ir="slice")
def _slice(ctx: Any, op: Any) -> list:
    xi = int(op.inputs[0])
    shape = ctx.shape(xi)
    if ctx.data(int(op.inputs[1])) is None or ctx.data(int(op.inputs[2])) is None:  # computed: size -1 = to the end
        b, size = (ctx.as_int64(ctx.input(int(op.inputs[k]))) for k in (1, 2))
        big = ctx.i64([np.iinfo(np.int64).max] * len(shape), "big")
        e = ctx.emit("where", [ctx.emit("equal", [size, ctx.i64(-1, "m1")])[0], big, ctx.emit("add", [b, size])[0]])[0]
        return ctx.emit("slice", [ctx.input(xi), b, e, ctx.i64(list(range(len(shape))), "axes")])
    begin = [int(b) for b in ctx.const_of(int(op.inputs[1]), "begin")]
    size = [int(s) for s in ctx.const_of(int(op.inputs[2]), "size")]
    big = np.iinfo(np.int64).max  # size -1 on a dynamic dim: to its end, whatever its size
    end = [(big if d is None else d) if s == -1 else b + s for b, s, d in zip(begin, size, ctx.dims(xi))]
    return ctx.emit("slice", [ctx.input(xi), ctx.i64(begin, "starts"), ctx.i64(end, "ends"),
                              ctx.i64(list(range(len(begin))), "axes")])


def _dynamic_strided_slice(ctx: Any, op: Any) -> list:
    """Computed begin/end/strides: the masks pick constants in place of the computed entries."""
    xi = int(op.inputs[0])
    begin, end = (ctx.as_int64(ctx.input(int(op.inputs[k]))) for k in (1, 2))
    n = ctx.shape(int(op.inputs[1]))[0]
    strides = ctx.as_int64(ctx.input(int(op.inputs[3]))) if len(op.inputs) > 3 else ctx.i64([1] * n, "steps")
    bits = {k: [bool(int(_opt(op, k, 0)) >> i & 1) for i in range(n)] for k in ("beginMask", "endMask", "shrinkAxisMask")}
    big = np.iinfo(np.int64).max
    if bool(_opt(op, "offset", False)):
        end = ctx.emit("add", [begin, end])[0]
    if any(bits["shrinkAxisMask"]):
        sm = ctx.const(np.asarray(bits["shrinkAxisMask"]), "shrink")
        end = ctx.emit("where", [sm, ctx.emit("add", [begin, ctx.i64(1, "one")])[0], end])[0]
        strides = ctx.emit("where", [sm, ctx.i64([1] * n, "ones"), strides])[0]
    neg = ctx.emit("less", [strides, ctx.i64(0, "zero")])[0]
    if any(bits["beginMask"]):
        first = ctx.emit("where", [neg, ctx.i64([-1] * n, "m1"), ctx.i64([0] * n, "z")])[0]
        begin = ctx.emit("where", [ctx.const(np.asarray(bits["beginMask"]), "bm"), first, begin])[0]
    if any(bits["endMask"]):
        last = ctx.emit("where", [neg, ctx.i64([-big] * n, "lo"), ctx.i64([big] * n, "hi")])[0]
        end = ctx.emit("where", [ctx.const(np.asarray(bits["endMask"]), "em"), last, end])[0]
    y = ctx.emit("slice", [ctx.input(xi), begin, end, ctx.i64(list(range(n)), "axes"), strides])[0]
    if any(bits["shrinkAxisMask"]):
        y = ctx.emit("squeeze", [y, ctx.i64([k for k, b in enumerate(bits["shrinkAxisMask"]) if b], "shrink")])[0]
    return [y]


@handles("STRIDED_SLICE", ir="slice")
def _strided_slice(ctx: Any, op: Any) -> list:
    xi = int(op.inputs[0])
    dims = ctx.dims(xi)
    if int(_opt(op, "ellipsisMask", 0)) == 0 and int(_opt(op, "newAxisMask", 0)) == 0 and \
            any(ctx.data(int(i)) is None for i in list(op.inputs)[1:]):
        return _dynamic_strided_slice(ctx, op)
    begin = [int(b) for b in ctx.const_of(int(op.inputs[1]), "begin")]
    end = [int(e) for e in ctx.const_of(int(op.inputs[2]), "end")]
    strides = [int(s) for s in ctx.const_of(int(op.inputs[3]), "strides")] if len(op.inputs) > 3 else [1] * len(begin)
    bm, em = int(_opt(op, "beginMask", 0)), int(_opt(op, "endMask", 0))
    sm = int(_opt(op, "shrinkAxisMask", 0))
    if int(_opt(op, "ellipsisMask", 0)) or int(_opt(op, "newAxisMask", 0)):
        raise ctx.fail("unsupported_attribute_value", "STRIDED_SLICE with ellipsis or new-axis masks")
    offset = bool(_opt(op, "offset", False))
    starts, ends, steps = [], [], []
    big = np.iinfo(np.int64).max
    for k, (b, e, s) in enumerate(zip(begin, end, strides)):
        d = dims[k] if k < len(dims) else None  # None: dynamic
        if offset:
            e = b + e
        if sm >> k & 1:
            b = b % d if b < 0 and d else b
            e, s = (big if b == -1 else b + 1), 1  # one element (the last of a dynamic dim: to its end)
        else:
            if bm >> k & 1:
                b = 0 if s > 0 else -1
            if em >> k & 1:
                e = big if s > 0 else -big
            if d is not None and s > 0 and e > d:  # to the end of a static dim: the dim itself (TensorFlow's
                e = d  # TFLite converter mis-folds an end past the dim when another axis begins past 0)
        starts.append(b)
        ends.append(e)
        steps.append(s)
    y = ctx.emit("slice", [ctx.input(xi), ctx.i64(starts, "starts"), ctx.i64(ends, "ends"),
                           ctx.i64(list(range(len(starts))), "axes"), ctx.i64(steps, "steps")])[0]
    if sm:  # the shrunk axes (of size one) squeezed: the other dims stay as they are, dynamic ones too
        y = ctx.emit("squeeze", [y, ctx.i64([k for k in range(len(starts)) if sm >> k & 1], "shrink")])[0]
    return [y]


@handles("GATHER", ir="gather")
def _gather(ctx: Any, op: Any) -> list:
    x, idx = _ins(ctx, op)[:2]
    r = len(ctx.shape(int(op.inputs[0])))
    axis = int(_opt(op, "axis", 0)) % r
    b = int(_opt(op, "batchDims", 0))
    if b:  # batched: gather_nd on the axis right after the batch dims
        b %= len(ctx.shape(int(op.inputs[1]))) or 1
        if axis != b:
            raise ctx.fail("unsupported_attribute_value", f"GATHER with batch_dims {b} and axis {axis} (only axis = batch_dims)")
        ind = ctx.emit("unsqueeze", [ctx.as_int64(idx), ctx.i64([-1], "last")])[0]
        return ctx.emit("gather_nd", [x, ind], {"batch_dims": b})
    return ctx.emit("gather", [x, idx], {"axis": axis})


@handles("GATHER_ND", ir="gather_nd")
def _gather_nd(ctx: Any, op: Any) -> list:
    x, idx = _ins(ctx, op)[:2]
    return ctx.emit("gather_nd", [x, ctx.as_int64(idx)])


@handles("TILE", ir="tile")
def _tile(ctx: Any, op: Any) -> list:
    x, reps = _ins(ctx, op)[:2]
    return ctx.emit("tile", [x, ctx.as_int64(reps)])


@handles("BROADCAST_TO", ir="expand")
def _broadcast_to(ctx: Any, op: Any) -> list:
    x, shape = _ins(ctx, op)[:2]
    return ctx.emit("expand", [x, ctx.as_int64(shape)])


@handles("PAD", "PADV2", ir="pad")
def _pad(ctx: Any, op: Any) -> list:
    ins = _ins(ctx, op)
    data = ctx.data(int(op.inputs[1]))
    if data is None:  # [[before, after]] per axis, computed: befores then afters, as int64
        pads = ctx.emit("reshape", [ctx.transpose(ctx.as_int64(ins[1]), [1, 0]), ctx.i64([-1], "flat")])[0]
    else:
        p = np.asarray(data).astype(np.int64).reshape(-1, 2)
        pads = ctx.i64(np.concatenate([p[:, 0], p[:, 1]]), "pads")
    value = ins[2] if len(ins) > 2 else None
    if value is not None and value.type.shape not in ((), None):
        value = ctx.emit("reshape", [value, ctx.i64([], "scalar")])[0]
    return ctx.emit("pad", [ins[0], pads, value], {"mode": "constant"})


@handles("MIRROR_PAD", ir="pad")
def _mirror_pad(ctx: Any, op: Any) -> list:
    mode = _enum_name(ctx.s.MirrorPadMode, _opt(op, "mode", 0))
    if mode != "REFLECT":
        raise ctx.fail("unsupported_attribute_value", f"MIRROR_PAD mode {mode} (only REFLECT has an IR form)")
    p = np.asarray(ctx.const_of(int(op.inputs[1]), "paddings")).astype(np.int64).reshape(-1, 2)
    return ctx.emit("pad", [ctx.input(int(op.inputs[0])), ctx.i64(np.concatenate([p[:, 0], p[:, 1]]), "pads")],
                    {"mode": "reflect"})


def _enum_name(enum_cls: Any, value: int) -> str:
    return next((k for k, v in vars(enum_cls).items() if v == value and not k.startswith("_")), str(value))


# ----------------------------------------------------------------------------- reductions & indices
_REDUCE = {"MEAN": "reduce_mean", "SUM": "reduce_sum", "REDUCE_MAX": "reduce_max", "REDUCE_MIN": "reduce_min",
           "REDUCE_PROD": "reduce_prod"}


def _reduce(ctx: Any, op: Any) -> list:
    r = len(ctx.shape(int(op.inputs[0])))
    keep = 1 if _opt(op, "keepDims", False) else 0
    data = ctx.data(int(op.inputs[1]))
    if data is None:  # computed axes (negative ones count from the end, as in the IR)
        axes = ctx.emit("reshape", [ctx.as_int64(ctx.input(int(op.inputs[1]))), ctx.i64([-1], "flat")])[0]
    else:
        axes = ctx.i64(sorted({int(a) % r for a in np.asarray(data).reshape(-1)}), "axes")
    return ctx.emit(IR_OPS[ctx.builtin], [ctx.input(int(op.inputs[0])), axes], {"keepdims": keep})


for _b, _ir in _REDUCE.items():
    handles(_b, ir=_ir)(_reduce)


@handles("ARG_MAX", ir="arg_max")
@handles("ARG_MIN", ir="arg_min")
def _arg(ctx: Any, op: Any) -> list:
    r = len(ctx.shape(int(op.inputs[0])))
    axis = int(np.asarray(ctx.const_of(int(op.inputs[1]), "axis")).reshape(-1)[0]) % r
    y = ctx.emit(IR_OPS[ctx.builtin], [ctx.input(int(op.inputs[0]))], {"axis": axis, "keepdims": 0})[0]
    return [ctx.cast(y, ctx.dtype(int(op.outputs[0])))]


@handles("TOPK_V2", ir="top_k")
def _topk(ctx: Any, op: Any) -> list:
    x, k = _ins(ctx, op)[:2]
    k = ctx.emit("reshape", [ctx.as_int64(k), ctx.i64([1], "shape")])[0]
    vals, idx = ctx.emit("top_k", [x, k], {"axis": -1, "largest": 1, "sorted": 1}, n=2)
    return [vals, ctx.cast(idx, ctx.dtype(int(op.outputs[1])))]


@handles("CUMSUM", ir="cum_sum")
def _cumsum(ctx: Any, op: Any) -> list:
    x, axis = _ins(ctx, op)[:2]
    return ctx.emit("cum_sum", [x, axis], {"exclusive": int(bool(_opt(op, "exclusive", False))),
                                           "reverse": int(bool(_opt(op, "reverse", False)))})


@handles("REVERSE_V2", ir="slice")
def _reverse(ctx: Any, op: Any) -> list:
    """A slice with step -1 on each axis (every target has slice; few have a reverse op)."""
    r = len(ctx.shape(int(op.inputs[0])))
    axes = sorted({int(a) % r for a in np.asarray(ctx.const_of(int(op.inputs[1]), "axes")).reshape(-1)})
    big = np.iinfo(np.int64).max
    return ctx.emit("slice", [ctx.input(int(op.inputs[0])), ctx.i64([-1] * len(axes), "starts"),
                              ctx.i64([-big] * len(axes), "ends"), ctx.i64(axes, "axes"), ctx.i64([-1] * len(axes), "steps")])


@handles("ONE_HOT", ir="one_hot")
def _one_hot(ctx: Any, op: Any) -> list:
    idx, depth, on, off = _ins(ctx, op)[:4]
    flat = [ctx.emit("reshape", [v, ctx.i64([1], "one")])[0] for v in (off, on)]
    values = ctx.emit("concat", flat, {"axis": 0})[0]
    return ctx.emit("one_hot", [idx, depth, values], {"axis": int(_opt(op, "axis", -1))})


@handles("SHAPE", ir="shape")
def _shape(ctx: Any, op: Any) -> list:
    y = ctx.emit("shape", [ctx.input(int(op.inputs[0]))])[0]
    return [ctx.cast(y, ctx.dtype(int(op.outputs[0])))]


@handles("RANGE", ir="range")
def _range(ctx: Any, op: Any) -> list:
    scalars = [ctx.emit("reshape", [v, ctx.i64([], "scalar")])[0] if v.type.shape not in ((), None) else v
               for v in _ins(ctx, op)[:3]]
    return ctx.emit("range", scalars)


# ----------------------------------------------------------------------------- spatial (channels-last)
@handles("RESIZE_BILINEAR", ir="resize")
@handles("RESIZE_NEAREST_NEIGHBOR", ir="resize")
def _resize(ctx: Any, op: Any) -> list:
    xi = int(op.inputs[0])
    n, _, _, c = ctx.dims(xi)
    size = [int(s) for s in ctx.const_of(int(op.inputs[1]), "size")]
    align, half = bool(_opt(op, "alignCorners", False)), bool(_opt(op, "halfPixelCenters", False))
    nearest = ctx.builtin == "RESIZE_NEAREST_NEIGHBOR"
    attrs: dict[str, Any] = {"mode": "nearest" if nearest else "linear"}
    if align:
        attrs["coordinate_transformation_mode"] = "align_corners"
        if nearest:
            attrs["nearest_mode"] = "round_prefer_ceil"
    elif half:
        attrs["coordinate_transformation_mode"] = "tf_half_pixel_for_nn" if nearest else "half_pixel"
        if nearest:
            attrs["nearest_mode"] = "floor"
    else:
        attrs["coordinate_transformation_mode"] = "asymmetric"
        if nearest:
            attrs["nearest_mode"] = "floor"
    x = ctx.nchw(ctx.input(xi))
    sizes = ctx.i64([n, c, *size], "sizes") if n is not None and c is not None else ctx.emit(
        "concat", [_shape_slice(ctx, x, 0, 2), ctx.i64(size, "size")], {"axis": 0})[0]  # N, C as they come
    y = ctx.emit("resize", [x, None, None, sizes], attrs)[0]
    return [ctx.nhwc(y)]


@handles("DEPTH_TO_SPACE", ir="depth_to_space")
@handles("SPACE_TO_DEPTH", ir="space_to_depth")
def _depth_space(ctx: Any, op: Any) -> list:
    attrs = {"blocksize": int(_opt(op, "blockSize", 2))}
    if ctx.builtin == "DEPTH_TO_SPACE":
        attrs["mode"] = "DCR"
    y = ctx.emit(IR_OPS[ctx.builtin], [ctx.nchw(ctx.input(int(op.inputs[0])))], attrs)[0]
    return [ctx.nhwc(y)]


@handles("CONV_3D", ir="conv")
def _conv3d(ctx: Any, op: Any) -> list:
    xi, wi, bi = (list(op.inputs) + [-1])[:3]
    ishape, wshape = ctx.dims(int(xi)), ctx.shape(int(wi))  # NDHWC, D H W I O
    ks = list(wshape[:3])
    strides = [int(_opt(op, "strideD", 1)), int(_opt(op, "strideH", 1)), int(_opt(op, "strideW", 1))]
    dils = [int(_opt(op, "dilationDFactor", 1)), int(_opt(op, "dilationHFactor", 1)), int(_opt(op, "dilationWFactor", 1))]
    w = ctx.weight(int(wi), [4, 3, 0, 1, 2])  # O I D H W
    group = ishape[4] // wshape[3] if ishape[4] is not None else 1
    attrs = {"kernel_shape": ks, "strides": strides, "dilations": dils, "group": group,
             **_pads(ctx, op, tuple(ishape[1:4]), ks, strides, dils)}
    y = ctx.emit("conv", [ctx.nchw(ctx.input(int(xi))), w, ctx.input(int(bi))], attrs)[0]
    return [ctx.nhwc(ctx.activation(y, _opt(op, "fusedActivationFunction", 0)))]


# ----------------------------------------------------------------------------- composed from IR ops
@handles("ATAN2", ir="atan")
def _atan2(ctx: Any, op: Any) -> list:
    """atan(y/x) with the quadrant from the signs (x = 0: ±π/2 by y's sign, 0 when y = 0)."""
    y, x = _ins(ctx, op)[:2]
    dt = np.dtype(y.type.dtype or "float32")
    zero, pi, half = (ctx.const(np.asarray(v, dt), n) for v, n in ((0, "zero"), (np.pi, "pi"), (np.pi / 2, "half_pi")))
    base = ctx.emit("atan", [ctx.emit("div", [y, x])[0]])[0]
    x_neg = ctx.emit("less", [x, zero])[0]
    y_neg = ctx.emit("less", [y, zero])[0]
    shift = ctx.emit("where", [y_neg, ctx.emit("neg", [pi])[0], pi])[0]
    res = ctx.emit("where", [x_neg, ctx.emit("add", [base, shift])[0], base])[0]
    x_zero = ctx.emit("equal", [x, zero])[0]
    axis_val = ctx.emit("mul", [ctx.emit("sign", [y])[0], half])[0]
    return ctx.emit("where", [x_zero, axis_val, res])


@handles("FILL", ir="constant_of_shape")
def _fill(ctx: Any, op: Any) -> list:
    dims, value = _ins(ctx, op)[:2]
    v = ctx.data(int(op.inputs[1]))
    if v is None:  # a computed value: broadcast it
        return ctx.emit("expand", [value, ctx.as_int64(dims)])
    return ctx.emit("constant_of_shape", [ctx.as_int64(dims)], {"value": np.asarray(v).reshape(1)})


@handles("WHERE", ir="non_zero")
def _where(ctx: Any, op: Any) -> list:
    idx = ctx.emit("non_zero", _ins(ctx, op)[:1])[0]  # [rank, n]
    return [ctx.cast(ctx.transpose(idx, [1, 0]), ctx.dtype(int(op.outputs[0])))]


@handles("SCATTER_ND", ir="scatter_nd")
def _scatter_nd(ctx: Any, op: Any) -> list:
    idx, updates, shape = _ins(ctx, op)[:3]
    zeros = ctx.emit("constant_of_shape", [ctx.as_int64(shape)],
                     {"value": np.zeros(1, np.dtype(updates.type.dtype or "float32"))})[0]
    return ctx.emit("scatter_nd", [zeros, ctx.as_int64(idx), updates], {"reduction": "add"})


@handles("REVERSE_SEQUENCE", ir="reverse_sequence")
def _reverse_sequence(ctx: Any, op: Any) -> list:
    x, lens = _ins(ctx, op)[:2]
    return ctx.emit("reverse_sequence", [x, ctx.as_int64(lens)],
                    {"time_axis": int(_opt(op, "seqDim", 0)), "batch_axis": int(_opt(op, "batchDim", 0))})


@handles("BITCAST", ir="bit_cast")
def _bitcast(ctx: Any, op: Any) -> list:
    return ctx.emit("bit_cast", [ctx.raw(int(op.inputs[0]))], {"to": ctx.onnx_enum(ctx.dtype(int(op.outputs[0])))})


def _batch_as(ctx: Any, i: int, size: int) -> tuple[list[int], bool]:
    """The dims of tensor ``i`` with a dynamic batch taken as ``size`` (and whether it was
    dynamic); the other dims must be static (the op's reshapes are computed from them)."""
    dims = ctx.dims(i)
    if None in dims[1:]:
        raise ctx.fail("dynamic_shape", f"{ctx.builtin}: input {ctx.tname(i)!r} has dynamic dims {list(dims)}")
    return [size if dims[0] is None else int(dims[0]), *(int(d) for d in dims[1:])], dims[0] is None


def _block_and_pads(ctx: Any, op: Any, what: str) -> tuple[list[int], np.ndarray]:
    block = [int(b) for b in ctx.const_of(int(op.inputs[1]), "block shape")]
    pads = np.asarray(ctx.const_of(int(op.inputs[2]), what)).astype(np.int64).reshape(-1, 2)
    return block, pads


@handles("SPACE_TO_BATCH_ND", ir="reshape")
def _space_to_batch(ctx: Any, op: Any) -> list:
    """pad → reshape [N, H/bh, bh, W/bw, bw, C] → transpose → reshape [bh·bw·N, H/bh, W/bw, C] (``blocks``)."""
    xi = int(op.inputs[0])
    block, pads = _block_and_pads(ctx, op, "paddings")
    shape, free = _batch_as(ctx, xi, 1)
    p = blocks.space_to_batch(shape, block, pads)
    split, out = list(p.split), list(p.out)
    if free:  # a dynamic batch: -1 where the reshapes carry it
        split[0] = out[0] = -1
    x = ctx.input(xi)
    if p.pads is not None:
        x = ctx.emit("pad", [x, ctx.i64(p.pads, "pads")], {"mode": "constant"})[0]
    x = ctx.emit("reshape", [x, ctx.i64(split, "split")])[0]
    x = ctx.transpose(x, p.perm)
    return ctx.emit("reshape", [x, ctx.i64(out, "shape")])


@handles("BATCH_TO_SPACE_ND", ir="reshape")
def _batch_to_space(ctx: Any, op: Any) -> list:
    """reshape [bh, bw, N, h, w, C] → transpose → reshape [N, h·bh, w·bw, C] → crop (``blocks``)."""
    xi = int(op.inputs[0])
    block, crops = _block_and_pads(ctx, op, "crops")
    shape, free = _batch_as(ctx, xi, int(np.prod(block)))
    p = blocks.batch_to_space(shape, block, crops)
    split, full = list(p.split), list(p.full)
    if free:  # a dynamic batch: -1 where the reshapes carry it
        split[len(block)] = full[0] = -1
    x = ctx.emit("reshape", [ctx.input(xi), ctx.i64(split, "split")])[0]
    x = ctx.transpose(x, p.perm)
    y = ctx.emit("reshape", [x, ctx.i64(full, "shape")])[0]
    if p.crop is not None:
        starts, ends, axes = p.crop
        y = ctx.emit("slice", [y, ctx.i64(starts, "starts"), ctx.i64(ends, "ends"), ctx.i64(axes, "axes")])[0]
    return [y]


@handles("BROADCAST_ARGS", ir="shape")
def _broadcast_args(ctx: Any, op: Any) -> list:
    """The broadcast shape of two shapes: the shape of the sum of two zero tensors of those shapes."""
    zeros = [ctx.emit("constant_of_shape", [ctx.as_int64(v)], {"value": np.zeros(1, np.uint8)})[0] for v in _ins(ctx, op)[:2]]
    y = ctx.emit("shape", [ctx.emit("add", zeros)[0]])[0]
    return [ctx.cast(y, ctx.dtype(int(op.outputs[0])))]


@handles("CONV_3D_TRANSPOSE", ir="conv_transpose")
def _conv3d_transpose(ctx: Any, op: Any) -> list:
    si, wi, xi, bi = (list(op.inputs) + [-1])[:4]
    out_shape = [int(d) for d in ctx.const_of(int(si), "output shape")]  # NDHWC
    ishape, wshape = ctx.static_spatial(int(xi)), ctx.shape(int(wi))  # NDHWC, D H W O I
    ks = list(wshape[:3])
    strides = [int(_opt(op, "strideD", 1)), int(_opt(op, "strideH", 1)), int(_opt(op, "strideW", 1))]
    dils = [int(_opt(op, "dilationDFactor", 1)), int(_opt(op, "dilationHFactor", 1)), int(_opt(op, "dilationWFactor", 1))]
    pad = ctx.pad_names.get(_opt(op, "padding", 0), "SAME")
    begins, ends, extra = [], [], []
    for n, o, k, s, d in zip(ishape[1:4], out_shape[1:4], ks, strides, dils):
        eff = (k - 1) * d + 1
        total = max((n - 1) * s + eff - o, 0) if pad == "SAME" else 0
        b, e = total // 2, total - total // 2
        begins.append(b)
        ends.append(e)
        extra.append(o - ((n - 1) * s + eff - b - e))
    if any(e < 0 for e in extra):
        ends = [e - min(x, 0) for e, x in zip(ends, extra)]
        extra = [max(x, 0) for x in extra]
    w = ctx.weight(int(wi), [4, 3, 0, 1, 2])  # I O D H W
    attrs = {"kernel_shape": ks, "strides": strides, "dilations": dils, "pads": begins + ends, "output_padding": extra}
    y = ctx.emit("conv_transpose", [ctx.nchw(ctx.input(int(xi))), w, ctx.input(int(bi))], attrs)[0]
    return [ctx.nhwc(ctx.activation(y, _opt(op, "fusedActivationFunction", 0)))]


@handles("ZEROS_LIKE", ir="constant_of_shape")
def _zeros_like(ctx: Any, op: Any) -> list:
    x = ctx.input(int(op.inputs[0]))
    shape = ctx.emit("shape", [x])[0]
    return ctx.emit("constant_of_shape", [shape], {"value": np.zeros(1, ctx.np_dtype(int(op.outputs[0])))})


import importlib  # noqa: E402

importlib.import_module(f"{__package__}.tflite_loops")  # registers WHILE and UNPACK (it imports this module)
importlib.import_module(f"{__package__}.tflite_custom")  # custom ops with a published kernel (MediaPipe's)
