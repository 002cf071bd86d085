"""Lowered IR → a standalone JAX module (``model.py``: one pure function over ``jax.numpy`` /
``jax.lax``) and its weights (``weights.safetensors``).

Only code generation: the pipeline has verified, folded, legalized dtypes and lowered the
graph, so every node has a rule (``@rule`` in the family modules) or the ``snippet`` of its
``stablehlo`` cell in ``optable.yaml`` (the same expression the table's proof lowered to the
named StableHLO op). ``forward(params, *inputs)`` is straight-line code, one line per node.

Constants: a snippet reads the inputs that steer it (shapes, axes, pads, scales) with NumPy
at trace time, as a StableHLO op holds them as attributes; so integer constants up to
``INLINE_MAX`` elements are written inline as ``np.array(...)``, and so is every other
constant of up to ``INLINE_ANY`` elements (a resize's scales). Every other
constant is a weight: ``params[<name>]``, an argument of the jitted and exported function
(never baked into the module).

A rule or snippet that cannot write a node (``e.refuse``) does not end the conversion here:
every such node is reported to the pipeline at once (``Rejected``), which decomposes it
where the table can. Names from the model become sanitized, de-duplicated identifiers
(``render.ident``); literals pass through ``render.literal``.
"""
from __future__ import annotations

import builtins
import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from translator.compile import pysource
from translator.compile.registry import Refusal, snippet_of
from translator.compile.render import literal
from translator.ir.graph import Model, Node, Value
from translator.ir.names import io_names
from translator.table import paths
from translator.table.errors import Unsupported

from .registry import NAME
from .runtime import EXPORT_FILE, MLIR_FILE, WEIGHTS_FILE, JaxArtifact, shape_structs

if TYPE_CHECKING:
    from translator.compile.pipeline import Compilation

#: constants written inline (NumPy, static at trace time) up to this many elements: integers
#: (shapes, axes, pads, indices), and any dtype (a resize's scales, a box list)
INLINE_MAX = 64
INLINE_ANY = 8
#: the dtypes JAX computes in (with 64-bit types enabled): IR dtype id → ``jnp`` attribute
#: (the narrow floats and 4-bit integers are ml_dtypes' types, which jax.numpy takes; int2 and
#: uint2 are not: jax.export cannot serialize them)
JAX_DTYPES = {d: d for d in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                             "bfloat16", "float32", "float64", "complex64", "complex128", "int4", "uint4")}
JAX_DTYPES.update({"bool": "bool_", "float8e4m3fn": "float8_e4m3fn", "float8e4m3fnuz": "float8_e4m3fnuz",
                   "float8e5m2": "float8_e5m2", "float8e5m2fnuz": "float8_e5m2fnuz", "float4e2m1": "float4_e2m1fn",
                   "float8e8m0": "float8_e8m0fnu"})
_RESERVED = frozenset(dir(builtins)) | {"os", "math", "np", "jax", "jnp", "lax", "functools", "itertools", "params",
                                        "forward", "load", "DT", "SOURCE", "OPS", "INPUTS", "OUTPUTS", "VERSION",
                                        "WEIGHTS_FILE", "EXPORT_FILE", "MLIR_FILE"}
_HLO = re.compile(r"(?<![\w.])hlo\.([a-z_]+)\(")
_DT = re.compile(r"(?<![\w.])DT\(")


#: how a snippet reads an input as a NumPy value at trace time (``np.asarray({axes})``,
#: ``{k}.tolist()``, ``int({depth})``): that input port steers the code, as an attribute would
_STATIC_READ = r"(?:(?<![\w.])np\.[a-z_]+\(|\bint\(|\bfloat\(|\btuple\(|\blist\()\{{{0}\}}|\{{{0}\}}\.tolist\(\)"


#: op id → the input ports its rule (family modules) reads as NumPy values
RULE_STATIC_PORTS: dict[str, frozenset[str]] = {}


def static_ports(op: Any) -> frozenset[str]:
    """The input ports of ``op`` that its rule or its ``stablehlo`` snippet reads as NumPy values."""
    if op.id in RULE_STATIC_PORTS:
        return RULE_STATIC_PORTS[op.id]
    text = snippet_of(op, (NAME,)) if op.signature is not None else None
    if not text:
        return frozenset()
    return frozenset(p.name for p in op.signature.inputs if re.search(_STATIC_READ.format(re.escape(p.name)), text))


def static_inputs(node: Node) -> list[Value]:
    """The main graph's inputs that ``node`` reads through a static port: arguments of the
    jitted function that it is specialized on (``jax.jit``'s static arguments)."""
    from translator.table.loader import load_tables

    op = load_tables().ops.get(node.op)
    if op is None or op.signature is None or node.graph is None or node.graph.parent is not None:
        return []
    ports = static_ports(op)
    out = []
    k = 0
    for p in op.signature.inputs:
        idx = range(k, len(node.inputs)) if p.variadic else [k]
        k = len(node.inputs) if p.variadic else k + 1
        for i in idx:
            v = node.inputs[i] if i < len(node.inputs) else None
            if (p.name in ports and v is not None and not v.is_const and v.producer is None
                    and any(v is g for g in node.graph.inputs) and v.type.is_static
                    and int(np.prod(v.type.shape)) <= INLINE_MAX):
                out.append(v)
    return out


def _helpers_file() -> str:
    return os.path.join(paths.templates_dir(), NAME, "helpers.py")


def jax_dtype(dtype: str | None) -> str:
    """``jnp.<dtype>`` (also a NumPy dtype: ``np.array(..., dtype=jnp.bfloat16)``)."""
    if dtype not in JAX_DTYPES:
        raise Unsupported("cast", NAME, "unsupported_dtype", f"JAX has no {dtype} arrays")
    return f"jnp.{JAX_DTYPES[dtype]}"


class Codegen(pysource.SourceCodegen):
    """The body of ``forward``: constants inline (NumPy) or as ``params[...]``; the proofs'
    ``hlo.<op>`` and ``DT`` as the module's own helpers."""

    name = NAME
    reserved = _RESERVED
    #: set when a rule wrote a graph input's size (``sized``): the trial cannot trace such code alone
    read_input_sizes = False
    #: set when a rule wrote an output shape from the inferred dims instead of reading its shape input
    wrote_sized = False

    def sized(self, v: Value) -> str | None:
        """The shape of ``v`` as code when the IR knows each dim as a size or as the name of a
        graph input's symbolic dim, that input's ``x.shape[j]`` (a ``jax.export`` symbolic
        dimension in the export); None otherwise."""
        shape = v.type.shape if v.type.kind == "tensor" else None
        g = main_graph(v.producer) if v.producer is not None else None
        if shape is None or any(d is None for d in shape) or g is None:
            return None
        where: dict[str, tuple[Value, int]] = {}
        for x in g.inputs:
            for j, d in enumerate(x.type.shape or ()):
                if isinstance(d, str):
                    where.setdefault(d, (x, j))
        parts = []
        for d in shape:
            if isinstance(d, int):
                parts.append(str(d))
            elif d in where:
                x, j = where[d]
                if self.scope.lookup(x) is None:
                    self.read_input_sizes = True
                    parts.append(f"{self.bind(x)}.shape[{j}]")  # the trial's stand-in; never traced
                else:
                    parts.append(f"{self.ref(x)}.shape[{j}]")
            else:
                return None
        self.wrote_sized = True
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def helpers_path(self) -> str:
        return _helpers_file()

    def dtype_code(self, dtype: str | None) -> str:
        return jax_dtype(dtype)

    def const_code(self, v: Value) -> str:
        arr = np.asarray(v.const)
        if arr.dtype.kind in "OSU":
            raise Unsupported("constant", NAME, "unsupported_dtype", f"JAX has no {arr.dtype} arrays")
        dt = jax_dtype(v.type.dtype or arr.dtype.name)
        if arr.size == 0:
            return f"np.zeros({literal(list(arr.shape))}, dtype={dt})"
        if arr.size <= INLINE_ANY or (arr.size <= INLINE_MAX and arr.dtype.kind in "biu"):
            return f"np.array({literal(arr.tolist())}, dtype={dt})"
        return self.param(v)

    def finish_snippet(self, code: str) -> str:
        # the proof's direct StableHLO ops and ONNX dtype reader are the module's own helpers
        for name in sorted(set(_HLO.findall(code))):
            self.helper(f"_hlo_{name}")
        if _DT.search(code):
            self.helper("_DT")
        return _DT.sub("_DT(", _HLO.sub(lambda m: f"_hlo_{m.group(1)}(", code))


NodeEmit = pysource.SourceEmit


def trial(node: Node, ctx: "Compilation") -> Refusal | None:
    """Whether the node's rule or snippet writes it, and the code traces in JAX on the node's
    shapes and dtypes (``jax.eval_shape``, nothing computed): what fails here is a refusal
    while lowering, so the table's decomposition applies and ``report`` agrees with ``convert``.
    Nodes with subgraphs and inputs of unknown shape are judged by writing the code only."""
    cg = Codegen(ctx.tables, ctx.target.columns)
    args: list[tuple[str, Value]] = []
    for v in node.inputs:
        if v is not None and not v.is_const and cg.scope.lookup(v) is None:
            args.append((cg.bind(v), v))
    e = NodeEmit(cg, node)
    try:
        code = cg.code(e)
    except Unsupported as exc:
        return pysource.refusal(NAME, exc)
    if any(True for _ in node.subgraphs()) or static_inputs(node):
        return None  # a static input's value is only known when the function is called
    if cg.read_input_sizes:
        return None  # written from the output's inferred dims: a graph input's sizes, nothing to trace alone
    symbolic = _symbolic_graph(node) and not cg.wrote_sized
    if symbolic:  # a value the code reads with NumPy, computed from sizes that stay symbolic
        op = ctx.tables.ops.get(node.op)
        ports = static_ports(op) if op is not None and op.signature is not None else frozenset()
        for p, v in zip(op.signature.inputs if ports else (), node.inputs):
            if p.name in ports and computed(v):
                return Refusal("dynamic_shape", f"the code reads {p.name!r} ({v.name!r}) as a value, which the "
                                                "model computes from symbolic dims")
    specs = []
    for _, v in args:
        if v.type.shape is None or None in v.type.shape or v.type.dtype not in JAX_DTYPES or v.type.kind != "tensor":
            return None
        specs.append((tuple(v.type.shape), v.type.dtype))
    lines = [f"{', '.join(e.outs) if len(e.outs) != 1 else e.outs[0]} = {code}"] if isinstance(code, str) else code
    got = _traces(cg, [a for a, _ in args], specs, lines, e.outs)
    if isinstance(got, str):
        if any(not isinstance(d, int) for s, _ in specs for d in s):
            # with symbolic dims JAX must prove what a size would show (a reshape divides evenly,
            # a convolution's channels match): convert fixes the fewest dims and lowers again,
            # where a node JAX rejects at any size is then refused for what it is
            return Refusal("dynamic_shape", f"JAX cannot trace the code with symbolic dims: {got}")
        return Refusal("unsupported_attr", f"JAX rejects the code: {got}")
    for v, shape in zip(node.outputs, got):  # the code must give the op's result shape, not just run
        want = v.type.shape if v.type.kind == "tensor" and v.type.is_static else None
        if shape is not None and not all(isinstance(d, int) for d in shape):
            continue  # symbolic: JAX's expression of it, not comparable with the IR's names
        if want is not None and shape is not None and tuple(int(d) for d in want) != tuple(shape):
            return Refusal("unsupported_attr", f"JAX's code gives output {v.name!r} the shape {list(shape)} where the "
                                               f"op gives {[int(d) for d in want]} (an attribute it does not follow)")
    return None


def _spec(v: Value, k: int) -> tuple[tuple[int | str, ...], str] | None:
    """(shape, dtype) of a graph input for the export: symbolic dims by name, an unknown one
    named after its place (``?<input>.<axis>``, a name no model dim has); None: unknown rank."""
    if v.type.shape is None or not v.type.dtype:
        return None
    return (tuple(d if isinstance(d, (int, str)) else f"?{k}.{j}" for j, d in enumerate(v.type.shape)),
            str(v.type.dtype))


def main_graph(node: Node):
    """The model's main graph, from a node of it or of one of its subgraphs (None: detached)."""
    g = node.graph
    while g is not None and g.parent is not None:
        g = g.parent
    return g


def computed(v: Value | None) -> bool:
    """Whether ``v`` is made by a node (neither absent, a constant, nor a graph input)."""
    return v is not None and not v.is_const and v.producer is not None


def _symbolic_graph(node: Node) -> bool:
    """Whether the main graph of ``node`` has an input with a dim that is not a size."""
    g = main_graph(node)
    return g is not None and any(not v.type.is_static for v in g.inputs)


def _traces(cg: Codegen, names: list[str], specs: list[tuple[tuple[int | str, ...], str]], lines: list[str],
            outs: list[str]) -> "list[tuple[Any, ...] | None] | str":
    """The output shapes when ``lines`` trace in JAX on inputs of ``specs`` (``jax.eval_shape``;
    named dims as symbolic ones), else why they do not."""
    import jax

    from .runtime import namespace

    text = "\n".join([f"def _trial(params{''.join(', ' + n for n in names)}):"] + ["    " + ln for ln in lines]
                     + [f"    return ({', '.join(outs)},)"])
    ns = namespace(cg.helper_sources())
    try:
        exec(compile(text, "<opbridge-stablehlo-trial>", "exec"), ns)  # noqa: S102 - our own generated code
        params = {k: jax.ShapeDtypeStruct(a.shape, a.dtype) for k, a in cg.params.values()}
        with jax.enable_x64(True):
            out = jax.eval_shape(ns["_trial"], params, *shape_structs(specs))
    except Exception as exc:  # noqa: BLE001 - any tracing failure is the reason
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
    return [tuple(o.shape) if hasattr(o, "shape") else None for o in out]


# ----------------------------------------------------------------------------- emit
def emit(model: Model, ctx: "Compilation") -> JaxArtifact:
    """The lowered IR → ``JaxArtifact`` (the pipeline ran every pass before this)."""
    from translator import __version__
    from translator.compile.pipeline import Rejected
    from translator.compile.render import code_lines, render

    g = model.graph
    cg = Codegen(ctx.tables, ctx.target.columns)
    io = io_names(NAME, [v.name for v in g.inputs], [v.name for v in g.outputs], extra_reserved=_RESERVED)
    args = [cg.bind(v, name) for v, name in zip(g.inputs, io.inputs)]
    static = {id(v) for n in g.nodes for v in static_inputs(n)}
    for v, name in zip(g.inputs, args):
        if id(v) in static:  # a NumPy value in the body, whether fed as an array or as ``Static``
            cg.emit(f"{name} = np.asarray({name})")
    cg.graph_body(g)
    if cg.refused:
        raise Rejected(cg.refused)
    returns = [cg.ref(v) for v in g.outputs]
    source_in = dict(zip((v.name for v in g.inputs), ctx.source_inputs))
    in_dtypes = {v.name: str(v.type.dtype) for v in g.inputs
                 if source_in.get(v.name) is not None and v.type.dtype is not None and source_in[v.name] != v.type.dtype}
    out_dtypes: dict[int, str] = {}
    out_legal: dict[int, str] = {}
    for i, (v, before) in enumerate(zip(g.outputs, ctx.source_outputs)):
        if before is not None and v.type.dtype is not None and before != v.type.dtype:
            out_dtypes[i], out_legal[i] = before, v.type.dtype
    source = render(NAME, "module.py.j2", version=__version__, source=str(model.source), ops=model.op_histogram(),
                    weights_file=WEIGHTS_FILE, export_file=EXPORT_FILE, mlir_file=MLIR_FILE,
                    helpers=code_lines(cg.helper_sources()), params=bool(cg.params),
                    static=[i + 1 for i, v in enumerate(g.inputs) if id(v) in static],
                    input_names=code_lines(args), output_names=list(io.outputs), body=code_lines(cg.scope.lines),
                    returns=code_lines(returns), legalized=list(ctx.warnings))
    specs = [_spec(v, i) for i, v in enumerate(g.inputs)]
    art = JaxArtifact(source, {name: arr for name, arr in cg.params.values()}, [v.name for v in g.inputs],
                      [v.name for v in g.outputs], specs, list(ctx.decomposed), list(ctx.warnings), in_dtypes,
                      out_dtypes, out_legal, io.renamed(), list(io.warnings),
                      static_inputs=[v.name for v in g.inputs if id(v) in static])
    if art.symbolic_dims and not art.static_inputs:
        # the whole function traced with symbolic dims: a helper that needs a size (float() of a
        # dim) fails here, not in the per-node trial; convert then fixes the fewest dims
        try:
            art.export_cache = art.export()
        except Exception as exc:  # noqa: BLE001 - any tracing failure is the reason
            from translator.table.errors import OpbridgeError

            first = str(exc).splitlines()[0] if str(exc) else ""
            raise OpbridgeError("dynamic_shape", f"jax.export cannot keep the symbolic dims "
                                                 f"{', '.join(art.symbolic_dims)}: {type(exc).__name__}: {first}"[:400]) from None
    return art
