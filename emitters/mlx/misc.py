"""MLX rules: signal-processing windows (the ONNX formulas over ``mx.arange``, in float32), If and Loop (on the host)."""
from __future__ import annotations

from .codegen import NodeEmit, mx_dtype
from .registry import rule

#: window → its cosine series over 2 pi n / N: (a0, a1, a2) in a0 - a1 cos(x) + a2 cos(2x)
_WINDOWS = {"hann_window": (0.5, 0.5, 0.0), "hamming_window": (25.0 / 46.0, 21.0 / 46.0, 0.0),
            "blackman_window": (0.42, 0.5, 0.08)}


@rule(*_WINDOWS)
def window(e: NodeEmit) -> list[str]:
    """w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size (periodic) or size - 1."""
    a0, a1, a2 = _WINDOWS[e.node.op]
    size = f"int({e.x(0)}.item())"
    span = size if e.attr("periodic") else f"({size} - 1)"
    n = e.tmp("n")
    x = f"2 * math.pi * {n} / {span}"
    series = f"{a0!r} - {a1!r} * mx.cos({x})" + (f" + {a2!r} * mx.cos(2 * {x})" if a2 else "")
    return [f"{n} = mx.arange({size}, dtype=mx.float32)",
            f"{e.out()} = mx.astype({series}, {mx_dtype(e.node.outputs[0].type.dtype or 'float32')})"]


@rule("if")
def if_(e: NodeEmit) -> list[str]:
    """MLX is eager: the condition is evaluated and one branch's nested function called."""
    then_fn = e.body(e.attr("then_branch"), "then")
    else_fn = e.body(e.attr("else_branch"), "else")
    return [f"{_targets(e.outs)} = {then_fn}() if bool(mx.reshape({e.x(0)}, (-1,))[0].item()) else {else_fn}()"]


def _targets(outs: list[str]) -> str:
    """The left-hand side unpacking a tuple into ``outs`` (``y,`` for one)."""
    return outs[0] + "," if len(outs) == 1 else ", ".join(outs)


@rule("loop")
def loop(e: NodeEmit) -> list[str]:
    """MLX has no loop construct: the host runs the body (a nested function) in a Python while
    loop, as the column's note says, the scan outputs stacked at the end (``_loop``)."""
    body = e.attr("body")
    n_carried = len(e.node.inputs) - 2
    n_scan = len(body.outputs) - 1 - n_carried
    fn = e.body(body, "body")
    trip = "None" if e.v(0) is None else e.x(0)
    cond = "None" if e.v(1) is None else e.x(1)
    carried = ", ".join(e.x(2 + k) for k in range(n_carried)) + ("," if n_carried == 1 else "")
    empty = []
    for k in range(n_scan):
        item = body.outputs[1 + n_carried + k].type
        dims = [d if isinstance(d, int) else 0 for d in (item.shape or ())]
        empty.append(f"({tuple([0] + dims)!r}, {mx_dtype(item.dtype or 'float32')})")
    call = f"{e.helper('_loop')}({fn}, {trip}, {cond}, ({carried}), {n_scan}, [{', '.join(empty)}])"
    if len(e.outs) < n_carried + n_scan:  # trailing outputs left out by the model
        call += f"[:{len(e.outs)}]"
    return [f"{_targets(e.outs)} = {call}"]
