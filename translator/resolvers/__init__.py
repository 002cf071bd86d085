"""Resolve a table's native name against the installed library.

One module per API (``translator/resolvers/<api>.py``) exposing::

    def resolve(name: str) -> bool        # does the symbol exist in the installed library?
    def library_version() -> str          # e.g. "torch 2.13.0+cpu"

The naming convention each resolver checks is documented in docs/TABLES.md. Resolvers
import their framework lazily (only when called), so importing this package is cheap.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

#: the APIs with a resolver: the modules of this package (discovered, not listed)
RESOLVABLE = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


def resolver(api: str) -> ModuleType:
    if api not in RESOLVABLE:
        raise KeyError(f"no resolver for API {api!r}")
    return importlib.import_module(f"{__name__}.{api}")


def walk_dotted(root: object, root_name: str, parts: list[str]) -> bool:
    """getattr along ``parts``, importing a not-yet-imported submodule on the way; deprecated
    aliases that warn count as present, attributes that fail to load count as missing."""
    import warnings

    obj, path = root, root_name
    for part in parts:
        path = f"{path}.{part}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj = getattr(obj, part)
            continue
        except AttributeError:
            pass
        except Exception:  # noqa: BLE001 - a lazy attribute that fails to load
            return False
        if not isinstance(obj, ModuleType):
            return False
        try:  # a submodule the parent does not import eagerly
            obj = importlib.import_module(path)
        except Exception:  # noqa: BLE001
            return False
    return True


def dotted_name_parts(name: object, root_name: str) -> list[str] | None:
    """``"torch.nn.functional.relu"`` → ``["nn", "functional", "relu"]`` for root ``torch``; None if not such a name."""
    if not isinstance(name, str):
        return None
    parts = name.strip().split(".")
    if len(parts) < 2 or parts[0] != root_name or not all(p.isidentifier() for p in parts):
        return None
    return parts[1:]


def resolve_dotted(root: object, path: list[str]) -> bool:
    """getattr chain, e.g. resolve_dotted(torch, ["nn", "functional", "relu"])."""
    obj = root
    for part in path:
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return False
    return True
