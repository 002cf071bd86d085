"""Core ML rules: attention (scaled dot-product, MHA/GQA heads, masks, KV cache)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from translator.ir.graph import Node, Value

from .mil import lit, np_dtype, np_lit, static_shape
from .registry import Refusal, rule

if TYPE_CHECKING:
    from .codegen import Gen


# ----------------------------------------------------------------------------- attention
def _attn_check(node: Node) -> Refusal | None:
    ins = list(node.inputs) + [None] * (7 - len(node.inputs))
    if any(static_shape(v) is None for v in ins[:3]):
        return Refusal("dynamic_shape", "attention needs static Q, K, V shapes here")
    if ins[6] is not None and (int(node.attrs.get("is_causal", 0)) or int(node.attrs.get("left_window_size", -1)) >= 0
                               or int(node.attrs.get("right_window_size", -1)) >= 0 or ins[4] is not None):
        return Refusal("unsupported_attribute_value", "nonpad_kv_seqlen with a causal/window mask or a KV cache")
    if ins[3] is not None and static_shape(ins[3]) is None:
        return Refusal("dynamic_shape", "the attention mask needs a static shape")
    return None


@rule("attention", check=_attn_check)
def _attention(gen: Gen, node: Node) -> None:
    """softmax(mask(softcap(scale * Q K^T))) V with MHA/GQA heads and a KV cache, as MIL ops.

    Masks that depend on shapes only (causal, sliding window: key j allowed for query i when
    j <= i + past, ...) are computed here as constants; bool/float attn_mask and
    nonpad_kv_seqlen are applied at run time. A fully masked row gives zeros, not NaN."""
    ins = list(node.inputs) + [None] * (7 - len(node.inputs))
    Q, K, V, mask, past_k, past_v, nonpad = ins[:7]
    dt = Q.type.dtype
    outs = node.outputs

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    def heads(v: Value, n: Any, key: str) -> tuple[str, tuple[int, ...]]:
        shp = static_shape(v)
        if len(shp) == 4:
            return gen.var(v), shp
        n = int(n)
        r = step(f"{key}_split", f"mb.reshape(x={gen.var(v)}, shape={lit([shp[0], shp[1], n, shp[2] // n])}")
        return step(f"{key}_heads", f"mb.transpose(x={r}, perm=[0, 2, 1, 3]"), (shp[0], n, shp[1], shp[2] // n)

    q, (b, hq, lq, d) = heads(Q, gen.attr(node, "q_num_heads"), "q")
    k, (_, hkv, lk, _) = heads(K, gen.attr(node, "kv_num_heads"), "k")
    v, (_, _, _, dv) = heads(V, gen.attr(node, "kv_num_heads"), "v")
    past = 0
    if past_k is not None:
        past = static_shape(past_k)[2]
        k = step("k_all", f"mb.concat(values=[{gen.var(past_k)}, {k}], axis=2, interleave=False")
        v = step("v_all", f"mb.concat(values=[{gen.var(past_v)}, {v}], axis=2, interleave=False")
    lkv = past + lk
    for i, t in ((1, k), (2, v)):
        if i < len(outs):
            gen.emit(f"{gen.out(node, i)} = mb.identity(x={t}, name={gen.name(node, i)})")
    group = hq // hkv
    if group > 1:  # GQA: every K/V head serves `group` query heads (numpy repeat on axis 1)
        for key in ("k", "v"):
            t = k if key == "k" else v
            e = step(f"{key}_g", f"mb.expand_dims(x={t}, axes=[2]")
            tt = step(f"{key}_rep", f"mb.tile(x={e}, reps=[1, 1, {group}, 1, 1]")
            rr = step(f"{key}_gqa", f"mb.reshape(x={tt}, shape={lit([b, hq, lkv, d if key == 'k' else dv])}")
            k, v = (rr, v) if key == "k" else (k, rr)
    scale = gen.attr(node, "scale")
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    qk = step("qk", f"mb.matmul(x={q}, y={k}, transpose_y=True")
    raw = step("raw", f"mb.mul(x={qk}, y={np_lit(scale, dt)}")
    capped = raw
    softcap = float(gen.attr(node, "softcap") or 0.0)
    if softcap:
        t = step("cap_in", f"mb.real_div(x={raw}, y={np_lit(softcap, dt)}")
        t = step("cap_tanh", f"mb.tanh(x={t}")
        capped = step("capped", f"mb.mul(x={t}, y={np_lit(softcap, dt)}")
    # shape-only masks, as a constant (1, 1, lq, lkv)
    pos = past + np.arange(lq)[:, None]
    key = np.arange(lkv)[None, :]
    allowed = np.ones((lq, lkv), bool)
    if int(gen.attr(node, "is_causal")):
        allowed &= key <= pos
    left, right = int(gen.attr(node, "left_window_size")), int(gen.attr(node, "right_window_size"))
    if left >= 0:
        allowed &= key >= pos - left
    if right >= 0:
        allowed &= key <= pos + right
    allow = gen.const(node, "allowed", allowed.reshape(1, 1, lq, lkv)) if not allowed.all() else None
    biased = capped
    if mask is not None:
        mshape = static_shape(mask)
        m = gen.var(mask)
        short = lkv - mshape[-1]
        if short > 0:  # a shorter mask counts as masked beyond its end
            fill = np.zeros(mshape[:-1] + (short,), bool) if mask.type.dtype == "bool" else \
                np.full(mshape[:-1] + (short,), -np.inf, np_dtype(dt))
            m = step("mask_full", f"mb.concat(values=[{m}, {gen.const(node, 'mask_pad', fill)}], axis=-1, interleave=False")
        if mask.type.dtype == "bool":
            allow = step("allow_m", f"mb.logical_and(x={allow}, y={m}") if allow else m
        else:
            biased = step("biased_m", f"mb.add(x={capped}, y={m}")
    if nonpad is not None:
        nr = step("nonpad", f"mb.reshape(x={gen.var(nonpad)}, shape={lit([b, 1, 1, 1])}")
        kr = gen.const(node, "keys", np.arange(lkv, dtype=np.int32).reshape(1, 1, 1, lkv))
        kn = step("allow_n", f"mb.less(x={kr}, y={nr}")
        allow = step("allow_all", f"mb.logical_and(x={allow}, y={kn}") if allow else kn
    if allow is not None:
        biased = step("biased", f"mb.select(cond={allow}, a={biased}, b={np_lit(-np.inf, dt)}")
    if biased == raw and mask is None:
        probs = step("probs", f"mb.softmax(x={biased}, axis=-1")
    else:  # softmax where a row without any finite logit gives 0
        mx = step("rowmax", f"mb.reduce_max(x={biased}, axes=[-1], keep_dims=True")
        fin = step("rowfinite", f"mb.greater(x={mx}, y={np_lit(-np.inf, dt)}")
        safe = step("rowmax_safe", f"mb.select(cond={fin}, a={mx}, b={np_lit(0, dt)}")
        sh = step("shifted", f"mb.sub(x={biased}, y={safe}")
        ex = step("exp", f"mb.exp(x={sh}")
        tot = step("total", f"mb.reduce_sum(x={ex}, axes=[-1], keep_dims=True")
        pos_t = step("has_mass", f"mb.greater(x={tot}, y={np_lit(0, dt)}")
        tot1 = step("total_safe", f"mb.select(cond={pos_t}, a={tot}, b={np_lit(1, dt)}")
        probs = step("probs", f"mb.real_div(x={ex}, y={tot1}")
    y4 = step("y4", f"mb.matmul(x={probs}, y={v}")
    if Q.type.rank == 3:
        yt = step("y_t", f"mb.transpose(x={y4}, perm=[0, 2, 1, 3]")
        gen.emit(f"{gen.out(node)} = mb.reshape(x={yt}, shape={lit([b, lq, -1])}, name={gen.name(node)})")
    else:
        gen.emit(f"{gen.out(node)} = mb.identity(x={y4}, name={gen.name(node)})")
    if len(outs) > 3:
        mode = int(gen.attr(node, "qk_matmul_output_mode"))
        src = {0: raw, 1: capped, 2: biased, 3: probs}[mode]
        gen.emit(f"{gen.out(node, 3)} = mb.identity(x={src}, name={gen.name(node, 3)})")
