"""TensorFlow rules for reductions, matrix products (matmul, gemm, einsum) and top-k.
"""
from __future__ import annotations

from typing import Any

from translator.table.dtypes import norm_axis
from translator.ir.graph import Node
from translator.compile.registry import Refusal

from .helpers import const_ints, needs_rank, scalar
from .registry import rule


def _top_k_check(n: Node) -> Refusal | None:
    if not n.attrs.get("largest", 1) and n.inputs[0] is not None and (n.inputs[0].type.dtype or "").startswith("uint"):
        return Refusal("unsupported_dtype", "smallest-k of unsigned values (negation would wrap)")
    return needs_rank(0)(n)


@rule("top_k", check=_top_k_check)
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


@rule("einsum")
def einsum(c: Any) -> list[str]:
    eq = str(c.attr("equation")).replace(" ", "")
    ins = ", ".join(c.i(k) for k in range(len(c.node.inputs)))
    return [f"{c.o()} = tf.einsum({c.lit(eq)}, {ins})"]


@rule("matmul")
def matmul(c: Any) -> list[str]:
    a, b = c.i(0), c.i(1)
    ra, rb = c.rank(0), c.rank(1)
    if ra is None or rb is None:
        return [f"{c.o()} = tf.experimental.numpy.matmul({a}, {b})"]
    if ra > 2 and rb == 2 and c.const(1) is not None and c.shape(0) is not None \
            and sum(not isinstance(d, int) for d in c.shape(0)[:-1]) > 1:
        # a batched product with a constant matrix over several run-time dims: as one 2-D
        # product on the rows (TFLite's converter turns BatchMatMul(transpose(x), W) clipped after, with two
        # dynamic dims into a FULLY_CONNECTED that keeps one frame: openWakeWord's mel filter)
        k, rows = int(c.const(1).shape[0]), c.tmp("rows")
        return [f"{rows} = tf.linalg.matmul(tf.reshape({a}, [-1, {k}]), {b})",
                f"{c.o()} = tf.reshape({rows}, tf.concat([tf.shape({a})[:-1], tf.shape({rows})[-1:]], 0))"]
    if ra >= 2 and rb >= 2:
        return [f"{c.o()} = tf.linalg.matmul({a}, {b})"]
    a2 = f"tf.expand_dims({a}, 0)" if ra == 1 else a
    b2 = f"tf.expand_dims({b}, -1)" if rb == 1 else b
    expr = f"tf.linalg.matmul({a2}, {b2})"
    drop = ([-2] if ra == 1 else []) + ([-1] if rb == 1 else [])
    return [f"{c.o()} = tf.squeeze({expr}, {drop})"]


@rule("gemm")
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


@rule(*_REDUCERS)
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
    src = c.node.inputs[0].producer
    if axes and r is not None and c.node.op in ("reduce_mean", "reduce_sum") and len(set(axes)) > 1 \
            and c.dtype(0) in ("float32", "float16") and not (src is not None and src.op == "dequantize_linear"):
        # (a mean of dequantized int8 stays one reduction: LiteRT's int8 MEAN sums exactly in
        # int32 and rounds once, as the source's kernel did; staging would requantize per axis)
        return [f"{c.o()} = {post.format(staged_sum(fn, pre.format(x), sorted({norm_axis(a, r) for a in axes}), keep))}"]
    return [f"{c.o()} = {post.format(f'{fn}({pre.format(x)}, axis={axis}, keepdims={keep})')}"]


def staged_sum(fn: str, x: str, axes: list[int], keep: bool) -> str:
    """A float sum or mean over several axes as one reduction per axis (the last first): each
    accumulates one axis's length, not their product (TFLite's MEAN over a 160x160 map
    accumulates 25,600 terms in float32, 7e-5 apart from a pairwise sum; a mean of equal-size
    means is the mean)."""
    expr = x
    for a in reversed(axes):
        expr = f"{fn}({expr}, axis={a}, keepdims=True)"
    return expr if keep else f"tf.squeeze({expr}, axis={axes})"


@rule("arg_max", "arg_min", check=needs_rank(0))
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
