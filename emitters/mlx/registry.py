"""The MLX backend's name and its rule decorator (a leaf: only ``translator.compile.registry``).

``@rule("op", check=..., any_dtype=...)`` registers ``fn(e: NodeEmit) -> str | list[str]``
as the code generator of an op: a string is the right-hand side assigned to the node's
outputs, a list is whole lines. The table column is ``mlx``.
"""
from __future__ import annotations

from translator.compile.registry import binder

NAME = "mlx"
rule = binder(NAME)
