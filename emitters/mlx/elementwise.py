"""MLX rules: elementwise ops whose MLX call depends on the dtypes (bit casts)."""
from __future__ import annotations

import numpy as np

from translator.table.dtypes import numpy_dtype

from .codegen import NodeEmit, mx_dtype
from .registry import rule


def _itemsize(dtype: str | None) -> int | None:
    try:
        return np.dtype(numpy_dtype(dtype)).itemsize if dtype else None
    except Exception:  # noqa: BLE001 - a dtype NumPy cannot spell has no size here
        return None


@rule("bit_cast")
def bit_cast(e: NodeEmit) -> str:
    """``mx.view``: the same bits read as the output dtype (elements of the same size only)."""
    src, dst = e.dtype_id(0), e.node.outputs[0].type.dtype
    if _itemsize(src) is None or _itemsize(src) != _itemsize(dst):
        raise e.refuse("unsupported_attribute_value", f"a bit cast from {src} to {dst} changes the element size")
    return f"mx.view({e.x(0)}, {mx_dtype(dst)})"


@rule("selu")
def selu(e: NodeEmit) -> str:
    """gamma * (x if x > 0 else alpha * (exp(x) - 1)); ``nn.selu`` has ONNX's default constants only."""
    x = e.x(0)
    alpha, gamma = float(e.attr("alpha")), float(e.attr("gamma"))
    return f"{gamma!r} * mx.where({x} > 0, {x}, {alpha!r} * (mx.exp({x}) - 1))"


@rule("clip")
def clip(e: NodeEmit) -> str:
    """``mx.clip`` with the bounds given; none at all is a copy (``mx.clip`` wants one)."""
    if e.v(1) is None and e.v(2) is None:
        return f"mx.array({e.x(0)})"
    return e.snippet()


@rule("eye_like")
def eye_like(e: NodeEmit) -> str:
    """``mx.eye`` of the input's 2-D shape in the output's dtype (the ``dtype`` attribute, else the input's)."""
    x = e.x(0)
    dt = mx_dtype(e.node.outputs[0].type.dtype or e.dtype_id(0))
    return f"mx.eye({x}.shape[0], {x}.shape[1], k={int(e.attr('k') or 0)}, dtype={dt})"
