"""The TFLite backend: the TensorFlow module (``emitters/tensorflow``) converted by TensorFlow's
own converter into a ``.tflite`` flatbuffer.

``registry`` (its name and rule decorator), ``target`` (``TARGET``: the tflite column's
dtypes and cells, then the TensorFlow code), ``codegen`` (lowered IR → converted artifact;
converter rejections go back to the pipeline), ``control`` (its own Loop rule), ``segments`` (very large graphs converted in
parts and joined), ``runtime`` (``tf.lite.Interpreter``; save / load the flatbuffer).
"""
from __future__ import annotations

from typing import Any

from emitters.tensorflow.runtime import TFArtifact
from translator.ir.graph import Model

from . import control, quant  # noqa: F401 - rules register
from .codegen import IO_NAMES_METADATA, SOURCE_NAME, convert, convert_model, with_io_names
from .registry import NAME
from .runtime import load, output_ports, quiet_stderr, run, runner, save
from .target import TARGET, legal_dtypes


def emit(model: Model, **options: Any) -> TFArtifact:
    """IR → a TFArtifact whose ``tflite`` holds the flatbuffer, through the one pipeline
    (``translator.compile.pipeline.compile``); options: ``io_channels_last``, ``allow_select_tf_ops``.
    ``model`` is not modified."""
    from translator.compile.pipeline import compile

    return compile(model, TARGET, **options).artifact


__all__ = ["IO_NAMES_METADATA", "NAME", "SOURCE_NAME", "TARGET", "TFArtifact", "convert", "convert_model", "emit",
           "legal_dtypes", "load", "output_ports", "quiet_stderr", "run", "runner", "save", "with_io_names"]
