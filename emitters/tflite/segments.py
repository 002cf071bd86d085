"""Very large graphs → TFLite in segments: each segment through TensorFlow's converter on its
own, the flatbuffers then joined into one model.

TensorFlow's converter (tracing the ``tf.function``, freezing, the MLIR passes) grows faster
than the graph: a 100k-node chain takes over 12x as long as a 10k one, and gigabytes. A main
graph of more than ``2 * SEGMENT_NODES`` nodes (without control-flow subgraphs) is cut, in
node order, into runs of at most ``SEGMENT_NODES`` nodes. The graph cut is the one the
pipeline already lowered (decompositions, dtype legalization and layout are done once, for
the whole model). Each run becomes a model of its own: its inputs are the values it reads
that earlier runs (or the model) provide, its outputs the values later runs read or the
model returns, all keeping their IR names. Each is generated and converted by
``codegen.convert_model`` (a node the converter rejects goes back to the pipeline as
``Rejected``, which decomposes it and runs again), and the flatbuffers are joined (``join``): tensors, buffers and operators appended
with their indices moved, operator codes shared, each segment's input tensor replaced by
the tensor that produced it, one subgraph and one ``serving_default`` signature with the
model's inputs and outputs.

A cut costs nothing inside TFLite (the tensor passes straight from one operator to the
next); it only keeps the converter from fusing across it (a cut every 10k nodes). Values
cross a cut in their legalized dtype (both sides legalize alike) and the model's layout
(``io_channels_last`` is not segmented).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from translator.ir.graph import Graph, Model, Value

#: the most nodes one converter call gets; a graph converts in segments above twice this
SEGMENT_NODES = 10_000


@dataclass
class Segment:
    model: Model
    inputs: list[Value]  # the original graph's values, in the segment graph's input order
    outputs: list[Value]  # likewise for its outputs


def split(model: Model) -> list[Segment] | None:
    """The segments of a graph above the threshold, or None (convert it whole): small graphs,
    graphs with control-flow subgraphs, or values whose type a segment signature needs but
    the IR does not know statically."""
    from translator.ir.graph import copy_constant, copy_node

    g = model.graph
    nodes = g.nodes
    if len(nodes) <= 2 * SEGMENT_NODES or any(any(True for _ in n.subgraphs()) for n in nodes):
        return None
    if any(v.producer is None for v in g.outputs):
        return None  # an input or constant returned as is: nothing to cut around
    k = math.ceil(len(nodes) / SEGMENT_NODES)
    size = math.ceil(len(nodes) / k)
    runs = [nodes[i:i + size] for i in range(0, len(nodes), size)]
    last_use: dict[int, int] = {}
    for i, run in enumerate(runs):
        for n in run:
            for v in n.inputs:
                if v is not None:
                    last_use[id(v)] = i
    returned = {id(v) for v in g.outputs}
    segments = []
    for i, run in enumerate(runs):
        sg = Graph(f"{g.name}_segment{i}")
        vmap: dict[int, Value] = {}
        ins: list[Value] = []

        def get(v: Value) -> Value:
            nv = vmap.get(id(v))
            if nv is None:
                if v.is_const:
                    nv = copy_constant(sg, v)
                else:
                    nv = sg.add_input(v.name, v.type)
                    ins.append(v)
                vmap[id(v)] = nv
            return nv

        for n in run:
            copy_node(sg, n, [None if v is None else get(v) for v in n.inputs], dict(n.attrs), vmap)
        outs = [o for n in run for o in n.outputs if id(o) in returned or last_use.get(id(o), -1) > i]
        if not outs or any(not v.type.is_static or v.type.dtype is None for v in ins + outs):
            return None
        sg.outputs = [vmap[id(v)] for v in outs]
        part = Model(sg, model.source, model.source_format, model.opset, dict(model.metadata or {}))
        segments.append(Segment(part, ins, outs))
    used = {id(v) for s in segments for v in s.inputs}
    if any(id(v) not in used for v in g.inputs):
        return None  # an input no node reads: the joined model would have no tensor for it
    return segments


def convert(model: Model, segments: list[Segment], emit_one: Callable[[Model], Any],
            source_inputs: list[str | None], source_outputs: list[str | None]) -> Any:
    """Convert each segment with ``emit_one`` and join them into one TFArtifact (its ports
    carry the model's dtypes before legalization: ``source_inputs``, ``source_outputs``)."""
    from emitters.tensorflow.runtime import TFArtifact

    arts = []
    for seg in segments:
        art = emit_one(seg.model)
        art._instance = None  # the segment's traced tf.Module: only its flatbuffer is needed now
        arts.append(art)
    data, in_ports, out_ports = join(model.graph, segments, arts, source_inputs, source_outputs)
    first = arts[0]
    # the segments' own I/O names (boundary values included) are theirs: the joined model's
    # are named as an unsegmented conversion names them (``join``), and reported once
    io = _io_names(model.graph)
    io_warnings = list(io.warnings)
    return TFArtifact(
        backend=first.backend,
        source="".join(f"# segment {i + 1} of {len(arts)}\n{a.source}\n" for i, a in enumerate(arts)),
        weights={}, inputs=in_ports, outputs=out_ports,
        transposes=sum(a.transposes for a in arts),
        layout=_sum_layout([a.layout for a in arts]),
        warnings=list(dict.fromkeys([w for a in arts for w in a.warnings if w not in a.io_warnings] + io_warnings)),
        decomposed=[d for a in arts for d in a.decomposed],
        options=dict(first.options, segments=len(arts)),
        tflite=data, io_names=io.renamed(), io_warnings=io_warnings)


def _io_names(graph: Graph) -> Any:
    from translator.ir.names import io_names

    from emitters.tensorflow.codegen import RESERVED

    return io_names("tflite", [v.name for v in graph.inputs], [v.name for v in graph.outputs], extra_reserved=RESERVED)


def _sum_layout(layouts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for lay in layouts:
        for k, v in lay.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out[k] = out.get(k, 0) + v
            else:
                out.setdefault(k, v)
    return out


def _signature(model: Any) -> tuple[dict[str, int], dict[str, int]]:
    sig = model.signatureDefs[0]

    def key(t: Any) -> str:
        return t.name.decode() if isinstance(t.name, bytes) else t.name

    return {key(t): t.tensorIndex for t in sig.inputs}, {key(t): t.tensorIndex for t in sig.outputs}


def join(graph: Graph, segments: list[Segment], arts: list[Any], source_inputs: list[str | None],
         source_outputs: list[str | None]) -> tuple[bytes, list[Any], list[Any]]:
    """One flatbuffer from the segments' flatbuffers, and the joined model's ports."""
    from dataclasses import replace

    from tensorflow.lite.python import schema_py_generated as fb
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    from translator.table.errors import OpbridgeError

    merged = fb.ModelT()
    merged.version = 3
    merged.description = "opbridge: joined from segments"
    merged.buffers = [fb.BufferT()]  # buffer 0: the empty sentinel
    merged.operatorCodes = []
    merged.metadata = []
    sub = fb.SubGraphT()
    sub.name = "main"
    sub.tensors, sub.operators = [], []
    codes: dict[tuple, int] = {}
    metadata: dict[str, bytes] = {}  # the first segment's entries; the highest min_runtime_version
    produced: dict[int, int] = {}  # id(original value) -> tensor index in the joined model
    ports: dict[int, Any] = {}  # id(original value) -> its port (input or output)
    for seg, art in zip(segments, arts):
        m = fbu.convert_bytearray_to_object(bytearray(art.tflite))
        if len(m.subgraphs) != 1 or not m.signatureDefs:
            raise OpbridgeError("runtime_error", "tflite: a segment converted into more than one subgraph")
        g = m.subgraphs[0]
        sig_in, sig_out = _signature(m)
        moved: dict[int, int] = {}
        for port, v in zip(art.inputs, seg.inputs):
            ports.setdefault(id(v), port)
            if id(v) in produced:
                moved[sig_in[port.key]] = produced[id(v)]
        buffers: dict[int, int] = {0: 0}
        for i, t in enumerate(g.tensors):
            if i in moved:
                continue
            b = m.buffers[t.buffer] if t.buffer else None
            if b is not None and b.data is not None and len(b.data):
                if t.buffer not in buffers:
                    buffers[t.buffer] = len(merged.buffers)
                    merged.buffers.append(b)
                t.buffer = buffers[t.buffer]
            else:
                t.buffer = 0
            moved[i] = len(sub.tensors)
            sub.tensors.append(t)
        for port, v in zip(art.inputs, seg.inputs):
            produced.setdefault(id(v), moved[sig_in[port.key]])
        for op in g.operators:
            c = m.operatorCodes[op.opcodeIndex]
            key = (c.deprecatedBuiltinCode, c.builtinCode, c.customCode, c.version)
            if key not in codes:
                codes[key] = len(merged.operatorCodes)
                merged.operatorCodes.append(c)
            op.opcodeIndex = codes[key]
            op.inputs = [moved[i] if i >= 0 else i for i in (op.inputs if op.inputs is not None else [])]
            op.outputs = [moved[i] for i in (op.outputs if op.outputs is not None else [])]
            if op.intermediates is not None:
                op.intermediates = [moved[i] for i in op.intermediates]
            sub.operators.append(op)
        for port, v in zip(art.outputs, seg.outputs):
            produced[id(v)] = moved[sig_out[port.key]]
            ports[id(v)] = port
        for md in m.metadata or []:
            name = md.name.decode() if isinstance(md.name, bytes) else md.name
            data = bytes(m.buffers[md.buffer].data if m.buffers[md.buffer].data is not None else b"")
            if name not in metadata or (name == "min_runtime_version" and _version(data) > _version(metadata[name])):
                metadata[name] = data
    for name, data in metadata.items():
        buf = fb.BufferT()
        buf.data = list(data)
        merged.buffers.append(buf)
        md = fb.MetadataT()
        md.name, md.buffer = name, len(merged.buffers) - 1
        merged.metadata.append(md)
    io = _io_names(graph)  # the signature keys of an unsegmented conversion
    in_ports = [replace(ports[id(v)], name=v.name, key=k, source_dtype=d)
                for v, k, d in zip(graph.inputs, io.inputs, source_inputs)]
    out_ports = [replace(ports[id(v)], name=v.name, key=k, source_dtype=d)
                 for v, k, d in zip(graph.outputs, io.outputs, source_outputs)]
    sub.inputs = [produced[id(v)] for v in graph.inputs]
    sub.outputs = [produced[id(v)] for v in graph.outputs]
    merged.subgraphs = [sub]
    sig = fb.SignatureDefT()
    sig.signatureKey = "serving_default"
    sig.subgraphIndex = 0
    sig.inputs = [_tensor_map(fb, p.key, i) for p, i in zip(in_ports, sub.inputs)]
    sig.outputs = [_tensor_map(fb, p.key, i) for p, i in zip(out_ports, sub.outputs)]
    merged.signatureDefs = [sig]
    return bytes(fbu.convert_object_to_bytearray(merged)), in_ports, out_ports


def _version(data: bytes) -> tuple[int, ...]:
    """The NUL-padded version string b"2.3.0" → (2, 3, 0); anything unparsable sorts first."""
    try:
        return tuple(int(x) for x in data.rstrip(b"\x00").decode().split("."))
    except ValueError:
        return ()


def _tensor_map(fb: Any, name: str, index: int) -> Any:
    t = fb.TensorMapT()
    t.name, t.tensorIndex = name, index
    return t
