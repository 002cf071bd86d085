"""TensorFlow rules for attention and rotary embeddings.
"""
from __future__ import annotations

from typing import Any

from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .helpers import static_dims, both, needs_rank
from .registry import rule


def _attention_check(n: Node) -> Refusal | None:
    return both(needs_rank(0, 1, 2), static_dims(0, 1, 2, 3, 4))(n)


@rule("attention", check=_attention_check)
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


@rule("rotary_embedding", check=static_dims(0))
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
