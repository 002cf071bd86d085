"""The OpenVINO backend: IR → a standalone builder script over ``openvino.opset16`` + weights,
and the OpenVINO IR (``model.xml``/``model.bin``) it builds.

``registry`` (the rule decorator), ``target`` (``TARGET``), ``codegen`` (lowered IR → the
artifact), ``runtime`` (save / load / run on the CPU plugin), and the rule families
``elementwise``, ``shape``, ``nn``, ``quant``, ``rnn``, ``control``, ``attention``, ``misc``
(imported here so their rules register). One-line ops are the ``snippet`` of their openvino
cell in ``optable.yaml``.
"""
from __future__ import annotations

from typing import Any

from translator.ir.graph import Model

from . import attention, control, elementwise, misc, nn, quant, rnn, shape  # noqa: F401 - rules register
from .codegen import RESERVED, Emission, Gen, ov_types
from .registry import NAME
from .runtime import (BOUNDARY, CPU_CONFIG, Artifact, build_from_source, compile_model, core, infer, load, npz_bytes,
                      ov_message, output_ports, run, runner, save)
from .target import TARGET


def emit(model: Model, **options: Any) -> Artifact:
    """IR → builder script + weights and the ``ov.Model`` it builds, through the one pipeline
    (``translator.compile.pipeline.compile``); ``model`` is not modified."""
    from translator.compile.pipeline import compile

    return compile(model, TARGET, **options).artifact


__all__ = ["NAME", "TARGET", "BOUNDARY", "RESERVED", "CPU_CONFIG", "Artifact", "Emission", "Gen", "build_from_source",
           "compile_model", "core", "emit", "infer", "load", "npz_bytes", "ov_message", "ov_types", "output_ports",
           "run", "runner", "save"]
