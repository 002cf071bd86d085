"""Shape and dtype inference, driven by the op's signature plus small Python rules.

* dtype: an output whose type variable is bound by an input takes that input's dtype;
  a type variable allowing exactly one dtype gives that dtype; ``cast``-like ops read
  their ``to`` attribute (an ONNX element type number, mapped through ``dtypes.yaml``).
* shape: multidirectional ops broadcast (numpy rules, symbolic dims allowed; a clash is
  a ``VerifyError`` naming the node and the two shapes), unidirectional ops keep the
  first input's shape after checking the second broadcasts to it, unary elementwise
  ops keep their input's shape, and ``SHAPE_RULES`` covers the rest it knows.
Known types (e.g. from the ONNX frontend's own shape inference) are kept; inferred
ones only fill gaps, and contradictions are reported by the verifier.
"""
from __future__ import annotations

import math

import numpy as np

from typing import Any, Callable

from ..table.errors import VerifyError
from .graph import Graph, Node, TensorType, Value
from ..table.loader import Tables, load_tables
from .gcpause import paused_gc

Dims = "tuple[int | str | None, ...]"
ShapeRule = Callable[[Node], "list[tuple | None]"]
SHAPE_RULES: dict[str, ShapeRule] = {}


def shape_rule(*ops: str) -> Callable[[ShapeRule], ShapeRule]:
    def deco(fn: ShapeRule) -> ShapeRule:
        for op in ops:
            SHAPE_RULES[op] = fn
        return fn

    return deco


def broadcast_shapes(a: tuple, b: tuple, node: Node | None = None) -> tuple:
    """Multidirectional (numpy) broadcasting of two shapes with symbolic dims."""
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            raise VerifyError("broadcast_mismatch", f"shapes {tuple(a)} and {tuple(b)} do not broadcast",
                              node=node.name if node else None, op=node.op if node else None)
        else:
            out.append(x if isinstance(x, int) else y if isinstance(y, int) else None)
    return tuple(reversed(out))


def _checked_axis(n: Node, axis: int, rank: int) -> int:
    """``axis`` normalized into [0, rank), or a VerifyError naming the node."""
    if not -rank <= axis < rank:
        raise VerifyError("bad_model", f"axis {axis} is out of range for rank {rank}", node=n.name, op=n.op)
    return axis + rank if axis < 0 else axis


def _const(v: Value | None) -> Any:
    return None if v is None else v.const


# ----------------------------------------------------------------------------- shape rules
@shape_rule("shape")
def _shape(n: Node) -> list:
    x = n.inputs[0]
    r = x.type.rank if x is not None else None
    if r is None:
        return [None]
    start = int(n.attrs.get("start", 0))
    end = int(n.attrs.get("end", r))
    start, end = (start + r if start < 0 else start), (end + r if end < 0 else end)
    return [(max(0, min(end, r) - max(0, start)),)]


@shape_rule("mean_variance_normalization", "lp_normalization", "layer_normalization", "instance_normalization",
            "batch_normalization", "group_normalization", "rms_normalization", "lrn", "softmax", "log_softmax",
            "hardmax", "cum_sum", "cum_prod", "clip", "dropout", "identity", "cast", "cast_like", "trilu",
            "scatter_elements", "scatter_nd", "reverse_sequence", "reverse")
def _same_as_first(n: Node) -> list:
    s = n.inputs[0].type.shape if n.inputs and n.inputs[0] is not None else None
    return [s] + [None] * (len(n.outputs) - 1)


@shape_rule("skip_layer_normalization", "skip_rms_normalization")
def _skip_normalization(n: Node) -> list:
    """output and the input + skip (+ bias) sum have the input's shape; mean and inv_std_var
    (training outputs, refused by the frontend) are left to the reference."""
    s = n.inputs[0].type.shape if n.inputs and n.inputs[0] is not None else None
    return [s, None, None, s][:len(n.outputs)]


@shape_rule("expand")
def _expand(n: Node) -> list:
    x, shp = n.inputs[0].type.shape, _const(n.inputs[1])
    if x is None or shp is None:
        return [None]
    return [broadcast_shapes(tuple(x), tuple(int(d) for d in shp.reshape(-1)), n)]


@shape_rule("size")
def _size(n: Node) -> list:
    return [()]


def _broadcast_dims(a: tuple, b: tuple) -> tuple:
    """Two shapes broadcast from the right: a static size other than 1 wins, then a symbol."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif isinstance(x, int) and not isinstance(y, int):
            out.append(x)
        elif isinstance(y, int) and not isinstance(x, int):
            out.append(y)
        else:
            out.append(x if isinstance(x, int) else None)
    return tuple(out)


@shape_rule("einsum")
def _einsum(n: Node) -> list:
    """An explicit equation (``bti,ih->bth``; ``...`` spans the dims no letter names, aligned
    from the right): each output letter takes its input dim, a static size where any input
    has one; implicit-output equations and unknown input ranks give None."""
    eq = str(n.attrs.get("equation", "")).replace(" ", "")
    if "->" not in eq:
        return [None]
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    shapes = [v.type.shape if v is not None else None for v in n.inputs]
    if len(terms) != len(shapes) or any(s is None for s in shapes):
        return [None]
    size: dict[str, Any] = {}
    ell: tuple = ()
    for term, shape in zip(terms, shapes):
        letters = term.replace("...", "")
        k = len(shape) - len(letters) if "..." in term else 0
        if k < 0 or ("..." not in term and len(term) != len(shape)):
            return [None]
        head = term.split("...")[0] if "..." in term else term
        dims = list(shape)
        if "..." in term:
            mid = tuple(dims[len(head):len(head) + k])
            ell = _broadcast_dims(ell, mid)
            dims = dims[:len(head)] + dims[len(head) + k:]
        for ch, d in zip(letters, dims):
            if not isinstance(size.get(ch), int) or size.get(ch) == 1:
                size[ch] = d if isinstance(d, int) or ch not in size else size[ch]
    parts = []
    rest = out
    while rest:
        if rest.startswith("..."):
            parts.extend(ell)
            rest = rest[3:]
        else:
            if rest[0] not in size:
                return [None]
            parts.append(size[rest[0]])
            rest = rest[1:]
    return [tuple(parts)]


@shape_rule("quantize_linear", "dequantize_linear")
def _quantize_linear(n: Node) -> list:
    """The data's shape (scale and zero point only broadcast over it)."""
    return [n.inputs[0].type.shape]


@shape_rule("qlinear_add", "qlinear_mul")
def _qlinear_binary(n: Node) -> list:
    """onnxruntime's QLinearAdd/QLinearMul: A (input 0) and B (input 3) broadcast."""
    a = n.inputs[0].type.shape if n.inputs and n.inputs[0] is not None else None
    b = n.inputs[3].type.shape if len(n.inputs) > 3 and n.inputs[3] is not None else None
    return [None] if a is None or b is None else [broadcast_shapes(tuple(a), tuple(b), n)]


@shape_rule("qlinear_sigmoid", "qlinear_leaky_relu")
def _qlinear_unary(n: Node) -> list:
    return [n.inputs[0].type.shape]


@shape_rule("qlinear_global_average_pool")
def _qlinear_global_pool(n: Node) -> list:
    """Every spatial axis pooled to 1: NCHW, or NHWC with ``channels_last``."""
    s = n.inputs[0].type.shape
    if s is None or len(s) < 3:
        return [None]
    if int(n.attrs.get("channels_last", 0) or 0):
        return [(s[0],) + (1,) * (len(s) - 2) + (s[-1],)]
    return [tuple(s[:2]) + (1,) * (len(s) - 2)]


@shape_rule("dynamic_quantize_linear")
def _dynamic_quantize_linear(n: Node) -> list:
    """y has x's shape; its scale and zero point are scalars."""
    return [n.inputs[0].type.shape, (), ()]


@shape_rule("transpose")
def _transpose(n: Node) -> list:
    s = n.inputs[0].type.shape
    if s is None:  # an input of unknown rank: a perm has exactly one entry per axis
        perm = n.attrs.get("perm")
        return [(None,) * len(perm) if perm else None]
    perm = n.attrs.get("perm") or list(range(len(s)))[::-1]
    if sorted(int(p) for p in perm) != list(range(len(s))):
        raise VerifyError("bad_model", f"perm {list(perm)} is not a permutation of the {len(s)} axes", node=n.name, op=n.op)
    return [tuple(s[p] for p in perm)]


@shape_rule("reshape")
def _reshape(n: Node) -> list:
    s, tgt = n.inputs[0].type.shape, _const(n.inputs[1])
    if tgt is None:  # a run-time shape: the entries known (a Concat of constants and run-time
        # parts, as exporters build it), else its length as the output's rank where that is known
        entries = _concat_entries(n.inputs[1])
        if entries is None:
            ls = n.inputs[1].type.shape if n.inputs[1] is not None else None
            return [tuple([None] * ls[0])] if ls is not None and len(ls) == 1 and isinstance(ls[0], int) else [None]
        tgt = entries
    tgt = [None if t is None else int(t) for t in (tgt.reshape(-1) if hasattr(tgt, "reshape") else tgt)]
    allow_zero = int(n.attrs.get("allowzero", 0))
    out: list = []
    for i, t in enumerate(tgt):
        if t == 0 and not allow_zero:  # 0 copies the input's dim: unknown while the input's shape is
            out.append(s[i] if s is not None and i < len(s) else None)
        else:
            out.append(t)
    if None in out:
        return [tuple(None if d == -1 else d for d in out)]
    if -1 in out:
        known = [d for d in out if d != -1]
        if s is not None and all(isinstance(d, int) for d in s) and all(isinstance(d, int) for d in known):
            total = 1
            for d in s:
                total *= d
            rest = 1
            for d in known:
                rest *= d
            out[out.index(-1)] = total // rest if rest else 0
        else:
            out[out.index(-1)] = None
    if s is not None and all(isinstance(d, int) and d >= 0 for d in list(s) + out):
        if math.prod(s) != math.prod(out):
            raise VerifyError("bad_model", f"cannot reshape {math.prod(s)} elements {tuple(s)} to {tuple(out)} "
                              f"({math.prod(out)} elements)", node=n.name, op=n.op)
    return [tuple(out)]


def _concat_entries(v: Value | None) -> list | None:
    """The entries of a 1-D shape operand built by ``concat`` of constant and run-time parts
    of static length: constants' values, None for a run-time entry; None when not so built."""
    p = v.producer if v is not None else None
    if p is None or p.op != "concat" or int(p.attrs.get("axis", 0)) not in (0, -1):
        return None
    out: list = []
    for part in p.inputs:
        shp = part.type.shape if part is not None else None
        if part is None or shp is None or len(shp) > 1 or (shp and not isinstance(shp[0], int)):
            return None
        if part.const is not None:
            out += [int(x) for x in part.const.reshape(-1)]
        else:
            out += [None] * (shp[0] if shp else 1)
    return out


@shape_rule("dft")
def _dft(n: Node) -> list:
    """ONNX DFT: the signal axis (default -2, counting the last (real, imaginary) dim) becomes
    ``dft_length`` long (else its own length), ``// 2 + 1`` bins one-sided; the last dim is 2,
    or 1 for the inverse one-sided (real) result, whose default length is ``2 (n - 1)``."""
    s = n.inputs[0].type.shape if n.inputs and n.inputs[0] is not None else None
    if s is None or len(s) < 2:
        return [None]
    axis = _const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] is not None else -2
    length = _const(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] is not None else None
    if axis is None or len(n.inputs) > 1 and n.inputs[1] is not None and length is None:
        return [tuple(None for _ in s)]
    ax = int(np.asarray(axis).reshape(-1)[0]) % len(s)
    inverse, onesided = int(n.attrs.get("inverse", 0)), int(n.attrs.get("onesided", 0))
    d = s[ax]
    if length is not None:
        d = int(np.asarray(length).reshape(-1)[0])
    elif inverse and onesided:
        d = 2 * (d - 1) if isinstance(d, int) else None
    if onesided and not inverse:
        d = d // 2 + 1 if isinstance(d, int) else None
    out = list(s)
    out[ax] = d
    out[-1] = 1 if inverse and onesided else 2
    return [tuple(out)]


@shape_rule("lstm", "gru", "rnn", "dynamic_quantize_lstm")
def _recurrent(n: Node) -> list:
    """ONNX recurrences: ``X`` is (seq, batch, input), or (batch, seq, input) with ``layout=1``;
    ``Y`` is (seq, dirs, batch, hidden) / (batch, seq, dirs, hidden), ``Y_h`` (and LSTM's
    ``Y_c``) (dirs, batch, hidden) / (batch, dirs, hidden)."""
    s = n.inputs[0].type.shape if n.inputs and n.inputs[0] is not None else None
    hidden = n.attrs.get("hidden_size")
    if s is not None and len(s) != 3:
        raise VerifyError("bad_model", f"the recurrent input X has rank {len(s)}; {n.op} takes rank 3",
                          node=n.name, op=n.op)
    if s is None or hidden is None:
        return [None] * len(n.outputs)
    dirs = 2 if n.attrs.get("direction", "forward") == "bidirectional" else 1
    h = int(hidden)
    if int(n.attrs.get("layout", 0)):
        b, t = s[0], s[1]
        outs = [(b, t, dirs, h), (b, dirs, h), (b, dirs, h)]
    else:
        t, b = s[0], s[1]
        outs = [(t, dirs, b, h), (dirs, b, h), (dirs, b, h)]
    return outs[:len(n.outputs)]


def _const_ints(v: Value | None) -> list[int] | None:
    c = _const(v)
    return None if c is None else [int(a) for a in c.reshape(-1)]


@shape_rule("unsqueeze")
def _unsqueeze(n: Node) -> list:
    s, axes = n.inputs[0].type.shape, _const_ints(n.inputs[1]) if len(n.inputs) > 1 else None
    if s is None or axes is None:
        return [None]
    r = len(s) + len(axes)
    at = {a + r if a < 0 else a for a in axes}
    rest = iter(s)
    return [tuple(1 if i in at else next(rest) for i in range(r))]


@shape_rule("squeeze")
def _squeeze(n: Node) -> list:
    s = n.inputs[0].type.shape
    axes = _const_ints(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] is not None else None
    if s is None or (axes is None and len(n.inputs) > 1 and n.inputs[1] is not None):
        return [None]
    if axes is None:
        if not all(isinstance(d, int) for d in s):
            return [None]
        return [tuple(d for d in s if d != 1)]
    at = {a + len(s) if a < 0 else a for a in axes}
    return [tuple(d for i, d in enumerate(s) if i not in at)]


@shape_rule("gather")
def _gather(n: Node) -> list:
    s, q = n.inputs[0].type.shape, n.inputs[1].type.shape
    if s is None or q is None:
        return [None]
    axis = _checked_axis(n, int(n.attrs.get("axis", 0)), len(s))
    return [tuple(s[:axis]) + tuple(q) + tuple(s[axis + 1:])]


@shape_rule("slice")
def _slice(n: Node) -> list:
    """ONNX clamps starts/ends like Python's slice does, so ``range(dim)[start:end:step]`` has the length."""
    s = n.inputs[0].type.shape
    opt = [n.inputs[i] if i < len(n.inputs) else None for i in range(1, 5)]
    starts, ends, axes, steps = (_const_ints(v) for v in opt)
    if s is None or starts is None or ends is None or any(v is not None and c is None
                                                          for v, c in zip(opt[2:], (axes, steps))):
        return [None]
    out = list(s)
    for i, (st, en) in enumerate(zip(starts, ends)):
        a = axes[i] if axes is not None else i
        a = a + len(s) if a < 0 else a
        step = steps[i] if steps is not None else 1
        out[a] = len(range(out[a])[st:en:step]) if isinstance(out[a], int) and step else None
    return [tuple(out)]


@shape_rule("flatten")
def _flatten(n: Node) -> list:
    """Always rank 2; a side with a symbolic dim is unknown (a dim of 0 makes it 0)."""
    s = n.inputs[0].type.shape
    if s is None:
        return [None]
    axis = int(n.attrs.get("axis", 1))
    axis = axis + len(s) if axis < 0 else axis

    def product(dims: tuple) -> int | None:
        if 0 in dims:
            return 0
        if not all(isinstance(d, int) for d in dims):
            return None
        out = 1
        for d in dims:
            out *= d
        return out

    return [(product(tuple(s[:axis])), product(tuple(s[axis:])))]


@shape_rule("matmul", "scaled_matmul", "matmul_integer_to_float")
def _matmul(n: Node) -> list:
    a, b = n.inputs[0].type.shape, n.inputs[1].type.shape
    if a is None or b is None:
        return [None]
    k_a, k_b = a[-1] if a else None, (b[0] if len(b) == 1 else b[-2]) if b else None
    if isinstance(k_a, int) and isinstance(k_b, int) and k_a != k_b:
        raise VerifyError("bad_model", f"contraction dimensions differ: {tuple(a)} @ {tuple(b)}", node=n.name, op=n.op)
    if len(a) == 1 and len(b) == 1:
        return [()]
    if len(a) == 1:
        return [tuple(b[:-2]) + (b[-1],)]
    if len(b) == 1:
        return [tuple(a[:-1])]
    batch = broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]), n)
    return [batch + (a[-2], b[-1])]


@shape_rule("gemm")
def _gemm(n: Node) -> list:
    a, b = n.inputs[0].type.shape, n.inputs[1].type.shape
    if a is None or b is None:
        return [None]
    m = a[1] if n.attrs.get("transA", 0) else a[0]
    k = b[0] if n.attrs.get("transB", 0) else b[1]
    return [(m, k)]


@shape_rule("reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1", "reduce_l2",
            "reduce_log_sum", "reduce_log_sum_exp", "reduce_sum_square")
def _reduce(n: Node) -> list:
    s = n.inputs[0].type.shape
    axes_v = _const(n.inputs[1]) if len(n.inputs) > 1 else None
    if s is None or (len(n.inputs) > 1 and n.inputs[1] is not None and axes_v is None):
        return [None]
    keep = int(n.attrs.get("keepdims", 1))
    if axes_v is None or axes_v.size == 0:
        if int(n.attrs.get("noop_with_empty_axes", 0)):
            return [tuple(s)]
        axes = set(range(len(s)))
    else:
        axes = {int(a) + len(s) if int(a) < 0 else int(a) for a in axes_v.reshape(-1)}
    return [tuple((1 if i in axes else d) for i, d in enumerate(s) if keep or i not in axes)]


@shape_rule("arg_max", "arg_min")
def _arg(n: Node) -> list:
    s = n.inputs[0].type.shape
    if s is None:
        return [None]
    axis = int(n.attrs.get("axis", 0))
    axis = axis + len(s) if axis < 0 else axis
    keep = int(n.attrs.get("keepdims", 1))
    return [tuple((1 if i == axis else d) for i, d in enumerate(s) if keep or i != axis)]


@shape_rule("concat")
def _concat(n: Node) -> list:
    shapes = [v.type.shape for v in n.inputs if v is not None]
    if not shapes or any(s is None for s in shapes):
        return [None]
    r = len(shapes[0])
    axis = _checked_axis(n, int(n.attrs.get("axis", 0)), r)
    total: Any = 0
    for s in shapes:
        total = total + s[axis] if isinstance(total, int) and isinstance(s[axis], int) else None
    out = list(shapes[0])
    out[axis] = total
    return [tuple(out)]


def _spatial_out(size: Any, k: Any, stride: int, dil: int, pad: int, ceil: bool = False) -> Any:
    if not isinstance(size, int) or not isinstance(k, int):  # a computed weight may have symbolic dims
        return None
    eff = (k - 1) * dil + 1
    num = size + pad - eff
    return (-(-num // stride) if ceil else num // stride) + 1


#: a convolution and its activation in one op (onnxruntime's FusedConv)
FUSED_CONVS = ("conv_relu", "conv_tanh", "conv_sigmoid", "conv_leaky_relu", "conv_clip", "conv_hard_sigmoid")


@shape_rule("conv", "max_pool", "average_pool", "lp_pool", "qlinear_conv", "conv_integer", *FUSED_CONVS)
def _conv(n: Node) -> list:
    x = n.inputs[0].type.shape
    if x is None:
        return [None] * len(n.outputs)
    sp = len(x) - 2
    if n.op in ("conv", "qlinear_conv", "conv_integer", *FUSED_CONVS):
        w = n.inputs[3 if n.op == "qlinear_conv" else 1].type.shape
        if w is None:
            return [None]
        kernel, channels = list(w[2:]), w[0]
        group = int(n.attrs.get("group", 1))
        if len(x) > 1 and len(w) > 1 and isinstance(x[1], int) and isinstance(w[1], int) and x[1] != w[1] * group:
            raise VerifyError("bad_model", f"input channels {x[1]} are not weight channels {w[1]} x group {group}",
                              node=n.name, op=n.op)
    else:
        kernel, channels = list(n.attrs.get("kernel_shape", [])), x[1]
    if len(kernel) != sp:
        if kernel and sp >= 0:  # a 1-D kernel over a rank-4 input: no runtime runs it
            raise VerifyError("bad_model", f"a {len(kernel)}-D kernel over an input of rank {len(x)} "
                              f"({sp} spatial axes)", node=n.name, op=n.op)
        return [None] * len(n.outputs)
    if n.attrs.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):  # ceil(in / stride), whatever the kernel
        st = n.attrs.get("strides") or [1] * sp
        if len(st) != sp or any(int(v) < 1 for v in st):
            return [None] * len(n.outputs)
        same = tuple(-(-x[2 + i] // int(st[i])) if isinstance(x[2 + i], int) else None for i in range(sp))
        return [(x[0], channels) + same] * len(n.outputs)
    strides = n.attrs.get("strides") or [1] * sp
    dil = n.attrs.get("dilations") or [1] * sp
    pads = n.attrs.get("pads") or [0] * (2 * sp)
    if len(strides) != sp or len(dil) != sp or len(pads) != 2 * sp:
        raise VerifyError("bad_model", f"strides {list(strides)}, dilations {list(dil)} and pads {list(pads)} do not "
                          f"fit {sp} spatial axes", node=n.name, op=n.op)
    if any(int(v) < 1 for v in list(strides) + list(dil)):
        raise VerifyError("bad_model", f"strides {list(strides)} and dilations {list(dil)} must be positive",
                          node=n.name, op=n.op)
    if any(abs(int(v)) > 2 ** 31 - 1 for v in list(strides) + list(dil) + list(pads) + list(kernel) if isinstance(v, int)):
        raise VerifyError("unsupported_attribute_value", f"strides {list(strides)}, dilations {list(dil)}, pads "
                          f"{list(pads)} or kernel {list(kernel)} beyond int32, which the runtimes use for them",
                          node=n.name, op=n.op)
    ceil = bool(n.attrs.get("ceil_mode", 0))
    dims = tuple(_spatial_out(x[2 + i], kernel[i], strides[i], dil[i], pads[i] + pads[i + sp], ceil) for i in range(sp))
    return [(x[0], channels) + dims] * len(n.outputs)


@shape_rule("qlinear_average_pool")
def _qlinear_average_pool(n: Node) -> list:
    """An average pool's shape over NCHW; NHWC (``channels_last``) is left unknown."""
    return [None] if int(n.attrs.get("channels_last", 0) or 0) else _conv(n)


@shape_rule("split")
def _split(n: Node) -> list:
    """Parts along ``axis``: the ``split`` sizes when constant, else equal parts (the last
    one smaller when the size does not divide, as ONNX 18's ``num_outputs``)."""
    s = n.inputs[0].type.shape
    k = len(n.outputs)
    if s is None or k == 0:
        return [None] * k
    axis = _checked_axis(n, int(n.attrs.get("axis", 0)), len(s))
    sizes = _const(n.inputs[1]) if len(n.inputs) > 1 and n.inputs[1] is not None else None
    if len(n.inputs) > 1 and n.inputs[1] is not None and sizes is None:
        return [None] * k
    d = s[axis]
    if sizes is not None:
        parts = [int(x) for x in sizes.reshape(-1)]
        if len(parts) != k:
            return [None] * k
    elif isinstance(d, int):
        each = -(-d // k)
        parts = [min(each, max(d - each * i, 0)) for i in range(k)]
    else:
        return [tuple(None if i == axis else x for i, x in enumerate(s))] * k
    return [tuple(p if i == axis else x for i, x in enumerate(s)) for p in parts]


@shape_rule("conv_transpose")
def _conv_transpose(n: Node) -> list:
    """ONNX ConvTranspose: ``output_shape`` when given; SAME_* pads: input x stride; else
    stride (in - 1) + output_padding + (k - 1) dilation + 1 - pads."""
    x = n.inputs[0].type.shape
    w = n.inputs[1].type.shape if len(n.inputs) > 1 and n.inputs[1] is not None else None
    if x is None or w is None or len(w) != len(x):
        return [None]
    sp = len(x) - 2
    group = int(n.attrs.get("group", 1))
    channels = w[1] * group if isinstance(w[1], int) else None
    kernel = list(n.attrs.get("kernel_shape") or w[2:])
    strides = list(n.attrs.get("strides") or [1] * sp)
    dil = list(n.attrs.get("dilations") or [1] * sp)
    pads = list(n.attrs.get("pads") or [0] * (2 * sp))
    out_pad = list(n.attrs.get("output_padding") or [0] * sp)
    if any(len(a) != sp for a in (kernel, strides, dil, out_pad)) or len(pads) != 2 * sp:
        return [None]
    given = n.attrs.get("output_shape")
    auto = n.attrs.get("auto_pad", "NOTSET")
    dims: list[Any] = []
    for i in range(sp):
        d = x[2 + i]
        if given:
            dims.append(int(list(given)[-sp + i]))
        elif not isinstance(d, int) or not isinstance(kernel[i], int):
            dims.append(None)
        elif auto in ("SAME_UPPER", "SAME_LOWER"):
            dims.append(d * int(strides[i]))
        else:
            pad = 0 if auto == "VALID" else int(pads[i]) + int(pads[i + sp])
            dims.append(int(strides[i]) * (d - 1) + int(out_pad[i]) + (int(kernel[i]) - 1) * int(dil[i]) + 1 - pad)
    return [(x[0], channels) + tuple(dims)]


@shape_rule("global_average_pool", "global_max_pool", "global_lp_pool")
def _global_pool(n: Node) -> list:
    x = n.inputs[0].type.shape
    return [None if x is None else tuple(x[:2]) + (1,) * (len(x) - 2)]


# ----------------------------------------------------------------------------- driver
def _onnx_enum_to_dtype(tables: Tables) -> dict[int, str]:
    import onnx

    out: dict[int, str] = {}
    for d in tables.dtypes.values():
        c = d.backends.get("onnx")
        if c is not None and c.status == "native":
            for name in c.names:
                enum = name.rsplit(".", 1)[-1]
                if hasattr(onnx.TensorProto, enum):
                    out.setdefault(int(getattr(onnx.TensorProto, enum)), d.id)
    return out


@shape_rule("eye_like", "random_normal_like", "random_uniform_like")
def _like_first(n: Node) -> list:
    return [n.inputs[0].type.shape if n.inputs and n.inputs[0] is not None else None]


@shape_rule("affine_grid")
def _affine_grid(n: Node) -> list:
    """size [N, C, H, W] -> (N, H, W, 2); [N, C, D, H, W] -> (N, D, H, W, 3)."""
    size = _const(n.inputs[1]) if len(n.inputs) > 1 else None
    if size is None:
        return [None]
    dims = [int(d) for d in size.reshape(-1)]
    return [(dims[0], *dims[2:], len(dims) - 2)]


@shape_rule("center_crop_pad")
def _center_crop_pad(n: Node) -> list:
    s = n.inputs[0].type.shape
    shape = _const(n.inputs[1]) if len(n.inputs) > 1 else None
    if s is None or shape is None:
        return [None]
    target = [int(d) for d in shape.reshape(-1)]
    axes = [int(a) for a in n.attrs.get("axes") or range(len(target))]
    out = list(s)
    for a, d in zip(axes, target):
        out[a + len(s) if a < 0 else a] = d
    return [tuple(out)]


@shape_rule("pad")
def _pad(n: Node) -> list:
    """Each padded dim grows by its begin + end pads (negative pads crop); pads ``[b1, …, e1, …]``
    over ``axes`` (all dims when omitted)."""
    s = n.inputs[0].type.shape
    pads = _const_ints(n.inputs[1]) if len(n.inputs) > 1 else None
    axes = _const_ints(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] is not None else None
    if s is None or pads is None or (len(n.inputs) > 3 and n.inputs[3] is not None and axes is None):
        return [None]
    axes = [a + len(s) if a < 0 else a for a in (axes if axes is not None else range(len(s)))]
    if len(pads) != 2 * len(axes):
        return [None]
    out = list(s)
    for i, a in enumerate(axes):
        b, e = pads[i], pads[i + len(axes)]
        # a symbolic dim padded by nothing stays itself (the batch of a pad on the last axis)
        out[a] = out[a] + b + e if isinstance(out[a], int) else (out[a] if b == 0 and e == 0 else None)
    return [tuple(out)]


@shape_rule("resize")
def _resize(n: Node) -> list:
    """Constant ``sizes`` give the shape (stretch policy); constant ``scales`` give
    ``floor(dim * scale)`` (ONNX), on ``axes`` (all when omitted); other dims are kept."""
    import math

    s = n.inputs[0].type.shape
    if s is None:
        return [None]
    r = len(s)
    axes = [int(a) % r for a in n.attrs["axes"]] if n.attrs.get("axes") is not None else list(range(r))
    out = list(s)
    sizes = _const(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] is not None else None
    if sizes is not None and sizes.size == len(axes) and str(n.attrs.get("keep_aspect_ratio_policy", "stretch")) == "stretch":
        for a, d in zip(axes, sizes.reshape(-1)):
            out[a] = int(d)
        return [tuple(out)]
    scales = _const(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] is not None else None
    if scales is not None and scales.size == len(axes) and (sizes is None or sizes.size == 0):
        for a, k in zip(axes, scales.reshape(-1)):
            d = s[a]
            out[a] = int(math.floor(d * float(k))) if isinstance(d, int) else (d if float(k) == 1.0 else None)
        return [tuple(out)]
    return [None]


def infer_node(node: Node, tables: Tables, enum_map: dict[int, str] | None = None) -> list[TensorType]:
    op = tables.ops.get(node.op)
    sig = op.signature if op else None
    shapes: list[Any] = [None] * len(node.outputs)
    dtypes: list[str | None] = [None] * len(node.outputs)
    if sig is not None:
        bound: dict[str, str] = {}
        k = 0
        for p in sig.inputs:
            vals = node.inputs[k:] if p.variadic else node.inputs[k:k + 1]
            k = len(node.inputs) if p.variadic else k + 1
            for v in vals:
                if v is not None and v.type.dtype is not None:
                    bound.setdefault(p.type, v.type.dtype)
        outs = list(sig.outputs[: len(node.outputs)])
        if sig.outputs and sig.outputs[-1].variadic:  # every output of a variadic tail (split's parts)
            outs += [sig.outputs[-1]] * (len(node.outputs) - len(outs))
        for i, p in enumerate(outs):
            if p.type in bound:
                dtypes[i] = bound[p.type]
            else:
                allowed = tables.expand_dtypes(sig.types.get(p.type, (p.type,)))
                if len(allowed) == 1:
                    dtypes[i] = allowed[0]
        # the output dtype attribute: Cast's "to"; EyeLike's / RandomNormal(Like)'s / RandomUniform(Like)'s "dtype"
        key = "to" if node.op == "cast" else "dtype"
        if node.attrs.get(key) is not None and node.op in ("cast", "eye_like", "random_normal", "random_uniform",
                                                          "random_normal_like", "random_uniform_like") and enum_map:
            to = node.attrs[key]
            dtypes[0] = enum_map.get(int(to) if not isinstance(to, str) else -1, dtypes[0])
        elif node.op in ("dequantize_linear", "quantize_linear") and dtypes[0] is None:
            # y's dtype: output_dtype when set, else the scale's (Dequantize) / the zero point's or uint8 (Quantize)
            odt = node.attrs.get("output_dtype")
            if odt and enum_map:
                dtypes[0] = enum_map.get(int(odt))
            elif node.op == "dequantize_linear" and len(node.inputs) > 1 and node.inputs[1] is not None:
                dtypes[0] = node.inputs[1].type.dtype
            elif node.op == "quantize_linear":
                zp = node.inputs[2] if len(node.inputs) > 2 else None
                dtypes[0] = zp.type.dtype if zp is not None else "uint8"
        elif node.op in ("eye_like", "random_normal_like", "random_uniform_like") and dtypes[0] is None \
                and node.inputs and node.inputs[0] is not None:
            dtypes[0] = node.inputs[0].type.dtype
    ins = [v for v in node.inputs if v is not None]
    if node.op in SHAPE_RULES:
        shapes = SHAPE_RULES[node.op](node)
    elif op is not None and op.broadcast == "multidirectional" and ins and all(v.type.shape is not None for v in ins):
        s: tuple = ()
        for v in ins:
            s = broadcast_shapes(s, tuple(v.type.shape), node)
        shapes = [s] * len(node.outputs)
    elif op is not None and op.broadcast == "unidirectional" and len(ins) >= 2 and all(v.type.shape is not None for v in ins[:2]):
        a, b = tuple(ins[0].type.shape), tuple(ins[1].type.shape)
        if broadcast_shapes(a, b, node) != a and len(b) <= len(a):
            raise VerifyError("broadcast_mismatch", f"shape {b} does not broadcast to {a} (unidirectional)",
                              node=node.name, op=node.op)
        shapes = [a] * len(node.outputs)
    elif op is not None and ins and len(node.outputs) == 1 and ("elementwise" in op.traits or "Activation" in op.categories) \
            and (sig is None or len([p for p in sig.inputs if not p.optional]) == 1):
        shapes = [ins[0].type.shape]
    return [TensorType(d, tuple(s) if s is not None else None) for d, s in zip(dtypes, shapes)]


def anonymous_dim(d: object) -> bool:
    """A dim of unknown size no other dim is known to share: None, ``?`` or ONNX's ``unk__N``."""
    return d is None or isinstance(d, str) and (d in ("", "?") or d.startswith("unk__"))


def named_dim(d: object) -> bool:
    """A symbolic dim with a name of its own (a model input's ``batch``), not an anonymous one."""
    return isinstance(d, str) and not anonymous_dim(d)


@paused_gc
def infer(graph: Graph, tables: Tables | None = None) -> None:
    """Fill unknown dtypes/shapes of node outputs in place (known ones are kept)."""
    tables = tables or load_tables()
    enum_map = None
    try:
        enum_map = _onnx_enum_to_dtype(tables)
    except ImportError:
        pass
    for node in graph.nodes:
        for sub in node.subgraphs():
            infer(sub, tables)
        try:
            inferred = infer_node(node, tables, enum_map)
        except VerifyError:
            raise
        except Exception as exc:  # noqa: BLE001 - invalid attributes/inputs (strides 0, perm out of range, ...)
            msg = " ".join(str(exc).split())[:300]
            raise VerifyError("bad_model", f"shape inference failed: {type(exc).__name__}" + (f": {msg}" if msg else ""),
                              node=node.name, op=node.op) from None
        for v, t in zip(node.outputs, inferred):
            if v.type.kind != "tensor":
                continue
            dtype = v.type.dtype or t.dtype
            shape = v.type.shape if v.type.shape is not None else t.shape
            if shape is not None and t.shape is not None and len(t.shape) != len(shape):
                shape = t.shape  # a declared rank the computation contradicts (a stale output declaration)
            elif v.type.shape is not None and t.shape is not None and len(t.shape) == len(shape):
                # a symbolic or unknown dim (e.g. ONNX inference's unk__0 behind a pad whose pads
                # were only folded later) takes the static size inferred now; an anonymous one
                # (None, unk__N) takes a named symbol inferred now (a Slice's kept batch dim); a static
                # size that the computation contradicts (a declared output [batch] typed (1,) once
                # batch is fixed, over a Squeeze that keeps 4 there) takes the computed one
                shape = tuple(k if not isinstance(d, int) and isinstance(k, int) or anonymous_dim(d) and named_dim(k)
                              or isinstance(d, int) and isinstance(k, int) and d != k else d
                              for d, k in zip(shape, t.shape))
            v.type = TensorType(dtype, shape)
