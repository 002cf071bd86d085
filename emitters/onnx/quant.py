"""Quantization ops.

ONNX writes each as one node of the op its ``onnx`` cell names (``codegen.write_node``, one
rule for all of them); the opset check is ``runtime.node_refusal``.
"""
from __future__ import annotations

from .codegen import write_node
from .registry import rule

OPS = (
    "conv_integer", "dequantize_linear", "dynamic_quantize_linear", "matmul_integer",
    "qlinear_conv", "qlinear_matmul", "quantize_linear",
)

rule(*OPS)(write_node)
