"""``TARGET``: the OpenVINO backend as the pipeline sees it.

The pipeline folds constants (static-shape arithmetic becomes constants the CPU plugin
needs), then lowers against the openvino column: a node is emitted by its rule or snippet
unless ``accepts`` refuses it (a value that is no tensor, or an element type OpenVINO
lacks) or its rule's check does (the table's decomposition then takes over where it
applies). No dtype legalization: OpenVINO has every element type of the IR but string;
int4/uint4 model inputs and outputs cross the boundary as int8/uint8 (``runtime.BOUNDARY``,
documented by ``output_ports``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from translator.compile.quantized import FLOAT_QUANTIZATION
from translator.compile.registry import Refusal
from translator.compile.target import Option, Target, package_fields

from . import codegen, quant, runtime
from .registry import NAME

#: the integer LSTM's opt-out (``rnn.py``; ``convert`` falls back to it when the check fails)
FLOAT_RECURRENCE = Option("--float-recurrence", "float_recurrence",
                          "an LSTM over int8 weights whose input the graph bounds in float (its weights "
                          "dequantized) instead of the CPU plugin's integer LSTM (convert falls back to it "
                          "when the integer one fails the check)", action="store_true", default=False)

if TYPE_CHECKING:
    from translator.ir.graph import Node
    from translator.compile.target import Compilation


def accepts(node: "Node", ctx: "Compilation") -> Refusal | None:
    """Every value the node reads or writes is a tensor of an element type OpenVINO has."""
    types = codegen.ov_types()
    for v in list(node.inputs) + list(node.outputs):
        if v is None:
            continue
        if v.type.kind != "tensor":
            return Refusal("unsupported_dtype", f"OpenVINO has no {v.type.kind} values ({v.name!r})")
        if v.type.dtype is not None and v.type.dtype not in types:
            return Refusal("unsupported_dtype", f"OpenVINO has no element type for {v.type.dtype} ({v.name!r})")
    return None


def spell(name: str) -> str:
    """A cell's function name as the builder script calls it: ``opset16.relu`` → ``ops.relu``."""
    module, _, fn = name.partition(".")
    return f"{'ops17' if module == 'opset17' else 'ops'}.{fn}"


TARGET = Target(
    name=NAME, title="OpenVINO", **package_fields(codegen, runtime), suffix="_openvino", written="model",
    integer_plan=quant.integer_plan, prepare=quant.prepare,
    fold=True, accepts=accepts,
    doc="a builder script over openvino.opset16 + weights.npz, and the OpenVINO IR it builds (model.xml/.bin)",
    options=(FLOAT_QUANTIZATION, FLOAT_RECURRENCE), extra={"spell": spell},
)
