"""Affine tails folded into the convolution before them, as every inference runtime does.

* ``conv → batch_normalization`` (inference form, constant statistics): the normalization is
  a per-channel scale and shift, so it becomes the convolution's weights and bias:
  ``k = scale / sqrt(var + eps)``, ``W' = W · k`` (per output channel), ``B' = (B − mean) · k + bias``.
* ``conv → add`` of a constant that is one value per output channel (``[1, C, 1, 1]``,
  ``[C, 1, 1]``, a scalar): the bias (paddle2onnx writes a convolution's bias this way).

Only when the convolution's output feeds nothing else, its weights (and bias) are constants
of a float32/float64 type (quantized weights stay quantized), and the folded values are
computed in float64 and rounded once. The nodes folded away are reported as folded; the
convolution keeps its name. Targets that fold (every target but the NumPy reference, which
computes the model as written) run this pass; onnxruntime, OpenVINO, TensorFlow's converter
and coremltools fold the same patterns, the PyTorch and TensorFlow modules otherwise would not.
"""
from __future__ import annotations

import numpy as np

from ...ir.graph import Graph, Node, Value

FLOATS = ("float32", "float64")


def run(graph: Graph) -> int:
    """Fold every such tail in ``graph`` (not its subgraphs); returns how many were folded."""
    done = 0
    for node in list(graph.nodes):
        if node.graph is not graph:
            continue  # removed by an earlier fold
        if node.op == "batch_normalization":
            done += _batch_norm(graph, node)
        elif node.op == "add":
            done += _bias(graph, node)
    return done


def _conv_before(graph: Graph, v: Value | None) -> Node | None:
    """The convolution producing ``v`` when ``v`` feeds one node, is no graph output and the
    convolution's weights and bias are float constants."""
    if v is None or v.producer is None or v.producer.op != "conv" or v.producer.graph is not graph:
        return None
    if len(v.uses) != 1 or any(o is v for o in graph.outputs):
        return None
    conv = v.producer
    w = conv.inputs[1] if len(conv.inputs) > 1 else None
    b = conv.inputs[2] if len(conv.inputs) > 2 else None
    if w is None or not w.is_const or w.type.dtype not in FLOATS or w.const.ndim < 3:
        return None
    if b is not None and (not b.is_const or b.type.dtype != w.type.dtype):
        return None
    return conv


def _refit(graph: Graph, conv: Node, tail: Node, weight: np.ndarray, bias: np.ndarray) -> None:
    """``tail`` replaced by ``conv`` over new constant weights and bias; ``conv`` removed."""
    w = conv.inputs[1]
    dtype = w.type.dtype
    nw = graph.add_constant(f"{w.name}_fused", weight.astype(w.const.dtype), dtype)
    nb = graph.add_constant(f"{conv.name}_bias_fused", bias.astype(w.const.dtype), dtype)
    out = tail.outputs[0]
    new = graph.add_node("conv", [conv.inputs[0], nw, nb], dict(conv.attrs), outputs=[f"{out.name}__fused"],
                         name=conv.name, before=tail)
    new.meta.update(conv.meta)
    name = out.name  # the result keeps the tail's name: what the model calls it, and what checks compare
    old_b = conv.inputs[2] if len(conv.inputs) > 2 else None
    graph.replace_node(tail, [new.outputs[0]])
    if new.outputs[0].name != name:
        out.name, new.outputs[0].name = f"{name}__replaced", name
    graph.remove_node(conv)
    for old, fused in ((w, nw), (old_b, nb)):  # the weights keep the model's names when nothing else reads them
        if old is not None and not old.uses and graph.constants.get(old.name) is old:
            del graph.constants[old.name], graph.constants[fused.name]
            fused.name = old.name
            graph.constants[fused.name] = fused


def _batch_norm(graph: Graph, bn: Node) -> int:
    if len(bn.outputs) != 1 or len(bn.inputs) < 5 or int(bn.attrs.get("training_mode", 0) or 0):
        return 0
    conv = _conv_before(graph, bn.inputs[0])
    params = bn.inputs[1:5]
    if conv is None or not all(p is not None and p.is_const for p in params):
        return 0
    w = conv.inputs[1].const
    c = w.shape[0]
    scale, shift, mean, var = (np.asarray(p.const, np.float64).reshape(-1) for p in params)
    if any(a.size != c for a in (scale, shift, mean, var)):
        return 0
    k = scale / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
    b = np.asarray(conv.inputs[2].const, np.float64) if len(conv.inputs) > 2 and conv.inputs[2] is not None \
        else np.zeros(c)
    _refit(graph, conv, bn, w.astype(np.float64) * k.reshape((c,) + (1,) * (w.ndim - 1)), (b - mean) * k + shift)
    return 1


def _bias(graph: Graph, add: Node) -> int:
    for side in (0, 1):
        conv = _conv_before(graph, add.inputs[side])
        other = add.inputs[1 - side]
        if conv is None or other is None or not other.is_const:
            continue
        w = conv.inputs[1].const
        c, rank = w.shape[0], w.ndim  # the output has the weights' rank: (N, C, spatial...)
        per = _per_channel(np.asarray(other.const), c, rank)
        if per is None or other.type.dtype != conv.inputs[1].type.dtype:
            continue
        b = np.asarray(conv.inputs[2].const, np.float64) if len(conv.inputs) > 2 and conv.inputs[2] is not None \
            else np.zeros(c)
        _refit(graph, conv, add, w.astype(np.float64), b + per)
        return 1
    return 0


def _per_channel(a: np.ndarray, c: int, rank: int) -> np.ndarray | None:
    """``a`` as one float64 value per channel when adding it to an (N, C, ...) output of rank
    ``rank`` adds a per-channel constant without changing the output's shape; else None."""
    if a.ndim > rank:
        return None
    shape = (1,) * (rank - a.ndim) + a.shape
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, c):
        return None
    return np.broadcast_to(a.reshape(-1).astype(np.float64), (c,)).copy() if a.size == 1 else a.reshape(-1).astype(np.float64)
