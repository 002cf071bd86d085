"""The framework side of the ONNX target: what the installed onnxruntime loads and runs.

* ``runtime_limits``: the newest opset and IR version it loads (probed once), the defaults.
* ``node_refusal``: whether the ONNX schema in force at an opset takes a node (input types,
  attributes) and onnxruntime has a CPU kernel for that version and those types. onnxruntime
  loads an opset before it has a kernel for every op version in it (1.32 loads opset 28
  without QuantizeLinear-28; RoiAlign-22 has none at all), so ``choose_opset`` picks per
  model the newest opset, down to ``OPSET_FLOOR``, at which every node has one.
* ``save``/``load``/``run``/``output_ports``: the written ``.onnx`` file and onnxruntime.
"""
from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from translator.ir.graph import Graph
from translator.ir.ort_run import session as ort_session
from translator.compile.registry import Refusal
from translator.compile.target import OutputPort

from .registry import NAME


# ----------------------------------------------------------------------------- runtime limits
@lru_cache(maxsize=None)
def runtime_limits() -> tuple[int, int]:
    """(newest opset, newest IR version) the installed onnxruntime loads."""
    import onnx
    from onnx import TensorProto, helper

    def ok(opset: int, irv: int) -> bool:
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=irv)
        try:
            ort_session(m.SerializeToString())
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


def top_opset() -> int:
    """The default opset ceiling: the newest both onnx and onnxruntime know."""
    import onnx

    return min(runtime_limits()[0], onnx.defs.onnx_opset_version())


#: The default opset goes no lower than this to find kernels for a model's nodes: from
#: opset 21 on, a new op version adds types, inputs or attributes (which the schema check
#: sees), but GroupNormalization-21 changed what its scale and bias mean.
OPSET_FLOOR = 21

_OPEN = 2**31 - 1  # onnxruntime's "and every later version"

#: onnxruntime's contrib domain: its ops are written under the table's ``com.microsoft.X`` names
MS_DOMAIN = "com.microsoft"
_DOMAINS = ("", "ai.onnx", MS_DOMAIN)


def _qualified(domain: str, op_type: str) -> str:
    return f"{domain}.{op_type}" if domain == MS_DOMAIN else op_type


def split_name(name: str) -> tuple[str, str]:
    """A cell's name → (domain, op type): ``com.microsoft.FusedConv`` → (``com.microsoft``,
    ``FusedConv``); a default-domain name → (``""``, itself)."""
    if name.startswith(MS_DOMAIN + "."):
        return MS_DOMAIN, name[len(MS_DOMAIN) + 1:]
    return "", name


@dataclass(frozen=True)
class Formal:
    name: str
    type_str: str
    variadic: bool


@dataclass(frozen=True)
class Schema:
    """What the target needs of an op's schema, the same for ONNX's default domain
    (``onnx.defs``) and onnxruntime's contrib ops (the schemas onnxruntime registers, which
    ``onnx.defs`` does not know): formal inputs and outputs, type constraints, attribute
    types (``onnx.AttributeProto`` numbers) and which are required."""
    name: str
    since_version: int
    inputs: tuple[Formal, ...]
    outputs: tuple[Formal, ...]
    type_constraints: Mapping[str, frozenset[str]]
    attributes: Mapping[str, int]
    required: frozenset[str]
    has_function: bool = False


def _normalized(s: Any, variadic: Any) -> Schema:
    def formals(ps: Any) -> tuple[Formal, ...]:
        return tuple(Formal(p.name, getattr(p, "type_str", None) or p.typeStr, int(p.option) == variadic) for p in ps)

    return Schema(s.name, s.since_version, formals(s.inputs), formals(s.outputs),
                  {tc.type_param_str: frozenset(tc.allowed_type_strs) for tc in s.type_constraints},
                  {k: int(a.type) for k, a in s.attributes.items()},
                  frozenset(k for k, a in s.attributes.items() if a.required),
                  bool(getattr(s, "has_function", False)))


@lru_cache(maxsize=None)
def _contrib_schemas() -> dict[str, Any]:
    try:
        import onnxruntime.capi._pybind_state as C
    except ImportError:
        return {}
    return {s.name: s for s in C.get_all_operator_schema() if s.domain == MS_DOMAIN}


@lru_cache(maxsize=None)
def schema_of(name: str, opset: int) -> Schema | None:
    """The schema a cell's op name has at ``opset`` (a contrib op has one version), or None."""
    import onnx.defs

    variadic = int(onnx.defs.OpSchema.FormalParameterOption.Variadic)
    domain, op_type = split_name(name)
    if domain:
        found = _contrib_schemas().get(op_type)
        return None if found is None else _normalized(found, variadic)
    try:
        return _normalized(onnx.defs.get_schema(op_type, opset, ""), variadic)
    except Exception:  # noqa: BLE001 - no such op at this opset
        return None


@lru_cache(maxsize=None)
def runtime_kernels() -> tuple[str, dict[str, list[int]], dict[str, list[tuple[int, int, dict[str, frozenset[str]]]]]] | None:
    """(onnxruntime version, op → its schema versions, op → CPU kernels ``(first, last,
    {type param: types})``) for the default domain and onnxruntime's contrib domain (keyed
    ``com.microsoft.X``, as the table's cells name them); None when onnxruntime does not list
    them."""
    try:
        import onnxruntime as ort
        from onnxruntime.capi import onnxruntime_pybind11_state as C

        kernel_defs, schema_defs = C.get_all_opkernel_def(), C.get_all_operator_schema()
    except Exception:  # noqa: BLE001 - an onnxruntime without the listing: the schema alone decides
        return None
    kernels: dict[str, list[tuple[int, int, dict[str, frozenset[str]]]]] = defaultdict(list)
    for k in kernel_defs:
        if k.provider == "CPUExecutionProvider" and k.domain in _DOMAINS:
            first, last = k.version_range
            kernels[_qualified(k.domain, k.op_name)].append(
                (first, last, {p: frozenset(ts) for p, ts in k.type_constraints.items()}))
    versions: dict[str, list[int]] = defaultdict(list)
    for sd in schema_defs:
        if sd.domain in _DOMAINS:
            versions[_qualified(sd.domain, sd.name)].append(sd.since_version)
    return ort.__version__, {k: sorted(v) for k, v in versions.items()}, dict(kernels)


@lru_cache(maxsize=None)
def _placeholder_attrs(op_type: str, opset: int) -> list[Any]:
    """A value for each attribute the schema requires, so that the probe gets past graph
    checks (MaxRoiPool without pooled_shape fails before onnxruntime looks for a kernel)."""
    import onnx
    from onnx import helper

    A = onnx.AttributeProto
    filler = {A.INT: 1, A.INTS: [1, 1], A.FLOAT: 1.0, A.FLOATS: [1.0], A.STRING: "", A.STRINGS: [""]}
    schema = schema_of(op_type, opset)
    if schema is None:
        return []
    return [helper.make_attribute(name, filler[t])
            for name, t in sorted(schema.attributes.items()) if name in schema.required and t in filler]


def _runs_without_kernel(op_type: str, opset: int, inputs: tuple[int, ...]) -> bool:
    """Whether onnxruntime builds a session for a lone ``op_type`` node it lists no kernel
    for: it inlines some function ops (HardSwish-22, not Swish-24) and turns Constant nodes
    into initializers. Only its NOT_IMPLEMENTED answer counts against the op: other
    complaints (a probe without the op's attributes) are about the probe."""
    import onnx
    from onnx import helper

    domain, bare = split_name(op_type)
    names = [f"i{k}" if t else "" for k, t in enumerate(inputs)]
    node = helper.make_node(bare, names, ["y"], domain=domain or None)
    node.attribute.extend(_placeholder_attrs(op_type, opset))
    graph = helper.make_graph(
        [node], "probe",
        [helper.make_tensor_value_info(nm, t, None) for nm, t in zip(names, inputs) if t],
        [onnx.ValueInfoProto(name="y")])
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=imports, ir_version=runtime_limits()[1])
    try:
        ort_session(model.SerializeToString())
    except Exception as exc:  # noqa: BLE001 - the probe's answer
        return "NOT_IMPLEMENTED" not in str(exc)
    return True


def _kernel_gap(op_type: str, opset: int, bound: dict[str, str], inputs: tuple[int, ...] = ()) -> str | None:
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


# ----------------------------------------------------------------------------- the per-node check
@lru_cache(maxsize=None)
def element_types() -> dict[str, int]:
    """dtype id → ONNX TensorProto number (``translator.table.dtypes.onnx_enum_of``, cached)."""
    from translator.table.dtypes import onnx_enum_of

    return onnx_enum_of()


def _type_str(dtype: str) -> str | None:
    import onnx

    e = element_types().get(dtype)
    return None if e is None else f"tensor({onnx.TensorProto.DataType.Name(e).lower()})"


@lru_cache(maxsize=None)
def _verdict(op_type: str, opset: int, ins: tuple[str | None, ...], outs: tuple[str | None, ...],
             attr_names: tuple[str, ...], runtime: bool) -> Refusal | None:
    schema = schema_of(op_type, opset)
    if schema is None:
        return Refusal("unsupported_op", f"ONNX {op_type} does not exist at opset {opset}")
    where = f"ONNX {op_type}-{schema.since_version} (opset {opset})"
    allowed = schema.type_constraints
    bound: dict[str, str] = {}
    for formals, dts, is_input in ((schema.inputs, ins, True), (schema.outputs, outs, False)):
        if not formals:
            continue
        if len(dts) > len(formals) and not formals[-1].variadic:
            return Refusal("unsupported_op", f"{where} takes at most {len(formals)} "
                                             f"{'inputs' if is_input else 'outputs'}, not {len(dts)}")
        for i, dt in enumerate(dts):
            f = formals[min(i, len(formals) - 1)]
            t = _type_str(dt) if dt is not None else None
            if t is None:
                continue
            if is_input and t not in allowed.get(f.type_str, {f.type_str}):
                return Refusal("unsupported_dtype", f"{where} does not take {dt} for {f.name}")
            if f.type_str in allowed:
                bound.setdefault(f.type_str, t)
    for a in attr_names:
        if a not in schema.attributes:
            return Refusal("unsupported_attribute_value", f"{where} has no attribute {a!r}")
    if not runtime:
        return None
    gap = _kernel_gap(op_type, opset, bound, tuple(element_types().get(dt, 0) if dt else 0 for dt in ins))
    return None if gap is None else Refusal("unsupported_dtype", gap)


def _dtypes(values: Iterable[Any]) -> tuple[str | None, ...]:
    return tuple(v.type.dtype if v is not None and v.type.kind == "tensor" else None for v in values)


def node_refusal(node: Any, cell: Any, opset: int, attrs: bool = False, runtime: bool = True) -> Refusal | None:
    """Whether the ONNX schema in force at ``opset`` takes ``node`` written as its ``cell``
    (input types; with ``attrs``, every attribute the node and the cell set) and, with
    ``runtime``, onnxruntime has a CPU kernel for that version and those types. An op of
    onnxruntime's contrib domain (``com.microsoft.X``) is checked against the schema and
    kernels onnxruntime registers for it."""
    if cell is None or cell.status != "native":
        return None
    names = tuple(sorted({*node.attrs, *cell.attrs})) if attrs else ()
    return _verdict(cell.names[0], opset, _dtypes(node.inputs), _dtypes(node.outputs), names, runtime)


#: The opset a quantized model is written at when every node has a kernel there: onnxruntime's
#: exact 8-bit products on x86 CPUs without VNNI (``ort_run.PRECISE_INTEGER_PRODUCTS``) are
#: taken by its kernels of the opset-20 QLinearConv/QLinearMatMul/DequantizeLinear and not by
#: those of opset 21 on (onnxruntime 1.32): at 21 a QDQ ViT computes up to 15 steps off its
#: own source in a session that asks for exact products, at 20 it computes the source's bits
QUANTIZED_OPSET = 20


def choose_opset(graph: Graph, tables: Any, supported: frozenset[str], top: int) -> int:
    """The newest opset from ``top`` down to ``OPSET_FLOOR`` at which every node the target
    writes itself (``supported``) passes ``node_refusal`` (schema types and attributes,
    onnxruntime kernel); when none does, the one with the fewest refusals (the newest among
    equals). A model with 8-bit products onnxruntime runs as integer kernels (QDQ islands,
    QOperator ops: ``quantized.integer_products``) goes to ``QUANTIZED_OPSET`` first, when every
    node passes there and none changed meaning since (``OPSET_FLOOR``'s GroupNormalization)."""
    from translator.compile.quantized import integer_products

    nodes = [(n, tables.ops[n.op].backends.get(NAME)) for n in graph.walk() if n.op in supported]
    if (integer_products(graph) and QUANTIZED_OPSET <= top
            and not any(n.op == "group_normalization" for n, _ in nodes)
            and all(node_refusal(n, cell, QUANTIZED_OPSET, attrs=True) is None for n, cell in nodes)):
        return QUANTIZED_OPSET
    best, fewest = top, None
    for opset in range(top, max(OPSET_FLOOR, 7) - 1, -1):
        refused = sum(1 for n, cell in nodes if node_refusal(n, cell, opset, attrs=True) is not None)
        if refused == 0:
            return opset
        if fewest is None or refused < fewest:
            best, fewest = opset, refused
    return best


# ----------------------------------------------------------------------------- the written file
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


def load(path: Path, artifact: Any = None) -> Any:
    """The written file as onnx reads it back (the in-memory proto carries nothing more)."""
    import onnx

    return onnx.load(str(path))


def run(proto: Any, inputs: Mapping[str, Any]) -> list[Any]:
    """Run with onnxruntime's CPU provider; returns outputs in graph order."""

    from translator.ir.ort_run import run_session

    sess = ort_session(proto.SerializeToString(), sequential=thread_dependent(proto))
    names = [i.name for i in sess.get_inputs()]
    feed = {k: v for k, v in inputs.items() if k in names}
    return run_session(sess, feed)


#: kernels whose numbers depend on the thread count: DynamicQuantizeLSTM quantizes its hidden
#: state per chunk of batch rows it hands to a thread
THREAD_DEPENDENT = frozenset({"DynamicQuantizeLSTM"})


def all_nodes(g: Any) -> Iterable[Any]:
    """Every NodeProto of GraphProto ``g``, those of its subgraphs (Loop/If/Scan bodies) included."""
    for n in g.node:
        yield n
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from all_nodes(sub)


def thread_dependent(proto: Any) -> bool:
    """Whether the model (any subgraph) has a kernel whose numbers depend on the thread count:
    the check then runs it on one thread, as the frontend runs the source."""
    return any(n.domain == MS_DOMAIN and n.op_type in THREAD_DEPENDENT for n in all_nodes(proto.graph))


#: metadata_props key: JSON {written output name: the model's output name} for renamed outputs
OUTPUT_NAMES_METADATA = "opbridge.output_names"


def output_ports(proto: Any) -> list[OutputPort]:
    """The model's outputs by the model's names (an output written under another name is
    recorded in ``opbridge.output_names``); ONNX writes every dtype as declared."""
    import json

    meta = {p.key: p.value for p in proto.metadata_props}
    renamed = json.loads(meta[OUTPUT_NAMES_METADATA]) if OUTPUT_NAMES_METADATA in meta else {}
    return [OutputPort(renamed.get(o.name, o.name)) for o in proto.graph.output]


def version() -> str:
    import onnx
    import onnxruntime

    return f"onnx {onnx.__version__} (onnxruntime {onnxruntime.__version__})"


#: onnxruntime's integer compute kernels, and the float ones they replace
INTEGER_KERNELS = ("QLinearConv", "QLinearMatMul", "QGemm", "MatMulInteger", "ConvInteger", "DynamicQuantizeMatMul",
                   "MatMulIntegerToFloat", "DynamicQuantizeLSTM", "QAttention")
FLOAT_KERNELS = ("Conv", "MatMul", "Gemm", "FusedConv", "FusedMatMul", "FusedGemm", "LSTM", "GRU", "Attention")


def integer_kernels(path: Path) -> Any:
    """The compute kernels of the graph onnxruntime runs (its optimized session graph, every
    optimizer on, as a user's default session has them)."""
    import tempfile

    import onnx
    import onnxruntime as ort

    from translator.compile.target import KernelCount

    so = ort.SessionOptions()
    so.log_severity_level = 4
    with tempfile.TemporaryDirectory() as d:
        so.optimized_model_filepath = os.path.join(d, "optimized.onnx")
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        ops = [n.op_type for n in onnx.load(so.optimized_model_filepath, load_external_data=False).graph.node]
    n_int = sum(1 for o in ops if o in INTEGER_KERNELS)
    n_float = sum(1 for o in ops if o in FLOAT_KERNELS)
    return KernelCount(n_int, n_int + n_float, f"onnxruntime's optimized graph: {n_int} integer, {n_float} float kernels")
