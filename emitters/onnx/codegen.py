"""Lowered IR → ONNX (a ModelProto): code generation only.

ONNX is a data format, not source code: each IR node becomes one NodeProto whose type and
fixed attributes are the op's ``onnx`` cell in ``optable.yaml`` (``trunc_mod`` → ``Mod``
with ``fmod=1``), written by the op's rule (``write_node``, registered per op in the family
modules). The pipeline has already verified, lowered and checked every node against the
chosen opset (``runtime.node_refusal``); ``emit`` writes the graph, the opset and IR
version chosen for the model (``Compilation.options``), the doc string rendered from
``templates/onnx/doc_string.j2``, and runs onnx.checker on the result.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from translator.table.errors import OpbridgeError, Unsupported
from translator.ir.graph import Graph, Model, TensorType, Value
from translator.ir.names import NameSet
from translator.compile.registry import rules

from .registry import NAME
from .runtime import MS_DOMAIN, all_nodes, element_types, split_name

#: Above this many nodes the emitted model gets onnx.checker's structural check only: the
#: full check's strict shape inference grows superlinearly inside ONNX's C++ (measured
#: 12-20x per 10x nodes), while our verifier has already typed every value linearly.
FULL_CHECK_MAX_NODES = 20_000


class Emitter:
    """One model's writer: unique value and node names, dtype → element type, subgraphs."""

    def __init__(self, ctx: Any, opset: int) -> None:
        self.ctx = ctx
        self.tables = ctx.tables
        self.opset = opset
        self.enum_of = element_types()
        self.rules = rules(NAME)
        self.names: dict[int, str] = {}
        self.used = NameSet(sep="__")
        #: node names: ONNX requires them unique in a graph (onnxruntime refuses a model
        #: with two nodes of one name); a source model's duplicates get suffixes
        self.node_names = NameSet(sep="__")
        #: top-level graph outputs written under another name (an input, a constant or a
        #: repeated output goes through an Identity): written name -> the model's name
        self.renamed_outputs: dict[str, str] = {}

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
            repeated = any(v is o for o in g.outputs[:i])
            if not produced_here or repeated:
                # an ONNX graph output is a value of its own: an input, a constant or an
                # earlier output written again goes through an Identity under a new name
                # (the alias name is taken here, not keyed by the id of a temporary Value:
                # ids of freed temporaries repeat, and two aliases then shared one name)
                alias = self.used.take(f"{v.name or 'v'}_out")
                nodes.append(helper.make_node("Identity", [self.name(v)], [alias]))
                if top:
                    what = ("repeats an earlier output" if repeated else
                            "is a model input" if any(v is x for x in g.inputs) else "is a constant")
                    self.ctx.warn(f"output {i} ({v.name!r}) {what}: written as {alias!r} "
                                  f"through an Identity")
                    self.renamed_outputs[alias] = v.name
                outputs.append(helper.make_value_info(alias, self.type_proto(v.type)))
                continue
            outputs.append(self.value_info(v))
        inputs = [self.value_info(v) for v in g.inputs]
        return helper.make_graph(nodes, g.name or "main", inputs, outputs, inits)

    def node(self, n: Any) -> Any:
        rule = self.rules.get(n.op)
        if rule is None:
            raise Unsupported(n.op, NAME, "unsupported_op", "no ONNX rule for it after lowering", n.name)
        return rule.fn(self, n)

    def schema(self, op_type: str, n: Any) -> Any:
        """The schema of a cell's op name at the target opset (``runtime.schema_of``: ONNX's
        default domain, or onnxruntime's contrib schemas for ``com.microsoft.X``)."""
        import onnx.defs

        from .runtime import schema_of

        found = schema_of(op_type, self.opset)
        if found is not None:
            return found
        since = None
        try:
            since = onnx.defs.get_schema(op_type).since_version
        except Exception:  # noqa: BLE001
            pass
        raise Unsupported(n.op, NAME, "unsupported_op",
                          f"ONNX {op_type} needs opset {since or '?'} but the target opset is {self.opset}", n.name)

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
            if decl == A.INTS:
                return helper.make_attribute(key, [int(x) for x in v], attr_type=A.INTS)
            if decl == A.FLOATS:
                return helper.make_attribute(key, [float(x) for x in v], attr_type=A.FLOATS)
            if decl == A.STRINGS:
                return helper.make_attribute(key, [str(x).encode("utf-8", "surrogateescape") for x in v], attr_type=A.STRINGS)
            return helper.make_attribute(key, list(v))
        if isinstance(v, str):
            return helper.make_attribute(key, v.encode("utf-8", "surrogateescape"))
        if decl == A.FLOAT:
            return helper.make_attribute(key, float(v))
        if decl == A.INT:
            return helper.make_attribute(key, int(v))
        return helper.make_attribute(key, v)


def write_node(em: Emitter, n: Any, attrs: dict[str, Any] | None = None) -> Any:
    """The rule of every op ONNX has natively: one NodeProto of the cell's type (a
    ``com.microsoft.X`` name: op X of that domain), the cell's fixed attributes, then the
    node's (``attrs``: the node's as its rule renamed them). A function op's body reads its
    attributes, so their defaults are spelled out."""
    from onnx import helper

    op = em.tables.ops[n.op]
    cell = op.backends[NAME]
    schema = em.schema(cell.names[0], n)
    domain, op_type = split_name(cell.names[0])
    written: dict[str, Any] = dict(cell.attrs)
    if schema.has_function and op.signature is not None:
        for a in op.signature.attributes:
            if a.default is not None and a.name in schema.attributes:
                written.setdefault(a.name, list(a.default) if isinstance(a.default, tuple) else a.default)
    written.update(n.attrs if attrs is None else attrs)
    protos = [em.attribute(k, v, schema, n) for k, v in written.items()]
    ins = [em.name(v) if v is not None else "" for v in n.inputs]
    outs = [em.name(v) for v in n.outputs]
    node = helper.make_node(op_type, ins, outs, name=em.node_names.take(n.name) if n.name else None,
                            domain=domain or None)
    node.attribute.extend(protos)
    return node


def _doc_string(model: Model) -> str:
    from translator.compile.render import render

    return render("onnx", "doc_string.j2", source=model.source, source_format=model.source_format,
                  ops=model.op_histogram())


def emit(model: Model, ctx: Any) -> Any:
    """Lowered IR → ``onnx.ModelProto`` at ``ctx.options["opset"]`` (set by the target's
    ``configure``), IR version ``ctx.options["ir_version"]`` (default: the newest
    onnxruntime loads).

    ``ctx.options["check"]``: True (default) = onnx.checker with full_check up to
    FULL_CHECK_MAX_NODES nodes, the structural check above; "full" = always full_check;
    False = none."""
    import onnx
    from onnx import helper

    from .runtime import OUTPUT_NAMES_METADATA, runtime_limits

    opts = ctx.options
    opset = int(opts["opset"])
    check = opts.get("check", True)
    em = Emitter(ctx, opset)
    g = em.graph(model.graph, True)
    irv = opts.get("ir_version") or min(runtime_limits()[1], onnx.IR_VERSION)
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=irv,
                              producer_name="opbridge", producer_version=_version())
    if any(n.domain == MS_DOMAIN for n in all_nodes(proto.graph)):  # a Loop body's too
        proto.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    proto.doc_string = _doc_string(model)
    from translator.compile.quantized import FEATURES_METADATA, dynamic_range_features

    props = {}
    if em.renamed_outputs:  # the check and users find each output under the model's own name
        import json

        props[OUTPUT_NAMES_METADATA] = json.dumps(em.renamed_outputs, sort_keys=True)
    features = dynamic_range_features(model)  # activations quantized the target's own way (convert's fallback)
    if features:
        props[FEATURES_METADATA] = ",".join(sorted(features))
    if props:
        helper.set_model_props(proto, props)
    _fill_output_types(proto)
    if check:
        full = check == "full" or len(proto.graph.node) <= FULL_CHECK_MAX_NODES
        try:
            onnx.checker.check_model(proto, full_check=full)
        except Exception as exc:  # noqa: BLE001 - ValidationError / InferenceError
            if "existing shape differ" not in str(exc) or not _drop_output_shapes(proto):
                raise OpbridgeError("verifier", f"onnx.checker rejected the emitted model: {str(exc).splitlines()[0]}") from None
            ctx.warn("the model's declared output shapes contradict ONNX shape inference: written as inferred")
            _fill_output_types(proto)
            try:
                onnx.checker.check_model(proto, full_check=full)
            except Exception as again:  # noqa: BLE001
                raise OpbridgeError("verifier", "onnx.checker rejected the emitted model: "
                                    f"{str(again).splitlines()[0]}") from None
    return proto


def _drop_output_shapes(proto: Any) -> bool:
    """Clear the shapes (not the element types) of the graph outputs: a source model's declared
    output shape that its own graph contradicts (ddddocr declares (1, seq) for a (seq, 1, C)
    output) must not make the written file fail its checker. Whether anything was cleared."""
    cleared = False
    for o in proto.graph.output:
        if o.type.HasField("tensor_type") and o.type.tensor_type.HasField("shape"):
            o.type.tensor_type.ClearField("shape")
            cleared = True
    return cleared


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
