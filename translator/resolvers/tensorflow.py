"""TensorFlow column: dotted ``tf.`` paths resolved against ``import tensorflow as tf``.

``tf.math.add`` -> ``getattr(getattr(tf, "math"), "add")``; ``tf.raw_ops.AddV2`` works the
same way. Names must start with ``tf.`` (the table convention, docs/TABLES.md); anything
else resolves False. TensorFlow is imported only on the first call (it is slow and noisy).
"""
from __future__ import annotations

import functools
import os
from types import ModuleType

from . import resolve_dotted


@functools.lru_cache(maxsize=1)
def _tf() -> ModuleType:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return tf


@functools.lru_cache(maxsize=None)
def resolve(name: str) -> bool:
    if not isinstance(name, str):
        return False
    parts = name.strip().split(".")
    if len(parts) < 2 or parts[0] != "tf" or not all(parts):
        return False
    try:
        return resolve_dotted(_tf(), parts[1:])
    except Exception:  # lazy sub-packages (tf.keras, ...) may fail to import
        return False


def library_version() -> str:
    return f"tensorflow {_tf().__version__}"
