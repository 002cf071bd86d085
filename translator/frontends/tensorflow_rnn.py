"""Keras LSTM / GRU layers in a TensorFlow graph → the IR's ``lstm`` / ``gru`` ops.

Keras (TensorFlow backend, CPU) runs a recurrent layer as a ``While`` loop over TensorLists:
the input is unstacked time-major (``TensorListFromTensor``), the body reads step ``t``
(``TensorListGetItem``), runs the cell and writes the output (``TensorListSetItem``); the
outputs are restacked (``TensorListStack``). The loop is recognised, not guessed: its body is
matched by structure against the Keras LSTM cell (default activations, with or without bias)
and the Keras GRU cell (default activations, ``reset_after`` True or False, with or without
bias) in ``tensorflow_cells``, however TensorFlow wrote the cell's sums; the weights come from
the loop's constant inputs, and the loop must run over every step from 0. Anything else is
refused naming the ``While`` node and why each cell did not match.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .tensorflow_cells import Body, match_gru, match_lstm
from .tensorflow_ops import handles


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


def _gru_bias(ctx: Any, parts: dict[str, Any], hidden: int, dtype: Any) -> np.ndarray | None:
    """The IR's [Wb; Rb] (6*units) from the cell's bias terms: the input part's and the
    recurrent part's, each a whole bias or one row of a 2-row bias; none: zero."""
    wb, rb = np.zeros(3 * hidden, dtype), np.zeros(3 * hidden, dtype)
    for side, b_arg, row in parts["bias"]:
        arr = ctx.c(b_arg)
        if arr is None:
            return None
        vec = arr if row is None else arr[row]
        if vec.shape != (3 * hidden,):
            raise _refuse(ctx, f"GRU bias term of shape {vec.shape} (expected ({3 * hidden},))")
        if side == "x":
            wb = wb + vec
        else:
            rb = rb + vec
    return np.concatenate([wb, rb]).astype(dtype)


@handles("While", "StatelessWhile", op="lstm")
def _while(ctx: Any) -> list:
    body_fn = ctx.b.functions.get(ctx.attr("body").name)
    cond_fn = ctx.b.functions.get(ctx.attr("cond").name)
    if body_fn is None or cond_fn is None:
        raise _refuse(ctx, "its body or condition function is missing")
    body = Body(body_fn)
    lstm, gru = match_lstm(body), match_gru(body)
    if isinstance(lstm, dict):
        kind, parts = "lstm", lstm
    elif isinstance(gru, dict):
        kind, parts = "gru", gru
    else:
        ops = body.ops()
        raise _refuse(ctx, "body ops " + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items()))
                      + f"; not an LSTM cell: {lstm}; not a GRU cell: {gru}")
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
    cond = Body(cond_fn)
    limits = [cond.const(n.input[1]) for n in cond.find("Less") if cond.arg_of(n.input[0]) == t_arg]
    if len(limits) != 1 or limits[0] is None or int(limits[0]) != seq[0]:
        raise _refuse(ctx, "the loop does not run over every time step")
    h_arg, w_arg, r_arg = parts["h_arg"], parts["w_arg"], parts["r_arg"]
    setitem = body.find("TensorListSetItem")[0]
    out_arg = body.arg_of(setitem.input[0])
    if None in (h_arg, w_arg, r_arg, out_arg):
        raise _refuse(ctx, "the cell's weights or state are not loop inputs")
    kernel, rec = ctx.c(w_arg), ctx.c(r_arg)
    if kernel is None or rec is None:
        raise _refuse(ctx, "the cell's weights are not constants")
    hidden = int(rec.shape[0])
    if kind == "lstm":
        b_arg, c_arg = parts["b_arg"], parts["c_arg"]
        # no bias term (use_bias=False): a zero bias
        bias = np.zeros(4 * hidden, kernel.dtype) if b_arg is None else ctx.c(b_arg)
        if bias is not None and bias.size != 4 * hidden:
            raise _refuse(ctx, f"LSTM bias of shape {bias.shape} (expected ({4 * hidden},))")
    else:
        c_arg = None
        bias = _gru_bias(ctx, parts, hidden, kernel.dtype)
        if rec.shape != (hidden, 3 * hidden) or kernel.shape[-1] != 3 * hidden or parts["units"] != hidden:
            raise _refuse(ctx, f"GRU weights of shapes {kernel.shape}, {rec.shape}")
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
        w, r = kernel.T[None], rec.T[None]  # Keras z, r, h = IR z, r, h
        bb = bias.reshape(1, 6 * hidden)
        y, yh = ctx.emit("gru", [x, ctx.const(np.ascontiguousarray(w)), ctx.const(np.ascontiguousarray(r)),
                                 ctx.const(np.ascontiguousarray(bb)), None, init_h],
                         {"hidden_size": hidden, "linear_before_reset": int(parts["reset_after"])}, n=2)
        yc = None
    from ..ir.graph import TensorType

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
