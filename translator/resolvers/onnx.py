"""ONNX column: operator types known to the installed ``onnx`` schema registry.

``Mod`` → default domain; ``com.microsoft.QuantizeLinear`` → that domain (only checked
when the installed onnx knows the domain, which it does not for com.microsoft: such
names are accepted only if onnxruntime's contrib schemas are unavailable to check —
they resolve False here so they are never counted as verified).
"""
from __future__ import annotations


def resolve(name: str) -> bool:
    import onnx.defs

    if name.startswith("com.microsoft."):
        return False
    if name.startswith("ai.onnx.ml."):
        return onnx.defs.has(name[len("ai.onnx.ml."):], "ai.onnx.ml")
    return onnx.defs.has(name)


def library_version() -> str:
    import onnx

    return f"onnx {onnx.__version__}"
