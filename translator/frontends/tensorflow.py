"""TensorFlow SavedModel / Keras ``.keras`` → IR.

The serving signature's concrete function (``serving_default``, else the only one; option
``signature=``) or, for a ``.keras``/``.h5`` file, a ``tf.function`` over the model's call is
frozen (variables become constants: ``convert_variables_to_constants_v2``; a SavedModel whose
objects TensorFlow cannot restore, such as a Keras 2 save with optimizer slots, is read through
its serving MetaGraph instead: ``_load_saved_model``) and its GraphDef is read node by node,
without Grappler:

* an unknown batch (first) dimension of an input stays unknown: the IR's symbolic ``batch``
  (handlers read TensorFlow's shapes with it as None: spatial dims, ranks, -1 in reshapes);
  a graph that cannot be read so (an op that needs the batch size) is read again with the
  batch fixed, and ``metadata["opbridge.fixed_batch"]`` says why. Other unknown dimensions
  are fixed from ``example_inputs`` or option ``dims`` (which fixes the batch too), and the
  GraphDef re-imported so TensorFlow's own shape inference types every tensor;
* constant subgraphs (weights reshaped by Keras, shape arithmetic over static shapes) are
  evaluated by TensorFlow itself, once;
* plumbing (``Identity``, ``NoOp``, ``Placeholder``) is skipped;
* every other node maps through the table's ``tensorflow`` column in reverse
  (``Tables.reverse_index("tensorflow")``: the cells' ``reads`` are raw graph op names) and
  a per-op handler (``tensorflow_ops.HANDLERS``) translates its attributes (NHWC into the
  IR's NCHW and back, SAME/VALID/EXPLICIT padding from static shapes, StridedSlice masks...).

A node whose op has no cell or no handler is never guessed: every unmapped op type is
collected and one ``unsupported_op`` line names the first such node.

Input names are the signature's argument names; outputs are the signature's structured
output names in sorted order (``run_source`` returns them in that order).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..table.errors import FrontendError, OpbridgeError
from ..ir.graph import Model
from ..table.loader import load_tables

NAME = "tensorflow"

from .tensorflow_graph import quiet_tf as _quiet_tf  # noqa: E402 - TF itself is imported inside it


def _runtime() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tensorflow-macos", "tf-nightly"):
        try:
            return f"TensorFlow {version(dist)}"
        except PackageNotFoundError:
            continue
    return "TensorFlow"


RUNTIME = _runtime()


# ---------------------------------------------------------------------------- contract
def matches(source: Any) -> bool:
    if not isinstance(source, (str, os.PathLike)):
        return False
    p = Path(source)
    s = str(source).lower()
    if s.endswith(".keras") or s.endswith(".h5"):
        return True
    return p.is_dir() and (p / "saved_model.pb").is_file()


class _Source:
    """The source opened in TensorFlow: the function to run and its names."""

    def __init__(self, source: Any, opts: dict[str, Any]) -> None:
        tf = _quiet_tf()
        self.path = str(source)
        p = Path(source)
        self.keras_model = None
        self.frozen: tuple[Any, list[str], list[str]] | None = None  # (GraphDef, input, output tensors)
        if not p.exists():
            raise FrontendError("bad_model", "file or folder not found", where=self.path)
        try:
            if p.is_dir():
                obj, from_meta_graph = _load_saved_model(tf, str(p))
                self._keep = obj
                sigs = dict(obj.signatures)
                want = opts.get("signature")
                if want:
                    if want not in sigs:
                        raise FrontendError("bad_option", f"signature {want!r} not found (has: {sorted(sigs)})",
                                            where=self.path)
                    fn = sigs[want]
                elif "serving_default" in sigs:
                    fn = sigs["serving_default"]
                elif len(sigs) == 1:
                    fn = next(iter(sigs.values()))
                else:
                    raise FrontendError("bad_model", f"no serving_default signature; pass signature= one of {sorted(sigs)}"
                                        if sigs else "the SavedModel has no signatures", where=self.path)
                specs = tf.nest.flatten(fn.structured_input_signature, expand_composites=True)
                self.input_names = [s.name for s in specs]
                self.fn = fn
                self.call = lambda feeds: fn(**feeds)
                if from_meta_graph:  # the variables live in the loader's resources: freeze from a session
                    key = want or ("serving_default" if "serving_default" in sigs else next(iter(sigs)))
                    self.frozen = _frozen_meta_graph(tf, str(p), key, self.input_names)
            else:
                import keras

                model = keras.models.load_model(str(p), compile=False, custom_objects=_keras2_layers(keras))
                self.keras_model = model
                specs = [tf.TensorSpec(tuple(t.shape), t.dtype, name=_keras_name(t, i)) for i, t in enumerate(model.inputs)]
                self.input_names = [s.name for s in specs]
                out_names = _keras_output_names(model)

                def call(*args: Any) -> dict[str, Any]:
                    outs = model(list(args) if len(args) > 1 else args[0], training=False)
                    outs = tf.nest.flatten(outs)
                    return dict(zip(out_names, outs))

                self.fn = tf.function(call, input_signature=specs).get_concrete_function()
                self.call = lambda feeds: self.fn(*[feeds[n] for n in self.input_names])
        except FrontendError:
            raise
        except Exception as exc:  # noqa: BLE001 - TensorFlow's own refusal, one line
            msg = " ".join(str(exc).split())[:300]
            raise FrontendError("bad_model", f"TensorFlow cannot load it: {type(exc).__name__}: {msg}",
                                where=self.path) from None
        outs = self.fn.structured_outputs
        if isinstance(outs, dict):
            self.output_names = sorted(outs)
        else:
            flat = tf.nest.flatten(outs)
            self.output_names = [f"output_{i}" for i in range(len(flat))]

    def run(self, feeds: dict[str, Any]) -> dict[str, np.ndarray]:
        tf = _quiet_tf()
        res = self.call({k: tf.constant(v) for k, v in feeds.items()})
        if isinstance(res, dict):
            return {k: np.asarray(v) for k, v in res.items()}
        return {f"output_{i}": np.asarray(v) for i, v in enumerate(tf.nest.flatten(res))}


def _load_saved_model(tf: Any, path: str) -> Any:
    """The SavedModel's objects (``tf.saved_model.load``), or, when its object graph cannot be
    restored, its serving MetaGraph as functions: a Keras 2 ``model.save`` with a compiled
    optimizer records the optimizer's slot variables, which TensorFlow restores through
    ``Optimizer.add_slot`` on an object that without Keras 2 (``tf_keras``) is a plain
    ``_UserObject`` ('no attribute add_slot'). The signatures need none of those objects: the
    MetaGraph's ``signature_def`` and its ``saver_def`` (which restores every variable by name
    from the same checkpoint) are read as TensorFlow reads a TF1 SavedModel (``load_v1_in_v2``).
    Returns (the loaded object, whether it came from the MetaGraph)."""
    try:
        return tf.saved_model.load(path), False
    except Exception as first:  # noqa: BLE001 - whatever the object graph's restore raised
        try:
            from tensorflow.python.saved_model import load_v1_in_v2
        except ImportError:
            raise first from None
        try:
            obj = load_v1_in_v2.load(path, tags=["serve"])
        except Exception:  # noqa: BLE001 - the MetaGraph cannot be read either: the first reason
            raise first from None
        if not dict(obj.signatures):
            raise first
        return obj, True


def _frozen_meta_graph(tf: Any, path: str, key: str, input_names: list[str]) -> tuple[Any, list[str], list[str]]:
    """Signature ``key`` of the SavedModel's serving MetaGraph frozen in a TF1 session (its
    ``saver_def`` restores the variables; ``convert_variables_to_constants_from_session_graph``
    makes them constants, inside the called functions too): (GraphDef, input tensors in
    ``input_names`` order, output tensors in sorted output-name order, as the frontend reads them)."""
    from tensorflow.python.framework import convert_to_constants as c2c

    g = tf.Graph()
    with g.as_default(), tf.compat.v1.Session(graph=g) as sess:
        meta = tf.compat.v1.saved_model.load(sess, ["serve"], path)
        sig = meta.signature_def[key]
        outs = [sig.outputs[k].name for k in sorted(sig.outputs)]
        gd = c2c.convert_variables_to_constants_from_session_graph(sess, g.as_graph_def(),
                                                                    sorted({t.split(":")[0] for t in outs}))
    return gd, [sig.inputs[n].name for n in input_names], outs


#: Keras 2 layer config keys that Keras 3 no longer takes, with the only value Keras 3 can honour
_KERAS2_DROPPED = {"time_major": False, "implementation": None}


def _keras2_layers(keras: Any) -> dict[str, Any]:
    """The recurrent layers of Keras 3 under their own names, taking the Keras 2 config keys an
    old ``.h5`` holds (``time_major``, ``implementation``): dropped when Keras 3 computes the
    same thing (``time_major=False``; ``implementation`` only picks a kernel), refused with the
    reason otherwise. Their dropout is 0: what the frontend reads is inference."""
    out: dict[str, Any] = {}
    for name in ("LSTM", "GRU", "SimpleRNN"):
        base = getattr(keras.layers, name, None)
        if base is None:
            continue

        def __init__(self: Any, *args: Any, __base: Any = base, __name: str = name, **kwargs: Any) -> None:
            for key, only in _KERAS2_DROPPED.items():
                if key in kwargs:
                    value = kwargs.pop(key)
                    if only is not None and value != only:
                        raise ValueError(f"{__name}({key}={value!r}) is a Keras 2 option Keras 3 cannot run")
            # inference only (training=False): dropout is the identity, but Keras 3's RNN cells still
            # draw the masks, and the draw writes a seed variable into the graph being frozen
            kwargs["dropout"] = kwargs["recurrent_dropout"] = 0.0
            __base.__init__(self, *args, **kwargs)

        out[name] = type(name, (base,), {"__init__": __init__, "__module__": base.__module__})
    return out


def _keras_name(t: Any, i: int) -> str:
    name = getattr(t, "name", None) or f"input_{i}"
    return name.split(":")[0]


def _keras_output_names(model: Any) -> list[str]:
    names = list(getattr(model, "output_names", None) or [])
    n = len(model.outputs)
    if len(names) != n or len(set(names)) != n:
        names = [f"output_{i}" for i in range(n)]
    return names


_OPEN: dict[tuple[str, int, str], _Source] = {}


def _open(source: Any, opts: dict[str, Any]) -> _Source:
    p = Path(source)
    stamp = (p / "saved_model.pb" if p.is_dir() else p).stat().st_mtime_ns if p.exists() else 0
    key = (str(p.resolve()), stamp, str(opts.get("signature") or ""))
    hit = _OPEN.get(key)
    if hit is None:
        hit = _OPEN[key] = _Source(source, opts)
    return hit


def load(source: Any, **opts: Any) -> Model:
    """The IR of a SavedModel folder or ``.keras`` file (``signature=``, ``dims=`` for unknown dimensions)."""
    from .tensorflow_graph import build

    src = _open(source, opts)
    try:
        return build(src, opts, load_tables())
    except FrontendError:
        raise
    except OpbridgeError as exc:
        raise FrontendError(exc.code, exc.detail, node=exc.node, op=exc.op, where=exc.where or src.path) from None


def run_source(source: Any, feeds: dict[str, Any], names: list[str], **opts: Any) -> list[Any]:
    """The signature run by TensorFlow on ``feeds`` (keyed by the signature's input names)."""
    from . import SourceUnavailable

    try:
        src = _open(source, opts)
        got = src.run({k: v for k, v in feeds.items() if k in src.input_names})
    except Exception as exc:  # noqa: BLE001
        raise SourceUnavailable(f"TensorFlow cannot run the source: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    missing = [n for n in names if n not in got]
    if missing:
        raise SourceUnavailable(f"the source has no outputs {missing}")
    return [got[n] for n in names]

