"""PyTorch column: dotted ``torch.`` paths resolved against the installed ``torch``.

``torch.nn.functional.relu`` -> ``torch`` then ``nn`` -> ``functional`` -> ``relu`` by
``getattr``; a component that is a not-yet-imported submodule (``torch.ao.quantization``,
...) is imported on the way. Methods resolve the same way (``torch.Tensor.index_put_``),
as do classes (``torch.nn.Identity``). Names must start with ``torch.`` (the table
convention, docs/TABLES.md); anything else resolves False. ``torch`` is imported only on
the first call.
"""
from __future__ import annotations

import functools
from types import ModuleType

from . import dotted_name_parts, walk_dotted


@functools.lru_cache(maxsize=1)
def _torch() -> ModuleType:
    import torch

    return torch


@functools.lru_cache(maxsize=None)
def resolve(name: str) -> bool:
    parts = dotted_name_parts(name, "torch")
    return parts is not None and walk_dotted(_torch(), "torch", parts)


def library_version() -> str:
    return f"torch {_torch().__version__}"
