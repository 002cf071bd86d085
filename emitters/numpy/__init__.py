"""The NumPy reference as a target: the IR evaluated op by op (``translator/compile/interpreter.py``).

It is the oracle of ``check``, the generated tests and the node-test bench, not a
conversion target (``reference=True``): the pipeline decomposes only the ops without a
reference function, and its artifact is the lowered IR itself.
"""
from __future__ import annotations

from typing import Any, Mapping

from translator.ir.graph import Model
from translator.compile.target import OutputPort, Target

NAME = "numpy"


def _supports(tables: Any) -> frozenset[str]:
    from translator import reference

    return frozenset(reference.implemented())


def _emit(model: Model, ctx: Any) -> Model:
    return model


def run(artifact: Model, inputs: Mapping[str, Any]) -> list[Any]:
    from translator.compile import interpreter

    return interpreter.run(artifact, inputs)


def _ports(artifact: Model) -> list[OutputPort]:
    return [OutputPort(v.name) for v in artifact.graph.outputs]


def _version() -> str:
    import numpy

    return f"numpy {numpy.__version__}"


TARGET = Target(
    name=NAME, title="NumPy reference", emit=_emit, run=run, output_ports=_ports, fold=False,
    reference=True, version=_version, extra={"supports": _supports},
    doc="the reference interpreter; composite ops run through their table decomposition",
)


def emit(model: Model, **options: Any) -> Model:
    from translator.compile.pipeline import compile

    return compile(model, TARGET, **options).artifact
