"""IR → TensorFlow Lite: the TensorFlow emission, converted by TensorFlow's own converter.

``emit`` runs the TensorFlow pipeline (``emitters/tensorflow.py``) for the ``tflite``
column (an op is native when its TFLite cell is native or composite and the TensorFlow
code for it exists), with TFLite's dtypes (``legal_dtypes``: int64 → int32 with a range
check, float64 / float16 → float32, …; every change reported), then converts the
``tf.function`` with ``tf.lite.TFLiteConverter`` — builtin ops only unless
``allow_select_tf_ops`` (graphs above 2 x 10k nodes in segments, joined afterwards:
``tflite_segments``). When the converter rejects a TensorFlow op, the IR node that
produced it (known from the generated source's line numbers) is decomposed through the
table and the conversion retried; a node with no decomposition is ``Unsupported``.

``run`` uses ``tf.lite.Interpreter`` (its signature runner; ``runner`` keeps one prepared
for repeated runs); ``save`` writes the ``.tflite`` flatbuffer atomically.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from translator.errors import OpbridgeError, Unsupported
from translator.ir import Graph, Model, Node, Value
from translator.tables import Tables, load_tables

from . import tensorflow as tfe
from .tensorflow import TFArtifact

NAME = "tflite"
MAX_RETRIES = 6
#: compute dtypes TFLite builtins lack although the flatbuffer schema has the tensor type
#: (proposed as corrections in tools/fragments/dtypes_tflite.yaml; applied here until merged)
NO_KERNELS = frozenset({"int64", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "uint16", "uint32",
                        "uint64", "complex64", "complex128"})
SOURCE_NAME = "<opbridge tflite module>"  # the file name the generated source is compiled under


def legal_dtypes(tables: Tables) -> frozenset[str]:
    """The dtypes TFLite builtins compute in: the tflite column of dtypes.yaml minus ``NO_KERNELS``."""
    from translator.passes.legalize_dtypes import backend_dtypes

    return backend_dtypes(NAME, tables) - NO_KERNELS


def supported_ops(tables: Tables | None = None) -> frozenset[str]:
    return tfe.supported_ops(NAME, tables)


def emit(model: Model, io_channels_last: bool = False, allow_select_tf_ops: bool = False,
         tables: Tables | None = None) -> TFArtifact:
    """IR → a TFArtifact whose ``tflite`` holds the converted flatbuffer."""
    tables = tables or load_tables()
    legal = legal_dtypes(tables)
    for node in model.graph.walk():  # reinterpreting bits cannot survive a width change
        if node.op == "bit_cast":
            for v in list(node.inputs) + list(node.outputs):
                if v is not None and v.type.dtype is not None and v.type.dtype not in legal:
                    raise Unsupported(node.op, NAME, "unsupported_dtype",
                                      f"bit_cast of {v.type.dtype}, which TFLite legalizes to another width", node.name)
    if not io_channels_last:
        from . import tflite_segments

        segments = tflite_segments.split(model)
        if segments is not None:  # a very large graph: the converter gets it in segments
            return with_io_names(tflite_segments.convert(model, segments, lambda part: emit(
                part, allow_select_tf_ops=allow_select_tf_ops, tables=tables)))
    original = clone(model)
    rejected: dict[str, str] = {}  # node name -> the TensorFlow op the converter rejected

    def check(node: Node) -> tuple[str, str] | None:
        tf_op = rejected.get(node.name)
        return None if tf_op is None else ("unsupported_op", f"TFLite builtins lack {tf_op} here")

    for _ in range(MAX_RETRIES):
        work = clone(original)
        art = tfe.translate(work, NAME, tables, io_channels_last, accepts=check, legal=legal)
        art.options["allow_select_tf_ops"] = allow_select_tf_ops
        try:
            art.tflite = convert(art, allow_select_tf_ops)
            return with_io_names(art)
        except _ConverterRejected as exc:
            new = {}
            for line, tf_op in exc.ops:
                owner = art.line_owner.get(line)
                if owner is None or owner in rejected:
                    raise Unsupported(tf_op, NAME, "unsupported_op",
                                      f"the TFLite converter has no builtin for {tf_op}") from None
                new[owner] = tf_op
            _refuse_undecomposable(work, new, tables)
            rejected.update(new)
    raise Unsupported("tflite", NAME, "unsupported_op", "conversion still failing after decomposing rejected nodes")


IO_NAMES_METADATA = "opbridge.io_names"


def with_io_names(art: TFArtifact) -> TFArtifact:
    """The flatbuffer records the signature keys that differ from the model's names
    (``names.io_names``) as a metadata entry ``opbridge.io_names`` (JSON); an unrenamed
    model's bytes are left as the converter wrote them."""
    import json

    if art.tflite is None or not (art.io_names.get("inputs") or art.io_names.get("outputs")):
        return art
    from tensorflow.lite.python import schema_py_generated as fb
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    m = fbu.convert_bytearray_to_object(bytearray(art.tflite))
    keep = [md for md in (m.metadata or []) if (md.name.decode() if isinstance(md.name, bytes) else md.name)
            != IO_NAMES_METADATA]
    buf = fb.BufferT()
    buf.data = list(json.dumps(art.io_names, sort_keys=True).encode())
    m.buffers.append(buf)
    md = fb.MetadataT()
    md.name, md.buffer = IO_NAMES_METADATA, len(m.buffers) - 1
    m.metadata = keep + [md]
    art.tflite = bytes(fbu.convert_object_to_bytearray(m))
    return art


def clone(model: Model) -> Model:
    """A copy of the model's IR to convert again (constant arrays are shared: passes replace
    a constant's array, they never write into it)."""
    return Model(_clone_graph(model.graph, {}), model.source, model.source_format, model.opset,
                 dict(model.metadata) if model.metadata else model.metadata)


def _clone_graph(g: Graph, outer: dict[int, Value]) -> Graph:
    ng = Graph(g.name)
    vmap = dict(outer)
    for v in g.inputs:
        vmap[id(v)] = ng.add_input(v.name, v.type)
    for v in g.constants.values():
        vmap[id(v)] = copy_constant(ng, v)
    for n in g.nodes:
        attrs = {}
        for k, a in n.attrs.items():
            if isinstance(a, Graph):
                a = _clone_graph(a, vmap)
            elif isinstance(a, list) and a and all(isinstance(x, Graph) for x in a):
                a = [_clone_graph(x, vmap) for x in a]
            attrs[k] = a
        copy_node(ng, n, [None if v is None else vmap[id(v)] for v in n.inputs], attrs, vmap)
    ng.outputs = [vmap[id(v)] for v in g.outputs]
    return ng


def copy_constant(g: Graph, v: Value) -> Value:
    """``v`` (a constant of another graph) as a constant of ``g``: same name, type and array."""
    c = g.add_constant(v.name, v.const, v.type.dtype or "float32")
    c.type = v.type
    return c


def copy_node(g: Graph, n: Node, inputs: list[Value | None], attrs: dict[str, Any], vmap: dict[int, Value]) -> Node:
    """``n`` (a node of another graph) appended to ``g`` on ``inputs``: same op, name, output
    names and types, meta; ``vmap`` then maps each of its outputs to the copy's."""
    new = g.add_node(n.op, inputs, attrs, outputs=[o.name for o in n.outputs], name=n.name,
                     types=[o.type for o in n.outputs])
    new.meta = dict(n.meta)
    for o, no in zip(n.outputs, new.outputs):
        vmap[id(o)] = no
    return new


def _refuse_undecomposable(graph_model: Model, new: dict[str, str], tables: Tables) -> None:
    """A rejected node that its table decomposition cannot replace ends the conversion here."""
    from translator.lowering import applies

    for node in graph_model.graph.walk():
        tf_op = new.get(node.name)
        if tf_op is None:
            continue
        op = tables.ops.get(node.op)
        why = "no decomposition in optable.yaml" if op is None or not op.decomposition else applies(op, node)
        if why is not None:
            dtypes = ", ".join(sorted({v.type.dtype for v in node.inputs if v is not None and v.type.dtype}))
            raise Unsupported(node.op, NAME, "unsupported_op",
                              f"the TFLite converter has no builtin for {tf_op} ({dtypes}); {why}", node.name)


class _ConverterRejected(Exception):
    def __init__(self, ops: list[tuple[int, str]]) -> None:
        super().__init__(", ".join(f"{op} (line {line})" for line, op in ops))
        self.ops = ops


def convert(artifact: TFArtifact, allow_select_tf_ops: bool = False) -> bytes:
    import tensorflow as tf

    mod = artifact.module()
    fn = mod.forward.get_concrete_function()
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn], mod)
    ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if allow_select_tf_ops:
        ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
    conv.target_spec.supported_ops = ops
    try:
        with _quiet_stderr():
            return bytes(conv.convert())
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


@contextlib.contextmanager
def _quiet_stderr() -> Any:
    """The converter's MLIR diagnostics go to file descriptor 2; its errors come back as data."""
    import sys

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def runner(artifact: TFArtifact) -> Callable[[Mapping[str, Any]], list[Any]]:
    """A prepared ``tf.lite.Interpreter`` (built and allocated once) as a callable: model-named
    feeds → outputs in the model's order. Repeated runs (benchmarks) pay no set-up."""
    import warnings

    import tensorflow as tf

    if artifact.tflite is None:
        raise OpbridgeError("bad_model", "tflite: the artifact holds no converted model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tf.lite.Interpreter's deprecation notice
        try:
            with _quiet_stderr():  # the XNNPACK delegate announces itself on stderr
                interp = tf.lite.Interpreter(model_content=artifact.tflite)
        except (RuntimeError, ValueError) as exc:
            if "Flex" in str(exc) or "Select TensorFlow op" in str(exc):
                raise Unsupported("tflite", NAME, "unsupported_op",
                                  "the model uses select TF ops; this tf.lite.Interpreter has no Flex delegate") from None
            raise
    signature = interp.get_signature_runner()

    def call(inputs: Mapping[str, Any]) -> list[Any]:
        feeds = tfe.feed_arrays(artifact, inputs)
        with _quiet_stderr():
            res = signature(**{k: np.asarray(v) for k, v in feeds.items()})
        return tfe.restore_outputs(artifact, [res[p.key] for p in artifact.outputs])

    return call


def run(artifact: TFArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    """Run the flatbuffer with ``tf.lite.Interpreter``; outputs in the model's order."""
    return runner(artifact)(inputs)


def save(artifact: TFArtifact, path: str | os.PathLike[str]) -> Path:
    """The ``.tflite`` flatbuffer, written to a temporary file and renamed into place."""
    if artifact.tflite is None:
        raise OpbridgeError("bad_model", "tflite: the artifact holds no converted model")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(artifact.tflite)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out
