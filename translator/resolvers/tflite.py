"""TensorFlow Lite column: members of the TFLite ``BuiltinOperator`` enum.

The enum is read from the flatbuffer schema bindings shipped inside the installed
``tensorflow`` wheel (``tensorflow.lite.python.schema_py_generated.BuiltinOperator``), so
``ADD`` and ``CONV_2D`` resolve and a TensorFlow API name such as ``tf.identity`` does not.
TensorFlow is imported only on the first call.
"""
from __future__ import annotations

import functools
import os


@functools.lru_cache(maxsize=1)
def builtin_operators() -> frozenset[str]:
    """Names of every BuiltinOperator enum member (e.g. ``ADD``, ``CONV_2D``)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from tensorflow.lite.python import schema_py_generated as schema

    enum = schema.BuiltinOperator
    return frozenset(
        n for n, v in vars(enum).items() if not n.startswith("_") and isinstance(v, int)
    )


def resolve(name: str) -> bool:
    return isinstance(name, str) and name.strip() in builtin_operators()


@functools.lru_cache(maxsize=1)
def library_version() -> str:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    return f"tensorflow {tf.__version__}"
