"""The framework side of the TensorFlow target: the artifact (generated source + weights),
running it in memory (``run``: trace ``forward``, no SavedModel), writing it as a SavedModel
(``save``: atomic, byte-for-byte reproducible) and loading it back (``load``).
"""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from translator.table.errors import OpbridgeError, Unsupported
from translator.compile.target import OutputPort

from .helpers import tf_dtype_names


@dataclass
class Port:
    name: str  # the model's name
    key: str  # the identifier in the generated code / the signature key
    dtype: str  # dtype id inside the artifact (after legalization)
    source_dtype: str | None  # dtype id in the source model
    shape: tuple | None
    channels_last: bool = False


@dataclass
class TFArtifact:
    backend: str
    source: str
    weights: dict[str, np.ndarray]
    inputs: list[Port]
    outputs: list[Port]
    transposes: int
    layout: dict[str, Any]
    warnings: list[str]
    decomposed: list[tuple[str, str]]
    options: dict[str, Any] = field(default_factory=dict)
    #: source line number (1-based) -> the IR node whose code it is
    line_owner: dict[int, str] = field(default_factory=dict, repr=False)
    _instance: Any = field(default=None, repr=False, compare=False)
    tflite: bytes | None = field(default=None, repr=False)
    #: the graph I/O names this backend could not keep: {"inputs": {model name: key}, "outputs": {...}}
    io_names: dict[str, dict[str, str]] = field(default_factory=dict)
    #: the warnings that say so (also in ``warnings``)
    io_warnings: list[str] = field(default_factory=list, repr=False)

    def report(self) -> dict[str, Any]:
        return {"backend": self.backend, "transposes": self.transposes, "layout": self.layout,
                "warnings": list(self.warnings), "decomposed": [list(d) for d in self.decomposed],
                "inputs": [_port_json(p) for p in self.inputs], "outputs": [_port_json(p) for p in self.outputs],
                "options": self.options, "io_names": self.io_names}

    def module(self, anew: bool = False) -> Any:
        """The generated ``OpbridgeModel`` instance (built once, in memory; ``anew``: built and
        traced again, for a caller whose use changed the cached one)."""
        if self._instance is None or anew:
            quiet_tf()
            namespace: dict[str, Any] = {"__name__": "opbridge_generated"}
            exec(compile(self.source, f"<opbridge {self.backend} module>", "exec"), namespace)  # noqa: S102
            self._instance = namespace["OpbridgeModel"](self.weights)
        return self._instance


def _port_json(p: Port) -> dict[str, Any]:
    return {"name": p.name, "key": p.key, "dtype": p.dtype, "source_dtype": p.source_dtype,
            "shape": None if p.shape is None else [d if isinstance(d, int) else None for d in p.shape],
            "channels_last": p.channels_last}


def quiet_tf() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")


# ----------------------------------------------------------------------------- running
def feed_arrays(artifact: TFArtifact, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Model-named feeds (in the source model's layout) → arrays in the artifact's dtypes
    (legalized inputs range-checked) and I/O layout (``io_channels_last`` moves axis 1 last)."""
    from translator.table.dtypes import numpy_dtype

    out = {}
    for p in artifact.inputs:
        if p.name not in inputs:
            raise OpbridgeError("bad_model", f"no value fed for input {p.name!r}")
        x = np.asarray(inputs[p.name])
        want = numpy_dtype(p.dtype)
        if x.dtype.kind in "OSU":
            x = np.asarray([str(s) for s in x.reshape(-1)], dtype=object).reshape(x.shape)
        elif x.dtype != want:
            if x.dtype.kind in "iu" and np.dtype(want).kind in "iu" and x.size:
                info = np.iinfo(want)
                if x.min() < info.min or x.max() > info.max:
                    raise Unsupported("cast", artifact.backend, "unsupported_dtype",
                                      f"input {p.name!r} ({x.dtype}) has values outside {p.dtype}'s range")
            x = x.astype(want)
        if p.channels_last and x.ndim >= 3:  # the harness feeds the source model's layout
            x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
        out[p.key] = x
    return out


def restore_outputs(artifact: TFArtifact, values: list[Any]) -> list[Any]:
    """Back to the source model's dtypes where the values allow it exactly (strings decoded)
    and layout, in the model's output order."""
    from translator.table.dtypes import numpy_dtype
    from translator.run.harness import exact_astype

    res = []
    for p, y in zip(artifact.outputs, values):
        y = np.asarray(y)
        if y.dtype.kind in "OS":
            y = np.asarray([s.decode("utf-8", "surrogateescape") if isinstance(s, bytes) else s
                            for s in y.reshape(-1)], dtype=object).reshape(y.shape)
        elif p.source_dtype is not None and p.source_dtype != p.dtype and p.source_dtype in tf_dtype_names():
            y = exact_astype(y, numpy_dtype(p.source_dtype))  # a documented legalization, never rounded here
        if p.channels_last and y.ndim >= 3:  # back to the source model's layout
            y = np.ascontiguousarray(np.moveaxis(y, -1, 1))
        res.append(y)
    return res


def run(artifact: TFArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    """Trace and run ``forward`` (in memory; no SavedModel); outputs in the model's order."""
    import tensorflow as tf

    mod = artifact.module()
    feeds = feed_arrays(artifact, inputs)
    args = [tf.constant(feeds[p.key], dtype=getattr(tf, tf_dtype_names()[p.dtype][3:])) for p in artifact.inputs]
    res = mod.forward(*args)
    return restore_outputs(artifact, [res[p.key].numpy() for p in artifact.outputs])


def runner(artifact: TFArtifact) -> Callable[[Mapping[str, Any]], list[Any]]:
    """``artifact`` run repeatedly: its ``forward`` frozen into a graph (the weights constants)
    run by a graph session in the calling thread (``RunOptions.inter_op_thread_pool = -1``).
    A ``tf.function`` call hands its ops to TensorFlow's inter-op threads and waits: about
    0.35 ms a call in TensorFlow 2.21 whatever the graph computes, which is most of a small
    model's time (a keyword spotter's four matmuls: 0.05 ms on onnxruntime); the session in
    the calling thread costs 0.06 ms. Intra-op threads are TensorFlow's configured ones. A
    graph the freezing cannot take (over 2 GB of constants) is called as ``run`` calls it."""
    import tensorflow as tf

    try:
        sess, fetch, feeds = _frozen_session(artifact)
    except Exception:  # noqa: BLE001 - the function call still runs it
        return lambda inputs: run(artifact, inputs)
    options = tf.compat.v1.RunOptions(inter_op_thread_pool=-1)
    call = sess.make_callable(fetch, feeds, accept_options=True)

    def go(inputs: Mapping[str, Any]) -> list[Any]:
        arrays = feed_arrays(artifact, inputs)
        return restore_outputs(artifact, call(*[arrays[p.key] for p in artifact.inputs], options=options))

    return go


def _unfrozen_matmul_weights(graph_def: Any) -> None:
    """Each matmul's constant operand read through a ``PlaceholderWithDefault`` (never fed):
    with a constant weight, the oneDNN fused matmul TensorFlow's remapper makes of MatMul +
    BiasAdd took 0.45 ms per call on a [1, 100] x [100, 400] step of an unrolled LSTM (40 of
    them: 18 ms of a 28 ms model), where with the weight as a ``tf.function`` reads it (a
    captured input) it takes 0.06 ms. Convolutions keep their constant filters (the oneDNN
    kernels cache them reordered)."""
    import tensorflow as tf

    nodes = {n.name: n for n in graph_def.node}
    held = []
    for n in graph_def.node:
        if n.op not in ("MatMul", "BatchMatMulV2", "BatchMatMulV3"):
            continue
        for i in (0, 1):
            src = n.input[i]
            while src in nodes and nodes[src].op == "Identity":
                src = nodes[src].input[0]
            if src in nodes and nodes[src].op == "Const":
                held.append((n, i, src))
    for n, i, src in held:
        p = tf.compat.v1.NodeDef(name=f"{n.name}/opbridge_weight_{i}", op="PlaceholderWithDefault", input=[src])
        p.attr["dtype"].CopyFrom(nodes[src].attr["dtype"])
        p.attr["shape"].shape.unknown_rank = True
        graph_def.node.append(p)
        n.input[i] = p.name


def _frozen_session(artifact: TFArtifact) -> tuple[Any, list[str], list[str]]:
    """(session, output tensor names in the model's order, input tensor names in
    ``artifact.inputs``' order) of the frozen ``forward``."""
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    quiet_tf()
    fn = artifact.module().forward.get_concrete_function()
    frozen = convert_variables_to_constants_v2(fn)
    flat = fn.structured_outputs  # forward's dict of outputs, flattened in frozen.outputs' order
    names = tf.nest.pack_sequence_as(flat, [t.name for t in frozen.outputs])
    graph_def = frozen.graph.as_graph_def()
    _unfrozen_matmul_weights(graph_def)
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name="")
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=tf.config.threading.get_intra_op_parallelism_threads(),
                                      inter_op_parallelism_threads=1)
    sess = tf.compat.v1.Session(graph=graph, config=config)
    return sess, [names[p.key] for p in artifact.outputs], [t.name for t in frozen.inputs]


# ----------------------------------------------------------------------------- saving
def weights_bytes(weights: Mapping[str, np.ndarray]) -> bytes:
    """An ``.npz`` with fixed timestamps: the same weights give the same bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as z:
        for k, arr in weights.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, np.asarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{k}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, b.getvalue())
    return buf.getvalue()


def write_sources(artifact: TFArtifact, folder: Path) -> None:
    """The standalone source, its weights and the conversion report (deterministic bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(artifact.source, encoding="utf-8")
    (folder / "weights.npz").write_bytes(weights_bytes(artifact.weights))
    (folder / "opbridge.json").write_text(json.dumps(artifact.report(), indent=1, sort_keys=True) + "\n",
                                          encoding="utf-8")


def save(artifact: TFArtifact, path: str | os.PathLike[str]) -> Path:
    """A SavedModel directory (signature ``serving_default`` = ``forward``), written to a
    temporary directory and renamed into place: nothing half-written on failure. The
    generated source, weights and report go to its ``assets.extra/``."""
    import tensorflow as tf

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        mod = artifact.module()
        tf.saved_model.save(mod, str(tmp), signatures={"serving_default": mod.forward})
        normalize_saved_model(tmp)
        write_sources(artifact, tmp / "assets.extra")
        old = out.with_name(f".{out.name}.{os.getpid()}.old")
        if out.exists():  # set aside, not deleted: a failed rename puts it back
            os.replace(out, old)
        try:
            os.replace(tmp, out)
        except BaseException:
            if old.exists():
                os.replace(old, out)
            raise
        if old.exists():
            shutil.rmtree(old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


_UID_NAME = re.compile(r"^(.*)_(\d+)$")


def normalize_saved_model(folder: Path) -> None:
    """Same module → same bytes. TensorFlow names every traced function after a process-wide
    counter (``__inference_forward_73``) and stamps ``fingerprint.pb`` with a random uuid:
    the functions are renumbered in creation order (``__inference_forward_0``, …) wherever
    a function name appears in ``saved_model.pb``, and the fingerprint is recomputed by
    TensorFlow with a uuid derived from the file's contents."""
    from tensorflow.core.protobuf import saved_model_pb2

    pb = folder / "saved_model.pb"
    sm = saved_model_pb2.SavedModel()
    sm.ParseFromString(pb.read_bytes())
    names: list[tuple[int, str]] = []
    for mg in sm.meta_graphs:
        for f in mg.graph_def.library.function:
            m = _UID_NAME.match(f.signature.name)
            if m:
                names.append((int(m.group(2)), f.signature.name))
    mapping = {old: f"{_UID_NAME.match(old).group(1)}_{k}" for k, (_, old) in enumerate(sorted(set(names)))}  # type: ignore[union-attr]
    kept = {f.signature.name for mg in sm.meta_graphs for f in mg.graph_def.library.function} - set(mapping)
    if mapping and len(set(mapping.values())) == len(mapping) and not set(mapping.values()) & kept:
        for mg in sm.meta_graphs:
            _rename_strings(mg, mapping)
            funcs = sorted(mg.graph_def.library.function, key=lambda f: f.signature.name)
            del mg.graph_def.library.function[:]
            mg.graph_def.library.function.extend(funcs)
    # captured tensors (the weights) are arguments named after another counter: renumbered too
    captured = [a.attr["_user_specified_name"] for mg in sm.meta_graphs for f in mg.graph_def.library.function
                for a in f.arg_attr.values()
                if "_user_specified_name" in a.attr and a.attr["_user_specified_name"].s.isdigit()]
    order = {n: str(k).encode() for k, n in enumerate(sorted({int(c.s) for c in captured}))}
    for c in captured:
        c.s = order[int(c.s)]
    pb.write_bytes(sm.SerializeToString(deterministic=True))
    _write_fingerprint(folder)


def _rename_strings(msg: Any, mapping: Mapping[str, str]) -> None:
    """Every string field and string map key of ``msg`` (recursively) found in ``mapping``
    is replaced (tensor contents are skipped: they hold data, not names)."""
    from google.protobuf.descriptor import FieldDescriptor as FD

    if msg.DESCRIPTOR.name == "TensorProto":
        return
    for fd, value in msg.ListFields():
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == FD.LABEL_REPEATED
        if fd.type == FD.TYPE_STRING:
            if repeated:
                for i, v in enumerate(value):
                    if v in mapping:
                        value[i] = mapping[v]
            elif value in mapping:
                setattr(msg, fd.name, mapping[value])
        elif fd.type == FD.TYPE_MESSAGE:
            entry = fd.message_type
            if entry.GetOptions().map_entry:
                key_fd, val_fd = entry.fields_by_name["key"], entry.fields_by_name["value"]
                items = list(value.items())
                if val_fd.type == FD.TYPE_MESSAGE:
                    for _, v in items:
                        _rename_strings(v, mapping)
                if key_fd.type == FD.TYPE_STRING and any(k in mapping for k, _ in items):
                    copies = []
                    for k, v in items:
                        if val_fd.type == FD.TYPE_MESSAGE:
                            c = type(v)()
                            c.CopyFrom(v)
                            v = c
                        copies.append((mapping.get(k, k), v))
                    value.clear()
                    for k, v in copies:
                        if val_fd.type == FD.TYPE_MESSAGE:
                            value[k].CopyFrom(v)
                        else:
                            value[k] = v
                elif val_fd.type == FD.TYPE_STRING:
                    for k, v in items:
                        if v in mapping:
                            value[k] = mapping[v]
            elif repeated:
                for v in value:
                    _rename_strings(v, mapping)
            else:
                _rename_strings(value, mapping)


def _write_fingerprint(folder: Path) -> None:
    """``fingerprint.pb`` as TensorFlow computes it, its uuid derived from ``saved_model.pb``
    (TensorFlow draws a random one); no fingerprint at all if TensorFlow cannot make one
    (loading does not need it)."""
    import hashlib

    from tensorflow.core.protobuf import fingerprint_pb2

    path = folder / "fingerprint.pb"
    try:
        from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting as fp_wrap

        fp = fingerprint_pb2.FingerprintDef()
        fp.ParseFromString(fp_wrap.CreateFingerprintDef(str(folder)))
    except Exception:  # noqa: BLE001 - an internal module of TensorFlow: without it, no fingerprint
        path.unlink(missing_ok=True)
        return
    digest = hashlib.sha256((folder / "saved_model.pb").read_bytes()).digest()
    fp.uuid = str(int.from_bytes(digest[:16], "big"))
    path.write_bytes(fp.SerializeToString(deterministic=True))


def load_saved(path: str | os.PathLike[str]) -> Any:
    """The saved ``serving_default`` signature (a callable taking the input keys)."""
    import tensorflow as tf

    quiet_tf()
    return tf.saved_model.load(str(path)).signatures["serving_default"]


def output_ports(artifact: TFArtifact) -> list[OutputPort]:
    """The outputs' model names, and the dtype a legalized output is returned in."""
    return [OutputPort(p.name, p.dtype if p.source_dtype and p.source_dtype != p.dtype else None)
            for p in artifact.outputs]


def load(path: str | os.PathLike[str], artifact: TFArtifact) -> TFArtifact:
    """The written SavedModel as TensorFlow loads it: ``artifact`` whose module is the loaded one."""
    import dataclasses

    import tensorflow as tf

    quiet_tf()
    return dataclasses.replace(artifact, _instance=tf.saved_model.load(str(path)))


def integer_kernels(path: Path) -> Any:
    """A SavedModel runs quantize/dequantize pairs as float ops (TensorFlow has no integer
    kernels for them on the CPU); what is integer is the storage: the share of the weight
    tensors (filters and matrices of 256 elements or more: variables and graph constants) the
    SavedModel keeps as int8/uint8, read from it."""
    import tensorflow as tf

    from translator.compile.target import KernelCount

    from tensorflow.core.protobuf import saved_model_pb2

    quiet_tf()
    kinds: list[Any] = []  # each weight's dtype (2+ dims above 1, 256+ elements): variables, then graph constants
    reader = tf.train.load_checkpoint(str(Path(path) / "variables" / "variables"))
    shapes, dtypes = reader.get_variable_to_shape_map(), reader.get_variable_to_dtype_map()
    kinds += [dtypes[k] for k, shp in shapes.items()
              if sum(d > 1 for d in shp) >= 2 and int(np.prod(shp)) >= 256 and dtypes[k].is_numeric]
    gd = saved_model_pb2.SavedModel.FromString((Path(path) / "saved_model.pb").read_bytes()).meta_graphs[0].graph_def
    # constants the module captured (the graph's own nodes) and those inside its functions
    for nd in [*gd.node, *(nd for fn in gd.library.function for nd in fn.node_def)]:
        if nd.op == "Const" and "value" in nd.attr:
            t = nd.attr["value"].tensor
            dims = [d.size for d in t.tensor_shape.dim]
            if sum(d > 1 for d in dims) >= 2 and int(np.prod(dims)) >= 256:
                kinds.append(tf.dtypes.as_dtype(t.dtype))
    n = sum(1 for d in kinds if d in (tf.int8, tf.uint8))
    return KernelCount(n, len(kinds), f"{n} of {len(kinds)} weight tensors stored as int8 (TensorFlow dequantizes "
                       "them in the graph and runs every kernel in float)", stored=True)
