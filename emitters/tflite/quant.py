"""TFLite rules that keep a QDQ model quantized: an activation's QuantizeLinear/DequantizeLinear
pair is ``tf.quantization.fake_quant_with_min_max_vars`` and a symmetric int8 weight's
DequantizeLinear is the dequantized constant under ``fake_quant_with_min_max_vars(_per_channel)``
(its axis moved last and back). TFLite's converter reads a graph with fake-quant ops as a
quantization-aware trained model (``codegen.convert`` then enables its optimizations) and
writes int8 tensors with integer kernels, float I/O kept by a QUANTIZE/DEQUANTIZE at the
boundary. Any other (de)quantization is the TensorFlow rule's float arithmetic, and all of
it with ``--float-quantization`` (what convert falls back to when the int8 model fails the
check: integer kernels requantize every layer their own way)."""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from emitters.tensorflow.quant import _quant_check
from emitters.tensorflow.quant import dequantize_linear as float_dequantize
from translator.compile.quantized import activation_pair, symmetric_weight

from .registry import rule

#: the feature a generated module records when it holds fake-quant ops
FAKE_QUANT = "fake_quant"
#: the feature of a module whose int8 weights are read without quantized activations (onnxruntime's
#: dynamic quantization, ``quantized.dynamic_as_weight_only``): the converter's dynamic-range
#: quantization stores those weights as int8 and runs hybrid kernels
DYNAMIC_RANGE = "dynamic_range"


def _f32(x: float) -> str:
    return repr(float(np.float32(x)))


@rule("dequantize_linear", check=_quant_check)
def dequantize_linear(c: Any) -> list[str]:
    if c.cg.options.get("float_quantization"):
        return float_dequantize(c)
    if c.node.meta.get("weight_only"):
        c.cg.features.add(DYNAMIC_RANGE)
        return float_dequantize(c)
    pair = activation_pair(c.node)
    if pair is not None:
        c.cg.features.add(FAKE_QUANT)
        fq = (f"tf.quantization.fake_quant_with_min_max_vars({c.cg.expr(pair.x)}, min={_f32(pair.low)}, "
              f"max={_f32(pair.high)}, num_bits=8, narrow_range=False)")
        for kind, arg in pair.moves:
            fq = f"tf.reshape({fq}, {list(arg)})" if kind == "reshape" else f"tf.transpose({fq}, perm={list(arg)})"
        return [f"{c.o()} = {fq}"]
    w = symmetric_weight(c.node)
    if w is None or w.axis is not None and not (w.values.ndim == 4 and w.axis == 0 and all(
            n.op == "conv" and k == 1 for n, k in c.node.outputs[0].uses)):
        # per channel only as a convolution's filter along its output channels: the converter
        # cannot transpose a per-axis quantized constant (a matmul or fully connected weight,
        # which TensorFlow's form transposes): the float weight, which the converter leaves float
        return float_dequantize(c)
    c.cg.features.add(FAKE_QUANT)
    r = w.values.ndim
    if w.axis is None:
        v = c.weight(w.values, f"{c.node.name}_w")
        s = float(w.scales[0])
        return [f"{c.o()} = tf.quantization.fake_quant_with_min_max_vars({v}, min={_f32(-127 * s)}, "
                f"max={_f32(127 * s)}, num_bits=8, narrow_range=True)"]
    perm = [i for i in range(r) if i != w.axis] + [w.axis]  # per channel: the channel axis last
    inv = [int(i) for i in np.argsort(perm)]
    v = c.weight(np.ascontiguousarray(w.values.transpose(perm)), f"{c.node.name}_w")
    lo = c.weight((-127.0 * w.scales).astype(np.float32), f"{c.node.name}_min")
    hi = c.weight((127.0 * w.scales).astype(np.float32), f"{c.node.name}_max")
    fq = f"tf.quantization.fake_quant_with_min_max_vars_per_channel({v}, {lo}, {hi}, num_bits=8, narrow_range=True)"
    return [f"{c.o()} = tf.transpose({fq}, {inv})" if perm != list(range(r)) else f"{c.o()} = {fq}"]


def integer_plan(node: Any, ctx: Any) -> tuple[str, str]:
    """How the written .tflite will run compute node ``node`` (``report``): an int8 kernel
    where both operands reach the converter as fake-quant ops (``dequantize_linear`` above)."""
    from translator.compile.quantized import quantized_operands

    if ctx.options.get("float_quantization"):
        return "float", "--float-quantization: the quantized arithmetic in float ops"
    q = quantized_operands(node)
    if q.weight is not None and q.weight.meta.get("weight_only"):
        return "integer", ("hybrid kernel: int8 weight from the converter's dynamic-range quantization, the "
                           "activation quantized at run time (unless the model fails the check)")
    if q.activation is None or not q.activation_pair:
        return "float", "the input is not a per-tensor 8-bit quantize/dequantize pair"
    if q.weight is None and not (len(node.inputs) > 1 and node.inputs[1] is not None and node.inputs[1].is_const):
        return "float", "the weight is computed at run time"
    w = symmetric_weight(q.weight) if q.weight is not None and q.weight.op == "dequantize_linear" else None
    if w is None or w.axis is not None and not (w.values.ndim == 4 and node.op == "conv"):
        return "integer", ("int8 kernel: the converter quantizes the weight itself (per tensor: "
                           + ("a float weight" if q.weight is None else "not a symmetric int8 conv filter") + ")")
    return "integer", "int8 kernel from the converter's quantization-aware path (unless the int8 model fails the check)"


#: model metadata: the 8-bit dtypes of a quantized interface (``quantized_interface``)
QUANTIZED_IO = "opbridge.tflite_quantized_io"


def quantized_interface(model: Any) -> dict[str, str]:
    """A full-int8 model's 8-bit interface kept 8-bit. TensorFlow has no int8 form of a
    quantized input: the TensorFlow module takes the dequantized float and quantizes it (the
    fake-quant pair the converter reads), and the converter is then told the interface type
    (``inference_input_type`` / ``inference_output_type``), so the flatbuffer's input is the int8
    tensor with the source's scale and zero point, as the source's was (without this the input
    was widened to int32 and the first layer ran in float). Applied when every graph input is
    8-bit of one dtype and read only by per-tensor dequantizations with the same constant
    parameters (outputs: every output computed by such a quantization), on both sides or
    neither when both have 8-bit tensors; returns
    ``{"inputs": dtype, "outputs": dtype}`` for what was rewritten, also kept (as JSON) in the
    model's metadata (``QUANTIZED_IO``)."""
    from translator.compile.quantized import QRANGE8, _scalar
    from translator.ir.graph import TensorType

    g = model.graph
    done: dict[str, str] = {}

    def params(n: Any) -> tuple[float, float, Any, Any] | None:
        if int(n.attrs.get("block_size", 0) or 0) or len(n.inputs) < 3 or n.inputs[2] is None:
            return None
        s, z = _scalar(n.inputs[1]), _scalar(n.inputs[2])
        return None if s is None or z is None or not s > 0 else (s, z, n.inputs[1], n.inputs[2])

    def eight_bit(vs: list[Any]) -> set[str]:
        return {v.type.dtype for v in vs if v.type.kind == "tensor" and v.type.dtype in QRANGE8}

    # inputs: (value, its dequantizations, their parameters), when every input qualifies
    in_plans: list[Any] | None = None
    if eight_bit(g.inputs):
        in_plans = []
        for v in g.inputs:
            uses = [n for n, _ in v.uses]
            ps = [params(n) if n.op == "dequantize_linear" and n.inputs[0] is v else None for n in uses]
            if v.type.kind != "tensor" or not uses or v in g.outputs or None in ps \
                    or len({p[:2] for p in ps}) != 1 \
                    or any(o in g.outputs for n in uses for o in n.outputs):  # type: ignore[index]
                # (a dequantization the model returns as it is: no integer kernel to keep)
                in_plans = None
                break
            in_plans.append((v, uses, ps[0]))
        if len({v.type.dtype for v in g.inputs}) != 1:  # one 8-bit dtype for every input: one interface type
            in_plans = None
    out_plans: list[Any] | None = None
    if eight_bit(g.outputs):
        outs = list(g.outputs)
        ps = [params(v.producer) if v.producer is not None and v.producer.op == "quantize_linear" else None for v in outs]
        if None not in ps and len({v.type.dtype for v in outs}) == 1 and len(set(map(id, outs))) == len(outs) \
                and not any(v in g.inputs for v in outs):
            out_plans = list(zip(outs, ps))
    # one side widened to int32 and the other kept 8-bit would split a state carried from an
    # output back to an input (a streaming model's): both sides or neither
    if (eight_bit(g.inputs) and in_plans is None) or (eight_bit(g.outputs) and out_plans is None):
        return done
    if in_plans:
        dt = next(iter(eight_bit(g.inputs)))
        for v, uses, (_, _, sc, zp) in in_plans:
            shape = v.type.shape
            v.type = TensorType("float32", shape)
            first = min(uses, key=g.nodes.index)
            q = g.add_node("quantize_linear", [v, sc, zp], {}, outputs=[f"{v.name}_quantized"],
                           name=f"{v.name}/quantize", types=[TensorType(dt, shape)], before=first)
            q.meta["source_dtypes"] = [dt]
            for n in uses:
                n.replace_input(0, q.outputs[0])
        done["inputs"] = dt
    if out_plans:
        dt = next(iter(eight_bit(g.outputs)))
        new = []
        for v, (_, _, sc, zp) in out_plans:
            name = v.name
            dq = g.add_node("dequantize_linear", [v, sc, zp], {}, outputs=[f"{name}__float"],
                            name=f"{name}/dequantize", types=[TensorType("float32", v.type.shape)])
            v.name, dq.outputs[0].name = f"{name}__quantized", name  # the model's output keeps its name
            new.append(dq.outputs[0])
        g.outputs = new
        done["outputs"] = dt
    if done:
        model.metadata = {**(model.metadata or {}), QUANTIZED_IO: json.dumps(done, sort_keys=True)}
    return done
