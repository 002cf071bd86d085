"""The TensorFlow backend: IR → a standalone ``tf.Module`` source + weights, saved as a SavedModel.

``registry`` (the rule decorator), ``target`` (``TARGET``), ``codegen`` (lowered IR → the
artifact: only code generation), ``runtime`` (the artifact; run in memory, save as a
SavedModel, load it back), ``helpers`` (checks and predicates the families share) and the
rule families ``elementwise``, ``shape``, ``nn``, ``quant``, ``rnn``, ``control``,
``attention``, ``misc``, ``resize`` (imported here so their rules register). One-line ops are the
``snippet`` of their tensorflow cell in ``optable.yaml``. TFLite (``emitters/tflite``)
converts this module.
"""
from __future__ import annotations

from typing import Any

from translator.ir.graph import Model

from . import attention, control, elementwise, misc, nn, quant, resize, rnn, shape  # noqa: F401 - rules register
from .codegen import RESERVED, Codegen, NodeCtx, generate
from .helpers import channels_last, tf_dtype_names
from .registry import NAME
from .runtime import (Port, TFArtifact, feed_arrays, load, load_saved, normalize_saved_model, output_ports, quiet_tf,
                      restore_outputs, run, save, weights_bytes, write_sources)
from .target import TARGET


def emit(model: Model, **options: Any) -> TFArtifact:
    """IR → TensorFlow artifact through the one pipeline (``translator.compile.pipeline.compile``);
    options: ``io_channels_last``. ``model`` is not modified."""
    from translator.compile.pipeline import compile

    return compile(model, TARGET, **options).artifact


__all__ = ["NAME", "TARGET", "Codegen", "NodeCtx", "Port", "RESERVED", "TFArtifact", "channels_last", "emit",
           "feed_arrays", "generate", "load", "load_saved", "normalize_saved_model", "output_ports", "quiet_tf",
           "restore_outputs", "run", "save", "tf_dtype_names", "weights_bytes", "write_sources"]
