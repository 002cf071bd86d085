"""Control flow whose decision is known before run time.

``inline_constant_ifs``: an ``if`` whose condition is a constant (often after shape folding:
exporters guard on sizes that are static once the input shape is) is replaced by the nodes of
the branch it takes, in the enclosing graph. Every target then sees plain dataflow, including
those with no control flow at all (Core ML's emitter, TFLite without subgraphs).
"""
from __future__ import annotations

import numpy as np

from translator.ir.graph import Graph, Node


def _taken(node: Node) -> Graph | None:
    cond = node.inputs[0] if node.inputs else None
    if cond is None or cond.const is None or np.asarray(cond.const).size != 1:
        return None
    branch = node.attrs.get("then_branch" if bool(np.asarray(cond.const).reshape(())) else "else_branch")
    return branch if isinstance(branch, Graph) and not branch.inputs else None


def _inline(g: Graph, node: Node, branch: Graph) -> None:
    for c in list(branch.constants.values()):
        c.name = g.unique_name(c.name)
        c.graph = g
        g.constants[c.name] = c
    for n in list(branch.nodes):
        n.graph = g
        for v in n.outputs:
            v.name = g.unique_name(v.name)
            v.graph = g
        g._before.setdefault(id(node), []).append(n)
        n.name = n.name or n.op
    results = list(branch.outputs)
    branch.nodes, branch.outputs, branch.constants = [], [], {}
    g.replace_node(node, results, keep_types=True)


def inline_constant_ifs(g: Graph) -> int:
    """Inline every ``if`` of ``g`` (not of its subgraphs: the caller walks them) whose
    condition is constant; returns how many were inlined."""
    done = 0
    for node in list(g.nodes):
        if node.op != "if" or node.graph is not g:
            continue
        branch = _taken(node)
        if branch is None or len(branch.outputs) != len(node.outputs):
            continue
        _inline(g, node, branch)
        done += 1
    return done


__all__ = ["inline_constant_ifs"]
