"""The NumPy reference as a backend: the IR evaluated op by op (no artifact)."""
from __future__ import annotations

from typing import Any, Mapping

from translator import interpreter
from translator.ir import Model

NAME = "numpy"


def emit(model: Model) -> Model:
    from translator.pipeline import prepare

    prepare(model)
    return interpreter.prepare(model)


def run(artifact: Model, inputs: Mapping[str, Any]) -> list[Any]:
    return interpreter.run(artifact, inputs)
