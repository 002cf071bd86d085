"""CoreML column: MIL op types registered in the installed coremltools.

A name resolves when it is a key of ``SSAOpRegistry.core_ops`` (the MIL ops a Core ML
program may contain, e.g. ``add``, ``conv``, ``reduce_sum``). Frontend-only dialect ops
(``torch_upsample_bilinear``, ``tf_lstm_block``, ...) and NeuralNetwork layer messages
(``CopyLayerParams``) do not resolve.

Importing coremltools is slow (it probes TensorFlow and PyTorch), so it happens on the
first call only and the registry snapshot is cached.
"""
from __future__ import annotations

import functools
from importlib import metadata
from typing import Mapping


@functools.lru_cache(maxsize=1)
def _core_ops() -> Mapping[str, tuple[str, ...]]:
    """op type -> deployment targets (``iOS15``, ...) that register it, oldest first."""
    import logging

    logging.getLogger("coremltools").setLevel(logging.ERROR)
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    return {name: tuple(t.name for t in sorted(versions))
            for name, versions in SSAOpRegistry.core_ops.items() if not name.startswith("_")}


def resolve(name: str) -> bool:
    return isinstance(name, str) and name in _core_ops()


def targets(name: str) -> tuple[str, ...]:
    """Deployment targets whose MIL opset has ``name`` (empty when it does not resolve)."""
    return _core_ops().get(name, ()) if isinstance(name, str) else ()


def library_version() -> str:
    return f"coremltools {metadata.version('coremltools')}"
