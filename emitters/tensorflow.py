"""IR → a standalone TensorFlow module: a ``tf.Module`` whose ``forward`` is a ``tf.function``
with an explicit input signature, plus its weights; saved as a SavedModel.

Pipeline (``translate``): verify → fold shape subgraphs → dtype legalization (the
``tensorflow`` column of dtypes.yaml; reported) → lowering (native = cell native or
composite *and* a snippet or Python lowering; else the table's decomposition; else
``Unsupported``) → the layout pass (convolution, pooling, resize, depth-to-space … run
channels-last; ``translator/passes/layout.py``) → source code rendered from
``templates/tensorflow/module.py.j2``: one line per node from ``snippets.yaml`` or a
Python lowering of ``emitters/tensorflow_ops.py``. Model names become sanitized,
de-duplicated identifiers; literals go through ``pyrepr``.

``run`` executes the generated source in memory (no SavedModel on that path: tracing
the ``tf.function`` is all it costs); ``save`` writes the SavedModel atomically.
"""
from __future__ import annotations

import builtins
import io
import json
import os
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from translator.errors import OpbridgeError, Unsupported
from translator.ir import Graph, Model, Node, Value
from translator.names import NameSet, io_names
from translator.tables import Tables, load_tables

from . import tensorflow_ops as ops
from translator.pipeline import paused_gc

NAME = "tensorflow"
#: constants with more elements than this become tf.Variables (kept out of the graph proto)
VARIABLE_MIN_ELEMENTS = 4096
_RESERVED = frozenset(dir(builtins)) | {"self", "tf", "np", "weights", "OpbridgeModel", "load", "forward"}


# ----------------------------------------------------------------------------- tables → code
@lru_cache(maxsize=None)
def snippets() -> dict[str, str]:
    import yaml

    from translator import paths

    with open(os.path.join(paths.templates_dir(), "tensorflow", "snippets.yaml"), encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise OpbridgeError("verifier", "templates/tensorflow/snippets.yaml must map op ids to one-line strings")
    bad = [k for k, v in data.items() if "\n" in v.strip()]
    if bad:
        raise OpbridgeError("verifier", f"snippets.yaml: multi-line snippet for {', '.join(bad)}")
    ops_known = load_tables().ops
    unknown = [k for k in data if k.split("@", 1)[0] not in ops_known]
    if unknown:
        raise OpbridgeError("verifier", f"snippets.yaml: unknown op ids {', '.join(unknown)}")
    return data


def has_code(op_id: str) -> bool:
    return op_id in snippets() or op_id in ops.OPS


def supported_ops(backend: str = NAME, tables: Tables | None = None) -> frozenset[str]:
    """Cell native or composite in ``backend``'s column, and a snippet or a Python lowering here."""
    tables = tables or load_tables()
    return frozenset(op.id for op in tables.ops.values()
                     if (c := op.backends.get(backend)) is not None and c.status in ("native", "composite")
                     and has_code(op.id))


Check = Callable[[Node], "tuple[str, str] | None"]


def node_check(extra: Check | None = None) -> Callable[[Node], "str | None"]:
    """The per-node check of ``lower_for``: the op's lowering accepts the node (and ``extra``)."""

    def check(node: Node) -> str | None:
        why = ops.accepts(node)
        if why is None and extra is not None:
            why = extra(node)
        return None if why is None else why[1]

    return check


@lru_cache(maxsize=None)
def tf_dtype_names() -> dict[str, str]:
    """dtype id → ``tf.<name>`` from the ``tensorflow`` column of dtypes.yaml."""
    out = {}
    for d in load_tables().dtypes.values():
        c = d.backends.get("tensorflow")
        if c is not None and c.status == "native" and c.names:
            out[d.id] = "tf." + c.names[0].split(".", 1)[1]
    return out


@lru_cache(maxsize=None)
def onnx_enum_dtypes() -> dict[int, str]:
    from translator.frontends.onnx import onnx_dtype_map

    return onnx_dtype_map(load_tables())


# ----------------------------------------------------------------------------- code generation
class Namer:
    """Model names → unique Python identifiers (sanitized; never a keyword or builtin)."""

    def __init__(self) -> None:
        self.used = NameSet(_RESERVED)
        self.names: dict[int, str] = {}

    def fresh(self, base: str) -> str:
        from translator.render import ident

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


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class NodeCtx:
    """What a snippet or a Python lowering sees of one node."""

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
        from translator.render import pyrepr

        if isinstance(v, np.ndarray):
            v = v.tolist()
        if isinstance(v, np.generic):
            v = v.item()
        return pyrepr(v)

    def tf(self, dtype_id: str) -> str:
        name = tf_dtype_names().get(dtype_id)
        if name is None:
            self.unsupported("unsupported_dtype", f"TensorFlow has no dtype for {dtype_id}")
        return name  # type: ignore[return-value]

    def enum_dtype(self, enum: int) -> str:
        d = onnx_enum_dtypes().get(int(enum))
        if d is None:
            self.unsupported("unsupported_dtype", f"ONNX element type {enum} has no dtype id")
        return d  # type: ignore[return-value]

    @property
    def wide_float(self) -> str:
        """The widest float the backend computes in (coordinates, weights): float64 where legal."""
        return "tf.float64" if self.cg.legal is None or "float64" in self.cg.legal else "tf.float32"

    @property
    def channels_last(self) -> bool:
        from translator.passes.layout import is_channels_last

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
    def placeholder(self, key: str) -> str:
        m = re.fullmatch(r"in(\d+)(_dtype)?", key)
        if m:
            k = int(m.group(1))
            if m.group(2):
                return self.tf(self.dtype(k))
            return self.i(k)
        if key == "ins":
            return ", ".join(self.i(k) for k in range(len(self.node.inputs)) if self.has(k))
        if key == "dtype":
            return self.tf(self.out_dtype(0))
        if self.sig is not None and self.sig.attribute(key) is not None:
            return self.lit(self.attr(key))
        raise OpbridgeError("verifier", f"snippet of {self.node.op}: unknown placeholder {{{key}}}")

    def snippet(self, text: str) -> list[str]:
        return [f"{self.outs()} = {_PLACEHOLDER.sub(lambda m: self.placeholder(m.group(1)), text)}"]


class Codegen:
    def __init__(self, backend: str, tables: Tables, legal: frozenset[str] | None = None) -> None:
        self.backend, self.tables, self.legal = backend, tables, legal
        self.names = Namer()
        self.weights: dict[str, np.ndarray] = {}
        self.weight_of: dict[int, str] = {}
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
            from translator.dtypes import dtype_id

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
        if ops.widens(node, self.tables):
            return self.widened(ctx) + rounded
        return self.generate(ctx) + rounded

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
        node = ctx.node
        variant = snippets().get(f"{node.op}@{self.backend}")  # a backend's own spelling (tflite builtins)
        if variant is not None:
            return ctx.snippet(variant)
        fn = ops.OPS.get(node.op)
        if fn is not None:
            why = ops.accepts(node)
            if why is not None:
                ctx.unsupported(why[0], why[1])
            return fn(ctx)
        text = snippets().get(node.op)
        if text is None:
            ctx.unsupported("unsupported_op", "no TensorFlow snippet or lowering")
        return ctx.snippet(text)  # type: ignore[arg-type]

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


# ----------------------------------------------------------------------------- artifact
@dataclass
class Port:
    name: str  # the model's name
    key: str  # the identifier in the generated code / the signature key
    dtype: str  # dtype id inside the artifact (after legalization)
    source_dtype: str | None  # dtype id in the source model
    shape: tuple | None
    channels_last: bool = False


@dataclass
class TFArtifact:
    backend: str
    source: str
    weights: dict[str, np.ndarray]
    inputs: list[Port]
    outputs: list[Port]
    transposes: int
    layout: dict[str, Any]
    warnings: list[str]
    decomposed: list[tuple[str, str]]
    options: dict[str, Any] = field(default_factory=dict)
    #: source line number (1-based) -> the IR node whose code it is
    line_owner: dict[int, str] = field(default_factory=dict, repr=False)
    _instance: Any = field(default=None, repr=False, compare=False)
    tflite: bytes | None = field(default=None, repr=False)
    #: the graph I/O names this backend could not keep: {"inputs": {model name: key}, "outputs": {...}}
    io_names: dict[str, dict[str, str]] = field(default_factory=dict)
    #: the warnings that say so (also in ``warnings``)
    io_warnings: list[str] = field(default_factory=list, repr=False)

    def report(self) -> dict[str, Any]:
        return {"backend": self.backend, "transposes": self.transposes, "layout": self.layout,
                "warnings": list(self.warnings), "decomposed": [list(d) for d in self.decomposed],
                "inputs": [_port_json(p) for p in self.inputs], "outputs": [_port_json(p) for p in self.outputs],
                "options": self.options, "io_names": self.io_names}

    def module(self) -> Any:
        """The generated ``OpbridgeModel`` instance (built once, in memory)."""
        if self._instance is None:
            _quiet_tf()
            namespace: dict[str, Any] = {"__name__": "opbridge_generated"}
            exec(compile(self.source, f"<opbridge {self.backend} module>", "exec"), namespace)  # noqa: S102
            self._instance = namespace["OpbridgeModel"](self.weights)
        return self._instance


def _port_json(p: Port) -> dict[str, Any]:
    return {"name": p.name, "key": p.key, "dtype": p.dtype, "source_dtype": p.source_dtype,
            "shape": None if p.shape is None else [d if isinstance(d, int) else None for d in p.shape],
            "channels_last": p.channels_last}


def _quiet_tf() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")


# ----------------------------------------------------------------------------- the pipeline
def channels_last_ops(node: Node) -> bool:
    """The nodes TensorFlow runs channels-last (the layout pass's predicate)."""
    return ops.channels_last(node)


@paused_gc
def translate(model: Model, backend: str = NAME, tables: Tables | None = None, io_channels_last: bool = False,
              accepts: Check | None = None, legal: frozenset[str] | None = None) -> TFArtifact:
    """The shared TensorFlow / TFLite pipeline. ``accepts``: an extra per-node check of the
    backend; ``legal``: its dtypes when they differ from its dtypes.yaml column."""
    from translator import __version__
    from translator.infer import infer
    from translator.lowering import lower_for
    from translator.passes import fold_constants, layout, legalize_dtypes
    from translator.pipeline import prepare
    from translator.render import Code, code_lines, render

    tables = tables or load_tables()
    prepare(model)
    g = model.graph
    source_in = [v.type.dtype for v in g.inputs]
    source_out = [v.type.dtype for v in g.outputs]
    out_names = [v.name for v in g.outputs]
    _fold_everywhere(g)
    for n in g.walk():  # what the model computes in, before legalization (saturating casts need it)
        n.meta["source_dtypes"] = [o.type.dtype for o in n.outputs]
    warnings = _legalize_everywhere(g, backend, tables, legal)
    infer(g, tables)
    decomposed = lower_for(g, backend, supported_ops(backend, tables), tables, accepts=node_check(accepts))
    infer(g, tables)  # types of the values decompositions introduced
    warnings += [w for w in _legalize_everywhere(g, backend, tables, legal) if w not in warnings]
    rep = layout.run(g, channels_last_ops, io_channels_last=io_channels_last)
    cg = Codegen(backend, tables, legal)
    # signature names: one rule set for every backend (translator/names.py); TensorFlow
    # lowercases argument names, so ``x`` and ``X`` must differ in more than case
    io = io_names(backend, [v.name for v in g.inputs], out_names, extra_reserved=_RESERVED)
    warnings += [w for w in io.warnings if w not in warnings]
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
                    transposes=rep.transposes, warnings=warnings, module_name="opbridge_model",
                    init=code_lines(cg.init), specs=code_lines(specs), args=code_lines(p.key for p in inputs),
                    body=code_lines(body), result=Code("{" + ", ".join(result) + "}"))
    first = next(i for i, line in enumerate(source.splitlines()) if line.lstrip().startswith("def forward(")) + 2
    return TFArtifact(backend, source, cg.weights, inputs, outputs, rep.transposes, rep.as_dict(), warnings,
                      list(decomposed), {"io_channels_last": io_channels_last},
                      {first + k: name for k, name in enumerate(owners)}, io_names=io.renamed(),
                      io_warnings=list(io.warnings))


def _legalize_everywhere(g: Graph, backend: str, tables: Tables, legal: frozenset[str] | None) -> list[str]:
    """Dtype legalization of the graph and of every subgraph (branches must agree on types)."""
    from translator.passes import legalize_dtypes

    warnings = legalize_dtypes.run(g, backend, tables, legal=legal)
    for n in g.nodes:
        for sub in n.subgraphs():
            warnings += [w for w in _legalize_everywhere(sub, backend, tables, legal) if w not in warnings]
    return warnings


def _fold_everywhere(g: Graph) -> None:
    """Constant folding in the graph and in every subgraph (constant nodes become constants)."""
    from translator.passes import fold_constants

    fold_constants.run(g)
    for n in g.nodes:
        for sub in n.subgraphs():
            _fold_everywhere(sub)


def _spec_shape(shape: tuple | None) -> str:
    if shape is None:
        return "None"
    return "[" + ", ".join(str(d) if isinstance(d, int) else "None" for d in shape) + "]"


def emit(model: Model, io_channels_last: bool = False, tables: Tables | None = None) -> TFArtifact:
    """IR → TensorFlow artifact (source + weights); ``run`` it, or ``save`` it as a SavedModel."""
    return translate(model, NAME, tables, io_channels_last)



# ----------------------------------------------------------------------------- running
def feed_arrays(artifact: TFArtifact, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Model-named feeds (in the source model's layout) → arrays in the artifact's dtypes
    (legalized inputs range-checked) and I/O layout (``io_channels_last`` moves axis 1 last)."""
    from translator.dtypes import numpy_dtype

    out = {}
    for p in artifact.inputs:
        if p.name not in inputs:
            raise OpbridgeError("bad_model", f"no value fed for input {p.name!r}")
        x = np.asarray(inputs[p.name])
        want = numpy_dtype(p.dtype)
        if x.dtype.kind in "OSU":
            x = np.asarray([str(s) for s in x.reshape(-1)], dtype=object).reshape(x.shape)
        elif x.dtype != want:
            if x.dtype.kind in "iu" and np.dtype(want).kind in "iu" and x.size:
                info = np.iinfo(want)
                if x.min() < info.min or x.max() > info.max:
                    raise Unsupported("cast", artifact.backend, "unsupported_dtype",
                                      f"input {p.name!r} ({x.dtype}) has values outside {p.dtype}'s range")
            x = x.astype(want)
        if p.channels_last and x.ndim >= 3:  # the harness feeds the source model's layout
            x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
        out[p.key] = x
    return out


def restore_outputs(artifact: TFArtifact, values: list[Any]) -> list[Any]:
    """Back to the source model's dtypes where the values allow it exactly (strings decoded)
    and layout, in the model's output order."""
    from translator.dtypes import numpy_dtype
    from translator.harness import exact_astype

    res = []
    for p, y in zip(artifact.outputs, values):
        y = np.asarray(y)
        if y.dtype.kind in "OS":
            y = np.asarray([s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else s
                            for s in y.reshape(-1)], dtype=object).reshape(y.shape)
        elif p.source_dtype is not None and p.source_dtype != p.dtype and p.source_dtype in tf_dtype_names():
            y = exact_astype(y, numpy_dtype(p.source_dtype))  # a documented legalization, never rounded here
        if p.channels_last and y.ndim >= 3:  # back to the source model's layout
            y = np.ascontiguousarray(np.moveaxis(y, -1, 1))
        res.append(y)
    return res


def run(artifact: TFArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    """Trace and run ``forward`` (in memory; no SavedModel); outputs in the model's order."""
    import tensorflow as tf

    mod = artifact.module()
    feeds = feed_arrays(artifact, inputs)
    args = [tf.constant(feeds[p.key], dtype=getattr(tf, tf_dtype_names()[p.dtype][3:])) for p in artifact.inputs]
    res = mod.forward(*args)
    return restore_outputs(artifact, [res[p.key].numpy() for p in artifact.outputs])


# ----------------------------------------------------------------------------- saving
def weights_bytes(weights: Mapping[str, np.ndarray]) -> bytes:
    """An ``.npz`` with fixed timestamps: the same weights give the same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for k, arr in weights.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, np.asarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{k}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, b.getvalue())
    return buf.getvalue()


def write_sources(artifact: TFArtifact, folder: Path) -> None:
    """The standalone source, its weights and the conversion report (deterministic bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(artifact.source, encoding="utf-8")
    (folder / "weights.npz").write_bytes(weights_bytes(artifact.weights))
    (folder / "opbridge.json").write_text(json.dumps(artifact.report(), indent=1, sort_keys=True) + "\n",
                                          encoding="utf-8")


def save(artifact: TFArtifact, path: str | os.PathLike[str]) -> Path:
    """A SavedModel directory (signature ``serving_default`` = ``forward``), written to a
    temporary directory and renamed into place: nothing half-written on failure. The
    generated source, weights and report go to its ``assets.extra/``."""
    import tensorflow as tf

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        mod = artifact.module()
        tf.saved_model.save(mod, str(tmp), signatures={"serving_default": mod.forward})
        normalize_saved_model(tmp)
        write_sources(artifact, tmp / "assets.extra")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


_UID_NAME = re.compile(r"^(.*)_(\d+)$")


def normalize_saved_model(folder: Path) -> None:
    """Same module → same bytes. TensorFlow names every traced function after a process-wide
    counter (``__inference_forward_73``) and stamps ``fingerprint.pb`` with a random uuid:
    the functions are renumbered in creation order (``__inference_forward_0``, …) wherever
    a function name appears in ``saved_model.pb``, and the fingerprint is recomputed by
    TensorFlow with a uuid derived from the file's contents."""
    from tensorflow.core.protobuf import saved_model_pb2

    pb = folder / "saved_model.pb"
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(pb.read_bytes())
    names: list[tuple[int, str]] = []
    for mg in sm.meta_graphs:
        for f in mg.graph_def.library.function:
            m = _UID_NAME.match(f.signature.name)
            if m:
                names.append((int(m.group(2)), f.signature.name))
    mapping = {old: f"{_UID_NAME.match(old).group(1)}_{k}" for k, (_, old) in enumerate(sorted(set(names)))}  # type: ignore[union-attr]
    kept = {f.signature.name for mg in sm.meta_graphs for f in mg.graph_def.library.function} - set(mapping)
    if mapping and len(set(mapping.values())) == len(mapping) and not set(mapping.values()) & kept:
        for mg in sm.meta_graphs:
            _rename_strings(mg, mapping)
            funcs = sorted(mg.graph_def.library.function, key=lambda f: f.signature.name)
            del mg.graph_def.library.function[:]
            mg.graph_def.library.function.extend(funcs)
    # captured tensors (the weights) are arguments named after another counter: renumbered too
    captured = [a.attr["_user_specified_name"] for mg in sm.meta_graphs for f in mg.graph_def.library.function
                for a in f.arg_attr.values()
                if "_user_specified_name" in a.attr and a.attr["_user_specified_name"].s.isdigit()]
    order = {n: str(k).encode() for k, n in enumerate(sorted({int(c.s) for c in captured}))}
    for c in captured:
        c.s = order[int(c.s)]
    pb.write_bytes(sm.SerializeToString(deterministic=True))
    _write_fingerprint(folder)


def _rename_strings(msg: Any, mapping: Mapping[str, str]) -> None:
    """Every string field and string map key of ``msg`` (recursively) found in ``mapping``
    is replaced (tensor contents are skipped: they hold data, not names)."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    if msg.DESCRIPTOR.name == "TensorProto":
        return
    for fd, value in msg.ListFields():
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == FD.LABEL_REPEATED
        if fd.type == FD.TYPE_STRING:
            if repeated:
                for i, v in enumerate(value):
                    if v in mapping:
                        value[i] = mapping[v]
            elif value in mapping:
                setattr(msg, fd.name, mapping[value])
        elif fd.type == FD.TYPE_MESSAGE:
            entry = fd.message_type
            if entry.GetOptions().map_entry:
                key_fd, val_fd = entry.fields_by_name["key"], entry.fields_by_name["value"]
                items = list(value.items())
                if val_fd.type == FD.TYPE_MESSAGE:
                    for _, v in items:
                        _rename_strings(v, mapping)
                if key_fd.type == FD.TYPE_STRING and any(k in mapping for k, _ in items):
                    copies = []
                    for k, v in items:
                        if val_fd.type == FD.TYPE_MESSAGE:
                            c = type(v)()
                            c.CopyFrom(v)
                            v = c
                        copies.append((mapping.get(k, k), v))
                    value.clear()
                    for k, v in copies:
                        if val_fd.type == FD.TYPE_MESSAGE:
                            value[k].CopyFrom(v)
                        else:
                            value[k] = v
                elif val_fd.type == FD.TYPE_STRING:
                    for k, v in items:
                        if v in mapping:
                            value[k] = mapping[v]
            elif repeated:
                for v in value:
                    _rename_strings(v, mapping)
            else:
                _rename_strings(value, mapping)


def _write_fingerprint(folder: Path) -> None:
    """``fingerprint.pb`` as TensorFlow computes it, its uuid derived from ``saved_model.pb``
    (TensorFlow draws a random one); no fingerprint at all if TensorFlow cannot make one
    (loading does not need it)."""
    import hashlib

    from tensorflow.core.protobuf import fingerprint_pb2

    path = folder / "fingerprint.pb"
    try:
        from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting as fp_wrap

        fp = fingerprint_pb2.FingerprintDef()
        fp.ParseFromString(fp_wrap.CreateFingerprintDef(str(folder)))
    except Exception:  # noqa: BLE001 - an internal module of TensorFlow: without it, no fingerprint
        path.unlink(missing_ok=True)
        return
    digest = hashlib.sha256((folder / "saved_model.pb").read_bytes()).digest()
    fp.uuid = str(int.from_bytes(digest[:16], "big"))
    path.write_bytes(fp.SerializeToString(deterministic=True))


def load_saved(path: str | os.PathLike[str]) -> Any:
    """The saved ``serving_default`` signature (a callable taking the input keys)."""
    import tensorflow as tf

    _quiet_tf()
    return tf.saved_model.load(str(path)).signatures["serving_default"]
