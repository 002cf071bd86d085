"""PyTorch rules: control flow (if / loop / scan as nested functions) and sequences."""
from __future__ import annotations

from translator.compile.render import literal

from .node import NodeEmit
from .registry import rule


def _assign_tuple(e: NodeEmit, code: str) -> str:
    outs = e.outs
    lhs = outs[0] + "," if len(outs) == 1 else ", ".join(outs)
    return f"{lhs} = {code}"


@rule("if")
def if_(e: NodeEmit) -> list[str]:
    then_fn = e.body(e.attr("then_branch"), "then")
    else_fn = e.body(e.attr("else_branch"), "else")
    cond = f"bool({e.x(0)}.reshape(-1)[0])"
    return [_assign_tuple(e, f"{then_fn}() if {cond} else {else_fn}()")]


@rule("loop")
def loop(e: NodeEmit) -> list[str]:
    body = e.body(e.attr("body"), "body")
    trip = e.x(0) if e.has(0) else "None"
    cond = e.x(1) if e.has(1) else "None"
    states = [e.cg.ref(v) if v is not None else "None" for v in e.node.inputs[2:]]
    n_scan = e.n_out() - len(states)
    args = ", ".join([trip, cond, body, str(n_scan)] + states)
    return [_assign_tuple(e, f"{e.helper('_loop')}({args})")]


@rule("scan")
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




@rule("split_to_sequence")
def split_to_sequence(e: NodeEmit) -> str:
    x = e.x(0)
    a = int(e.attr("axis"))
    if not e.has(1):
        if e.attr("keepdims"):
            return f"list(torch.split({x}, 1, dim={a}))"
        return f"list(torch.unbind({x}, dim={a}))"
    c = e.const(1)
    size = e.ints_code(1) if c is None or c.ndim else literal(int(c))
    return f"list(torch.split({x}, {size}, dim={a}))"


@rule("concat_from_sequence")
def concat_from_sequence(e: NodeEmit) -> str:
    fn = "stack" if e.attr("new_axis") else "cat"
    return f"torch.{fn}({e.x(0)}, dim={int(e.attr('axis'))})"
