"""TensorFlow rules for control flow: ``if`` (tf.cond), ``loop`` (tf.while_loop), ``scan``.
"""
from __future__ import annotations

from typing import Any

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .registry import rule


@rule("if")
def if_(c: Any) -> list[str]:
    then_fn, else_fn = c.tmp("then"), c.tmp("else")
    lines = c.body(c.attr("then_branch"), then_fn, []) + c.body(c.attr("else_branch"), else_fn, [])
    outs = c.outs() + ("," if len(c.node.outputs) == 1 else "")
    return lines + [f"{outs} = tf.cond({'tf.reshape(tf.cast(' + c.i(0) + ', tf.bool), [])'}, {then_fn}, {else_fn})"]


def _loop_check(n: Node) -> Refusal | None:
    body = n.attrs.get("body")
    if body is None:
        return Refusal("verifier", "loop without a body")
    for v in list(body.inputs) + list(body.outputs):
        if v.type.kind != "tensor":
            return Refusal("unsupported_dtype", f"loop-carried {v.type.kind} values")
    return None


@rule("loop", check=_loop_check)
def loop(c: Any) -> list[str]:
    """ONNX Loop → tf.while_loop over (iteration, condition, carried values…, scan accumulators…)."""
    return loop_lines(c, static_lists_only=False)


def loop_lines(c: Any, static_lists_only: bool) -> list[str]:
    """The while loop; each scan output accumulates in a TensorArray, or, where
    ``static_lists_only`` (TFLite lowers a TensorList only with a static element shape) and
    its element shape is not static, in a tensor the step concatenates to (the first step
    starts it)."""
    body = c.attr("body")
    n_carried = len(c.node.inputs) - 2
    n_scan = len(body.outputs) - 1 - n_carried
    fn, cond_fn, step_fn = c.tmp("body"), c.tmp("loop_cond"), c.tmp("loop_step")
    lines = c.body(body, fn, list(body.inputs))
    it_dt = c.tf(body.inputs[0].type.dtype or "int64") if body.inputs else "tf.int64"
    trip = f"tf.cast(tf.reshape({c.i(0)}, []), {it_dt})" if c.has(0) else None
    cond0 = f"tf.reshape(tf.cast({c.i(1)}, tf.bool), [])" if c.has(1) else "tf.constant(True)"
    carried = [c.i(2 + k) for k in range(n_carried)]
    it, go, res_ = c.tmp("i"), c.tmp("cond"), c.tmp("r")
    vs = [c.tmp(f"v{k}") for k in range(n_carried)]
    ss = [c.tmp(f"s{k}") for k in range(n_scan)]
    sig = ", ".join([it, go] + vs + ss)
    if trip is None:
        test = go
    elif c.has(1):
        test = f"tf.logical_and({it} < {trip}, {go})"
    else:
        test = f"{it} < {trip}"
    lines.append(f"def {cond_fn}({sig}):")
    lines.append(f"    return {test}")
    lines.append(f"def {step_fn}({sig}):")
    lines.append(f"    {res_} = {fn}({', '.join([it, go] + vs)})")
    ranks = [_carried_rank(c.node.inputs[2 + k], body.inputs[2 + k], body.outputs[1 + k])
             for k in range(n_carried)]
    # a carried value keeps its rank across iterations: ensure_shape states it to TensorFlow
    new = [f"{res_}[{1 + k}]" if r is None else f"tf.ensure_shape({res_}[{1 + k}], {[None] * r!r})"
           for k, r in enumerate(ranks)]
    scan_types = [body.outputs[1 + n_carried + k].type for k in range(n_scan)]
    static = [t.shape is not None and all(isinstance(d, int) and d >= 0 for d in t.shape) for t in scan_types]
    concat = [static_lists_only and not ok for ok in static]
    for k in range(n_scan):
        y = f"{res_}[{1 + n_carried + k}]"
        if concat[k]:
            new.append(f"tf.cond({it} > 0, lambda: tf.concat([{ss[k]}, {y}[None]], 0), lambda: {y}[None])")
        else:
            new.append(f"{ss[k]}.write(tf.cast({it}, tf.int32), {y})")
    lines.append(f"    return ({', '.join([f'{it} + 1', f'tf.reshape(tf.cast({res_}[0], tf.bool), [])'] + new)},)")
    accs, acc_inv = [], []
    for k, t in enumerate(scan_types):
        rank = None if t.shape is None else len(t.shape)
        if concat[k]:
            accs.append(f"tf.zeros({[0] * (1 + (rank or 0))!r}, {c.tf(t.dtype)})")
            acc_inv.append("tf.TensorShape(None)" if rank is None else f"tf.TensorShape({[None] * (1 + rank)!r})")
            continue
        shape = "None" if t.shape is None else c.lit([d if isinstance(d, int) else None for d in t.shape])
        accs.append(f"tf.TensorArray({c.tf(t.dtype)}, size=0, dynamic_size=True, element_shape={shape})")
        acc_inv.append("tf.TensorShape(None)")
    init = ", ".join([f"tf.constant(0, {it_dt})", cond0] + carried + accs)
    carried_inv = ["tf.TensorShape(None)" if r is None else f"tf.TensorShape({[None] * r!r})" for r in ranks]
    inv = ", ".join(["tf.TensorShape([])", "tf.TensorShape([])"] + carried_inv + acc_inv)
    res = c.tmp("loop")
    lines.append(f"{res} = tf.while_loop({cond_fn}, {step_fn}, ({init},), shape_invariants=({inv},))")
    for k in range(n_carried):
        lines.append(f"{c.o(k)} = {res}[{2 + k}]")
    for k in range(n_scan):
        got = f"{res}[{2 + n_carried + k}]"
        lines.append(f"{c.o(n_carried + k)} = {got if concat[k] else got + '.stack()'}")
    return lines


def _carried_rank(init: Any, body_in: Any, body_out: Any) -> int | None:
    """The rank of a loop-carried value, where the initial value and the body's input and
    output agree on it (an op in the body such as softmax needs the rank), else None. Its
    dims stay unknown: TensorFlow may not infer in the body a size the IR knows."""
    shapes = [v.type.shape if v is not None else None for v in (init, body_in, body_out)]
    known = [s for s in shapes if s is not None]
    if not known or len({len(s) for s in known}) != 1:
        return None
    return len(known[0])


def _scan_check(n: Node) -> Refusal | None:
    m = int(n.attrs.get("num_scan_inputs", 0))
    ins = [v for v in n.inputs if v is not None]
    scans = ins[len(ins) - m:]
    axes = list(n.attrs.get("scan_input_axes") or [0] * m)
    for v, a in zip(scans, axes):
        s = v.type.shape
        if s is None or not isinstance(s[norm_axis(a, len(s))], int):
            return Refusal("dynamic_shape", "scan needs a static sequence length")
    return None


@rule("scan", check=_scan_check)
def scan(c: Any) -> list[str]:
    """ONNX Scan, unrolled over its (static) sequence length."""
    body = c.attr("body")
    m = int(c.attr("num_scan_inputs"))
    ins = [c.i(k) for k in range(len(c.node.inputs)) if c.has(k)]
    n_state = len(ins) - m
    n_out = len(body.outputs) - n_state
    in_axes = list(c.attr("scan_input_axes") or [0] * m)
    in_dirs = list(c.attr("scan_input_directions") or [0] * m)
    out_axes = list(c.attr("scan_output_axes") or [0] * n_out)
    out_dirs = list(c.attr("scan_output_directions") or [0] * n_out)
    scan_vals = [v for v in c.node.inputs if v is not None][n_state:]
    ranks = [v.type.rank for v in scan_vals]
    length = scan_vals[0].type.shape[norm_axis(in_axes[0], ranks[0])]
    fn = c.tmp("body")
    lines = c.body(body, fn, list(body.inputs))
    state, acc, t, res_, j = c.tmp("state"), c.tmp("acc"), c.tmp("t"), c.tmp("r"), c.tmp("j")
    lines.append(f"{state} = [{', '.join(ins[:n_state])}]")
    lines.append(f"{acc} = [[] for _ in range({n_out})]")
    lines.append(f"for {t} in range({length}):")
    slices = []
    for k in range(m):
        a = norm_axis(in_axes[k], ranks[k])
        idx = f"{length - 1} - {t}" if in_dirs[k] else t
        slices.append(f"tf.gather({ins[n_state + k]}, {idx}, axis={a})")
    lines.append(f"    {res_} = {fn}(*{state}, {', '.join(slices)})")
    lines.append(f"    {state} = list({res_}[:{n_state}])")
    lines.append(f"    for {j} in range({n_out}):")
    lines.append(f"        {acc}[{j}].append({res_}[{n_state} + {j}])")
    for k in range(n_state):
        lines.append(f"{c.o(k)} = {state}[{k}]")
    for j in range(n_out):
        t = body.outputs[n_state + j].type
        a = norm_axis(out_axes[j], (t.rank or 0) + 1)
        seq = f"{acc}[{j}][::-1]" if out_dirs[j] else f"{acc}[{j}]"
        lines.append(f"{c.o(n_state + j)} = tf.stack({seq}, axis={a})")
    return lines
