"""OpenVINO rules of the ONNX recurrent ops: RNN / GRU / LSTM → RNNSequence /
GRUSequence / LSTMSequence (opset5).

Layout differences handled here: OpenVINO is batch-major ([batch, seq, input],
states [batch, num_directions, H], Y [batch, num_directions, seq, H]); ONNX (layout 0)
is sequence-major. Biases: OpenVINO takes Wb + Rb (GRU with linear_before_reset keeps
Rb of the h gate apart); LSTM gates are reordered from ONNX i, o, f, c to OpenVINO
f, i, c, o. Missing initial states / sequence lengths become zeros / the full length.

An LSTM over int8 weights (onnxruntime's ``DynamicQuantizeLSTM``, read by
``quantized.dynamic_lstm_as_weight_only``) whose input X and initial state the graph bounds
(``quantized.proven_bound``: another recurrence's hidden states, an embedding table) is the
CPU plugin's integer LSTM: FakeQuantize on X and the state (one u8 grid for both, as oneDNN's
int8 recurrences quantize them), the weights int8 behind a FakeQuantize of their own grid.
The plugin then runs it as ``RNNSeq`` in u8/i8 (``ref_any_I8``), about 3.5x faster than the
float LSTM for 768 units. An X that nothing bounds (a model input, a normalized feature)
keeps the float LSTM over the dequantized weights: a fixed grid would clip it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from translator.ir.graph import Node

from .helpers import Refusal, attr, dim, i64
from .registry import rule

#: the widest X a u8 grid over [-B, B] shares with the hidden state (in [-1, 1]) before its
#: step grows past 8x the state's own: a wider input keeps the float LSTM
INT8_LSTM_MAX_BOUND = 8.0

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


def _gate_blocks(a: np.ndarray) -> np.ndarray:
    """``a`` (``[nd, 4H, ...]``) with its gate blocks in OpenVINO's order: ONNX i, o, f, c -> f, i, c, o."""
    return np.concatenate([np.split(a, 4, axis=1)[k] for k in (2, 0, 3, 1)], axis=1)


def _weight_parts(v: "Any", nd: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """An int8 LSTM weight's integers, scales and zero points (``[nd, 4H, rows]``, one scale and
    zero point per row) in OpenVINO's gate order; else None."""
    from translator.compile.quantized import weight_only_parts

    parts = weight_only_parts(v)
    if parts is None:
        return None
    q, s, z = parts
    if q.ndim != 3 or q.shape[0] != nd or not (np.all(s == s[..., :1]) and np.all(z == z[..., :1])):
        return None
    return _gate_blocks(q), _gate_blocks(s[..., :1].astype(np.float32)), _gate_blocks(z[..., :1])


def _int8_plan(node: Node, options: dict[str, Any]) -> tuple[float, bool] | None:
    """Whether the LSTM ``node`` is the CPU plugin's integer LSTM: (the grid's bound B, whether
    its initial state is zero), or None. It takes float32, the default
    activations, symmetric int8 weights (a scale per direction or per gate row), a constant
    bias, and X and the initial state within a bound the graph proves
    (``quantized.proven_bound``; B is at least the hidden state's 1)."""
    from translator.compile.quantized import proven_bound, recurrence_is_plain

    if options.get("float_quantization") or options.get("float_recurrence") or node.op != "lstm" \
            or node.inputs[0] is None or node.inputs[0].type.dtype != "float32" or not recurrence_is_plain(node):
        return None
    h0 = node.inputs[5] if len(node.inputs) > 5 else None
    bounds = [proven_bound(node.inputs[0])] + ([proven_bound(h0)] if h0 is not None else [])
    if None in bounds or max(bounds) > INT8_LSTM_MAX_BOUND:  # type: ignore[type-var, operator]
        return None
    b = node.inputs[3] if len(node.inputs) > 3 else None
    if b is not None and not b.is_const:
        return None
    nd = _DIRECTIONS.get(str(node.attrs.get("direction", "forward")), 1)
    for v in node.inputs[1:3]:
        parts = _weight_parts(v, nd)
        if parts is None or parts[0].dtype != np.int8 or parts[2].any():
            return None
    return max([1.0] + bounds), h0 is None or bounds[1] == 0.0  # type: ignore[type-var]


def _lpt_runs(node: Node, options: dict[str, Any]) -> bool:
    """Whether the graph of ``node`` holds an integer LSTM: the CPU plugin's low-precision
    transformations then run, and a float LSTM's int8 weights take another form
    (``_lstm_weights``)."""
    return any(_int8_plan(n, options) is not None for n in node.graph.nodes if n.op == "lstm")


def _on_grid(g: "Gen", x: str, bound: float) -> str:
    """``x`` through the u8 FakeQuantize over [-bound * 128/127, bound] (zero on a level)."""
    lo, hi = g.const(np.float32(-bound * 128 / 127), "float32"), g.const(np.float32(bound), "float32")
    return g.let(f"ops.fake_quantize({x}, {lo}, {hi}, {lo}, {hi}, 256)")


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

    def state(i: int, n: int = nd, zero: bool = False) -> str:
        v = g.x(i)
        if v is None or zero:
            z = g.const(np.zeros(()), dt)
            return g.let(f"ops.broadcast({z}, ops.concat([ops.unsqueeze({batch}, {i64(g, 0)}), "
                         f"{i64(g, [n, hidden])}], 0))")
        return v if layout else g.let(f"ops.transpose({v}, {i64(g, [1, 0, 2])})")

    lens = g.x(4)
    if lens is None:
        lens = g.let(f"ops.broadcast({seq}, ops.unsqueeze({batch}, {i64(g, 0)}))")
    plan = _int8_plan(node, g.em.options) if op == "lstm" else None
    if plan is not None:
        outs = _int8_sequences(g, node, x, lens, plan, state)
    else:
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
            lpt = _lpt_runs(node, g.em.options)
            w, r = (_lstm_weights(g, node, i, nd, lpt) for i in (1, 2))
            bias = _reorder(g, bias, 1, [2, 0, 3, 1])
        h0 = state(5)
        common = f"{hidden}, {g.lit(direction)}{_activations(g, {'rnn': 1, 'gru': 2, 'lstm': 3}[op])}"
        if op == "lstm":
            t = g.let(f"ops.lstm_sequence({x}, {h0}, {state(6)}, {lens}, {w}, {r}, {bias}, {common})")
        elif op == "gru":
            lbr = bool(int(g.a("linear_before_reset")))
            t = g.let(f"ops.gru_sequence({x}, {h0}, {lens}, {w}, {r}, {bias}, {common}, linear_before_reset={lbr})")
        else:
            t = g.let(f"ops.rnn_sequence({x}, {h0}, {lens}, {w}, {r}, {bias}, {common})")
        outs = [f"{t}.output({i})" for i in range(3)]
    # Y: [batch, nd, seq, H] -> [seq, nd, batch, H] (layout 0) or [batch, seq, nd, H] (layout 1)
    g.out(0, f"ops.transpose({outs[0]}, {i64(g, [0, 2, 1, 3] if layout else [2, 1, 0, 3])})")
    for i in range(1, len(node.outputs)):  # Y_h, Y_c: [batch, nd, H] -> [nd, batch, H] (layout 0)
        g.out(i, f"ops.identity({outs[i]})" if layout else f"ops.transpose({outs[i]}, {i64(g, [1, 0, 2])})")


def _lstm_weights(g: "Gen", node: Node, i: int, nd: int, lpt: bool) -> str:
    """The float LSTM's weight ``i`` in OpenVINO's gate order: int8 constants behind their
    dequantization when they are, else the split and concat of whatever computes it. When the
    graph holds an integer LSTM too (``_lpt_runs``) the integers are widened to int32 before the
    float conversion: the plugin's low-precision transformations keep an int8 -> float Convert
    unfolded as a compressed weight, which its LSTM refuses ("expects Constant for port 4"),
    and fold the widened one (exact: int8 fits int32 and float32)."""
    parts = _weight_parts(node.inputs[i], nd)
    if parts is None:
        return _reorder(g, g.x(i), 1, [2, 0, 3, 1])  # type: ignore[arg-type]
    return _dequantized(g, *parts, widen=lpt)


def _dequantized(g: "Gen", q: np.ndarray, s: np.ndarray, z: np.ndarray, widen: bool = False) -> str:
    """8-bit constants ``q`` dequantized, ``(q - z) * s`` (``widen``: through int32 first)."""
    w = g.const(q, str(q.dtype))
    if widen:
        w = f"ops.convert({w}, {g.ty('int32')})"
    w = f"ops.convert({w}, {g.ty('float32')})"
    if z.any():
        w = f"ops.subtract({w}, {g.const(z.astype(np.float32), 'float32')})"
    return g.let(f"ops.multiply({w}, {g.const(s, 'float32')})")


def _int8_sequences(g: "Gen", node: Node, x: str, lens: str, plan: tuple[float, bool], state: "Any") -> list[str]:
    """The CPU plugin's integer LSTM (``_int8_plan``): X and the initial state on one u8 grid,
    the int8 weights on their own behind a FakeQuantize; two directions as a forward and a
    reverse sequence (the plugin splits a bidirectional one after its low-precision
    transformations, which leaves it in float), their outputs concatenated. Returns Y, Y_h, Y_c."""
    g.em.features.add("int8_recurrence")
    hidden, direction = int(g.a("hidden_size")), str(g.a("direction"))
    nd = _DIRECTIONS[direction]
    wq, rq = _weight_parts(node.inputs[1], nd), _weight_parts(node.inputs[2], nd)
    b = node.inputs[3] if len(node.inputs) > 3 else None
    both = np.zeros((nd, 8 * hidden), np.float32) if b is None else np.asarray(b.const, np.float32)
    bias = _gate_blocks(both[:, :4 * hidden] + both[:, 4 * hidden:])
    x = _on_grid(g, x, plan[0])
    n = node.inputs[0].type.shape[1 - int(g.a("layout", 0))] if node.inputs[0].type.shape is not None else None
    if plan[1] and isinstance(n, int):  # a zero state at a batch fixed here: a constant, which the
        # transformations take as it is (a FakeQuantize of it folds, and then they leave the LSTM)
        h0 = g.const(np.zeros((n, 1 if nd == 2 else nd, hidden), np.float32), "float32")
    else:
        h0 = _on_grid(g, state(5, 1 if nd == 2 else nd, zero=plan[1]), plan[0])
    c0 = state(6, nd)
    if nd == 2:
        hs = [h0] * 2 if plan[1] else [f"{g.let(f'ops.split({h0}, {i64(g, 1)}, 2)')}.output({d})" for d in (0, 1)]
        c_split = g.let(f"ops.split({c0}, {i64(g, 1)}, 2)")
        cs = [f"{c_split}.output({d})" for d in (0, 1)]
    else:
        hs, cs = [h0], [c0]
    seqs = []
    for d, way in enumerate(("forward", "reverse") if nd == 2 else (direction,)):
        w = _on_weight_grid(g, *(a[d:d + 1] for a in wq))  # type: ignore[union-attr]
        r = _on_weight_grid(g, *(a[d:d + 1] for a in rq))  # type: ignore[union-attr]
        seqs.append(g.let(f"ops.lstm_sequence({x}, {hs[d]}, {cs[d]}, {lens}, {w}, {r}, "
                          f"{g.const(bias[d:d + 1], 'float32')}, {hidden}, {g.lit(way)})"))
    if nd == 1:
        return [f"{seqs[0]}.output({i})" for i in range(3)]
    return [g.let(f"ops.concat([{seqs[0]}.output({i}), {seqs[1]}.output({i})], 1)") for i in range(3)]


def _on_weight_grid(g: "Gen", q: np.ndarray, s: np.ndarray, z: np.ndarray) -> str:
    """Symmetric int8 weights (``_weight_parts``) as int8 constants, dequantized, held to their
    grid by a FakeQuantize: what the plugin's low-precision transformations read as i8 weights."""
    low = -128 if q.min() < -127 else -127
    w = _dequantized(g, q, s, z)
    lo, hi = g.const(low * s, "float32"), g.const(127 * s, "float32")
    return g.let(f"ops.fake_quantize({w}, {lo}, {hi}, {lo}, {hi}, {127 - low + 1})")


rule("rnn", "gru", "lstm", check=_check)(_lower)
