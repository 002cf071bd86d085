"""Recurrent ops: rnn, gru, lstm (ONNX layouts and gate orders) and linear_attention."""
from __future__ import annotations

import numpy as np

from . import reference

# activation name -> (function(x, alpha, beta), default alpha, default beta); None = unused
_ACTS = {
    "relu": (lambda x, a, b: np.maximum(x, 0.0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: 1.0 / (1.0 + np.exp(-x)), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0.0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0.0, 1.0), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1.0)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1.0 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.log1p(np.exp(x)), None, None),
}


def _activations(names, alphas, betas, defaults, num_dir):
    """One list of callables per direction; alpha/beta lists are consumed in order."""
    names = list(names) if names else list(defaults) * num_dir
    alphas, betas = list(alphas or []), list(betas or [])
    fns = []
    for name in names:
        f, da, db = _ACTS[name.lower()]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        fns.append(lambda x, f=f, a=a, b=b: f(x, a, b))
    per = len(fns) // num_dir
    return [fns[d * per:(d + 1) * per] for d in range(num_dir)]


def _run(cell, X, W, R, B, sequence_lens, initial_states, direction, layout, gates, extra=None):
    """Drive ``cell`` over time for every direction and batch row.

    cell(x_t (I,), states [(H,)...], W_d, R_d, B_d, extra_d) -> new states (h first).
    initial_states: list of arrays (num_dir, batch, H) or None. Returns Y and final states.
    """
    dtype = X.dtype
    x = X.astype(np.float64)
    if layout:
        x = x.transpose(1, 0, 2)
        initial_states = [None if s is None else s.transpose(1, 0, 2) for s in initial_states]
    T, batch = x.shape[:2]
    num_dir = W.shape[0]
    H = R.shape[-1]
    lens = [T] * batch if sequence_lens is None else [int(v) for v in sequence_lens]
    Bf = np.zeros((num_dir, 2 * gates * H)) if B is None else B.astype(np.float64)
    Y = np.zeros((T, num_dir, batch, H))
    finals = [np.zeros((num_dir, batch, H)) for _ in initial_states]
    for d in range(num_dir):
        backward = direction == "reverse" or (direction == "bidirectional" and d == 1)
        for b in range(batch):
            states = [np.zeros(H) if s is None else s[d, b].astype(np.float64) for s in initial_states]
            steps = range(lens[b] - 1, -1, -1) if backward else range(lens[b])
            for t in steps:
                states = cell(x[t, b], states, W[d].astype(np.float64), R[d].astype(np.float64), Bf[d],
                              None if extra is None else extra[d])
                Y[t, d, b] = states[0]
            for i, s in enumerate(states):
                finals[i][d, b] = s
    if layout:
        Y = Y.transpose(2, 0, 1, 3)
        finals = [f.transpose(1, 0, 2) for f in finals]
    return (Y.astype(dtype),) + tuple(f.astype(dtype) for f in finals)


def _num_dir(direction):
    return 2 if direction == "bidirectional" else 1


def _clipper(clip):
    return (lambda v: v) if clip is None else (lambda v: np.clip(v, -clip, clip))


@reference("rnn")
def rnn(X, W, R, B=None, sequence_lens=None, initial_h=None, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size=None, layout=0):
    acts = _activations(activations, activation_alpha, activation_beta, ["Tanh"], _num_dir(direction))
    cl = _clipper(clip)
    H = R.shape[-1]

    def cell(xt, states, w, r, bias, d):
        (h,) = states
        return [acts[d][0](cl(w @ xt + r @ h + bias[:H] + bias[H:]))]

    extra = list(range(_num_dir(direction)))
    return _run(cell, X, W, R, B, sequence_lens, [initial_h], direction, layout, 1, extra)


@reference("gru")
def gru(X, W, R, B=None, sequence_lens=None, initial_h=None, activation_alpha=None, activation_beta=None,
        activations=None, clip=None, direction="forward", hidden_size=None, layout=0, linear_before_reset=0):
    acts = _activations(activations, activation_alpha, activation_beta, ["Sigmoid", "Tanh"], _num_dir(direction))
    cl = _clipper(clip)
    H = R.shape[-1]

    def cell(xt, states, w, r, bias, d):
        (h,) = states
        f, g = acts[d]
        wb, rb = bias[:3 * H], bias[3 * H:]
        gx = w @ xt + wb  # gate order z, r, h
        z = f(cl(gx[:H] + r[:H] @ h + rb[:H]))
        rt = f(cl(gx[H:2 * H] + r[H:2 * H] @ h + rb[H:2 * H]))
        if linear_before_reset:
            hh = g(cl(gx[2 * H:] + rt * (r[2 * H:] @ h + rb[2 * H:])))
        else:
            hh = g(cl(gx[2 * H:] + r[2 * H:] @ (rt * h) + rb[2 * H:]))
        return [(1.0 - z) * hh + z * h]

    extra = list(range(_num_dir(direction)))
    return _run(cell, X, W, R, B, sequence_lens, [initial_h], direction, layout, 3, extra)


@reference("lstm")
def lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, activation_alpha=None,
         activation_beta=None, activations=None, clip=None, direction="forward", hidden_size=None,
         input_forget=0, layout=0):
    nd = _num_dir(direction)
    acts = _activations(activations, activation_alpha, activation_beta, ["Sigmoid", "Tanh", "Tanh"], nd)
    cl = _clipper(clip)
    H = R.shape[-1]
    peep = np.zeros((nd, 3 * H)) if P is None else P.astype(np.float64)

    def cell(xt, states, w, r, bias, d):
        h, c = states
        f, g, hact = acts[d]
        pi, po, pf = peep[d][:H], peep[d][H:2 * H], peep[d][2 * H:]
        pre = w @ xt + r @ h + bias[:4 * H] + bias[4 * H:]  # gate order i, o, f, c
        i = f(cl(pre[:H] + pi * c))
        fg = 1.0 - i if input_forget else f(cl(pre[2 * H:3 * H] + pf * c))
        ct = g(cl(pre[3 * H:]))
        c_new = fg * c + i * ct
        o = f(cl(pre[H:2 * H] + po * c_new))
        return [o * hact(c_new), c_new]

    extra = list(range(nd))
    return _run(cell, X, W, R, B, sequence_lens, [initial_h, initial_c], direction, layout, 4, extra)


@reference("linear_attention")
def linear_attention(query, key, value, past_state=None, decay=None, beta=None, chunk_size=64,
                     kv_num_heads=None, q_num_heads=None, scale=0.0, update_rule="gated_delta"):
    b, t = query.shape[:2]
    hq, hk = q_num_heads, kv_num_heads
    dk = query.shape[2] // hq
    dv = value.shape[2] // hk
    scale = scale if scale else 1.0 / np.sqrt(dk)
    q = query.astype(np.float64).reshape(b, t, hq, dk)
    k = key.astype(np.float64).reshape(b, t, hk, dk)
    v = value.astype(np.float64).reshape(b, t, hk, dv)
    S = np.zeros((b, hk, dk, dv)) if past_state is None else past_state.astype(np.float64).copy()
    if decay is not None:  # per key dimension (.., hk * dk) or per head (.., hk): as (b, t, hk, dk or 1)
        decay = decay.astype(np.float64).reshape(b, t, hk, -1)
    if beta is not None:
        beta = np.broadcast_to(beta.astype(np.float64).reshape(b, t, -1), (b, t, hk))
    group = hq // hk
    out = np.zeros((b, t, hq, dv))
    for i in range(t):
        kt, vt = k[:, i], v[:, i]  # (b, hk, dk), (b, hk, dv)
        if update_rule in ("gated", "gated_delta"):
            S = np.exp(decay[:, i])[..., None] * S
        if update_rule in ("linear", "gated"):
            S = S + kt[..., :, None] * vt[..., None, :]
        else:  # delta rules: correct toward v by the current prediction S^T k
            pred = np.einsum("bhkv,bhk->bhv", S, kt)
            S = S + beta[:, i, :, None, None] * kt[..., :, None] * (vt - pred)[..., None, :]
        kv_of_q = np.repeat(S, group, axis=1)  # (b, hq, dk, dv)
        out[:, i] = scale * np.einsum("bhk,bhkv->bhv", q[:, i], kv_of_q)
    state_dtype = query.dtype if past_state is None else past_state.dtype
    return out.reshape(b, t, hq * dv).astype(query.dtype), S.astype(state_dtype)
