"""Ops that exporters spell out in elementwise pieces, recognized as the one op they compute.

* ``hard_swish``: ``x · clip(x + 3, 0, 6) / 6`` (PyTorch's older exports, paddle2onnx, tf2onnx of
  Keras), with the division written as ``· (1/6)`` or taken inside the product, and
  ``x · hard_sigmoid(x; α = 1/6, β = 0.5)``. A target whose runtime has a HardSwish layer runs
  one layer where the pieces were four (ncnn; pnnx fuses the same patterns).

* ``gelu``: ``x · (1 + erf(x / √2)) · 0.5`` (PyTorch's exports of ``F.gelu``, paddle2onnx, Keras via
  tf2onnx; ``/ √2`` also written ``· (1/√2)``, the half taken first or last), and its tanh form
  ``x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))) · 0.5`` (JAX/Flax via jax2tf, ``approximate='tanh'``
  exports; the cube as a product in any grouping or ``x ** 3``). A target with a
  GELU kernel (TFLite's builtin, which XNNPACK runs; TensorFlow's and torch's) runs one op where
  the pieces were five, and no spelled-out erf.

* ``layer_norm``: ``(x - mean(x)) / sqrt(mean((x - mean(x))²) + ε) · γ + β`` over trailing axes
  (PyTorch's exports of ``nn.LayerNorm`` below opset 17: ReduceMean, Sub, Pow 2 or the product
  of the difference with itself, ReduceMean, Add, Sqrt, Div, then the optional Mul and Add by
  constants), float32. A target with a layer norm kernel (torch's ``F.layer_norm``) runs one op
  where the pieces were nine, and reads the input twice where they read it six times.

A piece is matched only when it feeds nothing but the next one and its constants are scalars
of those exact values (float32 rounding of 1/6 included), so the result is the same function;
the node that ends the pattern keeps its output value and name.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Graph, Node, Value

SIXTH = float(np.float32(1.0 / 6.0))
SQRT2 = np.float32(np.sqrt(2.0))
RSQRT2 = np.float32(1.0 / np.sqrt(2.0))
SQRT_2_OVER_PI = np.float32(np.sqrt(2.0 / np.pi))
GELU_CUBIC = np.float32(0.044715)


def _scalar(v: Value | None) -> float | None:
    """The value of a one-element float constant, else None."""
    if v is None or not v.is_const or v.type.dtype not in ("float32", "float64", "float16"):
        return None
    a = np.asarray(v.const)
    return float(a.reshape(-1)[0]) if a.size == 1 else None


def _is_f32(v: Value | None, want: float) -> bool:
    """Whether ``v`` is a one-element float constant whose float32 value is ``want``'s."""
    s = _scalar(v)
    return s is not None and np.float32(s) == np.float32(want)


def _pairs(node: Node) -> tuple[tuple[Value | None, Value | None], ...]:
    """A two-input node's operands in both orders (the patterns' products and sums commute)."""
    return ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0]))


def _only_use(v: Value, graph: Graph) -> bool:
    return len(v.uses) == 1 and not any(o is v for o in graph.outputs)


def _made_by(v: Value | None, op: str, graph: Graph) -> Node | None:
    """The ``op`` node that produces ``v``, when ``v`` feeds only one node."""
    if v is None or v.producer is None or v.producer.op != op or v.producer.graph is not graph:
        return None
    return v.producer if _only_use(v, graph) else None


def _other(node: Node, v: Value) -> Value | None:
    """The operand of a two-input node that is not ``v``."""
    a, b = node.inputs[0], node.inputs[1]
    return b if a is v else a if b is v else None


def _clip_0_6_of_x_plus_3(v: Value | None, graph: Graph) -> Value | None:
    """``x`` when ``v`` is ``clip(x + 3, 0, 6)`` (pieces feeding only each other)."""
    clip = _made_by(v, "clip", graph)
    if clip is None:
        return None
    lo = _scalar(clip.inputs[1]) if len(clip.inputs) > 1 else clip.attrs.get("min")
    hi = _scalar(clip.inputs[2]) if len(clip.inputs) > 2 else clip.attrs.get("max")
    if lo != 0.0 or hi != 6.0:
        return None
    add = _made_by(clip.inputs[0], "add", graph)
    if add is None:
        return None
    for x, c in _pairs(add):
        if _scalar(c) == 3.0 and not x.is_const:
            return x
    return None


def _gate_of(v: Value | None, graph: Graph) -> Value | None:
    """``x`` when ``v`` is ``clip(x + 3, 0, 6) / 6`` or ``· (1/6)``, or ``hard_sigmoid(x; 1/6, 0.5)``."""
    hs = _made_by(v, "hard_sigmoid", graph)
    if hs is not None:
        alpha, beta = float(hs.attrs.get("alpha", 0.2)), float(hs.attrs.get("beta", 0.5))
        return hs.inputs[0] if np.float32(alpha) == np.float32(1 / 6) and beta == 0.5 else None
    for op, want in (("div", 6.0), ("mul", SIXTH)):
        n = _made_by(v, op, graph)
        if n is None:
            continue
        pairs = ((n.inputs[0], n.inputs[1]),) if op == "div" else _pairs(n)
        for g, c in pairs:
            if _is_f32(c, want):
                return _clip_0_6_of_x_plus_3(g, graph)
    return None


def _match(graph: Graph, node: Node) -> Value | None:
    """``x`` when ``node`` ends a hard swish of ``x``."""
    if node.op == "mul":  # x · gate(x), or (x · clip(x + 3, 0, 6)) · (1/6)
        for a, b in _pairs(node):
            if a is not None and _gate_of(b, graph) is a:
                return a
            inner = _made_by(a, "mul", graph)
            if inner is not None and _is_f32(b, SIXTH):
                x = _product_x(inner, graph)
                if x is not None:
                    return x
    if node.op == "div" and _scalar(node.inputs[1]) == 6.0:  # (x · clip(x + 3, 0, 6)) / 6
        inner = _made_by(node.inputs[0], "mul", graph)
        if inner is not None:
            return _product_x(inner, graph)
    return None


def _product_x(mul: Node, graph: Graph) -> Value | None:
    """``x`` when ``mul`` is ``x · clip(x + 3, 0, 6)``."""
    for a, b in _pairs(mul):
        if a is not None and _clip_0_6_of_x_plus_3(b, graph) is a:
            return a
    return None


def hard_swish(graph: Graph) -> int:
    """Every hard swish spelled in pieces in ``graph`` (not its subgraphs) as one ``hard_swish``
    node; returns how many were recognized."""
    return _recognized(graph, ("mul", "div"), _match, "hard_swish", {})


def _over_sqrt2(v: Value | None, graph: Graph) -> Value | None:
    """``x`` when ``v`` is ``x / √2`` or ``x · (1/√2)`` (float32 values of those constants)."""
    div = _made_by(v, "div", graph)
    if div is not None and _is_f32(div.inputs[1], SQRT2):
        return div.inputs[0]
    mul = _made_by(v, "mul", graph)
    if mul is not None:
        for x, c in _pairs(mul):
            if x is not None and not x.is_const and _is_f32(c, RSQRT2):
                return x
    return None


def _one_plus(v: Value | None, op: str, graph: Graph) -> Value | None:
    """``u`` when ``v`` is ``1 + op(u)`` (pieces feeding only each other)."""
    add = _made_by(v, "add", graph)
    for f, c in _pairs(add) if add is not None else ():
        unary = _made_by(f, op, graph)
        if unary is not None and _scalar(c) == 1.0:
            return unary.inputs[0]
    return None


def _erf_gate_of(v: Value | None, graph: Graph) -> Value | None:
    """``x`` when ``v`` is ``1 + erf(x / √2)``."""
    u = _one_plus(v, "erf", graph)
    return _over_sqrt2(u, graph) if u is not None else None


def _half(v: Value | None) -> bool:
    return _scalar(v) == 0.5


def _factors(v: Value, graph: Graph, depth: int = 4) -> list[Value] | None:
    """The operands of a product tree ending at ``v`` (muls feeding only each other), ``v`` itself
    when it is not a product; None past ``depth`` levels."""
    mul = _made_by(v, "mul", graph) if depth else None
    if mul is None or any(u is None for u in mul.inputs):
        return [v]
    a, b = (_factors(u, graph, depth - 1) for u in mul.inputs)
    return None if a is None or b is None else a + b


def _cubic_of(v: Value | None, graph: Graph) -> Value | None:
    """``x`` when ``v`` is ``0.044715 · x³`` (``x · x · x`` in any grouping, or ``x ** 3``, times
    the constant)."""
    if v is None:
        return None
    fs = _factors(v, graph)
    if fs is None:
        return None
    consts = [f for f in fs if f.is_const]
    rest = [f for f in fs if not f.is_const]
    if len(consts) != 1 or not _is_f32(consts[0], GELU_CUBIC):
        return None
    if len(rest) == 3 and rest[0] is rest[1] is rest[2]:
        return rest[0]
    if len(rest) == 1:
        pw = _made_by(rest[0], "pow", graph)
        if pw is not None and _scalar(pw.inputs[1]) == 3.0:
            return pw.inputs[0]
    return None


def _tanh_gate_of(v: Value | None, graph: Graph) -> Value | None:
    """``x`` when ``v`` is ``1 + tanh(√(2/π) · (x + 0.044715 · x³))``."""
    scaled = _made_by(_one_plus(v, "tanh", graph), "mul", graph)
    for inner, k in _pairs(scaled) if scaled is not None else ():
        poly = _made_by(inner, "add", graph) if _is_f32(k, SQRT_2_OVER_PI) else None
        for x, cube in _pairs(poly) if poly is not None else ():
            if x is not None and not x.is_const and _cubic_of(cube, graph) is x:
                return x
    return None


def _gelu_match(graph: Graph, node: Node, gate_of: Any = _erf_gate_of) -> Value | None:
    """``x`` when ``node`` (a mul) ends ``x · gate(x) · 0.5`` in one of its orders (the erf gate
    ``1 + erf(x / √2)``, or ``gate_of``'s)."""
    for a, b in _pairs(node):
        if a is None or b is None:
            continue
        inner = _made_by(a, "mul", graph)
        if inner is not None:
            for p, q in _pairs(inner):
                if _half(b) and p is not None and gate_of(q, graph) is p:  # (x · gate) · 0.5
                    return p
                if _half(q) and p is not None and gate_of(b, graph) is p:  # (x · 0.5) · gate
                    return p
        outer = _made_by(b, "mul", graph)
        if outer is not None:
            for p, q in _pairs(outer):
                if _half(q) and gate_of(p, graph) is a:  # x · (gate · 0.5)
                    return a
    return None


def _tanh_gelu_match(graph: Graph, node: Node) -> Value | None:
    return _gelu_match(graph, node, _tanh_gate_of)


def gelu(graph: Graph) -> int:
    """Every GELU spelled in pieces in ``graph`` (not its subgraphs) as one ``gelu`` node: the erf
    form (``approximate="none"``) and the tanh form (``"tanh"``); returns how many were recognized."""
    return (_recognized(graph, ("mul",), _gelu_match, "gelu", {"approximate": "none"})
            + _recognized(graph, ("mul",), _tanh_gelu_match, "gelu", {"approximate": "tanh"}))


def _recognized(graph: Graph, ends: tuple[str, ...], match: Any, op: str, attrs: dict[str, Any]) -> int:
    """Each node of ``graph`` whose op is in ``ends`` and that ``match`` finds ends a pattern of
    ``x`` replaced by one ``op`` node of ``x``; its pieces, now read by nothing, removed."""
    done = 0
    for node in list(graph.nodes):
        if node.graph is not graph or node.op not in ends or len(node.inputs) != 2:
            continue
        x = match(graph, node)
        if x is None or x.type.dtype not in ("float32", "float64", "float16"):
            continue
        pieces = _pieces(node, x)
        hs = graph.add_node(op, [x], dict(attrs), name=f"{node.name}_{op}", before=node)
        graph.replace_node(node, hs.outputs)
        _drop(graph, pieces)
        done += 1
    return done


def _drop(graph: Graph, pieces: list[Node]) -> None:
    """The rest of a replaced pattern, now read by nothing, removed: readers before what they
    read (a piece read by two others, a layer norm's difference or mean, waits for both)."""
    left = [p for p in pieces if p.graph is graph]
    while left:
        dead = [p for p in left if not any(o.uses for o in p.outputs)]
        for p in dead:
            graph.remove_node(p)
        left = [p for p in left if p not in dead] if dead else []


def _pieces(end: Node, x: Value) -> list[Node]:
    """The pattern's nodes before ``end``, readers first (the order they can be removed in)."""
    out: list[Node] = []
    todo = [v for v in end.inputs if v is not None]
    while todo:
        v = todo.pop()
        n = v.producer
        if v is x or n is None or n in out:
            continue
        out.append(n)
        todo.extend(u for u in n.inputs if u is not None and not u.is_const)
    return out


def _trailing_mean(v: Value | None, graph: Graph, x: Value | None = None) -> tuple[Value, int] | None:
    """``(x, axis)`` when ``v`` is a keepdims ``reduce_mean`` of ``x`` over its axes from ``axis``
    to the last (or a ``global_average_pool``: from axis 2, tf2onnx's mean over a rank-3 tensor's
    last axis)."""
    n = v.producer if v is not None else None
    if n is not None and n.op == "global_average_pool" and n.graph is graph and n.inputs[0] is not None \
            and (n.inputs[0].type.rank or 0) >= 3 and (x is None or n.inputs[0] is x):
        return n.inputs[0], 2
    if n is None or n.op != "reduce_mean" or n.graph is not graph or not n.attrs.get("keepdims", 1):
        return None
    src = n.inputs[0]
    rank = src.type.rank if src is not None else None
    axes = n.inputs[1] if len(n.inputs) > 1 else None
    if rank is None or rank < 1 or axes is None or not axes.is_const or (x is not None and src is not x):
        return None
    got = sorted({int(a) % rank for a in np.asarray(axes.const).reshape(-1)})
    if not got or got != list(range(got[0], rank)):
        return None
    return src, got[0]


def _variance_eps(v: Value | None, d: Value | None, graph: Graph) -> tuple[int, float, Node] | None:
    """``(axis, eps, square)`` when ``v`` is ``mean(d²) + eps`` over trailing axes from ``axis``
    (the square ``pow(d, 2)`` or ``d · d``; every piece read only by the next)."""
    add = _made_by(v, "add", graph)
    for w, c in _pairs(add) if add is not None and d is not None else ():
        eps = _scalar(c)
        var = _trailing_mean(w, graph) if eps is not None and w is not None and _only_use(w, graph) else None
        if var is None:
            continue
        sq = var[0].producer
        if sq is not None and sq.graph is graph and _only_use(var[0], graph) and (
                sq.op == "pow" and sq.inputs[0] is d and _is_f32(sq.inputs[1], 2.0)
                or sq.op == "mul" and sq.inputs[0] is d and sq.inputs[1] is d):
            return var[1], float(eps), sq
    return None


def _centered(d: Value | None, graph: Graph, readers: tuple[Node, ...]) -> tuple[Value, Value, int] | None:
    """``(x, mean, axis)`` when ``d`` is ``x - mean(x)`` over trailing axes, read by ``readers`` only."""
    sub = d.producer if d is not None else None
    if sub is None or sub.op != "sub" or sub.graph is not graph or any(o is d for o in graph.outputs) \
            or any(n not in readers for n, _ in d.uses):
        return None
    m = _trailing_mean(sub.inputs[1], graph, sub.inputs[0]) if sub.inputs[1] is not None else None
    return (sub.inputs[0], sub.inputs[1], m[1]) if m is not None else None


def _normalized(div: Node, graph: Graph) -> tuple[Value, int, float] | None:
    """``(x, axis, eps)`` when ``div`` is ``(x - mean(x)) / sqrt(mean((x - mean(x))²) + eps)``."""
    if div.op != "div":
        return None
    d, s = div.inputs[0], div.inputs[1]
    sqrt = _made_by(s, "sqrt", graph)
    ve = _variance_eps(sqrt.inputs[0], d, graph) if sqrt is not None else None
    if ve is None:
        return None
    axis, eps, sq = ve
    c = _centered(d, graph, (sq, div))
    if c is None or c[2] != axis or not _only_use(c[1], graph):
        return None
    return c[0], axis, eps


def _keras_normalized(end: Node, graph: Graph) -> tuple[Value, int, float, Value, Value] | None:
    """``(x, axis, eps, gamma, beta)`` when ``end`` (an add) ends Keras' LayerNormalization as
    tf2onnx writes it: ``x · g + (beta - mean · g)`` with ``g = gamma · 1/sqrt(var + eps)``
    (TensorFlow's Rsqrt as a reciprocal of a square root). The structure only: a piece read
    outside the pattern is refused where it is replaced (``_as_layer_norm``)."""
    for y1, b in _pairs(end):
        mul1, shift = _made_by(y1, "mul", graph), _made_by(b, "sub", graph)
        if mul1 is None or shift is None or shift.inputs[0] is None or not shift.inputs[0].is_const:
            continue
        m2 = _made_by(shift.inputs[1], "mul", graph)
        for x, g in _pairs(mul1) if m2 is not None else ():
            gn = g.producer if g is not None else None
            if x is None or x.is_const or gn is None or gn.op != "mul" or gn.graph is not graph:
                continue
            mean = _other(m2, g)
            for r, gamma in _pairs(gn):
                recip = _made_by(r, "reciprocal", graph)
                sqrt = _made_by(recip.inputs[0], "sqrt", graph) if recip is not None else None
                if sqrt is None or gamma is None or not gamma.is_const or mean is None:
                    continue
                d = next((n.outputs[0] for n, _ in mean.uses
                          if n.op == "sub" and n.inputs[0] is x and n.inputs[1] is mean), None)
                ve = _variance_eps(sqrt.inputs[0], d, graph)
                if ve is None:
                    continue
                axis, eps, sq = ve
                c = _centered(d, graph, (sq,))
                if c is None or c[0] is not x or c[2] != axis:
                    continue
                return x, axis, eps, gamma, shift.inputs[0]
    return None


def _affine_const(v: Value | None, norm: tuple[int, ...]) -> Value | np.ndarray | None:
    """A float32 constant of the normalized shape ``norm`` (``v`` itself: its name stays, e.g. a
    module's ``norm1.weight``), or its values broadcast to it (leading 1s dropped), else None."""
    if v is None or not v.is_const or v.type.dtype != "float32":
        return None
    a = np.asarray(v.const, dtype=np.float32)
    if a.shape == norm:
        return v
    while a.ndim > len(norm) and a.shape[0] == 1:
        a = a[0]
    try:
        return np.ascontiguousarray(np.broadcast_to(a, norm))
    except ValueError:
        return None


def _static_norm(x: Value, axis: int) -> tuple[int, ...] | None:
    """The normalized shape (``x``'s dims from ``axis``) of a float32 ``x`` when static, else None."""
    tail = tuple(x.type.shape[axis:]) if x.type.shape is not None else ()
    if x.type.dtype != "float32" or not tail or not all(isinstance(d, int) for d in tail):
        return None
    return tuple(int(d) for d in tail)


def _as_layer_norm(graph: Graph, end: Node, x: Value, axis: int, eps: float, scale: Any, bias: Any) -> bool:
    """``end``'s output computed by one ``layer_normalization`` of ``x``, and the pattern's pieces
    gone; nothing changes (False) when a piece is read outside the pattern or is a graph output."""
    pieces = _pieces(end, x)
    inside = {id(n) for n in pieces} | {id(end)}
    outs = {id(v) for v in graph.outputs}
    if any(id(o) in outs or any(id(n) not in inside for n, _ in o.uses) for p in pieces for o in p.outputs):
        return False
    affine = [c if isinstance(c, Value) else graph.add_constant(f"{end.name}_ln_{k}", c, "float32")
              for k, c in (("scale", scale), ("bias", bias))]
    ln = graph.add_node("layer_normalization", [x, *affine],
                        {"axis": axis, "epsilon": eps, "stash_type": 1}, name=f"{end.name}_layer_norm", before=end)
    graph.replace_node(end, ln.outputs[:1])
    _drop(graph, pieces)
    return True


def layer_norm(graph: Graph) -> int:
    """Every float32 layer norm spelled in pieces in ``graph`` (not its subgraphs) whose normalized
    dims are static, as one ``layer_normalization`` node (the affine constants taken in, ones and
    zeros when absent); returns how many were recognized."""
    done = 0
    for node in list(graph.nodes):
        if node.graph is not graph or node.op not in ("div", "add"):
            continue
        if node.op == "add":  # Keras' (tf2onnx): the affine folded into a scale and a shift
            k = _keras_normalized(node, graph)
            if k is None:
                continue
            x, axis, eps, gamma, beta = k
            norm = _static_norm(x, axis)
            scale, bias = (_affine_const(gamma, norm), _affine_const(beta, norm)) if norm else (None, None)
            if scale is not None and bias is not None and tuple(node.outputs[0].type.shape or ()) == tuple(x.type.shape):
                done += _as_layer_norm(graph, node, x, axis, eps, scale, bias)
            continue
        found = _normalized(node, graph)
        norm = _static_norm(found[0], found[1]) if found is not None else None
        if found is None or norm is None:
            continue
        x, axis, eps = found
        end, scale, bias = node, np.ones(norm, np.float32), np.zeros(norm, np.float32)
        user = node.outputs[0].uses[0][0] if len(node.outputs[0].uses) == 1 else None
        if user is not None and user.op == "mul" and _only_use(node.outputs[0], graph):
            g = _affine_const(_other(user, node.outputs[0]), norm)
            if g is not None and tuple(user.outputs[0].type.shape or ()) == tuple(x.type.shape):
                end, scale = user, g
        user = end.outputs[0].uses[0][0] if len(end.outputs[0].uses) == 1 else None
        if end is not node and user is not None and user.op == "add" and _only_use(end.outputs[0], graph):
            b = _affine_const(_other(user, end.outputs[0]), norm)
            if b is not None and tuple(user.outputs[0].type.shape or ()) == tuple(x.type.shape):
                end, bias = user, b
        done += _as_layer_norm(graph, end, x, axis, eps, scale, bias)
    return done
