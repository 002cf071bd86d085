"""IR → OpenVINO: a standalone builder script over ``openvino.opset16`` + weights, and IR.

``emit(model)`` lowers the IR for OpenVINO (native → Python lowering → table
decomposition → ``Unsupported``) and renders ``templates/openvino/builder.py.j2``: one
Python function per graph (the main graph and each If/Loop/Scan body) whose body is
straight-line code, one line per op from ``templates/openvino/snippets.yaml`` or a few
lines from a Python lowering in ``emitters/openvino_ops.py``. Weights go to a ``.npz``
(read back with ``allow_pickle=False``); small integer and finite float constants are
written inline. The artifact's ``ov.Model`` is built by executing that very script, so
what runs is what was written.

``save(artifact, folder)`` writes ``builder.py``, ``weights.npz``, ``model.xml`` and
``model.bin`` atomically (``openvino.save_model(..., compress_to_fp16=False)``: its
default stores float32 weights as float16). ``run`` compiles on the CPU plugin with
``INFERENCE_PRECISION_HINT=f32``: on CPUs with AVX512_BF16 the plugin otherwise infers
in bfloat16 (see docs/BACKENDS.md).
"""
from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from translator.errors import OpbridgeError, Unsupported
from translator.ir import Graph, Model, Node, TensorType, Value
from translator.names import NameSet
from translator.render import ident, pyrepr
from translator.tables import Tables, load_tables
from translator.pipeline import paused_gc

NAME = "openvino"
#: the CPU plugin's compile configuration used by ``run`` (and by the openvino_fe peer)
CPU_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
#: element types the Python API cannot feed or read: inputs/outputs cross the model
#: boundary as the wider type and are converted inside the graph
BOUNDARY = {"int4": "int8", "uint4": "uint8"}
#: integer/bool constants up to this many elements are written inline, and finite floats up to INLINE_FLOATS
INLINE_MAX = 16
INLINE_FLOATS = 4
#: names the builder script defines itself; model names never shadow them
RESERVED = frozenset({"ov", "ops", "ops17", "np", "w", "sys", "Path", "build", "main", "param", "port", "result",
                      "stable_names", "constant_bits"})
_PLACEHOLDER = re.compile(r"\{([@$]?)([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}")


# ----------------------------------------------------------------------------- table data
@lru_cache(maxsize=None)
def ov_types() -> dict[str, str]:
    """dtype id → OpenVINO element type name (``f32``), from the openvino column of dtypes.yaml."""
    tables = load_tables()
    out = {}
    for d in tables.dtypes.values():
        cell = d.backends.get(NAME)
        if cell is not None and cell.status == "native" and cell.names:
            out[d.id] = cell.names[0].rsplit("::", 1)[-1]
    out.pop("string", None)  # the CPU plugin's string tensors crash on release: refused
    return out


def column(tables: Tables) -> dict[str, str]:
    """op id → status of the openvino column of optable.yaml."""
    return {op.id: c.status for op in tables.ops.values() if (c := op.backends.get(NAME)) is not None}


@lru_cache(maxsize=None)
def snippets() -> dict[str, str]:
    """op id → one-line expression template (``templates/openvino/snippets.yaml``)."""
    import yaml

    from translator import paths

    text = Path(paths.templates_dir(), NAME, "snippets.yaml").read_text()
    data = yaml.safe_load(text) or {}
    return {str(k): str(v) for k, v in data.items()}


def handled_ops() -> frozenset[str]:
    from . import openvino_ops

    return frozenset(snippets()) | frozenset(openvino_ops.LOWERINGS)


def supported_ops(tables: Tables | None = None) -> frozenset[str]:
    """Ops emitted directly: a native/composite cell and a snippet or Python lowering."""
    tables = tables or load_tables()
    col = column(tables)
    return frozenset(op for op in handled_ops() if col.get(op) in ("native", "composite"))


# ----------------------------------------------------------------------------- code generation
def plain(v: Any) -> Any:
    """Attribute values → plain Python data (what ``pyrepr`` renders)."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


class _Namer:
    """Model names → unique Python identifiers (sanitized by ``render.ident``)."""

    def __init__(self) -> None:
        self.used = NameSet(RESERVED)

    def fresh(self, base: str) -> str:
        return self.used.take(ident(base, "v"))


@dataclass
class _Function:
    """One builder function: ``def name(w): body; return ret`` (``ret`` builds an ``ov.Model``)."""

    name: str
    body: list[str] = field(default_factory=list)
    ret: str = "None"
    doc: str = ""
    consts: dict[str, str] = field(default_factory=dict)


class Emission:
    """State of one emission: names, weights, rendered functions."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.types = ov_types()
        self.names = _Namer()
        self.weights: dict[str, np.ndarray] = {}
        self.functions: list[_Function] = []
        self.uses_opset17 = False
        self.snippets = snippets()
        from . import openvino_ops

        self.lowerings = openvino_ops.LOWERINGS

    # -------------------------------------------------------------- graphs
    def graph_function(self, g: Graph, fname: str, params: list[Value], doc: str,
                       param_types: dict[int, TensorType] | None = None, squeeze_in: dict[int, int] | None = None,
                       unsqueeze_out: dict[int, int] | None = None) -> _Function:
        """Render ``g`` as a function returning an ``ov.Model`` whose parameters are ``params``.

        ``params`` are the values the function reads from outside (graph inputs and, for
        subgraph bodies, captured values of enclosing graphs), in order. For bodies of
        loops: ``param_types`` overrides a parameter's declared type, ``squeeze_in``
        declares parameter i with a 1 inserted at an axis (a slice) and squeezes it, and
        ``unsqueeze_out`` adds a 1-axis to output i (a slice to concatenate).
        """
        fn = _Function(self.names.fresh(fname), doc=doc)
        self.functions.append(fn)
        env: dict[int, str] = {}
        pvars = []
        for i, v in enumerate(params):
            t = (param_types or {}).get(i, v.type)
            dt = t.dtype or self.dtype_of(v)
            outer = BOUNDARY.get(dt, dt)
            shape = self.shape_literal(t)
            axis = (squeeze_in or {}).get(i)
            if axis is not None and t.shape is not None:
                dims = [d if isinstance(d, int) else -1 for d in t.shape]
                shape = pyrepr(dims[:axis] + [1] + dims[axis:])
            var = self.names.fresh(v.name)
            pvars.append(var)
            fn.body.append(f"{var} = param({shape}, {self.ty(outer)}, {pyrepr(v.name)})")
            if outer != dt:
                var = self.names.fresh(v.name)
                fn.body.append(f"{var} = ops.convert({pvars[-1]}, {self.ty(dt)})")
            if axis is not None:
                sq = self.names.fresh(v.name)
                ax = self.constant(np.asarray([axis], np.int64), "int64", fn, "axis")
                fn.body.append(f"{sq} = ops.squeeze({var}, {ax})")
                var = sq
            env[id(v)] = var
        self.fill(g, fn, env)
        outs = []
        for i, v in enumerate(g.outputs):
            var, dt = self.value(v, fn, env), self.dtype_of(v)
            if dt in BOUNDARY:
                var = f"ops.convert({var}, {self.ty(BOUNDARY[dt])})"
            axis = (unsqueeze_out or {}).get(i)
            if axis is not None:
                var = f"ops.unsqueeze({var}, {self.constant(np.asarray([axis], np.int64), 'int64', fn, 'axis')})"
            outs.append(f"result({var}, {pyrepr(v.name)})")
        fn.ret = f"ov.Model([{', '.join(outs)}], [{', '.join(pvars)}], {pyrepr(g.name or fname)})"
        # keep callees (bodies rendered while filling) before their caller
        self.functions.remove(fn)
        self.functions.append(fn)
        return fn

    def fill(self, g: Graph, fn: _Function, env: dict[int, str]) -> None:
        for node in g.nodes:
            self.node(node, fn, env)

    def node(self, node: Node, fn: _Function, env: dict[int, str]) -> None:
        gen = Gen(self, fn, env, node)
        if node.outputs and all(_is_empty(v.type) for v in node.outputs):
            # every output is statically empty: a constant (the CPU plugin mishandles
            # some ops on zero-sized tensors, e.g. comparisons, and crashes the process)
            from translator.dtypes import numpy_dtype

            for i, v in enumerate(node.outputs):
                empty = np.zeros(tuple(int(d) for d in v.type.shape or ()), dtype=numpy_dtype(self.dtype_of(v)))
                gen.bind(i, self.constant(empty, v.type.dtype, fn, v.name))
            return
        low = self.lowerings.get(node.op)
        if low is not None:
            low.fn(gen, node)
        elif node.op in self.snippets:
            gen.out(0, gen.expand(self.snippets[node.op]))
        else:
            raise Unsupported(node.op, NAME, "unsupported_op", "no snippet or lowering after lowering", node.name)
        for i, v in enumerate(node.outputs):
            if id(v) not in env and (v.uses or v in (node.graph.outputs if node.graph else [])):
                raise Unsupported(node.op, NAME, "unsupported_attribute_value",
                                  f"output {i} ({v.name!r}) is not produced by the OpenVINO lowering", node.name)

    # -------------------------------------------------------------- values
    def value(self, v: Value, fn: _Function, env: dict[int, str]) -> str:
        var = env.get(id(v))
        if var is not None:
            return var
        if v.is_const:
            var = self.constant(np.asarray(v.const), v.type.dtype, fn, v.name)
            env[id(v)] = var
            return var
        raise OpbridgeError("verifier", f"value {v.name!r} is used before it is computed")

    def dtype_of(self, v: Value) -> str:
        d = v.type.dtype
        if v.type.kind != "tensor":
            raise Unsupported("sequence", NAME, "unsupported_dtype", f"{v.name!r} is a {v.type.kind}, not a tensor")
        if d is None:
            raise Unsupported("parameter", NAME, "dynamic_shape", f"the element type of {v.name!r} is unknown")
        return d

    def ty(self, dtype: str) -> str:
        t = self.types.get(dtype)
        if t is None:
            raise Unsupported("cast", NAME, "unsupported_dtype", f"OpenVINO has no element type for {dtype}")
        return f"ov.Type.{t}"

    @staticmethod
    def shape_literal(t: TensorType) -> str:
        if t.shape is None:
            return "None"
        return pyrepr([d if isinstance(d, int) else -1 for d in t.shape])

    def constant(self, arr: np.ndarray, dtype: str | None, fn: _Function, hint: str) -> str:
        """Emit a constant; returns its variable. Small ones are literals (shared within a
        function), large ones are weights read from ``w``."""
        from translator.dtypes import dtype_id

        dtype = dtype or dtype_id(arr.dtype)
        ty = self.ty(dtype)
        kind, plain = arr.dtype.kind, arr.dtype.name in _PLAIN_NP
        code = None
        if plain and (kind in "biu" and arr.size <= INLINE_MAX or kind == "f" and arr.size <= INLINE_FLOATS):
            if kind != "f" or np.all(np.isfinite(arr)):
                code = f"ops.constant(np.array({pyrepr(_literal(arr))}, dtype=np.{arr.dtype.name}), {ty})"
                if arr.size == 0:  # an empty list loses the shape
                    code = f"ops.constant(np.zeros({pyrepr(list(arr.shape))}, dtype=np.{arr.dtype.name}), {ty})"
            elif arr.size == 1:  # nan / ±inf, spelled by NumPy name
                word, shape = _float_words(arr)[0], pyrepr(list(arr.shape))
                code = f"ops.constant(np.full({shape}, {word}, dtype=np.{arr.dtype.name}), {ty})"
        elif arr.dtype.name == "bfloat16" and arr.size <= INLINE_FLOATS and np.all(np.isfinite(arr.astype(np.float32))):
            # a type NumPy lacks: its values (exact in float32) straight into an OpenVINO constant
            code = f"ov.op.Constant({ty}, ov.Shape({pyrepr(list(arr.shape))}), [{', '.join(_float_words(arr))}])"
        if code is not None:
            known = fn.consts.get(code)
            if known is None:
                known = fn.consts[code] = self.names.fresh(hint)
                fn.body.append(f"{known} = {code}")
            return known
        var = self.names.fresh(hint)
        key = self.names.fresh(f"w_{hint}")
        if plain:
            self.weights[key] = np.array(arr, order="C")
            fn.body.append(f"{var} = ops.constant(w[{pyrepr(key)}], {ty})")
        elif arr.dtype.name == "bfloat16":  # stored as its raw bits
            self.weights[key] = np.array(arr, order="C").view(np.uint16)
            fn.body.append(f"{var} = constant_bits(w[{pyrepr(key)}], {ty})")
        elif arr.dtype.name.startswith(("int", "uint")):  # int4 / uint4: held as int64, converted exactly
            wide = np.int64 if arr.dtype.name.startswith("int") else np.uint64
            self.weights[key] = np.asarray(arr, dtype=wide)
            fn.body.append(f"{var} = ops.convert(ops.constant(w[{pyrepr(key)}]), {ty})")
        else:
            raise Unsupported("constant", NAME, "unsupported_dtype", f"constant {hint!r} of dtype {arr.dtype}")
        return var


def _float_words(arr: np.ndarray) -> list[str]:
    """Each value as Python source: its shortest float32 literal, or np.nan / np.inf / -np.inf."""
    out = []
    for x in np.asarray(arr, dtype=np.float32).reshape(-1).tolist():
        if x != x:
            out.append("np.nan")
        elif x in (float("inf"), float("-inf")):
            out.append("np.inf" if x > 0 else "-np.inf")
        else:
            out.append(pyrepr(float(str(np.float32(x)))))
    return out


def _literal(arr: np.ndarray) -> Any:
    """Array → nested lists of Python numbers; floats as their shortest repr in the array's dtype."""
    if arr.dtype.kind != "f" or arr.dtype == np.float64:
        return arr.tolist()
    flat = [float(str(x)) for x in arr.reshape(-1)]
    return np.asarray(flat, dtype=np.float64).reshape(arr.shape).tolist() if arr.ndim else flat[0]


def captured(g: Graph) -> list[Value]:
    """Non-constant values a subgraph (or its nested subgraphs) reads from enclosing graphs."""
    inside: set[int] = set()

    def mark(h: Graph) -> None:
        inside.update(id(v) for v in h.inputs)
        inside.update(id(v) for v in h.constants.values())
        for n in h.nodes:
            inside.update(id(v) for v in n.outputs)
            for sub in n.subgraphs():
                mark(sub)

    mark(g)
    out: list[Value] = []
    seen: set[int] = set()

    def visit(v: Value | None) -> None:
        if v is not None and id(v) not in inside and id(v) not in seen and not v.is_const:
            seen.add(id(v))
            out.append(v)

    def walk(h: Graph) -> None:
        for n in h.nodes:
            for v in n.inputs:
                visit(v)
            for sub in n.subgraphs():
                walk(sub)
        for v in h.outputs:
            visit(v)

    walk(g)
    return out


def _is_empty(t: TensorType) -> bool:
    return t.kind == "tensor" and t.dtype is not None and t.is_static and 0 in (t.shape or ())


_PLAIN_NP = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                       "float16", "float32", "float64"})


class Gen:
    """What a lowering sees: the node's inputs as variables, attributes, and emit helpers.

    Generated code is built only from variables (``Emission.names``) and literals rendered
    by ``lit`` (``render.pyrepr``): no text from the model reaches the script raw.
    """

    def __init__(self, em: Emission, fn: _Function, env: dict[int, str], node: Node) -> None:
        self.em, self.fn, self.env, self.node = em, fn, env, node
        self.op = em.tables.ops.get(node.op)
        self.hint = node.outputs[0].name if node.outputs else node.op

    # -------------------------------------------------------------- inputs and attributes
    def x(self, i: int) -> str | None:
        """Variable of input ``i`` (None when omitted)."""
        ins = self.node.inputs
        if i >= len(ins) or ins[i] is None:
            return None
        return self.em.value(ins[i], self.fn, self.env)

    def xs(self, start: int = 0) -> list[str]:
        return [v for i in range(start, len(self.node.inputs)) if (v := self.x(i)) is not None]

    def v(self, i: int) -> Value | None:
        ins = self.node.inputs
        return ins[i] if i < len(ins) else None

    def t(self, i: int = 0) -> TensorType:
        v = self.v(i)
        return v.type if v is not None else TensorType(None)

    def dtype(self, i: int = 0) -> str:
        v = self.v(i)
        if v is None:
            raise self.refuse("verifier", f"input {i} is missing")
        return self.em.dtype_of(v)

    def rank(self, i: int = 0) -> int:
        r = self.t(i).rank
        if r is None:
            raise self.refuse("dynamic_shape", f"the rank of input {i} is unknown")
        return r

    def cval(self, i: int) -> np.ndarray | None:
        """The value of input ``i`` when it is a constant."""
        v = self.v(i)
        return None if v is None or not v.is_const else np.asarray(v.const)

    def need_const(self, i: int, what: str) -> np.ndarray:
        c = self.cval(i)
        if c is None:
            raise self.refuse("requires_constant_input", f"{what} (input {i}) must be a constant")
        return c

    def a(self, name: str, default: Any = None) -> Any:
        if name in self.node.attrs:
            return plain(self.node.attrs[name])
        if self.op is not None and self.op.signature is not None:
            at = self.op.signature.attribute(name)
            if at is not None and at.default is not None:
                return plain(at.default)
        return default

    def out_dtype(self, i: int = 0) -> str:
        return self.em.dtype_of(self.node.outputs[i])

    # -------------------------------------------------------------- emitting
    @staticmethod
    def lit(v: Any) -> str:
        return pyrepr(plain(v))

    def ty(self, dtype: str) -> str:
        return self.em.ty(dtype)

    def const(self, value: Any, dtype: str) -> str:
        from translator.dtypes import numpy_dtype

        return self.em.constant(np.asarray(value, dtype=numpy_dtype(dtype)), dtype, self.fn, f"{self.hint}_c")

    def let(self, expr: str, hint: str | None = None) -> str:
        var = self.em.names.fresh(hint or self.hint)
        self.stmt(f"{var} = {expr}")
        return var

    def out(self, i: int, expr: str) -> None:
        v = self.node.outputs[i]
        var = self.em.names.fresh(v.name)
        self.stmt(f"{var} = {expr}")
        self.env[id(v)] = var

    def bind(self, i: int, var: str) -> None:
        """Output ``i`` is the existing variable ``var``."""
        self.env[id(self.node.outputs[i])] = var

    def outs(self, var: str) -> None:
        """Bind every output of the node to the outputs of the OpenVINO node ``var``."""
        for i in range(len(self.node.outputs)):
            self.out(i, f"{var}.output({i})")

    def expand(self, snippet: str) -> str:
        """Fill a snippet's placeholders (see the header of templates/openvino/snippets.yaml)."""
        sig = self.op.signature if self.op is not None else None
        ports = list(sig.inputs) if sig is not None else []

        def sub(m: re.Match[str]) -> str:
            kind, name, dots = m.group(1), m.group(2), m.group(3)
            if kind == "@":
                return self.lit(self.a(name))
            if kind == "$":
                if name == "T":
                    return self.ty(self.dtype(0))
                if name == "OT":
                    return self.ty(self.out_dtype(0))
                raise ValueError(f"unknown snippet placeholder ${name}")
            k = 0
            for p in ports:
                if p.name == name:
                    if p.variadic or dots:
                        return ", ".join(self.xs(k))
                    var = self.x(k)
                    if var is None:
                        raise self.refuse("verifier", f"input {name!r} is omitted")
                    return var
                k += 1
            raise ValueError(f"snippet for {self.node.op}: no input named {name!r}")

        return _PLACEHOLDER.sub(sub, snippet)

    def refuse(self, code: str, detail: str) -> Unsupported:
        return Unsupported(self.node.op, NAME, code, detail, self.node.name)

    def body(self, g: Graph, what: str, params: list[Value], **options: Any) -> str:
        """Render a subgraph as its own builder function; returns a variable holding its ``ov.Model``."""
        fn = self.em.graph_function(g, f"{self.hint}_{what}", params, f"the {what} of a {self.node.op} node", **options)
        return self.let(f"{fn.name}(w)", f"{self.hint}_{what}")

    def var_of(self, v: Value) -> str:
        return self.em.value(v, self.fn, self.env)

    def stmt(self, code: str) -> None:
        """A line of the builder function (``let``/``out`` go through here too)."""
        if "ops17." in code:  # the few ops only openvino.opset17 holds
            self.em.uses_opset17 = True
        self.fn.body.append(code)


# ----------------------------------------------------------------------------- the artifact
@dataclass
class Artifact:
    """A rendered builder script, its weights, and (built on demand) the ``ov.Model``."""

    source: str
    weights: dict[str, np.ndarray]
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    _model: Any = None
    _compiled: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = build_from_source(self.source, self.weights)
        return self._model

    def save(self, folder: str | os.PathLike[str]) -> Path:
        return save(self, folder)


def ov_message(exc: BaseException) -> str:
    """The informative line of an OpenVINO exception (not its 'Exception from file:line' chain)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith("Exception from ")]
    text = " ".join(useful) or (lines[0] if lines else type(exc).__name__)
    return text[:300]


def build_from_source(source: str, weights: Mapping[str, np.ndarray]) -> Any:
    """Execute a builder script (as a module, not as __main__) and call its ``build(w)``."""
    ns: dict[str, Any] = {"__name__": "opbridge_openvino_builder"}
    exec(compile(source, "<builder.py>", "exec"), ns)  # noqa: S102 - our own rendered script
    try:
        return ns["build"](dict(weights))
    except RuntimeError as exc:  # OpenVINO's shape/type validation while building
        raise OpbridgeError("runtime_error", f"OpenVINO rejected the built model: {ov_message(exc)}") from None


def _node_accepts(tables: Tables, types: Mapping[str, str]) -> Callable[[Node], str | None]:
    """lower_for's node check (after the cell's dtype constraint): element types OpenVINO has,
    then the op's own check.

    A failed op check stops conversion with its reason code unless the op has a table
    decomposition that applies (then the node is decomposed instead).
    """
    from translator.lowering import applies

    from . import openvino_ops

    def accepts(node: Node) -> str | None:
        for v in list(node.inputs) + list(node.outputs):
            if v is None:
                continue
            if v.type.kind != "tensor":
                return f"OpenVINO has no {v.type.kind} values ({v.name!r})"
            if v.type.dtype is not None and v.type.dtype not in types:
                return f"OpenVINO has no element type for {v.type.dtype} ({v.name!r})"
        low = openvino_ops.LOWERINGS.get(node.op)
        why = low.check(node) if low is not None and low.check is not None else None
        if why is None:
            return None
        code, detail = why if isinstance(why, tuple) else ("unsupported_attribute_value", why)
        op = tables.ops.get(node.op)
        if op is None or not op.decomposition or applies(op, node) is not None:
            raise Unsupported(node.op, NAME, code, detail, node.name)
        return detail  # the table decomposition takes over

    return accepts


@paused_gc
def emit(model: Model, tables: Tables | None = None) -> Artifact:
    """IR → builder script + weights, and the ``ov.Model`` that script builds (``Artifact``)."""
    from translator.infer import infer
    from translator.lowering import lower_for
    from translator.passes import fold_constants
    from translator.pipeline import prepare
    from translator.render import Code, code_lines, render

    tables = tables or load_tables()
    prepare(model)
    fold_constants.run(model.graph)  # shape arithmetic on static shapes becomes constants
    types = ov_types()
    lower_for(model.graph, NAME, supported_ops(tables), tables, accepts=_node_accepts(tables, types))
    g = model.graph
    infer(g, tables)  # types of the values decompositions introduced
    em = Emission(tables)
    for v in g.inputs:
        em.ty(em.dtype_of(v))
    main = em.graph_function(g, "build_main", list(g.inputs), "the model")
    functions = [{"name": Code(f.name), "doc": f.doc, "body": code_lines(f.body), "ret": Code(f.ret)}
                 for f in em.functions]
    source = render(NAME, "builder.py.j2", source=model.source or "<ir>", source_format=model.source_format,
                    functions=functions, main=Code(main.name), opset17=em.uses_opset17,
                    ops=model.op_histogram())
    inputs = [(v.name, em.dtype_of(v)) for v in g.inputs]
    outputs = [(v.name, em.dtype_of(v)) for v in g.outputs]
    artifact = Artifact(source, em.weights, inputs, outputs)
    artifact.model  # noqa: B018 - build now: OpenVINO's shape/type validation fails here, not at run time
    return artifact


# ----------------------------------------------------------------------------- saving
def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The bytes ``np.savez`` writes, with fixed zip timestamps (byte-identical reruns)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arrays[key]), allow_pickle=False)
    return buf.getvalue()


def save(artifact: Artifact, folder: str | os.PathLike[str]) -> Path:
    """Write ``builder.py``, ``weights.npz``, ``model.xml``, ``model.bin`` into ``folder``.

    Everything is produced in a temporary sibling folder first, then moved into place
    file by file (``os.replace``): a failure leaves no partial output behind.
    """
    import openvino as ov

    out = Path(folder)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "builder.py").write_text(artifact.source)
        (tmp / "weights.npz").write_bytes(npz_bytes(artifact.weights))
        ov.save_model(artifact.model, str(tmp / "model.xml"), compress_to_fp16=False)
        out.mkdir(exist_ok=True)
        for name in ("builder.py", "weights.npz", "model.bin", "model.xml"):
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# ----------------------------------------------------------------------------- running
@lru_cache(maxsize=None)
def core() -> Any:
    import openvino as ov

    return ov.Core()


def compile_model(ov_model: Any) -> Any:
    """Compile on the CPU plugin with f32 inference precision (not the bf16 default)."""
    return core().compile_model(ov_model, "CPU", CPU_CONFIG)


def infer(compiled: Any, feeds: list[Any], request: Any = None) -> list[np.ndarray]:
    """Run a compiled model on positional inputs; outputs as NumPy arrays, in order."""
    import openvino as ov

    req = request if request is not None else compiled.create_infer_request()
    tensors = {}
    for i, (port, x) in enumerate(zip(compiled.inputs, feeds)):
        tensors[i] = _tensor(port.get_element_type(), np.asarray(x), ov)
    req.infer(tensors)
    result = []
    for i in range(len(compiled.outputs)):
        t = req.get_output_tensor(i)
        result.append(_array(t, ov))
    return result


def _tensor(et: Any, x: np.ndarray, ov: Any) -> Any:
    """An input tensor of element type ``et`` and exactly the shape of ``x`` (0-d included)."""
    t = ov.Tensor(et, ov.Shape(list(x.shape)))
    if x.size:
        if et == ov.Type.bf16:
            t.data.view(np.uint16)[...] = np.asarray(x).view(np.uint16)
        else:
            t.data[...] = x
    return t


def _array(t: Any, ov: Any) -> np.ndarray:
    et = t.element_type
    if et == ov.Type.bf16:
        import ml_dtypes

        return t.data.view(np.uint16).view(ml_dtypes.bfloat16).reshape(tuple(t.shape)).copy()
    if et == ov.Type.string:
        return np.asarray(t.str_data, dtype=object)
    return np.array(t.data, copy=True).reshape(tuple(t.shape))


def runner(artifact: Artifact) -> Callable[[Mapping[str, Any]], list[np.ndarray]]:
    """A callable running the artifact repeatedly: compiled once, one reused infer request."""
    from translator.dtypes import numpy_dtype
    from translator.harness import exact_astype

    if artifact._compiled is None:
        try:
            artifact._compiled = compile_model(artifact.model)
        except RuntimeError as exc:
            raise OpbridgeError("runtime_error", f"OpenVINO CPU plugin failed to compile: {ov_message(exc)}") from None
    compiled = artifact._compiled
    request = compiled.create_infer_request()

    def call(inputs: Mapping[str, Any]) -> list[np.ndarray]:
        missing = [n for n, _ in artifact.inputs if n not in inputs]
        if missing:
            raise OpbridgeError("bad_model", f"no value fed for input {missing[0]!r}")
        feeds = [np.asarray(inputs[n], dtype=numpy_dtype(BOUNDARY.get(d, d))) for n, d in artifact.inputs]
        try:
            outs = infer(compiled, feeds, request)
        except RuntimeError as exc:
            raise OpbridgeError("runtime_error", f"OpenVINO inference failed: {ov_message(exc)}") from None
        # int4/uint4 cross the boundary as int8/uint8 (documented: BOUNDARY); converted back
        # only when every value is in range, never wrapped here
        return [exact_astype(o, numpy_dtype(d)) for o, (_, d) in zip(outs, artifact.outputs)]

    return call


def run(artifact: Artifact, inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """Compile (once per artifact) and infer; ``inputs`` by the model's input names."""
    return runner(artifact)(inputs)


# ----------------------------------------------------------------------------- registration
def _register() -> None:
    """Tell ``translator.lowering`` which ops this emitter lowers itself.

    ``lowering.how`` (and the generated tests) then see ``lowering`` instead of
    ``unsupported`` for composite cells without a table decomposition. The registered
    function answers whether a node is emitted directly (cell, dtypes and per-op checks).
    """
    from translator.lowering import LOWERINGS as IR_LOWERINGS
    from translator.lowering import cell_accepts

    tables = load_tables()
    cell, accepts = cell_accepts(NAME, tables), _node_accepts(tables, ov_types())

    def emitted_directly(node: Node) -> bool:
        try:
            return cell(node) is None and accepts(node) is None
        except Unsupported:
            return False

    for op in sorted(supported_ops(tables)):
        IR_LOWERINGS.setdefault((NAME, op), emitted_directly)


_register()
