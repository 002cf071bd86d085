"""Lowered IR → the MIL builder script (``templates/coreml/builder.py.j2``) and its weights.

Only code generation: the pipeline (``translator.compile.pipeline.compile``) has already verified,
folded, prepared (``prepare.py``), legalized and lowered the graph, so every node here is
one the Core ML target emits itself. ``Gen`` writes one line per node from the snippet of
its optable cell (``mb.add(x={A}, y={B})``, completed with the output variable and the
MIL op name), or the lines of the node's rule (``translator.compile.registry``, registered by the
family modules: ``elementwise``, ``shape``, ``reductions``, ``nn``, ``quant``, ``rnn``, ``attention``,
``control``). A control-flow rule writes each subgraph as a nested ``def`` (``Gen.block``) holding
the lines of the subgraph's nodes (``Gen.nodes``), which ``mb.cond`` / ``mb.while_loop`` call.

Values the model computes in a dtype Core ML lacks are computed in the legal one
(``legalize_dtypes``); where that changes the values, the graph itself puts them back into
the declared dtype's range: a bfloat16 result computed in fp32 is rounded to bfloat16, an
8/16-bit integer result computed in int32 wraps around as the narrow type would
(``_legalized_lines``). The runner then only retypes values, exactly.

Names from the model become sanitized, de-duplicated identifiers (``render.ident``);
Python variables are ``v_<MIL name>`` so they never meet the script's own names; every
literal goes through ``render.literal`` (``mil.lit``: plain data only).
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from translator.table import snippets as snippet_grammar
from translator.table.errors import Unsupported
from translator.ir.graph import Graph, Node, Value
from translator.ir.dims import label
from translator.ir.names import COREML_RESERVED, NameSet, io_names
from translator.compile.registry import rules, snippet_of
from translator.compile.render import ident, literal

from .mil import NAME, CoreMLArtifact, Port, contiguous, lit, mil_dtype, np_dtype

if TYPE_CHECKING:
    from translator.ir.graph import Model
    from translator.compile.pipeline import Compilation
    from translator.table.loader import Tables

#: integer dtypes Core ML computes in int32: (bits, signed)
NARROW_INTS = {"int8": (8, True), "uint8": (8, False), "int16": (16, True), "uint16": (16, False),
               "int4": (4, True), "uint4": (4, False), "int2": (2, True), "uint2": (2, False)}
#: ops whose outputs come out of a MIL ``cond`` / ``while_loop`` (``control.py``): a graph output
#: they produce gets its own ``identity`` (the control op's output vars are named by MIL)
CONTROL_OPS = frozenset({"if", "loop", "scan"})
#: the largest size of a flexible input dim (``ct.RangeDim``'s upper bound: an ML program needs
#: one; 2^20 samples are a minute of 16 kHz audio, and far beyond any image side)
FLEXIBLE_UPPER = 1 << 20
#: small float dtypes Core ML computes in fp32 (``prepare.widen_small_dtypes``): (mantissa bits,
#: smallest normal exponent, largest finite value, what a non-saturating overflow gives or None
#: when the format always saturates)
SMALL_FLOATS = {"float8e4m3fn": (3, -6, 448.0, float("nan")), "float8e4m3fnuz": (3, -7, 240.0, float("nan")),
                "float8e5m2": (2, -14, 57344.0, float("inf")), "float8e5m2fnuz": (2, -15, 57344.0, float("nan")),
                "float4e2m1": (1, 0, 6.0, None)}


class Binder:
    """``translator.table.snippets.Binder`` for one node: inputs are the script's variables, float
    attributes are typed like the first input (MIL wants T-typed scalar operands)."""

    def __init__(self, gen: "Gen", node: Node) -> None:
        self.gen, self.node = gen, node

    def value(self, v: Value | None) -> str:
        return self.gen.var(v)

    def attr(self, name: str, value: Any) -> str:
        first = next((v for v in self.node.inputs if v is not None), None)
        if isinstance(value, float) and first is not None and first.type.dtype in ("float16", "float32"):
            return f"np.{first.type.dtype}({lit(value)})"
        return lit(list(value) if isinstance(value, tuple) else value)

    def dtype(self, dtype_id: str) -> str:
        return literal(np.dtype(np_dtype(dtype_id)).name)


class Gen:
    def __init__(self, graph: Graph, tables: "Tables") -> None:
        self.g = graph
        #: values put back into their declared dtype right after their node (``nodes``)
        self.fixed: set[int] = set()
        self.tables = tables
        self.lines: list[str] = []
        self.weights: dict[str, np.ndarray] = {}
        self.weight_vars: list[tuple[str, str]] = []
        self.names: dict[int, str] = {}
        self.used = NameSet(COREML_RESERVED)  # coremltools would rename these
        self.origin: dict[str, str] = {}
        self.output_names: list[str] = []
        self._op = "?"
        self._rules = rules(NAME)

    # names -------------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        n = self.used.take(ident(base or "v"))
        self.origin[n] = self._op
        return n

    def bind(self, v: Value, name: str) -> str:
        """``v`` is named ``name`` (a graph input's Core ML name, from ``names.io_names``)."""
        self.used.add(name)
        self.names[id(v)] = name
        return name

    def reserve(self, v: Value) -> str:
        self.names[id(v)] = self.fresh(v.name)
        return self.names[id(v)]

    @staticmethod
    def pyvar(mil_name: str) -> str:
        return "v_" + mil_name

    def var(self, v: Value | None) -> str:
        """The Python variable holding ``v`` (constants become weights on first use)."""
        if v is None:
            return "None"
        if id(v) not in self.names:
            if not v.is_const:
                raise Unsupported(self._op, NAME, "runtime_error", f"value {v.name!r} is used before it is defined")
            key = self.reserve(v)
            arr = np.asarray(v.const)
            if v.type.dtype and arr.dtype != np_dtype(v.type.dtype):
                arr = arr.astype(np_dtype(v.type.dtype))
            self.weights[key] = contiguous(arr)
            self.weight_vars.append((self.pyvar(key), key))
        return self.pyvar(self.names[id(v)])

    def const(self, node: Node, suffix: str, array: np.ndarray) -> str:
        """A constant the emitter computed (a mask, ...): stored with the weights, never inlined."""
        key = self.fresh(f"{self.names[id(node.outputs[0])]}_{suffix}")
        self.weights[key] = contiguous(np.asarray(array))
        self.weight_vars.append((self.pyvar(key), key))
        return self.pyvar(key)

    def out(self, node: Node, i: int = 0) -> str:
        return self.var(node.outputs[i])

    def name(self, node: Node, i: int = 0) -> str:
        """The MIL op name (literal) of the op producing output ``i``."""
        return literal(self.names[id(node.outputs[i])])

    def tmp(self, node: Node, suffix: str) -> tuple[str, str]:
        """A fresh intermediate: (Python variable, MIL name literal)."""
        n = self.fresh(f"{self.names[id(node.outputs[0])]}_{suffix}")
        return self.pyvar(n), literal(n)

    def emit(self, line: str) -> None:
        self.lines.append(line)

    # attributes --------------------------------------------------------------------------
    def attr(self, node: Node, name: str) -> Any:
        if name in node.attrs:
            return node.attrs[name]
        op = self.tables.ops.get(node.op)
        a = op.signature.attribute(name) if op and op.signature else None
        d = a.default if a is not None else None
        return list(d) if isinstance(d, tuple) else d

    def cell_name(self, node: Node) -> str:
        """The MIL op the node's coreml cell names (its first name)."""
        cell = self.tables.ops[node.op].backends.get(NAME)
        assert cell is not None and cell.names
        return cell.names[0]

    # generation --------------------------------------------------------------------------
    def generate(self, outputs: Sequence[Port]) -> list[tuple[str, str]]:
        """Every node's lines, then the outputs: (Python variable, Core ML name) per output.
        An output port whose ``coreml`` name is set (``names.io_names``) gets that name; an
        output whose declared dtype the graph computes legalized gets its values put back
        into that dtype first (``_legalized_lines``)."""
        plan = []
        seen: set[int] = set()
        for k, v in enumerate(self.g.outputs):
            source = outputs[k].dtype if k < len(outputs) else None
            direct = (v.producer is not None and len(v.producer.outputs) == 1 and id(v) not in seen
                      and v.producer.op not in CONTROL_OPS
                      and id(v) not in self.names and _fix(source, v.type.dtype) is None)
            given = outputs[k].coreml if k < len(outputs) else ""
            if given and given not in self.used:
                self.used.add(given)
                name = given
            else:
                name = self.fresh(v.name)
            if direct:
                self.names[id(v)] = name
            seen.add(id(v))
            plan.append((v, name, direct, source))
        self.fixed = set()
        self.nodes(self.g)
        fixed = self.fixed
        self._op = "output"
        result = []
        for v, name, direct, source in plan:
            var = self.pyvar(name)
            fix = _fix(source, v.type.dtype) if id(v) not in fixed else None
            if direct:
                result.append((var, name))
            elif fix is not None:
                self._legalized_lines(fix, self.var(v), var, name, v.type.dtype, name)
                result.append((var, name))
            else:
                self.emit(f"{var} = mb.identity(x={self.var(v)}, name={literal(name)})")
                result.append((var, name))
        self.output_names = [n for _, n in result]
        return result

    def nodes(self, graph: Graph) -> None:
        """The lines of ``graph``'s nodes: the main graph, or the body of a MIL ``cond`` /
        ``while_loop`` block (``control.py``; its lines go inside a ``def``, see ``block``).
        A value computed in a legal dtype other than the one the model declares is put back
        into the declared dtype's values right after its node (``_legalized_lines``)."""
        outer_op = self._op
        for node in graph.nodes:
            self._op = node.op
            for v in node.outputs:
                if id(v) not in self.names:
                    self.reserve(v)
            self.origin[self.names[id(node.outputs[0])]] = node.op
            source = node.meta.get("source_dtypes") or []
            saturate = int(node.attrs.get("saturate", 1)) if node.op in ("cast", "cast_like") else 1
            fixes = [(k, v, fix) for k, v in enumerate(node.outputs)
                     if k < len(source) and (fix := _fix(source[k], v.type.dtype, saturate)) is not None]
            final = {}
            for k, v, _ in fixes:  # the op writes a raw variable; the fix writes the value's own
                final[k] = self.names[id(v)]
                self.names[id(v)] = self.fresh(f"{final[k]}_{v.type.dtype}")
            self._node(node)
            self._op = node.op
            for k, v, fix in fixes:
                raw = self.var(v)
                self.names[id(v)] = final[k]
                self._legalized_lines(fix, raw, self.pyvar(final[k]), final[k], v.type.dtype, final[k])
                self.fixed.add(id(v))
        self._op = outer_op

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        """The lines emitted inside the ``with`` go into a nested ``def`` opened by ``header``
        (a MIL block builder: ``mb.cond``'s branches, ``mb.while_loop``'s cond and body). The
        function reads values of enclosing blocks by closure, as MIL blocks read outer vars."""
        outer, self.lines = self.lines, []
        try:
            yield
        finally:
            inner, self.lines = self.lines, outer
        self.lines.append(header)
        self.lines.extend("    " + line for line in (inner or ["pass"]))

    def param(self, v: Value, base: str | None = None) -> str:
        """A block input (a loop's iteration count, carried value...) as a fresh Python parameter."""
        self.names[id(v)] = self.fresh(base or v.name)
        return self.pyvar(self.names[id(v)])

    def _node(self, node: Node) -> None:
        rule = self._rules.get(node.op)
        if rule is not None:
            rule.fn(self, node)
            return
        op = self.tables.ops.get(node.op)
        text = snippet_of(op, (NAME,)) if op is not None else None
        if text is None:
            raise Unsupported(node.op, NAME, "unsupported_op", "no snippet and no rule after lowering", node.name)
        self.emit(self.snippet(node, op, text))

    def snippet(self, node: Node, op: Any, text: str) -> str:
        """The cell's snippet (one ``mb.<op>(...)`` call) as a statement: the node's output
        variables ``=`` the call, with the MIL op name added as its last argument."""
        call = snippet_grammar.expand(text, node, op, Binder(self, node)).strip()
        if not (call.startswith("mb.") and call.endswith(")")):
            raise Unsupported(node.op, NAME, "internal_error", f"the coreml snippet {text!r} is not one mb.<op>(...) call",
                              node.name)
        sep = "" if call.endswith("()") else ", "
        outs = ", ".join(self.var(v) for v in node.outputs)
        return f"{outs} = {call[:-1]}{sep}name={self.name(node)})"

    def _legalized_lines(self, fix: tuple[str, Any], raw: str, var: str, name: str, dtype: str, key: str) -> None:
        """``var`` (MIL op name ``name``) = ``raw`` put back into the declared dtype's values.

        bfloat16 computed in fp32: rounded to the nearest bfloat16 by Veltkamp's split (the
        top 8 significant bits of ``x * (2^16 + 1) - (x * (2^16 + 1) - x)``); |x| > 2^64 is
        scaled by 2^-64 around it (the product would overflow); inf and NaN are kept.
        8/16-bit integers computed in int32: ``(x + o) mod 2^n - o`` (o = 2^(n-1) for signed
        types, else 0), the narrow type's wrap-around (``~x`` of a uint8 is ``255 - x``)."""
        kind, arg = fix

        def step(suffix: str, call: str) -> str:
            n = self.fresh(f"{key}_{suffix}")
            self.emit(f"{self.pyvar(n)} = {call}, name={literal(n)})")
            return self.pyvar(n)

        def c(value: Any) -> str:
            return f"np.{np.dtype(np_dtype(dtype)).name}({lit(value)})"

        if kind == "small_float":
            self._small_float_lines(arg, raw, var, name, step, c)
            return
        if kind == "bfloat16":
            big = step("big", "mb.greater(x=" + step("abs", f"mb.abs(x={raw}") + f", y={c(2.0 ** 64)}")
            s = step("scaled", f"mb.select(cond={big}, a=" + step("down", f"mb.mul(x={raw}, y={c(2.0 ** -64)}") +
                     f", b={raw}")
            g = step("split", f"mb.mul(x={s}, y={c(65537.0)}")
            hi = step("hi", f"mb.add(x={g}, y=" + step("lo", f"mb.sub(x={s}, y={g}"))
            hi = step("rounded", f"mb.select(cond={big}, a=" + step("up", f"mb.mul(x={hi}, y={c(2.0 ** 64)}") +
                      f", b={hi}")
            finite = step("finite", "mb.equal(x=" + step("nan_if_inf", f"mb.sub(x={raw}, y={raw}") + f", y={c(0.0)}")
            self.emit(f"{var} = mb.select(cond={finite}, a={hi}, b={raw}, name={literal(name)})")
            return
        bits, signed = arg
        span, off = 1 << bits, (1 << (bits - 1)) if signed else 0
        if not off:
            self.emit(f"{var} = mb.mod(x={raw}, y={c(span)}, name={literal(name)})")
            return
        wrapped = step("wrapped", "mb.mod(x=" + step("shifted", f"mb.add(x={raw}, y={c(off)}") + f", y={c(span)}")
        self.emit(f"{var} = mb.sub(x={wrapped}, y={c(off)}, name={literal(name)})")

    def _small_float_lines(self, arg: Any, raw: str, var: str, name: str, step: Any, c: Any) -> None:
        """fp32 ``raw`` rounded to the nearest value (ties to even) of a float format with ``m``
        mantissa bits (``SMALL_FLOATS``): normal magnitudes by Veltkamp's split (the top ``m + 1`` significant bits
        of ``x * (2^(23 - m) + 1) - (x * (2^(23 - m) + 1) - x)``), subnormal ones (below
        ``2^emin``) by adding and removing ``2^(emin - m + 23)`` (fp32 rounds the sum to a
        multiple of the subnormal step). ``x`` is first clipped to twice the largest finite
        value (no overflow, infinities included); a rounded magnitude above the largest value
        saturates to it, or becomes the format's overflow value (inf or NaN). NaN stays NaN."""
        (m, emin, top, over), saturate = arg
        x = step("clipped", f"mb.clip(x={raw}, alpha={c(-2 * top)}, beta={c(2 * top)}")
        sgn = step("sign", f"mb.sign(x={x}")
        mag = step("mag", f"mb.abs(x={x}")
        g = step("split", f"mb.mul(x={x}, y={c(2.0 ** (23 - m) + 1)}")
        hi = step("normal", f"mb.add(x={g}, y=" + step("lo", f"mb.sub(x={x}, y={g}"))
        big = c(2.0 ** (emin - m + 23))
        sub = step("subnormal", "mb.mul(x=" + step("sub_mag", "mb.sub(x=" + step("sub_add", f"mb.add(x={mag}, y={big}") +
                   f", y={big}") + f", y={sgn}")
        r = step("rounded", "mb.select(cond=" + step("small", f"mb.less(x={mag}, y={c(2.0 ** emin)}") +
                 f", a={sub}, b={hi}")
        ov = step("overflow", "mb.greater(x=" + step("rounded_mag", f"mb.abs(x={r}") + f", y={c(top)}")
        if saturate:
            flow = step("saturated", f"mb.mul(x={sgn}, y={c(top)}")
        elif over != over:  # NaN
            flow = c(over)
        else:
            flow = step("overflowed", f"mb.mul(x={sgn}, y={c(over)}")
        if over is not None:
            self.emit(f"{var} = mb.select(cond={ov}, a={flow}, b={r}, name={literal(name)})")
            return
        # a format without NaN: NaN becomes the code ONNX (and ml_dtypes) give it, -0.0
        r = step("in_range", f"mb.select(cond={ov}, a={flow}, b={r}")
        nan = step("nan", f"mb.not_equal(x={raw}, y={raw}")
        self.emit(f"{var} = mb.select(cond={nan}, a={c(-0.0)}, b={r}, name={literal(name)})")


def _fix(source: str | None, legal: str | None, saturate: int = 1) -> tuple[str, Any] | None:
    """What puts a value the model declares ``source`` but Core ML computes in ``legal``
    back into ``source``'s values: ("bfloat16", None), ("small_float", (format, saturate)),
    ("int", (bits, signed)) or None."""
    if source == "bfloat16" and legal == "float32":
        return ("bfloat16", None)
    if source in SMALL_FLOATS and legal == "float32":
        return ("small_float", (SMALL_FLOATS[source], bool(saturate) or SMALL_FLOATS[source][3] is None))
    if source in NARROW_INTS and legal == "int32":
        return ("int", NARROW_INTS[source])
    return None


# ----------------------------------------------------------------------------- the artifact
def emit(model: "Model", ctx: "Compilation") -> CoreMLArtifact:
    """The lowered graph → builder script + weights + I/O ports (not yet built or converted)."""
    from translator import __version__
    from translator.compile.render import Code, code_lines, render

    g = model.graph
    gen = Gen(g, ctx.tables)
    # Core ML names: one rule set for every backend (translator/ir/names.py): identifiers, not
    # one of the type names coremltools renames (``tuple`` → ``tuple_workaround``)
    io = io_names(NAME, [v.name for v in g.inputs], [v.name for v in g.outputs])
    ctx.warn(io.warnings)
    inputs = [Port(v.name, gen.bind(v, name), d or v.type.dtype or "float32", v.type.dtype or "float32",
                   v.type.shape) for v, d, name in zip(g.inputs, ctx.source_inputs, io.inputs)]
    outputs = [Port(v.name, name, d or v.type.dtype or "", v.type.dtype or "", v.type.shape)
               for v, d, name in zip(g.outputs, ctx.source_outputs, io.outputs)]
    out_vars = gen.generate(outputs)
    for p, (_, name) in zip(outputs, out_vars):
        p.coreml = name
    specs, flexible = [], {}
    defaults = ctx.options.get("dim_defaults") or {}
    for p, v in zip(inputs, g.inputs):
        if p.shape is None:
            raise Unsupported("input", NAME, "dynamic_shape", f"input {p.name!r} has no known rank; a Core ML "
                              "input declares one", None)
        # a symbolic dim is a flexible one (``ct.RangeDim``), named by its label so that inputs
        # sharing a symbol share the MIL symbol; its default size is the one a check runs first
        shape = tuple(int(d) if isinstance(d, int) else label(v.name, i, d) for i, d in enumerate(p.shape))
        for d in shape:
            if isinstance(d, str):
                flexible.setdefault(d, int(defaults.get(d, 1)))
        specs.append((p.coreml, mil_dtype(p.legal), shape))
    target = ctx.options["deployment_target"]
    source = render(NAME, "builder.py.j2", source=model.source or "<model>", version=__version__, target=target,
                    ops=model.op_histogram(), input_specs=specs, flexible=flexible, upper=FLEXIBLE_UPPER, output_names=list(gen.output_names),
                    inputs=[{"var": Code(gen.pyvar(p.coreml)), "name": p.coreml} for p in inputs],
                    weights=[{"var": Code(var), "key": key} for var, key in gen.weight_vars],
                    body=code_lines(gen.lines), outputs=code_lines([v for v, _ in out_vars]))
    return CoreMLArtifact(source, dict(gen.weights), target, inputs, outputs, list(ctx.warnings),
                          list(ctx.decomposed), dict(gen.origin), flexible=flexible)


__all__ = ["Gen", "Binder", "emit", "NARROW_INTS", "CONTROL_OPS"]
