"""TFLite control flow and step unpacking: ``WHILE`` → the IR ``loop``, ``IF`` → ``if``,
``UNPACK`` → ``split``.

* **WHILE** (``cond_subgraph_index``, ``body_subgraph_index`` over the same loop variables;
  the cond runs before every iteration) becomes an ONNX-style ``loop`` without a trip count:
  its initial ``cond`` is the cond subgraph inlined on the initial values (in the enclosing
  graph), and its body is the body subgraph followed by the cond subgraph on the new values,
  whose result is the body's cond output. Both subgraphs are converted op by op with the
  same handlers (so with the same table mapping); loop variables are carried as TFLite holds
  them (a quantized one as its integers).
* **IF** (``then_subgraph_index``, ``else_subgraph_index``, both taking the op's inputs after
  the condition) becomes an IR ``if`` whose branches are the two subgraphs converted on the
  outer values (branches take no inputs; they read the enclosing graph's values).
* **UNPACK** splits into parts of one along the axis and squeezes each part.
"""
from __future__ import annotations

from typing import Any

from ..ir.graph import Graph, TensorType
from .tflite_ops import _opt, handles


@handles("UNPACK", ir="split")
def _unpack(ctx: Any, op: Any) -> list:
    """Split into ``num`` parts of one along the axis, each part squeezed (one output per part)."""
    x = ctx.input(int(op.inputs[0]))
    shape = ctx.dims(int(op.inputs[0]))
    axis = int(_opt(op, "axis", 0)) % len(shape)
    n = len(op.outputs)
    if n == 1:
        return ctx.emit("squeeze", [x, ctx.i64([axis], "axes")])
    parts = ctx.emit("split", [x], {"axis": axis, "num_outputs": n}, n=n)
    part = TensorType(x.type.dtype, tuple(1 if k == axis else d for k, d in enumerate(shape)))
    for p in parts:  # (the shape rule of split does not type every part)
        p.type = part
    return [ctx.emit("squeeze", [p, ctx.i64([axis], "axes")])[0] for p in parts]


def _sg_type(ctx: Any, sg: Any, ti: int) -> TensorType:
    """The declared type of tensor ``ti`` of subgraph ``sg`` (dynamic dims None)."""
    saved = ctx.sg
    ctx.sg = sg
    try:
        return TensorType(ctx.dtype(ti), ctx.dims(ti))
    finally:
        ctx.sg = saved


@handles("WHILE", ir="loop")
def _while(ctx: Any, op: Any) -> list:
    from .tflite import convert_subgraph

    cond_i, body_i = int(_opt(op, "condSubgraphIndex", 0)), int(_opt(op, "bodySubgraphIndex", 0))
    n = len(op.inputs)
    body_sg = ctx.model.subgraphs[body_i]
    if len(body_sg.inputs) != n or len(body_sg.outputs) != n or len(op.outputs) != n:
        raise ctx.fail("bad_model", f"WHILE has {n} loop variables, its body takes {len(body_sg.inputs)} "
                                    f"and gives {len(body_sg.outputs)}, the op gives {len(op.outputs)}")
    name = ctx.node_name
    init = [ctx.raw(int(i)) for i in op.inputs]
    c0 = convert_subgraph(ctx, cond_i, ctx.graph, init)
    if len(c0) != 1:
        raise ctx.fail("bad_model", f"the WHILE cond subgraph {cond_i} gives {len(c0)} outputs (not one)")
    body = Graph(f"{name}/body")
    body.parent = ctx.graph
    body.add_input(f"{name}/iter", TensorType("int64", ()))
    body.add_input(f"{name}/cond_in", TensorType("bool", ()))
    carried = [body.add_input(f"{name}/v{k}",
                              _sg_type(ctx, body_sg, int(body_sg.inputs[k]))) for k in range(n)]
    new = convert_subgraph(ctx, body_i, body, carried)
    c1 = convert_subgraph(ctx, cond_i, body, new)
    body.outputs = _branch_outputs(body, [c1[0], *new], name)
    ys = ctx.emit("loop", [None, c0[0], *init], {"body": body}, n=n)
    for k, y in enumerate(ys):
        y.type = TensorType(ctx.dtype(int(op.outputs[k])), ctx.dims(int(op.outputs[k])))
    return ys


def _branch_outputs(graph: Graph, values: list, name: str) -> list:
    """Every output of a branch or body its own node's value in ``graph`` (not an outer value,
    an input, a constant or the same value twice): an identity where it is not."""
    outs: list = []
    for k, v in enumerate(values):
        if v.producer is None or v.graph is not graph or any(o is v for o in outs):
            node = graph.add_node("identity", [v], {}, outputs=[f"{name}/out{k}"], name=f"{name}/out{k}", types=[v.type])
            v = node.outputs[0]
        outs.append(v)
    return outs


@handles("IF", ir="if")
def _if(ctx: Any, op: Any) -> list:
    """``IF(cond, args…)`` runs ``then_subgraph_index`` or ``else_subgraph_index`` on ``args``:
    an IR ``if`` whose branches are the two subgraphs converted on the outer values."""
    from .tflite import convert_subgraph

    name = ctx.node_name
    cond = ctx.raw(int(op.inputs[0]))
    args = [ctx.raw(int(i)) for i in op.inputs[1:]]
    n = len(op.outputs)
    attrs = {}
    for key, field in (("then_branch", "thenSubgraphIndex"), ("else_branch", "elseSubgraphIndex")):
        idx = int(_opt(op, field, 0))
        if not 0 <= idx < len(ctx.model.subgraphs):
            raise ctx.fail("bad_model", f"IF names subgraph {idx}, the model has {len(ctx.model.subgraphs)}")
        g = Graph(f"{name}/{key}")
        g.parent = ctx.graph
        outs = convert_subgraph(ctx, idx, g, args)
        if len(outs) != n:
            raise ctx.fail("bad_model", f"IF has {n} outputs, its {key.split('_')[0]} subgraph {idx} gives {len(outs)}")
        g.outputs = _branch_outputs(g, outs, f"{name}/{key}")
        attrs[key] = g
    ys = ctx.emit("if", [cond], attrs, n=n)
    for k, y in enumerate(ys):
        y.type = TensorType(ctx.dtype(int(op.outputs[k])), ctx.dims(int(op.outputs[k])))
    return ys
