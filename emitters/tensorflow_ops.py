"""Python lowerings of IR ops to TensorFlow source, for ops one snippet line cannot express.

A lowering gets a ``NodeCtx`` (``emitters/tensorflow.py``: inputs as expressions, outputs
as identifiers, attributes with the signature's defaults, ``lit`` for literals, ``weight``
for derived constants) and returns the lines of code that compute the node's outputs.
``ACCEPTS`` holds per-op checks run at lowering time: a node they refuse is decomposed
through the table instead, or refused with their reason code. Spatial, normalization and
control-flow ops live in ``tensorflow_nn.py``, the newer ONNX ops in ``tensorflow_extra.py``;
all three register into ``OPS``.

Used by the TensorFlow and the TFLite emitters (TFLite converts the TensorFlow module).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from translator.ir import Node

Lowering = Callable[[Any], "list[str]"]
Check = Callable[[Node], "tuple[str, str] | None"]
OPS: dict[str, Lowering] = {}
ACCEPTS: dict[str, Check] = {}
INT32_MAX = 2**31 - 1


def lowering(*op_ids: str, accepts: Check | None = None) -> Callable[[Lowering], Lowering]:
    def deco(fn: Lowering) -> Lowering:
        for op in op_ids:
            OPS[op] = fn
            if accepts is not None:
                ACCEPTS[op] = accepts
        return fn

    return deco


def accepts(node: Node) -> tuple[str, str] | None:
    """(reason code, detail) when the TensorFlow code for this node cannot be generated."""
    for v in node.outputs:
        if v.type.kind != "tensor":
            return "unsupported_dtype", f"{v.type.kind} values have no TensorFlow mapping here"
    for v in node.inputs:
        if v is not None and v.type.kind != "tensor":
            return "unsupported_dtype", f"{v.type.kind} values have no TensorFlow mapping here"
    check = ACCEPTS.get(node.op)
    return check(node) if check is not None else None


_WIDEN_CATEGORIES = ("Math", "Activation", "Normalization", "Reduction", "Matrix Multiplication", "Pooling",
                     "Trigonometric", "Loss", "Attention", "Signal", "Imaging", "Recurrent", "Aggregate")
_NO_WIDEN = frozenset({"identity", "neg", "abs", "sign", "reduce_max", "reduce_min", "max", "min", "max_pool",
                       "global_max_pool", "clip", "relu", "ceil", "floor", "round", "if", "loop", "scan"})


def widens(node: Node, tables: Any) -> bool:
    """Arithmetic on float16/bfloat16 runs in float32 and is rounded back after the op."""
    if node.op in _NO_WIDEN:
        return False
    op = tables.ops.get(node.op)
    if op is None or not any(k in op.category for k in _WIDEN_CATEGORIES):
        return False
    return any(v is not None and v.type.dtype in ("float16", "bfloat16") for v in node.inputs)


def channels_last(node: Node) -> bool:
    """Nodes TensorFlow runs channels-last (the predicate of the layout pass)."""
    from .tensorflow_nn import channels_last as nn_channels_last

    return nn_channels_last(node)


# ----------------------------------------------------------------------------- helpers
def is_int(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("int") or dtype.startswith("uint"))


def is_float(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("float") or dtype == "bfloat16")


def norm_axis(a: int, rank: int) -> int:
    return int(a) + rank if int(a) < 0 else int(a)


def const_ints(node: Node, k: int) -> list[int] | None:
    v = node.inputs[k] if k < len(node.inputs) else None
    if v is None or v.const is None:
        return None
    return [int(x) for x in np.asarray(v.const).reshape(-1)]


def rank_of(node: Node, k: int = 0) -> int | None:
    v = node.inputs[k] if k < len(node.inputs) else None
    return None if v is None else v.type.rank


def needs_rank(*ks: int) -> Check:
    def check(n: Node) -> tuple[str, str] | None:
        for k in ks:
            if k < len(n.inputs) and n.inputs[k] is not None and rank_of(n, k) is None:
                return "dynamic_shape", f"input {k} has an unknown rank"
        return None

    return check


def needs_const(*ks: int, rank: int | None = 0) -> Check:
    def check(n: Node) -> tuple[str, str] | None:
        for k in ks:
            if k < len(n.inputs) and n.inputs[k] is not None and n.inputs[k].const is None:  # type: ignore[union-attr]
                return "requires_constant_input", f"input {k} must be a constant for TensorFlow"
        if rank is not None and rank_of(n, rank) is None:
            return "dynamic_shape", f"input {rank} has an unknown rank"
        return None

    return check


def both(*checks: Check) -> Check:
    def check(n: Node) -> tuple[str, str] | None:
        for c in checks:
            why = c(n)
            if why is not None:
                return why
        return None

    return check


def scalar(expr: str, dtype: str | None = None) -> str:
    """A scalar from a 0-D or 1-element tensor expression (optionally cast)."""
    s = f"tf.reshape({expr}, [])"
    return f"tf.cast({s}, {dtype})" if dtype else s


# ----------------------------------------------------------------------------- elementwise
@lowering("div")
def div(c: Any) -> list[str]:
    fn = "tf.truncatediv" if is_int(c.dtype(0)) else "tf.math.divide"
    return [f"{c.o()} = {fn}({c.i(0)}, {c.i(1)})"]


@lowering("gelu")
def gelu(c: Any) -> list[str]:
    return [f"{c.o()} = tf.nn.gelu({c.i(0)}, approximate={c.lit(c.attr('approximate') == 'tanh')})"]


@lowering("is_inf")
def is_inf(c: Any) -> list[str]:
    pos, neg = bool(c.attr("detect_positive", 1)), bool(c.attr("detect_negative", 1))
    x = c.i(0)
    if pos and neg:
        return [f"{c.o()} = tf.math.is_inf({x})"]
    if pos or neg:
        cmp = "tf.math.greater" if pos else "tf.math.less"
        return [f"{c.o()} = tf.math.logical_and(tf.math.is_inf({x}), {cmp}({x}, 0))"]
    return [f"{c.o()} = tf.zeros_like({x}, dtype=tf.bool)"]


@lowering("bit_count")
def bit_count(c: Any) -> list[str]:
    if c.dtype(0) == "bool":
        return [f"{c.o()} = tf.identity({c.i(0)})"]
    return [f"{c.o()} = tf.cast(tf.raw_ops.PopulationCount(x={c.i(0)}), {c.tf(c.dtype(0))})"]


@lowering("bit_shift_left", "bit_shift_right")
def bit_shift(c: Any) -> list[str]:
    """Shifts of < 0 or >= the bit width give 0 (left) or the sign fill (right), as the reference."""
    x, y = c.i(0), c.i(1)
    bits = int(np.dtype(c.dtype(0)).itemsize * 8)
    valid, shift = c.tmp("valid"), c.tmp("shift")
    left = c.node.op == "bit_shift_left"
    fn = "tf.bitwise.left_shift" if left else "tf.bitwise.right_shift"
    fill = f"tf.zeros_like({shift})" if left or c.dtype(0).startswith("uint") else \
        f"tf.where({x} < 0, tf.ones_like({shift}) * -1, tf.zeros_like({shift}))"
    return [f"{valid} = tf.math.logical_and({y} >= 0, {y} < {bits})",
            f"{shift} = {fn}({x}, tf.where({valid}, {y}, tf.zeros_like({y})))",
            f"{c.o()} = tf.where({valid}, {shift}, {fill})"]


_CHAIN = {"sum": "tf.math.add", "max": "tf.math.maximum", "min": "tf.math.minimum"}


@lowering("sum", "max", "min")
def chain(c: Any) -> list[str]:
    """Variadic with broadcasting: a chain of the binary op."""
    fn = _CHAIN[c.node.op]
    xs = [c.i(k) for k in range(len(c.node.inputs)) if c.has(k)]
    expr = xs[0] if len(xs) > 1 else f"tf.identity({xs[0]})"
    for x in xs[1:]:
        expr = f"{fn}({expr}, {x})"
    return [f"{c.o()} = {expr}"]


@lowering("hardmax", accepts=needs_rank(0))
def hardmax(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", -1), r)
    x = c.i(0)
    src = x if is_float(c.dtype(0)) or is_int(c.dtype(0)) else f"tf.cast({x}, tf.float32)"
    return [f"{c.o()} = tf.one_hot(tf.math.argmax({src}, axis={a}), tf.shape({x})[{a}], axis={a}, "
            f"dtype={c.tf(c.out_dtype())})"]


@lowering("clip")
def clip(c: Any) -> list[str]:
    expr = c.i(0)
    if c.has(1):
        expr = f"tf.math.maximum({expr}, {c.i(1)})"
    if c.has(2):
        expr = f"tf.math.minimum({expr}, {c.i(2)})"
    return [f"{c.o()} = {expr if expr != c.i(0) else f'tf.identity({expr})'}"]


def _cast_check(n: Node) -> tuple[str, str] | None:
    src = n.inputs[0].type.dtype if n.inputs[0] is not None else None
    dst = n.outputs[0].type.dtype
    if dst == "string" and src is not None and is_float(src):
        return "unsupported_dtype", "TensorFlow formats floats as strings differently from ONNX"
    if src == "string" and dst is not None and not (is_float(dst) or is_int(dst)):
        return "unsupported_dtype", f"no TensorFlow conversion from string to {dst}"
    return None


def cast_lines(c: Any, x: str, src: str, dst: str) -> list[str]:
    out = c.o()
    if src == dst:
        return [f"{out} = tf.identity({x})"]
    if src == "string":
        direct = dst in ("float32", "float64", "int32", "int64")
        number = f"tf.strings.to_number({x}, out_type={c.tf(dst if direct else 'float64')})"
        return [f"{out} = {number if direct else f'tf.cast({number}, {c.tf(dst)})'}"]
    if dst == "string":
        src_expr = f"tf.cast({x}, tf.int32)" if src == "bool" else x
        return [f"{out} = tf.strings.as_string({src_expr})"]
    return [f"{out} = tf.cast({x}, {c.tf(dst)})"]


@lowering("cast", accepts=_cast_check)
def cast(c: Any) -> list[str]:
    return cast_lines(c, c.i(0), c.dtype(0), c.out_dtype())


@lowering("cast_like", accepts=_cast_check)
def cast_like(c: Any) -> list[str]:
    return cast_lines(c, c.i(0), c.dtype(0), c.dtype(1))


@lowering("dropout", accepts=lambda n: None if len(n.inputs) < 3 or n.inputs[2] is None
          or (n.inputs[2].const is not None and not np.asarray(n.inputs[2].const).any())
          else ("unsupported_attribute_value", "training-mode dropout is random"))
def dropout(c: Any) -> list[str]:
    lines = [f"{c.o(0)} = tf.identity({c.i(0)})"]
    if len(c.node.outputs) > 1:
        lines.append(f"{c.o(1)} = tf.ones_like({c.i(0)}, dtype=tf.bool)")
    return lines


# ----------------------------------------------------------------------------- constants and shapes
@lowering("constant")
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


@lowering("constant_of_shape")
def constant_of_shape(c: Any) -> list[str]:
    from translator.dtypes import numpy_dtype

    v = c.attr("value")
    arr = np.asarray(v).reshape(-1)[:1].reshape(()) if v is not None else np.zeros((), np.float32)
    arr = arr.astype(numpy_dtype(c.out_dtype()))
    return [f"{c.o()} = tf.fill(tf.cast({c.i(0)}, tf.int64), {c.weight(arr, c.node.name + '_value')})"]


@lowering("shape")
def shape(c: Any) -> list[str]:
    """start/end clamp like Python slicing, which is what ONNX specifies."""
    start, end = int(c.attr("start", 0)), c.attr("end")
    return [f"{c.o()} = tf.shape({c.i(0)}, out_type={c.tf(c.out_dtype())})[{start}:{'' if end is None else int(end)}]"]


@lowering("reshape")
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
    if c.attr("allowzero", 0):
        return [f"{c.o()} = tf.reshape({x}, {s})"]
    t, dims = c.tmp("target"), c.tmp("dims")  # 0 copies the input's dim (computed at run time)
    return [f"{t} = tf.cast(tf.reshape({s}, [-1]), tf.int64)",
            f"{dims} = tf.shape({x}, out_type=tf.int64)[:tf.size({t})]",
            f"{dims} = tf.pad({dims}, [[0, tf.size({t}) - tf.size({dims})]])",
            f"{c.o()} = tf.reshape({x}, tf.where(tf.equal({t}, 0), {dims}, {t}))"]


@lowering("flatten", accepts=needs_rank(0))
def flatten(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 1), r)
    s = c.shape(0)
    if all(isinstance(d, int) for d in s):
        lead = int(np.prod(s[:a], dtype=np.int64))
        return [f"{c.o()} = tf.reshape({c.i(0)}, {c.lit([lead, int(np.prod(s[a:], dtype=np.int64))])})"]
    return [f"{c.o()} = tf.reshape({c.i(0)}, tf.stack([tf.reduce_prod(tf.shape({c.i(0)})[:{a}]), -1]))"]


def _squeeze_check(n: Node) -> tuple[str, str] | None:
    if len(n.inputs) > 1 and n.inputs[1] is not None and n.inputs[1].const is None:
        return needs_rank(0)(n)
    return None


@lowering("squeeze", accepts=_squeeze_check)
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
    return [f"{c.o()} = tf.squeeze({c.i(0)}, axis={c.lit(axes)})"]


def _unsqueeze_check(n: Node) -> tuple[str, str] | None:
    axes = const_ints(n, 1)
    if axes is not None and len(axes) == 1:
        return None
    return needs_rank(0)(n)


@lowering("unsqueeze", accepts=_unsqueeze_check)
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


@lowering("split")
def split(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 0), r) if r is not None else int(c.attr("axis", 0))
    n = len(c.node.outputs)
    outs = c.outs() + ("," if n == 1 else "")
    sizes = const_ints(c.node, 1)
    if c.has(1) and sizes is None:
        return [f"{outs} = tf.split({c.i(0)}, {c.i(1)}, axis={a}, num={n})"]
    if sizes is None:
        dim = c.shape(0)[a] if c.shape(0) is not None else None
        if isinstance(dim, int) and dim % n:
            step = -(-dim // n)
            sizes = [step] * (n - 1) + [dim - step * (n - 1)]
        else:
            return [f"{outs} = tf.split({c.i(0)}, {n}, axis={a})"]
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


def _slice_check(n: Node) -> tuple[str, str] | None:
    starts, axes = const_ints(n, 1), const_ints(n, 3) if len(n.inputs) > 3 and n.inputs[3] is not None else None
    if rank_of(n, 0) is None:
        if starts is None or const_ints(n, 2) is None or (len(n.inputs) > 4 and n.inputs[4] is not None
                                                            and const_ints(n, 4) is None):
            return "dynamic_shape", "slice of a value of unknown rank needs constant starts / ends / steps"
        if axes is not None and any(a < 0 for a in axes) and any(a >= 0 for a in axes):
            return "dynamic_shape", "slice of a value of unknown rank with mixed-sign axes"
    return None


@lowering("slice", accepts=_slice_check)
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


def _wrapped(c: Any, idx: str, dim_expr: str) -> str:
    """Negative indices wrapped (ONNX allows them; TensorFlow does not)."""
    if c.node.inputs[1].const is not None and not (np.asarray(c.node.inputs[1].const) < 0).any():
        return idx
    return f"tf.where({idx} < 0, {idx} + tf.cast({dim_expr}, {idx}.dtype), {idx})"


@lowering("gather", accepts=needs_rank(0))
def gather(c: Any) -> list[str]:
    a = norm_axis(c.attr("axis", 0), c.rank(0))
    idx = _wrapped(c, c.i(1), f"tf.shape({c.i(0)})[{a}]")
    return [f"{c.o()} = tf.gather({c.i(0)}, {idx}, axis={a})"]


def _coords(c: Any, idx: str, axis: int, rank: int, name: str) -> list[str]:
    """Full coordinates (…, rank) of every element of ``idx``, with ``idx`` on ``axis``."""
    grid = c.tmp("grid")
    return [f"{grid} = tf.meshgrid(*[tf.range(tf.shape({idx}, out_type=tf.int64)[k]) for k in range({rank})], "
            f"indexing='ij')",
            f"{grid}[{axis}] = tf.cast({idx}, tf.int64)",
            f"{name} = tf.stack({grid}, axis=-1)"]


@lowering("gather_elements", accepts=needs_rank(0))
def gather_elements(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 0), r)
    idx, coords = c.tmp("idx"), c.tmp("coords")
    return ([f"{idx} = {_wrapped(c, c.i(1), f'tf.shape({c.i(0)})[{a}]')}"] + _coords(c, idx, a, r, coords)
            + [f"{c.o()} = tf.gather_nd({c.i(0)}, {coords})"])


_SCATTER = {"none": "tf.tensor_scatter_nd_update", "add": "tf.tensor_scatter_nd_add",
            "max": "tf.tensor_scatter_nd_max", "min": "tf.tensor_scatter_nd_min"}


def _scatter_check(n: Node) -> tuple[str, str] | None:
    red = n.attrs.get("reduction", "none")
    if red not in _SCATTER and red != "mul":
        return "unsupported_attribute_value", f"no TensorFlow scatter with reduction {red!r}"
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


@lowering("scatter_elements", accepts=_scatter_check)
def scatter_elements(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 0), r)
    idx, coords = c.tmp("idx"), c.tmp("coords")
    red = c.attr("reduction", "none")
    lines = [f"{idx} = {_wrapped(c, c.i(1), f'tf.shape({c.i(0)})[{a}]')}"] + _coords(c, idx, a, r, coords)
    if red == "mul":
        return lines + _scatter_mul(c, c.i(0), coords, c.i(2), r)
    return lines + [f"{c.o()} = {_SCATTER[red]}({c.i(0)}, {coords}, {c.i(2)})"]


@lowering("scatter_nd", accepts=_scatter_check)
def scatter_nd(c: Any) -> list[str]:
    red = c.attr("reduction", "none")
    if red == "mul":
        k = c.shape(1)[-1] if c.shape(1) else None
        if not isinstance(k, int):
            c.unsupported("dynamic_shape", "scatter_nd mul needs a static index depth")
        return _scatter_mul(c, c.i(0), c.i(1), c.i(2), k)
    return [f"{c.o()} = {_SCATTER[red]}({c.i(0)}, {c.i(1)}, {c.i(2)})"]


@lowering("gather_nd")
def gather_nd(c: Any) -> list[str]:
    return [f"{c.o()} = tf.gather_nd({c.i(0)}, {c.i(1)}, batch_dims={int(c.attr('batch_dims', 0))})"]


def _pad_check(n: Node) -> tuple[str, str] | None:
    mode = n.attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        return "unsupported_attribute_value", f"pad mode {mode!r}"
    return needs_rank(0)(n)


@lowering("pad", accepts=_pad_check)
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


@lowering("one_hot")
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


def _top_k_check(n: Node) -> tuple[str, str] | None:
    if not n.attrs.get("largest", 1) and n.inputs[0] is not None and (n.inputs[0].type.dtype or "").startswith("uint"):
        return "unsupported_dtype", "smallest-k of unsigned values (negation would wrap)"
    return needs_rank(0)(n)


@lowering("top_k", accepts=_top_k_check)
def top_k(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", -1), r)
    largest = bool(c.attr("largest", 1))
    x, vals, idx = c.i(0), c.tmp("values"), c.tmp("indices")
    perm = list(range(r))
    perm[a], perm[-1] = perm[-1], perm[a]
    moved = x if a == r - 1 else f"tf.transpose({x}, {c.lit(perm)})"
    src = moved if largest else f"tf.math.negative({moved})"
    lines = [f"{vals}, {idx} = tf.math.top_k({src}, k={scalar(c.i(1), 'tf.int32')}, sorted=True)"]
    v_expr = vals if largest else f"tf.math.negative({vals})"
    i_expr = f"tf.cast({idx}, {c.tf(c.out_dtype(1))})"
    if a != r - 1:
        v_expr, i_expr = f"tf.transpose({v_expr}, {c.lit(perm)})", f"tf.transpose({i_expr}, {c.lit(perm)})"
    return lines + [f"{c.o(0)} = {v_expr}", f"{c.o(1)} = {i_expr}"]


@lowering("compress")
def compress(c: Any) -> list[str]:
    keep = f"tf.reshape(tf.where(tf.cast({c.i(1)}, tf.bool)), [-1])"
    a = c.attr("axis")
    if a is None:
        return [f"{c.o()} = tf.gather(tf.reshape({c.i(0)}, [-1]), {keep})"]
    return [f"{c.o()} = tf.gather({c.i(0)}, {keep}, axis={norm_axis(a, c.rank(0))})"]


@lowering("reverse", accepts=needs_rank(0))
def reverse(c: Any) -> list[str]:
    r = c.rank(0)
    axes = c.attr("axes")
    axes = list(range(r)) if axes is None else [norm_axis(a, r) for a in axes]
    return [f"{c.o()} = tf.reverse({c.i(0)}, axis={c.lit(axes)})"]


@lowering("non_zero", accepts=needs_rank(0))
def non_zero(c: Any) -> list[str]:
    out = c.tf(c.out_dtype())
    if c.rank(0) == 0:
        return [f"{c.o()} = tf.zeros([0, tf.cast(tf.cast({c.i(0)}, tf.bool), tf.int32)], dtype={out})"]
    return [f"{c.o()} = tf.cast(tf.transpose(tf.where(tf.cast({c.i(0)}, tf.bool))), {out})"]


@lowering("einsum")
def einsum(c: Any) -> list[str]:
    eq = str(c.attr("equation")).replace(" ", "")
    ins = ", ".join(c.i(k) for k in range(len(c.node.inputs)))
    return [f"{c.o()} = tf.einsum({c.lit(eq)}, {ins})"]


# ----------------------------------------------------------------------------- linear algebra
@lowering("matmul")
def matmul(c: Any) -> list[str]:
    a, b = c.i(0), c.i(1)
    ra, rb = c.rank(0), c.rank(1)
    if ra is None or rb is None:
        return [f"{c.o()} = tf.experimental.numpy.matmul({a}, {b})"]
    if ra >= 2 and rb >= 2:
        return [f"{c.o()} = tf.linalg.matmul({a}, {b})"]
    a2 = f"tf.expand_dims({a}, 0)" if ra == 1 else a
    b2 = f"tf.expand_dims({b}, -1)" if rb == 1 else b
    expr = f"tf.linalg.matmul({a2}, {b2})"
    drop = ([-2] if ra == 1 else []) + ([-1] if rb == 1 else [])
    return [f"{c.o()} = tf.squeeze({expr}, {drop})"]


@lowering("gemm")
def gemm(c: Any) -> list[str]:
    alpha, beta = float(c.attr("alpha", 1.0)), float(c.attr("beta", 1.0))
    ta, tb = bool(c.attr("transA", 0)), bool(c.attr("transB", 0))
    expr = f"tf.linalg.matmul({c.i(0)}, {c.i(1)}, transpose_a={ta}, transpose_b={tb})"
    if alpha != 1.0:
        expr = f"{c.lit(alpha)} * {expr}"
    if c.has(2):
        cexpr = c.i(2) if beta == 1.0 else f"{c.lit(beta)} * {c.i(2)}"
        expr = f"{expr} + {cexpr}"
    return [f"{c.o()} = {expr}"]


@lowering("trilu")
def trilu(c: Any) -> list[str]:
    x = c.i(0)
    k = scalar(c.i(1), "tf.int64") if c.has(1) else "0"
    rows, cols = c.tmp("rows"), c.tmp("cols")
    cmp = ">=" if c.attr("upper", 1) else "<="
    return [f"{rows} = tf.range(tf.shape({x}, out_type=tf.int64)[-2])[:, None]",
            f"{cols} = tf.range(tf.shape({x}, out_type=tf.int64)[-1])[None, :]",
            f"{c.o()} = tf.where({cols} - {rows} {cmp} {k}, {x}, tf.zeros_like({x}))"]


@lowering("eye_like")
def eye_like(c: Any) -> list[str]:
    x = c.i(0)
    dt = c.enum_dtype(c.attr("dtype")) if c.attr("dtype") is not None else c.dtype(0)
    rows, cols = c.tmp("rows"), c.tmp("cols")
    return [f"{rows} = tf.range(tf.shape({x}, out_type=tf.int64)[0])[:, None]",
            f"{cols} = tf.range(tf.shape({x}, out_type=tf.int64)[1])[None, :]",
            f"{c.o()} = tf.cast(tf.equal({cols} - {rows}, {int(c.attr('k', 0))}), {c.tf(dt)})"]


# ----------------------------------------------------------------------------- reductions
_REDUCERS = {
    "reduce_sum": ("tf.math.reduce_sum", "{}", "{}"), "reduce_mean": ("tf.math.reduce_mean", "{}", "{}"),
    "reduce_prod": ("tf.math.reduce_prod", "{}", "{}"), "reduce_max": ("tf.math.reduce_max", "{}", "{}"),
    "reduce_min": ("tf.math.reduce_min", "{}", "{}"),
    "reduce_log_sum": ("tf.math.reduce_sum", "{}", "tf.math.log({})"),
    "reduce_log_sum_exp": ("tf.math.reduce_logsumexp", "{}", "{}"),
    "reduce_sum_square": ("tf.math.reduce_sum", "tf.math.square({})", "{}"),
    "reduce_l1": ("tf.math.reduce_sum", "tf.math.abs({})", "{}"),
    "reduce_l2": ("tf.math.reduce_sum", "tf.math.square({})", "tf.math.sqrt({})"),
}


@lowering(*_REDUCERS)
def reduce(c: Any) -> list[str]:
    fn, pre, post = _REDUCERS[c.node.op]
    x = c.i(0)
    keep = bool(c.attr("keepdims", 1))
    r = c.rank(0)
    axes = const_ints(c.node, 1) if c.has(1) else []
    if c.has(1) and axes is None:  # runtime axes: empty means every axis unless noop_with_empty_axes
        axis = f"tf.cast(tf.reshape({c.i(1)}, [-1]), tf.int64)"
        if not c.attr("noop_with_empty_axes", 0):
            axis = f"tf.cond(tf.size({axis}) > 0, lambda: {axis}, lambda: tf.range(tf.cast(tf.rank({x}), tf.int64)))"
    elif not axes:
        if c.attr("noop_with_empty_axes", 0):
            return [f"{c.o()} = tf.identity({x})"]
        axis = "None"
    else:
        axis = c.lit(sorted({norm_axis(a, r) for a in axes}) if r is not None else sorted(set(axes)))
    if c.dtype(0) == "bool" and c.node.op in ("reduce_max", "reduce_min"):
        fn = "tf.math.reduce_any" if c.node.op == "reduce_max" else "tf.math.reduce_all"
    return [f"{c.o()} = {post.format(f'{fn}({pre.format(x)}, axis={axis}, keepdims={keep})')}"]


@lowering("arg_max", "arg_min", accepts=needs_rank(0))
def arg_reduce(c: Any) -> list[str]:
    r = c.rank(0)
    a = norm_axis(c.attr("axis", 0), r)
    fn = "tf.math.argmax" if c.node.op == "arg_max" else "tf.math.argmin"
    x = c.i(0)
    if c.dtype(0) == "bool":
        x = f"tf.cast({x}, tf.int32)"
    out = c.tf(c.out_dtype())
    if c.attr("select_last_index", 0):
        expr = f"tf.cast(tf.shape({c.i(0)})[{a}] - 1, {out}) - {fn}(tf.reverse({x}, [{a}]), axis={a}, output_type={out})"
    else:
        expr = f"{fn}({x}, axis={a}, output_type={out})"
    if c.attr("keepdims", 1):
        expr = f"tf.expand_dims({expr}, {a})"
    return [f"{c.o()} = {expr}"]


from . import tensorflow_extra, tensorflow_nn  # noqa: E402,F401  (register their lowerings)
