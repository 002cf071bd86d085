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

#: onnxruntime's contrib LSTM over quantized weights (a ``com.microsoft.X`` cell), kept as the
#: model had it: onnxruntime quantizes X and the hidden state at run time
CONTRIB = ("dynamic_quantize_lstm",)

rule(*CONTRIB)(write_node)
