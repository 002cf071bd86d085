"""Lowered IR → TensorFlow Lite: the TensorFlow module (``emitters.tensorflow.codegen``),
converted by TensorFlow's own converter.

``emit(model, ctx)`` gets the IR the one pipeline lowered for the ``tflite`` column with
TFLite's dtypes (``target.legal_dtypes``: int64 → int32 with a range check, float64 /
float16 → float32, …; every change reported), generates the TensorFlow module and converts
its ``tf.function`` with ``tf.lite.TFLiteConverter``: builtin ops only unless
``allow_select_tf_ops``. When the converter rejects a TensorFlow op, the IR node that
produced it (known from the generated source's line numbers) is reported to the pipeline
(``translator.compile.pipeline.Rejected``), which decomposes it through the table and runs again.
8-bit ops XNNPACK has no quantized kernel for run in float between a DEQUANTIZE and a
QUANTIZE (``delegable``, ``--xnnpack-islands``); averages the source computes in float stay
float (``same_scale``); a sigmoid or tanh whose int8 kernel writes a fixed range is rounded
once into the source's range (``fixed_range``). Graphs above 2 x 10k nodes convert in segments of the lowered IR, joined afterwards
(``segments``). Renamed I/O names are recorded in the flatbuffer's metadata.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from emitters.tensorflow.codegen import generate
from emitters.tensorflow.runtime import TFArtifact
from translator.table.errors import OpbridgeError, Unsupported
from translator.ir.graph import Model
from translator.compile.pipeline import Rejected
from translator.compile.registry import Refusal

from . import delegable, fixed_range, infinities, same_scale, segments
from .quant import DYNAMIC_RANGE, FAKE_QUANT, QUANTIZED_IO
from .registry import NAME
from .runtime import quiet_stderr

SOURCE_NAME = "<opbridge tflite module>"  # the file name the generated source is compiled under


def emit(model: Model, ctx: Any) -> TFArtifact:
    """Lowered IR → a TFArtifact whose ``tflite`` holds the converted flatbuffer."""
    if not ctx.options.get("io_channels_last"):
        parts = segments.split(model)
        if parts is not None and QUANTIZED_IO in (model.metadata or {}):
            raise Unsupported("quantize_linear", NAME, "unsupported_op",
                              "an 8-bit interface on a model large enough to be converted in segments")
        if parts is not None:  # a very large graph: the converter gets it in segments
            return with_io_names(segments.convert(
                model, parts, lambda part: convert_model(part, ctx, [v.type.dtype for v in part.graph.inputs],
                                                         [v.type.dtype for v in part.graph.outputs]),
                ctx.source_inputs, ctx.source_outputs))
    return convert_model(model, ctx, ctx.source_inputs, ctx.source_outputs)  # its names written by ``convert``


def convert_model(model: Model, ctx: Any, source_in: list[str | None], source_out: list[str | None]) -> TFArtifact:
    """The TensorFlow module of ``model``, converted; nodes whose TensorFlow ops the converter
    rejects are raised as ``Rejected`` (the pipeline decomposes them and runs again)."""
    allow = bool(ctx.options.get("allow_select_tf_ops"))
    art = generate(model, ctx, source_in, source_out)
    art.options["allow_select_tf_ops"] = allow
    islands = ctx.options.get("xnnpack_islands") or "auto"
    art.options["xnnpack_islands"] = islands == "on" or islands == "auto" and model.source_format != "tflite"
    # a .tflite source's own sigmoid/tanh kernels write their fixed range: kept as they are
    art.options["round_once"] = model.source_format != "tflite"
    qio = json.loads((model.metadata or {}).get(QUANTIZED_IO) or "{}")
    if qio:
        art.options["quantized_io"] = dict(qio)
    try:
        art.tflite = convert(art, allow)
        # the flatbuffer's interface is the 8-bit one the converter was asked for
        if "inputs" in qio:
            art.inputs = [dataclasses.replace(p, dtype=qio["inputs"]) for p in art.inputs]
        if "outputs" in qio:
            art.outputs = [dataclasses.replace(p, dtype=qio["outputs"]) for p in art.outputs]
    except _ConverterRejected as exc:
        nodes: dict[str, Refusal] = {}
        for line, tf_op in exc.ops:
            owner = art.line_owner.get(line)
            if owner is None:
                raise Unsupported(tf_op, NAME, "unsupported_op",
                                  f"the TFLite converter has no builtin for {tf_op}") from None
            nodes.setdefault(owner, Refusal("unsupported_op", f"TFLite builtins lack {tf_op} here"))
        raise Rejected(nodes) from None
    return art


IO_NAMES_METADATA = "opbridge.io_names"


def _renamed(io_names: dict[str, Any]) -> bool:
    return bool(io_names.get("inputs") or io_names.get("outputs"))


def with_io_names(art: TFArtifact) -> TFArtifact:
    """The flatbuffer records the signature keys that differ from the model's names
    (``names.io_names``) as a metadata entry ``opbridge.io_names`` (JSON), replacing any it
    has (a segmented model's joined flatbuffer carries its first segment's); an unrenamed
    model's bytes are left as the converter wrote them. ``convert`` writes the entry of a
    model converted whole itself, in ``signed``'s parse where it can."""
    if art.tflite is not None and _renamed(art.io_names):
        art.tflite = _named(art.tflite, art.io_names)
    return art


def _named(flat: bytes, io_names: dict[str, Any]) -> bytes:
    """``flat`` with its ``opbridge.io_names`` entry (``_put_io_names``)."""
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    m = fbu.convert_bytearray_to_object(bytearray(flat))
    _put_io_names(m, io_names)
    return bytes(fbu.convert_object_to_bytearray(m))


def _put_io_names(m: Any, io_names: dict[str, Any]) -> None:
    """``m`` (an object-API model) with its ``opbridge.io_names`` metadata entry (one it had is
    replaced, its buffer emptied)."""
    from tensorflow.lite.python import schema_py_generated as fb

    keep = []
    for md in m.metadata or []:
        if (md.name.decode() if isinstance(md.name, bytes) else md.name) == IO_NAMES_METADATA:
            m.buffers[md.buffer].data = None
        else:
            keep.append(md)
    buf = fb.BufferT()
    buf.data = list(json.dumps(io_names, sort_keys=True).encode())
    m.buffers.append(buf)
    md = fb.MetadataT()
    md.name, md.buffer = IO_NAMES_METADATA, len(m.buffers) - 1
    m.metadata = keep + [md]


class _ConverterRejected(Exception):
    def __init__(self, ops: list[tuple[int, str]]) -> None:
        super().__init__(", ".join(f"{op} (line {line})" for line, op in ops))
        self.ops = ops


def _frozen(converter: Any, io_names: dict[str, Any] | None = None) -> tuple[bytes, bool]:
    """The converter (``converter()``: a new one and its concrete function) run on the function
    frozen (its weights folded into the graph) instead of through a SavedModel it writes to a
    temporary folder, saves and reads back: the same kernels and tensors, a quarter sooner over
    the wild corpus (median 4.0 → 2.8 s; slower where loop bodies read many weights). That path
    writes no signature, which LiteRT's signature runner (and ``runtime.run``) reads: ``signed``
    adds the one a SavedModel gives. A function the frozen path cannot take goes through the
    SavedModel as before, and so does one the converter rejects: that path's errors name the
    op's line in the module, which ``convert`` maps back to the node to decompose. ``io_names``
    (renamed interface names) are recorded by ``signed`` in the same pass; the flag says
    whether they were."""
    conv, fn = converter()
    keys = sorted(fn.structured_outputs) if isinstance(fn.structured_outputs, dict) else None
    args = [t.name.split(":")[0] for t in fn.inputs[:len(fn.structured_input_signature[0])]]  # not the captures
    if keys is not None:
        conv.experimental_lower_to_saved_model = False
        _merged_by_signed(conv)
        _frozen_by_import(conv, fn)
        _without_traces(conv)
        try:
            with quiet_stderr():
                flat = signed(bytes(conv.convert()), args, keys, io_names=io_names)
        except Exception:  # noqa: BLE001 - said again, with source lines, by the SavedModel path below
            flat = None
        if flat is not None:
            return flat, bool(io_names)
        conv = converter(anew=True)[0]
    with quiet_stderr():
        return bytes(conv.convert()), False


def _merged_by_signed(conv: Any) -> None:
    """After converting, TensorFlow's converter parses the flatbuffer with the Python object API
    (0.1–0.5 s a model of the wild corpus) to merge constant buffers with the same bytes, and
    writes it again. ``signed`` parses it anyway and merges them there (``merge_constants``):
    the converter skips its own merge while it optimizes the converted model (its one switch
    for that, read nowhere else in that step)."""
    optimize = getattr(conv, "_optimize_tflite_model", None)
    if optimize is None or not hasattr(conv, "_experimental_use_buffer_offset"):
        return  # another TensorFlow's converter: it merges them itself

    def without_merge(*args: Any, **kwargs: Any) -> Any:
        conv._experimental_use_buffer_offset = True
        try:
            return optimize(*args, **kwargs)
        finally:
            conv._experimental_use_buffer_offset = False

    conv._optimize_tflite_model = without_merge


def _frozen_by_import(conv: Any, fn: Any) -> None:
    """TensorFlow's converter freezes the function into a GraphDef, then rebuilds a concrete
    function from that GraphDef (copying its ops one by one in Python) only to read the
    frozen graph's input and output tensors and hand its graph to Grappler. Here the same
    GraphDef is imported into a graph once (TensorFlow's C importer) and the tensors are read
    from it by name: the same GraphDef, the same tensors, the same flatbuffer, and a wild
    model's conversion in 0.81× the time (median). A TensorFlow whose converter lacks these
    steps keeps its own freeze."""
    try:
        from tensorflow.python.framework import convert_to_constants as c2c
    except ImportError:  # pragma: no cover - another TensorFlow layout
        return
    if not hasattr(conv, "_freeze_concrete_function") or not hasattr(c2c, "_replace_variables_by_constants") \
            or not hasattr(c2c, "_FunctionConverterDataInEager"):
        return

    def by_import() -> tuple[Any, list[Any], list[Any], Any]:
        import types

        import tensorflow as tf

        data = c2c._FunctionConverterDataInEager(func=fn, lower_control_flow=False, aggressive_inlining=False)
        graph_def, converted = c2c._replace_variables_by_constants(converter_data=data)
        captures = fn.graph.internal_captures
        folded = {id(captures[i]) for i in converted}  # captured weights, now constants
        graph = tf.Graph()
        with graph.as_default():
            tf.graph_util.import_graph_def(graph_def, name="")
        inputs = []
        for t in fn.inputs:
            if id(t) in folded or t.dtype == tf.resource:
                continue
            imported = graph.get_tensor_by_name(t.name)
            imported.set_shape(t.shape)  # a scalar's shape, as the converter's own rebuild sets it
            inputs.append(imported)
        outputs = [graph.get_tensor_by_name(t.name) for t in fn.outputs]
        return graph_def, inputs, outputs, types.SimpleNamespace(graph=graph)

    conv._freeze_concrete_function = by_import


class _NoTraces:
    """The converter's tracked object (``module``, kept alive for its variables) with an empty
    ``graph_debug_info``: the converter then takes that record instead of gathering every op's
    Python stack from the traced graph."""

    def __init__(self, module: Any) -> None:
        from tensorflow.core.framework import graph_debug_info_pb2

        self.module = module
        self.graph_debug_info = graph_debug_info_pb2.GraphDebugInfo()


def _without_traces(conv: Any) -> None:
    """Before converting, TensorFlow's converter gathers the Python stack of every op of the
    traced graph into a debug record its error messages quote (0.1–0.2 s a model of the wild
    corpus). The frozen attempt's errors are not read (the SavedModel path converts again and
    names the lines), and the record changes nothing in the flatbuffer: the frozen attempt's
    converter is given an empty one."""
    if hasattr(conv, "_trackable_obj") and not hasattr(conv._trackable_obj, "graph_debug_info"):
        conv._trackable_obj = _NoTraces(conv._trackable_obj)


def merge_constants(m: Any) -> int:
    """Constant buffers of ``m`` (an object-API model) with the same bytes made one (the lowest
    index), as TensorFlow's converter does: those of tensors only read (no op writes them, not a
    variable or a mutated input, not a subgraph's input or output). The number merged."""
    readonly: set[int] = set()
    for g in m.subgraphs or []:
        read: set[int] = set()
        for op in g.operators or []:
            mutated = op.mutatingVariableInputs
            for k, t in enumerate(op.inputs if op.inputs is not None else []):
                if t >= 0 and not g.tensors[t].isVariable and not (mutated is not None and k < len(mutated)
                                                                    and mutated[k]):
                    read.add(int(t))
        for op in g.operators or []:
            read.difference_update(int(t) for t in (op.outputs if op.outputs is not None else []))
            read.difference_update(int(t) for t in (op.intermediates if op.intermediates is not None else []))
        read.difference_update(int(t) for t in (g.inputs if g.inputs is not None else []))
        read.difference_update(int(t) for t in (g.outputs if g.outputs is not None else []))
        readonly.update(int(g.tensors[t].buffer) for t in read)
    first: dict[bytes, int] = {}
    same: dict[int, int] = {}
    for b in sorted(readonly):
        data = m.buffers[b].data if 0 <= b < len(m.buffers) else None
        if data is None or isinstance(data, list) or not data.size:
            continue
        same[b] = first.setdefault(data.tobytes(), b)
    same = {b: k for b, k in same.items() if b != k}
    if not same:
        return 0
    for g in m.subgraphs or []:
        for t in g.tensors or []:
            if t.buffer in same:
                t.buffer = same[t.buffer]
    for b in same:
        m.buffers[b].data = None
    return len(same)


def stable_names(m: Any) -> int:
    """Names TensorFlow gives from process-wide counters, renumbered by first appearance, so
    that the same model converted after other work in one process gives the same bytes:
    those of the functions of a model's control flow (``cond_false_174_…_frozen_2710``, in
    the names of ``m``'s subgraphs other than the first and in the tensor names that begin
    with them: a function's arguments), and a captured constant's (``Shape_2/647``: a
    constant read where no argument name applies is named by a counter under its op's scope).
    The number of names changed."""
    number = re.compile(rb"(?<=_)\d+(?=_|$)")
    renamed: dict[bytes, bytes] = {}
    seen: dict[bytes, bytes] = {}

    def text(v: Any) -> bytes:
        return v if isinstance(v, bytes) else (v or "").encode()

    for g in (m.subgraphs or [])[1:]:
        name = text(g.name)
        if name and name not in renamed:
            renamed[name] = number.sub(lambda k: seen.setdefault(k.group(0), str(len(seen)).encode()), name)
    renamed = {a: b for a, b in renamed.items() if a != b}
    longest_first = sorted(renamed, key=len, reverse=True)
    captured: dict[bytes, bytes] = {}
    changed = 0
    for g in m.subgraphs or []:
        name = text(g.name)
        if name in renamed:
            g.name = renamed[name]
            changed += 1
        interface = {int(t) for t in [*(g.inputs if g.inputs is not None else []),
                                      *(g.outputs if g.outputs is not None else [])]}
        for k, t in enumerate(g.tensors or []):
            tname = text(t.name)
            prefix = next((a for a in longest_first if tname.startswith(a)), None)
            if prefix is not None:
                t.name = renamed[prefix] + tname[len(prefix):]
                changed += 1
                continue
            scope, _, last = tname.rpartition(b"/")
            if scope and last.isdigit() and k not in interface and m.buffers[t.buffer].data is not None:
                t.name = scope + b"/" + captured.setdefault(tname, str(len(captured)).encode())
                changed += 1
    return changed


def signed(flat: bytes, inputs: list[str], outputs: list[str], key: str = "serving_default",
           io_names: dict[str, Any] | None = None) -> bytes | None:
    """``flat`` (one subgraph, no signature) with the signature a SavedModel's conversion
    writes, and each interface tensor named by its key where no other tensor has that name:
    the inputs under ``inputs`` (the function's arguments, in order), the outputs under
    ``outputs`` (the function's output keys, in the sorted order the frozen graph returns
    them); its equal constant buffers merged (``merge_constants``); names from TensorFlow's
    process-wide counters renumbered (``stable_names``); ``io_names``, when given,
    recorded as ``with_io_names`` does. None when the subgraph's inputs or outputs are not one
    per key, or a signature exists."""
    from tensorflow.lite.python import schema_py_generated as fb
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    m = fbu.convert_bytearray_to_object(bytearray(flat))
    if (m.signatureDefs or len(m.subgraphs) < 1 or len(m.subgraphs[0].outputs) != len(outputs)
            or len(m.subgraphs[0].inputs) != len(inputs)):
        return None
    sg = m.subgraphs[0]

    def entry(name: str, index: int) -> Any:
        t = fb.TensorMapT()
        t.name, t.tensorIndex = name, int(index)
        return t

    sd = fb.SignatureDefT()
    sd.signatureKey, sd.subgraphIndex = key, 0
    sd.inputs = [entry(k, i) for k, i in zip(inputs, sg.inputs)]
    sd.outputs = [entry(k, i) for k, i in zip(outputs, sg.outputs)]
    m.signatureDefs = [sd]
    taken = {t.name.decode() if isinstance(t.name, bytes) else t.name for t in sg.tensors}
    for k, i in [*zip(inputs, sg.inputs), *zip(outputs, sg.outputs)]:  # the interface's tensors named by their keys
        if k not in taken:  # (the converter's are "Identity_2", or a fake quant's op path)
            taken.add(k)
            sg.tensors[i].name = k
    merge_constants(m)
    stable_names(m)
    if io_names:
        _put_io_names(m, io_names)
    return bytes(fbu.convert_object_to_bytearray(m))


def convert(artifact: TFArtifact, allow_select_tf_ops: bool = False) -> bytes:
    import tensorflow as tf

    features = artifact.options.get("features", ())
    qio = artifact.options.get("quantized_io") or {}

    def converter(anew: bool = False) -> tuple[Any, Any]:
        """A converter and its concrete function; ``anew``: on a module built and traced again
        (a frozen conversion leaves the function's graph without the stack traces the SavedModel
        path's errors name lines from)."""
        mod = artifact.module(anew=anew)
        fn = mod.forward.get_concrete_function()
        conv = tf.lite.TFLiteConverter.from_concrete_functions([fn], mod)
        ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if allow_select_tf_ops:
            ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
        conv.target_spec.supported_ops = ops
        # no conversion record (the converter's version, options and the model's hash) in the
        # flatbuffer: nothing reads it, and writing it parsed and wrote the whole model once more
        conv.exclude_conversion_metadata = True
        if FAKE_QUANT in features or DYNAMIC_RANGE in features:
            # fake-quant ops: the converter's quantization-aware path writes int8 tensors and kernels
            # (no representative data); without them, the int8 weights of a dynamically quantized
            # model: its dynamic-range quantization (int8 weights, hybrid kernels)
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
        if "inputs" in qio:
            conv.inference_input_type = {"int8": tf.int8, "uint8": tf.uint8}[qio["inputs"]]
        if "outputs" in qio:
            conv.inference_output_type = {"int8": tf.int8, "uint8": tf.uint8}[qio["outputs"]]
        return conv, fn

    renamed = artifact.io_names if _renamed(artifact.io_names) else None
    try:
        flat, named = _frozen(converter, renamed)
    except Exception as exc:  # noqa: BLE001 - ConverterError: its error records name the op and the source line
        found = []
        for err in getattr(exc, "errors", ()):
            lines = [c.source.line for c in err.location.call if c.source.filename == SOURCE_NAME]
            if err.operator.name and lines:
                found.append((int(lines[0]), err.operator.name))
        if found:
            raise _ConverterRejected(sorted(set(found))) from None
        msg = str(exc)
        first = next((ln for ln in msg.splitlines() if "error:" in ln), msg.splitlines()[0] if msg else "")
        raise OpbridgeError("runtime_error", f"tflite: the converter failed: {first.strip()[:300]}") from None
    if renamed and not named:  # converted through a SavedModel: no ``signed`` pass wrote them
        flat = _named(flat, renamed)
    flat = infinities.restore(flat, artifact)  # the converter saturates ±inf constants to ±FLT_MAX
    if FAKE_QUANT in features:  # averages the source computes in float, which the converter quantized
        flat = same_scale.float_again(flat)[0]
    if FAKE_QUANT in features and artifact.options.get("round_once"):  # sigmoid/tanh rounded once, as the source does
        flat = fixed_range.once(flat)[0]
    if FAKE_QUANT in features and artifact.options.get("xnnpack_islands"):
        flat, moved = delegable.float_islands(flat)
        if moved:
            note = (f"tflite: int8 {', '.join(moved)} run in float between DEQUANTIZE and QUANTIZE (XNNPACK has no "
                    "quantized kernel for them, or computes them wrong: a BATCH_MATMUL whose second operand has a "
                    "non-zero zero point; --xnnpack-islands off keeps LiteRT's int8 kernels)")
            artifact.warnings.append(note)
    return flat
