"""Transformer block references: attention (opset 24/25 form), rotary_embedding, swiglu."""
from __future__ import annotations

import numpy as np

from . import reference
from .elementwise import float_map, narrow


def _f64(x):
    return np.asarray(x).astype(np.float64)


@reference("swiglu")
def swiglu(A, B, alpha=1.0):
    """swish_alpha(A) * B = A * sigmoid(alpha * A) * B (same shapes, no broadcasting)."""
    return float_map(lambda a, b: a / (1.0 + np.exp(-alpha * a)) * b, A, B)


@reference("rotary_embedding")
def rotary_embedding(X, cos_cache, sin_cache, position_ids=None, interleaved=0, num_heads=None,
                     rotary_embedding_dim=0):
    """Rotate the first ``rotary_embedding_dim`` features of each head by the cached angles.

    X is (batch, heads, seq, head_size) or (batch, seq, heads * head_size) with ``num_heads``.
    The caches are (max_position, rot / 2) indexed by position_ids (batch, seq), or already
    (batch, seq, rot / 2) without position_ids. Pairs are (x[i], x[i + rot/2]) or, with
    ``interleaved``, (x[2i], x[2i + 1]); each becomes (x1 cos - x2 sin, x1 sin + x2 cos)."""
    x = _f64(X)
    if x.ndim == 4:
        x = x.transpose(0, 2, 1, 3)  # -> (batch, seq, heads, head_size)
    else:
        x = x.reshape(x.shape[0], x.shape[1], num_heads, -1)
    rot = rotary_embedding_dim or x.shape[-1]
    cos, sin = _f64(cos_cache), _f64(sin_cache)
    if position_ids is not None:
        cos, sin = cos[np.asarray(position_ids)], sin[np.asarray(position_ids)]
    cos, sin = cos[:, :, np.newaxis, :], sin[:, :, np.newaxis, :]
    part, rest = x[..., :rot], x[..., rot:]
    if interleaved:
        x1, x2 = part[..., 0::2], part[..., 1::2]
    else:
        x1, x2 = part[..., : rot // 2], part[..., rot // 2:]
    real, imag = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    if interleaved:
        rotated = np.stack([real, imag], axis=-1).reshape(part.shape)
    else:
        rotated = np.concatenate([real, imag], axis=-1)
    y = np.concatenate([rotated, rest], axis=-1)
    y = y.transpose(0, 2, 1, 3) if np.ndim(X) == 4 else y.reshape(np.shape(X))
    return narrow(y, np.asarray(X).dtype)


def _heads(x, num_heads):
    """(batch, seq, heads * size) -> (batch, heads, seq, size); 4-D inputs pass through."""
    x = _f64(x)
    if x.ndim == 3:
        x = x.reshape(x.shape[0], x.shape[1], num_heads, -1).transpose(0, 2, 1, 3)
    return x


def _allowed(batch, q_len, kv_len, attn_mask, offset, nonpad_kv_seqlen, is_causal, left, right):
    """(allowed bool mask, float mask to add), both broadcastable to (B, Hq, Sq, S)."""
    allowed = np.ones((batch, 1, q_len, kv_len), dtype=bool)
    added = np.zeros((1, 1, 1, 1))
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        short = kv_len - m.shape[-1]  # a shorter mask is padded with "masked"
        if m.dtype == np.bool_:
            m = np.concatenate([m, np.zeros(m.shape[:-1] + (short,), bool)], axis=-1)
            allowed = allowed & m
        else:
            m = np.concatenate([_f64(m), np.full(m.shape[:-1] + (short,), -np.inf)], axis=-1)
            added = m
    pos = offset[:, np.newaxis] + np.arange(q_len)  # absolute query positions (B, Sq)
    pos = pos[:, np.newaxis, :, np.newaxis]
    key = np.arange(kv_len)
    if is_causal:
        allowed = allowed & (key <= pos)
    if left >= 0:
        allowed = allowed & (key >= pos - left)
    if right >= 0:
        allowed = allowed & (key <= pos + right)
    if nonpad_kv_seqlen is not None:
        allowed = allowed & (key < np.asarray(nonpad_kv_seqlen)[:, None, None, None])
    return allowed, added


def _safe_softmax(s):
    """softmax over the last axis; a row with no finite logit gives zeros, not NaN."""
    m = np.max(s, axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(m), m, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    with np.errstate(all="ignore"):
        return np.where(total > 0, e / total, 0.0)


@reference("attention")
def attention(Q, K, V, attn_mask=None, past_key=None, past_value=None, nonpad_kv_seqlen=None,
              is_causal=0, kv_num_heads=None, q_num_heads=None, qk_matmul_output_mode=0, scale=None,
              softcap=0.0, softmax_precision=None, left_window_size=-1, right_window_size=-1):
    """Scaled dot-product attention (MHA / GQA / MQA) with optional KV cache.

    Returns (Y, present_key, present_value, qk_matmul_output). scores = scale * Q K^T
    (scale defaults to 1/sqrt(head_size)), then softcap * tanh(scores / softcap) if softcap,
    then + float mask / -inf where not allowed (bool mask, causal j <= i + offset, sliding
    window, keys beyond nonpad_kv_seqlen), then softmax (a fully masked row is 0), then @ V.
    qk_matmul_output: mode 0 scaled QK, 1 after softcap, 2 after the mask, 3 softmax."""
    dt_q, dt_v = np.asarray(Q).dtype, np.asarray(V).dtype
    q, k, v = _heads(Q, q_num_heads), _heads(K, kv_num_heads), _heads(V, kv_num_heads)
    past = 0
    if past_key is not None:
        past = np.shape(past_key)[2]
        k = np.concatenate([_f64(past_key), k], axis=2)
        v = np.concatenate([_f64(past_value), v], axis=2)
    batch, hq, q_len, head_size = q.shape
    kv_len, group = k.shape[2], hq // k.shape[1]
    if scale is None:
        scale = 1.0 / np.sqrt(head_size)
    raw = (q @ np.repeat(k, group, axis=1).swapaxes(-1, -2)) * scale
    capped = softcap * np.tanh(raw / softcap) if softcap else raw
    if nonpad_kv_seqlen is not None and past_key is None:
        offset = np.asarray(nonpad_kv_seqlen).astype(np.int64) - q_len
    else:
        offset = np.full(batch, past, dtype=np.int64)
    allowed, added = _allowed(batch, q_len, kv_len, attn_mask, offset, nonpad_kv_seqlen,
                              is_causal, left_window_size, right_window_size)
    biased = np.where(allowed, capped + added, -np.inf)
    probs = _safe_softmax(biased)  # in float64 whatever softmax_precision asks for
    y = probs @ np.repeat(v, group, axis=1)
    if np.ndim(Q) == 3:
        y = y.transpose(0, 2, 1, 3).reshape(batch, q_len, -1)
    qk = {0: raw, 1: capped, 2: biased, 3: probs}[qk_matmul_output_mode]
    return narrow(y, dt_q), narrow(k, np.asarray(K).dtype), narrow(v, dt_v), narrow(qk, dt_q)
