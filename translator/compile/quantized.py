"""What a quantized model's QDQ form says, read the same way by every writer that keeps it
quantized (OpenVINO's ``FakeQuantize``, TFLite's fake-quant ops for its int8 converter).

ONNX writes a quantized tensor as ``DequantizeLinear(x_q, scale, zero_point)``: an activation
as a ``QuantizeLinear``/``DequantizeLinear`` pair around a float value, a weight as a
``DequantizeLinear`` of an integer constant. Both are read here into the float range of the
integer grid (``[(q_min - z) s, (q_max - z) s]`` on ``q_max - q_min + 1`` levels), the
parameters a fake-quantization op takes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from ..ir.graph import Graph, Node, TensorType, Value
from .target import Option as _option

#: the integer range of each 8-bit quantized type
QRANGE8 = {"uint8": (0, 255), "int8": (-128, 127)}


def _scalar(v: Value | None, default: float | None = None) -> float | None:
    if v is None:
        return default
    if not v.is_const or np.asarray(v.const).size != 1:
        return None
    return float(np.asarray(v.const).reshape(-1)[0])


@dataclass(frozen=True)
class ActivationRange:
    """A per-tensor 8-bit QDQ pair: ``x`` (the float value quantized) on ``levels`` levels
    from ``low`` to ``high``; ``moves``: what moved the quantized values between the two, in
    order from the quantization: ``("reshape", static shape)`` (a QOperator model flattens its
    pooled int8 tensor) or ``("transpose", perm)`` (a channels-last source's, or the layout
    pass's, transpose of the integers). Each commutes with a per-tensor quantization: a writer
    applies them to the fake-quantized float value."""
    x: Value
    low: float
    high: float
    levels: int
    moves: tuple[tuple[str, tuple[int, ...]], ...] = ()


#: ops that only reshape (row-major order kept) and commute with per-tensor quantization
_RESHAPES = ("reshape", "flatten", "squeeze", "unsqueeze")


def _moves(v: Value) -> tuple[Node | None, tuple[tuple[str, tuple[int, ...]], ...] | None]:
    """The producer of ``v`` before the reshapes and transposes that lead to it, and those
    moves in order (consecutive reshapes as one); None for the moves where a reshape's shape
    or a transpose's perm is not known statically."""
    chain: list[tuple[str, tuple[int, ...]]] = []
    p = v.producer
    while p is not None and p.op in _RESHAPES + ("transpose",) and p.inputs and p.inputs[0] is not None:
        if p.op == "transpose":
            perm = p.attrs.get("perm")
            if perm is None:
                return p, None
            chain.append(("transpose", tuple(int(d) for d in perm)))
        else:
            shape = p.outputs[0].type.shape
            if shape is None or not all(isinstance(d, int) for d in shape):
                return p, None
            if not chain or chain[-1][0] != "reshape":  # (walking backwards: the later reshape wins)
                chain.append(("reshape", tuple(int(d) for d in shape)))
        p = p.inputs[0].producer
    return p, tuple(reversed(chain))


def activation_pair(node: Node) -> ActivationRange | None:
    """``node`` (a ``dequantize_linear``) as the second half of an activation's QDQ pair (the
    quantized values maybe reshaped or transposed between the two): the quantize of a float32
    value, both per tensor with the same constant 8-bit scale and zero point (what computes
    ``clamp(round(x / s), q_min - z, q_max - z) · s``), else None."""
    x = node.inputs[0] if node.op == "dequantize_linear" and node.inputs else None
    if x is None:
        return None
    q, moves = _moves(x)
    if moves is None:  # moved in a way not known statically: not rewritten
        return None
    if q is None or q.op != "quantize_linear" or int(q.attrs.get("block_size", 0) or 0) \
            or int(node.attrs.get("block_size", 0) or 0):
        return None
    dt = q.model_dtype()  # before a target's legalization
    if dt not in QRANGE8 or q.inputs[0] is None or q.inputs[0].type.dtype != "float32" \
            or node.outputs[0].type.dtype != "float32":
        return None
    s, s2 = _scalar(q.inputs[1]), _scalar(node.inputs[1])
    z = _scalar(q.inputs[2] if len(q.inputs) > 2 else None, 0.0)
    z2 = _scalar(node.inputs[2] if len(node.inputs) > 2 else None, 0.0)
    if None in (s, s2, z, z2) or s != s2 or z != z2 or not s > 0 or not np.isfinite([s, z]).all():  # type: ignore[operator]
        return None  # (onnxruntime's calibration writes an infinite scale for a range that reaches ±inf or ±FLT_MAX)
    lo, hi = QRANGE8[dt]
    low, high = exact_range(float(s), float(z), lo, hi)  # type: ignore[arg-type]
    return ActivationRange(q.inputs[0], low, high, hi - lo + 1, moves)


def exact_range(scale: float, zero_point: float, q_min: int, q_max: int) -> tuple[float, float]:
    """The float32 (min, max) of a fake-quant range from which a converter that derives the
    quantization again (``scale = (max - min) / (q_max - q_min)`` in double, stored as float32;
    ``zero point = round(q_min - min / scale)``: TensorFlow's, OpenVINO's) gets back exactly
    ``scale`` and ``zero_point``: ``(q - z) · s`` rounded to float32 can land a unit in the last
    place off, and a scale one ulp off moves the requantization of every layer after it (a
    full-int8 EfficientNetV2 drifted 4 steps). The nearest float32 pair that reproduces both,
    else the plain one."""
    f32 = np.float32
    s32 = f32(scale)
    base_lo, base_hi = f32((q_min - zero_point) * scale), f32((q_max - zero_point) * scale)

    def ok(a: np.float32, b: np.float32) -> bool:
        sc = (float(b) - float(a)) / (q_max - q_min)
        return f32(sc) == s32 and round(q_min - float(a) / sc) == zero_point

    def moved(x: np.float32, k: int) -> np.float32:  # ``x`` k units in the last place up (k < 0: down)
        for _ in range(abs(k)):
            x = f32(np.nextafter(x, f32(np.inf if k > 0 else -np.inf)))
        return x

    steps = sorted(((i, j) for i in range(-3, 4) for j in range(-3, 4)), key=lambda ij: abs(ij[0]) + abs(ij[1]))
    for i, j in steps:  # (0, 0) first: the plain bounds when they reproduce both
        a, b = moved(base_lo, i), moved(base_hi, j)
        if ok(a, b):
            return float(a), float(b)
    return float(base_lo), float(base_hi)


@dataclass(frozen=True)
class SymmetricWeight:
    """An int8 weight constant with zero points 0 and values in [-127, 127]: ``values``
    (float32, dequantized), per ``axis`` (None: per tensor) ``scales`` (the grid ±127 s)."""
    values: np.ndarray
    scales: np.ndarray
    axis: int | None


def symmetric_weight(node: Node) -> SymmetricWeight | None:
    """``node`` (a ``dequantize_linear``) of an int8 constant, symmetric (zero points 0, no
    -128: the narrow range integer kernels take), per tensor or along one axis; else None."""
    if node.op != "dequantize_linear" or not node.inputs or int(node.attrs.get("block_size", 0) or 0):
        return None
    x, s = node.inputs[0], node.inputs[1] if len(node.inputs) > 1 else None
    z = node.inputs[2] if len(node.inputs) > 2 else None
    stored = (node.meta.get("source_in_dtypes") or [x.type.dtype if x is not None else None])[0]  # before legalization
    if x is None or not x.is_const or s is None or not s.is_const or z is not None and not z.is_const:
        return None
    if stored != "int8":
        return None
    q = np.asarray(x.const)
    if q.dtype.kind not in "iu" or q.size == 0 or q.min() < -127 or q.max() > 127:
        return None
    if z is not None and np.any(np.asarray(z.const) != 0):
        return None
    scales = np.asarray(s.const, dtype=np.float32).reshape(-1)
    if not np.all(scales > 0):
        return None
    axis = None
    if scales.size > 1:
        axis = int(node.attrs.get("axis", 1)) % q.ndim
        if q.shape[axis] != scales.size:
            return None
    shape = [1] * q.ndim
    if axis is not None:
        shape[axis] = -1
    values = (q.astype(np.float32) * scales.reshape(shape)).astype(np.float32)
    return SymmetricWeight(values, scales, axis)


__all__ = ["QRANGE8", "ActivationRange", "activation_pair", "SymmetricWeight", "symmetric_weight", "LAYOUT_OPS",
           "adjacent_qdq", "uint8_activations", "is_quantized", "COMPUTE_OPS", "QuantizedOperands", "weight_only_model",
           "hybrid_as_weight_only",
           "quantized_operands"]


#: layout ops that commute with a per-tensor (de)quantization: they only move elements
LAYOUT_OPS = ("transpose", "reshape", "squeeze", "unsqueeze", "flatten")


def _stamp(node: Node) -> None:
    """An inserted node's dtypes as the pipeline records every node's (``source_dtypes``)."""
    node.meta["source_dtypes"] = [v.type.dtype for v in node.outputs]
    node.meta["source_in_dtypes"] = [v.type.dtype if v is not None else None for v in node.inputs]


def _qdq_pair(g: Graph, v: Value, scale: Value, zp: Value, name: str, before: Node | None = None) -> Value:
    """``dequantize_linear(quantize_linear(v, scale, zp), scale, zp)`` inserted into ``g`` (in
    ``zp``'s dtype; nodes ``{name}q`` and ``{name}dq``): ``v`` on the grid again, for a writer
    that matches Q/DQ pairs. The caller moves ``v``'s readers to the returned value."""
    q = g.add_node("quantize_linear", [v, scale, zp], {}, name=f"{name}q",
                   types=[TensorType(zp.type.dtype, v.type.shape)], before=before)
    dq = g.add_node("dequantize_linear", [q.outputs[0], scale, zp], {}, name=f"{name}dq", types=[v.type],
                    before=before)
    _stamp(q)
    _stamp(dq)
    return dq.outputs[0]


def adjacent_qdq(g: Graph) -> int:
    """Every layout op next to a per-tensor QDQ pair gets the pair on both sides, the form
    onnxruntime's own quantizer writes (``DequantizeLinear → Transpose → QuantizeLinear``, same
    scale and zero point) and its optimizer reads: it drops such a pair around a data-movement
    op (the op then moves 8-bit values), pairs each Q with the DQ it feeds (its s8→u8 rewrite)
    and fuses a DQ that feeds a conv into ``QLinearConv``. Left as a channels-last source writes
    them, onnxruntime "propagates" a ``DequantizeLinear → Transpose → Conv`` chain into a new
    int8 ``QuantizeLinear`` that its s8→u8 rewrite breaks at opset 21+ (the model does not
    load), and never fuses the conv after ``QuantizeLinear → Transpose → DequantizeLinear``.
    Exact: a layout op moves values that are already on the grid. Returns the pairs added."""
    added = 0
    for node in list(g.nodes):
        if node.op not in LAYOUT_OPS or node.graph is not g or not node.inputs or node.inputs[0] is None:
            continue
        src = node.inputs[0].producer
        if src is None or src.op not in ("dequantize_linear", "quantize_linear"):
            continue
        scale, zp = src.inputs[1], src.inputs[2] if len(src.inputs) > 2 else None
        if _scalar(scale) is None or zp is None or _scalar(zp) is None:
            continue
        out = node.outputs[0]
        if src.op == "dequantize_linear":  # DQ → L → (not a Q): a Q → DQ pair after L
            if out.type.dtype != "float32" or any(u.op == "quantize_linear" for u in out.consumers()):
                continue
            uses = list(out.uses)
            paired = _qdq_pair(g, out, scale, zp, f"{node.name}_")
            for n_, i in uses:
                n_.replace_input(i, paired)
            if out in g.outputs:
                g.outputs = [paired if v is out else v for v in g.outputs]
                out.name, paired.name = f"{out.name}__inner", out.name
        else:  # Q → L → ...: a DQ before L, a Q after it (L moves float values)
            x = node.inputs[0]
            if x.type.dtype not in QRANGE8 or any(u.op != "dequantize_linear" for u in out.consumers()) \
                    or out in g.outputs:
                continue
            dq = g.add_node("dequantize_linear", [x, scale, zp], {}, name=f"{node.name}_dq",
                            types=[TensorType("float32", x.type.shape)], before=node)
            node.replace_input(0, dq.outputs[0])
            uses = list(out.uses)
            q = g.add_node("quantize_linear", [out, scale, zp], {}, name=f"{node.name}_q",
                           types=[TensorType(out.type.dtype, out.type.shape)])
            for n_, i in uses:
                n_.replace_input(i, q.outputs[0])
            out.type = TensorType("float32", out.type.shape)
            node.meta["source_dtypes"] = ["float32"]
            node.meta["source_in_dtypes"] = ["float32", *(node.meta.get("source_in_dtypes") or [None, None])[1:]]
            _stamp(q)
            _stamp(dq)
        added += 1
    g.toposort()
    return added


def uint8_activations(g: Graph) -> int:
    """int8 activations written as uint8: the same real values, each integer ``q + 128`` on
    zero point ``z + 128`` (exact). onnxruntime's integer kernels on x86 take u8 activations
    with s8 weights; its own s8→u8 rewrite only turns plain ``Q → DQ`` pairs around, so the
    convolution after an int8 model input, before an int8 model output or after a Q read by
    two DQs would stay float. Rewritten: every per-tensor int8 ``quantize_linear`` read only by
    dequantizations (both zero points moved); an int8 model input gets a uint8 ``Q → DQ`` pair
    after each dequantization of it, an int8 model output one before its quantization (the
    interface keeps its dtype). Weights (dequantized constants) stay int8. Returns the
    quantizations rewritten or added."""
    consts: dict[int, Value] = {}

    def shifted(zp: Value | None, name: str) -> Value:
        """The uint8 zero point of int8 zero point ``zp`` (one constant per value)."""
        z = int(_scalar(zp) or 0) if zp is not None else 0
        if z not in consts:
            consts[z] = g.add_constant(f"{name}_zp_u8", np.asarray(z + 128, np.uint8), "uint8")
        return consts[z]

    def per_tensor(n: Node) -> bool:
        return _scalar(n.inputs[1]) is not None and (len(n.inputs) < 3 or n.inputs[2] is None
                                                     or _scalar(n.inputs[2]) is not None)

    changed = 0
    for q in list(g.nodes):
        if q.op != "quantize_linear" or q.graph is not g or not per_tensor(q):
            continue
        out = q.outputs[0]
        if out.type.dtype != "int8":
            continue
        if any(v is out for v in g.outputs):  # the model's int8 output: a uint8 pair before its quantization
            u = _qdq_pair(g, q.inputs[0], q.inputs[1], shifted(q.inputs[2] if len(q.inputs) > 2 else None, q.name),
                          f"{q.name}_u8", before=q)
            q.replace_input(0, u)
            changed += 1
            continue
        dqs = out.consumers()
        if not dqs:
            continue
        with_zp = lambda n: len(n.inputs) > 2 and n.inputs[2] is not None  # noqa: E731
        if not with_zp(q) or any(u.op != "dequantize_linear" or u.graph is not g or not per_tensor(u)
                                 or not with_zp(u) for u in dqs):
            continue
        q.replace_input(2, shifted(q.inputs[2], q.name))
        out.type = TensorType("uint8", out.type.shape)
        q.meta["source_dtypes"] = ["uint8"]
        for dq in dqs:
            dq.replace_input(2, shifted(dq.inputs[2], dq.name))
        changed += 1
    for x in g.inputs:  # the model's int8 inputs: a uint8 pair after each dequantization
        if x.type.dtype != "int8":
            continue
        for dq in [u for u in x.consumers() if u.op == "dequantize_linear" and per_tensor(u) and len(u.inputs) > 2]:
            y = dq.outputs[0]
            uses = list(y.uses)
            u = _qdq_pair(g, y, dq.inputs[1], shifted(dq.inputs[2], dq.name), f"{dq.name}_u8")
            for n_, i in uses:
                n_.replace_input(i, u)
            changed += 1
    g.toposort()
    return changed


def is_quantized(graph: Graph) -> bool:
    """Whether the model computes on quantized tensors (QDQ pairs, QOperator or dynamic
    quantization ops, onnxruntime's quantized contrib ops), here or in a subgraph."""
    for n in graph.walk():
        if "quantize" in n.op or "_integer" in n.op or n.op.startswith(("qlinear_", "qgemm")):
            return True
    return False


#: the ops a quantized model computes in integer kernels where a target can (what the
#: report and ``Target.integer_kernels`` count): convolutions, matrix products
COMPUTE_OPS = ("conv", "conv_transpose", "gemm", "matmul", "qlinear_conv", "qlinear_matmul", "conv_integer",
               "matmul_integer", "matmul_integer_to_float", "qgemm")


@dataclass(frozen=True)
class QuantizedOperands:
    """What a compute node reads and writes in QDQ form: the activation's dequantization and
    whether it is the second half of a per-tensor 8-bit pair (``activation``), the weight's
    node reading an 8-bit constant (``weight``: its dequantization, native or decomposed,
    through layout ops), whether the output
    is quantized (``output``: read by a ``quantize_linear``, maybe through a ReLU/clip)."""
    activation: Node | None
    activation_pair: bool
    weight: Node | None
    output: bool


def _through_layout(v: Value | None) -> Node | None:
    p = v.producer if v is not None else None
    while p is not None and p.op in LAYOUT_OPS and p.inputs and p.inputs[0] is not None:
        p = p.inputs[0].producer
    return p


#: what a decomposed dequantization of a weight is made of (cast, zero point, scale)
_DEQUANT_OPS = ("dequantize_linear", "cast", "sub", "mul")


def _weight_source(v: Value | None) -> Node | None:
    """The node that reads an 8-bit constant to compute ``v`` through layout ops and a
    dequantization (native, or decomposed into cast / sub / mul), or None."""
    p = v.producer if v is not None else None
    for _ in range(8):
        if p is None or p.op not in LAYOUT_OPS + _DEQUANT_OPS:
            return None
        stored = p.meta.get("source_in_dtypes") or [x.type.dtype if x is not None else None for x in p.inputs]
        for x, dt in zip(p.inputs, stored):
            if x is not None and x.is_const and dt in QRANGE8 and np.asarray(x.const).size > 1:
                return p
        nxt = next((x for x in p.inputs if x is not None and not x.is_const), None)
        p = nxt.producer if nxt is not None else None
    return None


def quantized_operands(node: Node) -> QuantizedOperands:
    act = _through_layout(node.inputs[0]) if node.inputs else None
    act = act if act is not None and act.op == "dequantize_linear" and not act.inputs[0].is_const else None
    k = 3 if node.op in ("qlinear_conv", "qlinear_matmul") else 1  # the weight operand
    wv = node.inputs[k] if len(node.inputs) > k else None
    stored = (node.meta.get("source_in_dtypes") or [])[k:k + 1] or [wv.type.dtype if wv is not None else None]
    if wv is not None and wv.is_const and stored[0] in QRANGE8:
        w: Node | None = node  # an integer op written natively reads the 8-bit weight itself
    else:
        w = _weight_source(wv)
    out = False
    for u in node.outputs[0].consumers() if node.outputs else ():
        if u.op == "quantize_linear" or u.op in ("relu", "clip") and any(
                c.op == "quantize_linear" for c in u.outputs[0].consumers()):
            out = True
    return QuantizedOperands(act, act is not None and activation_pair(act) is not None, w, out)


#: ops whose 8-bit products onnxruntime runs as integer kernels as they are written
INTEGER_PRODUCT_OPS = ("qlinear_conv", "qlinear_matmul", "conv_integer", "matmul_integer", "matmul_integer_to_float",
                       "qgemm")


def integer_products(graph: Graph) -> bool:
    """Whether the model (any subgraph) has 8-bit products an integer kernel computes: an
    integer op, or a convolution / matrix product of a QDQ island (quantized activation and
    8-bit weight), which onnxruntime fuses into one."""
    for n in graph.walk():
        if n.op in INTEGER_PRODUCT_OPS:
            return True
        if n.op in COMPUTE_OPS:
            q = quantized_operands(n)
            if q.activation is not None and q.weight is not None:
                return True
    return False


#: the option every target that writes integer kernels takes (TFLite, OpenVINO): the QDQ
#: arithmetic in float ops, exact against the float evaluation (``convert`` falls back to it when
#: the integer kernels stray past the check)
FLOAT_QUANTIZATION = _option("--float-quantization", "float_quantization",
                             "a quantized (QDQ) model's arithmetic in float ops instead of int8 kernels "
                             "(exact against the float evaluation; convert falls back to it when the "
                             "int8 model fails the check)", action="store_true", default=False)


def hybrid_as_weight_only(g: Graph) -> int:
    """A dynamic-range ``.tflite``'s hybrid kernels read as float activations times int8
    weights: the TFLite frontend spells out LiteRT's run-time quantization of each hybrid
    kernel's input (its nodes carry ``ir.graph.HYBRID_ROUNDING``) so that a target computes what
    LiteRT computes; a target with such kernels of its own (LiteRT's hybrid kernels again) or
    none (OpenVINO's compressed-weight FullyConnected, Core ML's int8 weights) takes the input as
    it is instead, as ``dynamic_as_weight_only`` does for onnxruntime's dynamic quantization. The
    check holds the result to ``check.DYNAMIC_FACTOR`` times the source's own input rounding.
    Returns the inputs rewired."""
    return len(_unrounded_hybrid(g))


def _unrounded_hybrid(g: Graph) -> list[Node]:
    """``hybrid_as_weight_only``'s rewiring: the nodes that read a hybrid kernel's input
    rounding, each now reading the unrounded input (the rounding's nodes removed)."""
    from ..ir.graph import HYBRID_ROUNDING as HYBRID

    def source(v: Value) -> Value | None:
        seen, found, todo = set(), set(), [v]
        while todo:
            u = todo.pop()
            p = u.producer
            if p is None or not p.meta.get(HYBRID):
                if not u.is_const:
                    found.add(u)
                continue
            if id(p) in seen:
                continue
            seen.add(id(p))
            todo += [w for w in p.inputs if w is not None]
        return next(iter(found)) if len(found) == 1 else None

    done: list[Node] = []
    for n in list(g.nodes):
        if n.meta.get(HYBRID):
            continue
        for i, v in enumerate(list(n.inputs)):
            if v is not None and v.producer is not None and v.producer.meta.get(HYBRID):
                x = source(v)
                if x is not None:
                    n.replace_input(i, x)
                    done.append(n)
    if done:
        for n in reversed(list(g.nodes)):
            if n.meta.get(HYBRID) and all(not o.uses and o not in g.outputs for o in n.outputs):
                g.remove_node(n)
    return done


def hybrid_as_dynamic_integer(g: Graph) -> int:
    """A dynamic-range ``.tflite``'s hybrid convolutions and fully connected layers as
    onnxruntime's own dynamic quantization (what its ``quantize_dynamic`` writes), so that
    onnxruntime runs them as integer kernels as LiteRT does: ``DynamicQuantizeLinear(x) →
    ConvInteger / MatMulInteger(xq, Wq, zx, 0) → Cast → Mul(sx · sw) (+ bias)``, over the
    source's int8 weights (a fully connected layer's transposed now). onnxruntime quantizes the
    input per tensor to uint8 (half to even) where LiteRT quantizes per row or per batch item
    to int8 (half away from zero): the check holds the result to ``check.DYNAMIC_FACTOR``
    times the source's own input rounding, as for every target that quantizes activations its
    own way. A layer whose weights have non-zero zero points, a 2-D weight scale other than
    per tensor or per output, or a gemm with a scaled or transposed input stays the float
    product of its int8 weights. Returns the layers rewritten."""
    done = 0
    for n in _unrounded_hybrid(g):
        if n.op not in ("conv", "gemm") or n.graph is not g or len(n.inputs) < 2:
            continue
        x, wv = n.inputs[0], n.inputs[1]
        dq = wv.producer if wv is not None else None
        if (x is None or x.type.dtype != "float32" or dq is None or dq.op != "dequantize_linear" or len(dq.inputs) < 2
                or not all(v is not None and v.is_const for v in dq.inputs)):
            continue
        wq, sw = np.asarray(dq.inputs[0].const), np.asarray(dq.inputs[1].const, np.float32)
        zw = np.asarray(dq.inputs[2].const) if len(dq.inputs) > 2 else np.zeros((), wq.dtype)
        out = n.outputs[0].type.shape
        if wq.dtype != np.int8 or np.any(zw != 0) or out is None or (sw.size > 1 and sw.size != wq.shape[0]):
            continue
        conv = n.op == "conv"
        if conv:
            if wq.ndim != 4 or len(out) != 4:
                continue
            q = dq.inputs[0]
            shape = (1, sw.size, 1, 1) if sw.size > 1 else ()
        else:  # gemm(x, W [units, depth], b, transB=1): MatMulInteger over W transposed
            if (int(n.attrs.get("transB", 0)) != 1 or int(n.attrs.get("transA", 0)) != 0 or wq.ndim != 2
                    or float(n.attrs.get("alpha", 1.0)) != 1.0 or float(n.attrs.get("beta", 1.0)) != 1.0):
                continue
            q = g.add_constant(f"{n.name}_weight_t", np.ascontiguousarray(wq.T), "int8")
            shape = (sw.size,) if sw.size > 1 else ()
        f32 = lambda sh: TensorType("float32", sh)  # noqa: E731
        dql = g.add_node("dynamic_quantize_linear", [x], {}, outputs=3, name=f"{n.name}_input",
                         types=[TensorType("uint8", x.type.shape), f32(()), TensorType("uint8", ())], before=n)
        zero = g.add_constant(f"{n.name}_weight_zero_point", np.zeros((), np.int8), "int8")
        attrs = {k: v for k, v in n.attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads",
                                                           "strides")} if conv else {}
        mm = g.add_node("conv_integer" if conv else "matmul_integer", [dql.outputs[0], q, dql.outputs[2], zero], attrs,
                        name=f"{n.name}_integer", types=[TensorType("int32", out)], before=n)
        fl = g.add_node("cast", [mm.outputs[0]], {"to": 1}, name=f"{n.name}_sums", types=[f32(out)], before=n)
        scale = g.add_node("mul", [dql.outputs[1], g.add_constant(f"{n.name}_weight_scale", sw.reshape(shape), "float32")],
                           {}, name=f"{n.name}_scale", types=[f32(shape)], before=n)
        y = g.add_node("mul", [fl.outputs[0], scale.outputs[0]], {}, name=f"{n.name}_scaled", types=[f32(out)], before=n)
        added = [dql, mm, fl, scale, y]
        b = n.inputs[2] if len(n.inputs) > 2 else None
        if b is not None:
            if conv:  # per output channel: [1, C, 1, 1] against NCHW
                rs = g.add_node("reshape", [b, g.add_constant(f"{n.name}_bias_shape", np.array([1, -1, 1, 1], np.int64),
                                                              "int64")], {}, name=f"{n.name}_bias",
                                types=[f32((1, out[1], 1, 1))], before=n)
                added.append(rs)
                b = rs.outputs[0]
            y = g.add_node("add", [y.outputs[0], b], {}, name=f"{n.name}_biased", types=[f32(out)], before=n)
            added.append(y)
        for a in added:
            a.meta["decomposed_root"] = n.meta.get("decomposed_root", n.name)
            _stamp(a)
        g.replace_node(n, [y.outputs[0]])
        if all(not v.uses and v not in g.outputs for v in dq.outputs):
            g.remove_node(dq)
        done += 1
    if done:
        g.toposort()
    return done


def weight_only_model(g: Graph) -> int:
    """A model quantized in its weights only (a dynamic-range ``.tflite``: int8 constants
    behind dequantizations, float activations, no quantization of any activation): each such
    dequantization is marked ``weight_only``, as ``dynamic_as_weight_only`` marks onnxruntime's,
    so a writer keeps the weights int8 and its runtime's hybrid kernels quantize the
    activations (TFLite: the converter's dynamic-range quantization). A model that quantizes
    any activation is left alone (its weights belong to QDQ islands). Returns the weights marked."""
    nodes = list(g.walk())
    if any(n.op in ("quantize_linear", "dynamic_quantize_linear") for n in nodes) or any(
            n.op == "dequantize_linear" and n.inputs and n.inputs[0] is not None and not n.inputs[0].is_const
            for n in nodes):
        return 0
    done = 0
    for n in nodes:
        if n.op == "dequantize_linear" and n.inputs[0].type.dtype == "int8" and not n.meta.get("weight_only"):
            n.meta["weight_only"] = True
            done += 1
    return done


def dynamic_as_weight_only(g: Graph, products: tuple[str, ...] = ("matmul_integer", "conv_integer")) -> int:
    """onnxruntime's dynamic quantization of a MatMul, ``DynamicQuantizeLinear(x) → (xq, sx,
    zx)``, ``MatMulInteger(xq, Wq, zx, zw) → Cast(float) → Mul(·, sx · sw)``, rewritten as
    ``MatMul(x, DequantizeLinear(Wq, sw, zw))`` (a Conv's, ``ConvInteger``, likewise as a
    ``Conv`` with its attributes): the weight stays 8-bit (a weight-only QDQ
    island every writer stores as int8: Core ML's ``constexpr_affine_dequantize``; TFLite's
    converter then writes a hybrid FULLY_CONNECTED/BATCH_MATMUL with int8 weights, which
    quantizes its activations at run time as the source does), and the activation is no longer
    rounded to 8 bits by an emulation in float ops. For a target without dynamic-range integer
    kernels of its own: the result differs from onnxruntime's by the activation's quantization
    error, as the integer kernels of the target differ. ``products``: the ops read so. Returns
    the matmuls rewritten."""
    done = 0
    for mmi in list(g.nodes):
        if mmi.op not in products or mmi.graph is not g:
            continue
        conv = mmi.op == "conv_integer"
        ins = list(mmi.inputs) + [None] * (4 - len(mmi.inputs))
        a, w, za, zw = ins[:4]
        dql = a.producer if a is not None else None
        if dql is None or dql.op != "dynamic_quantize_linear" or dql.outputs[0] is not a:
            continue
        if za is not None and za is not dql.outputs[2]:
            continue
        if not w.is_const or w.type.dtype not in QRANGE8 or (zw is not None and not zw.is_const):
            continue
        if (w.type.rank not in (3, 4, 5) if conv else w.type.rank != 2) or zw is not None and zw.type.shape not in ((), (1,)):
            continue
        uses = mmi.outputs[0].consumers()
        bias = None
        if conv and len(uses) == 1 and uses[0].op == "add":  # a bias quantized at run time, added as int32
            bias = _run_time_int_bias(uses[0], mmi.outputs[0])
            uses = uses[0].outputs[0].consumers() if bias is not None else []
        if len(uses) != 1 or uses[0].op != "cast":
            continue
        cast = uses[0]
        muls = cast.outputs[0].consumers()
        if len(muls) != 1 or muls[0].op != "mul":
            continue
        mul = muls[0]
        scales = mul.inputs[1] if mul.inputs[0] is cast.outputs[0] else mul.inputs[0]
        sm = scales.producer
        if sm is None or sm.op != "mul" or dql.outputs[1] not in sm.inputs:
            continue
        sw = sm.inputs[1] if sm.inputs[0] is dql.outputs[1] else sm.inputs[0]
        if not sw.is_const or _scalar(sw) is None or (bias is not None and not _same_product(bias[1], scales)):
            continue
        x = dql.inputs[0]
        if zw is None:
            zw = g.add_constant(f"{mmi.name}_wzp", np.zeros((), np.dtype(w.type.dtype)), w.type.dtype)
        sw_f = sw if sw.type.shape == () else g.add_constant(f"{mmi.name}_wscale", np.array(_scalar(sw), np.float32),
                                                             "float32")
        dq = g.add_node("dequantize_linear", [w, sw_f, zw], {}, name=f"{mmi.name}_weight",
                        types=[TensorType("float32", w.type.shape)], before=mul)
        mm = g.add_node("conv" if conv else "matmul", [x, dq.outputs[0]] + ([bias[0]] if bias else []),
                        dict(mmi.attrs) if conv else {},
                        name=f"{mmi.name}_float", types=[TensorType("float32", mul.outputs[0].type.shape)], before=mul)
        dq.meta["weight_only"] = True  # a writer may store it as it likes (TFLite: dynamic-range int8)
        mm.meta["decomposed_root"] = mmi.meta.get("decomposed_root", mmi.name)  # report: the source's node
        _stamp(dq)
        _stamp(mm)
        g.replace_node(mul, [mm.outputs[0]])
        for n in [cast] + (bias[2] if bias else []) + [mmi, sm, dql]:
            if n.graph is g and all(not v.uses and v not in g.outputs for v in n.outputs):
                g.remove_node(n)
        done += 1
    if done:
        g.toposort()
    return done


#: the LSTM attributes ``DynamicQuantizeLSTM`` shares with ONNX LSTM
_LSTM_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
               "input_forget")


def _lstm_weight(g: Graph, node: Node, q: Value | None, scale: Value | None, zp: Value | None,
                 role: str) -> Value | None:
    """``DequantizeLinear`` of the int8 LSTM weight ``q`` (``[D, rows, 4H]``, stored transposed)
    in ONNX LSTM's layout ``[D, 4H, rows]``: the integers transposed now, one scale (and zero
    point) per direction along axis 0, or per gate column along axis 1 when there is one
    direction; two directions with a scale per column are the rows of ``[D * 4H, rows]``,
    reshaped back. None when the weight is not constant 8-bit integers or its scales are
    none of these."""
    if q is None or scale is None or not q.is_const or not scale.is_const or (zp is not None and not zp.is_const):
        return None
    w = np.asarray(q.const)
    if w.ndim != 3 or w.dtype not in (np.int8, np.uint8):
        return None
    d, cols = w.shape[0], w.shape[2]
    s = np.asarray(scale.const, np.float32)
    z = np.zeros(s.shape, w.dtype) if zp is None else np.asarray(zp.const)
    if z.dtype != w.dtype or z.size != s.size:
        return None
    wt = np.ascontiguousarray(w.transpose(0, 2, 1))
    shape = tuple(int(x) for x in wt.shape)
    if s.size == d:
        axis, s, z = 0, s.reshape(d), z.reshape(d)
    elif d == 1 and s.size == cols:
        axis, s, z = 1, s.reshape(cols), z.reshape(cols)
    elif s.size == d * cols:  # per column of each direction: the rows of [D * 4H, rows], reshaped back
        axis, s, z, wt = 0, s.reshape(-1), z.reshape(-1), wt.reshape(d * cols, -1)
    else:
        return None
    dtype = q.type.dtype
    dq = g.add_node("dequantize_linear",
                    [g.add_constant(f"{node.name}_{role}", wt, dtype),
                     g.add_constant(f"{node.name}_{role}_scale", s, "float32"),
                     g.add_constant(f"{node.name}_{role}_zero_point", z, dtype)],
                    {"axis": axis}, name=f"{node.name}_{role}",
                    types=[TensorType("float32", tuple(int(x) for x in wt.shape))], before=node)
    dq.meta["weight_only"] = True
    _stamp(dq)
    out = dq.outputs[0]
    if wt.shape != shape:
        rs = g.add_node("reshape", [out, g.add_constant(f"{node.name}_{role}_shape", np.array(shape, np.int64), "int64")],
                        {}, name=f"{node.name}_{role}_reshape", types=[TensorType("float32", shape)], before=node)
        _stamp(rs)
        out = rs.outputs[0]
    return out


def weight_only_dequantization(v: Value | None) -> Node | None:
    """The ``DequantizeLinear`` of constant integers, marked ``weight_only``, that computes
    weight ``v`` (perhaps through a reshape: ``dynamic_lstm_as_weight_only``'s LSTM weights);
    else None."""
    if v is None or v.producer is None or v.type.shape is None:
        return None
    p = v.producer
    if p.op == "reshape" and p.inputs[0] is not None and p.inputs[0].producer is not None:
        p = p.inputs[0].producer
    if p.op != "dequantize_linear" or not p.meta.get("weight_only") or len(p.inputs) < 3 \
            or not all(i is not None and i.is_const for i in p.inputs[:3]):
        return None
    return p


def weight_only_parts(v: Value | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Weight ``v`` of a ``weight_only_dequantization``: its integers, scales and zero points,
    each broadcast to the weight's shape (a writer that re-lays the weight out, a recurrence's
    gate blocks, keeps them 8-bit); else None."""
    p = weight_only_dequantization(v)
    if p is None:
        return None
    shape = v.type.shape  # type: ignore[union-attr]
    q = np.asarray(p.inputs[0].const)
    axis = int(p.attrs.get("axis", 1)) % max(q.ndim, 1)
    full = []
    for k in (1, 2):
        a = np.asarray(p.inputs[k].const)
        if a.size > 1:
            a = a.reshape([-1 if i == axis else 1 for i in range(q.ndim)])
        full.append(np.broadcast_to(a, q.shape).reshape(shape))
    return q.reshape(shape), full[0], full[1]


#: ops whose output holds values of their first input only (moved, selected or repeated)
_HOLDS_INPUT = LAYOUT_OPS + ("identity", "slice", "gather", "split", "expand", "tile", "depth_to_space",
                             "space_to_depth", "max_pool", "reduce_max", "reduce_min", "relu")
#: ops whose every output lies in [-1, 1]
_UNIT_RANGE = ("tanh", "sigmoid", "hard_sigmoid", "softsign", "softmax", "sin", "cos", "erf")
#: recurrences whose outputs Y and Y_h are (a convex mix of) tanh values when their
#: activations are the defaults and nothing clips
_RECURRENT = ("lstm", "gru", "rnn", "dynamic_quantize_lstm")


def proven_bound(v: Value | None, depth: int = 64) -> float | None:
    """A bound on ``|v|`` that the graph proves for every input of the model (a constant's
    largest magnitude; a dequantized 8-bit value's grid; ``[-1, 1]`` for tanh, sigmoid and the
    hidden states of a recurrence with its default activations; unchanged through ops that
    move, select or repeat values; the largest of a concatenation's parts), or None when the
    value depends on a model input in a way that bounds nothing (a writer that quantizes with a
    fixed range needs this: a value past it would be clipped)."""
    if v is None or depth <= 0:
        return None
    if v.is_const:
        return _array_bound(np.asarray(v.const))
    p = v.producer
    if p is None:
        return None
    if p.op in _UNIT_RANGE:
        return 1.0
    if p.op == "constant_of_shape":
        value = p.attrs.get("value")
        return 0.0 if value is None else _array_bound(np.asarray(value))
    if p.op in _HOLDS_INPUT:
        return proven_bound(p.inputs[0], depth - 1)
    if p.op == "concat":
        parts = [proven_bound(i, depth - 1) for i in p.inputs if i is not None]
        return None if not parts or None in parts else max(parts)  # type: ignore[type-var]
    if p.op == "clip" and len(p.inputs) >= 3 and all(i is not None and i.is_const for i in p.inputs[1:3]):
        return max(abs(float(np.asarray(i.const))) for i in p.inputs[1:3])  # type: ignore[union-attr]
    if p.op == "dequantize_linear" and len(p.inputs) >= 2 and p.inputs[1] is not None and p.inputs[1].is_const:
        q, zp = p.inputs[0], p.inputs[2] if len(p.inputs) > 2 else None
        if q is None or q.type.dtype not in ("int8", "uint8") or (zp is not None and not zp.is_const):
            return None
        info = np.iinfo(q.type.dtype)
        lo, hi = (float(np.asarray(q.const).min()), float(np.asarray(q.const).max())) if q.is_const \
            else (float(info.min), float(info.max))
        z = np.asarray(zp.const, np.float64) if zp is not None else np.zeros(1)
        return float(max(np.abs(lo - z).max(), np.abs(hi - z).max()) * np.abs(np.asarray(p.inputs[1].const)).max())
    if p.op in _RECURRENT and v in p.outputs[:2] and recurrence_is_plain(p):
        if p.op != "gru":  # LSTM: o * tanh(c); RNN: tanh
            return 1.0
        h0 = p.inputs[5] if len(p.inputs) > 5 else None  # GRU: a convex mix of tanh and the state before
        return 1.0 if h0 is None else (None if (b := proven_bound(h0, depth - 1)) is None else max(1.0, b))
    return None


def _array_bound(c: np.ndarray) -> float | None:
    """The largest magnitude in ``c`` (0 when empty); None for non-numbers and non-finite."""
    if c.dtype.kind not in "fiub" or not np.all(np.isfinite(c)):
        return None
    return float(np.abs(c.astype(np.float64)).max()) if c.size else 0.0


def recurrence_is_plain(node: Node) -> bool:
    """A recurrence with its default activations and no clipping (what integer LSTM kernels
    compute, and what bounds its hidden states by 1)."""
    acts = node.attrs.get("activations")
    default = {"lstm": ["sigmoid", "tanh", "tanh"], "dynamic_quantize_lstm": ["sigmoid", "tanh", "tanh"],
               "gru": ["sigmoid", "tanh"], "rnn": ["tanh"]}.get(node.op)
    if default is None or node.attrs.get("clip") is not None:
        return False
    if acts and [str(a).lower() for a in acts] != default * (len(acts) // len(default)):
        return False
    return not any(node.attrs.get(k) for k in ("activation_alpha", "activation_beta"))


def dynamic_lstm_as_weight_only(g: Graph) -> int:
    """onnxruntime's ``DynamicQuantizeLSTM`` rewritten as an ONNX ``LSTM`` over its weights
    dequantized (``DequantizeLinear`` of the int8 constants, marked ``weight_only``): the
    table's float form, but with the weights kept 8-bit for the writers that store weight-only
    QDQ islands as such (PyTorch's int8 buffers dequantized once at load, Core ML's
    ``constexpr_affine_dequantize``), and the recurrence on the target's own LSTM kernel instead
    of the exact loop (``compile/dq_lstm.py``) that rounds X and the hidden state at every step.
    The result differs from onnxruntime's by that rounding: the check holds it to
    ``check.DYNAMIC_FACTOR`` times the source's own, and ``convert`` writes the exact loop
    past that. Returns the nodes rewritten."""
    done = 0
    for n in list(g.nodes):
        if n.op != "dynamic_quantize_lstm" or n.graph is not g:
            continue
        ins = list(n.inputs) + [None] * (12 - len(n.inputs))
        if ins[0] is None or ins[0].type.dtype != "float32":
            continue
        w = _lstm_weight(g, n, ins[1], ins[8], ins[9], "W")
        r = _lstm_weight(g, n, ins[2], ins[10], ins[11], "R") if w is not None else None
        if r is None:
            while w is not None and w.producer is not None:  # the weight's nodes, unused
                p = w.producer
                w = p.inputs[0] if p.op == "reshape" else None
                g.remove_node(p)
            continue
        attrs = {k: n.attrs[k] for k in _LSTM_ATTRS if n.attrs.get(k) is not None}
        lin = [ins[0], w, r] + ins[3:8]
        while lin[-1] is None:
            lin.pop()
        lstm = g.add_node("lstm", lin, attrs, outputs=len(n.outputs), name=f"{n.name}_float",
                          types=[v.type for v in n.outputs], before=n)
        lstm.meta["decomposed_root"] = n.meta.get("decomposed_root", n.name)
        _stamp(lstm)
        g.replace_node(n, [o if old.uses or old in g.outputs else None
                           for o, old in zip(lstm.outputs, n.outputs)])
        done += 1
    return done


#: model metadata: how many of the source's run-time activation quantizations
#: ``dynamic_model_as_weight_only`` left unrounded (a writer reports ``dynamic_range`` in its
#: artifact's features, so ``convert`` writes the exact emulation when the check fails)
DYNAMIC_AS_WEIGHT_ONLY = "opbridge.dynamic_as_weight_only"
#: an artifact's metadata key (a writer whose artifact is the framework's own object: ONNX's
#: ``metadata_props``): its features, comma-separated (``dynamic_range``: convert's fallback)
FEATURES_METADATA = "opbridge.features"


def dynamic_range_features(model: Any) -> set[str]:
    """The artifact feature a writer records for a model ``dynamic_model_as_weight_only``
    rewrote: ``dynamic_range`` (``convert`` then falls back to the exact emulation when the
    check fails); else none."""
    return {"dynamic_range"} if (model.metadata or {}).get(DYNAMIC_AS_WEIGHT_ONLY) else set()


def dynamic_model_as_weight_only(model: Any, ctx: Any, lstm: bool = True,
                                 products: tuple[str, ...] = ("matmul_integer", "conv_integer")) -> int:
    """A target without the source's run-time activation quantization reads it as int8 weights
    and float activations, in every graph of ``model``: onnxruntime's dynamically quantized
    MatMul (``dynamic_as_weight_only``), a dynamic-range ``.tflite``'s hybrid kernels
    (``hybrid_as_weight_only``) and, with ``lstm``, onnxruntime's ``DynamicQuantizeLSTM``
    (``dynamic_lstm_as_weight_only``); ``products``: which of the integer products to read so (a
    target with an int8 GEMM keeps ``matmul_integer``). Nothing with the ``float_quantization`` option (the exact
    emulation). Counts the rewrites into the model's metadata (``DYNAMIC_AS_WEIGHT_ONLY``),
    re-infers the types and returns the count."""
    from ..ir.infer import infer

    if ctx.options.get("float_quantization"):
        return 0
    n = 0
    for g in [model.graph] + [sub for node in model.graph.walk() for sub in node.subgraphs()]:
        n += dynamic_as_weight_only(g, products) + hybrid_as_weight_only(g) + (dynamic_lstm_as_weight_only(g) if lstm else 0)
    if n:
        infer(model.graph, ctx.tables)
        model.metadata = {**(model.metadata or {}), DYNAMIC_AS_WEIGHT_ONLY: str(n)}
    return n


def _same_product(a: Value, b: Value) -> bool:
    """``a`` and ``b`` are the same value, or products of the same run-time value and equal
    constants (a quantizer that computes the scale product twice)."""
    if a is b:
        return True
    pa, pb = a.producer, b.producer
    if pa is None or pb is None or pa.op != "mul" or pb.op != "mul":
        return False
    run = [v for v in pa.inputs if v is not None and not v.is_const]
    consts = [v for v in pa.inputs if v is not None and v.is_const]
    other = [v for v in pb.inputs if v is not None and v.is_const]
    return (len(run) == 1 and run[0] in pb.inputs and len(consts) == 1 == len(other)
            and np.array_equal(np.asarray(consts[0].const), np.asarray(other[0].const)))


def _run_time_int_bias(add: Node, acc: Value) -> tuple[Value, Value, list[Node]] | None:
    """``add(acc, Reshape(Cast(Floor|Round(Div(B, s)))))``: onnxruntime's older dynamic
    quantization of a biased Conv, which quantizes the float bias ``B`` at run time with the
    product's scale ``s`` and adds it to the int32 accumulator. Returns (``B``, ``s``, the nodes
    from the add down to the division, to remove) when ``B`` is a constant vector; else None."""
    other = add.inputs[1] if add.inputs[0] is acc else add.inputs[0]
    chain, v = [add], other
    for op in ("reshape", "cast", ("floor", "round"), "div"):
        p = v.producer if v is not None else None
        if p is None or p.op not in ((op,) if isinstance(op, str) else op) or len(v.consumers()) != 1:
            return None
        chain.append(p)
        v = p.inputs[0]
    div = chain[-1]
    b = div.inputs[0]
    if not b.is_const or b.type.rank != 1 or b.type.dtype != "float32":
        return None
    scale = div.inputs[1].producer
    if scale is not None and scale.op == "mul" and len(div.inputs[1].consumers()) == 1:
        chain.append(scale)  # (its own product of the scales: removed with the rest)
    return b, div.inputs[1], chain


def _output_channel_axis(node: Node, i: int, rank: int) -> int | None:
    """The axis of its input ``i`` (a weight of rank ``rank``) along which ``node`` computes
    its output channels: a MatMul's last, a Conv's first, a Gemm's by ``transB``; else None."""
    if i != 1:
        return None
    if node.op == "matmul" and rank >= 2:
        return rank - 1
    if node.op == "conv":
        return 0
    if node.op == "gemm":
        return 0 if int(node.attrs.get("transB", 0) or 0) else 1
    return None


def scaled_int_weights(g: Graph) -> int:
    """A weight stored as 8-bit integers and scaled in float ops, ``Mul(Cast(Wq → float32),
    s)`` with constant ``Wq`` (int8/uint8) and ``s`` constant along at most one axis of ``Wq``
    (one scale, or one per row or column: how weight-only quantizers and torch.onnx write
    them), rewritten as ``DequantizeLinear(Wq, s, axis)``: the same float32 products, but a
    weight-only QDQ island that the folding targets store as 8-bit (OpenVINO's compressed
    weights, Core ML's ``constexpr_affine_dequantize``, PyTorch's int8 buffers) instead of
    folding it into a float32 constant four times its size. A scale per axis must lie along
    the output channels of every reader (a MatMul's last axis, a Conv's first): OpenVINO 2026.4
    computes a compressed MatMul whose scale runs along the reduction axis wrongly (its own
    ONNX reader too: 18.8 off on a 16→32 layer in f32, a floating point exception in bf16).
    Returns the weights rewritten."""
    done = 0
    for mul in list(g.nodes):
        if mul.op != "mul" or mul.graph is not g or len(mul.inputs) != 2 or None in mul.inputs:
            continue
        a, b = mul.inputs
        cast, scale = (a.producer, b) if a.producer is not None and a.producer.op == "cast" else (b.producer, a)
        if cast is None or cast.op != "cast":
            continue
        w, wf = cast.inputs[0], cast.outputs[0]
        if w is None or not w.is_const or w.type.dtype not in QRANGE8 or wf.type.dtype != "float32":
            continue
        if not scale.is_const or scale.type.dtype != "float32" or len(wf.uses) != 1:
            continue
        q, sc = np.asarray(w.const), np.asarray(scale.const, np.float32)
        if q.ndim < 1 or sc.ndim > q.ndim or mul.outputs[0].type.shape != tuple(q.shape):
            continue
        full = (1,) * (q.ndim - sc.ndim) + sc.shape
        along = [i for i, d in enumerate(full) if d != 1]
        if len(along) > 1 or along and full[along[0]] != q.shape[along[0]] or not np.all(np.isfinite(sc)):
            continue
        if along and not all(_output_channel_axis(u, i, q.ndim) == along[0] for u, i in mul.outputs[0].uses):
            continue
        attrs = {"axis": along[0]} if along else {}
        s_v = g.add_constant(f"{mul.name}_scale", sc.reshape(-1) if along else sc.reshape(()), "float32")
        dq = g.add_node("dequantize_linear", [w, s_v], attrs, name=f"{mul.name}_weight",
                        types=[TensorType("float32", tuple(q.shape))], before=mul)
        dq.meta["weight_only"] = True
        _stamp(dq)
        g.replace_node(mul, [dq.outputs[0]])
        if cast.graph is g and not wf.uses and wf not in g.outputs:
            g.remove_node(cast)
        done += 1
    if done:
        g.toposort()
    return done


#: ops an integer kernel computes as one integer product requantized by one float multiplier
INTEGER_PRODUCTS = ("conv", "matmul", "gemm")


def _dq_parts(v: Value | None) -> tuple[Node, np.ndarray, np.ndarray | None] | None:
    """``v`` as ``dequantize_linear(q, scale, zero_point)`` of an 8-bit value (a constant or an
    activation) with constant scale and zero point: (the node, scales as float32 (flattened),
    zero points or None); else None."""
    p = v.producer if v is not None else None
    if p is None or p.op != "dequantize_linear" or int(p.attrs.get("block_size", 0) or 0) or len(p.inputs) < 2:
        return None
    x, s = p.inputs[0], p.inputs[1]
    z = p.inputs[2] if len(p.inputs) > 2 else None
    stored = (p.meta.get("source_in_dtypes") or [x.type.dtype if x is not None else None])[0]
    if x is None or stored not in QRANGE8 or s is None or not s.is_const or z is not None and not z.is_const:
        return None
    scales = np.asarray(s.const, dtype=np.float32).reshape(-1)
    if not np.all(np.isfinite(scales)) or not np.all(scales > 0):
        return None
    return p, scales, None if z is None else np.asarray(z.const).reshape(-1)


def _qlinear_bias(bias: Value, sx: np.ndarray, sw: np.ndarray) -> tuple[np.ndarray, list[Node]] | None:
    """A bias written ``mul(mul(cast(B), x_scale), w_scale)`` (the table's decomposition of
    ``QLinearConv``) with ``B`` an int32 constant and the two scales those of the product's
    operands: (``B``, the three nodes, last first); else None."""
    m2 = bias.producer
    if m2 is None or m2.op != "mul" or len(m2.inputs) != 2 or m2.inputs[1] is None or not m2.inputs[1].is_const:
        return None
    m1 = m2.inputs[0].producer if m2.inputs[0] is not None else None
    if m1 is None or m1.op != "mul" or len(m1.inputs) != 2 or m1.inputs[1] is None or not m1.inputs[1].is_const:
        return None
    c = m1.inputs[0].producer if m1.inputs[0] is not None else None
    if c is None or c.op != "cast" or c.inputs[0] is None or not c.inputs[0].is_const:
        return None
    b = np.asarray(c.inputs[0].const)
    s1 = np.asarray(m1.inputs[1].const, dtype=np.float32).reshape(-1)
    s2 = np.asarray(m2.inputs[1].const, dtype=np.float32).reshape(-1)
    if b.dtype != np.int32 or not np.array_equal(s1, sx) or not np.array_equal(s2, sw) \
            or any(len(list(v.uses)) != 1 for v in (m1.outputs[0], c.outputs[0])):
        return None
    return b, [m2, m1, c]


def _requantized(g: Graph, node: Node) -> Node | None:
    """The per-tensor 8-bit ``quantize_linear`` (finite positive constant scale, constant zero
    point) that is the only reader of ``node``'s one output (not a graph output), else None."""
    out = node.outputs[0] if len(node.outputs) == 1 else None
    uses = list(out.uses) if out is not None else []
    if len(uses) != 1 or uses[0][0].op != "quantize_linear" or uses[0][1] != 0 or out in g.outputs:
        return None
    q = uses[0][0]
    sy = _scalar(q.inputs[1]) if len(q.inputs) > 1 else None
    zy = q.inputs[2] if len(q.inputs) > 2 else None
    if sy is None or not np.isfinite(sy) or not sy > 0 or int(q.attrs.get("block_size", 0) or 0) \
            or zy is None or _scalar(zy) is None or q.model_dtype() not in QRANGE8:
        return None
    return q


def _integers(g: Graph, dq: Node, one: Value, name: str, before: Node, per_tensor: bool = False) -> Value:
    """``dq``'s integers less their zero point, as float32: the same ``dequantize_linear`` with
    scale ``one`` (``per_tensor``: without ``dq``'s axis, and without its zero points where
    they are per axis: those are all 0 here)."""
    z = dq.inputs[2] if len(dq.inputs) > 2 else None
    ins = [dq.inputs[0], one] + ([z] if z is not None else [])
    attrs = {k: v for k, v in dq.attrs.items() if k != "block_size"}
    if per_tensor:
        attrs = {}
        if z is not None and (not z.is_const or np.asarray(z.const).size > 1):
            ins = ins[:2]
    n = g.add_node("dequantize_linear", ins, attrs, name=name, types=[TensorType("float32", dq.outputs[0].type.shape)],
                   before=before)
    _stamp(n)
    return n.outputs[0]


def _drop_unread(g: Graph, nodes: list[Node | None]) -> None:
    """Remove each of ``nodes`` (in order) whose outputs nothing reads any more."""
    for n in nodes:
        if n is not None and n.graph is g and not any(v.uses or v in g.outputs for v in n.outputs):
            g.remove_node(n)


def integer_domain(g: Graph) -> int:
    """Each ``conv``/``matmul``/``gemm`` between 8-bit QDQ operands and a per-tensor
    ``quantize_linear`` computed the way integer kernels compute it (onnxruntime's
    ``QLinearConv``/``QLinearMatMul``/``QGemm``, XNNPACK's ``qs8`` operators): the product of
    the integers ``(q_x - z_x)(q_w - z_w)`` (exact in float32 below 2^24), plus the int32 bias,
    times one float32 multiplier per output channel ``M = (s_x · s_w) / s_y``, rounded half to
    even onto the output's grid. The dequantized form (the same product of ``(q - z) · s``
    values in float) rounds at other points and lands one step off on near-ties that then
    propagate (onnxruntime's own unfused graph is 83 % exact against its fused kernels on a
    quantized ResNet-18). For targets that compute in float (PyTorch, TensorFlow): same cost,
    the integer kernels' numbers. The weights stay 8-bit constants (dequantized with scale 1).
    An int32 bias past float32's integers (2^24) is added in float64 and the sum rounded to
    float32, as the kernels convert their accumulator. A quantized ``add`` and ``mul`` in
    onnxruntime's arithmetic likewise (``_integer_adds``, ``_integer_muls``). Returns the ops
    rewritten."""
    done = 0
    for node in list(g.nodes):
        if node.op not in INTEGER_PRODUCTS or node.graph is not g or len(node.inputs) < 2 or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        q = _requantized(g, node)
        if q is None:
            continue
        sy = _scalar(q.inputs[1])
        xa, wa = _dq_parts(node.inputs[0]), _dq_parts(node.inputs[1])
        if xa is None or wa is None or xa[1].size != 1 or out.type.rank is None:
            continue
        if node.op == "gemm" and (float(node.attrs.get("alpha", 1.0)) != 1.0 or float(node.attrs.get("beta", 1.0)) != 1.0
                                  or int(node.attrs.get("transA", 0))):
            continue
        w_node, sw, zw = wa
        if sw.size > 1:  # per output channel only: conv's axis 0, a matmul's or gemm's output column
            w = w_node.inputs[0]
            axis = int(w_node.attrs.get("axis", 1)) % max(w.type.rank or 1, 1)
            want = {"conv": 0, "matmul": (w.type.rank or 2) - 1,
                    "gemm": 0 if int(node.attrs.get("transB", 0)) else 1}[node.op]
            if axis != want or node.op == "matmul" and w.type.rank != 2:
                continue
        if zw is not None and zw.size > 1 and np.any(zw != 0):
            continue
        f32 = np.float32
        mult = (f32(xa[1][0]) * sw.astype(f32)) / f32(sy)  # float32, as the kernels compute it
        bias = node.inputs[2] if node.op in ("conv", "gemm") and len(node.inputs) > 2 else None
        b_int = None
        chain = _qlinear_bias(bias, xa[1], sw) if bias is not None else None
        if chain is not None:  # the table's QLinearConv form: cast(B) * x_scale * w_scale
            b_int = chain[0]
        elif bias is not None:
            ba = _dq_parts(bias) if bias.producer is not None and bias.producer.op == "dequantize_linear" else None
            bp = bias.producer
            if ba is not None or bp is None or bp.op != "dequantize_linear" or not bp.inputs[0].is_const:
                continue  # (an 8-bit bias is not the int32 one kernels add)
            bq = np.asarray(bp.inputs[0].const)
            bs = np.asarray(bp.inputs[1].const, dtype=f32).reshape(-1) if bp.inputs[1].is_const else None
            bz = bp.inputs[2] if len(bp.inputs) > 2 else None
            if bq.dtype != np.int32 or bs is None or bz is not None and np.any(np.asarray(bz.const) != 0) \
                    or not np.array_equal(np.broadcast_to(bs, mult.shape), f32(xa[1][0]) * sw.astype(f32)):
                continue
            b_int = bq
        one = g.add_constant(f"{node.name}_unit_scale", np.asarray(1.0, dtype=f32), "float32")

        # (per-axis zero points are all 0 here: the scale-1 form per tensor)
        xi, wi = [_integers(g, p[0], one, f"{node.name}_{tag}_int", node, p[2] is not None and p[2].size > 1)
                  for p, tag in ((xa, "x"), (wa, "w"))]
        node.replace_input(0, xi)
        node.replace_input(1, wi)
        old = [xa[0], w_node]
        rank = out.type.rank
        shape = [1] * rank
        channel = 1 if node.op == "conv" else rank - 1
        wide = b_int is not None and np.abs(b_int).max(initial=0) >= 1 << 24
        if bias is not None:
            old += chain[1] if chain is not None else [bias.producer]
            if wide:
                node.replace_input(2, None)
            else:
                node.replace_input(2, g.add_constant(f"{node.name}_bias_int", b_int.astype(f32), "float32"))
        _drop_unread(g, old)  # the dequantizations nothing reads any more
        acc = out
        if wide:  # an int32 bias past float32's integers: added in float64 (exact), the sum then
            # rounded to float32 as the kernels convert their int32 accumulator
            bshape = [1] * rank
            if b_int.size > 1:
                bshape[channel] = -1
            b64 = g.add_constant(f"{node.name}_bias_int", b_int.astype(np.float64).reshape(bshape), "float64")
            acc = _cast(g, _binary(g, "add", _cast(g, out, "float64", f"{node.name}_acc64", q), b64, "float64",
                                   f"{node.name}_biased", q, out.type.shape), "float32", f"{node.name}_acc", q)
        if mult.size > 1:
            shape[channel] = -1
        m = g.add_constant(f"{node.name}_multiplier", mult.reshape(shape) if mult.size > 1 else f32(mult[0]),
                           "float32")
        scaled = g.add_node("mul", [acc, m], {}, name=f"{node.name}_requantized",
                            types=[TensorType("float32", out.type.shape)], before=q)
        _stamp(scaled)
        q.replace_input(0, scaled.outputs[0])
        q.replace_input(1, one)
        done += 1
    done += _integer_adds(g) + _integer_muls(g)
    if done:
        g.toposort()
    return done


def _span_operand(node: Node) -> int | None:
    """Which input of a broadcasting binary ``node`` onnxruntime's broadcast loop hands its
    kernel as the vector operand ``A`` (the other, ``B``, is then a vector of the same span or a
    scalar per span): input 0, unless input 0 is the one broadcast along the innermost axis the
    output does not have of size 1 (``[1, C, 1, 1] + [1, C, H, W]``). None when the shapes
    there are not static."""
    shapes = [v.type.shape for v in node.inputs]
    out = node.outputs[0].type.shape
    if out is None or any(sh is None for sh in shapes):
        return None
    r = len(out)
    dims = [(1,) * (r - len(sh)) + tuple(sh) for sh in shapes]  # type: ignore[arg-type]
    for k in range(r - 1, -1, -1):
        if out[k] == 1:
            continue
        d0, d1 = dims[0][k], dims[1][k]
        if not all(isinstance(d, int) for d in (d0, d1, out[k])):
            return None
        return 1 if d0 == 1 and d1 != 1 else 0
    return 0


def _cast(g: Graph, v: Value, to: str, name: str, before: Node) -> Value:
    n = g.add_node("cast", [v], {"to": {"float32": 1, "float64": 11}[to]}, name=name,
                   types=[TensorType(to, v.type.shape)], before=before)
    _stamp(n)
    return n.outputs[0]


def _binary(g: Graph, op: str, a: Value, b: Value, dtype: str, name: str, before: Node, shape: object) -> Value:
    n = g.add_node(op, [a, b], {}, name=name, types=[TensorType(dtype, shape)], before=before)  # type: ignore[arg-type]
    _stamp(n)
    return n.outputs[0]


def _fma(g: Graph, x: Value, r: float, y: Value, name: str, before: Node, shape: object) -> Value:
    """``x · r + y`` rounded once to float32 (a fused multiply-add): computed in float64, where
    the product of an 8-bit integer and a float32 and its sum with a float32 of the same
    magnitude are exact, then rounded to float32."""
    x64 = x if x.type.dtype == "float64" else _cast(g, x, "float64", f"{name}_x64", before)
    y64 = y if y.type.dtype == "float64" else _cast(g, y, "float64", f"{name}_y64", before)
    rv = g.add_constant(f"{name}_ratio", np.asarray(r, dtype=np.float64), "float64")
    p = _binary(g, "mul", x64, rv, "float64", f"{name}_mul", before, x.type.shape)
    s = _binary(g, "add", p, y64, "float64", f"{name}_add", before, shape)
    return _cast(g, s, "float32", f"{name}_f32", before)


def _requantized_pairs(g: Graph, op: str) -> Iterator[tuple[Node, Node, list[tuple[Node, np.ndarray, np.ndarray | None]]]]:
    """Each binary ``op`` node of ``g`` over two per-tensor 8-bit dequantized activations whose
    float32 result one per-tensor ``quantize_linear`` reads: (the node, that quantize, both
    operands' ``_dq_parts``). Nodes removed meanwhile are skipped."""
    for node in list(g.nodes):
        if node.op != op or node.graph is not g or len(node.inputs) != 2 or len(node.outputs) != 1:
            continue
        q = _requantized(g, node)
        if q is None or node.outputs[0].type.dtype != "float32":
            continue
        parts = [_dq_parts(v) for v in node.inputs]
        if any(p is None or p[1].size != 1 or p[0].inputs[0].is_const or p[2] is not None and p[2].size != 1
               for p in parts):
            continue
        yield node, q, parts  # type: ignore[misc]


def _on_unit_grid(g: Graph, q: Node, name: str, one: Value | None = None) -> None:
    """``q`` (the requantization) with scale 1 (``one``, else a new constant) and zero point 0:
    its input is already the output grid's value, zero point included; ``q`` rounds it half to
    even and saturates."""
    dtype = q.model_dtype()
    q.replace_input(1, one or g.add_constant(f"{name}_unit_scale", np.asarray(1.0, dtype=np.float32), "float32"))
    q.replace_input(2, g.add_constant(f"{name}_no_zero_point", np.zeros((), dtype=np.dtype(dtype)), dtype))


def _integer_adds(g: Graph) -> int:
    """An ``add`` of two per-tensor 8-bit QDQ activations into a per-tensor ``quantize_linear``
    in the arithmetic of onnxruntime's ``QLinearAdd`` (x86-64, its AVX2 kernel; the QDQ form is
    fused into it): with ``A`` the vector operand (``_span_operand``), the ratios
    ``r = s / s_c`` in float32 and ``fixed = z_c - fma(r_A, z_A, r_B · z_B)``, the output is
    ``round_half_even(fma(q_A, r_A, fma(q_B, r_B, fixed)))`` saturated, each ``fma`` rounded
    once to float32. The dequantized sum rounds at other points: one step off on near-ties (4
    of 10,240 values in a GhostNet's block), which the layers after spread to a quarter of the
    output."""
    done = 0
    f32 = np.float32
    for node, q, parts in _requantized_pairs(g, "add"):
        first = _span_operand(node)
        if first is None:
            continue
        sc, zc = f32(_scalar(q.inputs[1])), f32(_scalar(q.inputs[2]))
        (dqa, sa, za), (dqb, sb, zb) = parts[first], parts[1 - first]
        ra, rb = f32(f32(sa[0]) / sc), f32(f32(sb[0]) / sc)
        za_, zb_ = (f32(0.0 if z is None else z[0]) for z in (za, zb))
        fixed = f32(zc - f32(np.float64(ra) * np.float64(za_) + np.float64(f32(rb * zb_))))
        shape = node.outputs[0].type.shape
        fv = g.add_constant(f"{node.name}_fixed", np.asarray(fixed, dtype=np.float64), "float64")
        t = _fma(g, dqb.inputs[0], float(rb), fv, f"{node.name}_b", node, dqb.inputs[0].type.shape)
        c = _fma(g, dqa.inputs[0], float(ra), t, f"{node.name}_a", node, shape)
        for u, k in list(node.outputs[0].uses):
            u.replace_input(k, c)
        _on_unit_grid(g, q, node.name)
        g.remove_node(node)
        _drop_unread(g, [dqa, dqb])
        done += 1
    return done


def _integer_muls(g: Graph) -> int:
    """A ``mul`` of two per-tensor 8-bit QDQ activations into a per-tensor ``quantize_linear``
    in the arithmetic of onnxruntime's ``QLinearMul``: the product of the integers ``(q_a -
    z_a)(q_b - z_b)`` (exact in float32), times ``(s_a · s_b) / s_c`` in float32, plus ``z_c``
    (two roundings), rounded half to even and saturated."""
    done = 0
    f32 = np.float32
    for node, q, parts in _requantized_pairs(g, "mul"):
        sc, zc = f32(_scalar(q.inputs[1])), f32(_scalar(q.inputs[2]))
        one = g.add_constant(f"{node.name}_unit_scale", np.asarray(1.0, dtype=f32), "float32")
        ints = [_integers(g, dq, one, f"{node.name}_{k}_int", node, per_tensor=True) for k, (dq, _, _) in enumerate(parts)]
        node.replace_input(0, ints[0])
        node.replace_input(1, ints[1])
        ratio = f32(f32(f32(parts[0][1][0]) * f32(parts[1][1][0])) / sc)
        shape = node.outputs[0].type.shape
        m = g.add_constant(f"{node.name}_ratio", np.asarray(ratio, dtype=f32), "float32")
        scaled = _binary(g, "mul", node.outputs[0], m, "float32", f"{node.name}_scaled", q, shape)
        shifted = _binary(g, "add", scaled, g.add_constant(f"{node.name}_zero_point", np.asarray(zc, dtype=f32),
                                                           "float32"), "float32", f"{node.name}_shifted", q, shape)
        q.replace_input(0, shifted)
        _on_unit_grid(g, q, node.name, one)
        _drop_unread(g, [p[0] for p in parts])
        done += 1
    return done


#: onnxruntime's QOperator ops ``integer_domain`` reads in their table (QDQ) form
#: (``lowering.decompose_now`` expands them first)
QOPERATOR_PRODUCTS = ("qlinear_conv", "qlinear_matmul", "qlinear_add", "qlinear_mul")


__all__ += ["INTEGER_PRODUCTS", "QOPERATOR_PRODUCTS", "integer_domain"]


def _constant_integers(x: Value | None) -> np.ndarray | None:
    """The integers of ``x``: an 8-bit constant, or the per-tensor quantization of a float32
    constant (a class token: folding leaves its QuantizeLinear), computed by the reference
    QuantizeLinear; else None."""
    from ..reference.quantize import quantize_linear

    if x is None:
        return None
    if x.is_const:
        return np.asarray(x.const)
    q = x.producer
    if q is None or q.op != "quantize_linear" or len(q.inputs) < 3 or not all(v is not None and v.is_const
                                                                               for v in q.inputs[:3]):
        return None
    c, s, z = (np.asarray(v.const) for v in q.inputs[:3])
    if c.dtype != np.float32 or s.size != 1 or z.size != 1 or z.dtype.name not in QRANGE8:
        return None
    return quantize_linear(c, s.reshape(()), z.reshape(()))


def _grid_readers(q: Node, z: float) -> list[Node] | None:
    """The ``dequantize_linear`` nodes that are the only readers of ``q``'s integers (none in a
    subgraph, not a graph output), each per tensor with a finite positive constant scale, ``q``'s
    zero point ``z`` and a float32 result; else None."""
    out = q.outputs[0]
    g = q.graph
    uses = list(out.uses)
    if not uses or g is None or out in g.outputs:
        return None
    readers = []
    for n, i in uses:
        if n.op != "dequantize_linear" or i != 0 or n.graph is not g or int(n.attrs.get("block_size", 0) or 0) \
                or n.outputs[0].type.dtype != "float32":
            return None
        s = _scalar(n.inputs[1]) if len(n.inputs) > 1 else None
        zd = _scalar(n.inputs[2] if len(n.inputs) > 2 else None, 0.0)
        if s is None or not np.isfinite(s) or not s > 0 or zd != z:
            return None
        if n not in readers:
            readers.append(n)
    return readers


def rounded_in_float(g: Graph) -> int:
    """Each per-tensor 8-bit ``quantize_linear`` of a float32 value that only
    ``dequantize_linear``s of its zero point read, for a target that computes in float and
    has one kernel for a NaN's saturation (PyTorch's ``nan_to_num``; on TensorFlow the is_nan
    and select cost more than the round trip saves): the integers less the zero point kept in float32,
    ``c = clip(round(x / s), q_min - z, q_max - z)``, ``q_min - z`` where ``x`` is NaN (``round(x)`` at scale 1, the requantization
    ``integer_domain`` writes), and each dequantization ``c · s'`` (``c`` itself at scale 1).
    The same numbers: ``round(x / s)`` is the division the quantization makes, and below 2^24
    integers are exact in float32, so shifting by ``z`` before or after the clip changes
    nothing; a NaN is ``q_min``, as onnxruntime saturates it (a BERT's fully masked attention
    rows are NaN after the softmax, zero once quantized; the 8-bit cast made an int8 one 0, a
    step off). Six elementwise kernels where the 8-bit round trip took eight (division,
    rounding, zero point, saturation, the two casts, zero point, scale): on a quantized
    transformer most of the time the float kernels spent outside its products. Returns the
    quantizations rewritten."""
    done = 0
    for q in list(g.nodes):
        if q.op != "quantize_linear" or q.graph is not g or len(q.inputs) < 2 or q.inputs[0] is None \
                or q.inputs[0].type.dtype != "float32" or q.attrs.get("precision") \
                or int(q.attrs.get("block_size", 0) or 0):
            continue
        dtype = q.model_dtype()
        s = _scalar(q.inputs[1])
        z = _scalar(q.inputs[2] if len(q.inputs) > 2 else None, 0.0)
        if dtype not in QRANGE8 or s is None or z is None or not np.isfinite(s) or not s > 0 \
                or np.asarray(q.inputs[1].const).dtype != np.float32:
            continue
        readers = _grid_readers(q, z)
        if readers is None:
            continue
        x, name, shape = q.inputs[0], q.name, q.outputs[0].type.shape
        f32 = np.float32
        if s != 1.0:
            x = _binary(g, "div", x, g.add_constant(f"{name}_scale", np.asarray(s, dtype=f32), "float32"),
                        "float32", f"{name}_scaled", q, shape)
        r = g.add_node("round", [x], {}, name=f"{name}_round", types=[TensorType("float32", shape)], before=q)
        _stamp(r)
        lo, hi = QRANGE8[dtype]
        bounds = [g.add_constant(f"{name}_{tag}", np.asarray(b - z, dtype=f32), "float32")
                  for tag, b in (("min", lo), ("max", hi))]
        c = g.add_node("clip", [r.outputs[0], *bounds], {}, name=f"{name}_clip", types=[TensorType("float32", shape)],
                       before=q)
        _stamp(c)
        nan = g.add_node("is_nan", [x], {}, name=f"{name}_nan", types=[TensorType("bool", x.type.shape)], before=q)
        _stamp(nan)
        c = g.add_node("where", [nan.outputs[0], bounds[0], c.outputs[0]], {}, name=f"{name}_grid",
                       types=[TensorType("float32", shape)], before=q)  # NaN: q_min, as onnxruntime saturates it
        _stamp(c)
        c.meta["grid"] = (dtype, z)  # the 8-bit type and zero point whose integers c holds less z
        for dq in readers:
            s_dq = _scalar(dq.inputs[1])
            if s_dq == 1.0:
                g.replace_node(dq, [c.outputs[0]])
                continue
            v = _binary(g, "mul", c.outputs[0], g.add_constant(f"{dq.name}_scale", np.asarray(s_dq, dtype=f32), "float32"),
                        "float32", f"{dq.name}_scaled", dq, dq.outputs[0].type.shape)
            g.replace_node(dq, [v])
        g.remove_node(q)
        done += 1
    return done


def _on_grid(v: Value | None) -> tuple[str, float] | None:
    """``v`` as integers of an 8-bit grid less its zero point, in float32: (the 8-bit type,
    the zero point) where ``v`` is ``rounded_in_float``'s grid value or a ``dequantize_linear`` of an
    8-bit activation at scale 1 and a constant per-tensor zero point; else None."""
    p = v.producer if v is not None else None
    if p is None or v.type.dtype != "float32":
        return None
    if p.op == "where" and "grid" in p.meta:
        return p.meta["grid"]
    parts = _dq_parts(v)
    if parts is None or list(parts[1]) != [1.0] or p.inputs[0].is_const or parts[2] is not None and parts[2].size != 1:
        return None
    return (p.meta.get("source_in_dtypes") or [p.inputs[0].type.dtype])[0], 0.0 if parts[2] is None else float(parts[2][0])


def _int8_matrix(v: Value | None) -> np.ndarray | None:
    """``v`` as a 2-D int8 constant read at scale 1 and zero point 0 (``integer_domain``'s
    weight): the matrix; else None."""
    parts = _dq_parts(v)
    if parts is None or list(parts[1]) != [1.0] or not parts[0].inputs[0].is_const \
            or parts[2] is not None and np.any(parts[2] != 0):
        return None
    w = np.asarray(parts[0].inputs[0].const)
    return w if w.dtype == np.int8 and w.ndim == 2 else None


def integer_matmuls(g: Graph) -> int:
    """Each ``matmul``/``gemm`` of ``integer_domain`` (activation integers less their zero point
    times a 2-D int8 weight at scale 1) as an int8 x int8 -> int32 product, for a target with
    such a kernel (PyTorch's ``torch._int_mm``: oneDNN's VNNI/AMX int8 GEMM, about 4x the float
    product's speed): the activation shifted onto int8 (``a = c + z - o``, ``o`` 128 for a u8
    grid, 0 for s8), ``matmul_integer(a, W)``, plus the int32 constant ``(o - z) · colsum(W)``
    that gives back the zero point (and a gemm's integer bias), then float32. The accumulator
    is the kernels' exact int32 one, where the float product rounded its sums past 2^24.
    Returns the products rewritten."""
    done = 0
    for node in list(g.nodes):
        if node.op not in ("matmul", "gemm") or node.graph is not g or len(node.outputs) != 1 \
                or node.outputs[0].type.dtype != "float32":
            continue
        grid = _on_grid(node.inputs[0])
        w = _int8_matrix(node.inputs[1])
        if grid is None or w is None:
            continue
        bias = node.inputs[2] if node.op == "gemm" and len(node.inputs) > 2 else None
        if node.op == "gemm":
            if int(node.attrs.get("transA", 0)) or float(node.attrs.get("alpha", 1.0)) != 1.0 \
                    or float(node.attrs.get("beta", 1.0)) != 1.0 or node.inputs[0].type.rank != 2:
                continue
            if bias is not None and not bias.is_const:
                continue
        transposed = node.op == "gemm" and bool(int(node.attrs.get("transB", 0)))
        if transposed:
            w = np.ascontiguousarray(w.T)
        b = np.asarray(bias.const, dtype=np.float64).reshape(-1) if bias is not None else np.zeros(1)
        if np.any(b != np.round(b)) or np.abs(b).max(initial=0) >= 1 << 24 or b.size not in (1, w.shape[1]):
            continue
        dtype, z = grid
        o = 128 if dtype == "uint8" else 0
        corr = (o - int(z)) * w.astype(np.int64).sum(axis=0) + b.astype(np.int64)
        if np.abs(corr).max(initial=0) >= 1 << 31:
            continue
        out, name = node.outputs[0], node.name
        x = node.inputs[0]
        if z != o:
            x = _binary(g, "add", x, g.add_constant(f"{name}_to_int8", np.asarray(z - o, dtype=np.float32), "float32"),
                        "float32", f"{name}_shifted", node, x.type.shape)
        a = g.add_node("cast", [x], {"to": 3}, name=f"{name}_int8", types=[TensorType("int8", x.type.shape)], before=node)
        _stamp(a)
        wv = node.inputs[1].producer.inputs[0]  # type: ignore[union-attr] - the model's own constant
        if transposed:  # (a gemm's [N, K] matrix, transposed once here)
            wv = g.add_constant(f"{wv.name}_t", w, "int8")
        p = g.add_node("matmul_integer", [a.outputs[0], wv], {}, name=f"{name}_int",
                       types=[TensorType("int32", out.type.shape)], before=node)
        _stamp(p)
        p.meta["decomposed_root"] = node.meta.get("decomposed_root", node.name)  # report: the source's node
        acc = p.outputs[0]
        if np.any(corr != 0):
            cv = g.add_constant(f"{name}_zero_point_sums", corr.astype(np.int32), "int32")
            acc = _binary(g, "add", acc, cv, "int32", f"{name}_acc", node, out.type.shape)
        f = g.add_node("cast", [acc], {"to": 1}, name=f"{name}_f32", types=[TensorType("float32", out.type.shape)],
                       before=node)
        _stamp(f)
        old = node.inputs[1].producer
        g.replace_node(node, [f.outputs[0]])
        _drop_unread(g, [old])
        done += 1
    return done


def constants_on_output_grid(g: Graph) -> int:
    """A ``concat`` read by one per-tensor ``quantize_linear``, with an input that dequantizes a
    per-tensor 8-bit constant on another grid (a ViT's class token beside its patch
    embeddings): that input put on the output's grid now, as the source's float concat and
    quantization round it (float32 division, half to even), and dequantized on that grid. A
    writer's int8 concat then copies those values instead of requantizing them: LiteRT
    requantizes a tie the other way, and a ViT's class token came out a step off (eleven
    after its first layer norm). Exact. Returns the inputs rewritten."""
    from ..reference.quantize import dequantize_linear, quantize_linear

    done = 0
    for n in list(g.nodes):
        out = n.outputs[0] if n.op == "concat" and n.graph is g and n.outputs else None
        if out is None or len(out.uses) != 1 or out in g.outputs:
            continue
        q = out.uses[0][0]
        if q.op != "quantize_linear" or len(q.inputs) < 3 or q.inputs[2] is None:
            continue
        dt = q.model_dtype()
        zv = q.inputs[2]
        s2, z2 = _scalar(q.inputs[1]), _scalar(zv)
        if dt not in QRANGE8 or s2 is None or z2 is None or not s2 > 0:
            continue
        for i, v in enumerate(list(n.inputs)):
            parts = _dq_parts(v)
            if parts is None or parts[1].size != 1 or parts[2] is not None and parts[2].size != 1:
                continue
            dq, scales, zps = parts
            z1 = float(zps[0]) if zps is not None else 0.0
            ints = _constant_integers(dq.inputs[0])
            if ints is None or float(scales[0]) == s2 and z1 == z2:
                continue
            real = dequantize_linear(ints, scales.reshape(()), None if zps is None else zps.reshape(()))
            y = quantize_linear(real, np.float32(s2), np.asarray(z2).astype(np.dtype(dt)))
            c = g.add_constant(f"{dq.name}_on_output_grid", y, dt)
            new = g.add_node("dequantize_linear", [c, q.inputs[1], zv], {}, name=f"{dq.name}_on_output_grid",
                             types=[v.type], before=n)
            _stamp(new)
            n.replace_input(i, new.outputs[0])
            _drop_unread(g, [dq, dq.inputs[0].producer if dq.inputs[0] is not None else None])
            done += 1
    return done


__all__ += ["constants_on_output_grid"]


def float_kernels_plan(framework: str):
    """``Target.integer_plan`` of a target whose framework has no 8-bit kernels and computes
    dequantized values in float (JAX, MLX): an 8-bit weight stays 8-bit in the artifact's
    weights and is dequantized in the function; everything else is float (``report``)."""

    def plan(node: Node, ctx: Any) -> tuple[str, str]:
        if quantized_operands(node).weight is not None:
            return "int8 weights", f"stored as int8, dequantized in the function; float kernel ({framework} has no 8-bit kernels)"
        return "float", f"{framework} has no 8-bit kernels: it computes the dequantized values in float"

    return plan


def stored_int8_weights(weights_file: Any, how: str) -> Any:
    """``KernelCount`` of a target whose kernels are float over weights it keeps 8-bit (PyTorch,
    JAX, MLX): the share of the weight tensors (filters and matrices: two dims or more above 1,
    256 elements or more; not biases, scales, zero points or per-channel multipliers shaped to
    broadcast) that the safetensors file ``weights_file`` holds as int8/uint8. ``how``: where
    they are dequantized."""
    from safetensors.numpy import load_file

    from .target import KernelCount

    ws = load_file(str(weights_file))
    big = [a for a in ws.values() if a.size >= 256 and sum(d > 1 for d in a.shape) >= 2]
    n = sum(1 for a in big if a.dtype in (np.int8, np.uint8))
    return KernelCount(n, len(big), f"{n} of {len(big)} weight tensors stored as int8 ({how})", stored=True)
