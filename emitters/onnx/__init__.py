"""The ONNX target (``TARGET``): IR → ONNX ModelProto, run with onnxruntime.

``registry`` (name, rule binder) · ``target`` (``TARGET``: opset choice and per-node check)
· ``codegen`` (lowered IR → ModelProto) · ``runtime`` (onnxruntime: limits, kernels, run,
save, load) · the families (``elementwise``, ``shape``, ``nn``, ``quant``, ``rnn``,
``control``, ``attention``, ``misc``) register the rule of each op ONNX has natively.
"""
from __future__ import annotations

from typing import Any

from translator.ir.graph import Model

from . import attention, control, elementwise, misc, nn, quant, rnn, shape  # noqa: F401 - register the rules
from .codegen import FULL_CHECK_MAX_NODES
from .registry import NAME
from .runtime import OPSET_FLOOR, output_ports, run, runtime_kernels, runtime_limits, save
from .target import TARGET


def emit(model: Model, opset: int | None = None, ir_version: int | None = None, check: bool | str = True,
         tables: Any = None) -> Any:
    """IR → ``onnx.ModelProto`` through the pipeline (``translator.compile.pipeline.compile``); the
    caller's ``model`` is not modified. ``opset``: default the newest onnxruntime runs the
    model at; ``check``: see ``codegen.emit``."""
    from translator.compile.pipeline import compile

    return compile(model, TARGET, tables=tables, opset=opset, ir_version=ir_version, check=check).artifact


__all__ = ["TARGET", "NAME", "emit", "run", "save", "output_ports", "runtime_limits", "runtime_kernels",
           "FULL_CHECK_MAX_NODES", "OPSET_FLOOR"]
