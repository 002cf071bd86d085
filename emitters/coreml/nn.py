"""Core ML rules: convolution, pooling, resizing, normalization, losses, activations with parameters."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from translator.table.dtypes import norm_axis
from translator.table.errors import Unsupported
from translator.ir.graph import Node, Value
from translator.compile.render import literal

from .mil import const_of, lit, mil_dtype, need_rank, np_dtype, np_lit, static_shape
from .registry import NAME, Refusal, rule

if TYPE_CHECKING:
    from .codegen import Gen


# ----------------------------------------------------------------------------- activations with parameters
def _prelu_check(node: Node) -> Refusal | None:
    x, c = node.inputs[0], const_of(node.inputs[1])
    shape = static_shape(x)
    if c is None or shape is None or len(shape) not in (3, 4, 5):
        return Refusal("requires_constant_input", "Core ML prelu takes a constant slope and a rank 3-5 input")
    padded = (1,) * (len(shape) - c.ndim) + tuple(c.shape)
    if len(padded) != len(shape) or any(d != 1 for i, d in enumerate(padded) if i != 1) or padded[1] not in (1, shape[1]):
        return Refusal("unsupported_attribute_value", "Core ML prelu slopes are per channel (axis 1)")
    return None


@rule("prelu", check=_prelu_check)
def _prelu(gen: Gen, node: Node) -> None:
    x = node.inputs[0]
    ch = x.type.shape[1]
    c = const_of(node.inputs[1]).reshape(-1)
    slope = np.broadcast_to(c, (ch,)).astype(np_dtype(x.type.dtype))
    gen.emit(f"{gen.out(node)} = mb.prelu(x={gen.var(x)}, alpha={np_lit(slope, x.type.dtype)}, name={gen.name(node)})")


@rule("gelu", check=lambda n: None if n.attrs.get("approximate", "none") in ("none", "tanh")
          else Refusal("unsupported_attribute_value", "approximate must be none or tanh"))
def _gelu(gen: Gen, node: Node) -> None:
    mode = "TANH_APPROXIMATION" if gen.attr(node, "approximate") == "tanh" else "EXACT"
    gen.emit(f"{gen.out(node)} = mb.gelu(x={gen.var(node.inputs[0])}, mode={literal(mode)}, name={gen.name(node)})")


@rule("softmax", check=need_rank(0))
def _softmax(gen: Gen, node: Node) -> None:
    gen.emit(f"{gen.out(node)} = mb.softmax(x={gen.var(node.inputs[0])}, axis={lit(int(gen.attr(node, 'axis')))}, "
             f"name={gen.name(node)})")



# ----------------------------------------------------------------------------- convolution and pooling
_PAD_TYPE = {"NOTSET": "custom", "VALID": "valid", "SAME_UPPER": "same", "SAME_LOWER": "same_lower"}


def _spatial(gen: Gen, node: Node, k: int) -> dict[str, Any]:
    """ONNX window attributes → MIL: pad_type, pad ([b1, e1, b2, e2, ...]), strides, dilations."""
    auto = str(gen.attr(node, "auto_pad") or "NOTSET")
    pads = gen.attr(node, "pads") or [0] * (2 * k)
    mil_pad = [int(x) for pair in zip(pads[:k], pads[k:]) for x in pair]
    return {"pad_type": _PAD_TYPE[auto], "pad": mil_pad, "strides": [int(s) for s in (gen.attr(node, "strides") or [1] * k)],
            "dilations": [int(d) for d in (gen.attr(node, "dilations") or [1] * k)]}


def _conv_check(node: Node) -> Refusal | None:
    x = node.inputs[0]
    if x.type.rank not in (3, 4, 5):
        return Refusal("rank_limit", "Core ML conv takes 1-D, 2-D or 3-D convolutions")
    if node.inputs[1].type.rank is None:
        return Refusal("dynamic_shape", "the weight rank is unknown")
    return None


@rule("conv", check=_conv_check)
def _conv(gen: Gen, node: Node) -> None:
    x, w = node.inputs[0], node.inputs[1]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    k = x.type.rank - 2
    sp = _spatial(gen, node, k)
    pad = f", pad={lit(sp['pad'])}" if sp["pad_type"] == "custom" else ""
    bias_const = b is not None and b.is_const
    bias = f", bias={gen.var(b)}" if bias_const else ""
    var, nm = (gen.out(node), gen.name(node)) if b is None or bias_const else gen.tmp(node, "nobias")
    gen.emit(f"{var} = mb.conv(x={gen.var(x)}, weight={gen.var(w)}{bias}, strides={lit(sp['strides'])}, "
             f"pad_type={literal(sp['pad_type'])}{pad}, dilations={lit(sp['dilations'])}, "
             f"groups={lit(int(gen.attr(node, 'group')))}, name={nm})")
    if b is not None and not bias_const:
        rb, rbn = gen.tmp(node, "bias")
        gen.emit(f"{rb} = mb.reshape(x={gen.var(b)}, shape={lit([-1] + [1] * k)}, name={rbn})")
        gen.emit(f"{gen.out(node)} = mb.add(x={var}, y={rb}, name={gen.name(node)})")


def _conv_t_check(node: Node) -> Refusal | None:
    why = _conv_check(node)  # a runtime weight or bias: MIL conv_transpose takes one from iOS17 on
    if why:
        return why
    if static_shape(node.outputs[0]) is None and (node.attrs.get("output_shape") is not None
                                                  or any(int(p) for p in node.attrs.get("output_padding") or ())):
        return Refusal("dynamic_shape", "conv_transpose with output_shape or output_padding needs its static "
                                        "output shape")
    return None


@rule("conv_transpose", check=_conv_t_check)
def _conv_transpose(gen: Gen, node: Node) -> None:
    x, w = node.inputs[0], node.inputs[1]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    k = x.type.rank - 2
    sp = _spatial(gen, node, k)
    out = static_shape(node.outputs[0])
    auto = str(gen.attr(node, "auto_pad") or "NOTSET")
    pad_type, pad = ("custom", sp["pad"]) if auto == "NOTSET" else (_PAD_TYPE[auto], [0] * (2 * k))
    if gen.attr(node, "output_shape") is not None or gen.attr(node, "output_padding"):
        pad_type, pad = "custom", [0] * (2 * k)  # output_shape below fixes the extent
    bias = f", bias={gen.var(b)}" if b is not None else ""
    # over symbolic dims MIL's own output extent, (in - 1) * stride + dilated kernel - pads, is ONNX's
    shape = f", output_shape={lit(list(out))}" if out is not None else ""
    gen.emit(f"{gen.out(node)} = mb.conv_transpose(x={gen.var(x)}, weight={gen.var(w)}{bias}, pad_type={literal(pad_type)}, "
             f"pad={lit(pad)}{shape}, strides={lit(sp['strides'])}, "
             f"dilations={lit(sp['dilations'])}, groups={lit(int(gen.attr(node, 'group')))}, name={gen.name(node)})")


def _pool_check(node: Node) -> Refusal | None:
    x = node.inputs[0]
    if x.type.rank not in (3, 4, 5):
        return Refusal("rank_limit", "Core ML pools take 1-D, 2-D or 3-D windows")
    if any(d != 1 for d in (node.attrs.get("dilations") or [])):
        return Refusal("unsupported_attribute_value", "Core ML pools have no dilations")
    if node.op == "max_pool" and len(node.outputs) > 1:
        return Refusal("unsupported_attribute_value", "Core ML max_pool has no indices output")
    if node.op == "lp_pool" and int(node.attrs.get("p", 2)) != 2:
        return Refusal("unsupported_attribute_value", "Core ML l2_pool is p=2 only")
    return None


def _same_pads(in_dims: Sequence[int], kernel: Sequence[int], strides: Sequence[int], lower: bool) -> list[int]:
    """ONNX SAME_UPPER / SAME_LOWER padding as explicit MIL pads [b1, e1, b2, e2, ...]."""
    out = []
    for d, k, s in zip(in_dims, kernel, strides):
        total = max(0, (-(-d // s) - 1) * s + k - d)
        small, big = total // 2, total - total // 2
        out += [big, small] if lower else [small, big]
    return out


@rule("average_pool", "max_pool", "lp_pool", check=_pool_check)
def _pool(gen: Gen, node: Node) -> None:
    x = node.inputs[0]
    k = x.type.rank - 2
    sp = _spatial(gen, node, k)
    kernel = [int(v) for v in gen.attr(node, "kernel_shape")]
    shape = static_shape(x)
    if sp["pad_type"] in ("same", "same_lower") and shape is not None:
        sp["pad"] = _same_pads(shape[2:], kernel, sp["strides"], sp["pad_type"] == "same_lower")
        sp["pad_type"] = "custom"
    elif sp["pad_type"] == "same_lower":
        raise Unsupported(node.op, NAME, "dynamic_shape", "SAME_LOWER pooling needs a static input shape", node.name)
    pad = f", pad={lit(sp['pad'])}" if sp["pad_type"] == "custom" else ""
    fn = {"average_pool": "avg_pool", "max_pool": "max_pool", "lp_pool": "l2_pool"}[node.op]
    extra = ""
    if node.op == "average_pool":
        extra = f", exclude_padding_from_average={not bool(int(gen.attr(node, 'count_include_pad')))}"
    ceil = f", ceil_mode={bool(int(gen.attr(node, 'ceil_mode') or 0))}" if node.op != "lp_pool" else ""
    pt = sp["pad_type"]
    gen.emit(f"{gen.out(node)} = mb.{fn}(x={gen.var(x)}, kernel_sizes={lit(kernel)}, strides={lit(sp['strides'])}, "
             f"pad_type={literal(pt)}{pad}{ceil}{extra}, name={gen.name(node)})")


@rule("global_average_pool", "global_max_pool", "global_lp_pool", check=need_rank(0))
def _global_pool(gen: Gen, node: Node) -> None:
    r = node.inputs[0].type.rank
    if node.op == "global_lp_pool":
        p = int(gen.attr(node, "p"))
        if p not in (1, 2):
            raise Unsupported(node.op, NAME, "unsupported_attribute_value", "global_lp_pool takes p=1 or 2", node.name)
        fn = "reduce_l2_norm" if p == 2 else "reduce_l1_norm"
    else:
        fn = "reduce_mean" if node.op == "global_average_pool" else "reduce_max"
    gen.emit(f"{gen.out(node)} = mb.{fn}(x={gen.var(node.inputs[0])}, axes={lit(list(range(2, r)))}, keep_dims=True, "
             f"name={gen.name(node)})")


# ----------------------------------------------------------------------------- resizing
def _resize_attrs(node: Node) -> dict[str, Any]:
    """resize and upsample as one set of ONNX Resize attributes (upsample: asymmetric, floor)."""
    a = node.attrs
    ins = list(node.inputs) + [None] * 4
    if node.op == "upsample":
        mode = "nearest" if str(a.get("mode", "nearest")) == "nearest" else "linear"
        return {"mode": mode, "ctm": "asymmetric", "nearest_mode": "floor", "roi": None, "scales": ins[1],
                "sizes": None, "axes": None, "policy": "stretch", "antialias": 0, "exclude_outside": 0,
                "cubic_a": -0.75, "extrapolation": 0.0}
    return {"mode": str(a.get("mode", "nearest")), "ctm": str(a.get("coordinate_transformation_mode", "half_pixel")),
            "nearest_mode": str(a.get("nearest_mode", "round_prefer_floor")), "roi": ins[1], "scales": ins[2],
            "sizes": ins[3], "axes": a.get("axes"), "policy": str(a.get("keep_aspect_ratio_policy", "stretch")),
            "antialias": int(a.get("antialias", 0)), "exclude_outside": int(a.get("exclude_outside", 0)),
            "cubic_a": float(a.get("cubic_coeff_a", -0.75)), "extrapolation": float(a.get("extrapolation_value", 0.0))}


def _onnx_axis_matrices(node: Node) -> list[tuple[int, np.ndarray, np.ndarray]] | tuple[str, str]:
    """Per axis whose sampling is not the identity: (axis, ONNX (out, in) weights, outside mask),
    from the NumPy reference's own per-axis plan (translator/reference/vision.py)."""
    from translator.reference.vision import _axis_weights, _resize_plan

    at = _resize_attrs(node)
    shape = static_shape(node.inputs[0])
    if shape is None:
        return ("dynamic_shape", f"{node.op} needs a static input shape (or integer scales of the last two dims)")
    for key in ("roi", "scales", "sizes"):
        v = at[key]
        if v is not None and not v.is_const:
            return ("requires_constant_input", f"{key} must be a constant for Core ML")
    scales = const_of(at["scales"]) if at["scales"] is not None else None
    sizes = const_of(at["sizes"]) if at["sizes"] is not None else None
    if (sizes is None or not sizes.size) and (scales is None or not scales.size):
        return ("requires_constant_input", "scales or sizes must be given as constants")
    r = len(shape)
    axes = list(range(r)) if at["axes"] is None else [norm_axis(int(x), r) for x in at["axes"]]
    n = len(axes)
    in_sz = [shape[x] for x in axes]
    roi = const_of(at["roi"]) if at["roi"] is not None else None
    roi = np.asarray(roi, np.float64).reshape(-1) if roi is not None and roi.size else np.array([0.0] * n + [1.0] * n)
    sc, out_sz = _resize_plan(in_sz, scales, sizes if sizes is not None and sizes.size else None, at["policy"])
    plan = []
    for k, ax in enumerate(axes):
        m, outside = _axis_weights(in_sz[k], out_sz[k], sc[k], roi[k], roi[n + k], at["mode"], at["ctm"],
                                   at["nearest_mode"], at["cubic_a"], at["antialias"], at["exclude_outside"])
        if out_sz[k] != in_sz[k] or not np.allclose(m, np.eye(in_sz[k]), atol=1e-6) or outside.any():
            plan.append((ax, m, outside))
    return plan


def _mil_grid(sampling: str, n_in: int, n_out: int) -> np.ndarray | None:
    """The input coordinate resize_bilinear samples for each output index (its docstring),
    clamped to [0, in - 1]; None where the mode is undefined (one output)."""
    i = np.arange(n_out, dtype=np.float64)
    if sampling in ("STRICT_ALIGN_CORNERS", "DEFAULT") and n_out == 1:
        return None if n_in > 1 else np.zeros(1)
    if sampling == "STRICT_ALIGN_CORNERS":
        g = i * (n_in - 1) / (n_out - 1)
    elif sampling == "DEFAULT":
        g = i * n_in / n_out
    else:  # UNALIGN_CORNERS
        g = (i + 0.5) * n_in / n_out - 0.5
    return np.clip(g, 0, n_in - 1)


def _linear_matrix(g: np.ndarray, n_in: int) -> np.ndarray:
    m = np.zeros((len(g), n_in))
    lo = np.floor(g).astype(np.int64)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = g - lo
    np.add.at(m, (np.arange(len(g)), lo), 1 - frac)
    np.add.at(m, (np.arange(len(g)), hi), frac)
    return m


def _one_hot(idx: np.ndarray, n_in: int) -> np.ndarray:
    m = np.zeros((len(idx), n_in))
    m[np.arange(len(idx)), np.clip(idx, 0, n_in - 1)] = 1.0
    return m


def _picks(m: np.ndarray) -> bool:
    """Whether an (out, in) sampling matrix takes exactly one input per output (nearest)."""
    return bool(np.all((m == 0) | (m == 1)) and np.all(m.sum(axis=1) == 1))


def _mil_resize_candidates(n_in: int, n_out: int, mode: str) -> list[tuple[str, np.ndarray]]:
    """(MIL choice, its (out, in) weights) for one axis, in order of preference."""
    out = []
    if mode == "nearest":
        i = np.arange(n_out)
        if n_out % n_in == 0:  # upsample_nearest_neighbor, integer factor k: in = floor(out / k)
            out.append(("upsample", _one_hot(i // (n_out // n_in), n_in)))
        # resize_nearest_neighbor = TF ResizeNearestNeighbor(half_pixel_centers=True) (coremltools' TF frontend):
        # in = min(floor((out + 0.5) * in_len / out_len), in_len - 1)
        out.append(("resize", _one_hot(np.floor((i + 0.5) * n_in / n_out).astype(np.int64), n_in)))
    elif mode == "linear":
        for sampling in ("STRICT_ALIGN_CORNERS", "UNALIGN_CORNERS", "DEFAULT"):
            g = _mil_grid(sampling, n_in, n_out)
            if g is not None:
                out.append((sampling, _linear_matrix(g, n_in)))
    return out


#: input lengths a resize over a symbolic dim is compared at (``_symbolic_resize``): with an
#: integer factor, every sampling rule here is periodic in the output index and clamps only
#: at the two ends, so lengths of both parities past the edge effects stand for every length
_PROBE_LENGTHS = (5, 8, 13)


def _mil_upsample_candidates(n_in: int, k: int, mode: str) -> list[tuple[tuple[Any, ...], np.ndarray]]:
    """(MIL choice, its (out, in) weights) for one axis upsampled by the integer ``k``, from the
    op definitions: upsample_nearest_neighbor takes in = floor(out / k); upsample_bilinear's grid
    is i * spacing (align_corners), (i + 0.5) * spacing - 0.5 (half_pixel_centers), i * spacing
    (neither), spacing = in / out (align_corners: (in - 1) / (out - 1)), clamped to the input."""
    n_out = n_in * k
    i = np.arange(n_out, dtype=np.float64)
    if mode == "nearest":
        return [(("upsample",), _one_hot(i.astype(np.int64) // k, n_in))]
    out = []
    for align, half in ((False, True), (True, False), (False, False)):
        if align:
            g = i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(1)
        else:
            g = (i + 0.5) * n_in / n_out - 0.5 if half else i * n_in / n_out
        out.append((("bilinear", align, half), _linear_matrix(np.clip(g, 0, n_in - 1), n_in)))
    return out


def _symbolic_resize(node: Node) -> tuple[str, Any]:
    """A resize over symbolic dims: ("upsample", (MIL choice, k_h, k_w)) when constant integer
    scales resize only the last two dims and one MIL upsample op samples ONNX's pixels at every
    probe length (``_PROBE_LENGTHS``), else (reason code, detail)."""
    from translator.reference.vision import _axis_weights, _resize_plan

    at, x = _resize_attrs(node), node.inputs[0]
    r = x.type.rank
    if r is None or r < 3:
        return ("dynamic_shape", f"{node.op} over symbolic dims needs a known rank of at least 3")
    if at["sizes"] is not None and not (at["sizes"].is_const and not const_of(at["sizes"]).size):
        return _runtime_sized(node, at, r)
    if at["scales"] is None or not at["scales"].is_const or (at["roi"] is not None and not at["roi"].is_const):
        return ("requires_constant_input", "scales must be a constant for Core ML")
    scales = [float(v) for v in np.asarray(const_of(at["scales"]), np.float64).reshape(-1)]
    axes = list(range(r)) if at["axes"] is None else [norm_axis(int(a), r) for a in at["axes"]]
    per = dict(zip(axes, scales))
    if any(per.get(a, 1.0) != 1.0 for a in range(r - 2)):
        return ("unsupported_attribute_value", "Core ML resizes the last two dims only")
    ks = [per.get(a, 1.0) for a in (r - 2, r - 1)]
    if any(k < 1 or k != int(k) for k in ks):
        return ("dynamic_shape", f"scales {ks} over a symbolic size: MIL upsamples by integer factors only")
    roi = const_of(at["roi"]) if at["roi"] is not None else None
    roi = np.asarray(roi, np.float64).reshape(-1) if roi is not None and roi.size else None
    if at["mode"] not in ("nearest", "linear") or at["antialias"] or at["ctm"] == "tf_crop_and_resize":
        return ("dynamic_shape", f"mode {at['mode']!r} / {at['ctm']!r} over a symbolic size needs a static shape")
    common = None
    for ax, k in zip((r - 2, r - 1), ks):
        ok = None
        for n_in in _PROBE_LENGTHS:
            sc, out_sz = _resize_plan([n_in], [k], None, at["policy"])
            lo, hi = (roi[ax], roi[r + ax]) if roi is not None else (0.0, 1.0)
            m, _ = _axis_weights(n_in, out_sz[0], sc[0], lo, hi, at["mode"], at["ctm"], at["nearest_mode"],
                                 at["cubic_a"], at["antialias"], at["exclude_outside"])
            here = {c for c, cand in _mil_upsample_candidates(n_in, int(k), at["mode"])
                    if cand.shape == m.shape and np.allclose(cand, m, atol=1e-6)}
            ok = here if ok is None else ok & here
        common = ok if common is None else common & ok
    if not common:
        return ("unsupported_attribute_value", f"mode={at['mode']!r}, coordinate_transformation_mode="
                                               f"{at['ctm']!r}: no MIL upsample samples the same pixels")
    return ("upsample", (sorted(common)[0], int(ks[0]), int(ks[1])))


#: ONNX coordinate_transformation_mode → the iOS17 resize sampling_mode with the same grid at every
#: input and output length when the output length is given (``sizes``: ONNX's scale is out / in):
#: half_pixel samples (i + 0.5) * in / out - 0.5, align_corners i * (in - 1) / (out - 1), both
#: clamped to the input, as UNALIGN_CORNERS and STRICT_ALIGN_CORNERS do
_RUNTIME_SAMPLING = {"half_pixel": "UNALIGN_CORNERS", "align_corners": "STRICT_ALIGN_CORNERS"}


def _runtime_sized(node: Node, at: dict[str, Any], r: int) -> tuple[str, Any]:
    """A linear resize over symbolic dims to ``sizes`` (a constant of the last two dims, or a
    shape computed at run time, whose last two entries are the output height and width): the
    iOS17 ``resize`` op, which takes the output size at run time; else (reason code, detail)."""
    sizes = at["sizes"]
    n = (sizes.type.shape or [None])[0]
    axes = None if at["axes"] is None else sorted(norm_axis(int(a), r) for a in at["axes"])
    if at["mode"] != "linear" or at["ctm"] not in _RUNTIME_SAMPLING or at["antialias"] or at["policy"] != "stretch":
        return ("dynamic_shape", f"{node.op} to target sizes over a symbolic input: mode {at['mode']!r} / "
                                 f"{at['ctm']!r} has no MIL resize with a run-time size (linear half_pixel or "
                                 "align_corners has)")
    if axes not in (None, [r - 2, r - 1]) or not isinstance(n, int) or n != (2 if axes else r):
        return ("dynamic_shape", f"{node.op} to target sizes over a symbolic input: Core ML resizes the last two dims")
    if sizes.is_const and axes is None:  # constant sizes of every dim over symbolic leading dims: unknowable
        return ("dynamic_shape", f"{node.op} to constant sizes of every dim needs a static input shape")
    return ("runtime_size", _RUNTIME_SAMPLING[at["ctm"]])


def _resize_choice(node: Node) -> tuple[str, Any] | tuple[str, str]:
    """("native", (MIL choice, out H, out W)) or ("matmul", plan) or ("upsample", (MIL choice,
    k_h, k_w)) over symbolic dims, or (reason code, detail)."""
    x = node.inputs[0]
    if x.type.dtype not in ("float32", "float16"):
        return ("unsupported_dtype", f"Core ML resizes float tensors, not {x.type.dtype}")
    if static_shape(x) is None:
        return _symbolic_resize(node)
    plan = _onnx_axis_matrices(node)
    if isinstance(plan, tuple):
        return plan
    at = _resize_attrs(node)
    if at["mode"] == "cubic":  # no MIL cubic: one constant (out, in) matrix per axis, applied by matmul
        return ("matmul", plan)
    shape = static_shape(x)
    r = len(shape)
    if r < 2:
        return ("rank_limit", "Core ML resize ops take rank >= 2 here (the last two dims are resized)")
    if any(ax < r - 2 for ax, _, _ in plan) or any(o.any() for _, _, o in plan):
        # MIL resizes the last two dims and does not extrapolate: the exact per-axis sampling
        return ("matmul", plan)
    want = {ax: m for ax, m, _ in plan}
    dims = [(shape[a], want[a].shape[0] if a in want else shape[a], want.get(a)) for a in (r - 2, r - 1)]
    per_axis = []
    for n_in, n_out, m in dims:
        ok = {name for name, cand in _mil_resize_candidates(n_in, n_out, at["mode"])
              if m is None or (cand.shape == m.shape and np.allclose(cand, m, atol=1e-5))}
        per_axis.append(ok)
    order = ["upsample", "resize"] if at["mode"] == "nearest" else ["STRICT_ALIGN_CORNERS", "UNALIGN_CORNERS", "DEFAULT"]
    both = [c for c in order if all(c in ok for ok in per_axis)]
    if not both:  # no MIL resize samples ONNX's pixels: the reference's own per-axis sampling
        return ("matmul", plan)
    return ("native", (both[0], dims[0][1], dims[1][1]))


def _resize_check(node: Node) -> Refusal | None:
    kind, detail = _resize_choice(node)
    return None if kind in ("native", "matmul", "upsample", "runtime_size") else Refusal(kind, detail)


@rule("resize", "upsample", check=_resize_check)
def _resize(gen: Gen, node: Node) -> None:
    """nearest: upsample_nearest_neighbor (integer factors, in = floor(out / k)) or
    resize_nearest_neighbor (in = floor((out + 0.5) * in / out)); linear: resize_bilinear with
    the sampling_mode whose grid is ONNX's. The choice compares the (out, in) sampling matrix
    of each MIL candidate with the reference's for both resized axes. cubic: a matmul per
    axis with the reference's constant (out, in) weights. Rank 2: a unit axis in front."""
    x = node.inputs[0]
    dt = x.type.dtype
    kind, choice = _resize_choice(node)
    if kind == "runtime_size":  # symbolic dims to sizes known at run time: iOS17 resize
        sizes = node.inputs[3]
        hw, hn = gen.tmp(node, "out_hw")
        n = sizes.type.shape[0]
        gen.emit(f"{hw} = mb.slice_by_index(x={gen.var(sizes)}, begin=[{n - 2}], end=[{n}], name={hn})")
        if sizes.type.dtype != "int32":
            cast, cn = gen.tmp(node, "out_hw_i32")
            gen.emit(f"{cast} = mb.cast(x={hw}, dtype='int32', name={cn})")
            hw = cast
        gen.emit(f"{gen.out(node)} = mb.resize(x={gen.var(x)}, shape={hw}, resized_dims=np.uint32(2), "
                 f"interpolation_mode='LINEAR', sampling_mode={lit(choice)}, name={gen.name(node)})")
        return
    if kind == "upsample":  # symbolic dims: by integer factors
        (how, *flags), kh, kw = choice
        if how == "upsample":
            gen.emit(f"{gen.out(node)} = mb.upsample_nearest_neighbor(x={gen.var(x)}, scale_factor_height={lit(kh)}, "
                     f"scale_factor_width={lit(kw)}, name={gen.name(node)})")
        else:
            half = "" if flags[1] == (not flags[0]) else f", half_pixel_centers={lit(flags[1])}"  # iOS16's
            gen.emit(f"{gen.out(node)} = mb.upsample_bilinear(x={gen.var(x)}, scale_factor_height={lit(kh)}, "
                     f"scale_factor_width={lit(kw)}, align_corners={lit(flags[0])}{half}, name={gen.name(node)})")
        return
    shape = static_shape(x)
    r = len(shape)

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    if kind == "matmul":
        at = _resize_attrs(node)
        cur = gen.var(x)
        outside = np.zeros((1,) * r, bool)
        for k, (ax, m, out_mask) in enumerate(choice):
            sh = [1] * r
            sh[ax] = len(out_mask)
            outside = outside | out_mask.reshape(sh)
            if _picks(m):  # nearest: each output takes one input, a gather (exact whatever the values)
                idx = gen.const(node, f"idx{k}", np.argmax(m, axis=1).astype(np.int32))
                cur = step(f"pick{k}", f"mb.gather(x={cur}, indices={idx}, axis={lit(ax)}")
                continue
            perm = [d for d in range(r) if d != ax] + [ax]
            if ax != r - 1:
                cur = step(f"to_last{k}", f"mb.transpose(x={cur}, perm={lit(perm)}")
            cur = step(f"interp{k}", f"mb.matmul(x={cur}, y={gen.const(node, f'w{k}', m.T.astype(np_dtype(dt)))}")
            if ax != r - 1:
                cur = step(f"back{k}", f"mb.transpose(x={cur}, perm={lit(list(np.argsort(perm)))}")
        if outside.any():
            cur = step("extrapolated", f"mb.select(cond={gen.const(node, 'outside', outside)}, "
                                       f"a={np_lit(at['extrapolation'], dt)}, b={cur}")
        gen.emit(f"{gen.out(node)} = mb.identity(x={cur}, name={gen.name(node)})")
        return
    how, oh, ow = choice
    xv = gen.var(x)
    if r < 3:
        xv = step("rank3", f"mb.reshape(x={xv}, shape={lit([1] * (3 - r) + list(shape))}")
    var, nm = (gen.out(node), gen.name(node)) if r >= 3 else gen.tmp(node, "resized")
    h_in, w_in = shape[-2:]
    if how == "upsample":
        gen.emit(f"{var} = mb.upsample_nearest_neighbor(x={xv}, scale_factor_height={lit(oh // h_in)}, "
                 f"scale_factor_width={lit(ow // w_in)}, name={nm})")
    elif how == "resize":
        gen.emit(f"{var} = mb.resize_nearest_neighbor(x={xv}, target_size_height={lit(oh)}, "
                 f"target_size_width={lit(ow)}, name={nm})")
    else:
        gen.emit(f"{var} = mb.resize_bilinear(x={xv}, target_size_height={lit(oh)}, target_size_width={lit(ow)}, "
                 f"sampling_mode={literal(how)}, name={nm})")
    if r < 3:
        gen.emit(f"{gen.out(node)} = mb.reshape(x={var}, shape={lit([oh, ow])}, name={gen.name(node)})")


# ----------------------------------------------------------------------------- normalization
def _bn_check(node: Node) -> Refusal | None:
    if int(node.attrs.get("training_mode", 0)) or len(node.outputs) > 1:
        return Refusal("unsupported_attribute_value", "training-mode batch normalization")
    return need_rank(0)(node)


def _channel_shape(x: Value) -> list[int]:
    return [-1] + [1] * (x.type.rank - 2)


@rule("batch_normalization", check=_bn_check)
def _batch_norm(gen: Gen, node: Node) -> None:
    x, scale, b, mean, var = node.inputs[:5]
    eps = float(gen.attr(node, "epsilon"))
    dt = x.type.dtype
    if all(v.is_const for v in (scale, b, mean, var)) and x.type.rank in (3, 4, 5):
        gen.emit(f"{gen.out(node)} = mb.batch_norm(x={gen.var(x)}, mean={gen.var(mean)}, variance={gen.var(var)}, "
                 f"gamma={gen.var(scale)}, beta={gen.var(b)}, epsilon={np_lit(eps, dt)}, name={gen.name(node)})")
        return
    # y = (x - mean) * scale / sqrt(var + eps) + B, parameters broadcast over axis 1
    cs = lit(_channel_shape(x))
    rs = {}
    for key, v in (("mean", mean), ("var", var), ("scale", scale), ("b", b)):
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = mb.reshape(x={gen.var(v)}, shape={cs}, name={tn})")
        rs[key] = t
    steps = [("centered", f"mb.sub(x={gen.var(x)}, y={rs['mean']}"), ("veps", f"mb.add(x={rs['var']}, y={np_lit(eps, dt)}"),
             ("std", "mb.sqrt(x={veps}"), ("scaled", "mb.mul(x={centered}, y=" + rs["scale"]),
             ("normed", "mb.real_div(x={scaled}, y={std}")]
    env: dict[str, str] = {}
    for key, call in steps:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call.format(**env)}, name={tn})")
        env[key] = t
    gen.emit(f"{gen.out(node)} = mb.add(x={env['normed']}, y={rs['b']}, name={gen.name(node)})")


@rule("instance_normalization", check=need_rank(0))
def _instance_norm(gen: Gen, node: Node) -> None:
    x, scale, b = node.inputs[:3]
    eps = float(gen.attr(node, "epsilon"))
    dt = x.type.dtype
    r = x.type.rank
    if scale.is_const and b.is_const and r in (3, 4):
        gen.emit(f"{gen.out(node)} = mb.instance_norm(x={gen.var(x)}, gamma={gen.var(scale)}, beta={gen.var(b)}, "
                 f"epsilon={np_lit(eps, dt)}, name={gen.name(node)})")
        return
    _normalize(gen, node, x, list(range(2, r)), eps, scale, b, _channel_shape(x))


def _normalize(gen: Gen, node: Node, x: Value, axes: list[int], eps: float, scale: Value | None, b: Value | None,
               param_shape: list[int] | None) -> None:
    """y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * scale + b over ``axes`` (elementwise MIL ops)."""
    dt = x.type.dtype
    xv = gen.var(x)

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    mean = step("mean", f"mb.reduce_mean(x={xv}, axes={lit(axes)}, keep_dims=True")
    cen = step("centered", f"mb.sub(x={xv}, y={mean}")
    sq = step("sq", f"mb.mul(x={cen}, y={cen}")
    var = step("var", f"mb.reduce_mean(x={sq}, axes={lit(axes)}, keep_dims=True")
    veps = step("veps", f"mb.add(x={var}, y={np_lit(eps, dt)}")
    std = step("std", f"mb.sqrt(x={veps}")
    acc = step("normed", f"mb.real_div(x={cen}, y={std}")
    if len(node.outputs) > 1:  # layer_normalization's Mean and InvStdDev (in their own dtype)
        inv = step("invstd", f"mb.inverse(x={std}, epsilon=0.0")
        for i, stat in ((1, mean), (2, inv)):
            if i < len(node.outputs):
                o = node.outputs[i]
                # ONNX: Mean and InvStdDev are in stash_type (float32 unless said otherwise)
                want = o.type.dtype or {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}.get(
                    int(node.attrs.get("stash_type", 1) or 1), "float32")
                if want != dt:
                    gen.emit(f"{gen.out(node, i)} = mb.cast(x={stat}, dtype={literal(mil_dtype(want))}, "
                             f"name={gen.name(node, i)})")
                else:
                    gen.emit(f"{gen.out(node, i)} = mb.identity(x={stat}, name={gen.name(node, i)})")
    for key, p in (("scale", scale), ("bias", b)):
        if p is None:
            continue
        pv = gen.var(p)
        if param_shape is not None:
            pv = step(f"{key}_r", f"mb.reshape(x={pv}, shape={lit(param_shape)}")
        fn = "mul" if key == "scale" else "add"
        last = key == "bias" or b is None
        if last:
            gen.emit(f"{gen.out(node)} = mb.{fn}(x={acc}, y={pv}, name={gen.name(node)})")
            return
        acc = step(key, f"mb.{fn}(x={acc}, y={pv}")
    gen.emit(f"{gen.out(node)} = mb.identity(x={acc}, name={gen.name(node)})")


def _stats_wanted(node: Node) -> bool:
    outs = node.graph.outputs if node.graph is not None else []
    return any(o.uses or any(o is g for g in outs) for o in node.outputs[1:])


@rule("layer_normalization", check=need_rank(0))
def _layer_norm(gen: Gen, node: Node) -> None:
    x, scale = node.inputs[0], node.inputs[1]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    r = x.type.rank
    axis = norm_axis(int(gen.attr(node, "axis")), r)
    axes = list(range(axis, r))
    eps = float(gen.attr(node, "epsilon"))
    norm_shape = [x.type.shape[a] for a in axes]
    if scale.is_const and (b is None or b.is_const) and list(np.asarray(scale.const).shape) == norm_shape \
            and not _stats_wanted(node):
        beta = f", beta={gen.var(b)}" if b is not None else ""
        gen.emit(f"{gen.out(node)} = mb.layer_norm(x={gen.var(x)}, axes={lit(axes)}, gamma={gen.var(scale)}{beta}, "
                 f"epsilon={np_lit(eps, x.type.dtype)}, name={gen.name(node)})")
        return
    _normalize(gen, node, x, axes, eps, scale, b, None)


@rule("lrn", check=need_rank(0))
def _lrn(gen: Gen, node: Node) -> None:
    gen.emit(f"{gen.out(node)} = mb.local_response_norm(x={gen.var(node.inputs[0])}, size={lit(int(gen.attr(node, 'size')))}, "
             f"alpha={lit(float(gen.attr(node, 'alpha')))}, beta={lit(float(gen.attr(node, 'beta')))}, "
             f"k={lit(float(gen.attr(node, 'bias')))}, name={gen.name(node)})")


def _rms_check(node: Node) -> Refusal | None:
    return need_rank(0)(node)


@rule("rms_normalization", check=_rms_check)
def _rms_norm(gen: Gen, node: Node) -> None:
    """y = x / sqrt(mean(x^2 over axis..) + eps) * scale."""
    x, scale = node.inputs[0], node.inputs[1]
    r = x.type.rank
    axes = list(range(norm_axis(int(gen.attr(node, "axis")), r), r))
    eps = float(gen.attr(node, "epsilon"))
    xv, dt = gen.var(x), x.type.dtype

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    sq = step("sq", f"mb.mul(x={xv}, y={xv}")
    ms = step("ms", f"mb.reduce_mean(x={sq}, axes={lit(axes)}, keep_dims=True")
    veps = step("veps", f"mb.add(x={ms}, y={np_lit(eps, dt)}")
    rms = step("rms", f"mb.sqrt(x={veps}")
    normed = step("normed", f"mb.real_div(x={xv}, y={rms}")
    gen.emit(f"{gen.out(node)} = mb.mul(x={normed}, y={gen.var(scale)}, name={gen.name(node)})")


# ----------------------------------------------------------------------------- losses
def _loss_check(node: Node) -> Refusal | None:
    if node.inputs[0].type.rank is None or node.inputs[1].type.rank is None:
        return Refusal("dynamic_shape", "loss inputs need known ranks")
    return None


def _nll(gen: Gen, node: Node, log_prob: str, dt: str) -> None:
    """loss = -log_prob[n, t[n, ...], ...] * w[t]; ignored targets weigh 0; mean = sum / sum(w)."""
    target, weight = node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else None
    ii = gen.attr(node, "ignore_index")
    reduction = gen.attr(node, "reduction")
    t = gen.var(target)

    def step(key: str, call: str) -> str:
        v, vn = gen.tmp(node, key)
        gen.emit(f"{v} = {call}, name={vn})")
        return v

    keep = None
    if ii is not None:
        keep = step("kept", f"mb.not_equal(x={t}, y=np.int32({int(ii)})")
        t = step("target_safe", f"mb.select(cond={keep}, a={t}, b=np.int32(0)")
    idx = step("target_ax", f"mb.expand_dims(x={t}, axes=[1]")
    picked = step("picked_ax", f"mb.gather_along_axis(x={log_prob}, indices={idx}, axis=1, validate_indices=False")
    picked = step("picked", f"mb.squeeze(x={picked}, axes=[1]")
    w = None
    if weight is not None:
        w = step("w", f"mb.gather(x={gen.var(weight)}, indices={t}, axis=0, validate_indices=False")
    if keep is not None:
        kf = step("kept_f", f"mb.cast(x={keep}, dtype={literal(mil_dtype(dt))}")
        w = step("w_kept", f"mb.mul(x={w}, y={kf}") if w is not None else kf
    last = reduction == "none"
    negw = step("neg_w", f"mb.mul(x={w}, y={np_lit(-1, dt)}") if w is not None else np_lit(-1, dt)
    var, nm = (gen.out(node), gen.name(node)) if last else gen.tmp(node, "loss_each")
    gen.emit(f"{var} = mb.mul(x={picked}, y={negw}, name={nm})")
    if last:
        return
    r = static_shape(node.inputs[1])
    axes = lit(list(range(len(r)))) if r is not None else lit(list(range(node.inputs[1].type.rank)))
    if reduction == "sum" or (reduction == "mean" and w is None):
        fn = "reduce_sum" if reduction == "sum" else "reduce_mean"
        gen.emit(f"{gen.out(node)} = mb.{fn}(x={var}, axes={axes}, keep_dims=False, name={gen.name(node)})")
        return
    total = step("loss_sum", f"mb.reduce_sum(x={var}, axes={axes}, keep_dims=False")
    wsum = step("w_sum", f"mb.reduce_sum(x={w}, axes={axes}, keep_dims=False")
    gen.emit(f"{gen.out(node)} = mb.real_div(x={total}, y={wsum}, name={gen.name(node)})")


@rule("negative_log_likelihood_loss", check=_loss_check)
def _nll_loss(gen: Gen, node: Node) -> None:
    _nll(gen, node, gen.var(node.inputs[0]), node.inputs[0].type.dtype)


@rule("softmax_cross_entropy_loss", check=_loss_check)
def _sce_loss(gen: Gen, node: Node) -> None:
    """NLL of log_softmax(scores, axis=1) = scores - max - log(sum(exp(scores - max)))."""
    x, dt = node.inputs[0], node.inputs[0].type.dtype
    lp_var, lp_name = (gen.out(node, 1), gen.name(node, 1)) if len(node.outputs) > 1 else gen.tmp(node, "log_prob")
    m, mn = gen.tmp(node, "max")
    gen.emit(f"{m} = mb.reduce_max(x={gen.var(x)}, axes=[1], keep_dims=True, name={mn})")
    sh, shn = gen.tmp(node, "shifted")
    gen.emit(f"{sh} = mb.sub(x={gen.var(x)}, y={m}, name={shn})")
    lse, lsen = gen.tmp(node, "lse")
    gen.emit(f"{lse} = mb.reduce_log_sum_exp(x={sh}, axes=[1], keep_dims=True, name={lsen})")
    gen.emit(f"{lp_var} = mb.sub(x={sh}, y={lse}, name={lp_name})")
    _nll(gen, node, lp_var, dt)
