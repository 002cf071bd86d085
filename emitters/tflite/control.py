"""TFLite rules for control flow where the TensorFlow rule writes what TFLite's converter
cannot lower to builtins: a Loop's scan outputs whose element shape is not static (a
run-time batch) accumulate by concatenation, not in a TensorList (the converter lowers a
TensorList only with a static element shape)."""
from __future__ import annotations

from typing import Any

from emitters.tensorflow.control import _loop_check, loop_lines

from .registry import rule


@rule("loop", check=_loop_check)
def loop(c: Any) -> list[str]:
    return loop_lines(c, static_lists_only=True)
