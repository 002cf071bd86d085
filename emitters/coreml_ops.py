"""Core ML code generation: the builder-script writer and the Python lowerings per op.

``Gen`` turns the lowered IR into lines of MIL builder code for
``templates/coreml/builder.py.j2``: one line per node from ``snippets.yaml``, or the
lines of a lowering registered here with ``@lowering(op, check=...)`` when one line is
not enough (attribute translation, constant operands, several MIL ops). A lowering's
``check(node)`` returns ``(reason code, detail)`` when it cannot handle the node; the
node is then decomposed through the table, or refused with that code.

Lowerings live in five rooms, all registered into ``LOWER``: this file (elementwise ops,
activations), ``coreml_ops_shape.py`` (shapes, indexing, reductions, einsum), ``coreml_ops_nn.py``
(convolution, pooling, resizing, normalization, losses, attention), ``coreml_ops_rnn.py`` (GRU,
LSTM) and ``coreml_ops_quant.py`` (linear quantization).

Names from the model become sanitized, de-duplicated identifiers (``render.ident``);
Python variables are ``v_<MIL name>`` so they never meet the script's own names; every
literal goes through ``lit`` (plain data only).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from translator.errors import Unsupported
from translator.ir import Graph, Node, Value
from translator.lowering import register_lowering
from translator.names import COREML_RESERVED, NameSet
from translator.render import ident, pyrepr
from translator.tables import Tables

NAME = "coreml"
Check = Callable[[Node], "tuple[str, str] | None"]


@dataclass(frozen=True)
class Lowering:
    emit: Callable[["Gen", Node], None]
    check: Check | None = None
    #: the lowering also takes dtypes outside the op's coreml cell (it casts or composes)
    any_dtype: bool = False


#: op id → Python lowering (code generation) of the coreml emitter
LOWER: dict[str, Lowering] = {}


def lowering(*ops: str, check: Check | None = None,
             any_dtype: bool = False) -> Callable[[Callable[["Gen", Node], None]], Callable[["Gen", Node], None]]:
    """Register a code generator for ``ops``; also a ``translator.lowering`` lowering, so an op
    without a native coreml cell is kept for this emitter instead of being decomposed. The
    cell's dtype constraint still holds unless ``any_dtype``."""

    def deco(fn: Callable[["Gen", Node], None]) -> Callable[["Gen", Node], None]:
        for op in ops:
            LOWER[op] = Lowering(fn, check, any_dtype)
            register_lowering(NAME, op)(_keeper(op))
        return fn

    return deco


def _keeper(op: str) -> Callable[[Node], bool]:
    """``lower_for``'s second tier: keep the node for this emitter when the lowering takes it."""

    def keep(node: Node) -> bool:
        if not LOWER[op].any_dtype:
            from translator.lowering import cell_accepts
            from translator.tables import load_tables

            if cell_accepts(NAME, load_tables())(node) is not None:
                return False  # outside the cell's dtypes: decomposed, or refused as unsupported_dtype
        return accepts(node) is None  # raises with the check's code when nothing else applies

    return keep


def accepts(node: Node) -> str | None:
    """``lower_for`` node check: None when the lowering takes the node. When it cannot and
    the table has no decomposition that applies, the refusal carries the check's code."""
    low = LOWER.get(node.op)
    if low is None or low.check is None:
        return None
    why = low.check(node)
    if why is None:
        return None
    from translator.lowering import applies
    from translator.tables import load_tables

    op = load_tables().ops.get(node.op)
    if op is None or not op.decomposition or applies(op, node) is not None:
        raise Unsupported(node.op, NAME, why[0], why[1], node.name)
    return why[1]


# ----------------------------------------------------------------------------- literals and types
def lit(x: Any) -> str:
    """Plain data → Python source (non-finite floats spelled ``float('inf')``)."""
    if isinstance(x, np.ndarray):
        x = x.tolist()
    elif isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return f"float({'nan' if math.isnan(x) else ('inf' if x > 0 else '-inf')!r})"
    if isinstance(x, (list, tuple)):
        inner = ", ".join(lit(v) for v in x)
        return f"[{inner}]"
    return pyrepr(x)


def np_lit(arr: Any, dtype: str) -> str:
    """A typed NumPy literal: ``np.array(<data>, dtype='float32')``."""
    a = np.asarray(arr)
    return f"np.array({lit(a)}, dtype={pyrepr(np.dtype(_np(dtype)).name)})"


def _np(dtype: str | None) -> Any:
    from translator.dtypes import numpy_dtype

    return numpy_dtype(dtype or "float32")


def mil_dtype(dtype: str) -> str:
    """IR dtype id → MIL dtype string (``fp32``), as coremltools names it."""
    from coremltools.converters.mil.mil import types

    return types.builtin_to_string(types.numpy_type_to_builtin_type(_np(dtype)))


def onnx_to_dtype(to: int) -> str | None:
    from translator.frontends.onnx import onnx_dtype_map
    from translator.tables import load_tables

    return onnx_dtype_map(load_tables()).get(int(to))


def _contiguous(a: np.ndarray) -> np.ndarray:
    """C-contiguous, rank kept (``np.ascontiguousarray`` turns a 0-d array into shape (1,))."""
    return np.asarray(a) if a.flags.c_contiguous else np.ascontiguousarray(a)


# ----------------------------------------------------------------------------- the generator
class Gen:
    def __init__(self, graph: Graph, tables: Tables) -> None:
        self.g = graph
        self.tables = tables
        self.lines: list[str] = []
        self.weights: dict[str, np.ndarray] = {}
        self.weight_vars: list[tuple[str, str]] = []
        self.names: dict[int, str] = {}
        self.used = NameSet(COREML_RESERVED)  # coremltools would rename these
        self.origin: dict[str, str] = {}
        self.output_names: list[str] = []
        self._op = "?"

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
            if v.type.dtype and arr.dtype != _np(v.type.dtype):
                arr = arr.astype(_np(v.type.dtype))
            self.weights[key] = _contiguous(arr)
            self.weight_vars.append((self.pyvar(key), key))
        return self.pyvar(self.names[id(v)])

    def const(self, node: Node, suffix: str, array: np.ndarray) -> str:
        """A constant the emitter computed (a mask, ...): stored with the weights, never inlined."""
        key = self.fresh(f"{self.names[id(node.outputs[0])]}_{suffix}")
        self.weights[key] = _contiguous(np.asarray(array))
        self.weight_vars.append((self.pyvar(key), key))
        return self.pyvar(key)

    def out(self, node: Node, i: int = 0) -> str:
        return self.var(node.outputs[i])

    def name(self, node: Node, i: int = 0) -> str:
        """The MIL op name (literal) of the op producing output ``i``."""
        return pyrepr(self.names[id(node.outputs[i])])

    def tmp(self, node: Node, suffix: str) -> tuple[str, str]:
        """A fresh intermediate: (Python variable, MIL name literal)."""
        n = self.fresh(f"{self.names[id(node.outputs[0])]}_{suffix}")
        return self.pyvar(n), pyrepr(n)

    def emit(self, line: str) -> None:
        self.lines.append(line)

    # attributes and constants ------------------------------------------------------------
    def attr(self, node: Node, name: str) -> Any:
        if name in node.attrs:
            return node.attrs[name]
        op = self.tables.ops.get(node.op)
        a = op.signature.attribute(name) if op and op.signature else None
        d = a.default if a is not None else None
        return list(d) if isinstance(d, tuple) else d

    # generation --------------------------------------------------------------------------
    def generate(self, outputs: Sequence[Any]) -> list[tuple[str, str]]:
        """Every node's lines, then the outputs: (Python variable, Core ML name) per output.
        An output port whose ``coreml`` name is set (``names.io_names``) gets that name."""
        from emitters.coreml import snippets

        plan = []
        seen: set[int] = set()
        for k, v in enumerate(self.g.outputs):
            direct = (v.producer is not None and len(v.producer.outputs) == 1 and id(v) not in seen
                      and id(v) not in self.names)
            given = getattr(outputs[k], "coreml", "") if k < len(outputs) else ""
            if given and given not in self.used:
                self.used.add(given)
                name = given
            else:
                name = self.fresh(v.name)
            if direct:
                self.names[id(v)] = name
            seen.add(id(v))
            plan.append((v, name, direct))
        table = snippets()
        for node in self.g.nodes:
            self._op = node.op
            for v in node.outputs:
                if id(v) not in self.names:
                    self.reserve(v)
            self.origin[self.names[id(node.outputs[0])]] = node.op
            low = LOWER.get(node.op)
            if low is not None:
                low.emit(self, node)
            elif node.op in table:
                self.emit(self.snippet(node, table[node.op]))
            else:
                raise Unsupported(node.op, NAME, "unsupported_op", "no snippet and no lowering after lowering", node.name)
        self._op = "output"
        result = []
        for v, name, direct in plan:
            if direct:
                result.append((self.pyvar(name), name))
            else:
                var = self.pyvar(name)
                self.emit(f"{var} = mb.identity(x={self.var(v)}, name={pyrepr(name)})")
                result.append((var, name))
        self.output_names = [n for _, n in result]
        return result

    _PLACEHOLDER = re.compile(r"\{(out|name|ins|in\d+|dt\d+|@\w+)\}")

    def snippet(self, node: Node, text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            key = m.group(1)
            if key == "out":
                return ", ".join(self.var(v) for v in node.outputs)
            if key == "name":
                return self.name(node)
            if key == "ins":
                return "[" + ", ".join(self.var(v) for v in node.inputs) + "]"
            if key.startswith("in"):
                i = int(key[2:])
                return self.var(node.inputs[i]) if i < len(node.inputs) else "None"
            if key.startswith("dt"):
                v = node.inputs[int(key[2:])]
                return pyrepr(np.dtype(_np(v.type.dtype if v is not None else None)).name)
            value = self.attr(node, key[1:])
            first = node.inputs[0] if node.inputs else None
            if isinstance(value, float) and first is not None and first.type.dtype in ("float16", "float32"):
                return f"np.{first.type.dtype}({lit(value)})"  # MIL wants T-typed scalar operands
            return lit(value)

        return self._PLACEHOLDER.sub(sub, text)


# ----------------------------------------------------------------------------- helpers
def const_of(v: Value | None) -> np.ndarray | None:
    return None if v is None or not v.is_const else np.asarray(v.const)


def rank_of(v: Value | None) -> int | None:
    return None if v is None else v.type.rank


def static_shape(v: Value | None) -> tuple[int, ...] | None:
    if v is None or v.type.shape is None or not all(isinstance(d, int) for d in v.type.shape):
        return None
    return tuple(int(d) for d in v.type.shape)


def _axis(a: int, r: int) -> int:
    return int(a) + r if int(a) < 0 else int(a)


def need_const(*idx: int) -> Check:
    """A check: inputs ``idx`` (when present) are constants."""

    def check(node: Node) -> tuple[str, str] | None:
        for i in idx:
            if i < len(node.inputs) and node.inputs[i] is not None and not node.inputs[i].is_const:
                return ("requires_constant_input", f"input {i} must be a constant for Core ML")
        return None

    return check


def need_rank(*idx: int) -> Check:
    def check(node: Node) -> tuple[str, str] | None:
        for i in idx:
            if i < len(node.inputs) and node.inputs[i] is not None and node.inputs[i].type.rank is None:
                return ("dynamic_shape", f"input {i} has an unknown rank")
        return None

    return check


def all_of(*checks: Check) -> Check:
    def check(node: Node) -> tuple[str, str] | None:
        for c in checks:
            why = c(node)
            if why is not None:
                return why
        return None

    return check


def cell_name(gen: Gen, node: Node) -> str:
    op = gen.tables.ops[node.op]
    cell = op.backends.get(NAME)
    assert cell is not None and cell.name
    return cell.name


# ----------------------------------------------------------------------------- pre-lowering rewrites
def fold_cast_like(graph: Graph) -> int:
    """cast_like of a constant reads only the dtype of its second input: fold it to a constant
    (fold_constants folds only nodes whose inputs are all constants), so MIL sees a const operand."""
    from translator.dtypes import numpy_dtype

    folded = 0
    for node in list(graph.nodes):
        x = node.inputs[0] if node.op == "cast_like" and node.inputs else None
        to = node.inputs[1].type.dtype if x is not None and len(node.inputs) > 1 and node.inputs[1] is not None else None
        if x is None or not x.is_const or to is None or np.asarray(x.const).dtype.kind not in "biuf":
            continue
        out = node.outputs[0]
        c = graph.add_constant(out.name + "_folded", np.asarray(x.const).astype(numpy_dtype(to)), to)
        if any(o is out for o in graph.outputs):
            name = out.name
            out.name, c.name = f"{name}__folded_away", name
        graph.replace_all_uses_with(out, c)
        graph.remove_node(node)
        folded += 1
    return folded


def clamp_index_constants(graph: Graph) -> int:
    """Slice bounds like INT64_MAX ("to the end") fit no int32: clamp constant starts/ends to
    [-(dim+1), dim] where the sliced dims are static (same result), before dtype legalization."""
    changed = 0
    for node in graph.nodes:
        if node.op != "slice" or len(node.inputs) < 3:
            continue
        shape = static_shape(node.inputs[0])
        if shape is None:
            continue
        r = len(shape)
        axes_v = node.inputs[3] if len(node.inputs) > 3 else None
        axes = const_of(axes_v) if axes_v is not None else np.arange(len(np.asarray(const_of(node.inputs[1]) if node.inputs[1] is not None and node.inputs[1].is_const else [])))
        if axes is None:
            continue
        for k in (1, 2):
            v = node.inputs[k]
            c = const_of(v)
            if c is None or c.dtype.kind not in "iu" or len(c) != len(axes):
                continue
            dims = np.asarray([shape[_axis(a, r)] for a in axes], dtype=np.int64)
            new = np.clip(c.astype(np.int64), -dims - 1, dims)
            if not np.array_equal(new, c):
                nv = graph.add_constant(f"{v.name}_clamped", new.astype(c.dtype), v.type.dtype or "int64")
                node.replace_input(k, nv)
                changed += 1
    return changed


# ----------------------------------------------------------------------------- elementwise and activations
@lowering("cast", "cast_like", any_dtype=True)
def _cast(gen: Gen, node: Node) -> None:
    src = node.inputs[0]
    to = node.outputs[0].type.dtype
    if to is None and node.op == "cast":
        to = onnx_to_dtype(node.attrs["to"])
    if to is None:
        raise Unsupported(node.op, NAME, "unsupported_dtype", "unknown target dtype", node.name)
    if src.type.dtype == to:
        gen.emit(f"{gen.out(node)} = mb.identity(x={gen.var(src)}, name={gen.name(node)})")
    else:
        gen.emit(f"{gen.out(node)} = mb.cast(x={gen.var(src)}, dtype={pyrepr(mil_dtype(to))}, name={gen.name(node)})")


@lowering("is_inf")
def _is_inf(gen: Gen, node: Node) -> None:
    pos, neg = int(gen.attr(node, "detect_positive")), int(gen.attr(node, "detect_negative"))
    x, dt = gen.var(node.inputs[0]), node.inputs[0].type.dtype
    if pos != neg:
        gen.emit(f"{gen.out(node)} = mb.equal(x={x}, y={np_lit(np.inf if pos else -np.inf, dt)}, name={gen.name(node)})")
        return
    a, an = gen.tmp(node, "abs")
    gen.emit(f"{a} = mb.abs(x={x}, name={an})")
    # both: |x| == inf; neither: |x| < -1, false everywhere (NaN included)
    fn, y = ("equal", np_lit(np.inf, dt)) if pos else ("less", np_lit(-1, dt))
    gen.emit(f"{gen.out(node)} = mb.{fn}(x={a}, y={y}, name={gen.name(node)})")


@lowering("sum", "max", "min")
def _variadic(gen: Gen, node: Node) -> None:
    fn = {"sum": "add", "max": "maximum", "min": "minimum"}[node.op]
    ins = [v for v in node.inputs if v is not None]
    if len(ins) == 1:
        gen.emit(f"{gen.out(node)} = mb.identity(x={gen.var(ins[0])}, name={gen.name(node)})")
        return
    acc = gen.var(ins[0])
    for i, v in enumerate(ins[1:], 1):
        last = i == len(ins) - 1
        var, nm = (gen.out(node), gen.name(node)) if last else gen.tmp(node, f"acc{i}")
        gen.emit(f"{var} = mb.{fn}(x={acc}, y={gen.var(v)}, name={nm})")
        acc = var


@lowering("clip", any_dtype=True)
def _clip(gen: Gen, node: Node) -> None:
    """Constant float bounds: MIL clip; otherwise max(x, lo) then min(., hi) (any dtype, any bounds)."""
    x = node.inputs[0]
    dt = x.type.dtype
    lo_v = node.inputs[1] if len(node.inputs) > 1 else None
    hi_v = node.inputs[2] if len(node.inputs) > 2 else None
    if dt in ("float32", "float16") and all(v is None or v.is_const for v in (lo_v, hi_v)) and (lo_v or hi_v):
        lo = float(const_of(lo_v)) if lo_v is not None else float(np.finfo(_np(dt)).min)
        hi = float(const_of(hi_v)) if hi_v is not None else float(np.finfo(_np(dt)).max)
        gen.emit(f"{gen.out(node)} = mb.clip(x={gen.var(x)}, alpha={np_lit(lo, dt)}, beta={np_lit(hi, dt)}, "
                 f"name={gen.name(node)})")
        return
    steps = [(fn, v) for fn, v in (("maximum", lo_v), ("minimum", hi_v)) if v is not None]
    acc = gen.var(x)
    if not steps:
        gen.emit(f"{gen.out(node)} = mb.identity(x={acc}, name={gen.name(node)})")
    for i, (fn, v) in enumerate(steps):
        var, nm = (gen.out(node), gen.name(node)) if i == len(steps) - 1 else gen.tmp(node, fn)
        gen.emit(f"{var} = mb.{fn}(x={acc}, y={gen.var(v)}, name={nm})")
        acc = var


def _prelu_check(node: Node) -> tuple[str, str] | None:
    x, c = node.inputs[0], const_of(node.inputs[1])
    shape = static_shape(x)
    if c is None or shape is None or len(shape) not in (3, 4, 5):
        return ("requires_constant_input", "Core ML prelu takes a constant slope and a rank 3-5 input")
    padded = (1,) * (len(shape) - c.ndim) + tuple(c.shape)
    if len(padded) != len(shape) or any(d != 1 for i, d in enumerate(padded) if i != 1) or padded[1] not in (1, shape[1]):
        return ("unsupported_attribute_value", "Core ML prelu slopes are per channel (axis 1)")
    return None


@lowering("prelu", check=_prelu_check)
def _prelu(gen: Gen, node: Node) -> None:
    x = node.inputs[0]
    ch = x.type.shape[1]
    c = const_of(node.inputs[1]).reshape(-1)
    slope = np.broadcast_to(c, (ch,)).astype(_np(x.type.dtype))
    gen.emit(f"{gen.out(node)} = mb.prelu(x={gen.var(x)}, alpha={np_lit(slope, x.type.dtype)}, name={gen.name(node)})")


@lowering("gelu", check=lambda n: None if n.attrs.get("approximate", "none") in ("none", "tanh")
          else ("unsupported_attribute_value", "approximate must be none or tanh"))
def _gelu(gen: Gen, node: Node) -> None:
    mode = "TANH_APPROXIMATION" if gen.attr(node, "approximate") == "tanh" else "EXACT"
    gen.emit(f"{gen.out(node)} = mb.gelu(x={gen.var(node.inputs[0])}, mode={pyrepr(mode)}, name={gen.name(node)})")


@lowering("softmax", check=need_rank(0))
def _softmax(gen: Gen, node: Node) -> None:
    gen.emit(f"{gen.out(node)} = mb.softmax(x={gen.var(node.inputs[0])}, axis={lit(int(gen.attr(node, 'axis')))}, "
             f"name={gen.name(node)})")


@lowering("round")
def _round(gen: Gen, node: Node) -> None:
    gen.emit(f"{gen.out(node)} = mb.round(x={gen.var(node.inputs[0])}, name={gen.name(node)})")


@lowering("bit_shift_left", "bit_shift_right")
def _shift(gen: Gen, node: Node) -> None:
    x, y = node.inputs[0], node.inputs[1]
    p, pn = gen.tmp(node, "pow2")
    gen.emit(f"{p} = mb.pow(x={np_lit(2, x.type.dtype)}, y={gen.var(y)}, name={pn})")
    fn = "mul" if node.op == "bit_shift_left" else "floor_div"
    gen.emit(f"{gen.out(node)} = mb.{fn}(x={gen.var(x)}, y={p}, name={gen.name(node)})")


@lowering("pow")
def _pow(gen: Gen, node: Node) -> None:
    """MIL pow takes one dtype; an exponent of another dtype is cast to the base's."""
    x, y = node.inputs[0], node.inputs[1]
    yv = gen.var(y)
    if y.type.dtype != x.type.dtype:
        t, tn = gen.tmp(node, "exponent")
        gen.emit(f"{t} = mb.cast(x={yv}, dtype={pyrepr(mil_dtype(x.type.dtype))}, name={tn})")
        yv = t
    gen.emit(f"{gen.out(node)} = mb.pow(x={gen.var(x)}, y={yv}, name={gen.name(node)})")


@lowering("matmul", check=need_rank(0, 1))
def _matmul(gen: Gen, node: Node) -> None:
    """numpy matmul: a 1-D operand gets a unit axis for the product, removed afterwards."""
    a, b = node.inputs[0], node.inputs[1]
    av, bv = gen.var(a), gen.var(b)
    squeeze = []
    if a.type.rank == 1:
        t, tn = gen.tmp(node, "row")
        gen.emit(f"{t} = mb.expand_dims(x={av}, axes=[0], name={tn})")
        av = t
        squeeze.append(-2)
    if b.type.rank == 1:
        t, tn = gen.tmp(node, "col")
        gen.emit(f"{t} = mb.expand_dims(x={bv}, axes=[-1], name={tn})")
        bv = t
        squeeze.append(-1)
    if not squeeze:
        gen.emit(f"{gen.out(node)} = mb.matmul(x={av}, y={bv}, name={gen.name(node)})")
        return
    t, tn = gen.tmp(node, "mm")
    gen.emit(f"{t} = mb.matmul(x={av}, y={bv}, name={tn})")
    out_rank = max(a.type.rank, b.type.rank) + (1 if len(squeeze) == 2 else 0)
    axes = sorted(out_rank + ax for ax in squeeze)
    gen.emit(f"{gen.out(node)} = mb.squeeze(x={t}, axes={lit(axes)}, name={gen.name(node)})")


@lowering("gemm")
def _gemm(gen: Gen, node: Node) -> None:
    a, b = node.inputs[0], node.inputs[1]
    c = node.inputs[2] if len(node.inputs) > 2 else None
    alpha, beta = float(gen.attr(node, "alpha")), float(gen.attr(node, "beta"))
    ta, tb = bool(gen.attr(node, "transA")), bool(gen.attr(node, "transB"))
    dt = a.type.dtype
    last_mm = c is None and alpha == 1.0
    mm, mmn = (gen.out(node), gen.name(node)) if last_mm else gen.tmp(node, "matmul")
    gen.emit(f"{mm} = mb.matmul(x={gen.var(a)}, y={gen.var(b)}, transpose_x={ta}, transpose_y={tb}, name={mmn})")
    acc = mm
    if alpha != 1.0:
        last = c is None
        var, nm = (gen.out(node), gen.name(node)) if last else gen.tmp(node, "alpha")
        gen.emit(f"{var} = mb.mul(x={acc}, y={np_lit(alpha, dt)}, name={nm})")
        acc = var
    if c is not None:
        cv = gen.var(c)
        if beta != 1.0:
            sc, scn = gen.tmp(node, "beta")
            gen.emit(f"{sc} = mb.mul(x={cv}, y={np_lit(beta, dt)}, name={scn})")
            cv = sc
        gen.emit(f"{gen.out(node)} = mb.add(x={acc}, y={cv}, name={gen.name(node)})")


# the lowerings of the other rooms register themselves into LOWER
from . import coreml_ops_nn, coreml_ops_quant, coreml_ops_rnn, coreml_ops_shape  # noqa: E402,F401

__all__ = ["Gen", "LOWER", "lowering", "accepts", "fold_cast_like", "clamp_index_constants", "mil_dtype", "lit",
           "np_lit"]
