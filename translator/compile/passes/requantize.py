"""Requantize: quantized convolutions and fully connected layers in exact integer arithmetic.

A QDQ graph computes a quantized convolution as
``quantize(conv(dequantize(x_q, s_x, zp_x), dequantize(w_q, s_w), b), s_out, zp_out)``: the
float products and sums are rounded at every step, in an order each backend picks, so a value
near a rounding boundary of the final ``quantize`` lands on either side depending on the
backend (a one-step flip that later layers carry on). Integer kernels (LiteRT/XNNPACK's
``qs8`` convolutions) compute instead

    acc = sum((x_q - zp_x) * w_q) + b_q                  (int32, exact)
    y_q = clamp(round_half_even(float(acc) * m) + zp_out) (m = s_x * s_w / s_out in float32)

This pass rewrites the pattern into that form with float ops every backend computes the
same way: the operands as small integers in float32 (``dequantize_linear`` with scale 1, the
weights and the int32 bias as float constants), the convolution of them (exact: the
products are < 2^15 and the sums exact while they stay below 2^24), a clip to the int32 range
(a no-op that keeps graph optimizers from folding the product into the weights), one float32
product by ``m`` per output channel (IEEE-rounded, hence identical everywhere) and a ``quantize_linear``
with scale 1 (round half to even, the zero point, saturation). ``m`` is computed as XNNPACK
does, ``(s_x * s_w) / s_out`` in float32.

Matched: ``conv`` / ``gemm`` whose input is a per-tensor ``dequantize_linear`` of an 8-bit
tensor (through transposes/reshapes), whose weight is a ``dequantize_linear`` of an 8-bit
constant with zero point 0 (per tensor, or per axis along the output channels), whose bias
is absent or a ``dequantize_linear`` of an int32 constant with scale ``s_x * s_w``, and
whose only consumer chain (transposes, reshapes, relu) ends in a per-tensor
``quantize_linear``. Anything else is left as it is.

Two more 8-bit patterns get LiteRT's integer kernels: an ``average_pool`` with equal input and
output quantization (the raw sum over the in-bounds window, divided with rounding half away
from zero: a depthwise convolution by ones, ``sign``, ``abs``, ``floor``), and a
``hard_swish`` (a 256-entry table of TFLite's 16-bit fixed-point kernel, ``gather``-ed).
Last, every remaining per-tensor ``quantize_linear`` by a constant scale multiplies by the
float32 reciprocal instead of dividing (XNNPACK's float-to-int8 conversion; OpenVINO does so
anyway), so that all backends round the same product.

This pass is for models whose source runtime is LiteRT (the TFLite frontend runs it).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...ir.graph import Graph, Node, TensorType, Value

#: layout-only ops a per-tensor (de)quantization commutes with
_MOVES = ("transpose", "reshape")
#: the bias must carry the scale s_x * s_w (TFLite's int32 bias convention) within this
_BIAS_RTOL = 1e-5


def _const(v: Value | None) -> np.ndarray | None:
    return None if v is None or not v.is_const else np.asarray(v.const)


def _dq(v: Value | None) -> Node | None:
    p = None if v is None else v.producer
    return p if p is not None and p.op == "dequantize_linear" and not int(p.attrs.get("block_size", 0) or 0) else None


def _int8(v: Value | None) -> bool:
    return v is not None and v.type.dtype in ("int8", "uint8")


def _input_chain(v: Value) -> tuple[Node, list[Node]] | None:
    """The per-tensor dequantize_linear ``v`` comes from through layout-only ops (innermost first)."""
    chain: list[Node] = []
    while v.producer is not None and v.producer.op in _MOVES:
        chain.append(v.producer)
        v = v.producer.inputs[0]  # type: ignore[assignment]
        if v is None:
            return None
    d = _dq(v)
    if d is None or not _int8(d.inputs[0]):
        return None
    s, z = _const(d.inputs[1]), _const(d.inputs[2] if len(d.inputs) > 2 else None)
    if s is None or s.size != 1 or (len(d.inputs) > 2 and d.inputs[2] is not None and (z is None or z.size != 1)):
        return None
    return d, chain[::-1]


def _output_chain(g: Graph, y: Value) -> tuple[Node, list[Node]] | None:
    """The per-tensor quantize_linear ``y`` alone feeds through layout-only ops and relu."""
    chain: list[Node] = []
    v = y
    while True:
        if any(o is v for o in g.outputs) or len(v.uses) != 1:
            return None
        n, i = v.uses[0]
        if i != 0 or n.graph is not g:
            return None
        if n.op == "quantize_linear":
            s, z = _const(n.inputs[1]), _const(n.inputs[2] if len(n.inputs) > 2 else None)
            if s is None or s.size != 1 or z is None or z.size != 1 or z.dtype not in (np.int8, np.uint8):
                return None
            return n, chain
        if n.op not in _MOVES and n.op != "relu":
            return None
        chain.append(n)
        v = n.outputs[0]


def _params(d: Node) -> tuple[np.ndarray, np.ndarray]:
    s = _const(d.inputs[1]).astype(np.float32)  # type: ignore[union-attr]
    z = _const(d.inputs[2]) if len(d.inputs) > 2 and d.inputs[2] is not None else np.zeros_like(s, np.int64)
    return s, z.astype(np.int64)  # type: ignore[union-attr]


def _match(g: Graph, n: Node) -> dict[str, Any] | None:
    if n.op == "conv":
        if n.inputs[0] is None or n.inputs[0].type.rank is None:
            return None
    elif n.op == "gemm":
        if n.attrs.get("transA", 0) or float(n.attrs.get("alpha", 1.0)) != 1.0 or float(n.attrs.get("beta", 1.0)) != 1.0:
            return None
    else:
        return None
    x = _input_chain(n.inputs[0])  # type: ignore[arg-type]
    if x is None:
        return None
    dw = _dq(n.inputs[1])
    if dw is None or not _int8(dw.inputs[0]) or _const(dw.inputs[0]) is None:
        return None
    w = _const(dw.inputs[0])
    s_w, z_w = _params(dw)
    out_axis = 0 if n.op == "conv" or n.attrs.get("transB", 0) else 1
    if s_w.size != 1 and (int(dw.attrs.get("axis", 1)) % w.ndim != out_axis or s_w.size != w.shape[out_axis]):  # type: ignore[union-attr]
        return None
    if np.any(z_w != 0):
        return None
    s_x, z_x = _params(x[0])
    channels = w.shape[out_axis]  # type: ignore[union-attr]
    s_acc = (s_x.reshape(()) * s_w.reshape(-1)).astype(np.float32)  # XNNPACK: input_scale * kernel_scale
    b = None
    bv = n.inputs[2] if len(n.inputs) > 2 else None
    if bv is not None:
        db = _dq(bv)
        if db is None or db.inputs[0] is None or db.inputs[0].type.dtype != "int32" or _const(db.inputs[0]) is None:
            return None
        b = _const(db.inputs[0]).astype(np.int64).reshape(-1)  # type: ignore[union-attr]
        s_b, z_b = _params(db)
        if np.any(z_b != 0) or b.size != channels or np.any(np.abs(b) >= 2 ** 24):
            return None
        if not np.allclose(np.broadcast_to(s_b.reshape(-1), (channels,)), np.broadcast_to(s_acc, (channels,)),
                           rtol=_BIAS_RTOL, atol=0):
            return None
    q = _output_chain(g, n.outputs[0])
    if q is None:
        return None
    s_out, z_out = _params(q[0])
    m = (np.broadcast_to(s_acc, (channels,)) / s_out.reshape(())).astype(np.float32)
    return {"x": x, "w": w, "b": b, "m": m, "q": q[0], "z_out": z_out}


def _rewrite(g: Graph, n: Node, p: dict[str, Any]) -> None:
    dx, chain = p["x"]
    zx = dx.inputs[2] if len(dx.inputs) > 2 else None
    one = g.add_constant(f"{n.name}_unit_scale", np.asarray(1.0, np.float32), "float32")
    xin = dx.inputs[0]
    centered = g.add_node("dequantize_linear", [xin, one, zx] if zx is not None else [xin, one], {},
                          name=f"{n.name}/centered", types=[TensorType("float32", xin.type.shape)]).outputs[0]
    v = centered
    for c in chain:  # the same moves on the integer view
        v = g.add_node(c.op, [v, *c.inputs[1:]], dict(c.attrs), name=f"{c.name}/centered",
                       types=[TensorType("float32", c.outputs[0].type.shape)]).outputs[0]
    w = p["w"].astype(np.float32)
    ins: list[Value | None] = [v, g.add_constant(f"{n.name}_int_weight", w, "float32")]
    if p["b"] is not None:
        ins.append(g.add_constant(f"{n.name}_int_bias", p["b"].astype(np.float32), "float32"))
    old_x, old_w, old_b = n.inputs[0], n.inputs[1], n.inputs[2] if len(n.inputs) > 2 else None
    n._set_inputs(ins)
    y = n.outputs[0]
    r = y.type.rank or 2
    m = p["m"].reshape((-1,) + (1,) * (r - 2)) if n.op == "conv" else p["m"]
    uses = list(y.uses)
    # optimizers fold a product by a per-channel constant after a convolution into its weights
    # (onnxruntime's ConvMulFusion, OpenVINO's ConvolutionMultiplyFusion), which makes them
    # non-integers again: a no-op clip to the int32 accumulator's range stands between, and
    # the multiplier is the first operand
    acc = g.add_node("clip", [y, g.add_constant(f"{n.name}_acc_min", np.asarray(-2.0 ** 31, np.float32), "float32"),
                              g.add_constant(f"{n.name}_acc_max", np.asarray(2.0 ** 31, np.float32), "float32")], {},
                     name=f"{n.name}/accumulator", types=[TensorType("float32", y.type.shape)]).outputs[0]
    scaled = g.add_node("mul", [g.add_constant(f"{n.name}_requant_scale", np.ascontiguousarray(m), "float32"), acc], {},
                        name=f"{n.name}/requantize", types=[TensorType("float32", y.type.shape)]).outputs[0]
    for u, i in uses:
        u.replace_input(i, scaled)
    q = p["q"]
    old_s = q.inputs[1]
    q.replace_input(1, g.add_constant(f"{q.name}_unit_scale", np.asarray(1.0, np.float32), "float32"))
    for dead in (old_x, old_w, old_b, old_s):
        _drop(g, dead)


def _drop(g: Graph, v: Value | None) -> None:
    """The float views (dequantize_linear, the moves after it, their constants) nothing reads any more."""
    if v is None or v.uses or any(o is v for o in g.outputs):
        return
    p = v.producer
    if p is None:
        if v.is_const and g.constants.get(v.name) is v:
            del g.constants[v.name]
        return
    if p.graph is not g or p.op not in (*_MOVES, "dequantize_linear") or any(o.uses for o in p.outputs):
        return
    ins = list(p.inputs)
    g.remove_node(p)
    for i in ins:
        _drop(g, i)


def _pool_counts(n: Node, spatial: tuple[int, ...], out: tuple[int, ...]) -> np.ndarray:
    """How many input elements (padding excluded) each output position of ``n`` averages."""
    ks = [int(k) for k in n.attrs["kernel_shape"]]
    st = [int(x) for x in n.attrs.get("strides", [1] * len(ks))]
    pads = [int(x) for x in n.attrs.get("pads", [0] * 2 * len(ks))]
    per_axis = []
    for d, (size, o, k, s) in enumerate(zip(spatial, out, ks, st)):
        start = np.arange(o) * s - pads[d]
        per_axis.append(np.minimum(start + k, size) - np.maximum(start, 0))
    c = per_axis[0].astype(np.float64)
    for a in per_axis[1:]:
        c = np.multiply.outer(c, a)
    return c.reshape((1, 1) + tuple(out))


def _match_pool(g: Graph, n: Node) -> dict[str, Any] | None:
    """An 8-bit average pool with equal input and output quantization (LiteRT's integer kernel)."""
    if n.op != "average_pool" or int(n.attrs.get("ceil_mode", 0) or 0) or n.attrs.get("auto_pad", "NOTSET") != "NOTSET":
        return None
    x = _input_chain(n.inputs[0])  # type: ignore[arg-type]
    xs, ys = n.inputs[0].type.shape, n.outputs[0].type.shape  # type: ignore[union-attr]
    if x is None or xs is None or ys is None or len(xs) != 4 or not all(isinstance(d, int) for d in (*xs, *ys)):
        return None
    if any(int(d) != 1 for d in n.attrs.get("dilations", [1, 1])):
        return None
    q = _output_chain(g, n.outputs[0])
    if q is None or q[1] and any(c.op == "relu" for c in q[1]):
        return None
    s_x, z_x = _params(x[0])
    s_q, z_q = _params(q[0])
    if s_x.reshape(()) != s_q.reshape(()) or z_x.reshape(()) != z_q.reshape(()) \
            or x[0].inputs[0].type.dtype != q[0].outputs[0].type.dtype:
        return None
    if not int(n.attrs.get("count_include_pad", 0) or 0):
        counts = _pool_counts(n, tuple(xs[2:]), tuple(ys[2:]))
    else:
        counts = np.full((1, 1) + tuple(ys[2:]), float(np.prod(n.attrs["kernel_shape"])))
    return {"x": x, "q": q[0], "counts": counts, "channels": int(xs[1])}


def _rewrite_pool(g: Graph, n: Node, p: dict[str, Any]) -> None:
    """mean(q) rounded half away from zero as LiteRT's integer average pool does,
    ``(acc + count/2) / count`` with C's truncating division on the raw 8-bit sum: here
    ``sign(acc) * floor((|acc| + count//2 + 1/2) / count)`` (the extra half keeps an exact
    quotient away from the floor's step whichever way the division is rounded)."""
    dx, chain = p["x"]
    one = g.add_constant(f"{n.name}_unit_scale", np.asarray(1.0, np.float32), "float32")
    xin = dx.inputs[0]
    v = g.add_node("dequantize_linear", [xin, one], {}, name=f"{n.name}/raw",
                   types=[TensorType("float32", xin.type.shape)]).outputs[0]
    for c in chain:
        v = g.add_node(c.op, [v, *c.inputs[1:]], dict(c.attrs), name=f"{c.name}/raw",
                       types=[TensorType("float32", c.outputs[0].type.shape)]).outputs[0]
    y = n.outputs[0]
    ks = [int(k) for k in n.attrs["kernel_shape"]]
    ones = np.ones((p["channels"], 1, *ks), np.float32)
    attrs = {"kernel_shape": ks, "strides": list(n.attrs.get("strides", [1, 1])), "group": p["channels"],
             "pads": list(n.attrs.get("pads", [0, 0, 0, 0])), "dilations": [1, 1]}
    t = TensorType("float32", y.type.shape)

    def op(kind: str, ins: list[Value], tag: str, a: dict[str, Any] | None = None) -> Value:
        return g.add_node(kind, ins, a or {}, name=f"{n.name}/{tag}", types=[t]).outputs[0]

    def const(arr: np.ndarray, tag: str) -> Value:
        return g.add_constant(f"{n.name}_{tag}", np.ascontiguousarray(arr, np.float32), "float32")

    counts = p["counts"]
    acc = op("conv", [v, const(ones, "ones")], "sum", attrs)
    num = op("add", [op("abs", [acc], "magnitude"), const(np.floor(counts / 2) + 0.5, "half_count")], "rounding")
    r = op("mul", [op("sign", [acc], "sign"),
                   op("floor", [op("div", [num, const(counts, "count")], "divided")], "truncated")], "rounded")
    old_x = n.inputs[0]
    for u, i in list(y.uses):
        u.replace_input(i, r)
    q = p["q"]
    zero = g.add_constant(f"{q.name}_zero", np.zeros((), np.dtype(q.outputs[0].type.dtype)), q.outputs[0].type.dtype)
    old_params = list(q.inputs[1:])
    q._set_inputs([q.inputs[0], g.add_constant(f"{q.name}_unit_scale", np.asarray(1.0, np.float32), "float32"), zero])
    n._set_inputs([])
    g.remove_node(n)
    for dead in (old_x, *old_params):
        _drop(g, dead)


# ----------------------------------------------------------------------------- int8 hard swish
def _i16(v: int) -> int:
    return ((int(v) + 32768) % 65536) - 32768


def _quantize_multiplier(m: float) -> tuple[int, int]:
    """A real multiplier as a Q31 fixed-point value and a power-of-two exponent (frexp, the
    mantissa rounded half away from zero), as TFLite's ``QuantizeMultiplier``."""
    if m == 0.0:
        return 0, 0
    q, e = math.frexp(m)
    f = int(math.floor(abs(q) * (1 << 31) + 0.5)) * (1 if q >= 0 else -1)
    if f == 1 << 31:
        f, e = f // 2, e + 1
    if e < -31:
        e, f = 0, 0
    return f, e


def _to_q15(m32: int) -> int:
    return 32767 if m32 >= 2 ** 31 - 1 - (1 << 15) else (m32 + (1 << 15)) >> 16


def _rounding_high_mul(a: int, b: int) -> int:
    """int16 saturating rounding doubling high multiply (round half away from zero)."""
    if a == b == -32768:
        return 32767
    ab = a * b
    nudge = (1 << 14) if ab >= 0 else 1 - (1 << 14)
    return _i16(int((ab + nudge) / (1 << 15)))


def _high_mul(a: int, b: int) -> int:
    """int16 saturating doubling high multiply, truncating toward zero."""
    if a == b == -32768:
        return 32767
    return _i16(int((a * b) / (1 << 15)))


def _rounding_shift(x: int, e: int) -> int:
    mask = (1 << e) - 1
    return (x >> e) + (1 if (x & mask) > (mask >> 1) + (1 if x < 0 else 0) else 0)


def _saturating_shift(v: int, a: int) -> int:
    return max(-32768, min(32767, v * (1 << a)))


def hard_swish_table(s_in: float, zp_in: int, s_out: float, zp_out: int, lo: int, hi: int) -> np.ndarray:
    """LiteRT's 8-bit HARD_SWISH for every input ``lo..hi``: the 16-bit fixed-point kernel
    (the input on a 2^7 finer scale, the "relu-ish" factor in Q15 from [-3, 3] to [0, 1], a
    truncating product, a rounding shift to the output scale)."""
    hires = np.float32(np.float32(1.0 / 128.0) * np.float32(s_in))
    om, oe = _quantize_multiplier(float(np.float32(hires / np.float32(s_out))))
    rm, re_ = _quantize_multiplier(float(np.float32(hires / np.float32(3.0 / 32768.0))))
    om16, rm16 = _to_q15(om), _to_q15(rm)
    out = []
    for q in range(lo, hi + 1):
        x = _i16((q - zp_in) * 128)
        pre = _rounding_high_mul(x, om16)
        r = _saturating_shift(x, re_ - 1) if re_ > 0 else x
        r = _rounding_high_mul(r, rm16)
        if re_ > 0:
            r = _saturating_shift(r, 1)
        elif re_ < 0:
            r = _rounding_shift(r, -re_)
        r = (r + (1 << 15)) >> 1
        o = _rounding_shift(_high_mul(r, pre), -oe) + zp_out
        out.append(max(lo, min(hi, o)))
    return np.asarray(out, np.int64)


def _match_hard_swish(g: Graph, n: Node) -> dict[str, Any] | None:
    if n.op != "hard_swish":
        return None
    x = _input_chain(n.inputs[0])  # type: ignore[arg-type]
    q = _output_chain(g, n.outputs[0])
    if x is None or q is None or any(c.op == "relu" for c in q[1]):
        return None
    qdt = x[0].inputs[0].type.dtype
    if q[0].outputs[0].type.dtype != qdt:
        return None
    s_x, z_x = _params(x[0])
    s_q, z_q = _params(q[0])
    _, oe = _quantize_multiplier(float(np.float32(np.float32(np.float32(1.0 / 128.0) * s_x.reshape(())) / s_q.reshape(()))))
    if oe > 0:  # LiteRT refuses such a model (output_multiplier_exponent <= 0)
        return None
    info = np.iinfo(np.dtype(qdt))
    table = hard_swish_table(float(s_x.reshape(())), int(z_x.reshape(())), float(s_q.reshape(())), int(z_q.reshape(())),
                             int(info.min), int(info.max))
    return {"x": x, "q": q[0], "table": table, "lo": int(info.min), "z_out": int(z_q.reshape(()))}


def _rewrite_hard_swish(g: Graph, n: Node, p: dict[str, Any]) -> None:
    """The kernel's output for each of the 256 inputs, looked up: ``gather(table, q - min)``;
    the table holds ``out - zp_out`` so the quantization after it (scale 1) adds it back."""
    dx, chain = p["x"]
    xin = dx.inputs[0]
    dt = xin.type.dtype
    one = g.add_constant(f"{n.name}_unit_scale", np.asarray(1.0, np.float32), "float32")
    low = g.add_constant(f"{n.name}_table_start", np.asarray(p["lo"], np.dtype(dt)), dt)
    pos = g.add_node("dequantize_linear", [xin, one, low], {}, name=f"{n.name}/position",
                     types=[TensorType("float32", xin.type.shape)]).outputs[0]
    idx = g.add_node("cast", [pos], {"to": 7}, name=f"{n.name}/index",
                     types=[TensorType("int64", xin.type.shape)]).outputs[0]
    table = (p["table"] - p["z_out"]).astype(np.float32)
    v = g.add_node("gather", [g.add_constant(f"{n.name}_table", table, "float32"), idx], {"axis": 0},
                   name=f"{n.name}/lookup", types=[TensorType("float32", xin.type.shape)]).outputs[0]
    for c in chain:
        v = g.add_node(c.op, [v, *c.inputs[1:]], dict(c.attrs), name=f"{c.name}/lookup",
                       types=[TensorType("float32", c.outputs[0].type.shape)]).outputs[0]
    y = n.outputs[0]
    for u, i in list(y.uses):
        u.replace_input(i, v)
    q = p["q"]
    old_s = q.inputs[1]
    q.replace_input(1, g.add_constant(f"{q.name}_unit_scale", np.asarray(1.0, np.float32), "float32"))
    old_x = n.inputs[0]
    n._set_inputs([])
    g.remove_node(n)
    for dead in (old_x, old_s):
        _drop(g, dead)


def _by_reciprocal(g: Graph, n: Node) -> bool:
    """``quantize_linear(x, s, zp)`` (float32 x, constant per-tensor s != 1) as
    ``quantize_linear(mul(1/s, x), 1, zp)``: the product by the float32 reciprocal is what
    XNNPACK's float-to-int8 conversion computes and what OpenVINO turns a division by a
    constant into; as a multiplication every backend rounds it the same way."""
    s = _const(n.inputs[1])
    x = n.inputs[0]
    if s is None or s.size != 1 or s.dtype != np.float32 or float(s.reshape(())) in (0.0, 1.0) \
            or x is None or x.type.dtype != "float32" or n.attrs.get("precision") or n.attrs.get("block_size"):
        return False
    r = (np.float32(1.0) / s.reshape(())).astype(np.float32)
    m = g.add_node("mul", [g.add_constant(f"{n.name}_reciprocal", np.asarray(r, np.float32), "float32"), x], {},
                   name=f"{n.name}/reciprocal", types=[TensorType("float32", x.type.shape)]).outputs[0]
    old = n.inputs[1]
    n._set_inputs([m, g.add_constant(f"{n.name}_unit_scale", np.asarray(1.0, np.float32), "float32"), *n.inputs[2:]])
    _drop(g, old)
    return True


def run(g: Graph) -> int:
    """Rewrite every matching convolution / gemm of ``g``, then every per-tensor quantization
    by a constant scale; returns how many nodes changed."""
    done = 0
    for n in list(g.nodes):
        if n.graph is not g:
            continue
        p = _match(g, n)
        if p is not None:
            _rewrite(g, n, p)
            done += 1
            continue
        p = _match_pool(g, n)
        if p is not None:
            _rewrite_pool(g, n, p)
            done += 1
            continue
        p = _match_hard_swish(g, n)
        if p is not None:
            _rewrite_hard_swish(g, n, p)
            done += 1
    for n in list(g.nodes):
        if n.graph is g and n.op == "quantize_linear" and _by_reciprocal(g, n):
            done += 1
    if done:
        g.toposort()
    return done
