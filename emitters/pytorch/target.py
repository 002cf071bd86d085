"""The PyTorch target: what the one pipeline needs to know about this backend.

* dtypes: uint16 / uint32 are legalized to int32 / int64 by the pipeline (reported; the
  module wraps such outputs back into their declared range and the runner returns them in
  the declared dtype when every value fits).
* ``accepts``: torch holds every value a node reads or writes (the native cells of the
  ``pytorch`` column of ``dtypes.yaml``), element types of sequences and optionals included;
  uint64 (no lossless substitute), float8 and strings are refused node by node. Then the
  node's rule is tried on it (``codegen.trial``): what it would refuse while writing code is
  a refusal while lowering, so the table's decomposition applies and ``report`` agrees.
* the artifact: a folder ``<stem>_pytorch`` with ``model.py`` and ``weights.safetensors``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from translator.compile.registry import Refusal
from translator.compile.quantized import FLOAT_QUANTIZATION
from translator.compile.target import Option, Target, package_fields

from . import codegen, quant, runtime
from .codegen import torch_dtypes, trial
from .registry import NAME

if TYPE_CHECKING:
    from translator.ir.graph import Model, Node
    from translator.compile.pipeline import Compilation
    from translator.table.loader import Tables

#: dtypes torch stores but hardly computes in: the pipeline widens them (lossless, reported)
WIDENED = {"uint16": "int32", "uint32": "int64"}


def legal_dtypes(tables: "Tables") -> frozenset[str]:
    """Every dtype but the widened ones: those without a lossless torch substitute (uint64,
    float8, string, ...) stay as they are, so ``accepts`` refuses each node that touches one
    and names its op (the table's decomposition is tried first)."""
    return frozenset(tables.dtypes) - frozenset(WIDENED)


def accepts(node: "Node", ctx: "Compilation") -> Refusal | None:
    """Every tensor the node reads or writes (element types included) has a torch dtype, and
    its rule can write it (``codegen.trial``)."""
    legal = torch_dtypes(ctx.tables)
    for v in list(node.inputs) + list(node.outputs):
        if v is None:
            continue
        t = v.type.elem if v.type.kind != "tensor" and v.type.elem is not None else v.type
        if t.dtype is not None and t.dtype not in legal:
            return Refusal("unsupported_dtype", f"torch has no {t.dtype} tensors (value {v.name!r})")
    return trial(node, ctx)


def prepare(model: "Model", ctx: "Compilation") -> None:
    """Quantized convolutions and matrix products computed as the integer kernels compute
    them (``quantized.integer_domain``): the product of the integers, one float multiplier.
    Their products of 8-bit activations with int8 matrices, and onnxruntime's dynamically
    quantized MatMul (``MatMulInteger``), are ``torch._int_mm`` (``quantized.integer_matmuls``,
    the ``matmul_integer`` rule). Other run-time activation quantizations (a ``ConvInteger``,
    DynamicQuantizeLSTM, a dynamic-range ``.tflite``'s hybrid kernels) are read as int8
    weights dequantized once at load and float activations
    (``quantized.dynamic_model_as_weight_only``): torch's own convolution and LSTM kernels
    instead of the exact emulation, which ``--float-quantization`` (and ``convert`` when the
    check fails) writes. A hard swish or a GELU an exporter spelled in elementwise
    pieces is ``F.hardswish`` / ``F.gelu``, and a layer norm in pieces ``F.layer_norm`` (``recognize``)."""
    from translator.compile.pipeline import every_graph
    from translator.compile.lowering import decompose_now
    from translator.compile.passes import recognize
    from translator.compile.quantized import QOPERATOR_PRODUCTS, dynamic_model_as_weight_only, integer_domain, integer_matmuls, rounded_in_float

    dynamic_model_as_weight_only(model, ctx, products=("conv_integer",))  # MatMulInteger: torch._int_mm
    for g in every_graph(model.graph):
        decompose_now(g, ctx, QOPERATOR_PRODUCTS)  # a QOperator model's products in the same form
        integer_domain(g)
        rounded_in_float(g)  # the 8-bit round trips of activations as float32 grid values
        integer_matmuls(g)  # their products with int8 matrices as torch._int_mm
        recognize.hard_swish(g)  # F.hardswish, one kernel where an exporter wrote four ops
        recognize.gelu(g)  # F.gelu, where it wrote five
        recognize.layer_norm(g)  # F.layer_norm, where it wrote nine


CONTIGUOUS = Option("--contiguous", "contiguous",
                    "keep the 2-D convolution filters (and so the activations) in torch's default "
                    "contiguous NCHW layout where the module would hold them channels-last (convert "
                    "falls back to it when the channels-last module fails the check)",
                    action="store_true", default=False)


def spell(name: str) -> str:
    """How generated code writes the torch function a cell names (``F`` is torch.nn.functional,
    ``torch.Tensor.view`` is the method ``.view``)."""
    if name.startswith("torch.nn.functional."):
        return "F." + name[len("torch.nn.functional."):] + "("
    if name.startswith("torch.Tensor."):
        return "." + name[len("torch.Tensor."):] + "("
    return name + "("


TARGET = Target(
    name=NAME, title="PyTorch", **package_fields(codegen, runtime), suffix="_pytorch", written="model",
    integer_plan=quant.integer_plan,
    legal_dtypes=legal_dtypes, fold=True, accepts=accepts, prepare=prepare, options=(FLOAT_QUANTIZATION, CONTIGUOUS),
    extra={"spell": spell},
    doc="a standalone torch.nn.Module (model.py) and its weights (weights.safetensors)",
)
