"""OpenVINO rules of control flow: If → If, Loop → Loop, Scan → TensorIterator.

Each body becomes its own builder function returning an ``ov.Model`` whose parameters
are the body's inputs followed by the values it captures from enclosing graphs
(``captured``); the lowering wires them up with the OpenVINO op's port API.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from translator.ir.graph import Graph, Node, TensorType, Value

from .helpers import Refusal, i64, norm_axis, scalar_i64
from .registry import rule

if TYPE_CHECKING:
    from .codegen import Gen


def _union(*lists: list[Value]) -> list[Value]:
    out: list[Value] = []
    for lst in lists:
        out.extend(v for v in lst if all(v is not u for u in out))
    return out


def _dynamic(t: TensorType, like: TensorType) -> TensorType:
    """A loop-carried value: its element type, rank kept, every dim dynamic (it may change per iteration)."""
    dtype = t.dtype or like.dtype
    shape = t.shape if t.shape is not None else like.shape
    return TensorType(dtype, None if shape is None else tuple(None for _ in shape))


def captured(g: Graph) -> list[Value]:
    """Non-constant values a subgraph (or its nested subgraphs) reads from enclosing graphs."""
    inside: set[int] = set()

    def mark(h: Graph) -> None:
        inside.update(id(v) for v in h.inputs)
        inside.update(id(v) for v in h.constants.values())
        for n in h.nodes:
            inside.update(id(v) for v in n.outputs)
            for sub in n.subgraphs():
                mark(sub)

    mark(g)
    out: list[Value] = []
    seen: set[int] = set()

    def visit(v: Value | None) -> None:
        if v is not None and id(v) not in inside and id(v) not in seen and not v.is_const:
            seen.add(id(v))
            out.append(v)

    def walk(h: Graph) -> None:
        for n in h.nodes:
            for v in n.inputs:
                visit(v)
            for sub in n.subgraphs():
                walk(sub)
        for v in h.outputs:
            visit(v)

    walk(g)
    return out


@rule("if")
def _if(g: "Gen", node: Node) -> None:
    then_g: Graph = node.attrs["then_branch"]
    else_g: Graph = node.attrs["else_branch"]
    caps = _union(captured(then_g), captured(else_g))
    cond = g.let(f"ops.reshape({g.x(0)}, {i64(g, [])}, False)")
    tb = g.body(then_g, "then", caps)
    eb = g.body(else_g, "else", caps)
    op = g.let(f"ops.if_op(port({cond}))")
    g.stmt(f"{op}.set_then_body({tb})")
    g.stmt(f"{op}.set_else_body({eb})")
    for k, v in enumerate(caps):
        g.stmt(f"{op}.set_input(port({g.var_of(v)}), {tb}.get_parameters()[{k}], {eb}.get_parameters()[{k}])")
    for i in range(len(node.outputs)):
        g.out(i, f"{op}.set_output({tb}.get_results()[{i}], {eb}.get_results()[{i}])")


@rule("loop")
def _loop(g: "Gen", node: Node) -> None:
    body: Graph = node.attrs["body"]
    inits = list(node.inputs[2:])
    n = len(inits)
    n_scan = len(body.outputs) - 1 - n
    caps = captured(body)
    types = {0: TensorType("int64", ()), 1: TensorType("bool", ())}
    for k, v in enumerate(inits):
        if v is not None:
            types[2 + k] = _dynamic(body.inputs[2 + k].type, v.type)
    b = g.body(body, "body", list(body.inputs) + caps, param_types=types,
               unsqueeze_out={1 + n + j: 0 for j in range(n_scan)})
    trip = scalar_i64(g, g.x(0), g.dtype(0)) if g.x(0) is not None else i64(g, -1)
    cond = g.let(f"ops.reshape({g.x(1)}, {i64(g, [])}, False)") if g.x(1) is not None else \
        g.let("ops.constant(True)")
    op = g.let(f"ops.loop({trip}, {cond})")
    g.stmt(f"{op}.set_function({b})")
    g.stmt(f"{op}.set_special_body_ports([0, 0])  # iteration number: parameter 0; condition: result 0")
    g.stmt(f"{op}.set_merged_input({b}.get_parameters()[1], port({cond}), {b}.get_results()[0].output(0))")
    for k, v in enumerate(inits):
        g.stmt(f"{op}.set_merged_input({b}.get_parameters()[{2 + k}], port({g.var_of(v)}), "
               f"{b}.get_results()[{1 + k}].output(0))")
    for j, v in enumerate(caps):
        g.stmt(f"{op}.set_invariant_input({b}.get_parameters()[{len(body.inputs) + j}], port({g.var_of(v)}))")
    for k in range(n):
        g.out(k, f"{op}.get_iter_value({b}.get_results()[{1 + k}].output(0), -1)")
    for j in range(n_scan):
        g.out(n + j, f"{op}.get_concatenated_slices({b}.get_results()[{1 + n + j}].output(0), 0, 1, 1, -1, 0)")


def _scan_check(node: Node) -> Refusal | None:
    body: Graph = node.attrs["body"]
    m = int(node.attrs.get("num_scan_inputs", 0))
    n = len(node.inputs) - m
    for j in range(m):
        v = node.inputs[n + j]
        if v is None or v.type.rank is None:
            return Refusal("dynamic_shape", "scan inputs need a known rank")
    for k in range(len(body.outputs) - n):
        if body.outputs[n + k].type.rank is None:
            return Refusal("dynamic_shape", "scan outputs need a known rank")
    return None


def _slices(direction: int) -> str:
    """start, stride, part_size, end of a TensorIterator slice (forward or reverse)."""
    return "-1, -1, 1, 0" if direction else "0, 1, 1, -1"


@rule("scan", check=_scan_check)
def _scan(g: "Gen", node: Node) -> None:
    body: Graph = node.attrs["body"]
    m = int(g.a("num_scan_inputs"))
    n = len(node.inputs) - m
    k_out = len(body.outputs) - n
    in_axes = list(g.a("scan_input_axes") or [0] * m)
    in_dirs = list(g.a("scan_input_directions") or [0] * m)
    out_axes = list(g.a("scan_output_axes") or [0] * k_out)
    out_dirs = list(g.a("scan_output_directions") or [0] * k_out)
    in_axes = [norm_axis(int(a), g.rank(n + j)) for j, a in enumerate(in_axes)]
    out_axes = [norm_axis(int(a), (body.outputs[n + k].type.rank or 0) + 1) for k, a in enumerate(out_axes)]
    caps = captured(body)
    types = {}
    for i in range(n):
        types[i] = _dynamic(body.inputs[i].type, node.inputs[i].type)
    for j in range(m):
        x = node.inputs[n + j].type
        t = body.inputs[n + j].type
        if t.dtype is None or t.shape is None:
            shape = None if x.shape is None else tuple(d for a, d in enumerate(x.shape) if a != in_axes[j])
            types[n + j] = TensorType(t.dtype or x.dtype, t.shape if t.shape is not None else shape)
    b = g.body(body, "body", list(body.inputs) + caps, param_types=types,
               squeeze_in={n + j: in_axes[j] for j in range(m)},
               unsqueeze_out={n + k: out_axes[k] for k in range(k_out)})
    op = g.let("ops.tensor_iterator()")
    g.stmt(f"{op}.set_body({b})")
    for i in range(n):
        g.stmt(f"{op}.set_merged_input({b}.get_parameters()[{i}], port({g.x(i)}), {b}.get_results()[{i}].output(0))")
    for j in range(m):
        g.stmt(f"{op}.set_sliced_input({b}.get_parameters()[{n + j}], port({g.x(n + j)}), "
               f"{_slices(int(in_dirs[j]))}, {in_axes[j]})")
    for j, v in enumerate(caps):
        g.stmt(f"{op}.set_invariant_input({b}.get_parameters()[{len(body.inputs) + j}], port({g.var_of(v)}))")
    for i in range(n):
        g.out(i, f"{op}.get_iter_value({b}.get_results()[{i}].output(0), -1)")
    for k in range(k_out):
        g.out(n + k, f"{op}.get_concatenated_slices({b}.get_results()[{n + k}].output(0), "
                     f"{_slices(int(out_dirs[k]))}, {out_axes[k]})")
