"""The MLX backend: IR → a standalone MLX function (``model.py``: ``mlx.core`` / ``mlx.nn``)
and its weights (``weights.safetensors``), run eagerly on ``mx.cpu``.

``TARGET`` (``target.py``) is what the one pipeline needs; ``codegen.py`` writes the function
from the lowered IR, ``runtime.py`` saves, loads and runs it. Per-op code is the ``snippet``
of the op's ``mlx`` cell in ``optable.yaml`` (the expression the table's proof ran in MLX) or
a rule (``@rule`` from ``registry.py``) in the family modules: ``elementwise``, ``shape``,
``nn``, ``misc``, ``attention``. mlx itself is imported inside functions only.
"""
from __future__ import annotations

from . import attention, elementwise, misc, nn, rnn, shape  # noqa: F401 - the families register their rules on import
from .codegen import Codegen, NodeEmit
from .registry import NAME
from .runtime import MODULE_FILE, WEIGHTS_FILE, MlxArtifact, load, output_ports, run, save
from .target import TARGET

__all__ = ["NAME", "TARGET", "Codegen", "NodeEmit", "MlxArtifact", "MODULE_FILE", "WEIGHTS_FILE", "load",
           "output_ports", "run", "save"]
