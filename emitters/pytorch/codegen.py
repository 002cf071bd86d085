"""Lowered IR → a standalone PyTorch module (Python source + a safetensors state dict).

Only code generation: ``translator.compile.pipeline.compile`` has already verified, folded,
legalized dtypes (uint16 / uint32 are computed in int32 / int64) and lowered the graph, so
every node here has a rule (``@rule`` in the family modules) or a snippet (the ``snippet`` of
its ``pytorch`` cell in ``optable.yaml``). The generated file holds one ``torch.nn.Module``
whose ``forward`` is straight-line torch code, one line per IR node where possible
(``templates/pytorch/module.py.j2``); runtime helpers that ONNX semantics need beyond one line
(loops, dynamic slices, ...) are copied from ``templates/pytorch/helpers.py`` into the
module, only those used. Constants become buffers loaded from ``weights.safetensors``;
constants that steer the code (axes, pads, shapes) are read at conversion time and written as
Python literals, so the module passes ``torch.export`` when the model's shapes are static. A
size that depends on a symbolic dim (a height, width or sequence length: SAME pads, a
ceil-mode pool's window count, the index range of a reflect pad) is torch arithmetic on
``x.shape`` (``node.Size``), so those dims stay dynamic (``torch.export`` keeps them symbolic
unless a torch kernel guards on them, as ceil-mode pooling does).

A rule that finds it cannot write a node (``e.refuse``: a rank or shape only known at run
time, an attribute value torch lacks) does not end the conversion here: every such node is
reported to the pipeline at once (``Rejected``), which decomposes it where the table can.

Names from the model become sanitized, de-duplicated identifiers (``render.ident``);
literals pass through ``render.literal``; model text never reaches the source raw.
"""
from __future__ import annotations

import builtins
import os
import re
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from translator.table import paths
from translator.table.errors import Unsupported
from translator.ir.graph import Graph, Model, Node, Value
from translator.ir.names import NameSet, io_names
from translator.compile import pysource
from translator.compile.pysource import Scope
from translator.compile.registry import Refusal, rules, snippet_of
from translator.compile.render import ident, literal
from translator.table.loader import Tables

from .elementwise import FRESH, in_place
from .node import Binder, NodeEmit
from .registry import NAME
from .runtime import WEIGHTS_FILE, PyTorchArtifact

if TYPE_CHECKING:
    from translator.compile.pipeline import Compilation

#: constants written inline (``torch.tensor(...)``): scalars, and integer vectors up to this size
INLINE_MAX = 8
_RESERVED = frozenset(dir(builtins)) | {"os", "math", "torch", "F", "self", "load", "load_file", "SOURCE", "OPS",
                                        "WEIGHTS_FILE", "_prepare"}  # (_prepare: the module's own method)


def torch_dtypes(tables: Tables) -> dict[str, str]:
    """dtype id → torch dtype attribute name, for dtypes whose pytorch cell is native."""
    out = {}
    for d in tables.dtypes.values():
        c = d.backends.get(NAME)
        if c is not None and c.status == "native" and c.names:
            out[d.id] = c.names[0].split(".", 1)[1]
    return out


# ----------------------------------------------------------------------------- runtime helpers
def _template_dir() -> str:
    return os.path.join(paths.templates_dir(), NAME)


def helpers() -> dict[str, tuple[str, tuple[str, ...]]]:
    """helper name → (source, helpers it calls), parsed from ``templates/pytorch/helpers.py``."""
    return pysource.helpers(os.path.join(_template_dir(), "helpers.py"))


def helper_deps(name: str) -> list[str]:
    """``name`` and every helper it needs, dependencies first."""
    return pysource.helper_deps(os.path.join(_template_dir(), "helpers.py"), name)


def helper_source(name: str) -> str:
    return helpers()[name][0]


@lru_cache(maxsize=None)
def _module_attrs() -> frozenset[str]:
    """Attribute names of ``torch.nn.Module`` (a buffer must not shadow one)."""
    import torch

    return frozenset(dir(torch.nn.Module))


# ----------------------------------------------------------------------------- code generation
class Codegen:
    """Turns a lowered IR graph into the body of ``forward`` (and nested bodies)."""

    def __init__(self, tables: Tables, columns: tuple[str, ...] = (NAME,)) -> None:
        self.tables = tables
        self.columns = columns
        self.rules = rules(columns)
        self.torch_dtype = torch_dtypes(tables)
        self.buffers: dict[int, tuple[str, np.ndarray, str, Value]] = {}
        self.buffer_names = NameSet()
        self.helpers: list[str] = []
        self.scope = Scope(None, "")
        #: node name → why a rule could not write it (reported to the pipeline together)
        self.refused: dict[str, Refusal] = {}
        self._module_attrs = _module_attrs()
        #: what ``_prepare`` computes once when the weights load (a quantized weight dequantized):
        #: its lines, and the non-persistent buffers it fills (name, shape, dtype)
        self.prepare = Scope(None, "")
        self.prepared: list[tuple[str, list[int], str]] = []
        #: ids of the values ``_prepare`` computes (a rule may derive more from them at load)
        self.load_time: set[int] = set()
        #: layers written as ``torch.nn`` submodules: (attribute name, constructor code,
        #: {parameter name: its array}); their weights load as ``<name>.<parameter>``
        self.modules: list[tuple[str, str, dict[str, np.ndarray]]] = []
        #: ids of the top graph's values a ``FRESH`` op wrote as a new tensor, one call's result
        #: and not a graph output (``elementwise.in_place`` may overwrite them); ``_in_top``: a
        #: top graph without subgraphs is being written (a body may read any outer value)
        self.fresh_values: set[int] = set()
        self._in_top = False
        #: id of a node a rule wrote together with its producer (a bias added by a
        #: ``torch.nn.Linear``) → the value whose expression its one output takes
        self.absorbed: dict[int, Value] = {}

    # ------------------------------------------------------------------ names
    def fresh(self, base: str) -> str:
        """A new local identifier derived from ``base`` (sanitized, unique in this scope)."""
        root = ident(base)
        if root in _RESERVED:
            root = f"{root}_"
        return self.scope.used.take(root)

    def bind(self, v: Value, name: str | None = None) -> str:
        """``v`` gets a fresh local derived from its name, or ``name`` (a graph input's
        parameter name from ``names.io_names``, bound before any other)."""
        if name is None:
            name = self.fresh(v.name)
        else:
            self.scope.used.add(name)
        self.scope.names[id(v)] = name
        return name

    def attribute(self, base: str, prefix: str) -> str:
        """A new attribute name of the module (a buffer or a layer), derived from ``base``:
        sanitized, never shadowing a ``torch.nn.Module`` attribute or a reserved name, unique."""
        root = ident(base, prefix=prefix)
        if root in self._module_attrs or root in _RESERVED:
            root = f"{root}_"
        return self.buffer_names.take(root)

    def buffer(self, v: Value) -> str:
        if id(v) not in self.buffers:
            name = self.attribute(v.name, "c")
            dtype = self.dtype_name(v.type.dtype)
            self.buffers[id(v)] = (name, v.const, dtype, v)
        return f"self.{self.buffers[id(v)][0]}"

    def submodule(self, base: str, ctor: str, params: dict[str, np.ndarray]) -> str:
        """A ``torch.nn`` layer built by ``ctor`` (code from the rule: numbers only) as attribute
        ``self.<name>``, ``name`` derived from ``base`` (a weight's or node's name, sanitized),
        its ``params`` loaded as ``<name>.<parameter>``; returns ``self.<name>``."""
        name = self.attribute(base, "layer")
        self.modules.append((name, ctor, params))
        return f"self.{name}"

    def dtype_name(self, dtype: str | None) -> str:
        if dtype is None or dtype not in self.torch_dtype:
            raise Unsupported("cast", NAME, "unsupported_dtype", f"torch has no {dtype} tensors")
        return self.torch_dtype[dtype]

    def ref(self, v: Value) -> str:
        """The expression that reads value ``v`` in the current scope."""
        name = self.scope.lookup(v)
        if name is not None:
            return name
        if v.is_const:
            arr = np.asarray(v.const)
            if arr.size == 0:
                return f"torch.zeros({literal(list(arr.shape))}, dtype=torch.{self.dtype_name(v.type.dtype)})"
            if arr.size <= 1 and arr.dtype.kind in "biuf" and arr.dtype.name != "bfloat16" or \
                    arr.size <= INLINE_MAX and arr.dtype.kind in "biu":
                return f"torch.tensor({literal(arr.tolist())}, dtype=torch.{self.dtype_name(v.type.dtype)})"
            return self.buffer(v)
        raise Unsupported("identity", NAME, "verifier", f"value {v.name!r} is read before it is computed")

    def helper(self, name: str) -> str:
        for dep in helper_deps(name):
            if dep not in self.helpers:
                self.helpers.append(dep)
        return name

    def emit(self, line: str) -> None:
        self.scope.lines.append(self.scope.indent + line)

    # ------------------------------------------------------------------ graphs
    def graph_body(self, g: Graph, top: bool = False) -> None:
        outer = self._in_top
        self._in_top = top and not any(True for n in g.nodes for _ in n.subgraphs())
        try:
            for node in g.nodes:
                if top and _load_time(node, g, self.load_time):
                    self.prepared_node(node)
                else:
                    self.node(node)
        finally:
            self._in_top = outer

    def prepared_node(self, node: Node) -> None:
        """``node`` computed once in ``_prepare`` into a buffer that ``forward`` reads."""
        main, self.scope = self.scope, self.prepare
        self.prepare.used.taken.update(main.used.taken)
        try:
            self.node(node)
            for v in node.outputs:
                local = self.prepare.lookup(v)
                if local is None:
                    continue
                main.names[id(v)] = self._prepared_buffer(v.name, local, v.type.shape, v.type.dtype)
                self.load_time.add(id(v))
        finally:
            self.scope = main

    def prepared_tensors(self, code: str, base: str, specs: list[tuple[list[int], str]]) -> list[str]:
        """``code`` (an expression over constants and load-time values that gives a sequence of
        tensors, of the shapes and dtypes ``specs``) computed once in ``_prepare`` into buffers
        that ``forward`` reads; returns their ``self.`` names."""
        tmp = self.prepare.used.take(ident(base, prefix="t"))
        self.prepare.lines.append(f"{tmp} = {code}")
        return [self._prepared_buffer(f"{base}_{i}", f"{tmp}[{i}]", shape, dtype)
                for i, (shape, dtype) in enumerate(specs)]

    def _prepared_buffer(self, base: str, expr: str, shape: "tuple | list", dtype: str | None) -> str:
        """A non-persistent buffer named after ``base`` that ``_prepare`` fills with ``expr``;
        returns its ``self.`` name."""
        attr = self.buffer_names.take(ident(f"{base}_prepared", prefix="c"))
        self.prepare.lines.append(f"self.{attr} = {expr}")
        self.prepared.append((attr, [int(d) for d in shape], self.dtype_name(dtype)))
        return f"self.{attr}"

    def subgraph(self, g: Graph, base: str) -> str:
        """Emit ``g`` as a nested function (inputs → tuple of outputs); returns its name."""
        fn = self.fresh(f"{base}_fn")
        outer = self.scope
        inner = Scope(outer, outer.indent + "    ")
        self.scope = inner
        try:
            params = [self.bind(v) for v in g.inputs]
            self.graph_body(g)
            rets = [self.ref(v) for v in g.outputs]
        finally:
            self.scope = outer
        outer.lines.append(f"{outer.indent}def {fn}({', '.join(params)}):")
        outer.lines.extend(inner.lines)
        tail = ", ".join(rets) + ("," if len(rets) == 1 else "")
        outer.lines.append(f"{inner.indent}return ({tail})")
        return fn

    def code(self, e: NodeEmit) -> "str | list[str]":
        """The node's code: its op's rule, else the snippet of its cell."""
        r = self.rules.get(e.node.op)
        return r.fn(e) if r is not None else self.snippet(e)

    def snippet(self, e: NodeEmit) -> str:
        from translator.table import snippets

        text = snippet_of(e.op, self.columns)
        if text is None:
            raise e.refuse("unsupported_op", "no snippet or rule for it")
        try:
            return snippets.expand(text, e.node, e.op, Binder(e))
        except snippets.SnippetError as exc:  # a dtype the node leaves unknown
            raise e.refuse("unsupported_dtype", str(exc)) from None

    def node(self, node: Node) -> None:
        src = self.absorbed.pop(id(node), None)
        if src is not None:  # already computed by the node that wrote it together with its own
            self.scope.names[id(node.outputs[0])] = self.ref(src)
            return
        e = NodeEmit(self, node)
        start = len(self.scope.lines)
        try:
            code = (in_place(e) if self._in_top else None) or self.code(e)
        except Unsupported as exc:
            # reported to the pipeline with the others (``Rejected``); the outputs get names so
            # the rest of the graph is still written and its refusals found in the same pass
            self.refused.setdefault(node.name, _refusal(exc))
            del self.scope.lines[start:]
            _ = e.outs
            return
        if isinstance(code, str):
            e.assign(code)
            out = node.outputs[0]
            if self._in_top and node.op in FRESH and len(node.outputs) == 1 and re.fullmatch(r"[\w.]+\(.*\)", code, re.S) \
                    and not any(o is out for o in node.graph.outputs):  # (a bare name would be an alias)
                self.fresh_values.add(id(out))
        else:
            for line in code:
                self.emit(line)


def _load_time(node: Node, g: Graph, prepared: set[int]) -> bool:
    """A quantized weight's dequantization (every input a constant, a static float result that
    is not a graph output), or a reshape of one (``prepared``: the values computed so far):
    computed once when the weights load, not on every ``forward``."""
    if node.op == "dequantize_linear":
        loaded = all(v is None or v.is_const for v in node.inputs)
    elif node.op == "reshape":
        loaded = node.inputs[0] is not None and id(node.inputs[0]) in prepared and node.inputs[1].is_const
    else:
        return False
    return (loaded and not any(True for _ in node.subgraphs()) and len(node.outputs) == 1
            and node.outputs[0].type.shape is not None and all(isinstance(d, int) for d in node.outputs[0].type.shape)
            and node.outputs[0].type.dtype in ("float32", "float16", "bfloat16", "float64")
            and not any(o is node.outputs[0] for o in g.outputs))


def _refusal(exc: Unsupported) -> Refusal:
    detail = exc.detail[len(NAME) + 2:] if exc.detail.startswith(f"{NAME}: ") else exc.detail
    return Refusal(exc.code, detail)


def trial(node: Node, ctx: "Compilation") -> Refusal | None:
    """Whether the node's rule (or snippet) can write it: the code is generated once on a
    scratch generator and dropped, so what a rule would refuse while writing (a rank or shape
    only known at run time, an attribute value torch lacks) is known while lowering; the
    pipeline then decomposes the node, and ``opbridge report`` says what ``convert`` does.
    Nodes of its subgraphs are judged on their own."""
    cg = Codegen(ctx.tables, ctx.target.columns)
    for v in node.inputs:
        if v is not None and not v.is_const:
            cg.bind(v)
    try:
        cg.code(NodeEmit(cg, node))
    except Unsupported as exc:
        return _refusal(exc)
    return None


# ----------------------------------------------------------------------------- dead locals
_ASSIGNED = re.compile(r"((?:[A-Za-z_][A-Za-z0-9_]*\s*,\s*)*[A-Za-z_][A-Za-z0-9_]*)\s*,?\s*=(?!=)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONTINUES = ("else", "elif", "except", "finally")


def free_dead_locals(lines: list[str], keep: set[str]) -> list[str]:
    """``del`` each local of ``forward`` after the statement that reads it last.

    A local holds its tensor until the function returns: every intermediate activation
    would stay allocated through the whole call (peak memory = the sum of all of them,
    and large fresh blocks are page-faulted in on every call). Names are matched on the
    generated text: a name read anywhere in a top-level statement (nested bodies
    included) is live until that statement ends, so a spurious match only delays a
    ``del``. Locals in ``keep`` (parameters, returned values) stay. If a statement a
    ``del`` would follow does not look complete (``_complete``), the lines are returned
    unchanged.
    """
    stmts: list[list[str]] = []  # top-level statements with their indented continuation lines
    for line in lines:
        if stmts and (line[:1].isspace() or line.split(":", 1)[0].split(" ", 1)[0] in _CONTINUES):
            stmts[-1].append(line)
        else:
            stmts.append([line])
    assigned_at: dict[str, int] = {}
    last_read: dict[str, int] = {}
    closure: dict[str, set[str]] = {}  # nested function → the names its body reads (live until it is called)
    for i, stmt in enumerate(stmts):
        head = stmt[0]
        m = _ASSIGNED.match(head)
        rest = head[m.end():] if m and not head.startswith(("if ", "for ", "while ", "with ", "def ")) else head
        read = {name for text in [rest] + stmt[1:] for name in _IDENT.findall(text)}
        for name in list(read):
            read |= closure.get(name, set())
        if head.startswith("def "):
            closure[head[4:].split("(", 1)[0].strip()] = read
        for name in read:
            last_read[name] = i
        if m and rest is not head:
            for name in _IDENT.findall(m.group(1)):
                assigned_at.setdefault(name, i)
    dels: dict[int, list[str]] = {}
    for name, i in assigned_at.items():
        if name not in keep:
            dels.setdefault(max(i, last_read.get(name, i)), []).append(name)
    if not dels:
        return lines
    out: list[str] = []
    for i, stmt in enumerate(stmts):
        out.extend(stmt)
        if i in dels:
            if not _complete(stmt):
                return lines
            out.append("del " + ", ".join(dels[i]))
    return out


def _complete(stmt: list[str]) -> bool:
    """Whether a statement's lines end it (so a ``del`` may follow): brackets balanced, no
    open block, continuation or triple-quoted string. Linear, unlike compiling the body
    (seconds and half a gigabyte at 100k lines); a bracket inside a string literal makes
    it answer no (then nothing is deleted) unless another one cancels it exactly."""
    text = "\n".join(stmt)
    if '"""' in text or "'''" in text or text.rstrip().endswith((":", "\\", ",")):
        return False
    return sum(text.count(c) for c in "([{") == sum(text.count(c) for c in ")]}")


# ----------------------------------------------------------------------------- emit
#: the artifact feature of a module whose 2-D filters are channels-last (``nn.channels_last``):
#: ``convert`` writes it again with ``--contiguous`` when it fails the check (``run/convert``)
CHANNELS_LAST = "channels_last"


def _class_name(model: Model) -> str:
    base = "".join(part.capitalize() for part in ident(model.graph.name or "model").split("_") if part)
    base = base if base and not base[0].isdigit() else f"M{base}"
    return base if base.endswith("Model") else f"{base}Model"


def _wrap_mask(dtype: str | None) -> int | None:
    """The bit mask that wraps a widened unsigned output back into its declared range."""
    if dtype is None or not dtype.startswith("uint"):
        return None
    from translator.table.dtypes import numpy_dtype

    return (1 << (8 * np.dtype(numpy_dtype(dtype)).itemsize)) - 1


def emit(model: Model, ctx: "Compilation") -> PyTorchArtifact:
    """The lowered IR → ``PyTorchArtifact`` (the pipeline ran every pass before this)."""
    from translator import __version__
    from translator.compile.pipeline import Rejected
    from translator.compile.render import code_lines, render

    g = model.graph
    source_in = dict(zip((v.name for v in g.inputs), ctx.source_inputs))
    cg = Codegen(ctx.tables, ctx.target.columns)
    # parameter names: one rule set for every backend (translator/ir/names.py)
    io = io_names(NAME, [v.name for v in g.inputs], [v.name for v in g.outputs], extra_reserved=_RESERVED)
    params = [cg.bind(v, name) for v, name in zip(g.inputs, io.inputs)]
    cg.graph_body(g, top=True)
    if cg.refused:
        raise Rejected(cg.refused)
    returns = [cg.ref(v) for v in g.outputs]
    out_dtypes: dict[int, str] = {}
    out_legal: dict[int, str] = {}
    for i, (v, before) in enumerate(zip(g.outputs, ctx.source_outputs)):
        if before is None or v.type.dtype is None or before == v.type.dtype:
            continue
        out_dtypes[i], out_legal[i] = before, v.type.dtype
        mask = _wrap_mask(before)  # uint16/uint32 computed widened: the module wraps them itself
        if mask is not None:
            wrapped = cg.fresh(v.name)
            cg.scope.lines.append(f"{wrapped} = torch.bitwise_and({returns[i]}, {mask})")
            returns[i] = wrapped
    in_dtypes = {v.name: str(v.type.dtype) for v in g.inputs
                 if source_in.get(v.name) is not None and v.type.dtype is not None and source_in[v.name] != v.type.dtype}
    buffers = [{"name": name, "shape": [int(d) for d in np.shape(arr)], "dtype": dtype}
               for name, arr, dtype, _ in cg.buffers.values()]
    # (names already identifiers: ``submodule`` sanitized and de-duplicated them)
    modules = [{"name": name, "ctor": ctor} for name, ctor in zip(code_lines(n for n, _, _ in cg.modules),
                                                                  code_lines(c for _, c, _ in cg.modules))]
    class_name = _class_name(model)
    from .nn import channels_last

    # (``--contiguous``: torch's default layout; ``convert`` falls back to it when the
    # channels-last module fails the check)
    nhwc = not ctx.options.get("contiguous") and channels_last(cg.modules)
    legalized = list(ctx.warnings)
    body = free_dead_locals(cg.scope.lines, set(params) | set(returns))
    # a load-time value only a later load-time step reads (an LSTM's dequantized weight, which
    # its flat weights replace) is dropped once ``_prepare`` is done: no second float copy
    read = "\n".join(body)
    transient = [a for a, _, _ in cg.prepared if not re.search(rf"\bself\.{a}\b", read)]
    prepare_lines = cg.prepare.lines + [f"del self.{a}" for a in transient]
    kept = [(n, sh, dt) for n, sh, dt in cg.prepared if n not in transient]
    source = render(NAME, "module.py.j2", class_name=class_name, version=__version__, source=str(model.source),
                    ops=model.op_histogram(), weights_file=WEIGHTS_FILE,
                    helpers=code_lines(helper_source(h) for h in cg.helpers),
                    buffers=buffers, modules=modules, input_names=code_lines(params), output_names=list(io.outputs),
                    body=code_lines(body),
                    prepared=[{"name": n, "shape": sh, "dtype": dt} for n, sh, dt in kept],
                    prepare=code_lines(prepare_lines),
                    returns=code_lines(returns), legalized=legalized, channels_last=nhwc)
    weights = {name: arr for name, arr, _, _ in cg.buffers.values()}
    weights.update({f"{name}.{k}": arr for name, _, params in cg.modules for k, arr in params.items()})
    from translator.compile.quantized import dynamic_range_features

    features = dynamic_range_features(model) | ({CHANNELS_LAST} if nhwc else set())
    return PyTorchArtifact(source, weights, class_name, [v.name for v in g.inputs], [v.name for v in g.outputs],
                           list(ctx.decomposed), legalized, in_dtypes, out_dtypes, out_legal, io.renamed(),
                           list(io.warnings), {"features": sorted(features)} if features else {})
