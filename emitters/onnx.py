"""IR → ONNX (a ModelProto), run with onnxruntime.

ONNX is a data format, not source code: each IR node becomes one NodeProto whose type
and fixed attributes are the op's ``onnx`` cell in ``optable.yaml`` (``trunc_mod`` →
``Mod`` with ``fmod=1``). The model doc string is rendered from
``templates/onnx/doc_string.j2``. The default opset and IR version are the newest the
installed onnxruntime accepts (probed once), so a model written by a newer ``onnx``
still runs. onnxruntime loads an opset before it has a kernel for every op version in it
(1.32 loads opset 28 without QuantizeLinear-28; RoiAlign-22 has none at all), so the
default opset is chosen per model: the newest one, down to ``OPSET_FLOOR``, at which
onnxruntime has a CPU kernel for every node (``choose_opset``). A node it cannot run at
any of them is decomposed, or refused with the reason, like a dtype the schema lacks.
"""
from __future__ import annotations

import os
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from translator.errors import Unsupported
from translator.ir import Graph, Model, TensorType, Value
from translator.lowering import lower_for, native_ops
from translator.names import NameSet
from translator.ort_run import session_options
from translator.tables import Tables, load_tables
from translator.pipeline import paused_gc

NAME = "onnx"


# ----------------------------------------------------------------------------- runtime limits
@lru_cache(maxsize=None)
def runtime_limits() -> tuple[int, int]:
    """(newest opset, newest IR version) the installed onnxruntime loads."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    def ok(opset: int, irv: int) -> bool:
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=irv)
        try:
            ort.InferenceSession(m.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
            return True
        except Exception:  # noqa: BLE001 - the probe's failure is the answer
            return False

    opset = onnx.defs.onnx_opset_version()
    while opset > 7 and not ok(opset, 7):
        opset -= 1
    irv = onnx.IR_VERSION
    while irv > 7 and not ok(opset, irv):
        irv -= 1
    return opset, irv


#: The default opset goes no lower than this to find kernels for a model's nodes: from
#: opset 21 on, a new op version adds types, inputs or attributes (which the schema check
#: sees), but GroupNormalization-21 changed what its scale and bias mean.
OPSET_FLOOR = 21

_OPEN = 2**31 - 1  # onnxruntime's "and every later version"


@lru_cache(maxsize=None)
def runtime_kernels() -> tuple[str, dict[str, list[int]], dict[str, list[tuple[int, int, dict[str, frozenset[str]]]]]] | None:
    """(onnxruntime version, op → its schema versions, op → CPU kernels ``(first, last,
    {type param: types})``) for the default domain; None when onnxruntime does not list them."""
    try:
        import onnxruntime as ort
        from onnxruntime.capi import onnxruntime_pybind11_state as C

        kernel_defs, schema_defs = C.get_all_opkernel_def(), C.get_all_operator_schema()
    except Exception:  # noqa: BLE001 - an onnxruntime without the listing: the schema alone decides
        return None
    kernels: dict[str, list[tuple[int, int, dict[str, frozenset[str]]]]] = defaultdict(list)
    for k in kernel_defs:
        if k.provider == "CPUExecutionProvider" and k.domain in ("", "ai.onnx"):
            first, last = k.version_range
            kernels[k.op_name].append((first, last, {p: frozenset(ts) for p, ts in k.type_constraints.items()}))
    versions: dict[str, list[int]] = defaultdict(list)
    for sd in schema_defs:
        if sd.domain in ("", "ai.onnx"):
            versions[sd.name].append(sd.since_version)
    return ort.__version__, {k: sorted(v) for k, v in versions.items()}, dict(kernels)


@lru_cache(maxsize=None)
def _placeholder_attrs(op_type: str, opset: int) -> list[Any]:
    """A value for each attribute the schema requires, so that the probe gets past graph
    checks (MaxRoiPool without pooled_shape fails before onnxruntime looks for a kernel)."""
    import onnx.defs
    from onnx import helper

    kinds = onnx.defs.OpSchema.AttrType
    filler = {kinds.INT: 1, kinds.INTS: [1, 1], kinds.FLOAT: 1.0, kinds.FLOATS: [1.0],
              kinds.STRING: "", kinds.STRINGS: [""]}
    schema = onnx.defs.get_schema(op_type, opset, "")
    return [helper.make_attribute(name, filler[a.type])
            for name, a in sorted(schema.attributes.items()) if a.required and a.type in filler]


def _runs_without_kernel(op_type: str, opset: int, inputs: tuple[int, ...]) -> bool:
    """Whether onnxruntime builds a session for a lone ``op_type`` node it lists no kernel
    for: it inlines some function ops (HardSwish-22, not Swish-24) and turns Constant nodes
    into initializers. Only its NOT_IMPLEMENTED answer counts against the op: other
    complaints (a probe without the op's attributes) are about the probe."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    names = [f"i{k}" if t else "" for k, t in enumerate(inputs)]
    node = helper.make_node(op_type, names, ["y"])
    node.attribute.extend(_placeholder_attrs(op_type, opset))
    graph = helper.make_graph(
        [node], "probe",
        [helper.make_tensor_value_info(nm, t, None) for nm, t in zip(names, inputs) if t],
        [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=runtime_limits()[1])
    try:
        ort.InferenceSession(model.SerializeToString(), session_options(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - the probe's answer
        return "NOT_IMPLEMENTED" not in str(exc)
    return True


def _kernel_gap(op_type: str, opset: int, schema: Any, bound: dict[str, str],
                inputs: tuple[int, ...] = ()) -> str | None:
    """Why onnxruntime cannot run ``op_type`` at ``opset`` with these type bindings, or None.
    ``inputs``: the node's input types as TensorProto enums (0 = omitted), for the probe of an
    op without a listed kernel."""
    rk = runtime_kernels()
    if rk is None:
        return None
    version, versions, kernels = rk
    known = [v for v in versions.get(op_type, []) if v <= opset]
    if not known:
        return f"onnxruntime {version} does not know ONNX {op_type} at opset {opset}"
    since = known[-1]
    # onnxruntime takes a kernel when it starts at the node's version, or spans it with a closed range
    for first, last, constraints in kernels.get(op_type, []):
        if first == since or (first < since <= last and last != _OPEN):
            if all(t in constraints[p] or (t == "tensor(float16)" and "tensor(float)" in constraints[p])
                   for p, t in bound.items() if p in constraints):
                return None  # (float16 with a float kernel: onnxruntime inserts the casts on CPU)
    if _runs_without_kernel(op_type, opset, inputs):
        return None
    constrained = {p for _, _, c in kernels.get(op_type, []) for p in c}
    types = ", ".join(f"{p}={t[7:-1] if t.startswith('tensor(') else t}" for p, t in sorted(bound.items())
                      if p in constrained)
    return f"onnxruntime {version} has no CPU kernel for {op_type}-{since}" + (f" with {types}" if types else "")


# ----------------------------------------------------------------------------- emission
class _Emitter:
    def __init__(self, tables: Tables, opset: int) -> None:
        import onnx

        from translator.frontends.onnx import onnx_dtype_map

        self.tables = tables
        self.opset = opset
        self.enum_of = {v: k for k, v in onnx_dtype_map(tables).items()}
        self.names: dict[int, str] = {}
        self.used = NameSet(sep="__")
        #: node names: ONNX requires them unique in a graph (onnxruntime refuses a model
        #: with two nodes of one name); a source model's duplicates get suffixes
        self.node_names = NameSet(sep="__")
        self.onnx = onnx

    def name(self, v: Value) -> str:
        key = id(v)
        if key not in self.names:
            self.names[key] = self.used.take(v.name or "v")
        return self.names[key]

    def elem(self, dtype: str | None) -> int:
        if dtype is None:
            return 0
        if dtype not in self.enum_of:
            raise Unsupported("cast", NAME, "unsupported_dtype", f"dtype {dtype} has no ONNX element type")
        return self.enum_of[dtype]

    def type_proto(self, t: TensorType) -> Any:
        from onnx import helper

        if t.kind == "sequence":
            return helper.make_sequence_type_proto(self.type_proto(t.elem or TensorType(None)))
        if t.kind == "optional":
            return helper.make_optional_type_proto(self.type_proto(t.elem or TensorType(None)))
        shape = None if t.shape is None else [d if isinstance(d, (int, str)) else None for d in t.shape]
        return helper.make_tensor_type_proto(self.elem(t.dtype), shape)

    def value_info(self, v: Value) -> Any:
        from onnx import helper

        return helper.make_value_info(self.name(v), self.type_proto(v.type))

    def tensor(self, arr: np.ndarray, name: str, dtype: str | None = None) -> Any:
        from onnx import numpy_helper

        a = np.asarray(arr)
        if a.dtype.kind in "OU":
            t = numpy_helper.from_array(np.asarray(a, dtype=object), name)
        else:
            t = numpy_helper.from_array(a, name)
        if dtype is not None and dtype in self.enum_of and t.data_type != self.enum_of[dtype]:
            t.data_type = self.enum_of[dtype]
        return t

    def graph(self, g: Graph, top: bool) -> Any:
        from onnx import helper

        nodes = []
        inits = [self.tensor(c.const, self.name(c), c.type.dtype) for c in g.constants.values()
                 if c.uses or c in g.outputs]
        for n in g.nodes:
            nodes.append(self.node(n))
        outputs = []
        for i, v in enumerate(g.outputs):
            produced_here = v.producer is not None and v.producer.graph is g
            if not produced_here or any(v is o for o in g.outputs[:i]):
                alias = Value(f"{v.name}_out", v.type)
                nodes.append(helper.make_node("Identity", [self.name(v)], [self.name(alias)]))
                v = alias
            outputs.append(self.value_info(v))
        inputs = [self.value_info(v) for v in g.inputs]
        return helper.make_graph(nodes, g.name or "main", inputs, outputs, inits)

    def node(self, n: Any) -> Any:
        from onnx import helper

        op = self.tables.ops.get(n.op)
        cell = op.backends.get("onnx") if op else None
        if cell is None or cell.status != "native":
            raise Unsupported(n.op, NAME, "unsupported_op", "no ONNX op for it after lowering", n.name)
        op_type = cell.names[0]
        domain = ""
        if op_type.startswith("com.microsoft."):
            domain, op_type = "com.microsoft", op_type.split(".", 2)[2]
        schema = self._schema(op_type, n)
        attrs: dict[str, Any] = dict(cell.attrs)
        if getattr(schema, "has_function", False) and op is not None and op.signature is not None:
            # a function op's body reads its attributes: spell out the defaults
            for a in op.signature.attributes:
                if a.default is not None and a.name in schema.attributes:
                    attrs.setdefault(a.name, list(a.default) if isinstance(a.default, tuple) else a.default)
        attrs.update(n.attrs)
        protos = []
        for k, v in attrs.items():
            protos.append(self.attribute(k, v, schema, n))
        ins = [self.name(v) if v is not None else "" for v in n.inputs]
        outs = [self.name(v) for v in n.outputs]
        node = helper.make_node(op_type, ins, outs, name=self.node_names.take(n.name) if n.name else None,
                                domain=domain or None)
        node.attribute.extend(protos)
        return node

    def _schema(self, op_type: str, n: Any) -> Any:
        import onnx.defs

        try:
            return onnx.defs.get_schema(op_type, self.opset, "")
        except Exception:  # noqa: BLE001
            since = None
            try:
                since = onnx.defs.get_schema(op_type).since_version
            except Exception:  # noqa: BLE001
                pass
            raise Unsupported(n.op, NAME, "unsupported_op",
                              f"ONNX {op_type} needs opset {since or '?'} but the target opset is {self.opset}",
                              n.name) from None

    def attribute(self, key: str, v: Any, schema: Any, n: Any) -> Any:
        import onnx
        from onnx import helper

        A = onnx.AttributeProto
        decl = schema.attributes.get(key)
        if decl is None:
            raise Unsupported(n.op, NAME, "unsupported_attribute_value",
                              f"attribute {key!r} does not exist in ONNX {schema.name}-{schema.since_version}", n.name)
        if isinstance(v, Graph):
            return helper.make_attribute(key, self.graph(v, False))
        if isinstance(v, np.ndarray):
            return helper.make_attribute(key, self.tensor(v, ""))
        if isinstance(v, TensorType):
            a = A(name=key, type=A.TYPE_PROTO)
            a.tp.CopyFrom(self.type_proto(v))
            return a
        if isinstance(v, (list, tuple)):
            if v and all(isinstance(x, Graph) for x in v):
                return helper.make_attribute(key, [self.graph(x, False) for x in v])
            if v and all(isinstance(x, np.ndarray) for x in v):
                return helper.make_attribute(key, [self.tensor(x, "") for x in v])
            t = decl.type
            if t == A.INTS:
                return helper.make_attribute(key, [int(x) for x in v], attr_type=A.INTS)
            if t == A.FLOATS:
                return helper.make_attribute(key, [float(x) for x in v], attr_type=A.FLOATS)
            if t == A.STRINGS:
                return helper.make_attribute(key, [str(x).encode("utf-8", "surrogateescape") for x in v], attr_type=A.STRINGS)
            return helper.make_attribute(key, list(v))
        if isinstance(v, str):
            return helper.make_attribute(key, v.encode("utf-8", "surrogateescape"))
        if decl.type == A.FLOAT:
            return helper.make_attribute(key, float(v))
        if decl.type == A.INT:
            return helper.make_attribute(key, int(v))
        return helper.make_attribute(key, v)


def _onnx_type_str(dtype: str, enum_of: dict[str, int]) -> str | None:
    import onnx

    e = enum_of.get(dtype)
    if e is None:
        return None
    name = onnx.TensorProto.DataType.Name(e).lower()
    return "tensor(" + {"float": "float", "double": "double"}.get(name, name) + ")"


def _opset_accepts(opset: int, tables: Tables, runtime: bool = True, attrs: bool = False) -> Any:
    """Node check: the ONNX schema in force at ``opset`` takes the node's input types and,
    with ``runtime``, the installed onnxruntime has a CPU kernel for that version and those
    types; with ``attrs``, the schema also has every attribute the node sets."""
    import onnx.defs

    from translator.frontends.onnx import onnx_dtype_map

    enum_of = {v: k for k, v in onnx_dtype_map(tables).items()}
    schemas: dict[str, Any] = {}
    verdicts: dict[tuple[Any, ...], str | None] = {}

    def schema_of(op_type: str) -> Any:
        if op_type not in schemas:
            try:
                schemas[op_type] = onnx.defs.get_schema(op_type, opset, "")
            except Exception:  # noqa: BLE001
                schemas[op_type] = None
        return schemas[op_type]

    def dtypes(values: Any) -> tuple[str | None, ...]:
        return tuple(v.type.dtype if v is not None and v.type.kind == "tensor" else None for v in values)

    def accepts(node: Any) -> str | None:
        op = tables.ops.get(node.op)
        cell = op.backends.get(NAME) if op else None
        if cell is None or cell.status != "native" or cell.names[0].startswith("com."):
            return None
        key = (cell.names[0], dtypes(node.inputs), dtypes(node.outputs),
               tuple(sorted(node.attrs)) if attrs else ())
        if key not in verdicts:
            verdicts[key] = _verdict(*key, tuple(cell.attrs) if attrs else ())
        return verdicts[key]

    def _verdict(op_type: str, ins: tuple[str | None, ...], outs: tuple[str | None, ...],
                 attr_names: tuple[str, ...], cell_attrs: tuple[str, ...]) -> str | None:
        schema = schema_of(op_type)
        if schema is None:
            return f"ONNX {op_type} does not exist at opset {opset}"
        allowed = {tc.type_param_str: set(tc.allowed_type_strs) for tc in schema.type_constraints}
        bound: dict[str, str] = {}
        for formals, dts, is_input in ((list(schema.inputs), ins, True), (list(schema.outputs), outs, False)):
            if not formals:
                continue
            if len(dts) > len(formals) and formals[-1].option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
                return f"ONNX {op_type}-{schema.since_version} (opset {opset}) takes at most {len(formals)} {'inputs' if is_input else 'outputs'}, not {len(dts)}"
            for i, dt in enumerate(dts):
                f = formals[min(i, len(formals) - 1)]
                t = _onnx_type_str(dt, enum_of) if dt is not None else None
                if t is None:
                    continue
                if is_input and t not in allowed.get(f.type_str, {f.type_str}):
                    return f"ONNX {op_type}-{schema.since_version} (opset {opset}) does not take {dt} for {f.name}"
                if f.type_str in allowed:
                    bound.setdefault(f.type_str, t)
        for a in (*attr_names, *cell_attrs):
            if a not in schema.attributes:
                return f"ONNX {op_type}-{schema.since_version} (opset {opset}) has no attribute {a!r}"
        if not runtime:
            return None
        return _kernel_gap(op_type, opset, schema, bound, tuple(enum_of.get(dt, 0) if dt else 0 for dt in ins))

    return accepts


def choose_opset(graph: Graph, tables: Tables, top: int) -> int:
    """The newest opset from ``top`` down to ``OPSET_FLOOR`` at which every node the emitter
    writes natively passes ``_opset_accepts`` (schema types and attributes, onnxruntime
    kernel); when none does, the one with the fewest refusals (the newest among equals)."""
    cell_ok = native_ops(NAME, tables)
    nodes = [n for n in graph.walk() if n.op in cell_ok]
    best, fewest = top, None
    for opset in range(top, max(OPSET_FLOOR, 7) - 1, -1):
        accepts = _opset_accepts(opset, tables, attrs=True)
        refused = sum(1 for n in nodes if accepts(n) is not None)
        if refused == 0:
            return opset
        if fewest is None or refused < fewest:
            best, fewest = opset, refused
    return best


def _doc_string(model: Model) -> str:
    from translator.render import render

    return render("onnx", "doc_string.j2", source=model.source, source_format=model.source_format,
                  ops=model.op_histogram())


#: Above this many nodes the emitted model gets onnx.checker's structural check only: the
#: full check's strict shape inference grows superlinearly inside ONNX's C++ (measured
#: 12-20x per 10x nodes), while our verifier has already typed every value linearly.
FULL_CHECK_MAX_NODES = 20_000


@paused_gc
def emit(model: Model, opset: int | None = None, ir_version: int | None = None, check: bool | str = True,
         tables: Tables | None = None) -> Any:
    """IR → ``onnx.ModelProto`` at ``opset`` (default: newest onnxruntime accepts).

    ``check``: True = onnx.checker with full_check up to FULL_CHECK_MAX_NODES nodes, the
    structural check above; "full" = always full_check; False = none."""
    import onnx
    from onnx import helper

    tables = tables or load_tables()
    max_opset, max_ir = runtime_limits()
    from translator.pipeline import prepare

    prepare(model)
    opset = opset or choose_opset(model.graph, tables, min(max_opset, onnx.defs.onnx_opset_version()))
    supported = native_ops(NAME, tables)
    lower_for(model.graph, NAME, supported, tables, accepts=_opset_accepts(opset, tables))
    em = _Emitter(tables, opset)
    g = em.graph(model.graph, True)
    irv = ir_version or min(max_ir, onnx.IR_VERSION)
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=irv,
                              producer_name="opbridge", producer_version=_version())
    if any(n.domain == "com.microsoft" for n in proto.graph.node):
        proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    proto.doc_string = _doc_string(model)
    _fill_output_types(proto)
    if check:
        full = check == "full" or len(proto.graph.node) <= FULL_CHECK_MAX_NODES
        try:
            onnx.checker.check_model(proto, full_check=full)
        except Exception as exc:  # noqa: BLE001 - ValidationError / InferenceError
            from translator.errors import OpbridgeError

            raise OpbridgeError("verifier", f"onnx.checker rejected the emitted model: {str(exc).splitlines()[0]}") from None
    return proto


def _fill_output_types(proto: Any) -> None:
    """Graph outputs whose shape the IR did not know get ONNX's own inferred type."""
    import onnx

    missing = [o for o in proto.graph.output if not o.type.tensor_type.HasField("shape") and o.type.HasField("tensor_type")]
    if not missing:
        return
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False)
    except Exception:  # noqa: BLE001 - best effort; the checker reports what remains
        return
    known = {v.name: v.type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in missing:
        t = known.get(o.name)
        if t is not None and t.tensor_type.HasField("shape"):
            o.type.CopyFrom(t)
        elif o.type.tensor_type.elem_type and t is not None and t.tensor_type.elem_type:
            o.type.CopyFrom(t)
        if not o.type.tensor_type.HasField("shape"):
            o.type.tensor_type.shape.SetInParent()
            o.type.tensor_type.ClearField("shape")


def _version() -> str:
    from translator import __version__

    return __version__


def save(proto: Any, path: str | os.PathLike[str]) -> Path:
    """Write atomically (temp file + rename): nothing half-written on failure."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(proto.SerializeToString(deterministic=True))
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out


def run(proto: Any, inputs: Mapping[str, Any]) -> list[Any]:
    """Run with onnxruntime's CPU provider; returns outputs in graph order."""
    import onnxruntime as ort

    so = session_options()
    sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
    from translator.ort_run import run_session

    names = [i.name for i in sess.get_inputs()]
    feed = {k: v for k, v in inputs.items() if k in names}
    return run_session(sess, feed)
