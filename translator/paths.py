"""Where the project's data files live, for a source checkout and an installed wheel.

A wheel ships the two tables and the templates inside ``translator/_data`` (see
``pyproject.toml``); a source checkout (or an editable install) finds them at the
repository root, next to the ``translator`` package.
"""
from __future__ import annotations

import os
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_root() -> Path:
    """The folder holding ``optable.yaml``, ``dtypes.yaml`` and ``templates/``."""
    env = os.environ.get("OPBRIDGE_DATA")
    if env:
        return Path(env)
    shipped = _PKG / "_data"
    if (shipped / "optable.yaml").is_file():
        return shipped
    return _PKG.parent


def optable_path() -> Path:
    return Path(os.environ.get("OPBRIDGE_OPTABLE") or data_root() / "optable.yaml")


def dtypes_path() -> Path:
    return Path(os.environ.get("OPBRIDGE_DTYPES") or data_root() / "dtypes.yaml")


def templates_dir() -> Path:
    return data_root() / "templates"


def verified_path() -> Path:
    """The file the generic tests write: which (op, backend, dtype) cells ran and passed."""
    return data_root() / "verified.json"


def cache_dir() -> Path:
    base = os.environ.get("OPBRIDGE_CACHE") or os.environ.get("XDG_CACHE_HOME")
    root = Path(base) if base else Path.home() / ".cache"
    return root / "opbridge" if not os.environ.get("OPBRIDGE_CACHE") else root
