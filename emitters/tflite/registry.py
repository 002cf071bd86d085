"""The TFLite backend's name and its rule decorator (a leaf: only ``translator`` imports).

TFLite emits TensorFlow code and converts it: its target's code columns are ``tflite`` then
``tensorflow``, so the TensorFlow rules (``emitters/tensorflow``) serve it unless a rule is
registered here for the op, and a snippet in an op's tflite cell (a spelling the TFLite
builtins have) wins over the tensorflow cell's.
"""
from __future__ import annotations

from translator.compile.registry import Refusal, binder

NAME = "tflite"
rule = binder(NAME)

__all__ = ["NAME", "Refusal", "rule"]
