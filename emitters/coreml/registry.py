"""The Core ML backend's name and its rule decorator (a leaf: only ``translator`` imports).

``@rule("conv", check=...)`` registers a code generator ``fn(gen, node)`` (``gen`` is the
``codegen.Gen`` writing the builder script) in the one lowering registry,
``translator.compile.registry``; a check returns ``None`` or a ``Refusal`` (the pipeline then
decomposes the node by the table, or refuses it with that reason code).
"""
from __future__ import annotations

from translator.compile.registry import Refusal, binder

NAME = "coreml"
rule = binder(NAME)

__all__ = ["NAME", "Refusal", "rule"]
