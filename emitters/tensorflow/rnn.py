"""TensorFlow rules for the recurrent ops (RNN, GRU, LSTM) unrolled over time.

The input projection ``X W^T + b`` is one matrix product over every step before the
recurrence (the weight read once: TFLite then runs one FULLY_CONNECTED over the sequence
instead of one per step); each step multiplies the state by ``R`` and splits the gate
blocks with one ``split``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .helpers import static_dims
from .registry import rule


_ACTS = {  # ONNX activation -> (TensorFlow expression of {x}, default alpha, default beta)
    "relu": ("tf.nn.relu({x})", None, None), "tanh": ("tf.math.tanh({x})", None, None),
    "sigmoid": ("tf.math.sigmoid({x})", None, None), "affine": ("{a} * {x} + {b}", 1.0, 0.0),
    "leakyrelu": ("tf.where({x} >= 0, {x}, {a} * {x})", 0.01, None),
    "thresholdedrelu": ("tf.where({x} > {a}, {x}, tf.zeros_like({x}))", 1.0, None),
    "scaledtanh": ("{a} * tf.math.tanh({b} * {x})", 1.0, 1.0),
    "hardsigmoid": ("tf.clip_by_value({a} * {x} + {b}, 0.0, 1.0)", 0.2, 0.5),
    "elu": ("tf.where({x} >= 0, {x}, {a} * tf.math.expm1({x}))", 1.0, None),
    "softsign": ("tf.nn.softsign({x})", None, None), "softplus": ("tf.math.softplus({x})", None, None),
}


_DEFAULT_ACTS = {"rnn": ["Tanh"], "gru": ["Sigmoid", "Tanh"], "lstm": ["Sigmoid", "Tanh", "Tanh"]}


_GATES = {"rnn": 1, "gru": 3, "lstm": 4}


def _rnn_check(n: Node) -> Refusal | None:
    why = static_dims(1, 2)(n)  # the weights; X's batch and sequence sizes are read at run time
    if why is not None:
        return why
    if n.inputs[0].type.rank != 3:
        return Refusal("dynamic_shape", "the recurrent input X needs rank 3")
    for name in n.attrs.get("activations") or ():
        if name.lower() not in _ACTS:
            return Refusal("unsupported_attribute_value", f"activation {name!r}")
    return None


def _activation_fns(c: Any, n_dir: int) -> list[list[Any]]:
    names = list(c.attr("activations") or []) or _DEFAULT_ACTS[c.node.op] * n_dir
    alphas, betas = list(c.attr("activation_alpha") or []), list(c.attr("activation_beta") or [])
    fns = []
    for name in names:
        text, da, db = _ACTS[name.lower()]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        fns.append(lambda x, t=text, a=a, b=b: t.format(x=x, a=c.lit(a), b=c.lit(b)))
    per = len(fns) // n_dir
    return [fns[d * per:(d + 1) * per] for d in range(n_dir)]


def _int8_recurrent_weight(c: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """TFLite: R's integers, scales and zero points when it is a weight kept 8-bit
    (``quantized.weight_only_parts``); else None."""
    from translator.compile.quantized import weight_only_parts

    return weight_only_parts(c.node.inputs[2]) if c.cg.backend == "tflite" else None


@rule("rnn", "gru", "lstm", check=_rnn_check)
def recurrent(c: Any) -> list[str]:
    """ONNX RNN / GRU / LSTM unrolled over a static sequence length, or a ``tf.while_loop``
    over a symbolic one (the batch size is always read at run time); sequence_lens masks
    the steps past each row's length (states held, outputs zero), as the reference."""
    op = c.node.op
    direction = c.attr("direction", "forward")
    n_dir = 2 if direction == "bidirectional" else 1
    layout_bt = bool(c.attr("layout", 0))
    x_shape, r_shape = tuple(c.shape(0)), c.static_shape(2)
    steps = x_shape[1] if layout_bt else x_shape[0]
    # a symbolic sequence length: a while loop, not unrolled; on TFLite also a recurrence over
    # int8 weights, whose per-step hybrid FULLY_CONNECTED (which XNNPACK does not take) would cut
    # an unrolled sequence into a delegated partition per step
    int8_r = _int8_recurrent_weight(c)
    loop = not isinstance(steps, int) or int8_r is not None
    hidden = r_shape[-1]
    gates = _GATES[op]
    clip = c.attr("clip")
    acts = _activation_fns(c, n_dir)
    lines: list[str] = []
    x = c.tmp("x")
    lines.append(f"{x} = tf.transpose({c.i(0)}, [1, 0, 2])" if layout_bt else f"{x} = {c.i(0)}")
    batch = c.tmp("batch")
    lines.append(f"{batch} = tf.shape({x})[1]")
    lens = c.tmp("lens") if c.has(4) else None
    if lens:
        lines.append(f"{lens} = tf.cast({c.i(4)}, tf.int32)")

    def clipped(e: str) -> str:
        return e if clip is None else f"tf.clip_by_value({e}, {c.lit(-float(clip))}, {c.lit(float(clip))})"

    def init(k: int, d: int) -> str:
        if not c.has(k):
            return f"tf.zeros(tf.stack([{batch}, {hidden}]), {x}.dtype)"
        src = f"tf.transpose({c.i(k)}, [1, 0, 2])" if layout_bt else c.i(k)
        return f"{src}[{d}]"

    ys_all, h_all, c_all = [], [], []
    for d in range(n_dir):
        f = acts[d]
        backward = direction == "reverse" or d == 1
        w, r, wb, rb, h, cs, ys, t = (c.tmp(s) for s in (f"w{d}", f"r{d}", f"wb{d}", f"rb{d}", f"h{d}", f"c{d}",
                                                          f"ys{d}", "t"))
        lines.append(f"{w} = {c.i(1)}[{d}]")
        if int8_r is not None:  # a constant of the module, read inside the loop's body: the converter
            # quantizes it for the body's hybrid FULLY_CONNECTED (a dequantization in the graph would
            # be a run-time input of the loop)
            q, scale, zp = (a[d] for a in int8_r)
            r = c.weight(((q.astype(np.float32) - zp.astype(np.float32)) * scale).astype(np.float32),
                         f"{c.node.name}_dq2_{d}")
        else:
            lines.append(f"{r} = {c.i(2)}[{d}]")
        if c.has(3):
            lines += [f"{wb} = {c.i(3)}[{d}, :{gates * hidden}]", f"{rb} = {c.i(3)}[{d}, {gates * hidden}:]"]
        else:
            lines += [f"{wb} = tf.zeros([{gates * hidden}], {x}.dtype)", f"{rb} = {wb}"]
        # the input projection of every step at once (one matrix product over [steps * batch, input]
        # instead of one per step: the weight is read once)
        # (an LSTM's or RNN's two biases added once there too; a GRU's recurrent bias stays with its product)
        xw = c.tmp(f"xw{d}")
        bias = wb if op == "gru" else f"({wb} + {rb})"
        lines.append(f"{xw} = tf.reshape(tf.linalg.matmul(tf.reshape({x}, [-1, {c.static_shape(1)[-1]}]), {w}, "
                     f"transpose_b=True) + {bias}, tf.stack([tf.shape({x})[0], {batch}, {gates * hidden}]))")
        lines.append(f"{h} = {init(5, d)}")
        if op == "lstm":
            lines.append(f"{cs} = {init(6, d)}")
        else:
            lines.append(f"{cs} = {h}")  # unused: keeps the loop's state uniform
        if loop:
            it, fn = c.tmp("i"), c.tmp("step")
            n_steps = c.tmp("steps")
            lines.append(f"{n_steps} = tf.shape({x})[0]")
            lines.append(f"{ys} = tf.zeros(tf.stack([0, {batch}, {hidden}]), {x}.dtype)")
            lines.append(f"def {fn}({it}, {h}, {cs}, {ys}):")
            head = [f"{t} = {n_steps} - 1 - {it}" if backward else f"{t} = {it}"]
        else:
            lines.append(f"{ys} = [None] * {steps}")
            order = f"reversed(range({steps}))" if backward else f"range({steps})"
            lines.append(f"for {t} in {order}:")
            head = []
        gx, gh, hn, cn = (c.tmp(s) for s in ("gx", "gh", "h_new", "c_new"))
        body = head + [f"{gx} = {xw}[{t}]"]
        H = hidden
        if op == "rnn":
            body += [f"{gh} = tf.linalg.matmul({h}, {r}, transpose_b=True)",
                     f"{hn} = {f[0](clipped(f'{gx} + {gh}'))}"]
        elif op == "gru":  # (each step's gate blocks taken by one split of each product)
            z, rt, hh = c.tmp("z"), c.tmp("r"), c.tmp("hh")
            xz, xr, xh, hz, hr = (c.tmp(s) for s in ("xz", "xr", "xh", "hz", "hr"))
            body += [f"{gh} = tf.linalg.matmul({h}, {r}[:{2 * H}], transpose_b=True) + {rb}[:{2 * H}]",
                     f"{xz}, {xr}, {xh} = tf.split({gx}, 3, axis=1)",
                     f"{hz}, {hr} = tf.split({gh}, 2, axis=1)",
                     f"{z} = {f[0](clipped(f'{xz} + {hz}'))}",
                     f"{rt} = {f[0](clipped(f'{xr} + {hr}'))}"]
            if c.attr("linear_before_reset", 0):
                inner = f"{xh} + {rt} * (tf.linalg.matmul({h}, {r}[{2 * H}:], transpose_b=True) + {rb}[{2 * H}:])"
            else:
                inner = f"{xh} + tf.linalg.matmul({rt} * {h}, {r}[{2 * H}:], transpose_b=True) + {rb}[{2 * H}:]"
            body += [f"{hh} = {f[1](clipped(inner))}", f"{hn} = (1.0 - {z}) * {hh} + {z} * {h}"]
        else:
            pre, ig, fg, cc, og = (c.tmp(s) for s in ("pre", "i", "f", "cc", "o"))
            pis, pos, pfs = (c.tmp(s) for s in ("pi", "po", "pf"))
            peep = [f"{c.i(7)}[{d}, {k * H}:{(k + 1) * H}]" for k in range(3)] if c.has(7) else None
            pi, po, pf = (f" + {p} * " for p in peep) if peep else ("", "", "")
            body += [f"{pre} = {gx} + tf.linalg.matmul({h}, {r}, transpose_b=True)",
                     f"{pis}, {pos}, {pfs}, {cc} = tf.split({pre}, 4, axis=1)",
                     f"{ig} = {f[0](clipped(pis + (pi + cs if peep else '')))}",
                     (f"{fg} = 1.0 - {ig}" if c.attr("input_forget", 0)
                      else f"{fg} = {f[0](clipped(pfs + (pf + cs if peep else '')))}"),
                     f"{cc} = {f[1](clipped(cc))}",
                     f"{cn} = {fg} * {cs} + {ig} * {cc}",
                     f"{og} = {f[0](clipped(pos + (po + cn if peep else '')))}",
                     f"{hn} = {og} * {f[2](cn)}"]
        yt = c.tmp("y")
        if lens:
            m = c.tmp("active")
            body += [f"{m} = ({t} < {lens})[:, None]", f"{yt} = tf.where({m}, {hn}, tf.zeros_like({hn}))",
                     f"{h} = tf.where({m}, {hn}, {h})"]
            if op == "lstm":
                body.append(f"{cs} = tf.where({m}, {cn}, {cs})")
        else:
            body += [f"{yt} = {hn}", f"{h} = {hn}"]
            if op == "lstm":
                body.append(f"{cs} = {cn}")
        if loop:
            grown = f"[{yt}[None], {ys}]" if backward else f"[{ys}, {yt}[None]]"
            body += [f"{ys} = tf.concat({grown}, 0)", f"return {it} + 1, {h}, {cs}, {ys}"]
            lines += ["    " + b for b in body]
            inv = (f"[tf.TensorShape([]), tf.TensorShape([None, {hidden}]), tf.TensorShape([None, {hidden}]), "
                   f"tf.TensorShape([None, None, {hidden}])]")
            lines.append(f"_, {h}, {cs}, {ys} = tf.while_loop(lambda {it}, *_: {it} < {n_steps}, {fn}, "
                         f"[tf.constant(0), {h}, {cs}, {ys}], shape_invariants={inv})")
            ys_all.append(ys)
        else:
            body.append(f"{ys}[{t}] = {yt}")
            lines += ["    " + b for b in body]
            ys_all.append(f"tf.stack({ys})")
        h_all.append(h)
        c_all.append(cs)
    y = f"tf.stack([{', '.join(ys_all)}], axis=1)"  # (T, dirs, batch, H)
    yh, yc = f"tf.stack([{', '.join(h_all)}])", f"tf.stack([{', '.join(c_all)}])"
    if layout_bt:
        y, yh, yc = f"tf.transpose({y}, [2, 0, 1, 3])", f"tf.transpose({yh}, [1, 0, 2])", f"tf.transpose({yc}, [1, 0, 2])"
    outs = [y, yh] + ([yc] if op == "lstm" else [])
    for k, expr in enumerate(outs[:len(c.node.outputs)]):
        lines.append(f"{c.o(k)} = {expr}")
    return lines
