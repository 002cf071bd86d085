"""Python lowerings to TensorFlow for the newer and the composite ONNX ops: RMS / group
normalization, losses, bit casts, attention, RNN / GRU / LSTM (unrolled), grid sampling,
causal convolution with state, rotary embedding, center crop / pad, affine grids,
(de)quantization. Semantics follow the NumPy reference (``translator/reference``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from translator.ir import Node

from .tensorflow_ops import both, lowering, needs_const, needs_rank, norm_axis


def _static_dims(*ks: int) -> Any:
    def check(n: Node) -> tuple[str, str] | None:
        for k in ks:
            v = n.inputs[k] if k < len(n.inputs) else None
            if v is not None and (v.type.shape is None or not all(isinstance(d, int) for d in v.type.shape)):
                return "dynamic_shape", f"input {k} needs a static shape"
        return None

    return check


# ----------------------------------------------------------------------------- normalization
@lowering("rms_normalization", accepts=needs_rank(0))
def rms_normalization(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", -1), r)
    eps = float(c.attr("epsilon", 1e-5))
    x, normed = c.i(0), c.tmp("normalized")
    return [f"{normed} = {x} * tf.math.rsqrt(tf.math.reduce_mean(tf.math.square({x}), axis={list(range(a, r))}, "
            f"keepdims=True) + {c.lit(eps)})",
            f"{c.o()} = tf.cast({normed} * tf.cast({c.i(1)}, {normed}.dtype), {c.tf(c.out_dtype())})"]


@lowering("group_normalization", accepts=_static_dims(0))
def group_normalization(c: Any) -> list[str]:
    shape = list(c.static_shape(0))
    r = len(shape)
    g = int(c.attr("num_groups"))
    eps = float(c.attr("epsilon", 1e-5))
    x, grouped, mean, var = c.i(0), c.tmp("grouped"), c.tmp("mean"), c.tmp("var")
    ch = [-1] + [1] * (r - 2)
    return [f"{grouped} = tf.reshape({x}, {c.lit([shape[0], g, -1])})",
            f"{mean}, {var} = tf.nn.moments({grouped}, axes=[2], keepdims=True)",
            f"{grouped} = tf.reshape(({grouped} - {mean}) * tf.math.rsqrt({var} + {c.lit(eps)}), {c.lit(shape)})",
            f"{c.o()} = {grouped} * tf.reshape({c.i(1)}, {c.lit(ch)}) + tf.reshape({c.i(2)}, {c.lit(ch)})"]


# ----------------------------------------------------------------------------- losses
def _nll_lines(c: Any, logp: str, target: str, weight: str | None, out: str) -> list[str]:
    """-logp[n, target[n, ...], ...] * weight[target], reduced like ONNX (the reference's _nll)."""
    r = c.rank(0) if c.rank(0) is not None else c.rank(1) + 1
    reduction = c.attr("reduction", "mean")
    ignore = c.attr("ignore_index")
    t, mask, safe, picked, w = (c.tmp(s) for s in ("target", "mask", "safe", "picked", "w"))
    moved = logp if r == 2 else f"tf.transpose({logp}, {c.lit([0, *range(2, r), 1])})"
    lines = [f"{t} = tf.cast({target}, tf.int64)",
             f"{mask} = tf.ones_like({t}, dtype=tf.bool)" if ignore is None else f"{mask} = tf.not_equal({t}, {int(ignore)})",
             f"{safe} = tf.where({mask}, {t}, tf.zeros_like({t}))",
             f"{picked} = tf.gather({moved}, tf.expand_dims({safe}, -1), axis={r - 1}, batch_dims={r - 1})[..., 0]",
             f"{w} = tf.ones_like({picked})" if weight is None else f"{w} = tf.cast(tf.gather({weight}, {safe}), {picked}.dtype)",
             f"{w} = tf.where({mask}, {w}, tf.zeros_like({w}))"]
    loss = f"-{picked} * {w}"
    if reduction == "sum":
        loss = f"tf.math.reduce_sum({loss})"
    elif reduction == "mean":
        loss = f"tf.math.reduce_sum({loss}) / tf.math.reduce_sum({w})"
    return lines + [f"{out} = {loss}"]


def _loss_check(n: Node) -> tuple[str, str] | None:
    if n.inputs[0] is not None and n.inputs[0].type.rank is None:
        return needs_rank(1)(n)
    return None


@lowering("negative_log_likelihood_loss", accepts=_loss_check)
def nll_loss(c: Any) -> list[str]:
    return _nll_lines(c, c.i(0), c.i(1), c.i(2) if c.has(2) else None, c.o(0))


@lowering("softmax_cross_entropy_loss", accepts=_loss_check)
def softmax_cross_entropy_loss(c: Any) -> list[str]:
    logp = c.o(1) if len(c.node.outputs) > 1 else c.tmp("log_prob")
    return ([f"{logp} = tf.nn.log_softmax({c.i(0)}, axis=1)"]
            + _nll_lines(c, logp, c.i(1), c.i(2) if c.has(2) else None, c.o(0)))


# ----------------------------------------------------------------------------- bits
@lowering("bit_cast")
def bit_cast(c: Any) -> list[str]:
    if "bool" in (c.dtype(0), c.out_dtype()):  # one byte holding 0 or 1 either way
        return [f"{c.o()} = tf.cast({c.i(0)}, {c.tf(c.out_dtype())})"]
    return [f"{c.o()} = tf.bitcast({c.i(0)}, {c.tf(c.out_dtype())})"]


# ----------------------------------------------------------------------------- attention
def _attention_check(n: Node) -> tuple[str, str] | None:
    return both(needs_rank(0, 1, 2), _static_dims(0, 1, 2, 3, 4))(n)


@lowering("attention", accepts=_attention_check)
def attention(c: Any) -> list[str]:
    """Scaled dot-product attention (MHA / GQA / MQA, KV cache, masks, softcap), as the reference."""
    import math

    q_shape, k_shape = list(c.static_shape(0)), list(c.static_shape(1))
    three_d = len(q_shape) == 3
    lines: list[str] = []

    def heads(k: int, n_heads: Any, name: str) -> str:
        x = c.i(k)
        if len(c.static_shape(k)) == 4:
            return x
        b, s, hd = c.static_shape(k)
        v = c.tmp(name)
        lines.append(f"{v} = tf.transpose(tf.reshape({x}, {c.lit([b, s, int(n_heads), hd // int(n_heads)])}), [0, 2, 1, 3])")
        return v

    q = heads(0, c.attr("q_num_heads"), "q")
    k = heads(1, c.attr("kv_num_heads"), "k")
    v = heads(2, c.attr("kv_num_heads"), "v")
    batch = q_shape[0]
    hq = q_shape[1] if not three_d else int(c.attr("q_num_heads"))
    q_len = q_shape[2] if not three_d else q_shape[1]
    head_size = q_shape[3] if not three_d else q_shape[2] // hq
    hkv = k_shape[1] if len(k_shape) == 4 else int(c.attr("kv_num_heads"))
    past = 0
    if c.has(4):
        past = c.static_shape(4)[2]
        kc, vc = c.tmp("present_key"), c.tmp("present_value")
        lines += [f"{kc} = tf.concat([tf.cast({c.i(4)}, {k}.dtype), {k}], axis=2)",
                  f"{vc} = tf.concat([tf.cast({c.i(5)}, {v}.dtype), {v}], axis=2)"]
        k, v = kc, vc
    kv_len = (k_shape[2] if len(k_shape) == 4 else k_shape[1]) + past
    group = hq // hkv
    scale = c.attr("scale")
    scale = 1.0 / math.sqrt(head_size) if scale is None else float(scale)
    softcap = float(c.attr("softcap", 0.0) or 0.0)
    kr, vr = (f"tf.repeat({k}, {group}, axis=1)", f"tf.repeat({v}, {group}, axis=1)") if group > 1 else (k, v)
    raw, capped, allowed, added, biased, probs = (c.tmp(s) for s in ("raw", "capped", "allowed", "added", "biased", "probs"))
    lines.append(f"{raw} = tf.linalg.matmul({q}, {kr}, transpose_b=True) * {c.lit(scale)}")
    lines.append(f"{capped} = {c.lit(softcap)} * tf.math.tanh({raw} / {c.lit(softcap)})" if softcap else f"{capped} = {raw}")
    lines.append(f"{allowed} = tf.ones([{batch}, 1, {q_len}, {kv_len}], dtype=tf.bool)")
    lines.append(f"{added} = tf.zeros([], {raw}.dtype)")
    if c.has(3):
        m_shape = c.static_shape(3)
        short = kv_len - m_shape[-1]
        pad = [[0, 0]] * (len(m_shape) - 1) + [[0, short]]
        if c.dtype(3) == "bool":
            lines.append(f"{allowed} = tf.math.logical_and({allowed}, tf.pad({c.i(3)}, {c.lit(pad)}, constant_values=False))")
        else:
            lines.append(f"{added} = tf.pad(tf.cast({c.i(3)}, {raw}.dtype), {c.lit(pad)}, constant_values=float('-inf'))")
    nonpad = c.i(6) if c.has(6) else None
    offset = c.tmp("offset")
    if nonpad is not None and not c.has(4):
        lines.append(f"{offset} = tf.cast({nonpad}, tf.int64) - {q_len}")
    else:
        lines.append(f"{offset} = tf.fill([{batch}], tf.constant({past}, tf.int64))")
    pos, key = c.tmp("pos"), c.tmp("key")
    lines += [f"{pos} = ({offset}[:, None] + tf.range({q_len}, dtype=tf.int64))[:, None, :, None]",
              f"{key} = tf.range({kv_len}, dtype=tf.int64)"]
    if c.attr("is_causal", 0):
        lines.append(f"{allowed} = tf.math.logical_and({allowed}, {key} <= {pos})")
    left, right = int(c.attr("left_window_size", -1)), int(c.attr("right_window_size", -1))
    if left >= 0:
        lines.append(f"{allowed} = tf.math.logical_and({allowed}, {key} >= {pos} - {left})")
    if right >= 0:
        lines.append(f"{allowed} = tf.math.logical_and({allowed}, {key} <= {pos} + {right})")
    if nonpad is not None:
        lines.append(f"{allowed} = tf.math.logical_and({allowed}, {key} < tf.cast({nonpad}, tf.int64)[:, None, None, None])")
    mx, e, total = c.tmp("max"), c.tmp("exp"), c.tmp("total")
    lines += [f"{biased} = tf.where({allowed}, {capped} + {added}, tf.constant(float('-inf'), {raw}.dtype))",
              f"{mx} = tf.math.reduce_max({biased}, axis=-1, keepdims=True)",
              f"{e} = tf.math.exp({biased} - tf.where(tf.math.is_finite({mx}), {mx}, tf.zeros_like({mx})))",
              f"{total} = tf.math.reduce_sum({e}, axis=-1, keepdims=True)",
              f"{probs} = tf.where({total} > 0, tf.math.divide_no_nan({e}, {total}), tf.zeros_like({e}))"]
    y = f"tf.linalg.matmul({probs}, {vr})"
    if three_d:
        y = f"tf.reshape(tf.transpose({y}, [0, 2, 1, 3]), {c.lit([batch, q_len, -1])})"
    lines.append(f"{c.o(0)} = tf.cast({y}, {c.tf(c.out_dtype(0))})")
    outs = c.node.outputs
    if len(outs) > 1:
        lines.append(f"{c.o(1)} = tf.cast({k}, {c.tf(c.out_dtype(1))})")
    if len(outs) > 2:
        lines.append(f"{c.o(2)} = tf.cast({v}, {c.tf(c.out_dtype(2))})")
    if len(outs) > 3:
        qk = {0: raw, 1: capped, 2: biased, 3: probs}[int(c.attr("qk_matmul_output_mode", 0))]
        lines.append(f"{c.o(3)} = tf.cast({qk}, {c.tf(c.out_dtype(3))})")
    return lines


# ----------------------------------------------------------------------------- recurrent (unrolled)
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


def _rnn_check(n: Node) -> tuple[str, str] | None:
    why = _static_dims(0, 1, 2)(n)
    if why is not None:
        return why
    for name in n.attrs.get("activations") or ():
        if name.lower() not in _ACTS:
            return "unsupported_attribute_value", f"activation {name!r}"
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


@lowering("rnn", "gru", "lstm", accepts=_rnn_check)
def recurrent(c: Any) -> list[str]:
    """ONNX RNN / GRU / LSTM unrolled over the (static) sequence length; sequence_lens masks
    the steps past each row's length (states held, outputs zero), as the reference."""
    op = c.node.op
    direction = c.attr("direction", "forward")
    n_dir = 2 if direction == "bidirectional" else 1
    layout_bt = bool(c.attr("layout", 0))
    x_shape, r_shape = c.static_shape(0), c.static_shape(2)
    steps = x_shape[1] if layout_bt else x_shape[0]
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
        lines += [f"{w} = {c.i(1)}[{d}]", f"{r} = {c.i(2)}[{d}]"]
        if c.has(3):
            lines += [f"{wb} = {c.i(3)}[{d}, :{gates * hidden}]", f"{rb} = {c.i(3)}[{d}, {gates * hidden}:]"]
        else:
            lines += [f"{wb} = tf.zeros([{gates * hidden}], {x}.dtype)", f"{rb} = {wb}"]
        lines.append(f"{h} = {init(5, d)}")
        if op == "lstm":
            lines.append(f"{cs} = {init(6, d)}")
        lines.append(f"{ys} = [None] * {steps}")
        order = f"reversed(range({steps}))" if backward else f"range({steps})"
        lines.append(f"for {t} in {order}:")
        gx, gh, hn, cn = (c.tmp(s) for s in ("gx", "gh", "h_new", "c_new"))
        body = [f"{gx} = tf.linalg.matmul({x}[{t}], {w}, transpose_b=True) + {wb}"]
        H = hidden
        if op == "rnn":
            body += [f"{gh} = tf.linalg.matmul({h}, {r}, transpose_b=True) + {rb}",
                     f"{hn} = {f[0](clipped(f'{gx} + {gh}'))}"]
        elif op == "gru":
            z, rt, hh = c.tmp("z"), c.tmp("r"), c.tmp("hh")
            body += [f"{gh} = tf.linalg.matmul({h}, {r}[:{2 * H}], transpose_b=True) + {rb}[:{2 * H}]",
                     f"{z} = {f[0](clipped(f'{gx}[:, :{H}] + {gh}[:, :{H}]'))}",
                     f"{rt} = {f[0](clipped(f'{gx}[:, {H}:{2 * H}] + {gh}[:, {H}:]'))}"]
            if c.attr("linear_before_reset", 0):
                inner = f"{gx}[:, {2 * H}:] + {rt} * (tf.linalg.matmul({h}, {r}[{2 * H}:], transpose_b=True) + {rb}[{2 * H}:])"
            else:
                inner = f"{gx}[:, {2 * H}:] + tf.linalg.matmul({rt} * {h}, {r}[{2 * H}:], transpose_b=True) + {rb}[{2 * H}:]"
            body += [f"{hh} = {f[1](clipped(inner))}", f"{hn} = (1.0 - {z}) * {hh} + {z} * {h}"]
        else:
            pre, ig, fg, cc, og = (c.tmp(s) for s in ("pre", "i", "f", "cc", "o"))
            peep = [f"{c.i(7)}[{d}, {k * H}:{(k + 1) * H}]" for k in range(3)] if c.has(7) else None
            pi, po, pf = (f" + {p} * " for p in peep) if peep else ("", "", "")
            body += [f"{pre} = {gx} + tf.linalg.matmul({h}, {r}, transpose_b=True) + {rb}",
                     f"{ig} = {f[0](clipped(f'{pre}[:, :{H}]' + (pi + cs if peep else '')))}",
                     (f"{fg} = 1.0 - {ig}" if c.attr("input_forget", 0)
                      else f"{fg} = {f[0](clipped(f'{pre}[:, {2 * H}:{3 * H}]' + (pf + cs if peep else '')))}"),
                     f"{cc} = {f[1](clipped(f'{pre}[:, {3 * H}:]'))}",
                     f"{cn} = {fg} * {cs} + {ig} * {cc}",
                     f"{og} = {f[0](clipped(f'{pre}[:, {H}:{2 * H}]' + (po + cn if peep else '')))}",
                     f"{hn} = {og} * {f[2](cn)}"]
        if lens:
            m = c.tmp("active")
            body += [f"{m} = ({t} < {lens})[:, None]", f"{ys}[{t}] = tf.where({m}, {hn}, tf.zeros_like({hn}))",
                     f"{h} = tf.where({m}, {hn}, {h})"]
            if op == "lstm":
                body.append(f"{cs} = tf.where({m}, {cn}, {cs})")
        else:
            body += [f"{ys}[{t}] = {hn}", f"{h} = {hn}"]
            if op == "lstm":
                body.append(f"{cs} = {cn}")
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


# ----------------------------------------------------------------------------- grid sampling
def _float_input(n: Node) -> tuple[str, str] | None:
    d = n.inputs[0].type.dtype if n.inputs[0] is not None else None
    if d is not None and not (d.startswith("float") or d == "bfloat16"):
        return "unsupported_dtype", f"{n.op} of {d} (the TensorFlow lowering weights taps in floating point)"
    return None


@lowering("grid_sample", accepts=both(_static_dims(0), _float_input))
def grid_sample(c: Any) -> list[str]:
    """As the reference: unnormalize, move the point by the padding mode (linear / nearest),
    then weighted taps (nearest rounds half to even; cubic A = -0.75 resolves each tap)."""
    import itertools

    shape = c.static_shape(0)
    nd = len(shape) - 2
    sizes = list(shape[2:])
    align = bool(c.attr("align_corners", 0))
    mode, pad = c.attr("mode", "linear"), c.attr("padding_mode", "zeros")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    xl, refl, y = c.tmp("x_last"), c.tmp("reflect"), c.tmp("sampled")
    lines = [f"{xl} = tf.transpose({c.i(0)}, {c.lit([0, *range(2, nd + 2), 1])})",
             f"{refl} = lambda v, lo, hi: tf.where(tf.math.floormod(tf.math.floor(tf.math.abs(v - lo) / (hi - lo)), 2.0) "
             f"== 0, lo + tf.math.abs(v - lo) - tf.math.floor(tf.math.abs(v - lo) / (hi - lo)) * (hi - lo), "
             f"hi - (tf.math.abs(v - lo) - tf.math.floor(tf.math.abs(v - lo) / (hi - lo)) * (hi - lo)))"]
    coords = []
    bounds = [(0.0, L - 1.0) if align else (-0.5, L - 0.5) for L in sizes]
    for i, L in enumerate(sizes):
        g, v = f"tf.cast({c.i(1)}[..., {nd - 1 - i}], {c.wide_float})", c.tmp(f"coord{i}")
        lines.append(f"{v} = ({g} + 1) / 2 * {L - 1}" if align else f"{v} = (({g} + 1) * {L} - 1) / 2")
        if mode != "cubic" and pad == "border":
            lines.append(f"{v} = tf.clip_by_value({v}, 0.0, {float(L - 1)})")
        elif mode != "cubic" and pad == "reflection":
            lo, hi = bounds[i]
            expr = f"{refl}({v}, {lo}, {hi})" if hi > lo else f"tf.zeros_like({v})"
            lines.append(f"{v} = tf.clip_by_value({expr}, 0.0, {float(L - 1)})")
        coords.append(v)

    def taps(ts: list[str]) -> str:
        """Values at integer taps (N, *out, C), resolved by the padding mode, zero where invalid."""
        safe, valid = [], []
        for i, t in enumerate(ts):
            L = sizes[i]
            if pad == "border":
                t = f"tf.clip_by_value({t}, 0.0, {float(L - 1)})"
            elif pad == "reflection":
                lo, hi = bounds[i]
                r = f"{refl}({t}, {lo}, {hi})" if hi > lo else f"tf.zeros_like({t})"
                t = f"tf.clip_by_value(tf.math.round({r}), 0.0, {float(L - 1)})"
            valid.append(f"(({t}) >= 0) & (({t}) < {L})")
            safe.append(f"tf.cast(tf.clip_by_value({t}, 0.0, {float(L - 1)}), tf.int32)")
        mask = " & ".join(valid)
        vals = f"tf.gather_nd({xl}, tf.stack([{', '.join(safe)}], axis=-1), batch_dims=1)"
        return f"{vals} * tf.cast(tf.expand_dims({mask}, -1), {xl}.dtype)"

    work = f"{xl}.dtype"
    if mode == "nearest":
        lines.append(f"{y} = {taps([f'tf.math.round({v})' for v in coords])}")
    else:
        base = [c.tmp(f"base{i}") for i in range(nd)]
        lines += [f"{b} = tf.math.floor({v})" for b, v in zip(base, coords)]
        offsets = (0, 1) if mode == "linear" else (-1, 0, 1, 2)
        terms = []
        for offs in itertools.product(offsets, repeat=nd):
            ws = []
            for i in range(nd):
                d = f"({coords[i]} - ({base[i]} + {offs[i]}))"
                if mode == "linear":
                    ws.append(f"tf.math.maximum(1.0 - tf.math.abs({d}), 0.0)")
                else:
                    a = f"tf.math.abs({d})"
                    ws.append(f"tf.where({a} <= 1, (1.25 * {a} - 2.25) * {a} * {a} + 1, tf.where({a} < 2, "
                              f"((-0.75 * {a} + 3.75) * {a} - 6.0) * {a} + 3.0, tf.zeros_like({a})))")
            w = c.tmp("w")
            lines.append(f"{w} = {' * '.join(ws)}")
            terms.append(f"{taps([f'({base[i]} + {offs[i]})' for i in range(nd)])} * tf.cast(tf.expand_dims({w}, -1), {work})")
        lines.append(f"{y} = tf.add_n([{', '.join(terms)}])")
    back = f"tf.transpose({y}, {c.lit([0, nd + 1, *range(1, nd + 1)])})"
    dt = c.dtype(0)
    if dt.startswith("int") or dt.startswith("uint"):
        info = np.iinfo(np.dtype(dt))
        back = f"tf.cast(tf.clip_by_value(tf.math.round({back}), {float(info.min)}, {float(info.max)}), {c.tf(dt)})"
    return lines + [f"{c.o()} = {back}"]


# ----------------------------------------------------------------------------- more newer ops
@lowering("causal_conv_with_state", accepts=_static_dims(1))
def causal_conv_with_state(c: Any) -> list[str]:
    """Depthwise causal conv over [past_state | input] (no padding), optional SiLU; the last
    k-1 steps are the new state."""
    ch, _, k = c.static_shape(1)
    x = c.i(0)
    full, w, y = c.tmp("full"), c.tmp("w"), c.tmp("y")
    past = c.i(3) if c.has(3) else f"tf.zeros(tf.stack([tf.shape({x})[0], {ch}, {k - 1}]), {x}.dtype)"
    lines = [f"{full} = tf.concat([tf.cast({past}, {x}.dtype), {x}], axis=2)",
             f"{w} = tf.reshape({c.i(1)}, [{ch}, {k}])",
             f"{y} = tf.add_n([{full}[:, :, j:j + tf.shape({x})[2]] * {w}[None, :, j:j + 1] for j in range({k})])"]
    if c.has(2):
        lines.append(f"{y} = {y} + {c.i(2)}[None, :, None]")
    if c.attr("activation", "none") in ("silu", "swish"):
        lines.append(f"{y} = {y} * tf.math.sigmoid({y})")
    lines.append(f"{c.o(0)} = {y}")
    if len(c.node.outputs) > 1:
        lines.append(f"{c.o(1)} = {full}[:, :, tf.shape({full})[2] - {k - 1}:]")
    return lines


@lowering("rotary_embedding", accepts=_static_dims(0))
def rotary_embedding(c: Any) -> list[str]:
    shape = c.static_shape(0)
    x, cos, sin, part, x1, x2, re, im, y = (c.tmp(s) for s in ("x", "cos", "sin", "part", "x1", "x2", "re", "im", "y"))
    if len(shape) == 4:
        lines = [f"{x} = tf.transpose({c.i(0)}, [0, 2, 1, 3])"]
    else:
        lines = [f"{x} = tf.reshape({c.i(0)}, {c.lit([shape[0], shape[1], int(c.attr('num_heads')), -1])})"]
    head = shape[-1] if len(shape) == 4 else shape[-1] // int(c.attr("num_heads"))
    rot = int(c.attr("rotary_embedding_dim", 0) or 0) or head
    if c.has(3):
        lines += [f"{cos} = tf.gather({c.i(1)}, {c.i(3)})", f"{sin} = tf.gather({c.i(2)}, {c.i(3)})"]
    else:
        lines += [f"{cos} = {c.i(1)}", f"{sin} = {c.i(2)}"]
    lines += [f"{cos} = tf.cast({cos}, {x}.dtype)[:, :, None, :]", f"{sin} = tf.cast({sin}, {x}.dtype)[:, :, None, :]",
              f"{part} = {x}[..., :{rot}]"]
    if c.attr("interleaved", 0):
        lines += [f"{x1} = {part}[..., 0::2]", f"{x2} = {part}[..., 1::2]"]
    else:
        lines += [f"{x1} = {part}[..., :{rot // 2}]", f"{x2} = {part}[..., {rot // 2}:]"]
    lines += [f"{re} = {x1} * {cos} - {x2} * {sin}", f"{im} = {x1} * {sin} + {x2} * {cos}"]
    if c.attr("interleaved", 0):
        lines.append(f"{y} = tf.reshape(tf.stack([{re}, {im}], axis=-1), tf.shape({part}))")
    else:
        lines.append(f"{y} = tf.concat([{re}, {im}], axis=-1)")
    lines.append(f"{y} = tf.concat([{y}, {x}[..., {rot}:]], axis=-1)")
    back = f"tf.transpose({y}, [0, 2, 1, 3])" if len(shape) == 4 else f"tf.reshape({y}, {c.lit(list(shape))})"
    return lines + [f"{c.o()} = {back}"]


@lowering("center_crop_pad", accepts=_static_dims(0))
def center_crop_pad(c: Any) -> list[str]:
    shape = list(c.static_shape(0))
    r = len(shape)
    axes = c.attr("axes")
    axes = list(range(r)) if axes is None else [norm_axis(a, r) for a in axes]
    if c.const(1) is None:  # runtime target shape: crop by a gathered window, then pad
        cur, tgt = c.i(0), c.tmp("target")
        lines = [f"{tgt} = tf.cast(tf.reshape({c.i(1)}, [-1]), tf.int32)"]
        for k, a in enumerate(axes):
            t, nxt, extra = c.tmp(f"t{a}"), c.tmp(f"ccp{a}"), c.tmp(f"extra{a}")
            dim = shape[a]
            pad_rows = [[0, 0]] * r
            lines += [f"{t} = {tgt}[{k}]",
                      f"{nxt} = tf.gather({cur}, tf.range(tf.maximum({dim} - {t}, 0) // 2, tf.maximum({dim} - {t}, 0) // 2 "
                      f"+ tf.minimum({t}, {dim})), axis={a})",
                      f"{extra} = tf.maximum({t} - {dim}, 0)",
                      f"{nxt} = tf.pad({nxt}, tf.tensor_scatter_nd_update(tf.constant({c.lit(pad_rows)}, tf.int32), "
                      f"[[{a}]], tf.stack([tf.stack([{extra} // 2, {extra} - {extra} // 2])])))"]
            cur = nxt
        return lines + [f"{c.o()} = tf.identity({cur})"]
    target = [int(v) for v in np.asarray(c.const(1)).reshape(-1)]
    crop, pads = [":"] * r, [[0, 0] for _ in range(r)]
    for a, t in zip(axes, target):
        dim = shape[a]
        if t < dim:
            start = (dim - t) // 2
            crop[a] = f"{start}:{start + t}"
        elif t > dim:
            pads[a] = [(t - dim) // 2, t - dim - (t - dim) // 2]
    return [f"{c.o()} = tf.pad({c.i(0)}[{', '.join(crop)}], {c.lit(pads)})"]


@lowering("affine_grid", accepts=_static_dims(0))
def affine_grid(c: Any) -> list[str]:
    if c.const(1) is None:  # runtime size: the base grid is built in TensorFlow
        nd = c.static_shape(0)[1]
        dims, bases, mesh, homog = c.tmp("dims"), c.tmp("bases"), c.tmp("mesh"), c.tmp("homog")
        align = bool(c.attr("align_corners", 0))
        lines = [f"{dims} = tf.cast(tf.reshape({c.i(1)}, [-1]), tf.int32)", f"{bases} = []"]
        for i in range(nd):
            idx, L = c.tmp(f"idx{i}"), f"tf.cast({dims}[{2 + i}], {c.i(0)}.dtype)"
            lines.append(f"{idx} = tf.range({L})")
            if align:
                lines.append(f"{bases}.append(tf.where({L} > 1, {idx} * 2 / tf.maximum({L} - 1, 1) - 1, 0 * {idx}))")
            else:
                lines.append(f"{bases}.append(({idx} * 2 + 1) / {L} - 1)")
        lines += [f"{mesh} = tf.meshgrid(*{bases}, indexing='ij')",
                  f"{homog} = tf.reshape(tf.stack({mesh}[::-1] + [tf.ones_like({mesh}[0])], axis=-1), [-1, {nd + 1}])",
                  f"{c.o()} = tf.reshape(tf.einsum('pj,nij->npi', {homog}, {c.i(0)}), "
                  f"tf.concat([{dims}[:1], {dims}[2:], [{nd}]], 0))"]
        return lines
    dims = [int(v) for v in np.asarray(c.const(1)).reshape(-1)]
    n, spatial = dims[0], dims[2:]
    nd = len(spatial)
    align = bool(c.attr("align_corners", 0))

    def base(L: int) -> np.ndarray:
        if align:
            return np.linspace(-1.0, 1.0, L) if L > 1 else np.zeros(1)
        return (np.arange(L) * 2.0 + 1.0) / L - 1.0

    mesh = np.meshgrid(*[base(L) for L in spatial], indexing="ij")
    homog = np.stack(list(reversed(mesh)) + [np.ones(mesh[0].shape)], axis=-1).reshape(-1, nd + 1)
    dt = c.dtype(0)
    h = c.weight(homog.astype(np.float64 if dt == "float64" else np.float32), c.node.name + "_grid")
    return [f"{c.o()} = tf.reshape(tf.einsum('pj,nij->npi', tf.cast({h}, {c.i(0)}.dtype), {c.i(0)}), "
            f"{c.lit([n, *spatial, nd])})"]


# ----------------------------------------------------------------------------- quantization
def _quant_check(n: Node) -> tuple[str, str] | None:
    if n.attrs.get("block_size", 0):
        return needs_const(rank=0)(n) or _static_axis(n)
    return needs_rank(0, 1)(n)


def _static_axis(n: Node) -> tuple[str, str] | None:
    s = n.inputs[0].type.shape if n.inputs[0] is not None else None
    if s is None or not isinstance(s[norm_axis(n.attrs.get("axis", 1), len(s))], int):
        return "dynamic_shape", "blocked quantization needs the blocked axis' size"
    return None


def _per_axis(c: Any, expr: str, k: int) -> str:
    """A per-axis (1-D) or blocked parameter shaped to broadcast over input 0."""
    block = int(c.attr("block_size", 0))
    if block:
        a = norm_axis(c.attr("axis", 1), c.rank(0))
        dim = c.shape(0)[a]
        cut = [":"] * c.rank(0)
        cut[a] = f":{dim}"
        return f"tf.repeat({expr}, {block}, axis={a})[{', '.join(cut)}]"
    if c.rank(k) != 1 or (c.shape(k)[0] == 1):
        return expr
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 1), r)
    shape = [1] * r
    shape[a] = -1
    return f"tf.reshape({expr}, {c.lit(shape)})"


@lowering("quantize_linear", accepts=_quant_check)
def quantize_linear(c: Any) -> list[str]:
    from translator.dtypes import numpy_dtype

    out_dt = c.out_dtype()
    source = (c.node.meta.get("source_dtypes") or [None])[0] or out_dt  # saturate to the model's type
    info = np.iinfo(numpy_dtype(source))
    work = "tf.float64" if c.dtype(0) == "float64" else "tf.float32"
    scale = _per_axis(c, f"tf.cast({c.i(1)}, {work})", 1)
    q = f"tf.math.round(tf.cast({c.i(0)}, {work}) / {scale})"
    if c.has(2):
        q = f"{q} + {_per_axis(c, f'tf.cast({c.i(2)}, {work})', 2)}"
    return [f"{c.o()} = tf.cast(tf.clip_by_value({q}, {float(info.min)}, {float(info.max)}), {c.tf(out_dt)})"]


@lowering("dequantize_linear", accepts=_quant_check)
def dequantize_linear(c: Any) -> list[str]:
    work = "tf.float64" if c.out_dtype() == "float64" else "tf.float32"
    x = f"tf.cast({c.i(0)}, {work})"
    if c.has(2):
        x = f"({x} - {_per_axis(c, f'tf.cast({c.i(2)}, {work})', 2)})"
    return [f"{c.o()} = tf.cast({x} * {_per_axis(c, f'tf.cast({c.i(1)}, {work})', 1)}, {c.tf(c.out_dtype())})"]
