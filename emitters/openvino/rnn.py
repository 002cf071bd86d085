"""OpenVINO rules of the ONNX recurrent ops: RNN / GRU / LSTM → RNNSequence /
GRUSequence / LSTMSequence (opset5).

Layout differences handled here: OpenVINO is batch-major ([batch, seq, input],
states [batch, num_directions, H], Y [batch, num_directions, seq, H]); ONNX (layout 0)
is sequence-major. Biases: OpenVINO takes Wb + Rb (GRU with linear_before_reset keeps
Rb of the h gate apart); LSTM gates are reordered from ONNX i, o, f, c to OpenVINO
f, i, c, o. Missing initial states / sequence lengths become zeros / the full length.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.ir.graph import Node

from .helpers import Refusal, attr, dim, i64
from .registry import rule

if TYPE_CHECKING:
    from .codegen import Gen

_GATES = {"rnn": 1, "gru": 3, "lstm": 4}
_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _check(node: Node) -> Refusal | None:
    x = node.inputs[0]
    if x is None or x.type.rank != 3:
        return Refusal("dynamic_shape", "the recurrent input X needs rank 3")
    acts = attr(node, "activations")
    n = {"rnn": 1, "gru": 2, "lstm": 3}[node.op]
    if acts and len(acts) == 2 * n and [a.lower() for a in acts[:n]] != [a.lower() for a in acts[n:]]:
        return Refusal("unsupported_attribute_value", "OpenVINO uses the same activations for both directions")
    if node.op == "lstm":
        if int(attr(node, "input_forget", 0)):
            return Refusal("unsupported_attribute_value", "OpenVINO LSTMSequence has no input_forget")
        if len(node.inputs) > 7 and node.inputs[7] is not None:
            return Refusal("unsupported_attribute_value", "OpenVINO LSTMSequence has no peepholes (P)")
    return None


def _reorder(g: "Gen", x: str, axis: int, order: list[int]) -> str:
    """Split ``x`` into len(order) equal parts along ``axis`` and concatenate them in ``order``."""
    parts = g.let(f"ops.split({x}, {i64(g, axis)}, {len(order)})")
    return g.let(f"ops.concat([{', '.join(f'{parts}.output({k})' for k in order)}], {axis})")


def _activations(g: "Gen", n: int) -> str:
    acts = g.a("activations")
    alpha, beta = g.a("activation_alpha"), g.a("activation_beta")
    out = []
    if acts:
        out.append(f"activations={g.lit([a.lower() for a in acts[:n]])}")
    if alpha:
        out.append(f"activations_alpha={g.lit([float(a) for a in alpha[:n]])}")
    if beta:
        out.append(f"activations_beta={g.lit([float(b) for b in beta[:n]])}")
    clip = g.a("clip")
    if clip is not None:
        out.append(f"clip={float(clip)}")
    return "".join(f", {o}" for o in out)


def _lower(g: "Gen", node: Node) -> None:
    op = node.op
    gates = _GATES[op]
    hidden = int(g.a("hidden_size"))
    direction = str(g.a("direction"))
    nd = _DIRECTIONS[direction]
    layout = int(g.a("layout", 0))
    dt = g.dtype(0)
    x = g.x(0) if layout else g.let(f"ops.transpose({g.x(0)}, {i64(g, [1, 0, 2])})")
    # batch and sequence sizes from the run-time shape (they may be symbolic): [batch, seq, input]
    batch, seq = dim(g, x, 0), dim(g, x, 1)
    w, r = g.x(1), g.x(2)
    b = g.x(3)
    if b is None:
        b = g.const(np.zeros((nd, 2 * gates * hidden)), dt)
    halves = g.let(f"ops.split({b}, {i64(g, 1)}, 2)")
    wb, rb = f"{halves}.output(0)", f"{halves}.output(1)"
    if op == "gru" and int(g.a("linear_before_reset")):
        # [Wbz + Rbz, Wbr + Rbr, Wbh, Rbh]
        wp, rp = g.let(f"ops.split({wb}, {i64(g, 1)}, 3)"), g.let(f"ops.split({rb}, {i64(g, 1)}, 3)")
        bias = g.let(f"ops.concat([ops.add({wp}.output(0), {rp}.output(0)), ops.add({wp}.output(1), {rp}.output(1)), "
                     f"{wp}.output(2), {rp}.output(2)], 1)")
    else:
        bias = g.let(f"ops.add({wb}, {rb})")
    if op == "lstm":  # ONNX gates i, o, f, c -> OpenVINO f, i, c, o
        order = [2, 0, 3, 1]
        w, r, bias = _reorder(g, w, 1, order), _reorder(g, r, 1, order), _reorder(g, bias, 1, order)

    def state(i: int) -> str:
        v = g.x(i)
        if v is None:
            zero = g.const(np.zeros(()), dt)
            return g.let(f"ops.broadcast({zero}, ops.concat([ops.unsqueeze({batch}, {i64(g, 0)}), "
                         f"{i64(g, [nd, hidden])}], 0))")
        return v if layout else g.let(f"ops.transpose({v}, {i64(g, [1, 0, 2])})")

    lens = g.x(4)
    if lens is None:
        lens = g.let(f"ops.broadcast({seq}, ops.unsqueeze({batch}, {i64(g, 0)}))")
    h0 = state(5)
    common = f"{hidden}, {g.lit(direction)}{_activations(g, {'rnn': 1, 'gru': 2, 'lstm': 3}[op])}"
    if op == "lstm":
        t = g.let(f"ops.lstm_sequence({x}, {h0}, {state(6)}, {lens}, {w}, {r}, {bias}, {common})")
    elif op == "gru":
        lbr = bool(int(g.a("linear_before_reset")))
        t = g.let(f"ops.gru_sequence({x}, {h0}, {lens}, {w}, {r}, {bias}, {common}, linear_before_reset={lbr})")
    else:
        t = g.let(f"ops.rnn_sequence({x}, {h0}, {lens}, {w}, {r}, {bias}, {common})")
    # Y: [batch, nd, seq, H] -> [seq, nd, batch, H] (layout 0) or [batch, seq, nd, H] (layout 1)
    g.out(0, f"ops.transpose({t}.output(0), {i64(g, [0, 2, 1, 3] if layout else [2, 1, 0, 3])})")
    for i in range(1, len(node.outputs)):  # Y_h, Y_c: [batch, nd, H] -> [nd, batch, H] (layout 0)
        g.out(i, f"ops.identity({t}.output({i}))" if layout else
              f"ops.transpose({t}.output({i}), {i64(g, [1, 0, 2])})")


rule("rnn", "gru", "lstm", check=_check)(_lower)
