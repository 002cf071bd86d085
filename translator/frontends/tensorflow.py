"""TensorFlow SavedModel / Keras ``.keras`` → IR.

The serving signature's concrete function (``serving_default``, else the only one; option
``signature=``) or, for a ``.keras`` file, a ``tf.function`` over the model's call is frozen
(variables become constants: ``convert_variables_to_constants_v2``) and its GraphDef is
read node by node, without Grappler:

* unknown dimensions of the inputs (the batch) are fixed (option ``dims``, default 1) and
  the GraphDef re-imported so TensorFlow's own shape inference types every tensor;
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
        if not p.exists():
            raise FrontendError("bad_model", "file or folder not found", where=self.path)
        try:
            if p.is_dir():
                obj = tf.saved_model.load(str(p))
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
            else:
                import keras

                model = keras.models.load_model(str(p), compile=False)
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

