"""Lowered IR → a standalone TensorFlow module: a ``tf.Module`` whose ``forward`` is a
``tf.function`` with an explicit input signature, plus its weights (``runtime.TFArtifact``).

``emit(model, ctx)`` is only code generation: ``translator.compile.pipeline.compile`` has already
verified, folded, legalized dtypes (the target's ``legal_dtypes``), lowered (a node is
emitted here when its cell is native or composite and a rule of the families or a snippet of
the cell exists) and run the layout pass (``channels_last``). Each node becomes the lines of
its rule (``emitters/tensorflow/<family>.py``) or its cell's one-line ``snippet``, rendered
into ``templates/tensorflow/module.py.j2``. For a target with several code columns (TFLite:
``tflite``, then ``tensorflow``) the first column with a rule or a snippet wins, a rule
before a snippet of the same column. Model names become sanitized, de-duplicated
identifiers; literals go through ``translator.compile.render.literal``.
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from translator.table.dtypes import onnx_enum
from translator.table.errors import Unsupported
from translator.ir.graph import Graph, Model, Node, Value
from translator.ir.names import NameSet, io_names
from translator.compile.registry import RULES
from translator.table.snippets import expand
from translator.table.loader import Tables

from .helpers import tf_dtype_names, widens
from .runtime import Port, TFArtifact

#: constants with more elements than this become tf.Variables (kept out of the graph proto)
VARIABLE_MIN_ELEMENTS = 4096
RESERVED = frozenset(dir(builtins)) | {"self", "tf", "np", "weights", "OpbridgeModel", "load", "forward"}


class Namer:
    """Model names → unique Python identifiers (sanitized; never a keyword or builtin)."""

    def __init__(self) -> None:
        self.used = NameSet(RESERVED)
        self.names: dict[int, str] = {}

    def fresh(self, base: str) -> str:
        from translator.compile.render import ident

        return self.used.take(ident(base))

    def bind(self, v: Value, name: str) -> str:
        """``v`` gets ``name`` (a graph input's name from ``io_names``, taken before any other)."""
        self.used.add(name)
        self.names[id(v)] = name
        return name

    def __call__(self, v: Value) -> str:
        if id(v) not in self.names:
            self.names[id(v)] = self.fresh(v.name)
        return self.names[id(v)]


class NodeCtx:
    """What a rule (or a snippet, through ``_Binder``) sees of one node."""

    def __init__(self, cg: "Codegen", node: Node) -> None:
        self.cg, self.node = cg, node
        op = cg.tables.ops.get(node.op)
        self.sig = op.signature if op is not None else None
        #: overrides while computing in a wider float type (see Codegen.widened)
        self.in_expr: dict[int, str] = {}
        self.in_dtype: dict[int, str] = {}
        self.out_name: dict[int, str] = {}
        self.out_dtypes: dict[int, str] = {}

    # inputs / outputs
    def has(self, k: int) -> bool:
        return k < len(self.node.inputs) and self.node.inputs[k] is not None

    def i(self, k: int) -> str:
        if k in self.in_expr:
            return self.in_expr[k]
        return self.cg.expr(self.node.inputs[k]) if self.has(k) else "None"

    def value(self, k: int) -> Value:
        v = self.node.inputs[k]
        assert v is not None
        return v

    def const(self, k: int) -> np.ndarray | None:
        return None if not self.has(k) else self.value(k).const

    def o(self, k: int = 0) -> str:
        if k in self.out_name:
            return self.out_name[k]
        return self.cg.names(self.node.outputs[k])

    def outs(self) -> str:
        return ", ".join(self.o(k) for k in range(len(self.node.outputs)))

    def dtype(self, k: int) -> str:
        d = self.in_dtype.get(k) or self.value(k).type.dtype
        if d is None:
            self.unsupported("unsupported_dtype", f"input {k} has an unknown dtype")
        return d  # type: ignore[return-value]

    def out_dtype(self, k: int = 0) -> str:
        d = self.out_dtypes.get(k) or self.node.outputs[k].type.dtype
        if d is None:
            self.unsupported("unsupported_dtype", f"output {k} has an unknown dtype")
        return d  # type: ignore[return-value]

    def shape(self, k: int) -> tuple | None:
        return self.value(k).type.shape if self.has(k) else None

    def out_shape(self, k: int = 0) -> tuple | None:
        return self.node.outputs[k].type.shape

    def rank(self, k: int) -> int | None:
        s = self.shape(k)
        return None if s is None else len(s)

    def static_shape(self, k: int) -> tuple[int, ...]:
        s = self.shape(k)
        if s is None or not all(isinstance(d, int) for d in s):
            self.unsupported("dynamic_shape", f"needs a static shape for input {k} (has {s})")
        return tuple(s)  # type: ignore[arg-type]

    # attributes and literals
    def attr(self, name: str, default: Any = None) -> Any:
        if name in self.node.attrs:
            return self.node.attrs[name]
        if self.sig is not None:
            a = self.sig.attribute(name)
            if a is not None and a.default is not None:
                return list(a.default) if isinstance(a.default, tuple) else a.default
        return default

    @staticmethod
    def lit(v: Any) -> str:
        from translator.compile.render import literal

        if isinstance(v, np.ndarray):
            v = v.tolist()
        if isinstance(v, np.generic):
            v = v.item()
        return str(literal(v))

    def tf(self, dtype_id: str) -> str:
        name = tf_dtype_names().get(dtype_id)
        if name is None:
            self.unsupported("unsupported_dtype", f"TensorFlow has no dtype for {dtype_id}")
        return name  # type: ignore[return-value]

    def enum_dtype(self, enum: int) -> str:
        d = onnx_enum().get(int(enum))
        if d is None:
            self.unsupported("unsupported_dtype", f"ONNX element type {enum} has no dtype id")
        return d  # type: ignore[return-value]

    @property
    def wide_float(self) -> str:
        """The widest float the backend computes in (coordinates, weights): float64 where legal."""
        return "tf.float64" if self.cg.legal is None or "float64" in self.cg.legal else "tf.float32"

    @property
    def channels_last(self) -> bool:
        from translator.compile.passes.layout import is_channels_last

        return is_channels_last(self.node)

    # code helpers
    def weight(self, arr: np.ndarray, hint: str) -> str:
        return self.cg.add_weight(np.asarray(arr), hint)

    def tmp(self, hint: str) -> str:
        return self.cg.names.fresh(f"{self.node.name}_{hint}")

    def body(self, g: Graph, fn: str, params: list[Value]) -> list[str]:
        return self.cg.function(g, fn, params)

    def unsupported(self, code: str, detail: str) -> None:
        raise Unsupported(self.node.op, self.cg.backend, code, detail, self.node.name)

    # snippets
    def snippet(self, op: Any, text: str) -> list[str]:
        return [f"{self.outs()} = {expand(text, self.node, op, _Binder(self))}"]


class _Binder:
    """How a cell's snippet reads one node (``translator.table.snippets``): inputs as the
    expressions the emitter owns (the float32 copies while a node is widened), attributes as
    literals, dtypes as ``tf.<name>`` (float32 for a narrow float while widened)."""

    def __init__(self, ctx: NodeCtx) -> None:
        self.ctx = ctx

    def value(self, v: Value | None) -> str:
        if v is None:
            return "None"
        for k, x in enumerate(self.ctx.node.inputs):
            if x is v:
                return self.ctx.i(k)
        return self.ctx.cg.expr(v)

    def attr(self, name: str, value: Any) -> str:
        return self.ctx.lit(list(value) if isinstance(value, tuple) else value)

    def dtype(self, dtype_id: str) -> str:
        if self.ctx.in_dtype and dtype_id in ("float16", "bfloat16"):
            return "tf.float32"
        return self.ctx.tf(dtype_id)


class Codegen:
    def __init__(self, backend: str, tables: Tables, legal: frozenset[str] | None = None,
                 columns: tuple[str, ...] = ()) -> None:
        self.backend, self.tables, self.legal = backend, tables, legal
        self.columns = columns or (backend,)
        self.names = Namer()
        #: what a backend's rules asked of its converter (TFLite's ``fake_quant``: int8 kernels)
        self.features: set[str] = set()
        #: the compilation's options (a backend's rules read their own)
        self.options: dict[str, Any] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.weight_of: dict[int, str] = {}
        #: node → a name scope for its ops, else None (a target's ``extra["name_scope"]``: TFLite
        #: marks the ops its converter must see, ``emitters.tflite.same_scale``)
        self.name_scope: Any = None
        #: the target's depthwise convolution takes a row stride other than its column stride
        #: (TFLite's builtin does; TensorFlow's CPU kernel refuses it when the graph runs)
        self.unequal_depthwise_strides = False
        self.init: list[str] = []

    def add_weight(self, arr: np.ndarray, hint: str, key: int | None = None) -> str:
        if key is not None and key in self.weight_of:
            return self.weight_of[key]
        name = self.names.fresh(f"w_{hint}")
        if arr.dtype.kind in "OSU":
            arr = np.asarray([str(x) for x in arr.reshape(-1)], dtype=str).reshape(arr.shape)
        self.weights[name] = arr
        ctor = "tf.Variable" if arr.size > VARIABLE_MIN_ELEMENTS and arr.dtype.kind not in "U" else "tf.constant"
        extra = ", trainable=False" if ctor == "tf.Variable" else ""
        dtype = ""
        if arr.dtype.kind not in "U":
            from translator.table.dtypes import dtype_id

            dtype = f", dtype={tf_dtype_names()[dtype_id(arr.dtype)]}"
        self.init.append(f"self.{name} = {ctor}(weights[{NodeCtx.lit(name)}]{dtype}{extra})")
        if key is not None:
            self.weight_of[key] = f"self.{name}"
        return f"self.{name}"

    def expr(self, v: Value | None) -> str:
        if v is None:
            return "None"
        if v.is_const:
            return self.add_weight(np.asarray(v.const), v.name, key=id(v))
        return self.names(v)

    def node_lines(self, node: Node) -> list[str]:
        ctx = NodeCtx(self, node)
        rounded = self.bf16_legalized(ctx) + self.narrow_int_legalized(ctx)
        if widens(node, self.tables):
            lines = self.widened(ctx) + rounded
        else:
            lines = self.generate(ctx) + rounded
        scope = self.name_scope(node) if self.name_scope is not None else None
        if scope and lines and all(ln and not ln[0].isspace() and not ln.rstrip().endswith(":") for ln in lines):
            lines = [f"with tf.name_scope({NodeCtx.lit(scope)}): {ln}" for ln in lines]
        return lines

    def bf16_legalized(self, ctx: NodeCtx) -> list[str]:
        """Outputs the model computes in bfloat16 but this backend in float32 (TFLite's
        legalization) are rounded to bfloat16 in the graph (round to nearest; Veltkamp's
        split keeps the top 8 significant bits; |x| > 2^64 scaled first, inf/NaN kept): the
        artifact itself returns bfloat16 values, which the runner may then retype exactly."""
        node = ctx.node
        source = node.meta.get("source_dtypes") or []
        lines: list[str] = []
        for k, v in enumerate(node.outputs):
            if k >= len(source) or source[k] != "bfloat16" or v.type.dtype != "float32" or not v.uses and \
                    v not in (node.graph.outputs if node.graph else []):
                continue
            x = ctx.out_name[k] = self.names.fresh(f"{v.name}_f32")
            big, s, gam, hi = (self.names.fresh(f"{v.name}_{t}") for t in ("big", "s", "g", "hi"))
            lines += [f"{big} = tf.abs({x}) > 18446744073709551616.0",
                      f"{s} = tf.where({big}, {x} * 5.421010862427522e-20, {x})",
                      f"{gam} = {s} * 65537.0",
                      f"{hi} = {gam} + ({s} - {gam})",
                      f"{hi} = tf.where({big}, {hi} * 18446744073709551616.0, {hi})",
                      f"{self.names(v)} = tf.where(tf.math.is_finite({x}), {hi}, {x})"]
        return lines

    def narrow_int_legalized(self, ctx: NodeCtx) -> list[str]:
        """Outputs the model computes in an 8/16-bit integer but this backend in a wider one
        (TFLite's legalization) wrap around in the graph as the narrow type would (x mod 2^n,
        shifted for signed types): ``~x`` of a uint8 is 255 - x, not -x - 1."""
        node = ctx.node
        source = node.meta.get("source_dtypes") or []
        lines: list[str] = []
        for k, v in enumerate(node.outputs):
            bits = _NARROW_INTS.get(source[k]) if k < len(source) else None
            if bits is None or v.type.dtype not in ("int32", "int64") or not v.uses and \
                    v not in (node.graph.outputs if node.graph else []):
                continue
            x = ctx.out_name[k] = self.names.fresh(f"{v.name}_wide")
            span, off = 1 << bits[0], (1 << (bits[0] - 1)) if bits[1] else 0
            if off:
                lines.append(f"{self.names(v)} = tf.math.floormod({x} + {off}, {span}) - {off}")
            else:
                lines.append(f"{self.names(v)} = tf.math.floormod({x}, {span})")
        return lines

    def widened(self, ctx: NodeCtx) -> list[str]:
        """float16/bfloat16 math in float32, rounded back per op (as the reference does)."""
        node = ctx.node
        narrow = ("float16", "bfloat16")
        lines = []
        for k, v in enumerate(node.inputs):
            if v is not None and v.type.dtype in narrow:
                wide = self.names.fresh(f"{v.name}_f32")
                lines.append(f"{wide} = tf.cast({self.expr(v)}, tf.float32)")
                ctx.in_expr[k], ctx.in_dtype[k] = wide, "float32"
        back = []
        for k, v in enumerate(node.outputs):
            if v.type.dtype in narrow:
                ctx.out_name[k] = self.names.fresh(f"{v.name}_f32")
                ctx.out_dtypes[k] = "float32"
                back.append(f"{self.names(v)} = tf.cast({ctx.out_name[k]}, {tf_dtype_names()[v.type.dtype]})")
        return lines + self.generate(ctx) + back

    def generate(self, ctx: NodeCtx) -> list[str]:
        """The node's code: per code column, its rule, else its cell's snippet."""
        node = ctx.node
        op = self.tables.ops.get(node.op)
        for col in self.columns:
            rule = RULES.get((node.op, col))
            if rule is not None:
                return rule.fn(ctx)
            cell = op.backends.get(col) if op is not None else None
            if cell is not None and cell.snippet:
                return ctx.snippet(op, cell.snippet)
        ctx.unsupported("unsupported_op", "no TensorFlow rule or snippet")
        return []

    def lines(self, g: Graph, owners: list[str] | None = None) -> list[str]:
        """The code of ``g``'s nodes; ``owners`` (if given) gets the node name of every line."""
        out: list[str] = []
        for node in g.nodes:
            code = self.node_lines(node)
            out.extend(code)
            if owners is not None:
                owners.extend([node.name] * len(code))
        return out

    def function(self, g: Graph, fn: str, params: list[Value]) -> list[str]:
        """A nested ``def`` computing subgraph ``g`` (returns its outputs as a tuple)."""
        head = f"def {fn}({', '.join(self.names(p) for p in params)}):"
        body = self.lines(g)
        res = ", ".join(self.expr(v) for v in g.outputs)
        body.append(f"return ({res}{',' if len(g.outputs) == 1 else ''})")
        return [head] + ["    " + line for line in body]


#: integer dtypes a backend may compute wider (TFLite: in int32): (bits, signed)
_NARROW_INTS = {"int8": (8, True), "uint8": (8, False), "int16": (16, True), "uint16": (16, False)}


def emit(model: Model, ctx: Any) -> TFArtifact:
    """Lowered IR → TensorFlow artifact (source + weights); ``run`` it, or ``save`` it as a SavedModel."""
    return generate(model, ctx, ctx.source_inputs, ctx.source_outputs)


def generate(model: Model, ctx: Any, source_in: list[str | None], source_out: list[str | None]) -> TFArtifact:
    """The module of a lowered model (``source_in``/``source_out``: its I/O dtypes before
    legalization; TFLite's segments pass their own)."""
    from translator import __version__
    from translator.compile.render import Code, code_lines, render

    backend, tables = ctx.target.name, ctx.tables
    io_channels_last = bool(ctx.options.get("io_channels_last"))
    g = model.graph
    out_names = [v.name for v in g.outputs]
    warnings = list(ctx.warnings)
    rep = ctx.layout
    transposes, layout = (rep.transposes, rep.as_dict()) if rep is not None else (0, {})
    cg = Codegen(backend, tables, ctx.legal, ctx.target.columns)
    cg.options = dict(ctx.options or {})
    cg.name_scope = ctx.target.extra.get("name_scope")
    cg.unequal_depthwise_strides = bool(ctx.target.extra.get("unequal_depthwise_strides"))
    # signature names: one rule set for every backend (translator/ir/names.py); TensorFlow
    # lowercases argument names, so ``x`` and ``X`` must differ in more than case
    io = io_names(backend, [v.name for v in g.inputs], out_names, extra_reserved=RESERVED)
    warnings += [w for w in io.warnings if w not in warnings]
    ctx.warn(io.warnings)
    inputs = []
    for v, sd, key in zip(g.inputs, source_in, io.inputs):
        if v.type.kind != "tensor":
            raise Unsupported("sequence", backend, "unsupported_dtype", f"input {v.name!r} is a {v.type.kind}")
        inputs.append(Port(v.name, cg.names.bind(v, key), v.type.dtype or "float32", sd, v.type.shape,
                           io_channels_last and (v.type.rank or 0) >= 3))
    owners: list[str] = []
    body = cg.lines(g, owners)
    outputs, result = [], []
    for i, (v, name, sd, key) in enumerate(zip(g.outputs, out_names, source_out, io.outputs)):
        if v.type.kind != "tensor":
            raise Unsupported("sequence", backend, "unsupported_dtype", f"output {name!r} is a {v.type.kind}")
        expr = cg.expr(v)
        if v.is_const or v in g.inputs or any(o is v for o in g.outputs[:i]):
            expr = f"tf.identity({expr})"
        result.append(f"{NodeCtx.lit(key)}: {expr}")
        outputs.append(Port(name, key, v.type.dtype or "float32", sd, v.type.shape,
                            io_channels_last and (v.type.rank or 0) >= 3))
    specs = [f"tf.TensorSpec(shape={_spec_shape(p.shape)}, dtype={tf_dtype_names()[p.dtype]}, name={NodeCtx.lit(p.key)})"
             for p in inputs]
    source = render("tensorflow", "module.py.j2", version=__version__, source=model.source or "<model>",
                    source_format=model.source_format, target=backend,
                    io_layout="channels-last" if io_channels_last else "as in the source model",
                    transposes=transposes, warnings=warnings, module_name="opbridge_model",
                    init=code_lines(cg.init), specs=code_lines(specs), args=code_lines(p.key for p in inputs),
                    body=code_lines(body), result=Code("{" + ", ".join(result) + "}"))
    first = next(i for i, line in enumerate(source.splitlines()) if line.lstrip().startswith("def forward(")) + 2
    from translator.compile.quantized import dynamic_range_features

    cg.features |= dynamic_range_features(model)  # (convert: the exact emulation if the check fails)
    return TFArtifact(backend, source, cg.weights, inputs, outputs, transposes, layout, warnings,
                      list(ctx.decomposed), {"io_channels_last": io_channels_last,
                                             **({"features": sorted(cg.features)} if cg.features else {})},
                      {first + k: name for k, name in enumerate(owners)}, io_names=io.renamed(),
                      io_warnings=list(io.warnings))


def _spec_shape(shape: tuple | None) -> str:
    if shape is None:
        return "None"
    return "[" + ", ".join(str(d) if isinstance(d, int) else "None" for d in shape) + "]"
