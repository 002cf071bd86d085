"""TFLite custom ops with a published kernel: ``custom_code`` → a handler onto IR ops.

A custom op has no cell in the table's ``tflite`` column (that column lists LiteRT's builtins),
so these handlers are registered apart (``CUSTOM_HANDLERS``, ``CUSTOM_IR``); ``check_handlers``
checks that the IR op each emits exists. Every other custom op is refused with
``unsupported_op`` as before, named in the frontend's one line.

* **Convolution2DTransposeBias** (MediaPipe, ``mediapipe/util/tflite/operations/
  transpose_conv_bias.cc``; selfie segmentation, hair segmentation, face models): a transposed
  convolution with bias. Inputs ``x`` (NHWC), weights (OHWI, as ``TRANSPOSE_CONV``'s), bias
  ``[O]``; no output-shape operand. Its options are not a flexbuffer but the raw C struct
  ``TfLiteTransposeConvParams`` the kernel casts ``custom_initial_data`` to: int32 ``padding``
  (``TfLitePadding``: 1 SAME, 2 VALID), int32 ``stride_width``, int32 ``stride_height``
  (12 bytes, little-endian). Per spatial axis, SAME pads ``total = max(0, k − (in − 1) mod
  s − 1)`` (VALID: 0), the output is ``s·(in − 1) + k − total`` and the full transposed
  convolution is cropped by ``total // 2`` at the start (the kernel's ``out = in·s − pad + f``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

Handler = Callable[[Any, Any], list]
CUSTOM_HANDLERS: dict[str, Handler] = {}
CUSTOM_IR: dict[str, str] = {}

#: ``TfLitePadding`` (tensorflow/lite/core/c/builtin_op_data.h), not the schema's ``Padding``
TFLITE_PADDING = {1: "SAME", 2: "VALID"}


def handles_custom(*codes: str, ir: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for c in codes:
            CUSTOM_HANDLERS[c] = fn
            CUSTOM_IR[c] = ir
        return fn

    return deco


def check_custom(tables: Any) -> list[str]:
    """Custom handlers whose IR op is not in the table (should be none)."""
    return [f"custom {c} → {ir}" for c, ir in sorted(CUSTOM_IR.items()) if ir not in tables.ops]


def _struct_options(ctx: Any, op: Any, fields: int) -> list[int]:
    """The first ``fields`` little-endian int32 of the op's raw custom options."""
    raw = bytes(np.asarray(op.customOptions if op.customOptions is not None else [], dtype=np.uint8))
    if len(raw) < 4 * fields:
        raise ctx.fail("bad_model", f"custom op {ctx.builtin}: {len(raw)} bytes of options, "
                                    f"{4 * fields} expected (a TfLiteTransposeConvParams struct)")
    return [int(v) for v in np.frombuffer(raw[:4 * fields], dtype="<i4")]


@handles_custom("Convolution2DTransposeBias", ir="conv_transpose")
def _transpose_conv_bias(ctx: Any, op: Any) -> list:
    if len(op.inputs) != 3 or len(op.outputs) != 1:
        raise ctx.fail("bad_model", f"{ctx.builtin} takes x, weights and bias and gives one output "
                                    f"({len(op.inputs)} inputs, {len(op.outputs)} outputs)")
    padding, stride_w, stride_h = _struct_options(ctx, op, 3)
    pad = TFLITE_PADDING.get(padding)
    if pad is None:
        raise ctx.fail("unsupported_attribute_value", f"{ctx.builtin}: padding {padding} (1 SAME or 2 VALID)")
    if stride_w < 1 or stride_h < 1:
        raise ctx.fail("bad_model", f"{ctx.builtin}: strides {stride_h}x{stride_w} must be positive")
    xi, wi, bi = (int(i) for i in op.inputs)
    ishape, wshape = ctx.static_spatial(xi), ctx.shape(wi)  # NHWC, O H W I
    if len(ishape) != 4 or len(wshape) != 4:
        raise ctx.fail("bad_model", f"{ctx.builtin}: input {list(ishape)} and weights {list(wshape)} must be 4-D")
    ks, strides = [int(k) for k in wshape[1:3]], [stride_h, stride_w]
    begins, ends = [], []
    for n, k, s in zip(ishape[1:3], ks, strides):
        total = max(0, k - (int(n) - 1) % s - 1) if pad == "SAME" else 0
        begins.append(total // 2)
        ends.append(total - total // 2)
    w = ctx.weight(wi, [3, 0, 1, 2])  # I O H W
    attrs = {"kernel_shape": ks, "strides": strides, "pads": begins + ends}
    y = ctx.emit("conv_transpose", [ctx.nchw(ctx.input(xi)), w, ctx.input(bi)], attrs)[0]
    return [ctx.nhwc(y)]
