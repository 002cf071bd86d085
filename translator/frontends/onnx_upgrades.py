"""Version-range handlers: older ONNX op forms → the IR's newest form.

Each ``@handler(op, v)`` serves schemas with since_version in [v, next registered v).
The generic handler (attributes and inputs as they are) is registered at the version
where ONNX's form became the IR form, so newer versions need no code here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..ir.graph import Value

if TYPE_CHECKING:
    from .onnx import _Ctx

Handler = Callable[["_Ctx", Any, list[Value | None], dict[str, Any]], list[Value]]
HANDLERS: dict[str, list[tuple[int, Handler]]] = {}


def handler(op_type: str, since: int) -> Callable[[Handler], Handler]:
    """Register ``fn`` for ``op_type`` schemas with since_version >= ``since``."""

    def deco(fn: Handler) -> Handler:
        lst = HANDLERS.setdefault(op_type, [])
        lst.append((since, fn))
        lst.sort(key=lambda t: t[0])
        return fn

    return deco


def pick_handler(op_type: str, schema_version: int) -> Handler | None:
    chosen = None
    for since, fn in HANDLERS.get(op_type, ()):
        if since <= schema_version:
            chosen = fn
    return chosen


def generic(ctx: "_Ctx", node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """The node as it is: attributes and inputs map onto the IR op unchanged."""
    return ctx.generic(node, inputs, attrs)



def _with_input(ctx: _Ctx, inputs: list[Value | None], index: int, value: Any, dtype: Any = np.int64) -> list[Value | None]:
    ins = list(inputs) + [None] * max(0, index + 1 - len(inputs))
    if value is not None:
        ins[index] = ctx.const(np.asarray(value, dtype=dtype), f"in{index}")
    return ins


def _attr_to_input(name: str, index: int, dtype: Any = np.int64):
    def fn(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
        attrs = dict(attrs)
        value = attrs.pop(name, None)
        return generic(ctx, node, _with_input(ctx, inputs, index, value, dtype), attrs)

    return fn


# axes moved from attribute to input: ReduceSum at 13, the other reductions at 18
for _op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
            "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"):
    handler(_op, 1)(_attr_to_input("axes", 1))
    handler(_op, 18)(generic)
handler("ReduceSum", 1)(_attr_to_input("axes", 1))
handler("ReduceSum", 13)(generic)
for _op in ("Squeeze", "Unsqueeze"):
    handler(_op, 1)(_attr_to_input("axes", 1))
    handler(_op, 13)(generic)
_split_v1 = _attr_to_input("split", 1)


@handler("Split", 1)
@handler("Split", 13)
def _split_v13(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """Before opset 18, no ``split`` means equal parts, one per output: ``num_outputs`` of the newest form."""
    has_split = "split" in attrs or (len(inputs) > 1 and inputs[1] is not None)
    if not has_split:
        attrs = {**attrs, "num_outputs": len(node.output)}
    return _split_v1(ctx, node, inputs, attrs)


handler("Split", 18)(generic)
handler("TopK", 1)(_attr_to_input("k", 1))
handler("TopK", 10)(generic)


@handler("Slice", 1)
def _slice_v1(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    attrs = dict(attrs)
    ins = list(inputs)
    for i, key in ((1, "starts"), (2, "ends"), (3, "axes")):
        ins = _with_input(ctx, ins, i, attrs.pop(key, None))
    return generic(ctx, node, ins, attrs)


handler("Slice", 10)(generic)


@handler("Pad", 1)
def _pad_v2(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    attrs = dict(attrs)
    ins = _with_input(ctx, inputs, 1, attrs.pop("pads", attrs.pop("paddings", None)))
    value = attrs.pop("value", None)
    if value is not None and inputs[0] is not None and inputs[0].type.dtype is not None:
        from ..table.dtypes import numpy_dtype

        ins = _with_input(ctx, ins, 2, value, numpy_dtype(inputs[0].type.dtype))
    elif value not in (None, 0.0):
        ins = _with_input(ctx, ins, 2, value, np.float32)
    return generic(ctx, node, ins, attrs)


handler("Pad", 11)(generic)


@handler("Clip", 1)
def _clip_v6(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    attrs = dict(attrs)
    dt = np.float32
    if inputs and inputs[0] is not None and inputs[0].type.dtype:
        from ..table.dtypes import numpy_dtype

        dt = numpy_dtype(inputs[0].type.dtype)
    ins = list(inputs)
    lo, hi = attrs.pop("min", None), attrs.pop("max", None)
    ins = _with_input(ctx, ins, 1, lo, dt)
    ins = _with_input(ctx, ins, 2, hi, dt)
    return generic(ctx, node, ins, attrs)


handler("Clip", 11)(generic)


@handler("Dropout", 1)
def _dropout_v7(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    attrs = dict(attrs)
    attrs.pop("is_test", None)
    ratio = attrs.pop("ratio", None)
    return generic(ctx, node, _with_input(ctx, inputs, 1, ratio, np.float32), attrs)


handler("Dropout", 12)(generic)


@handler("BatchNormalization", 1)
def _bn_old(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    attrs = {k: v for k, v in attrs.items() if k not in ("spatial", "is_test", "consumed_inputs")}
    return generic(ctx, node, inputs, attrs)


handler("BatchNormalization", 14)(generic)


def _coerced_2d(op_id: str):
    """Softmax/LogSoftmax/Hardmax before 13: flatten to 2-D at ``axis`` (default 1)."""

    def fn(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
        x = inputs[0]
        assert x is not None
        axis = int(attrs.get("axis", 1))
        if x.type.rank is not None and (axis == x.type.rank - 1 or axis == -1):
            return ctx.emit(op_id, [x], {"axis": -1}, 1, [node.output[0]])
        (shape,) = ctx.emit("shape", [x], {}, 1, [f"{ctx.node_name}_shape"])
        (flat,) = ctx.emit("flatten", [x], {"axis": axis}, 1, [f"{ctx.node_name}_flat"])
        (y,) = ctx.emit(op_id, [flat], {"axis": 1}, 1, [f"{ctx.node_name}_2d"])
        return ctx.emit("reshape", [y, shape], {}, 1, [node.output[0]])

    return fn


for _op, _id in (("Softmax", "softmax"), ("LogSoftmax", "log_softmax"), ("Hardmax", "hardmax")):
    handler(_op, 1)(_coerced_2d(_id))
    handler(_op, 13)(generic)


@handler("Upsample", 1)
def _upsample(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    """Upsample (deprecated) = Resize with asymmetric coordinates and floor rounding."""
    mode = attrs.get("mode", "nearest")
    ins: list[Value | None] = [inputs[0], None]
    if len(inputs) > 1 and inputs[1] is not None:
        ins.append(inputs[1])
    else:
        ins = _with_input(ctx, ins, 2, attrs.get("scales"), np.float32)
    out_attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
                 "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return ctx.emit("resize", ins, out_attrs, 1, [node.output[0]])


@handler("Resize", 10)
def _resize_v10(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    attrs = dict(attrs)
    attrs.setdefault("coordinate_transformation_mode", "asymmetric")
    attrs.setdefault("nearest_mode", "floor")
    return ctx.emit("resize", [inputs[0], None, inputs[1]], attrs, 1, [node.output[0]])


handler("Resize", 11)(generic)


@handler("Scatter", 1)
def _scatter(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    return ctx.emit("scatter_elements", inputs, attrs, 1, [node.output[0]])


@handler("DFT", 17)
def _dft_v17(ctx: _Ctx, node: Any, inputs: list[Value | None], attrs: dict[str, Any]) -> list[Value]:
    attrs = dict(attrs)
    axis = attrs.pop("axis", 1)
    return generic(ctx, node, _with_input(ctx, inputs, 2, axis), attrs)


handler("DFT", 20)(generic)
