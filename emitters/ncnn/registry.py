"""The ncnn backend's name and its rule decorator (a leaf: only ``translator.compile.registry``).

``@rule("op", check=...)`` registers ``fn(e: NodeEmit) -> None`` as the writer of an op: it
adds the node's layers through ``e`` and names each output's blob (``e.output``). The table
column is ``ncnn``; an op without a rule is written from its cell's ``snippet`` (the layer
lines the table's proof loaded in ncnn).
"""
from __future__ import annotations

from translator.compile.registry import binder

NAME = "ncnn"
rule = binder(NAME)
