"""Layout: channels-first (the ONNX ``N C D1 … Dk`` order) → channels-last where a backend needs it.

TensorFlow and TFLite take convolution, pooling, resize, depth-to-space … channels-last
(``N D1 … Dk C``). This pass decides, for the whole graph at once, which values are held
channels-last, so that the emitted graph has the fewest transposes:

* a value of rank r ≥ 3 is held either as the source has it (label 0) or permuted by
  ``to_last(r) = [0, 2, …, r-1, 1]`` (label 1);
* every node is a 0/1 variable. Channels-last ops (the backend's predicate, e.g. every
  ``conv``) are fixed to 1; layout-agnostic ops (elementwise, activations, per-channel
  normalization, concat/split/reductions/softmax with their axes remapped, …: the op's
  ``layout_*`` trait in optable.yaml, see ``classes()``) are free: their layout-bearing
  inputs and outputs share the node's label; every other op, the graph inputs and the
  graph outputs are fixed to 0 (inputs/outputs to 1 with ``io_channels_last``);
* a (non-constant) value costs one transpose when some use needs the other label than
  its producer gives (constants are permuted at conversion time, for free).

Minimizing the number of transposes is then a minimum s-t cut (two auxiliary nodes per
value express "producer 0 and some use 1" and "producer 1 and some use 0"), solved
exactly by max-flow. The graph is rewritten accordingly (transposes inserted, shapes and
axis attributes/constant inputs remapped, ``node.meta["layout"] = "channels_last"`` on
every node that now works channels-last) and a peephole pass composes consecutive
transposes, folds transposes of constants and drops identities — which also cancels a
model's own NHWC↔NCHW transposes against the inserted ones. Subgraphs get the pass on
their own (their inputs, outputs and captured outer values stay channels-first).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from ...ir.graph import Graph, Node, TensorType, Value
from ...table.loader import Tables, load_tables

CHANNELS_LAST = "channels_last"
LayoutPredicate = Callable[[Node], bool]


def to_last(rank: int) -> list[int]:
    """The permutation NC… → N…C (``x.transpose(to_last(r))`` is channels-last)."""
    return [0, *range(2, rank), 1]


def to_first(rank: int) -> list[int]:
    """The inverse permutation N…C → NC…."""
    return [0, rank - 1, *range(1, rank - 1)]


def is_channels_last(node: Node) -> bool:
    return node.meta.get("layout") == CHANNELS_LAST


@dataclass
class LayoutReport:
    transposes: int = 0  # transpose nodes in the final graph (all of them, any origin)
    inserted: int = 0  # of which inserted by this pass
    channels_last_nodes: int = 0  # nodes working channels-last
    cut: int = 0  # the minimum number of layout changes found by the max-flow
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {"transposes": self.transposes, "inserted": self.inserted,
                "channels_last_nodes": self.channels_last_nodes}


# ----------------------------------------------------------------------------- op rules
def _rank(v: Value | None) -> int | None:
    return None if v is None or v.type.kind != "tensor" else v.type.rank


def _layout_free(v: Value) -> bool:
    """A value that broadcasts the same in either layout (a scalar, or all dims 1)."""
    shp = v.type.shape
    return shp is not None and all(d == 1 for d in shp)


@dataclass(frozen=True)
class Bearing:
    """Which inputs/outputs of a node follow the node's layout (the others stay as they are)."""

    ins: tuple[int, ...]
    outs: tuple[int, ...]
    rank: int


Rule = Callable[[Node], "Bearing | None"]
Remap = Callable[[Node, "_Rewriter", int], None]


def _out_rank(n: Node, i: int = 0) -> int | None:
    return _rank(n.outputs[i]) if i < len(n.outputs) else None


def _unary(n: Node) -> Bearing | None:
    r = _out_rank(n)
    if r is None or _rank(n.inputs[0]) != r:
        return None
    others = [v for v in n.inputs[1:] if v is not None]
    if not all(_layout_free(v) for v in others):  # clip min/max, quantize scales: scalars only
        return None
    return Bearing((0,), (0,), r)


def _broadcasting(n: Node) -> Bearing | None:
    r = _out_rank(n)
    if r is None:
        return None
    ins = []
    for i, v in enumerate(n.inputs):
        if v is None:
            continue
        rv = _rank(v)
        if rv is None:
            return None
        if _layout_free(v):
            continue
        if rv == r or v.is_const:
            ins.append(i)
        else:  # a lower-rank non-constant operand would need a reshape: keep the source layout
            return None
    return Bearing(tuple(ins), (0,), r) if ins else None


def _first_in_out(n: Node) -> Bearing | None:
    """Input 0 and output 0, of one rank (an unknown output rank is the input's: these ops keep it)."""
    r = _rank(n.inputs[0])
    if r is None or _out_rank(n) not in (None, r):
        return None
    return Bearing((0,), (0,), r)


def _const_input(n: Node, i: int) -> bool:
    return i >= len(n.inputs) or n.inputs[i] is None or n.inputs[i].is_const  # type: ignore[union-attr]


def _reduce(n: Node) -> Bearing | None:
    if not _const_input(n, 1):
        return None
    return _first_in_out(n) if n.attrs.get("keepdims", 1) else _reduce_dropping(n)


def _reduce_dropping(n: Node) -> Bearing | None:
    """A reduction that drops its axes reads a channels-last input as well when the axes left
    keep their order in both layouts: a global pool's mean over H and W gives (N, C) either way,
    so the transpose before it goes. Its output is in no particular layout (not a bearing output)."""
    r = _rank(n.inputs[0])
    if r is None or r < 3:
        return None
    v = n.inputs[1] if len(n.inputs) > 1 else None
    if v is None:  # every axis, or none (noop_with_empty_axes: the identity, which keeps the rank)
        return None if n.attrs.get("noop_with_empty_axes", 0) else Bearing((0,), (), r)
    axes = {_norm(int(a), r) for a in np.asarray(v.const).reshape(-1)}  # type: ignore[union-attr]
    if not axes:
        return None
    left = [a for a in to_last(r) if a not in axes]
    return Bearing((0,), (), r) if left == sorted(left) else None


def _keepdims_axis(n: Node) -> Bearing | None:
    return _first_in_out(n) if n.attrs.get("keepdims", 1) else None


def _all_variadic(n: Node) -> Bearing | None:
    r = _out_rank(n)
    if r is None or any(_rank(v) != r for v in n.inputs if v is not None):
        return None
    return Bearing(tuple(i for i, v in enumerate(n.inputs) if v is not None), (0,), r)


def _split(n: Node) -> Bearing | None:
    r = _rank(n.inputs[0])
    if r is None or any(_rank(o) != r for o in n.outputs):
        return None
    return Bearing((0,), tuple(range(len(n.outputs))), r)


def _top_k(n: Node) -> Bearing | None:
    r = _rank(n.inputs[0])
    if r is None or any(_rank(o) != r for o in n.outputs):
        return None
    return Bearing((0,), tuple(range(len(n.outputs))), r)


def _with_const_inputs(*idx: int) -> Rule:
    def rule(n: Node) -> Bearing | None:
        if not all(_const_input(n, i) for i in idx):
            return None
        return _first_in_out(n)

    return rule


def _pad(n: Node) -> Bearing | None:
    if n.attrs.get("mode", "constant") not in ("constant", "reflect", "edge", "wrap"):
        return None
    if not (_const_input(n, 1) and _const_input(n, 3)):
        return None
    b = _first_in_out(n)
    if b is None or (len(n.inputs) > 2 and n.inputs[2] is not None and not _layout_free(n.inputs[2])):
        return None
    return b


def _single_output(rule: Rule) -> Rule:
    """Ops whose extra outputs (batch-norm statistics, max-pool indices) must be unused."""

    def wrapped(n: Node) -> Bearing | None:
        if any(o.uses or (n.graph is not None and o in n.graph.outputs) for o in n.outputs[1:]):
            return None
        return rule(n)

    return wrapped


def _resize(n: Node) -> Bearing | None:
    if not all(_const_input(n, i) for i in (1, 2, 3)):
        return None
    return _first_in_out(n)


def _quantize(n: Node) -> Bearing | None:
    if n.attrs.get("block_size", 0):
        return None
    r = _out_rank(n)
    if r is None or _rank(n.inputs[0]) != r:
        return None
    if not all(v is None or _rank(v) in (0, 1) for v in n.inputs[1:]):
        return None
    return Bearing((0,), (0,), r)


#: the op classes, by their layout trait in optable.yaml (``classes()``)
CLASS_RULES: dict[str, Rule] = {
    "layout_unary": _unary, "layout_broadcasting": _broadcasting, "layout_reduce": _reduce,
    # per-channel ops: the channel axis moves with the layout (node.meta["layout"])
    "layout_per_channel": _first_in_out,
    # spatial ops (channels-last where the backend says so)
    "layout_spatial": _first_in_out,
}
#: op id → which inputs/outputs follow the node's layout (None: this node keeps the source layout);
#: ops whose rule is not their class's
OP_RULES: dict[str, Rule] = {
    "softmax": _first_in_out, "log_softmax": _first_in_out, "hardmax": _first_in_out,
    "lp_normalization": _first_in_out, "mean_variance_normalization": _first_in_out, "reverse": _first_in_out,
    "arg_max": _keepdims_axis, "arg_min": _keepdims_axis, "concat": _all_variadic, "split": _split, "top_k": _top_k,
    "cum_sum": _with_const_inputs(1), "cum_prod": _with_const_inputs(1), "tile": _with_const_inputs(1),
    "slice": _with_const_inputs(3), "pad": _pad,
    "quantize_linear": _quantize, "dequantize_linear": _quantize,
    "batch_normalization": _single_output(_first_in_out), "max_pool": _single_output(_first_in_out),
    "resize": _resize, "upsample": _with_const_inputs(1),
}


# ----------------------------------------------------------------------------- attribute remapping
def _norm(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _new_axis(axis: int, rank: int) -> int:
    """Where source axis ``axis`` lands in the channels-last tensor."""
    a = _norm(int(axis), rank)
    return to_first(rank)[a]


def _remap_axis_attr(name: str, default: int | None = None) -> Remap:
    def remap(n: Node, rw: "_Rewriter", r: int) -> None:
        a = n.attrs.get(name, default)
        if a is not None:
            n.attrs[name] = _new_axis(a, r)

    return remap


def _remap_axes_attr(name: str, default: Iterable[int] | None = None) -> Remap:
    def remap(n: Node, rw: "_Rewriter", r: int) -> None:
        a = n.attrs.get(name, default)
        if a is not None:
            n.attrs[name] = [_new_axis(x, r) for x in a]

    return remap


def _remap_axes_input(i: int, default_len_from: int | None = None) -> Remap:
    """An axes input (a constant); absent axes of ``slice``/``pad`` are spelled out first."""

    def remap(n: Node, rw: "_Rewriter", r: int) -> None:
        v = n.inputs[i] if i < len(n.inputs) else None
        if v is None:
            if default_len_from is None:
                return
            k = n.inputs[default_len_from]
            assert k is not None and k.const is not None
            count = int(np.asarray(k.const).size) // (2 if n.op == "pad" else 1)
            arr = np.arange(count, dtype=np.int64)
        else:
            assert v.const is not None
            arr = np.asarray(v.const)
        new = np.asarray([_new_axis(int(a), r) for a in arr.reshape(-1)], dtype=arr.dtype).reshape(arr.shape)
        ins = list(n.inputs) + [None] * (i + 1 - len(n.inputs))
        ins[i] = rw.constant(new, f"{n.name}_axes_cl")
        n._set_inputs(ins)

    return remap


def _remap_per_axis_input(i: int) -> Remap:
    """A constant with one entry per axis (``tile`` repeats, resize scales/sizes): permuted."""

    def remap(n: Node, rw: "_Rewriter", r: int) -> None:
        v = n.inputs[i] if i < len(n.inputs) else None
        if v is None or v.const is None or np.asarray(v.const).size != r:
            return
        arr = np.asarray(v.const)
        n.replace_input(i, rw.constant(arr[to_last(r)], f"{n.name}_in{i}_cl"))

    return remap


def _remap_pads(n: Node, rw: "_Rewriter", r: int) -> None:
    axes = n.inputs[3] if len(n.inputs) > 3 else None
    if axes is not None:
        _remap_axes_input(3)(n, rw, r)
        return
    pads = n.inputs[1]
    assert pads is not None and pads.const is not None
    arr = np.asarray(pads.const)
    if arr.size != 2 * r:
        return
    p = to_last(r)
    new = np.concatenate([arr[:r][p], arr[r:][p]])
    n.replace_input(1, rw.constant(new, f"{n.name}_pads_cl"))


def _remap_roi_and_scales(n: Node, rw: "_Rewriter", r: int) -> None:
    if n.attrs.get("axes") is not None:
        _remap_axes_attr("axes")(n, rw, r)
        return
    roi = n.inputs[1] if len(n.inputs) > 1 else None
    if roi is not None and roi.const is not None and np.asarray(roi.const).size == 2 * r:
        arr = np.asarray(roi.const)
        p = to_last(r)
        n.replace_input(1, rw.constant(np.concatenate([arr[:r][p], arr[r:][p]]), f"{n.name}_roi_cl"))
    _remap_per_axis_input(2)(n, rw, r)
    _remap_per_axis_input(3)(n, rw, r)


#: how a channels-last node's axis attributes/inputs change, per class (``classes()``) and per op
CLASS_REMAPS: dict[str, Remap] = {"layout_reduce": _remap_axes_input(1)}
OP_REMAPS: dict[str, Remap] = {
    "softmax": _remap_axis_attr("axis", -1), "log_softmax": _remap_axis_attr("axis", -1),
    "hardmax": _remap_axis_attr("axis", -1), "lp_normalization": _remap_axis_attr("axis", -1),
    "arg_max": _remap_axis_attr("axis", 0), "arg_min": _remap_axis_attr("axis", 0),
    "concat": _remap_axis_attr("axis"), "split": _remap_axis_attr("axis", 0), "top_k": _remap_axis_attr("axis", -1),
    "quantize_linear": _remap_axis_attr("axis", 1), "dequantize_linear": _remap_axis_attr("axis", 1),
    "mean_variance_normalization": _remap_axes_attr("axes", (0, 2, 3)), "reverse": _remap_axes_attr("axes"),
    "cum_sum": _remap_axes_input(1), "cum_prod": _remap_axes_input(1), "tile": _remap_per_axis_input(1),
    "slice": _remap_axes_input(3, default_len_from=1), "pad": _remap_pads,
    "resize": _remap_roi_and_scales, "upsample": _remap_per_axis_input(1),
}


# ----------------------------------------------------------------------------- min cut
class _Flow:
    """Max-flow / min-cut (Edmonds-Karp) on a small graph; node 0 is the source (label 0), 1 the sink."""

    INF = 1 << 40

    def __init__(self) -> None:
        self.adj: list[list[int]] = [[], []]
        self.to: list[int] = []
        self.cap: list[int] = []

    def node(self) -> int:
        self.adj.append([])
        return len(self.adj) - 1

    def edge(self, u: int, v: int, c: int) -> None:
        if u == v:
            return
        self.adj[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(c)
        self.adj[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(0)

    def maxflow(self) -> int:
        total = 0
        while True:
            via = [-1] * len(self.adj)  # edge used to reach each node
            via[0] = -2
            queue = [0]
            for u in queue:
                if u == 1:
                    break
                for e in self.adj[u]:
                    v = self.to[e]
                    if self.cap[e] > 0 and via[v] == -1:
                        via[v] = e
                        queue.append(v)
            if via[1] == -1:
                return total
            push, v = self.INF, 1
            while v != 0:
                e = via[v]
                push = min(push, self.cap[e])
                v = self.to[e ^ 1]
            v = 1
            while v != 0:
                e = via[v]
                self.cap[e] -= push
                self.cap[e ^ 1] += push
                v = self.to[e ^ 1]
            total += push

    def source_side(self) -> set[int]:
        seen = {0}
        queue = [0]
        for u in queue:
            for e in self.adj[u]:
                if self.cap[e] > 0 and self.to[e] not in seen:
                    seen.add(self.to[e])
                    queue.append(self.to[e])
        return seen


SOURCE, SINK = 0, 1  # label 0 (source layout), label 1 (channels-last)


@dataclass(frozen=True)
class Classes:
    """The layout facts of every op, read from the table's ``layout_*`` traits."""

    rules: dict[str, Rule]
    remaps: dict[str, Remap]
    #: ops channels-last exactly when the backend's predicate says so (never moved by the cut)
    spatial: frozenset[str]
    #: per-channel ops: channels-last when the backend asks, else wherever the cut puts them
    per_channel: frozenset[str]


_CLASSES: dict[int, tuple[Tables, Classes]] = {}


def classes(tables: Tables | None = None) -> Classes:
    """The rules, remaps and fixed classes for ``tables`` (memoized per table object)."""
    tables = tables or load_tables()
    hit = _CLASSES.get(id(tables))
    if hit is not None and hit[0] is tables:
        return hit[1]
    rules: dict[str, Rule] = {}
    remaps: dict[str, Remap] = {}
    for op in tables.ops.values():
        for trait in sorted(op.traits & CLASS_RULES.keys()):
            rules[op.id] = CLASS_RULES[trait]
            if trait in CLASS_REMAPS:
                remaps[op.id] = CLASS_REMAPS[trait]
    rules.update(OP_RULES)
    remaps.update(OP_REMAPS)
    got = Classes(rules, remaps,
                  frozenset(op.id for op in tables.ops.values() if "layout_spatial" in op.traits),
                  frozenset(op.id for op in tables.ops.values() if "layout_per_channel" in op.traits))
    _CLASSES[id(tables)] = (tables, got)
    return got


# ----------------------------------------------------------------------------- the pass
class _Rewriter:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.copies: dict[tuple[int, int], Value] = {}  # (id(value), label) → transposed copy
        self.const_copies: dict[tuple[int, int], Value] = {}  # (id(const), rank) → channels-last constant
        self.inserted: list[Node] = []

    def constant(self, arr: np.ndarray, name: str) -> Value:
        from ...table.dtypes import dtype_id

        return self.graph.add_constant(name, np.ascontiguousarray(arr), dtype_id(arr.dtype))

    def channels_last_const(self, v: Value, rank: int) -> Value:
        key = (id(v), rank)
        if key not in self.const_copies:
            arr = np.asarray(v.const)
            arr = arr.reshape((1,) * (rank - arr.ndim) + arr.shape)
            c = self.constant(arr.transpose(to_last(rank)), f"{v.name}_cl")
            c.type = TensorType(v.type.dtype, c.type.shape)
            self.const_copies[key] = c
        return self.const_copies[key]

    def copy(self, v: Value, label: int) -> Value:
        """``v`` (held in the other layout) transposed into layout ``label``."""
        key = (id(v), label)
        if key not in self.copies:
            r = _rank(v)
            assert r is not None
            perm = to_last(r) if label == 1 else to_first(r)
            shape = None if v.type.shape is None else tuple(v.type.shape[p] for p in perm)
            suffix = "cl" if label == 1 else "cf"
            t = self.graph.add_node("transpose", [v], {"perm": perm}, outputs=[f"{v.name}_{suffix}"],
                                    name=f"{v.name}/to_{suffix}", types=[TensorType(v.type.dtype, shape, v.type.kind)])
            t.meta["layout_inserted"] = True
            self.inserted.append(t)
            self.copies[key] = t.outputs[0]
        return self.copies[key]


def run(graph: Graph, channels_last: LayoutPredicate | Iterable[str], io_channels_last: bool = False,
        tables: Tables | None = None) -> LayoutReport:
    """Assign layouts in ``graph`` (and its subgraphs) and rewrite it; returns the report.

    ``channels_last``: which nodes the backend runs channels-last (a predicate, or op ids).
    ``io_channels_last``: graph inputs/outputs of rank ≥ 3 become channels-last too (the
    caller then feeds and reads ``N…C`` tensors); by default they keep the source layout.
    ``tables``: where the ops' layout classes come from (default: the loaded tables).
    """
    pred: LayoutPredicate
    if callable(channels_last):
        pred = channels_last
    else:
        ops = frozenset(channels_last)
        pred = lambda n: n.op in ops  # noqa: E731
    report = LayoutReport()
    _run_graph(graph, pred, io_channels_last, report, classes(tables))
    report.transposes = sum(1 for n in graph.walk() if n.op == "transpose")
    report.inserted = sum(1 for n in graph.walk() if n.op == "transpose" and n.meta.get("layout_inserted"))
    report.channels_last_nodes = sum(1 for n in graph.walk() if is_channels_last(n))
    return report


def _run_graph(graph: Graph, pred: LayoutPredicate, io_cl: bool, report: LayoutReport, cls: Classes) -> None:
    bearing: dict[int, Bearing] = {}
    var: dict[int, int] = {}  # id(node) → flow node (SOURCE / SINK when fixed)
    flow = _Flow()
    for n in graph.nodes:
        rule = cls.rules.get(n.op)
        b = rule(n) if rule is not None and not any(True for _ in n.subgraphs()) else None
        if b is None or b.rank < 3:
            var[id(n)] = SOURCE
            continue
        bearing[id(n)] = b
        for k in b.outs:  # a bearing output has the node's rank, even where inference left it unknown
            o = n.outputs[k]
            if o.type.kind == "tensor" and o.type.shape is None:
                o.type = TensorType(o.type.dtype, (None,) * b.rank)
        if pred(n) and (n.op in cls.spatial or n.op in cls.per_channel):
            var[id(n)] = SINK
        elif n.op in cls.spatial:  # a spatial op the backend does not run channels-last keeps the source layout
            var[id(n)] = SOURCE
        else:
            var[id(n)] = flow.node()
    io_label = SINK if io_cl else SOURCE

    def producer_var(v: Value) -> int:
        p = v.producer
        if p is None or p.graph is not graph:
            return io_label if v in graph.inputs and (_rank(v) or 0) >= 3 else SOURCE
        b = bearing.get(id(p))
        return var[id(p)] if b is not None and v.index in b.outs else SOURCE

    def use_var(node: Node, i: int) -> int:
        if node.graph is not graph:
            return SOURCE  # read by a subgraph: source layout
        b = bearing.get(id(node))
        return var[id(node)] if b is not None and i in b.ins else SOURCE

    def uses_of(v: Value) -> list[int]:
        labels = [use_var(node, i) for node, i in v.uses]
        if v in graph.outputs:
            labels.append(io_label if (_rank(v) or 0) >= 3 else SOURCE)
        return labels

    for v in list(graph.values()):
        if v.is_const or _rank(v) is None or (_rank(v) or 0) < 3:
            continue
        p = producer_var(v)
        cs = uses_of(v)
        if all(c == p for c in cs):
            continue
        if p != SINK and any(c != SOURCE for c in cs):  # producer 0 and some use 1
            a = flow.node()
            flow.edge(p, a, 1)
            for c in cs:
                if c != SOURCE:
                    flow.edge(a, c, flow.INF)
        if p != SOURCE and any(c != SINK for c in cs):  # producer 1 and some use 0
            b_ = flow.node()
            flow.edge(b_, p, 1)
            for c in cs:
                if c != SINK:
                    flow.edge(c, b_, flow.INF)
    report.cut += flow.maxflow()
    side = flow.source_side()

    def label(x: int) -> int:
        return 0 if x == SOURCE else 1 if x == SINK else (0 if x in side else 1)

    labels = {nid: label(x) for nid, x in var.items()}
    _rewrite(graph, bearing, labels, io_cl, cls)
    for n in list(graph.nodes):
        for sub in n.subgraphs():
            _run_graph(sub, pred, False, report, cls)


def _rewrite(graph: Graph, bearing: dict[int, Bearing], labels: dict[int, int], io_cl: bool, cls: Classes) -> None:
    rw = _Rewriter(graph)
    holds: dict[int, int] = {}  # id(value) → label it is held in

    for v in graph.inputs:
        r = _rank(v)
        if io_cl and r is not None and r >= 3:
            holds[id(v)] = 1
            v.type = _permuted(v.type, to_last(r))
    for n in list(graph.nodes):
        if n.meta.get("layout_inserted"):
            continue
        b = bearing.get(id(n))
        lab = labels.get(id(n), 0) if b is not None else 0
        for i, v in enumerate(list(n.inputs)):
            if v is None:
                continue
            want = lab if b is not None and i in b.ins else 0
            if v.is_const:
                if want == 1:
                    n.replace_input(i, rw.channels_last_const(v, b.rank))  # type: ignore[union-attr]
                continue
            have = holds.get(id(v), 0)
            if have != want:
                n.replace_input(i, rw.copy(v, want))
        if b is not None and lab == 1:
            remap = cls.remaps.get(n.op)
            if remap is not None:
                remap(n, rw, b.rank)
            n.meta["layout"] = CHANNELS_LAST
            for k in b.outs:
                o = n.outputs[k]
                holds[id(o)] = 1
                if o.type.rank is not None:
                    o.type = _permuted(o.type, to_last(o.type.rank))
    # values read by subgraphs (captured) are read in the source layout
    for n in list(graph.nodes):
        for sub in n.subgraphs():
            for inner in sub.walk():
                for i, v in enumerate(inner.inputs):
                    if v is not None and holds.get(id(v), 0) == 1 and v.graph is graph:
                        inner.replace_input(i, rw.copy(v, 0))
    outs = []
    for v in graph.outputs:
        r = _rank(v)
        want = 1 if io_cl and r is not None and r >= 3 else 0
        if not v.is_const and holds.get(id(v), 0) != want:
            new = rw.copy(v, want)
            old = v.name
            v.name, new.name = f"{old}__layout", old  # the model's output keeps its name
            outs.append(new)
        else:
            outs.append(v)
    graph.outputs = outs
    graph.toposort()
    _peephole(graph)
    for name in [k for k, c in graph.constants.items() if not c.uses and c not in graph.outputs]:
        del graph.constants[name]


def _permuted(t: TensorType, perm: list[int]) -> TensorType:
    if t.shape is None:
        return t
    return TensorType(t.dtype, tuple(t.shape[p] for p in perm), t.kind, t.elem)


def _only_moves_unit_dims(x: Value, perm: list[int]) -> bool:
    shp = x.type.shape
    if shp is None or not x.type.is_static:
        return False
    kept = [p for p in perm if shp[p] != 1]
    return kept == sorted(kept)


def _peephole(graph: Graph) -> None:
    """Compose consecutive transposes, fold transposes of constants, drop identity transposes."""
    changed = True
    while changed:
        changed = False
        for t in list(graph.nodes):
            if t.op != "transpose" or t.graph is not graph:
                continue
            x = t.inputs[0]
            assert x is not None
            perm = t.attrs.get("perm")
            if perm is None:
                continue
            perm = [int(p) for p in perm]
            src = x.producer
            if src is not None and src.op == "transpose" and src.graph is graph and src.attrs.get("perm") is not None:
                inner = [int(p) for p in src.attrs["perm"]]
                composed = [inner[p] for p in perm]
                inserted = bool(t.meta.get("layout_inserted") and src.meta.get("layout_inserted"))
                t.replace_input(0, src.inputs[0])
                t.attrs["perm"] = composed
                if not inserted:
                    t.meta.pop("layout_inserted", None)
                if not src.outputs[0].uses and src.outputs[0] not in graph.outputs:
                    graph.remove_node(src)
                changed = True
                continue
            out = t.outputs[0]
            identity = perm == list(range(len(perm)))
            if identity and out in graph.outputs and x.producer is not None and x.producer.graph is graph \
                    and x not in graph.outputs:
                x.name, out.name = out.name, f"{out.name}__identity"  # the model's output keeps its name
                graph.replace_all_uses_with(out, x)
                graph.remove_node(t)
                changed = True
            elif identity and out not in graph.outputs:
                graph.replace_all_uses_with(out, x)
                graph.remove_node(t)
                changed = True
            elif _only_moves_unit_dims(x, perm) and out.type.is_static:
                # e.g. (N, 1, 1, C) -> (N, C, 1, 1): the data order is unchanged, a reshape does it
                shape = graph.add_constant(f"{out.name}_shape", np.asarray(out.type.shape, np.int64), "int64")
                t.op, t.attrs = "reshape", {}
                t.meta.pop("layout_inserted", None)
                t.meta["layout_reshape"] = True
                t._set_inputs([x, shape])
                changed = True
            elif x.is_const and out not in graph.outputs:
                c = graph.add_constant(f"{out.name}_folded", np.ascontiguousarray(np.asarray(x.const).transpose(perm)),
                                       out.type.dtype or x.type.dtype or "float32")
                graph.replace_all_uses_with(out, c)
                graph.remove_node(t)
                changed = True
