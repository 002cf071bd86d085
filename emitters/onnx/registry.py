"""The ONNX target's name and its rule binder (a leaf: imports only ``translator.*``)."""
from __future__ import annotations

from translator.compile.registry import binder

NAME = "onnx"
rule = binder(NAME)
