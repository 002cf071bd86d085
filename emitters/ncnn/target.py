"""The ncnn target (``--to ncnn``): what the pipeline needs to know.

* dtypes: an ncnn blob holds float32 (fp16 and bf16 are storage options of ncnn's runtime,
  not blob types): float16, bfloat16 and float64 values become float32 (legalized and
  reported); bool values are 0/1 float masks. Every other dtype stays, so that a node whose
  blob would hold one is refused with its name; integer constants are read into layer
  parameters (shapes, axes, pads) and never become blobs.
* ``accepts``: the node's layers (its rule in ``nn.py`` / ``shape.py`` or the ``ncnn`` cell's
  snippet) are written and run in ncnn, checked against the reference where small
  (``codegen.trial``). The cells' ``dtypes`` and ``rank`` describe ncnn's blobs (float32, 1
  to 4 dims); the writer maps IR values onto them itself (``cell_limits=False``): integers
  as float32 values, a scalar as a one-element blob, a batch of 1 dropped.
* static shapes: ncnn's layer parameters are written for the model's shapes, so symbolic
  input dims are fixed first (``--fix-dim``).
* the artifact: a folder ``<stem>_ncnn`` with ``model.param``, ``model.bin`` and
  ``model.io.json``; ``--fp16-storage`` writes the tagged weights (kernels, not biases) in
  float16, as pnnx writes them by default.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from translator.compile.target import Option, Target, package_fields

from . import codegen, runtime
from .registry import NAME

if TYPE_CHECKING:
    from translator.compile.pipeline import Compilation
    from translator.ir.graph import Model, Node, Value
    from translator.table.loader import Tables

#: widened or narrowed to float32 by the shared pass (reported)
AS_FLOAT32 = ("float16", "bfloat16", "float64")


def legal_dtypes(tables: "Tables") -> frozenset[str]:
    return frozenset(d for d in tables.dtypes if d not in AS_FLOAT32)


def prepare(model: "Model", ctx: "Compilation") -> None:
    """ncnn runs a quantized model in float32 (``integer_plan``): onnxruntime's dynamic
    quantization (``DynamicQuantizeLinear → MatMulInteger``, ``DynamicQuantizeLSTM``) is read as
    int8 weights and float activations (``quantized.dynamic_model_as_weight_only``: the check
    holds it to twice the source's own activation rounding); then a ``dequantize_linear`` of
    constants (an int8 weight and its scales) becomes its float32 values, and what reads it
    folds in turn (a convolution gets constant weights, as ncnn's layers store them). An ``if``
    on a run-time condition is both branches and a ``where`` (``control.ifs_as_where``). A hard
    swish written in elementwise pieces is one ``hard_swish`` (``recognize.hard_swish``), a layer norm
    one ``layer_normalization`` (``recognize.layer_norm``: ncnn's ``LayerNorm``)."""
    import numpy as np

    from translator import reference
    from translator.compile.passes import recognize
    from translator.compile.passes.control import ifs_as_where
    from translator.compile.pipeline import fold
    from translator.compile.quantized import dynamic_model_as_weight_only
    from translator.ir.infer import infer

    dynamic_model_as_weight_only(model, ctx)
    g = model.graph
    changed = False
    if ifs_as_where(g):  # ncnn's network has no subgraphs: both branches and a where
        infer(g, ctx.tables)
    for node in list(g.nodes):
        if node.op != "dequantize_linear" or not all(v is None or v.is_const for v in node.inputs):
            continue
        (y,) = reference.get(node.op)(*[None if v is None else v.const for v in node.inputs], **node.attrs),
        out = node.outputs[0]
        g.replace_node(node, [g.add_constant(out.name, np.asarray(y), str(out.type.dtype))])
        changed = True
    if changed:
        fold(g)
    recognize.hard_swish(g)  # one HardSwish layer where an exporter wrote four
    recognize.layer_norm(g)  # one LayerNorm layer where it wrote nine
    nan_selects = [n.name for n in g.nodes if n.op == "where" and _tests_nan(n.inputs[0])]
    if nan_selects:
        ctx.warn(f"{len(nan_selects)} where node(s) select NaN values away (first: {nan_selects[0]!r}); ncnn's select "
                 "is arithmetic (x*c + y*(1-c)) and NaN*0 is NaN, so a NaN (a fully masked attention row) stays NaN")


def _tests_nan(v: Value | None) -> bool:
    """Whether ``v`` is an ``is_nan`` test (through ``not`` and casts)."""
    while v is not None and v.producer is not None and v.producer.op in ("not", "cast"):
        v = v.producer.inputs[0]
    return v is not None and v.producer is not None and v.producer.op == "is_nan"


def integer_plan(node: "Node", ctx: "Compilation") -> tuple[str, str]:
    return "float", "ncnn's int8 layers need its own calibration tables (ncnn2table); this writer keeps float32"


TARGET = Target(
    name=NAME, title="ncnn", **package_fields(codegen, runtime), suffix="_ncnn", written="model",
    legal_dtypes=legal_dtypes, fold=True, dynamic_dims=False, prepare=prepare, accepts=codegen.accepts,
    cell_limits=False,
    integer_plan=integer_plan,
    options=(Option("--fp16-storage", "fp16_storage",
                    "ncnn: store convolution, inner-product and recurrent weights in float16 in model.bin (half "
                    "the size; ncnn widens them as it loads; the check allows what rounding them moves the "
                    "outputs)", action="store_true", default=False),),
    doc="an ncnn network (model.param, model.bin; blob names and shapes in model.io.json), run by the ncnn package",
)
