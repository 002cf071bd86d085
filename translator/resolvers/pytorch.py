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
import importlib
from types import ModuleType


@functools.lru_cache(maxsize=1)
def _torch() -> ModuleType:
    import torch

    return torch


def _walk(root: object, root_name: str, parts: list[str]) -> bool:
    obj, path = root, root_name
    for part in parts:
        path = f"{path}.{part}"
        try:
            obj = getattr(obj, part)
            continue
        except AttributeError:
            pass
        except Exception:  # a lazy attribute that fails to load counts as missing
            return False
        if not isinstance(obj, ModuleType):
            return False
        try:  # a submodule the parent does not import eagerly
            obj = importlib.import_module(path)
        except Exception:
            return False
    return True


@functools.lru_cache(maxsize=None)
def resolve(name: str) -> bool:
    if not isinstance(name, str):
        return False
    parts = name.strip().split(".")
    if len(parts) < 2 or parts[0] != "torch" or not all(p.isidentifier() for p in parts):
        return False
    return _walk(_torch(), "torch", parts[1:])


def library_version() -> str:
    return f"torch {_torch().__version__}"
