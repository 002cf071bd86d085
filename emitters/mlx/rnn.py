"""MLX rules: RNN, GRU and LSTM (the ``mlx`` cells' snippets run one forward direction only)."""
from __future__ import annotations

from translator.compile.render import literal

from .codegen import NodeEmit
from .registry import rule

_DEFAULT = {"rnn": ["tanh"], "gru": ["sigmoid", "tanh"], "lstm": ["sigmoid", "tanh", "tanh"]}


def _recurrence(e: NodeEmit, kind: str) -> list[str]:
    acts = [str(a).lower() for a in (e.attr("activations") or [])]
    if acts and acts != _DEFAULT[kind] * (len(acts) // len(_DEFAULT[kind])):
        raise e.refuse("unsupported_attr", f"activations {acts} (the helper has the defaults only)")
    if e.attr("clip") is not None:
        raise e.refuse("unsupported_attr", "clip")
    if kind == "lstm" and e.attr("input_forget"):
        raise e.refuse("unsupported_attr", "input_forget=1")
    if e.v(4) is not None:
        raise e.refuse("unsupported_attr", "sequence_lens (per-batch lengths) is not written")
    x = [e.x(i) if e.v(i) is not None else "None" for i in range(8 if kind == "lstm" else 6)]
    c0, p = (x[6], x[7]) if kind == "lstm" else ("None", "None")
    args = [literal(kind), x[0], x[1], x[2], x[3], x[5], c0, p, literal(int(e.attr("hidden_size"))),
            literal(str(e.attr("direction") or "forward")), literal(int(e.attr("layout") or 0)),
            literal(int(e.attr("linear_before_reset") or 0) if kind == "gru" else 0)]
    outs = e.outs
    return [f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {e.helper('_rnn')}({', '.join(args)})[:{len(outs)}]"]


@rule("lstm")
def lstm(e: NodeEmit) -> list[str]:
    return _recurrence(e, "lstm")


@rule("gru")
def gru(e: NodeEmit) -> list[str]:
    return _recurrence(e, "gru")


@rule("rnn")
def rnn(e: NodeEmit) -> list[str]:
    return _recurrence(e, "rnn")
