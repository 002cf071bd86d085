"""Transposes: sink them through layout-agnostic ops, cancel inverse pairs, fold them into constants.

A frontend of a channels-last format (TFLite) wraps every channels-last op in transposes into
NCHW and back; between two such ops the pairs meet only across elementwise ops,
activations, quantize/dequantize, concatenations, reductions … This pass, run for every
target after ``fold``, moves each transpose below the op that consumes it when the op is
layout-agnostic (the ``layout_unary`` / ``layout_broadcasting`` / ``layout_reduce`` traits
of optable.yaml, read through ``passes.layout.classes()``, plus the axis-carrying ops whose
attribute it remaps: softmax, log_softmax, lp_normalization, concat, pad,
quantize/dequantize), so that the transposes meet and compose:

* ``transpose(transpose(x, p), q)`` → ``transpose(x, p∘q)``; an identity permutation is dropped;
* ``transpose(constant)`` → the permuted constant;
* ``op(transpose(a, p), transpose(b, p) | constant | scalar)`` → ``transpose(op(a, b'), p)``
  (constants permuted by p⁻¹, axis attributes/inputs remapped), only when at least one of
  the op's transposed inputs has no other consumer (the count never grows) and the op's
  outputs are not graph outputs (their names stay).

A graph without transposes is left untouched (the pass returns at once).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Graph, Node, TensorType, Value

#: ops whose axis attribute names an axis of the (single) layout-bearing input
_AXIS_ATTR = {"softmax": -1, "log_softmax": -1, "lp_normalization": -1, "concat": None}
_QDQ = ("quantize_linear", "dequantize_linear")


def _perm(n: Node) -> list[int] | None:
    p = n.attrs.get("perm")
    return None if p is None else [int(x) for x in p]


def _is_transpose(v: Value | None) -> bool:
    return v is not None and v.producer is not None and v.producer.op == "transpose" and _perm(v.producer) is not None


def count(g: Graph) -> int:
    return sum(1 for n in g.walk() if n.op == "transpose")


def run(g: Graph, tables: Any = None) -> dict[str, int]:
    """Sink/cancel/fold the transposes of ``g`` (not its subgraphs: the pipeline calls per graph)."""
    before = sum(1 for n in g.nodes if n.op == "transpose")
    if not before:
        return {"before": 0, "after": 0}
    from .layout import classes

    cls = classes(tables)
    for _ in range(4 * len(g.nodes) + 8):  # every change removes a transpose or moves one down
        if not (_peephole(g) or _sink_one(g, cls)):
            break
    g.toposort()
    return {"before": before, "after": sum(1 for n in g.nodes if n.op == "transpose")}


# ----------------------------------------------------------------------------- peephole
def _is_output(g: Graph, v: Value) -> bool:
    return any(o is v for o in g.outputs)


def _peephole(g: Graph) -> bool:
    changed = False
    for n in list(g.nodes):
        if n.graph is not g or n.op != "transpose" or _perm(n) is None:
            continue
        x, y = n.inputs[0], n.outputs[0]
        p = _perm(n)
        if x is None or _is_output(g, y):
            continue
        if x.is_const and x.graph is g:
            arr = np.ascontiguousarray(np.asarray(x.const).transpose(p))
            c = g.add_constant(f"{x.name}_t", arr, x.type.dtype or "float32")
            g.replace_all_uses_with(y, c)
            g.remove_node(n)
            _drop_if_dead(g, x)
            changed = True
        elif p == list(range(len(p))):
            g.replace_all_uses_with(y, x)
            g.remove_node(n)
            changed = True
        elif _is_transpose(x) and x.producer.graph is g:  # type: ignore[union-attr]
            p0 = _perm(x.producer)  # type: ignore[union-attr]
            comp = [p0[i] for i in p]  # type: ignore[index]
            src = x.producer.inputs[0]  # type: ignore[union-attr]
            if comp == list(range(len(comp))):
                g.replace_all_uses_with(y, src)  # type: ignore[arg-type]
            else:
                n.replace_input(0, src)
                n.attrs["perm"] = comp
            if not n.outputs[0].uses and n.graph is g and not _is_output(g, n.outputs[0]):
                g.remove_node(n)
            changed = True
        if x.producer is not None and x.producer.op == "transpose" and x.producer.graph is g \
                and not x.uses and not _is_output(g, x):
            g.remove_node(x.producer)
    return changed


def _drop_if_dead(g: Graph, v: Value) -> None:
    """A constant this pass replaced, now unused, leaves the graph (emitters would write it)."""
    if v.is_const and not v.uses and not _is_output(g, v) and g.constants.get(v.name) is v:
        del g.constants[v.name]


# ----------------------------------------------------------------------------- sinking
def _sinkable_inputs(n: Node, cls: Any) -> tuple[int, ...] | None:
    """The inputs of ``n`` that follow a permutation of its output (None: not movable here)."""
    rule = cls.rules.get(n.op)
    if rule is None or n.op in cls.spatial or n.op in cls.per_channel:
        return None
    traits_ok = n.op in _AXIS_ATTR or n.op in _QDQ or n.op == "pad" or n.op.startswith("reduce_") \
        or getattr(rule, "__name__", "") in ("_unary", "_broadcasting")
    if not traits_ok:
        return None
    if getattr(rule, "__name__", "") == "_reduce":  # any keepdims: the permutation after it is computed
        ok = n.inputs[0] is not None and n.inputs[0].type.rank is not None and len(n.outputs) == 1
        return (0,) if ok else None
    b = rule(n)
    if b is None or b.outs != (0,) or len(n.outputs) != 1:
        return None
    return b.ins


def _sink_one(g: Graph, cls: Any) -> bool:
    for n in list(g.nodes):
        if n.graph is not g or n.op == "transpose" or any(_is_output(g, o) for o in n.outputs):
            continue
        ins = _sinkable_inputs(n, cls)
        if not ins:
            continue
        perms = {tuple(_perm(n.inputs[i].producer)) for i in ins if _is_transpose(n.inputs[i])}  # type: ignore[union-attr,arg-type]
        if len(perms) != 1:
            continue
        p = list(next(iter(perms)))
        r = len(p)
        ok, dies = True, False
        for i in ins:
            v = n.inputs[i]
            if _is_transpose(v) and _perm(v.producer) == p and v.producer.graph is g:  # type: ignore[union-attr]
                dies = dies or all(u is n for u, _ in v.uses)  # type: ignore[union-attr]
            elif not (v is not None and v.is_const and v.type.rank is not None and v.type.rank <= r):
                ok = False
        if not ok or not dies or not _remappable(n, p):
            continue
        _rewrite(g, n, ins, p)
        return True
    return False


def _remappable(n: Node, p: list[int]) -> bool:
    r = len(p)
    if n.op.startswith("reduce_"):
        a = n.inputs[1] if len(n.inputs) > 1 else None
        return a is None or a.is_const
    if n.op == "pad":
        pads = n.inputs[1]
        axes = n.inputs[3] if len(n.inputs) > 3 else None
        return pads is not None and pads.is_const and np.asarray(pads.const).size == 2 * r and axes is None
    if n.op in _QDQ:
        return all(v is None or v.type.rank in (0, 1) for v in n.inputs[1:])
    return n.outputs[0].type.rank == r or n.op.startswith("reduce_")


def _inv(p: list[int]) -> list[int]:
    return [int(i) for i in np.argsort(p)]


def _rewrite(g: Graph, n: Node, ins: tuple[int, ...], p: list[int]) -> None:
    r = len(p)
    pinv = _inv(p)
    new_inputs = list(n.inputs)
    for i in ins:
        v = n.inputs[i]
        assert v is not None
        if _is_transpose(v):
            new_inputs[i] = v.producer.inputs[0]  # type: ignore[union-attr]
        else:  # a constant of rank <= r, broadcast against the transposed layout
            arr = np.asarray(v.const)
            arr = arr.reshape((1,) * (r - arr.ndim) + arr.shape).transpose(pinv)
            new_inputs[i] = g.add_constant(f"{v.name}_t", np.ascontiguousarray(arr), v.type.dtype or "float32")
    old_ins = list(n.inputs)
    post = None  # the permutation after the node
    out = n.outputs[0]
    old_shape = out.type.shape
    if n.op.startswith("reduce_") and len(n.inputs) > 1 and n.inputs[1] is not None:
        axes = sorted(int(a) % r for a in np.asarray(n.inputs[1].const).reshape(-1))
        new_inputs[1] = g.add_constant(f"{n.name}_axes_t", np.asarray(sorted(p[a] for a in axes), np.int64), "int64")
        if n.attrs.get("keepdims", 1):
            post = p
        else:
            rest = [i for i in range(r) if i not in axes]
            kept = sorted(p[i] for i in rest)
            post = [kept.index(p[i]) for i in rest]
    elif n.op.startswith("reduce_"):  # all axes reduced
        post = p if n.attrs.get("keepdims", 1) else []
    else:
        post = p
        if n.op in _AXIS_ATTR or (n.op in _QDQ and any(v is not None and v.type.rank == 1 and (v.type.shape or (1,))[0] != 1
                                                      for v in n.inputs[1:])):
            default = _AXIS_ATTR.get(n.op, 1)
            a = n.attrs.get("axis", default)
            if a is not None:
                n.attrs["axis"] = p[int(a) % r]
        if n.op == "pad":
            pads = np.asarray(n.inputs[1].const)  # type: ignore[union-attr]
            newp = np.empty_like(pads)
            for i in range(r):
                newp[p[i]], newp[r + p[i]] = pads[i], pads[r + i]
            new_inputs[1] = g.add_constant(f"{n.name}_pads_t", newp, n.inputs[1].type.dtype or "int64")  # type: ignore[union-attr]
    n._set_inputs(new_inputs)
    for v in old_ins:
        if v is not None and v.is_const:
            _drop_if_dead(g, v)
    if old_shape is not None and post:
        shp: list[Any] = [None] * len(post)
        for j, q in enumerate(post):
            shp[q] = old_shape[j]
        out.type = TensorType(out.type.dtype, tuple(shp))
    uses = list(out.uses)
    if uses and post and post != list(range(len(post))):
        t = g.add_node("transpose", [out], {"perm": list(post)}, name=f"{n.name}_t",
                       types=[TensorType(out.type.dtype, old_shape)])
        # a name keeps its layout: the transpose's result is the value the name meant (the
        # check localizes a divergence by comparing values by name across pipelines that
        # sink differently), the node's permuted result takes a new name
        name = out.name
        out.name, t.outputs[0].name = t.outputs[0].name, name
        for u, i in uses:
            u.replace_input(i, t.outputs[0])
    for v in old_ins:  # transposes left without a consumer
        if v is not None and _is_transpose(v) and not v.uses and not _is_output(g, v) and v.producer.graph is g:  # type: ignore[union-attr]
            g.remove_node(v.producer)  # type: ignore[arg-type]
