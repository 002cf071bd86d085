"""Decompositions that depend on static shapes, in Python: the recurrences unrolled.

The table's decompositions are declarative SSA with a fixed number of steps; ``gru``,
``lstm`` and ``rnn`` repeat one cell per time step, so their decomposition is written
here and applies when the sequence length is static (and the weights are constants).
The lowering step uses it exactly like a table decomposition: when a target's native
rule refuses a node (MIL ``gru`` without ``reset_after`` on iOS17 for
``linear_before_reset=1``, a backend with no recurrent op at all…), the node is replaced
by these IR ops, which are then lowered in turn.

One cell per step, ONNX semantics (``f`` the first activation, ``g`` the second, ``h`` the
third; ``⊙`` element-wise; ``x_t W^T`` etc. with the gate blocks of W/R/B):

* rnn: ``H_t = f(x_t Wi^T + H_{t-1} Ri^T + Wbi + Rbi)``
* gru (gates z, r, h): ``z = f(x Wz^T + H Rz^T + Wbz + Rbz)``, ``r`` likewise,
  ``h~ = g(x Wh^T + (r ⊙ H) Rh^T + Rbh + Wbh)`` (``linear_before_reset=0``) or
  ``g(x Wh^T + r ⊙ (H Rh^T + Rbh) + Wbh)`` (``=1``); ``H_t = (1 - z) ⊙ h~ + z ⊙ H``
* lstm (gates i, o, f, c): ``i = f(x Wi^T + H Ri^T + Pi ⊙ C + b_i)``,
  ``f`` likewise with ``Pf``, ``c~ = g(x Wc^T + H Rc^T + b_c)``, ``C_t = f ⊙ C + i ⊙ c~``,
  ``o = f(x Wo^T + H Ro^T + Po ⊙ C_t + b_o)``, ``H_t = o ⊙ h(C_t)``

The reverse direction walks the steps backwards and writes each output at its own step.

``loop`` (ONNX Loop semantics) is unrolled when its trip count is known by constant folding:
a dry run evaluates, iteration by iteration, the body values that depend on constants only
(the counters, the condition) and must find the condition constant at every step (or a
constant ``M``); then the body is inlined that many times before the node, folding as it
goes, and the scan outputs are stacked on a new axis 0. A loop whose condition depends on
data, or that runs more than ``LOOP_CAP`` times, is not unrolled (``why_not`` says why).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir.graph import Graph, Node, Value
from .steps import Steps

#: ONNX activation names this decomposition spells with an IR op
_ACT = {"sigmoid": "sigmoid", "tanh": "tanh", "relu": "relu"}
#: (gates per cell, default activations)
_SPEC = {"rnn": (1, ["Tanh"]), "gru": (3, ["Sigmoid", "Tanh"]), "lstm": (4, ["Sigmoid", "Tanh", "Tanh"])}


def why_not(node: Node) -> str | None:
    """Why the unrolled form does not apply to ``node`` (None when it does)."""
    if node.op == "loop":
        return loop_why_not(node)
    if node.op == "dynamic_quantize_lstm":
        from . import dq_lstm

        return dq_lstm.why_not(node)
    if node.op == "dft":
        from . import spectral

        return spectral.why_not(node)
    if node.op == "einsum":
        from . import einsum

        return einsum.why_not(node)
    if node.op not in _SPEC:
        return "not a recurrence"
    a = node.attrs
    if a.get("clip") is not None:
        return "clip is not unrolled"
    if a.get("activation_alpha") or a.get("activation_beta"):
        return "parameterized activations are not unrolled"
    gates, default = _SPEC[node.op]
    dirs = 2 if a.get("direction", "forward") == "bidirectional" else 1
    acts = [str(s).lower() for s in (a.get("activations") or default * dirs)]
    if any(s not in _ACT for s in acts):
        return f"activations {sorted(set(acts) - set(_ACT))} are not unrolled"
    if node.op == "lstm" and int(a.get("input_forget", 0)):
        return "input_forget is not unrolled"
    x = node.inputs[0]
    shape = x.type.shape if x is not None else None
    if shape is None or len(shape) != 3 or not all(isinstance(d, int) for d in shape[:2]):
        return "the sequence length and batch must be static"
    for i in (1, 2, 3, 7):  # W, R, B, P
        if i < len(node.inputs) and node.inputs[i] is not None and not node.inputs[i].is_const:
            return "W, R, B and P must be constants"
    if len(node.inputs) > 4 and node.inputs[4] is not None:
        seq = node.inputs[4]
        t = shape[1] if int(a.get("layout", 0)) else shape[0]
        if not seq.is_const or not np.all(np.asarray(seq.const) == t):
            return "sequence_lens shorter than the sequence is not unrolled"
    return None


def expand(graph: Graph, node: Node) -> list[Node]:
    """Replace the recurrence ``node`` by its unrolled cells; returns the inserted nodes."""
    if node.op == "loop":
        return expand_loop(graph, node)
    if node.op == "dynamic_quantize_lstm":  # not unrolled: a loop over the steps with run-time quantization
        from . import dq_lstm

        return dq_lstm.expand(graph, node)
    if node.op == "dft":  # a static-length DFT as a product with a constant matrix
        from . import spectral

        return spectral.expand(graph, node)
    if node.op == "einsum":  # transposes, reshapes and a matmul per pair of operands
        from . import einsum

        return einsum.expand(graph, node)
    a = node.attrs
    gates, default = _SPEC[node.op]
    layout = int(a.get("layout", 0))
    direction = a.get("direction", "forward")
    dirs = 2 if direction == "bidirectional" else 1
    acts = [_ACT[str(s).lower()] for s in (a.get("activations") or default * dirs)]
    per = len(default)
    b = Steps(graph, node)
    ins = list(node.inputs) + [None] * (8 - len(node.inputs))
    x = ins[0]
    t_len, batch = (x.type.shape[1], x.type.shape[0]) if layout else (x.type.shape[0], x.type.shape[1])
    W, R = np.asarray(ins[1].const), np.asarray(ins[2].const)
    hidden = R.shape[-1]
    B = np.asarray(ins[3].const) if ins[3] is not None else np.zeros((dirs, 2 * gates * hidden), W.dtype)
    P = np.asarray(ins[7].const) if node.op == "lstm" and ins[7] is not None else None
    h0_all, c0_all = ins[5], (ins[6] if node.op == "lstm" else None)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        act = acts[d * per:(d + 1) * per]
        wt, rt = b.const(W[d].T, f"W{d}"), R[d]
        wb, rb = B[d][:gates * hidden], B[d][gates * hidden:]
        folded = wb + rb
        if node.op == "gru" and int(a.get("linear_before_reset", 0)):  # Rbh stays inside r ⊙ (…)
            folded[2 * hidden:] = wb[2 * hidden:]
        bias = b.const(folded.reshape(1, -1), f"B{d}")

        def state(v: Value | None, name: str) -> Value:
            if v is None:
                return b.const(np.zeros((batch, hidden)), f"{name}{d}")
            s = v
            if layout:  # [B, D, H]
                return b.op("gather", s, b.index(d), axis=1)
            return b.op("gather", s, b.index(d), axis=0)

        h, c = state(h0_all, "h0_"), (state(c0_all, "c0_") if node.op == "lstm" else None)
        steps = range(t_len) if (direction == "forward" or d == 0) and direction != "reverse" else range(t_len - 1, -1, -1)
        out_at: dict[int, Value] = {}
        for t in steps:
            xt = b.op("gather", x, b.index(t), axis=1 if layout else 0)  # [B, I]
            xw = b.op("add", b.op("matmul", xt, wt), bias)  # [B, gates*H], both biases folded in
            h, c = _CELLS[node.op](b, xw, h, c, rt, rb, P[d] if P is not None else None, hidden, act, a, d)
            out_at[t] = h
        order = [out_at[t] for t in range(t_len)]
        ys.append(b.op("concat", *[b.op("unsqueeze", v, b.const([0, 1] if not layout else [1, 2], f"ax{d}", "int64"))
                                    for v in order], axis=1 if layout else 0))  # [T,1,B,H] / [B,T,1,H]
        hs.append(b.op("unsqueeze", h, b.const([1 if layout else 0], f"hax{d}", "int64")))
        if c is not None:
            cs.append(b.op("unsqueeze", c, b.const([1 if layout else 0], f"cax{d}", "int64")))
    results = [b.op("concat", *ys, axis=2 if layout else 1) if dirs > 1 else ys[0],
               b.op("concat", *hs, axis=1 if layout else 0) if dirs > 1 else hs[0]]
    if node.op == "lstm":
        results.append(b.op("concat", *cs, axis=1 if layout else 0) if dirs > 1 else cs[0])
    graph.replace_node(node, results)
    return b.nodes


def _split(b: Steps, v: Value, k: int, hidden: int) -> Value:
    return b.op("slice", v, b.const([k * hidden], "s", "int64"), b.const([(k + 1) * hidden], "e", "int64"),
                b.const([1], "a", "int64"))


def _rnn(b: Steps, xw: Value, h: Value, c: Value | None, rt: np.ndarray, rb: np.ndarray, p: Any, hidden: int,
         act: list[str], a: dict[str, Any], d: int) -> tuple[Value, None]:
    return b.op(act[0], b.op("add", xw, b.op("matmul", h, b.const(rt.T, f"R{d}")))), None


def _gru(b: Steps, xw: Value, h: Value, c: Value | None, rt: np.ndarray, rb: np.ndarray, p: Any, hidden: int,
         act: list[str], a: dict[str, Any], d: int) -> tuple[Value, None]:
    f, g = act
    hz = b.op("matmul", h, b.const(rt[:2 * hidden].T, f"Rzr{d}"))  # [B, 2H]: z, r
    z = b.op(f, b.op("add", _split(b, xw, 0, hidden), _split(b, hz, 0, hidden)))
    r = b.op(f, b.op("add", _split(b, xw, 1, hidden), _split(b, hz, 1, hidden)))
    rh_t = b.const(rt[2 * hidden:].T, f"Rh{d}")
    xh = _split(b, xw, 2, hidden)  # x Wh^T + Wbh (+ Rbh when linear_before_reset=0)
    if int(a.get("linear_before_reset", 0)):  # r ⊙ (H Rh^T + Rbh)
        inner = b.op("add", b.op("matmul", h, rh_t), b.const(rb[2 * hidden:].reshape(1, -1), f"Rbh{d}"))
        cand = b.op(g, b.op("add", xh, b.op("mul", r, inner)))
    else:
        cand = b.op(g, b.op("add", xh, b.op("matmul", b.op("mul", r, h), rh_t)))
    one = b.const(np.ones((1, 1)), f"one{d}")
    return b.op("add", b.op("mul", b.op("sub", one, z), cand), b.op("mul", z, h)), None


def _lstm(b: Steps, xw: Value, h: Value, c: Value | None, rt: np.ndarray, rb: np.ndarray, p: Any, hidden: int,
          act: list[str], a: dict[str, Any], d: int) -> tuple[Value, Value]:
    f, g, hh = act
    gates = b.op("add", xw, b.op("matmul", h, b.const(rt.T, f"R{d}")))  # [B, 4H]: i, o, f, c

    def peep(k: int, state: Value) -> Value | None:
        return None if p is None else b.op("mul", state, b.const(p[k * hidden:(k + 1) * hidden].reshape(1, -1), f"P{k}{d}"))

    def gate(k: int, pk: int | None, state: Value) -> Value:
        pre = _split(b, gates, k, hidden)
        pp = peep(pk, state) if pk is not None else None
        return b.op(f, b.op("add", pre, pp) if pp is not None else pre)

    assert c is not None
    i = gate(0, 0, c)
    fg = gate(2, 2, c)
    cand = b.op(g, _split(b, gates, 3, hidden))
    c_new = b.op("add", b.op("mul", fg, c), b.op("mul", i, cand))
    o = gate(1, 1, c_new)
    return b.op("mul", o, b.op(hh, c_new)), c_new


_CELLS: dict[str, Callable[..., tuple[Value, Value | None]]] = {"rnn": _rnn, "gru": _gru, "lstm": _lstm}

#: the ops with a decomposition written in Python (dynamic_quantize_lstm: compile/dq_lstm.py;
#: dft: compile/spectral.py; einsum: compile/einsum.py)
OPS = frozenset(_SPEC) | {"loop", "dynamic_quantize_lstm", "dft", "einsum"}
#: ops whose Python expansion is preferred to their table decomposition (the exact form; the
#: table's is the fallback when a target rejects what the expansion writes)
PREFERRED = frozenset({"dynamic_quantize_lstm"})


def unrollable(node: Node) -> bool:
    """Whether the loop a PREFERRED op's expansion writes has a static trip count (so a target
    that rejects the loop gets it unrolled)."""
    x = node.inputs[0] if node.inputs else None
    return x is not None and x.type.shape is not None and len(x.type.shape) >= 1 and isinstance(x.type.shape[0], int)

from .unroll_loop import LOOP_CAP, expand_loop, loop_trips, loop_why_not  # noqa: E402

__all__ = ["OPS", "PREFERRED", "unrollable", "LOOP_CAP", "why_not", "expand", "loop_trips", "loop_why_not", "expand_loop"]
