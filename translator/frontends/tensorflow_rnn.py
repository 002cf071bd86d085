"""Keras LSTM / GRU layers in a TensorFlow graph → the IR's ``lstm`` / ``gru`` ops.

Keras (TensorFlow backend, CPU) runs a recurrent layer as a ``While`` loop over TensorLists:
the input is unstacked time-major (``TensorListFromTensor``), the body reads step ``t``
(``TensorListGetItem``), runs the cell and writes the output (``TensorListSetItem``); the
outputs are restacked (``TensorListStack``). The loop is recognised, not guessed: the body's
ops must be exactly those of a Keras LSTM cell (default activations, with bias) or GRU cell
(``reset_after=True``, with bias), the weights come from the loop's constant inputs, and the
loop must run over every step from 0. Anything else is refused naming the ``While`` node.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from .tensorflow_ops import handles

_LSTM_BODY = Counter({"TensorListGetItem": 1, "AddV2": 4, "MatMul": 2, "BiasAdd": 1, "Split": 1, "Sigmoid": 3,
                      "Tanh": 2, "Mul": 3, "TensorListSetItem": 1})
_GRU_BODY = Counter({"TensorListGetItem": 1, "AddV2": 7, "Split": 2, "MatMul": 2, "Squeeze": 2, "BiasAdd": 1,
                     "StridedSlice": 3, "Sigmoid": 2, "Mul": 3, "Sub": 1, "Tanh": 1, "TensorListSetItem": 1})
_PLUMBING = frozenset({"Identity", "NoOp", "Const"})


class _Body:
    """A FunctionDef seen as a graph: references resolved to ('arg', i) or (node, output index)."""

    def __init__(self, fdef: Any) -> None:
        self.fdef = fdef
        self.args = {a.name: i for i, a in enumerate(fdef.signature.input_arg)}
        self.nodes = {n.name: n for n in fdef.node_def}
        self.rets = [fdef.ret[a.name] for a in fdef.signature.output_arg]

    def src(self, ref: str) -> tuple[Any, int]:
        ref = ref.lstrip("^")
        while True:
            if ref in self.args:
                return "arg", self.args[ref]
            parts = ref.split(":")
            node = self.nodes[parts[0]]
            if node.op == "Identity":
                ref = node.input[0]
                continue
            return node, int(parts[2]) if len(parts) == 3 else 0

    def arg_of(self, ref: str) -> int | None:
        kind, i = self.src(ref)
        return i if kind == "arg" else None

    def const(self, ref: str) -> np.ndarray | None:
        import tensorflow as tf

        node, _ = self.src(ref)
        if node == "arg" or node.op != "Const":
            return None
        return tf.make_ndarray(node.attr["value"].tensor)

    def ops(self) -> Counter:
        return Counter(n.op for n in self.fdef.node_def if n.op not in _PLUMBING)

    def find(self, op: str) -> list[Any]:
        return [n for n in self.fdef.node_def if n.op == op]

    def data_inputs(self, node: Any) -> list[str]:
        return [i for i in node.input if not i.startswith("^")]


def _refuse(ctx: Any, why: str) -> Exception:
    return ctx.fail("unsupported_op", f"a While loop that is not a Keras LSTM/GRU layer the frontend recognises ({why})")


@handles("TensorListFromTensor", op="lstm")
def _from_tensor(ctx: Any) -> list:
    return [ctx.x(0)]  # the list is its stacked tensor (time-major): only a recognised loop reads it


@handles("TensorListReserve", op="lstm")
def _reserve(ctx: Any) -> list:
    return [None]  # the loop's output list: the recognised loop produces its stacked value


@handles("TensorListStack", op="lstm")
def _stack(ctx: Any) -> list:
    return [ctx.x(0)]


@handles("While", "StatelessWhile", op="lstm")
def _while(ctx: Any) -> list:
    body_fn = ctx.b.functions.get(ctx.attr("body").name)
    cond_fn = ctx.b.functions.get(ctx.attr("cond").name)
    if body_fn is None or cond_fn is None:
        raise _refuse(ctx, "its body or condition function is missing")
    body = _Body(body_fn)
    ops = body.ops()
    if ops == _LSTM_BODY:
        kind = "lstm"
    elif ops == _GRU_BODY:
        kind = "gru"
    else:
        raise _refuse(ctx, "body ops " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items())))
    get = body.find("TensorListGetItem")[0]
    x_arg, t_arg = body.arg_of(get.input[0]), body.arg_of(get.input[1])
    if x_arg is None or t_arg is None:
        raise _refuse(ctx, "the step input is not read at the loop's time index")
    # the loop runs every step from 0: time starts at 0 and the condition is time < T
    seq = ctx.x(x_arg).type.shape  # the unstacked tensor, time-major
    if seq is None or not isinstance(seq[0], int):
        raise _refuse(ctx, "the sequence length is not static")
    start = ctx.c(t_arg)
    if start is None or int(start) != 0:
        raise _refuse(ctx, "the time index does not start at 0")
    cond = _Body(cond_fn)
    limits = [cond.const(n.input[1]) for n in cond.find("Less") if cond.arg_of(n.input[0]) == t_arg]
    if len(limits) != 1 or limits[0] is None or int(limits[0]) != seq[0]:
        raise _refuse(ctx, "the loop does not run over every time step")
    matmuls = body.find("MatMul")
    if any(m.attr["transpose_a"].b or m.attr["transpose_b"].b for m in matmuls):
        raise _refuse(ctx, "transposed cell matmul")
    by_first = {body.src(body.data_inputs(m)[0])[0] is get: m for m in matmuls}
    if set(by_first) != {True, False}:
        raise _refuse(ctx, "the cell's matmuls do not read the step input and the state")
    h_arg = body.arg_of(body.data_inputs(by_first[False])[0])
    w_arg = body.arg_of(body.data_inputs(by_first[True])[1])
    r_arg = body.arg_of(body.data_inputs(by_first[False])[1])
    setitem = body.find("TensorListSetItem")[0]
    out_arg = body.arg_of(setitem.input[0])
    if None in (h_arg, w_arg, r_arg, out_arg):
        raise _refuse(ctx, "the cell's weights or state are not loop inputs")
    kernel, rec = ctx.c(w_arg), ctx.c(r_arg)
    if kernel is None or rec is None:
        raise _refuse(ctx, "the cell's weights are not constants")
    hidden = int(rec.shape[0])
    if kind == "lstm":
        bias_add = body.find("BiasAdd")[0]
        b_arg = body.arg_of(body.data_inputs(bias_add)[1])
        c_arg = next((body.arg_of(i) for n in body.find("Mul") for i in body.data_inputs(n)
                      if body.arg_of(i) is not None), None)
    else:
        split0 = next(s for s in body.find("Split") if body.arg_of(body.data_inputs(s)[1]) is not None)
        b_arg = body.arg_of(body.data_inputs(split0)[1])
        c_arg = None
    bias = ctx.c(b_arg) if b_arg is not None else None
    if bias is None:
        raise _refuse(ctx, "the cell's bias is not a constant loop input")
    # the body returns (as loop outputs) the new state at the state's own positions
    x = ctx.x(x_arg)
    i64 = np.int64
    ax0, ax1 = ctx.const(np.asarray([0], i64)), ctx.const(np.asarray([1], i64))
    init_h = ctx.one("unsqueeze", [ctx.x(h_arg), ax0])
    if kind == "lstm":
        def order(m: np.ndarray) -> np.ndarray:  # Keras i, f, c, o → IR i, o, f, c
            i, f, c, o = np.split(m, 4, axis=0)
            return np.concatenate([i, o, f, c], axis=0)
        w = order(kernel.T)[None]
        r = order(rec.T)[None]
        bb = np.concatenate([order(bias.reshape(4 * hidden, 1))[:, 0], np.zeros(4 * hidden, bias.dtype)])[None]
        init_c = ctx.one("unsqueeze", [ctx.x(c_arg), ax0])
        y, yh, yc = ctx.emit("lstm", [x, ctx.const(np.ascontiguousarray(w)), ctx.const(np.ascontiguousarray(r)),
                                      ctx.const(bb), None, init_h, init_c], {"hidden_size": hidden}, n=3)
    else:
        if bias.shape != (2, 3 * hidden):
            raise _refuse(ctx, f"GRU bias of shape {bias.shape} (reset_after=True has (2, 3*units))")
        w, r = kernel.T[None], rec.T[None]  # Keras z, r, h = IR z, r, h
        bb = bias.reshape(1, 6 * hidden)
        y, yh = ctx.emit("gru", [x, ctx.const(np.ascontiguousarray(w)), ctx.const(np.ascontiguousarray(r)),
                                 ctx.const(np.ascontiguousarray(bb)), None, init_h],
                         {"hidden_size": hidden, "linear_before_reset": 1}, n=2)
        yc = None
    from ..ir import TensorType

    dt, batch = x.type.dtype, x.type.shape[1]
    for v, shape in ((y, (seq[0], 1, batch, hidden)), (yh, (1, batch, hidden)), (yc, (1, batch, hidden))):
        if v is not None and (v.type.shape is None or None in v.type.shape):
            v.type = TensorType(dt, shape)
    outs: list[Any] = [None] * len(ctx.op.outputs)
    idx_arg = body.arg_of(setitem.input[1])
    if idx_arg == t_arg:
        outs[out_arg] = ctx.one("squeeze", [y, ax1])  # every step: [T, batch, hidden]
    elif idx_arg is None and body.const(setitem.input[1]) is not None and int(body.const(setitem.input[1])) == 0:
        outs[out_arg] = yh  # only the last step is kept: [1, batch, hidden]
    else:
        raise _refuse(ctx, "the outputs are written at an index that is not the time step")
    rets = [body.src(r) for r in body.rets]
    for j, (node, _) in enumerate(rets):
        if node == "arg":
            continue
        if j == h_arg:
            outs[j] = ctx.one("squeeze", [yh, ax0])
        elif kind == "lstm" and j == c_arg:
            outs[j] = ctx.one("squeeze", [yc, ax0])
    return outs
