"""Shape and data-movement ops, tensor creation, reductions and scans along axes.

ONNX writes each as one node of the op its ``onnx`` cell names (``codegen.write_node``, one
rule for all of them); the opset check is ``runtime.node_refusal``.
"""
from __future__ import annotations

from .codegen import write_node
from .registry import rule

OPS = (
    "arg_max", "arg_min", "compress", "concat", "constant", "constant_of_shape", "cum_prod",
    "cum_sum", "depth_to_space", "expand", "eye_like", "flatten", "gather", "gather_elements",
    "gather_nd", "non_zero", "one_hot", "pad", "range", "reduce_l1", "reduce_l2", "reduce_log_sum",
    "reduce_log_sum_exp", "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum",
    "reduce_sum_square", "reshape", "reverse_sequence", "scatter_elements", "scatter_nd", "shape",
    "size", "slice", "space_to_depth", "split", "squeeze", "tensor_scatter", "tile", "top_k",
    "transpose", "trilu", "unique", "unsqueeze",
)

rule(*OPS)(write_node)
