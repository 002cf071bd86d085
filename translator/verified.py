"""The verified-by-execution record written by the generic op tests.

``verified.json`` is generated (never typed by hand): ``{op_id: {backend: {"status":
"numeric"|"structural"|"failed"|"xfail", "dtypes": [...], "by": "tests/test_ops.py"}}}``.
A missing file means nothing has been verified by execution yet.
"""
from __future__ import annotations

import json

from . import paths

_CACHE: dict = {}


def load_verified() -> dict:
    key = paths.verified_path()
    if key not in _CACHE:
        try:
            with open(key, encoding="utf-8") as f:
                _CACHE[key] = json.load(f)
        except (OSError, ValueError):
            _CACHE[key] = {}
    return _CACHE[key]
