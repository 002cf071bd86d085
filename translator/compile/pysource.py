"""What the backends that write Python source share (PyTorch's ``model.py``, StableHLO's JAX
``model.py``): a function scope of sanitized local names, and the runtime helpers a template
folder provides (``templates/<backend>/helpers.py``), copied into a module only when used.
"""
from __future__ import annotations

import ast
from functools import lru_cache
from typing import TYPE_CHECKING

from ..ir.names import NameSet

if TYPE_CHECKING:
    from ..ir.graph import Value


class Scope:
    """One Python function: its local names and lines (``parent``: the enclosing function)."""

    def __init__(self, parent: "Scope | None", indent: str) -> None:
        self.parent = parent
        self.names: dict[int, str] = {}
        self.used = NameSet(parent.used.taken if parent else ())
        self.lines: list[str] = []
        self.indent = indent

    def lookup(self, v: "Value") -> str | None:
        s: Scope | None = self
        while s is not None:
            if id(v) in s.names:
                return s.names[id(v)]
            s = s.parent
        return None


@lru_cache(maxsize=None)
def helpers(*paths: str) -> dict[str, tuple[str, tuple[str, ...]]]:
    """helper name → (source, helpers it calls), parsed from the helpers files at ``paths``
    (an earlier file's function wins a name; a helper may call one of a later file)."""
    texts = []
    funcs: dict = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for n in ast.parse(text).body:
            if isinstance(n, ast.FunctionDef) and n.name not in funcs:
                funcs[n.name] = n
                texts.append((n.name, text))
    source = dict(texts)
    out = {}
    for name, fn in funcs.items():
        calls = sorted({n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in funcs and n.id != name})
        out[name] = (ast.get_source_segment(source[name], fn) or "", tuple(calls))
    return out


def helper_deps(path: "str | tuple[str, ...]", name: str) -> list[str]:
    """``name`` and every helper it needs from the file(s) at ``path``, dependencies first."""
    paths = (path,) if isinstance(path, str) else tuple(path)
    table = helpers(*paths)
    if name not in table:
        raise KeyError(f"no helper {name!r} in {', '.join(paths)}")
    order: list[str] = []

    def visit(n: str) -> None:
        for d in table[n][1]:
            visit(d)
        if n not in order:
            order.append(n)

    visit(name)
    return order


def shared_helpers_path() -> str:
    """``templates/python/helpers.py``: NumPy-only helpers every Python-source backend may copy."""
    import os

    from ..table import paths

    return os.path.join(paths.templates_dir(), "python", "helpers.py")


# ----------------------------------------------------------------------------- a snippet-driven writer
class SourceCodegen:
    """Turns a lowered IR graph into the lines of one Python function (and nested functions),
    each node by its op's rule (``@rule`` of the backend) or the snippet of its cell. A backend
    sets ``name``, ``reserved`` (names its module binds), ``helpers_path`` (its template
    helpers, which may call the shared NumPy ones of ``shared_helpers_path``) and implements ``dtype_code`` and ``const_code`` (how a constant is read)."""

    name = ""
    reserved: frozenset[str] = frozenset()

    def __init__(self, tables, columns: tuple[str, ...]) -> None:
        from .registry import rules

        self.tables = tables
        self.columns = columns
        self.rules = rules(columns)
        self.helpers: list[str] = []
        self.scope = Scope(None, "")
        #: node name → why a rule could not write it (reported to the pipeline together)
        self.refused: dict = {}
        #: the weights: id(value) → (its key in the module's ``params`` dict, its array)
        self.params: dict = {}
        self.param_names = NameSet()

    def param(self, v: "Value") -> str:
        """``params[<key>]``: constant ``v`` as a weight the module is given (the key sanitized)."""
        import numpy as np

        from .render import ident, literal

        if id(v) not in self.params:
            self.params[id(v)] = (self.param_names.take(ident(v.name, prefix="c")), np.asarray(v.const))
        return f"params[{literal(self.params[id(v)][0])}]"

    # ------------------------------------------------------------------ backend hooks
    def helpers_path(self) -> str:
        raise NotImplementedError

    def dtype_code(self, dtype: str | None) -> str:
        raise NotImplementedError

    def const_code(self, v: "Value") -> str:
        raise NotImplementedError

    def finish_snippet(self, code: str) -> str:
        """A filled-in snippet as the module writes it (a backend renames the proof's helpers)."""
        return code

    # ------------------------------------------------------------------ names
    def fresh(self, base: str) -> str:
        from .render import ident

        root = ident(base)
        if root in self.reserved:
            root = f"{root}_"
        return self.scope.used.take(root)

    def bind(self, v: "Value", name: str | None = None) -> str:
        if name is None:
            name = self.fresh(v.name)
        else:
            self.scope.used.add(name)
        self.scope.names[id(v)] = name
        return name

    def ref(self, v: "Value") -> str:
        """The expression that reads value ``v`` in the current scope."""
        from ..table.errors import Unsupported

        name = self.scope.lookup(v)
        if name is not None:
            return name
        if v.is_const:
            return self.const_code(v)
        raise Unsupported("identity", self.name, "verifier", f"value {v.name!r} is read before it is computed")

    def helper(self, name: str) -> str:
        for dep in helper_deps((self.helpers_path(), shared_helpers_path()), name):
            if dep not in self.helpers:
                self.helpers.append(dep)
        return name

    def helper_sources(self) -> list[str]:
        table = helpers(self.helpers_path(), shared_helpers_path())
        return [table[h][0] for h in self.helpers]

    def emit(self, line: str) -> None:
        self.scope.lines.append(self.scope.indent + line)

    # ------------------------------------------------------------------ graphs
    def graph_body(self, g) -> None:
        for node in g.nodes:
            self.node(node)

    def subgraph(self, g, base: str) -> str:
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

    def code(self, e: "SourceEmit") -> "str | list[str]":
        r = self.rules.get(e.node.op)
        return r.fn(e) if r is not None else self.snippet(e)

    def snippet(self, e: "SourceEmit") -> str:
        from ..table import snippets
        from .registry import snippet_of

        text = snippet_of(e.op, self.columns)
        if text is None:
            raise e.refuse("unsupported_op", "no snippet or rule for it")
        try:
            code = self.finish_snippet(snippets.expand(text, e.node, e.op, SourceBinder(e)))
        except snippets.SnippetError as exc:
            raise e.refuse("unsupported_dtype", str(exc)) from None
        declared = len(e.sig.outputs) if e.sig is not None else 0
        if 0 < len(e.node.outputs) < declared:  # a model may leave trailing optional outputs out
            code = f"{self.helper('_first_outputs')}({code}, {len(e.node.outputs)})"
        return code

    def node(self, node) -> None:
        from ..table.errors import Unsupported

        e = SourceEmit(self, node)
        start = len(self.scope.lines)
        try:
            code = self.code(e)
        except Unsupported as exc:
            # reported to the pipeline with the others; the outputs get names so the rest of the
            # graph is still written and its refusals found in the same pass
            self.refused.setdefault(node.name, refusal(self.name, exc))
            del self.scope.lines[start:]
            _ = e.outs
            return
        if isinstance(code, str):
            e.assign(code)
        else:
            for line in code:
                self.emit(line)


class SourceEmit:
    """What a rule sees of one node: expressions for its inputs, names for its outputs,
    attributes with the signature's defaults, constant values."""

    def __init__(self, cg: SourceCodegen, node) -> None:
        self.cg = cg
        self.node = node
        self.op = cg.tables.ops[node.op]
        self.sig = self.op.signature
        self._outs: list[str] | None = None

    def v(self, i: int):
        return self.node.inputs[i] if i < len(self.node.inputs) else None

    def x(self, i: int) -> str:
        v = self.v(i)
        if v is None:
            raise self.refuse("verifier", f"input {i} is missing")
        return self.cg.ref(v)

    def const(self, i: int):
        import numpy as np

        v = self.v(i)
        return None if v is None or not v.is_const else np.asarray(v.const)

    def attr(self, name: str):
        if name in self.node.attrs:
            return self.node.attrs[name]
        a = self.sig.attribute(name) if self.sig is not None else None
        if a is None:
            return None
        d = a.default
        return list(d) if isinstance(d, tuple) else d

    def dtype_id(self, i: int) -> str | None:
        v = self.v(i)
        return None if v is None else v.type.dtype

    @property
    def outs(self) -> list[str]:
        if self._outs is None:
            self._outs = [self.cg.bind(v) for v in self.node.outputs]
        return self._outs

    def out(self, j: int = 0) -> str:
        return self.outs[j]

    def assign(self, code: str) -> None:
        outs = self.outs
        self.cg.emit(f"{', '.join(outs) if len(outs) != 1 else outs[0]} = {code}")

    def tmp(self, base: str) -> str:
        return self.cg.fresh(base)

    def helper(self, name: str) -> str:
        return self.cg.helper(name)

    def body(self, g, base: str) -> str:
        return self.cg.subgraph(g, base)

    def snippet(self) -> str:
        return self.cg.snippet(self)

    def refuse(self, code: str, detail: str):
        from ..table.errors import Unsupported

        return Unsupported(self.node.op, self.cg.name, code, detail, self.node.name)


class SourceBinder:
    """``translator.table.snippets.Binder``: inputs as expressions, attributes as Python
    literals, dtypes in the backend's spelling."""

    def __init__(self, e: SourceEmit) -> None:
        self.e = e

    def value(self, v) -> str:
        return "None" if v is None else self.e.cg.ref(v)

    def attr(self, name: str, value) -> str:
        from .render import literal

        return literal(list(value) if isinstance(value, tuple) else value)

    def dtype(self, dtype_id: str) -> str:
        return self.e.cg.dtype_code(dtype_id)


def refusal(backend: str, exc):
    """An ``Unsupported`` raised while writing code as the pipeline's ``Refusal``."""
    from .registry import Refusal

    detail = exc.detail[len(backend) + 2:] if exc.detail.startswith(f"{backend}: ") else exc.detail
    return Refusal(exc.code, detail)


def array_refusal(node, dtypes, framework: str, holder: str):
    """The first of the node's values the generated module cannot hold: not a tensor (``holder``
    takes tensors only), or of a dtype ``framework`` has no arrays of; None when all fit."""
    from .registry import Refusal

    for v in list(node.inputs) + list(node.outputs):
        if v is None:
            continue
        if v.type.kind != "tensor":
            return Refusal("unsupported_type", f"value {v.name!r} is a {v.type.kind}: {holder} takes tensors only")
        if v.type.dtype is not None and v.type.dtype not in dtypes:
            return Refusal("unsupported_dtype", f"{framework} has no {v.type.dtype} arrays (value {v.name!r})")
    return None


def resize_call(e: SourceEmit, host: str) -> str:
    """ONNX Resize as a call of the module's ``_resize`` helper (over the shared ``_resize_plan``:
    nearest, linear, cubic; every coordinate transformation; keep_aspect_ratio_policy), roi,
    scales and sizes read as NumPy values through ``host`` (``np.asarray``, ``np.array``);
    antialias and other modes are refused with the reason."""
    from .render import literal

    if e.attr("antialias"):
        raise e.refuse("unsupported_attr", "antialias=1 (a downsampling filter) is not written")
    mode = e.attr("mode") or "nearest"
    if mode not in ("nearest", "linear", "cubic"):
        raise e.refuse("unsupported_attr", f"mode={mode!r}")
    values = ["None" if e.v(i) is None else f"{host}({e.x(i)})" for i in (1, 2, 3)]
    axes = e.attr("axes")
    args = [e.x(0), *values, literal(list(axes) if axes else None), literal(mode),
            literal(e.attr("coordinate_transformation_mode") or "half_pixel"),
            literal(e.attr("nearest_mode") or "round_prefer_floor"), literal(float(e.attr("cubic_coeff_a"))),
            literal(int(e.attr("exclude_outside") or 0)), literal(float(e.attr("extrapolation_value") or 0.0)),
            literal(e.attr("keep_aspect_ratio_policy") or "stretch")]
    return f"{e.helper('_resize')}({', '.join(args)})"
