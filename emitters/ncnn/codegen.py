"""Lowered IR → an ncnn network: ``model.param`` (one line per layer) and ``model.bin``.

Layout. An ncnn blob has at most four dims (c, d, h, w) and no batch. Each IR value lives in
the network in one of two forms:

* ``F`` (full): every dim kept, outermost first: (2, 3, 4) is c=2, h=3, w=4 (rank <= 4);
* ``B`` (batch dropped): a value whose first dim is 1, without it: (1, C, H, W) is c=C, h=H,
  w=W (rank 2 to 5);
* ``S`` (squeezed): every dim of size 1 dropped: (3, 16, 1, 1, 64) is c=3, h=16, w=64. A
  value of five or more dims (PyTorch's attention splits q, k, v through one) is held so by
  the layers that move data (reshapes, transposes): dropping unit dims keeps row-major order.

Layers that work on one batch item (convolutions, pooling, norms over channels: a snippet's
``batch`` directive, the rules of ``nn.py``) read and write ``B``; layers whose parameters
count axes or read shapes read and write ``F`` (their parameters count axes as the IR does);
elementwise layers take the form their inputs already have, operands aligned to the output's
rank with leading 1s (ncnn broadcasts size-1 dims between blobs of one rank, not between
ranks). A value needed in the other form is reshaped once (a ``Reshape`` layer, counted in
``NcnnArtifact.reshapes``); a constant is a ``MemoryData`` in whatever form it is read.

Every blob is float32 (ncnn's blob interface); a bool value is a 0/1 float mask. Other
integer values exist only as constants read into layer parameters (shapes, axes, pads).

The trial: each node's layers are loaded and run in ncnn alone, before anything is written,
on the node's constants and random inputs; where the inputs are small
(``NUMERIC_MAX``) the outputs are compared with the NumPy reference of the op. A node that
ncnn rejects, or computes differently, is refused with the reason (the pipeline decomposes
it where the table can). The trial also reads the shape ncnn gives each output (a global
pooling's 1-D blob of channels): where it is not the form's shape, a ``Reshape`` follows.

Blob and layer names are the writer's own (``in0``, ``out0``, ``b12``, ``conv_3``): no name
from the model reaches the ``.param`` text; ``model.io.json`` maps them to the model's names.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from translator.compile.registry import Refusal, rules, snippet_of
from translator.ir.graph import Model, Node, Value
from translator.table.errors import Unsupported

from .registry import NAME
from .runtime import NcnnArtifact, Port

if TYPE_CHECKING:
    from translator.compile.pipeline import Compilation
    from translator.table.loader import Op, Tables

#: dtypes a blob holds: float32; bool as a 0/1 float mask; integers as float32 values (exact up
#: to 2**24; the trial holds each node to the reference's integer results, the runner gives
#: integer outputs back in their dtype when every value is integral and in range)
BLOB_DTYPES = ("float32", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
INTEGERS = BLOB_DTYPES[2:]
#: the trial compares with the reference when the node's inputs hold at most this many elements
NUMERIC_MAX = 1 << 16
#: ... and runs ncnn at all up to this many (a bigger node is written unchecked: the model's check sees it)
TRIAL_MAX = 1 << 24
#: ops that only move elements (by constant positions): written again on int32 words
WORD_MOVES = frozenset({"gather", "slice", "reshape", "squeeze", "unsqueeze", "flatten", "transpose", "identity"})
#: ``node.meta`` key: ``accepts`` held the node's layers to the reference already
CHECKED = "ncnn_checked"
#: the most batch items a per-item layer is written for (``per_item``)
PER_ITEM_MAX = 32
#: ncnn's parameter keys of a shape (Reshape, MemoryData, Input), by rank: c, d, h, w
_SHAPE_KEYS = {1: (0,), 2: (1, 0), 3: (2, 1, 0), 4: (2, 11, 1, 0)}


class NodeRefused(Exception):
    """A node this writer cannot write: its reason (the pipeline decomposes or reports it)."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(str(refusal))
        self.refusal = refusal


class Batched(NodeRefused):
    """A per-item layer asked for a value whose batch is not 1 (``write_node`` then writes the
    node once per batch item, that value sliced)."""

    def __init__(self, refusal: Refusal, value: Value) -> None:
        super().__init__(refusal)
        self.value = value


def refuse(code: str, detail: str) -> NodeRefused:
    return NodeRefused(Refusal(code, detail))


def shape_params(shape: tuple[int, ...]) -> list[str]:
    """``shape`` (outermost first, rank 1 to 4) as ncnn's w/h/d/c parameters."""
    if len(shape) not in _SHAPE_KEYS:
        raise refuse("rank_limit", f"a blob of shape {list(shape)}: an ncnn blob has 1 to 4 dims")
    return [f"{k}={int(d)}" for k, d in zip(_SHAPE_KEYS[len(shape)], shape)]


def static_shape(v: Value) -> tuple[int, ...]:
    shape = v.type.shape
    if shape is None or any(not isinstance(d, (int, np.integer)) for d in shape):
        raise refuse("dynamic_shape", f"value {v.name!r} has no static shape (ncnn's layers here are written for one)")
    return tuple(int(d) for d in shape)


def form_shape(v: Value, form: str, rank: int | None = None) -> tuple[int, ...]:
    """The blob shape of ``v`` in ``form`` (``F``/``B``), aligned to ``rank`` with leading 1s."""
    s = static_shape(v)
    if rank is not None and rank > len(s):
        s = (1,) * (rank - len(s)) + s
    if form == "S":
        s = tuple(d for d in s if d != 1)
    elif form == "B":
        if len(s) < 2 or s[0] != 1:
            why = Refusal("rank_limit", f"value {v.name!r} of shape {list(s)}: an ncnn blob has at most 4 dims "
                                        "and no batch (a 5-D value needs a batch of 1)" if len(s) > 4 else
                          f"value {v.name!r} of shape {list(s)}: an ncnn blob has no batch dimension (this "
                          "layer needs a batch of 1)")
            raise Batched(why, v) if len(s) >= 2 and not v.is_const else NodeRefused(why)
        s = s[1:]
    if not s:
        s = (1,)
    if len(s) > 4:
        raise refuse("rank_limit", f"value {v.name!r} of shape {list(s)}: an ncnn blob has at most 4 dims"
                                   + (" (its dims other than 1)" if form == "S" else ""))
    if 0 in s:
        raise refuse("rank_limit", f"value {v.name!r} is empty (shape {list(s)}): ncnn has no empty blobs")
    return s


def blob_dtype(v: Value) -> None:
    if v.type.kind != "tensor":
        raise refuse("unsupported_dtype", f"value {v.name!r} is a {v.type.kind}: ncnn blobs are tensors")
    if v.type.dtype is not None and v.type.dtype not in BLOB_DTYPES:
        raise refuse("unsupported_dtype", f"value {v.name!r} is {v.type.dtype}: an ncnn blob holds float32 "
                                          "(bool and integers as float32 values)")


#: the 4-byte tag of a float16 weight in ``model.bin`` (ncnn's ModelBin reads it, then halves)
FP16_TAG = 0x01306B47


@dataclass(frozen=True, eq=False)
class Tagged:
    """A weight ncnn reads with a 4-byte storage tag (convolution and inner-product kernels,
    recurrent weights): float32 (tag 0) as tried, or float16 (``FP16_TAG``, padded to 4 bytes)
    when the network is written with fp16 storage."""

    data: np.ndarray

    def encode(self, fp16: bool = False) -> bytes:
        if not fp16:
            return b"\0\0\0\0" + np.ascontiguousarray(self.data, dtype="<f4").tobytes()
        half = np.ascontiguousarray(self.data, dtype="<f2").tobytes()
        return FP16_TAG.to_bytes(4, "little") + half + b"\0" * (-len(half) % 4)


def tagged(a: np.ndarray) -> Tagged:
    return Tagged(np.asarray(a, np.float32))


def raw(a: np.ndarray) -> bytes:
    """A weight ncnn reads untagged, always float32 (biases, norms' scales, ``MemoryData``)."""
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


@dataclass
class Layer:
    type: str
    name: str
    bottoms: list[str]
    tops: list[str]
    params: list[str] = field(default_factory=list)
    #: ``model.bin``'s bytes of the layer, in order: untagged bytes and ``Tagged`` weights
    weights: tuple[bytes | Tagged, ...] = ()

    def weight_bytes(self, fp16: bool = False) -> bytes:
        return b"".join(w if isinstance(w, bytes) else w.encode(fp16) for w in self.weights)


@dataclass
class Net:
    """The network being written: layers in order, and where each IR value is held."""

    layers: list[Layer] = field(default_factory=list)
    #: id(value) → {(form, rank): blob}
    held: dict[int, dict[tuple[str, int | None], str]] = field(default_factory=dict)
    #: blob → its shape (outermost first)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    #: blob → (value, form, rank) it holds
    origin: dict[str, tuple[Value, str, int | None]] = field(default_factory=dict)
    #: the tops of the reshapes between forms (not the model's own reshapes)
    layout: set[str] = field(default_factory=set)
    count: int = 0
    #: id(value) → every blob holding its data, in any shape (a layer's own output before the
    #: reshape to its form: a reader that wants that shape takes it as it is)
    views: dict[int, list[str]] = field(default_factory=dict)
    #: every value held (``held`` is keyed by id: a value must outlive its entry)
    alive: list[Value] = field(default_factory=list)
    #: (id(input), rows) → (the integer graph input, its int32-word blob, rows): fed by the runner
    words: dict[tuple[int, int], tuple[Value, str, int]] = field(default_factory=dict)
    #: (id(value), rows) → the int32-word blob of a value moved out of such an input
    moved: dict[tuple[int, int], str] = field(default_factory=dict)

    def fresh(self, stem: str = "b") -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def add(self, ltype: str, bottoms: list[str], tops: list[str], params: list[str] | None = None,
            weights: bytes | Tagged | tuple[bytes | Tagged, ...] = ()) -> Layer:
        parts = (weights,) if isinstance(weights, (bytes, Tagged)) else tuple(weights)
        layer = Layer(ltype, f"{ltype.lower()}_{len(self.layers)}", list(bottoms), list(tops), list(params or ()),
                      tuple(w for w in parts if not isinstance(w, bytes) or w))
        self.layers.append(layer)
        return layer

    def snapshot(self) -> tuple:
        return (len(self.layers), {k: dict(v) for k, v in self.held.items()}, dict(self.shapes), dict(self.origin),
                {k: list(v) for k, v in self.views.items()}, set(self.layout), self.count, dict(self.words),
                dict(self.moved))

    def restore(self, saved: tuple) -> None:
        n, held, shapes, origin, views, self.layout, self.count, self.words, self.moved = saved
        del self.layers[n:]
        self.held, self.shapes, self.origin, self.views = held, shapes, origin, views

    def word_blob(self, v: Value, rows: int) -> str | None:
        """A blob of the integer graph input ``v`` as int32 words (the runner feeds it: ncnn has no
        layer that makes int32 words from float32 values), negative values counting from the end
        of ``rows``; or of a value moved out of one (``x[:, 1]``: a gather or slice by constant
        positions, a reshape, a transpose), its layers written again on the words (they move
        four-byte words without reading them). None when ``v`` is computed otherwise."""
        if v.is_const or v.type.dtype not in INTEGERS:
            return None
        if v.producer is not None:
            return self.words_moved(v, int(rows))
        if not v.graph or v not in v.graph.inputs:
            return None
        key = (id(v), int(rows))
        if key not in self.words:
            b = self.fresh("w")
            self.words[key] = (v, b, int(rows))
            self.shapes[b] = form_shape(v, "F")
            self.origin[b] = (v, "I", None)
            if id(v) not in self.held:
                self.alive.append(v)
        return self.words[key][1]

    def words_moved(self, v: Value, rows: int) -> str | None:
        from translator.ir.graph import TensorType
        from translator.table.loader import load_tables

        key = (id(v), rows)
        if key in self.moved:
            return self.moved[key]
        n = v.producer
        if n.op not in WORD_MOVES or n.outputs[0] is not v or not n.inputs or \
                any(x is not None and not x.is_const for x in n.inputs[1:]):
            return None
        src = self.word_blob(n.inputs[0], rows)
        if src is None:
            return None
        proxy_in = Value(f"{n.inputs[0].name}.words", n.inputs[0].type)
        self.hold(proxy_in, src, "F")
        proxy_out = Value(f"{v.name}.words", TensorType(v.type.dtype, v.type.shape))
        clone = Node(n.op, [proxy_in, *n.inputs[1:]], [proxy_out], dict(n.attrs), f"{n.name}.words")
        try:
            e = _write(self, clone, load_tables().ops[n.op])
        finally:
            clone._set_inputs([])
        blob, form = e.outs[0]
        if form != "F":
            return None
        self.hold(proxy_out, blob, form)
        self.origin[blob] = (v, "I", None)  # the trial feeds the words of v's sample
        self.moved[key] = blob
        return blob

    def hold(self, v: Value, blob: str, form: str, rank: int | None = None) -> None:
        if id(v) not in self.held:
            self.alive.append(v)
        self.held.setdefault(id(v), {})[(form, rank)] = blob
        self.views.setdefault(id(v), []).append(blob)
        self.shapes[blob] = form_shape(v, form, rank)
        self.origin[blob] = (v, form, rank)

    def forms(self, v: Value) -> set[str]:
        return {f for f, r in self.held.get(id(v), {}) if r is None}

    def blob(self, v: Value, form: str, rank: int | None = None) -> str:
        """The blob holding ``v`` in ``form`` (aligned to ``rank``): made once, as a
        ``MemoryData`` for a constant, else a ``Reshape`` of a form it is held in."""
        blob_dtype(v)
        if id(v) not in self.held:
            self.alive.append(v)
        have = self.held.setdefault(id(v), {})
        key = (form, rank if rank is not None and rank > len(static_shape(v)) else None)
        if key in have:
            return have[key]
        want = form_shape(v, *key)
        if v.is_const:
            b = self.fresh()
            self.add("MemoryData", [], [b], shape_params(want), raw(v.const))
        else:
            if not have:
                raise refuse("internal_error", f"value {v.name!r} is read before it is computed")
            same = [b for b in self.views.get(id(v), []) if self.shapes.get(b) == want]
            src = next(iter(have.values()))
            if same:
                b = same[0]
            elif self.shapes[src] == want:
                b = src
            else:
                b = self.fresh()
                self.add("Reshape", [src], [b], shape_params(want))
                self.layout.add(b)
        self.hold(v, b, *key)
        return b


# ----------------------------------------------------------------------------- one node
class NodeEmit:
    """What a rule or a snippet needs while writing one node."""

    def __init__(self, net: Net, node: Node, op: "Op") -> None:
        self.net = net
        self.node = node
        self.op = op
        self.start = len(net.layers)
        self.outs: dict[int, tuple[str, str]] = {}

    # inputs
    def value(self, i: int) -> Value | None:
        return self.node.inputs[i] if i < len(self.node.inputs) else None

    def const(self, i: int) -> np.ndarray | None:
        v = self.value(i)
        return None if v is None or not v.is_const else np.asarray(v.const)

    def need_const(self, i: int, what: str) -> np.ndarray:
        a = self.const(i)
        if a is None and self.value(i) is not None:
            raise refuse("requires_constant_input", f"{self.op.id}'s {what} is computed at run time: ncnn's layer "
                                           "stores it as a weight")
        return a

    def shape(self, i: int) -> tuple[int, ...]:
        return static_shape(self.node.inputs[i])

    def out_shape(self, k: int = 0) -> tuple[int, ...]:
        return static_shape(self.node.outputs[k])

    def attr(self, name: str) -> Any:
        from translator.table.snippets import attr_value

        return attr_value(self.node, self.op, name)

    def input(self, i: int, form: str, rank: int | None = None) -> str:
        return self.net.blob(self.node.inputs[i], form, rank)

    # outputs
    def top(self, k: int = 0) -> str:
        return self.net.fresh()

    def output(self, k: int, blob: str, form: str) -> None:
        blob_dtype(self.node.outputs[k])
        self.outs[k] = (blob, form)

    def add(self, ltype: str, bottoms: list[str], tops: list[str], params: list[str] | None = None,
            weights: bytes | Tagged | tuple[bytes | Tagged, ...] = ()) -> Layer:
        return self.net.add(ltype, bottoms, tops, params, weights)

    # the table's snippet
    def cell_snippet(self) -> str:
        """This op's ncnn cell snippet (a refusal when the cell has none)."""
        text = snippet_of(self.op, (NAME,))
        if text is None:
            raise refuse("unsupported_op", f"{self.node.op} has no ncnn layers")
        return text

    def snippet(self, text: str | None = None) -> None:
        """``text`` (default: the op's own cell snippet) written through the snippet grammar."""
        from translator.proofs import ncnn as grammar
        from translator.table.snippets import SnippetError, expand, ports

        text = self.cell_snippet() if text is None else text
        node, op = self.node, self.op
        tokens: dict[int, str] = {}
        for i, v in enumerate(node.inputs):
            if v is not None:
                tokens.setdefault(id(v), f"i{i}")
        binder = _Binder(tokens)
        try:
            text = expand(text, node, op, binder).replace(", ", ",")
        except SnippetError as e:
            raise refuse("unsupported_attribute_value", str(e)) from e
        segs = grammar.segments(text)
        batched = {b for seg in segs if seg.split()[0] == "batch" for t in seg.split()[1:] for b in t.split(",") if b}
        layers = [seg for seg in segs if seg.split()[0] != "batch"]
        by_token = {tok: v for vid, tok in tokens.items() for v in node.inputs if v is not None and id(v) == vid}
        elementwise = "elementwise" in op.traits
        out_rank = len(self.out_shape(0)) if elementwise else None
        form = "B" if batched else "F"
        if elementwise and not batched:
            running = [v for v in by_token.values() if not v.is_const]
            if running and all("B" in self.net.forms(v) for v in running) and out_rank >= 2 and self.out_shape(0)[0] == 1:
                form = "B"
        env: dict[str, Any] = {}
        for tok, v in by_token.items():
            if v.is_const:
                env[tok] = np.asarray(v.const)
            else:
                shape = static_shape(v)
                env[tok] = np.zeros(shape[1:] if tok in batched else shape, dtype=np.float32)
        _, out_ports = ports(node, op)
        out_names: dict[str, int] = {}
        for k, p in enumerate(op.signature.outputs):
            if k < len(node.outputs) and p.variadic:
                for j in range(k, len(node.outputs)):
                    out_names[f"{p.name}_{j - k}"] = j
            elif k < len(node.outputs):
                out_names[p.name] = k
        local: dict[str, str] = {}
        made: dict[int, str] = {}
        for layer in layers:
            toks = layer.split()
            if "->" not in toks:
                raise refuse("internal_error", f"{op.id}'s ncnn snippet layer {layer!r} has no '->'")
            arrow = toks.index("->")
            bottoms = []
            for b in (b for t in toks[1:arrow] for b in t.split(",") if b):
                if b in by_token:
                    v = by_token[b]
                    f = "B" if b in batched else ("F" if batched else form)
                    bottoms.append(self.net.blob(v, f, out_rank if elementwise else None))
                elif b in local:
                    bottoms.append(local[b])
                elif b == "None":
                    raise refuse("unsupported_attribute_value", f"{op.id}: the layer reads an input the node omits")
                else:
                    raise refuse("internal_error", f"{op.id}'s ncnn snippet reads {b!r} before making it")
            tops = []
            params: list[str] = []
            weights: list[bytes | Tagged] = []
            for t in toks[arrow + 1:]:
                if t.startswith("+"):
                    tagged = t.startswith("+0:")
                    name = t[3:] if tagged else t[1:]
                    v = by_token.get(name)
                    if v is None:
                        raise refuse("unsupported_attribute_value", f"{op.id}: its ncnn layer needs the input {name!r}")
                    if not v.is_const:
                        raise refuse("requires_constant_input", f"{op.id}'s input {v.name!r} is computed at run time: "
                                                       f"ncnn's {toks[0]} stores it as a weight")
                    weights.append(Tagged(np.asarray(v.const, np.float32)) if tagged else raw(v.const))
                elif "=" in t:
                    key, expr = t.split("=", 1)
                    for tok in _values_read(expr, by_token):
                        raise refuse("requires_constant_input", f"{op.id}: ncnn's {toks[0]} takes input "
                                                                f"{by_token[tok].name!r} as a parameter: it must be "
                                                                "a constant")
                    try:
                        params.append(grammar.param_entry(int(key), grammar.evaluate(expr, env)))
                    except Exception as e:  # noqa: BLE001 - a parameter the sample's expression cannot give
                        raise refuse("unsupported_attribute_value", f"{op.id}: ncnn parameter {key} ({expr}): "
                                                         f"{type(e).__name__}: {e}") from e
                elif "*" in t:
                    stem, n = t.split("*", 1)
                    tops += [f"{stem}_{j}" for j in range(int(grammar.evaluate(n, env)))]
                else:
                    tops.append(t)
            blobs = []
            for t in tops:
                if t in out_names:
                    b = self.net.fresh()
                    made[out_names[t]] = b
                else:
                    b = local[t] = self.net.fresh()
                blobs.append(b)
            self.add(toks[0], bottoms, blobs, params, tuple(weights))
        for k, b in made.items():
            self.output(k, b, form)
        missing = [k for k in range(len(node.outputs)) if k not in made and live(node.outputs[k])]
        if missing:
            raise refuse("unsupported_attribute_value", f"{op.id}: the ncnn layers make no output {missing}")


def _values_read(expr: str, by_token: dict[str, Value]) -> list[str]:
    """The run-time inputs whose values (not only their shapes) a parameter expression reads."""
    import re

    out = []
    for tok, v in by_token.items():
        if v.is_const or not re.search(rf"\b{tok}\b", expr):
            continue
        rest = re.sub(rf"\b{tok}\.(shape|ndim|size)\b|\b[WHDC]\({tok}\)|\blen\({tok}\)", "", expr)
        if re.search(rf"\b{tok}\b", rest):
            out.append(tok)
    return out


def live(v: Value) -> bool:
    """Whether an output is read: by a node, or as a graph output."""
    g = v.graph if v.graph is not None else (v.producer.graph if v.producer is not None else None)
    return bool(v.uses) or (g is not None and any(o is v for o in g.outputs))


class _Binder:
    def __init__(self, tokens: dict[int, str]) -> None:
        self.tokens = tokens

    def value(self, v: Value | None) -> str:
        return "None" if v is None else self.tokens[id(v)]

    def attr(self, name: str, value: Any) -> str:
        return _lit(value)

    def dtype(self, dtype_id: str) -> str:
        raise refuse("unsupported_dtype", f"an ncnn layer has no dtype spelling ({dtype_id})")


def _lit(v: Any) -> str:
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_lit(x) for x in v) + "]"
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return repr(v)


def write_node(net: Net, node: Node, tables: "Tables") -> NodeEmit:
    """The node's layers appended to ``net``, tried in ncnn (``trial``); raises NodeRefused.
    A per-item layer over a batch of N > 1 is written N times (``per_item``)."""
    op = tables.ops.get(node.op)
    if op is None:
        raise refuse("unsupported_op", f"{node.op} is not in the table")
    if any(True for _ in node.subgraphs()):
        raise refuse("unsupported_op", f"{node.op}: ncnn's network has no subgraphs")
    if not all(v.type.is_static for v in node.outputs):
        _shapes_from_reference(node)
    saved = net.snapshot()
    sliced: set[int] = set()
    while True:
        try:
            return per_item(net, node, op, sliced) if sliced else _write(net, node, op)
        except Batched as exc:
            net.restore(saved)
            if id(exc.value) in sliced or not any(v is exc.value for v in node.inputs):
                raise NodeRefused(exc.refusal) from None
            sliced.add(id(exc.value))


def _write(net: Net, node: Node, op: "Op") -> NodeEmit:
    e = NodeEmit(net, node, op)
    fn = rules(NAME).get(node.op)
    if fn is not None:
        if fn.check is not None and (why := fn.check(node)) is not None:
            raise NodeRefused(why)
        fn.fn(e)
    else:
        e.snippet()
    trial(e)
    return e


def per_item(net: Net, node: Node, op: "Op", sliced: set[int]) -> NodeEmit:
    """The node over a batch of N written once per item: each batched input sliced along its
    first dim (one ``Slice``), the node's layers on each item, the items' outputs joined
    (``Concat`` along the first dim), as an ncnn program runs a batch."""
    from translator.ir.graph import TensorType

    outs = [static_shape(v) for v in node.outputs]
    n = outs[0][0] if outs and outs[0] else 0
    if n > PER_ITEM_MAX:
        raise refuse("rank_limit", f"{node.op}: ncnn's layer runs on one batch item, and writing it for each of "
                                   f"{n} items is past {PER_ITEM_MAX}")
    if n < 2 or any(len(s) < 1 or s[0] != n for s in outs):
        raise refuse("rank_limit", f"{node.op}: ncnn's layer runs on one batch item, and the batch of "
                                          f"this node's outputs is not one size ({[list(s) for s in outs]})")
    items: dict[int, list[Value]] = {}
    for v in node.inputs:
        if v is None or id(v) not in sliced or id(v) in items:
            continue
        s = static_shape(v)
        if s[0] != n:
            raise refuse("rank_limit", f"{node.op}: input {v.name!r} has a batch of {s[0]}, its output {n}")
        src = net.blob(v, "F")
        parts = [Value(f"{v.name}.{k}", TensorType(v.type.dtype, (1,) + s[1:])) for k in range(n)]
        tops = [net.fresh() for _ in parts]
        net.add("Slice", [src], tops, [f"-23300={n}," + ",".join(["1"] * n), "1=0"])
        for part, top in zip(parts, tops):
            net.hold(part, top, "F")
        items[id(v)] = parts
    if not items:
        raise refuse("rank_limit", f"{node.op}: no input carries the batch of {n}")
    e = NodeEmit(net, node, op)
    per: list[list[str]] = [[] for _ in node.outputs]
    for k in range(n):
        ins = [items[id(v)][k] if v is not None and id(v) in items else v for v in node.inputs]
        item_outs = [Value(f"{v.name}.{k}", TensorType(v.type.dtype, (1,) + s[1:]))
                     for v, s in zip(node.outputs, outs)]
        clone = Node(node.op, ins, item_outs, dict(node.attrs), f"{node.name}.{k}")
        try:
            sub = _write(net, clone, op)
        finally:
            clone._set_inputs([])
        for j, (b, form) in sub.outs.items():
            net.hold(item_outs[j], b, form)
            per[j].append(net.blob(item_outs[j], "F"))
    for j, blobs in enumerate(per):
        if not blobs and live(node.outputs[j]):
            raise refuse("unsupported_attribute_value", f"{node.op}: the ncnn layers make no output {j}")
        if blobs:
            y = net.fresh()
            net.add("Concat", blobs, [y], ["0=0"])
            e.outs[j] = (y, "F")
    return e


# ----------------------------------------------------------------------------- the trial
def trial(e: NodeEmit) -> None:
    """Load and run the node's new layers alone; check numbers against the reference when small;
    reshape an output whose ncnn shape is not its form's shape."""
    from translator import reference
    from translator.ir.evaluate import call_reference

    net, node = e.net, e.node
    layers = net.layers[e.start:]
    if not layers:  # the outputs are blobs the net holds already (a reshape to a shape it has)
        return
    made = {t for lay in layers for t in lay.tops}
    outer = []
    for lay in layers:
        for b in lay.bottoms:
            if b not in made and b not in outer:
                outer.append(b)
    size = sum(math.prod(net.shapes[b]) for b in outer)
    if size > TRIAL_MAX:
        for k in e.outs:
            form_shape(node.outputs[k], e.outs[k][1])  # a static shape, else refused
        return
    rng = np.random.default_rng(0)
    values: dict[int, np.ndarray] = {}
    for v in node.inputs:
        if v is not None and id(v) not in values:
            values[id(v)] = _sample(v, rng)
    if node.op == "gather" and len(node.inputs) > 1 and node.inputs[1] is not None and \
            not node.inputs[1].is_const and node.inputs[0] is not None and node.inputs[0].type.shape:
        data, idx = node.inputs[0], node.inputs[1]  # indices within the axis (2 rows of token types, say)
        n = data.type.shape[int(node.attrs.get("axis") or 0) % len(data.type.shape)]
        if isinstance(n, (int, np.integer)) and n > 0:
            values[id(idx)] = rng.integers(0, n, np.shape(values[id(idx)])).astype(values[id(idx)].dtype)
    x, dst = node.inputs[0] if node.inputs else None, node.outputs[0].type.dtype if node.outputs else None
    if node.op in ("cast", "cast_like") and x is not None and not x.is_const and dst in INTEGERS and \
            str(x.type.dtype).startswith("float"):  # ONNX leaves a float outside the integer range undefined
        info = np.iinfo(dst)
        values[id(x)] = rng.uniform(max(info.min, -1000), min(info.max, 1000), np.shape(values[id(x)])).astype(
            values[id(x)].dtype)
    feeds = {}
    for b in outer:
        v, _, _ = net.origin[b]
        if id(v) not in values:
            values[id(v)] = _sample(v, rng)
        form = net.origin[b][1]
        a = values[id(v)].astype(np.int32).view(np.float32) if form == "I" else values[id(v)].astype(np.float32)
        feeds[b] = a.reshape(net.shapes[b])
    tops = [e.outs[k][0] for k in sorted(e.outs)]
    got = run_layers(layers, feeds, tops)
    got_by = dict(zip(sorted(e.outs), got))
    expected = None
    fn = reference.get(node.op)
    if fn is not None and size <= NUMERIC_MAX and not node.meta.get(CHECKED):
        args = [None if v is None else values[id(v)] for v in node.inputs]
        try:
            with np.errstate(all="ignore"):
                expected = list(call_reference(node, fn, args, dict(node.attrs)))
        except Exception as exc:  # noqa: BLE001 - no reference for these random inputs: shapes only
            expected = None
            read = [net.origin[b][0] for b in outer]
            if any(v.type.dtype in INTEGERS for v in read + [node.outputs[k] for k in e.outs]):
                raise refuse("runtime_error", f"{node.op}'s integer results could not be checked: the reference "
                                              f"failed ({type(exc).__name__})") from exc
    for k, g in got_by.items():
        v = node.outputs[k]
        blob, form = e.outs[k]
        if not v.type.is_static:  # the IR could not tell: the reference's shape, else ncnn's
            if form == "S" and (expected is None or k >= len(expected)):
                raise refuse("dynamic_shape", f"value {v.name!r} has no static shape, and its squeezed blob "
                                              "does not tell it")
            _refine(v, np.shape(expected[k]) if expected is not None and k < len(expected) else
                    (tuple(g.shape) if form == "F" else (1,) + tuple(g.shape)))
        want = form_shape(v, form)
        if g.size != math.prod(want):
            raise refuse("unsupported_attribute_value", f"ncnn's {layers[-1].type} gives {g.size} values for output "
                                             f"{v.name!r} of shape {list(static_shape(v))}")
        if expected is not None and k < len(expected):
            if g.size != np.size(expected[k]):
                raise refuse("runtime_error", f"ncnn's layers give {g.size} values for {node.op}'s output {k}, "
                                              f"the reference {list(np.shape(expected[k]))}")
            _agree(node, k, np.asarray(expected[k]), g.reshape(np.shape(expected[k])))
        if g.shape != want:
            b = net.fresh()
            net.shapes[blob] = tuple(g.shape) if g.ndim else (1,)
            net.views.setdefault(id(v), []).append(blob)
            net.add("Reshape", [blob], [b], shape_params(want))
            net.layout.add(b)
            e.outs[k] = (b, form)


def _shapes_from_reference(node: Node) -> None:
    """Output shapes the IR left open, from the reference run on the node's constants and
    random inputs (small nodes only)."""
    from translator import reference
    from translator.ir.evaluate import call_reference

    fn = reference.get(node.op)
    if fn is None or not all(v is None or v.type.is_static for v in node.inputs):
        return
    if sum(math.prod(static_shape(v)) for v in node.inputs if v is not None and not v.is_const) > NUMERIC_MAX:
        return
    rng = np.random.default_rng(0)
    args = [None if v is None else _sample(v, rng) for v in node.inputs]
    try:
        with np.errstate(all="ignore"):
            got = list(call_reference(node, fn, args, dict(node.attrs)))
    except Exception:  # noqa: BLE001 - the shapes stay open; the trial refuses what it cannot size
        return
    for v, g in zip(node.outputs, got):
        if not v.type.is_static:
            _refine(v, np.shape(g))


def _refine(v: Value, shape: tuple[int, ...]) -> None:
    from translator.ir.graph import TensorType

    v.type = TensorType(v.type.dtype, tuple(int(d) for d in shape), v.type.kind, v.type.elem)


def _sample(v: Value, rng: np.random.Generator) -> np.ndarray:
    if v.is_const:
        return np.asarray(v.const)
    shape = static_shape(v)
    if v.type.dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if v.type.dtype in INTEGERS:  # small and nonzero: a division's or modulo's integer semantics show
        return rng.integers(1, 10, size=shape).astype(v.type.dtype)
    return rng.standard_normal(shape).astype(np.float32)


def _agree(node: Node, k: int, e: np.ndarray, g: np.ndarray) -> None:
    if e.dtype.kind == "b":
        if not np.isin(g, (0.0, 1.0)).all() or not np.array_equal(g != 0, e):
            raise refuse("runtime_error", f"ncnn's layers give another mask than {node.op} for output {k}")
        return
    if e.dtype.kind in "iu":
        if not np.array_equal(g.astype(np.float64), e.astype(np.float64)):
            raise refuse("runtime_error", f"ncnn's float layers give other integers than {node.op} for output {k}")
        return
    if e.dtype.kind not in "fc":
        raise refuse("unsupported_dtype", f"{node.op}'s output {k} is {e.dtype}: an ncnn blob holds float32")
    e = e.astype(np.float64)
    fin = np.isfinite(e)
    scale = max(1.0, float(np.abs(e[fin]).max())) if fin.any() else 1.0
    bad = fin & ~np.isclose(g.astype(np.float64), e, rtol=1e-3, atol=1e-3 * scale)
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        raise refuse("runtime_error", f"ncnn's layers compute {node.op} differently here (output {k}: "
                                     f"{g.reshape(-1)[i]:.6g} where the reference gives {e.reshape(-1)[i]:.6g})")


def live_layers(layers: list[Layer], outputs: list[str]) -> list[Layer]:
    """``layers`` without those whose tops nothing reads (a reshape to a form no reader took,
    a node's other output): ncnn's layers have no side effects."""
    needed = set(outputs)
    keep = []
    for lay in reversed(layers):
        if any(t in needed for t in lay.tops):
            keep.append(lay)
            needed.update(lay.bottoms)
    return keep[::-1]


def _params(lay: Layer) -> dict[str, str]:
    return dict(p.split("=", 1) for p in lay.params)


def _readers(layers: list[Layer], outputs: list[str]) -> dict[str, int]:
    """Blob → how many layers read it (an extracted output counts as one)."""
    readers: dict[str, int] = {}
    for b in [b for lay in layers for b in lay.bottoms] + list(outputs):
        readers[b] = readers.get(b, 0) + 1
    return readers


def fuse_bias(layers: list[Layer], outputs: list[str]) -> list[Layer]:
    """An ``InnerProduct`` without bias whose only reader adds a constant vector of its outputs'
    length along its last dim (a ``MatMul`` then ``Add``: every transformer's projections) takes
    the vector as its bias: two layers and a blob fewer, the same sums. A ``Reshape`` of a
    ``Reshape`` read by nothing else reshapes the first one's input (ncnn copies on each)."""
    readers = _readers(layers, outputs)
    made = {t: lay for lay in layers for t in lay.tops}
    drop: set[int] = set()
    for lay in layers:
        p = _params(lay)
        if lay.type != "BinaryOp" or p != {"0": "0"} or len(lay.bottoms) != 2:
            continue
        for ip_top, md_top in (lay.bottoms, lay.bottoms[::-1]):
            ip, md = made.get(ip_top), made.get(md_top)
            last = ip  # the layer whose top the sum replaces: the InnerProduct, or a Reshape of it
            if ip is not None and ip.type == "Reshape" and readers.get(ip_top) == 1 and ip.bottoms:
                ip_top, ip = ip.bottoms[0], made.get(ip.bottoms[0])
            if ip is None or md is None or ip.type != "InnerProduct" or md.type != "MemoryData" or \
                    _params(ip).get("1") != "0" or readers.get(ip_top) != 1 or readers.get(md_top) != 1 or \
                    id(ip) in drop or id(md) in drop:
                continue
            n, shape = int(_params(ip)["0"]), _params(md)
            if int(shape.get("0", 1)) != n or any(int(shape.get(k, 1)) != 1 for k in ("1", "11", "2")) or \
                    last is not ip and int(_params(last).get("0", -1)) != n:
                continue  # not one value per output along the last dim
            ip.params = [q if not q.startswith("1=") else "1=1" for q in ip.params]
            ip.weights = ip.weights + md.weights
            last.tops = list(lay.tops)
            drop.update({id(lay), id(md)})
            break
    layers = [lay for lay in layers if id(lay) not in drop]
    # a Reshape of a Reshape that nothing else reads: one Reshape of the first one's input
    made = {t: lay for lay in layers for t in lay.tops}
    for lay in layers:
        first = made.get(lay.bottoms[0]) if lay.type == "Reshape" and lay.bottoms else None
        if first is not None and first.type == "Reshape" and readers.get(first.tops[0]) == 1:
            lay.bottoms = list(first.bottoms)
            drop.add(id(first))
    return [lay for lay in layers if id(lay) not in drop]


#: BinaryOp's operation with its operands swapped (sub → rsub, div → rdiv, pow → rpow, and back)
_SWAPPED = {0: 0, 1: 7, 2: 2, 3: 8, 4: 4, 5: 5, 6: 9, 7: 1, 8: 3, 9: 6}


def scalar_operands(layers: list[Layer], outputs: list[str]) -> list[Layer]:
    """A two-input ``BinaryOp`` one of whose inputs is a one-value ``MemoryData`` that nothing
    else reads (a ``+ 3``, a ``/ 6``, an epsilon) takes the value as its scalar (``1=1 2=v``;
    the operation swapped when the constant comes first): a layer and a broadcast fewer."""
    readers = _readers(layers, outputs)
    made = {t: lay for lay in layers for t in lay.tops}
    drop: set[int] = set()
    for lay in layers:
        p = _params(lay)
        if lay.type != "BinaryOp" or set(p) != {"0"} or len(lay.bottoms) != 2 or int(p["0"]) not in _SWAPPED:
            continue
        for k in (1, 0):
            md = made.get(lay.bottoms[k])
            if md is None or md.type != "MemoryData" or readers.get(lay.bottoms[k]) != 1 or id(md) in drop or \
                    len(md.weights) != 1 or not isinstance(md.weights[0], bytes) or len(md.weights[0]) != 4:
                continue
            value = float(np.frombuffer(md.weights[0], dtype="<f4")[0])
            if not math.isfinite(value):
                continue  # ncnn's .param reader takes no inf or nan: the value stays a blob
            op = int(p["0"]) if k == 1 else _SWAPPED[int(p["0"])]
            lay.bottoms = [lay.bottoms[1 - k]]
            lay.params = [f"0={op}", "1=1", f"2={value!r}"]
            drop.add(id(md))
            break
    return [lay for lay in layers if id(lay) not in drop]


def finalize(layers: list[Layer], inputs: list[tuple[str, tuple[int, ...]]],
             outputs: list[str], fp16: bool = False) -> tuple[str, bytes, list[str]]:
    """(.param text, .bin bytes, the blob to extract per output): ``Input`` layers first, a
    ``Split`` after every blob read more than once (an ncnn blob has one reader; an extracted
    output counts as one); tagged weights in float16 with ``fp16``."""
    head = [Layer("Input", f"input_{i}", [], [b], shape_params(s)) for i, (b, s) in enumerate(inputs)]
    order = head + list(layers)
    readers = _readers(order, outputs)
    final: list[Layer] = []
    copies: dict[str, list[str]] = {}
    for lay in order:
        lay = Layer(lay.type, lay.name, [copies[b].pop(0) if b in copies else b for b in lay.bottoms],
                    list(lay.tops), lay.params, lay.weights)
        final.append(lay)
        for t in lay.tops:
            if readers.get(t, 0) > 1:
                copies[t] = [f"{t}_{i}" for i in range(readers[t])]
                final.append(Layer("Split", f"splitncnn_{len(final)}", [t], list(copies[t])))
    extract = [copies[o].pop(0) if o in copies else o for o in outputs]
    lines = [" ".join([lay.type, lay.name, str(len(lay.bottoms)), str(len(lay.tops)), *lay.bottoms, *lay.tops,
                       *lay.params]) for lay in final]
    nblobs = len({b for lay in final for b in lay.bottoms + lay.tops})
    param = "7767517\n" + f"{len(final)} {nblobs}\n" + "\n".join(lines) + "\n"
    return param, b"".join(lay.weight_bytes(fp16) for lay in final), extract


def run_layers(layers: list[Layer], feeds: dict[str, np.ndarray], outputs: list[str]) -> list[np.ndarray]:
    """Run ``layers`` in ncnn on ``feeds`` (blob → array in the blob's shape), in the trial's
    own process (``trial_worker``): a crash of ncnn refuses the node instead of ending the
    conversion."""
    param, weights, extract = finalize(layers, [(b, a.shape if a.ndim else (1,)) for b, a in feeds.items()],
                                       outputs)
    return _WORKER.run(param, weights, {b: a.reshape(a.shape if a.ndim else (1,)) for b, a in feeds.items()},
                       extract)


class _Worker:
    """One ``trial_worker`` process, started on first use and again after a crash."""

    def __init__(self) -> None:
        self.proc: Any = None

    def _start(self) -> Any:
        import subprocess
        import sys

        if self.proc is None or self.proc.poll() is not None:
            env = dict(os.environ)
            env["OMP_NUM_THREADS"] = "1"
            self.proc = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "trial_worker.py")],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         env=env)
        return self.proc

    def run(self, param: str, weights: bytes, feeds: dict[str, np.ndarray], outs: list[str]) -> list[np.ndarray]:
        import json

        from .trial_worker import read_message, write_message

        proc = self._start()
        head = {"param": param, "feeds": [[b, list(a.shape)] for b, a in feeds.items()], "outs": outs}
        try:
            write_message(proc.stdin, json.dumps(head).encode())
            write_message(proc.stdin, weights)
            for a in feeds.values():
                write_message(proc.stdin, np.ascontiguousarray(a, dtype="<f4").tobytes())
            answer = read_message(proc.stdout)
        except (BrokenPipeError, OSError):
            answer = None
        if answer is None:
            code = proc.wait()
            self.proc = None
            raise refuse("runtime_error", f"ncnn crashed running the layers (exit {code})")
        res = json.loads(answer)
        if "error" in res:
            raise refuse("unsupported_attribute_value", f"ncnn rejects the layers: {res['error']}")
        got = []
        for shape in res["outs"]:
            raw = read_message(proc.stdout) or b""
            got.append(np.frombuffer(raw, dtype="<f4").reshape(shape).copy())
        return got


_WORKER = _Worker()


# ----------------------------------------------------------------------------- accepts / emit
def accepts(node: Node, ctx: "Compilation") -> Refusal | None:
    """Whether the node's layers are written and run in ncnn as the reference computes (``trial``)."""
    net = Net()
    try:
        for v in node.inputs:
            if v is not None and not v.is_const and id(v) not in net.held:
                blob_dtype(v)
                s = static_shape(v)
                form = "F" if len(s) <= 4 else ("B" if s[0] == 1 else "S")
                net.hold(v, net.fresh(), form)
        write_node(net, node, ctx.tables)
    except NodeRefused as exc:
        return exc.refusal
    except Unsupported as exc:
        return Refusal(exc.code, str(exc))
    node.meta[CHECKED] = True  # emit writes it again (its inputs' forms may differ): shapes only then
    return None


def _input_form(v: Value) -> str:
    s = static_shape(v)
    if len(s) > 4 and s[0] != 1:
        return "S"
    return "B" if len(s) >= 3 and s[0] == 1 else "F"


def emit(model: Model, ctx: "Compilation") -> NcnnArtifact:
    """The lowered IR → ``NcnnArtifact`` (every node written and tried; refusals → ``Rejected``)."""
    from translator.compile.pipeline import Rejected

    g = model.graph
    net = Net()
    ins: list[Port] = []
    refused: dict[str, Refusal] = {}
    try:
        for i, v in enumerate(g.inputs):
            blob_dtype(v)
            form = _input_form(v)
            b = f"in{i}"
            net.hold(v, b, form)
            ins.append(Port(v.name, b, list(net.shapes[b]), str(v.type.dtype)))
    except NodeRefused as exc:
        raise Unsupported("input", NAME, exc.refusal.code, exc.refusal.detail) from None
    for node in g.nodes:
        try:
            e = write_node(net, node, ctx.tables)
            for k, (b, form) in e.outs.items():
                net.hold(node.outputs[k], b, form)
        except NodeRefused as exc:
            refused[node.name] = exc.refusal
    if refused:
        raise Rejected(refused)
    for v, b, rows in net.words.values():
        ins.append(Port(v.name, b, list(net.shapes[b]), str(v.type.dtype), words="int32", rows=rows))
    outs: list[Port] = []
    extract: list[str] = []
    for v in g.outputs:
        try:
            forms = net.held.get(id(v)) or {}
            b = next(iter(forms.values())) if forms else net.blob(v, "F")
        except NodeRefused as exc:
            raise Unsupported("output", NAME, exc.refusal.code, exc.refusal.detail) from None
        extract.append(b)
        outs.append(Port(v.name, b, list(static_shape(v)), str(v.type.dtype)))
    layers = scalar_operands(fuse_bias(live_layers(net.layers, extract), extract), extract)
    read = {b for lay in layers for b in lay.bottoms} | set(extract)
    fed_as_words = {p.name for p in ins if p.words}
    ins = [p for p in ins if p.words or p.name not in fed_as_words or p.blob in read]  # only the words are read
    fp16 = bool(ctx.options.get("fp16_storage"))
    param, weights, names = finalize(layers, [(p.blob, tuple(p.shape)) for p in ins], extract, fp16=fp16)
    param, names = _rename_outputs(param, names)
    for p, n in zip(outs, names):
        p.blob = n
    source_out = list(ctx.source_outputs)
    legal = {i: v.type.dtype for i, (v, before) in enumerate(zip(g.outputs, source_out))
             if before is not None and v.type.dtype is not None and before != v.type.dtype}
    legal.update({i: "float32" for i, v in enumerate(g.outputs) if v.type.dtype in INTEGERS})
    reshapes = sum(1 for lay in layers if lay.tops[0] in net.layout)
    from translator.compile.quantized import dynamic_range_features

    features = sorted(dynamic_range_features(model))
    return NcnnArtifact(param, weights, ins, outs, reshapes=reshapes, weight_dtype="float16" if fp16 else "float32",
                        options={"features": features} if features else {},
                        decomposed=list(ctx.decomposed),
                        legalized=list(ctx.warnings), output_legal=legal)


def _rename_outputs(param: str, names: list[str]) -> tuple[str, list[str]]:
    """The extracted blobs as ``out0``, ``out1``... (as ncnn's converters name them); a blob
    extracted twice keeps its first name."""
    mapping: dict[str, str] = {}
    for i, n in enumerate(names):
        if n not in mapping and not n.startswith("in"):
            mapping[n] = f"out{i}"
    if not mapping:
        return param, names
    lines = param.split("\n")
    body = []
    for ln in lines[2:]:
        parts = ln.split(" ")
        if len(parts) >= 4:
            nb, nt = int(parts[2]), int(parts[3])
            parts[4:4 + nb + nt] = [mapping.get(b, b) for b in parts[4:4 + nb + nt]]
        body.append(" ".join(parts))
    return "\n".join(lines[:2] + body), [mapping.get(n, n) for n in names]


__all__ = ["Net", "NodeEmit", "NodeRefused", "refuse", "accepts", "emit", "write_node", "trial", "finalize",
           "run_layers", "shape_params", "form_shape"]
