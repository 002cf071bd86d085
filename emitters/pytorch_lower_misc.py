"""PyTorch lowerings: resize, attention, control flow, recurrences, quantization, losses, signal."""
from __future__ import annotations

import math

from .pytorch_ops import NodeEmit, axis, literal, lowering

_WIDE = ("float32", "float64")


def _f32(e: NodeEmit, i: int) -> str:
    """Input ``i`` computed in at least float32 (float16 / bfloat16 are widened)."""
    return e.x(i) if e.dtype_id(i) in _WIDE else f"{e.x(i)}.float()"


# ----------------------------------------------------------------------------- resize
_INTERP = {3: "linear", 4: "bilinear", 5: "trilinear"}


def _resize_plan(e: NodeEmit, rank: int, axes: list[int], shape: tuple[int, ...]) -> tuple[list[float], list[int], bool] | None:
    """(scales, output sizes, from_sizes) of the resized axes, or None if not constant."""
    in_sz = [shape[a] for a in axes]
    sizes = e.const(3) if e.has(3) else None
    if sizes is not None and sizes.size:
        want = [int(v) for v in sizes.reshape(-1)]
        policy = str(e.attr("keep_aspect_ratio_policy"))
        if policy == "stretch":
            return [w / i for w, i in zip(want, in_sz)], want, True
        s = (min if policy == "not_larger" else max)(w / i for w, i in zip(want, in_sz))
        return [s] * len(axes), [int(math.floor(s * i + 0.5)) for i in in_sz], False
    if e.has(3) and sizes is None:
        return None
    scales = e.const(2) if e.has(2) else None
    if scales is None:
        return None
    sc = [float(v) for v in scales.reshape(-1)]
    return sc, [int(math.floor(i * s)) for i, s in zip(in_sz, sc)], False


def _interpolate(e: NodeEmit, rank: int, axes: list[int], scales: list[float], out: list[int],
                 from_sizes: bool, shape: tuple[int, ...]) -> str | None:
    """F.interpolate when it computes exactly what ONNX asks for, else None."""
    mode, ctm = str(e.attr("mode")), str(e.attr("coordinate_transformation_mode"))
    if rank not in (3, 4, 5) or e.attr("exclude_outside") or ctm == "tf_crop_and_resize":
        return None
    spatial = {a: (s, o) for a, s, o in zip(axes, scales, out)}
    if any(spatial.get(a, (1.0, shape[a]))[1] != shape[a] for a in (0, 1)):
        return None
    sc = [spatial.get(a, (1.0, shape[a]))[0] for a in range(2, rank)]
    sz = [spatial.get(a, (1.0, shape[a]))[1] for a in range(2, rank)]
    antialias = bool(e.attr("antialias")) and any(s < 1 for s in sc)
    if mode == "nearest":
        nm = str(e.attr("nearest_mode"))
        if ctm == "asymmetric" and nm == "floor":
            kind = "'nearest'"
        elif ctm == "half_pixel" and nm == "round_prefer_ceil":
            kind = "'nearest-exact'"
        else:
            return None
        extra = ""
    else:
        if ctm == "align_corners":
            corners = True
        elif ctm == "half_pixel" or (ctm == "pytorch_half_pixel" and all(o > 1 for o in sz)):
            corners = False
        else:
            return None
        if mode == "cubic":
            if rank != 4 or float(e.attr("cubic_coeff_a")) != -0.75 or antialias:
                return None
            kind = "'bicubic'"
        else:
            if antialias and rank != 4:
                return None
            kind = f"'{_INTERP[rank]}'"
        extra = f", align_corners={corners}" + (", antialias=True" if antialias else "")
    target = f"size={literal(sz)}" if from_sizes else f"scale_factor={literal(sc)}"
    x = e.x(0)
    if not e.is_float(0):
        return None
    return f"F.interpolate({x}, {target}, mode={kind}{extra})"


@lowering("resize")
def resize(e: NodeEmit) -> str:
    x = e.x(0)
    shape = e.need_shape(0)
    rank = len(shape)
    axes = [axis(int(a), rank) for a in (e.attr("axes") or range(rank))]
    plan = _resize_plan(e, rank, axes, shape)
    if plan is None or (e.has(1) and e.const(1) is None):
        args = [e.x(i) if e.has(i) else "None" for i in (1, 2, 3)]
        args += [literal(axes), literal(str(e.attr("keep_aspect_ratio_policy")))] + _resize_args(e)
        return f"{e.helper('_resize_onnx')}({x}, {', '.join(args)})"
    scales, out, from_sizes = plan
    fast = _interpolate(e, rank, axes, scales, out, from_sizes, shape)
    if fast is not None:
        return fast
    roi = e.const(1) if e.has(1) else None
    n = len(axes)
    roi_v = [float(v) for v in roi.reshape(-1)] if roi is not None and roi.size else [0.0] * n + [1.0] * n
    if len(roi_v) == 2 * rank and n != rank:
        roi_v = [roi_v[a] for a in axes] + [roi_v[rank + a] for a in axes]
    args = [literal(axes), literal(scales), literal(out), literal(roi_v)] + _resize_args(e)
    return f"{e.helper('_resize')}({x}, {', '.join(args)})"


def _resize_args(e: NodeEmit) -> list[str]:
    """mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside,
    extrapolation_value, antialias as literals (the tail of ``_resize``'s arguments)."""
    return [literal(str(e.attr("mode"))), literal(str(e.attr("coordinate_transformation_mode"))),
            literal(str(e.attr("nearest_mode"))), literal(float(e.attr("cubic_coeff_a"))),
            literal(bool(e.attr("exclude_outside"))), literal(float(e.attr("extrapolation_value"))),
            literal(bool(e.attr("antialias")))]


@lowering("upsample")
def upsample(e: NodeEmit) -> str:
    """Upsample (opset 7-9): nearest = floor(i / scale), linear with asymmetric coordinates."""
    x = e.x(0)
    shape = e.need_shape(0)
    sc = e.const(1)
    if sc is None:
        raise e.refuse("requires_constant_input", "upsample needs constant scales")
    scales = [float(v) for v in sc.reshape(-1)]
    rank = len(shape)
    out = [int(math.floor(d * s)) for d, s in zip(shape, scales)]
    if str(e.attr("mode")) == "nearest" and rank in (3, 4, 5) and scales[:2] == [1.0, 1.0] and e.is_float(0):
        return f"F.interpolate({x}, scale_factor={literal(scales[2:])}, mode='nearest')"
    mode = "nearest" if str(e.attr("mode")) == "nearest" else "linear"
    args = [literal(list(range(rank))), literal(scales), literal(out), literal([0.0] * rank + [1.0] * rank),
            literal(mode), literal("asymmetric"), literal("floor"), "-0.75", "False", "0.0", "False"]
    return f"{e.helper('_resize')}({x}, {', '.join(args)})"


@lowering("grid_sample")
def grid_sample(e: NodeEmit) -> str:
    mode = {"linear": "bilinear", "nearest": "nearest", "cubic": "bicubic",
            "bilinear": "bilinear", "bicubic": "bicubic"}[str(e.attr("mode"))]
    rank = e.need_rank(0)
    if rank not in (4, 5) or (rank == 5 and mode == "bicubic"):
        raise e.refuse("rank_limit", "F.grid_sample samples 2-D (and 3-D without cubic) images")
    x = _f32(e, 0)  # grid_sample wants X and grid in one float dtype, at least float32 here
    computes_in = e.dtype_id(0) if e.dtype_id(0) in _WIDE else "float32"
    grid = e.x(1) if e.dtype_id(1) == computes_in else f"{e.x(1)}.to({x}.dtype)"
    y = (f"F.grid_sample({x}, {grid}, mode={literal(mode)}, padding_mode={literal(str(e.attr('padding_mode')))}, "
         f"align_corners={bool(e.attr('align_corners'))})")
    return y if e.dtype_id(0) in _WIDE else f"{y}.to({e.dtype(0)})"


@lowering("affine_grid")
def affine_grid(e: NodeEmit) -> str:
    return f"F.affine_grid({e.x(0)}, {e.ints_code(1)}, align_corners={bool(e.attr('align_corners'))})"


# ----------------------------------------------------------------------------- attention
def _heads(e: NodeEmit, i: int, n_heads_attr: str) -> str:
    """(B, S, H*D) → (B, H, S, D); 4-D inputs as they are."""
    x = e.x(i)
    if e.need_rank(i) == 4:
        return x
    h = e.attr(n_heads_attr)
    return f"{x}.reshape({x}.shape[0], {x}.shape[1], {int(h)}, -1).transpose(1, 2)"


@lowering("attention")
def attention(e: NodeEmit) -> list[str]:
    """Scaled dot-product attention (MHA/GQA/MQA, KV cache, masks, softcap) in float32 or wider:
    scores = scale * Q K^T → softcap → + float mask / -inf where not allowed → softmax (a fully
    masked row gives zeros) → @ V."""
    wide = e.dtype_id(0) in _WIDE
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


@lowering("rotary_embedding")
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


@lowering("causal_conv_with_state")
def causal_conv_with_state(e: NodeEmit) -> list[str]:
    """Depthwise causal conv1d over [past_state, input]; present_state = the last k - 1 steps."""
    x, w = e.x(0), e.x(1)
    k = e.need_shape(1)[-1]
    full = e.tmp("full")
    past = e.x(3) if e.has(3) else f"torch.zeros({x}.shape[0], {x}.shape[1], {k - 1}, dtype={x}.dtype)"
    y = e.out(0)
    lines = [f"{full} = torch.cat([{past}, {x}], dim=2)",
             f"{y} = F.conv1d({full}, {w}.reshape({x}.shape[1], 1, {k}), {e.x(2) if e.has(2) else 'None'}, "
             f"groups={x}.shape[1])"]
    if str(e.attr("activation")) in ("silu", "swish"):
        lines.append(f"{y} = F.silu({y})")
    if e.n_out() > 1:
        lines.append(f"{e.out(1)} = {full}[:, :, {full}.shape[2] - {k - 1}:]")
    return lines


@lowering("swiglu")
def swiglu(e: NodeEmit) -> str:
    alpha = float(e.attr("alpha"))
    a = e.x(0)
    gate = f"F.silu({a})" if alpha == 1.0 else f"{a} * torch.sigmoid({literal(alpha)} * {a})"
    return f"{gate} * {e.x(1)}"
