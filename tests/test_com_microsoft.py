"""onnxruntime's ``com.microsoft`` contrib ops, as its quantization and transformer-optimization
tools write them: each case is a small ONNX model with the op (and an opset import of
com.microsoft version 1), run by onnxruntime. The NumPy reference (the IR of the model) must
agree with onnxruntime, and ``opbridge.convert`` must write every target and pass its check
(the targets against the reference; ``vs_source``, the targets against onnxruntime, where the
op's arithmetic is onnxruntime's own). A target that cannot yet is a strict xfail with the
reason (data, ``PENDING``)."""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")
MS = "com.microsoft"

#: the cases whose decomposition ends in quantize_linear (requantization)
REQUANTIZED = ("qlinear_add_uint8", "qlinear_add_int8_no_c_zero_point", "qlinear_mul_uint8", "qlinear_mul_int8",
               "qlinear_sigmoid_uint8", "qlinear_sigmoid_int8", "qlinear_leaky_relu", "qlinear_average_pool",
               "qlinear_average_pool_count_pad", "qlinear_global_average_pool", "qlinear_add_saturating_uint8",
               "qlinear_leaky_relu_saturating_int8")
#: (case, target) → why it does not convert and pass its check yet
PENDING: dict[tuple[str, str], str] = {}


@dataclass
class Case:
    """``nodes`` over ``inputs`` (name → array fed) and ``inits`` (name → initializer) with
    ``outputs`` (name → ONNX element type); ``ort_atol``: how far onnxruntime's own arithmetic
    may be from the reference (0: the default float tolerance; integers: quantization steps)."""

    nodes: list[Any]
    inputs: dict[str, np.ndarray]
    outputs: dict[str, int]
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    ort_atol: float = 0.0
    #: the IR ops the model must come in as
    ops: tuple[str, ...] = ()
    #: why onnxruntime (CPU) cannot run the op; then the output shapes are given here
    no_ort: str = ""
    shapes: list[tuple[int, ...]] | None = None
    #: the default domain's opset
    opset: int = 17
    #: False: ONNX's checker does not know the op (onnxruntime's default-domain contrib ops)
    onnx_checked: bool = True

    def model(self, shapes: list[tuple[int, ...]] | None = None) -> onnx.ModelProto:
        """The model; ``shapes`` gives the outputs' (ONNX's checker wants one: onnxruntime's)."""
        ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
               for k, v in self.inputs.items()]
        outs = [helper.make_tensor_value_info(k, t, shapes[i] if shapes else None)
                for i, (k, t) in enumerate(self.outputs.items())]
        inits = [numpy_helper.from_array(v, k) for k, v in self.inits.items()]
        g = helper.make_graph(self.nodes, "g", ins, outs, inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset), helper.make_opsetid(MS, 1)],
                                 ir_version=8)


def ms(op: str, ins: list[str], outs: list[str], **attrs: Any) -> Any:
    return helper.make_node(op, ins, outs, domain=MS, **attrs)


#: the random values of the case being built (``build`` seeds it from the case's name)
_RNG = [np.random.default_rng(0)]


def f32(*shape: int, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    return _RNG[0].uniform(lo, hi, shape).astype(np.float32)


def u8(*shape: int) -> np.ndarray:
    return _RNG[0].integers(0, 256, shape).astype(np.uint8)


def i8(*shape: int, lo: int = -128, hi: int = 128) -> np.ndarray:
    return _RNG[0].integers(lo, hi, shape).astype(np.int8)


# ----------------------------------------------------------------------------- DynamicQuantizeLSTM
def _dq_lstm(direction: str, wtype: Any, per_channel: bool, **extra: Any) -> Case:
    """W [dirs, input, 4*hidden] and R [dirs, hidden, 4*hidden], quantized per direction or per
    gate column (onnxruntime requires a zero zero point for the latter)."""
    seq, batch, inp, hid = extra.pop("size", (5, 2, 4, 3))
    bounded = extra.pop("bounded", False)  # X through a tanh: a value the graph bounds
    span = extra.pop("span", 0.6)  # weights in [-span, span]: 2 saturates the gates (a drifting recurrence)
    d = 2 if direction == "bidirectional" else 1
    info = np.iinfo(wtype)

    def quantized(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if per_channel:
            scale = (np.abs(w).max(axis=1) / 100).astype(np.float32)
            zp = np.zeros(scale.shape, wtype)
            s, z = scale[:, None, :], zp[:, None, :]
        else:
            scale = (np.abs(w).reshape(d, -1).max(axis=1) / 100).astype(np.float32)
            zp = np.full(scale.shape, 3 if wtype == np.int8 else 130, wtype)
            s, z = scale[:, None, None], zp[:, None, None]
        q = np.clip(np.rint(w / s) + z.astype(np.int32), info.min, info.max).astype(wtype)
        return q, scale, zp

    W, Ws, Wz = quantized(f32(d, inp, 4 * hid, lo=-span, hi=span))
    Rr, Rs, Rz = quantized(f32(d, hid, 4 * hid, lo=-span, hi=span))
    inits = {"W": W, "R": Rr, "B": f32(d, 8 * hid, lo=-0.5, hi=0.5), "Ws": Ws, "Wz": Wz, "Rs": Rs, "Rz": Rz}
    ins = ["x", "W", "R", "B", "", "", "", ""]
    inputs = {"x": f32(seq, batch, inp)}
    if extra.pop("initial", False):
        inputs.update(h0=f32(d, batch, hid, lo=-0.5, hi=0.5), c0=f32(d, batch, hid, lo=-0.5, hi=0.5))
        ins[5:7] = ["h0", "c0"]
    if bounded:
        ins[0] = "x_tanh"
    node = ms("DynamicQuantizeLSTM", ins + ["Ws", "Wz", "Rs", "Rz"], ["y", "y_h", "y_c"], hidden_size=hid,
              direction=direction, **extra)
    nodes = [helper.make_node("Tanh", ["x"], ["x_tanh"])] * bounded + [node]
    # onnxruntime quantizes X and the hidden state to uint8 at run time; the reference does too (a flip: 1e-3)
    return Case(nodes, inputs, {"y": T.FLOAT, "y_h": T.FLOAT, "y_c": T.FLOAT}, inits, ort_atol=1e-3,
                ops=("dynamic_quantize_lstm",))


# ----------------------------------------------------------------------------- FusedConv
def _fused_conv(activation: str | None, params: tuple[float, ...] = (), z: bool = False) -> Case:
    attrs: dict[str, Any] = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    if activation is not None:
        attrs["activation"] = activation
    if params:
        attrs["activation_params"] = list(params)
    ins, inputs = ["x", "W", "B"], {"x": f32(1, 3, 6, 6)}
    if z:
        ins.append("z")
        inputs["z"] = f32(1, 4, 6, 6)
    return Case([ms("FusedConv", ins, ["y"], **attrs)], inputs, {"y": T.FLOAT},
                {"W": f32(4, 3, 3, 3, lo=-0.5, hi=0.5), "B": f32(4, lo=-0.5, hi=0.5)})


# ----------------------------------------------------------------------------- quantized helpers
def _q_scalar(scale: float, zp: int, dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(scale, np.float32), np.asarray(zp, dtype)


def _qlinear_binary(op: str, dtype: Any, with_c_zero_point: bool = True) -> Case:
    x = u8(2, 3, 4) if dtype == np.uint8 else i8(2, 3, 4)
    y = u8(4) if dtype == np.uint8 else i8(4)  # broadcast over the last axis
    zero = 128 if dtype == np.uint8 else 0
    a_s, a_z = _q_scalar(0.0213, zero + 3, dtype)
    b_s, b_z = _q_scalar(0.0318, zero - 5, dtype)
    c_s, c_z = _q_scalar(0.0517 if op == "QLinearAdd" else 0.1937, zero + 1, dtype)
    inits = {"as": a_s, "az": a_z, "bs": b_s, "bz": b_z, "cs": c_s, "bq": y}
    ins = ["a", "as", "az", "bq", "bs", "bz", "cs"]
    if with_c_zero_point:
        inits["cz"] = c_z
        ins.append("cz")
    return Case([ms(op, ins, ["c"])], {"a": x}, {"c": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, inits,
                ort_atol=1)


def _qlinear_saturating(op: str, dtype: Any) -> Case:
    """Results far outside the output's 8-bit range: quantize_linear must saturate them."""
    x = u8(2, 3, 4) if dtype == np.uint8 else i8(2, 3, 4)
    zero = 128 if dtype == np.uint8 else 0
    a_s, a_z = _q_scalar(0.2113, zero, dtype)
    c_s, c_z = _q_scalar(0.0117, zero + 7, dtype)
    inits = {"as": a_s, "az": a_z, "cs": c_s, "cz": c_z}
    if op == "QLinearLeakyRelu":
        return Case([ms(op, ["a", "as", "az", "cs", "cz"], ["c"], alpha=0.5)], {"a": x},
                    {"c": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, inits, ort_atol=1)
    inits.update(bq=x[::-1].copy(), bs=a_s, bz=a_z)
    return Case([ms(op, ["a", "as", "az", "bq", "bs", "bz", "cs", "cz"], ["c"])], {"a": x},
                {"c": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, inits, ort_atol=1)


def _qlinear_unary(op: str, dtype: Any, **attrs: Any) -> Case:
    x = u8(2, 3, 4) if dtype == np.uint8 else i8(2, 3, 4)
    zero = 128 if dtype == np.uint8 else 0
    xs, xz = _q_scalar(0.0317, zero + 2, dtype)
    ys, yz = _q_scalar(0.00393 if op == "QLinearSigmoid" else 0.0289, zero - 128 if op == "QLinearSigmoid" else zero,
                       dtype)
    inits = {"xs": xs, "xz": xz, "ys": ys, "yz": yz}
    return Case([ms(op, ["x", "xs", "xz", "ys", "yz"], ["y"], **attrs)], {"x": x},
                {"y": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, inits, ort_atol=1)


def _qlinear_pool(op: str, **attrs: Any) -> Case:
    xs, xz = _q_scalar(0.0517, 120, np.uint8)
    ys, yz = _q_scalar(0.0437, 128, np.uint8)
    return Case([ms(op, ["x", "xs", "xz", "ys", "yz"], ["y"], **attrs)], {"x": u8(1, 3, 7, 7)}, {"y": T.UINT8},
                {"xs": xs, "xz": xz, "ys": ys, "yz": yz}, ort_atol=1)


def _qlinear_concat() -> Case:
    ys, yz = _q_scalar(0.0517, 128, np.uint8)
    inits = {"ys": ys, "yz": yz}
    ins = ["ys", "yz"]
    inputs = {}
    for i, (s, z) in enumerate([(0.0517, 128), (0.0213, 100), (0.0983, 140)]):
        inputs[f"x{i}"] = u8(1, 2 + i, 4, 4)
        inits[f"s{i}"], inits[f"z{i}"] = _q_scalar(s, z, np.uint8)
        ins += [f"x{i}", f"s{i}", f"z{i}"]
    return Case([ms("QLinearConcat", ins, ["y"], axis=1)], inputs, {"y": T.UINT8}, inits, ort_atol=1)


def _qgemm(quantized_out: bool, alpha: float) -> Case:
    """QGemm as the static quantizer's QOperator format writes it (transB, b per output
    column, an int32 bias at the product's scale), with a uint8 output or a float one."""
    b = i8(5, 8, lo=-100, hi=100)  # [N, K]: transB
    inits = {"b": b, "as": np.asarray(0.0213, np.float32), "az": np.asarray(120, np.uint8),
             "bs": _RNG[0].uniform(0.01, 0.03, 5).astype(np.float32), "bz": np.zeros(5, np.int8),
             "c": _RNG[0].integers(-2000, 2000, 5).astype(np.int32)}
    ins = ["a", "as", "az", "b", "bs", "bz", "c"]
    if quantized_out:
        inits.update(ys=np.asarray(0.0917, np.float32), yz=np.asarray(117, np.uint8))
        ins += ["ys", "yz"]
    return Case([ms("QGemm", ins, ["y"], transB=1, alpha=alpha)], {"a": u8(3, 8)},
                {"y": T.UINT8 if quantized_out else T.FLOAT}, inits, ort_atol=1 if quantized_out else 1e-5,
                ops=("dequantize_linear", "cast", "mul", "gemm") + (("quantize_linear",) if quantized_out else ()))


def _matmul_integer_to_float(bias: bool, zero_points: bool) -> Case:
    b = i8(8, 5, lo=-100, hi=100)
    inits = {"b": b, "as": np.asarray(0.0213, np.float32), "bs": _RNG[0].uniform(0.01, 0.03, 5).astype(np.float32)}
    ins = ["a", "b", "as", "bs"]
    if zero_points:
        inits.update(az=np.asarray(120, np.uint8), bz=_RNG[0].integers(-3, 4, 5).astype(np.int8))
        ins += ["az", "bz"]
    if bias:
        inits["bias"] = f32(5)
        ins += [""] * (6 - len(ins)) + ["bias"]
    return Case([ms("MatMulIntegerToFloat", ins, ["y"])], {"a": u8(2, 3, 8)}, {"y": T.FLOAT}, inits,
                ops=("matmul_integer_to_float",) + (("add",) if bias else ()))


def _skip_layer_norm(beta: bool, bias: bool, skip_2d: bool = False, sum_output: bool = True) -> Case:
    hidden = 8
    inits = {"gamma": f32(hidden, lo=0.5, hi=1.5)}
    ins = ["x", "skip", "gamma"]
    if beta or bias:
        ins.append("beta" if beta else "")
        if beta:
            inits["beta"] = f32(hidden, lo=-0.5, hi=0.5)
    if bias:
        ins.append("bias")
        inits["bias"] = f32(hidden, lo=-0.5, hi=0.5)
    outs = ["y", "", "", "s"] if sum_output else ["y"]
    inputs = {"x": f32(2, 3, hidden), "skip": f32(3, hidden) if skip_2d else f32(2, 3, hidden)}
    return Case([ms("SkipLayerNormalization", ins, outs, epsilon=1e-5)], inputs,
                {o: T.FLOAT for o in outs if o}, inits)


def _ort_default_domain(op: str) -> Case:
    """onnxruntime's LayerNormalization / SimplifiedLayerNormalization of the default domain, in
    a model older than ONNX's own op (opset 14), as its transformer optimizer writes them."""
    ins = ["x", "g", "b"] if op == "LayerNormalization" else ["x", "g"]
    inits = {"g": f32(8, lo=0.5, hi=1.5), "b": f32(8, lo=-0.5, hi=0.5)}
    return Case([helper.make_node(op, ins, ["y"], epsilon=1e-5, axis=-1)], {"x": f32(2, 3, 8)}, {"y": T.FLOAT},
                {k: inits[k] for k in ins[1:]}, opset=14, onnx_checked=False,
                ops=("layer_normalization",) if op == "LayerNormalization" else ("rms_normalization",))


def _skip_simplified(bias: bool) -> Case:
    ins, inits = ["x", "skip", "gamma"], {"gamma": f32(8, lo=0.5, hi=1.5)}
    if bias:
        ins.append("bias")
        inits["bias"] = f32(8, lo=-0.5, hi=0.5)
    outs = ["y", "", "", "s"] if bias else ["y"]
    return Case([ms("SkipSimplifiedLayerNormalization", ins, outs, epsilon=1e-6)],
                {"x": f32(2, 3, 8), "skip": f32(2, 3, 8)}, {o: T.FLOAT for o in outs if o}, inits,
                ops=("skip_rms_normalization",) + (("add",) if bias else ()))


def _quantize_pair() -> Case:
    s, z = _q_scalar(0.0213, 10, np.int8)
    nodes = [ms("QuantizeLinear", ["x", "s", "z"], ["q"]), ms("DequantizeLinear", ["q", "s", "z"], ["y"])]
    return Case(nodes, {"x": f32(2, 3, 4)}, {"q": T.INT8, "y": T.FLOAT}, {"s": s, "z": z}, ort_atol=1,
                ops=("quantize_linear", "dequantize_linear"))


CASES: dict[str, Callable[[], Case]] = {
    "dynamic_quantize_lstm_forward_int8": lambda: _dq_lstm("forward", np.int8, False),
    "dynamic_quantize_lstm_bidirectional_uint8_per_column": lambda: _dq_lstm("bidirectional", np.uint8, True),
    "dynamic_quantize_lstm_reverse_initial_state": lambda: _dq_lstm("reverse", np.int8, True, initial=True),
    # 60 steps of saturating gates: a float LSTM of the dequantized weights drifts far from
    # onnxruntime, which quantizes X and the hidden state at run time (the reference does too)
    "dynamic_quantize_lstm_long_saturating": lambda: _dq_lstm("forward", np.int8, False, size=(60, 4, 8, 16),
                                                               span=2.0),
    "fused_conv_relu": lambda: _fused_conv("Relu"),
    "fused_conv_tanh": lambda: _fused_conv("Tanh"),
    "fused_conv_sigmoid": lambda: _fused_conv("Sigmoid"),
    "fused_conv_leaky_relu": lambda: _fused_conv("LeakyRelu", (0.2,)),
    "fused_conv_clip": lambda: _fused_conv("Clip", (-0.5, 1.0)),
    "fused_conv_hard_sigmoid": lambda: _fused_conv("HardSigmoid", (0.3, 0.4)),
    "fused_conv_sum_leaky_relu": lambda: _fused_conv("LeakyRelu", (0.1,), z=True),
    "fused_conv_sum_clip": lambda: _fused_conv("Clip", (0.0, 6.0), z=True),
    "fused_conv_no_activation": lambda: _fused_conv(None),
    "fused_matmul_alpha_trans_b": lambda: Case(
        [ms("FusedMatMul", ["a", "b"], ["y"], alpha=0.125, transB=1)], {"a": f32(2, 3, 8)}, {"y": T.FLOAT},
        {"b": f32(5, 8)}, ops=("transpose", "scaled_matmul")),
    "fused_matmul_trans_a": lambda: Case(
        [ms("FusedMatMul", ["a", "b"], ["y"], transA=1)], {"a": f32(2, 8, 3), "b": f32(2, 8, 5)}, {"y": T.FLOAT},
        ops=("transpose", "matmul")),
    "fused_matmul_trans_batch": lambda: Case(
        [ms("FusedMatMul", ["a", "b"], ["y"], alpha=0.5, transBatchA=1, transA=1, transBatchB=1)],
        {"a": f32(6, 2, 4, 3), "b": f32(6, 2, 4, 7)}, {"y": T.FLOAT}, ops=("transpose", "scaled_matmul")),
    "gelu": lambda: Case([ms("Gelu", ["x"], ["y"])], {"x": f32(2, 3, 8, lo=-4, hi=4)}, {"y": T.FLOAT}, ops=("gelu",)),
    "fast_gelu": lambda: Case([ms("FastGelu", ["x"], ["y"])], {"x": f32(2, 3, 8, lo=-4, hi=4)}, {"y": T.FLOAT},
                              ops=("gelu_tanh",)),
    "fast_gelu_bias": lambda: Case([ms("FastGelu", ["x", "b"], ["y"])], {"x": f32(2, 3, 8, lo=-4, hi=4)},
                                   {"y": T.FLOAT}, {"b": f32(8)}, ops=("add", "gelu_tanh")),
    "bias_gelu": lambda: Case([ms("BiasGelu", ["x", "b"], ["y"])], {"x": f32(2, 3, 8, lo=-4, hi=4)}, {"y": T.FLOAT},
                              {"b": f32(8)}, ops=("bias_gelu",)),
    "quick_gelu": lambda: Case([ms("QuickGelu", ["x"], ["y"])], {"x": f32(2, 3, 8, lo=-4, hi=4)}, {"y": T.FLOAT},
                               ops=("quick_gelu",)),
    "quick_gelu_alpha": lambda: Case([ms("QuickGelu", ["x"], ["y"], alpha=1.0)], {"x": f32(2, 3, 8, lo=-4, hi=4)},
                                     {"y": T.FLOAT}),
    "skip_layer_normalization_bias": lambda: _skip_layer_norm(beta=True, bias=True),
    "skip_layer_normalization_plain": lambda: _skip_layer_norm(beta=False, bias=False, skip_2d=True, sum_output=False),
    "skip_layer_normalization_no_beta_bias": lambda: _skip_layer_norm(beta=False, bias=True),
    "skip_simplified_layer_normalization_bias": lambda: _skip_simplified(bias=True),
    "skip_simplified_layer_normalization": lambda: _skip_simplified(bias=False),
    "bias_add": lambda: Case([ms("BiasAdd", ["x", "b", "s"], ["y"])], {"x": f32(2, 6, 4), "s": f32(2, 6, 4)},
                             {"y": T.FLOAT}, {"b": f32(4)}, ops=("bias_residual_add",), shapes=[(2, 6, 4)],
                             no_ort="onnxruntime's BiasAdd kernel is CUDA only (none on the CPU provider)"),
    "qgemm_uint8": lambda: _qgemm(quantized_out=True, alpha=1.0),
    "qgemm_float_alpha": lambda: _qgemm(quantized_out=False, alpha=2.0),
    "matmul_integer_to_float_bias": lambda: _matmul_integer_to_float(bias=True, zero_points=True),
    "matmul_integer_to_float_plain": lambda: _matmul_integer_to_float(bias=False, zero_points=False),
    "qlinear_add_uint8": lambda: _qlinear_binary("QLinearAdd", np.uint8),
    "qlinear_add_int8_no_c_zero_point": lambda: _qlinear_binary("QLinearAdd", np.int8, with_c_zero_point=False),
    "qlinear_add_saturating_uint8": lambda: _qlinear_saturating("QLinearAdd", np.uint8),
    "qlinear_leaky_relu_saturating_int8": lambda: _qlinear_saturating("QLinearLeakyRelu", np.int8),
    "qlinear_mul_uint8": lambda: _qlinear_binary("QLinearMul", np.uint8),
    "qlinear_mul_int8": lambda: _qlinear_binary("QLinearMul", np.int8),
    "qlinear_concat": _qlinear_concat,
    "qlinear_average_pool": lambda: _qlinear_pool("QLinearAveragePool", kernel_shape=[3, 3], strides=[2, 2],
                                                  pads=[1, 1, 1, 1]),
    "qlinear_average_pool_count_pad": lambda: _qlinear_pool("QLinearAveragePool", kernel_shape=[2, 2],
                                                            strides=[2, 2], pads=[0, 0, 1, 1], count_include_pad=1),
    "qlinear_global_average_pool": lambda: _qlinear_pool("QLinearGlobalAveragePool"),
    "qlinear_sigmoid_uint8": lambda: _qlinear_unary("QLinearSigmoid", np.uint8),
    "qlinear_sigmoid_int8": lambda: _qlinear_unary("QLinearSigmoid", np.int8),
    "qlinear_leaky_relu": lambda: _qlinear_unary("QLinearLeakyRelu", np.uint8, alpha=0.1),
    "quantize_dequantize_linear": _quantize_pair,
    "layer_normalization_opset14": lambda: _ort_default_domain("LayerNormalization"),
    "simplified_layer_normalization_opset14": lambda: _ort_default_domain("SimplifiedLayerNormalization"),
}


def build(name: str) -> Case:
    """The case ``name``, its random values the same in every process and order."""
    _RNG[0] = np.random.default_rng(zlib.crc32(name.encode()))
    return CASES[name]()


def _write(case: Case, path: Any) -> str:
    """The case's model, its output shapes those onnxruntime gives on the case's inputs."""
    shapes = case.shapes or [o.shape for o in _onnxruntime(case.model().SerializeToString(), case.inputs)]
    m = case.model(shapes)
    if case.onnx_checked:
        onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return str(path)


def _onnxruntime(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    from translator.ir.ort_run import session_options

    so = session_options()  # exact integer products on CPUs without VNNI, as the product runs onnxruntime
    so.intra_op_num_threads = 1  # DynamicQuantizeLSTM's numbers depend on how it splits a batch over threads
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ort_case(name: str) -> Any:
    why = build(name).no_ort
    return pytest.param(name, marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [], id=name)


@pytest.mark.parametrize("name", [_ort_case(n) for n in sorted(CASES)])
def test_reference_agrees_with_onnxruntime(name, tmp_path):
    """The model's IR (the table's IR ops, their NumPy references) against onnxruntime."""
    from translator.compile.interpreter import run
    from translator.frontends.onnx import load_onnx

    case = build(name)
    path = _write(case, tmp_path / f"{name}.onnx")
    ir = load_onnx(path)
    if case.ops:
        assert set(case.ops) == {n.op for n in ir.graph.nodes}, [n.op for n in ir.graph.nodes]
    got = run(ir, case.inputs)
    expected = _onnxruntime(path, case.inputs)
    for out, e, g in zip(case.outputs, expected, got):
        assert g.dtype == e.dtype and g.shape == e.shape, (out, g.dtype, g.shape, e.dtype, e.shape)
        if e.dtype.kind in "iu":
            worst = int(np.abs(e.astype(np.int64) - g.astype(np.int64)).max())
            assert worst <= case.ort_atol, f"{out}: {worst} quantization steps from onnxruntime"
        else:
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=case.ort_atol or 1e-5, err_msg=out)


def _case(name: str, target: str) -> Any:
    why = PENDING.get((name, target))
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(name, target, marks=marks, id=f"{name}-{target}")


@pytest.mark.parametrize("name, target", [_case(n, t) for n in sorted(CASES) for t in TARGETS])
def test_converts_and_checks(name, target, tmp_path):
    """Every target written and checked against the reference (and, where onnxruntime's own
    arithmetic is the op's, against onnxruntime on the original model)."""
    import opbridge

    case = build(name)
    path = _write(case, tmp_path / f"{name}.onnx")
    res = opbridge.convert(path, to=target, out=str(tmp_path / "out"), inputs=case.inputs)
    (rec,) = res["targets"]
    assert rec["status"] == "ok", rec
    assert rec["check"]["status"] == "pass", rec["check"]
    for o in rec["check"]["outputs"]:
        vs = o.get("vs_source")
        if vs is not None and not case.ort_atol:
            assert vs["ok"], (o["name"], vs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_target_writes_the_contrib_ops_it_read(name, tmp_path):
    """The ONNX target writes each IR node of a ``com.microsoft.X`` cell as that contrib op
    (onnxruntime's fused or integer kernel), not as its decomposition, unless onnxruntime has
    no CPU kernel for it (BiasAdd: CUDA only); and it writes no contrib op the source lacks.
    (A contrib node the frontend reads as standard ops, as FusedConv with Z, stays standard.)"""
    import onnx

    import opbridge
    from emitters.onnx.runtime import node_refusal
    from translator.frontends.onnx import load_onnx
    from translator.table.loader import load_tables

    tables = load_tables()
    case = build(name)
    path = _write(case, tmp_path / f"{name}.onnx")
    expected, no_kernel = set(), set()
    for n in load_onnx(path).graph.walk():
        cell = tables.ops[n.op].backends.get("onnx")
        if cell is not None and cell.status == "native" and cell.names[0].startswith(MS + "."):
            op_type = cell.names[0][len(MS) + 1:]
            (no_kernel if node_refusal(n, cell, 21) is not None else expected).add(op_type)
    res = opbridge.convert(path, to="onnx", out=str(tmp_path / "out.onnx"), inputs=case.inputs, check=False)
    (rec,) = res["targets"]
    assert rec["status"] == "ok", rec
    source = {n.op_type for n in onnx.load(path).graph.node if n.domain == MS}
    written = {n.op_type for n in onnx.load(str(tmp_path / "out.onnx")).graph.node if n.domain == MS}
    assert written <= source, written - source
    assert written == expected, (written, expected)
    assert no_kernel <= {"BiasAdd"}, no_kernel


@pytest.mark.parametrize("name", REQUANTIZED)
def test_onnx_target_below_opset_28(name, tmp_path):
    """The requantizing contrib ops on the ONNX target at an opset below 28 (whose
    QuantizeLinear onnxruntime runs) convert and check too."""
    import opbridge

    case = build(name)
    path = _write(case, tmp_path / f"{name}.onnx")
    res = opbridge.convert(path, to="onnx", out=str(tmp_path / "out.onnx"), inputs=case.inputs,
                           options={"opset": 25})
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert all(o["vs_source"]["ok"] for o in rec["check"]["outputs"]), rec["check"]


def test_unknown_contrib_op_is_refused_in_one_line(tmp_path):
    from translator.table.errors import FrontendError
    from translator.frontends.onnx import load_onnx

    case = Case([ms("Attention", ["x", "w"], ["y"], num_heads=2)], {"x": f32(1, 2, 4)}, {"y": T.FLOAT},
                {"w": f32(4, 12)})
    path = _write(case, tmp_path / "attention.onnx")
    with pytest.raises(FrontendError) as err:
        load_onnx(path)
    assert err.value.code == "unsupported_op" and "com.microsoft.Attention" in str(err.value)


def test_training_outputs_of_skip_layer_normalization_are_refused(tmp_path):
    from translator.table.errors import FrontendError
    from translator.frontends.onnx import load_onnx

    case = _skip_layer_norm(beta=True, bias=False)
    case.nodes[0].output[1] = "mean"
    case.outputs = {"y": T.FLOAT, "mean": T.FLOAT, "s": T.FLOAT}
    path = _write(case, tmp_path / "sln_mean.onnx")
    with pytest.raises(FrontendError) as err:
        load_onnx(path)
    assert err.value.code == "unsupported_attribute_value" and "mean/inv_std_var" in str(err.value)


def test_a_contrib_op_without_its_opset_import_is_a_bad_model(tmp_path):
    from translator.table.errors import FrontendError
    from translator.frontends.onnx import from_proto

    m = build("gelu").model([(2, 3, 8)])
    del m.opset_import[1]
    with pytest.raises(FrontendError) as err:
        from_proto(m, validate=False)
    assert err.value.code == "bad_model" and "com.microsoft" in str(err.value)


def test_channels_last_pool_is_refused_with_the_reason(tmp_path):
    """NHWC (channels_last=1, onnxruntime's NHWC transformer) is outside the decomposition's
    ``when``: a target other than ONNX refuses the node and says why, nothing is written; the
    ONNX target writes the contrib op as it is."""
    import onnx

    import opbridge

    case = _qlinear_pool("QLinearGlobalAveragePool", channels_last=1)
    case.inputs = {"x": u8(1, 7, 7, 3)}
    path = _write(case, tmp_path / "nhwc.onnx")
    res = opbridge.convert(path, to="tflite", out=str(tmp_path / "out.tflite"), check=False)
    (rec,) = res["targets"]
    assert rec["status"] == "failed" and rec["reason"] == "unsupported_op", rec
    assert "channels_last" in rec["detail"] and not res["written"], rec
    res = opbridge.convert(path, to="onnx", out=str(tmp_path / "out.onnx"), check=False)
    assert res["targets"][0]["status"] == "ok", res
    (node,) = onnx.load(str(tmp_path / "out.onnx")).graph.node
    assert (node.domain, node.op_type) == (MS, "QLinearGlobalAveragePool"), node


def test_a_quantized_lstm_over_a_run_time_length_falls_back_to_the_float_form_where_its_loop_is_rejected(tmp_path):
    """ddddocr's recognizer: DynamicQuantizeLSTM over a width-dependent sequence. By default
    TFLite writes it as an LSTM over its int8 weights (``dynamic_lstm_as_weight_only``); with
    ``--float-quantization`` (the exact emulation), the converter rejects the exact form's loop
    (a run-time trip count with stacked outputs), so the table's float form is written there,
    said in a warning; ONNX keeps the contrib op. (Before the fallback, TFLite refused the model.)"""
    import opbridge

    case = build("dynamic_quantize_lstm_forward_int8")
    path = _write(case, tmp_path / "dq.onnx")
    m = onnx.load(path)
    for vi in list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if len(dims) and vi.name in ("x", "y"):
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "T"
    onnx.save(m, path)
    res = opbridge.convert(path, to="onnx,tflite", out=str(tmp_path / "out"), inputs=case.inputs)
    by = {r["target"]: r for r in res["targets"]}
    assert by["onnx"]["status"] == "ok", by["onnx"]
    assert not any("float form" in w for w in by["onnx"].get("warnings", []))
    assert by["tflite"]["status"] == "ok" and by["tflite"]["check"]["status"] == "pass", by["tflite"]
    assert not any("float form" in w for w in by["tflite"].get("warnings", []))
    # the exact emulation: the float form is written and said; it is that rounding away from
    # onnxruntime (the check compares with the exact reference: on 5 unit-scale steps it may
    # pass or not, within 2e-2)
    res = opbridge.convert(path, to="tflite", out=str(tmp_path / "exact"), inputs=case.inputs,
                           options={"float_quantization": True})
    (t,) = res["targets"]
    assert t["status"] in ("ok", "check_failed"), t
    assert any("float form" in w for w in t.get("warnings", [])), t.get("warnings")
    assert max(o["max_abs"] for o in t["check"]["outputs"]) < 2e-2


@pytest.mark.parametrize("name", ["dynamic_quantize_lstm_forward_int8", "dynamic_quantize_lstm_bidirectional_uint8_per_column"])
def test_openvino_runs_a_quantized_lstm_as_its_lstm_sequence(name, tmp_path):
    """OpenVINO has no kernel that quantizes X and the hidden state at every step: the exact
    loop ran 4-9x slower than onnxruntime. Its float form (the table's decomposition: an
    LSTM over the dequantized weights) is one LSTMSequence, held by the check to twice the
    source's own rounding error, as a dynamically quantized matmul is."""
    import openvino as ov

    import opbridge

    case = build(name)
    path = _write(case, tmp_path / f"{name}.onnx")
    res = opbridge.convert(path, to="openvino", out=str(tmp_path / "out"), inputs=case.inputs)
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec.get("check", rec)
    types = {op.get_type_name() for op in ov.Core().read_model(str(tmp_path / "out" / "model.xml")).get_ordered_ops()}
    assert "LSTMSequence" in types and not types & {"Loop", "TensorIterator"}, sorted(types)


def _stacked_dq_lstm(direction: str, first: str) -> Case:
    """Two DynamicQuantizeLSTMs, the second reading the first's Y (in [-1, 1]); the first reads
    the model input itself (``first="input"``: a value nothing bounds) or its tanh (``"tanh"``).
    Symmetric int8 weights, a scale per gate column (onnxruntime's per-channel form)."""
    seq, batch, inp, hid = 7, 2, 24, 32
    d = 2 if direction == "bidirectional" else 1
    inits: dict[str, np.ndarray] = {}
    nodes = [helper.make_node("Tanh", ["x"], ["x_in"])] if first == "tanh" else []
    x = "x_in" if first == "tanh" else "x"
    for k, rows in enumerate((inp, d * hid)):
        for name, n in (("W", rows), ("R", hid)):
            w = f32(d, n, 4 * hid, lo=-0.3, hi=0.3)
            scale = (np.abs(w).max(axis=1) / 127).astype(np.float32)
            inits[f"{name}{k}"] = np.clip(np.rint(w / scale[:, None, :]), -127, 127).astype(np.int8)
            inits[f"{name}{k}s"], inits[f"{name}{k}z"] = scale, np.zeros(scale.shape, np.int8)
        inits[f"B{k}"] = f32(d, 8 * hid, lo=-0.2, hi=0.2)
        nodes.append(ms("DynamicQuantizeLSTM", [x, f"W{k}", f"R{k}", f"B{k}", "", "", "", "",
                                                f"W{k}s", f"W{k}z", f"R{k}s", f"R{k}z"],
                        [f"y{k}", f"h{k}", f"c{k}"], hidden_size=hid, direction=direction))
        if k == 0:  # Y [seq, d, batch, H] -> [seq, batch, d * H]
            nodes += [helper.make_node("Transpose", ["y0"], ["y0t"], perm=[0, 2, 1, 3]),
                      helper.make_node("Reshape", ["y0t", "shape"], ["x1"])]
            inits["shape"] = np.array([0, 0, -1], np.int64)
            x = "x1"
    return Case(nodes, {"x": f32(seq, batch, inp)}, {"y1": T.FLOAT, "h1": T.FLOAT}, inits,
                ops=("dynamic_quantize_lstm",))


def _stacked_int8(case: Case) -> dict[str, np.ndarray]:
    return {k: v for k, v in case.inits.items() if v.dtype == np.int8 and v.ndim == 3}


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_openvino_runs_a_quantized_lstm_over_a_bounded_input_as_its_integer_lstm(direction, tmp_path):
    """A DynamicQuantizeLSTM whose X the graph bounds (another LSTM's Y) is the CPU plugin's
    integer LSTM (RNNSeq in u8 over i8 weights: 3.5x the float LSTM's speed for 768 units):
    X and the state on one u8 grid, the weights on theirs. The first LSTM reads the model
    input, which nothing bounds: it stays the float LSTM over its int8 weights (widened to int32
    first: beside an integer LSTM, the plugin's transformations leave an int8 -> float Convert
    unfolded, which its LSTM refuses). Two directions are a forward and a reverse sequence (the
    plugin splits a bidirectional one after those transformations, in float). The IR keeps
    every weight int8; the check is convert's to make (``test_..._falls_back_...``)."""
    import openvino as ov

    import opbridge
    from emitters.openvino.runtime import integer_kernels

    _RNG[0] = np.random.default_rng(zlib.crc32(direction.encode()))
    case = _stacked_dq_lstm(direction, "input")
    path = _write(case, tmp_path / "dq2.onnx")
    (rec,) = opbridge.convert(path, to="openvino", out=str(tmp_path / "out"), inputs=case.inputs,
                              check=False)["targets"]
    assert rec["status"] == "ok", rec
    xml = tmp_path / "out" / "model.xml"
    rt = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_NUM_THREADS": 1,
                                                   "INFERENCE_PRECISION_HINT": "f32"}).get_runtime_model()
    precisions = sorted(op.get_rt_info()["runtimePrecision"].astype(str) for op in rt.get_ordered_ops()
                        if op.get_rt_info()["layerType"].astype(str) == "RNNSeq")
    d = 2 if direction == "bidirectional" else 1
    assert precisions == ["f32"] * d + ["u8"] * d, precisions  # (the plugin splits the float bidirectional one too)
    assert integer_kernels(xml).integer == d
    weights = sum(v.size for v in _stacked_int8(case).values())
    assert (tmp_path / "out" / "model.bin").stat().st_size < 1.5 * weights  # int8: a byte a weight
    # the integer LSTM's output against onnxruntime's: its u8 grid (a step of 1/127) and rounding
    ref = _onnxruntime(open(path, "rb").read(), case.inputs)[0]
    got = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(case.inputs)
    y = next(v for k, v in got.items() if "y1" in k.get_names())
    assert np.abs(y - ref).max() < 0.1, np.abs(y - ref).max()


def test_an_integer_lstm_past_the_check_falls_back_to_the_float_lstm(tmp_path):
    """OpenVINO's integer LSTM rounds its output to the u8 grid too, and strays further from
    onnxruntime's dynamic quantization (which rounds each step on that step's own range) than
    the check allows on this LSTM: convert then writes the LSTMs in float over their int8
    weights (``--float-recurrence``), says so, and that passes; the exact emulation is not
    reached. The integer form is what the artifact holds when it passes (the wild corpus'
    ovfl_embedder_int8)."""
    import opbridge

    _RNG[0] = np.random.default_rng(11)
    case = _stacked_dq_lstm("forward", "tanh")
    path = _write(case, tmp_path / "dq2.onnx")
    (rec,) = opbridge.convert(path, to="openvino", out=str(tmp_path / "out"), inputs=case.inputs)["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec.get("check", rec)
    assert rec["fell_back_to"] == {"float_recurrence": True}, rec.get("fell_back_to")
    said = [w for w in rec.get("warnings", []) if "--float-recurrence" in w]
    assert said and "integer LSTM" in said[0], rec.get("warnings")
    assert not any("float ops" in w for w in rec.get("warnings", [])), rec["warnings"]
    from emitters.openvino.runtime import integer_kernels

    kernels = integer_kernels(tmp_path / "out" / "model.xml")
    assert kernels.stored and kernels.integer == 2, kernels  # int8 weights, float LSTMs


@pytest.mark.parametrize("per_column", [False, True], ids=["per_direction", "per_column"])
@pytest.mark.parametrize("target", ["pytorch", "tensorflow", "coreml", "openvino"])
def test_a_quantized_lstm_keeps_its_int8_weights_and_runs_on_the_target_lstm(target, per_column, tmp_path):
    """DynamicQuantizeLSTM on a target without run-time activation quantization is an LSTM over
    its int8 weights dequantized (``quantized.dynamic_lstm_as_weight_only``): the weights stay
    8-bit (PyTorch's int8 buffers dequantized once at load, TensorFlow's int8 constants, Core ML's
    constexpr_affine_dequantize, OpenVINO's compressed weights), the recurrence is the target's
    own LSTM (was: the exact loop over float32 weights, 4x the size, a Python loop on PyTorch),
    and the check holds it to twice the source's own rounding. Two directions with a scale per
    gate column take the flattened [D * 4H, rows] form."""
    import opbridge

    _RNG[0] = np.random.default_rng(7 + per_column)  # (the same weights in every process and order)
    case = _dq_lstm("bidirectional", np.int8, per_column, size=(6, 2, 32, 48))
    path = _write(case, tmp_path / "dq.onnx")
    res = opbridge.convert(path, to=target, out=str(tmp_path / "out"), inputs=case.inputs)
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec.get("check", rec)
    assert not any("float ops" in w for w in rec.get("warnings", [])), rec["warnings"]  # (no exact fallback)
    float_bytes = 4 * 2 * (32 + 48) * 4 * 48  # W and R as float32
    out = Path(rec["output"])
    if target == "pytorch":
        assert rec["integer_kernels"]["integer"] == 2, rec["integer_kernels"]
        src = (out / "model.py").read_text()
        forward = src[src.index("def forward("):]
        # torch's flat weights derived once at load, not on every forward; the dequantized
        # weights they came from are not kept beside them
        assert "_rnn_native(" in forward and "_rnn_flat_weights(" not in forward
        assert "del self." in src[src.index("def _prepare("):src.index("def forward(")]
    elif target == "tensorflow":
        assert rec["integer_kernels"]["integer"] == 2, rec["integer_kernels"]
    elif target == "coreml":
        assert "mb.lstm(" in (out / "builder.py").read_text()
        weights = out / "model.mlpackage" / "Data" / "com.apple.CoreML" / "weights" / "weight.bin"
        assert weights.stat().st_size < 0.35 * float_bytes
    else:
        assert (out / "model.bin").stat().st_size < 0.35 * float_bytes


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_a_quantized_lstm_on_tflite_is_one_loop_over_hybrid_kernels(direction, tmp_path):
    """On TFLite the LSTM over int8 weights is a while loop even over a static length: unrolled,
    each step's hybrid FULLY_CONNECTED (int8 weight, which XNNPACK does not take) cut the
    sequence into a delegated partition per step (an 80-step speaker embedder ran 18.3 ms
    unrolled, 10.4 ms as the loop). The input projection before the loop is one hybrid kernel."""
    import tensorflow as tf

    import opbridge

    _RNG[0] = np.random.default_rng(zlib.crc32(direction.encode()))
    case = _dq_lstm(direction, np.int8, False, size=(6, 2, 32, 48))
    path = _write(case, tmp_path / "dq.onnx")
    # the form written (LiteRT's hybrid rounding may stray past twice the source's on some
    # weights: convert then writes the exact loop, as test_a_quantized_lstm_keeps_... says)
    (rec,) = opbridge.convert(path, to="tflite", out=str(tmp_path / "dq.tflite"), inputs=case.inputs,
                              check=False)["targets"]
    assert rec["status"] == "ok", rec
    ops = {o["op_name"] for o in tf.lite.Interpreter(rec["output"])._get_ops_details()}
    assert "WHILE" in ops and "LOGISTIC" not in ops, sorted(ops)  # (the steps are in the loop's body)
    k = rec["integer_kernels"]  # the input projection and, in the loop's body, the recurrent product
    assert k["integer"] == k["total"] == (4 if direction == "bidirectional" else 2) and "hybrid" in k["how"], k
    assert "control-flow bodies" in k["how"], k
    (rec,) = opbridge.convert(path, to="tflite", out=str(tmp_path / "checked.tflite"), inputs=case.inputs)["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec.get("check", rec)


def test_a_contrib_op_inside_a_loop_body_is_written_with_its_opset_import(tmp_path):
    """The contrib domain's opset import covers every graph of the model: a QuickGelu in a
    Loop body (which the ONNX target writes as it is) needs it as much as one at the top."""
    import onnx

    import opbridge

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), ms("QuickGelu", ["acc_in"], ["acc_out"], alpha=1.5)],
        "body",
        [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
         helper.make_tensor_value_info("acc_in", T.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("acc_out", T.FLOAT, [2, 3])])
    g = helper.make_graph([helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)], "g",
                          [helper.make_tensor_value_info("n", T.INT64, []), helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    onnx.save(m, str(tmp_path / "loop.onnx"))
    res = opbridge.convert(str(tmp_path / "loop.onnx"), to="onnx", out=str(tmp_path / "out.onnx"),
                           inputs={"n": np.array(3, np.int64), "x": f32(2, 3)})
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec.get("check", rec)
    out = onnx.load(str(tmp_path / "out.onnx"))
    assert MS in {o.domain for o in out.opset_import}
    (loop,) = [n for n in out.graph.node if n.op_type == "Loop"]
    assert [n.op_type for n in loop.attribute[0].g.node if n.domain == MS] == ["QuickGelu"]
