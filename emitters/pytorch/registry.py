"""The PyTorch backend's name and its rule decorator (a leaf: only ``translator.compile.registry``).

``@rule("op", check=..., any_dtype=...)`` registers ``fn(e: NodeEmit) -> str | list[str]``
as the code generator of an op: a string is the right-hand side assigned to the node's
outputs, a list is whole lines. A ``check(node) -> Refusal | None`` runs while lowering (a
refusal sends the node to the table's decomposition, else it is refused with its reason).
"""
from __future__ import annotations

from translator.compile.registry import binder

NAME = "pytorch"
rule = binder(NAME)
