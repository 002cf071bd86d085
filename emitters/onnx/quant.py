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

#: onnxruntime's contrib quantized ops (``com.microsoft.X`` cells), kept as the model had them:
#: onnxruntime runs them as integer kernels
CONTRIB = (
    "matmul_integer_to_float", "qlinear_add", "qlinear_average_pool", "qlinear_concat",
    "qlinear_global_average_pool", "qlinear_leaky_relu", "qlinear_mul", "qlinear_sigmoid",
)

rule(*CONTRIB)(write_node)


def integer_plan(node, ctx) -> tuple[str, str]:
    """How onnxruntime will run compute node ``node`` of the planned graph (``report``)."""
    from translator.compile.quantized import quantized_operands

    if node.op in ("conv_integer", "matmul_integer", "matmul_integer_to_float", "qlinear_conv", "qlinear_matmul",
                   "qgemm"):
        return "integer", "an integer kernel of onnxruntime's own"
    q = quantized_operands(node)
    if q.activation is not None and q.weight is not None and q.output:
        return "integer", "a QDQ island (8-bit input, weight and output): onnxruntime fuses it into an integer kernel"
    if q.weight is not None:
        return "int8 weights", "float kernel: " + ("the output is not quantized" if q.activation is not None
                                                   else "the input is not quantized")
    return "float", "no 8-bit weight"
