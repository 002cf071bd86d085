"""TensorFlow rules for neural-network ops: convolution, pooling, normalization,
activations with parameters, losses, grid sampling (resize: ``resize.py``).
"""
from __future__ import annotations

import math

from typing import Any

import numpy as np

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .helpers import SPATIAL_RANKS, static_dims, both, is_float, is_int, needs_rank, rank_of
from .registry import rule


@rule("gelu")
def gelu(c: Any) -> list[str]:
    return [f"{c.o()} = tf.nn.gelu({c.i(0)}, approximate={c.lit(c.attr('approximate') == 'tanh')})"]


@rule("hardmax", check=needs_rank(0))
def hardmax(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", -1), r)
    x = c.i(0)
    src = x if is_float(c.dtype(0)) or is_int(c.dtype(0)) else f"tf.cast({x}, tf.float32)"
    return [f"{c.o()} = tf.one_hot(tf.math.argmax({src}, axis={a}), tf.shape({x})[{a}], axis={a}, "
            f"dtype={c.tf(c.out_dtype())})"]


@rule("dropout", check=lambda n: None if len(n.inputs) < 3 or n.inputs[2] is None
          or (n.inputs[2].const is not None and not np.asarray(n.inputs[2].const).any())
          else Refusal("unsupported_attribute_value", "training-mode dropout is random"))
def dropout(c: Any) -> list[str]:
    lines = [f"{c.o(0)} = tf.identity({c.i(0)})"]
    if len(c.node.outputs) > 1:
        lines.append(f"{c.o(1)} = tf.ones_like({c.i(0)}, dtype=tf.bool)")
    return lines


def _needs_cl(n: Node) -> Refusal | None:
    r = rank_of(n, 0)
    if r is None:  # the rank decides the layout: a dynamic-shape refusal (fixing the dims may settle it)
        return Refusal("dynamic_shape", f"TensorFlow runs {n.op} on rank {SPATIAL_RANKS[n.op]} (channels-last); "
                                        "the input's rank is unknown")
    if r not in SPATIAL_RANKS.get(n.op, ()):
        return Refusal("rank_limit", f"TensorFlow runs {n.op} on rank {SPATIAL_RANKS[n.op]} (channels-last); input has rank {r}")
    return None


def _static_spatial(n: Node) -> Refusal | None:
    x = n.inputs[0]
    s = None if x is None else x.type.shape
    if s is None or not all(isinstance(d, int) for d in s[1:]):
        return Refusal("dynamic_shape", "needs static spatial dimensions")
    return None


def _float_only(n: Node) -> Refusal | None:
    d = n.inputs[0].type.dtype if n.inputs[0] is not None else None
    if d is not None and not is_float(d):
        return Refusal("unsupported_dtype", f"TensorFlow {n.op} takes floating-point inputs; the input is {d}")
    return None


def _spatial_shape(c: Any) -> list[int]:
    """The spatial dims of input 0 (channels-last: dims 1..r-2); the batch dim may be symbolic
    (the pool/conv geometry never reads it)."""
    s = c.shape(0)
    if s is None:
        c.unsupported("dynamic_shape", "needs the rank of input 0")
    sp = list(s[1:-1]) if c.channels_last else list(s[2:])
    if not all(isinstance(d, int) for d in sp):
        c.unsupported("dynamic_shape", f"needs static spatial dimensions for input 0 (has {tuple(s)})")
    return sp


def _ints(v: Any, n: int, default: int) -> list[int]:
    return [int(x) for x in v] if v else [default] * n


def _check_cl(c: Any) -> None:
    if not c.channels_last:
        c.unsupported("rank_limit", "TensorFlow runs this op channels-last; the layout pass did not place it so")


def _conv_pads(c: Any, k_sp: list[int], strides: list[int], dil: list[int]) -> list[int]:
    from translator.reference.conv import _conv_pads as ref_pads

    auto = c.attr("auto_pad", "NOTSET")
    nd = len(k_sp)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        return ref_pads(_spatial_shape(c), k_sp, strides, dil, None, auto)
    pads = c.attr("pads")
    return [int(p) for p in pads] if pads and auto != "VALID" else [0] * (2 * nd)


def _is_same_upper(c: Any, k_sp: list[int], strides: list[int], dil: list[int]) -> bool:
    """Explicit pads that are exactly TensorFlow's SAME (extra padding at the end)."""
    from translator.reference.conv import _conv_pads as ref_pads

    pads = c.attr("pads")
    s = c.shape(0)
    if not pads or not any(pads) or s is None:
        return False
    spatial = list(s[1:-1]) if c.channels_last else list(s[2:])
    if not all(isinstance(d, int) for d in spatial):
        return False
    return [int(p) for p in pads] == ref_pads(spatial, k_sp, strides, dil, None, "SAME_UPPER")


def _pad_input(c: Any, x: str, pads: list[int], nd: int, value: str | None = None) -> tuple[list[str], str]:
    if not any(pads):
        return [], x
    widths = [[0, 0]] + [[pads[i], pads[i + nd]] for i in range(nd)] + [[0, 0]]
    name = c.tmp("padded")
    cv = f", constant_values={value}" if value is not None else ""
    return [f"{name} = tf.pad({x}, {c.lit(widths)}{cv})"], name


def _kernel_shape(c: Any, k: int = 1) -> list[int]:
    ks = c.attr("kernel_shape")
    if ks:
        return [int(v) for v in ks]
    w = c.static_shape(k)
    return list(w[2:])


def _filter(c: Any, k: int, perm: list[int]) -> str:
    """Input ``k`` (a filter) transposed by ``perm``: folded at conversion time when constant."""
    w = c.const(k)
    if w is not None:
        return c.weight(np.ascontiguousarray(np.asarray(w).transpose(perm)), f"{c.node.name}_filter")
    return f"tf.transpose({c.i(k)}, {c.lit(perm)})"


def _subsample(c: Any, x: str, strides: list[int], nd: int) -> str:
    parts = [":"] + [f"::{s}" for s in strides] + [":"]
    return f"{x}[{', '.join(parts)}]"


@rule("conv", check=both(_needs_cl, _float_only, needs_rank(1)))
def conv(c: Any) -> list[str]:
    _check_cl(c)
    r = c.rank(0)
    nd = r - 2
    k_sp = _kernel_shape(c)
    strides = _ints(c.attr("strides"), nd, 1)
    dil = _ints(c.attr("dilations"), nd, 1)
    group = int(c.attr("group", 1))
    auto = c.attr("auto_pad", "NOTSET")
    lines: list[str] = []
    x = c.i(0)
    w = c.const(1)
    shp = c.shape(0)
    if w is not None and shp is not None and not isinstance(shp[-1], int):  # channels-last here
        # input channels only the weight knows (a symbolic dim ONNX requires to be C/g): stated to
        # TensorFlow by a reshape to them, whose converters need them static (TFLite's Conv2D
        # builtin; TFLite has no EnsureShape)
        xs = c.tmp("x")
        lines.append(f"{xs} = tf.reshape({x}, tf.concat([tf.shape({x})[:-1], [{int(w.shape[1]) * group}]], 0))")
        x = xs
    depthwise = nd == 2 and group > 1 and w is not None and w.shape[1] == 1
    both_sd = any(s > 1 for s in strides) and any(d > 1 for d in dil)
    # TensorFlow's CPU depthwise kernel takes one stride for rows and columns ("only supports
    # equal length strides", when the graph runs: paddle2onnx's OCR nets stride [2, 1]): it runs
    # at their greatest common divisor over explicit pads, and the output is subsampled
    uneven = depthwise and strides[0] != strides[1] and not c.cg.unequal_depthwise_strides
    if uneven:
        run_strides = [math.gcd(*strides)] * nd
    else:
        run_strides = [1] * nd if both_sd else strides
    if not uneven and (auto == "SAME_UPPER" or (auto == "NOTSET" and _is_same_upper(c, k_sp, strides, dil))):
        padding = "SAME"
    else:
        pads = _conv_pads(c, k_sp, strides, dil)
        more, x = _pad_input(c, x, pads, nd)
        lines += more
        padding = "VALID"
    y = c.tmp("conv")
    wp = c.node.inputs[1].producer
    ws = c.static_shape(1) if wp is not None and wp.op == "dequantize_linear" and wp.meta.get("weight_only") else None
    if depthwise:  # one filter set per input channel
        # (C·m, 1, kh, kw) -> (kh, kw, C, m): output channel c·m + k reads input channel c, as in ONNX
        dw = np.ascontiguousarray(np.asarray(w).reshape(group, w.shape[0] // group, *w.shape[2:]).transpose(2, 3, 0, 1))
        filt = c.weight(dw, f"{c.node.name}_filter")
        lines.append(f"{y} = tf.nn.depthwise_conv2d({x}, {filt}, strides={[1, *run_strides, 1]}, "
                     f"padding={c.lit(padding)}, dilations={dil})")
    elif nd == 2 and group > 1 and ws is not None and all(isinstance(d, int) for d in ws) and ws[1] == 1:
        # an int8 weight dequantized in the graph (weight-only quantization): the same filter, rearranged
        # in the graph, which the converter folds (and stores int8 again: a hybrid DEPTHWISE_CONV_2D)
        filt = f"tf.transpose(tf.reshape({c.i(1)}, {[group, ws[0] // group, *ws[2:]]}), [2, 3, 0, 1])"
        lines.append(f"{y} = tf.nn.depthwise_conv2d({x}, {filt}, strides={[1, *run_strides, 1]}, "
                     f"padding={c.lit(padding)}, dilations={dil})")
    elif group == 1 or nd == 2 or (nd == 1 and group > 1):
        filt = _filter(c, 1, [*range(2, r), 1, 0])  # (M, C/g, *k) -> (*k, C/g, M)
        lines.append(f"{y} = tf.nn.convolution({x}, {filt}, strides={run_strides}, padding={c.lit(padding)}, "
                     f"dilations={dil})")
    else:  # grouped 3-D convolution: one per group
        filt = _filter(c, 1, [*range(2, r), 1, 0])
        xs, ws = c.tmp("xs"), c.tmp("ws")
        lines += [f"{xs} = tf.split({x}, {group}, axis=-1)", f"{ws} = tf.split({filt}, {group}, axis=-1)",
                  f"{y} = tf.concat([tf.nn.convolution(a, b, strides={run_strides}, padding={c.lit(padding)}, "
                  f"dilations={dil}) for a, b in zip({xs}, {ws})], axis=-1)"]
    if run_strides != strides:
        y2 = c.tmp("strided")
        lines.append(f"{y2} = {_subsample(c, y, [s // r for s, r in zip(strides, run_strides)], nd)}")
        y = y2
    lines.append(f"{c.o()} = {y} + {c.i(2)}" if c.has(2) else f"{c.o()} = {y}")
    return lines


def _dilate_filter(c: Any, w: str, shape: list[int], dil: list[int]) -> tuple[list[str], str, list[int]]:
    """Insert zeros between the taps of a (*k, out, in) filter (TensorFlow's CPU kernels lack dilation here)."""
    lines: list[str] = []
    for i, d in enumerate(dil):
        if d == 1:
            continue
        k = shape[i]
        name = c.tmp(f"dil{i}")
        pads = [[0, 0]] * (len(shape) + 1)
        pads[i + 1] = [0, d - 1]
        new_shape = list(shape)
        new_shape[i] = k * d
        cut = [":"] * len(shape)
        cut[i] = f":{(k - 1) * d + 1}"
        lines.append(f"{name} = tf.reshape(tf.pad(tf.expand_dims({w}, {i + 1}), {c.lit(pads)}), "
                     f"{c.lit(new_shape)})[{', '.join(cut)}]")
        shape = list(shape)
        shape[i] = (k - 1) * d + 1
        w = name
    return lines, w, shape


def _deconv_spatial(n: Node) -> Refusal | None:
    """Symbolic spatial dims pass where the output size follows from the input's (explicit,
    non-negative pads; no ``output_shape``, no SAME): read at run time."""
    if _static_spatial(n) is None:
        return None
    a = n.attrs
    if a.get("output_shape") is not None or a.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER") \
            or any(int(p) < 0 for p in a.get("pads") or ()):
        return Refusal("dynamic_shape", "output_shape / SAME / negative pads need static spatial dimensions")
    return None


@rule("conv_transpose", check=both(_needs_cl, _float_only, needs_rank(0), _deconv_spatial, needs_rank(1)))
def conv_transpose(c: Any) -> list[str]:
    from translator.reference.conv import _transpose_geometry

    _check_cl(c)
    r = c.rank(0)
    nd = r - 2
    w_shape = list(c.static_shape(1))
    k_sp = w_shape[2:]
    strides = _ints(c.attr("strides"), nd, 1)
    dil = _ints(c.attr("dilations"), nd, 1)
    out_pad = _ints(c.attr("output_padding"), nd, 0)
    group = int(c.attr("group", 1))
    if not _spatial_static(c):
        return _conv_transpose_dynamic(c, w_shape, strides, dil, out_pad, group)
    in_sp = _spatial_shape(c)
    full, begins, out_sp = _transpose_geometry(in_sp, k_sp, strides, dil, out_pad, c.attr("pads"),
                                               c.attr("auto_pad", "NOTSET"), c.attr("output_shape"))
    n = c.shape(0)[0]
    x = c.i(0)

    def out_shape(ch: int) -> str:  # a symbolic batch is read at run time
        if isinstance(n, int):
            return c.lit([n] + full + [ch])
        return f"tf.concat([tf.shape({x})[:1], {c.lit(full + [ch])}], 0)"

    lines, y = _transposed(c, w_shape, strides, dil, group, out_shape)
    lo = [min(b, 0) for b in begins]
    hi = [max(begins[i] + out_sp[i] - full[i], 0) for i in range(nd)]
    if any(lo) or any(hi):
        y2 = c.tmp("extended")
        lines.append(f"{y2} = tf.pad({y}, {c.lit([[0, 0]] + [[-lo[i], hi[i]] for i in range(nd)] + [[0, 0]])})")
        y = y2
    crop = [":"] + [f"{begins[i] - lo[i]}:{begins[i] - lo[i] + out_sp[i]}" for i in range(nd)] + [":"]
    if any(begins[i] - lo[i] != 0 or out_sp[i] != full[i] - lo[i] + hi[i] for i in range(nd)):
        y = f"{y}[{', '.join(crop)}]"
    lines.append(f"{c.o()} = {y} + {c.i(2)}" if c.has(2) else f"{c.o()} = {y}")
    return lines


def _transposed(c: Any, w_shape: list[int], strides: list[int], dil: list[int], group: int,
                out_shape: Any) -> tuple[list[str], str]:
    """A VALID transposed conv of input 0 by weight 1 (channels-last, dilated filter, groups as
    split/concat) to ``out_shape(channels)``: the lines and the result's name."""
    r = len(w_shape)
    k_sp = w_shape[2:]
    m = w_shape[1] * group
    lines: list[str] = []
    filt = _filter(c, 1, [*range(2, r), 1, 0])  # (C, M/g, *k) -> (*k, M/g, C)
    fshape = k_sp + [w_shape[1], w_shape[0]]
    more, filt, fshape = _dilate_filter(c, filt, fshape, dil)
    lines += more
    x, y = c.i(0), c.tmp("deconv")
    if group == 1:
        lines.append(f"{y} = tf.nn.conv_transpose({x}, {filt}, {out_shape(m)}, strides={strides}, padding='VALID')")
    else:
        xs, ws = c.tmp("xs"), c.tmp("ws")
        lines += [f"{xs} = tf.split({x}, {group}, axis=-1)", f"{ws} = tf.split({filt}, {group}, axis=-1)",
                  f"{y} = tf.concat([tf.nn.conv_transpose(a, b, {out_shape(m // group)}, "
                  f"strides={strides}, padding='VALID') for a, b in zip({xs}, {ws})], axis=-1)"]
    return lines, y


def _conv_transpose_dynamic(c: Any, w_shape: list[int], strides: list[int], dil: list[int], out_pad: list[int],
                            group: int) -> list[str]:
    """ConvTranspose over symbolic spatial dims: the uncropped size ``(in - 1) * stride +
    output_padding + (k - 1) * dilation + 1`` from ``tf.shape``, a VALID transposed conv, then
    the explicit pads cropped off both ends."""
    r = len(w_shape)
    nd = r - 2
    k_sp = w_shape[2:]
    auto = c.attr("auto_pad", "NOTSET")
    pads = [int(p) for p in c.attr("pads")] if c.attr("pads") and auto != "VALID" else [0] * (2 * nd)
    x = c.i(0)
    sp = c.tmp("full")
    extent = [out_pad[i] + (k_sp[i] - 1) * dil[i] + 1 for i in range(nd)]
    size = f"{sp} = (tf.shape({x})[1:{1 + nd}] - 1) * {c.lit(strides)} + {c.lit(extent)}"

    def out_shape(ch: int) -> str:
        return f"tf.concat([tf.shape({x})[:1], {sp}, [{ch}]], 0)"

    lines, y = _transposed(c, w_shape, strides, dil, group, out_shape)
    lines.insert(0, size)
    if any(pads):
        crop = [":"] + [f"{pads[i]}:{-pads[i + nd] if pads[i + nd] else ''}" for i in range(nd)] + [":"]
        y = f"{y}[{', '.join(crop)}]"
    lines.append(f"{c.o()} = {y} + {c.i(2)}" if c.has(2) else f"{c.o()} = {y}")
    return lines


def _pool_geometry(c: Any) -> tuple[list[int], list[int], list[int], list[int], list[int], list[int]]:
    from translator.reference.pool import _geometry

    in_sp = _spatial_shape(c)
    k = [int(v) for v in c.attr("kernel_shape")]
    strides, dil, begins, ends, out = _geometry(in_sp, k, c.attr("strides"), c.attr("dilations"), c.attr("pads"),
                                                c.attr("auto_pad", "NOTSET"), c.attr("ceil_mode", 0))
    return in_sp, k, list(strides), list(dil), list(begins), list(out)


def _pooled(c: Any, x: str, kind: str, k: list[int], strides: list[int], dil: list[int], begins: list[int],
            out: list[int], in_sp: list[int], fill: str | None) -> tuple[list[str], str]:
    """Pool ``x`` padded by ``begins`` and exactly as much at the end as the windows reach."""
    nd = len(k)
    need = [(out[i] - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 for i in range(nd)]
    tail = [max(need[i] - begins[i] - in_sp[i], 0) for i in range(nd)]
    lines, xp = _pad_input(c, x, begins + tail, nd, fill)
    more, y = _pool_valid(c, xp, kind, k, strides, dil)
    return lines + more, y


def _pool_check(n: Node) -> Refusal | None:
    """Channels-last and a known rank; symbolic spatial dims take the run-time path (``_pool_dynamic``)."""
    return both(_needs_cl, needs_rank(0))(n)


def _spatial_static(c: Any) -> bool:
    s = c.shape(0)
    return s is not None and all(isinstance(d, int) for d in (s[1:-1] if c.channels_last else s[2:]))


def _pool_valid(c: Any, xp: str, kind: str, k: list[int], strides: list[int], dil: list[int]) -> tuple[list[str], str]:
    """A VALID pool of the already padded ``xp`` (TensorFlow's pool takes strides and
    dilations together only when one of them is 1: else pool at stride 1 and subsample)."""
    nd = len(k)
    both_sd = any(s > 1 for s in strides) and any(d > 1 for d in dil)
    y = c.tmp("pool")
    if all(d == 1 for d in dil):
        fn = "tf.nn.max_pool" if kind == "MAX" else "tf.nn.avg_pool"
        return [f"{y} = {fn}({xp}, {k}, {strides}, 'VALID')"], y
    lines = [f"{y} = tf.nn.pool({xp}, {k}, {c.lit(kind)}, strides={[1] * nd if both_sd else strides}, "
             f"padding='VALID', dilations={dil})"]
    if both_sd:
        y2 = c.tmp("strided")
        lines.append(f"{y2} = {_subsample(c, y, strides, nd)}")
        y = y2
    return lines, y


def _run_time_pads(c: Any, x: str, k: list[int]) -> tuple[list[str], list[tuple[Any, Any, Any]], list[str] | None]:
    """The ONNX pooling geometry of channels-last ``x`` computed at run time, per spatial axis
    (begin pad, end pad, extra end pad for ceil mode): ints where they do not depend on the
    size, else tensor names. The last item: each axis's output size when the padded input
    would give one window too many (ceil mode: a window may not start in the end padding),
    to crop to; else None."""
    nd = len(k)
    strides = _ints(c.attr("strides"), nd, 1)
    dil = _ints(c.attr("dilations"), nd, 1)
    auto = c.attr("auto_pad", "NOTSET")
    ceil = bool(c.attr("ceil_mode", 0))
    pads = [int(p) for p in c.attr("pads")] if c.attr("pads") and auto == "NOTSET" else [0] * (2 * nd)
    shape = c.tmp("shape")
    lines = [f"{shape} = tf.shape({x})"]
    out: list[tuple[Any, Any, Any]] = []
    crop: list[str] = []
    for i in range(nd):
        s, ext = strides[i], (k[i] - 1) * dil[i] + 1
        n = f"{shape}[{i + 1}]"
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            tot, pb, pe = c.tmp(f"pad{i}"), c.tmp(f"begin{i}"), c.tmp(f"end{i}")
            half = f"{tot} // 2" if auto == "SAME_UPPER" else f"{tot} - {tot} // 2"
            lines += [f"{tot} = tf.math.maximum(({n} + {s - 1}) // {s} * {s} - {s} + {ext} - {n}, 0)",
                      f"{pb} = {half}", f"{pe} = {tot} - {pb}"]
            out.append((pb, pe, 0))
            continue
        pb, pe = pads[i], pads[i + nd]
        if not ceil:
            out.append((pb, pe, 0))
            continue
        o, ex = c.tmp(f"out{i}"), c.tmp(f"extra{i}")
        lines += [f"{o} = ({n} + {pb + pe - ext + s - 1}) // {s} + 1"]
        if auto == "NOTSET":  # a window may not start in the end padding
            lines.append(f"{o} = tf.where(({o} - 1) * {s} >= {n} + {pb}, {o} - 1, {o})")
        lines.append(f"{ex} = tf.math.maximum(({o} - 1) * {s} + {ext} - {n} - {pb + pe}, 0)")
        out.append((pb, pe, ex))
        crop.append(o)
    return lines, out, (crop if ceil and auto == "NOTSET" else None)


def _paddings(c: Any, geo: list[tuple[Any, Any, Any]], part: str = "all") -> str:
    """A (rank, 2) ``tf.pad`` operand from ``_run_time_pads``' geometry: the explicit pads,
    the ceil-mode extra, or both ("all")."""
    pairs: list[tuple[Any, Any]] = [(0, 0)]
    for pb, pe, ex in geo:
        if part == "extra":
            pairs.append((0, ex))
        elif part == "explicit":
            pairs.append((pb, pe))
        else:
            pairs.append((pb, pe if isinstance(ex, int) and ex == 0 else f"{pe} + {ex}"))
    pairs.append((0, 0))
    if all(isinstance(b, int) and isinstance(e, int) for b, e in pairs):
        return c.lit([[b, e] for b, e in pairs])
    return "tf.stack([" + ", ".join(f"tf.stack([{b}, {e}])" for b, e in pairs) + "])"


def _pool_dynamic(c: Any, kind: str, fill: str | None) -> list[str]:
    """A pool over symbolic spatial dims: pads (SAME and ceil mode included) computed from
    ``tf.shape`` and applied with ``tf.pad``, a VALID pool; the average divides by the pooled
    count mask (pads counted or not, the ceil-mode overhang never), so every ONNX pooling
    rule holds at any size. Without pads the VALID pool of the input is the whole answer (no
    pad op left for LiteRT's XNNPACK delegate to refuse: it takes PAD, not PADV2)."""
    k = [int(v) for v in c.attr("kernel_shape")]
    nd = len(k)
    strides = _ints(c.attr("strides"), nd, 1)
    dil = _ints(c.attr("dilations"), nd, 1)
    x = c.i(0)
    lines, geo, crop = _run_time_pads(c, x, k)
    src = x
    p = float(c.attr("p", 2)) if c.node.op == "lp_pool" else None
    if p is not None:
        src = c.tmp("pow")
        lines.append(f"{src} = tf.math.pow(tf.math.abs({x}), {c.lit(p)})")
    unpadded = all(isinstance(v, int) and v == 0 for g in geo for v in g)
    if unpadded:  # no pads at all (no SAME, no ceil mode): the VALID pool of the input itself
        xp = src
    else:
        xp = c.tmp("padded")
        cv = f", constant_values={fill}" if fill is not None else ""
        lines.append(f"{xp} = tf.pad({src}, {_paddings(c, geo)}{cv})")
        ch = c.shape(0)[-1]
        if isinstance(ch, int) and "tf.stack" in lines[-1]:  # run-time paddings hide every dim: the channels stay known
            lines.append(f"{xp} = tf.reshape({xp}, tf.concat([tf.shape({xp})[:-1], [{ch}]], 0))")
    more, y = _pool_valid(c, xp, kind, k, strides, dil)
    lines += more
    if kind == "AVG" and p is None and not unpadded:  # (unpadded: every window counts its k elements)
        include = bool(c.attr("count_include_pad", 0))
        ones, mask = c.tmp("ones"), c.tmp("mask")
        lines += [f"{ones} = tf.ones_like({x}[..., :1])",
                  f"{mask} = tf.pad(tf.pad({ones}, {_paddings(c, geo, 'explicit')}, "
                  f"constant_values={1 if include else 0}), {_paddings(c, geo, 'extra')})"]
        more, cnt = _pool_valid(c, mask, "AVG", k, strides, dil)
        lines += more
        y2 = c.tmp("mean")
        lines.append(f"{y2} = {y} / {cnt}")
        y = y2
    elif p is not None:
        y2 = c.tmp("lp")
        lines.append(f"{y2} = tf.math.pow({y} * {c.lit(float(np.prod(k)))}, {c.lit(1.0 / p)})")
        y = y2
    if crop:
        y = f"{y}[:, {', '.join(f':{o}' for o in crop)}, :]"
    return lines + [f"{c.o(0)} = {y}"]


def _max_pool_check(n: Node) -> Refusal | None:
    if len(n.outputs) > 1 and (n.outputs[1].uses or (n.graph is not None and n.outputs[1] in n.graph.outputs)):
        return Refusal("unsupported_attribute_value", "max_pool indices output (TensorFlow numbers them channels-last)")
    return _pool_check(n)


def _tf_same(c: Any) -> bool:
    """Whether the max pool's windows are TensorFlow's ``SAME`` ones at every size the input
    can have (its padded positions never win a max, as ONNX's pads): SAME_UPPER; explicit pads
    of ``(k - 1) / 2`` (the extra one at the end) at stride 1 without ceil mode (YOLO's SPPF);
    at static sizes, the same output size and first pad as SAME's. Without dilation. The pool
    then needs no pad op (LiteRT writes a -inf pad as PADV2, which XNNPACK does not take)."""
    k = [int(v) for v in c.attr("kernel_shape")]
    nd = len(k)
    strides, dil = _ints(c.attr("strides"), nd, 1), _ints(c.attr("dilations"), nd, 1)
    auto = c.attr("auto_pad", "NOTSET")
    if any(d != 1 for d in dil) or auto == "SAME_LOWER":
        return False
    if auto == "SAME_UPPER":
        return True
    if auto != "NOTSET" or not c.attr("pads") or not any(int(p) for p in c.attr("pads")):
        return False
    pads = [int(p) for p in c.attr("pads")]
    if not c.attr("ceil_mode", 0) and all(s == 1 for s in strides) and \
            all(pads[i] == (k[i] - 1) // 2 and pads[i + nd] == k[i] - 1 - pads[i] for i in range(nd)):
        return True
    if not _spatial_static(c):
        return False
    in_sp, _, _, _, begins, out = _pool_geometry(c)
    for i in range(nd):
        o = -(-in_sp[i] // strides[i])
        total = max((o - 1) * strides[i] + k[i] - in_sp[i], 0)
        if out[i] != o or begins[i] != total // 2:
            return False
    return True


#: ops whose every output value is ≥ 0 (or NaN)
_NON_NEGATIVE = frozenset({"relu", "sigmoid", "exp", "abs", "softplus", "hard_sigmoid", "softmax"})


def _non_negative(v: Any) -> bool:
    """Whether ``v`` is computed by an op whose values are never negative (a ReLU, a clip from
    0 up), through the layout's transposes and reshapes."""
    for _ in range(8):
        p = v.producer if v is not None else None
        if p is None:
            return False
        if p.op in ("transpose", "reshape", "identity"):
            v = p.inputs[0]
            continue
        if p.op == "clip":
            lo = p.inputs[1] if len(p.inputs) > 1 else None
            return lo is not None and lo.is_const and float(np.min(lo.const)) >= 0
        return p.op in _NON_NEGATIVE
    return False


@rule("max_pool", check=_max_pool_check)
def max_pool(c: Any) -> list[str]:
    _check_cl(c)
    dt = c.dtype(0)
    fill = "float('-inf')" if is_float(dt) else f"{c.tf(dt)}.min"
    if is_float(dt) and _non_negative(c.node.inputs[0]):
        # after a ReLU a pad of 0 never wins a max over the window's own values: a PAD
        # (XNNPACK takes it), not a -inf PADV2 (ResNet's stem: k 3, stride 2, pads 1)
        fill = None
    if _tf_same(c):
        k = [int(v) for v in c.attr("kernel_shape")]
        return [f"{c.o(0)} = tf.nn.max_pool({c.i(0)}, {k}, {_ints(c.attr('strides'), len(k), 1)}, 'SAME')"]
    if not _spatial_static(c):
        return _pool_dynamic(c, "MAX", fill)
    in_sp, k, strides, dil, begins, out = _pool_geometry(c)
    lines, y = _pooled(c, c.i(0), "MAX", k, strides, dil, begins, out, in_sp, fill)
    return lines + [f"{c.o(0)} = {y}"]


def _window_counts(in_sp: list[int], k: list[int], strides: list[int], dil: list[int], begins: list[int],
                   ends: list[int], out: list[int], include_pad: bool) -> np.ndarray:
    """How many elements each window averages: inside the input, or inside input + explicit pads."""
    counts = np.ones(out)
    for i in range(len(k)):
        pos = np.arange(out[i])[:, None] * strides[i] - begins[i] + np.arange(k[i])[None, :] * dil[i]
        lo, hi = (-begins[i], in_sp[i] + ends[i]) if include_pad else (0, in_sp[i])
        shape = [1] * len(k)
        shape[i] = out[i]
        counts = counts * ((pos >= lo) & (pos < hi)).sum(1).reshape(shape)
    return counts


@rule("average_pool", "lp_pool", check=both(_pool_check, _float_only))
def average_pool(c: Any) -> list[str]:
    from translator.reference.pool import _geometry

    _check_cl(c)
    if not _spatial_static(c):
        return _pool_dynamic(c, "AVG", None)
    in_sp, k, strides, dil, begins, out = _pool_geometry(c)
    _, _, _, ends, _ = _geometry(in_sp, k, c.attr("strides"), c.attr("dilations"), c.attr("pads"),
                                 c.attr("auto_pad", "NOTSET"), c.attr("ceil_mode", 0))
    x = c.i(0)
    lines: list[str] = []
    p = float(c.attr("p", 2)) if c.node.op == "lp_pool" else None
    if p is not None:
        src = c.tmp("pow")
        lines.append(f"{src} = tf.math.pow(tf.math.abs({x}), {c.lit(p)})")
        x = src
    more, y = _pooled(c, x, "AVG", k, strides, dil, begins, out, in_sp, None)
    lines += more
    total = int(np.prod(k))
    if p is not None:
        return lines + [f"{c.o()} = tf.math.pow({y} * {c.lit(float(total))}, {c.lit(1.0 / p)})"]
    include = bool(c.attr("count_include_pad", 0))
    counts = _window_counts(in_sp, k, strides, dil, begins, list(ends), out, include)
    if (counts == total).all():
        return lines + [f"{c.o()} = {y}"]
    scale = (total / counts).reshape([1] + out + [1]).astype(np.dtype(c.dtype(0)) if c.dtype(0) != "bfloat16"
                                                         else np.float32)
    return lines + [f"{c.o()} = {y} * {c.weight(scale, c.node.name + '_count')}"]


def _spatial_axes(c: Any) -> list[int]:
    r = c.rank(0)
    return list(range(1, r - 1)) if c.channels_last else list(range(2, r))


@rule("global_average_pool", "global_max_pool", "global_lp_pool", check=needs_rank(0))
def global_pool(c: Any) -> list[str]:
    axes = _spatial_axes(c)
    x = c.i(0)
    if c.node.op == "global_average_pool":
        from .misc import staged_sum

        src = c.node.inputs[0].producer
        if isinstance(axes, list) and len(axes) > 1 and c.dtype(0) in ("float32", "float16") \
                and not (src is not None and src.op == "dequantize_linear"):
            # (the mean of a dequantized int8 stays one reduction, as in ``misc.reduce``: the
            # converter's int8 MEAN rounds once, as onnxruntime's QLinearGlobalAveragePool does)
            return [f"{c.o()} = {staged_sum('tf.math.reduce_mean', x, axes, True)}"]
        return [f"{c.o()} = tf.math.reduce_mean({x}, axis={axes}, keepdims=True)"]
    if c.node.op == "global_max_pool":
        return [f"{c.o()} = tf.math.reduce_max({x}, axis={axes}, keepdims=True)"]
    p = float(c.attr("p", 2))
    return [f"{c.o()} = tf.math.pow(tf.math.reduce_sum(tf.math.pow(tf.math.abs({x}), {c.lit(p)}), axis={axes}, "
            f"keepdims=True), {c.lit(1.0 / p)})"]


def _crd(ch: int, bs: int) -> list[int]:
    """Channel order CRD (c*bs*bs + i*bs + j) taken from DCR ((i*bs + j)*C' + c), C' = ch / bs²."""
    cp = ch // (bs * bs)
    return [ij * cp + cc for cc in range(cp) for ij in range(bs * bs)]


@rule("space_to_depth", check=_needs_cl)
def space_to_depth(c: Any) -> list[str]:
    _check_cl(c)
    bs = int(c.attr("blocksize"))
    y = f"tf.nn.space_to_depth({c.i(0)}, {bs})"
    if c.attr("mode", "DCR") == "CRD":
        y = f"tf.gather({y}, {c.lit(_crd(c.static_shape(0)[-1] * bs * bs, bs))}, axis=-1)"
    return [f"{c.o()} = {y}"]


@rule("depth_to_space", check=_needs_cl)
def depth_to_space(c: Any) -> list[str]:
    _check_cl(c)
    bs = int(c.attr("blocksize"))
    x = c.i(0)
    if c.attr("mode", "DCR") == "CRD":  # reorder channels c*bs*bs + i*bs + j -> (i*bs + j)*C' + c
        ch = c.static_shape(0)[-1]
        cp = ch // (bs * bs)
        perm = [cc * bs * bs + ij for ij in range(bs * bs) for cc in range(cp)]
        x = f"tf.gather({x}, {c.lit(perm)}, axis=-1)"
    return [f"{c.o()} = tf.nn.depth_to_space({x}, {bs})"]


def _channel_param(c: Any, expr: str) -> str:
    """A per-channel (C,) parameter shaped to broadcast over input 0's channel axis."""
    if c.channels_last:
        return expr
    r = c.rank(0)
    return f"tf.reshape({expr}, {c.lit([-1] + [1] * (r - 2))})"


@rule("batch_normalization", check=needs_rank(0))
def batch_normalization(c: Any) -> list[str]:
    eps = float(c.attr("epsilon", 1e-5))
    x = c.i(0)
    if c.attr("training_mode", 0):  # batch statistics; running statistics updated with momentum
        axes = [k for k in range(c.rank(0)) if k != (c.rank(0) - 1 if c.channels_last else 1)]
        mean, var, mom = c.tmp("mean"), c.tmp("var"), float(c.attr("momentum", 0.9))
        s, b = _channel_param(c, c.i(1)), _channel_param(c, c.i(2))
        lines = [f"{mean}, {var} = tf.nn.moments({x}, axes={axes})",
                 f"{c.o(0)} = ({x} - {_channel_param(c, mean)}) * tf.math.rsqrt({_channel_param(c, var)} + "
                 f"{c.lit(eps)}) * {s} + {b}"]
        for k, (stat, src) in enumerate(((mean, 3), (var, 4)), start=1):
            if len(c.node.outputs) > k:
                lines.append(f"{c.o(k)} = tf.cast({c.i(src)} * {c.lit(mom)} + tf.cast({stat}, {c.i(src)}.dtype) * "
                             f"{c.lit(1 - mom)}, {c.tf(c.out_dtype(k))})")
        return lines
    consts = [c.const(k) for k in (1, 2, 3, 4)]
    if all(v is not None for v in consts) and c.dtype(0) != "bfloat16":
        scale, bias, mean, var = (np.asarray(v, np.float64) for v in consts)
        a = scale / np.sqrt(var + eps)
        b = bias - mean * a
        dt = np.dtype(c.dtype(0))
        mul = c.weight(a.astype(dt), c.node.name + "_mul")
        add = c.weight(b.astype(dt), c.node.name + "_add")
        return [f"{c.o(0)} = {x} * {_channel_param(c, mul)} + {_channel_param(c, add)}"]
    s, b, m, v = (_channel_param(c, c.i(k)) for k in (1, 2, 3, 4))
    return [f"{c.o(0)} = ({x} - {m}) * tf.math.rsqrt({v} + {c.lit(eps)}) * {s} + {b}"]


@rule("instance_normalization", check=both(needs_rank(0), _float_only))
def instance_normalization(c: Any) -> list[str]:
    eps = float(c.attr("epsilon", 1e-5))
    axes = _spatial_axes(c)
    dt = c.dtype(0)
    x = c.i(0) if dt in ("float32", "float64") else f"tf.cast({c.i(0)}, tf.float32)"
    mean, var = c.tmp("mean"), c.tmp("var")
    work = "tf.float64" if dt == "float64" else "tf.float32"
    s = _channel_param(c, f"tf.cast({c.i(1)}, {work})")
    b = _channel_param(c, f"tf.cast({c.i(2)}, {work})")
    y = f"({x} - {mean}) * tf.math.rsqrt({var} + {c.lit(eps)}) * {s} + {b}"
    return [f"{mean}, {var} = tf.nn.moments({x}, axes={axes}, keepdims=True)",
            f"{c.o()} = {y if dt in ('float32', 'float64') else f'tf.cast({y}, {c.tf(dt)})'}"]


@rule("lrn", check=both(needs_rank(0), _float_only))
def lrn(c: Any) -> list[str]:
    size = int(c.attr("size"))
    alpha, beta, bias = float(c.attr("alpha", 1e-4)), float(c.attr("beta", 0.75)), float(c.attr("bias", 1.0))
    x = c.i(0)
    if c.channels_last and size % 2 == 1 and c.rank(0) == 4:
        return [f"{c.o()} = tf.nn.local_response_normalization({x}, depth_radius={(size - 1) // 2}, "
                f"bias={c.lit(bias)}, alpha={c.lit(alpha / size)}, beta={c.lit(beta)})"]
    r = c.rank(0)
    axis = r - 1 if c.channels_last else 1
    ch = c.static_shape(0)[axis]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    widths = [[0, 0]] * r
    widths[axis] = [lo, hi]
    sq = c.tmp("sq")
    cut = [":"] * r
    cut[axis] = "{j}:{j} + " + str(ch)
    window = "[" + ", ".join(cut) + "]"
    return [f"{sq} = tf.pad(tf.math.square({x}), {c.lit(widths)})",
            f"{sq} = tf.add_n([{sq}{window.replace('{j}', 'j')} for j in range({size})])",
            f"{c.o()} = {x} / tf.math.pow({c.lit(bias)} + {c.lit(alpha / size)} * {sq}, {c.lit(beta)})"]


@rule("layer_normalization", check=needs_rank(0))
def layer_normalization(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", -1), r)
    eps = float(c.attr("epsilon", 1e-5))
    x = c.i(0)
    mean, var, inv, d = c.tmp("mean"), c.tmp("var"), c.tmp("inv_std"), c.tmp("centered")
    axes = list(range(a, r))
    y = f"{d} * {inv} * {c.i(1)}" + (f" + {c.i(2)}" if c.has(2) else "")
    # Two-pass variance from the centered values, spelled as Sub/Mul (not tf.nn.moments): with
    # oneDNN on (TensorFlow's x86 default) the moments pattern is rewritten into a fused layer
    # norm that loses precision when |mean| >> std (2e-2 relative error on a [1, N] input whose
    # mean is 50x its spread; tests/test_emit_tensorflow.py::test_layer_norm_with_large_mean).
    lines = [f"{mean} = tf.math.reduce_mean({x}, axis={axes}, keepdims=True)",
             f"{d} = tf.math.subtract({x}, {mean})",
             f"{var} = tf.math.reduce_mean(tf.math.multiply({d}, {d}), axis={axes}, keepdims=True)",
             f"{inv} = tf.math.rsqrt({var} + {c.lit(eps)})", f"{c.o(0)} = {y}"]
    for k, stat in ((1, mean), (2, inv)):  # statistics: stash_type float32 unless typed otherwise
        if len(c.node.outputs) > k:
            dt = c.out_dtypes.get(k) or c.node.outputs[k].type.dtype or "float32"
            lines.append(f"{c.o(k)} = tf.cast({stat}, {c.tf(dt)})")
    return lines


@rule("lp_normalization", check=needs_rank(0))
def lp_normalization(c: Any) -> list[str]:
    a = norm_axis(c.attr("axis", -1), c.rank(0))
    x = c.i(0)
    p = int(c.attr("p", 2))
    norm = (f"tf.math.reduce_sum(tf.math.abs({x}), axis={a}, keepdims=True)" if p == 1
            else f"tf.math.sqrt(tf.math.reduce_sum(tf.math.square({x}), axis={a}, keepdims=True))")
    return [f"{c.o()} = tf.math.divide_no_nan({x}, {norm})"]


@rule("rms_normalization", check=needs_rank(0))
def rms_normalization(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", -1), r)
    eps = float(c.attr("epsilon", 1e-5))
    x, normed = c.i(0), c.tmp("normalized")
    return [f"{normed} = {x} * tf.math.rsqrt(tf.math.reduce_mean(tf.math.square({x}), axis={list(range(a, r))}, "
            f"keepdims=True) + {c.lit(eps)})",
            f"{c.o()} = tf.cast({normed} * tf.cast({c.i(1)}, {normed}.dtype), {c.tf(c.out_dtype())})"]


@rule("group_normalization", check=static_dims(0))
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


def _loss_check(n: Node) -> Refusal | None:
    if n.inputs[0] is not None and n.inputs[0].type.rank is None:
        return needs_rank(1)(n)
    return None


@rule("negative_log_likelihood_loss", check=_loss_check)
def nll_loss(c: Any) -> list[str]:
    return _nll_lines(c, c.i(0), c.i(1), c.i(2) if c.has(2) else None, c.o(0))


@rule("softmax_cross_entropy_loss", check=_loss_check)
def softmax_cross_entropy_loss(c: Any) -> list[str]:
    logp = c.o(1) if len(c.node.outputs) > 1 else c.tmp("log_prob")
    return ([f"{logp} = tf.nn.log_softmax({c.i(0)}, axis=1)"]
            + _nll_lines(c, logp, c.i(1), c.i(2) if c.has(2) else None, c.o(0)))


def _float_input(n: Node) -> Refusal | None:
    d = n.inputs[0].type.dtype if n.inputs[0] is not None else None
    if d is not None and not (d.startswith("float") or d == "bfloat16"):
        return Refusal("unsupported_dtype", f"{n.op} of {d} (the TensorFlow lowering weights taps in floating point)")
    return None


@rule("grid_sample", check=both(static_dims(0), _float_input))
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


@rule("causal_conv_with_state", check=static_dims(1))
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


@rule("affine_grid", check=static_dims(0))
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
