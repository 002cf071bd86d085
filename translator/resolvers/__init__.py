"""Resolve a table's native name against the installed library.

One module per API (``translator/resolvers/<api>.py``) exposing::

    def resolve(name: str) -> bool        # does the symbol exist in the installed library?
    def library_version() -> str          # e.g. "torch 2.13.0+cpu"

The naming convention each resolver checks is documented in docs/TABLES.md. Resolvers
import their framework lazily (only when called), so importing this package is cheap.
"""
from __future__ import annotations

import importlib
from types import ModuleType

RESOLVABLE = ("onnx", "numpy", "pytorch", "tensorflow", "tflite", "coreml", "openvino")


def resolver(api: str) -> ModuleType:
    if api not in RESOLVABLE:
        raise KeyError(f"no resolver for API {api!r}")
    return importlib.import_module(f"{__name__}.{api}")


def resolve_dotted(root: object, path: list[str]) -> bool:
    """getattr chain, e.g. resolve_dotted(torch, ["nn", "functional", "relu"])."""
    obj = root
    for part in path:
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return False
    return True
