"""opbridge core: tables, IR, passes, query, reports and the CLI.

Importing this package is cheap: no NumPy and no ML framework is imported here.
The functions below mirror the CLI (``opbridge query`` ↔ ``translator.query``).
"""
from __future__ import annotations

if False:  # typing only
    from typing import Any, Iterable

__version__ = "0.1.0"
__all__ = ["load_tables", "query", "dtype", "ops", "backends", "__version__"]


def load_tables(*args: Any, **kwargs: Any) -> Any:
    """Load and validate ``optable.yaml`` and ``dtypes.yaml`` (see ``translator.table.loader``)."""
    from .table.loader import load_tables as _load

    return _load(*args, **kwargs)


def query(op: str, backends: Iterable[str] | None = None) -> dict[str, Any]:
    """``opbridge query OP [--backend B ...] --json`` as a dict."""
    from .run.catalog import query as _query

    return _query(op, backends)


def dtype(name: str | None = None, backends: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """``opbridge dtype [NAME] --json``."""
    from .run.catalog import dtype_query

    return dtype_query(name, backends)


def ops(category: str | None = None, backend: str | None = None, missing: bool = False) -> list[dict[str, Any]]:
    """``opbridge ops [--category C] [--backend B --missing] --json``."""
    from .run.catalog import list_ops

    return list_ops(category, backend, missing)


def backends() -> list[dict[str, Any]]:
    """``opbridge backends --json``."""
    from .run.catalog import backends_summary

    return backends_summary()
