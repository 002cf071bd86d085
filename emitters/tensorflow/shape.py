"""TensorFlow rules for shape, indexing and data-movement ops (reshape, slice, gather,
scatter, pad, one-hot, ...).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .helpers import static_dims, const_ints, needs_rank, rank_of, scalar
from .registry import rule


INT32_MAX = 2**31 - 1


@rule("constant")
def constant(c: Any) -> list[str]:
    a = c.node.attrs
    if "value" in a:
        arr = np.asarray(a["value"])
    elif "value_float" in a:
        arr = np.asarray(a["value_float"], np.float32)
    elif "value_floats" in a:
        arr = np.asarray(a["value_floats"], np.float32)
    elif "value_int" in a:
        arr = np.asarray(a["value_int"], np.int64)
    elif "value_ints" in a:
        arr = np.asarray(a["value_ints"], np.int64)
    elif "value_string" in a:
        arr = np.asarray(a["value_string"], dtype=object)
    elif "value_strings" in a:
        arr = np.asarray(a["value_strings"], dtype=object)
    else:
        c.unsupported("unsupported_attribute_value", "sparse constants are not supported")
    return [f"{c.o()} = tf.identity({c.weight(arr, c.node.name)})"]


@rule("constant_of_shape")
def constant_of_shape(c: Any) -> list[str]:
    from translator.table.dtypes import numpy_dtype

    v = c.attr("value")
    arr = np.asarray(v).reshape(-1)[:1].reshape(()) if v is not None else np.zeros((), np.float32)
    arr = arr.astype(numpy_dtype(c.out_dtype()))
    return [f"{c.o()} = tf.fill(tf.cast({c.i(0)}, tf.int64), {c.weight(arr, c.node.name + '_value')})"]


@rule("shape")
def shape(c: Any) -> list[str]:
    """start/end clamp like Python slicing, which is what ONNX specifies."""
    start, end = int(c.attr("start", 0)), c.attr("end")
    return [f"{c.o()} = tf.shape({c.i(0)}, out_type={c.tf(c.out_dtype())})[{start}:{'' if end is None else int(end)}]"]


@rule("reshape")
def reshape(c: Any) -> list[str]:
    x, s = c.i(0), c.i(1)
    target = const_ints(c.node, 1)
    if target is not None and (c.attr("allowzero", 0) or 0 not in target):
        return [f"{c.o()} = tf.reshape({x}, {c.lit(target)})"]
    if target is not None and c.shape(0) is not None:
        src = c.shape(0)
        if all(isinstance(src[k], int) for k, t in enumerate(target) if t == 0 and k < len(src)):
            fixed = [src[k] if t == 0 else t for k, t in enumerate(target)]
            return [f"{c.o()} = tf.reshape({x}, {c.lit(fixed)})"]
    out = c.out_shape(0)
    sym = [k for k, d in enumerate(out or ()) if not isinstance(d, int)]
    if out is not None and len(sym) == 1 and all(isinstance(d, int) and d > 0 for k, d in enumerate(out) if k != sym[0]):
        # a shape computed at run time whose result the IR knows up to one symbolic dim (a
        # batch): -1 there, the rest static, so TFLite's reshape sees at most one dynamic dim
        return [f"{c.o()} = tf.reshape({x}, {c.lit([-1 if k == sym[0] else d for k, d in enumerate(out)])})"]
    if c.attr("allowzero", 0):
        return [f"{c.o()} = tf.reshape({x}, {s})"]
    t, dims = c.tmp("target"), c.tmp("dims")  # 0 copies the input's dim (computed at run time)
    lines = [f"{t} = tf.cast(tf.reshape({s}, [-1]), tf.int64)",
             f"{dims} = tf.shape({x}, out_type=tf.int64)[:tf.size({t})]",
             f"{dims} = tf.pad({dims}, [[0, tf.size({t}) - tf.size({dims})]])"]
    full = f"tf.where(tf.equal({t}, 0), {dims}, {t})"
    if out is not None and any(isinstance(d, int) and d > 0 for d in out):
        # the dims the IR knows are stacked in as constants (the others read at run time), so
        # TensorFlow's shape inference keeps them: TFLite's conv needs its input channels static
        w = c.tmp("want")
        parts = [f"tf.constant({d}, tf.int64)" if isinstance(d, int) and d > 0 else f"{w}[{k}]" for k, d in enumerate(out)]
        return lines + [f"{w} = {full}", f"{c.o()} = tf.reshape({x}, tf.stack([{', '.join(parts)}]))"]
    return lines + [f"{c.o()} = tf.reshape({x}, {full})"]


@rule("flatten", check=needs_rank(0))
def flatten(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 1), r)
    s = c.shape(0)
    if all(isinstance(d, int) for d in s):
        lead = int(np.prod(s[:a], dtype=np.int64))
        return [f"{c.o()} = tf.reshape({c.i(0)}, {c.lit([lead, int(np.prod(s[a:], dtype=np.int64))])})"]
    return [f"{c.o()} = tf.reshape({c.i(0)}, tf.stack([tf.reduce_prod(tf.shape({c.i(0)})[:{a}]), -1]))"]


def _squeeze_check(n: Node) -> Refusal | None:
    if len(n.inputs) > 1 and n.inputs[1] is not None and n.inputs[1].const is None:
        return needs_rank(0)(n)
    return None


@rule("squeeze", check=_squeeze_check)
def squeeze(c: Any) -> list[str]:
    if not c.has(1):
        return [f"{c.o()} = tf.squeeze({c.i(0)})"]
    axes = const_ints(c.node, 1)
    if axes is None:  # runtime axes: drop those dims from the shape
        r = c.rank(0)
        ax = c.tmp("axes")
        return [f"{ax} = tf.cast(tf.reshape({c.i(1)}, [-1]), tf.int64)",
                f"{ax} = tf.where({ax} < 0, {ax} + {r}, {ax})",
                f"{c.o()} = tf.reshape({c.i(0)}, tf.boolean_mask(tf.shape({c.i(0)}, out_type=tf.int64), "
                f"tf.math.logical_not(tf.scatter_nd(tf.expand_dims({ax}, 1), tf.ones_like({ax}), [{r}]) > 0)))"]
    r = c.rank(0)
    axes = sorted(norm_axis(a, r) for a in axes) if r is not None else axes
    s = c.shape(0)
    if s is not None and sum(not isinstance(d, int) for d in s) > 1:
        # TFLite's SQUEEZE takes one unknown dim at most: keep the other dims of the run-time shape
        keep = [k for k in range(r) if k not in axes]
        return [f"{c.o()} = tf.reshape({c.i(0)}, tf.gather(tf.shape({c.i(0)}), {c.lit(keep)}))"]
    return [f"{c.o()} = tf.squeeze({c.i(0)}, axis={c.lit(axes)})"]


def _unsqueeze_check(n: Node) -> Refusal | None:
    axes = const_ints(n, 1)
    if axes is not None and len(axes) == 1:
        return None
    return needs_rank(0)(n)


@rule("unsqueeze", check=_unsqueeze_check)
def unsqueeze(c: Any) -> list[str]:
    axes = const_ints(c.node, 1)
    if axes is not None and len(axes) == 1 and c.rank(0) is None:
        return [f"{c.o()} = tf.expand_dims({c.i(0)}, {axes[0]})"]
    if axes is None:  # runtime axes: the output rank is static, the target shape is computed
        out_rank = c.out_shape(0) and len(c.out_shape(0))
        if not out_rank:
            n = (c.shape(1) or [None])[0]
            if not isinstance(n, int):
                c.unsupported("dynamic_shape", "unsqueeze with axes of unknown length")
            out_rank = c.rank(0) + n
        ax, mask, src = c.tmp("axes"), c.tmp("mask"), c.tmp("src")
        return [f"{ax} = tf.cast(tf.reshape({c.i(1)}, [-1]), tf.int64)",
                f"{ax} = tf.where({ax} < 0, {ax} + {out_rank}, {ax})",
                f"{mask} = tf.scatter_nd(tf.expand_dims({ax}, 1), tf.ones_like({ax}), [{out_rank}]) > 0",
                f"{src} = tf.maximum(tf.cumsum(tf.cast(tf.math.logical_not({mask}), tf.int64)) - 1, 0)",
                f"{c.o()} = tf.reshape({c.i(0)}, tf.where({mask}, tf.ones([{out_rank}], tf.int64), "
                f"tf.gather(tf.pad(tf.shape({c.i(0)}, out_type=tf.int64), [[0, 1]], constant_values=1), {src})))"]
    out_rank = c.rank(0) + len(axes)
    expr = c.i(0)
    for a in sorted(norm_axis(a, out_rank) for a in axes):
        expr = f"tf.expand_dims({expr}, {a})"
    return [f"{c.o()} = {expr if axes else f'tf.identity({expr})'}"]


@rule("split")
def split(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 0), r) if r is not None else int(c.attr("axis", 0))
    n = len(c.node.outputs)
    outs = c.outs() + ("," if n == 1 else "")
    sizes = const_ints(c.node, 1)
    if c.has(1) and sizes is None:
        return [f"{outs} = tf.split({c.i(0)}, {c.i(1)}, axis={a}, num={n})"]
    dim = c.shape(0)[a] if c.shape(0) is not None else None
    if sizes is None:
        if isinstance(dim, int) and dim % n:
            step = -(-dim // n)
            sizes = [step] * (n - 1) + [dim - step * (n - 1)]
        else:
            return [f"{outs} = tf.split({c.i(0)}, {n}, axis={a})"]
    if len(set(sizes)) == 1 and (not isinstance(dim, int) or sizes[0] * n == dim):
        # equal parts (a valid model's sizes sum to the dim): a count, which TFLite writes as
        # SPLIT (XNNPACK takes it; SPLIT_V it does not)
        return [f"{outs} = tf.split({c.i(0)}, {n}, axis={a})"]
    if r is not None and all(int(v) >= 0 for v in sizes):
        # unequal parts (so two or more): one slice each (TFLite's STRIDED_SLICE, which XNNPACK
        # takes; SPLIT_V it does not)
        ends = np.cumsum([0] + [int(v) for v in sizes]).tolist()
        lead = ":, " * a
        return [f"{outs} = " + ", ".join(f"{c.i(0)}[{lead}{b}:{e}]" for b, e in zip(ends, ends[1:]))]
    return [f"{outs} = tf.split({c.i(0)}, {c.lit(sizes)}, axis={a})"]


def _clamp32(v: int) -> int:
    return max(min(int(v), INT32_MAX), -INT32_MAX - 1)


def _full_rank(c: Any, r: int, axes: str, values: str, base: str) -> str:
    """A rank-long int64 vector: ``base`` with ``values`` scattered at ``axes``."""
    return f"tf.tensor_scatter_nd_update({base}, tf.expand_dims({axes}, 1), tf.cast(tf.reshape({values}, [-1]), tf.int64))"


def _axes_vector(c: Any, k: int, r: int, count_from: int) -> tuple[list[str], str]:
    """Normalized axes (input ``k``; absent: 0..len(input ``count_from``)-1) as an int64 tensor."""
    ax = c.tmp("axes")
    if c.has(k):
        src = f"tf.cast(tf.reshape({c.i(k)}, [-1]), tf.int64)"
    else:
        src = f"tf.range(tf.size({c.i(count_from)}, out_type=tf.int64))"
    return [f"{ax} = {src}", f"{ax} = tf.where({ax} < 0, {ax} + {r}, {ax})"], ax


def _slice_check(n: Node) -> Refusal | None:
    starts, axes = const_ints(n, 1), const_ints(n, 3) if len(n.inputs) > 3 and n.inputs[3] is not None else None
    if rank_of(n, 0) is None:
        if starts is None or const_ints(n, 2) is None or (len(n.inputs) > 4 and n.inputs[4] is not None
                                                            and const_ints(n, 4) is None):
            return Refusal("dynamic_shape", "slice of a value of unknown rank needs constant starts / ends / steps")
        if axes is not None and any(a < 0 for a in axes) and any(a >= 0 for a in axes):
            return Refusal("dynamic_shape", "slice of a value of unknown rank with mixed-sign axes")
    return None


@rule("slice", check=_slice_check)
def slice_(c: Any) -> list[str]:
    r = c.rank(0)
    starts, ends = const_ints(c.node, 1), const_ints(c.node, 2)
    steps = const_ints(c.node, 4) if c.has(4) else [1] * len(starts or [])
    axes = const_ints(c.node, 3) if c.has(3) else (list(range(len(starts))) if starts is not None else None)
    if r is None:  # unknown rank: index from the front (axes >= 0) or from the back (axes < 0)
        assert starts is not None and ends is not None and steps is not None and axes is not None
        n = max((a + 1 for a in axes), default=0) if all(a >= 0 for a in axes) else max(-a for a in axes)
        parts = [":"] * n
        for a, b, e, st in zip(axes, starts, ends, steps):
            parts[a if a >= 0 else n + a] = f"{_clamp32(b)}:{_clamp32(e)}:{st}"
        parts = parts if all(a >= 0 for a in axes) else ["..."] + parts
        return [f"{c.o()} = {c.i(0)}[{', '.join(parts)}]"]
    if None not in (starts, ends, steps, axes):
        parts = [":"] * r
        for a, b, e, s in zip(axes, starts, ends, steps):  # type: ignore[arg-type]
            parts[norm_axis(a, r)] = f"{_clamp32(b)}:{_clamp32(e)}:{s}"
        return [f"{c.o()} = {c.i(0)}[{', '.join(parts)}]"]
    lines, ax = _axes_vector(c, 3, r, 1)
    x = c.i(0)
    shape = f"tf.shape({x}, out_type=tf.int64)"
    begin = _full_rank(c, r, ax, c.i(1), f"tf.zeros([{r}], tf.int64)")
    end = _full_rank(c, r, ax, c.i(2), shape)
    stride = _full_rank(c, r, ax, c.i(4), f"tf.ones([{r}], tf.int64)") if c.has(4) else f"tf.ones([{r}], tf.int64)"
    return lines + [f"{c.o()} = tf.strided_slice({x}, {begin}, {end}, {stride})"]


def _wrapped(c: Any, idx: str, axis: int) -> str:
    """Negative indices wrapped (ONNX allows them; TensorFlow does not) by the data's size
    along ``axis``: a literal where it is known (a table's rows), else read at run time."""
    if c.node.inputs[1].const is not None and not (np.asarray(c.node.inputs[1].const) < 0).any():
        return idx
    shape = c.shape(0)
    size = shape[axis] if shape is not None and isinstance(shape[axis], int) else None
    if size is not None:
        return f"tf.where({idx} < 0, {idx} + {size}, {idx})"
    return f"tf.where({idx} < 0, {idx} + tf.cast(tf.shape({c.i(0)})[{axis}], {idx}.dtype), {idx})"


@rule("gather", check=needs_rank(0))
def gather(c: Any) -> list[str]:
    a = norm_axis(c.attr("axis", 0), c.rank(0))
    idx = _wrapped(c, c.i(1), a)
    return [f"{c.o()} = tf.gather({c.i(0)}, {idx}, axis={a})"]


def _coords(c: Any, idx: str, axis: int, rank: int, name: str) -> list[str]:
    """Full coordinates (…, rank) of every element of ``idx``, with ``idx`` on ``axis``."""
    grid = c.tmp("grid")
    return [f"{grid} = tf.meshgrid(*[tf.range(tf.shape({idx}, out_type=tf.int64)[k]) for k in range({rank})], "
            f"indexing='ij')",
            f"{grid}[{axis}] = tf.cast({idx}, tf.int64)",
            f"{name} = tf.stack({grid}, axis=-1)"]


@rule("gather_elements", check=needs_rank(0))
def gather_elements(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 0), r)
    idx, coords = c.tmp("idx"), c.tmp("coords")
    return ([f"{idx} = {_wrapped(c, c.i(1), a)}"] + _coords(c, idx, a, r, coords)
            + [f"{c.o()} = tf.gather_nd({c.i(0)}, {coords})"])


_SCATTER = {"none": "tf.tensor_scatter_nd_update", "add": "tf.tensor_scatter_nd_add",
            "max": "tf.tensor_scatter_nd_max", "min": "tf.tensor_scatter_nd_min"}


def _scatter_check(n: Node) -> Refusal | None:
    red = n.attrs.get("reduction", "none")
    if red not in _SCATTER and red != "mul":
        return Refusal("unsupported_attribute_value", f"no TensorFlow scatter with reduction {red!r}")
    return needs_rank(0, 1)(n)


def _scatter_mul(c: Any, data: str, idx: str, updates: str, depth: int) -> list[str]:
    """Multiply the data by the product of the updates per target (duplicates multiply):
    slices over the first ``depth`` axes, linearized, and tf.math.unsorted_segment_prod."""
    d, lead, lin, upd, prod = (c.tmp(s) for s in ("dims", "lead", "lin", "upd", "prod"))
    return [f"{d} = tf.shape({data}, out_type=tf.int64)",
            f"{lead} = {d}[:{depth}]",
            f"{lin} = tf.cast({idx}, tf.int64)",
            f"{lin} = tf.where({lin} < 0, {lin} + {lead}, {lin})",
            f"{lin} = tf.reshape(tf.linalg.matvec({lin}, tf.math.cumprod({lead}, exclusive=True, reverse=True)), [-1])",
            f"{upd} = tf.reshape({updates}, tf.concat([[-1], {d}[{depth}:]], 0))",
            f"{prod} = tf.math.unsorted_segment_prod({upd}, {lin}, tf.math.reduce_prod({lead}))",
            f"{c.o()} = {data} * tf.reshape({prod}, {d})"]


@rule("scatter_elements", check=_scatter_check)
def scatter_elements(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 0), r)
    idx, coords = c.tmp("idx"), c.tmp("coords")
    red = c.attr("reduction", "none")
    lines = [f"{idx} = {_wrapped(c, c.i(1), a)}"] + _coords(c, idx, a, r, coords)
    if red == "mul":
        return lines + _scatter_mul(c, c.i(0), coords, c.i(2), r)
    return lines + [f"{c.o()} = {_SCATTER[red]}({c.i(0)}, {coords}, {c.i(2)})"]


@rule("scatter_nd", check=_scatter_check)
def scatter_nd(c: Any) -> list[str]:
    red = c.attr("reduction", "none")
    if red == "mul":
        k = c.shape(1)[-1] if c.shape(1) else None
        if not isinstance(k, int):
            c.unsupported("dynamic_shape", "scatter_nd mul needs a static index depth")
        return _scatter_mul(c, c.i(0), c.i(1), c.i(2), k)
    return [f"{c.o()} = {_SCATTER[red]}({c.i(0)}, {c.i(1)}, {c.i(2)})"]


@rule("gather_nd")
def gather_nd(c: Any) -> list[str]:
    return [f"{c.o()} = tf.gather_nd({c.i(0)}, {c.i(1)}, batch_dims={int(c.attr('batch_dims', 0))})"]


def _pad_check(n: Node) -> Refusal | None:
    mode = n.attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        return Refusal("unsupported_attribute_value", f"pad mode {mode!r}")
    return needs_rank(0)(n)


@rule("pad", check=_pad_check)
def pad(c: Any) -> list[str]:
    r = c.rank(0)
    mode = c.attr("mode", "constant")
    pads = const_ints(c.node, 1)
    x, out = c.i(0), c.o()
    cv = f", constant_values={scalar(c.i(2))}" if c.has(2) and (c.shape(2) is None or 0 not in c.shape(2)) else ""
    axes_c = const_ints(c.node, 3) if c.has(3) else list(range(r))
    if (pads is None or axes_c is None) and mode in ("edge", "wrap"):  # gather with runtime indices
        lines, ax = _axes_vector(c, 3, r, 1) if c.has(3) else ([], f"tf.range({r}, dtype=tf.int64)")
        p, k, cur = c.tmp("pads"), c.tmp("k"), x
        zeros = f"tf.zeros([{r}], tf.int64)"
        lines += [f"{p} = tf.cast(tf.reshape({c.i(1)}, [-1]), tf.int64)", f"{k} = tf.size({ax})",
                  f"{p} = tf.stack([{_full_rank(c, r, ax, f'{p}[:{k}]', zeros)}, "
                  f"{_full_rank(c, r, ax, f'{p}[{k}:]', zeros)}], axis=1)"]
        for a in range(r):
            dim, pos, nxt = c.tmp(f"dim{a}"), c.tmp(f"pos{a}"), c.tmp(f"pad{a}")
            idx = f"tf.clip_by_value({pos}, 0, {dim} - 1)" if mode == "edge" else f"tf.math.floormod({pos}, {dim})"
            lines += [f"{dim} = tf.shape({cur}, out_type=tf.int64)[{a}]",
                      f"{pos} = tf.range(-{p}[{a}, 0], {dim} + {p}[{a}, 1])",
                      f"{nxt} = tf.gather({cur}, {idx}, axis={a})"]
            cur = nxt
        return lines + [f"{out} = tf.identity({cur})"]
    if pads is None or axes_c is None:  # runtime pads or axes: constant / reflect modes
        lines, ax = _axes_vector(c, 3, r, 1) if c.has(3) else ([], f"tf.range({r}, dtype=tf.int64)")
        p, k = c.tmp("pads"), c.tmp("k")
        zeros = f"tf.zeros([{r}], tf.int64)"
        lines += [f"{p} = tf.cast(tf.reshape({c.i(1)}, [-1]), tf.int64)", f"{k} = tf.size({ax})",
                  f"{p} = tf.stack([{_full_rank(c, r, ax, f'{p}[:{k}]', zeros)}, "
                  f"{_full_rank(c, r, ax, f'{p}[{k}:]', zeros)}], axis=1)"]
        tf_mode = "CONSTANT" if mode == "constant" else "REFLECT"
        return lines + [f"{out} = tf.pad({x}, {p}, mode={c.lit(tf_mode)}{cv if mode == 'constant' else ''})"]
    axes = [norm_axis(a, r) for a in axes_c]
    k = len(axes)
    begin, end = [0] * r, [0] * r
    for j, a in enumerate(axes):
        begin[a], end[a] = pads[j], pads[j + k]
    lines, cur = [], x
    if mode in ("constant", "reflect"):
        if any(p < 0 for p in begin + end):  # negative pads crop first
            parts = [f"{-b if b < 0 else 0}:{e if e < 0 else ''}" for b, e in zip(begin, end)]
            crop = c.tmp("crop")
            lines.append(f"{crop} = {cur}[{', '.join(parts)}]")
            cur = crop
        widths = [[max(b, 0), max(e, 0)] for b, e in zip(begin, end)]
        tf_mode = "CONSTANT" if mode == "constant" else "REFLECT"
        lines.append(f"{out} = tf.pad({cur}, {c.lit(widths)}, mode={c.lit(tf_mode)}{cv if mode == 'constant' else ''})")
        return lines
    shape = c.static_shape(0)
    for a in range(r):  # edge / wrap: gather along each padded axis
        if begin[a] == 0 and end[a] == 0:
            continue
        pos = np.arange(-begin[a], shape[a] + end[a])
        idx = np.clip(pos, 0, shape[a] - 1) if mode == "edge" else np.mod(pos, shape[a])
        nxt = c.tmp(f"pad{a}")
        lines.append(f"{nxt} = tf.gather({cur}, {c.lit(idx.tolist())}, axis={a})")
        cur = nxt
    lines.append(f"{out} = tf.identity({cur})")
    return lines


@rule("one_hot")
def one_hot(c: Any) -> list[str]:
    depth, idx, vals = c.tmp("depth"), c.tmp("idx"), c.tmp("values")
    r_out = (c.rank(0) or 0) + 1
    axis = norm_axis(c.attr("axis", -1), r_out) if c.rank(0) is not None else int(c.attr("axis", -1))
    return [f"{depth} = tf.cast(tf.reshape({c.i(1)}, [-1])[0], tf.int64)",
            f"{idx} = tf.cast({c.i(0)}, tf.int64)",
            f"{idx} = tf.where({idx} < 0, {idx} + {depth}, {idx})",
            f"{vals} = tf.reshape({c.i(2)}, [-1])",
            f"{c.o()} = tf.one_hot({idx}, tf.cast({depth}, tf.int32), on_value={vals}[1], off_value={vals}[0], "
            f"axis={axis}, dtype={c.tf(c.dtype(2))})"]


@rule("compress")
def compress(c: Any) -> list[str]:
    keep = f"tf.reshape(tf.where(tf.cast({c.i(1)}, tf.bool)), [-1])"
    a = c.attr("axis")
    if a is None:
        return [f"{c.o()} = tf.gather(tf.reshape({c.i(0)}, [-1]), {keep})"]
    return [f"{c.o()} = tf.gather({c.i(0)}, {keep}, axis={norm_axis(a, c.rank(0))})"]


@rule("reverse", check=needs_rank(0))
def reverse(c: Any) -> list[str]:
    r = c.rank(0)
    axes = c.attr("axes")
    axes = list(range(r)) if axes is None else [norm_axis(a, r) for a in axes]
    return [f"{c.o()} = tf.reverse({c.i(0)}, axis={c.lit(axes)})"]


@rule("non_zero", check=needs_rank(0))
def non_zero(c: Any) -> list[str]:
    out = c.tf(c.out_dtype())
    if c.rank(0) == 0:
        return [f"{c.o()} = tf.zeros([0, tf.cast(tf.cast({c.i(0)}, tf.bool), tf.int32)], dtype={out})"]
    return [f"{c.o()} = tf.cast(tf.transpose(tf.where(tf.cast({c.i(0)}, tf.bool))), {out})"]


@rule("trilu")
def trilu(c: Any) -> list[str]:
    x = c.i(0)
    k = scalar(c.i(1), "tf.int64") if c.has(1) else "0"
    rows, cols = c.tmp("rows"), c.tmp("cols")
    cmp = ">=" if c.attr("upper", 1) else "<="
    return [f"{rows} = tf.range(tf.shape({x}, out_type=tf.int64)[-2])[:, None]",
            f"{cols} = tf.range(tf.shape({x}, out_type=tf.int64)[-1])[None, :]",
            f"{c.o()} = tf.where({cols} - {rows} {cmp} {k}, {x}, tf.zeros_like({x}))"]


@rule("eye_like")
def eye_like(c: Any) -> list[str]:
    x = c.i(0)
    dt = c.enum_dtype(c.attr("dtype")) if c.attr("dtype") is not None else c.dtype(0)
    rows, cols = c.tmp("rows"), c.tmp("cols")
    return [f"{rows} = tf.range(tf.shape({x}, out_type=tf.int64)[0])[:, None]",
            f"{cols} = tf.range(tf.shape({x}, out_type=tf.int64)[1])[None, :]",
            f"{c.o()} = tf.cast(tf.equal({cols} - {rows}, {int(c.attr('k', 0))}), {c.tf(dt)})"]


@rule("center_crop_pad", check=static_dims(0))
def center_crop_pad(c: Any) -> list[str]:
    shape = list(c.static_shape(0))
    r = len(shape)
    axes = c.attr("axes")
    axes = list(range(r)) if axes is None else [norm_axis(a, r) for a in axes]
    if c.const(1) is None:  # runtime target shape: crop by a gathered window, then pad
        cur, tgt = c.i(0), c.tmp("target")
        lines = [f"{tgt} = tf.cast(tf.reshape({c.i(1)}, [-1]), tf.int32)"]
        for k, a in enumerate(axes):
            t, nxt, extra = c.tmp(f"t{a}"), c.tmp(f"ccp{a}"), c.tmp(f"extra{a}")
            dim = shape[a]
            pad_rows = [[0, 0]] * r
            lines += [f"{t} = {tgt}[{k}]",
                      f"{nxt} = tf.gather({cur}, tf.range(tf.maximum({dim} - {t}, 0) // 2, tf.maximum({dim} - {t}, 0) // 2 "
                      f"+ tf.minimum({t}, {dim})), axis={a})",
                      f"{extra} = tf.maximum({t} - {dim}, 0)",
                      f"{nxt} = tf.pad({nxt}, tf.tensor_scatter_nd_update(tf.constant({c.lit(pad_rows)}, tf.int32), "
                      f"[[{a}]], tf.stack([tf.stack([{extra} // 2, {extra} - {extra} // 2])])))"]
            cur = nxt
        return lines + [f"{c.o()} = tf.identity({cur})"]
    target = [int(v) for v in np.asarray(c.const(1)).reshape(-1)]
    crop, pads = [":"] * r, [[0, 0] for _ in range(r)]
    for a, t in zip(axes, target):
        dim = shape[a]
        if t < dim:
            start = (dim - t) // 2
            crop[a] = f"{start}:{start + t}"
        elif t > dim:
            pads[a] = [(t - dim) // 2, t - dim - (t - dim) // 2]
    return [f"{c.o()} = tf.pad({c.i(0)}[{', '.join(crop)}], {c.lit(pads)})"]
