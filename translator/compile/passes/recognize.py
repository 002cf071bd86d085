"""Ops that exporters spell out in elementwise pieces, recognized as the one op they compute.

* ``hard_swish``: ``x · clip(x + 3, 0, 6) / 6`` (PyTorch's older exports, paddle2onnx, tf2onnx of
  Keras), with the division written as ``· (1/6)`` or taken inside the product, and
  ``x · hard_sigmoid(x; α = 1/6, β = 0.5)``. A target whose runtime has a HardSwish layer runs
  one layer where the pieces were four (ncnn; pnnx fuses the same patterns).

* ``gelu``: ``x · (1 + erf(x / √2)) · 0.5`` (PyTorch's exports of ``F.gelu``, paddle2onnx, Keras via
  tf2onnx; ``/ √2`` also written ``· (1/√2)``, the half taken first or last). A target with a
  GELU kernel (TFLite's builtin, which XNNPACK runs; TensorFlow's and torch's) runs one op where
  the pieces were five, and no spelled-out erf.

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


def _erf_gate_of(v: Value | None, graph: Graph) -> Value | None:
    """``x`` when ``v`` is ``1 + erf(x / √2)``."""
    add = _made_by(v, "add", graph)
    if add is None:
        return None
    for e, c in _pairs(add):
        erf = _made_by(e, "erf", graph)
        if erf is not None and _scalar(c) == 1.0:
            return _over_sqrt2(erf.inputs[0], graph)
    return None


def _half(v: Value | None) -> bool:
    return _scalar(v) == 0.5


def _gelu_match(graph: Graph, node: Node) -> Value | None:
    """``x`` when ``node`` (a mul) ends ``x · (1 + erf(x / √2)) · 0.5`` in one of its orders."""
    for a, b in _pairs(node):
        if a is None or b is None:
            continue
        inner = _made_by(a, "mul", graph)
        if inner is not None:
            for p, q in _pairs(inner):
                if _half(b) and p is not None and _erf_gate_of(q, graph) is p:  # (x · gate) · 0.5
                    return p
                if _half(q) and p is not None and _erf_gate_of(b, graph) is p:  # (x · 0.5) · gate
                    return p
        outer = _made_by(b, "mul", graph)
        if outer is not None:
            for p, q in _pairs(outer):
                if _half(q) and _erf_gate_of(p, graph) is a:  # x · (gate · 0.5)
                    return a
    return None


def gelu(graph: Graph) -> int:
    """Every GELU spelled in pieces in ``graph`` (not its subgraphs) as one ``gelu`` node (the
    erf form, ``approximate="none"``); returns how many were recognized."""
    return _recognized(graph, ("mul",), _gelu_match, "gelu", {"approximate": "none"})


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
        for p in pieces:  # the rest of the pattern, now read by nothing
            if p.graph is graph and not any(o.uses for o in p.outputs):
                graph.remove_node(p)
        done += 1
    return done


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
