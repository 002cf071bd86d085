"""The Core ML backend: IR → a standalone MIL builder script → ML program (.mlpackage).

``TARGET`` (``target.py``) is what ``translator.compile.pipeline.compile`` runs; ``emit(model,
target=..., tables=...)`` is that compile's artifact, for callers of the emitter modules.
The package: ``registry`` (the rule decorator), ``mil`` (shared helpers and the artifact),
``prepare`` (the target's IR preparation), ``codegen`` (the builder script), ``runtime``
(build, convert, save, load, run), and the rule families ``elementwise``, ``shape``, ``nn``,
``reductions``, ``quant``, ``rnn``, ``attention``, ``control`` (imported here so their rules register).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import attention, control, elementwise, nn, quant, reductions, rnn, shape  # noqa: F401 - the rules register on import
from .mil import DEFAULT_TARGET, CoreMLArtifact, Port, ct as _ct, deployment_target
from .registry import NAME
from .runtime import output_ports, run, save
from .target import TARGET, legal_dtypes

if TYPE_CHECKING:
    from translator.ir.graph import Model, Node
    from translator.table.loader import Tables


def emit(model: "Model", target: str = DEFAULT_TARGET, tables: "Tables | None" = None) -> CoreMLArtifact:
    """``model`` (not modified) → the converted, saved and reloaded Core ML artifact."""
    from translator.compile.pipeline import compile

    return compile(model, TARGET, tables, deployment_target=target).artifact


def supported_ops(tables: "Tables | None" = None) -> frozenset[str]:
    """Ops emitted here: a native or composite coreml cell AND a snippet or a rule."""
    from translator.compile.registry import supported
    from translator.table.loader import load_tables

    return supported(TARGET, tables or load_tables())


def accepts(node: "Node") -> str | None:
    """Why the op's rule does not take ``node`` (its check's detail), else None."""
    from translator.compile.registry import rules

    r = rules(NAME).get(node.op)
    why = r.check(node) if r is not None and r.check is not None else None
    return None if why is None else why.detail


__all__ = ["NAME", "TARGET", "DEFAULT_TARGET", "CoreMLArtifact", "Port", "emit", "run", "save", "output_ports",
           "supported_ops", "accepts", "legal_dtypes", "deployment_target", "_ct"]
