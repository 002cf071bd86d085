"""The strict loader of ``optable.yaml`` and ``dtypes.yaml``.

Every known key is consumed; an unknown key, a missing required key, a bad value or a
dangling reference (a dtype id, an op id in a decomposition) is a ``TableError`` naming
the file, the line and the entry. Entries become frozen dataclasses.

Loading is on the path of ``opbridge query``, the most typed command, so a validated
table is cached as JSON keyed by the SHA-256 of both files (see ``_cache_file``):
a warm start never touches YAML.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from . import paths
from .constants import TableError
from .yamlnodes import LDict, LList, load_with_lines

__all__ = [
    "API_KEYS", "API_TITLES", "DTYPE_GROUPS", "Cell", "Port", "Attribute", "Signature",
    "Step", "Op", "DType", "Tables", "TableError", "load_tables", "CATEGORIES", "TRAITS", "SAMPLE_DOMAINS",
]

from .constants import API_KEYS, API_TITLES  # noqa: E402  (re-exported)

STATUSES = ("native", "composite", "unavailable", "unknown")  # unknown: said in the cell (notes: why)
BROADCAST_KINDS = ("multidirectional", "unidirectional", "none")
ATTR_TYPES = ("int", "float", "string", "ints", "floats", "strings", "tensor", "graph", "dtype", "bool")
DTYPE_KINDS = ("bool", "uint", "int", "float", "complex", "string")
DTYPE_GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "all": DTYPE_KINDS, "numeric": ("uint", "int", "float"), "float": ("float",),
    "int": ("uint", "int"), "signed": ("int",), "unsigned": ("uint",), "bool": ("bool",),
    "string": ("string",), "complex": ("complex",),
})
#: the parts an op's ``category`` is made of (comma-separated, in any order)
CATEGORIES = (
    "Activation", "Aggregate", "Attention", "Bitwise", "Comparison", "Control Flow", "Data Conversion",
    "Data Reorganization", "Elementwise", "Generation", "Imaging", "Input", "Logical", "Loss", "Math",
    "Matrix Multiplication", "NGram", "Normalization", "Optional", "Pooling", "Quantization", "Random",
    "Recurrent", "Reduction", "Scan", "Selection", "Sequence", "Signal Processing", "Sparse", "String",
    "Trigonometric",
)
#: facts about an op that passes and tests read (docs/TABLES.md, "Traits")
TRAITS = MappingProxyType({
    "elementwise": "output element i is computed from the input elements at index i (after broadcasting)",
    "widen_half": "float16/bfloat16 arithmetic is computed in float32 and rounded back after the op",
    "random": "the output is random: no reference value to compare with",
    "moves_data": ("every output element of the data type is a copy of an input element of that type (or a "
                   "constant fill): computing it in a wider dtype and casting back is exact (dtype legalization "
                   "per op: a bool gather where the backend's gather lacks bool)"),
    "layout_unary": "layout pass: input 0 and output 0 follow the node's layout (other inputs must be scalars)",
    "layout_broadcasting": "layout pass: every same-rank (or constant) input and output 0 follow the node's layout",
    "layout_reduce": "layout pass: a keepdims reduction; its constant axes input is remapped",
    "layout_spatial": "layout pass: channels-last exactly when the backend says so (conv, pooling, resize...)",
    "layout_per_channel": "layout pass: channels-last when the backend asks, else wherever the cut puts it",
})
#: value domains of sampled inputs (``translator/run/samples.py``)
SAMPLE_DOMAINS = ("any", "pos", "unit", "ge1", "nonzero", "small", "bool", "lo", "hi", "scale", "sparse")
_ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_SOURCE_RE = re.compile(r"^(seed:00[0-4]|introspect:[\w.+-]+( [\w.+-]+)?|doc:https?://\S+|execution:[\w.+-]+( [\w.+-]+)?)$")


# --------------------------------------------------------------------------- dataclasses
@dataclass(frozen=True)
class Cell:
    """One (op or dtype, API) cell."""

    api: str
    status: str
    names: tuple[str, ...] = ()
    seed: str | None = None
    attrs: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    dtypes: tuple[str, ...] | None = None
    rank: Mapping[str, int] | None = None
    notes: str | None = None
    sources: tuple[str, ...] = ()
    verified: str | None = None
    #: the code this backend emits for the op, in the one snippet grammar (translator/table/snippets.py)
    snippet: str | None = None
    #: why opbridge's emitter has no code for a native/composite cell yet (a declared gap: the lint accepts it)
    unimplemented: str | None = None
    #: the op names of this API's *graphs* that its frontend reads into this op, when they differ
    #: from ``names`` (TensorFlow graph ops such as ``AddV2`` for ``tf.math.add``; ATen overloads
    #: such as ``aten.add.Tensor`` for ``torch.add``): ``reverse_index`` (the frontends' mapping)
    reads: tuple[str, ...] = ()

    @property
    def name(self) -> str | None:
        return self.names[0] if self.names else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status}
        if self.names:
            d["name"] = self.names[0] if len(self.names) == 1 else list(self.names)
        for k in ("seed", "notes", "verified", "snippet", "unimplemented"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.attrs:
            d["attrs"] = dict(self.attrs)
        if self.dtypes is not None:
            d["dtypes"] = list(self.dtypes)
        if self.rank is not None:
            d["rank"] = dict(self.rank)
        if self.reads:
            d["reads"] = list(self.reads)
        d["source"] = self.sources[0] if len(self.sources) == 1 else list(self.sources)
        return d


@dataclass(frozen=True)
class Port:
    name: str
    type: str
    optional: bool = False
    variadic: bool = False
    doc: str | None = None


@dataclass(frozen=True)
class Attribute:
    name: str
    type: str
    default: Any = None
    required: bool = False
    doc: str | None = None


@dataclass(frozen=True)
class Signature:
    inputs: tuple[Port, ...]
    attributes: tuple[Attribute, ...]
    outputs: tuple[Port, ...]
    types: Mapping[str, tuple[str, ...]]

    def attribute(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)

    def input_index(self, name: str) -> int | None:
        return next((i for i, p in enumerate(self.inputs) if p.name == name), None)

    def beyond(self, base: "Signature") -> tuple[Attribute, ...]:
        """The attributes this op has and ``base`` lacks, in this op's order (a fused conv's
        activation parameters, beyond ``conv``'s: FusedConv's ``activation_params``)."""
        return tuple(a for a in self.attributes if base.attribute(a.name) is None)


@dataclass(frozen=True)
class Step:
    """One SSA step of a decomposition: ``outs = op(ins, attrs)``."""

    op: str
    ins: tuple[Any, ...]
    outs: tuple[str, ...]
    attrs: Mapping[str, Any]
    #: optional inputs the step needs: without one of them the step is left out and its
    #: outputs are absent (a later step takes an absent value as an omitted optional input)
    if_present: tuple[str, ...] = ()


@dataclass(frozen=True)
class Op:
    id: str
    title: str
    category: str
    broadcast: str
    formula: str | None = None
    precision: str | None = None
    aliases: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    errata: tuple[Mapping[str, Any], ...] = ()
    seed: Mapping[str, Any] | None = None
    signature: Signature | None = None
    decomposition: tuple[Step, ...] | None = None
    decomposition_comment: str | None = None
    #: when the decomposition applies: {attrs: {name: value}, dtype_kind: [float, ...],
    #: dtype_of: input name (whose dtype dtype_kind checks; default the first), present: [input names]}
    decomposition_when: Mapping[str, Any] | None = None
    tolerance: Mapping[str, float] | None = None
    #: expected failures of the generated op tests: ({backend, reason, dtype?}, ...)
    xfail: tuple[Mapping[str, Any], ...] = ()
    backends: Mapping[str, Cell] = field(default_factory=lambda: MappingProxyType({}))
    line: int = 0
    #: facts passes and tests read, from ``TRAITS``
    traits: frozenset[str] = frozenset()
    #: why the generated op test (tests/test_ops.py) has no case for this op; None: it has one
    no_case: str | None = None
    #: how ``translator/run/samples.py`` makes the op's test inputs: {inputs: [...], attrs, outputs, domain}
    sample: Mapping[str, Any] | None = None

    def cell(self, api: str) -> Cell | None:
        return self.backends.get(api)

    @property
    def categories(self) -> tuple[str, ...]:
        """The parts of ``category``, each one of ``CATEGORIES``."""
        return tuple(p.strip() for p in self.category.split(","))


@dataclass(frozen=True)
class DType:
    id: str
    title: str
    category: str
    kind: str
    bits: int | None
    details: str | None = None
    layout: Mapping[str, int] | None = None
    nan: bool | None = None
    inf: bool | None = None
    negative_zero: bool | None = None
    numpy: str | None = None
    aliases: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    errata: tuple[Mapping[str, Any], ...] = ()
    backends: Mapping[str, Cell] = field(default_factory=lambda: MappingProxyType({}))
    line: int = 0


_EXPAND_MEMO: dict[tuple[Any, ...], Any] = {}


@dataclass(frozen=True)
class Tables:
    ops: Mapping[str, Op]
    dtypes: Mapping[str, DType]
    optable_file: str = ""
    dtypes_file: str = ""

    def op(self, op_id: str) -> Op:
        return self.ops[op_id]

    def reverse_index(self, api: str) -> dict[str, list[tuple[str, Cell]]]:
        """A frontend's mapping: the op names of ``api``'s graphs → [(IR op id, cell)], in table
        order, from the API's native and composite cells (a cell's ``reads``, else its
        ``names``). The query shows the same cells, so the two cannot disagree."""
        key = (id(self), "reverse", api)
        hit = _EXPAND_MEMO.get(key)
        if hit is None:
            hit = {}
            for op in self.ops.values():
                cell = op.backends.get(api)
                if cell is None or cell.status not in ("native", "composite"):
                    continue
                for name in cell.reads or cell.names:
                    hit.setdefault(name, []).append((op.id, cell))
            _EXPAND_MEMO[key] = hit
        return hit

    def expand_dtypes(self, names: Iterable[str]) -> tuple[str, ...]:
        """Dtype ids and group names → dtype ids, in ``dtypes.yaml`` order (memoized)."""
        key = (id(self), tuple(names))
        hit = _EXPAND_MEMO.get(key)
        if hit is not None:
            return hit
        hit = _EXPAND_MEMO[key] = self._expand(key[1])
        return hit

    def _expand(self, names: tuple[str, ...]) -> tuple[str, ...]:
        want: set[str] = set()
        for n in names:
            if n in DTYPE_GROUPS:
                kinds = DTYPE_GROUPS[n]
                want.update(d.id for d in self.dtypes.values() if d.kind in kinds)
            else:
                want.add(n)
        return tuple(d for d in self.dtypes if d in want)


# --------------------------------------------------------------------------- validation helpers
class _Ctx:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, node: Any, where: str, reason: str, key: str | None = None) -> TableError:
        line = None
        if isinstance(node, LDict) and key is not None:
            line = node.key_lines.get(key, node.line)
        elif isinstance(node, (LDict, LList)):
            line = node.line
        return TableError(self.path, line, where, reason)

    def mapping(self, node: Any, where: str, required: Iterable[str], optional: Iterable[str]) -> LDict:
        if not isinstance(node, LDict):
            raise self.fail(node, where, f"expected a mapping, got {type(node).__name__}")
        req, opt = tuple(required), tuple(optional)
        for k in node:
            if k not in req and k not in opt:
                raise self.fail(node, where, f"unknown key {k!r} (allowed: {', '.join(req + opt)})", key=k)
        for k in req:
            if k not in node:
                raise self.fail(node, where, f"missing required key {k!r}")
        return node

    def text(self, node: LDict, key: str, where: str, optional: bool = True) -> str | None:
        v = node.get(key)
        if v is None and optional:
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str):
            raise self.fail(node, where, f"{key!r} must be a string", key=key)
        return v

    def strlist(self, node: LDict, key: str, where: str) -> tuple[str, ...]:
        v = node.get(key)
        if v is None:
            return ()
        if isinstance(v, str):
            return (v,)
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(node, where, f"{key!r} must be a string or a list of strings", key=key)
        return tuple(v)

    def errata(self, node: LDict, where: str) -> tuple[Mapping[str, Any], ...]:
        v = node.get("errata")
        if v is None:
            return ()
        if not isinstance(v, list):
            raise self.fail(node, where, "'errata' must be a list", key="errata")
        out = []
        for e in v:
            self.mapping(e, where + " erratum", ("field", "note"), ("seed", "verified", "source"))
            out.append(MappingProxyType(_plain(e)))
        return tuple(out)


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _freeze(v: Any) -> Any:
    if isinstance(v, dict):
        return MappingProxyType({k: _freeze(x) for k, x in v.items()})
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


_CELL_KEYS = ("name", "seed", "attrs", "dtypes", "rank", "notes", "verified", "snippet", "unimplemented", "reads")


def _parse_cell(ctx: _Ctx, node: Any, where: str, api: str, dtype_names: set[str] | None) -> dict[str, Any]:
    ctx.mapping(node, where, ("status", "source"), _CELL_KEYS)
    status = node["status"]
    if status not in STATUSES:
        raise ctx.fail(node, where, f"status {status!r} not one of {', '.join(STATUSES)}", key="status")
    names = ctx.strlist(node, "name", where)
    if status == "native" and not names:
        raise ctx.fail(node, where, "a native cell needs a 'name'")
    if status == "unknown" and not ctx.text(node, "notes", where):
        raise ctx.fail(node, where, "an unknown cell says why in 'notes' (e.g. no public source answers)", key="notes")
    sources = ctx.strlist(node, "source", where)
    if not sources:
        raise ctx.fail(node, where, "'source' is empty", key="source")
    for s in sources:
        if not _SOURCE_RE.match(s):
            raise ctx.fail(node, where, f"source {s!r} is not seed:00N, introspect:<lib>, doc:<url> or execution:<backend>", key="source")
    attrs = node.get("attrs") or {}
    if not isinstance(attrs, dict):
        raise ctx.fail(node, where, "'attrs' must be a mapping", key="attrs")
    dtypes = None
    if "dtypes" in node:
        dtypes = ctx.strlist(node, "dtypes", where)
        if dtype_names is not None:
            for d in dtypes:
                if d not in dtype_names and d not in DTYPE_GROUPS:
                    raise ctx.fail(node, where, f"unknown dtype {d!r} (not in dtypes.yaml nor a group)", key="dtypes")
    rank = node.get("rank")
    if rank is not None:
        ctx.mapping(rank, where + " rank", (), ("min", "max"))
        if not all(isinstance(x, int) for x in rank.values()):
            raise ctx.fail(node, where, "rank bounds must be integers", key="rank")
    return dict(
        api=api, status=status, names=names, seed=ctx.text(node, "seed", where),
        attrs=_freeze(_plain(attrs)), dtypes=dtypes, rank=_freeze(_plain(rank)) if rank else None,
        notes=ctx.text(node, "notes", where), sources=sources, verified=ctx.text(node, "verified", where),
        snippet=_snippet(ctx, node, where), unimplemented=ctx.text(node, "unimplemented", where),
        reads=ctx.strlist(node, "reads", where),
    )


def _snippet(ctx: _Ctx, node: Any, where: str) -> str | None:
    text = ctx.text(node, "snippet", where)
    if text is not None and ("\n" in text.strip() or not text.strip()):
        raise ctx.fail(node, where, "a snippet is one non-empty line of code", key="snippet")
    return text.strip() if text is not None else None


def _parse_backends(ctx: _Ctx, node: LDict, where: str, dtype_names: set[str] | None) -> Mapping[str, Cell]:
    b = node.get("backends")
    if b is None:
        return MappingProxyType({})
    if not isinstance(b, LDict):
        raise ctx.fail(node, where, "'backends' must be a mapping", key="backends")
    cells = {}
    for api, cnode in b.items():
        if api not in API_TITLES:
            raise ctx.fail(b, where, f"unknown API {api!r} (known: {', '.join(API_KEYS)})", key=api)
        cells[api] = Cell(**_parse_cell(ctx, cnode, f"{where} backend {api}", api, dtype_names))
    return MappingProxyType({k: cells[k] for k in API_KEYS if k in cells})


# --------------------------------------------------------------------------- dtypes
def _parse_dtypes(data: Any, path: str) -> dict[str, DType]:
    ctx = _Ctx(path)
    ctx.mapping(data, "top level", ("schema", "dtypes"), ())
    if data["schema"] != 1:
        raise ctx.fail(data, "top level", f"unsupported schema {data['schema']!r}", key="schema")
    if not isinstance(data["dtypes"], list):
        raise ctx.fail(data, "top level", "'dtypes' must be a list", key="dtypes")
    out: dict[str, DType] = {}
    for node in data["dtypes"]:
        where = f"dtype {node.get('id', '?')!s}" if isinstance(node, dict) else "dtype"
        ctx.mapping(node, where, ("id", "title", "category", "kind", "bits"),
                    ("details", "layout", "nan", "inf", "negative_zero", "numpy", "aliases", "notes", "errata", "backends"))
        did = node["id"]
        if not isinstance(did, str) or not _ID_RE.match(did):
            raise ctx.fail(node, where, f"id {did!r} is not snake_case", key="id")
        if did in out:
            raise ctx.fail(node, where, "duplicate dtype id", key="id")
        if node["kind"] not in DTYPE_KINDS:
            raise ctx.fail(node, where, f"kind {node['kind']!r} not one of {', '.join(DTYPE_KINDS)}", key="kind")
        bits = node["bits"]
        if bits is not None and (not isinstance(bits, int) or bits <= 0):
            raise ctx.fail(node, where, "'bits' must be a positive integer or null", key="bits")
        layout = node.get("layout")
        if layout is not None:
            ctx.mapping(layout, where + " layout", (), ("sign", "exponent", "fraction", "integer", "bias"))
        for flag in ("nan", "inf", "negative_zero"):
            if node.get(flag) is not None and not isinstance(node[flag], bool):
                raise ctx.fail(node, where, f"{flag!r} must be true, false or null", key=flag)
        out[did] = DType(
            id=did, title=str(node["title"]), category=str(node["category"]), kind=node["kind"], bits=bits,
            details=ctx.text(node, "details", where), layout=_freeze(_plain(layout)) if layout else None,
            nan=node.get("nan"), inf=node.get("inf"), negative_zero=node.get("negative_zero"),
            numpy=ctx.text(node, "numpy", where), aliases=ctx.strlist(node, "aliases", where),
            notes=ctx.strlist(node, "notes", where), errata=ctx.errata(node, where),
            backends=_parse_backends(ctx, node, where, None), line=node.line,
        )
    return out


# --------------------------------------------------------------------------- ops
def _parse_signature(ctx: _Ctx, node: Any, where: str, dtype_names: set[str]) -> Signature:
    ctx.mapping(node, where, ("inputs", "outputs"), ("attributes", "types"))
    types_node = node.get("types") or LDict(node.line)
    if not isinstance(types_node, dict):
        raise ctx.fail(node, where, "'types' must be a mapping", key="types")
    types: dict[str, tuple[str, ...]] = {}
    for tv, allowed in types_node.items():
        lst = (allowed,) if isinstance(allowed, str) else tuple(allowed or ())
        for d in lst:
            if d not in dtype_names and d not in DTYPE_GROUPS:
                raise ctx.fail(types_node, where, f"type {tv}: unknown dtype or group {d!r}", key=tv)
        types[tv] = lst

    def ports(key: str) -> tuple[Port, ...]:
        lst = node.get(key) or []
        if not isinstance(lst, list):
            raise ctx.fail(node, where, f"{key!r} must be a list", key=key)
        out = []
        for p in lst:
            ctx.mapping(p, f"{where} {key}", ("name", "type"), ("optional", "variadic", "doc"))
            t = p["type"]
            if t not in types and t not in dtype_names:
                raise ctx.fail(p, f"{where} {key} {p['name']}", f"type {t!r} is neither a type variable of 'types' nor a dtype")
            out.append(Port(str(p["name"]), t, bool(p.get("optional", False)), bool(p.get("variadic", False)), p.get("doc")))
        return tuple(out)

    attrs = []
    for a in node.get("attributes") or []:
        ctx.mapping(a, f"{where} attribute", ("name", "type"), ("default", "required", "doc"))
        if a["type"] not in ATTR_TYPES:
            raise ctx.fail(a, f"{where} attribute {a['name']}", f"type {a['type']!r} not one of {', '.join(ATTR_TYPES)}")
        attrs.append(Attribute(str(a["name"]), a["type"], _freeze(_plain(a.get("default"))), bool(a.get("required", False)), a.get("doc")))
    return Signature(ports("inputs"), tuple(attrs), ports("outputs"), MappingProxyType(types))


def _parse_decomposition(ctx: _Ctx, node: Any, where: str) -> tuple[tuple[Step, ...], str | None, Any]:
    ctx.mapping(node, where, ("body",), ("comment", "when"))
    when = node.get("when")
    if when is not None:
        ctx.mapping(when, where + " when", (), ("attrs", "dtype_kind", "dtype_of", "present"))
        if "dtype_of" in when and "dtype_kind" not in when:
            raise ctx.fail(when, where + " when", "'dtype_of' names the input whose dtype 'dtype_kind' checks; "
                           "give 'dtype_kind' too", key="dtype_of")
    body = node["body"]
    if not isinstance(body, list) or not body:
        raise ctx.fail(node, where, "'body' must be a non-empty list of steps", key="body")
    steps = []
    for s in body:
        ctx.mapping(s, where + " step", ("op", "in", "out"), ("attrs", "if_present"))
        ins = s["in"] if isinstance(s["in"], list) else [s["in"]]
        outs = s["out"] if isinstance(s["out"], list) else [s["out"]]
        steps.append(Step(str(s["op"]), tuple(_freeze(_plain(i)) for i in ins), tuple(str(o) for o in outs),
                          _freeze(_plain(s.get("attrs") or {})), tuple(str(x) for x in s.get("if_present") or ())))
    return tuple(steps), ctx.text(node, "comment", where), _freeze(_plain(when)) if when else None


_OP_KEYS_REQ = ("id", "title", "category", "broadcast")
_OP_KEYS_OPT = ("formula", "precision", "aliases", "notes", "errata", "seed", "signature", "decomposition",
                "tolerance", "xfail", "backends", "traits", "no_case", "sample")


def _categories(ctx: _Ctx, node: LDict, where: str) -> str:
    text = node["category"]
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else []
    bad = [p for p in parts if p not in CATEGORIES]
    if not parts or bad:
        raise ctx.fail(node, where, f"category part {(bad or [text])[0]!r} not one of {', '.join(CATEGORIES)}",
                       key="category")
    if len(set(parts)) != len(parts):
        raise ctx.fail(node, where, f"category {text!r} repeats a part", key="category")
    return text


def _sample(ctx: _Ctx, node: Any, where: str, sig: Signature | None, dtype_names: set[str]) -> Mapping[str, Any]:
    """``sample``: {inputs: [entry | null, ...], attrs: {...}, outputs: n, domain: d}; an entry is
    {shape, dtype?, domain?, constant?} (random values) or {value, dtype?} (a constant)."""
    ctx.mapping(node, where, (), ("inputs", "attrs", "outputs", "domain"))
    if node.get("domain", "any") not in SAMPLE_DOMAINS:
        raise ctx.fail(node, where, f"domain {node['domain']!r} not one of {', '.join(SAMPLE_DOMAINS)}", key="domain")
    inputs = node.get("inputs")
    if inputs is not None:
        if not isinstance(inputs, list):
            raise ctx.fail(node, where, "'inputs' must be a list", key="inputs")
        if sig is not None and len(inputs) > len(sig.inputs) and not (sig.inputs and sig.inputs[-1].variadic):
            raise ctx.fail(node, where, f"{len(inputs)} inputs; the signature has {len(sig.inputs)}", key="inputs")
        for e in inputs:
            if e is None:
                continue
            if isinstance(e, LDict) and "value" in e:
                ctx.mapping(e, where + " input", ("value",), ("dtype",))
            else:
                ctx.mapping(e, where + " input", ("shape",), ("dtype", "domain", "constant"))
                shape = e["shape"]
                if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                          for d in shape):
                    raise ctx.fail(e, where + " input", "'shape' must be a list of non-negative integers", key="shape")
                if e.get("domain", "any") not in SAMPLE_DOMAINS:
                    raise ctx.fail(e, where + " input", f"domain {e['domain']!r} not one of {', '.join(SAMPLE_DOMAINS)}",
                                   key="domain")
                if not isinstance(e.get("constant", False), bool):
                    raise ctx.fail(e, where + " input", "'constant' must be true or false", key="constant")
            if "dtype" in e and e["dtype"] not in dtype_names:
                raise ctx.fail(e, where + " input", f"unknown dtype {e['dtype']!r}", key="dtype")
    attrs = node.get("attrs")
    if attrs is not None:
        if not isinstance(attrs, dict):
            raise ctx.fail(node, where, "'attrs' must be a mapping", key="attrs")
        for k in attrs:
            if sig is not None and sig.attribute(k) is None:
                raise ctx.fail(attrs, where, f"attribute {k!r} is not in the signature", key=k)
    outputs = node.get("outputs")
    if outputs is not None and (not isinstance(outputs, int) or isinstance(outputs, bool) or outputs < 1):
        raise ctx.fail(node, where, "'outputs' must be a positive integer", key="outputs")
    return _freeze(_plain(node))


def _traits(ctx: _Ctx, node: LDict, where: str) -> frozenset[str]:
    traits = ctx.strlist(node, "traits", where)
    for t in traits:
        if t not in TRAITS:
            raise ctx.fail(node, where, f"trait {t!r} not one of {', '.join(TRAITS)}", key="traits")
    if len(set(traits)) != len(traits):
        raise ctx.fail(node, where, "'traits' lists a trait twice", key="traits")
    if sum(t.startswith("layout_") for t in traits) > 1:
        raise ctx.fail(node, where, "an op has at most one layout_* trait (its class in the layout pass)", key="traits")
    return frozenset(traits)


def _parse_ops(data: Any, path: str, dtype_names: set[str]) -> dict[str, Op]:
    ctx = _Ctx(path)
    ctx.mapping(data, "top level", ("schema", "ops"), ())
    if data["schema"] != 1:
        raise ctx.fail(data, "top level", f"unsupported schema {data['schema']!r}", key="schema")
    if not isinstance(data["ops"], list):
        raise ctx.fail(data, "top level", "'ops' must be a list", key="ops")
    out: dict[str, Op] = {}
    decomp_nodes: dict[str, Any] = {}
    for node in data["ops"]:
        where = f"op {node.get('id', '?')!s}" if isinstance(node, dict) else "op"
        ctx.mapping(node, where, _OP_KEYS_REQ, _OP_KEYS_OPT)
        oid = node["id"]
        if not isinstance(oid, str) or not _ID_RE.match(oid):
            raise ctx.fail(node, where, f"id {oid!r} is not snake_case", key="id")
        if oid in out:
            raise ctx.fail(node, where, "duplicate op id", key="id")
        category = _categories(ctx, node, where)
        traits = _traits(ctx, node, where)
        no_case = ctx.text(node, "no_case", where)
        if no_case is not None and not no_case.strip():
            raise ctx.fail(node, where, "'no_case' needs a reason", key="no_case")
        if node["broadcast"] not in BROADCAST_KINDS:
            raise ctx.fail(node, where, f"broadcast {node['broadcast']!r} not one of {', '.join(BROADCAST_KINDS)}", key="broadcast")
        seed = node.get("seed")
        if seed is not None:
            ctx.mapping(seed, where + " seed", ("file",), ("line",))
        xfails = node.get("xfail") or []
        if not isinstance(xfails, list):
            raise ctx.fail(node, where, "'xfail' must be a list", key="xfail")
        for xf in xfails:
            ctx.mapping(xf, where + " xfail", ("backend", "reason"), ("dtype",))
            if xf["backend"] not in API_TITLES:
                raise ctx.fail(xf, where + " xfail", f"unknown backend {xf['backend']!r}")
            if "dtype" in xf and xf["dtype"] not in dtype_names:
                raise ctx.fail(xf, where + " xfail", f"unknown dtype {xf['dtype']!r}")
        tol = node.get("tolerance")
        if tol is not None:
            ctx.mapping(tol, where + " tolerance", (), ("atol", "rtol", "ulp"))
        sig = _parse_signature(ctx, node["signature"], where + " signature", dtype_names) if "signature" in node else None
        dec, dec_comment, dec_when = (None, None, None)
        if "decomposition" in node:
            dec, dec_comment, dec_when = _parse_decomposition(ctx, node["decomposition"], where + " decomposition")
            for key in ("dtype_of", "present") if dec_when and sig is not None else ():
                names = dec_when.get(key) or ()
                for nm in ([names] if isinstance(names, str) else names):
                    if sig.input_index(nm) is None:
                        ports = ", ".join(sorted(p.name for p in sig.inputs))
                        raise ctx.fail(node["decomposition"]["when"], where + " decomposition when",
                                       f"{key} names {nm!r}, not an input of the signature ({ports})", key=key)
            decomp_nodes[oid] = node["decomposition"]
        out[oid] = Op(
            id=oid, title=str(node["title"]), category=category, broadcast=node["broadcast"],
            formula=ctx.text(node, "formula", where), precision=ctx.text(node, "precision", where),
            aliases=ctx.strlist(node, "aliases", where), notes=ctx.strlist(node, "notes", where),
            errata=ctx.errata(node, where), seed=_freeze(_plain(seed)) if seed else None, signature=sig,
            decomposition=dec, decomposition_comment=dec_comment, decomposition_when=dec_when,
            tolerance=_freeze(_plain(tol)) if tol else None,
            xfail=tuple(MappingProxyType(_plain(x)) for x in xfails),
            backends=_parse_backends(ctx, node, where, dtype_names), line=node.line,
            traits=traits, no_case=no_case,
            sample=_sample(ctx, node["sample"], where + " sample", sig, dtype_names) if "sample" in node else None,
        )
        for api, cell in out[oid].backends.items():  # a snippet names only what the signature has
            if cell.snippet is not None:
                from .snippets import SnippetError, check

                try:
                    check(cell.snippet, out[oid])
                except SnippetError as exc:
                    raise ctx.fail(node["backends"][api], f"{where} {api}", str(exc), key="snippet") from None
    for oid, dnode in decomp_nodes.items():  # dangling references in decompositions
        for step, snode in zip(out[oid].decomposition or (), dnode["body"]):
            if step.op not in out:
                raise ctx.fail(snode, f"op {oid} decomposition", f"unknown op {step.op!r}", key="op")
            if step.op == oid:
                raise ctx.fail(snode, f"op {oid} decomposition", "an op cannot decompose into itself", key="op")
    return out


# --------------------------------------------------------------------------- entry point
_MEMO: dict[tuple[str, str], Tables] = {}
CACHE_VERSION = "3"


def _cache_file(digest: str) -> Path:
    return Path(paths.cache_dir()) / f"tables-{CACHE_VERSION}-{digest[:32]}.json"


def _validated_data(op_text: str, op_path: str, dt_text: str, dt_path: str) -> tuple[Any, Any]:
    dt_data = load_with_lines(dt_text, dt_path)
    dtypes = _parse_dtypes(dt_data, dt_path)
    op_data = load_with_lines(op_text, op_path)
    _parse_ops(op_data, op_path, set(dtypes))
    return op_data, dt_data


def _to_json(v: Any) -> Any:
    if isinstance(v, LDict):
        return {"__line__": v.line, "__keys__": v.key_lines, "__items__": {k: _to_json(x) for k, x in v.items()}}
    if isinstance(v, LList):
        return {"__line__": v.line, "__list__": [_to_json(x) for x in v]}
    return v


def _from_json(v: Any) -> Any:
    if isinstance(v, dict):
        if "__items__" in v:
            d = LDict(v["__line__"])
            d.key_lines = v["__keys__"]
            for k, x in v["__items__"].items():
                d[k] = _from_json(x)
            return d
        l = LList(v["__line__"])
        l.extend(_from_json(x) for x in v["__list__"])
        return l
    return v


def load_tables(optable: str | os.PathLike[str] | None = None, dtypes: str | os.PathLike[str] | None = None,
                use_cache: bool = True) -> Tables:
    """Load and validate both tables (memoized per process, JSON-cached across processes)."""
    op_path = str(optable or paths.optable_path())
    dt_path = str(dtypes or paths.dtypes_path())
    key = (op_path, dt_path)
    if key in _MEMO:
        return _MEMO[key]
    try:
        op_bytes = Path(op_path).read_bytes()
    except OSError as exc:
        raise TableError(op_path, None, "", f"cannot read: {exc.strerror}") from None
    try:
        dt_bytes = Path(dt_path).read_bytes()
    except OSError as exc:
        raise TableError(dt_path, None, "", f"cannot read: {exc.strerror}") from None
    digest = hashlib.sha256(op_bytes + b"\0" + dt_bytes).hexdigest()
    cache = _cache_file(digest)
    op_data = dt_data = None
    if use_cache and cache.is_file():
        try:
            raw = json.loads(cache.read_text(encoding="utf-8"))
            op_data, dt_data = _from_json(raw["optable"]), _from_json(raw["dtypes"])
        except (OSError, ValueError, KeyError, TypeError):
            op_data = dt_data = None
    if op_data is None:
        op_data, dt_data = _validated_data(op_bytes.decode("utf-8"), op_path, dt_bytes.decode("utf-8"), dt_path)
        if use_cache:
            _write_cache(cache, {"optable": _to_json(op_data), "dtypes": _to_json(dt_data)})
    dtypes_map = _parse_dtypes(dt_data, dt_path)
    ops_map = _parse_ops(op_data, op_path, set(dtypes_map))
    tables = Tables(MappingProxyType(ops_map), MappingProxyType(dtypes_map), op_path, dt_path)
    _MEMO[key] = tables
    return tables


def _write_cache(cache: Path, payload: Any) -> None:
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(payload, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home only costs speed
