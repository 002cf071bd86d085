"""Control flow whose decision is known before run time.

``inline_constant_ifs``: an ``if`` whose condition is a constant (often after shape folding:
exporters guard on sizes that are static once the input shape is) is replaced by the nodes of
the branch it takes, in the enclosing graph. Every target then sees plain dataflow, including
those with no control flow at all (Core ML's emitter, TFLite without subgraphs).

``inline_typed_branches``: an ``if`` on a run-time value whose branches give results of
different ranks (torch's export of ``x.squeeze(k)`` on a symbolic dim: ``Squeeze`` when the
size is 1, ``Identity`` otherwise) leaves every later rank unknown, which no target with
static ranks can run. Where only one branch leaves a model whose shapes can be inferred (the
other feeds a recurrence a rank-4 ``X``, say), the source itself fails whenever the other is
taken: the typed one is the only one the model can run, and it is inlined, with a warning.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from translator.ir.graph import Graph, Node

if TYPE_CHECKING:
    from translator.ir.graph import Model


def _taken(node: Node) -> Graph | None:
    cond = node.inputs[0] if node.inputs else None
    if cond is None or cond.const is None or np.asarray(cond.const).size != 1:
        return None
    branch = node.attrs.get("then_branch" if bool(np.asarray(cond.const).reshape(())) else "else_branch")
    return branch if isinstance(branch, Graph) and not branch.inputs else None


def _inline(g: Graph, node: Node, branch: Graph) -> None:
    g.replace_node(node, _move_before(g, node, branch), keep_types=True)


def _move_before(g: Graph, node: Node, branch: Graph) -> list:
    """The nodes and constants of ``branch`` into ``g``, before ``node``; its results."""
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
    return results


def ifs_as_where(g: Graph) -> int:
    """For a target with no control flow (ncnn): an ``if`` on a run-time condition whose two
    branches are plain dataflow (no inputs, no subgraphs) giving results of one static shape
    and dtype each becomes both branches computed and one ``where`` per result (the condition
    as a scalar). Exact wherever the branch not taken computes finite values (a target whose
    select multiplies by a mask would carry its NaN); the check runs the model. Returns how
    many were rewritten."""
    done = 0
    for node in list(g.nodes):
        if node.op != "if" or node.graph is not g or not node.inputs or node.inputs[0] is None:
            continue
        a, b = node.attrs.get("then_branch"), node.attrs.get("else_branch")
        if not (isinstance(a, Graph) and isinstance(b, Graph)) or a.inputs or b.inputs or \
                not len(a.outputs) == len(b.outputs) == len(node.outputs) or \
                any(True for br in (a, b) for n in br.nodes for _ in n.subgraphs()):
            continue
        if any(x.type.shape is None or x.type.shape != y.type.shape or x.type.dtype != y.type.dtype
               or not x.type.is_static for x, y in zip(a.outputs, b.outputs)):
            continue
        cond = g.add_node("reshape", [node.inputs[0], g.add_constant(f"{node.name}_scalar", np.zeros(0, np.int64),
                                                                      "int64")], name=f"{node.name}/cond",
                          before=node).outputs[0]
        then, other = _move_before(g, node, a), _move_before(g, node, b)
        outs = [g.add_node("where", [cond, x, y], name=f"{node.name}/where{k}", types=[v.type],
                           before=node).outputs[0] for k, (x, y, v) in enumerate(zip(then, other, node.outputs))]
        g.replace_node(node, outs, keep_types=True)
        done += 1
    return done


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


def _rank_changing(node: Node) -> bool:
    """An ``if`` on a run-time condition whose branches disagree on (or hide) an output's rank."""
    cond = node.inputs[0] if node.op == "if" and node.inputs else None
    if cond is None or cond.is_const:
        return False
    then, other = node.attrs.get("then_branch"), node.attrs.get("else_branch")
    if not isinstance(then, Graph) or not isinstance(other, Graph) or then.inputs or other.inputs \
            or not len(then.outputs) == len(other.outputs) == len(node.outputs):
        return False
    return any(o.type.kind == "tensor" and (o.type.rank is None or a.type.rank != b.type.rank)
               for o, a, b in zip(node.outputs, then.outputs, other.outputs))


def inline_typed_branches(model: "Model", fold: Callable[[Graph], None], tables: object = None,
                          limit: int = 16) -> list[str]:
    """Inline each rank-changing ``if`` of ``model``'s graph of which exactly one branch types
    (the graph with it inlined, folded and inferred raises no ``VerifyError``); at most
    ``limit`` trials. Returns one note per inlined ``if``."""
    from ...ir.infer import infer
    from ...table.errors import VerifyError

    g, notes, trials = model.graph, [], 0
    while trials < limit:
        settled = False
        for i, node in enumerate(g.nodes):
            if not _rank_changing(node) or trials >= limit:
                continue
            trials += 1
            typed, why = [], {}
            for which in ("then_branch", "else_branch"):
                trial = model.clone()
                t = trial.graph.nodes[i]
                _inline(trial.graph, t, t.attrs[which])
                try:
                    infer(trial.graph, tables)  # the inlined results carry the if's (rank-less) types
                    fold(trial.graph)
                    infer(trial.graph, tables)
                    typed.append(which)
                except VerifyError as exc:
                    why[which] = exc
            if len(typed) != 1:
                continue
            other = next(iter(why))
            exc = why[other]
            notes.append(f"node {node.name!r}: an If on a run-time value whose {other.split('_')[0]} branch leaves "
                         f"the model ill-typed (node {exc.node!r}: {exc.detail}); the source can "
                         f"run only its {typed[0].split('_')[0]} branch, inlined (ranks stay static)")
            _inline(g, node, node.attrs[typed[0]])
            infer(g, tables)
            fold(g)
            settled = True
            break
        if not settled:
            break
    return notes


__all__ = ["inline_constant_ifs", "inline_typed_branches"]
