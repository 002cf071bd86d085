"""IR → a standalone PyTorch module (Python source + a safetensors state dict).

The generated file holds one ``torch.nn.Module`` whose ``forward`` is straight-line torch
code, one line per IR node where possible (``templates/pytorch/module.py.j2``). Per-op
code is a one-line snippet (``templates/pytorch/snippets.yaml``) or a small Python
lowering (``emitters/pytorch_ops.py``); runtime helpers that ONNX semantics need beyond
one line (loops, dynamic slices, ...) are copied from ``templates/pytorch/helpers.py``
into the module, only those used. Constants become buffers loaded from
``weights.safetensors``; constants that steer the code (axes, pads, shapes) are read at
conversion time and written as Python literals, so the module passes ``torch.export``
when the model's shapes are static.

Names from the model become sanitized, de-duplicated identifiers (``render.ident``);
literals pass through ``pyrepr``; model text never reaches the source raw.
"""
from __future__ import annotations

import builtins
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from translator.errors import Unsupported
from translator.ir import Graph, Model, Node, Value
from translator.names import NameSet, io_names
from translator.render import ident
from translator.tables import Tables, load_tables

from . import pytorch_ops as ops
from .pytorch_ops import literal

NAME = "pytorch"
MODULE_FILE = "model.py"
WEIGHTS_FILE = "weights.safetensors"
#: constants written inline (``torch.tensor(...)``): scalars, and integer vectors up to this size
INLINE_MAX = 8
_RESERVED = frozenset(dir(builtins)) | {"os", "math", "torch", "F", "self", "load", "load_file", "SOURCE", "OPS",
                                        "WEIGHTS_FILE"}


# ----------------------------------------------------------------------------- supported set
def supported_ops(tables: Tables | None = None) -> frozenset[str]:
    """Ops this emitter writes itself: a ``native``/``composite`` cell and a snippet or lowering."""
    tables = tables or load_tables()
    have = set(ops.snippets()) | set(ops.LOWERINGS)
    return frozenset(op.id for op in tables.ops.values()
                     if op.id in have and (c := op.backends.get(NAME)) is not None
                     and c.status in ("native", "composite"))


def torch_dtypes(tables: Tables) -> dict[str, str]:
    """dtype id → torch dtype attribute name, for dtypes whose pytorch cell is native."""
    out = {}
    for d in tables.dtypes.values():
        c = d.backends.get(NAME)
        if c is not None and c.status == "native" and c.names:
            out[d.id] = c.names[0].split(".", 1)[1]
    return out


def _accepts(tables: Tables) -> Any:
    """Node check: every tensor the node reads or writes has a torch dtype; the op's own check."""
    legal = torch_dtypes(tables)

    def dtype_of(v: Value) -> str | None:
        t = v.type.elem if v.type.kind != "tensor" and v.type.elem is not None else v.type
        return t.dtype

    def accepts(node: Node) -> str | None:
        for v in list(node.inputs) + list(node.outputs):
            if v is None:
                continue
            d = dtype_of(v)
            if d is not None and d not in legal:
                return f"torch has no {d} tensors (value {v.name!r})"
        check = ops.CHECKS.get(node.op)
        return check(node) if check is not None else None

    return accepts


def register_lowerings(tables: Tables) -> None:
    """An op whose cell carries a ``dtypes`` constraint and that has a Python lowering here is
    also a registered lowering for (op, pytorch) in ``translator.lowering``: the constraint
    describes the torch function the cell names (``torch.quantize_per_tensor`` takes uint8 /
    int8), and a node it turns away is kept when this emitter's own lowering takes it."""
    from translator.lowering import LOWERINGS, register_lowering

    accepts = _accepts(tables)
    for op_id in ops.LOWERINGS:
        op = tables.ops.get(op_id)
        cell = op.backends.get(NAME) if op is not None else None
        if cell is None or cell.status not in ("native", "composite") or cell.dtypes is None \
                or (NAME, op_id) in LOWERINGS:
            continue
        register_lowering(NAME, op_id)(lambda node: accepts(node) is None)


# ----------------------------------------------------------------------------- the artifact
@dataclass
class PyTorchArtifact:
    """The generated module: its source, its weights, and how to save or instantiate it."""

    source: str
    weights: dict[str, np.ndarray]
    class_name: str
    input_names: list[str]
    output_names: list[str]
    decomposed: list[tuple[str, str]] = field(default_factory=list)
    #: dtype legalization (``passes/legalize_dtypes``): the lines it reported, the dtype each
    #: legalized input is fed as, the dtype each legalized output is returned as
    legalized: list[str] = field(default_factory=list)
    input_dtypes: dict[str, str] = field(default_factory=dict)
    output_dtypes: dict[int, str] = field(default_factory=dict)
    #: model input name -> ``forward`` parameter, where they differ (``names.io_names``), and why
    io_names: dict[str, dict[str, str]] = field(default_factory=dict)
    io_warnings: list[str] = field(default_factory=list)
    _cls: Any = field(default=None, repr=False)

    @property
    def warnings(self) -> list[str]:
        """Everything the conversion changed: legalized dtypes, renamed parameters."""
        return list(self.legalized) + list(self.io_warnings)

    @property
    def module_class(self) -> Any:
        """The generated ``nn.Module`` class (the source executed in a fresh namespace)."""
        if self._cls is None:
            import hashlib
            import linecache

            filename = f"<opbridge-pytorch-{hashlib.sha256(self.source.encode()).hexdigest()[:12]}>"
            linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
            namespace: dict[str, Any] = {"__name__": filename.strip("<>").replace("-", "_")}
            exec(compile(self.source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
            self._cls = namespace[self.class_name]
        return self._cls

    def state_dict(self) -> dict[str, Any]:
        return {k: to_torch(v) for k, v in self.weights.items()}

    def instantiate(self) -> Any:
        """A module instance with the weights loaded, in eval mode."""
        model = self.module_class()
        model.load_state_dict(self.state_dict())
        return model.eval()

    def save(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write ``model.py`` and ``weights.safetensors`` into ``out_dir`` atomically: both
        files are written into a temporary folder first and moved in by rename."""
        from safetensors.torch import save as st_save

        out = Path(out_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.parent / f".{out.name}.{os.getpid()}.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        try:
            # the forward() parameters renamed from the model's input names, for a reader of the folder
            meta = {"opbridge.io_names": json.dumps(self.io_names, sort_keys=True)} if self.io_names.get("inputs") else None
            (tmp / WEIGHTS_FILE).write_bytes(st_save({k: v.contiguous() for k, v in self.state_dict().items()},
                                                     metadata=meta))
            (tmp / MODULE_FILE).write_text(self.source, encoding="utf-8")
            if not out.exists():
                os.replace(tmp, out)
            else:
                for name in (WEIGHTS_FILE, MODULE_FILE):
                    os.replace(tmp / name, out / name)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        return out


# ----------------------------------------------------------------------------- value conversion
def to_torch(x: Any) -> Any:
    import torch

    a = np.asarray(x)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.array(a, copy=True).view(np.uint16)).view(torch.bfloat16)
    if a.dtype.kind in "OSUV":
        raise Unsupported("cast", NAME, "unsupported_dtype", f"no torch tensor holds {a.dtype} values")
    return torch.from_numpy(np.array(a, copy=True))


def to_numpy(t: Any) -> Any:
    import torch

    if t is None:
        return None
    if isinstance(t, (list, tuple)):
        return [to_numpy(x) for x in t]
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.contiguous().view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return t.resolve_conj().resolve_neg().numpy().copy()


# ----------------------------------------------------------------------------- code generation
class _Scope:
    """One Python function: its local names and lines."""

    def __init__(self, parent: "_Scope | None", indent: str) -> None:
        self.parent = parent
        self.names: dict[int, str] = {}
        self.used = NameSet(parent.used.taken if parent else ())
        self.lines: list[str] = []
        self.indent = indent

    def lookup(self, v: Value) -> str | None:
        s: _Scope | None = self
        while s is not None:
            if id(v) in s.names:
                return s.names[id(v)]
            s = s.parent
        return None


class Codegen:
    """Turns a lowered IR graph into the body of ``forward`` (and nested bodies)."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.torch_dtype = torch_dtypes(tables)
        self.buffers: dict[int, tuple[str, np.ndarray, str, Value]] = {}
        self.buffer_names = NameSet()
        self.helpers: list[str] = []
        self.scope = _Scope(None, "")
        #: value id → its dtype before legalization (uint16 / uint32 widened)
        self.before_legalization: dict[int, str] = {}
        import torch

        self._module_attrs = frozenset(dir(torch.nn.Module))

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

    def buffer(self, v: Value) -> str:
        if id(v) not in self.buffers:
            root = ident(v.name, prefix="c")
            if root in self._module_attrs or root in _RESERVED:
                root = f"{root}_"
            name = self.buffer_names.take(root)
            dtype = self.dtype_name(v.type.dtype)
            self.buffers[id(v)] = (name, v.const, dtype, v)
        return f"self.{self.buffers[id(v)][0]}"

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
        for dep in ops.helper_deps(name):
            if dep not in self.helpers:
                self.helpers.append(dep)
        return name

    def emit(self, line: str) -> None:
        self.scope.lines.append(self.scope.indent + line)

    # ------------------------------------------------------------------ graphs
    def graph_body(self, g: Graph) -> None:
        for node in g.nodes:
            self.node(node)

    def subgraph(self, g: Graph, base: str) -> str:
        """Emit ``g`` as a nested function (inputs → tuple of outputs); returns its name."""
        fn = self.fresh(f"{base}_fn")
        outer = self.scope
        inner = _Scope(outer, outer.indent + "    ")
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

    def node(self, node: Node) -> None:
        e = ops.NodeEmit(self, node)
        fn = ops.LOWERINGS.get(node.op)
        if fn is not None:
            code = fn(e)
        else:
            snippet = ops.snippets().get(node.op)
            if snippet is None:
                raise Unsupported(node.op, NAME, "unsupported_op", "no snippet or lowering for it", node.name)
            code = e.render(snippet)
        if isinstance(code, str):
            e.assign(code)
        else:
            for line in code:
                self.emit(line)


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


# ----------------------------------------------------------------------------- emit / run
def _class_name(model: Model) -> str:
    base = "".join(part.capitalize() for part in ident(model.graph.name or "model").split("_") if part)
    base = base if base and not base[0].isdigit() else f"M{base}"
    return base if base.endswith("Model") else f"{base}Model"


def emit(model: Model, fold: bool = True, tables: Tables | None = None) -> PyTorchArtifact:
    """IR → ``PyTorchArtifact``. ``fold`` folds shape subgraphs into constants first."""
    from translator import __version__
    from translator.lowering import lower_for
    from translator.passes import fold_constants
    from translator.pipeline import gc_paused, prepare
    from translator.render import code_lines, render

    tables = tables or load_tables()
    prepare(model)
    if fold:
        fold_constants.run(model.graph)
    legalized, in_dtypes, out_dtypes, before = _legalize(model.graph, tables)
    register_lowerings(tables)
    decomposed = lower_for(model.graph, NAME, supported_ops(tables), tables, accepts=_accepts(tables))
    if decomposed:  # the decompositions' new values get their types (the lowerings read them)
        from translator.infer import infer

        infer(model.graph, tables)
    g = model.graph
    with gc_paused():  # a few objects per node, all kept until the source is rendered
        cg = Codegen(tables)
        cg.before_legalization = before
        # parameter names: one rule set for every backend (translator/names.py)
        io = io_names(NAME, [v.name for v in g.inputs], [v.name for v in g.outputs], extra_reserved=_RESERVED)
        params = [cg.bind(v, name) for v, name in zip(g.inputs, io.inputs)]
        cg.graph_body(g)
        returns = [cg.ref(v) for v in g.outputs]
        for i, d in out_dtypes.items():  # uint16/uint32 computed widened: the module wraps them itself
            wrapped = cg.fresh(g.outputs[i].name)
            cg.scope.lines.append(f"{wrapped} = torch.bitwise_and({returns[i]}, {(1 << (16 if d == 'uint16' else 32)) - 1})")
            returns[i] = wrapped
        out_names = list(io.outputs)
        buffers = [{"name": name, "shape": [int(d) for d in np.shape(arr)], "dtype": dtype}
                   for name, arr, dtype, _ in cg.buffers.values()]
        class_name = _class_name(model)
        source = render(NAME, "module.py.j2", class_name=class_name, version=__version__, source=str(model.source),
                        ops=model.op_histogram(), weights_file=WEIGHTS_FILE,
                        helpers=code_lines(ops.helper_source(h) for h in cg.helpers),
                        buffers=buffers, input_names=code_lines(params), output_names=out_names,
                        body=code_lines(free_dead_locals(cg.scope.lines, set(params) | set(returns))),
                        returns=code_lines(returns), legalized=legalized)
    weights = {name: arr for name, arr, _, _ in cg.buffers.values()}
    return PyTorchArtifact(source, weights, class_name, [v.name for v in g.inputs], [v.name for v in g.outputs],
                           decomposed, legalized, in_dtypes, out_dtypes, io.renamed(), list(io.warnings))


#: dtypes torch only stores: computed in the next wider signed type (``passes/legalize_dtypes``)
WIDENED = ("uint16", "uint32")


def _legalize(g: Graph, tables: Tables) -> tuple[list[str], dict[str, str], dict[int, str], dict[int, str]]:
    """uint16 / uint32 values become int32 / int64 (the shared legalization pass, reported);
    returns its report, the legal dtype of each legalized input, the original dtype of each
    legalized output, and the original dtype of every retyped value (by id: saturating ops
    keep the original range). uint64 has no lossless substitute here and is refused."""
    from translator.passes import legalize_dtypes

    dtypes = {v.type.dtype for v in g.values()}
    if not dtypes & set(WIDENED):
        return [], {}, {}, {}
    if "uint64" in dtypes:
        raise Unsupported("cast", NAME, "unsupported_dtype", "uint64 has no lossless substitute on pytorch")
    outs = [v.type.dtype for v in g.outputs]
    before = {id(v): str(v.type.dtype) for v in g.values() if v.type.dtype in WIDENED}
    ins = {v.name for v in g.inputs if v.type.dtype in WIDENED}
    report = legalize_dtypes.run(g, NAME, tables)
    in_dtypes = {v.name: str(v.type.dtype) for v in g.inputs if v.name in ins}
    out_dtypes = {i: str(d) for i, d in enumerate(outs) if d in WIDENED}
    return report, in_dtypes, out_dtypes, before


def runner(artifact: PyTorchArtifact) -> Any:
    """A function feeds → NumPy outputs (graph order) around one instance of the module:
    inputs by graph input name, legalized dtypes converted on the way in and back out."""
    import torch

    from translator.errors import OpbridgeError
    from translator.harness import exact_astype

    model = artifact.instantiate()

    def call(inputs: Mapping[str, Any]) -> list[Any]:
        args = []
        for name in artifact.input_names:
            if name not in inputs:
                raise OpbridgeError("bad_model", f"no value fed for input {name!r}")
            x = inputs[name]
            if name in artifact.input_dtypes and x is not None:
                x = np.asarray(x).astype(artifact.input_dtypes[name])
            args.append([to_torch(t) for t in x] if isinstance(x, list) else None if x is None else to_torch(x))
        with torch.no_grad():
            outs = [to_numpy(o) for o in model(*args)]
        for i, d in artifact.output_dtypes.items():  # documented widening, back only when exact
            outs[i] = exact_astype(outs[i], d)
        return outs

    return call


def run(artifact: PyTorchArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    """Run the generated module eagerly under ``torch.no_grad()``; NumPy outputs in graph order."""
    return runner(artifact)(inputs)
