"""Resource variables of a streaming TFLite model, carried as explicit state.

A streaming model (micro-wake-word's ring buffers) keeps tensors between calls in resource
variables: ``CALL_ONCE`` runs an init subgraph that assigns each variable its first value,
``VAR_HANDLE`` names a variable, ``READ_VARIABLE`` reads it, ``ASSIGN_VARIABLE`` writes it.
A converted artifact holds no hidden state, so the frontend spells it out:

* the first read of a variable is a graph input named after it (its type is the variable's
  as TFLite holds it: an int8 ring buffer stays int8 with its quantization);
* the value last assigned is a graph output ``<input>_out``; the caller feeds each call the
  previous call's state outputs;
* the init subgraph is read at load time (its assigned values must be constants) and kept
  in ``metadata["opbridge.initial_state"]`` (``translator/ir/state.py``): the check feeds it,
  so the artifact's first call is compared with the interpreter's first call.

These four builtins are plumbing, like TensorFlow's ``Identity``/``NoOp``: they map to no IR
op (graph inputs and outputs instead), so they have no table entry.
"""
from __future__ import annotations

import json
from typing import Any

from ..ir.graph import TensorType, Value

STATE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE"})


def _key(op: Any) -> str:
    o = op.builtinOptions
    shared = o.sharedName if o is not None and o.sharedName is not None else b""
    container = o.container if o is not None and o.container is not None else b""
    key = (shared.decode("utf-8", "replace") if isinstance(shared, bytes) else str(shared))
    prefix = container.decode("utf-8", "replace") if isinstance(container, bytes) else str(container)
    return f"{prefix}/{key}" if prefix else key


def _state(ctx: Any) -> dict[str, Any]:
    st = getattr(ctx, "state", None)
    if st is None:
        st = ctx.state = {"handles": {}, "initial": {}, "inputs": {}, "now": {}, "assigned": [], "order": []}
    return st


def handle(ctx: Any, op: Any, name: str) -> list:
    """The results of one state builtin (as ``tflite_ops`` handlers return them)."""
    st = _state(ctx)
    if len(ctx.stack) > 1 and name != "VAR_HANDLE":
        raise ctx.fail("unsupported_op", f"{name} inside a loop or branch subgraph: state is carried in the main "
                                         "graph only")
    if name == "CALL_ONCE":
        _run_init(ctx, st, int(op.builtinOptions.initSubgraphIndex))
        return []
    if name == "VAR_HANDLE":
        st["handles"][(id(ctx.sg), int(op.outputs[0]))] = _key(op)
        return [None]
    key = st["handles"].get((id(ctx.sg), int(op.inputs[0])))
    if key is None:
        raise ctx.fail("bad_model", f"{name} of a tensor no VAR_HANDLE made")
    if name == "READ_VARIABLE":
        v = st["now"].get(key)
        if v is None:
            if key not in st["initial"]:
                raise ctx.fail("unsupported_op", f"variable {key!r} is read before any init subgraph assigns it")
            out = int(op.outputs[0])
            init = st["initial"][key]
            v = ctx.graph.add_input(_input_name(ctx, key), TensorType(ctx.dtype(out), tuple(init.shape)))
            st["inputs"][key] = v
            st["order"].append(key)
            st["now"][key] = v
        return [v]
    # ASSIGN_VARIABLE
    v = ctx.raw(int(op.inputs[1]))
    st["now"][key] = v
    if key not in st["assigned"]:
        st["assigned"].append(key)
    return []


def _input_name(ctx: Any, key: str) -> str:
    """A graph input name for variable ``key`` (sanitized; unique among the graph's names)."""
    base = "".join(c if c.isalnum() or c in "_." else "_" for c in key).strip("_") or "state"
    name, k = base, 1
    taken = {v.name for v in ctx.graph.inputs} | set(ctx.reserved)
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def _run_init(ctx: Any, st: dict[str, Any], index: int) -> None:
    """The init subgraph's VAR_HANDLE/ASSIGN_VARIABLE pairs: each variable's constant first value."""
    if not 0 <= index < len(ctx.model.subgraphs):
        raise ctx.fail("bad_model", f"CALL_ONCE names subgraph {index}, the model has {len(ctx.model.subgraphs)}")
    sg = ctx.model.subgraphs[index]
    saved = ctx.sg
    ctx.sg = sg
    try:
        handles: dict[int, str] = {}
        for op in sg.operators or []:
            name, _ = ctx.opcode_name(op)
            if name == "VAR_HANDLE":
                handles[int(op.outputs[0])] = _key(op)
            elif name == "ASSIGN_VARIABLE":
                key = handles.get(int(op.inputs[0]))
                data = ctx.data(int(op.inputs[1]))
                if key is None or data is None:
                    raise ctx.fail("unsupported_op", "the CALL_ONCE init subgraph computes a variable's first value "
                                                     "(only constants are read)")
                st["initial"][key] = data
            else:
                raise ctx.fail("unsupported_op", f"the CALL_ONCE init subgraph runs {name} (only VAR_HANDLE and "
                                                 "ASSIGN_VARIABLE of constants are read)")
    finally:
        ctx.sg = saved


def finish(ctx: Any) -> tuple[list[tuple[str, Value]], dict[str, str]]:
    """After the main graph: ([(output name, value)] of the state written back, metadata)."""
    st = getattr(ctx, "state", None)
    if not st or not st["inputs"]:
        return [], {}
    outs, pairs, initial = [], [], {}
    for key in st["order"]:
        v_in = st["inputs"][key]
        arr = st["initial"][key]
        initial[v_in.name] = {"dtype": str(arr.dtype), "shape": list(arr.shape), "values": arr.reshape(-1).tolist()}
        if key in st["assigned"]:
            out_name = f"{v_in.name}_out"
            outs.append((out_name, st["now"][key]))
            pairs.append({"variable": key, "input": v_in.name, "output": out_name})
        else:
            pairs.append({"variable": key, "input": v_in.name, "output": None})
    meta = {"opbridge.state": json.dumps(pairs), "opbridge.initial_state": json.dumps(initial)}
    return outs, meta
