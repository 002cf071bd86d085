"""Where the project's data files live, for a source checkout and an installed wheel.

A wheel ships the two tables and the templates inside ``translator/_data`` (see
``pyproject.toml``); a source checkout (or an editable install) finds them at the
repository root, next to the ``translator`` package. Only ``os.path`` here: this module
is on the fast path of ``opbridge query``.
"""
from __future__ import annotations

import os

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # translator/


def data_root() -> str:
    """The folder holding ``optable.yaml``, ``dtypes.yaml`` and ``templates/``."""
    env = os.environ.get("OPBRIDGE_DATA")
    if env:
        return env
    shipped = os.path.join(_PKG, "_data")
    if os.path.isfile(os.path.join(shipped, "optable.yaml")):
        return shipped
    return os.path.dirname(_PKG)


def optable_path() -> str:
    return os.environ.get("OPBRIDGE_OPTABLE") or os.path.join(data_root(), "optable.yaml")


def dtypes_path() -> str:
    return os.environ.get("OPBRIDGE_DTYPES") or os.path.join(data_root(), "dtypes.yaml")


def templates_dir() -> str:
    return os.path.join(data_root(), "templates")


def verified_path() -> str:
    """The file the generic tests write: which (op, backend, dtype) cells ran and passed."""
    return os.environ.get("OPBRIDGE_VERIFIED") or os.path.join(data_root(), "verified.json")


def cache_dir() -> str:
    explicit = os.environ.get("OPBRIDGE_CACHE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "opbridge")
