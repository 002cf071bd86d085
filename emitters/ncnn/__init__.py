"""The ncnn backend: IR → an ncnn network (``model.param``: the layers as text;
``model.bin``: their weights), run through the ``ncnn`` Python package on the CPU.

``TARGET`` (``target.py``) is what the one pipeline needs; ``codegen.py`` writes the network
from the lowered IR (the blob layout, the table's snippets, the per-node trial);
``runtime.py`` saves, loads and runs it. Per-op layers are the ``snippet`` of the op's ``ncnn``
cell in ``optable.yaml`` (the layer lines the table's proof ran in ncnn) or a rule
(``@rule`` from ``registry.py``) in ``nn.py``. ncnn itself is imported inside functions only.
"""
from __future__ import annotations

from . import nn, rnn, shape  # noqa: F401 - the families register their rules on import
from .codegen import Net, NodeEmit
from .registry import NAME
from .runtime import BIN_FILE, IO_FILE, PARAM_FILE, NcnnArtifact, load, output_ports, run, save
from .target import TARGET

__all__ = ["NAME", "TARGET", "Net", "NodeEmit", "NcnnArtifact", "PARAM_FILE", "BIN_FILE", "IO_FILE", "load",
           "output_ports", "run", "save"]
