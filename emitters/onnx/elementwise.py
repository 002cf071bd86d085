"""Elementwise ops (arithmetic, comparison, logic, bitwise, trigonometry, casts, parameterless
activations).

ONNX writes each as one node of the op its ``onnx`` cell names (``codegen.write_node``, one
rule for all of them); the opset check is ``runtime.node_refusal``.
"""
from __future__ import annotations

from .codegen import write_node
from .registry import rule

OPS = (
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atanh", "bit_cast", "bit_shift_left",
    "bit_shift_right", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "cast",
    "cast_like", "ceil", "clip", "cos", "cosh", "det", "div", "equal", "erf", "exp", "floor",
    "floor_mod", "greater", "greater_equal", "hard_swish", "identity", "is_inf", "is_nan", "less",
    "less_equal", "log", "logical_and", "logical_not", "logical_or", "logical_xor", "max", "mean",
    "min", "mish", "mul", "neg", "pow", "reciprocal", "relu", "round", "sigmoid", "sign", "sin",
    "sinh", "softplus", "softsign", "sqrt", "sub", "sum", "tan", "tanh", "trunc_mod", "where",
)

rule(*OPS)(write_node)

#: onnxruntime's contrib form (a ``com.microsoft.X`` cell), kept as the model had it
CONTRIB = ("bias_residual_add",)

rule(*CONTRIB)(write_node)
