"""What a PyTorch rule sees of one node (``NodeEmit``), and the binder snippets expand through.

A rule (``@rule`` in the family modules) is ``fn(e: NodeEmit) -> str | list[str]``: expressions
for the node's inputs (locals, ``self.<buffer>`` or inline constants), names for its outputs,
attributes with the signature's defaults, static shapes and constant values. A string is the
right-hand side assigned to the node's outputs, a list is whole lines. Conditions the rule
only finds while writing code (an unknown rank, a shape that is not static) raise
``e.refuse(code, detail)``: the code generator reports the node to the pipeline, which
decomposes it where the table can (``translator.compile.pipeline.Rejected``).
"""
from __future__ import annotations

import re
from typing import Any, Sequence, Union

import numpy as np

from translator.table.errors import Unsupported
from translator.ir.graph import Graph, Node, Value
from translator.compile.render import literal

from .registry import NAME


#: float dtypes every torch CPU kernel has (half precision is computed in float32 where not)
WIDE = ("float32", "float64")


def f32(e: "NodeEmit", i: int) -> str:
    """Input ``i`` computed in at least float32 (float16 / bfloat16 are widened)."""
    return e.x(i) if e.dtype_id(i) in WIDE else f"{e.x(i)}.float()"


def onnx_float(enum: int, default: str = "torch.float32") -> str:
    """``torch.<dtype>`` of an ONNX TensorProto float element type (``stash_type``, ``precision``)."""
    from translator.table.dtypes import onnx_enum

    d = onnx_enum().get(int(enum))
    return f"torch.{d}" if d in ("float32", "float16", "float64", "bfloat16") else default


#: a size: an int known when converting, or the Python expression that reads it at run time
#: (``x.shape[2]``, ``(x.shape[3] + 1) // 2``): built only from input references and ints
Size = Union[int, str]

_ATOM = re.compile(r"-?[0-9]+|[A-Za-z_][A-Za-z0-9_.]*(\[[^\[\]]*\])*")


def paren(a: Size) -> str:
    """``a`` as an operand of a binary operator: an int, a name or a subscript as it is, any
    other expression in parentheses."""
    text = literal(a) if isinstance(a, int) else a
    return text if _ATOM.fullmatch(text) else f"({text})"


def size_code(a: Size) -> str:
    return literal(a) if isinstance(a, int) else a


def sizes_code(sizes: Sequence[Size]) -> str:
    """A Python list of sizes: a literal when all are ints, else the list display."""
    if all(isinstance(a, int) for a in sizes):
        return literal([int(a) for a in sizes])
    return "[" + ", ".join(size_code(a) for a in sizes) + "]"


_TRAILING = re.compile(r"(.*) ([+-]) ([0-9]+)")


def plus(a: Size, b: Size) -> Size:
    """``a + b``: ints folded, also into a trailing ``+ k`` / ``- k`` of an expression (``+``
    and ``-`` bind least of the operators sizes are written with)."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, int):
        a, b = b, a
    if not isinstance(b, int):
        return f"{a} + {b}"
    m = _TRAILING.fullmatch(a)
    if m is not None:
        a, b = m.group(1), b + (int(m.group(3)) if m.group(2) == "+" else -int(m.group(3)))
    return a if b == 0 else f"{a} + {b}" if b > 0 else f"{a} - {-b}"


def minus(a: Size, b: Size) -> Size:
    """``a - b``."""
    if isinstance(b, int):
        return plus(a, -b)
    if a == 0:
        return f"-{paren(b)}"
    return f"{size_code(a)} - {paren(b)}"


def times(k: int, a: Size) -> Size:
    if isinstance(a, int):
        return k * a
    return a if k == 1 else f"{k} * {paren(a)}"


def floordiv(a: Size, k: int) -> Size:
    if isinstance(a, int):
        return a // k
    return a if k == 1 else f"{paren(a)} // {k}"


def ceildiv(a: Size, k: int) -> Size:
    """ceil(a / k) for k > 0."""
    return -(-a // k) if isinstance(a, int) else floordiv(plus(a, k - 1), k)


class NodeEmit:
    """What a rule sees of one node: expressions for its inputs, names for its outputs,
    attributes with the signature's defaults, static shapes and constant values."""

    def __init__(self, cg: Any, node: Node) -> None:
        self.cg = cg
        self.node = node
        self.op = cg.tables.ops[node.op]
        self.sig = self.op.signature
        self._outs: list[str] | None = None

    # ------------------------------------------------------------------ inputs
    def v(self, i: int) -> Value | None:
        return self.node.inputs[i] if i < len(self.node.inputs) else None

    def has(self, i: int) -> bool:
        return self.v(i) is not None

    def x(self, i: int) -> str:
        v = self.v(i)
        if v is None:
            raise self.refuse("verifier", f"input {i} is missing")
        return self.cg.ref(v)

    def xs(self) -> list[str]:
        return [self.cg.ref(v) for v in self.node.inputs if v is not None]

    def const(self, i: int) -> np.ndarray | None:
        v = self.v(i)
        return None if v is None or not v.is_const else np.asarray(v.const)

    def ints(self, i: int) -> list[int] | None:
        c = self.const(i)
        return None if c is None else [int(a) for a in c.reshape(-1)]

    def ints_code(self, i: int) -> str:
        """A Python list of ints: a literal when the input is constant, else read at run time."""
        c = self.ints(i)
        return literal(c) if c is not None else f"{self.x(i)}.tolist()"

    def scalar(self, i: int) -> Any:
        c = self.const(i)
        return None if c is None else c.reshape(-1)[0].item()

    def number(self, i: int, other: int) -> str | None:
        """Input ``i`` as a Python number where torch computes the same with it as with the
        tensor (``torch.add(x, 3.0)``, ``torch.clamp(x, 0.0, 6.0)``): a one-element constant of
        input ``other``'s dtype (not bfloat16 or bool), of no higher rank than ``other``, so the
        result has ``other``'s shape. A one-element tensor is a CPU scalar to torch either way,
        with the same kernels; the number spares building it on every ``forward``, and torch's
        clamp with tensor bounds is a slower kernel (8x on a [1, 288, 6, 48] activation). Else None."""
        c, v = self.const(i), self.v(other)
        if (c is None or c.size != 1 or v is None or v.is_const or self.dtype_id(i) != self.dtype_id(other)
                or self.dtype_id(i) in (None, "bfloat16", "bool") or c.dtype.kind not in "iuf"):
            return None
        rank = self.rank(other)
        if rank is None or c.ndim > rank:
            return None
        return literal(self.scalar(i))

    def scalar_code(self, i: int, kind: str = "") -> str:
        """A Python number from a one-element input (``int(...)``/``float(...)`` if not constant)."""
        s = self.scalar(i)
        if s is not None:
            return literal(int(s) if kind == "int" else float(s) if kind == "float" else s)
        conv = {"int": "int", "float": "float"}.get(kind, "")
        return f"{conv}({self.x(i)}.reshape(-1)[0])" if conv else f"{self.x(i)}.reshape(-1)[0].item()"

    def shape(self, i: int) -> tuple[int, ...] | None:
        v = self.v(i)
        if v is None:
            return None
        if v.is_const:
            return tuple(int(d) for d in np.shape(v.const))
        return tuple(v.type.shape) if v.type.is_static else None  # type: ignore[arg-type]

    def rank(self, i: int) -> int | None:
        v = self.v(i)
        if v is None:
            return None
        if v.is_const:
            return int(np.ndim(v.const))
        return v.type.rank

    def need_rank(self, i: int) -> int:
        r = self.rank(i)
        if r is None:
            raise self.refuse("dynamic_shape", f"the rank of input {i} is unknown")
        return r

    def need_shape(self, i: int) -> tuple[int, ...]:
        s = self.shape(i)
        if s is None:
            raise self.refuse("dynamic_shape", f"input {i} needs a static shape")
        return s

    def dims(self, i: int) -> tuple | None:
        """Input ``i``'s shape as far as it is known: sizes, and symbols where the IR has them
        (a dynamic batch); None if the rank is unknown."""
        v = self.v(i)
        if v is None or v.is_const:
            return self.shape(i)
        return None if v.type.shape is None else tuple(v.type.shape)

    def need_dims(self, i: int, start: int) -> tuple:
        """Input ``i``'s shape whose dims from ``start`` on are static (the ones a rule computes
        with); the leading ones may stay symbolic (a dynamic batch)."""
        s = self.dims(i)
        if s is None or not all(isinstance(d, int) for d in s[start:]):
            dims = "a static shape" if start == 0 else f"static dims from axis {start} on"
            raise self.refuse("dynamic_shape", f"input {i} needs {dims} (has {s})")
        return tuple(s)

    def dim(self, i: int, axis: int) -> Size:
        """Input ``i``'s size on ``axis``: an int where the IR knows it, else the expression
        reading it at run time (a symbolic height, width or sequence length)."""
        s = self.dims(i)
        if s is not None and -len(s) <= axis < len(s) and isinstance(s[axis], (int, np.integer)):
            return int(s[axis])
        return f"{self.x(i)}.shape[{axis}]"

    def need_dim(self, i: int, axis: int, why: str) -> int:
        """Input ``i``'s size on ``axis`` where the code needs it as a number (``why``)."""
        d = self.dim(i, axis)
        if not isinstance(d, int):
            raise self.refuse("dynamic_shape", f"input {i} needs a static dim {axis} ({why})")
        return d

    def dtype_id(self, i: int) -> str | None:
        v = self.v(i)
        return None if v is None else v.type.dtype

    def dtype(self, i: int) -> str:
        """``torch.<dtype>`` of input ``i``."""
        return f"torch.{self.cg.dtype_name(self.dtype_id(i))}"

    def out_dtype(self, j: int = 0, default: str | None = None) -> str:
        """``torch.<dtype>`` of output ``j`` (``default`` when the IR does not know it)."""
        d = self.node.outputs[j].type.dtype
        if d is None and default is not None:
            return default
        return f"torch.{self.cg.dtype_name(d)}"

    def out_range(self, j: int = 0) -> tuple[int, int]:
        """(min, max) of output ``j``'s integer dtype as the model declared it (before the
        pipeline's legalization widened it: ``node.meta["source_dtypes"]``): what saturating
        ops clamp to."""
        from translator.table.dtypes import numpy_dtype

        v = self.node.outputs[j]
        source = self.node.meta.get("source_dtypes") or []
        d = source[j] if j < len(source) and source[j] is not None else v.type.dtype
        info = np.iinfo(numpy_dtype(d))
        return int(info.min), int(info.max)

    def is_float(self, i: int = 0) -> bool:
        d = self.dtype_id(i)
        return d is not None and d.startswith(("float", "bfloat"))

    # ------------------------------------------------------------------ attributes
    def attr(self, name: str) -> Any:
        if name in self.node.attrs:
            return self.node.attrs[name]
        a = self.sig.attribute(name) if self.sig is not None else None
        if a is None:
            return None
        d = a.default
        return list(d) if isinstance(d, tuple) else d

    # ------------------------------------------------------------------ outputs and code
    def same(self, x: str) -> str:
        """``x`` itself as this node's output (a no-op: an identity, a full slice), or a copy
        where the graph returns it, so that an output is never one of the module's inputs or
        another output. Never overwritten in place (``elementwise.in_place`` writes over the
        outputs of ``FRESH`` ops only)."""
        g = self.node.graph
        if g is None or any(o is v for o in g.outputs for v in self.node.outputs):
            return f"torch.clone({x})"
        return x

    @property
    def outs(self) -> list[str]:
        if self._outs is None:
            self._outs = [self.cg.bind(v) for v in self.node.outputs]
        return self._outs

    def out(self, j: int = 0) -> str:
        return self.outs[j]

    def n_out(self) -> int:
        return len(self.node.outputs)

    def assign(self, code: str) -> None:
        outs = self.outs
        lhs = ", ".join(outs) if len(outs) != 1 else outs[0]
        self.cg.emit(f"{lhs} = {code}")

    def tmp(self, base: str) -> str:
        return self.cg.fresh(base)

    def helper(self, name: str) -> str:
        return self.cg.helper(name)

    def body(self, g: Graph, base: str) -> str:
        return self.cg.subgraph(g, base)

    def snippet(self) -> str:
        """The snippet of the op's cell filled in for this node (a rule that only adds a check)."""
        return self.cg.snippet(self)

    def refuse(self, code: str, detail: str) -> Unsupported:
        return Unsupported(self.node.op, NAME, code, detail, self.node.name)

    # ------------------------------------------------------------------ the snippet binder
    def value(self, v: Value | None) -> str:
        """A snippet's ``{Input}``: the expression reading it; an omitted input is ``None``."""
        return "None" if v is None else self.cg.ref(v)

    def dtype_of(self, dtype_id: str) -> str:
        return f"torch.{self.cg.dtype_name(dtype_id)}"


class Binder:
    """``translator.table.snippets.Binder`` over a ``NodeEmit``: inputs as expressions, attributes
    as Python literals, dtypes as ``torch.<dtype>``."""

    def __init__(self, e: NodeEmit) -> None:
        self.e = e

    def value(self, v: Value | None) -> str:
        return self.e.value(v)

    def attr(self, name: str, value: Any) -> str:
        return literal(list(value) if isinstance(value, tuple) else value)

    def dtype(self, dtype_id: str) -> str:
        return self.e.dtype_of(dtype_id)
