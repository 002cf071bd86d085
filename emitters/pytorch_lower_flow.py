"""PyTorch lowerings: control flow (if / loop / scan as nested functions) and recurrences."""
from __future__ import annotations

from .pytorch_ops import NodeEmit, literal, lowering


def _assign_tuple(e: NodeEmit, code: str) -> str:
    outs = e.outs
    lhs = outs[0] + "," if len(outs) == 1 else ", ".join(outs)
    return f"{lhs} = {code}"


@lowering("if")
def if_(e: NodeEmit) -> list[str]:
    then_fn = e.body(e.attr("then_branch"), "then")
    else_fn = e.body(e.attr("else_branch"), "else")
    cond = f"bool({e.x(0)}.reshape(-1)[0])"
    return [_assign_tuple(e, f"{then_fn}() if {cond} else {else_fn}()")]


@lowering("loop")
def loop(e: NodeEmit) -> list[str]:
    body = e.body(e.attr("body"), "body")
    trip = e.x(0) if e.has(0) else "None"
    cond = e.x(1) if e.has(1) else "None"
    states = [e.cg.ref(v) if v is not None else "None" for v in e.node.inputs[2:]]
    n_scan = e.n_out() - len(states)
    args = ", ".join([trip, cond, body, str(n_scan)] + states)
    return [_assign_tuple(e, f"{e.helper('_loop')}({args})")]


@lowering("scan")
def scan(e: NodeEmit) -> list[str]:
    body = e.body(e.attr("body"), "body")
    m = int(e.attr("num_scan_inputs"))
    ins = e.xs()
    n = len(ins) - m
    opts = {k: e.attr(k) for k in ("scan_input_axes", "scan_input_directions", "scan_output_axes",
                                   "scan_output_directions")}
    kw = ", ".join(f"{k}={literal([int(a) for a in v]) if v else 'None'}" for k, v in opts.items())
    code = f"{e.helper('_scan')}({body}, [{', '.join(ins[:n])}], [{', '.join(ins[n:])}], {kw})"
    return [_assign_tuple(e, code)]


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


@lowering("rnn")
def rnn(e: NodeEmit) -> list[str]:
    return _recurrent(e, "rnn", 1, ["Tanh"])


@lowering("gru")
def gru(e: NodeEmit) -> list[str]:
    return _recurrent(e, "gru", 3, ["Sigmoid", "Tanh"])


@lowering("lstm")
def lstm(e: NodeEmit) -> list[str]:
    return _recurrent(e, "lstm", 4, ["Sigmoid", "Tanh", "Tanh"])


@lowering("linear_attention")
def linear_attention(e: NodeEmit) -> list[str]:
    """The recurrence over time through the ``_linear_attention`` helper."""
    ins = [e.x(i) if e.has(i) else "None" for i in range(6)]
    state = e.dtype(3) if e.has(3) else e.dtype(0)
    call = (f"{e.helper('_linear_attention')}({', '.join(ins)}, {int(e.attr('q_num_heads'))}, "
            f"{int(e.attr('kv_num_heads'))}, {literal(float(e.attr('scale') or 0.0))}, "
            f"{literal(str(e.attr('update_rule')))}, {state})")
    outs = e.outs
    if len(outs) == 2:
        return [f"{outs[0]}, {outs[1]} = {call}"]
    return [f"{outs[0]} = {call}[0]"]
