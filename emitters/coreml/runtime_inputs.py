"""Core ML lowerings of ops whose axes, sizes, k, depth or slice bounds are fed at run time.

MIL takes these operands as constants (``reduce_*`` axes, ``expand_dims``/``squeeze`` axes,
``split`` sizes, ``topk`` k, ``cumsum`` axis, ``one_hot`` values, ``slice`` bounds); with a
static input shape and a static operand length the same result is computed from run-time
tensors: masks compared with ``range(rank)``, ``select``, ``argsort``, ``slice_by_size`` with
run-time begin/size, ``slice_by_index`` with run-time begin/end, ``reshape`` to a computed
shape. The rules in ``shape.py`` call these when the operand is not a constant; runtime-axes
reductions live in ``reductions.py``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node
from translator.compile.render import literal

from .mil import lit, mil_dtype, np_lit, static_shape

if TYPE_CHECKING:
    from .codegen import Gen


def runtime_axes_count(node: Node) -> int | None:
    """How many axes a run-time ``axes`` input holds (its static length), else None."""
    v = node.inputs[1] if len(node.inputs) > 1 else None
    shape = static_shape(v) if v is not None and not v.is_const else None
    return None if shape is None or len(shape) > 1 else int(np.prod(shape))


def _stepper(gen: Gen, node: Node) -> Callable[[str, str], str]:
    """``step(key, call)``: emit ``tmp = call, name=...)`` under a fresh temporary; returns it."""

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    return step


def _axes_hit(gen: Gen, node: Node, step: Callable[[str, str], str], n: int) -> str:
    """int32 [n]: 1 at each position the run-time axes (input 1, normalized mod ``n``) name."""
    ax = gen.var(node.inputs[1])
    if node.inputs[1].type.dtype != "int32":
        ax = step("axes_int", f"mb.cast(x={ax}, dtype='int32'")
    ax = step("axes_norm", "mb.mod(x=" + step("axes_pos", f"mb.add(x={ax}, y=np.int32({n})") + f", y=np.int32({n})")
    return step("hit", "mb.reduce_max(x=" + step("hit_int", "mb.cast(x=" + step(
        "eq", "mb.equal(x=" + step("axes_col", f"mb.expand_dims(x={ax}, axes=[-1]") +
        f", y=np.arange({n}, dtype=np.int32)") + ", dtype='int32'") + ", axes=[0], keep_dims=False")


def squeeze_runtime(gen: Gen, node: Node) -> None:
    """Run-time axes (a static count ``k``) the shape leaves ambiguous: a reshape to the dims
    not named, in order (sorting ``flag * rank + i`` puts them first)."""
    shape = list(static_shape(node.inputs[0]) or ())
    r, k = len(shape), runtime_axes_count(node) or 0

    if k == 0:  # no axes: nothing to insert or remove
        gen.emit(f"{gen.out(node)} = mb.identity(x={gen.var(node.inputs[0])}, name={gen.name(node)})")
        return

    step = _stepper(gen, node)
    hit = _axes_hit(gen, node, step, r)
    key = step("key", "mb.add(x=" + step("hit_rank", f"mb.mul(x={hit}, y=np.int32({r})") +
               f", y=np.arange({r}, dtype=np.int32)")
    kept = step("kept", "mb.slice_by_size(x=" + step("order", f"mb.argsort(x={key}, ascending=True") +
                f", begin=np.array([0], dtype=np.int32), size=[{r - k}]")
    dims = step("dims", f"mb.gather(x={np_lit(shape, 'int32')}, indices={kept}, axis=0")
    gen.emit(f"{gen.out(node)} = mb.reshape(x={gen.var(node.inputs[0])}, shape={dims}, name={gen.name(node)})")


def unsqueeze_runtime(gen: Gen, node: Node) -> None:
    """Run-time axes (a static count ``k``): a reshape to the shape with a 1 at each axis and
    the input's dims, in order, elsewhere (the ``j``-th free position takes input dim
    ``cumsum(free)[j] - 1``)."""
    shape = list(static_shape(node.inputs[0]) or ())
    k = runtime_axes_count(node) or 0
    big = len(shape) + k

    if k == 0:  # no axes: nothing to insert or remove
        gen.emit(f"{gen.out(node)} = mb.identity(x={gen.var(node.inputs[0])}, name={gen.name(node)})")
        return

    step = _stepper(gen, node)
    hit = _axes_hit(gen, node, step, big)
    free = step("free", f"mb.sub(x=np.int32(1), y={hit}")
    src = step("src", "mb.maximum(x=" + step("src_raw", "mb.sub(x=" + step("free_count", f"mb.cumsum(x={free}, axis=0") +
               ", y=np.int32(1)") + ", y=np.int32(0)")
    dims = step("dims", f"mb.gather(x={np_lit(shape + [1], 'int32')}, indices={src}, axis=0")
    new = step("new_shape", "mb.select(cond=" + step("is_axis", f"mb.cast(x={hit}, dtype='bool'") +
               f", a=np.int32(1), b={dims}")
    gen.emit(f"{gen.out(node)} = mb.reshape(x={gen.var(node.inputs[0])}, shape={new}, name={gen.name(node)})")


def split_runtime(gen: Gen, node: Node, axis: int) -> None:
    """Sizes fed at run time (MIL's split takes constant sizes): output ``j`` is the slice of
    ``sizes[j]`` elements along the axis from the exclusive cumulative sum of the sizes."""
    r = node.inputs[0].type.rank

    step = _stepper(gen, node)

    sizes = gen.var(node.inputs[1])
    if node.inputs[1].type.dtype != "int32":
        sizes = step("sizes_int", f"mb.cast(x={sizes}, dtype='int32'")
    starts = step("starts", f"mb.cumsum(x={sizes}, axis=0, exclusive=True")
    at = np_lit(np.arange(r) == axis, "bool")
    for j, v in enumerate(node.outputs):
        b = step(f"begin{j}", f"mb.select(cond={at}, a=" + step(
            f"start{j}", f"mb.slice_by_size(x={starts}, begin=np.array([{j}], dtype=np.int32), size=[1]") +
            f", b={np_lit([0] * r, 'int32')}")
        n = step(f"size{j}", f"mb.select(cond={at}, a=" + step(
            f"len{j}", f"mb.slice_by_size(x={sizes}, begin=np.array([{j}], dtype=np.int32), size=[1]") +
            f", b={np_lit([-1] * r, 'int32')}")
        gen.emit(f"{gen.var(v)} = mb.slice_by_size(x={gen.var(node.inputs[0])}, begin={b}, size={n}, "
                 f"name={gen.name(node, j)})")


def top_k_runtime(gen: Gen, node: Node) -> None:
    """k fed at run time (MIL's topk takes a constant k): the first k of a stable argsort
    along the axis (ties: the lower index first, as ONNX says), and the values gathered there."""
    r = node.inputs[0].type.rank
    axis = norm_axis(int(gen.attr(node, "axis")), r)
    asc = not bool(int(gen.attr(node, "largest")))
    x = gen.var(node.inputs[0])

    step = _stepper(gen, node)

    k = gen.var(node.inputs[1])
    if node.inputs[1].type.dtype != "int32":
        k = step("k_int", f"mb.cast(x={k}, dtype='int32'")
    k = step("k", f"mb.reshape(x={k}, shape=[1]")
    at_axis = np.arange(r) == axis
    size = step("size", f"mb.select(cond={np_lit(at_axis, 'bool')}, a={k}, b={np_lit([-1] * r, 'int32')}")
    order = step("order", f"mb.argsort(x={x}, axis={axis}, ascending={asc}")
    idx = step("indices", f"mb.slice_by_size(x={order}, begin={np_lit([0] * r, 'int32')}, size={size}")
    gen.emit(f"{gen.out(node)} = mb.gather_along_axis(x={x}, indices={idx}, axis={axis}, name={gen.name(node)})")
    dt = node.outputs[1].type.dtype or "int32"
    if dt == "int32":
        gen.emit(f"{gen.out(node, 1)} = mb.identity(x={idx}, name={gen.name(node, 1)})")
    else:
        gen.emit(f"{gen.out(node, 1)} = mb.cast(x={idx}, dtype={literal(mil_dtype(dt))}, name={gen.name(node, 1)})")


def one_hot_runtime(gen: Gen, node: Node) -> None:
    """Depth or values fed at run time: ``select(index == range(depth), on, off)``, the range
    laid along the output's axis (a negative index counts from ``depth``; any index outside
    ``[-depth, depth)`` matches nothing, all off, as ONNX says)."""

    step = _stepper(gen, node)

    def scalar(v: Any, key: str) -> str:
        x = gen.var(v)
        if v.type.dtype != "int32":
            x = step(f"{key}_int", f"mb.cast(x={x}, dtype='int32'")
        return step(key, "mb.gather(x=" + step(f"{key}_1d", f"mb.reshape(x={x}, shape=[1]") + ", indices=0, axis=0")

    r = node.inputs[0].type.rank
    ax = norm_axis(int(gen.attr(node, "axis")), r + 1)
    d = scalar(node.inputs[1], "depth")
    idx = gen.var(node.inputs[0])
    if node.inputs[0].type.dtype != "int32":
        idx = step("index_int", f"mb.cast(x={idx}, dtype='int32'")
    idx = step("index", "mb.select(cond=" + step("negative", f"mb.less(x={idx}, y=np.int32(0)") +
               ", a=" + step("wrapped", f"mb.add(x={idx}, y={d}") + f", b={idx}")
    idx = step("index_col", f"mb.expand_dims(x={idx}, axes=[{ax}]")
    shape = [1] * (r + 1)
    shape[ax] = -1
    ar = step("range", "mb.reshape(x=" + step("range_1d", f"mb.range_1d(start=np.int32(0), end={d}, step=np.int32(1)") +
              f", shape={lit(shape)}")
    hot = step("hot", f"mb.equal(x={idx}, y={ar}")
    vals = gen.var(node.inputs[2])
    on = step("on", f"mb.slice_by_size(x={vals}, begin=np.array([1], dtype=np.int32), size=[1]")
    off = step("off", f"mb.slice_by_size(x={vals}, begin=np.array([0], dtype=np.int32), size=[1]")
    # MIL's select takes its result shape from a and b: ``on`` spread over the grid first
    dt = node.outputs[0].type.dtype or "float32"
    zero = step("zeros", f"mb.fill_like(ref_tensor={hot}, value={np_lit(0, dt)}")
    on = step("on_grid", f"mb.add(x={zero}, y={on}")
    gen.emit(f"{gen.out(node)} = mb.select(cond={hot}, a={on}, b={off}, name={gen.name(node)})")


def cum_sum_runtime(gen: Gen, node: Node) -> None:
    """A run-time axis (MIL's cumsum takes a constant one): every axis's cumsum, the one
    asked ``select``ed."""
    r = node.inputs[0].type.rank
    t, tn = gen.tmp(node, "axis_int")
    ax = gen.var(node.inputs[1])
    if node.inputs[1].type.dtype != "int32":
        gen.emit(f"{t} = mb.cast(x={ax}, dtype='int32', name={tn})")
        ax = t
    p, pn = gen.tmp(node, "axis_pos")
    gen.emit(f"{p} = mb.add(x={ax}, y=np.int32({r}), name={pn})")
    t, tn = gen.tmp(node, "axis")
    gen.emit(f"{t} = mb.mod(x={p}, y=np.int32({r}), name={tn})")
    acc = None
    for i in range(r):
        c, cn = gen.tmp(node, f"cumsum{i}")
        gen.emit(f"{c} = mb.cumsum(x={gen.var(node.inputs[0])}, axis={i}, exclusive={bool(gen.attr(node, 'exclusive'))}, "
                 f"reverse={bool(gen.attr(node, 'reverse'))}, name={cn})")
        if acc is None:
            acc = c
            continue
        last = i == r - 1
        q, qn = gen.tmp(node, f"is{i}")
        gen.emit(f"{q} = mb.equal(x={t}, y=np.int32({i}), name={qn})")
        v, vn = (gen.out(node), gen.name(node)) if last else gen.tmp(node, f"upto{i}")
        gen.emit(f"{v} = mb.select(cond={q}, a={c}, b={acc}, name={vn})")
        acc = v
    if r == 1:
        gen.emit(f"{gen.out(node)} = mb.identity(x={acc}, name={gen.name(node)})")


def slice_runtime_why(node: Node) -> str | None:
    """Why ``slice_runtime`` cannot take a slice whose starts or ends are fed at run time
    (None when it can): it needs a known input rank, constant axes and steps, positive
    steps, and starts/ends of a static length (one per axis)."""
    if node.inputs[0].type.shape is None:
        return "run-time slice bounds need a known input rank"
    ins = list(node.inputs) + [None] * (5 - len(node.inputs))
    for i, what in ((3, "axes"), (4, "steps")):
        if ins[i] is not None and not ins[i].is_const:
            return f"run-time slice bounds need constant {what}"
    k = None
    for i in (1, 2):
        s = static_shape(ins[i])
        if s is None or len(s) != 1 or (k is not None and s[0] != k):
            return "run-time starts/ends need one static length"
        k = s[0]
    axes = [int(a) for a in np.asarray(ins[3].const).ravel()] if ins[3] is not None else list(range(k or 0))
    steps = [int(a) for a in np.asarray(ins[4].const).ravel()] if ins[4] is not None else [1] * (k or 0)
    if len(axes) != k or len(steps) != k:
        return "starts, ends, axes and steps differ in length"
    if any(st <= 0 for st in steps):
        return "run-time slice bounds with a negative step are not lowered"
    return None


def slice_runtime(gen: Gen, node: Node) -> None:
    """Starts or ends fed at run time (a loop body slicing at its iteration number): ONNX's
    bounds for a positive step computed in the graph on the full rank (a negative bound
    counts from the dim, then clamped to ``[0, dim]``; an end before its start gives an
    empty slice), then one ``slice_by_index`` with run-time begin and end. Over symbolic dims
    the dims are the input's run-time shape."""
    shape = list(node.inputs[0].type.shape or ())
    r = len(shape)
    ins = list(node.inputs) + [None] * (5 - len(node.inputs))
    k = (static_shape(ins[1]) or (0,))[0]
    axes = [norm_axis(int(a), r) for a in np.asarray(ins[3].const).ravel()] if ins[3] is not None else list(range(k))
    steps = [int(a) for a in np.asarray(ins[4].const).ravel()] if ins[4] is not None else [1] * k
    at = [0] * r  # the position in starts/ends of each sliced axis
    sliced = [False] * r
    stride = [1] * r
    for j, (a, st) in enumerate(zip(axes, steps)):
        at[a], sliced[a], stride[a] = j, True, st
    step = _stepper(gen, node)
    static = all(isinstance(d, int) and d >= 0 for d in shape)
    dims = np_lit(shape, "int32") if static else step("dims", f"mb.shape(x={gen.var(node.inputs[0])}")

    def bound(i: int, key: str, other: list[int] | None) -> str:
        v = gen.var(ins[i])
        if ins[i].type.dtype != "int32":
            v = step(f"{key}_int", f"mb.cast(x={v}, dtype='int32'")
        rest = np_lit(other, "int32") if other is not None else dims
        full = step(f"{key}_full", f"mb.select(cond={np_lit(sliced, 'bool')}, a=" + step(
            f"{key}_spread", f"mb.gather(x={v}, indices={np_lit(at, 'int32')}, axis=0") + f", b={rest}")
        wrapped = step(f"{key}_wrapped", "mb.select(cond=" + step(f"{key}_negative", f"mb.less(x={full}, y=np.int32(0)") +
                       ", a=" + step(f"{key}_from_end", f"mb.add(x={full}, y={dims}") + f", b={full}")
        return step(key, "mb.minimum(x=" + step(f"{key}_low", f"mb.maximum(x={wrapped}, y=np.int32(0)") + f", y={dims}")

    begin = bound(1, "begin", [0] * r)
    end = step("end_kept", "mb.maximum(x=" + bound(2, "end", shape if static else None) + f", y={begin}")
    gen.emit(f"{gen.out(node)} = mb.slice_by_index(x={gen.var(node.inputs[0])}, begin={begin}, end={end}, "
             f"stride={lit(stride)}, name={gen.name(node)})")


__all__ = ["runtime_axes_count", "squeeze_runtime", "unsqueeze_runtime", "split_runtime", "top_k_runtime",
           "one_hot_runtime", "cum_sum_runtime", "slice_runtime", "slice_runtime_why"]
