"""The StableHLO backend's name and its rule decorator (a leaf: only ``translator.compile.registry``).

``@rule("op", check=..., any_dtype=...)`` registers ``fn(e: NodeEmit) -> str | list[str]``
as the code generator of an op: a string is the right-hand side assigned to the node's
outputs, a list is whole lines. The table column is ``stablehlo``; the command line also
takes ``jax`` (``Target.aliases``), the language the module is written in.
"""
from __future__ import annotations

from translator.compile.registry import binder

NAME = "stablehlo"
rule = binder(NAME)
