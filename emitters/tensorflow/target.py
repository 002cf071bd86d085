"""``TARGET``: the TensorFlow backend as the pipeline sees it.

The pipeline folds constants and static-shape subgraphs, legalizes dtypes to the
``tensorflow`` column of dtypes.yaml (reported), lowers against the tensorflow column (a
node is emitted by its rule or its cell's snippet unless ``accepts`` refuses it: a value that
is no tensor; or its rule's check does: the table's decomposition then takes over), and runs
the layout pass: convolution, pooling, resize, depth-to-space … run channels-last
(``helpers.channels_last``); a quantized convolution or matrix product is computed as integer
kernels compute it (``prepare``). ``--channels-last-io`` keeps rank ≥ 3 inputs and outputs
channels-last too (``io_channels_last``).
"""
from __future__ import annotations

from translator.compile.quantized import FLOAT_QUANTIZATION
from translator.compile.target import Option, Target, column_dtypes, dist_version, package_fields

from . import codegen, quant, runtime
from .helpers import accepts, channels_last
from .registry import NAME


def version() -> str:
    return dist_version("tensorflow", "tensorflow-cpu")


def prepare(model, ctx) -> None:  # noqa: ANN001 - the pipeline's Model and Compilation
    """Quantized convolutions and matrix products computed as the integer kernels compute
    them (``quantized.integer_domain``): the product of the integers, one float multiplier.
    A run-time activation quantization (onnxruntime's dynamic MatMul and DynamicQuantizeLSTM, a
    dynamic-range ``.tflite``'s hybrid kernels) is read as int8 weights and float activations
    (``quantized.dynamic_model_as_weight_only``): TensorFlow's matmul and LSTM cell instead of
    the exact emulation, which ``--float-quantization`` (and ``convert`` when the check
    fails) writes. A GELU an exporter spelled in elementwise pieces is ``tf.nn.gelu``
    (``recognize.gelu``)."""
    from translator.compile.pipeline import every_graph
    from translator.compile.lowering import decompose_now
    from translator.compile.passes import recognize
    from translator.compile.quantized import QOPERATOR_PRODUCTS, dynamic_model_as_weight_only, integer_domain

    dynamic_model_as_weight_only(model, ctx)
    for g in every_graph(model.graph):
        decompose_now(g, ctx, QOPERATOR_PRODUCTS)  # a QOperator model's products too (TensorFlow has no integer rules for them)
        integer_domain(g)
        recognize.gelu(g)  # one kernel where an exporter wrote five ops


CHANNELS_LAST_IO = Option("--channels-last-io", "io_channels_last",
                          "rank >= 3 inputs and outputs channels-last (NHWC); "
                          "the layout pass then needs no transposes at the boundary",
                          action="store_true", default=False)

TARGET = Target(
    name=NAME,
    title="TensorFlow",
    **package_fields(codegen, runtime),
    integer_plan=quant.integer_plan,
    suffix="_savedmodel",
    written="saved_model",
    legal_dtypes=column_dtypes(NAME),
    channels_last=channels_last,
    fold=True,
    accepts=accepts,
    prepare=prepare,
    options=(CHANNELS_LAST_IO, FLOAT_QUANTIZATION),
    version=version,
    doc="a SavedModel (signature serving_default) whose assets.extra/ holds the generated "
        "tf.Module source, its weights.npz and the conversion report",
)
