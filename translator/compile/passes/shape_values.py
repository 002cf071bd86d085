"""Shape arithmetic under symbolic dims: partial values of small integer tensors.

A model exported with a dynamic batch computes sizes at run time, e.g. a Resize's ``sizes`` as
``Concat(Slice(Shape(x), 0, 2), Cast(Concat(Gather(Shape(image), 2), ...)))``. ``Shape(x)`` does not
fold (``x``'s batch is symbolic), so neither does anything after it, although every entry but the
batch is known. This pass tracks, for each integer value of rank 0 or 1 computed from shapes and
constants, its entries: an ``int``, a dim symbol (``str``, the same symbol is the same size), or
``None`` (unknown). Then:

* a value whose entries are all ints becomes a constant (what ``fold_constants`` then continues);
* a ``reshape`` to a partly known shape gives its output those dims (``0`` copies, ``-1`` is solved
  where the symbols cancel), so shape inference continues past it; when a constant can state the
  shape (sizes, the input's own dims in place as ``0``, one other as ``-1``) it becomes that
  constant, and the shape arithmetic behind it goes;
* a ``constant_of_shape`` or ``expand`` to a partly known shape gives its output those dims
  (``expand`` broadcasts them with its input's), e.g. EdgeNeXt's ``zeros(B, H, W)`` mask; an
  ``expand`` whose shape repeats its input's own dims (or 1) is the identity and goes, and so
  is a ``reshape`` to ``Shape(a)`` of a value computed from ``a`` by shape-keeping ops (the
  flatten-softmax-reshape of opset-11 exports) and a ``flatten`` of a matrix at axis 1;
* a ``resize`` whose ``sizes`` keep the input's own dim on some axes (the same symbol or size) and
  give ints on the others resizes only those: constant ``sizes`` on them and the ``axes``
  attribute (stretch policy, no crop-and-resize roi: an axis resized to its own size is the
  identity there; no axis left: the resize goes), and one by constant scales of 1 on its symbolic
  axes resizes only the others, so every backend sees a constant resize of
  static spatial dims.
"""
from __future__ import annotations

from typing import Union

import numpy as np

from ...ir.infer import anonymous_dim, named_dim
from ...ir.graph import Graph, Node, Value

Entry = Union[int, str, None]
#: (rank, entries): rank 0 has one entry
Partial = tuple[int, tuple[Entry, ...]]

MAX_LEN = 16
_INT = ("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64")


def _const(v: Value) -> Partial | None:
    a = np.asarray(v.const)
    if a.ndim > 1 or a.size > MAX_LEN or a.dtype.kind not in "iu":
        return None
    return a.ndim, tuple(int(x) for x in a.reshape(-1))


def _ints(v: Value | None) -> list[int] | None:
    if v is None or not v.is_const:
        return None
    a = np.asarray(v.const)
    return [int(x) for x in a.reshape(-1)] if a.dtype.kind in "iu" else None


def _empty(v: Value | None) -> bool:
    """An optional operand left out: absent, or a constant with no elements."""
    return v is None or v.is_const and np.asarray(v.const).size == 0


def _axes(n: Node, r: int) -> list[int]:
    """A resize's ``axes`` (all when omitted), non-negative."""
    return [int(a) % r for a in n.attrs["axes"]] if n.attrs.get("axes") is not None else list(range(r))


def _dim(d: object) -> Entry:
    if isinstance(d, (int, np.integer)):
        return int(d)
    return d if isinstance(d, str) and d and d != "?" else None


def _eval(n: Node, known: dict[int, Partial]) -> Partial | None:
    def get(i: int) -> Partial | None:
        v = n.inputs[i] if i < len(n.inputs) else None
        if v is None:
            return None
        return _const(v) if v.is_const else known.get(id(v))

    op = n.op
    if op == "shape":
        shp = n.inputs[0].type.shape if n.inputs[0] is not None else None
        if shp is None:
            return None
        r = len(shp)
        start, end = n.attrs.get("start", 0), n.attrs.get("end")
        dims = [_dim(d) for d in shp][slice(int(start), r if end is None else int(end))]
        return 1, tuple(dims)
    if op == "size":  # a static shape's element count, symbolic values or not: Size(Shape(x)) is x's rank
        shp = n.inputs[0].type.shape if n.inputs[0] is not None else None
        if shp is None or not all(isinstance(d, (int, np.integer)) for d in shp):
            return None
        return 0, (int(np.prod(shp, dtype=np.int64)),)
    if op in ("identity", "cast"):
        if op == "cast" and _cast_to(n) not in _INT:
            return None
        return get(0)
    a = get(0)
    if a is None and op != "concat":
        return None
    if op == "gather":
        idx = _ints(n.inputs[1])
        if idx is None or a[0] != 1 or int(n.attrs.get("axis", 0)) != 0:
            return None
        k = len(a[1])
        if any(not -k <= i < k for i in idx):
            return None
        rank = np.asarray(n.inputs[1].const).ndim
        if rank > 1:
            return None
        return rank, tuple(a[1][i] for i in idx)
    if op == "slice":
        starts, ends = _ints(n.inputs[1]), _ints(n.inputs[2])
        axes = _ints(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] is not None else [0]
        steps = _ints(n.inputs[4]) if len(n.inputs) > 4 and n.inputs[4] is not None else [1]
        if None in (starts, ends, axes, steps) or a[0] != 1 or axes not in ([0], [-1]) or len(starts) != 1:
            return None
        if steps[0] == 0:
            return None
        return 1, tuple(a[1][slice(starts[0], ends[0], steps[0])])
    if op == "concat":
        parts = [get(i) for i in range(len(n.inputs))]
        if any(p is None or p[0] != 1 for p in parts):
            return None
        return 1, tuple(e for p in parts for e in p[1])
    if op == "unsqueeze":
        if a[0] != 0 or (_ints(n.inputs[1]) if len(n.inputs) > 1 else None) not in ([0], [-1]):
            return None
        return 1, a[1]
    if op in ("squeeze", "reshape"):
        shp = n.outputs[0].type.shape
        if shp is None or len(shp) > 1 or len(a[1]) != 1 and len(shp) == 0:
            return None
        return len(shp), a[1]
    return None


def _cast_to(n: Node) -> str | None:
    """A cast's target dtype id: its output's type, else its ``to`` (an ONNX TensorProto number)."""
    if n.outputs[0].type.dtype is not None:
        return n.outputs[0].type.dtype
    to = n.attrs.get("to")
    if isinstance(to, str):
        return to
    from ...table.dtypes import onnx_enum

    return onnx_enum().get(int(to)) if to is not None else None


def values(graph: Graph) -> dict[int, Partial]:
    """id(value) → its partial value, for the values this pass can follow (in graph order)."""
    known: dict[int, Partial] = {}
    for n in graph.nodes:
        if len(n.outputs) != 1 or n.op not in _FOLLOWED:
            continue
        out = n.outputs[0]
        if out.type.dtype is not None and out.type.dtype not in _INT:
            continue
        p = _eval(n, known)
        if p is not None and len(p[1]) <= MAX_LEN:
            known[id(out)] = p
    return known


_FOLLOWED = frozenset({"shape", "size", "identity", "cast", "gather", "slice", "concat", "unsqueeze", "squeeze", "reshape"})


def _resize_axes(n: Node, known: dict[int, Partial]) -> bool:
    """A resize whose run-time sizes keep the input's own dims on some axes → constant sizes on the others."""
    if len(n.inputs) < 4 or n.inputs[3] is None or n.inputs[3].is_const or n.inputs[0] is None:
        return False
    if not all(_empty(v) for v in n.inputs[1:3]):
        return False
    if str(n.attrs.get("keep_aspect_ratio_policy", "stretch")) != "stretch" \
            or str(n.attrs.get("coordinate_transformation_mode", "half_pixel")) == "tf_crop_and_resize":
        return False
    p = known.get(id(n.inputs[3]))
    shp = n.inputs[0].type.shape
    if p is None or shp is None:
        return False
    axes = _axes(n, len(shp))
    if len(axes) != len(p[1]):
        return False
    keep_axes, sizes = [], []
    for a, e in zip(axes, p[1]):
        own = _dim(shp[a])
        if e is not None and e == own:
            continue
        if not isinstance(e, int):
            return False
        keep_axes.append(a)
        sizes.append(e)
    g = n.graph
    if not keep_axes:  # every axis keeps its size: the identity
        x, y = n.inputs[0], n.outputs[0]
        if any(o is y for o in g.outputs) or x.type.dtype != y.type.dtype:
            return False
        g.replace_all_uses_with(y, x)
        n.replace_input(3, None)
        g.remove_node(n)
        return True
    c = g.add_constant(f"{n.name}_sizes", np.asarray(sizes, np.int64), "int64")
    n.replace_input(3, c)
    n.attrs["axes"] = keep_axes
    return True


def _resize_unit_scales(n: Node) -> bool:
    """A resize by constant scales of 1 on axes whose size is symbolic (a dynamic batch): those axes
    leave ``axes`` (a scale of 1 is the identity in every mode but crop-and-resize)."""
    if len(n.inputs) < 3 or n.inputs[2] is None or not n.inputs[2].is_const or n.inputs[0] is None \
            or n.inputs[0].type.shape is None:
        return False
    if not _empty(n.inputs[3] if len(n.inputs) > 3 else None) or not _empty(n.inputs[1]) \
            or str(n.attrs.get("coordinate_transformation_mode", "half_pixel")) == "tf_crop_and_resize":
        return False
    scales = [float(v) for v in np.asarray(n.inputs[2].const).reshape(-1)]
    shp = n.inputs[0].type.shape
    axes = _axes(n, len(shp))
    if len(axes) != len(scales) or not any(s == 1.0 and not isinstance(shp[a], int) for a, s in zip(axes, scales)):
        return False
    keep = [(a, s) for a, s in zip(axes, scales) if s != 1.0]
    if not keep:
        return False
    n.replace_input(2, n.graph.add_constant(f"{n.name}_scales", np.asarray([s for _, s in keep], np.float32), "float32"))
    n.attrs["axes"] = [a for a, _ in keep]
    return True


def _reshape_dims(shp: tuple, entries: tuple[Entry, ...], allowzero: bool) -> list[Entry]:
    """A reshape's output dims from its partial target shape: 0 copies the input's dim, and -1 is
    the input's size over the others' where the symbols cancel (``(b, 32, 16, 16) → (b, 32, -1)``)."""
    out = [shp[i] if e == 0 and not allowzero and i < len(shp) else e for i, e in enumerate(entries)]
    out = [_dim(d) if not isinstance(d, int) else d for d in out]
    if -1 in out:
        num = [_dim(d) for d in shp]
        den = [d for d in out if d != -1]
        for d in list(den):
            if isinstance(d, str) and d in num:
                num.remove(d)
                den.remove(d)
        known = all(isinstance(d, int) for d in num + den)
        q, r = (divmod(int(np.prod(num)), int(np.prod(den))) if known and int(np.prod(den)) else (0, 1))
        out[out.index(-1)] = q if known and not r else None
    return out


def _retype(y: Value, new: list[Entry]) -> bool:
    """``y``'s type takes the dims of ``new`` where it has an unknown or anonymous one (a size,
    or a named symbol over ``unk__N``); whether anything changed."""
    merged = []
    for old, d in zip(y.type.shape, new):
        if isinstance(old, int) or d is None or isinstance(d, int) and d < 0:
            merged.append(old)
        elif isinstance(d, int) or old is None or anonymous_dim(old) and named_dim(d):
            merged.append(d)
        else:
            merged.append(old)
    if tuple(merged) == tuple(y.type.shape):
        return False
    y.type = type(y.type)(y.type.dtype, tuple(merged))
    return True


def _constant_target(n: Node, known: dict[int, Partial], graph: Graph) -> bool:
    """A reshape to a run-time shape that a constant can state: each entry a size, a dim the input
    keeps at the same place (written ``0``, ONNX's copy), and at most one other (written ``-1``,
    solved from the element count). The shape arithmetic that computed it is then dead (its
    ``Shape``, ``Gather``, ``Concat``: on TFLite each a builtin kernel, in PyTorch a tensor op and
    a host sync per ``forward``), and every target sees a constant reshape."""
    x, s = n.inputs[0], n.inputs[1] if len(n.inputs) > 1 else None
    if s is None or s.is_const or x is None or x.type.shape is None:
        return False
    p = known.get(id(s))
    if p is None or p[0] != 1 or not p[1] or n.attrs.get("allowzero", 0) and 0 in p[1]:
        return False  # (allowzero without a zero entry: the same reshape as without it, which the 0s below need)
    xs = [_dim(d) for d in x.type.shape]
    target, free = [], 0
    for i, e in enumerate(p[1]):
        if isinstance(e, int) and e > 0:
            target.append(e)
        elif e == 0 or isinstance(e, str) and i < len(xs) and xs[i] == e:
            if i >= len(xs):
                return False
            target.append(0)
        elif e is None or isinstance(e, str) or e == -1:
            target.append(-1)
            free += 1
        else:
            return False
    if free > 1:
        return False
    dt = s.type.dtype or "int64"
    n.replace_input(1, graph.add_constant(s.name + "_stated", np.asarray(target, dtype=np.dtype(dt)), dt))
    if "allowzero" in n.attrs:
        n.attrs["allowzero"] = 0
    return True


def _refine_reshape(n: Node, known: dict[int, Partial]) -> bool:
    """A reshape to a run-time shape whose entries are partly known: its output type takes them
    (an unknown or anonymous dim becomes the size or the named symbol), so what follows infers."""
    x, y = n.inputs[0], n.outputs[0]
    p = known.get(id(n.inputs[1])) if n.inputs[1] is not None else None
    if p is None or p[0] != 1 or x is None or x.type.shape is None or y.type.shape is None \
            or len(y.type.shape) != len(p[1]):
        return False
    new = _reshape_dims(x.type.shape, p[1], bool(n.attrs.get("allowzero", 0)))
    return _retype(y, new)


def _broadcast_dim(a: Entry, e: Entry) -> Entry:
    """One axis of ``expand``: the input's dim ``a`` broadcast with the target's entry ``e``."""
    if e == 1 or a == e:
        return a
    if a == 1:
        return e
    if isinstance(a, int):
        return a  # e is 1 (handled) or a: anything else is an invalid model
    return e if isinstance(e, int) else None


def _refine_filled(n: Node, known: dict[int, Partial]) -> bool:
    """A ``constant_of_shape`` / ``expand`` whose run-time shape is partly known: its output takes
    those dims where its type has an unknown or anonymous one (as ``_refine_reshape``)."""
    k = 0 if n.op == "constant_of_shape" else 1
    v = n.inputs[k] if k < len(n.inputs) else None
    p = known.get(id(v)) if v is not None else None
    y = n.outputs[0]
    if p is None or p[0] != 1 or y.type.shape is None or len(y.type.shape) != max(len(p[1]), 0 if k == 0 else
                                                                                   len(n.inputs[0].type.shape or ())):
        return False
    new = list(p[1])
    if k == 1:
        src = n.inputs[0].type.shape
        if src is None:
            return False
        r = len(y.type.shape)
        a = [1] * (r - len(src)) + [_dim(d) for d in src]
        e = [1] * (r - len(new)) + new
        new = [_broadcast_dim(x, t) for x, t in zip(a, e)]
    return _retype(y, new)


def _identity_expand(n: Node, known: dict[int, Partial], graph: Graph) -> bool:
    """An ``expand`` to a run-time shape whose every entry is 1 or the input's own dim on that
    axis (the same size or symbol), no longer than the input's rank, is the identity: its
    readers take the input (jax2tf's ``broadcast_in_dim`` of a value already at that shape)."""
    x, y = n.inputs[0], n.outputs[0]
    p = known.get(id(n.inputs[1])) if len(n.inputs) > 1 else None
    src = x.type.shape
    if p is None or p[0] != 1 or src is None or len(p[1]) > len(src):
        return False
    dims = [_dim(d) for d in src[len(src) - len(p[1]):]]
    if not all(e == 1 or (e is not None and e == a) for a, e in zip(dims, p[1])):
        return False
    return _bypass(n, graph)


def _bypass(n: Node, graph: Graph) -> bool:
    """``n`` (an identity) removed, its readers reading its input; a graph output keeps its name
    (the input takes it), unless the input is itself a graph input or output (then ``n`` stays)."""
    x, y = n.inputs[0], n.outputs[0]
    if any(v is y for v in graph.outputs):
        if x.is_const or any(v is x for v in graph.inputs) or any(v is x for v in graph.outputs):
            return False
        graph.replace_node(n, [x])
        return True
    graph.replace_all_uses_with(y, x)
    graph.remove_node(n)
    return True


#: ops whose output has their first input's shape, whatever its dims (softmax over an axis, and
#: the table's shape-keeping unary ops)
_SAME_SHAPE = frozenset({"identity", "softmax", "log_softmax", "hardmax", "dropout"})


def _keeps_shape(n: Node) -> bool:
    if n.op in _SAME_SHAPE:
        return True
    if n.op == "flatten":  # of a matrix at axis 1: the matrix itself
        shp = n.inputs[0].type.shape
        return shp is not None and len(shp) == 2 and int(n.attrs.get("axis", 1)) in (1, -1)
    from ...table.loader import load_tables

    entry = load_tables().ops.get(n.op)
    return entry is not None and "layout_unary" in entry.traits and sum(
        1 for v in n.inputs if v is not None and not v.is_const) == 1 and n.inputs[0] is not None \
        and not n.inputs[0].is_const


def _same_shape(x: Value, a: Value) -> bool:
    """Whether ``x`` is computed from ``a`` through ops that keep its shape (so the two have one
    shape whatever the run-time dims)."""
    v = x
    for _ in range(64):
        if v is a:
            return True
        p = v.producer
        if p is None or not p.inputs or p.inputs[0] is None or not _keeps_shape(p):
            return False
        v = p.inputs[0]
    return False


def _identity_reshape(n: Node, graph: Graph) -> bool:
    """A ``flatten`` of a matrix at axis 1, or a ``reshape`` to ``Shape(a)`` of a value computed
    from ``a`` through shape-keeping ops (opset-11 exporters' softmax over the last axis:
    flatten, softmax, reshape back to the input's run-time shape): the identity, gone."""
    x = n.inputs[0]
    if x is None:
        return False
    if n.op == "flatten":
        if not _keeps_shape(n):
            return False
    else:
        sv = n.inputs[1] if len(n.inputs) > 1 else None
        p = sv.producer if sv is not None else None
        if p is None or p.op != "shape" or p.attrs.get("start", 0) not in (0, None) or p.attrs.get("end") is not None \
                or not _same_shape(x, p.inputs[0]):
            return False
    return _bypass(n, graph)


def run(graph: Graph) -> int:
    """Fold all-int partial values to constants and narrow resizes; the number of rewrites."""
    known = values(graph)
    changed = 0
    for n in list(graph.nodes):
        if n.op == "resize" and (_resize_axes(n, known) or _resize_unit_scales(n)):
            changed += 1
            continue
        if n.op == "reshape" and _refine_reshape(n, known):
            changed += 1
        if n.op == "expand" and _identity_expand(n, known, graph) or n.op in ("reshape", "flatten") and \
                _identity_reshape(n, graph):
            changed += 1
            continue
        if n.op == "reshape" and _constant_target(n, known, graph):
            changed += 1
            continue
        if n.op in ("constant_of_shape", "expand") and _refine_filled(n, known):
            changed += 1
        out = n.outputs[0] if len(n.outputs) == 1 else None
        p = known.get(id(out)) if out is not None else None
        if p is None or not all(isinstance(e, int) for e in p[1]) or n.op == "shape" and not p[1]:
            continue
        if any(o is out for o in graph.outputs):
            continue  # a graph output keeps its node (fold_constants renames outputs; not needed here)
        dt = out.type.dtype or "int64"
        arr = np.asarray(p[1], dtype=np.dtype(dt)).reshape(() if p[0] == 0 else (-1,))
        graph.replace_all_uses_with(out, graph.add_constant(out.name + "_folded", arr, dt))
        changed += 1
    if changed:
        _drop_dead(graph)
    return changed


def _drop_dead(graph: Graph) -> None:
    """Shape arithmetic left without a use (its result became a constant) leaves the graph."""
    outs = {id(v) for v in graph.outputs}
    for n in reversed(list(graph.nodes)):
        if n.op in _FOLLOWED and all(not v.uses and id(v) not in outs for v in n.outputs):
            graph.remove_node(n)
