"""PyTorch rules: attention (scaled dot-product, rotary embedding, linear attention)."""
from __future__ import annotations

from translator.compile.render import literal

from .node import WIDE, NodeEmit
from .registry import rule



# ----------------------------------------------------------------------------- resize


# ----------------------------------------------------------------------------- attention
def _heads(e: NodeEmit, i: int, n_heads_attr: str) -> str:
    """(B, S, H*D) → (B, H, S, D); 4-D inputs as they are."""
    x = e.x(i)
    if e.need_rank(i) == 4:
        return x
    h = e.attr(n_heads_attr)
    return f"{x}.reshape({x}.shape[0], {x}.shape[1], {int(h)}, -1).transpose(1, 2)"


@rule("attention")
def attention(e: NodeEmit) -> list[str]:
    """Scaled dot-product attention (MHA/GQA/MQA, KV cache, masks, softcap) in float32 or wider:
    scores = scale * Q K^T → softcap → + float mask / -inf where not allowed → softmax (a fully
    masked row gives zeros) → @ V."""
    wide = e.dtype_id(0) in WIDE
    up = "" if wide else ".float()"
    q, k, v = (e.tmp(n) for n in ("q", "k", "v"))
    lines = [f"{q} = {_heads(e, 0, 'q_num_heads')}{up}",
             f"{k} = {_heads(e, 1, 'kv_num_heads')}{up}",
             f"{v} = {_heads(e, 2, 'kv_num_heads')}{up}"]
    has_past = e.has(4) and e.has(5)
    if has_past:
        lines += [f"{k} = torch.cat([{e.x(4)}{up}, {k}], dim=2)", f"{v} = torch.cat([{e.x(5)}{up}, {v}], dim=2)"]
    n = e.n_out()
    if n > 1:
        lines.append(f"{e.out(1)} = {k}.to({e.dtype(1)})")
    if n > 2:
        lines.append(f"{e.out(2)} = {v}.to({e.dtype(2)})")
    group = f"{q}.shape[1] // {k}.shape[1]"
    kr, vr = e.tmp("k_rep"), e.tmp("v_rep")
    lines += [f"{kr} = {k}.repeat_interleave({group}, dim=1)", f"{vr} = {v}.repeat_interleave({group}, dim=1)"]
    scale = e.attr("scale")
    scale_code = literal(float(scale)) if scale is not None else f"{q}.shape[-1] ** -0.5"
    raw = e.tmp("scores")
    lines.append(f"{raw} = torch.matmul({q}, {kr}.transpose(-1, -2)) * {scale_code}")
    stages = {0: raw}
    cur = raw
    softcap = float(e.attr("softcap") or 0.0)
    if softcap:
        capped = e.tmp("capped")
        lines.append(f"{capped} = {literal(softcap)} * torch.tanh({cur} / {literal(softcap)})")
        cur = capped
    stages[1] = cur
    kv_len, q_len = f"{k}.shape[2]", f"{q}.shape[2]"
    allowed: list[str] = []
    if e.has(3):
        mask = e.tmp("mask")
        if e.dtype_id(3) == "bool":
            lines.append(f"{mask} = F.pad({e.x(3)}, [0, {kv_len} - {e.x(3)}.shape[-1]], value=False)")
            allowed.append(mask)
        else:
            masked = e.tmp("masked")
            lines.append(f"{mask} = F.pad({e.x(3)}{up}, [0, {kv_len} - {e.x(3)}.shape[-1]], value=-float('inf'))")
            lines.append(f"{masked} = {cur} + {mask}")
            cur = masked
    causal = bool(e.attr("is_causal"))
    left, right = int(e.attr("left_window_size")), int(e.attr("right_window_size"))
    nonpad = e.has(6)
    if causal or left >= 0 or right >= 0 or nonpad:
        pos, key = e.tmp("pos"), e.tmp("key")
        if nonpad and not has_past:
            offset = f"({e.x(6)}.long() - {q_len}).reshape(-1, 1, 1, 1)"
        else:
            offset = f"{e.x(4)}.shape[2]" if has_past else "0"
        lines += [f"{pos} = {offset} + torch.arange({q_len}).reshape(-1, 1)",
                  f"{key} = torch.arange({kv_len})"]
        if causal:
            allowed.append(f"({key} <= {pos})")
        if left >= 0:
            allowed.append(f"({key} >= {pos} - {left})")
        if right >= 0:
            allowed.append(f"({key} <= {pos} + {right})")
        if nonpad:
            allowed.append(f"({key} < {e.x(6)}.reshape(-1, 1, 1, 1))")
    if allowed:
        biased = e.tmp("biased")
        lines.append(f"{biased} = torch.where({' & '.join(allowed)}, {cur}, -float('inf'))")
        cur = biased
    stages[2] = cur
    probs = e.tmp("probs")
    lines.append(f"{probs} = torch.softmax({cur}, dim=-1).nan_to_num(0.0)")
    stages[3] = probs
    y = e.out(0)
    out = f"torch.matmul({probs}, {vr})"
    if e.need_rank(0) == 3:
        out = f"{out}.transpose(1, 2).reshape({q}.shape[0], {q}.shape[2], -1)"
    lines.append(f"{y} = {out}.to({e.dtype(0)})")
    if n > 3:
        lines.append(f"{e.out(3)} = {stages[int(e.attr('qk_matmul_output_mode'))]}.to({e.dtype(0)})")
    return lines


@rule("rotary_embedding")
def rotary_embedding(e: NodeEmit) -> list[str]:
    """Pairs (x1, x2) of the first ``rot`` features of each head become
    (x1 cos - x2 sin, x1 sin + x2 cos); interleaved pairs are (x[2i], x[2i+1])."""
    x = e.x(0)
    rank = e.need_rank(0)
    t, cos, sin = e.tmp("xr"), e.tmp("cos"), e.tmp("sin")
    if rank == 4:
        lines = [f"{t} = {x}.transpose(1, 2)"]
    else:
        lines = [f"{t} = {x}.reshape({x}.shape[0], {x}.shape[1], {int(e.attr('num_heads'))}, -1)"]
    cc, sc = e.x(1), e.x(2)
    if e.has(3):
        cc, sc = f"{cc}[{e.x(3)}]", f"{sc}[{e.x(3)}]"
    lines += [f"{cos} = {cc}.unsqueeze(2)", f"{sin} = {sc}.unsqueeze(2)"]
    rot = int(e.attr("rotary_embedding_dim") or 0)
    rot_code = str(rot) if rot else f"{t}.shape[-1]"
    part, x1, x2 = e.tmp("part"), e.tmp("x1"), e.tmp("x2")
    lines.append(f"{part} = {t}[..., :{rot_code}]")
    if e.attr("interleaved"):
        lines += [f"{x1}, {x2} = {part}[..., 0::2], {part}[..., 1::2]",
                  f"{part} = torch.stack([{x1} * {cos} - {x2} * {sin}, {x1} * {sin} + {x2} * {cos}], dim=-1)"
                  f".reshape({part}.shape)"]
    else:
        half = f"{part}.shape[-1] // 2"
        lines += [f"{x1}, {x2} = {part}[..., :{half}], {part}[..., {half}:]",
                  f"{part} = torch.cat([{x1} * {cos} - {x2} * {sin}, {x1} * {sin} + {x2} * {cos}], dim=-1)"]
    y = e.out()
    lines.append(f"{t} = torch.cat([{part}, {t}[..., {rot_code}:]], dim=-1)")
    lines.append(f"{y} = {t}.transpose(1, 2)" if rank == 4 else f"{y} = {t}.reshape({x}.shape)")
    return lines


@rule("linear_attention")
def linear_attention(e: NodeEmit) -> list[str]:
    """The recurrence over time through the ``_linear_attention`` helper."""
    ins = [e.x(i) if e.has(i) else "None" for i in range(6)]
    state = e.dtype(3) if e.has(3) else e.dtype(0)
    call = (f"{e.helper('_linear_attention')}({', '.join(ins)}, {int(e.attr('q_num_heads'))}, "
            f"{int(e.attr('kv_num_heads'))}, {literal(float(e.attr('scale') or 0.0))}, "
            f"{literal(str(e.attr('update_rule')))}, {state})")
    outs = e.outs
    if len(outs) == 2:
        return [f"{outs[0]}, {outs[1]} = {call}"]
    return [f"{outs[0]} = {call}[0]"]
