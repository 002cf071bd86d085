"""Core ML rules: shapes, indexing, einsum (reductions: ``reductions.py``; operands fed at run
time: ``runtime_inputs.py``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.table.dtypes import norm_axis
from translator.table.errors import Unsupported
from translator.ir.graph import Node, Value
from translator.compile.einsum import terms as einsum_terms
from translator.compile.render import literal

from .mil import all_of, const_of, lit, need_const, need_rank, np_dtype, np_lit, static_shape
from .registry import NAME, Refusal, rule
from .runtime_inputs import (_stepper, cum_sum_runtime, one_hot_runtime, runtime_axes_count, slice_runtime, slice_runtime_why,
                             split_runtime, squeeze_runtime, top_k_runtime, unsqueeze_runtime)

if TYPE_CHECKING:
    from .codegen import Gen


# ----------------------------------------------------------------------------- shape manipulation
@rule("transpose", check=need_rank(0))
def _transpose(gen: Gen, node: Node) -> None:
    r = node.inputs[0].type.rank
    perm = gen.attr(node, "perm")
    perm = list(range(r))[::-1] if perm is None else [norm_axis(p, r) for p in perm]
    gen.emit(f"{gen.out(node)} = mb.transpose(x={gen.var(node.inputs[0])}, perm={lit(perm)}, name={gen.name(node)})")


def _reshape_target(node: Node) -> list[int] | None:
    out = static_shape(node.outputs[0])
    if out is not None:
        return list(out)
    c = const_of(node.inputs[1])
    shape = static_shape(node.inputs[0])
    if c is None:
        return None
    c = [int(d) for d in c]
    if not int(node.attrs.get("allowzero", 0)):
        if 0 in c and shape is None:
            return None
        c = [shape[i] if d == 0 else d for i, d in enumerate(c)]
    return c


def _copied_dims(gen: Gen, node: Node, x: str) -> str | None:
    """A constant ONNX shape whose 0s copy symbolic input dims (MIL reads 0 as a size of 0):
    with one unknown left it is written with -1 there, else built at run time from the input's
    shape; None when the shape is not such a constant."""
    c, shape = const_of(node.inputs[1]), node.inputs[0].type.shape
    if c is None or shape is None or int(node.attrs.get("allowzero", 0)):
        return None
    c = [int(d) for d in np.asarray(c).reshape(-1)]
    if 0 not in c or any(d == 0 and i >= len(shape) for i, d in enumerate(c)):
        return None
    resolved = [shape[i] if d == 0 else d for i, d in enumerate(c)]
    unknown = [i for i, d in enumerate(resolved) if not isinstance(d, int) or d == -1]
    if len(unknown) == 1:
        return lit([-1 if i == unknown[0] else d for i, d in enumerate(resolved)])
    dims, dn = gen.tmp(node, "in_shape")
    gen.emit(f"{dims} = mb.shape(x={x}, name={dn})")
    parts = []
    for i, d in enumerate(c):
        if d == 0 and not isinstance(shape[i], int):
            t, tn = gen.tmp(node, f"dim{i}")
            gen.emit(f"{t} = mb.slice_by_index(x={dims}, begin=[{i}], end=[{i + 1}], name={tn})")
            parts.append(t)
        else:
            parts.append(gen.const(node, f"dim{i}", np.array([resolved[i]], np.int32)))
    t, tn = gen.tmp(node, "shape")
    gen.emit(f"{t} = mb.concat(values=[{', '.join(parts)}], axis=0, name={tn})")
    return t


def _may_hold_zero(v: Value, depth: int = 0) -> bool:
    """Whether a shape computed at run time is assembled from a constant 0 (paddle2onnx and
    tf2onnx concatenate ``[0, ...]`` with sizes read from ``Shape``): through concat, cast and
    rank-only ops down to the constants."""
    c = const_of(v)
    if c is not None:
        return bool(np.any(np.asarray(c) == 0))
    p = v.producer
    if p is None or depth > 16:
        return False
    if p.op == "concat":
        return any(x is not None and _may_hold_zero(x, depth + 1) for x in p.inputs)
    if p.op in ("cast", "identity", "reshape", "squeeze", "unsqueeze", "flatten"):
        return _may_hold_zero(p.inputs[0], depth + 1)
    return False


def _runtime_zeros_copied(gen: Gen, node: Node, x: str) -> str:
    """A shape computed at run time under ONNX's ``allowzero=0``: a 0 copies the input's dim
    at that position (MIL reads 0 as a size of 0), so 0s are replaced by the input's sizes:
    ``select(shape == 0, shape(x)[:n], shape)``."""
    shape_in, x_in = node.inputs[1], node.inputs[0]
    n, r = (shape_in.type.shape or [None])[0], x_in.type.rank
    s = gen.var(shape_in)
    if not isinstance(n, int) or r is None or int(node.attrs.get("allowzero", 0)) or not _may_hold_zero(shape_in):
        return s
    step = _stepper(gen, node)
    if shape_in.type.dtype != "int32":
        s = step("shape_i32", f"mb.cast(x={s}, dtype='int32'")
    dims = step("in_dims", f"mb.shape(x={x}")
    if n < r:
        dims = step("in_dims_head", f"mb.slice_by_index(x={dims}, begin=[0], end=[{n}]")
    elif n > r:  # positions past the input's rank cannot copy: keep the shape's own values there
        tail = step("shape_tail", f"mb.slice_by_index(x={s}, begin=[{r}], end=[{n}]")
        dims = step("in_dims_padded", f"mb.concat(values=[{dims}, {tail}], axis=0")
    zero = step("copies", f"mb.equal(x={s}, y=np.int32(0)")
    return step("shape_copied", f"mb.select(cond={zero}, a={dims}, b={s}")


@rule("reshape")
def _reshape(gen: Gen, node: Node) -> None:
    target = _reshape_target(node)
    x = gen.var(node.inputs[0])
    copied = None if target is not None else _copied_dims(gen, node, x)
    if target is not None:
        shape = lit(target) if target else "np.zeros((0,), dtype=np.int32)"  # [] would be a float tensor in MIL
        gen.emit(f"{gen.out(node)} = mb.reshape(x={x}, shape={shape}, name={gen.name(node)})")
    elif copied is not None:
        gen.emit(f"{gen.out(node)} = mb.reshape(x={x}, shape={copied}, name={gen.name(node)})")
    else:
        shape = _runtime_zeros_copied(gen, node, x)
        gen.emit(f"{gen.out(node)} = mb.reshape(x={x}, shape={shape}, name={gen.name(node)})")


@rule("flatten", check=need_rank(0))
def _flatten(gen: Gen, node: Node) -> None:
    out = static_shape(node.outputs[0])
    x = gen.var(node.inputs[0])
    if out is not None:
        gen.emit(f"{gen.out(node)} = mb.reshape(x={x}, shape={lit(list(out))}, name={gen.name(node)})")
    else:
        axis = norm_axis(int(gen.attr(node, "axis")), node.inputs[0].type.rank)
        gen.emit(f"{gen.out(node)} = mb.flatten2d(x={x}, axis={lit(axis)}, name={gen.name(node)})")


def _axes_input(node: Node, idx: int) -> list[int] | None:
    v = node.inputs[idx] if idx < len(node.inputs) else None
    c = const_of(v)
    return None if c is None else [int(a) for a in np.asarray(c).reshape(-1)]


def _squeeze_check(node: Node) -> Refusal | None:
    """Run-time axes of a static shape: as many as its 1-dims are those dims, else
    ``squeeze_runtime``."""
    why = need_rank(0)(node)
    k, shape = runtime_axes_count(node), static_shape(node.inputs[0])
    if why is None and k is not None and shape is None:
        return Refusal("requires_constant_input", "run-time squeeze axes need a static input shape")
    no_axes = len(node.inputs) < 2 or node.inputs[1] is None
    if why is None and no_axes and shape is None:  # every 1-dim goes, symbolic ones too when they are 1
        return Refusal("dynamic_shape", "a squeeze without axes over symbolic dims: its rank depends on the sizes")
    return why or (None if k is not None else need_const(1)(node))


@rule("squeeze", check=_squeeze_check)
def _squeeze(gen: Gen, node: Node) -> None:
    r = node.inputs[0].type.rank
    axes = _axes_input(node, 1)
    x = gen.var(node.inputs[0])
    k = runtime_axes_count(node) if axes is None else None
    ones = [i for i, d in enumerate(static_shape(node.inputs[0]) or ()) if d == 1]
    if k is not None and (len(ones) != k or k == 0):
        squeeze_runtime(gen, node)
        return
    if k is not None:  # as many run-time axes as 1-dims: those dims
        axes = ones
    if axes is None:
        shape = node.inputs[0].type.shape
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = sorted(norm_axis(a, r) for a in axes)
    shape = node.inputs[0].type.shape
    if not axes:
        gen.emit(f"{gen.out(node)} = mb.identity(x={x}, name={gen.name(node)})")
    elif any(not isinstance(d, int) for d in shape):
        # over symbolic dims MIL's squeeze keeps a dim it cannot prove is 1 (a symbolic dim that is
        # 1 at run time, as ONNX requires, or one the graph knows is 1 but MIL lost behind a
        # run-time reshape), so the result is a reshape to the other dims (read at run time)
        kept = [i for i in range(r) if i not in axes]
        unknown = [i for i in kept if not isinstance(shape[i], int)]
        if len(unknown) <= 1:
            target = lit([-1 if i in unknown else shape[i] for i in kept]) if kept else "np.zeros((0,), dtype=np.int32)"
        else:
            step = _stepper(gen, node)
            target = step("kept", f"mb.gather(x={step('in_shape', f'mb.shape(x={x}')}, indices={lit(kept)}, axis=0")
        gen.emit(f"{gen.out(node)} = mb.reshape(x={x}, shape={target}, name={gen.name(node)})")
    else:
        gen.emit(f"{gen.out(node)} = mb.squeeze(x={x}, axes={lit(axes)}, name={gen.name(node)})")


def _unsqueeze_check(node: Node) -> Refusal | None:
    if runtime_axes_count(node) is not None and static_shape(node.inputs[0]) is not None:
        return None
    return all_of(need_const(1), need_rank(0))(node)


@rule("unsqueeze", check=_unsqueeze_check)
def _unsqueeze(gen: Gen, node: Node) -> None:
    if _axes_input(node, 1) is None:
        unsqueeze_runtime(gen, node)
        return
    axes = _axes_input(node, 1) or []
    r = node.inputs[0].type.rank + len(axes)
    axes = sorted(norm_axis(a, r) for a in axes)
    gen.emit(f"{gen.out(node)} = mb.expand_dims(x={gen.var(node.inputs[0])}, axes={lit(axes)}, name={gen.name(node)})")


@rule("concat", check=need_rank(0))
def _concat(gen: Gen, node: Node) -> None:
    ins = [v for v in node.inputs if v is not None]
    r = ins[0].type.rank
    axis = norm_axis(int(gen.attr(node, "axis")), r)
    vals = "[" + ", ".join(gen.var(v) for v in ins) + "]"
    gen.emit(f"{gen.out(node)} = mb.concat(values={vals}, axis={lit(axis)}, interleave=False, name={gen.name(node)})")


@rule("expand")
def _expand(gen: Gen, node: Node) -> None:
    """Static shapes: reshape + tile. Otherwise ONNX's bidirectional broadcast made explicit:
    x * fill(shape, 1) (x OR fill(shape, False) for bool), which MIL broadcasts like numpy."""
    src, out = static_shape(node.inputs[0]), static_shape(node.outputs[0])
    x = gen.var(node.inputs[0])
    if src is not None and out is not None:
        padded = (1,) * (len(out) - len(src)) + src
        if padded != src:
            t, tn = gen.tmp(node, "rank")
            gen.emit(f"{t} = mb.reshape(x={x}, shape={lit(list(padded))}, name={tn})")
            x = t
        reps = [o // p if p else 1 for o, p in zip(out, padded)]
        if all(r == 1 for r in reps):
            gen.emit(f"{gen.out(node)} = mb.identity(x={x}, name={gen.name(node)})")
        else:
            gen.emit(f"{gen.out(node)} = mb.tile(x={x}, reps={lit(reps)}, name={gen.name(node)})")
        return
    dt = node.inputs[0].type.dtype
    shape = _axes_input(node, 1)
    s = lit(shape) if shape is not None else gen.var(node.inputs[1])
    f, fn = gen.tmp(node, "ones")
    one, op = (np_lit(False, dt), "logical_or") if dt == "bool" else (np_lit(1, dt), "mul")
    gen.emit(f"{f} = mb.fill(shape={s}, value={one}, name={fn})")
    gen.emit(f"{gen.out(node)} = mb.{op}(x={x}, y={f}, name={gen.name(node)})")


@rule("tile")
def _tile(gen: Gen, node: Node) -> None:
    reps = _axes_input(node, 1)
    r = gen.var(node.inputs[1]) if reps is None else lit(reps)
    gen.emit(f"{gen.out(node)} = mb.tile(x={gen.var(node.inputs[0])}, reps={r}, name={gen.name(node)})")


def _split_check(node: Node) -> Refusal | None:
    runtime = len(node.inputs) > 1 and node.inputs[1] is not None and not node.inputs[1].is_const
    why = need_rank(0)(node) if runtime else need_const(1)(node) or need_rank(0)(node)
    if why:
        return why
    if len(node.inputs) < 2 or node.inputs[1] is None:
        # an even split needs the size of the split axis only: the other dims may be symbolic
        # (the dynamo exporter splits q, k, v along a static channel axis of a [batch, seq, 3C])
        shape = node.inputs[0].type.shape
        axis = norm_axis(int(node.attrs.get("axis", 0)), len(shape))
        if not isinstance(shape[axis], int):
            return Refusal("dynamic_shape", "an even split of a symbolic dim needs its size")
    return None


@rule("split", check=_split_check)
def _split(gen: Gen, node: Node) -> None:
    x = node.inputs[0]
    r = x.type.rank
    axis = norm_axis(int(gen.attr(node, "axis")), r)
    sizes = _axes_input(node, 1)
    n = len(node.outputs)
    if sizes is None and len(node.inputs) > 1 and node.inputs[1] is not None:
        split_runtime(gen, node, axis)
        return
    if sizes is None:
        dim = x.type.shape[axis]
        per = -(-dim // n)
        sizes = [min(per, dim - i * per) for i in range(n)]
    outs = ", ".join(gen.var(v) for v in node.outputs)
    if n == 1:
        gen.emit(f"{outs} = mb.identity(x={gen.var(x)}, name={gen.name(node)})")
        return
    gen.emit(f"{outs} = mb.split(x={gen.var(x)}, split_sizes={lit(sizes)}, axis={lit(axis)}, name={gen.name(node)})")


def _runtime_bounds(node: Node) -> bool:
    return any(i < len(node.inputs) and node.inputs[i] is not None and not node.inputs[i].is_const for i in (1, 2))


def _slice_check(node: Node) -> Refusal | None:
    if node.inputs[0].type.rank is None:
        return Refusal("dynamic_shape", "slice needs an input of known rank")
    if _runtime_bounds(node):  # starts/ends fed at run time: slice_runtime, when it applies
        why = slice_runtime_why(node)
        code = "dynamic_shape" if static_shape(node.inputs[0]) is None else "requires_constant_input"
        return None if why is None else Refusal(code, why)
    return need_const(1, 2, 3, 4)(node)


@rule("slice", check=_slice_check)
def _slice(gen: Gen, node: Node) -> None:
    if _runtime_bounds(node):
        slice_runtime(gen, node)
        return
    shape = static_shape(node.inputs[0])
    if shape is None:
        _slice_symbolic(gen, node)
        return
    r = len(shape)
    starts = _axes_input(node, 1)
    ends = _axes_input(node, 2)
    axes = _axes_input(node, 3) if len(node.inputs) > 3 and node.inputs[3] is not None else list(range(len(starts)))
    steps = _axes_input(node, 4) if len(node.inputs) > 4 and node.inputs[4] is not None else [1] * len(starts)
    begin, end, stride = [0] * r, list(shape), [1] * r
    bmask, emask = [True] * r, [True] * r
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = norm_axis(a, r)
        dim = shape[a]
        # python slice semantics (ONNX clamps like Python): resolve to explicit indices
        idx = range(dim)[slice(s, e, st)]
        stride[a] = st
        if len(idx) == 0:
            begin[a], end[a], bmask[a], emask[a] = 0, 0, False, False
            stride[a] = 1
            continue
        first, last = idx[0], idx[-1]
        begin[a], bmask[a] = first, False
        nxt = last + st
        if nxt < 0 or nxt >= dim:
            emask[a] = True
            end[a] = 0
        else:
            end[a], emask[a] = nxt, False
    gen.emit(f"{gen.out(node)} = mb.slice_by_index(x={gen.var(node.inputs[0])}, begin={lit(begin)}, end={lit(end)}, "
             f"stride={lit(stride)}, begin_mask={lit(bmask)}, end_mask={lit(emask)}, name={gen.name(node)})")


_I32 = (-(1 << 31), (1 << 31) - 1)


def _slice_symbolic(gen: Gen, node: Node) -> None:
    """Constant bounds over a shape with symbolic dims: slice_by_index indexes like Python
    (negative counts from the end, out-of-range bounds clamp), which is ONNX Slice's rule, so
    the bounds go in as given, clamped to int32 (no dim here comes near 2^31)."""
    r = node.inputs[0].type.rank
    starts, ends = _axes_input(node, 1), _axes_input(node, 2)
    axes = _axes_input(node, 3) if len(node.inputs) > 3 and node.inputs[3] is not None else list(range(len(starts)))
    steps = _axes_input(node, 4) if len(node.inputs) > 4 and node.inputs[4] is not None else [1] * len(starts)
    begin, end, stride = [0] * r, [0] * r, [1] * r
    bmask, emask = [True] * r, [True] * r
    shape = node.inputs[0].type.shape
    for st, e, a, step in zip(starts, ends, axes, steps):
        a = norm_axis(a, r)
        st, e, step = int(st), int(e), int(step)
        stride[a] = step
        dim = shape[a]
        if isinstance(dim, int) and dim >= 0:  # a static axis: the explicit indices, as ``_slice``
            idx = range(dim)[slice(st, e, step)]
            if not idx:
                begin[a], end[a], bmask[a], emask[a], stride[a] = 0, 0, False, False, 1
                continue
            begin[a], bmask[a] = idx[0], False
            nxt = idx[-1] + step
            end[a], emask[a] = (0, True) if nxt < 0 or nxt >= dim else (nxt, False)
            continue
        # a symbolic axis: a bound past the end it walks towards is the end itself (a mask): MIL's
        # shape inference clamps a negative stride's far bound one short (a reversed sequence
        # typed one step shorter than it runs)
        begin[a], end[a] = (min(max(v, _I32[0]), _I32[1]) for v in (st, e))
        far_end = e >= _I32[1] if step > 0 else e <= _I32[0]
        far_begin = st <= _I32[0] if step > 0 else st >= _I32[1]
        bmask[a], emask[a] = far_begin, far_end
        begin[a], end[a] = (0 if far_begin else begin[a]), (0 if far_end else end[a])
    gen.emit(f"{gen.out(node)} = mb.slice_by_index(x={gen.var(node.inputs[0])}, begin={lit(begin)}, end={lit(end)}, "
             f"stride={lit(stride)}, begin_mask={lit(bmask)}, end_mask={lit(emask)}, name={gen.name(node)})")


@rule("gather", check=need_rank(0))
def _gather(gen: Gen, node: Node) -> None:
    axis = norm_axis(int(gen.attr(node, "axis")), node.inputs[0].type.rank)
    gen.emit(f"{gen.out(node)} = mb.gather(x={gen.var(node.inputs[0])}, indices={gen.var(node.inputs[1])}, "
             f"axis={lit(axis)}, validate_indices=False, name={gen.name(node)})")


@rule("gather_elements", check=need_rank(0))
def _gather_elements(gen: Gen, node: Node) -> None:
    axis = norm_axis(int(gen.attr(node, "axis")), node.inputs[0].type.rank)
    gen.emit(f"{gen.out(node)} = mb.gather_along_axis(x={gen.var(node.inputs[0])}, indices={gen.var(node.inputs[1])}, "
             f"axis={lit(axis)}, validate_indices=False, name={gen.name(node)})")


@rule("gather_nd")
def _gather_nd(gen: Gen, node: Node) -> None:
    gen.emit(f"{gen.out(node)} = mb.gather_nd(x={gen.var(node.inputs[0])}, indices={gen.var(node.inputs[1])}, "
             f"batch_dims={lit(int(gen.attr(node, 'batch_dims')))}, validate_indices=False, name={gen.name(node)})")


_SCATTER_MODE = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@rule("scatter_elements", check=need_rank(0))
def _scatter_elements(gen: Gen, node: Node) -> None:
    axis = norm_axis(int(gen.attr(node, "axis")), node.inputs[0].type.rank)
    mode = _SCATTER_MODE[gen.attr(node, "reduction")]
    gen.emit(f"{gen.out(node)} = mb.scatter_along_axis(data={gen.var(node.inputs[0])}, indices={gen.var(node.inputs[1])}, "
             f"updates={gen.var(node.inputs[2])}, axis={lit(axis)}, mode={literal(mode)}, validate_indices=False, "
             f"name={gen.name(node)})")


@rule("scatter_nd")
def _scatter_nd(gen: Gen, node: Node) -> None:
    mode = _SCATTER_MODE[gen.attr(node, "reduction")]
    gen.emit(f"{gen.out(node)} = mb.scatter_nd(data={gen.var(node.inputs[0])}, indices={gen.var(node.inputs[1])}, "
             f"updates={gen.var(node.inputs[2])}, mode={literal(mode)}, validate_indices=False, name={gen.name(node)})")


def _pad_check(node: Node) -> Refusal | None:
    why = need_const(2, 3)(node) or need_rank(0)(node)
    if why:
        return why
    if not node.inputs[1].is_const and (node.attrs.get("mode", "constant") != "constant"
                                        or (len(node.inputs) > 3 and node.inputs[3] is not None)):
        return Refusal("requires_constant_input", "runtime pads are for constant mode over every axis")
    if node.attrs.get("mode", "constant") not in ("constant", "reflect", "edge"):
        return Refusal("unsupported_attribute_value", f"pad mode {node.attrs.get('mode')!r}")
    return None


@rule("pad", check=_pad_check)
def _pad(gen: Gen, node: Node) -> None:
    x = node.inputs[0]
    r = x.type.rank
    pads = _axes_input(node, 1)
    if pads is None:  # runtime pads [b0.., e0..] -> MIL's [b0, e0, b1, e1, ...]
        cv = const_of(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] is not None else None
        val = float(np.asarray(cv).reshape(-1)[0]) if cv is not None and np.asarray(cv).size else 0.0
        p2, p2n = gen.tmp(node, "pads2")
        gen.emit(f"{p2} = mb.reshape(x={gen.var(node.inputs[1])}, shape=[2, {r}], name={p2n})")
        pt, ptn = gen.tmp(node, "padsT")
        gen.emit(f"{pt} = mb.transpose(x={p2}, perm=[1, 0], name={ptn})")
        pf, pfn = gen.tmp(node, "pads")
        gen.emit(f"{pf} = mb.reshape(x={pt}, shape=[{2 * r}], name={pfn})")
        gen.emit(f"{gen.out(node)} = mb.pad(x={gen.var(x)}, pad={pf}, mode='constant', "
                 f"constant_val={np_lit(val, x.type.dtype)}, name={gen.name(node)})")
        return
    axes = _axes_input(node, 3) if len(node.inputs) > 3 and node.inputs[3] is not None else list(range(r))
    full = [0] * (2 * r)
    for k, a in enumerate(axes):
        a = norm_axis(a, r)
        full[2 * a], full[2 * a + 1] = pads[k], pads[k + len(axes)]
    mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}[gen.attr(node, "mode")]
    cv = const_of(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] is not None else None
    val = float(np.asarray(cv).reshape(-1)[0]) if cv is not None and np.asarray(cv).size else 0.0
    extra = f", constant_val={np_lit(val, x.type.dtype)}" if mode == "constant" else ""
    if mode != "constant":  # MIL pads reflect/replicate on trailing dims only: drop leading zero pairs
        while len(full) > 2 and full[0] == 0 and full[1] == 0:
            full = full[2:]
    gen.emit(f"{gen.out(node)} = mb.pad(x={gen.var(x)}, pad={lit(full)}, mode={literal(mode)}{extra}, name={gen.name(node)})")


@rule("shape", check=need_rank(0))
def _shape(gen: Gen, node: Node) -> None:
    r = node.inputs[0].type.rank
    start, end = gen.attr(node, "start"), gen.attr(node, "end")
    # ONNX clamps start and end into [0, rank] (after adding rank to a negative one)
    start = min(max(int(start or 0) + (r if int(start or 0) < 0 else 0), 0), r)
    end = r if end is None else min(max(int(end) + (r if int(end) < 0 else 0), 0), r)
    full = start == 0 and end == r
    var, nm = (gen.out(node), gen.name(node)) if full else gen.tmp(node, "full")
    gen.emit(f"{var} = mb.shape(x={gen.var(node.inputs[0])}, name={nm})")
    if not full:
        gen.emit(f"{gen.out(node)} = mb.slice_by_index(x={var}, begin={lit([start])}, end={lit([max(start, end)])}, "
                 f"name={gen.name(node)})")


@rule("constant_of_shape")
def _constant_of_shape(gen: Gen, node: Node) -> None:
    value = gen.attr(node, "value")
    dt = node.outputs[0].type.dtype or "float32"
    val = np.asarray(value).reshape(-1)[0] if value is not None else 0
    shape = _axes_input(node, 0)
    s = lit(shape) if shape is not None else gen.var(node.inputs[0])
    if shape is not None and 0 in shape:
        gen.emit(f"{gen.out(node)} = mb.const(val=np.zeros({lit(shape)}, dtype={literal(np.dtype(np_dtype(dt)).name)}), "
                 f"name={gen.name(node)})")
        return
    gen.emit(f"{gen.out(node)} = mb.fill(shape={s}, value={np_lit(val, dt)}, name={gen.name(node)})")


def _broadcast_static(gen: Gen, node: Node, var: str, src: tuple[int, ...], out: tuple[int, ...], key: str) -> str:
    """``var`` (static shape ``src``) broadcast to ``out`` with reshape + tile."""
    padded = (1,) * (len(out) - len(src)) + tuple(src)
    if padded != tuple(src):
        t, tn = gen.tmp(node, f"{key}_rank")
        gen.emit(f"{t} = mb.reshape(x={var}, shape={lit(list(padded))}, name={tn})")
        var = t
    reps = [o // p if p else 1 for o, p in zip(out, padded)]
    if any(r != 1 for r in reps):
        t, tn = gen.tmp(node, f"{key}_tiled")
        gen.emit(f"{t} = mb.tile(x={var}, reps={lit(reps)}, name={tn})")
        var = t
    return var


@rule("where")
def _where(gen: Gen, node: Node) -> None:
    """MIL select. coremltools types select's output as broadcast(a, b) and ignores cond's
    shape (value inference uses np.where over all three): when cond is what widens the result,
    ``a`` is broadcast to the output shape first."""
    c, a, b = node.inputs[:3]
    av = gen.var(a)
    sa, sb, out = static_shape(a), static_shape(b), static_shape(node.outputs[0])
    from translator.ir.infer import broadcast_shapes

    if sa is not None and sb is not None and out is not None:
        if tuple(broadcast_shapes(sa, sb)) != out:
            av = _broadcast_static(gen, node, av, sa, out, "a")
    elif None not in (a.type.shape, b.type.shape, c.type.shape):
        ab = broadcast_shapes(tuple(a.type.shape), tuple(b.type.shape))
        if ab != broadcast_shapes(ab, tuple(c.type.shape)):
            # over symbolic dims (a BERT attention mask selecting between two scalars): ``a`` is
            # widened to cond's shape at run time by adding zeros of that shape (or for bool,
            # or-ing false); an unknown dim counts as widening
            dt = a.type.dtype or "float32"
            step = _stepper(gen, node)
            zeros = step("a_zeros", f"mb.fill(shape={step('cond_shape', f'mb.shape(x={gen.var(c)}')}, "
                                    f"value={np_lit(False if dt == 'bool' else 0, dt)}")
            av = step("a_wide", f"mb.{'logical_or' if dt == 'bool' else 'add'}(x={av}, y={zeros}")
    gen.emit(f"{gen.out(node)} = mb.select(cond={gen.var(c)}, a={av}, b={gen.var(b)}, name={gen.name(node)})")


@rule("range", check=lambda n: None if n.inputs[0].type.dtype in ("float32", "float16", "int32")
          else Refusal("unsupported_dtype", "range takes fp16/fp32/int32 here"))
def _range(gen: Gen, node: Node) -> None:
    gen.emit(f"{gen.out(node)} = mb.range_1d(start={gen.var(node.inputs[0])}, end={gen.var(node.inputs[1])}, "
             f"step={gen.var(node.inputs[2])}, name={gen.name(node)})")


def _block_check(node: Node) -> Refusal | None:
    if node.inputs[0].type.rank != 4:
        return Refusal("rank_limit", "Core ML depth/space rearrangements take rank-4 NCHW tensors")
    if node.op == "depth_to_space" and node.attrs.get("mode", "DCR") not in ("DCR", "CRD"):
        return Refusal("unsupported_attribute_value", f"mode {node.attrs.get('mode')!r}")
    return None


@rule("depth_to_space", "space_to_depth", check=_block_check)
def _depth_space(gen: Gen, node: Node) -> None:
    bs = lit(int(gen.attr(node, "blocksize")))
    x = gen.var(node.inputs[0])
    if node.op == "space_to_depth":
        gen.emit(f"{gen.out(node)} = mb.space_to_depth(x={x}, block_size={bs}, name={gen.name(node)})")
    elif gen.attr(node, "mode") == "CRD":
        gen.emit(f"{gen.out(node)} = mb.pixel_shuffle(x={x}, upscale_factor={bs}, name={gen.name(node)})")
    else:
        gen.emit(f"{gen.out(node)} = mb.depth_to_space(x={x}, block_size={bs}, name={gen.name(node)})")


@rule("reverse", check=need_rank(0))
def _reverse(gen: Gen, node: Node) -> None:
    r = node.inputs[0].type.rank
    axes = gen.attr(node, "axes")
    axes = list(range(r)) if axes is None else [norm_axis(a, r) for a in axes]
    gen.emit(f"{gen.out(node)} = mb.reverse(x={gen.var(node.inputs[0])}, axes={lit(axes)}, name={gen.name(node)})")


@rule("cum_sum", check=need_rank(0))
def _cum_sum(gen: Gen, node: Node) -> None:
    if not node.inputs[1].is_const:
        cum_sum_runtime(gen, node)
        return
    axis = norm_axis(int(np.asarray(const_of(node.inputs[1])).reshape(-1)[0]), node.inputs[0].type.rank)
    gen.emit(f"{gen.out(node)} = mb.cumsum(x={gen.var(node.inputs[0])}, axis={lit(axis)}, "
             f"exclusive={bool(gen.attr(node, 'exclusive'))}, reverse={bool(gen.attr(node, 'reverse'))}, "
             f"name={gen.name(node)})")


def _trilu_k(node: Node) -> int | None:
    """k as a constant (0 when omitted), or None when it is computed at run time."""
    if len(node.inputs) < 2 or node.inputs[1] is None:
        return 0
    return int(const_of(node.inputs[1]).reshape(-1)[0]) if node.inputs[1].is_const else None


def _trilu_check(node: Node) -> Refusal | None:
    k, upper = _trilu_k(node), int(node.attrs.get("upper", 1))
    if k is not None and not ((upper and k > 0) or (not upper and k < 0)):
        return None  # band_part keeps whole diagonals
    shape = static_shape(node.inputs[0])
    if shape is None or None in shape[-2:]:
        return Refusal("dynamic_shape", "band_part keeps whole diagonals only (upper needs k <= 0, lower k >= 0); "
                       "any other or a run-time k compares a constant column-minus-row grid over static trailing dims")
    return None


@rule("trilu", check=_trilu_check)
def _trilu(gen: Gen, node: Node) -> None:
    """``band_part`` when it keeps whole diagonals; else ``select`` over the band (j - i >= k
    for upper, <= k for lower) of the static trailing [H, W], broadcast over the leading
    dims: a constant mask for a constant k, a comparison with a run-time k."""
    k, upper = _trilu_k(node), int(gen.attr(node, "upper"))
    x = gen.var(node.inputs[0])
    if k is not None and not ((upper and k > 0) or (not upper and k < 0)):
        lower, up = (-k, -1) if upper else (-1, k)
        gen.emit(f"{gen.out(node)} = mb.band_part(x={x}, lower={lit(lower)}, upper={lit(up)}, name={gen.name(node)})")
        return
    h, w = static_shape(node.inputs[0])[-2:]
    diff = np.arange(w, dtype=np.int32)[None, :] - np.arange(h, dtype=np.int32)[:, None]  # j - i
    if k is not None:
        keep = gen.const(node, "band", diff >= k if upper else diff <= k)
    else:
        keep, kn = gen.tmp(node, "band")
        kk = gen.var(node.inputs[1])
        gen.emit(f"{keep} = mb.{'greater_equal' if upper else 'less_equal'}(x={gen.const(node, 'diag', diff)}, "
                 f"y={kk}, name={kn})")
    zero = np_lit(0, node.inputs[0].type.dtype)
    gen.emit(f"{gen.out(node)} = mb.select(cond={keep}, a={x}, b={zero}, name={gen.name(node)})")


@rule("dropout", check=lambda n: Refusal("unsupported_attribute_value", "training mode")
          if len(n.inputs) > 2 and n.inputs[2] is not None and (not n.inputs[2].is_const or bool(np.asarray(n.inputs[2].const)))
          else None)
def _dropout(gen: Gen, node: Node) -> None:
    gen.emit(f"{gen.out(node)} = mb.identity(x={gen.var(node.inputs[0])}, name={gen.name(node)})")
    if len(node.outputs) > 1:
        shape = static_shape(node.inputs[0])
        if shape is None:
            raise Unsupported(node.op, NAME, "dynamic_shape", "the mask of a dynamic-shape dropout", node.name)
        gen.emit(f"{gen.out(node, 1)} = mb.const(val=np.ones({lit(list(shape))}, dtype=bool), name={gen.name(node, 1)})")


# ----------------------------------------------------------------------------- reductions: reductions.py

@rule("arg_max", "arg_min", check=need_rank(0))
def _arg(gen: Gen, node: Node) -> None:
    r = node.inputs[0].type.rank
    axis = norm_axis(int(gen.attr(node, "axis")), r)
    fn = "reduce_argmax" if node.op == "arg_max" else "reduce_argmin"
    keep = bool(int(gen.attr(node, "keepdims")))
    x = gen.var(node.inputs[0])
    if not int(gen.attr(node, "select_last_index")):
        gen.emit(f"{gen.out(node)} = mb.{fn}(x={x}, axis={lit(axis)}, keep_dims={keep}, name={gen.name(node)})")
        return
    dim = static_shape(node.inputs[0])
    if dim is None:
        raise Unsupported(node.op, NAME, "dynamic_shape", "select_last_index needs a static axis length", node.name)
    # the last extremum = (n - 1) - the first extremum of the reversed axis
    rv, rvn = gen.tmp(node, "reversed")
    gen.emit(f"{rv} = mb.reverse(x={x}, axes={lit([axis])}, name={rvn})")
    ix, ixn = gen.tmp(node, "first")
    gen.emit(f"{ix} = mb.{fn}(x={rv}, axis={lit(axis)}, keep_dims={keep}, name={ixn})")
    gen.emit(f"{gen.out(node)} = mb.sub(x=np.int32({dim[axis] - 1}), y={ix}, name={gen.name(node)})")


@rule("top_k", check=need_rank(0))
def _top_k(gen: Gen, node: Node) -> None:
    if not node.inputs[1].is_const:
        top_k_runtime(gen, node)
        return
    k = int(np.asarray(const_of(node.inputs[1])).reshape(-1)[0])
    axis = norm_axis(int(gen.attr(node, "axis")), node.inputs[0].type.rank)
    asc = not bool(int(gen.attr(node, "largest")))
    sort = bool(int(gen.attr(node, "sorted")))
    gen.emit(f"{gen.out(node)}, {gen.out(node, 1)} = mb.topk(x={gen.var(node.inputs[0])}, k={lit(k)}, axis={lit(axis)}, "
             f"ascending={asc}, sort={sort}, name={gen.name(node)})")


@rule("hardmax", check=lambda n: None if static_shape(n.inputs[0]) is not None
          else Refusal("dynamic_shape", "hardmax needs a static shape"))
def _hardmax(gen: Gen, node: Node) -> None:
    x = node.inputs[0]
    shape = static_shape(x)
    axis = norm_axis(int(gen.attr(node, "axis")), len(shape))
    am, amn = gen.tmp(node, "argmax")
    gen.emit(f"{am} = mb.reduce_argmax(x={gen.var(x)}, axis={lit(axis)}, keep_dims=False, name={amn})")
    gen.emit(f"{gen.out(node)} = mb.one_hot(indices={am}, one_hot_vector_size={lit(shape[axis])}, axis={lit(axis)}, "
             f"on_value={np_lit(1, x.type.dtype)}, off_value={np_lit(0, x.type.dtype)}, name={gen.name(node)})")


@rule("eye_like", check=lambda n: None if static_shape(n.inputs[0]) is not None and n.outputs[0].type.dtype
          else Refusal("dynamic_shape", "eye_like needs a static shape"))
def _eye_like(gen: Gen, node: Node) -> None:
    shape = static_shape(node.inputs[0])
    k = int(gen.attr(node, "k") or 0)
    eye = np.eye(shape[0], shape[1], k=k).astype(np_dtype(node.outputs[0].type.dtype))
    gen.emit(f"{gen.out(node)} = mb.const(val={np_lit(eye, node.outputs[0].type.dtype)}, name={gen.name(node)})")


def _one_hot_check(node: Node) -> Refusal | None:
    if node.inputs[1].is_const and node.inputs[2].is_const:
        return None
    return need_rank(0)(node)


@rule("one_hot", check=_one_hot_check)
def _one_hot(gen: Gen, node: Node) -> None:
    if not (node.inputs[1].is_const and node.inputs[2].is_const):
        one_hot_runtime(gen, node)
        return
    depth = int(np.asarray(const_of(node.inputs[1])).reshape(-1)[0])
    values = np.asarray(const_of(node.inputs[2])).reshape(-1)
    dt = node.inputs[2].type.dtype
    gen.emit(f"{gen.out(node)} = mb.one_hot(indices={gen.var(node.inputs[0])}, one_hot_vector_size={lit(depth)}, "
             f"axis={lit(int(gen.attr(node, 'axis')))}, on_value={np_lit(values[1], dt)}, "
             f"off_value={np_lit(values[0], dt)}, name={gen.name(node)})")


@rule("non_zero")
def _non_zero(gen: Gen, node: Node) -> None:
    t, tn = gen.tmp(node, "nz")
    gen.emit(f"{t} = mb.non_zero(x={gen.var(node.inputs[0])}, name={tn})")
    gen.emit(f"{gen.out(node)} = mb.transpose(x={t}, perm=[1, 0], name={gen.name(node)})")


# ----------------------------------------------------------------------------- einsum
def _mil_einsum_form(terms: list[list[str]], out: list[str]) -> bool:
    """coremltools' einsum: 'nchw,nwhu->nchu' or 'chw,whr->chr' up to label names."""
    if len(terms) != 2 or len(set(terms[0] + terms[1])) != len(terms[0]) + 1:
        return False
    a, b = terms
    if len(a) == 4 and len(b) == 4 and len(set(a)) == 4:
        n, c, h, w = a
        return b[:3] == [n, w, h] and b[3] not in a and out == [n, c, h, b[3]]
    if len(a) == 3 and len(b) == 3 and len(set(a)) == 3:
        c, h, w = a
        return b[:2] == [w, h] and b[2] not in a and out == [c, h, b[2]]
    return False


def _einsum_dims(v: Value) -> list[int | None]:
    """An operand's dims, None where symbolic (read at run time by the lowering)."""
    return [d if isinstance(d, int) and d >= 0 else None for d in v.type.shape]


def _einsum_check(node: Node) -> Refusal | None:
    parsed = einsum_terms(node)
    if parsed is None or any(v.type.shape is None for v in node.inputs):
        return Refusal("dynamic_shape", "einsum needs operands of known rank")
    terms, out = parsed
    dims: dict[str, set[int]] = {}
    for t, v in zip(terms, node.inputs):
        for lab, d in zip(t, _einsum_dims(v)):
            if d is None and t.count(lab) > 1:
                return Refusal("dynamic_shape", "einsum: a diagonal over a symbolic dim")
            if d is not None:
                dims.setdefault(lab, set()).add(d)
    if any(len(ds - {1}) > 1 for ds in dims.values()):
        return Refusal("unsupported_attribute_value", "einsum: a label has different sizes in its operands")
    if any(len(t) > 5 for t in terms) or len(out) > 5:
        return Refusal("rank_limit", "einsum: operands are rank 5 at most in Core ML")
    return None


class _Size:
    """A dim during the einsum lowering: a static factor times run-time dims ((var, axis) of an
    operand as it was fed), so that products of symbolic dims can still be reshaped to."""

    def __init__(self, static: int = 1, dyn: tuple[tuple[str, int], ...] = ()) -> None:
        self.static, self.dyn = static, dyn

    def __mul__(self, other: "_Size") -> "_Size":
        return _Size(self.static * other.static, self.dyn + other.dyn)

    @property
    def known(self) -> int | None:
        return None if self.dyn else self.static

    def maybe_wider(self, other: "_Size") -> bool:
        """Whether this side may be wider than ``other`` (a size-1 broadcast of one label)."""
        return other.known == 1 and self.known != 1


def _prod(sizes: "list[_Size]") -> _Size:
    out = _Size()
    for s in sizes:
        out = out * s
    return out


class _Labeled:
    """An operand during the einsum lowering: its MIL variable, labels and dims."""

    def __init__(self, var: str, labels: list[str], dims: "list[_Size]") -> None:
        self.var, self.labels, self.dims = var, labels, dims


@rule("einsum", check=_einsum_check)
def _einsum(gen: Gen, node: Node) -> None:
    """coremltools' einsum for its two forms; otherwise per operand: diagonals (transpose,
    flatten, strided slice), labels used nowhere else summed out, then a pairwise contraction
    left to right as one batched matmul [batch.., M, K] @ [batch.., K, N] (transpose, reshape),
    and a final transpose to the output order. Exact up to the order of additions. Symbolic
    dims are read at run time from the operands (one unknown in a reshape is written -1)."""
    terms, out = einsum_terms(node)
    if _mil_einsum_form(terms, out) and all(static_shape(v) is not None for v in node.inputs):
        vals = "[" + ", ".join(gen.var(v) for v in node.inputs) + "]"
        gen.emit(f"{gen.out(node)} = mb.einsum(values={vals}, equation={literal(str(gen.attr(node, 'equation')))}, "
                 f"name={gen.name(node)})")
        return
    k = [0]
    shapes: dict[str, str] = {}

    def step(call: str) -> str:
        k[0] += 1
        t, tn = gen.tmp(node, f"e{k[0]}")
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    def size_var(size: _Size) -> str:
        """A one-element int32 tensor holding ``size`` at run time."""
        parts = []
        for var, ax in size.dyn:
            if var not in shapes:
                shapes[var] = step(f"mb.shape(x={var}")
            parts.append(step(f"mb.slice_by_index(x={shapes[var]}, begin=[{ax}], end=[{ax + 1}]"))
        acc = parts[0]
        for p in parts[1:]:
            acc = step(f"mb.mul(x={acc}, y={p}")
        if size.static != 1:
            acc = step(f"mb.mul(x={acc}, y={gen.const(node, 'size', np.array([size.static], np.int32))}")
        return acc

    def shape_arg(sizes: list[_Size]) -> str:
        unknown = [i for i, d in enumerate(sizes) if d.known is None]
        if len(unknown) <= 1:
            return lit([-1 if i in unknown else d.static for i, d in enumerate(sizes)])
        parts = [size_var(d) if d.known is None else gen.const(node, "dim", np.array([d.static], np.int32)) for d in sizes]
        return step(f"mb.concat(values=[{', '.join(parts)}], axis=0")

    def same(a: list[_Size], b: list[_Size]) -> bool:
        return len(a) == len(b) and all(x.known is not None and x.known == y.known or x.dyn and x.dyn == y.dyn
                                        and x.static == y.static for x, y in zip(a, b))

    def transpose(op: _Labeled, order: list[str]) -> _Labeled:
        if order == op.labels:
            return op
        perm = [op.labels.index(lab) for lab in order]
        return _Labeled(step(f"mb.transpose(x={op.var}, perm={lit(perm)}"), order, [op.dims[p] for p in perm])

    def reshape(op: _Labeled, labels: list[str], dims: list[_Size]) -> _Labeled:
        if same(dims, op.dims):
            return _Labeled(op.var, labels, dims)
        return _Labeled(step(f"mb.reshape(x={op.var}, shape={shape_arg(dims)}"), labels, dims)

    def prepare(op: _Labeled, keep: set[str]) -> _Labeled:
        while len(set(op.labels)) < len(op.labels):  # a repeated label (static, by the check): the diagonal
            lab = next(x for x in op.labels if op.labels.count(x) > 1)
            i, j = [p for p, x in enumerate(op.labels) if x == lab][:2]
            rest = [p for p in range(len(op.labels)) if p not in (i, j)]
            t = transpose(op, [op.labels[p] for p in rest + [i, j]]) if rest + [i, j] != list(range(len(op.labels))) \
                else op
            n = t.dims[-1].static
            flat = step(f"mb.reshape(x={t.var}, shape={shape_arg(t.dims[:-2] + [_Size(n * n)])}")
            r = len(t.dims) - 1
            diag = step(f"mb.slice_by_index(x={flat}, begin={lit([0] * r)}, end={lit([0] * (r - 1) + [n * n])}, "
                        f"end_mask={lit([True] * (r - 1) + [False])}, stride={lit([1] * (r - 1) + [n + 1])}")
            op = _Labeled(diag, t.labels[:-1], t.dims[:-1])
        drop = [p for p, lab in enumerate(op.labels) if lab not in keep]
        if drop:
            var = step(f"mb.reduce_sum(x={op.var}, axes={lit(drop)}, keep_dims=False")
            op = _Labeled(var, [x for p, x in enumerate(op.labels) if p not in drop],
                          [d for p, d in enumerate(op.dims) if p not in drop])
        return op

    ops = []
    for t, v in zip(terms, node.inputs):
        var = gen.var(v)
        ops.append(_Labeled(var, list(t), [_Size(d) if d is not None else _Size(1, ((var, a),))
                                            for a, d in enumerate(_einsum_dims(v))]))
    needed = [set(out).union(*(set(t) for t in terms[i + 1:])) for i in range(len(terms))]
    acc = prepare(ops[0], needed[0])
    for i in range(1, len(ops)):
        b = prepare(ops[i], needed[i] | set(acc.labels))
        keep = needed[i]
        for x in [x for x in acc.labels if x in b.labels and x not in keep]:
            pa, pb = acc.labels.index(x), b.labels.index(x)
            da_, db_ = acc.dims[pa], b.dims[pb]
            if da_.maybe_wider(db_) or db_.maybe_wider(da_):  # a summed label of size 1 on one side: sum(a*b) = a*sum(b)
                wide, p = (acc, pa) if da_.maybe_wider(db_) else (b, pb)
                summed = _Labeled(step(f"mb.reduce_sum(x={wide.var}, axes={lit([p])}, keep_dims=True"), wide.labels,
                                  wide.dims[:p] + [_Size()] + wide.dims[p + 1:])
                acc, b = (summed, b) if wide is acc else (acc, summed)
        batch = [x for x in acc.labels if x in b.labels and x in keep]
        contract = [x for x in acc.labels if x in b.labels and x not in keep]
        only_a = [x for x in acc.labels if x not in b.labels]
        only_b = [x for x in b.labels if x not in acc.labels]
        da, db = dict(zip(acc.labels, acc.dims)), dict(zip(b.labels, b.dims))
        size = {x: (db[x] if x in db and (x not in da or da[x].known == 1) else da[x]) for x in acc.labels + b.labels}
        m = _prod([da[x] for x in only_a])
        kk = _prod([da[x] if da[x].known is not None or x not in db else db[x] for x in contract])
        n = _prod([db[x] for x in only_b])
        a2 = transpose(acc, batch + only_a + contract)
        a2 = reshape(a2, batch + ["\u2191m", "\u2191k"], [da[x] for x in batch] + [m, kk])
        b2 = transpose(b, batch + contract + only_b)
        b2 = reshape(b2, batch + ["\u2191k", "\u2191n"], [db[x] for x in batch] + [kk, n])
        mm = step(f"mb.matmul(x={a2.var}, y={b2.var}")
        labels = batch + only_a + only_b
        mm_op = _Labeled(mm, batch + ["\u2191m", "\u2191n"], [size[x] for x in batch] + [m, n])
        if labels:
            acc = reshape(mm_op, labels, [size[x] for x in labels])
        else:  # a scalar: MIL reshape to rank 0 has no value inference, a full reduce_sum does
            acc = _Labeled(step(f"mb.reduce_sum(x={mm}, axes=[0, 1], keep_dims=False"), [], [])
    if len(ops) == 1:
        acc = prepare(acc, set(out))
    final = transpose(acc, out)
    gen.emit(f"{gen.out(node)} = mb.identity(x={final.var}, name={gen.name(node)})")


@rule("compress", check=need_rank(0))
def _compress(gen: Gen, node: Node) -> None:
    """The slices along ``axis`` (no axis: the elements of the flattened input) whose
    condition is true: gather with the condition's true positions (a constant condition:
    computed here; else MIL non_zero, [N, 1] squeezed to [N])."""
    x, cond = node.inputs[0], node.inputs[1]
    xv = gen.var(x)
    ax = gen.attr(node, "axis")

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    if ax is None:
        xv = step("flat", f"mb.reshape(x={xv}, shape=[-1]")
        ax = 0
    else:
        ax = norm_axis(int(ax), x.type.rank)
    c = const_of(cond)
    if c is not None:
        idx = gen.const(node, "indices", np.flatnonzero(np.asarray(c).reshape(-1)).astype(np.int32))
    else:
        idx = step("indices", "mb.squeeze(x=" + step("true_at", f"mb.non_zero(x={gen.var(cond)}") + ", axes=[1]")
    gen.emit(f"{gen.out(node)} = mb.gather(x={xv}, indices={idx}, axis={lit(ax)}, validate_indices=False, "
             f"name={gen.name(node)})")
