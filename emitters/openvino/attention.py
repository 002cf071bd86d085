"""OpenVINO rules of ONNX Attention (23/24): scaled dot-product attention spelled out
with MatMul / Softmax, following the ONNX reference semantics.

    Y = softmax(softcap(Q·s @ (K·s)ᵀ) + bias) @ V,  s = sqrt(scale), scale = 1/sqrt(head size)

``bias`` adds the mask (bool: 0 / -inf; float: as is, padded with -inf up to the key
length), the causal frontier (key j is visible from query i iff j <= i + offset, offset =
the past length, or per batch nonpad_kv_seqlen - q_len), the sliding window and the
key padding of nonpad_kv_seqlen. Rows whose bias is -inf everywhere give zeros. K/V heads
are repeated (interleaved) for grouped-query attention; 3-D inputs are split into heads.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.ir.graph import Node

from .helpers import Refusal, all_along, i64, rank_of, used
from .registry import rule

if TYPE_CHECKING:
    from .codegen import Gen


def _static(node: Node, i: int) -> tuple[int, ...] | None:
    v = node.inputs[i] if i < len(node.inputs) else None
    if v is None or not v.type.is_static:
        return None
    return tuple(int(d) for d in v.type.shape or ())


def _check(node: Node) -> Refusal | None:
    for i in (0, 1, 2):
        if _static(node, i) is None:
            return Refusal("dynamic_shape", "Q, K and V need static shapes")
    for i in (3, 4, 5, 6):
        v = node.inputs[i] if i < len(node.inputs) else None
        if v is not None and not v.type.is_static:
            return Refusal("dynamic_shape", "the mask and caches need static shapes")
    if len(_static(node, 0) or ()) not in (3, 4):
        return Refusal("rank_limit", "Q must be 3-D or 4-D")
    return None


def _heads(g: "Gen", x: str, shape: tuple[int, ...], heads: int) -> tuple[str, tuple[int, ...]]:
    """[B, L, heads*H] → [B, heads, L, H] (4-D inputs pass through)."""
    if len(shape) == 4:
        return x, shape
    b, n, hidden = shape
    h = hidden // heads
    y = g.let(f"ops.transpose(ops.reshape({x}, {i64(g, [b, n, heads, h])}, False), {i64(g, [0, 2, 1, 3])})")
    return y, (b, heads, n, h)


@rule("attention", check=_check)
def _attention(g: "Gen", node: Node) -> None:
    dt = g.dtype(0)
    qs, ks, vs = (_static(node, i) for i in (0, 1, 2))
    assert qs is not None and ks is not None and vs is not None
    three_d = len(qs) == 3
    q_heads = int(g.a("q_num_heads") or (qs[1] if not three_d else 1))
    kv_heads = int(g.a("kv_num_heads") or (ks[1] if not three_d else 1))
    q, qs = _heads(g, g.x(0), qs, q_heads)
    k, ks = _heads(g, g.x(1), ks, kv_heads)
    v, vs = _heads(g, g.x(2), vs, kv_heads)
    past_k, past_v = g.x(4), g.x(5)
    past_len = 0
    if past_k is not None:  # the caches grow along the sequence axis: present_key / present_value
        past_len = int((_static(node, 4) or (0, 0, 0))[2])
        k = g.let(f"ops.concat([{past_k}, {k}], 2)", "present_key")
        v = g.let(f"ops.concat([{past_v}, {v}], 2)", "present_value")
    if used(node, 1):
        g.bind(1, k)
    if used(node, 2):
        g.bind(2, v)
    lq, lk = qs[2], ks[2] + past_len
    if dt in ("float16", "bfloat16"):  # computed in float32 (the reference is wider still), cast back at the end
        q, k, v = (g.let(f"ops.convert({x}, ov.Type.f32)") for x in (q, k, v))
        dt = "float32"
    bias = _bias(g, node, lq, lk, past_len, dt)

    # grouped-query attention: repeat each K/V head q_heads / kv_heads times, interleaved
    if q_heads != kv_heads and q_heads % kv_heads == 0:
        reps = q_heads // kv_heads
        k, v = (g.let(f"ops.reshape(ops.tile(ops.unsqueeze({x}, {i64(g, [2])}), {i64(g, [1, 1, reps, 1, 1])}), "
                      f"{i64(g, [qs[0], q_heads, lk, h])}, False)", name)
                for x, h, name in ((k, ks[3], "k_heads"), (v, vs[3], "v_heads")))

    scale = g.a("scale")
    s = float(np.sqrt(1.0 / np.sqrt(qs[3]) if scale is None else float(scale)))
    sc = g.const(s, dt)
    qk = g.let(f"ops.matmul(ops.multiply({q}, {sc}), ops.multiply({k}, {sc}), False, True)", "qk")
    softcap = float(g.a("softcap", 0.0) or 0.0)
    if softcap > 0:
        cap = g.const(softcap, dt)
        qk = g.let(f"ops.multiply(ops.tanh(ops.divide({qk}, {cap})), {cap})", "qk_capped")
    logits = g.let(f"ops.add({qk}, {bias})", "logits") if bias is not None else qk
    probs = g.let(f"ops.softmax({logits}, -1)", "probs")
    if bias is not None:  # rows with no visible key: zeros, not NaN
        # (not reduce_max == -inf: the CPU plugin's ReduceMax starts from the lowest finite value)
        dead = all_along(g, f"ops.is_inf({bias}, {{'detect_positive': False}})", i64(g, [-1]), True)
        probs = g.let(f"ops.select({dead}, {g.const(0, dt)}, {probs})", "probs")
    y = g.let(f"ops.matmul({probs}, {v}, False, False)")
    if three_d:
        y = g.let(f"ops.reshape(ops.transpose({y}, {i64(g, [0, 2, 1, 3])}), {i64(g, [qs[0], lq, -1])}, False)")
    out_t = g.dtype(0)
    g.bind(0, y if out_t == dt else g.let(f"ops.convert({y}, {g.ty(out_t)})"))
    if used(node, 3):
        qk_out = {0: qk, 1: qk, 2: logits, 3: probs}[int(g.a("qk_matmul_output_mode", 0))]
        g.bind(3, qk_out if out_t == dt else g.let(f"ops.convert({qk_out}, {g.ty(out_t)})"))


def _bias(g: "Gen", node: Node, lq: int, lk: int, past_len: int, dt: str) -> Refusal | None:
    """The additive attention bias (0 where a key is visible, -inf where not), or None."""
    mask, nonpad = g.x(3), g.x(6)
    causal = bool(int(g.a("is_causal", 0)))
    left, right = int(g.a("left_window_size", -1)), int(g.a("right_window_size", -1))
    if mask is None and nonpad is None and not causal and left < 0 and right < 0:
        return None
    zero, ninf = g.const(0, dt), g.const(-np.inf, dt)
    terms = []
    if mask is not None:
        ms = _static(node, 3) or ()
        if g.dtype(3) == "bool":
            mask = g.let(f"ops.select({mask}, {zero}, {ninf})", "mask")
        elif g.dtype(3) != dt:
            mask = g.let(f"ops.convert({mask}, {g.ty(dt)})", "mask")
        if ms and ms[-1] < lk:  # keys beyond the mask are masked out
            pad = [0] * len(ms)
            mask = g.let(f"ops.pad({mask}, {i64(g, pad)}, {i64(g, pad[:-1] + [lk - ms[-1]])}, 'constant', {ninf})",
                         "mask")
        terms.append(mask)
    if causal or left >= 0 or right >= 0:
        # query i (at absolute position i + offset) sees key j iff j <= i + offset, and within the window
        offset = i64(g, past_len)
        if nonpad is not None and past_len == 0 and g.x(4) is None:  # per batch: [B, 1, 1, 1]
            offset = g.let(f"ops.reshape(ops.subtract(ops.convert({nonpad}, ov.Type.i64), {i64(g, lq)}), "
                           f"{i64(g, [-1, 1, 1, 1])}, False)", "offset")
        diff = g.let(f"ops.subtract(ops.add({i64(g, np.arange(lq).reshape(lq, 1))}, {offset}), "
                     f"{i64(g, np.arange(lk).reshape(1, lk))})", "distance")
        conds = ([f"ops.greater_equal({diff}, {i64(g, 0)})"] if causal else []) + \
                ([f"ops.less_equal({diff}, {i64(g, left)})"] if left >= 0 else []) + \
                ([f"ops.less_equal(ops.negative({diff}), {i64(g, right)})"] if right >= 0 else [])
        allowed = g.let(conds[0], "visible")
        for cond in conds[1:]:
            allowed = g.let(f"ops.logical_and({allowed}, {cond})", "visible")
        terms.append(g.let(f"ops.select({allowed}, {zero}, {ninf})", "frontier"))
    if nonpad is not None:  # keys at or beyond each batch's length are padding
        keep = g.let(f"ops.less({i64(g, np.arange(lk))}, ops.reshape(ops.convert({nonpad}, ov.Type.i64), "
                     f"{i64(g, [-1, 1, 1, 1])}, False))", "valid_key")
        terms.append(g.let(f"ops.select({keep}, {zero}, {ninf})", "padding"))
    bias = terms[0] if terms else None
    for t in terms[1:]:
        bias = g.let(f"ops.add({bias}, {t})", "bias")
    return bias


# ----------------------------------------------------------------------------- rotary embedding
def _rotary_check(node: Node) -> Refusal | None:
    x = node.inputs[0]
    if x is None or not x.type.is_static or rank_of(node) not in (3, 4):
        return Refusal("dynamic_shape", "rotary_embedding needs a static 3-D or 4-D input")
    return None


@rule("rotary_embedding", check=_rotary_check)
def _rotary(g: "Gen", node: Node) -> None:
    # pairs (x1, x2) of the first `rot` features become (x1 cos - x2 sin, x1 sin + x2 cos)
    shape = [int(d) for d in g.t(0).shape or ()]
    x = g.x(0)
    if len(shape) == 3:  # (batch, seq, heads * size) -> (batch, seq, heads, size)
        heads = int(g.a("num_heads"))
        x = g.let(f"ops.reshape({x}, {i64(g, [shape[0], shape[1], heads, -1])}, False)")
    else:  # (batch, heads, seq, size) -> (batch, seq, heads, size)
        x = g.let(f"ops.transpose({x}, {i64(g, [0, 2, 1, 3])})")
    size = shape[-1] if len(shape) == 4 else shape[2] // int(g.a("num_heads"))
    rot = int(g.a("rotary_embedding_dim") or 0) or size
    cos, sin = g.x(1), g.x(2)
    if g.x(3) is not None:
        cos = g.let(f"ops.gather({cos}, {g.x(3)}, {i64(g, 0)})")
        sin = g.let(f"ops.gather({sin}, {g.x(3)}, {i64(g, 0)})")
    cos = g.let(f"ops.unsqueeze({cos}, {i64(g, [2])})")
    sin = g.let(f"ops.unsqueeze({sin}, {i64(g, [2])})")

    def part(start: int, stop: int, step: int = 1) -> str:
        return g.let(f"ops.slice({x}, {i64(g, [start])}, {i64(g, [stop])}, {i64(g, [step])}, {i64(g, [3])})")

    interleaved = bool(int(g.a("interleaved")))
    x1, x2 = (part(0, rot, 2), part(1, rot, 2)) if interleaved else (part(0, rot // 2), part(rot // 2, rot))
    real = g.let(f"ops.subtract(ops.multiply({x1}, {cos}), ops.multiply({x2}, {sin}))")
    imag = g.let(f"ops.add(ops.multiply({x1}, {sin}), ops.multiply({x2}, {cos}))")
    if interleaved:
        pair = f"ops.concat([ops.unsqueeze({real}, {i64(g, [4])}), ops.unsqueeze({imag}, {i64(g, [4])})], 4)"
        rotated = g.let(f"ops.reshape({pair}, {i64(g, [0, 0, 0, rot])}, True)")
    else:
        rotated = g.let(f"ops.concat([{real}, {imag}], 3)")
    y = rotated if rot == size else g.let(f"ops.concat([{rotated}, {part(rot, size)}], 3)")
    if len(shape) == 3:
        g.out(0, f"ops.reshape({y}, {i64(g, shape)}, False)")
    else:
        g.out(0, f"ops.transpose({y}, {i64(g, [0, 2, 1, 3])})")
