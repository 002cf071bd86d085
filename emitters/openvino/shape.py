"""OpenVINO rules of shape, indexing and reduction ops: constants, reshapes, slices, pads,
gathers and scatters, TopK / ArgMax, and reductions (with the CPU plugin's dynamic-rank and
-inf quirks worked around)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from translator.ir.graph import Node

from .helpers import (INT64_MAX, Refusal, all_along, all_axes, as_i64, attr, dim, i64, norm_axis, np_dtype, rank_of,
                      scalar_i64, static_out)
from .registry import rule

if TYPE_CHECKING:
    from .codegen import Gen


# ----------------------------------------------------------------------------- constants
@rule("constant")
def _constant(g: "Gen", node: Node) -> None:
    from translator import reference

    arr = reference.get("constant")(**node.attrs)
    g.bind(0, g.em.constant(np.asarray(arr), node.outputs[0].type.dtype, g.fn, g.hint))


@rule("constant_of_shape")
def _constant_of_shape(g: "Gen", node: Node) -> None:
    value = node.attrs.get("value")
    fill = np.zeros((), np.float32) if value is None else np.asarray(value).reshape(-1)[:1].reshape(())
    c = g.const(fill, g.out_dtype(0))
    g.out(0, f"ops.broadcast({c}, {as_i64(g, g.x(0), g.dtype(0))})")


# ----------------------------------------------------------------------------- shapes
@rule("reshape")
def _reshape(g: "Gen", node: Node) -> None:
    special_zero = not bool(g.a("allowzero"))
    g.out(0, f"ops.reshape({g.x(0)}, {as_i64(g, g.x(1), g.dtype(1))}, {g.lit(special_zero)})")


@rule("squeeze", "unsqueeze")
def _squeeze(g: "Gen", node: Node) -> None:
    axes = g.x(1)
    shape = static_out(node)
    if axes is not None and g.cval(1) is None and shape is not None:
        # runtime axes give OpenVINO a dynamic rank the CPU plugin refuses: the IR knows the shape
        g.out(0, f"ops.reshape({g.x(0)}, {i64(g, shape)}, False)")
        return
    if axes is None and node.op == "squeeze":
        picked = _squeeze_axes(node)
        if picked is not None:  # an axes-less squeeze over run-time dims: OpenVINO's CPU plugin needs its rank
            g.out(0, f"ops.squeeze({g.x(0)}, {i64(g, picked)})" if picked else g.x(0))
            return
    g.out(0, f"ops.{node.op}({g.x(0)}, {axes})" if axes is not None else f"ops.squeeze({g.x(0)})")


#: elementwise ops with a 0-d constant operand: their output's rank is the other input's
_SCALAR_BINARY = frozenset({"add", "sub", "mul", "div", "pow", "max", "min"})
#: elementwise ops of one input through which a rank is read back (the output's is the input's)
_SAME_RANK = frozenset({"sigmoid", "tanh", "relu", "exp", "log", "abs", "neg", "identity", "cast", "sqrt", "softplus"})


def _squeeze_axes(node: Node) -> list[int] | None:
    """The axes of a squeeze without axes whose input has run-time dims (ONNX squeezes every dim
    that is 1 at run time: a dynamic rank, which OpenVINO's CPU plugin refuses): the static
    1s, plus the run-time dims when the rank the graph declares downstream (the squeeze's
    output, or after elementwise ops of one input or with a 0-d constant: a score squeezed, a
    sigmoid and a scale by 0-d constants, declared []) says they go too. None: the rank is not
    known or does not fit."""
    shape = node.inputs[0].type.shape if node.inputs[0] is not None else None
    if shape is None or all(isinstance(d, int) for d in shape):
        return None
    ones = [i for i, d in enumerate(shape) if d == 1]
    runtime = [i for i, d in enumerate(shape) if not isinstance(d, int)]
    v, rank = node.outputs[0], None
    for _ in range(8):
        if v.type.shape is not None:
            rank = len(v.type.shape)
            break
        nxt = [n for n, _ in v.uses]
        if len(nxt) != 1 or len(nxt[0].outputs) != 1 or not (
                nxt[0].op in _SAME_RANK or nxt[0].op in _SCALAR_BINARY and len(nxt[0].inputs) == 2
                and all(i is v or (i is not None and i.is_const and np.ndim(i.const) == 0) for i in nxt[0].inputs)):
            break
        v = nxt[0].outputs[0]
    if rank is None:
        # read only by reshapes to constant shapes that copy no dim: the order of the elements
        # is all they see, and dropping a dim of 1 leaves it as it is (ICLabel's scores)
        uses = node.outputs[0].uses
        if uses and all(n.op == "reshape" and k == 0 and len(n.inputs) > 1 and n.inputs[1] is not None
                        and n.inputs[1].is_const and 0 not in np.asarray(n.inputs[1].const).reshape(-1).tolist()
                        for n, k in uses) and not any(o is node.outputs[0] for o in node.graph.outputs):
            return ones
        return None
    drop = len(shape) - rank
    if drop == len(ones) + len(runtime):
        return sorted(ones + runtime)
    if drop == len(ones):
        return ones
    return None


@rule("transpose", check=lambda n: None if attr(n, "perm") is not None or rank_of(n) is not None
          else Refusal("dynamic_shape", "transpose without perm needs the input rank"))
def _transpose(g: "Gen", node: Node) -> None:
    perm = g.a("perm")
    if perm is None:
        perm = list(reversed(range(g.rank(0))))
    g.out(0, f"ops.transpose({g.x(0)}, {i64(g, perm)})")


@rule("flatten")
def _flatten(g: "Gen", node: Node) -> None:
    x = g.x(0)
    t = g.t(0)
    axis = int(g.a("axis"))
    if t.rank is not None and axis < 0:  # axis may equal the rank (everything in the first dim)
        axis = norm_axis(axis, t.rank)
    if t.is_static and t.shape is not None:
        lead = int(np.prod(t.shape[:axis], dtype=np.int64))
        g.out(0, f"ops.reshape({x}, {i64(g, [lead, -1])}, False)")
        return
    if axis == 0:
        g.out(0, f"ops.reshape({x}, {i64(g, [1, -1])}, False)")
        return
    s = g.let(f"ops.shape_of({x})")
    head = g.let(f"ops.slice({s}, {i64(g, [0])}, {i64(g, [axis])}, {i64(g, [1])})")
    lead = g.let(f"ops.reduce_prod({head}, {i64(g, [0])}, True)")
    g.out(0, f"ops.reshape({x}, ops.concat([{lead}, {i64(g, [-1])}], 0), False)")


@rule("split")
def _split(g: "Gen", node: Node) -> None:
    x, axis = g.x(0), int(g.a("axis"))
    n = len(node.outputs)
    if g.x(1) is not None:
        t = g.let(f"ops.variadic_split({x}, {i64(g, axis)}, {g.x(1)})")
    else:
        shape = g.t(0).shape
        d = shape[norm_axis(axis, len(shape))] if shape is not None else None
        if isinstance(d, int) and d % n:
            chunk = -(-d // n)
            lengths = [min(chunk, d - k * chunk) for k in range(n)]
            t = g.let(f"ops.variadic_split({x}, {i64(g, axis)}, {i64(g, lengths)})")
        elif isinstance(d, int) or n == 1:
            t = g.let(f"ops.split({x}, {i64(g, axis)}, {n})")
        else:  # size known at run time only: n - 1 chunks of ceil(d / n), the rest last (ONNX 18)
            size = dim(g, x, axis)
            chunk = g.let(f"ops.divide(ops.add({size}, {i64(g, n - 1)}), {i64(g, n)})")
            last = g.let(f"ops.subtract({size}, ops.multiply({chunk}, {i64(g, n - 1)}))")
            lengths = g.let(f"ops.concat([ops.broadcast({chunk}, {i64(g, [n - 1])}), "
                            f"ops.unsqueeze({last}, {i64(g, [0])})], 0)")
            t = g.let(f"ops.variadic_split({x}, {i64(g, axis)}, {lengths})")
    g.outs(t)


@rule("slice")
def _slice(g: "Gen", node: Node) -> None:
    x = g.x(0)
    starts = as_i64(g, g.x(1), g.dtype(1))
    ends = as_i64(g, g.x(2), g.dtype(2))
    axes = as_i64(g, g.x(3), g.dtype(3)) if g.x(3) is not None else None
    if g.x(4) is not None:
        steps = as_i64(g, g.x(4), g.dtype(4))
    else:
        c = g.cval(1)
        steps = i64(g, np.ones(c.size)) if c is not None else \
            g.let(f"ops.broadcast({i64(g, 1)}, ops.shape_of({starts}))")
    extra = f", {axes}" if axes is not None else ""
    g.out(0, f"ops.slice({x}, {starts}, {ends}, {steps}{extra})")


def _pad_check(node: Node) -> Refusal | None:
    mode = attr(node, "mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        return Refusal("unsupported_attribute_value", f"OpenVINO Pad has no {mode!r} mode")
    axes = node.inputs[3] if len(node.inputs) > 3 else None
    if axes is not None and rank_of(node) is None:
        return Refusal("dynamic_shape", "pad with axes needs the input rank")
    return None


@rule("pad", check=_pad_check)
def _pad(g: "Gen", node: Node) -> None:
    x = g.x(0)
    mode = g.a("mode")
    pads, axes_c = g.cval(1), g.cval(3)
    if pads is not None and (g.x(3) is None or axes_c is not None):
        p = [int(v) for v in pads.reshape(-1)]
        k = len(p) // 2
        begin, end = p[:k], p[k:]
        if axes_c is not None:
            r = g.rank(0)
            fb, fe = [0] * r, [0] * r
            for j, ax in enumerate(int(a) for a in axes_c.reshape(-1)):
                fb[norm_axis(ax, r)], fe[norm_axis(ax, r)] = begin[j], end[j]
            begin, end = fb, fe
        pb, pe = i64(g, begin), i64(g, end)
    else:
        t = g.let(f"ops.split({as_i64(g, g.x(1), g.dtype(1))}, {i64(g, 0)}, 2)")
        pb, pe = f"{t}.output(0)", f"{t}.output(1)"
        if g.x(3) is not None:  # scatter the per-axis pads into full-rank ones (negative axes wrap)
            r = g.rank(0)
            ax = as_i64(g, g.x(3), g.dtype(3))
            ax = g.let(f"ops.floor_mod({ax}, {i64(g, r)})")
            zeros = i64(g, np.zeros(r))
            pb = g.let(f"ops.scatter_elements_update({zeros}, {ax}, {pb}, {i64(g, 0)})")
            pe = g.let(f"ops.scatter_elements_update({zeros}, {ax}, {pe}, {i64(g, 0)})")
    value = g.x(2) if mode == "constant" and g.x(2) is not None else None
    if value is not None:
        value = g.let(f"ops.reshape({value}, {i64(g, np.zeros(0))}, False)")
    tail = f", {value}" if value is not None else ""
    g.out(0, f"ops.pad({x}, {pb}, {pe}, {g.lit(mode)}{tail})")


@rule("shape")
def _shape(g: "Gen", node: Node) -> None:
    s = f"ops.shape_of({g.x(0)}, 'i64')"
    start, end = int(g.a("start", 0)), g.a("end")
    if start == 0 and end is None:
        g.out(0, s)
        return
    s = g.let(s)
    stop = INT64_MAX if end is None else int(end)
    g.out(0, f"ops.slice({s}, {i64(g, [start])}, {i64(g, [stop])}, {i64(g, [1])})")


@rule("size")
def _size(g: "Gen", node: Node) -> None:
    g.out(0, f"ops.reduce_prod(ops.shape_of({g.x(0)}, 'i64'), {i64(g, 0)}, False)")


@rule("tile")
def _tile(g: "Gen", node: Node) -> None:
    reps = g.x(1)
    t, out = g.t(0), static_out(node)
    if g.cval(1) is None and t.is_static and out is not None and len(out) == len(t.shape or ()):
        # Tile with run-time repeats returns garbage on the CPU plugin (2026.4): the IR knows them
        reps = i64(g, [o // i if i else 1 for o, i in zip(out, t.shape or ())])
    g.out(0, f"ops.tile({g.x(0)}, {reps})")


@rule("range")
def _range(g: "Gen", node: Node) -> None:
    # start, limit, delta are scalars (a one-element tensor is accepted too)
    args = [x if g.t(i).rank == 0 else g.let(f"ops.reshape({x}, {i64(g, [])}, False)") for i, x in enumerate(g.xs())]
    g.out(0, f"ops.range({args[0]}, {args[1]}, {args[2]}, {g.ty(g.out_dtype(0))})")


@rule("space_to_depth", "depth_to_space")
def _space_depth(g: "Gen", node: Node) -> None:
    mode = {"DCR": "blocks_first", "CRD": "depth_first"}[g.a("mode", "DCR")]
    g.out(0, f"ops.{node.op}({g.x(0)}, {g.lit(mode)}, {int(g.a('blocksize'))})")


@rule("compress")
def _compress(g: "Gen", node: Node) -> None:
    x, cond = g.x(0), g.x(1)
    axis = g.a("axis")
    if axis is None:
        x, axis = g.let(f"ops.reshape({x}, {i64(g, [-1])}, False)"), 0
    idx = g.let(f"ops.reshape(ops.non_zero({cond}, 'i64'), {i64(g, [-1])}, False)")
    g.out(0, f"ops.gather({x}, {idx}, {i64(g, int(axis))})")


@rule("trilu")
def _trilu(g: "Gen", node: Node) -> None:
    # keep x[..., i, j] where j - i >= k (upper) or j - i <= k (lower)
    x = g.x(0)
    k = scalar_i64(g, g.x(1), g.dtype(1)) if g.x(1) is not None else i64(g, 0)
    rows = g.let(f"ops.unsqueeze(ops.range({i64(g, 0)}, {dim(g, x, -2)}, {i64(g, 1)}, 'i64'), {i64(g, 1)})")
    cols = g.let(f"ops.range({i64(g, 0)}, {dim(g, x, -1)}, {i64(g, 1)}, 'i64')")
    cmp = "greater_equal" if int(g.a("upper")) else "less_equal"
    keep = g.let(f"ops.{cmp}(ops.subtract({cols}, {rows}), {k})")
    g.out(0, f"ops.select({keep}, {x}, {g.const(0, g.dtype(0))})")


@rule("eye_like", check=lambda n: None if rank_of(n) == 2 else Refusal("dynamic_shape", "eye_like needs a 2-D input"))
def _eye_like(g: "Gen", node: Node) -> None:
    x = g.x(0)
    out_t = g.em.types[g.out_dtype(0)]
    g.out(0, f"ops.eye({dim(g, x, 0)}, {dim(g, x, 1)}, {i64(g, int(g.a('k')))}, {g.lit(out_t)})")


# ----------------------------------------------------------------------------- indexing
_SCATTER_REDUCTION = {"none": "none", "add": "sum", "mul": "prod", "max": "max", "min": "min"}


@rule("scatter_elements")
def _scatter_elements(g: "Gen", node: Node) -> None:
    red = _SCATTER_REDUCTION[g.a("reduction")]
    g.out(0, f"ops.scatter_elements_update({g.x(0)}, {g.x(1)}, {g.x(2)}, {i64(g, int(g.a('axis')))}, "
             f"{g.lit(red)}, True)")


@rule("scatter_nd")
def _scatter_nd(g: "Gen", node: Node) -> None:
    red = _SCATTER_REDUCTION[g.a("reduction")]
    g.out(0, f"ops.scatter_nd_update({g.x(0)}, {g.x(1)}, {g.x(2)}, {g.lit(red)})")


@rule("one_hot")
def _one_hot(g: "Gen", node: Node) -> None:
    idx = as_i64(g, g.x(0), g.dtype(0))
    depth = scalar_i64(g, g.x(1), g.dtype(1))
    values = g.x(2)
    off = g.let(f"ops.gather({values}, {i64(g, 0)}, {i64(g, 0)})")
    on = g.let(f"ops.gather({values}, {i64(g, 1)}, {i64(g, 0)})")
    g.out(0, f"ops.one_hot({idx}, {depth}, {on}, {off}, {int(g.a('axis'))}, 'normalize')")


@rule("top_k")
def _top_k(g: "Gen", node: Node) -> None:
    k = scalar_i64(g, g.x(1), g.dtype(1))
    mode = "max" if int(g.a("largest")) else "min"
    t = g.let(f"ops.topk({g.x(0)}, {k}, {int(g.a('axis'))}, {g.lit(mode)}, 'value', 'i64', True)")
    g.outs(t)


def _arg(mode: str) -> Callable[["Gen", Node], None]:
    def lower(g: "Gen", node: Node) -> None:
        # the first (or last) index of the max/min along axis: TopK k=1, stable
        x, axis = g.x(0), int(g.a("axis"))
        last = bool(g.a("select_last_index"))
        if last:  # search the reversed axis, then map the index back: i = n - 1 - j
            x = g.let(f"ops.slice({x}, {i64(g, [-1])}, {i64(g, [np.iinfo(np.int64).min])}, {i64(g, [-1])}, "
                      f"{i64(g, [axis])})")
        t = g.let(f"ops.topk({x}, {i64(g, 1)}, {axis}, {g.lit(mode)}, 'value', 'i64', True)")
        idx = f"{t}.output(1)"
        if last:
            idx = g.let(f"ops.subtract(ops.subtract({dim(g, x, axis)}, {i64(g, 1)}), {idx})")
        if not int(g.a("keepdims")):
            idx = g.let(f"ops.squeeze({idx}, {i64(g, [axis])})")
        g.bind(0, idx)

    return lower


rule("arg_max")(_arg("max"))
rule("arg_min")(_arg("min"))


# ----------------------------------------------------------------------------- reductions
_REDUCE = {"reduce_sum": "reduce_sum", "reduce_mean": "reduce_mean", "reduce_prod": "reduce_prod",
           "reduce_max": "reduce_max", "reduce_min": "reduce_min", "reduce_l1": "reduce_l1",
           "reduce_l2": "reduce_l2"}


def _kept_dims_known(g: "Gen") -> bool:
    t1 = g.t(1)
    return g.t(0).rank is not None and t1.is_static and t1.rank == 1


def _kept_dims(g: "Gen", y: str, axes: str) -> str:
    """Dims of ``y`` (a keepdims reduction) at the axes not in ``axes``, as a tensor of static length.

    The kept axes are the r - k smallest keys of mask * r + i (mask = 1 on reduced axes):
    TopK gives them in increasing order, with a length OpenVINO knows at build time.
    """
    r, k = g.rank(0), int((g.t(1).shape or (0,))[0])
    ax = g.let(f"ops.floor_mod({axes}, {i64(g, r)})")
    mask = g.let(f"ops.scatter_elements_update({i64(g, np.zeros(r))}, {ax}, ops.broadcast({i64(g, 1)}, "
                 f"ops.shape_of({ax})), {i64(g, 0)})")
    key = g.let(f"ops.add(ops.multiply({mask}, {i64(g, r)}), {i64(g, np.arange(r))})")
    kept = g.let(f"ops.topk({key}, {i64(g, r - k)}, 0, 'min', 'value', 'i64').output(1)")
    return g.let(f"ops.gather(ops.shape_of({y}), {kept}, {i64(g, 0)})")


@rule(*_REDUCE)
def _reduce(g: "Gen", node: Node) -> None:
    x = g.x(0)
    fn = _REDUCE[node.op]
    is_bool = g.dtype(0) == "bool"
    if is_bool:  # max = any, min = all: reduce the 0/1 bytes
        x = g.let(f"ops.convert({x}, ov.Type.u8)")
    keep = bool(int(g.a("keepdims")))
    noop = bool(int(g.a("noop_with_empty_axes")))
    axes, c, t1 = g.x(1), g.cval(1), g.t(1)
    runtime_axes = axes is not None and c is None
    if axes is None or (c is not None and c.size == 0) or (t1.is_static and 0 in (t1.shape or ())):
        if noop:
            g.bind(0, g.x(0))
            return
        axes, runtime_axes = all_axes(g, 0), False
    elif runtime_axes:
        axes = as_i64(g, axes, g.dtype(1))
        if not noop and not (t1.is_static and t1.shape and t1.shape[0] > 0):
            # axes empty at run time means every axis: append range(rank) exactly then
            n = g.let(f"ops.reduce_prod(ops.shape_of({axes}), {i64(g, 0)}, False)")
            rk = g.let(f"ops.reshape(ops.shape_of(ops.shape_of({x})), {i64(g, np.zeros(0))}, False)")
            stop = g.let(f"ops.multiply(ops.convert(ops.equal({n}, {i64(g, 0)}), ov.Type.i64), {rk})")
            axes = g.let(f"ops.concat([{axes}, ops.range({i64(g, 0)}, {stop}, {i64(g, 1)}, 'i64')], 0)")
    shape = static_out(node)
    target = None
    if runtime_axes and not keep and (shape is not None or _kept_dims_known(g)):
        # runtime axes without keepdims give a dynamic rank (refused by the CPU plugin):
        # reduce with keepdims, then reshape to a shape of statically known length
        y = g.let(f"ops.{fn}({x}, {axes}, True)")
        target = i64(g, shape) if shape is not None else _kept_dims(g, y, axes)
        y = g.let(f"ops.reshape({y}, {target}, False)")
    else:
        y = g.let(f"ops.{fn}({x}, {axes}, {keep})")
    if fn in ("reduce_max", "reduce_min") and np.dtype(np_dtype(g.dtype(0))).kind == "f":
        # the CPU plugin's ReduceMax/Min start from the lowest/highest finite value: a set that
        # is empty or all -inf (+inf) must give -inf (+inf), as in ONNX
        detect = "detect_positive" if fn == "reduce_max" else "detect_negative"
        inf = g.const(-np.inf if fn == "reduce_max" else np.inf, g.dtype(0))
        edge = all_along(g, f"ops.is_inf({x}, {{{detect!r}: False}})", axes, keep if target is None else True)
        if target is not None:
            edge = g.let(f"ops.reshape({edge}, {target}, False)")
        y = g.let(f"ops.select({edge}, {inf}, {y})")
    if is_bool:
        g.out(0, f"ops.convert({y}, ov.Type.boolean)")
    else:
        g.bind(0, y)


# ----------------------------------------------------------------------------- center crop / pad
def _crop_pad_check(node: Node) -> Refusal | None:
    x = node.inputs[0]
    if x is None or not x.type.is_static or static_out(node) is None:
        return Refusal("dynamic_shape", "center_crop_pad needs static input and output shapes")
    return None


@rule("center_crop_pad", check=_crop_pad_check)
def _center_crop_pad(g: "Gen", node: Node) -> None:
    # per axis: crop a centered window (start rounded down) or pad zeros (the odd one at the end)
    shape = [int(d) for d in g.t(0).shape or ()]
    out = static_out(node) or []
    starts, stops, pb, pe = [], [], [], []
    for dim, target in zip(shape, out):
        start = (dim - target) // 2 if target < dim else 0
        starts.append(start)
        stops.append(start + min(dim, target))
        before = (target - dim) // 2 if target > dim else 0
        pb.append(before)
        pe.append(max(target - dim, 0) - before)
    x = g.x(0)
    if starts != [0] * len(shape) or stops != shape:
        x = g.let(f"ops.slice({x}, {i64(g, starts)}, {i64(g, stops)}, {i64(g, [1] * len(shape))})")
    if any(pb) or any(pe):
        x = g.let(f"ops.pad({x}, {i64(g, pb)}, {i64(g, pe)}, 'constant')")
    g.bind(0, x)
