"""Neural-network ops: matmul and convolution, pooling, normalization, activations with
parameters, resize and imaging, losses.

ONNX writes each as one node of the op its ``onnx`` cell names (``codegen.write_node``, one
rule for all of them); the opset check is ``runtime.node_refusal``.
"""
from __future__ import annotations

from .codegen import write_node
from .registry import rule

OPS = (
    "affine_grid", "average_pool", "batch_normalization", "causal_conv_with_state", "celu",
    "center_crop_pad", "col2im", "conv", "conv_transpose", "deform_conv", "dropout", "einsum",
    "elu", "gelu", "gemm", "global_average_pool", "global_lp_pool", "global_max_pool",
    "grid_sample", "group_normalization", "hard_sigmoid", "hardmax", "instance_normalization",
    "layer_normalization", "leaky_relu", "log_softmax", "lp_normalization", "lp_pool", "lrn",
    "matmul", "max_pool", "max_roi_pool", "max_unpool", "mean_variance_normalization",
    "negative_log_likelihood_loss", "non_max_suppression", "prelu", "resize", "rms_normalization",
    "roi_align", "selu", "shrink", "softmax", "softmax_cross_entropy_loss", "swish",
    "thresholded_relu", "upsample",
)

rule(*OPS)(write_node)

#: onnxruntime's contrib forms (``com.microsoft.X`` cells): the IR has them only from a model
#: that already uses them, so the ONNX written back keeps them (onnxruntime's fused kernels)
CONTRIB = (
    "bias_gelu", "conv_relu", "conv_sigmoid", "conv_tanh", "gelu_tanh", "quick_gelu", "scaled_matmul",
    "skip_layer_normalization", "skip_rms_normalization",
)

rule(*CONTRIB)(write_node)


@rule("conv_clip", "conv_hard_sigmoid", "conv_leaky_relu")
def fused_conv_with_params(em, n):
    """FusedConv whose activation has parameters: the IR op's own attributes (those a ``conv``
    does not have, in the op's signature order: Clip's min, max) are FusedConv's
    ``activation_params``, as the frontend read them."""
    own = em.tables.ops[n.op].signature.beyond(em.tables.ops["conv"].signature)
    names = {a.name for a in own}
    attrs = {k: v for k, v in n.attrs.items() if k not in names}
    attrs["activation_params"] = [float(n.attrs.get(a.name, a.default)) for a in own]
    return write_node(em, n, attrs)
