"""ONNX → IR.

Every ONNX node is mapped onto an IR op through the table: the op whose ``onnx`` cell
names the node's type, disambiguated by the cell's fixed attributes (``Mod`` with
``fmod=1`` is ``trunc_mod``, with ``fmod=0`` ``floor_mod``; the discriminating attribute
is dropped because the IR op's name carries it).

IR ops use the newest ONNX form of each op. Older forms are upgraded by handlers
registered per **version range**: a handler registered at ``since_version`` v serves
every opset from v up to the op's next registered version, where the node's version is
found with ONNX's own schema lookup (``onnx.defs.get_schema(op, opset)``). Ops without a
registered handler use the generic one (attributes and inputs carried over as-is).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..table.errors import FrontendError, OpbridgeError
from ..ir.graph import OPAQUE, Graph, Model, TensorType, Value
from ..table.dtypes import numpy_dtype
from ..table.dtypes import onnx_dtype_map  # noqa: F401 - re-exported (the one map lives in translator.table.dtypes)
from ..ir.gcpause import gc_paused
from ..table.loader import Tables, load_tables
from .onnx_upgrades import pick_handler

#: onnxruntime's contrib domain: its ops map through the table's ``com.microsoft.X`` onnx names
MS_DOMAIN = "com.microsoft"
SUPPORTED_DOMAINS = ("", "ai.onnx", MS_DOMAIN)

#: the frontend contract (translator/frontends/__init__.py)
NAME = "onnx"
RUNTIME = "onnxruntime"


# ---------------------------------------------------------------------------- op mapping
def onnx_op_index(tables: Tables) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """ONNX op type → [(IR op id, discriminating attributes)] from the table, in table order.

    When several rows name the same ONNX op without discriminating attributes (``Max`` is
    both ``max`` and the seed's ``threshold`` row), the first row in the table wins. An op of
    onnxruntime's contrib domain is keyed ``com.microsoft.X`` wherever the cell lists it
    (``dequantize_linear``: ``DequantizeLinear`` first, ``com.microsoft.DequantizeLinear`` after).
    """
    idx: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for op in tables.ops.values():
        cell = op.backends.get("onnx")
        if cell is None or cell.status != "native" or not cell.names:
            continue
        for i, name in enumerate(cell.names):
            if i == 0 or name.startswith(MS_DOMAIN + "."):
                idx.setdefault(name, []).append((op.id, dict(cell.attrs)))
    return idx


class _Ctx:
    def generic(self, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
        """The node converted as it is (the version handlers' last step)."""
        return _generic(self, node, inputs, attrs)

    def __init__(self, tables: Tables, opsets: dict[str, int], base_dir: Path, path: str) -> None:
        self.tables = tables
        self.opsets = opsets
        self.base_dir = base_dir
        self.path = path
        self.keep_unread = False  # an op of an unknown domain or name becomes an OPAQUE node (report)
        self.dtype_of = onnx_dtype_map(tables)
        self.op_index = onnx_op_index(tables)
        self.graph: Graph = Graph()
        self.scopes: list[dict[str, Value]] = []
        self.node_name = ""
        self.functions: dict[tuple[str, str], Any] = {}
        self.since_version: dict[str, int] = {}  # op type → its schema's since_version at the model's opset

    # -------------------------------------------------------------- helpers for handlers
    def fail(self, code: str, detail: str, op: str | None = None) -> FrontendError:
        return FrontendError(code, detail, node=self.node_name or None, op=op, where=self.path)

    def dtype(self, elem_type: int) -> str:
        d = self.dtype_of.get(elem_type)
        if d is None:
            import onnx

            name = onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values() else elem_type
            raise self.fail("unsupported_dtype", f"ONNX element type {name} has no entry in dtypes.yaml")
        return d

    def const(self, array: np.ndarray, name: str = "const") -> Value:
        return self.graph.add_constant(f"{self.node_name or 'n'}_{name}", array, _np_dtype_id(array, self))

    def emit(self, op_id: str, inputs: list[Value | None], attrs: dict[str, Any], n_out: int,
             names: list[str] | None = None) -> list[Value]:
        node = self.graph.add_node(op_id, inputs, attrs, outputs=names or n_out, name=self.node_name or op_id)
        return list(node.outputs)

    def lookup(self, name: str) -> Value:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.fail("bad_model", f"input {name!r} is not produced by any node, input or initializer")


def _np_dtype_id(array: np.ndarray, ctx: _Ctx) -> str:
    from onnx import helper

    try:
        return ctx.dtype(helper.np_dtype_to_tensor_dtype(array.dtype))
    except Exception:  # noqa: BLE001 - object arrays hold strings
        if array.dtype.kind in "OSU":
            return "string"
        raise


# ---------------------------------------------------------------------------- values & attributes
def _type_from_proto(ctx: _Ctx, tp: Any) -> TensorType:
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        tt = tp.tensor_type
        dtype = ctx.dtype(tt.elem_type) if tt.elem_type else None
        shape = None
        if tt.HasField("shape"):
            # a negative size (paddle2onnx writes -1) is unknown, as onnxruntime reads it; so is
            # a dim named "?" (paddle2onnx 0.x): two of them are not the same size
            shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                          else (d.dim_param if d.dim_param and d.dim_param != "?" else None) for d in tt.shape.dim)
        return TensorType(dtype, shape)
    if which == "sequence_type":
        return TensorType(None, None, "sequence", _type_from_proto(ctx, tp.sequence_type.elem_type))
    if which == "optional_type":
        return TensorType(None, None, "optional", _type_from_proto(ctx, tp.optional_type.elem_type))
    if which is None:
        return TensorType(None, None)
    raise ctx.fail("unsupported_dtype", f"ONNX type {which} is not supported")


def _tensor(ctx: _Ctx, t: Any) -> np.ndarray:
    from onnx import numpy_helper

    if t.data_location == 1:  # EXTERNAL
        return _external_tensor(ctx, t)
    try:
        return numpy_helper.to_array(t)
    except Exception as exc:  # noqa: BLE001
        raise ctx.fail("bad_model", f"tensor {t.name!r} cannot be decoded: {exc}") from None


def _external_tensor(ctx: _Ctx, t: Any) -> np.ndarray:
    """Memory-map an external-data tensor (never copied)."""
    from onnx import helper

    info = {e.key: e.value for e in t.external_data}
    loc = info.get("location")
    if not loc:
        raise ctx.fail("missing_external_data", f"tensor {t.name!r} has external data without a location")
    file = (ctx.base_dir / loc).resolve()
    if ctx.base_dir.resolve() not in file.parents and file.parent != ctx.base_dir.resolve():
        raise ctx.fail("bad_model", f"tensor {t.name!r}: external data path {loc!r} escapes the model's folder")
    if not file.is_file():
        raise ctx.fail("missing_external_data", f"tensor {t.name!r}: external data file {loc!r} not found next to the model")
    np_dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
    shape = tuple(int(d) for d in t.dims)
    offset = int(info.get("offset", 0))
    count = math.prod(shape)
    size = file.stat().st_size
    if offset + count * np.dtype(np_dtype).itemsize > size:
        raise ctx.fail("missing_external_data", f"tensor {t.name!r}: external data file {loc!r} is truncated")
    if count == 0:
        return np.zeros(shape, dtype=np_dtype)
    return np.memmap(file, dtype=np_dtype, mode="r", offset=offset, shape=shape)


def _attr(ctx: _Ctx, a: Any) -> Any:
    import onnx
    from onnx import helper

    A = onnx.AttributeProto
    if a.ref_attr_name:
        raise ctx.fail("unsupported_attribute_value", f"attribute {a.name!r} refers to a function attribute")
    if a.type == A.GRAPH:
        return _subgraph(ctx, a.g)
    if a.type == A.GRAPHS:
        return [_subgraph(ctx, g) for g in a.graphs]
    if a.type == A.TENSOR:
        return _tensor(ctx, a.t)
    if a.type == A.TENSORS:
        return [_tensor(ctx, t) for t in a.tensors]
    if a.type in (A.SPARSE_TENSOR, A.SPARSE_TENSORS):
        raise ctx.fail("unsupported_attribute_value", f"sparse tensor attribute {a.name!r} is not supported")
    if a.type == A.TYPE_PROTO:
        return _type_from_proto(ctx, a.tp)
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "surrogateescape")
    if isinstance(v, list):
        return [x.decode("utf-8", "surrogateescape") if isinstance(x, bytes) else x for x in v]
    return v


def _subgraph(ctx: _Ctx, g: Any) -> Graph:
    outer, outer_name = ctx.graph, ctx.node_name
    sub = Graph(g.name or "body")
    sub.parent = outer
    ctx.graph = sub
    ctx.scopes.append({})
    try:
        _fill_graph(ctx, g)
    finally:
        ctx.scopes.pop()
        ctx.graph, ctx.node_name = outer, outer_name  # the node owning the subgraph keeps its name
    return sub


# ---------------------------------------------------------------------------- graph conversion
def _fill_graph(ctx: _Ctx, g: Any) -> None:
    scope = ctx.scopes[-1]
    graph = ctx.graph
    inits = {t.name for t in g.initializer}
    for t in g.initializer:
        arr = _tensor(ctx, t)
        v = graph.add_constant(t.name or "init", arr, ctx.dtype(t.data_type))
        scope[t.name] = v
    for vi in g.input:
        if vi.name in inits:
            continue  # an initializer listed as input (IR < 4 style): a constant
        scope[vi.name] = graph.add_input(vi.name, _type_from_proto(ctx, vi.type))
    value_types = {vi.name: vi.type for vi in list(g.value_info) + list(g.output)}
    for node in g.node:
        _convert_node(ctx, node, value_types)
    for vo in g.output:
        if vo.name not in scope and not any(vo.name in s for s in ctx.scopes):
            raise ctx.fail("bad_model", f"graph output {vo.name!r} is not produced")
        v = ctx.lookup(vo.name)
        t = _type_from_proto(ctx, vo.type)
        if t.dtype is not None or t.kind != "tensor":
            if v.type.dtype is None or v.type.shape is None:
                v.type = t
        graph.outputs.append(v)


def _convert_node(ctx: _Ctx, node: Any, value_types: dict[str, Any]) -> None:
    ctx.node_name = node.name or (node.output[0] if node.output else node.op_type)
    domain = node.domain or ""
    if (domain, node.op_type) in ctx.functions:
        _inline_function(ctx, node, ctx.functions[(domain, node.op_type)], value_types)
        return
    try:
        fn = _handler(ctx, node, domain)
        inputs = [ctx.lookup(n) if n else None for n in node.input]
        attrs = {a.name: _attr(ctx, a) for a in node.attribute}
        outs = fn(ctx, node, inputs, attrs)
    except FrontendError as exc:
        # an op this frontend has no reading of: refused, or (report) kept as an OPAQUE node; the
        # generic handler fails before it emits anything, so nothing half-converted is left
        if not ctx.keep_unread or exc.code not in ("unknown_domain", "unsupported_op") or exc.node != ctx.node_name:
            raise
        op = f"{node.domain}::{node.op_type}" if node.domain else node.op_type
        outs = ctx.emit(OPAQUE, [ctx.lookup(n) if n else None for n in node.input],
                        {"source_op": op, "reason": exc.code, "detail": exc.detail}, len(node.output),
                        [o or f"{ctx.node_name}_unused{i}" for i, o in enumerate(node.output)])
    scope = ctx.scopes[-1]
    for name, v in zip(node.output, outs):
        if not name:
            continue
        if name in value_types:
            t = _type_from_proto(ctx, value_types[name])
            if t.dtype is not None or t.kind != "tensor":
                v.type = t
        scope[name] = v


def _handler(ctx: _Ctx, node: Any, domain: str) -> Any:
    """The function that converts ``node``: its contrib or version handler, else the generic one."""
    import onnx.defs

    if domain not in SUPPORTED_DOMAINS:
        raise ctx.fail("unknown_domain", f"domain {domain!r} is not supported (op {node.op_type})")
    if domain == MS_DOMAIN:  # one version (1) of each contrib op: no version handlers
        if MS_DOMAIN not in ctx.opsets:
            raise ctx.fail("bad_model", f"op {node.op_type} of domain {MS_DOMAIN!r}, which the model does not import")
        fn = MS_HANDLERS.get(node.op_type, _ms_generic)
    elif node.op_type in ORT_DEFAULT_DOMAIN and _older_than_onnx(ctx, node.op_type):
        fn = ORT_DEFAULT_DOMAIN[node.op_type]
    else:
        opset = ctx.opsets.get("", ctx.opsets.get("ai.onnx", 0))
        since = ctx.since_version.get(node.op_type)
        if since is None:
            try:
                since = ctx.since_version[node.op_type] = onnx.defs.get_schema(node.op_type, opset, "").since_version
            except Exception:  # noqa: BLE001 - SchemaError: unknown op or too new for the opset
                raise ctx.fail("unsupported_op", f"ONNX op {node.op_type!r} does not exist at opset {opset}") from None
        fn = pick_handler(node.op_type, since) or _generic
    return fn


def _inline_function(ctx: _Ctx, node: Any, fn: Any, value_types: dict[str, Any]) -> None:
    """Expand a model-local function call in place (its body is converted node by node)."""
    scope = dict(zip(fn.input, [ctx.lookup(n) if n else None for n in node.input]))
    attrs = {a.name: a for a in node.attribute}
    defaults = {a.name: a for a in fn.attribute_proto}
    ctx.scopes.append({k: v for k, v in scope.items() if v is not None})
    try:
        for inner in fn.node:
            import copy

            inner = copy.deepcopy(inner)
            resolved = []
            for a in inner.attribute:
                if a.ref_attr_name:
                    src = attrs.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
                    if src is None:
                        continue
                    b = copy.deepcopy(src)
                    b.name = a.name
                    resolved.append(b)
                else:
                    resolved.append(a)
            del inner.attribute[:]
            inner.attribute.extend(resolved)
            _convert_node(ctx, inner, {})
        results = [ctx.lookup(o) for o in fn.output]
    finally:
        inner_scope = ctx.scopes.pop()
    del inner_scope
    for name, v in zip(node.output, results):
        if name:
            ctx.scopes[-1][name] = v


def _generic(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any],
             op_type: str | None = None) -> list[Value]:
    op_id, attrs = _resolve_op(ctx, op_type or node.op_type, attrs)
    while inputs and inputs[-1] is None:
        inputs = inputs[:-1]
    return ctx.emit(op_id, inputs, attrs, len(node.output), [o or f"{ctx.node_name}_unused{i}" for i, o in enumerate(node.output)])


def _resolve_op(ctx: _Ctx, op_type: str, attrs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    cands = ctx.op_index.get(op_type)
    if not cands:
        raise ctx.fail("unsupported_op", f"ONNX op {op_type!r} has no IR op in optable.yaml", op=op_type)
    if len(cands) == 1 and not cands[0][1]:
        return cands[0][0], attrs
    import onnx.defs

    schema_defaults: dict[str, Any] = {}
    try:
        for name, a in onnx.defs.get_schema(op_type).attributes.items():
            if a.default_value is not None and a.default_value.type:
                from onnx import helper

                dv = helper.get_attribute_value(a.default_value)
                schema_defaults[name] = dv.decode() if isinstance(dv, bytes) else dv
    except Exception:  # noqa: BLE001
        pass
    for op_id, fixed in cands:
        if all(attrs.get(k, schema_defaults.get(k)) == v for k, v in fixed.items()):
            return op_id, {k: v for k, v in attrs.items() if k not in fixed}
    raise ctx.fail("unsupported_attribute_value",
                   f"{op_type} with attributes {sorted(attrs)} matches none of {[c for c, _ in cands]}", op=op_type)


# ---------------------------------------------------------------------------- com.microsoft
# onnxruntime's contrib ops map onto the IR ops whose onnx cell names ``com.microsoft.X``
# (the cell's fixed attributes pick among several: FusedConv's ``activation``). A handler
# below only translates what an IR op cannot take as it is: an optional bias the IR op has
# no input for is an ``add`` before or after it (a table decomposition has no "if given"),
# an omitted zero point is 0 of its quantized input's dtype, FusedMatMul's transposes are
# transposes of its operands, FusedConv's activation_params are named.

MsHandler = Callable[[_Ctx, Any, "list[Value | None]", "dict[str, Any]"], "list[Value]"]
MS_HANDLERS: dict[str, MsHandler] = {}


def _ms(*op_types: str) -> Callable[[MsHandler], MsHandler]:
    def deco(fn: MsHandler) -> MsHandler:
        for t in op_types:
            MS_HANDLERS[t] = fn
        return fn

    return deco


def _ms_generic(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """The contrib op as it is, onto the IR op of its ``com.microsoft.X`` cell."""
    return _generic(ctx, node, inputs, attrs, f"{MS_DOMAIN}.{node.op_type}")


def _ms_one(ctx: _Ctx, op_id: str, inputs: list[Value | None], attrs: dict[str, Any], name: str) -> Value:
    while inputs and inputs[-1] is None:
        inputs = inputs[:-1]
    return ctx.emit(op_id, inputs, attrs, 1, [name])[0]


#: contrib op → the input index of its optional bias, added to the first input before the op
_MS_BIAS_BEFORE = {"FastGelu": 1, "SkipLayerNormalization": 4, "SkipSimplifiedLayerNormalization": 3}


@_ms(*_MS_BIAS_BEFORE)
def _ms_bias_before(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """An optional bias added to the first input before the op: FastGelu = gelu_tanh(X + bias),
    Skip(Simplified)LayerNormalization = the normalization of (input + bias) + skip (also its
    sum output). An omitted beta of a static gamma is zeros: onnxruntime 1.32 crashes building
    a session for Add + LayerNormalization(x, scale, "") (its SkipLayerNorm fusion), what the
    ONNX target would write for the decomposition. The mean and inv_std_var outputs (training)
    are refused: the decompositions of layer and RMS normalization compute neither."""
    at = _MS_BIAS_BEFORE[node.op_type]
    if node.op_type != "FastGelu" and any(node.output[1:3]):
        raise ctx.fail("unsupported_attribute_value", f"{node.op_type}'s mean/inv_std_var outputs are used "
                       "(training outputs): not converted", op=node.op_type)
    ins = list(inputs) + [None] * (at + 1 - len(inputs))
    if ins[at] is not None:
        ins[0] = _ms_one(ctx, "add", [ins[0], ins[at]], {}, f"{ctx.node_name}_biased")
    gamma = ins[2] if node.op_type == "SkipLayerNormalization" else None
    if gamma is not None and ins[3] is None and gamma.type.is_static and gamma.type.dtype is not None:
        ins[3] = ctx.const(np.zeros(gamma.type.shape, numpy_dtype(gamma.type.dtype)), "beta")
    return _ms_generic(ctx, node, ins[:at], attrs)


#: contrib op → its zero points as (input index, index of the quantized input whose dtype it has)
_MS_ZERO_POINTS = {"MatMulIntegerToFloat": ((4, 0), (5, 1)), "QLinearAdd": ((2, 0), (5, 3), (7, 0)),
                   "QLinearMul": ((2, 0), (5, 3), (7, 0)), "QLinearSigmoid": ((2, 0), (4, 0)),
                   "QLinearLeakyRelu": ((2, 0), (4, 0)), "QLinearAveragePool": ((2, 0), (4, 0))}


def _ms_zero_points(ctx: _Ctx, node: Any, inputs: list[Value | None]) -> list[Value | None]:
    """The inputs with each omitted zero point a constant 0 of its quantized input's dtype."""
    pairs = _MS_ZERO_POINTS.get(node.op_type, ())
    ins = list(inputs) + [None] * (max((at for at, _ in pairs), default=-1) + 1 - len(inputs))
    for at, like in pairs:
        src = ins[like]
        if ins[at] is None and src is not None and src.type.dtype is not None:
            ins[at] = ctx.const(np.zeros((), numpy_dtype(src.type.dtype)), f"zero_point{at}")
    return ins


@_ms("QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool")
def _ms_quantized(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    return _ms_generic(ctx, node, _ms_zero_points(ctx, node, inputs), attrs)


@_ms("MatMulIntegerToFloat")
def _ms_bias_after(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """MatMulIntegerToFloat's optional bias (input 6) is added to the op's result."""
    bias = inputs[6] if len(inputs) > 6 else None
    ins = _ms_zero_points(ctx, node, list(inputs[:6]))
    if bias is None:
        return _ms_generic(ctx, node, ins, attrs)
    op_id, attrs = _resolve_op(ctx, f"{MS_DOMAIN}.{node.op_type}", attrs)
    y = _ms_one(ctx, op_id, ins, attrs, f"{ctx.node_name}_unbiased")
    return ctx.emit("add", [y, bias], {}, 1, [node.output[0]])


@_ms("QLinearConcat")
def _ms_qlinear_concat(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """``dequantize_linear`` of each (tensor, scale, zero point) triple, concat, quantize to Y's
    parameters: the QDQ form, whose Q/DQ pairs a writer of integer kernels reads (a table
    decomposition cannot iterate over the triples; the IR op stays for the reference). The
    output's shape is the concatenation's (no rule infers quantize_linear's)."""
    y_scale, y_zero_point, *triples = inputs
    if not triples or len(triples) % 3 or "axis" not in attrs or any(v is None for v in triples):
        raise ctx.fail("bad_model", "QLinearConcat takes Y_scale, Y_zero_point, then (tensor, scale, zero point) "
                       "triples, and an axis", op=node.op_type)
    parts: list[Value | None] = []
    for i in range(0, len(triples), 3):
        x, scale, zp = triples[i:i + 3]
        parts.append(_ms_one(ctx, "dequantize_linear", [x, scale, zp], {}, f"{ctx.node_name}_float{i // 3}"))
    joined = _ms_one(ctx, "concat", parts, {"axis": attrs["axis"]}, f"{ctx.node_name}_float")
    (y,) = ctx.emit("quantize_linear", [joined, y_scale, y_zero_point], {}, 1, [node.output[0]])
    shapes = [v.type.shape for v in triples[::3] if v is not None]
    if y_zero_point is not None and shapes and all(sh is not None for sh in shapes):
        axis = int(attrs["axis"]) % len(shapes[0])
        sizes = [sh[axis] for sh in shapes]
        shape = list(shapes[0])
        shape[axis] = sum(sizes) if all(isinstance(d, int) for d in sizes) else None
        y.type = TensorType(y_zero_point.type.dtype, tuple(shape))
    return [y]


@_ms("QGemm")
def _ms_qgemm(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """onnxruntime's QGemm (the static quantizer's QOperator Gemm): Y = alpha * a_scale *
    b_scale * ((A - a_zp) op (B - b_zp) + C), C the int32 bias at the product's scale (alpha
    scales it too, as onnxruntime 1.32 computes), requantized to y_scale / y_zero_point when
    given, else float32. Written as dequantize, gemm and quantize: b_scale / b_zero_point may
    be one per output column (axis 0 of B when transB, else 1). The zero points default to 0."""
    a, a_s, a_zp, b, b_s, b_zp, c, y_s, y_zp = (list(inputs) + [None] * 9)[:9]
    if a is None or b is None or a_s is None or b_s is None:
        raise ctx.fail("bad_model", "QGemm needs A, a_scale, B and b_scale", op=node.op_type)
    trans_a, trans_b = int(attrs.get("transA", 0)), int(attrs.get("transB", 0))
    alpha = float(attrs.get("alpha", 1.0))
    name = ctx.node_name
    a_f = _ms_one(ctx, "dequantize_linear", [a, a_s, a_zp], {}, f"{name}_a")
    per_column = b_s.type.shape is not None and len(b_s.type.shape) == 1 and b_s.type.shape[0] != 1
    b_f = _ms_one(ctx, "dequantize_linear", [b, b_s, b_zp], {"axis": 0 if trans_b else 1} if per_column else {},
                  f"{name}_b")
    c_f = None
    if c is not None:
        c32 = _ms_one(ctx, "cast", [c], {"to": 1}, f"{name}_c")
        c_f = _ms_one(ctx, "mul", [_ms_one(ctx, "mul", [c32, a_s], {}, f"{name}_c_a"), b_s], {}, f"{name}_c_ab")
    gemm_attrs = {"alpha": alpha, "beta": alpha, "transA": trans_a, "transB": trans_b}
    if y_s is None:
        return ctx.emit("gemm", [a_f, b_f, c_f] if c_f is not None else [a_f, b_f], gemm_attrs, 1, [node.output[0]])
    y_f = _ms_one(ctx, "gemm", [a_f, b_f, c_f], gemm_attrs, f"{name}_float")
    return ctx.emit("quantize_linear", [y_f, y_s, y_zp] if y_zp is not None else [y_f, y_s], {}, 1, [node.output[0]])


@_ms("FusedMatMul")
def _ms_fused_matmul(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """alpha * op(A) @ op(B): transBatchX moves X's first axis behind its batch axes (perm
    [1, ..., r-2, 0, r-1]), then transX swaps its last two axes; alpha = 1 is a plain matmul."""
    ops = [_ms_transposed(ctx, v, int(attrs.get(f"trans{s}", 0)), int(attrs.get(f"transBatch{s}", 0)), s)
           for v, s in zip(inputs[:2], "AB")]
    alpha = float(attrs.get("alpha", 1.0))
    if alpha == 1.0:
        return ctx.emit("matmul", ops, {}, 1, [node.output[0]])
    return _generic(ctx, node, ops, {"alpha": alpha}, f"{MS_DOMAIN}.{node.op_type}")


def _ms_transposed(ctx: _Ctx, v: Value | None, trans: int, batch: int, which: str) -> Value | None:
    if v is None or not (trans or batch):
        return v
    r = v.type.rank
    if r is None:
        raise ctx.fail("unsupported_attribute_value", f"FusedMatMul transposes {which} but its rank is unknown",
                       op="FusedMatMul")
    perm = list(range(r))
    if batch and r >= 3:
        perm = [*range(1, r - 1), 0, r - 1]
    if trans and r >= 2:
        perm[-2], perm[-1] = perm[-1], perm[-2]
    return _ms_one(ctx, "transpose", [v], {"perm": perm}, f"{ctx.node_name}_{which}t")


@_ms("FusedConv")
def _ms_fused_conv(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """activation(conv(X, W, B) [+ Z]). Without Z: the IR op of the cell whose fixed
    ``activation`` matches, activation_params in the order of its own attributes (those after
    the conv's). With Z: conv, add and the activation's own IR op (the onnx column's name)."""
    attrs = dict(attrs)
    act = attrs.pop("activation", None)
    params = [float(p) for p in attrs.pop("activation_params", None) or ()]
    x, w, b, z = (list(inputs) + [None] * 4)[:4]
    out = node.output[0]
    if act is not None and z is None:
        op_id, rest = _resolve_op(ctx, f"{MS_DOMAIN}.FusedConv", {**attrs, "activation": act})
        conv_sig = ctx.tables.ops["conv"].signature
        sig = ctx.tables.ops[op_id].signature
        names = [a.name for a in sig.beyond(conv_sig)] if sig and conv_sig else []
        if len(params) != len(names):
            raise ctx.fail("bad_model", f"FusedConv {act} takes {len(names)} activation_params, the node has "
                           f"{len(params)}", op=node.op_type)
        return [_ms_one(ctx, op_id, [x, w, b], {**rest, **dict(zip(names, params))}, out)]
    y = _ms_one(ctx, "conv", [x, w, b], attrs, f"{ctx.node_name}_conv" if act or z is not None else out)
    if z is not None:
        y = _ms_one(ctx, "add", [y, z], {}, f"{ctx.node_name}_sum" if act else out)
    if act is None:
        return [y]
    op_id, _ = _resolve_op(ctx, act, {})
    sig = ctx.tables.ops[op_id].signature
    floats = [a.name for a in sig.attributes if a.type == "float"] if sig else []
    if floats:  # leaky_relu (alpha), hard_sigmoid (alpha, beta)
        return [_ms_one(ctx, op_id, [y], dict(zip(floats, params)), out)]
    bounds = [ctx.const(np.asarray(p, numpy_dtype(x.type.dtype or "float32")), f"param{i}")  # clip's min, max
              for i, p in enumerate(params)] if x is not None else []
    return [_ms_one(ctx, op_id, [y, *bounds], {}, out)]


# onnxruntime also registers two contrib ops in the default domain (version 1), which its
# transformer optimizer writes into models below the opset where ONNX has the op:
# LayerNormalization (ONNX's since 17, the same inputs, attributes and outputs) and
# SimplifiedLayerNormalization (RMS normalization: ONNX RMSNormalization since 23; its second
# output, inv_std_var, has no IR port).

def _ort_layer_normalization(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    return _generic(ctx, node, inputs, attrs, "LayerNormalization")


def _ort_simplified_layer_normalization(ctx: _Ctx, node: Any, inputs: list[Value | None],
                                        attrs: dict[str, Any]) -> list[Value]:
    if len(node.output) > 1 and node.output[1]:
        raise ctx.fail("unsupported_attribute_value", "SimplifiedLayerNormalization's inv_std_var output is used: "
                       "RMSNormalization has no such output", op=node.op_type)
    op_id, attrs = _resolve_op(ctx, "RMSNormalization", attrs)
    return [_ms_one(ctx, op_id, list(inputs), attrs, node.output[0])]


#: default-domain op → the handler of onnxruntime's contrib form, for models older than ONNX's op
ORT_DEFAULT_DOMAIN: dict[str, MsHandler] = {"LayerNormalization": _ort_layer_normalization,
                                            "SimplifiedLayerNormalization": _ort_simplified_layer_normalization}


def _older_than_onnx(ctx: _Ctx, op_type: str) -> bool:
    """Whether the model's opset predates ONNX's own ``op_type`` (or ONNX has none)."""
    import onnx.defs

    opset = ctx.opsets.get("", ctx.opsets.get("ai.onnx", 0))
    try:
        onnx.defs.get_schema(op_type, opset, "")
    except Exception:  # noqa: BLE001 - SchemaError: none at this opset
        return True
    return False


# ---------------------------------------------------------------------------- public API
def read_model_proto(path: str | os.PathLike[str]) -> Any:
    """Parse an ONNX file without loading external data (it is memory-mapped later)."""
    import onnx

    p = Path(path)
    if not p.is_file():
        raise FrontendError("bad_model", "file not found", where=str(path))
    data = p.read_bytes()
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception:  # noqa: BLE001 - DecodeError and friends
        raise FrontendError("bad_model", "not an ONNX model (protobuf decode failed; truncated or wrong file?)",
                            where=str(path)) from None
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise FrontendError("bad_model", "not an ONNX model (no graph / no IR version)", where=str(path))
    return proto


#: floating-point initializers at least this large are weights, never shape data
_WEIGHT_BYTES = 4096


def _onnx_shape_inference(proto: Any) -> Any:
    """ONNX's shape inference (with data propagation) on ``proto``; returns the inferred copy.

    The model crosses into ONNX's C++ as serialized bytes and back: the bytes of the
    weights (large floating-point initializers of the main graph) are left out for the
    trip and put back afterwards, in the result and in ``proto``. Inference reads an
    initializer's type and dims; its values only where they are shape data (integer
    tensors, or a few floats such as Resize scales), which this size never is.
    """
    import onnx

    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    held: list[tuple[int, bytes]] = []
    for i, t in enumerate(proto.graph.initializer):
        if t.data_type in floats and t.data_location != onnx.TensorProto.EXTERNAL and t.HasField("raw_data"):
            raw = t.raw_data
            if len(raw) >= _WEIGHT_BYTES:
                held.append((i, raw))
                t.ClearField("raw_data")
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=True)
    finally:
        for i, raw in held:
            proto.graph.initializer[i].raw_data = raw
    for i, raw in held:
        inferred.graph.initializer[i].raw_data = raw
    return inferred


#: what ONNX's strict shape inference says of a declared type it contradicts
_STALE = ("Inferred shape and existing shape differ", "Inferred elem type differs from existing elem type")


def _stale_value_info(proto: Any, exc: Exception) -> list[str]:
    """Exporters leave ``value_info`` behind that later graph edits made wrong (a Reshape's
    rank); they are hints, onnxruntime merges them leniently: when strict inference refuses
    one, every ``value_info`` of the main graph goes (its names returned); when there is none
    left, the declared output shapes go (their dtypes stay), as onnxruntime also merges those
    leniently (a quantized copy of a model keeping the float model's output declaration)."""
    if not any(s in str(exc) for s in _STALE):
        return []
    if len(proto.graph.value_info):
        names = [vi.name for vi in proto.graph.value_info]
        del proto.graph.value_info[:]
        return names
    shaped = [o for o in proto.graph.output if o.type.HasField("tensor_type") and o.type.tensor_type.HasField("shape")]
    for o in shaped:
        o.type.tensor_type.ClearField("shape")
    return [f"output {o.name}" for o in shaped]


def from_proto(proto: Any, base_dir: str | os.PathLike[str] = ".", path: str = "<model>",
               tables: Tables | None = None, infer_shapes: bool = True, validate: bool = True,
               keep_unread: bool = False) -> Model:
    """The IR of ``proto``. ``validate`` (default) first runs the validation stage
    (``frontends/validate.py``); a caller converting the same proto again may skip it.
    ``keep_unread``: an op of an unknown domain, or one with no IR op, becomes an ``OPAQUE``
    node that every target refuses with the reason (``report``) instead of failing the load."""
    import onnx

    dropped: list[str] = []
    if validate:
        from .validate import validate_model

        try:
            validate_model(proto, base_dir, path)
        except FrontendError as exc:
            dropped = _stale_value_info(proto, exc)
            if not dropped:
                raise
            try:
                validate_model(proto, base_dir, path)
            except FrontendError as again:  # value_info gone, the outputs' own declaration is stale too
                more = _stale_value_info(proto, again)
                if not more:
                    raise
                dropped += more
                validate_model(proto, base_dir, path)
    tables = tables or load_tables()
    opsets = {o.domain or "": o.version for o in proto.opset_import}
    if "" not in opsets and "ai.onnx" not in opsets:
        raise FrontendError("bad_model", "the model imports no default ONNX opset", where=path)
    if opsets.get("", 0) < 7:
        raise FrontendError("bad_model", f"opset {opsets.get('', 0)} is older than 7, the oldest supported", where=path)
    if infer_shapes:
        try:
            proto = _onnx_shape_inference(proto)
        except Exception:  # noqa: BLE001 - inference is best effort; types then come from our rules
            pass
    ctx = _Ctx(tables, opsets, Path(base_dir), path)
    ctx.keep_unread = keep_unread
    ctx.functions = {(f.domain, f.name): f for f in proto.functions}
    ctx.graph = Graph(proto.graph.name or "main")
    ctx.scopes.append({})
    with gc_paused():  # every object built here stays alive: collector passes would only walk the heap
        try:
            _fill_graph(ctx, proto.graph)
        except FrontendError:
            raise
        except OpbridgeError as exc:
            raise FrontendError(exc.code, exc.detail, node=exc.node or ctx.node_name or None, op=exc.op,
                                where=exc.where or path) from None
        except MemoryError:
            raise FrontendError("too_large", "out of memory while reading the model", node=ctx.node_name or None,
                                where=path) from None
        except Exception as exc:  # noqa: BLE001 - any other failure on a malformed model: one line with the node
            msg = " ".join(str(exc).split())[:300]
            raise FrontendError("bad_model", f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__,
                                node=ctx.node_name or None, where=path) from None
    meta = {p.key: p.value for p in proto.metadata_props}
    if any(n.op == "dynamic_quantize_lstm" for n in ctx.graph.walk()):
        # onnxruntime quantizes its hidden state per chunk of batch rows when it splits the batch
        # over threads: run sequentially, its numbers (and the reference's) are the machine's none
        meta["opbridge.ort_sequential"] = "1"
    warnings = (f"dropped {len(dropped)} declared value_info entr{'y' if len(dropped) == 1 else 'ies'} that "
                f"ONNX shape inference contradicts (first: {dropped[0]!r}); types are inferred instead",) if dropped else ()
    return Model(ctx.graph, source=path, source_format="onnx", opset=opsets.get("", opsets.get("ai.onnx")), metadata=meta,
                 warnings=warnings)


def load_onnx(path: str | os.PathLike[str], tables: Tables | None = None) -> Model:
    proto = read_model_proto(path)
    return from_proto(proto, Path(path).resolve().parent, str(path), tables)




# ---------------------------------------------------------------------------- frontend contract
def matches(source: Any) -> bool:
    return isinstance(source, (str, os.PathLike)) and str(source).lower().endswith(".onnx")


def load(source: str | os.PathLike[str], keep_unread: bool = False, **opts: Any) -> Model:
    """The validated IR of an ONNX file (``keep_unread``: see ``from_proto``; other ``opts``
    are not used by this frontend)."""
    p = Path(source)
    proto = read_model_proto(p)
    # validated: fails early, with a one-line reason
    return from_proto(proto, p.resolve().parent, str(source), keep_unread=keep_unread)


def run_source(source: str | os.PathLike[str], feeds: dict[str, Any], names: list[str], **opts: Any) -> list[Any]:
    """The original file run by onnxruntime on the CPU."""
    from . import SourceUnavailable

    try:
        import onnxruntime  # noqa: F401 - installed?
    except ImportError:
        raise SourceUnavailable("onnxruntime is not installed") from None
    try:
        from ..ir.ort_run import session as ort_session

        sess = ort_session(str(source), sequential=bool(opts.get("sequential")))
        wanted = {i.name for i in sess.get_inputs()}
        return list(sess.run(names, {k: v for k, v in feeds.items() if k in wanted}))
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own limits; the NumPy reference still decides
        raise SourceUnavailable(f"onnxruntime cannot run the source: "
                                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
