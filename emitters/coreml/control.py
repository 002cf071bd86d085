"""Core ML rules for control flow: ``if`` → MIL ``cond``, ``loop`` and ``scan`` → MIL ``while_loop``.

Each subgraph becomes a nested ``def`` of the builder script (``Gen.block``) whose lines are
the subgraph's nodes (``Gen.nodes``, so every rule and snippet applies inside, nested
control flow included); it reads values of enclosing graphs by closure, exactly as a MIL
block reads the vars of enclosing blocks. Loops whose trip count folds to a constant were
already unrolled by ``prepare`` (straight-line MIL); what reaches these rules decides at run
time.

* ``if``: ``mb.cond(pred, _true_fn, _false_fn)``. The predicate becomes a rank-0 bool
  (ONNX allows a one-element tensor). MIL gives the op the true branch's output types and
  requires the false branch's to match: a branch output in another legal dtype is cast to
  the node's, and branches whose outputs differ in rank or in a static dim are refused
  (``type_mismatch``) — MIL has no output whose shape depends on the branch taken.
* ``loop`` (ONNX Loop: ``M``, ``cond``, carried values; body ``(iter, cond, carried...) ->
  (cond, carried..., scans...)``): loop vars ``(i, keep, carried..., lists...)``; the cond
  block tests ``i < M`` (when ``M`` is given) and ``keep``; the body binds the subgraph's
  inputs to ``i``, ``keep`` and the carried vars, and returns ``i + 1``, the body's
  condition, the carried results and each scan output written at index ``i`` of its list
  (``make_list`` with the element's static shape, a symbolic dim such as a run-time batch
  named by a MIL symbol; ``list_write``); after the loop each list is
  stacked by ``list_gather`` over ``range(i)``. As the NumPy reference (and onnxruntime),
  the body's condition output is honoured even when the node's ``cond`` input is omitted.
  A constant ``M`` past int32 was clamped by ``prepare`` (no loop runs 2^31 times).
* ``scan`` (static sequence length ``T``, as Core ML's static input shapes give): loop vars
  ``(t, states..., lists...)``, ``t < T``; the body reads element ``t`` (``T - 1 - t`` for a
  reverse input) of each scan input with ``gather`` and writes each scan output at ``t``
  (``T - 1 - t`` reversed) of a list of length ``T``; the stacked lists are moved to their
  ``scan_output_axes``.

Carried values keep their dtype in MIL (a body result in another legal dtype is cast back);
their shape may change from one iteration to the next (MIL then types the loop var with a
symbolic dim). Sequences and optionals carried through control flow are refused
(``unsupported_dtype``): MIL blocks take tensors here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from translator.table.dtypes import norm_axis
from translator.compile.render import literal
from translator.ir.graph import Graph, Node, Value

from .mil import lit, mil_dtype, static_shape
from .registry import Refusal, rule

if TYPE_CHECKING:
    from .codegen import Gen


# ----------------------------------------------------------------------------- shared
def _not_tensors(values: list[Value], what: str) -> Refusal | None:
    for v in values:
        if v is not None and v.type.kind != "tensor":
            return Refusal("unsupported_dtype", f"{what} {v.name!r} is a {v.type.kind}: MIL control flow carries "
                           "tensors only")
    return None


def _step(gen: "Gen", node: Node, suffix: str, call: str) -> str:
    """``call`` (an ``mb.<op>(...`` without its closing parenthesis) as a fresh variable."""
    var, name = gen.tmp(node, suffix)
    gen.emit(f"{var} = {call}, name={name})")
    return var


def _as(gen: "Gen", node: Node, v: Value, dtype: str | None, suffix: str) -> str:
    """``v``'s variable, cast to ``dtype`` when its legal dtype differs (a block's result
    must have the type MIL gave the loop var / the cond output)."""
    var = gen.var(v)
    if dtype is None or v.type.dtype is None or v.type.dtype == dtype:
        return var
    return _step(gen, node, suffix, f"mb.cast(x={var}, dtype={literal(mil_dtype(dtype))}")


def _scalar(gen: "Gen", node: Node, v: Value, dtype: str, suffix: str) -> str:
    """``v`` as the rank-0 ``dtype`` var a predicate or a trip count must be in MIL (ONNX
    allows a one-element tensor of any rank)."""
    var = _as(gen, node, v, dtype, f"{suffix}_{dtype}")
    if v.type.shape == ():
        return var
    return _step(gen, node, f"{suffix}_scalar", f"mb.reshape(x={var}, shape=np.zeros((0,), dtype=np.int32)")


def _carried_shape(inp: Value, out: Value) -> tuple[int, ...] | None:
    """The static shape a carried value keeps: the body input's, when the body's result has
    the same (else the value may change shape between iterations: no fixed type)."""
    s = static_shape(inp)
    return s if s is not None and s == static_shape(out) else None


def _typed(gen: "Gen", node: Node, var: str, shape: tuple[int, ...] | None, suffix: str) -> str:
    """A loop var in the one MIL type of its static ``shape`` (None: left as it is). A
    while_loop's body must return exactly the types of its inputs, and MIL may type the same
    value differently on the two sides: a rank-0 value is a scalar (a placeholder, an op on
    scalars) or a rank-0 tensor (a constant of the weights, a reshape), and a value computed
    from run-time bounds (a slice at the iteration number) gets a symbolic dim the IR knows.
    Both sides go through ``reshape`` to the static shape (a no-op coremltools' passes
    remove)."""
    if shape is None:
        return var
    target = "np.zeros((0,), dtype=np.int32)" if shape == () else lit(list(shape))
    return _step(gen, node, suffix, f"mb.reshape(x={var}, shape={target}")


def _fresh(gen: "Gen", node: Node, suffix: str) -> str:
    var, _ = gen.tmp(node, suffix)
    return var


# scan outputs: MIL lists (``make_list`` / ``list_write`` / ``list_gather``) of tensors of one
# shape (static, or with symbols for run-time dims); a rank-0 element travels as shape [1] (a list's elements are tensors, MIL tells a
# scalar from a rank-0 tensor) and the stacked [n, 1] is squeezed back to [n]
def _elem_shape(v: Value) -> list[int | str]:
    """A list's element shape: static dims as sizes, a symbolic one as a MIL symbol name
    (``make_list`` then takes the size each element has at run time)."""
    return [d if isinstance(d, int) and d >= 0 else f"elem_{i}" for i, d in enumerate(v.type.shape or ())] or [1]


def _make_list(gen: "Gen", node: Node, k: int, v: Value, length: int | None) -> str:
    shape = _elem_shape(v)
    size = f"init_length={length}, dynamic_length=False" if length else "init_length=1, dynamic_length=True"
    return _step(gen, node, f"scan{k}_list", f"mb.make_list({size}, elem_shape={lit(shape)}, "
                 f"dtype={literal(mil_dtype(v.type.dtype or 'float32'))}")


def _list_write(gen: "Gen", node: Node, k: int, ls: str, index: str, v: Value) -> str:
    """``list_write`` of ``v`` reshaped to the list's element shape: MIL requires the element
    type exactly, and may know less than the IR (a slice at run-time bounds has a symbolic
    dim in MIL) or type a rank-0 value as a scalar."""
    shape = _elem_shape(v)
    if any(isinstance(d, str) for d in shape):  # symbolic dims: written as computed (-1 for the one unknown)
        known = [-1 if isinstance(d, str) else d for d in shape]
        value = gen.var(v) if known.count(-1) > 1 else \
            _step(gen, node, f"scan{k}_elem", f"mb.reshape(x={gen.var(v)}, shape={lit(known)}")
        return _step(gen, node, f"scan{k}_write", f"mb.list_write(ls={ls}, index={index}, value={value}")
    value = _step(gen, node, f"scan{k}_elem", f"mb.reshape(x={gen.var(v)}, shape={lit(shape)}")
    return _step(gen, node, f"scan{k}_write", f"mb.list_write(ls={ls}, index={index}, value={value}")


def _stacked(gen: "Gen", node: Node, k: int, out: int, ls: str, indices: str, v: Value, axis: int = 0) -> None:
    """Output ``out`` of ``node``: the list ``ls`` stacked on a new axis ``axis``."""
    rank = len(v.type.shape or ()) + 1
    a = norm_axis(axis, rank)
    calls = [f"mb.list_gather(ls={ls}, indices={indices}"]
    if rank == 1:  # [n, 1] -> [n]
        calls.append("mb.squeeze(x={}, axes=[1]")
    if a != 0:
        calls.append("mb.transpose(x={}, perm=" + lit(list(range(1, a + 1)) + [0] + list(range(a + 1, rank))))
    var = calls[0]
    for j, call in enumerate(calls[1:]):
        var = call.format(_step(gen, node, f"scan{k}_stacked{j}", var))
    gen.emit(f"{gen.out(node, out)} = {var}, name={gen.name(node, out)})")


# ----------------------------------------------------------------------------- if → cond
def _branches(node: Node) -> tuple[Graph, Graph] | None:
    t, e = node.attrs.get("then_branch"), node.attrs.get("else_branch")
    return (t, e) if isinstance(t, Graph) and isinstance(e, Graph) else None


def _if_check(node: Node) -> Refusal | None:
    br = _branches(node)
    if br is None:
        return Refusal("verifier", "if without both branches")
    if not node.outputs:
        return Refusal("unsupported_op", "an if without outputs computes nothing MIL can return")
    then_g, else_g = br
    if then_g.inputs or else_g.inputs or len(then_g.outputs) != len(node.outputs) \
            or len(else_g.outputs) != len(node.outputs):
        return Refusal("bad_model", f"the branches return {len(then_g.outputs)} and {len(else_g.outputs)} values for "
                       f"{len(node.outputs)} outputs")
    why = _not_tensors([node.inputs[0], *then_g.outputs, *else_g.outputs], "value")
    if why is not None:
        return why
    for k, (a, b) in enumerate(zip(then_g.outputs, else_g.outputs)):
        sa, sb = a.type.shape, b.type.shape
        if sa is None or sb is None:
            continue
        if len(sa) != len(sb) or any(isinstance(x, int) and isinstance(y, int) and x != y for x, y in zip(sa, sb)):
            # over symbolic dims the condition may be one that fixing them decides (If(channels == 1))
            code = "dynamic_shape" if not all(isinstance(d, int) for d in (*sa, *sb)) else "type_mismatch"
            return Refusal(code, f"output {k}: the then branch returns shape {tuple(sa)}, the else branch "
                           f"{tuple(sb)}; MIL cond gives each output one type whichever branch runs")
    return None


@rule("if", check=_if_check, any_dtype=True)
def if_(gen: "Gen", node: Node) -> None:
    """``outs = mb.cond(pred=<rank-0 bool>, _true_fn=<then>, _false_fn=<else>)``."""
    pred = _scalar(gen, node, node.inputs[0], "bool", "pred")
    fns = []
    for key, tag in (("then_branch", "then"), ("else_branch", "else")):
        g = node.attrs[key]
        fn = _fresh(gen, node, tag)
        with gen.block(f"def {fn}():"):
            gen.nodes(g)
            outs = [_as(gen, node, v, o.type.dtype, f"{tag}{k}") for k, (v, o) in enumerate(zip(g.outputs, node.outputs))]
            gen.emit(f"return ({', '.join(outs)},)")
        fns.append(fn)
    outs = ", ".join(gen.out(node, k) for k in range(len(node.outputs)))  # one output: mb.cond returns a Var
    gen.emit(f"{outs} = mb.cond(pred={pred}, _true_fn={fns[0]}, _false_fn={fns[1]}, name={gen.name(node)})")


# ----------------------------------------------------------------------------- loop → while_loop
def _loop_check(node: Node) -> Refusal | None:
    body = node.attrs.get("body")
    if not isinstance(body, Graph):
        return Refusal("verifier", "loop without a body")
    n = len(node.inputs) - 2
    if n < 0 or len(body.inputs) != 2 + n or len(body.outputs) < 1 + n:
        return Refusal("bad_model", f"the body takes {len(body.inputs)} and returns {len(body.outputs)} values for "
                       f"{max(n, 0)} carried values")
    why = _not_tensors([*node.inputs, *body.inputs, *body.outputs], "loop value")
    if why is not None:
        return why
    for v in body.outputs[1 + n:]:
        if v.type.shape is None:
            return Refusal("dynamic_shape", f"scan output {v.name!r} has an unknown rank: MIL make_list needs one")
    return None


@rule("loop", check=_loop_check, any_dtype=True)
def loop(gen: "Gen", node: Node) -> None:
    body: Graph = node.attrs["body"]
    n = len(node.inputs) - 2
    scans = list(body.outputs[1 + n:])
    trip, cond = node.inputs[0], node.inputs[1]
    m = _scalar(gen, node, trip, "int32", "trip") if trip is not None else None
    keep0 = _typed(gen, node, _scalar(gen, node, cond, "bool", "cond"), (), "cond0") if cond is not None \
        else "np.array(True)"
    shapes = [_carried_shape(body.inputs[2 + k], body.outputs[1 + k]) for k in range(n)]
    init = [_typed(gen, node, _as(gen, node, v, body.inputs[2 + k].type.dtype, f"init{k}"), shapes[k], f"init{k}_typed")
            for k, v in enumerate(node.inputs[2:])]
    lists = [_make_list(gen, node, k, v, None) for k, v in enumerate(scans)]
    cond_fn, body_fn = _fresh(gen, node, "cond_fn"), _fresh(gen, node, "body_fn")
    # the cond block: i < M (when M is given) and the condition the last iteration returned
    cp = [_fresh(gen, node, s) for s in ["i", "keep"] + [f"v{k}" for k in range(n)] + [f"s{k}" for k in range(len(scans))]]
    with gen.block(f"def {cond_fn}({', '.join(cp)}):"):
        go = cp[1]
        if m is not None:
            go = _step(gen, node, "go", f"mb.logical_and(x={_step(gen, node, 'in_range', f'mb.less(x={cp[0]}, y={m}')}, "
                       f"y={cp[1]}")
        else:
            go = _step(gen, node, "go", f"mb.identity(x={go}")
        gen.emit(f"return {go}")
    # the body block: the subgraph with its inputs bound to (i, keep, carried...)
    bp = [gen.param(v) for v in body.inputs] + [_fresh(gen, node, f"list{k}") for k in range(len(scans))]
    with gen.block(f"def {body_fn}({', '.join(bp)}):"):
        gen.nodes(body)
        go = _typed(gen, node, _scalar(gen, node, body.outputs[0], "bool", "next_cond"), (), "next_cond0")
        carried = [_typed(gen, node, _as(gen, node, body.outputs[1 + k], body.inputs[2 + k].type.dtype, f"carried{k}"),
                          shapes[k], f"carried{k}_typed") for k in range(n)]
        writes = [_list_write(gen, node, k, bp[2 + n + k], bp[0], v) for k, v in enumerate(scans)]
        nxt = _step(gen, node, "next_i", f"mb.add(x={bp[0]}, y=np.int32(1)")
        gen.emit(f"return ({', '.join([nxt, go] + carried + writes)},)")
    i_end, keep_end = _fresh(gen, node, "trips"), _fresh(gen, node, "keep_end")
    ends = [_fresh(gen, node, f"scan{k}_filled") for k in range(len(scans))]
    res = [i_end, keep_end] + [gen.out(node, k) for k in range(n)] + ends
    _, loop_name = gen.tmp(node, "while")
    gen.emit(f"{', '.join(res)}, = mb.while_loop(_cond={cond_fn}, _body={body_fn}, "
             f"loop_vars=({', '.join(['np.int32(0)', keep0] + init + lists)},), name={loop_name})")
    for k, ls in enumerate(ends):
        idx = _step(gen, node, f"scan{k}_index", f"mb.range_1d(start=np.int32(0), end={i_end}, step=np.int32(1)")
        _stacked(gen, node, k, n + k, ls, idx, scans[k])


# ----------------------------------------------------------------------------- scan → while_loop
def _scan_parts(node: Node) -> tuple[int, int, list[int], int | None]:
    """(states, scan inputs, their axes, the static sequence length or None)."""
    m = int(node.attrs.get("num_scan_inputs", 0))
    ins = list(node.inputs)
    n = len(ins) - m
    axes = [int(a) for a in (node.attrs.get("scan_input_axes") or [0] * m)]
    lengths = set()
    for v, a in zip(ins[n:], axes):
        s = static_shape(v)
        lengths.add(None if s is None or not s else s[norm_axis(a, len(s))])
    return n, m, axes, (lengths.pop() if len(lengths) == 1 else None)


def _scan_check(node: Node) -> Refusal | None:
    body = node.attrs.get("body")
    if not isinstance(body, Graph):
        return Refusal("verifier", "scan without a body")
    if any(v is None for v in node.inputs):
        return Refusal("unsupported_attribute_value", "an omitted scan input (the opset-8 sequence_lens form)")
    n, m, _, length = _scan_parts(node)
    if m < 1 or len(body.inputs) != n + m or len(body.outputs) < n:
        return Refusal("bad_model", f"the body takes {len(body.inputs)} and returns {len(body.outputs)} values for "
                       f"{n} states and {m} scan inputs")
    why = _not_tensors([*node.inputs, *body.inputs, *body.outputs], "scan value")
    if why is not None:
        return why
    if length is None:
        return Refusal("dynamic_shape", "the scan inputs need one static sequence length (MIL lists of a fixed length)")
    if length == 0:
        return Refusal("dynamic_shape", "a scan over zero elements has no element shape to stack")
    for v in body.outputs[n:]:
        if static_shape(v) is None:
            return Refusal("dynamic_shape", f"scan output {v.name!r} has shape {v.type.shape}: MIL make_list needs a "
                           "static element shape")
    return None


@rule("scan", check=_scan_check, any_dtype=True)
def scan(gen: "Gen", node: Node) -> None:
    body: Graph = node.attrs["body"]
    n, m, in_axes, length = _scan_parts(node)
    assert length is not None
    ins = list(node.inputs)
    outs = list(body.outputs[n:])
    k_out = len(outs)
    in_dirs = [int(d) for d in (node.attrs.get("scan_input_directions") or [0] * m)]
    out_axes = [int(a) for a in (node.attrs.get("scan_output_axes") or [0] * k_out)]
    out_dirs = [int(d) for d in (node.attrs.get("scan_output_directions") or [0] * k_out)]
    shapes = [_carried_shape(body.inputs[k], body.outputs[k]) for k in range(n)]
    init = [_typed(gen, node, _as(gen, node, v, body.inputs[k].type.dtype, f"init{k}"), shapes[k], f"init{k}_typed")
            for k, v in enumerate(ins[:n])]
    lists = [_make_list(gen, node, k, v, length) for k, v in enumerate(outs)]
    cond_fn, body_fn = _fresh(gen, node, "cond_fn"), _fresh(gen, node, "body_fn")
    cp = [_fresh(gen, node, s) for s in ["t"] + [f"v{k}" for k in range(n)] + [f"s{k}" for k in range(k_out)]]
    with gen.block(f"def {cond_fn}({', '.join(cp)}):"):
        gen.emit(f"return {_step(gen, node, 'go', f'mb.less(x={cp[0]}, y=np.int32({length})')}")
    t = _fresh(gen, node, "t_in")
    bp = [t] + [gen.param(v) for v in body.inputs[:n]] + [_fresh(gen, node, f"list{k}") for k in range(k_out)]
    with gen.block(f"def {body_fn}({', '.join(bp)}):"):
        back = None
        if any(in_dirs) or any(out_dirs):
            back = _step(gen, node, "t_back", f"mb.sub(x=np.int32({length - 1}), y={t}")
        for j, v in enumerate(body.inputs[n:]):
            x = ins[n + j]
            a = norm_axis(in_axes[j], x.type.rank or 1)
            elem = gen.param(v)
            gen.emit(f"{elem} = mb.gather(x={gen.var(x)}, indices={back if in_dirs[j] else t}, axis={a}, "
                     f"name={literal(gen.names[id(v)])})")
        gen.nodes(body)
        states = [_typed(gen, node, _as(gen, node, body.outputs[k], body.inputs[k].type.dtype, f"state{k}"),
                         shapes[k], f"state{k}_typed") for k in range(n)]
        writes = [_list_write(gen, node, k, bp[1 + n + k], back if out_dirs[k] else t, v) for k, v in enumerate(outs)]
        nxt = _step(gen, node, "next_t", f"mb.add(x={t}, y=np.int32(1)")
        gen.emit(f"return ({', '.join([nxt] + states + writes)},)")
    ends = [_fresh(gen, node, f"scan{k}_filled") for k in range(k_out)]
    res = [_fresh(gen, node, "t_end")] + [gen.out(node, k) for k in range(n)] + ends
    _, loop_name = gen.tmp(node, "while")
    gen.emit(f"{', '.join(res)}, = mb.while_loop(_cond={cond_fn}, _body={body_fn}, "
             f"loop_vars=({', '.join(['np.int32(0)'] + init + lists)},), name={loop_name})")
    for k, ls in enumerate(ends):
        _stacked(gen, node, k, n + k, ls, f"np.arange({length}, dtype=np.int32)", outs[k], out_axes[k])


__all__: list[str] = []
