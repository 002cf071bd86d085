"""Control flow (subgraph attributes written recursively by the emitter), sequences, optionals.

ONNX writes each as one node of the op its ``onnx`` cell names (``codegen.write_node``, one
rule for all of them); the opset check is ``runtime.node_refusal``.
"""
from __future__ import annotations

from .codegen import write_node
from .registry import rule

OPS = (
    "concat_from_sequence", "if", "loop", "optional", "optional_get_element",
    "optional_has_element", "scan", "sequence_at", "sequence_construct", "sequence_empty",
    "sequence_erase", "sequence_insert", "sequence_length", "sequence_map", "split_to_sequence",
)

rule(*OPS)(write_node)
