"""Frontends: a model in any supported form → the IR.

Every frontend is a module of this package with the same names (as every backend package
has the same rooms):

* ``NAME``: the source format (``onnx``, ``tflite``, ``tensorflow``, ``pytorch``), also
  the table column whose cells the frontend reads in reverse (``tables.reverse_index``);
* ``RUNTIME``: the source framework's own runtime, which ``--check`` compares against;
* ``matches(source) -> bool``: whether ``source`` (a path string, or an in-memory object
  from the Python API) is this frontend's; cheap, never imports a framework;
* ``load(source, **opts) -> Model``: the validated IR, or a ``FrontendError`` with one
  line naming the file, node and reason (every unmapped node is reported, not guessed);
* ``run_source(source, feeds, names, **opts) -> list``: the source model run by
  ``RUNTIME`` on ``feeds`` (keyed by the IR's input names), the outputs ``names`` (the
  IR's output names) in that order; raises ``SourceUnavailable(why)`` when it cannot run.

Heavy frameworks are imported inside ``load``/``run_source`` only.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..table.errors import FrontendError

#: in detection order (the first whose ``matches`` accepts the source reads it)
FRONTENDS = ("onnx", "tflite", "tensorflow", "pytorch")


class SourceUnavailable(Exception):
    """The source model cannot be run by its own runtime here (not installed, or it refuses)."""


def get(name: str) -> ModuleType:
    if name not in FRONTENDS:
        raise FrontendError("bad_model", f"unknown source format {name!r} (known: {', '.join(FRONTENDS)})")
    return importlib.import_module(f"{__name__}.{name}")


def detect(source: Any) -> ModuleType:
    """The frontend that reads ``source``, or a one-line ``bad_model`` error saying what is read."""
    for name in FRONTENDS:
        mod = get(name)
        if mod.matches(source):
            return mod
    shown = source if isinstance(source, str) else type(source).__name__
    raise FrontendError("bad_model", "not a model opbridge reads (ONNX .onnx, TFLite .tflite, a TensorFlow "
                        "SavedModel folder or .keras file, or a PyTorch 'pkg.module:factory' / nn.Module)",
                        where=str(shown))


def load(source: Any, **opts: Any) -> Any:
    """The IR of ``source`` through the frontend that reads it."""
    return detect(source).load(source, **opts)


def run_source(model: Any, source: Any, feeds: dict[str, Any], names: list[str], **opts: Any) -> list[Any]:
    """``source`` run by its own framework (``model`` is its IR: its ``source_format`` names the frontend)."""
    if (model.metadata or {}).get("opbridge.ort_sequential"):
        opts = {**opts, "sequential": True}
    return get(model.source_format).run_source(source, feeds, names, **opts)
