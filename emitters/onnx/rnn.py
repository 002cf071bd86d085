"""Recurrent ops.

ONNX writes each as one node of the op its ``onnx`` cell names (``codegen.write_node``, one
rule for all of them); the opset check is ``runtime.node_refusal``.
"""
from __future__ import annotations

from .codegen import write_node
from .registry import rule

OPS = (
    "gru", "lstm", "rnn",
)

rule(*OPS)(write_node)
