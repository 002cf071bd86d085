"""Lowered IR → OpenVINO artifact: a standalone builder script over ``openvino.opset16`` + weights.

The pipeline (``translator.compile.pipeline.compile``) has already verified, folded and lowered the
IR; ``emit(model, ctx)`` only generates code. It renders ``templates/openvino/builder.py.j2``:
one Python function per graph (the main graph and each If/Loop/Scan body) whose body is
straight-line code, one line per op from the ``snippet`` of the op's openvino cell in
``optable.yaml`` or a few lines from a rule of this package (``elementwise``, ``shape``,
``nn``, ``quant``, ``rnn``, ``control``, ``attention``, ``misc``). Weights go to a ``.npz``
(read back with ``allow_pickle=False``); small integer and finite float constants are
written inline. The artifact's ``ov.Model`` is built by executing that very script, so what
runs is what was written.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from translator.table import snippets as snippet_grammar
from translator.table.errors import OpbridgeError, Unsupported
from translator.ir.graph import Graph, Model, Node, TensorType, Value
from translator.ir.names import NameSet
from translator.compile.registry import rules, snippet_of
from translator.compile.render import ident, literal
from translator.table.loader import Tables, load_tables

from .registry import NAME
from .runtime import BOUNDARY, Artifact

if TYPE_CHECKING:
    from translator.compile.target import Compilation

#: integer/bool constants up to this many elements are written inline, and finite floats up to INLINE_FLOATS
INLINE_MAX = 16
INLINE_FLOATS = 4
#: names the builder script defines itself; model names never shadow them
RESERVED = frozenset({"ov", "ops", "ops17", "np", "w", "sys", "Path", "build", "main", "param", "port", "result",
                      "stable_names", "constant_bits"})


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


# ----------------------------------------------------------------------------- code generation
def plain(v: Any) -> Any:
    """Attribute values → plain Python data (what ``literal`` renders)."""
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
        self.rules = rules(NAME)
        self.options: dict[str, Any] = {}  # the conversion's options (``float_quantization``)
        self.features: set[str] = set()  # what the artifact holds, for ``convert`` (``fake_quant``)

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
                shape = literal(dims[:axis] + [1] + dims[axis:])
            var = self.names.fresh(v.name)
            pvars.append(var)
            fn.body.append(f"{var} = param({shape}, {self.ty(outer)}, {literal(v.name)})")
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
            outs.append(f"result({var}, {literal(v.name)})")
        fn.ret = f"ov.Model([{', '.join(outs)}], [{', '.join(pvars)}], {literal(g.name or fname)})"
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
            from translator.table.dtypes import numpy_dtype

            for i, v in enumerate(node.outputs):
                empty = np.zeros(tuple(int(d) for d in v.type.shape or ()), dtype=numpy_dtype(self.dtype_of(v)))
                gen.bind(i, self.constant(empty, v.type.dtype, fn, v.name))
            return
        rule = self.rules.get(node.op)
        snippet = snippet_of(gen.op, (NAME,)) if rule is None and gen.op is not None else None
        if rule is not None:
            rule.fn(gen, node)
        elif snippet is not None:
            gen.out(0, gen.expand(snippet))
        else:
            raise Unsupported(node.op, NAME, "unsupported_op", "no snippet or rule after lowering", node.name)
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
        return literal([d if isinstance(d, int) else -1 for d in t.shape])

    def constant(self, arr: np.ndarray, dtype: str | None, fn: _Function, hint: str) -> str:
        """Emit a constant; returns its variable. Small ones are literals (shared within a
        function), large ones are weights read from ``w``."""
        from translator.table.dtypes import dtype_id

        dtype = dtype or dtype_id(arr.dtype)
        ty = self.ty(dtype)
        kind, plain = arr.dtype.kind, arr.dtype.name in _PLAIN_NP
        code = None
        if plain and (kind in "biu" and arr.size <= INLINE_MAX or kind == "f" and arr.size <= INLINE_FLOATS):
            if kind != "f" or np.all(np.isfinite(arr)):
                code = f"ops.constant(np.array({literal(_literal(arr))}, dtype=np.{arr.dtype.name}), {ty})"
                if arr.size == 0:  # an empty list loses the shape
                    code = f"ops.constant(np.zeros({literal(list(arr.shape))}, dtype=np.{arr.dtype.name}), {ty})"
            elif arr.size == 1:  # nan / ±inf, spelled by NumPy name
                word, shape = _float_words(arr)[0], literal(list(arr.shape))
                code = f"ops.constant(np.full({shape}, {word}, dtype=np.{arr.dtype.name}), {ty})"
        elif arr.dtype.name == "bfloat16" and arr.size <= INLINE_FLOATS and np.all(np.isfinite(arr.astype(np.float32))):
            # a type NumPy lacks: its values (exact in float32) straight into an OpenVINO constant
            code = f"ov.op.Constant({ty}, ov.Shape({literal(list(arr.shape))}), [{', '.join(_float_words(arr))}])"
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
            fn.body.append(f"{var} = ops.constant(w[{literal(key)}], {ty})")
        elif arr.dtype.name == "bfloat16":  # stored as its raw bits
            self.weights[key] = np.array(arr, order="C").view(np.uint16)
            fn.body.append(f"{var} = constant_bits(w[{literal(key)}], {ty})")
        elif arr.dtype.name.startswith(("int", "uint")):  # int4 / uint4: held as int64, converted exactly
            wide = np.int64 if arr.dtype.name.startswith("int") else np.uint64
            self.weights[key] = np.asarray(arr, dtype=wide)
            fn.body.append(f"{var} = ops.convert(ops.constant(w[{literal(key)}]), {ty})")
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
            out.append(literal(float(str(np.float32(x)))))
    return out


def _literal(arr: np.ndarray) -> Any:
    """Array → nested lists of Python numbers; floats as their shortest repr in the array's dtype."""
    if arr.dtype.kind != "f" or arr.dtype == np.float64:
        return arr.tolist()
    flat = [float(str(x)) for x in arr.reshape(-1)]
    return np.asarray(flat, dtype=np.float64).reshape(arr.shape).tolist() if arr.ndim else flat[0]


def _is_empty(t: TensorType) -> bool:
    return t.kind == "tensor" and t.dtype is not None and t.is_static and 0 in (t.shape or ())


_PLAIN_NP = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                       "float16", "float32", "float64"})


class Gen:
    """What a lowering sees: the node's inputs as variables, attributes, and emit helpers.

    Generated code is built only from variables (``Emission.names``) and literals rendered
    by ``lit`` (``render.literal``): no text from the model reaches the script raw.
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
        return literal(plain(v))

    def ty(self, dtype: str) -> str:
        return self.em.ty(dtype)

    def const(self, value: Any, dtype: str) -> str:
        from translator.table.dtypes import numpy_dtype

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
        """The op cell's snippet filled in for this node (``translator.table.snippets``)."""
        return snippet_grammar.expand(snippet, self.node, self.op, _Binder(self))

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


class _Binder:
    """The snippet grammar's view of a node: inputs as variables, attributes as literals,
    dtypes as ``ov.Type`` names."""

    def __init__(self, gen: Gen) -> None:
        self.gen = gen

    def value(self, v: Value | None) -> str:
        if v is None:
            raise self.gen.refuse("verifier", "the snippet reads an omitted optional input")
        return self.gen.var_of(v)

    def attr(self, name: str, value: Any) -> str:
        return self.gen.lit(value)

    def dtype(self, dtype_id: str) -> str:
        return self.gen.ty(dtype_id)


def emit(model: Model, ctx: "Compilation") -> Artifact:
    """Lowered IR → builder script + weights, and the ``ov.Model`` that script builds."""
    from translator.compile.render import Code, code_lines, render

    g = model.graph
    em = Emission(ctx.tables)
    em.options = dict(ctx.options or {})
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
    from translator.compile.quantized import dynamic_range_features

    em.features |= dynamic_range_features(model)
    if em.features:
        artifact.options["features"] = sorted(em.features)
    artifact.model  # noqa: B018 - build now: OpenVINO's shape/type validation fails here, not at run time
    return artifact
