"""The TensorFlow backend's name and its rule decorator (a leaf: only ``translator`` imports).

``@rule("conv", check=...)`` registers a code generator ``fn(c)`` (``c`` is the
``codegen.NodeCtx`` of the node: inputs as expressions, outputs as identifiers, attributes
with the signature's defaults) in the one lowering registry, ``translator.compile.registry``. A
check returns ``None`` or a ``Refusal`` (the pipeline then decomposes the node by the table,
or refuses it with that reason code). TFLite emits the same code: its target lists the
``tensorflow`` column after its own (``code_columns``), so these rules serve it too.
"""
from __future__ import annotations

from translator.compile.registry import Refusal, binder

NAME = "tensorflow"
rule = binder(NAME)

__all__ = ["NAME", "Refusal", "rule"]
