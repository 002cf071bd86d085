"""The one compile pipeline: the same ordered passes for every target.

``compile(model, target)``::

    clone → verify → fold → prepare (the target's own IR fixes) → legalize dtypes → lower
          → legalize dtypes → layout → emit

* **clone**: the caller's IR is never rewritten (the frontend builds it once per conversion).
* **verify** (``passes/verify``): op known, inputs/attributes per signature, dtypes, shapes.
* **fold** (``passes/fold_constants``): constants and static-shape subgraphs, in every subgraph;
  shape arithmetic under symbolic dims where its entries are known (``passes/shape_values``);
  a gather by constant indices that pick a regular run becomes a reshape or slice
  (``passes/static_index``);
  an ``if`` whose condition folded is replaced by the branch it takes (``passes/control``);
  a convolution's batch norm or per-channel bias add become its weights (``passes/fuse``).
* **legalize** (``passes/legalize_dtypes``): dtypes the target lacks (``Target.legal_dtypes``)
  become the first legal substitute, reported.
* **lower** (``translator.compile.lowering.lower``): per node, the target's rule or snippet when the
  cell says native/composite and the checks pass; else the table's decomposition where it
  applies; else a refusal with its reason code. Decomposed nodes are typed and legalized
  before they are judged.
* **layout** (``passes/layout``): channels-last where the target runs ops so.
* **emit**: ``Target.emit(model, ctx)`` on the lowered IR. An emitter whose library rejects
  nodes it accepted (the TFLite converter) raises ``Rejected``: those nodes are decomposed and
  the pipeline runs again from the clone.

``plan(model, target)`` is the same pipeline without emit and with refusals collected per
node instead of raised (``opbridge report``): it cannot disagree with ``convert``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..table.errors import Unsupported
from ..ir.gcpause import gc_paused
from ..ir.graph import Graph, Model
from .passes import verify
from .target import Compilation

if TYPE_CHECKING:
    from .registry import Refusal
    from ..table.loader import Tables
    from .target import Target

MAX_RETRIES = 6


class Rejected(Exception):
    """The target's library rejected nodes the lowering accepted: node name → refusal."""

    def __init__(self, nodes: Mapping[str, "Refusal"]) -> None:
        super().__init__(", ".join(f"{k}: {v}" for k, v in nodes.items()))
        self.nodes = dict(nodes)


@dataclass
class Compiled:
    artifact: Any
    ctx: Compilation
    model: Model


def prepare(model: Model) -> Model:
    """Infer missing types and verify the IR (raises VerifyError with the node's name)."""
    with gc_paused():
        verify.run(model.graph)
    return model


def every_graph(g: Graph) -> list[Graph]:
    out = [g]
    for n in g.nodes:
        for sub in n.subgraphs():
            out.extend(every_graph(sub))
    return out


def fold(g: Graph, rounds: int = 64) -> None:
    """Fold constants, then re-infer shapes (a folded pads/scales input makes a shape static,
    whose ``shape`` then folds in turn), and remove what nothing reads, until nothing more
    changes."""
    from ..ir.infer import infer
    from .passes import control, fold_constants, shape_values, static_index

    for _ in range(rounds):
        changed = sum(fold_constants.run(sub) for sub in every_graph(g))
        changed += sum(shape_values.run(sub) for sub in every_graph(g))
        changed += sum(static_index.run(sub) for sub in every_graph(g))
        changed += sum(control.inline_constant_ifs(sub) for sub in every_graph(g))
        changed += sum(fold_constants.prune(sub) for sub in every_graph(g))
        if not changed:
            return
        try:
            infer(g)
        except Exception:  # noqa: BLE001 - the pipeline's own infer step reports a bad graph with its reason
            return


def _fix_dims(model: Model, ctx: Compilation) -> None:
    """Symbolic input dims the user named (``fix_dims`` option), and every one for a target
    whose artifacts declare static input shapes, become sizes before anything folds."""
    from ..ir import dims

    asked = dict(ctx.options.get("fix_dims") or {})
    some = dict(ctx.options.get("fix_some_dims") or {})  # the fewest the target needs fixed (fewest_dims_to_fix)
    every = not ctx.target.dynamic_dims or bool(ctx.options.get("fix_all_dims"))
    fixed = dims.fix(model, {**asked, **some}, every=every, defaults=ctx.options.get("dim_defaults"))
    if fixed:
        ctx.fixed_dims = fixed
        shown = ", ".join(f"{k}={v}" for k, v in fixed.items())
        if set(fixed) <= set(asked):
            ctx.warn(f"symbolic input dims fixed as asked: {shown}")
        elif some and not every:
            ctx.warn(f"symbolic input dims fixed: {shown} ({ctx.options.get('fix_reason')}); the others stay "
                     "dynamic; pass --fix-dim NAME=SIZE for other sizes")
        elif ctx.target.dynamic_dims:
            ctx.warn(f"symbolic input dims fixed: {shown} ({ctx.options['fix_all_dims']}); pass --fix-dim "
                     "NAME=SIZE for other sizes")
        else:
            ctx.warn(f"symbolic input dims fixed: {shown} ({ctx.target.name} artifacts declare static input "
                     "shapes); pass --fix-dim NAME=SIZE for other sizes")


def _sink_transposes(g: Graph, ctx: Compilation) -> None:
    """Sink and cancel transposes (a channels-last frontend's NHWC↔NCHW pairs): ``passes/transposes``."""
    from .passes import transposes

    for sub in every_graph(g):
        transposes.run(sub, ctx.tables)


def legalize(g: Graph, ctx: Compilation) -> None:
    """Dtype legalization of the graph and every subgraph (branches must agree on types)."""
    legal = ctx.legal
    if legal is None:
        return
    from .passes import legalize_dtypes

    for sub in every_graph(g):
        ctx.warn(legalize_dtypes.run(sub, ctx.target.name, ctx.tables, legal=legal, top=sub is g))


def _passes(model: Model, ctx: Compilation, emit: bool) -> Any:
    from ..ir.infer import infer
    from .lowering import lower

    target, tables = ctx.target, ctx.tables
    g = model.graph
    ctx.model = model
    _fix_dims(model, ctx)
    prepare(model)
    ctx.source_inputs = [v.type.dtype for v in g.inputs]
    ctx.source_outputs = [v.type.dtype for v in g.outputs]
    before = {id(n): n.name for n in g.walk()}
    if target.fold:
        from . import quantized

        # an integer weight scaled in float ops stays 8-bit (a weight-only DequantizeLinear) rather
        # than folding into a float32 constant
        if sum(quantized.scaled_int_weights(sub) for sub in every_graph(g)):
            infer(g, tables)
        fold(g)
        from .passes import control

        ctx.warn(control.inline_typed_branches(model, fold, tables))
    _sink_transposes(g, ctx)
    if target.fold:  # a convolution's batch norm / bias add become its weights (reported folded)
        from .passes import fuse

        fuse.run(g)
    kept = {id(n) for n in g.walk()}
    kept_names = {n.name for n in g.walk()}  # a frontend may expand one source node into several of its name
    ctx.how.update({name: "folded" for i, name in before.items() if i not in kept and name not in kept_names})
    for n in g.walk():  # what the model computes in, before legalization (saturating casts need it)
        n.meta["source_dtypes"] = [o.type.dtype for o in n.outputs]
        n.meta["source_in_dtypes"] = [v.type.dtype if v is not None else None for v in n.inputs]
    if target.configure is not None:
        target.configure(model, ctx)
    if target.prepare is not None:
        target.prepare(model, ctx)
    legalize(g, ctx)
    infer(g, tables)
    lower(g, ctx)
    infer(g, tables)
    legalize(g, ctx)
    if target.channels_last is not None:
        from .passes import layout

        ctx.layout = layout.run(g, target.channels_last, io_channels_last=bool(ctx.options.get("io_channels_last")))
    if not emit:
        return None
    if target.reference:
        return model
    return target.emit(model, ctx)


def compile(model: Model, target: "Target | str", tables: "Tables | None" = None, **options: Any) -> Compiled:
    """``model`` (not modified) → the target's artifact, through the one pipeline."""
    from ..table.loader import load_tables
    from .target import get

    target = get(target) if isinstance(target, str) else target
    tables = tables or load_tables()
    rejected: dict[str, Refusal] = {}
    for _ in range(MAX_RETRIES):
        ctx = Compilation(target, tables, dict(options), rejected=dict(rejected))
        ctx.warn(list(model.warnings))
        work = model.clone()
        try:
            with gc_paused():
                artifact = _passes(work, ctx, emit=True)
        except Rejected as exc:
            new = {k: v for k, v in exc.nodes.items() if k not in rejected}
            if not new:
                k, v = next(iter(exc.nodes.items()))
                raise Unsupported(target.name, target.name, v.code, f"{v.detail} (node {k!r})") from None
            rejected.update(new)
            continue
        return Compiled(artifact, ctx, work)
    raise Unsupported(target.name, target.name, "unsupported_op",
                      f"{target.name} still rejects nodes after decomposing {len(rejected)} of them")


def plan(model: Model, target: "Target | str", tables: "Tables | None" = None, **options: Any) -> Compilation:
    """The pipeline without emit; every refusal is collected in ``ctx.refusals`` by node name."""
    from ..table.loader import load_tables
    from .target import get

    target = get(target) if isinstance(target, str) else target
    ctx = Compilation(target, tables or load_tables(), dict(options), refusals={})
    with gc_paused():
        _passes(model.clone(), ctx, emit=False)
    return ctx


def fewest_dims_to_fix(model: Model, target: "Target | str", tables: "Tables | None", options: dict[str, Any],
                       sizes: dict[str, int], tried: "set[str] | frozenset[str]" = frozenset()) -> dict[str, int] | None:
    """For a target that cannot keep every symbolic dim of ``model``: the one dim whose fixing
    (at its size in ``sizes``, else 1) leaves no ``dynamic_shape`` refusal in the plan, trying
    each in input order (an ``If`` on the channel count needs the channels fixed, not the
    batch or the length) but those in ``tried`` (the plan passed, the emitter did not), or
    None when no single dim does (then every dim is fixed)."""
    from ..ir import dims

    labels = list(dict.fromkeys(d for ds in dims.symbolic(model).values() for d in ds))
    asked = dict(options.get("fix_dims") or {})
    if len([d for d in labels if d not in asked]) < 2:
        return None
    for d in labels:
        if d in asked or d in tried:
            continue
        try:
            ctx = plan(model, target, tables, **{**options, "fix_some_dims": {d: int(sizes.get(d, 1))},
                                                 "fix_reason": "probe"})
        except Exception:  # noqa: BLE001 - this dim does not settle it; the next may
            continue
        if not any(r.code == "dynamic_shape" for r in (ctx.refusals or {}).values()):
            return {d: int(sizes.get(d, 1))}
    return None


__all__ = ["Compilation", "Compiled", "Rejected", "compile", "plan", "prepare", "fold", "legalize",
           "fewest_dims_to_fix"]
