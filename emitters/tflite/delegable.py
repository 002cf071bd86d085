"""Integer ops that LiteRT's XNNPACK delegate leaves to the builtin kernels, run in float
between a DEQUANTIZE and a QUANTIZE it takes.

TensorFlow's converter writes every op between two fake-quant ranges as its int8 kernel.
For some of them XNNPACK has no quantized path in the delegate (an int8 ``HARD_SWISH``:
MobileNetV3's every block), so the interpreter splits the graph into one delegate partition
per such op and runs the op itself in LiteRT's reference-style builtin kernel: a quantized
MobileNetV3 then runs slower than its float conversion. ``float_islands`` asks the
interpreter which nodes the delegate did not take (``runtime.delegated_nodes``) and rewrites
each one whose float form the delegate does take (``FLOAT_FORMS``) and whose operands are
per-tensor 8-bit activations: ``DEQUANTIZE`` of each quantized input, the same op with the
same options on float tensors, ``QUANTIZE`` into the op's own int8 output tensor (its scale
and zero point unchanged).

The same rewrite serves a node the delegate takes but computes wrong: an int8
``BATCH_MATMUL`` whose second operand is an activation with a non-zero zero point (an
attention's Q·Kᵀ and P·V in a QDQ transformer) comes out of XNNPACK as if that zero point
were 0, 43-92 steps off in a one-op model while LiteRT's builtin kernel is exact
(``miscomputed``). The value is the float op's result rounded once into the output's
quantization, the arithmetic the QDQ form of the op specifies (onnxruntime runs an
un-fused quantized activation the same way). The rewrite is kept only when the delegate
then takes more nodes than before.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .same_scale import builtin_of, float_tensor, opcode

#: builtins whose float kernel XNNPACK's delegate takes and whose options mean the same on
#: float tensors (elementwise activations, reductions over constant axes, softmax)
FLOAT_FORMS = frozenset({"HARD_SWISH", "LOGISTIC", "TANH", "ELU", "LEAKY_RELU", "GELU", "SOFTMAX", "MEAN", "SUM",
                         "EXP", "LOG", "SQRT", "RSQRT", "SQUARE", "ABS", "NEG", "RELU", "RELU6", "RELU_N1_TO_1",
                         "REDUCE_MAX", "REDUCE_MIN"})

_8BIT = {"INT8", "UINT8"}


def miscomputed(m: Any, g: Any, op: Any, types: dict[int, str]) -> bool:
    """Whether XNNPACK's delegate computes ``op`` wrong: an 8-bit ``BATCH_MATMUL`` whose
    second operand is a run-time tensor with a non-zero zero point."""
    from tensorflow.lite.python import schema_py_generated as fb

    if builtin_of(m.operatorCodes[op.opcodeIndex]) != fb.BuiltinOperator.BATCH_MATMUL or op.inputs is None \
            or len(op.inputs) < 2:
        return False
    t = g.tensors[int(op.inputs[1])]
    data = m.buffers[t.buffer].data if t.buffer else None
    zp = t.quantization.zeroPoint if t.quantization is not None else None
    return (types.get(t.type) in _8BIT and (data is None or not len(data)) and zp is not None
            and any(int(z) != 0 for z in zp))


def _undelegated(flat: bytes) -> tuple[list[tuple[int, str]], int] | None:
    """(index, builtin name) of the nodes the default delegate leaves out, and their count;
    None when the model does not allocate without run-time sizes (nothing to ask)."""
    from .runtime import allocated_ops, delegated_nodes

    ops = allocated_ops(flat)
    if ops is None:
        return None
    taken = delegated_nodes(ops)
    left = [(o["index"], o["op_name"]) for o in ops if o["op_name"] != "DELEGATE" and o["index"] not in taken]
    return left, len(left)


def float_islands(flat: bytes) -> tuple[bytes, list[str]]:
    """``flat`` with each 8-bit node XNNPACK does not take (and can take in float) between a
    DEQUANTIZE and a QUANTIZE; the names of the rewritten builtins (empty: unchanged)."""
    found = _undelegated(flat)
    if found is None:
        return flat, []
    left, before = found
    from tensorflow.lite.python import schema_py_generated as fb
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    m = fbu.convert_bytearray_to_object(bytearray(flat))
    g = m.subgraphs[0]
    types = {v: k for k, v in vars(fb.TensorType).items() if not k.startswith("_")}
    codes = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    wrong = {k for k, op in enumerate(g.operators) if miscomputed(m, g, op, types)}
    todo = sorted({i for i, name in left if name in FLOAT_FORMS} | wrong)
    if not todo:
        return flat, []

    def code(name: str) -> int:
        return opcode(fb, m, getattr(fb.BuiltinOperator, name))

    def quantized(t: int) -> bool:
        x = g.tensors[t]
        q = x.quantization
        data = m.buffers[x.buffer].data if x.buffer else None
        return (types.get(x.type) in _8BIT and q is not None and q.scale is not None and len(q.scale) == 1
                and (data is None or not len(data)))

    def unary(op_code: int, i: int, o: int) -> Any:
        op = fb.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = op_code, [i], [o]
        return op

    rewritten: dict[int, list[Any]] = {}
    names: list[str] = []
    for idx in todo:
        op = g.operators[idx]
        ins = [int(i) for i in (op.inputs if op.inputs is not None else [])]
        outs = [int(o) for o in (op.outputs if op.outputs is not None else [])]
        acts = [i for i in ins if i >= 0 and not (g.tensors[i].buffer and m.buffers[g.tensors[i].buffer].data is not None
                                                     and len(m.buffers[g.tensors[i].buffer].data))]
        consts = [i for i in ins if i >= 0 and i not in acts]
        if (not acts or not all(quantized(i) for i in acts) or not outs or not all(quantized(o) for o in outs)
                or any(types.get(g.tensors[c].type) not in ("INT32", "INT64") for c in consts)
                or op.intermediates is not None and len(op.intermediates)):
            continue
        dq, q = code("DEQUANTIZE"), code("QUANTIZE")
        seq, moved = [], {}
        for i in acts:
            if i not in moved:
                moved[i] = float_tensor(fb, g, i, "_float")
                seq.append(unary(dq, i, moved[i]))
        fouts = [float_tensor(fb, g, o, "_float") for o in outs]
        op.inputs = [moved.get(i, i) for i in ins]
        op.outputs = fouts
        seq.append(op)
        seq += [unary(q, f, o) for f, o in zip(fouts, outs)]
        rewritten[idx] = seq
        names.append(codes.get(builtin_of(m.operatorCodes[op.opcodeIndex]), "?"))
    if not rewritten:
        return flat, []
    g.operators = [x for k, op in enumerate(g.operators) for x in rewritten.get(k, [op])]
    out = bytes(fbu.convert_object_to_bytearray(m))
    after = _undelegated(out)
    fixed = any(k in wrong for k in rewritten)
    if after is None or after[1] > before or after[1] == before and not fixed:
        return flat, []
    return out, sorted(set(names))


__all__ = ["FLOAT_FORMS", "float_islands"]
_ = np  # NumPy is the flatbuffer bindings' array type
