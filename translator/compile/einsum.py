"""``einsum`` in Python for targets without one: transposes, reshapes, one ``matmul`` per pair of
operands, and ``reduce_sum`` for a label only one operand has and the output drops.

For two operands with labels sorted into batch (both operands and the output), kept (one
operand and the output), contracted (both operands, not the output) and summed (one operand,
not the output):

    a → transpose to (batch, a_kept, contracted) → reshape (batch, Ma, K)
    b → transpose to (batch, contracted, b_kept) → reshape (batch, K, Nb)
    matmul → reshape (batch, a_kept, b_kept) → transpose to the output's order

A batch dim of size 1 in one operand broadcasts against the other (matmul's batch
broadcasting). More operands are contracted left to right, each intermediate keeping the
labels a later operand or the output reads; one operand is summed and transposed. Applies
when every operand's shape is static and no label repeats within an operand (a diagonal).
"""
from __future__ import annotations

import math

from ..ir.graph import Graph, Node, Value


def terms(node: Node) -> tuple[list[list[str]], list[str]] | None:
    """The equation as label lists per operand and for the output, ``...`` spelled out as one
    label per broadcast dim (right-aligned across operands); implicit output = numpy's. None
    when an operand's rank is unknown or the operand count differs from the equation's."""
    eq = str(node.attrs.get("equation", "")).replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    parts = lhs.split(",")
    ranks = [v.type.rank if v is not None else None for v in node.inputs]
    if len(parts) != len(ranks) or any(r is None for r in ranks):
        return None
    widths = [r - len(t.replace("...", "")) for t, r in zip(parts, ranks)]
    ell = max([w for t, w in zip(parts, widths) if "..." in t], default=0)
    dots = [f"\u2026{i}" for i in range(ell)]
    out_terms = []
    for t, w in zip(parts, widths):
        head, _, tail = t.partition("...")
        out_terms.append(list(head) + (dots[ell - w:] if "..." in t else []) + list(tail))
    if not arrow:
        once = sorted(c for c in set(lhs) if c.isalpha() and lhs.count(c) == 1)
        out = dots + once
    else:
        head, _, tail = rhs.partition("...")
        out = list(head) + (dots if "..." in rhs else []) + list(tail)
    return out_terms, out


def _sizes(node: Node, parsed: tuple[list[list[str]], list[str]]) -> dict[str, int] | str:
    sizes: dict[str, int] = {}
    for t, v in zip(parsed[0], node.inputs):
        shape = v.type.shape
        if shape is None or any(not isinstance(d, int) for d in shape):
            return "einsum: an operand's shape is not static"
        if len(set(t)) != len(t):
            return "einsum: a label repeats within an operand (a diagonal)"
        for lab, d in zip(t, shape):
            if sizes.get(lab, 1) != 1 and d not in (1, sizes[lab]):
                return f"einsum: label {lab!r} has sizes {sizes[lab]} and {d}"
            sizes[lab] = max(sizes.get(lab, 1), d)
    return sizes


def why_not(node: Node) -> str | None:
    parsed = terms(node)
    if parsed is None:
        return "einsum: an operand's rank is unknown"
    sizes = _sizes(node, parsed)
    if isinstance(sizes, str):
        return sizes
    for lab in set(sizes) - set(parsed[1]):  # summed or contracted: one size wherever it occurs
        if len({d for t, v in zip(parsed[0], node.inputs) for l2, d in zip(t, v.type.shape) if l2 == lab}) > 1:
            return f"einsum: label {lab!r} is summed over but broadcasts"
    return None


def expand(graph: Graph, node: Node) -> list[Node]:
    """Replace the ``einsum`` ``node`` by the steps above; returns the inserted nodes."""
    from .steps import Steps

    parsed = terms(node)
    assert parsed is not None and isinstance(_sizes(node, parsed), dict)
    ins, out = parsed
    b = Steps(graph, node)
    ops = [(v, t, [int(d) for d in v.type.shape]) for v, t in zip(node.inputs, ins)]
    x = ops[0]
    for k in range(1, len(ops)):
        later = {lab for _, t, _ in ops[k + 1:] for lab in t} | set(out)
        y = ops[k]
        x = _sum_only(b, x, set(y[1]) | later)
        y = _sum_only(b, y, set(x[1]) | later)
        x = _pair(b, x, y, later)
    v, labels, _ = _sum_only(b, x, set(out))
    if labels != out:
        v = b.op("transpose", v, perm=[labels.index(lab) for lab in out])
    graph.replace_node(node, [v], keep_types=True)
    return b.nodes


Operand = tuple[Value, list[str], list[int]]  # a value, its labels, its own sizes (1 where it broadcasts)


def _sum_only(b, x: Operand, needed: set[str]) -> Operand:
    """``x`` summed over the labels nothing after it reads."""
    v, labels, dims = x
    gone = [i for i, lab in enumerate(labels) if lab not in needed]
    if not gone:
        return x
    v = b.op("reduce_sum", v, b.const(gone, "axes", "int64"), keepdims=0)
    keep = [i for i in range(len(labels)) if i not in gone]
    return v, [labels[i] for i in keep], [dims[i] for i in keep]


def _pair(b, x: Operand, y: Operand, later: set[str]) -> Operand:
    """The product of two operands, contracted over their shared labels nothing later reads."""
    (xv, xl, xd), (yv, yl, yd) = x, y
    size = {**dict(zip(yl, yd)), **dict(zip(xl, xd))}
    batch = [lab for lab in xl if lab in yl and lab in later]
    contracted = [lab for lab in xl if lab in yl and lab not in later]
    xk = [lab for lab in xl if lab not in yl]
    yk = [lab for lab in yl if lab not in xl]

    def shaped(v: Value, labels: list[str], dims: list[int], order: list[str], tail: list[list[str]]) -> Value:
        own = dict(zip(labels, dims))
        if labels != order:
            v = b.op("transpose", v, perm=[labels.index(lab) for lab in order])
        new = [own[lab] for lab in batch] + [math.prod(own[lab] for lab in g) for g in tail]
        return b.op("reshape", v, b.const(new, "shape", "int64"))

    xs = shaped(xv, xl, xd, batch + xk + contracted, [xk, contracted])
    ys = shaped(yv, yl, yd, batch + contracted + yk, [contracted, yk])
    z = b.op("matmul", xs, ys)
    labels = batch + xk + yk
    dims = [max(dict(zip(xl, xd))[lab], dict(zip(yl, yd))[lab]) for lab in batch] + [size[lab] for lab in xk + yk]
    z = b.op("reshape", z, b.const(dims, "shape", "int64"))
    return z, labels, dims


__all__ = ["terms", "why_not", "expand"]
