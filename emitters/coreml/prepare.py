"""The Core ML target's own IR preparation (``Target.prepare``), after folding and before
dtype legalization, in this order:

1. a ``loop`` whose trip count folds to a constant is unrolled (``translator/compile/unroll_loop.py``:
   straight-line MIL); the other ``if`` / ``loop`` / ``scan`` nodes stay, for their rules
   (``control.py``: MIL ``cond`` / ``while_loop``); a remaining loop's constant trip count
   past int32 (exporters' INT64_MAX for "no limit") is clamped to int32's largest value, so
   it survives int64 legalization (no loop runs 2^31 times: the budget stops far sooner);
2. ``cast_like`` of a constant becomes a constant (it reads only its second input's dtype;
   folding takes only nodes whose inputs are all constants), and so does every ``constant``
   node (folding leaves those past its size limit; MIL takes constants as weights), then the
   graph is folded again, so MIL sees constant operands;
3. types are inferred again: values behind a folded shape subgraph (a reshape's target,
   ...) get their static shapes;
4. constant slice bounds like INT64_MAX ("to the end") are clamped to the sliced dim, so
   they fit int32 once int64 is legalized;
5. the quantized dtype of each quantize/dequantize node is recorded (``quant.note_quant_dtypes``)
   before int8/uint8 become int32;
6. values of the sub-byte and 8-bit float dtypes no legalization substitutes for (float8*,
   float4e2m1, int4, uint4, int2, uint2) are computed in fp32 / int32 (``widen_small_dtypes``);
   the builder rounds each result back onto the declared dtype's values (``codegen._fix``).

Steps 2 and 4-6 apply to every subgraph too (the bodies of the control flow the builder lowers).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.table.dtypes import norm_axis, numpy_dtype
from translator.ir.graph import Graph, Node

from .mil import const_of, static_shape
from .quant import note_quant_dtypes
from .registry import NAME

if TYPE_CHECKING:
    from translator.ir.graph import Model, TensorType
    from translator.table.loader import Tables
    from translator.compile.pipeline import Compilation


def prepare(model: "Model", ctx: "Compilation") -> None:
    from translator.ir.infer import infer
    from translator.compile.pipeline import fold
    from translator.compile.quantized import dynamic_model_as_weight_only

    g = model.graph
    # onnxruntime's dynamic quantization of a matmul: MIL has no run-time activation quantization;
    # the matmul of the int8 weight (stored as int8: constexpr_affine_dequantize), float activations
    # (a dynamic-range .tflite's hybrid kernels and onnxruntime's DynamicQuantizeLSTM likewise: their
    # inputs' run-time rounding is not spelled out; the LSTM is MIL's lstm over int8 weights)
    dynamic = dynamic_model_as_weight_only(model, ctx)
    unrolled = unroll_counted_loops(g, ctx)
    typed = type_loop_bodies(g, ctx.tables)
    if sum(fold_constant_nodes(sub) + fold_cast_like(sub) for sub in every_graph(g)) or unrolled or typed or dynamic:
        fold(g)
    infer(g, ctx.tables)
    for sub in every_graph(g):
        clamp_index_constants(sub)
        clamp_trip_counts(sub)
        note_quant_dtypes(sub)
        widen_small_dtypes(sub, ctx)


def every_graph(g: Graph) -> list[Graph]:
    """``g`` and every subgraph of its nodes, outermost first."""
    out = [g]
    for n in g.nodes:
        for sub in n.subgraphs():
            out.extend(every_graph(sub))
    return out


def unroll_counted_loops(graph: Graph, ctx: "Compilation") -> int:
    """Every ``loop`` (of ``graph`` and its subgraphs) whose trip count folds to a constant is
    unrolled (``translator.compile.unroll``); the others are left to the ``loop`` rule (MIL
    ``while_loop``). Returns the number of loops unrolled."""
    from translator.compile import unroll

    unrolled = 0
    for g in every_graph(graph):
        for node in list(g.nodes):
            if node.op != "loop" or node.graph is not g or unroll.why_not(node) is not None:
                continue
            unroll.expand(g, node)
            ctx.decomposed.append((node.name, node.op))
            ctx.how[node.name] = "decomposed"
            unrolled += 1
    return unrolled


def type_loop_bodies(graph: Graph, tables: "Tables") -> int:
    """Body inputs of ``loop`` / ``scan`` nodes whose shape the model leaves unknown take the
    shape they have at the first iteration (the iteration number and condition: scalars; a
    carried value or state: its initial value's; a scan element: the scan input's without
    the scan axis), and the body is typed again; kept only when every carried value comes
    out of the body with the shape it went in with (a fixed point: its shape is then the
    same at every iteration), else every type of the body is put back. MIL's list of a scan
    output needs its element shape, which an untyped body does not give. Returns the number
    of bodies typed."""
    from translator.ir.graph import TensorType
    from translator.ir.infer import infer

    typed = 0
    for g in every_graph(graph):
        for node in g.nodes:
            body = node.attrs.get("body") if node.op in ("loop", "scan") else None
            if not isinstance(body, Graph) or all(v.type.is_static for v in body.inputs):
                continue
            first = _first_iteration_types(node, body)
            if first is None:
                continue
            saved = {id(v): (v, v.type) for sub in every_graph(body) for v in sub.values()}
            for v, t in zip(body.inputs, first):
                if not v.type.is_static and t is not None and t.is_static and v.type.kind == "tensor" \
                        and (v.type.shape is None or len(v.type.shape) == len(t.shape)):
                    v.type = TensorType(v.type.dtype or t.dtype, t.shape)
            try:
                infer(body, tables)
                ok = _carried_fixed(node, body)
            except Exception:  # noqa: BLE001 - a body that does not type at these shapes stays as it was
                ok = False
            if not ok:
                for v, t in saved.values():
                    v.type = t
                continue
            typed += 1
    return typed


def _first_iteration_types(node: Node, body: Graph) -> list["TensorType | None"] | None:
    from translator.ir.graph import TensorType

    if node.op == "loop":
        if len(body.inputs) != len(node.inputs):
            return None
        return [TensorType("int64", ()), TensorType("bool", ())] + [
            None if v is None else v.type for v in node.inputs[2:]]
    m = int(node.attrs.get("num_scan_inputs", 0))
    n = len(node.inputs) - m
    if len(body.inputs) != len(node.inputs):
        return None
    axes = list(node.attrs.get("scan_input_axes") or [0] * m)
    out: list[TensorType | None] = [None if v is None else v.type for v in node.inputs[:n]]
    for v, a in zip(node.inputs[n:], axes):
        s = static_shape(v)
        out.append(None if not s else TensorType(v.type.dtype, s[:norm_axis(int(a), len(s))]
                                                  + s[norm_axis(int(a), len(s)) + 1:]))
    return out


def _carried_fixed(node: Node, body: Graph) -> bool:
    """Every carried value (loop) or state (scan) leaves the body with the shape it entered."""
    if node.op == "loop":
        first, carried_in = 1, body.inputs[2:]
    else:
        first, carried_in = 0, body.inputs[:len(node.inputs) - int(node.attrs.get("num_scan_inputs", 0))]
    for k, v in enumerate(carried_in):
        out = body.outputs[first + k] if first + k < len(body.outputs) else None
        if out is None or out.type.shape != v.type.shape or out.type.dtype != v.type.dtype:
            return False
    return True


#: the largest trip count a MIL while_loop's int32 counter holds
INT32_MAX = 2 ** 31 - 1


def clamp_trip_counts(graph: Graph) -> int:
    """A loop's constant trip count ``M`` past int32 (INT64_MAX: "no limit", as exporters write
    a while loop) becomes int32's largest value: the same loop (no loop runs 2^31 times), and
    a constant the int64 → int32 legalization takes."""
    changed = 0
    for node in graph.nodes:
        m = const_of(node.inputs[0]) if node.op == "loop" and node.inputs else None
        if m is None or m.size != 1 or m.dtype.kind not in "iu" or int(m.reshape(())) <= INT32_MAX:
            continue
        v = node.inputs[0]
        c = graph.add_constant(f"{v.name}_int32_max", np.full(m.shape, INT32_MAX, dtype=m.dtype), v.type.dtype or "int64")
        node.replace_input(0, c)
        changed += 1
    return changed


def _to_constant(graph: Graph, node: Node, arr: np.ndarray, dtype: str) -> None:
    """``node`` (one output) replaced by the constant ``arr``; a graph output keeps its name."""
    out = node.outputs[0]
    c = graph.add_constant(out.name + "_folded", arr, dtype)
    if any(o is out for o in graph.outputs):
        name = out.name
        out.name, c.name = f"{name}__folded_away", name
    graph.replace_all_uses_with(out, c)
    graph.remove_node(node)


def fold_constant_nodes(graph: Graph) -> int:
    """A ``constant`` node becomes a constant value (a weight of the builder, ``mb.const``):
    constant folding leaves nodes whose result is past its size limit (a 258x1x256 STFT
    basis in an If branch), and MIL takes constants as weights only."""
    from translator import reference

    folded = 0
    for node in list(graph.nodes):
        if node.op != "constant" or len(node.outputs) != 1 or node.outputs[0].type.kind != "tensor":
            continue
        try:
            arr = np.asarray(reference.get("constant")(**node.attrs))
        except (NotImplementedError, ValueError, TypeError):
            continue
        dtype = node.outputs[0].type.dtype
        if arr.dtype.kind not in "biuf" or dtype is None:
            continue
        _to_constant(graph, node, arr.astype(numpy_dtype(dtype), copy=False), dtype)
        folded += 1
    return folded


def fold_cast_like(graph: Graph) -> int:
    """cast_like of a constant reads only the dtype of its second input: fold it to a constant."""
    folded = 0
    for node in list(graph.nodes):
        x = node.inputs[0] if node.op == "cast_like" and node.inputs else None
        to = node.inputs[1].type.dtype if x is not None and len(node.inputs) > 1 and node.inputs[1] is not None else None
        if x is None or not x.is_const or to is None or np.asarray(x.const).dtype.kind not in "biuf":
            continue
        _to_constant(graph, node, np.asarray(x.const).astype(numpy_dtype(to)), to)
        folded += 1
    return folded


def clamp_index_constants(graph: Graph) -> int:
    """Slice bounds like INT64_MAX ("to the end") fit no int32: clamp constant starts/ends to
    [-(dim+1), dim] where the sliced dims are static (same result), before dtype legalization."""
    changed = 0
    for node in graph.nodes:
        if node.op != "slice" or len(node.inputs) < 3:
            continue
        shape = static_shape(node.inputs[0])
        if shape is None:
            continue
        r = len(shape)
        axes_v = node.inputs[3] if len(node.inputs) > 3 else None
        starts = const_of(node.inputs[1])
        axes = const_of(axes_v) if axes_v is not None else np.arange(len(starts) if starts is not None else 0)
        if axes is None:
            continue
        for k in (1, 2):
            v = node.inputs[k]
            c = const_of(v)
            if c is None or c.dtype.kind not in "iu" or len(c) != len(axes):
                continue
            dims = np.asarray([shape[norm_axis(a, r)] for a in axes], dtype=np.int64)
            new = np.clip(c.astype(np.int64), -dims - 1, dims)
            if not np.array_equal(new, c):
                nv = graph.add_constant(f"{v.name}_clamped", new.astype(c.dtype), v.type.dtype or "int64")
                node.replace_input(k, nv)
                changed += 1
    return changed


#: dtypes MIL lacks that the generic legalization has no substitute for: computed in this one,
#: each result put back onto the dtype's values by the builder (``codegen._fix``)
SMALL_DTYPES = {"float8e4m3fn": "float32", "float8e4m3fnuz": "float32", "float8e5m2": "float32",
                "float8e5m2fnuz": "float32", "float4e2m1": "float32",
                "int4": "int32", "uint4": "int32", "int2": "int32", "uint2": "int32"}


def widen_small_dtypes(graph: Graph, ctx: "Compilation") -> int:
    """Values (constants, inputs, outputs included) and cast targets in ``SMALL_DTYPES`` take
    its wider dtype; every change is reported. The dtype each node's outputs are declared in
    was recorded before (``node.meta["source_dtypes"]``, ``ctx.source_inputs/outputs``)."""
    from translator.table.dtypes import onnx_enum_of
    from translator.ir.graph import TensorType

    enum_of = onnx_enum_of(ctx.tables)
    changed = 0
    for v in list(graph.values()):
        d = v.type.dtype
        if d not in SMALL_DTYPES or v.type.kind != "tensor":
            continue
        new = SMALL_DTYPES[d]
        if v.is_const:
            v.const = np.asarray(v.const).astype(np.float32).astype(numpy_dtype(new))
        v.type = TensorType(new, v.type.shape, v.type.kind, v.type.elem)
        kind = "input" if v in graph.inputs else "output" if v in graph.outputs else None
        if kind:
            ctx.warn(f"{NAME}: {kind} {v.name!r} {d} -> {new} (values kept on {d}'s)")
        changed += 1
    by_enum = {e: k for k, e in enum_of.items()}
    for node in graph.nodes:
        to = by_enum.get(int(node.attrs["to"])) if node.op == "cast" and "to" in node.attrs else None
        if to in SMALL_DTYPES:
            node.attrs["to"] = enum_of[SMALL_DTYPES[to]]
            changed += 1
    return changed


__all__ = ["prepare", "every_graph", "unroll_counted_loops", "type_loop_bodies", "clamp_trip_counts", "fold_constant_nodes", "fold_cast_like",
           "clamp_index_constants", "widen_small_dtypes", "SMALL_DTYPES", "INT32_MAX"]
