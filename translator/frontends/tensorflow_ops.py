"""Per-op handlers of the TensorFlow frontend: TF graph op → IR nodes.

``HANDLERS[tf_op] = (ir_op_id, fn)``: the IR op is the one the table's ``tensorflow`` column
reads for that graph op (``reverse_index``; a handler whose op the table does not list is
never used: the node is reported unmapped). ``fn(ctx)`` returns one IR value per TF output
(None for outputs nobody reads). Layout: TF's NHWC ops are wrapped in transposes into the
IR's NCHW and back; the frontend cancels transposes it made back to back, the target's
transpose pass the rest.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir.graph import TensorType, Value
from . import blocks

Handler = Callable[[Any], list]
HANDLERS: dict[str, tuple[str, Handler]] = {}


def handles(*tf_ops: str, op: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for t in tf_ops:
            HANDLERS[t] = (op, fn)
        return fn
    return deco


def _onnx_enum(np_dtype: Any) -> int:
    from ..table.dtypes import dtype_id, onnx_enum

    did = dtype_id(np_dtype)
    for k, v in sorted(onnx_enum().items()):
        if v == did:
            return k
    raise ValueError(f"no ONNX enum for {did}")


# ---------------------------------------------------------------------------- layout helpers
def _to_first(rank: int) -> list[int]:
    return [0, rank - 1] + list(range(1, rank - 1))


def _to_last(rank: int) -> list[int]:
    return [0] + list(range(2, rank)) + [1]


def _nchw(ctx: Any, v: Value, rank: int) -> Value:
    return ctx.transpose(v, _to_first(rank))


def _nhwc(ctx: Any, v: Value, rank: int) -> Value:
    return ctx.transpose(v, _to_last(rank))


def _channels_last(ctx: Any) -> bool:
    fmt = ctx.attr("data_format", "NHWC") or "NHWC"
    if fmt in ("NHWC", "NDHWC", "NWC"):
        return True
    if fmt in ("NCHW", "NCDHW", "NCW"):
        return False
    raise ctx.fail("unsupported_attribute_value", f"data_format {fmt!r}")


def _spatial(vals: list[int], rank: int, last: bool) -> list[int]:
    """The spatial entries of an NHWC/NCHW-ordered per-dimension attribute (strides, ksize, dilations)."""
    vals = [int(v) for v in vals]
    if len(vals) != rank:
        return vals
    return vals[1:rank - 1] if last else vals[2:]


def _pads(ctx: Any, in_sp: list[int], k: list[int], s: list[int], d: list[int], last: bool, rank: int) -> list[int]:
    padding = ctx.attr("padding")
    n = len(in_sp)
    if padding == "VALID":
        return [0] * (2 * n)
    if padding == "SAME":
        begin, end = [], []
        for i in range(n):
            out = -(-in_sp[i] // s[i])
            total = max((out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in_sp[i], 0)
            begin.append(total // 2)
            end.append(total - total // 2)
        return begin + end
    if padding == "EXPLICIT":
        ep = [int(x) for x in ctx.attr("explicit_paddings")]
        pairs = [(ep[2 * i], ep[2 * i + 1]) for i in range(rank)]
        sp = pairs[1:rank - 1] if last else pairs[2:]
        return [p[0] for p in sp] + [p[1] for p in sp]
    raise ctx.fail("unsupported_attribute_value", f"padding {padding!r}")


# ---------------------------------------------------------------------------- elementwise
def _binary(op_id: str) -> Handler:
    def h(ctx: Any) -> list:
        return [ctx.one(op_id, [ctx.x(0), ctx.x(1)])]
    return h


for _tf, _ir in {"AddV2": "add", "Add": "add", "Sub": "sub", "Mul": "mul", "RealDiv": "div", "Div": "div",
                 "Maximum": "max", "Minimum": "min", "Pow": "pow", "Greater": "greater", "GreaterEqual": "greater_equal",
                 "Less": "less", "LessEqual": "less_equal", "Equal": "equal", "NotEqual": "not_equal",
                 "LogicalAnd": "logical_and", "LogicalOr": "logical_or", "FloorMod": "floor_mod"}.items():
    handles(_tf, op=_ir)(_binary(_ir))


def _unary(op_id: str, **attrs: Any) -> Handler:
    def h(ctx: Any) -> list:
        return [ctx.one(op_id, [ctx.x(0)], dict(attrs))]
    return h


for _tf, _ir in {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log",
                 "Sqrt": "sqrt", "Neg": "neg", "Abs": "abs", "Floor": "floor", "Ceil": "ceil", "Round": "round",
                 "Sign": "sign", "Sin": "sin", "Cos": "cos", "Softplus": "softplus", "Softsign": "softsign",
                 "Elu": "elu", "Selu": "selu", "Reciprocal": "reciprocal", "Inv": "reciprocal",
                 "LogicalNot": "logical_not", "IsNan": "is_nan"}.items():
    handles(_tf, op=_ir)(_unary(_ir))


@handles("BiasAdd", op="add")
def _bias_add(ctx: Any) -> list:
    x, bias = ctx.x(0), ctx.x(1)
    if not _channels_last(ctx):
        rank = len(ctx.known_in(0))
        bias = ctx.one("reshape", [bias, ctx.const([-1] + [1] * (rank - 2), np.int64)])
    return [ctx.one("add", [x, bias])]


@handles("Erfc", op="erf")
def _erfc(ctx: Any) -> list:
    one = ctx.const(1, ctx.out_np_dtype())
    return [ctx.one("sub", [one, ctx.one("erf", [ctx.x(0)])])]


@handles("LeakyRelu", op="leaky_relu")
def _leaky(ctx: Any) -> list:
    return [ctx.one("leaky_relu", [ctx.x(0)], {"alpha": float(ctx.attr("alpha", 0.2))})]


@handles("Rsqrt", op="reciprocal")
def _rsqrt(ctx: Any) -> list:
    return [ctx.one("reciprocal", [ctx.one("sqrt", [ctx.x(0)])])]


@handles("Square", op="mul")
def _square(ctx: Any) -> list:
    x = ctx.x(0)
    return [ctx.one("mul", [x, x])]


@handles("SquaredDifference", op="sub")
def _sqdiff(ctx: Any) -> list:
    d = ctx.one("sub", [ctx.x(0), ctx.x(1)])
    return [ctx.one("mul", [d, d])]


@handles("Relu6", op="clip")
def _relu6(ctx: Any) -> list:
    dt = ctx.out_np_dtype()
    return [ctx.one("clip", [ctx.x(0), ctx.const(0, dt), ctx.const(6, dt)])]


@handles("ClipByValue", op="clip")
def _clip(ctx: Any) -> list:
    return [ctx.one("clip", [ctx.x(0), ctx.x(1), ctx.x(2)])]


@handles("AddN", op="sum")
def _add_n(ctx: Any) -> list:
    return [ctx.one("sum", [ctx.x(i) for i in range(len(ctx.inputs))])]


@handles("Select", "SelectV2", op="where")
def _select(ctx: Any) -> list:
    cond = ctx.x(0)
    if ctx.type == "Select":
        cs, xs = ctx.in_shape(0), ctx.in_shape(1)
        if cs is not None and xs is not None and len(cs) == 1 and len(xs) > 1:
            cond = ctx.one("reshape", [cond, ctx.const([-1] + [1] * (len(xs) - 1), np.int64)])
    return [ctx.one("where", [cond, ctx.x(1), ctx.x(2)])]


@handles("Cast", op="cast")
def _cast(ctx: Any) -> list:
    return [ctx.one("cast", [ctx.x(0)], {"to": _onnx_enum(ctx.out_np_dtype())})]


# ---------------------------------------------------------------------------- linear algebra
@handles("MatMul", op="matmul")
def _matmul(ctx: Any) -> list:
    a, bb = ctx.x(0), ctx.x(1)
    if ctx.attr("transpose_a"):
        a = ctx.transpose(a, [1, 0])
    if ctx.attr("transpose_b"):
        bb = ctx.transpose(bb, [1, 0])
    return [ctx.one("matmul", [a, bb])]


@handles("BatchMatMulV2", "BatchMatMulV3", "BatchMatMul", op="matmul")
def _batch_matmul(ctx: Any) -> list:
    a, bb = ctx.x(0), ctx.x(1)
    for i, flag in ((0, "adj_x"), (1, "adj_y")):
        if ctx.attr(flag):
            r = len(ctx.known_in(i))
            perm = list(range(r - 2)) + [r - 1, r - 2]
            if i == 0:
                a = ctx.transpose(a, perm)
            else:
                bb = ctx.transpose(bb, perm)
    out = ctx.one("matmul", [a, bb])
    if ctx.type == "BatchMatMulV3" and np.dtype(ctx.out_np_dtype()) != np.dtype(ctx.op.inputs[0].dtype.as_numpy_dtype):
        out = ctx.one("cast", [out], {"to": _onnx_enum(ctx.out_np_dtype())})
    return [out]


@handles("Einsum", op="einsum")
def _einsum(ctx: Any) -> list:
    return [ctx.one("einsum", [ctx.x(i) for i in range(len(ctx.inputs))], {"equation": ctx.attr("equation")})]


# ---------------------------------------------------------------------------- convolution & pooling
@handles("Conv2D", "Conv3D", op="conv")
def _conv(ctx: Any) -> list:
    shape = ctx.known_in(0)  # the batch may be unknown
    rank = len(shape)
    last = _channels_last(ctx)
    w = ctx.ci(1, "filter")  # [*k, in/group, out]
    k = list(w.shape[:-2])
    s = _spatial(ctx.attr("strides"), rank, last)
    d = _spatial(ctx.attr("dilations") or [1] * rank, rank, last)
    in_sp = ctx.static(shape[1:rank - 1] if last else shape[2:], "spatial dims")
    cin = ctx.static([shape[rank - 1] if last else shape[1]], "channels")[0]
    group = cin // int(w.shape[-2])
    pads = _pads(ctx, in_sp, k, s, d, last, rank)
    wk = np.ascontiguousarray(np.transpose(w, [rank - 1, rank - 2] + list(range(rank - 2))))
    x = _nchw(ctx, ctx.x(0), rank) if last else ctx.x(0)
    y = ctx.one("conv", [x, ctx.const(wk, name="w")], {"kernel_shape": k, "strides": s, "dilations": d,
                                                       "pads": pads, "group": group})
    return [_nhwc(ctx, y, rank) if last else y]


@handles("DepthwiseConv2dNative", op="conv")
def _depthwise(ctx: Any) -> list:
    shape = ctx.known_in(0)
    last = _channels_last(ctx)
    w = ctx.ci(1, "filter")  # [kh, kw, in, mult]
    kh, kw, cin, mult = (int(v) for v in w.shape)
    s = _spatial(ctx.attr("strides"), 4, last)
    d = _spatial(ctx.attr("dilations") or [1] * 4, 4, last)
    in_sp = ctx.static(shape[1:3] if last else shape[2:], "spatial dims")
    pads = _pads(ctx, in_sp, [kh, kw], s, d, last, 4)
    wk = np.ascontiguousarray(np.transpose(w.reshape(kh, kw, cin * mult), [2, 0, 1])[:, None])
    x = _nchw(ctx, ctx.x(0), 4) if last else ctx.x(0)
    y = ctx.one("conv", [x, ctx.const(wk, name="w")], {"kernel_shape": [kh, kw], "strides": s, "dilations": d,
                                                       "pads": pads, "group": cin})
    return [_nhwc(ctx, y, 4) if last else y]


@handles("Conv2DBackpropInput", op="conv_transpose")
def _conv_transpose(ctx: Any) -> list:
    """The gradient of a convolution: ``input_sizes`` (the output), ``filter`` [kh, kw, out_c, in_c], ``out_backprop``."""
    last = _channels_last(ctx)
    sizes = ctx.c(0)  # computed from tf.shape under an unknown batch: TensorFlow's static output shape
    out = [int(v) for v in sizes.reshape(-1)] if sizes is not None else ctx.out_shape() or [None] * 4
    w = ctx.ci(1, "filter")
    shape = ctx.known_in(2)
    k = [int(v) for v in w.shape[:2]]
    s = _spatial(ctx.attr("strides"), 4, last)
    d = _spatial(ctx.attr("dilations") or [1] * 4, 4, last)
    in_sp = ctx.static(shape[1:3] if last else shape[2:], "spatial dims")
    out_sp = ctx.static(out[1:3] if last else out[2:], "output's spatial dims")
    pads = _pads(ctx, out_sp, k, s, d, last, 4)  # the forward convolution's padding (output → input)
    extra = [out_sp[i] - ((in_sp[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - pads[i] - pads[i + 2]) for i in range(2)]
    if any(e < 0 for e in extra):
        raise ctx.fail("unsupported_attribute_value", f"output size {out_sp} is smaller than the transposed convolution gives")
    wk = np.ascontiguousarray(np.transpose(w, [3, 2, 0, 1]))
    x = _nchw(ctx, ctx.x(2), 4) if last else ctx.x(2)
    y = ctx.one("conv_transpose", [x, ctx.const(wk, name="w")], {"kernel_shape": k, "strides": s, "dilations": d,
                                                                 "pads": pads, "output_padding": extra})
    return [_nhwc(ctx, y, 4) if last else y]


def _space_depth(op_id: str) -> Handler:
    def h(ctx: Any) -> list:
        last = _channels_last(ctx)
        x = _nchw(ctx, ctx.x(0), 4) if last else ctx.x(0)
        attrs: dict[str, Any] = {"blocksize": int(ctx.attr("block_size"))}
        if op_id == "depth_to_space":
            attrs["mode"] = "DCR"
        y = ctx.one(op_id, [x], attrs)
        return [_nhwc(ctx, y, 4) if last else y]
    return h


handles("DepthToSpace", op="depth_to_space")(_space_depth("depth_to_space"))
handles("SpaceToDepth", op="space_to_depth")(_space_depth("space_to_depth"))


def _pool(op_id: str) -> Handler:
    def h(ctx: Any) -> list:
        shape = ctx.known_in(0)
        rank = len(shape)
        last = _channels_last(ctx)
        k = _spatial(ctx.attr("ksize"), rank, last)
        s = _spatial(ctx.attr("strides"), rank, last)
        in_sp = ctx.static(shape[1:rank - 1] if last else shape[2:], "spatial dims")
        pads = _pads(ctx, in_sp, k, s, [1] * len(k), last, rank)
        x = _nchw(ctx, ctx.x(0), rank) if last else ctx.x(0)
        attrs: dict[str, Any] = {"kernel_shape": k, "strides": s, "pads": pads}
        if op_id == "average_pool":
            attrs["count_include_pad"] = 0
        y = ctx.emit(op_id, [x], attrs, n=1)[0]
        return [_nhwc(ctx, y, rank) if last else y]
    return h


handles("MaxPool", "MaxPool3D", op="max_pool")(_pool("max_pool"))
handles("AvgPool", "AvgPool3D", op="average_pool")(_pool("average_pool"))


@handles("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", op="batch_normalization")
def _fused_bn(ctx: Any) -> list:
    if ctx.attr("is_training"):
        raise ctx.fail("unsupported_attribute_value", "FusedBatchNorm in training mode (batch statistics)")
    rank = len(ctx.known_in(0))
    last = _channels_last(ctx)
    x = _nchw(ctx, ctx.x(0), rank) if last else ctx.x(0)
    y = ctx.one("batch_normalization", [x, ctx.x(1), ctx.x(2), ctx.x(3), ctx.x(4)],
                {"epsilon": float(ctx.attr("epsilon"))})
    return [_nhwc(ctx, y, rank) if last else y]


# ---------------------------------------------------------------------------- reductions
def _reduce(op_id: str) -> Handler:
    def h(ctx: Any) -> list:
        axes = np.asarray(ctx.ci(1, "axes"), dtype=np.int64).reshape(-1)
        keep = 1 if ctx.attr("keep_dims") else 0
        if axes.size == 0:
            return [ctx.x(0)]
        return [ctx.one(op_id, [ctx.x(0), ctx.const(axes)], {"keepdims": keep})]
    return h


for _tf, _ir in {"Mean": "reduce_mean", "Sum": "reduce_sum", "Max": "reduce_max", "Min": "reduce_min",
                 "Prod": "reduce_prod"}.items():
    handles(_tf, op=_ir)(_reduce(_ir))


@handles("ArgMin", op="arg_min")
@handles("ArgMax", op="arg_max")
def _arg(ctx: Any) -> list:
    axis = int(np.asarray(ctx.ci(1, "axis")).reshape(-1)[0])
    y = ctx.one("arg_max" if ctx.type == "ArgMax" else "arg_min", [ctx.x(0)], {"axis": axis, "keepdims": 0})
    if ctx.out_np_dtype() != np.int64:
        y = ctx.one("cast", [y], {"to": _onnx_enum(ctx.out_np_dtype())})
    return [y]


@handles("Softmax", op="softmax")
def _softmax(ctx: Any) -> list:
    return [ctx.one("softmax", [ctx.x(0)], {"axis": -1})]


@handles("LogSoftmax", op="log_softmax")
def _log_softmax(ctx: Any) -> list:
    return [ctx.one("log_softmax", [ctx.x(0)], {"axis": -1})]


# ---------------------------------------------------------------------------- shapes & data movement
@handles("Reshape", op="reshape")
def _reshape(ctx: Any) -> list:
    """TensorFlow's static output shape, one unknown dimension (the batch) as -1; else the shape
    operand, constant or computed (``tf.shape`` arithmetic under several unknown dimensions)."""
    out = ctx.out_shape()
    if out is not None and sum(d is None for d in out) <= 1:
        shape = np.asarray([-1 if d is None else d for d in out], dtype=np.int64)
    elif ctx.c(1) is not None:
        shape = np.asarray(ctx.c(1), dtype=np.int64)
    else:
        v = ctx.x(1)
        if v.type.dtype != "int64":
            v = ctx.one("cast", [v], {"to": _onnx_enum(np.int64)})
        return [ctx.one("reshape", [ctx.x(0), v])]
    return [ctx.one("reshape", [ctx.x(0), ctx.const(shape)])]


@handles("Squeeze", op="squeeze")
def _squeeze(ctx: Any) -> list:
    dims = [int(d) for d in (ctx.attr("squeeze_dims") or [])]
    if not dims:  # every dimension known to be 1 (an unknown batch is not)
        dims = [i for i, d in enumerate(ctx.known_in(0)) if d == 1]
    if not dims:
        return [ctx.x(0)]
    return [ctx.one("squeeze", [ctx.x(0), ctx.const(np.asarray(dims, np.int64))])]


@handles("ExpandDims", op="unsqueeze")
def _expand_dims(ctx: Any) -> list:
    axis = int(np.asarray(ctx.ci(1, "axis")).reshape(-1)[0])
    return [ctx.one("unsqueeze", [ctx.x(0), ctx.const(np.asarray([axis], np.int64))])]


@handles("Transpose", op="transpose")
def _transpose(ctx: Any) -> list:
    perm = [int(p) for p in np.asarray(ctx.ci(1, "perm")).reshape(-1)]
    return [ctx.transpose(ctx.x(0), perm)]


@handles("ConcatV2", op="concat")
def _concat(ctx: Any) -> list:
    n = len(ctx.inputs) - 1
    axis = int(np.asarray(ctx.ci(n, "axis")))
    return [ctx.one("concat", [ctx.x(i) for i in range(n)], {"axis": axis})]


@handles("Pack", op="concat")
def _pack(ctx: Any) -> list:
    axis = int(ctx.attr("axis", 0))
    out = ctx.out_shape()
    if out is None:
        raise ctx.fail("dynamic_shape", "Pack output of unknown rank")
    rank = len(out)
    axis = axis + rank if axis < 0 else axis
    ax = ctx.const(np.asarray([axis], np.int64))
    parts = [ctx.one("unsqueeze", [ctx.x(i), ax]) for i in range(len(ctx.inputs))]
    return [parts[0] if len(parts) == 1 else ctx.one("concat", parts, {"axis": axis})]


@handles("Unpack", op="split")
def _unpack(ctx: Any) -> list:
    num = int(ctx.attr("num"))
    axis = int(ctx.attr("axis", 0))
    parts = ctx.emit("split", [ctx.x(0)], {"axis": axis, "num_outputs": num}, n=num) if num > 1 else [ctx.x(0)]
    shape = ctx.in_shape(0)
    if shape is not None and num > 1:  # the parts typed as TensorFlow knows them (the IR's inference may not)
        part = list(shape)
        part[axis] = 1
        for p in parts:
            if p.type.shape is None or p.type.dtype is None:
                p.type = TensorType(p.type.dtype or ctx.x(0).type.dtype, tuple(part))
    ax = ctx.const(np.asarray([axis], np.int64))
    return [ctx.one("squeeze", [p, ax]) for p in parts]


@handles("Split", op="split")
def _split(ctx: Any) -> list:
    num = int(ctx.attr("num_split"))
    axis = int(np.asarray(ctx.ci(0, "axis")))
    if num == 1:
        return [ctx.x(1)]
    return ctx.emit("split", [ctx.x(1)], {"axis": axis, "num_outputs": num}, n=num)


@handles("SplitV", op="split")
def _split_v(ctx: Any) -> list:
    num = int(ctx.attr("num_split"))
    axis = int(np.asarray(ctx.ci(2, "axis")))
    sizes = [int(s) for s in np.asarray(ctx.ci(1, "size_splits")).reshape(-1)]
    if -1 in sizes:
        dim = ctx.static([ctx.known_in(0)[axis]], "split dimension")[0]
        sizes[sizes.index(-1)] = dim - (sum(sizes) + 1)
    if num == 1:
        return [ctx.x(0)]
    return ctx.emit("split", [ctx.x(0), ctx.const(np.asarray(sizes, np.int64))], {"axis": axis}, n=num)


@handles("Slice", op="slice")
def _slice(ctx: Any) -> list:
    shape = ctx.known_in(0)
    begin = [int(v) for v in np.asarray(ctx.ci(1, "begin")).reshape(-1)]
    size = [int(v) for v in np.asarray(ctx.ci(2, "size")).reshape(-1)]
    big = np.iinfo(np.int64).max  # size -1 of an unknown dimension: to its end
    end = [(big if shape[i] is None else shape[i]) if sz == -1 else b + sz for i, (b, sz) in enumerate(zip(begin, size))]
    return [_slice_of(ctx, ctx.x(0), begin, end, list(range(len(begin))), [1] * len(begin))]


def _slice_of(ctx: Any, x: Value, starts: list[int], ends: list[int], axes: list[int], steps: list[int]) -> Value:
    i64 = np.int64
    return ctx.one("slice", [x, ctx.const(np.asarray(starts, i64)), ctx.const(np.asarray(ends, i64)),
                             ctx.const(np.asarray(axes, i64)), ctx.const(np.asarray(steps, i64))])


@handles("StridedSlice", op="slice")
def _strided_slice(ctx: Any) -> list:
    """A slice over the input's axes, then the shrunk and new axes: a reshape to the output shape
    (the masks resolved against the input shape), or, where a dimension is unknown (the batch),
    a squeeze of the shrunk axes and an unsqueeze of the new ones."""
    shape = ctx.known_in(0)
    rank = len(shape)
    begin = [int(v) for v in np.asarray(ctx.ci(1, "begin")).reshape(-1)]
    end = [int(v) for v in np.asarray(ctx.ci(2, "end")).reshape(-1)]
    strides = [int(v) for v in np.asarray(ctx.ci(3, "strides")).reshape(-1)]
    bm, em, el, na, sh = (int(ctx.attr(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                                         "shrink_axis_mask"))
    n_spec = len(begin)
    real = sum(1 for i in range(n_spec) if not (na >> i) & 1 and not (el >> i) & 1)
    starts, ends, axes, steps = [], [], [], []
    out: list[int | None] = []
    shrunk: list[int] = []  # input axes
    new_at: list[int] = []  # output positions
    dim = 0
    big = np.iinfo(np.int64).max
    for i in range(n_spec):
        if (el >> i) & 1:
            out.extend(shape[dim:dim + rank - real])
            dim += rank - real
            continue
        if (na >> i) & 1:
            new_at.append(len(out))
            out.append(1)
            continue
        st, size = strides[i], shape[dim]
        if (sh >> i) & 1:
            if size is None:  # one element of an unknown dimension (the last one: to its end)
                b0, e0 = begin[i], (big if begin[i] == -1 else begin[i] + 1)
            else:
                b0 = begin[i] + size if begin[i] < 0 else begin[i]
                if not 0 <= b0 < size:
                    raise ctx.fail("bad_model", f"StridedSlice index {begin[i]} out of range for size {size}")
                e0 = b0 + 1
            starts.append(b0)
            ends.append(e0)
            steps.append(1)
            shrunk.append(dim)
        elif size is None:  # the bounds as given (a masked one: the start or the end)
            lo = (0 if st > 0 else -1) if (bm >> i) & 1 else begin[i]
            hi = (big if st > 0 else -big) if (em >> i) & 1 else end[i]
            out.append(None)
            starts.append(lo)
            ends.append(hi)
            steps.append(st)
        else:
            b0 = None if (bm >> i) & 1 else begin[i]
            e0 = None if (em >> i) & 1 else end[i]
            lo, hi, _ = slice(b0, e0, st).indices(size)
            out.append(len(range(lo, hi, st)))
            starts.append(lo)
            ends.append(hi if hi >= 0 else -big)
            steps.append(st)
        axes.append(dim)
        dim += 1
    out.extend(shape[dim:])

    def whole(j: int) -> bool:
        n = shape[axes[j]]
        return starts[j] == 0 and steps[j] == 1 and (ends[j] == big or n is not None and ends[j] >= n)

    keep = [j for j in range(len(axes)) if not whole(j)]
    x = ctx.x(0)
    if keep:
        x = _slice_of(ctx, x, [starts[j] for j in keep], [ends[j] for j in keep], [axes[j] for j in keep],
                      [steps[j] for j in keep])
    if not shrunk and not new_at:
        return [x]
    if None not in out:
        return [ctx.one("reshape", [x, ctx.const(np.asarray(out, np.int64))])]
    if shrunk:
        x = ctx.one("squeeze", [x, ctx.const(np.asarray(shrunk, np.int64))])
    if new_at:
        x = ctx.one("unsqueeze", [x, ctx.const(np.asarray(new_at, np.int64))])
    return [x]


@handles("GatherV2", op="gather")
def _gather(ctx: Any) -> list:
    if int(ctx.attr("batch_dims", 0)):
        raise ctx.fail("unsupported_attribute_value", "GatherV2 with batch_dims")
    axis = int(np.asarray(ctx.ci(2, "axis")))
    return [ctx.one("gather", [ctx.x(0), ctx.x(1)], {"axis": axis})]


@handles("Pad", "PadV2", "MirrorPad", op="pad")
def _pad(ctx: Any) -> list:
    p = np.asarray(ctx.ci(1, "paddings"), dtype=np.int64).reshape(-1, 2)
    pads = ctx.const(np.concatenate([p[:, 0], p[:, 1]]))
    ins = [ctx.x(0), pads]
    attrs: dict[str, Any] = {}
    if ctx.type == "PadV2":
        ins.append(ctx.x(2))
    if ctx.type == "MirrorPad":
        mode = ctx.attr("mode")
        if mode != "REFLECT":
            raise ctx.fail("unsupported_attribute_value", f"MirrorPad mode {mode} (only REFLECT has an IR form)")
        attrs["mode"] = "reflect"
    return [ctx.one("pad", ins, attrs)]


@handles("ReverseV2", op="slice")
def _reverse(ctx: Any) -> list:
    """A reversal is a slice with step -1 (read as the IR's slice: every target has it)."""
    rank = len(ctx.known_in(0))
    axes = [int(a) % rank for a in np.asarray(ctx.ci(1, "axis")).reshape(-1)]
    if not axes:
        return [ctx.x(0)]
    big = np.iinfo(np.int64).max
    return [_slice_of(ctx, ctx.x(0), [-1] * len(axes), [-big] * len(axes), axes, [-1] * len(axes))]


@handles("SpaceToBatchND", op="reshape")
def _space_to_batch(ctx: Any) -> list:
    """pad → reshape [N, P1/b1, b1, ...] → transpose the blocks to the front → reshape (static shapes; ``blocks``)."""
    block = [int(v) for v in ctx.ci(1, "block_shape").reshape(-1)]
    pads = np.asarray(ctx.ci(2, "paddings"), np.int64).reshape(-1, 2)
    shape, free = _batch_as(ctx, 1)
    p = blocks.space_to_batch(shape, block, pads)
    split, out = list(p.split), list(p.out)
    if free:  # an unknown batch: -1 where the reshapes carry it
        split[0] = out[0] = -1
    x = ctx.x(0)
    if p.pads is not None:
        x = ctx.one("pad", [x, ctx.const(np.asarray(p.pads, np.int64))])
    x = ctx.one("reshape", [x, ctx.const(np.asarray(split, np.int64))])
    x = ctx.transpose(x, p.perm)
    return [ctx.one("reshape", [x, ctx.const(np.asarray(out, np.int64))])]


def _batch_as(ctx: Any, size: int) -> tuple[list[int], bool]:
    """Input 0's dims with an unknown batch taken as ``size`` (and whether it was unknown); the
    other dims must be static."""
    s = ctx.known_in(0)
    return [size if s[0] is None else s[0], *ctx.static(s[1:], "non-batch dims")], s[0] is None


@handles("BatchToSpaceND", op="reshape")
def _batch_to_space(ctx: Any) -> list:
    """reshape [b1.., N, S1..] → interleave the blocks with the spatial axes → reshape → crop (``blocks``)."""
    block = [int(v) for v in ctx.ci(1, "block_shape").reshape(-1)]
    crops = np.asarray(ctx.ci(2, "crops"), np.int64).reshape(-1, 2)
    shape, free = _batch_as(ctx, int(np.prod(block)))
    p = blocks.batch_to_space(shape, block, crops)
    split, full = list(p.split), list(p.full)
    if free:  # an unknown batch: -1 where the reshapes carry it
        split[len(block)] = full[0] = -1
    x = ctx.one("reshape", [ctx.x(0), ctx.const(np.asarray(split, np.int64))])
    x = ctx.transpose(x, p.perm)
    x = ctx.one("reshape", [x, ctx.const(np.asarray(full, np.int64))])
    if p.crop is not None:
        starts, ends, axes = p.crop
        x = _slice_of(ctx, x, starts, ends, axes, [1] * len(axes))
    return [x]


@handles("Tile", op="tile")
def _tile(ctx: Any) -> list:
    return [ctx.one("tile", [ctx.x(0), ctx.const(np.asarray(ctx.ci(1, "multiples"), np.int64))])]


@handles("BroadcastTo", op="expand")
def _broadcast_to(ctx: Any) -> list:
    out = ctx.out_shape()
    if out is not None and None not in out:
        return [ctx.one("expand", [ctx.x(0), ctx.const(np.asarray(out, np.int64))])]
    shape = ctx.x(1)  # computed (an unknown batch): the shape operand itself
    if shape.type.dtype != "int64":
        shape = ctx.one("cast", [shape], {"to": _onnx_enum(np.int64)})
    return [ctx.one("expand", [ctx.x(0), shape])]


@handles("Shape", op="shape")
def _shape(ctx: Any) -> list:
    y = ctx.one("shape", [ctx.x(0)])
    if ctx.out_np_dtype() != np.int64:
        y = ctx.one("cast", [y], {"to": _onnx_enum(ctx.out_np_dtype())})
    return [y]


@handles("ResizeBilinear", "ResizeNearestNeighbor", op="resize")
def _resize(ctx: Any) -> list:
    shape = ctx.known_in(0)
    out = ctx.out_shape() or [None] * 4
    size = ctx.static(out[1:3], "output size")
    align = bool(ctx.attr("align_corners"))
    half = bool(ctx.attr("half_pixel_centers"))
    if ctx.type == "ResizeBilinear":
        attrs: dict[str, Any] = {"mode": "linear",
                                 "coordinate_transformation_mode": "align_corners" if align else
                                 "half_pixel" if half else "asymmetric"}
    else:
        attrs = {"mode": "nearest",
                 "coordinate_transformation_mode": "align_corners" if align else
                 "tf_half_pixel_for_nn" if half else "asymmetric",
                 "nearest_mode": "round_prefer_ceil" if align else "floor"}
    x = _nchw(ctx, ctx.x(0), 4)
    if shape[0] is not None and shape[3] is not None:
        sizes = ctx.const(np.asarray([shape[0], shape[3], *size], np.int64))
    else:  # an unknown batch: N, C as they come, H, W as TensorFlow computed them
        i64 = np.int64
        nc = ctx.one("slice", [ctx.one("shape", [x]), ctx.const(np.asarray([0], i64)), ctx.const(np.asarray([2], i64)),
                               ctx.const(np.asarray([0], i64))])
        sizes = ctx.one("concat", [nc, ctx.const(np.asarray(size, i64))], {"axis": 0})
    y = ctx.one("resize", [x, None, None, sizes], attrs)
    return [_nhwc(ctx, y, 4)]


@handles("Cumsum", op="cum_sum")
def _cumsum(ctx: Any) -> list:
    return [ctx.one("cum_sum", [ctx.x(0), ctx.x(1)], {"exclusive": int(bool(ctx.attr("exclusive"))),
                                                       "reverse": int(bool(ctx.attr("reverse")))})]


import importlib as _importlib  # noqa: E402

_importlib.import_module(f"{__package__}.tensorflow_rnn")  # registers the recurrent-loop handlers
