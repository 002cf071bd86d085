"""Core ATen → IR: the conversion context and the per-op handlers of the PyTorch frontend.

Each handler is registered for the ATen overloads it reads (``str(OpOverload)``, e.g.
``aten.convolution.default``) with ``op=`` the IR op whose ``pytorch`` cell lists them in
``reads``. At conversion time the op id comes from the table
(``Tables.reverse_index("pytorch")``), never from the registration: ``op=`` only writes the
cells (``python -m translator.frontends.pytorch_ops --cells``) and lets a test assert that
the two agree. A handler receives the FX node's arguments (FX nodes for tensors and
symbolic sizes, Python values otherwise) and returns the IR value(s) of the node.
"""
from __future__ import annotations

import importlib
import operator
from typing import Any, Callable

import numpy as np

from ..table.errors import FrontendError
from ..ir.graph import Graph, TensorType, Value

HANDLERS: dict[str, Callable[..., Any]] = {}
#: ATen overload → the IR op whose pytorch cell reads it (checked against the table by the tests)
OPS: dict[str, str] = {}
#: ATen ops that compute nothing a model's outputs depend on (runtime assertions)
IGNORED = ("aten._assert_scalar.default", "aten._assert_tensor_metadata.default",
           "aten.sym_constrain_range_for_size.default", "aten._assert_async.msg", "aten.sym_constrain_range.default")
#: arithmetic on symbolic sizes (Python operators in the FX graph)
SYM_OPS: dict[Any, str] = {operator.add: "add", operator.sub: "sub", operator.mul: "mul",
                           operator.floordiv: "div", operator.mod: "floor_mod"}
INT64_MAX = 2 ** 63 - 1


def torch_dtype_id(dt: Any) -> str:
    """``torch.float32`` → ``float32`` (the ids of dtypes.yaml)."""
    name = str(dt).rsplit(".", 1)[-1]
    return {"bool": "bool", "half": "float16", "float": "float32", "double": "float64",
            "long": "int64", "int": "int32", "short": "int16", "cfloat": "complex64"}.get(name, name)


def aten(*names: str, op: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for n in names:
            HANDLERS[n] = fn
            OPS[n] = op
        return fn
    return deco


def unmapped(nodes: list[Any], tables: Any) -> tuple[str, list[str]] | None:
    """(first unmapped node's name, every unmapped ATen op in graph order) or None."""
    index = tables.reverse_index("pytorch")
    first, ops = None, []
    for n in nodes:
        if n.op != "call_function" or n.target is operator.getitem or n.target in SYM_OPS:
            continue
        key = str(n.target)
        if key in IGNORED or (key in HANDLERS and key in index):
            continue
        first = first or n.name
        if key not in ops:
            ops.append(key)
    return (first, ops) if ops else None


def static_int(x: Any) -> int | None:
    """A Python int, or a symbolic int with a fixed value, as an int; None when it is symbolic
    (``int()`` would specialize it to the example's value)."""
    if isinstance(x, (bool, np.integer)):
        return int(x)
    if isinstance(x, int):
        return x
    node = getattr(x, "node", None)
    if node is not None:
        try:
            v = node.maybe_as_int()
        except Exception:  # noqa: BLE001
            v = None
        return None if v is None else int(v)
    return None


def _onnx_codes(tables: Any) -> dict[str, int]:
    from ..table.dtypes import onnx_dtype_map

    out: dict[str, int] = {}
    for code, dt in onnx_dtype_map(tables).items():
        out.setdefault(dt, code)
    return out


class Ctx:
    """One conversion: the IR graph being built and the FX node being converted."""

    def __init__(self, graph: Graph, tables: Any, where: str, sym: dict[str, str]) -> None:
        self.g = graph
        self.tables = tables
        self.where = where
        self.sym = sym
        self.index = tables.reverse_index("pytorch")
        self.env: dict[str, Any] = {}
        self.node: Any = None
        self.node_name = ""
        self.aten = ""
        self._codes: dict[str, int] | None = None

    # ------------------------------------------------------------------ errors and types
    def fail(self, code: str, detail: str) -> FrontendError:
        return FrontendError(code, detail, node=self.node_name or None, op=self.aten or None, where=self.where)

    def dim(self, d: Any) -> int | str:
        k = static_int(d)
        if k is not None:
            return k
        else:  # a symbolic size
            s = str(d)
            for k, v in sorted(self.sym.items(), key=lambda kv: -len(kv[0])):
                s = s.replace(k, v)
            return s

    def type_of(self, val: Any) -> TensorType:

        return TensorType(torch_dtype_id(val.dtype), tuple(self.dim(d) for d in val.shape))

    def meta(self, a: Any = None) -> Any:
        node = self.node if a is None else a
        return node.meta.get("val") if hasattr(node, "meta") else None

    def out_dtype(self, i: int = 0) -> str:

        m = self.meta()
        if isinstance(m, (tuple, list)):
            m = m[i]
        return torch_dtype_id(m.dtype)

    def shape(self, a: Any) -> tuple[int | str, ...]:
        m = self.meta(a)
        return tuple(self.dim(d) for d in m.shape)

    def rank(self, a: Any) -> int:
        return len(self.meta(a).shape)

    def onnx_code(self, dtype: str) -> int:
        if self._codes is None:
            self._codes = _onnx_codes(self.tables)
        if dtype not in self._codes:
            raise self.fail("unsupported_dtype", f"dtype {dtype} has no ONNX cast code")
        return self._codes[dtype]

    # ------------------------------------------------------------------ values
    def op(self, aten: str | None = None) -> str:
        hits = self.index.get(aten or self.aten)
        if not hits:
            raise self.fail("unsupported_op", f"ATen op {aten or self.aten} has no IR op in optable.yaml")
        return hits[0][0]

    def v(self, a: Any) -> Any:
        """An FX argument as IR values / Python values."""
        if hasattr(a, "op") and hasattr(a, "meta"):
            return self.env[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(self.v(x) for x in a)
        return a

    def const(self, array: Any, dtype: str, name: str = "c") -> Value:
        from ..table.dtypes import numpy_dtype

        arr = np.asarray(array).astype(numpy_dtype(dtype))
        return self.g.add_constant(f"{self.node_name or 'n'}_{name}", arr, dtype)

    def const_tensor(self, t: Any, name: str) -> Value:
        """A parameter / buffer / lifted constant (a torch tensor) as an IR constant."""
        import torch


        t = t.detach().cpu()
        if t.dtype == torch.bfloat16:
            arr = t.float().numpy().astype(self._np("bfloat16"))
        else:
            arr = t.numpy().copy()
        return self.g.add_constant(name, arr, torch_dtype_id(t.dtype))

    def _np(self, dtype: str) -> Any:
        from ..table.dtypes import numpy_dtype

        return numpy_dtype(dtype)

    def output_value(self, a: Any) -> Value:
        """A graph output: an IR value (Python numbers become constants)."""
        x = self.v(a)
        if isinstance(x, Value):
            return x
        if isinstance(x, (bool, int, float)):
            dt = "bool" if isinstance(x, bool) else "int64" if isinstance(x, int) else "float32"
            return self.const(np.asarray(x), dt, "out")
        raise self.fail("bad_model", f"output {a!r} is not a tensor")

    def ints(self, values: Any, name: str = "i") -> Value:
        return self.const(np.asarray(list(values), dtype=np.int64), "int64", name)

    def t(self, a: Any, dtype: str | None = None) -> Value:
        """A tensor argument as an IR value of ``dtype`` (cast if needed); Python scalars become constants."""
        x = self.v(a)
        if isinstance(x, Value):
            return self.cast(x, dtype) if dtype else x
        if isinstance(x, (bool, int, float)):
            return self.const(np.asarray(x), dtype or self.out_dtype(), "s")
        raise self.fail("bad_model", f"argument {a!r} is not a tensor")

    def cast(self, v: Value, dtype: str) -> Value:
        if v.type.dtype == dtype:
            return v
        if v.const is not None and v.producer is None:
            return self.const(np.asarray(v.const), dtype, "cast")
        return self.emit("cast", [v], {"to": self.onnx_code(dtype)}, types=[TensorType(dtype, v.type.shape)])

    def emit(self, op: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None, n: int = 1,
             types: list[TensorType] | None = None) -> Any:
        node = self.g.add_node(op, inputs, attrs or {}, outputs=n, name=self.node_name or op, types=types)
        return node.outputs[0] if n == 1 else list(node.outputs)

    def promote(self, *args: Any) -> str:
        """The dtype PyTorch computes ``args`` in (its type promotion: tensors by dimension
        category, then Python scalars)."""
        import torch
        from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes


        vals = []
        for a in args:
            m = self.meta(a) if hasattr(a, "meta") else a
            if isinstance(m, torch.Tensor):
                vals.append(torch.empty([1] * m.dim(), dtype=m.dtype))
            elif isinstance(m, (bool, int, float)):
                vals.append(m)
            elif m is not None:  # a symbolic int
                vals.append(1)
        _, res = elementwise_dtypes(*vals, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
        return torch_dtype_id(res)

    def used(self, i: int) -> bool:
        """Whether output ``i`` of the current (tuple-valued) node is read."""
        return any(u.target is operator.getitem and u.args[1] == i for u in self.node.users)

    def shape_value(self, dims: Any, minus_one_for_sym: bool = False) -> Value:
        """A list of sizes (ints and symbolic sizes) as a 1-D int64 value."""
        dims = list(dims)
        vals = [self.v(d) for d in dims]
        if all(isinstance(x, int) for x in vals):
            return self.ints(vals, "shape")
        syms = [i for i, x in enumerate(vals) if not isinstance(x, int)]
        if minus_one_for_sym and len(syms) == 1 and -1 not in vals:
            return self.ints([-1 if i == syms[0] else x for i, x in enumerate(vals)], "shape")
        parts = [self.ints([x], "d") if isinstance(x, int) else self.cast(x, "int64") for x in vals]
        return self.emit("concat", parts, {"axis": 0})

    def axes(self, dims: Any, rank: int) -> list[int]:
        if dims is None:
            return list(range(rank))
        if isinstance(dims, int):
            dims = [dims]
        return [d % rank if rank else 0 for d in dims]

    # ------------------------------------------------------------------ one FX node
    def convert(self, node: Any) -> None:
        self.node, self.node_name = node, node.name
        t = node.target
        if t is operator.getitem:
            self.aten = ""
            seq = self.env[node.args[0].name]
            self.env[node.name] = seq[node.args[1]]
            return
        if t in SYM_OPS:
            self.aten = ""
            self.env[node.name] = self._sym_op(node)
            return
        key = str(t)
        self.aten = key
        if key in IGNORED:
            return
        fn = HANDLERS[key]
        res = fn(self, *node.args, **node.kwargs)
        m = self.meta()
        if isinstance(res, Value):
            self._typed(res, m)
        elif isinstance(res, (list, tuple)) and isinstance(m, (list, tuple)):
            for r, mm in zip(res, m):
                if isinstance(r, Value):
                    self._typed(r, mm)
        self.env[node.name] = res

    def _typed(self, v: Value, m: Any) -> None:
        if v.producer is not None and v.type.dtype is None and hasattr(m, "shape"):
            v.type = self.type_of(m)

    def _sym_op(self, node: Any) -> Any:
        a, b = (self.v(x) for x in node.args)
        k = static_int(node.meta.get("val"))
        if k is not None:  # known statically after all
            return k
        if isinstance(a, int) and isinstance(b, int):
            return node.target(a, b)
        A = a if isinstance(a, Value) else self.ints([a])
        B = b if isinstance(b, Value) else self.ints([b])
        return self.emit(SYM_OPS[node.target], [A, B], types=[TensorType("int64", (1,))])


# ---------------------------------------------------------------------------- helpers used by handlers
def _unary(ctx: Ctx, x: Any, *_: Any, **__: Any) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x, ctx.out_dtype())])


def _bool_in(ctx: Ctx, x: Any, *_: Any) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(x, "bool")])


def _bool_out(ctx: Ctx, x: Any) -> Value:
    """is_nan / is_inf: the test of a float (integer inputs are cast: neither nan nor inf)."""
    X = ctx.t(x)
    if X.type.dtype in ("bool", "int8", "int16", "int32", "int64", "uint8"):
        X = ctx.cast(X, "float32")
    return ctx.emit(ctx.op(), [X])


def _binary(ctx: Ctx, a: Any, b: Any, **kw: Any) -> Value:
    dt = ctx.promote(a, b)
    A, B = ctx.t(a, dt), ctx.t(b, dt)
    alpha = kw.get("alpha", 1)
    if alpha != 1:
        B = ctx.emit("mul", [B, ctx.const(np.asarray(alpha), dt, "alpha")])
    op = ctx.op()
    if dt == "bool":  # the IR's arithmetic and bitwise ops take numbers; on bool they are logical
        op = _BOOL_OPS.get(op, op)
    out = ctx.emit(op, [A, B])
    return ctx.cast(out, ctx.out_dtype()) if ctx.out_dtype() != dt and ctx.out_dtype() != "bool" else out


_BOOL_OPS = {"mul": "logical_and", "add": "logical_or", "max": "logical_or", "min": "logical_and",
             "bitwise_and": "logical_and", "bitwise_or": "logical_or", "bitwise_xor": "logical_xor"}


def _logical(ctx: Ctx, a: Any, b: Any) -> Value:
    return ctx.emit(ctx.op(), [ctx.t(a, "bool"), ctx.t(b, "bool")])


def _reduce(ctx: Ctx, x: Any, dims: Any, keepdim: bool, op: str | None = None, dtype_in: str | None = None) -> Value:
    r = ctx.rank(x)
    X = ctx.t(x, dtype_in or ctx.out_dtype())
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        axes = list(range(r))
    else:
        axes = ctx.axes(dims, r)
    if r == 0:
        return ctx.emit("identity", [X])
    return ctx.emit(op or ctx.op(), [X, ctx.ints(axes, "axes")], {"keepdims": int(bool(keepdim))})


def cells_yaml(tables: Any) -> dict[str, dict[str, Any]]:
    """The pytorch cells with ``reads`` = the ATen overloads registered here (whole cells, for
    ``tools/setcells.py``); ``python -m translator.frontends.pytorch_ops --cells > cells.yaml``."""
    by_op: dict[str, list[str]] = {}
    for name, op in OPS.items():
        by_op.setdefault(op, []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for op_id, op in tables.ops.items():  # ATen names a cell reads but no handler reads into it any more
        cell = op.backends.get("pytorch")
        if cell is not None and cell.reads and op_id not in by_op:
            d = cell.to_dict()
            d.pop("reads")
            out[op_id] = {"pytorch": d}
    for op, names in sorted(by_op.items()):
        cell = tables.ops[op].backends.get("pytorch")
        if cell is None:
            raise KeyError(f"op {op} has no pytorch cell to read {names}")
        d = cell.to_dict()
        d["reads"] = sorted(names)
        out[op] = {"pytorch": d}
    return out


for _part in ("pytorch_aten", "pytorch_aten_extra"):  # they register the handlers
    importlib.import_module(f"{__package__}.{_part}")

if __name__ == "__main__":
    import sys

    import yaml

    from translator.frontends import pytorch_ops  # the registered module (this one runs as __main__)
    from translator.table.loader import load_tables

    if sys.argv[1:] == ["--cells"]:
        sys.stdout.write(yaml.safe_dump(pytorch_ops.cells_yaml(load_tables()), sort_keys=False, width=10**6))
