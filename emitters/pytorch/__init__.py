"""The PyTorch backend: IR → a standalone ``torch.nn.Module`` (``model.py``) and its weights
(``weights.safetensors``).

``TARGET`` (``target.py``) is what the one pipeline (``translator.compile.pipeline.compile``) needs;
``codegen.py`` writes the module from the lowered IR, ``runtime.py`` saves, loads and runs it.
Per-op code is the ``snippet`` of the op's ``pytorch`` cell in ``optable.yaml`` or a rule
(``@rule`` from ``registry.py``) in the family modules: ``elementwise``, ``shape``, ``nn``,
``quant``, ``rnn``, ``control``, ``attention``, ``misc``.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from translator.table.loader import Tables, load_tables

# the families register their rules on import
from . import attention, control, elementwise, misc, nn, quant, rnn, shape  # noqa: F401
from .codegen import Codegen, free_dead_locals, helper_deps, helper_source, helpers, torch_dtypes
from .node import NodeEmit
from .registry import NAME
from .runtime import (MODULE_FILE, WEIGHTS_FILE, PyTorchArtifact, load, output_ports, run, runner, save,
                      to_numpy, to_torch)
from .target import TARGET


def emit(model: Any, fold: bool = True, tables: Tables | None = None, **options: Any) -> PyTorchArtifact:
    """IR → ``PyTorchArtifact`` through the one pipeline (``model`` is not modified).
    ``fold=False`` keeps constant and static-shape subgraphs as nodes."""
    from translator.compile.pipeline import compile

    target = TARGET if fold else replace(TARGET, fold=False)
    return compile(model, target, tables, **options).artifact


def supported_ops(tables: Tables | None = None) -> frozenset[str]:
    """Ops this backend writes itself: a ``native``/``composite`` cell and a snippet or rule."""
    from translator.compile.registry import supported

    return supported(TARGET, tables or load_tables())


__all__ = ["NAME", "TARGET", "MODULE_FILE", "WEIGHTS_FILE", "PyTorchArtifact", "Codegen", "NodeEmit", "emit",
           "run", "runner", "save", "load", "output_ports", "to_torch", "to_numpy", "supported_ops",
           "torch_dtypes", "free_dead_locals", "helpers", "helper_deps", "helper_source"]
