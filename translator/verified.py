"""The verified-by-execution record written by the generic op tests.

``verified.json`` is generated (never typed by hand): ``{op_id: {backend: {"status":
"numeric"|"structural"|"failed"|"xfail", "dtypes": [...], "by": "tests/test_ops.py"}}}``.
A missing file means nothing has been verified by execution yet.
"""
from __future__ import annotations

import json
from typing import Any

from . import paths

_CACHE: dict[str, Any] = {}


def load_verified() -> dict[str, Any]:
    p = paths.verified_path()
    key = str(p)
    if key not in _CACHE:
        try:
            _CACHE[key] = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            _CACHE[key] = {}
    return _CACHE[key]
