"""PyTorch rules: recurrences (RNN, GRU, LSTM) through the ``_recurrence`` helper."""
from __future__ import annotations

from translator.render import literal

from .node import NodeEmit
from .registry import rule


def _recurrent(e: NodeEmit, kind: str, gates: int, defaults: list[str]) -> list[str]:
    """The ONNX recurrence through the ``_recurrence`` helper (one Python loop over time)."""
    names = e.node.attrs.get("activations")
    direction = str(e.attr("direction"))
    num_dir = 2 if direction == "bidirectional" else 1
    acts = [str(a) for a in names] if names else defaults * num_dir
    alphas = [float(a) for a in e.attr("activation_alpha") or []]
    betas = [float(a) for a in e.attr("activation_beta") or []]
    clip = e.attr("clip")
    inputs = [e.x(i) if e.has(i) else "None" for i in range(len(e.node.inputs))]
    inputs += ["None"] * (8 - len(inputs))
    if kind != "lstm":
        inputs = inputs[:6] + ["None", "None"]
    x, w, r, b, lens, h0, c0, p = inputs
    extra = {"linear_before_reset": bool(e.attr("linear_before_reset")) if kind == "gru" else False,
             "input_forget": bool(e.attr("input_forget")) if kind == "lstm" else False}
    call = (f"{e.helper('_recurrence')}({literal(kind)}, {x}, {w}, {r}, {b}, {lens}, {h0}, {c0}, {p}, "
            f"{literal(acts)}, {literal(alphas)}, {literal(betas)}, {literal(None if clip is None else float(clip))}, "
            f"{literal(direction)}, {bool(e.attr('layout'))}, {extra['linear_before_reset']}, {extra['input_forget']})")
    outs = e.outs
    y, rest = e.tmp("y"), [e.tmp("h_final"), e.tmp("c_final")]
    lines = [f"{y}, {rest[0]}, {rest[1]} = {call}"]
    sources = [y] + rest
    for name, src in zip(outs, sources):
        lines.append(f"{name} = {src}")
    return lines


@rule("rnn")
def rnn(e: NodeEmit) -> list[str]:
    return _recurrent(e, "rnn", 1, ["Tanh"])


@rule("gru")
def gru(e: NodeEmit) -> list[str]:
    return _recurrent(e, "gru", 3, ["Sigmoid", "Tanh"])


@rule("lstm")
def lstm(e: NodeEmit) -> list[str]:
    return _recurrent(e, "lstm", 4, ["Sigmoid", "Tanh", "Tanh"])
