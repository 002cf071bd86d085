"""The Core ML target's own IR preparation (``Target.prepare``), after folding and before
dtype legalization, in this order:

1. control flow (a node with subgraphs) is refused: the builder does not lower MIL
   ``cond`` / ``while_loop`` bodies yet; a ``loop`` whose trip count folds to a constant is
   unrolled instead (``translator/compile/unroll_loop.py``);
2. ``cast_like`` of a constant becomes a constant (it reads only its second input's dtype;
   folding takes only nodes whose inputs are all constants), then the graph is folded
   again, so MIL sees constant operands;
3. types are inferred again: values behind a folded shape subgraph (a reshape's target,
   ...) get their static shapes;
4. constant slice bounds like INT64_MAX ("to the end") are clamped to the sliced dim, so
   they fit int32 once int64 is legalized;
5. the quantized dtype of each quantize/dequantize node is recorded (``quant.note_quant_dtypes``)
   before int8/uint8 become int32;
6. values of the sub-byte and 8-bit float dtypes no legalization substitutes for (float8*,
   float4e2m1, int4, uint4, int2, uint2) are computed in fp32 / int32 (``widen_small_dtypes``);
   the builder rounds each result back onto the declared dtype's values (``codegen._fix``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.table.dtypes import norm_axis, numpy_dtype
from translator.table.errors import Unsupported
from translator.ir.graph import Graph

from .mil import const_of, static_shape
from .quant import note_quant_dtypes
from .registry import NAME, Refusal

if TYPE_CHECKING:
    from translator.ir.graph import Model
    from translator.compile.pipeline import Compilation


def prepare(model: "Model", ctx: "Compilation") -> None:
    from translator.ir.infer import infer
    from translator.compile.pipeline import fold

    g = model.graph
    unrolled = refuse_control_flow(g, ctx)
    if fold_cast_like(g) or unrolled:
        fold(g)
    infer(g, ctx.tables)
    clamp_index_constants(g)
    note_quant_dtypes(g)
    widen_small_dtypes(g, ctx)


def refuse_control_flow(graph: Graph, ctx: "Compilation") -> int:
    """A ``loop`` whose trip count folds to a constant is unrolled (``translator.compile.unroll``);
    any other node with subgraphs is refused (``plan`` collects the refusal; ``compile`` raises
    it). Returns the number of loops unrolled."""
    from translator.compile import unroll

    unrolled = 0
    for node in list(graph.nodes):
        if not any(True for _ in node.subgraphs()):
            continue
        not_unrolled = unroll.why_not(node) if node.op == "loop" else None
        if node.op == "loop" and not_unrolled is None:
            unroll.expand(graph, node)
            ctx.decomposed.append((node.name, node.op))
            ctx.how[node.name] = "decomposed"
            unrolled += 1
            continue
        why = Refusal("unsupported_op", "control flow (subgraphs) is not lowered to MIL yet"
                      + (f"; not unrolled: {not_unrolled}" if not_unrolled else ""))
        if ctx.refusals is None:
            raise Unsupported(node.op, NAME, why.code, why.detail, node.name)
        ctx.refusals[node.name] = why
    return unrolled


def fold_cast_like(graph: Graph) -> int:
    """cast_like of a constant reads only the dtype of its second input: fold it to a constant."""
    folded = 0
    for node in list(graph.nodes):
        x = node.inputs[0] if node.op == "cast_like" and node.inputs else None
        to = node.inputs[1].type.dtype if x is not None and len(node.inputs) > 1 and node.inputs[1] is not None else None
        if x is None or not x.is_const or to is None or np.asarray(x.const).dtype.kind not in "biuf":
            continue
        out = node.outputs[0]
        c = graph.add_constant(out.name + "_folded", np.asarray(x.const).astype(numpy_dtype(to)), to)
        if any(o is out for o in graph.outputs):
            name = out.name
            out.name, c.name = f"{name}__folded_away", name
        graph.replace_all_uses_with(out, c)
        graph.remove_node(node)
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


__all__ = ["prepare", "refuse_control_flow", "fold_cast_like", "clamp_index_constants", "widen_small_dtypes",
           "SMALL_DTYPES"]
