"""Per-op code for the PyTorch emitter: the snippet table, the Python lowerings, the helpers.

* ``templates/pytorch/snippets.yaml``: op id → one line of torch code (placeholders are
  documented at the top of that file), rendered by ``NodeEmit.render``.
* ``@lowering(op)``: a function ``fn(e: NodeEmit) -> str | list[str]`` for ops that need a
  decision (an attribute that picks the torch call, an optional input, a static shape):
  a string is the right-hand side assigned to the node's outputs, a list is full lines.
  The families live in ``pytorch_lower_*.py`` beside this file.
* ``@check(op)``: ``fn(node) -> reason | None``, run while lowering: a reason sends the node
  to the table's decomposition (or refuses it with ``unsupported_dtype``).
* ``templates/pytorch/helpers.py``: runtime functions a generated module may need (copied
  into it, only those used); every helper is a plain torch function, tested on its own.
"""
from __future__ import annotations

import ast
import os
import re
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from translator import paths
from translator.errors import Unsupported
from translator.ir import Graph, Node, Value
from translator.render import pyrepr

NAME = "pytorch"
Lowering = Callable[["NodeEmit"], "str | list[str]"]
Check = Callable[[Node], "str | None"]
LOWERINGS: dict[str, Lowering] = {}
CHECKS: dict[str, Check] = {}
#: ONNX TensorProto float element types → torch dtypes (attributes such as stash_type carry them)
ONNX_FLOAT = {1: "torch.float32", 10: "torch.float16", 11: "torch.float64", 16: "torch.bfloat16"}
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def lowering(*op_ids: str) -> Callable[[Lowering], Lowering]:
    def deco(fn: Lowering) -> Lowering:
        for op_id in op_ids:
            if op_id in LOWERINGS:
                raise ValueError(f"pytorch lowering for {op_id!r} registered twice")
            LOWERINGS[op_id] = fn
        return fn

    return deco


def check(*op_ids: str) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        for op_id in op_ids:
            CHECKS[op_id] = fn
        return fn

    return deco


# ----------------------------------------------------------------------------- snippets
def _template_dir() -> str:
    return os.path.join(paths.templates_dir(), NAME)


@lru_cache(maxsize=None)
def snippets() -> dict[str, str]:
    """op id → one-line snippet, from ``templates/pytorch/snippets.yaml`` (strictly checked)."""
    import yaml

    path = os.path.join(_template_dir(), "snippets.yaml")
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or set(data) != {"snippets"} or not isinstance(data["snippets"], dict):
        raise ValueError(f"{path}: expected one key 'snippets' mapping op ids to one-line strings")
    out = {}
    for op_id, text in data["snippets"].items():
        if not isinstance(text, str) or "\n" in text.strip():
            raise ValueError(f"{path}: snippet for {op_id!r} must be a one-line string")
        out[str(op_id)] = text.strip()
    return out


def placeholders(snippet: str) -> list[str]:
    return _PLACEHOLDER.findall(snippet)


# ----------------------------------------------------------------------------- helpers
@lru_cache(maxsize=None)
def _helpers() -> dict[str, tuple[str, tuple[str, ...]]]:
    """helper name → (source, helpers it calls), parsed from ``templates/pytorch/helpers.py``."""
    path = os.path.join(_template_dir(), "helpers.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tree = ast.parse(text)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    out = {}
    for name, fn in funcs.items():
        calls = sorted({n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in funcs and n.id != name})
        out[name] = (ast.get_source_segment(text, fn) or "", tuple(calls))
    return out


def helper_deps(name: str) -> list[str]:
    """``name`` and every helper it needs, dependencies first."""
    table = _helpers()
    if name not in table:
        raise KeyError(f"no helper {name!r} in templates/pytorch/helpers.py")
    order: list[str] = []

    def visit(n: str) -> None:
        for d in table[n][1]:
            visit(d)
        if n not in order:
            order.append(n)

    visit(name)
    return order


def helper_source(name: str) -> str:
    return _helpers()[name][0]


# ----------------------------------------------------------------------------- the node view
class NodeEmit:
    """What a lowering sees of one node: expressions for its inputs, names for its outputs,
    attributes with the signature's defaults, static shapes and constant values."""

    def __init__(self, cg: Any, node: Node) -> None:
        self.cg = cg
        self.node = node
        self.op = cg.tables.ops[node.op]
        self.sig = self.op.signature
        self._outs: list[str] | None = None

    # ------------------------------------------------------------------ inputs
    def index(self, name: str) -> int:
        assert self.sig is not None
        i = self.sig.input_index(name)
        if i is None:
            raise KeyError(f"{self.node.op} has no input {name!r}")
        return i

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
        """(min, max) of output ``j``'s integer dtype as the model declared it (before any
        legalization widened it): what saturating ops clamp to."""
        from translator.dtypes import numpy_dtype

        v = self.node.outputs[j]
        info = np.iinfo(numpy_dtype(self.cg.before_legalization.get(id(v), v.type.dtype)))
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

    def lit(self, value: Any) -> str:
        return literal(value)

    # ------------------------------------------------------------------ outputs and code
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

    def refuse(self, code: str, detail: str) -> Unsupported:
        return Unsupported(self.node.op, NAME, code, detail, self.node.name)

    def render(self, snippet: str) -> str:
        """Fill a snippet's placeholders: inputs by signature name, attributes as literals,
        ``{dtype}`` the first output's torch dtype."""

        def sub(m: re.Match[str]) -> str:
            key = m.group(1)
            if key == "dtype":
                return self.out_dtype(0)
            if self.sig is not None:
                for i, p in enumerate(self.sig.inputs):
                    if p.name == key:
                        if not self.has(i):
                            raise self.refuse("unsupported_attribute_value", f"the snippet needs input {key!r}")
                        return self.x(i)
                if self.sig.attribute(key) is not None:
                    return self.lit(self.attr(key))
            raise ValueError(f"snippet for {self.node.op}: unknown placeholder {{{key}}}")

        return _PLACEHOLDER.sub(sub, snippet)


def literal(value: Any) -> str:
    """A Python literal for plain data; non-finite floats as ``float('nan')`` / ``float('inf')``."""
    if isinstance(value, np.generic):
        return literal(value.item())
    if isinstance(value, float) and not np.isfinite(value):
        if np.isnan(value):
            return "float('nan')"
        return "float('inf')" if value > 0 else "-float('inf')"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    return pyrepr(value)


def axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


# the lowering families register themselves on import
from . import (pytorch_lower_core, pytorch_lower_flow, pytorch_lower_misc, pytorch_lower_nn,  # noqa: E402,F401
               pytorch_lower_quant, pytorch_lower_shape)
