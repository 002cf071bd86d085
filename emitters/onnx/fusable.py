"""Patterns onnxruntime fuses, kept in the form it finds them.

``scales_before_matmuls``: onnxruntime folds a ``Mul``/``Div`` by a scalar constant into the
``MatMul`` it feeds (``FusedMatMul``'s alpha), and a ``Transpose`` feeding a ``MatMul`` into
its trans flags, but only a scale that feeds the ``MatMul`` directly. The pipeline's transpose
pass moves a transpose below an elementwise op wherever it can (channels-last sources need it
to cancel their NHWC/NCHW pairs), which turns attention's ``Transpose → Mul(scale) → MatMul``
(torch.onnx's split scale on q and k) into ``Mul → Transpose → MatMul``: two unfused Muls per
attention, and a file that runs more nodes than its source. Put back: the transpose before
the scale.
"""
from __future__ import annotations

import numpy as np

from translator.ir.graph import Graph, Value

#: the scalings onnxruntime's MatMul scale fusion takes (the scalar as either operand of Mul,
#: the divisor of Div)
_SCALES = ("mul", "div")


def _scalar_shaped(v: Value) -> bool:
    """One element, statically (a constant, or a value computed from constants: this target
    folds nothing, and onnxruntime folds it before fusing)."""
    if v.is_const:
        return np.asarray(v.const).size == 1
    return v.type.shape is not None and all(d == 1 for d in v.type.shape)


def scales_before_matmuls(g: Graph) -> int:
    """Every ``x → scale(c) → transpose → matmul`` (c one element, each value read once)
    rewritten as ``x → transpose → scale(c) → matmul``; exact (a transpose only moves the
    scaled values). Returns how many."""
    done = 0
    for mm in list(g.nodes):
        if mm.op != "matmul" or mm.graph is not g:
            continue
        for k, v in enumerate(mm.inputs[:2]):
            t = v.producer if v is not None else None
            if t is None or t.op != "transpose" or len(v.uses) != 1 or any(o is v for o in g.outputs):
                continue
            s = t.inputs[0].producer if t.inputs[0] is not None else None
            if s is None or s.op not in _SCALES or len(s.outputs[0].uses) != 1 \
                    or any(o is s.outputs[0] for o in g.outputs):
                continue
            consts = [i for i, x in enumerate(s.inputs) if x is not None and _scalar_shaped(x)]
            if len(s.inputs) != 2 or not consts or (s.op == "div" and consts != [1]):
                continue
            a = 1 - consts[0]  # the scaled operand
            x, scaled, moved = s.inputs[a], s.outputs[0], t.outputs[0]
            if x is None or x.type.shape != scaled.type.shape:  # (a scalar that broadcasts nothing)
                continue
            t.replace_input(0, x)
            s.replace_input(a, moved)
            scaled.type = moved.type  # (the transposed shape; the transpose's own type is unchanged)
            mm.replace_input(k, scaled)
            done += 1
    if done:
        g.toposort()
    return done
