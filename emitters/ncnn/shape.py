"""ncnn rules for data movement over constant positions: ``slice`` and ``gather`` as
``Crop`` layers (ONNX axes counted on the full form, outermost first)."""
from __future__ import annotations

import numpy as np

from .codegen import NodeEmit, form_shape, live, raw, refuse, shape_params, tagged
from .registry import rule


def _array(key: int, values: list[int]) -> str:
    return f"{-23300 - key}={len(values)}," + ",".join(str(int(v)) for v in values)


def crop(e: NodeEmit, x: str, starts: list[int], ends: list[int], axes: list[int]) -> str:
    y = e.top()
    e.add("Crop", [x], [y], [_array(9, starts), _array(10, ends), _array(11, axes)])
    return y


@rule("slice")
def slice_(e: NodeEmit) -> None:
    shape = e.shape(0)
    r = len(shape)
    starts, ends = e.need_const(1, "starts"), e.need_const(2, "ends")
    axes = e.need_const(3, "axes") if e.value(3) is not None else np.arange(len(starts))
    steps = e.need_const(4, "steps") if e.value(4) is not None else np.ones(len(starts), np.int64)
    s_out, e_out, a_out, strided, flips = [], [], [], [], []
    for s, t, a, k in zip(starts.tolist(), ends.tolist(), axes.tolist(), steps.tolist()):
        a = int(a) % r
        n = shape[a]
        if k == -1 and min(max(s + n if s < 0 else s, -1), n - 1) == n - 1 \
                and min(max(t + n if t < 0 else t, -1), n - 1) == -1:  # bounds clamped to [-1, n - 1]
            flips.append(a)  # the whole axis reversed: ncnn's Flip
            continue
        if k < 1:
            raise refuse("unsupported_attribute_value", f"slice with step {k}: ncnn's Crop has no steps")
        s = min(max(s + n if s < 0 else s, 0), n)
        t = min(max(t + n if t < 0 else t, 0), n)
        if k > 1:
            strided.append((a, s, t, k))
            continue
        if (s, t) == (0, n):
            continue
        s_out.append(s)
        e_out.append(t)
        a_out.append(a)
    touched = a_out + [st[0] for st in strided] + flips
    batch = len(shape) >= 2 and shape[0] == 1 and all(a > 0 for a in touched)
    form = "B" if batch and (strided or e.net.forms(e.node.inputs[0]) == {"B"}) else "F"
    kept = [a for a in range(r) if a > 0 or form != "B"]  # the blob's dims, by IR axis
    if form == "F" and r > 4:  # five dims: on the squeezed blob when the slice touches no dim of 1
        kept = [a for a in range(r) if shape[a] != 1]
        if all(a in kept for a in touched):
            form = "S"
    pos = {a: i for i, a in enumerate(kept)}
    x = e.input(0, form)
    cur = [shape[a] for a in kept]
    if a_out:
        x = crop(e, x, s_out, e_out, [pos[a] for a in a_out])
        for s, t, a in zip(s_out, e_out, a_out):
            cur[pos[a]] = t - s
    for a, s, t, k in strided:
        x = _every_kth(e, x, cur, pos[a], s, t, k)
    if flips:
        y = e.top()
        e.add("Flip", [x], [y], [_array(0, [pos[a] for a in flips])])
        x = y
    if not a_out and not strided and not flips:  # the whole tensor
        y = e.top()
        e.add("Noop", [x], [y])
        x = y
    e.output(0, x, form)


def _every_kth(e: NodeEmit, x: str, cur: list[int], axis: int, s: int, t: int, k: int) -> str:
    """Elements ``s, s+k, ...`` below ``t`` of ``axis``: the axis split into (count, k) by a
    ``Reshape``, the first of each k kept (``Crop``), merged back (ncnn's Crop has no steps)."""
    count = len(range(s, t, k))
    if count == 0:
        raise refuse("rank_limit", "a strided slice with no element: ncnn has no empty blobs")
    offset = s % k
    base = s - offset  # groups of k from ``base``, the element ``offset`` of each kept
    if base + count * k > cur[axis] or len(cur) + 1 > 4:
        raise refuse("unsupported_attribute_value", f"slice with step {k}: the steps do not tile the axis, or the "
                                                    "split axis needs a fifth dim (ncnn's Crop has no steps)")
    if (base, base + count * k) != (0, cur[axis]):
        x = crop(e, x, [base], [base + count * k], [axis])
    split = cur[:axis] + [count, k] + cur[axis + 1:]
    r1, c1, r2 = e.top(), e.top(), e.top()
    e.add("Reshape", [x], [r1], shape_params(tuple(split)))
    e.add("Crop", [r1], [c1], [_array(9, [offset]), _array(10, [offset + 1]), _array(11, [axis + 1])])
    cur[axis] = count
    e.add("Reshape", [c1], [r2], shape_params(tuple(cur)))
    return r2


@rule("gather")
def gather(e: NodeEmit) -> None:
    """Constant indices: one ``Crop`` per run of consecutive indices, ``Concat`` along the
    axis, then a ``Reshape`` to the output's shape (a scalar index drops the axis)."""
    shape = e.shape(0)
    r = len(shape)
    axis = int(e.attr("axis") or 0) % r
    if e.const(1) is None and e.const(0) is not None and r == 2 and axis == 0:
        return _lookup(e)
    idx = e.need_const(1, "indices")
    _gather_positions(e, axis, np.asarray(idx).reshape(-1).tolist())


@rule("gather_elements")
def gather_elements(e: NodeEmit) -> None:
    """Constant indices that vary along the axis only (every row picks the same positions) are a
    Gather of those positions; a constant line (every other dim 1) read by run-time indices is a
    lookup of its values (transformers' RoBERTa: its token-type buffer gathered by the position
    ids). Other indices are refused: ncnn has no per-element gather."""
    shape = e.shape(0)
    axis = int(e.attr("axis") or 0) % len(shape)
    idx = e.const(1)
    data = e.const(0)
    if idx is None and data is not None and all(d == 1 for i, d in enumerate(shape) if i != axis) and \
            all(d == 1 for i, d in enumerate(e.shape(1)) if i != axis):
        return _lookup(e, np.asarray(data).reshape(-1, 1))  # one line of a constant: a lookup by its positions
    if idx is None:
        raise refuse("requires_constant_input", "gather_elements by run-time indices: ncnn has no per-element gather")
    idx = np.asarray(idx)
    rows = np.moveaxis(idx, axis, -1).reshape(-1, idx.shape[axis]) if idx.size else idx.reshape(0, 0)
    same = idx.ndim == len(shape) and all(idx.shape[d] == shape[d] for d in range(len(shape)) if d != axis)
    if not same or not rows.size or not (rows == rows[0]).all():
        raise refuse("unsupported_attribute_value", "gather_elements whose constant indices differ between rows: "
                                                    "ncnn has no per-element gather")
    _gather_positions(e, axis, rows[0].tolist())


def _gather_positions(e: NodeEmit, axis: int, positions: list) -> None:
    """The input's ``positions`` along ``axis``: a ``Crop`` per run of consecutive positions,
    ``Concat``, then a ``Reshape`` to the output's shape."""
    shape = e.shape(0)
    flat = [int(i) + shape[axis] if i < 0 else int(i) for i in positions]
    if not flat:
        raise refuse("rank_limit", "gather of no indices: ncnn has no empty blobs")
    runs: list[list[int]] = []
    for i in flat:
        if runs and i == runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([i, i + 1])
    x = e.input(0, "F")
    parts = [crop(e, x, [s], [t], [axis]) if (s, t) != (0, shape[axis]) else x for s, t in runs]
    if len(parts) > 1:
        y = e.top()
        e.add("Concat", parts, [y], [f"0={axis}"])
    else:
        y = parts[0]
    out = e.out_shape(0)
    form = "S" if len(out) > 4 else "F"  # five dims out (indices of two dims): the dims other than 1
    gathered = shape[:axis] + (len(flat),) + shape[axis + 1:]
    if tuple(out) != gathered or y == x or form == "S":
        z = e.top()
        e.add("Reshape", [y], [z], shape_params(form_shape(e.node.outputs[0], form)))
        y = z
    e.output(0, y, form)


@rule("dropout")
def dropout(e: NodeEmit) -> None:
    """Inference: the identity (``Noop``); the mask output is not written."""
    if len(e.node.outputs) > 1 and live(e.node.outputs[1]):
        raise refuse("unsupported_attribute_value", "dropout's mask: ncnn's Dropout has none")
    form = "B" if e.net.forms(e.node.inputs[0]) == {"B"} else "F"
    y = e.top()
    e.add("Noop", [e.input(0, form)], [y])
    e.output(0, y, form)


@rule("cast", "cast_like")
def cast(e: NodeEmit) -> None:
    """Between the dtypes a blob holds as float32 values: to float32, to a wider integer, to
    int32 (which holds every integer a float32 blob holds exactly, |v| ≤ 2²⁴: an int64 model's
    position ids narrowed) or from bool the values stay (``Noop``); float32 to an integer truncates toward zero
    (``UnaryOp`` trunc); to bool, |x| > 0 (``UnaryOp`` abs, ``Threshold``); every other cast
    (narrowing, to dtypes a blob cannot hold) is refused with its dtypes."""
    src, dst = e.node.inputs[0].type.dtype, e.node.outputs[0].type.dtype
    form = "B" if e.net.forms(e.node.inputs[0]) == {"B"} else "F"
    ints = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
    if src == dst or dst == "float32" and src in ints + ("bool",) or (
            src in ints and dst in ints and (np.can_cast(src, dst, "safe") or dst == "int32")) or (
            src == "bool" and dst in ints):
        y = e.top()
        e.add("Noop", [e.input(0, form)], [y])
    elif src == "float32" and dst in ints:
        y = e.top()
        e.add("UnaryOp", [e.input(0, form)], [y], ["0=19"])
    elif dst == "bool" and src in ints + ("float32",):  # x != 0 as a 0/1 mask: |x| > 0
        a, y = e.top(), e.top()
        e.add("UnaryOp", [e.input(0, form)], [a], ["0=0"])
        e.add("Threshold", [a], [y], ["0=0.0"])
    else:
        raise refuse("unsupported_dtype", f"cast {src} to {dst}: an ncnn blob holds float32 values")
    e.output(0, y, form)


@rule("reshape", "flatten", "squeeze", "unsqueeze")
def reshape(e: NodeEmit) -> None:
    """To the output's static shape: one ``Reshape`` (ncnn's row-major order is the IR's);
    the batch-dropped form when the input is held so and the output keeps a batch of 1, or
    when the output has five dims; squeezed (``S``) when a five-dim output has no batch of 1.
    The input is read in a form it is held in (any blob of it has the same row-major data)."""
    out = e.out_shape(0)
    v = e.node.inputs[0]
    batch_kept = len(out) >= 2 and out[0] == 1 and (e.net.forms(v) == {"B"} or len(out) > 4)
    form = "B" if batch_kept else ("S" if len(out) > 4 else "F")
    want = form_shape(e.node.outputs[0], form)
    same = [b for b in e.net.views.get(id(v), []) if e.net.shapes.get(b) == want]
    if same:  # a blob of the input already has this shape (a pooling's 1-D output): no layer
        e.output(0, same[0], form)
        return
    x = e.input(0, held_form(e, v))
    y = e.top()
    e.add("Reshape", [x], [y], shape_params(want))
    e.output(0, y, form)


def held_form(e: NodeEmit, v) -> str:
    """A form to read ``v`` in without a layer of its own: one it is held in (``F`` first), else
    ``F`` (a constant, written in it)."""
    forms = e.net.forms(v)
    return next((f for f in ("F", "B", "S") if f in forms), "F")


@rule("transpose")
def transpose(e: NodeEmit) -> None:
    """A permutation that keeps a batch of 1 first, on a value held without it: ``Permute`` of
    the item (a channels-last model's input and heads). Else the table's ``Permute`` up to four
    dims; past four, the permutation of the dims other than 1 on the squeezed blobs (``S``), when
    at most four are left (a permutation that moves only unit dims is no layer at all)."""
    shape, out = e.shape(0), e.out_shape(0)
    perm = e.attr("perm")
    perm = list(range(len(shape)))[::-1] if perm is None else [int(p) % len(shape) for p in perm]
    if 3 <= len(shape) <= 4 and shape[0] == 1 and perm[0] == 0 and "B" in e.net.forms(e.node.inputs[0]):
        # the batch of 1 stays first: permute the item (no reshapes around it)
        _permute(e, "B", [p - 1 for p in perm[1:]])
        return
    if len(shape) <= 4 and len(out) <= 4:
        e.snippet()
        return
    keep = [i for i, d in enumerate(shape) if d != 1]
    moved = [keep.index(p) for p in perm if shape[p] != 1]
    if len(keep) > 4:
        raise refuse("rank_limit", f"transpose of {list(shape)}: {len(keep)} dims other than 1, an ncnn blob "
                                   "has at most 4")
    _permute(e, "S", moved)


def _permute(e: NodeEmit, form: str, perm: list[int]) -> None:
    """The input read in ``form``, its dims permuted by ``perm`` (no layer when it keeps their order)."""
    from translator.proofs.ncnn import _order

    x = e.input(0, form)
    if perm == sorted(perm):
        e.output(0, x, form)
        return
    y = e.top()
    e.add("Permute", [x], [y], [f"0={_order(perm, len(perm))}"])
    e.output(0, y, form)


@rule("expand")
def expand(e: NodeEmit) -> None:
    """The table's ``Reshape`` + ``Tile`` up to four dims. Five dims with a batch of 1 on both
    sides are tiled on the batch-less blobs (``B``): a grouped-query attention's repeat of its
    key/value heads, [1, kv, 1, S, D] to [1, kv, rep, S, D] (Llama, Mistral, Qwen2)."""
    shape, out = e.shape(0), e.out_shape(0)
    if len(out) <= 4:
        e.snippet()
        return
    if len(shape) != len(out) or len(out) > 5 or shape[0] != 1 or out[0] != 1:
        raise refuse("rank_limit", f"expand of {list(shape)} to {list(out)}: an ncnn blob has at most 4 dims (five "
                                   "are written with a batch of 1 on both sides)")
    reps = [t if d == 1 else 1 for d, t in zip(shape[1:], out[1:])]
    x, y = e.input(0, "B"), e.top()
    e.add("Tile", [x], [y], [_array(2, reps)])
    e.output(0, y, "B")


@rule("split")
def split(e: NodeEmit) -> None:
    """One ``Slice`` along the axis, each output's size read from its static shape."""
    shape = e.shape(0)
    axis = int(e.attr("axis") or 0) % len(shape)
    sizes = [e.out_shape(k)[axis] for k in range(len(e.node.outputs))]
    if 0 in sizes:
        raise refuse("rank_limit", "split into an empty part: ncnn has no empty blobs")
    x = e.input(0, "F")
    tops = [e.top() for _ in sizes]
    e.add("Slice", [x], tops, [f"-23300={len(sizes)}," + ",".join(str(n) for n in sizes), f"1={axis}"])
    for k, t in enumerate(tops):
        e.output(k, t, "F")


def _held_dropped(e: NodeEmit, axis: int) -> bool:
    """Whether the node can run on its inputs without their batch of 1: every run-time input
    is held so, and the axis is not the batch."""
    live = [v for v in e.node.inputs if v is not None and not v.is_const]
    return axis > 0 and bool(live) and all(e.net.forms(v) == {"B"} for v in live) and \
        all(len(static := e.shape(i)) >= 2 and static[0] == 1 for i, v in enumerate(e.node.inputs) if v is not None)


@rule("concat")
def concat(e: NodeEmit) -> None:
    """``Concat`` along the axis; without the batch of 1 (the axis one less) when the inputs
    are held so (a CNN's channel concatenation stays in the convolutions' form)."""
    r = len(e.shape(0))
    axis = int(e.attr("axis")) % r
    form = "B" if _held_dropped(e, axis) else "F"
    ins = [e.input(i, form) for i, v in enumerate(e.node.inputs) if v is not None]
    y = e.top()
    e.add("Concat", ins, [y], [f"0={axis - (form == 'B')}"])
    e.output(0, y, form)


@rule("softmax")
def softmax(e: NodeEmit) -> None:
    """``Softmax`` along the axis; without the batch of 1 when the input is held so."""
    r = len(e.shape(0))
    axis = int(e.attr("axis") if e.attr("axis") is not None else -1) % r
    form = "B" if _held_dropped(e, axis) else "F"
    y = e.top()
    e.add("Softmax", [e.input(0, form)], [y], [f"0={axis - (form == 'B')}", "1=1"])
    e.output(0, y, form)


#: the largest table a lookup by run-time indices is written for (``_lookup``: indices × rows products)
LOOKUP_ROWS = 4096


def _lookup(e: NodeEmit, table: np.ndarray | None = None) -> None:
    """Rows of a constant table (``table``, else the node's input 0) by run-time indices (an embedding). Indices that are a model
    input (token ids): ncnn's ``Embed`` on the input fed as int32 words (``Net.word_blob``).
    Indices computed in the network are float32 values, which ``Embed`` cannot read: each
    index is compared with every row number (a 0/1 mask: ``BinaryOp`` sub, ``UnaryOp`` abs,
    ``Threshold``, ``BinaryOp`` 1 - x) and the mask multiplies the table (``InnerProduct``)."""
    table = np.asarray(e.const(0) if table is None else table, np.float32)
    rows, width = table.shape
    idx_shape = e.shape(1)
    count = int(np.prod(idx_shape)) if idx_shape else 1
    first = len(e.net.layers)
    words = e.net.word_blob(e.node.inputs[1], rows)
    if e.start == first:  # layers moving the words were tried on their own: this node's trial starts after them
        e.start = len(e.net.layers)
    if words is not None:
        out, y = e.top(), e.top()
        e.add("Embed", [words], [out], [f"0={width}", f"1={rows}", "2=0", f"3={table.size}"], tagged(table))
        e.add("Reshape", [out], [y], shape_params(tuple(e.out_shape(0)) or (1,)))
        e.output(0, y, "F")
        return
    if rows > LOOKUP_ROWS:
        raise refuse("requires_constant_input", f"gather from a table of {rows} rows by indices computed in the "
                                                f"network: ncnn's Embed reads int32 words, which only a model input "
                                                f"is fed as (the lookup by float32 values is written up to "
                                                f"{LOOKUP_ROWS} rows)")
    mask, out = _one_hot(e, e.input(1, "F"), count, rows), e.top()
    e.add("InnerProduct", [mask], [out], [f"0={width}", "1=0", f"2={table.size}"], tagged(table.T.copy()))
    y = e.top()
    e.add("Reshape", [out], [y], shape_params(tuple(e.out_shape(0)) or (1,)))
    e.output(0, y, "F")


def _one_hot(e: NodeEmit, idx: str, count: int, rows: int) -> str:
    """A (count, rows) 0/1 mask of index == row number, the ``count`` indices held as float32
    values in ``idx`` (a negative one counts from the end, as ONNX: i + rows where i < 0)."""
    col, wrapped, numbers, diff, mag, far, mask = (e.top() for _ in range(7))
    e.add("Reshape", [idx], [col], shape_params((count, 1)))
    neg, neg_mask, shift = e.top(), e.top(), e.top()
    e.add("BinaryOp", [col], [neg], ["0=2", "1=1", "2=-1.0"])
    e.add("Threshold", [neg], [neg_mask], ["0=0.0"])
    e.add("BinaryOp", [neg_mask], [shift], ["0=2", "1=1", f"2={float(rows)!r}"])
    e.add("BinaryOp", [col, shift], [wrapped], ["0=0"])
    e.add("MemoryData", [], [numbers], shape_params((1, rows)), raw(np.arange(rows, dtype=np.float32)))
    e.add("BinaryOp", [wrapped, numbers], [diff], ["0=1"])
    e.add("UnaryOp", [diff], [mag], ["0=0"])
    e.add("Threshold", [mag], [far], ["0=0.5"])
    e.add("BinaryOp", [far], [mask], ["0=7", "1=1", "2=1.0"])
    return mask


@rule("one_hot")
def one_hot(e: NodeEmit) -> None:
    """The new axis last: the 0/1 mask of ``_one_hot`` (depth a constant), scaled to the on and
    off values (constants), reshaped to the output; the new axis elsewhere is refused."""
    depth = int(np.asarray(e.need_const(1, "depth")).reshape(-1)[0])
    values = np.asarray(e.need_const(2, "values"), np.float64).reshape(-1)
    out = e.out_shape(0)
    axis = int(e.attr("axis") if e.attr("axis") is not None else -1) % len(out)
    if axis != len(out) - 1:
        raise refuse("unsupported_attribute_value", f"one_hot along axis {axis} of {len(out)}: written with the "
                                                    "new axis last only")
    idx_shape = e.shape(0)
    count = int(np.prod(idx_shape)) if idx_shape else 1
    mask = _one_hot(e, e.input(0, "F"), count, depth)
    off, on = float(values[0]), float(values[1])
    if (off, on) != (0.0, 1.0):
        t = e.top()
        e.add("BinaryOp", [mask], [t], ["0=2", "1=1", f"2={on - off!r}"])
        mask = t
        if off:
            t = e.top()
            e.add("BinaryOp", [mask], [t], ["0=0", "1=1", f"2={off!r}"])
            mask = t
    y = e.top()
    e.add("Reshape", [mask], [y], shape_params(tuple(out)))
    e.output(0, y, "F")
