"""The ONNX target: the graph re-emitted as ONNX at an opset onnxruntime runs.

* ``configure``: the opset for this model, unless ``--opset`` chose one: the newest, down to
  ``runtime.OPSET_FLOOR``, at which the schema takes every node and onnxruntime has a CPU
  kernel for it (``runtime.choose_opset``), stored in ``ctx.options["opset"]``.
* ``accepts``: the same per-node check at that opset (``runtime.node_refusal``); a node no
  opset covers is then decomposed by the table, or refused with the kernel or type named.
* ``prepare``: layout ops between per-tensor QDQ pairs (``quantized.adjacent_qdq``) and int8
  activations as uint8 (``quantized.uint8_activations``): the form onnxruntime's QDQ fusion
  finds on x86; a scale before the transpose that feeds a MatMul (``fusable``), where
  onnxruntime folds it into the MatMul; a dynamic-range ``.tflite``'s hybrid layers as
  onnxruntime's dynamic quantization (``quantized.hybrid_as_dynamic_integer``: integer kernels,
  unless ``--float-quantization`` asks for LiteRT's rounding spelled out in float ops).
* ``fold=False``: the graph is written as it is (constant subgraphs stay ONNX nodes), and
  every dtype is legal (no legalization).
"""
from __future__ import annotations

from typing import Any

from translator.compile.quantized import FLOAT_QUANTIZATION
from translator.compile.registry import Refusal, supported
from translator.compile.target import Option, Target, package_fields

from . import codegen, quant, runtime
from .registry import NAME


def configure(model: Any, ctx: Any) -> None:
    if ctx.options.get("opset"):
        ctx.options["opset"] = int(ctx.options["opset"])
        return
    ctx.options["opset"] = runtime.choose_opset(model.graph, ctx.tables, supported(ctx.target, ctx.tables),
                                                runtime.top_opset())


def prepare(model: Any, ctx: Any) -> None:
    """The QDQ form onnxruntime fuses into integer kernels and loads with its default
    optimizations: layout ops between Q/DQ pairs (``quantized.adjacent_qdq``), int8 activations
    as uint8 (``quantized.uint8_activations``); scales next to the MatMuls they feed
    (``fusable.scales_before_matmuls``)."""
    from translator.compile import quantized
    from translator.compile.pipeline import every_graph

    from .fusable import scales_before_matmuls

    dynamic = 0
    for g in every_graph(model.graph):
        if not ctx.options.get("float_quantization"):
            dynamic += quantized.hybrid_as_dynamic_integer(g)
        quantized.adjacent_qdq(g)
        quantized.uint8_activations(g)
        scales_before_matmuls(g)
    if dynamic:  # the artifact's dynamic_range feature: convert writes the exact emulation if the check fails
        model.metadata = {**(model.metadata or {}), quantized.DYNAMIC_AS_WEIGHT_ONLY: str(dynamic)}


def accepts(node: Any, ctx: Any) -> Refusal | None:
    op = ctx.tables.ops.get(node.op)
    cell = op.backends.get(NAME) if op is not None else None
    return runtime.node_refusal(node, cell, ctx.options["opset"])


TARGET = Target(
    name=NAME, title="ONNX (onnxruntime)", **package_fields(codegen, runtime), suffix=".onnx",
    written="model.onnx", fold=False, accepts=accepts, configure=configure, prepare=prepare, integer_plan=quant.integer_plan,
    options=(Option("--opset", "opset", "ONNX opset to write (default: the newest onnxruntime runs the model at)",
                    type=int, metavar="N"), FLOAT_QUANTIZATION),
    doc="ONNX re-emitted at the newest opset onnxruntime has CPU kernels for; run with onnxruntime",
)
