"""ONNX column: operator types known to the installed schema registries.

``Mod`` → the default domain in ``onnx.defs``; ``com.microsoft.QuantizeLinear`` → the
contrib schemas onnxruntime registers (``get_all_operator_schema``);
``ai.onnx.ml.X`` → the ONNX-ML domain.
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def _ort_contrib() -> frozenset[tuple[str, str]]:
    try:
        import onnxruntime.capi._pybind_state as C
    except ImportError:
        return frozenset()
    return frozenset((s.domain, s.name) for s in C.get_all_operator_schema())


def resolve(name: str) -> bool:
    import onnx.defs

    if name.startswith("com.microsoft."):
        return ("com.microsoft", name[len("com.microsoft."):]) in _ort_contrib()
    if name.startswith("ai.onnx.ml."):
        return onnx.defs.has(name[len("ai.onnx.ml."):], "ai.onnx.ml")
    return onnx.defs.has(name)


def library_version() -> str:
    import onnx

    return f"onnx {onnx.__version__}"
