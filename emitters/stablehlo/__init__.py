"""The StableHLO backend: IR → a standalone JAX function (``model.py``: ``jax.numpy`` /
``jax.lax``), its weights (``weights.safetensors``), and the function exported by
``jax.export`` (``model.jax_export``, StableHLO text in ``model.mlir``).

``TARGET`` (``target.py``) is what the one pipeline needs; ``codegen.py`` writes the function
from the lowered IR, ``runtime.py`` saves, loads and runs it. Per-op code is the ``snippet``
of the op's ``stablehlo`` cell in ``optable.yaml`` (the expression the table's proof lowered
to the named StableHLO op) or a rule (``@rule`` from ``registry.py``) in the family modules.
"""
from __future__ import annotations

from . import nn, shape  # noqa: F401 - the families register their rules on import
from .codegen import Codegen, NodeEmit
from .registry import NAME
from .runtime import EXPORT_FILE, MLIR_FILE, MODULE_FILE, WEIGHTS_FILE, JaxArtifact, load, output_ports, run, save
from .target import TARGET

__all__ = ["NAME", "TARGET", "Codegen", "NodeEmit", "JaxArtifact", "MODULE_FILE", "WEIGHTS_FILE", "EXPORT_FILE",
           "MLIR_FILE", "load", "output_ports", "run", "save"]
