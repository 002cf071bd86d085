"""OpenVINO column: ``opsetN.function`` names from the installed ``openvino`` package.

``opset16.add`` resolves when ``openvino.opset16`` has a callable ``add``. Each opset
module is a full snapshot of the ops available at that version (``opset16`` holds every
op; ``opset17`` only the ops it adds). ``openvino.runtime`` is gone in 2026.x, so only the
top-level ``openvino.opsetN`` modules are consulted.
"""
from __future__ import annotations

import functools
import importlib
import re
from importlib import metadata

_NAME_RE = re.compile(r"^opset(\d+)\.([A-Za-z_]\w*)$")


@functools.lru_cache(maxsize=None)
def _functions(opset: int) -> frozenset[str]:
    try:
        module = importlib.import_module(f"openvino.opset{opset}")
    except ImportError:
        return frozenset()
    return frozenset(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))


def resolve(name: str) -> bool:
    m = _NAME_RE.match(name) if isinstance(name, str) else None
    return bool(m) and m.group(2) in _functions(int(m.group(1)))


def library_version() -> str:
    return f"openvino {metadata.version('openvino')}"
