"""PyTorch rules: data movement (reshape, slice, pad, gather/scatter, split, sort), constants of a
shape, reductions, arg-extremes and cumulative sums."""
from __future__ import annotations

import numpy as np

from translator.table.dtypes import norm_axis
from translator.compile.render import literal

from .node import NodeEmit, floordiv, paren, plus, size_code, sizes_code, times
from .registry import rule


def _out_shape(e: NodeEmit, j: int = 0) -> list[int] | None:
    t = e.node.outputs[j].type
    return [int(d) for d in t.shape] if t.is_static else None  # type: ignore[union-attr]


def _index(at: int, item: str) -> str:
    """``[:, :, item]``-style subscript text selecting ``item`` on axis ``at``."""
    return "[" + ":, " * at + item + "]"


# ----------------------------------------------------------------------------- reshapes
@rule("reshape")
def reshape(e: NodeEmit) -> str:
    x, dims = e.x(0), e.ints(1)
    if dims is None:
        return f"{e.helper('_reshape')}({x}, {e.x(1)}, {bool(e.attr('allowzero'))})"
    if not e.attr("allowzero") and 0 in dims:
        shape = e.shape(0)
        parts = [(str(shape[i]) if shape is not None else f"{x}.shape[{i}]") if d == 0 else str(d)
                 for i, d in enumerate(dims)]
        return f"{x}.reshape([{', '.join(parts)}])"
    return f"{x}.reshape({literal(dims)})"


@rule("flatten")
def flatten(e: NodeEmit) -> str:
    x = e.x(0)
    out = _out_shape(e)
    if out is not None:
        return f"{x}.reshape({literal(out)})"
    a = int(e.attr("axis"))
    return f"{x}.reshape(math.prod({x}.shape[:{a}]), math.prod({x}.shape[{a}:]))"


@rule("squeeze")
def squeeze(e: NodeEmit) -> str:
    x = e.x(0)
    if not e.has(1):
        return f"torch.squeeze({x})"
    axes = e.ints(1)
    if axes is None:
        return f"torch.squeeze({x}, tuple({e.x(1)}.tolist()))"
    return f"torch.squeeze({x}, {literal(tuple(axes))})" if axes else f"torch.squeeze({x})"


@rule("unsqueeze")
def unsqueeze(e: NodeEmit) -> str:
    x, axes = e.x(0), e.ints(1)
    if axes is None:
        return f"{e.helper('_unsqueeze')}({x}, {e.x(1)}.tolist())"
    if e.rank(0) is None:
        if any(a < 0 for a in axes):
            return f"{e.helper('_unsqueeze')}({x}, {literal(axes)})"
        out_rank = max(axes) + 1
    else:
        out_rank = e.need_rank(0) + len(axes)
    y = x
    for a in sorted(norm_axis(a, out_rank) for a in axes):
        y = f"{y}.unsqueeze({a})"
    return y


@rule("transpose")
def transpose(e: NodeEmit) -> str:
    perm = e.attr("perm")
    if perm is None:
        perm = list(range(e.need_rank(0)))[::-1]
    return f"{e.x(0)}.permute({literal([int(p) for p in perm])})"


@rule("expand")
def expand(e: NodeEmit) -> str:
    x = e.x(0)
    out = _out_shape(e)
    if out is not None:
        return f"{x}.expand({literal(out)})"
    return f"torch.broadcast_to({x}, torch.broadcast_shapes({x}.shape, {e.ints_code(1)}))"


@rule("tile")
def tile(e: NodeEmit) -> str:
    return f"torch.tile({e.x(0)}, {e.ints_code(1)})"


@rule("depth_to_space")
def depth_to_space(e: NodeEmit) -> str:
    x, bs = e.x(0), int(e.attr("blocksize"))
    if e.attr("mode") == "CRD":
        return f"F.pixel_shuffle({x}, {bs})"
    if e.need_rank(0) != 4:
        raise e.refuse("rank_limit", "depth_to_space of a 4-D input")
    b, c, h, w = (e.dim(0, a) for a in range(4))
    cc = floordiv(c, bs * bs)
    return (f"{x}.reshape({sizes_code([b, bs, bs, cc, h, w])}).permute(0, 3, 4, 1, 5, 2)"
            f".reshape({sizes_code([b, cc, times(bs, h), times(bs, w)])})")


@rule("space_to_depth")
def space_to_depth(e: NodeEmit) -> str:
    x, bs = e.x(0), int(e.attr("blocksize"))
    if e.attr("mode") == "CRD":
        return f"F.pixel_unshuffle({x}, {bs})"
    if e.need_rank(0) != 4:
        raise e.refuse("rank_limit", "space_to_depth of a 4-D input")
    b, c, h, w = (e.dim(0, a) for a in range(4))
    hb, wb = floordiv(h, bs), floordiv(w, bs)
    return (f"{x}.reshape({sizes_code([b, c, hb, bs, wb, bs])}).permute(0, 3, 5, 1, 2, 4)"
            f".reshape({sizes_code([b, times(bs * bs, c), hb, wb])})")


@rule("shape")
def shape(e: NodeEmit) -> str:
    start, end = int(e.attr("start") or 0), e.attr("end")
    sl = "" if (start == 0 and end is None) else f"[{start}:{'' if end is None else int(end)}]"
    return f"torch.tensor({e.x(0)}.shape{sl}, dtype=torch.int64)"


# ----------------------------------------------------------------------------- slicing
def _whole_reversal(start: int, end: int, step: int) -> bool:
    """Whether a step -1 from the last element (``-1`` or past the end) to before the first
    (past ``-dim``: INT64_MIN, INT32_MIN) takes the whole axis reversed, at any size."""
    return step == -1 and (start == -1 or start >= 2**31 - 1) and end <= -(2**31)


def _slice_item(start: int, end: int, step: int, dim: int | None) -> tuple[str, bool]:
    """(subscript, flip): ONNX Slice bounds on one axis as a Python slice of x (or of x
    flipped along the axis when the step is negative, which torch indexing lacks)."""
    if step > 0:  # a bound past either end is written as the end itself (torch warns on INT64_MIN/MAX)
        big = dim if dim is not None else 2**62
        s = "" if start == 0 or start <= -big else str(start)
        t = "" if end >= big else "0" if end <= -big else str(end)
        return f"{s}:{t}" + (f":{step}" if step != 1 else ""), False
    if dim is None and _whole_reversal(start, end, step):
        return ":", True
    assert dim is not None
    s = start + dim if start < 0 else start
    t = end + dim if end < 0 else end
    s, t = min(max(s, 0), dim - 1), min(max(t, -1), dim - 1)
    fs, ft = dim - 1 - s, dim - 1 - t  # positions in the flipped axis
    return f"{fs}:{ft}" + (f":{-step}" if step != -1 else ""), True


@rule("slice")
def slice_(e: NodeEmit) -> str:
    x = e.x(0)
    starts, ends = e.ints(1), e.ints(2)
    axes = e.ints(3) if e.has(3) else None
    steps = e.ints(4) if e.has(4) else None
    dynamic = starts is None or ends is None or (e.has(3) and axes is None) or (e.has(4) and steps is None)
    rank, shape = e.rank(0), e.dims(0)  # a positive step takes any size (Python slices clamp)
    if not dynamic and rank is not None:
        assert starts is not None
        axes = [norm_axis(a, rank) for a in axes] if axes is not None else list(range(len(starts)))
        steps = steps or [1] * len(starts)
        # a negative step is written over the flipped axis, whose size it needs as a number
        dynamic = any(st < 0 and not isinstance(shape[a] if shape is not None else None, int)
                      and not _whole_reversal(s, t, st) for a, s, t, st in zip(axes, starts, ends, steps))
    if dynamic or rank is None:
        args = [e.x(1), e.x(2), e.x(3) if e.has(3) else "None", e.x(4) if e.has(4) else "None"]
        return f"{e.helper('_slice')}({x}, {', '.join(args)})"
    assert starts is not None and ends is not None and axes is not None and steps is not None
    items = [":"] * rank
    flips = []
    for s, t, a, st in zip(starts, ends, axes, steps):
        if st == 0:
            raise e.refuse("unsupported_attribute_value", "slice step 0")
        dim = shape[a] if shape is not None else None
        item, flip = _slice_item(s, t, st, dim if isinstance(dim, int) else None)
        items[a] = item
        if flip:
            flips.append(a)
    while items and items[-1] == ":":
        items.pop()
    src = f"torch.flip({x}, {literal(flips)})" if flips else x
    return f"{src}[{', '.join(items)}]" if items else src if flips else e.same(x)


@rule("split")
def split(e: NodeEmit) -> str:
    x = e.x(0)
    a = int(e.attr("axis"))
    n = e.n_out()
    if e.has(1):
        sizes = e.ints_code(1)
    else:
        shape = e.shape(0)
        parts = e.attr("num_outputs") or n
        if shape is None:
            sizes = f"{e.helper('_split_sizes')}({x}.shape[{a}], {parts})"
        else:
            chunk = -(-shape[a] // parts)
            sizes = literal([chunk] * (parts - 1) + [max(shape[a] - chunk * (parts - 1), 0)])
    if e.has(1) and e.const(1) is not None and e.const(1).ndim == 0:
        sizes = literal(int(e.const(1)))
    code = f"torch.split({x}, {sizes}, dim={a})"
    return f"{code}[0]" if n == 1 else code


@rule("concat")
def concat(e: NodeEmit) -> str:
    return f"torch.cat([{', '.join(e.xs())}], dim={int(e.attr('axis'))})"


@rule("pad")
def pad(e: NodeEmit) -> str:
    """Constant mode: F.pad (negative pads crop). reflect / edge / wrap: one index_select per
    padded axis with the source index of every output position (of any size: a symbolic dim
    is read at run time)."""
    x, rank = e.x(0), e.need_rank(0)
    pads = e.ints(1)
    axes = e.ints(3) if e.has(3) else list(range(rank))
    mode = str(e.attr("mode"))
    if pads is None or axes is None:
        value = e.x(2) if e.has(2) else "None"
        return f"{e.helper('_pad')}({x}, {e.x(1)}, {value}, {e.x(3) if e.has(3) else 'None'}, {literal(mode)})"
    n = len(axes)
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[norm_axis(a, rank)], end[norm_axis(a, rank)] = pads[i], pads[i + n]
    if mode == "constant":
        torch_pads: list[int] = []
        for d in reversed(range(rank)):
            torch_pads += [begin[d], end[d]]
        while torch_pads[-2:] == [0, 0] and len(torch_pads) > 2:
            torch_pads = torch_pads[:-2]
        value = ""
        if e.has(2):
            v = e.scalar(2)
            value = f", value={literal(v)}" if v is not None else f", value={e.x(2)}.item()"
        return f"F.pad({x}, {literal(torch_pads)}{value})"
    y = x
    for d in range(rank):
        b, t = begin[d], end[d]
        if b == 0 and t == 0:
            continue
        dim = e.dim(0, d)  # the axes before d were padded already, this one not yet
        if b < 0 or t < 0:
            dim = plus(dim, -max(-b, 0) - max(-t, 0))
            y = f"{y}.narrow({d}, {max(-b, 0)}, {size_code(dim)})"
            b, t = max(b, 0), max(t, 0)
        pos = f"torch.arange({-b}, {size_code(plus(dim, t))})"
        if mode == "edge":
            idx = f"{pos}.clamp(0, {size_code(plus(dim, -1))})"
        elif mode == "wrap":
            idx = f"{pos} % {paren(dim)}"
        elif mode == "reflect":
            idx = f"{e.helper('_reflect_index')}({pos}, {size_code(dim)})"
        else:
            raise e.refuse("unsupported_attribute_value", f"pad mode {mode!r}")
        y = f"{y}.index_select({d}, {idx})"
    return y if y != x else e.same(x)


@rule("center_crop_pad")
def center_crop_pad(e: NodeEmit) -> str:
    x, shape = e.x(0), e.shape(0)
    target = e.ints(1)
    if target is None or shape is None:
        axes = e.attr("axes")
        return f"{e.helper('_center_crop_pad')}({x}, {e.x(1)}, {literal(None if axes is None else [int(a) for a in axes])})"
    rank = len(shape)
    axes = [norm_axis(int(a), rank) for a in (e.attr("axes") or range(rank))]
    items, pads = [":"] * rank, [0] * (2 * rank)
    for a, t in zip(axes, target):
        dim = shape[a]
        if t < dim:
            start = (dim - t) // 2
            items[a] = f"{start}:{start + t}"
        elif t > dim:
            pads[2 * (rank - 1 - a)] = (t - dim) // 2
            pads[2 * (rank - 1 - a) + 1] = t - dim - (t - dim) // 2
    y = f"{x}[{', '.join(items)}]" if any(i != ":" for i in items) else x
    return f"F.pad({y}, {literal(pads)})" if any(pads) else (y if y != x else f"torch.clone({x})")


# ----------------------------------------------------------------------------- gather / scatter
def _wrap(e: NodeEmit, i: int, dim: str) -> str:
    """Indices input ``i`` as int64 with negative entries counted from the back of ``dim``."""
    c = e.const(i)
    idx = e.x(i)
    long = idx if e.dtype_id(i) == "int64" else f"{idx}.long()"
    if c is not None and (c >= 0).all():
        return long
    return f"torch.where({idx} < 0, {idx} + {dim}, {idx}).long()" if long != idx else f"torch.where({idx} < 0, {idx} + {dim}, {idx})"


@rule("gather")
def gather(e: NodeEmit) -> str:
    """Indexing; one constant index (0-d) is a Python int (``state[0]``: a select, where a
    0-d index tensor is advanced indexing, a copy through the index kernels)."""
    a = int(e.attr("axis"))
    i = e.const(1)
    one = i is not None and i.ndim == 0 and i.dtype.kind in "iu"
    idx = str(int(i)) if one else e.x(1)
    y = f"{e.x(0)}[..., {idx}{', :' * (-a - 1)}]" if a < 0 else f"{e.x(0)}{_index(a, idx)}"
    return e.same(y) if one else y  # (a select is a view of the input: a copy where it is returned)


@rule("gather_elements")
def gather_elements(e: NodeEmit) -> str:
    x = e.x(0)
    a = int(e.attr("axis"))
    return f"torch.gather({x}, {a}, {_wrap(e, 1, f'{x}.shape[{a}]')})"


@rule("gather_nd")
def gather_nd(e: NodeEmit) -> str:
    x, idx = e.x(0), e.x(1)
    ishape = e.dims(1)  # only the rank and the index depth must be known
    if ishape is None or not isinstance(ishape[-1], int):
        raise e.refuse("dynamic_shape", "gather_nd needs the rank of input 1 and its last dim")
    k, b = ishape[-1], int(e.attr("batch_dims"))
    lead = len(ishape) - 1
    parts = [f"torch.arange({x}.shape[{j}]).reshape({literal([1] * j + [-1] + [1] * (lead - 1 - j))})"
             for j in range(b)]
    parts += [f"{idx}[..., {j}]" for j in range(k)]
    return f"{x}[{', '.join(parts)}]"


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@rule("scatter_elements")
def scatter_elements(e: NodeEmit) -> str:
    x = e.x(0)
    a = int(e.attr("axis"))
    idx = _wrap(e, 1, f"{x}.shape[{a}]")
    red = str(e.attr("reduction"))
    if red == "none":
        return f"torch.scatter({x}, {a}, {idx}, {e.x(2)})"
    return f"torch.scatter_reduce({x}, {a}, {idx}, {e.x(2)}, {literal(_SCATTER_REDUCE[red])}, include_self=True)"


@rule("scatter_nd")
def scatter_nd(e: NodeEmit) -> str:
    """none/add: index_put; mul/max/min: index_reduce over the first k dims flattened."""
    x, idx, upd = e.x(0), e.x(1), e.x(2)
    red = str(e.attr("reduction"))
    k = e.need_dim(1, -1, "the index depth")
    long = idx if e.dtype_id(1) == "int64" else f"{idx}.long()"
    if red in ("none", "add"):
        return f"{x}.index_put(tuple({long}.unbind(-1)), {upd}, accumulate={red == 'add'})"
    shape = e.need_shape(0)
    strides = [1] * k
    for j in range(k - 2, -1, -1):
        strides[j] = strides[j + 1] * shape[j + 1]
    lin = f"(torch.remainder({long}, torch.tensor({literal(list(shape[:k]))})) * torch.tensor({literal(strides)})).sum(-1).reshape(-1)"
    rest = literal([-1] + list(shape[k:]))
    return (f"{x}.reshape({literal([-1] + list(shape[k:]))}).index_reduce(0, {lin}, {upd}.reshape({rest}), "
            f"{literal({'mul': 'prod', 'max': 'amax', 'min': 'amin'}[red])}, include_self=True).reshape({literal(list(shape))})")


@rule("tensor_scatter")
def tensor_scatter(e: NodeEmit) -> list[str]:
    """present = past with ``update`` written at positions start + s (mod max_len if circular)
    along ``axis``, start = write_indices[batch] (0 when absent)."""
    past, upd = e.x(0), e.x(1)
    rank = e.need_rank(0)
    a = norm_axis(int(e.attr("axis")), rank)
    shape = [1] * rank
    shape[a] = -1
    pos = f"torch.arange({upd}.shape[{a}]).reshape({literal(shape)})"
    if e.has(2):
        pos = f"{e.x(2)}.long().reshape({literal([-1] + [1] * (rank - 1))}) + {pos}"
    if e.attr("mode") == "circular":
        pos = f"({pos}) % {past}.shape[{a}]"
    y = e.out()
    return [f"{y} = torch.scatter({past}, {a}, ({pos}).expand({upd}.shape), {upd})"]


@rule("reverse_sequence")
def reverse_sequence(e: NodeEmit) -> list[str]:
    """y[t, b] = x[len_b - 1 - t, b] for t < len_b, else x[t, b] (time/batch axes as given)."""
    x, lens = e.x(0), e.x(1)
    rank = e.need_rank(0)
    ta, ba = int(e.attr("time_axis")), int(e.attr("batch_axis"))
    st, sb = [1] * rank, [1] * rank
    st[ta], sb[ba] = -1, -1
    t, n = e.tmp("t"), e.tmp("n")
    y = e.out()
    return [f"{t} = torch.arange({x}.shape[{ta}]).reshape({literal(st)})",
            f"{n} = {lens}.long().reshape({literal(sb)})",
            f"{y} = torch.gather({x}, {ta}, torch.where({t} < {n}, {n} - 1 - {t}, {t}).expand({x}.shape))"]


@rule("compress")
def compress(e: NodeEmit) -> str:
    x, c = e.x(0), e.x(1)
    a = e.attr("axis")
    keep = f"torch.nonzero({c}).reshape(-1)"
    if a is None:
        return f"{x}.reshape(-1).index_select(0, {keep})"
    return f"torch.index_select({x}, {int(a)}, {keep})"


@rule("one_hot")
def one_hot(e: NodeEmit) -> str:
    """on where the (wrapped) index equals the position, off elsewhere; out-of-range: all off."""
    idx, vals = e.x(0), e.x(2)
    depth = e.scalar_code(1, "int")
    a = int(e.attr("axis"))
    wrapped = f"torch.where({idx} < 0, {idx} + {depth}, {idx}).long()"
    hot = f"{wrapped}.unsqueeze(-1) == torch.arange({depth})"
    y = f"torch.where({hot}, {vals}[1], {vals}[0])"
    return y if a == -1 else f"{y}.movedim(-1, {a})"


@rule("top_k")
def top_k(e: NodeEmit) -> list[str]:
    """A stable sort: among equal values the lower index comes first."""
    x = e.x(0)
    a = int(e.attr("axis"))
    k = e.scalar_code(1, "int")
    v, i = e.out(0), e.out(1)
    return [f"{v}, {i} = torch.sort({x}, dim={a}, descending={bool(e.attr('largest'))}, stable=True)",
            f"{v}, {i} = {v}.narrow({a}, 0, {k}), {i}.narrow({a}, 0, {k})"]


@rule("unique")
def unique(e: NodeEmit) -> list[str]:
    """torch.unique plus the first occurrence of each value (a scatter of positions with amin);
    sorted=0 reorders everything by first occurrence."""
    x = e.x(0)
    a = e.attr("axis")
    src = f"{x}.reshape(-1)" if a is None else x
    dim = 0 if a is None else int(a)
    dim_arg = "" if a is None else f", dim={dim}"
    outs = e.outs + [e.tmp(n) for n in ("indices", "inverse", "counts")[e.n_out() - 1:]]
    y, first, inv, cnt = outs[:4]
    n = f"{src}.shape[{dim}]"
    lines = [f"{y}, {inv}, {cnt} = torch.unique({src}, sorted=True, return_inverse=True, return_counts=True{dim_arg})",
             f"{inv} = {inv}.reshape(-1)",
             f"{first} = torch.full(({y}.shape[{dim}],), {n}, dtype=torch.int64).scatter_reduce(0, {inv}, "
             f"torch.arange({n}), 'amin', include_self=True)"]
    if not e.attr("sorted"):
        order = e.tmp("order")
        lines += [f"{order} = torch.argsort({first})",
                  f"{y}, {first}, {cnt} = {y}.index_select({dim}, {order}), {first}[{order}], {cnt}[{order}]",
                  f"{inv} = torch.argsort({order})[{inv}]"]
    return lines


@rule("trilu")
def trilu(e: NodeEmit) -> str:
    k = e.scalar_code(1, "int") if e.has(1) else "0"
    return f"torch.{'triu' if e.attr('upper') else 'tril'}({e.x(0)}, {k})"


@rule("eye_like")
def eye_like(e: NodeEmit) -> str:
    k = int(e.attr("k"))
    return f"torch.ones({e.x(0)}.shape, dtype={e.out_dtype()}).tril({k}).triu({k})"


@rule("reverse")
def reverse(e: NodeEmit) -> str:
    axes = e.attr("axes")
    dims = list(range(e.need_rank(0))) if axes is None else [int(a) for a in axes]
    return f"torch.flip({e.x(0)}, {literal(dims)})"


@rule("range")
def range_(e: NodeEmit) -> str:
    kind = "float" if e.is_float(0) else "int"
    args = ", ".join(e.scalar_code(i, kind) for i in range(3))
    dt = e.dtype(0)
    if e.dtype_id(0) in ("float16", "bfloat16") and int(e.attr("stash_type") or 1) == 1:
        return f"torch.arange({args}, dtype=torch.float32).to({dt})"
    return f"torch.arange({args}, dtype={dt})"


# ----------------------------------------------------------------------------- sequences


@rule("constant_of_shape")
def constant_of_shape(e: NodeEmit) -> str:
    value = e.attr("value")
    fill = 0.0 if value is None else np.asarray(value).reshape(-1)[0].item()
    return f"torch.full({e.ints_code(0)}, {literal(fill)}, dtype={e.out_dtype()})"


def _noop(e: NodeEmit) -> bool:
    return e.has(1) and e.ints(1) == [] and bool(e.attr("noop_with_empty_axes"))


def _dims(e: NodeEmit) -> list[int] | None:
    """The reduced axes, sorted and non-negative; None when only known at run time."""
    rank = e.rank(0)
    axes = e.ints(1) if e.has(1) else []
    if axes is None or rank is None:
        return None
    if not axes:
        return list(range(rank))
    return sorted({norm_axis(a, rank) for a in axes})


def _reduction(e: NodeEmit, expr: str) -> str | list[str]:
    """``expr`` with {x}, {dims}, {keep}, {dt} filled; empty axes with noop is a copy. Axes
    known only at run time go through ``_reduce_axes`` (an empty list then means a copy)."""
    x, keep, dt = e.x(0), bool(e.attr("keepdims")), e.dtype(0)
    if _noop(e):
        return f"torch.clone({x})"
    dims = _dims(e)
    if dims is not None:
        return expr.format(x=x, dims=literal(dims), keep=keep, dt=dt)
    if not (e.has(1) and e.ints(1) is None):
        axes = e.ints(1) if e.has(1) else []
        return expr.format(x=x, dims=literal(axes) if axes else f"list(range({x}.dim()))", keep=keep, dt=dt)
    d = e.tmp("dims")
    call = expr.format(x=x, dims=d, keep=keep, dt=dt)
    return [f"{d} = {e.helper('_reduce_axes')}({x}, {e.x(1)}, {bool(e.attr('noop_with_empty_axes'))})",
            f"{e.out()} = {call} if {d} else torch.clone({x})"]


@rule("reduce_sum")
def reduce_sum(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.sum({x}, dim={dims}, keepdim={keep}, dtype={dt})")


@rule("reduce_mean")
def reduce_mean(e: NodeEmit) -> str | list[str]:
    if e.is_float(0):
        return _reduction(e, "torch.mean({x}, dim={dims}, keepdim={keep})")
    return _reduction(e, "torch.div(torch.sum({x}, dim={dims}, keepdim={keep}), "
                      "max(1, math.prod({x}.shape[d] for d in {dims})), rounding_mode='trunc').to({dt})")


@rule("reduce_sum_square")
def reduce_sum_square(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.sum({x} * {x}, dim={dims}, keepdim={keep}, dtype={dt})")


@rule("reduce_l1")
def reduce_l1(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.sum(torch.abs({x}), dim={dims}, keepdim={keep}, dtype={dt})")


@rule("reduce_l2")
def reduce_l2(e: NodeEmit) -> str | list[str]:
    if e.is_float(0):
        return _reduction(e, "torch.sqrt(torch.sum({x} * {x}, dim={dims}, keepdim={keep}))")
    return _reduction(e, "torch.sqrt(torch.sum({x} * {x}, dim={dims}, keepdim={keep}).double()).to({dt})")


@rule("reduce_log_sum")
def reduce_log_sum(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.log(torch.sum({x}, dim={dims}, keepdim={keep}))")


@rule("reduce_log_sum_exp")
def reduce_log_sum_exp(e: NodeEmit) -> str | list[str]:
    return _reduction(e, "torch.logsumexp({x}, dim={dims}, keepdim={keep})")


@rule("reduce_prod")
def reduce_prod(e: NodeEmit) -> str | list[str]:
    """torch.prod reduces one dim at a time: the product over a flattened copy of the axes."""
    return _reduction(e, f"{e.helper('_reduce_prod')}({{x}}, {{dims}}, {{keep}})")


def _extreme(e: NodeEmit, fn: str, empty: str) -> str | list[str]:
    """amax/amin; an empty reduction gives -inf/+inf (or the integer limit). Reduced axes of
    symbolic size (possibly 0) go through ``_reduce_extreme``, the others need not be static."""
    shape, dims = e.shape(0), _dims(e)
    known = e.dims(0)
    if known is not None and dims is not None and all(isinstance(known[d], int) and known[d] > 0 for d in dims):
        return _reduction(e, f"torch.{fn}({{x}}, dim={{dims}}, keepdim={{keep}})")
    if shape is not None and dims is not None and not _noop(e) and any(shape[d] == 0 for d in dims):
        keep = bool(e.attr("keepdims"))
        out = [1 if d in dims else n for d, n in enumerate(shape) if keep or d not in dims]
        d = e.dtype_id(0) or ""
        if d.startswith(("float", "bfloat")):
            value = empty
        elif d == "bool":
            value = "False" if fn == "amax" else "True"
        else:
            value = f"torch.iinfo({e.dtype(0)}).{'min' if fn == 'amax' else 'max'}"
        return f"torch.full({literal(out)}, {value}, dtype={e.dtype(0)})"
    if shape is None or dims is None:
        return _reduction(e, f"{e.helper('_reduce_extreme')}({{x}}, {{dims}}, {{keep}}, {fn == 'amax'})")
    return _reduction(e, f"torch.{fn}({{x}}, dim={{dims}}, keepdim={{keep}})")


@rule("reduce_max")
def reduce_max(e: NodeEmit) -> str | list[str]:
    return _extreme(e, "amax", "-float('inf')")


@rule("reduce_min")
def reduce_min(e: NodeEmit) -> str | list[str]:
    return _extreme(e, "amin", "float('inf')")


def _arg(e: NodeEmit, fn: str) -> str:
    x, a = e.x(0), int(e.attr("axis"))
    keep = bool(e.attr("keepdims"))
    if e.attr("select_last_index"):
        return f"{x}.shape[{a}] - 1 - torch.{fn}(torch.flip({x}, [{a}]), dim={a}, keepdim={keep})"
    return f"torch.{fn}({x}, dim={a}, keepdim={keep})"


@rule("arg_max")
def arg_max(e: NodeEmit) -> str:
    return _arg(e, "argmax")


@rule("arg_min")
def arg_min(e: NodeEmit) -> str:
    return _arg(e, "argmin")


def _cumulative(e: NodeEmit, fn: str, identity: str) -> list[str]:
    x = e.x(0)
    a = str(int(e.scalar(1))) if e.const(1) is not None else f"int({e.x(1)})"
    y = e.out()
    src = f"torch.flip({x}, [{a}])" if e.attr("reverse") else x
    lines = [f"{y} = torch.{fn}({src}, dim={a}, dtype={e.dtype(0)})"]
    if e.attr("exclusive"):
        lines.append(f"{y} = torch.cat([torch.full_like({y}.narrow({a}, 0, 1), {identity}), "
                     f"{y}.narrow({a}, 0, {y}.shape[{a}] - 1)], dim={a})")
    if e.attr("reverse"):
        lines.append(f"{y} = torch.flip({y}, [{a}])")
    return lines


@rule("cum_sum")
def cum_sum(e: NodeEmit) -> list[str]:
    return _cumulative(e, "cumsum", "0")


@rule("cum_prod")
def cum_prod(e: NodeEmit) -> list[str]:
    return _cumulative(e, "cumprod", "1")
