"""``TARGET``: the TFLite backend as the pipeline sees it.

The same passes as TensorFlow (fold, legalize, lower, layout), against the ``tflite`` column:
its dtypes are the tflite column of dtypes.yaml (builtins compute in int32, float32, bool and
string; int64 → int32 with a range check, float64 / float16 / bfloat16 → float32, narrow
integers → int32 and wrapped back on output: every change reported), its code is the
``tflite`` cells' snippets, then the TensorFlow rules and snippets (``code_columns``).
``prepare`` refuses a ``bit_cast`` whose dtypes TFLite would legalize to another width (the
reinterpreted bits cannot survive it). ``emit`` converts; the converter's rejections come
back as ``translator.compile.pipeline.Rejected`` and the pipeline decomposes those nodes.
"""
from __future__ import annotations

from typing import Any

import dataclasses

from emitters.tensorflow import target as tensorflow
from translator.table.errors import Unsupported
from translator.compile.quantized import FLOAT_QUANTIZATION
from translator.compile.target import Option, column_dtypes, package_fields

from . import codegen, quant, runtime, same_scale
from .registry import NAME


#: the dtypes TFLite builtins compute in: the tflite column of dtypes.yaml
legal_dtypes = column_dtypes(NAME)


def prepare(model: Any, ctx: Any) -> None:
    """Before legalization: reinterpreting bits cannot survive a width change. onnxruntime's
    dynamic quantization of a MatMul becomes the matmul of an int8 weight, its
    DynamicQuantizeLSTM an LSTM over int8 weights (``quantized.dynamic_model_as_weight_only``):
    the converter writes them as hybrid kernels, which quantize the activation at run time
    (LiteRT's dynamic-range quantization). A GELU an exporter spelled in elementwise pieces is
    TFLite's GELU, which XNNPACK runs (``recognize.gelu``; the pieces' erf was a polynomial
    with a SIGN the delegate leaves to the builtin kernels)."""
    from translator.compile.passes import recognize
    from translator.compile.quantized import constants_on_output_grid, dynamic_model_as_weight_only, weight_only_model

    from .quant import quantized_interface
    from .segments import SEGMENT_NODES
    from translator.compile.pipeline import every_graph

    for g in every_graph(model.graph):
        recognize.gelu(g)
    if not ctx.options.get("float_quantization"):
        for g in every_graph(model.graph):
            constants_on_output_grid(g)
        dynamic_model_as_weight_only(model, ctx)
        weight_only_model(model.graph)  # a dynamic-range .tflite's int8 weights: hybrid kernels again
        if not any(True for n in model.graph.nodes for _ in n.subgraphs()) \
                and len(model.graph.nodes) <= SEGMENT_NODES:  # (a model converted in segments keeps a float interface)
            for side, dt in quantized_interface(model).items():
                ctx.warn(f"tflite: the {side} stay {dt} (the source's quantization); the converter is told so")
    legal = ctx.legal
    for node in model.graph.walk():
        if node.op != "bit_cast":
            continue
        for v in list(node.inputs) + list(node.outputs):
            if v is not None and v.type.dtype is not None and v.type.dtype not in legal:
                raise Unsupported(node.op, NAME, "unsupported_dtype",
                                  f"bit_cast of {v.type.dtype}, which TFLite legalizes to another width", node.name)


ALLOW_SELECT_TF_OPS = Option("--allow-select-tf-ops", "allow_select_tf_ops",
                             "let the converter keep TensorFlow ops it has no builtin for "
                             "(the Flex delegate must then be linked to run the model)",
                             action="store_true", default=False)

def _islands(text: str) -> str:
    if text not in ("auto", "on", "off"):
        raise ValueError(f"--xnnpack-islands takes auto, on or off, not {text!r}")
    return text


XNNPACK_ISLANDS = Option("--xnnpack-islands", "xnnpack_islands",
                         "8-bit ops XNNPACK has no quantized kernel for (an int8 HARD_SWISH) run in float "
                         "between a DEQUANTIZE and a QUANTIZE it takes, so the delegate runs the whole graph "
                         "(emitters/tflite/delegable.py); auto: on, except for a .tflite source, whose own int8 "
                         "kernels stay (exact against LiteRT)", type=_islands, default="auto",
                         metavar="{auto,on,off}")


def flex_ops(ctx: Any) -> frozenset[str]:
    """With ``--allow-select-tf-ops``, the ops TensorFlow emits natively that TFLite has no
    builtin for are kept as TensorFlow ops (LiteRT's Flex delegate runs them) instead of being
    refused or decomposed."""
    if not ctx.options.get("allow_select_tf_ops"):
        return frozenset()
    from translator.compile.registry import supported

    return supported(tensorflow.TARGET, ctx.tables)


#: TensorFlow's target (its layout, folding and node check: the same generated module), converted
TARGET = dataclasses.replace(
    tensorflow.TARGET, name=NAME, title="TensorFlow Lite", **package_fields(codegen, runtime), integer_plan=quant.integer_plan,
    suffix=".tflite", written="model.tflite", legal_dtypes=legal_dtypes, code_columns=(NAME, "tensorflow"),
    prepare=prepare, options=(tensorflow.CHANNELS_LAST_IO, ALLOW_SELECT_TF_OPS, FLOAT_QUANTIZATION, XNNPACK_ISLANDS),
    extra={**tensorflow.TARGET.extra, "also_supports": flex_ops, "name_scope": same_scale.marked,
           "unequal_depthwise_strides": True,  # DEPTHWISE_CONV_2D's stride_h and stride_w
           # report's remedies: an option that, re-planned, converts refused nodes
           "remedies": (("--allow-select-tf-ops", {"allow_select_tf_ops": True},
                         "keeps them as TensorFlow ops (LiteRT's Flex delegate runs them)"),)},
    doc="a .tflite flatbuffer (builtin ops; select TF ops only with --allow-select-tf-ops), "
        "converted from the generated TensorFlow module",
)
