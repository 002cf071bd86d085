"""Sigmoid and tanh rounded once, on the source's grid.

LiteRT's 8-bit ``LOGISTIC`` and ``TANH`` kernels write a fixed quantization (1/256 with zero
point -128 for an int8 sigmoid, 1/128 with 0 for tanh), so TensorFlow's converter follows
each with a ``QUANTIZE`` that requantizes to the range the source calibrated: two roundings
where the source has one (onnxruntime's ``QLinearSigmoid``, and its unfused QDQ sigmoid,
round the float sigmoid once into the output's scale). An EfficientNet's first SiLU came out
a step off on a third of its values, and every later block compounded it.
``once(flatbuffer)`` rewrites each such pair, when the 8-bit result is read by that
``QUANTIZE`` alone, as ``DEQUANTIZE → the float op → QUANTIZE`` into the requantized
tensor: XNNPACK's delegate takes all three.
"""
from __future__ import annotations

from typing import Any

from .same_scale import builtin_of, float_tensor, opcode, readers_of

#: the builtins whose 8-bit kernels write a fixed output range
FIXED = ("LOGISTIC", "TANH")


def once(flat: bytes) -> tuple[bytes, int]:
    """``flat`` with each fixed-range 8-bit sigmoid/tanh that a requantization follows computed
    in float and quantized once; how many were."""
    from tensorflow.lite.python import schema_py_generated as fb
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    fixed = {getattr(fb.BuiltinOperator, b) for b in FIXED}
    m = fbu.convert_bytearray_to_object(bytearray(flat))
    quantize, dequantize = fb.BuiltinOperator.QUANTIZE, fb.BuiltinOperator.DEQUANTIZE
    eight = {fb.TensorType.INT8, fb.TensorType.UINT8}
    done = 0
    for g in m.subgraphs:
        readers, outputs = readers_of(g)
        plan: dict[int, list[Any]] = {}
        for k, op in enumerate(g.operators):
            code = builtin_of(m.operatorCodes[op.opcodeIndex])
            if code not in fixed or op.inputs is None or len(op.inputs) != 1 or op.outputs is None or len(op.outputs) != 1:
                continue
            x, y = int(op.inputs[0]), int(op.outputs[0])
            r = readers.get(y, [])
            if y in outputs or len(r) != 1 or g.tensors[x].type not in eight or g.tensors[y].type not in eight:
                continue
            q = g.operators[r[0]]
            if builtin_of(m.operatorCodes[q.opcodeIndex]) != quantize or len(q.outputs) != 1 \
                    or g.tensors[int(q.outputs[0])].type not in eight:
                continue
            xf, yf = float_tensor(fb, g, x, "_float"), float_tensor(fb, g, y, "_float")
            dq = fb.OperatorT()
            dq.opcodeIndex, dq.inputs, dq.outputs = opcode(fb, m, dequantize), [x], [xf]
            op.inputs, op.outputs = [xf], [yf]
            q.inputs = [yf]
            plan[k] = [dq, op]
            done += 1
        if plan:
            g.operators = [x for k, op in enumerate(g.operators) for x in plan.get(k, [op])]
    if not done:
        return flat, 0
    return bytes(fbu.convert_object_to_bytearray(m)), done


__all__ = ["FIXED", "once"]
