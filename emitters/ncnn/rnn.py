"""ncnn's LSTM and GRU layers for ONNX's LSTM and GRU over one sequence (batch 1, default
activations): the sequence as a (T, input) blob, the weights re-ordered into ncnn's gate
order and stored in ``model.bin``, Y as (T, directions · hidden), read back as (T, D, 1, H).

ncnn's gate order is I F O G for LSTM (ONNX: i o f c) and R U N for GRU (ONNX: z r h); the
GRU's new gate is computed with the reset applied after the recurrent product (ONNX's
``linear_before_reset=1``, PyTorch's form). The last hidden state Y_h is read from Y (the
last step forward, the first step backward); the LSTM's last cell state Y_c is not an ncnn
output here, so an LSTM whose Y_c is read is refused.
"""
from __future__ import annotations

import numpy as np

from .codegen import NodeEmit, live, refuse, shape_params, tagged
from .registry import rule

#: ONNX gate blocks → ncnn's order
_ORDER = {"lstm": (0, 2, 1, 3), "gru": (1, 0, 2)}


def _gates(a: np.ndarray, op: str, hidden: int) -> np.ndarray:
    """``a`` (D, G·H, ...) with its gate blocks in ncnn's order."""
    blocks = [a[:, g * hidden:(g + 1) * hidden] for g in range(len(_ORDER[op]))]
    return np.concatenate([blocks[g] for g in _ORDER[op]], axis=1)


def _recurrence(e: NodeEmit, op: str) -> None:
    x_shape = e.shape(0)
    w, r = e.need_const(1, "W"), e.need_const(2, "R")
    b = e.const(3)
    if e.value(3) is not None and b is None:
        raise refuse("requires_constant_input", f"{op}'s B is computed at run time: ncnn stores it as a weight")
    if e.attr("layout") or e.attr("clip") is not None or e.attr("activations") or e.attr("input_forget"):
        raise refuse("unsupported_attribute_value", f"ncnn's {op.upper()} has the default activations, no clip, "
                                                    "the sequence first")
    if e.value(4) is not None:
        raise refuse("unsupported_attribute_value", f"ncnn's {op.upper()} takes no sequence lengths")
    for i in ((5, 6) if op == "lstm" else (5,)):
        h0 = e.const(i)
        if e.value(i) is not None and (h0 is None or np.any(h0)):
            raise refuse("unsupported_attribute_value", f"ncnn's {op.upper()} starts from a zero state here")
    if op == "lstm" and e.value(7) is not None and (e.const(7) is None or np.any(e.const(7))):
        raise refuse("unsupported_attribute_value", "ncnn's LSTM has no peepholes")
    if op == "gru" and not int(e.attr("linear_before_reset") or 0):
        raise refuse("unsupported_attribute_value", "ncnn's GRU applies the reset after the recurrent product "
                                                    "(linear_before_reset=1)")
    if op == "lstm" and len(e.node.outputs) > 2 and live(e.node.outputs[2]):
        raise refuse("unsupported_attribute_value", "the LSTM's last cell state (Y_c): not an ncnn output here")
    if len(x_shape) != 3 or x_shape[1] != 1:
        raise refuse("rank_limit", f"ncnn's {op.upper()} runs one sequence (batch 1); X is {list(x_shape)}")
    steps, size = x_shape[0], x_shape[2]
    d = w.shape[0]
    hidden = r.shape[-1]
    direction = {"forward": 0, "reverse": 1, "bidirectional": 2}[
        (e.attr("direction") or "forward").decode() if isinstance(e.attr("direction"), bytes)
        else (e.attr("direction") or "forward")]
    gates = len(_ORDER[op])
    wx = _gates(np.asarray(w, np.float32), op, hidden)
    wh = _gates(np.asarray(r, np.float32), op, hidden)
    bias = np.zeros((d, 2 * gates * hidden), np.float32) if b is None else np.asarray(b, np.float32)
    wb, rb = _gates(bias[:, :gates * hidden], op, hidden), _gates(bias[:, gates * hidden:], op, hidden)
    if op == "lstm":
        bc = wb + rb
    else:  # R U N: the reset and update biases summed, the new gate's two kept apart
        bc = np.concatenate([wb[:, :2 * hidden] + rb[:, :2 * hidden], wb[:, 2 * hidden:], rb[:, 2 * hidden:]], axis=1)
    x = e.input(0, "F")  # (T, 1, I): the batch of 1 is the middle dim
    seq = e.top()
    e.add("Reshape", [x], [seq], shape_params((steps, size)))
    y = e.top()
    params = [f"0={hidden}", f"1={wx.size}", f"2={direction}"]
    e.add(op.upper(), [seq], [y], params, (tagged(wx), tagged(bc), tagged(wh)))
    out = e.top()
    e.add("Reshape", [y], [out], shape_params((steps, d, 1, hidden)))
    e.output(0, out, "F")
    if len(e.node.outputs) > 1 and live(e.node.outputs[1]):
        last = []
        for k in range(d):
            t = steps - 1 if (direction == 0 or (direction == 2 and k == 0)) else 0
            c = e.top()
            e.add("Crop", [y], [c], [f"-23309=2,{t},{k * hidden}", f"-23310=2,{t + 1},{(k + 1) * hidden}",
                                       "-23311=2,0,1"])
            last.append(c)
        yh = last[0]
        if len(last) > 1:
            yh = e.top()
            e.add("Concat", last, [yh], ["0=0"])
        h = e.top()
        e.add("Reshape", [yh], [h], shape_params((d, 1, hidden)))
        e.output(1, h, "F")


@rule("lstm")
def lstm(e: NodeEmit) -> None:
    _recurrence(e, "lstm")


@rule("gru")
def gru(e: NodeEmit) -> None:
    _recurrence(e, "gru")
