"""Averages the source computes in float, kept float after TensorFlow's converter.

The converter's quantizer treats ``MEAN``, ``AVERAGE_POOL_2D`` and ``SUM`` as same-scale ops:
fed by a fake-quant range, each becomes an int8 kernel whose result is rounded to its
*input's* scale and zero point, even when nothing in the source quantizes that result. A QDQ
model's ``LayerNormalization`` (onnxruntime computes it in float between its input's
DequantizeLinear and its output's QuantizeLinear) then subtracts a mean rounded to the input
step: a ViT's first layer norm came out 15 steps off onnxruntime, 73 % of its values exact.

``marked(node)`` says which IR nodes hold such averages: any node that reads a dequantized
8-bit activation, maybe transposed or reshaped (a layer norm's mean inside its TensorFlow code), or a marked average's result
(the converter hands the int8 range on down such a chain), except a ``reduce_mean``/
``reduce_sum``/``average_pool``/``global_average_pool`` whose own result a ``quantize_linear``
reads (the source's int8 average, rounded as the source rounds it). The TensorFlow module computes those under the name
scope ``SCOPE`` (``emitters.tensorflow.codegen`` asks the target's ``extra["name_scope"]``),
so the converter's tensors carry it; ``float_again(flatbuffer)`` then finds each marked
operator with an 8-bit input and output and runs it in float: ``DEQUANTIZE`` of its input,
the op on float tensors, and the float result read directly where the converter had put a
``DEQUANTIZE`` of the int8 one (a ``QUANTIZE`` back into that int8 tensor only if an integer
kernel reads it).
"""
from __future__ import annotations

from typing import Any

from translator.compile.quantized import LAYOUT_OPS, activation_pair

#: the name scope of the marked nodes' TensorFlow ops
SCOPE = "opbridge_float"
#: IR ops the converter quantizes with their input's scale although they average
AVERAGES = frozenset({"reduce_mean", "reduce_sum", "average_pool", "global_average_pool"})
#: their builtins in the flatbuffer
BUILTINS = frozenset({"MEAN", "SUM", "AVERAGE_POOL_2D"})


def marked(node: Any) -> str | None:
    """``SCOPE`` when ``node`` reads a dequantized 8-bit activation and any average in its
    TensorFlow code computes a float result nothing requantizes (an average whose own output
    a ``quantize_linear`` reads is the source's int8 average: not marked), else None."""
    if not node.inputs or node.inputs[0] is None:
        return None
    if node.op in AVERAGES and any(u.op == "quantize_linear" for out in node.outputs for u, _ in out.uses):
        return None
    src = node.inputs[0].producer
    while src is not None and src.op in LAYOUT_OPS and src.inputs and src.inputs[0] is not None:
        src = src.inputs[0].producer  # (a layer norm over channels reads its input transposed)
    if src is not None and src.op in AVERAGES and marked(src):
        return SCOPE  # the float average of a marked one (a pooled feature's layer norm): float too
    if src is None or src.op != "dequantize_linear" or activation_pair(src) is None:
        return None
    return SCOPE


def float_again(flat: bytes) -> tuple[bytes, int]:
    """``flat`` with every marked 8-bit average run in float; how many were."""
    from tensorflow.lite.python import schema_py_generated as fb
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    if SCOPE.encode() not in flat:
        return flat, 0
    m = fbu.convert_bytearray_to_object(bytearray(flat))
    wanted = {getattr(fb.BuiltinOperator, b) for b in BUILTINS}
    eight = {fb.TensorType.INT8, fb.TensorType.UINT8}

    def builtin(op: Any) -> int:
        return builtin_of(m.operatorCodes[op.opcodeIndex])

    done = 0
    for g in m.subgraphs:
        readers, graph_outputs = readers_of(g)
        dequantize = getattr(fb.BuiltinOperator, "DEQUANTIZE")

        def is_marked(op: Any) -> bool:
            if builtin(op) not in wanted or op.outputs is None or len(op.outputs) != 1:
                return False
            x, y = int(op.inputs[0]), int(op.outputs[0])
            name = g.tensors[y].name
            name = name.decode() if isinstance(name, bytes) else (name or "")
            return SCOPE in name and g.tensors[x].type in eight and g.tensors[y].type in eight

        # an average that reads a marked one's result: floated too, reading the float result
        # (the converter names its output after its own op, outside the scope)
        chosen = {k for k, op in enumerate(g.operators) if is_marked(op)}
        grew = True
        while grew:
            grew = False
            for k in sorted(chosen):
                for r in readers.get(int(g.operators[k].outputs[0]), []):
                    ro = g.operators[r]
                    if r not in chosen and builtin(ro) in wanted and ro.outputs is not None and len(ro.outputs) == 1 \
                            and g.tensors[int(ro.outputs[0])].type in eight:
                        chosen.add(r)
                        grew = True
        plan: dict[int, list[Any]] = {}
        dropped: set[int] = set()
        rename: dict[int, int] = {}  # a dropped DEQUANTIZE's float output -> the float result
        floated: dict[int, int] = {}  # an int8 result -> the float tensor that replaced it
        for k, op in enumerate(g.operators):
            if k not in chosen:
                continue
            x, y = int(op.inputs[0]), int(op.outputs[0])
            yf = float_tensor(fb, g, y, "_float")
            if x in floated:
                seq = [op]
                op.inputs = [floated[x], *[int(i) for i in op.inputs[1:]]]
            else:
                xf = float_tensor(fb, g, x, "_float_in")
                dq = fb.OperatorT()
                dq.opcodeIndex, dq.inputs, dq.outputs = opcode(fb, m, dequantize), [x], [xf]
                op.inputs = [xf, *[int(i) for i in op.inputs[1:]]]
                seq = [dq, op]
            op.outputs = [yf]
            floated[y] = yf
            integer_readers = y in graph_outputs
            for r in readers.get(y, []):
                ro = g.operators[r]
                if r in chosen:
                    continue
                if builtin(ro) == dequantize and len(ro.outputs) == 1 \
                        and int(ro.outputs[0]) not in graph_outputs:
                    dropped.add(r)
                    rename[int(ro.outputs[0])] = yf
                else:
                    integer_readers = True
            if integer_readers:  # an integer kernel still reads the int8 result: quantized once, as before
                q = fb.OperatorT()
                q.opcodeIndex, q.inputs, q.outputs = opcode(fb, m, fb.BuiltinOperator.QUANTIZE), [yf], [y]
                seq.append(q)
            plan[k] = seq
            done += 1
        if not plan:
            continue
        g.operators = [x for k, op in enumerate(g.operators) if k not in dropped for x in plan.get(k, [op])]
        for op in g.operators:
            if op.inputs is not None:
                op.inputs = [rename.get(int(i), int(i)) for i in op.inputs]
    if not done:
        return flat, 0
    return bytes(fbu.convert_object_to_bytearray(m)), done


def readers_of(g: Any) -> tuple[dict[int, list[int]], set[int]]:
    """Subgraph ``g``'s readers (tensor index → the indices of the operators that read it) and
    its output tensors."""
    readers: dict[int, list[int]] = {}
    for k, op in enumerate(g.operators):
        for i in op.inputs if op.inputs is not None else []:
            readers.setdefault(int(i), []).append(k)
    return readers, {int(o) for o in (g.outputs if g.outputs is not None else [])}


def builtin_of(code: Any) -> int:
    """An operator code's builtin (the wider of its two fields: codes past 127)."""
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def opcode(fb: Any, m: Any, builtin: int) -> int:
    """The index of ``builtin``'s operator code in model ``m`` (object API), added if absent."""
    for k, c in enumerate(m.operatorCodes):
        if builtin_of(c) == builtin and not c.customCode:
            return k
    c = fb.OperatorCodeT()
    c.builtinCode, c.deprecatedBuiltinCode, c.version = builtin, min(builtin, 127), 1
    m.operatorCodes.append(c)
    return len(m.operatorCodes) - 1


def float_tensor(fb: Any, g: Any, like: int, suffix: str) -> int:
    """A new float32 activation tensor of subgraph ``g`` shaped as tensor ``like``, named after
    it with ``suffix``; its index."""
    t = g.tensors[like]
    f = fb.TensorT()
    f.shape, f.shapeSignature = t.shape, t.shapeSignature
    f.type, f.buffer = fb.TensorType.FLOAT32, 0
    name = t.name.decode() if isinstance(t.name, bytes) else (t.name or f"t{like}")
    f.name = f"{name}{suffix}"
    g.tensors.append(f)
    return len(g.tensors) - 1


__all__ = ["AVERAGES", "BUILTINS", "SCOPE", "builtin_of", "float_again", "float_tensor", "marked", "opcode",
           "readers_of"]
