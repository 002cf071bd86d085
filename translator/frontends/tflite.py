"""TFLite (``.tflite`` flatbuffer) → IR.

The flatbuffer is read with LiteRT's generated schema bindings (``ai_edge_litert.schema_py_generated``,
else TensorFlow's copy ``tensorflow.lite.python.schema_py_generated``), object API:
``ModelT.InitFromPackedBuf``. Subgraph 0 (or the signature's subgraph) is the model.

* **Mapping**: every builtin goes through ``load_tables().reverse_index("tflite")`` (the
  ``tflite`` cells' names or ``reads``): the per-builtin handlers of ``tflite_ops`` translate
  options (padding → explicit pads, fused activations → an extra node, …) and emit the
  table's IR op; a handler's op id must be one of the builtin's reverse-index entries
  (``check_handlers``). Custom ops with a published kernel (MediaPipe's
  ``Convolution2DTransposeBias``) have handlers of their own (``tflite_custom``). Builtins
  without a handler, other custom ops and ops without an entry are all collected and reported
  in one ``unsupported_op`` line naming the first node (the tensor name of its first output).
* **Layout**: TFLite is channels-last; each channels-last op (convolutions, pools, resize,
  depth↔space, LRN) gets transposes into NCHW and back, weights permuted as constants. The
  ``transposes`` pass of the pipeline then sinks and cancels them through layout-agnostic ops.
* **Dynamic dims**: a graph input's dim that ``shape_signature`` declares -1 is a symbolic dim
  (``dim_symbol``: ``<input>_d<axis>``), not the interpreter's default size in ``shape``;
  handlers read ``Ctx.dims`` (None where dynamic) and spell size-dependent attributes out at
  run time (SAME pads over a dynamic spatial dim as ``auto_pad``, a resize's batch and
  channels from ``shape``, a slice to the end of a dynamic dim as an open end).
* **Names**: graph inputs/outputs take the signature's names when the model has one
  (outputs in signature order), else the tensor names; ``run_source`` feeds the interpreter
  through the signature runner (or by tensor index) with the same mapping.
* **Quantization** is carried as QDQ: a quantized integer tensor is dequantized
  (``dequantize_linear``, per-tensor or per-axis) where a float op reads it; a quantized
  op's result is computed in float and quantized (``quantize_linear``) with its output
  tensor's scale/zero point, so targets reproduce the int8 rounding. ``QUANTIZE`` /
  ``DEQUANTIZE`` become exactly that; float16 weights (``DEQUANTIZE`` of a float16
  constant) become a cast. Integer graph inputs/outputs stay integer. One quantization step
  per quantized output goes into ``metadata["opbridge.source_atol"]``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..table.errors import FrontendError, OpbridgeError
from ..ir.infer import infer_node
from ..ir.graph import OPAQUE, Graph, Model, TensorType, Value
from . import tflite_state
from .tflite_sparse import densify
from .tflite_state import STATE_OPS

NAME = "tflite"
RUNTIME = "LiteRT interpreter"

#: the flatbuffer file identifier of TFLite models (bytes 4..8)
IDENTIFIER = b"TFL3"

_NP = {"FLOAT32": np.float32, "FLOAT16": np.float16, "INT32": np.int32, "UINT8": np.uint8, "INT64": np.int64,
       "BOOL": np.bool_, "INT16": np.int16, "COMPLEX64": np.complex64, "INT8": np.int8, "FLOAT64": np.float64,
       "COMPLEX128": np.complex128, "UINT64": np.uint64, "UINT32": np.uint32, "UINT16": np.uint16}

#: quantization steps allowed between the targets (float arithmetic, round half to even) and
#: LiteRT's integer kernels (fixed-point multipliers, round half away from zero) per quantized output
QUANT_STEPS = 1.0


def schema() -> Any:
    """LiteRT's generated flatbuffer bindings (TensorFlow's copy when LiteRT is absent)."""
    try:
        from ai_edge_litert import schema_py_generated as s
    except ImportError:
        try:
            from tensorflow.lite.python import schema_py_generated as s  # type: ignore[no-redef]
        except ImportError:
            raise FrontendError("bad_model", "reading .tflite needs ai-edge-litert or tensorflow (neither is installed)") from None
    return s


def _enum_names(enum_cls: Any) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


def read_model(path: str | os.PathLike[str]) -> tuple[Any, Any, bytes]:
    """(schema module, ModelT, file bytes), or a one-line ``bad_model`` error."""
    p = Path(path)
    if not p.is_file():
        raise FrontendError("bad_model", "file not found", where=str(path))
    buf = p.read_bytes()
    if len(buf) < 8 or buf[4:8] != IDENTIFIER:
        raise FrontendError("bad_model", "not a TFLite model (the flatbuffer file identifier is not 'TFL3')",
                            where=str(path))
    s = schema()
    try:
        model = s.ModelT.InitFromPackedBuf(bytearray(buf), 0)
        if not model.subgraphs:
            raise ValueError("no subgraph")
        for sg in model.subgraphs:  # every index the graph uses must be in range
            nt = len(sg.tensors or [])
            for op in sg.operators or []:
                for i in list(op.inputs if op.inputs is not None else []) + list(op.outputs if op.outputs is not None else []):
                    if i >= nt:
                        raise ValueError(f"tensor index {i} out of range")
                if op.opcodeIndex >= len(model.operatorCodes or []):
                    raise ValueError(f"operator code index {op.opcodeIndex} out of range")
            for t in sg.tensors or []:
                if t.buffer >= len(model.buffers or []):
                    raise ValueError(f"buffer index {t.buffer} out of range")
    except Exception as exc:  # noqa: BLE001 - truncated or corrupt flatbuffers fail anywhere in the reader
        msg = " ".join(str(exc).split())[:160]
        raise FrontendError("bad_model", f"the TFLite flatbuffer cannot be decoded (truncated or corrupt?): "
                            f"{msg or type(exc).__name__}", where=str(path)) from None
    return s, model, buf


def _seq(x: Any) -> list:
    """A flatbuffer vector of the object API (None, a list or a NumPy array) as a list."""
    return [] if x is None else list(x)


def _str(x: Any) -> str:
    return x.decode("utf-8", "replace") if isinstance(x, (bytes, bytearray)) else ("" if x is None else str(x))


def dim_symbol(input_name: str, axis: int) -> str:
    """The symbol of dynamic dim ``axis`` of graph input ``input_name`` (``input_2_d0``): one per
    input and axis, since TFLite does not say which dynamic dims are equal; without a ``:`` so
    that fixing it (``--fix-dim input_2_d0=4``) types every value it reaches (``ir.dims.fix``)."""
    return f"{input_name}_d{axis}"


# ---------------------------------------------------------------------------- the conversion context
class Ctx:
    """What the handlers of ``tflite_ops`` see: the model, the graph being built, helpers."""

    def __init__(self, s: Any, model: Any, buf: bytes, sg_index: int, path: str) -> None:
        from ..table.loader import load_tables

        self.s, self.model, self.buf, self.path = s, model, buf, path
        self.sg = model.subgraphs[sg_index]
        self.tables = load_tables()
        self.reverse = self.tables.reverse_index(NAME)
        self.graph = Graph(_str(self.sg.name) or "main")
        self.builtin_names = _enum_names(s.BuiltinOperator)
        self.type_names = _enum_names(s.TensorType)
        self.act_names = _enum_names(s.ActivationFunctionType)
        self.pad_names = _enum_names(s.Padding)
        self.values: dict[int, Value] = {}
        self.floats: dict[int, Value] = {}  # tensor index → its dequantized (float) view
        self.node_name = ""
        self.builtin = ""
        self.reserved: set[str] = set()
        self.made: set[int] = set()  # the values the current op's handler created
        self.op: Any = None  # the operator being converted
        self.stack: list[int] = []  # the subgraphs being converted (a loop's cond/body inside the model's)
        self.keep_unread = False  # unmapped ops become OPAQUE nodes (report), not a load failure
        self.rounding = False  # a hybrid kernel quantizes at run time (metadata "opbridge.rounding")
        self.opcode_name = lambda op: _opcode_name(self, op)  # (builtin or custom code, is_custom)
        self.produced = {int(t) for o in self.sg.operators or [] for t in _seq(o.outputs)}
        from ..ir.infer import _onnx_enum_to_dtype

        self.enum_map = _onnx_enum_to_dtype(self.tables)

    # -------------------------------------------------------------- errors
    def fail(self, code: str, detail: str) -> FrontendError:
        return FrontendError(code, detail, node=self.node_name or None, op=self.builtin or None, where=self.path)

    # -------------------------------------------------------------- tensors
    def tensor(self, i: int) -> Any:
        return self.sg.tensors[i]

    def tname(self, i: int) -> str:
        return _str(self.tensor(i).name) or f"t{i}"

    def np_dtype(self, i: int) -> Any:
        tname = self.type_names.get(self.tensor(i).type, str(self.tensor(i).type))
        dt = _NP.get(tname)
        if dt is None:
            raise self.fail("unsupported_dtype", f"tensor {self.tname(i)!r} has TFLite type {tname}")
        return np.dtype(dt)

    def dtype(self, i: int) -> str:
        from ..table.dtypes import dtype_id

        return dtype_id(self.np_dtype(i))

    def shape(self, i: int) -> tuple[int, ...]:
        t = self.tensor(i)
        return tuple(int(d) for d in (t.shape if t.shape is not None else []))

    def input_type(self, i: int, name: str) -> TensorType:
        """The declared type of graph input ``i`` (named ``name``): a dim the signature declares
        -1 is the symbolic dim ``dim_symbol(name, axis)``, not the interpreter's default size."""
        dims = self.dims(i)
        return TensorType(self.dtype(i), tuple(dim_symbol(name, k) if d is None else d for k, d in enumerate(dims)))

    def dims(self, i: int) -> tuple[int | None, ...]:
        """The shape as far as it is known: dynamic dims (-1 in ``shape_signature``) are None (a
        tensor without dims is a scalar: converters leave ``hasRank`` unset on scalars too).
        ``shape`` holds the interpreter's default sizes (1 for a dynamic dim): handlers read
        ``dims`` for anything that is not a constant."""
        t = self.tensor(i)
        sig = _seq(t.shapeSignature)
        shape = self.shape(i)
        if len(sig) != len(shape):
            return shape
        return tuple(None if int(s) < 0 else d for s, d in zip(sig, shape))

    def static_spatial(self, i: int) -> tuple[int | None, ...]:
        """The dims of channels-last tensor ``i``, whose spatial dims must be static (a transposed
        convolution's pads come from the input size); a dynamic batch is fine."""
        dims = self.dims(i)
        if any(d is None for d in dims[1:-1]):
            raise self.fail("dynamic_shape", f"{self.builtin}: input {self.tname(i)!r} has dynamic spatial dims "
                                             f"{list(dims)}")
        return dims

    def data(self, i: int) -> np.ndarray | None:
        """The constant data of tensor ``i`` (None: not a constant)."""
        t = self.tensor(i)
        if t.buffer <= 0 or t.isVariable:
            return None
        b = self.model.buffers[t.buffer]
        if b.data is not None and len(b.data):
            raw = bytes(np.asarray(b.data, dtype=np.uint8))
        elif b.offset and b.offset > 1:
            if b.offset + b.size > len(self.buf):
                raise self.fail("bad_model", f"tensor {self.tname(i)!r}: its buffer lies past the end of the file")
            raw = self.buf[b.offset:b.offset + b.size]
        elif 0 in self.shape(i) and i not in self.produced and i not in self.values:
            raw = b""  # an empty constant has an empty buffer
        else:
            return None
        dt = self.np_dtype(i)
        shape = self.shape(i)
        t = self.tensor(i)
        if t.sparsity is not None:  # nonzero values + metadata (the input of a DENSIFY)
            if len(raw) % dt.itemsize:
                raise self.fail("bad_model", f"sparse tensor {self.tname(i)!r}: buffer of {len(raw)} bytes")
            try:
                return densify(np.frombuffer(raw, dtype=dt), shape, t.sparsity)
            except ValueError as exc:
                raise self.fail("bad_model", f"sparse tensor {self.tname(i)!r}: {exc}") from None
        count = int(np.prod(shape)) if shape else 1
        if len(raw) != count * dt.itemsize:
            raise self.fail("bad_model", f"tensor {self.tname(i)!r}: buffer of {len(raw)} bytes for shape {list(shape)}")
        return np.frombuffer(raw, dtype=dt).reshape(shape).copy()

    def quant(self, i: int) -> tuple[np.ndarray, np.ndarray, int] | None:
        """(scales, zero points, axis) of a quantized integer tensor, else None."""
        q = self.tensor(i).quantization
        if q is None or q.scale is None or len(q.scale) == 0:
            return None
        if self.np_dtype(i).kind not in "iu":
            return None
        scale = np.asarray(q.scale, dtype=np.float32)
        zp = np.asarray(q.zeroPoint if q.zeroPoint is not None and len(q.zeroPoint) else np.zeros(len(scale)),
                        dtype=np.int64)
        return scale, zp, int(q.quantizedDimension or 0)

    # -------------------------------------------------------------- values
    def raw(self, i: int) -> Value | None:
        """The value of tensor ``i`` as TFLite holds it (constants become IR constants)."""
        if i < 0:
            return None
        v = self.values.get(i)
        if v is None:
            arr = self.data(i)
            if arr is None:
                raise self.fail("bad_model", f"tensor {self.tname(i)!r} is read before it is produced")
            v = self.values[i] = self.graph.add_constant(self.tname(i), arr, self.dtype(i))
        return v

    def input(self, i: int) -> Value | None:
        """Tensor ``i`` as a float op reads it: quantized integers are dequantized (once)."""
        if i < 0:
            return None
        q = self.quant(i)
        if q is None:
            return self.raw(i)
        if i not in self.floats:
            self.floats[i] = self.dequantize(self.raw(i), q, f"{self.tname(i)}_dq")
        return self.floats[i]

    def dequantize(self, v: Value, q: tuple[np.ndarray, np.ndarray, int], name: str) -> Value:
        scale, zp, axis = q
        per_axis = scale.size > 1
        s = self.const(scale if per_axis else scale.reshape(()), "scale")
        z = self.const((zp if per_axis else zp.reshape(())).astype(np.dtype(v.type.dtype if v.type.dtype != "int32" else "int32")), "zp")
        attrs = {"axis": axis} if per_axis else {}
        y = self.emit("dequantize_linear", [v, s, z], attrs, names=[name], role="dequantize")[0]
        y.type = TensorType("float32", v.type.shape)
        return y

    def quantize(self, v: Value, i: int) -> Value:
        """The float result ``v`` quantized as output tensor ``i`` says."""
        q = self.quant(i)
        assert q is not None
        scale, zp, axis = q
        per_axis = scale.size > 1
        s = self.const(scale if per_axis else scale.reshape(()), "scale")
        z = self.const((zp if per_axis else zp.reshape(())).astype(self.np_dtype(i)), "zp")
        attrs = {"axis": axis} if per_axis else {}
        y = self.emit("quantize_linear", [v, s, z], attrs, role="quantize")[0]
        y.type = TensorType(self.dtype(i), v.type.shape)
        return y

    def weight(self, i: int, perm: list[int]) -> Value:
        """Tensor ``i`` (a filter) permuted by ``perm``: constants at conversion time (a per-axis
        quantized one keeps its scales, axis moved), other values by a transpose."""
        arr = self.data(i)
        if arr is None:
            return self.transpose(self.input(i), perm)  # type: ignore[arg-type]
        arr = np.ascontiguousarray(arr.transpose(perm))
        c = self.graph.add_constant(f"{self.tname(i)}_perm", arr, self.dtype(i))
        q = self.quant(i)
        if q is None:
            return c
        scale, zp, axis = q
        return self.dequantize(c, (scale, zp, perm.index(axis) if scale.size > 1 else axis), f"{self.tname(i)}_perm_dq")

    # -------------------------------------------------------------- building
    def const(self, arr: Any, name: str = "c") -> Value:
        from ..table.dtypes import dtype_id

        arr = np.asarray(arr)
        return self.graph.add_constant(f"{self.node_name or 'n'}_{name}", arr, dtype_id(arr.dtype))

    def i64(self, values: Any, name: str = "c") -> Value:
        return self.const(np.asarray(values, dtype=np.int64), name)

    def emit(self, op_id: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None, n: int = 1,
             names: list[str] | None = None, role: str = "") -> list[Value]:
        """Add a node named after the TFLite op (``role``: a suffix for the layout/quantization
        nodes around it, so passes and reports tell them from the op itself)."""
        while inputs and inputs[-1] is None:
            inputs = inputs[:-1]
        name = (self.node_name or op_id) + (f"/{role}" if role else "")
        node = self.graph.add_node(op_id, inputs, attrs or {}, outputs=names or n, name=name)
        for v, t in zip(node.outputs, infer_node(node, self.tables, self.enum_map)):  # the next steps read shapes
            v.type = t
            self.made.add(id(v))
        if op_id == "constant_of_shape" and node.outputs[0].type.dtype is None:  # the value's dtype
            from ..table.dtypes import dtype_id

            node.outputs[0].type = TensorType(dtype_id(np.asarray(node.attrs["value"]).dtype), node.outputs[0].type.shape)
        return list(node.outputs)

    def onnx_enum(self, dtype: str) -> int:
        """The ``to`` of a ``cast`` (ONNX's element type numbers, as the IR's cast takes them)."""
        for k, d in self.enum_map.items():
            if d == dtype:
                return k
        raise self.fail("unsupported_dtype", f"no cast to {dtype}")

    def cast(self, v: Value, dtype: str) -> Value:
        return v if v.type.dtype == dtype else self.emit("cast", [v], {"to": self.onnx_enum(dtype)})[0]

    def transpose(self, v: Value, perm: list[int]) -> Value:
        return self.emit("transpose", [v], {"perm": list(perm)}, role="transpose")[0]

    def nchw(self, v: Value) -> Value:
        r = v.type.rank or len(self.shape_of(v))
        return self.transpose(v, [0, r - 1, *range(1, r - 1)])

    def nhwc(self, v: Value) -> Value:
        outs = _seq(self.op.outputs) if self.op is not None else []
        if v.type.shape is None and outs:  # an op without a shape rule: the output tensor's shape, channels-first
            s = self.dims(int(outs[0]))
            v.type = TensorType(v.type.dtype, (s[0], s[-1], *s[1:-1]))
        r = v.type.rank or len(self.shape_of(v))
        return self.transpose(v, [0, *range(2, r), 1])

    def shape_of(self, v: Value) -> tuple[int, ...]:
        if v.type.shape is None:
            raise self.fail("dynamic_shape", f"value {v.name!r} has no static shape")
        return tuple(v.type.shape)  # type: ignore[arg-type]

    def as_int64(self, v: Value) -> Value:
        """An index/shape operand as int64 (the IR's index type)."""
        if v.is_const:
            return self.i64(np.asarray(v.const).astype(np.int64), "idx")
        if v.type.dtype == "int64":
            return v
        return self.cast(v, "int64")

    def const_of(self, i: int, what: str) -> np.ndarray:
        """Input tensor ``i`` of the op, which must be a constant (``what`` names it)."""
        arr = self.data(i) if i >= 0 else None
        if arr is None:
            raise self.fail("requires_constant_input", f"{self.builtin}: the {what} must be a constant")
        return arr

    def _implied(self, name: str) -> bool:
        """A fused activation the op's quantized output range already applies (TFLite's kernels
        fold it into the output clamp): quantizing clamps to the same bounds, so it is left out."""
        bounds = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}.get(name)
        outs = list(self.op.outputs) if self.op is not None and self.op.outputs is not None else []
        q = self.quant(int(outs[0])) if bounds and outs else None
        if q is None or q[0].size != 1:
            return False
        info = np.iinfo(self.np_dtype(int(outs[0])))
        scale, zp = float(q[0][0]), int(q[1][0])
        lo, hi = (info.min - zp) * scale, (info.max - zp) * scale
        return lo >= bounds[0] and (bounds[1] is None or hi <= bounds[1])

    def activation(self, v: Value, fn: int | None) -> Value:
        name = self.act_names.get(fn or 0, str(fn))
        if name == "NONE" or self._implied(name):
            return v
        if name == "RELU":
            return self.emit("relu", [v])[0]
        if name in ("RELU6", "RELU_N1_TO_1"):
            lo, hi = (0.0, 6.0) if name == "RELU6" else (-1.0, 1.0)
            dt = np.dtype(v.type.dtype or "float32") if v.type.dtype in ("float32", "float16", "float64") else np.float32
            return self.emit("clip", [v, self.const(np.asarray(lo, dt), "lo"), self.const(np.asarray(hi, dt), "hi")])[0]
        if name == "TANH":
            return self.emit("tanh", [v])[0]
        raise self.fail("unsupported_attribute_value", f"fused activation {name} is not supported")


# ---------------------------------------------------------------------------- conversion
def _opcode_name(ctx: Ctx, op: Any) -> tuple[str, bool]:
    """(builtin name or custom code, is_custom)."""
    code = ctx.model.operatorCodes[op.opcodeIndex]
    b = max(int(code.builtinCode or 0), int(code.deprecatedBuiltinCode or 0))
    name = ctx.builtin_names.get(b, f"BUILTIN_{b}")
    if name == "CUSTOM":
        return _str(code.customCode) or "CUSTOM", True
    return name, False


def _signature(model: Any, signature: str | None) -> Any:
    sigs = list(model.signatureDefs or [])
    if signature is not None:
        for sd in sigs:
            if _str(sd.signatureKey) == signature:
                return sd
        raise FrontendError("bad_model", f"no signature {signature!r} (the model has "
                            f"{[_str(sd.signatureKey) for sd in sigs]})")
    return sigs[0] if sigs else None


def io_names(model: Any, signature: str | None = None) -> tuple[list[tuple[int, str]], list[tuple[int, str]], Any]:
    """[(tensor index, name)] of the inputs and outputs (signature names and order when the
    model has a signature), and the signature (None when it has none)."""
    sd = _signature(model, signature)
    if sd is not None:
        ins = [(int(t.tensorIndex), _str(t.name)) for t in sd.inputs or []]
        outs = [(int(t.tensorIndex), _str(t.name)) for t in sd.outputs or []]
        return ins, outs, sd
    sg = model.subgraphs[0]
    ins = [(int(i), _str(sg.tensors[i].name) or f"input_{k}") for k, i in enumerate(_seq(sg.inputs))]
    outs = [(int(i), _str(sg.tensors[i].name) or f"output_{k}") for k, i in enumerate(_seq(sg.outputs))]
    return ins, outs, None


def _bind(ctx: Ctx, ti: int, v: Value, made: set[int], out_names: dict[int, str]) -> None:
    """Tensor ``ti`` is ``v`` (a float result is quantized when the tensor is quantized)."""
    quantized = ctx.quant(ti) is not None and v.type.dtype != ctx.dtype(ti)
    if quantized and v.type.shape is None and id(v) in made:  # typed before quantize reads its shape
        v.type = TensorType(v.type.dtype or "float32", ctx.dims(ti))
    if quantized:
        v = ctx.quantize(v, ti)  # readers dequantize it again: the int8 rounding is part of the model
        made.add(id(v))
    if v.type.shape is None and id(v) in made:
        t = ctx.tensor(ti)
        unknown_rank = not ctx.shape(ti) and not t.hasRank and ti not in out_names  # a graph output keeps a shape
        v.type = TensorType(v.type.dtype or ctx.dtype(ti), None if unknown_rank else ctx.dims(ti))
    elif id(v) in made and None in v.type.shape:  # dims inference left open (a reshape to tf.shape arithmetic)
        declared = ctx.dims(ti)  # that the tensor's shape_signature declares static
        if len(_seq(ctx.tensor(ti).shapeSignature)) == len(declared) == len(v.type.shape):
            v.type = TensorType(v.type.dtype, tuple(k if d is None and isinstance(k, int) else d
                                                    for d, k in zip(v.type.shape, declared)))
    if id(v) in made and v.producer is not None:
        want = out_names.get(ti) or ctx.tname(ti)
        if want in ctx.reserved and out_names.get(ti) != want:
            want = f"{want}_t"
        v.name = ctx.graph.unique_name(want)
    ctx.values[ti] = v


#: the node being converted (named by ``load`` when an unexpected error escapes a handler)
_LAST: dict[str, str] = {}


def reachable(model: Any, sg_index: int, builtin_names: dict[int, str]) -> list[int]:
    """Subgraph ``sg_index`` and the subgraphs its WHILE ops run (cond and body), transitively, in order."""
    seen, todo = [sg_index], [sg_index]
    while todo:
        for op in model.subgraphs[todo.pop(0)].operators or []:
            code = model.operatorCodes[op.opcodeIndex]
            b = max(int(code.builtinCode or 0), int(code.deprecatedBuiltinCode or 0))
            if builtin_names.get(b) != "WHILE" or op.builtinOptions is None:
                continue
            for k in (op.builtinOptions.condSubgraphIndex, op.builtinOptions.bodySubgraphIndex):
                k = int(k or 0)
                if not 0 <= k < len(model.subgraphs):
                    raise FrontendError("bad_model", f"WHILE refers to subgraph {k}, which does not exist")
                if k not in seen:
                    seen.append(k)
                    todo.append(k)
    return seen


def _mapped(ctx: Ctx, name: str, custom: bool) -> bool:
    """Whether the op (builtin or custom ``name``) has a handler and a reverse-index entry."""
    from . import tflite_ops
    from .tflite_custom import CUSTOM_HANDLERS

    if custom:
        return name in CUSTOM_HANDLERS
    return name in STATE_OPS or (tflite_ops.HANDLERS.get(name) is not None and name in ctx.reverse)


def _check_mapped(ctx: Ctx, sg_index: int) -> None:
    """Every op of the model's subgraph and of the subgraphs its loops run must have a handler
    and a reverse-index entry: all unmapped op types are reported together, naming the first node.
    With ``ctx.keep_unread`` (report) they are kept as ``OPAQUE`` nodes instead (``run_ops``)."""
    from . import tflite_ops
    from .tflite_custom import CUSTOM_HANDLERS

    unmapped: dict[str, str] = {}
    for k in reachable(ctx.model, sg_index, ctx.builtin_names):
        sg = ctx.model.subgraphs[k]
        for op in sg.operators or []:
            name, custom = _opcode_name(ctx, op)
            first = _str(sg.tensors[op.outputs[0]].name) if op.outputs is not None and len(op.outputs) else name
            if custom and name in CUSTOM_HANDLERS or not custom and name in STATE_OPS:
                continue
            if (name not in CUSTOM_HANDLERS) if custom else (tflite_ops.HANDLERS.get(name) is None or name not in ctx.reverse):
                unmapped.setdefault(("custom op " if custom else "") + name, first or name)
    if unmapped and not ctx.keep_unread:
        kinds = sorted(unmapped)
        node = next(iter(unmapped.values()))  # the first unmapped node in graph order
        raise FrontendError("unsupported_op", f"{len(kinds)} TFLite op type(s) have no IR mapping: {', '.join(kinds)}",
                            node=node, where=ctx.path)


def run_ops(ctx: Ctx, out_names: dict[int, str]) -> None:
    """Convert the operators of ``ctx.sg`` in order into ``ctx.graph`` (mapping checked before)."""
    from . import tflite_ops
    from .tflite_custom import CUSTOM_HANDLERS

    for op in ctx.sg.operators or []:
        name, custom = _opcode_name(ctx, op)
        ctx.builtin = name
        ctx.node_name = _LAST["node"] = ctx.tname(op.outputs[0]) if op.outputs is not None and len(op.outputs) else name
        ctx.made, ctx.op = set(), op
        if (custom or name not in tflite_ops.COMPLEX_READERS) and any(
                tflite_ops.is_complex(ctx, int(i)) for i in _seq(op.inputs)):
            raise ctx.fail("unsupported_dtype", f"{name} reads a complex tensor (complex values are read by "
                           f"{', '.join(sorted(tflite_ops.COMPLEX_READERS))} only)")
        if not custom and name in STATE_OPS:  # resource variables: state inputs/outputs (tflite_state)
            results = tflite_state.handle(ctx, op, name)
        elif ctx.keep_unread and not _mapped(ctx, name, custom):
            results = _opaque(ctx, op, ("custom op " if custom else "") + name)
        else:
            results = (CUSTOM_HANDLERS if custom else tflite_ops.HANDLERS)[name](ctx, op)
        for ti, v in zip(list(op.outputs), results):
            if ti >= 0 and v is not None:
                _bind(ctx, int(ti), v, ctx.made, out_names)


def _opaque(ctx: Ctx, op: Any, what: str) -> list[Value]:
    """An op with no IR mapping kept as an ``OPAQUE`` node, typed as the file declares its outputs."""
    outs = [int(t) for t in _seq(op.outputs)]
    ins = [ctx.input(int(i)) if int(i) >= 0 else None for i in _seq(op.inputs)]
    node = ctx.graph.add_node(OPAQUE, ins, {"source_op": what, "reason": "unsupported_op",
                                            "detail": f"TFLite {what} has no IR mapping"},
                              outputs=len(outs), name=ctx.node_name or what)
    for v, t in zip(node.outputs, outs):
        v.type = TensorType("float32" if ctx.quant(t) is not None else ctx.dtype(t), ctx.dims(t))
        ctx.made.add(id(v))
    return list(node.outputs)


def convert_subgraph(ctx: Ctx, sg_index: int, graph: Graph, inputs: list[Value]) -> list[Value]:
    """Subgraph ``sg_index`` (a loop's cond or body) converted into ``graph`` on the values
    ``inputs`` (one per subgraph input); returns its output values. The context is restored after."""
    if sg_index in ctx.stack:
        raise ctx.fail("bad_model", f"subgraph {sg_index} runs itself (recursive control flow)")
    sg = ctx.model.subgraphs[sg_index]
    sg_ins = [int(i) for i in _seq(sg.inputs)]
    if len(sg_ins) != len(inputs):
        raise ctx.fail("bad_model", f"subgraph {sg_index} takes {len(sg_ins)} inputs, given {len(inputs)}")
    saved = (ctx.sg, ctx.graph, ctx.values, ctx.floats, ctx.produced, ctx.reserved, ctx.node_name, ctx.builtin,
             ctx.made, ctx.op)
    ctx.stack.append(sg_index)
    try:
        ctx.sg, ctx.graph, ctx.values, ctx.floats, ctx.reserved = sg, graph, {}, {}, set()
        ctx.produced = {int(t) for o in sg.operators or [] for t in _seq(o.outputs)}
        for ti, v in zip(sg_ins, inputs):
            ctx.values[ti] = v
        run_ops(ctx, {})
        ctx.builtin = ""
        outs = []
        for ti in _seq(sg.outputs):
            v = ctx.raw(int(ti))
            assert v is not None
            outs.append(v)
        return outs
    finally:
        ctx.stack.pop()
        (ctx.sg, ctx.graph, ctx.values, ctx.floats, ctx.produced, ctx.reserved, ctx.node_name, ctx.builtin,
         ctx.made, ctx.op) = saved


def convert(s: Any, model: Any, buf: bytes, path: str, signature: str | None = None,
            keep_unread: bool = False) -> Model:
    ins, outs, sd = io_names(model, signature)
    sg_index = int(sd.subgraphIndex) if sd is not None else 0
    if sg_index >= len(model.subgraphs):
        raise FrontendError("bad_model", f"signature subgraph {sg_index} does not exist", where=path)
    ctx = Ctx(s, model, buf, sg_index, path)
    ctx.keep_unread = keep_unread
    g = ctx.graph
    out_names = {ti: n for ti, n in outs}
    ctx.reserved = {n for _, n in ins} | set(out_names.values())
    for ti, name in ins:
        ctx.values[ti] = g.add_input(name, ctx.input_type(ti, name))
    # every op is looked at before any is converted: all unmapped ops are reported together
    _check_mapped(ctx, sg_index)
    ctx.stack.append(sg_index)
    run_ops(ctx, out_names)
    ctx.builtin = ""
    atol: dict[str, float] = {}
    seen: set[int] = set()
    for ti, name in outs:
        ctx.node_name = name
        v = ctx.raw(ti)
        assert v is not None
        if v.name != name or id(v) in seen or v.producer is None:
            v = ctx.emit("identity", [v], names=[name])[0]
        seen.add(id(v))
        g.outputs.append(v)
        step = _quant_step(ctx, ti)
        if step is not None:
            atol[v.name] = step
    state_outs, state_meta = tflite_state.finish(ctx)
    for name, v in state_outs:  # the state written back (the first reads became graph inputs)
        ctx.node_name = name
        g.outputs.append(ctx.emit("identity", [v], names=[name])[0])
    meta = {"opbridge.tflite_inputs": json.dumps([[ti, v.name] for (ti, _), v in zip(ins, g.inputs)]),
            "opbridge.tflite_outputs": json.dumps([[ti, v.name] for (ti, _), v in zip(outs, g.outputs)])}
    if sd is not None:
        meta["opbridge.tflite_signature"] = _str(sd.signatureKey)
    if atol:
        meta["opbridge.source_atol"] = json.dumps(atol)
    if ctx.rounding:
        meta["opbridge.rounding"] = "hybrid"
    warnings: tuple[str, ...] = ()
    if state_meta:
        meta.update(state_meta)
        ins_st = [p["input"] for p in json.loads(state_meta["opbridge.state"])]
        warnings = (f"stateful model: {len(ins_st)} resource variable(s) are carried as state inputs and outputs "
                    f"({ins_st[0]} -> {ins_st[0]}_out, …): feed each call the previous call's state outputs, the "
                    "first call metadata 'opbridge.initial_state'",)
    return Model(g, source=path, source_format=NAME, metadata=meta, warnings=warnings)


def _quant_step(ctx: Ctx, ti: int) -> float | None:
    """One quantization step of output tensor ``ti`` in its own units: 1 for a quantized
    integer output, the scale for a float output dequantized from a quantized tensor."""
    if ctx.quant(ti) is not None:
        return QUANT_STEPS
    for op in ctx.sg.operators or []:
        if op.outputs is not None and ti in list(op.outputs):
            name, _ = _opcode_name(ctx, op)
            if name == "DEQUANTIZE" and ctx.quant(int(op.inputs[0])) is not None:
                return QUANT_STEPS * float(np.max(ctx.quant(int(op.inputs[0]))[0]))
    return None


# ---------------------------------------------------------------------------- frontend contract
def matches(source: Any) -> bool:
    return isinstance(source, (str, os.PathLike)) and str(source).lower().endswith(".tflite")


def load(source: str | os.PathLike[str], signature: str | None = None, exact_int8: bool = False,
         keep_unread: bool = False, **opts: Any) -> Model:
    """The validated IR of a ``.tflite`` file (``signature``: which signature, default the first).

    Quantized tensors are read as what they are: int8/uint8 values with ``dequantize_linear`` /
    ``quantize_linear`` around the ops that compute on them (the QDQ form every target writes
    as integer kernels). ``exact_int8`` (``--exact-int8``) instead rewrites 8-bit convolutions,
    fully connected layers, average pools and hard swish into LiteRT's integer arithmetic in
    float ops (``passes.requantize``): bit-exact against the interpreter, but a float model.
    ``keep_unread``: an op with no IR mapping (a custom op) becomes an ``OPAQUE`` node every
    target refuses (``report``), instead of failing the load."""
    from ..ir.gcpause import gc_paused
    from ..compile.passes import requantize, verify

    path = str(source)
    s, model, buf = read_model(path)
    with gc_paused():
        try:
            m = convert(s, model, buf, path, signature, keep_unread)
            if exact_int8:  # 8-bit conv, fully connected, average pool, hard swish as LiteRT computes them
                requantize.run(m.graph)
                m.metadata["opbridge.exact_int8"] = "1"
            verify.run(m.graph)
        except FrontendError:
            raise
        except OpbridgeError as exc:
            raise FrontendError(exc.code, exc.detail, node=exc.node, op=exc.op, where=exc.where or path) from None
        except Exception as exc:  # noqa: BLE001 - a malformed model: one line with the reason
            msg = " ".join(str(exc).split())[:300]
            raise FrontendError("bad_model", f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__,
                                node=_LAST.get("node"), where=path) from None
    return m


def _interpreter(path: str) -> Any:
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        try:
            import tensorflow as tf

            Interpreter = tf.lite.Interpreter
        except ImportError:
            return None
    return Interpreter(model_path=path)


def run_source(source: str | os.PathLike[str], feeds: dict[str, Any], names: list[str],
               signature: str | None = None, **opts: Any) -> list[Any]:
    """The original file run by the LiteRT interpreter (the signature runner when it has one)."""
    from . import SourceUnavailable

    path = str(source)
    try:
        _, model, _ = read_model(path)
        ins, outs, sd = io_names(model, signature)
        interp = _interpreter(path)
    except Exception as exc:  # noqa: BLE001
        raise SourceUnavailable(f"the LiteRT interpreter cannot load the source: {str(exc).splitlines()[0]}") from None
    if interp is None:
        raise SourceUnavailable("neither ai-edge-litert nor tensorflow is installed")
    # the IR's names are the signature's/tensors' names, except where a name had to be made unique
    m_ins = [n for _, n in ins]
    m_outs = [n for _, n in outs]
    try:
        if sd is not None:
            runner = interp.get_signature_runner(_str(sd.signatureKey))
            res = runner(**{k: np.asarray(feeds[k]) for k in m_ins if k in feeds})
            by_name = dict(res)
        else:
            declared = {int(d["index"]): tuple(int(k) for k in d["shape"]) for d in interp.get_input_details()}
            for ti, n in ins:  # a dynamic dim (-1 in the signature) takes the feed's size
                if declared.get(ti) != np.shape(feeds[n]):
                    interp.resize_tensor_input(ti, list(np.shape(feeds[n])))
            interp.allocate_tensors()
            for ti, n in ins:
                interp.set_tensor(ti, np.asarray(feeds[n]))
            interp.invoke()
            by_name = {n: interp.get_tensor(ti) for ti, n in outs}
    except Exception as exc:  # noqa: BLE001 - the interpreter's own refusals
        raise SourceUnavailable(f"the LiteRT interpreter cannot run the source: "
                                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    missing = [n for n in names if n not in by_name]
    if missing:
        raise SourceUnavailable(f"the interpreter has no outputs {missing} (it has {m_outs})")
    return [np.asarray(by_name[n]) for n in names]
