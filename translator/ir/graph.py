"""The backend-neutral IR: a typed graph of table ops.

* ``TensorType``: a dtype id from ``dtypes.yaml`` and a shape whose dims are ints
  (static), strings (symbolic) or ``None`` (unknown); ``shape=None`` = unknown rank.
  Non-tensor values use ``kind`` ``sequence`` / ``optional`` with ``elem`` the element type.
* ``Value``: produced by at most one node (or a graph input / constant), knows its
  consumers; a constant holds a NumPy array (never copied: memory-mapped external data
  stays mapped).
* ``Node``: an op id from ``optable.yaml``, inputs (``None`` = omitted optional input),
  outputs, attributes (Python values; subgraphs are ``Graph`` objects).
* ``Graph``: inputs, outputs, nodes in a deterministic order; edits go through
  ``add_node`` / ``remove_node`` / ``replace_all_uses_with`` so use lists stay exact.
  Each edit is O(1) (amortized): removals and insertions before a node are recorded and
  applied in one linear pass the next time ``nodes`` is read, so a pass that decomposes or
  folds k nodes of an n-node graph costs O(n + k), not O(n·k).

Iteration order is insertion order everywhere, so the same input builds the same graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from .names import NameSet

if TYPE_CHECKING:  # numpy is imported only by code that touches constants
    import numpy as np

Dim = "int | str | None"

#: A node a frontend could not read into table ops (an op of an unknown domain, a custom op),
#: kept only when asked (``frontends.load(..., keep_unread=True)``: ``report`` judges the rest of
#: the model around it). Not a table op: the verifier lets it through and every target refuses
#: it with the frontend's reason (``attrs``: ``source_op``, ``reason``, ``detail``).
OPAQUE = "opaque"
#: node meta: the node spells out the run-time quantization of a hybrid (dynamic-range) kernel's
#: input (the TFLite frontend's, ``tflite_hybrid``); ``compile.quantized.hybrid_as_weight_only``
#: takes such nodes out for targets with kernels of their own
HYBRID_ROUNDING = "hybrid_rounding"


@dataclass(frozen=True)
class TensorType:
    dtype: str | None
    shape: tuple[int | str | None, ...] | None = None
    kind: str = "tensor"  # tensor | sequence | optional
    elem: "TensorType | None" = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def __str__(self) -> str:
        if self.kind != "tensor":
            return f"{self.kind}<{self.elem}>"
        dims = "?" if self.shape is None else "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"


UNKNOWN = TensorType(None, None)


class Value:
    """An SSA value. ``producer`` is None for graph inputs and constants."""

    __slots__ = ("name", "type", "producer", "index", "uses", "const", "graph")

    def __init__(self, name: str, type: TensorType = UNKNOWN, const: "np.ndarray | None" = None) -> None:
        self.name = name
        self.type = type
        self.producer: Node | None = None
        self.index = 0
        self.uses: list[tuple[Node, int]] = []
        self.const = const
        self.graph: Graph | None = None

    @property
    def is_const(self) -> bool:
        return self.const is not None

    def consumers(self) -> list["Node"]:
        seen: list[Node] = []
        for n, _ in self.uses:
            if n not in seen:
                seen.append(n)
        return seen

    def __repr__(self) -> str:
        return f"Value({self.name!r}, {self.type})"


class Node:
    __slots__ = ("op", "name", "_inputs", "outputs", "attrs", "graph", "meta")

    def __init__(self, op: str, inputs: Sequence[Value | None], outputs: Sequence[Value],
                 attrs: dict[str, Any] | None = None, name: str = "") -> None:
        self.op = op
        self.name = name
        self._inputs: tuple[Value | None, ...] = ()
        self.outputs: tuple[Value, ...] = tuple(outputs)
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.graph: Graph | None = None
        self.meta: dict[str, Any] = {}
        self._set_inputs(inputs)
        for i, v in enumerate(self.outputs):
            v.producer, v.index = self, i

    @property
    def inputs(self) -> tuple[Value | None, ...]:
        return self._inputs

    def _set_inputs(self, inputs: Sequence[Value | None]) -> None:
        for i, v in enumerate(self._inputs):
            if v is not None:
                v.uses.remove((self, i))
        self._inputs = tuple(inputs)
        for i, v in enumerate(self._inputs):
            if v is not None:
                v.uses.append((self, i))

    def model_dtype(self, i: int = 0) -> str | None:
        """The dtype output ``i`` has in the model: as the pipeline noted it before a target's
        legalization (``meta["source_dtypes"]``; an int8 tensor a target computes in int32),
        else the value's own."""
        noted = self.meta.get("source_dtypes")
        return noted[i] if noted and i < len(noted) and noted[i] is not None else self.outputs[i].type.dtype

    def replace_input(self, index: int, value: Value | None) -> None:
        ins = list(self._inputs)
        ins[index] = value
        self._set_inputs(ins)

    def subgraphs(self) -> Iterator["Graph"]:
        for v in self.attrs.values():
            if isinstance(v, Graph):
                yield v
            elif isinstance(v, list):
                yield from (g for g in v if isinstance(g, Graph))

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.name!r})"


class Graph:
    """A graph; subgraphs (If/Loop/Scan bodies) may use values of enclosing graphs."""

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self._nodes: list[Node] = []
        self._before: dict[int, list[Node]] = {}  # id(node) → nodes inserted before it, in order
        self._removed = 0  # nodes in _nodes whose graph is no longer this one
        self.constants: dict[str, Value] = {}
        self._names = NameSet()
        self.parent: Graph | None = None

    # ------------------------------------------------------------------ node order
    @property
    def nodes(self) -> list[Node]:
        """The nodes in order (edits since the last read are applied here, in one pass)."""
        if self._before or self._removed:
            self._materialize()
        return self._nodes

    @nodes.setter
    def nodes(self, nodes: list[Node]) -> None:
        self._nodes, self._before, self._removed = list(nodes), {}, 0

    def _materialize(self) -> None:
        out: list[Node] = []
        before = self._before

        def place(n: Node) -> None:
            for m in before.pop(id(n), ()):
                place(m)
            if n.graph is self:
                out.append(n)

        for n in self._nodes:
            place(n)
        self._nodes, self._before, self._removed = out, {}, 0

    # ------------------------------------------------------------------ construction
    def unique_name(self, base: str) -> str:
        return self._names.take(base or "v")

    def add_input(self, name: str, type: TensorType) -> Value:
        v = Value(self.unique_name(name), type)
        v.graph = self
        self.inputs.append(v)
        return v

    def add_constant(self, name: str, array: "np.ndarray", dtype: str) -> Value:
        v = Value(self.unique_name(name), TensorType(dtype, tuple(int(d) for d in array.shape)), const=array)
        v.graph = self
        self.constants[v.name] = v
        return v

    def add_node(self, op: str, inputs: Sequence[Value | None], attrs: dict[str, Any] | None = None,
                 outputs: int | Sequence[str] = 1, name: str = "", types: Sequence[TensorType] | None = None,
                 before: Node | None = None) -> Node:
        names = [f"{name or op}_out{i}" for i in range(outputs)] if isinstance(outputs, int) else list(outputs)
        outs = []
        for i, n in enumerate(names):
            v = Value(self.unique_name(n), types[i] if types else UNKNOWN)
            v.graph = self
            outs.append(v)
        node = Node(op, inputs, outs, attrs, name or op)
        node.graph = self
        if before is not None:
            if before.graph is not self:
                raise ValueError(f"node {before.name!r} is not in graph {self.name!r}")
            self._before.setdefault(id(before), []).append(node)
        else:
            self._nodes.append(node)
        return node

    def remove_node(self, node: Node) -> None:
        for v in node.outputs:
            if v.uses or v in self.outputs:
                raise ValueError(f"cannot remove node {node.name!r}: output {v.name!r} still used")
        if node.graph is not self:
            raise ValueError(f"node {node.name!r} is not in graph {self.name!r}")
        node._set_inputs(())
        node.graph = None
        self._removed += 1

    def replace_all_uses_with(self, old: Value, new: Value) -> None:
        for node, i in list(old.uses):
            node.replace_input(i, new)
        self.outputs = [new if v is old else v for v in self.outputs]

    def replace_node(self, node: Node, results: Sequence[Value | None], keep_types: bool = True) -> None:
        """``node`` replaced by the values ``results`` (one per output; None: output unused) that
        nodes inserted before it compute: every use moves over, a graph output keeps its name
        (the model's interface), ``keep_types`` carries the old output's type over, and the node
        is removed."""
        for old, new in zip(node.outputs, results):
            if new is None:
                continue
            if keep_types and old.type.dtype is not None:
                new.type = old.type
            if any(o is old for o in self.outputs):
                name = old.name
                old.name, new.name = f"{name}__replaced", name
            self.replace_all_uses_with(old, new)
        self.remove_node(node)

    # ------------------------------------------------------------------ queries
    def values(self) -> Iterator[Value]:
        yield from self.inputs
        yield from self.constants.values()
        for n in self.nodes:
            yield from n.outputs

    def toposort(self) -> None:
        """Order nodes so producers come first; stable for already-sorted graphs."""
        known = {id(v) for v in self.inputs} | {id(v) for v in self.constants.values()}
        remaining, ordered = list(self.nodes), []
        local = {id(v) for n in self.nodes for v in n.outputs}
        while remaining:
            progressed = False
            rest = []
            for n in remaining:
                deps = [v for v in n.inputs if v is not None and id(v) in local] + _captured(n, local)
                if all(id(v) in known for v in deps):
                    ordered.append(n)
                    known.update(id(v) for v in n.outputs)
                    progressed = True
                else:
                    rest.append(n)
            if not progressed:
                raise ValueError(f"graph {self.name!r} has a cycle through node {rest[0].name!r}")
            remaining = rest
        self.nodes = ordered

    def walk(self) -> Iterator[Node]:
        """Every node of this graph and of its subgraphs, depth-first."""
        for n in self.nodes:
            yield n
            for g in n.subgraphs():
                yield from g.walk()

    def __len__(self) -> int:
        return len(self.nodes)


def _captured(node: Node, local: set[int]) -> list[Value]:
    """Values of the enclosing graph that a node's subgraphs read."""
    out: list[Value] = []
    for g in node.subgraphs():
        for inner in g.walk():
            out.extend(v for v in inner.inputs if v is not None and id(v) in local)
    return out


@dataclass
class Model:
    graph: Graph
    source: str = ""
    source_format: str = "onnx"
    opset: int | None = None
    metadata: dict[str, str] | None = None
    #: what the frontend repaired or dropped while reading (every target's conversion says it)
    warnings: tuple[str, ...] = ()
    #: ONNX model-local functions are inlined by the frontend; nothing else is kept here.

    def clone(self) -> "Model":
        """A copy of the IR to rewrite (constant arrays are shared: passes replace a
        constant's array, they never write into it)."""
        return Model(clone_graph(self.graph, {}), self.source, self.source_format, self.opset,
                     dict(self.metadata) if self.metadata else self.metadata, self.warnings)

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for n in self.graph.walk():
            hist[n.op] = hist.get(n.op, 0) + 1
        return dict(sorted(hist.items()))


def clone_graph(g: Graph, outer: dict[int, Value]) -> Graph:
    """A copy of ``g``; ``outer`` maps values of enclosing graphs (by id) to their copies."""
    ng = Graph(g.name)
    vmap = dict(outer)
    for v in g.inputs:
        vmap[id(v)] = ng.add_input(v.name, v.type)
    for v in g.constants.values():
        vmap[id(v)] = copy_constant(ng, v)
    for n in g.nodes:
        attrs = {}
        for k, a in n.attrs.items():
            if isinstance(a, Graph):
                a = clone_graph(a, vmap)
            elif isinstance(a, list) and a and all(isinstance(x, Graph) for x in a):
                a = [clone_graph(x, vmap) for x in a]
            attrs[k] = a
        copy_node(ng, n, [None if v is None else vmap[id(v)] for v in n.inputs], attrs, vmap)
    ng.outputs = [vmap[id(v)] for v in g.outputs]
    return ng


def copy_constant(g: Graph, v: Value) -> Value:
    """``v`` (a constant of another graph) as a constant of ``g``: same name, type and array."""
    c = g.add_constant(v.name, v.const, v.type.dtype or "float32")
    c.type = v.type
    return c


def copy_node(g: Graph, n: Node, inputs: list[Value | None], attrs: dict[str, Any], vmap: dict[int, Value]) -> Node:
    """``n`` (a node of another graph) appended to ``g`` on ``inputs``: same op, name, output
    names and types, meta; ``vmap`` then maps each of its outputs to the copy's."""
    new = g.add_node(n.op, inputs, attrs, outputs=[o.name for o in n.outputs], name=n.name,
                     types=[o.type for o in n.outputs])
    new.meta = dict(n.meta)
    for o, no in zip(n.outputs, new.outputs):
        vmap[id(o)] = no
    return new


def iter_values(values: Iterable[Value | None]) -> Iterator[Value]:
    return (v for v in values if v is not None)
