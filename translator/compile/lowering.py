"""The pipeline's lowering step: per node, the target's code, else the table decomposition, else a refusal.

``lower(graph, ctx)`` rewrites the graph in place so that ``ctx.target`` emits every node
itself: ``judge`` says whether it does (supported op, the target's and the rule's checks,
the cell's dtypes and rank); other nodes are replaced by their op's ``decomposition``
(declarative SSA over IR ops, expanded recursively) where it applies. What is left is
refused with ``Unsupported(op, backend, reason_code, detail)``, or collected per node by
``pipeline.plan``.

A decomposition body is a list of steps ``{op, in, out, attrs}``. Inputs name the op's
signature inputs, earlier step outputs, ``"@attr"`` (an attribute of the node as a
constant tensor), or numeric literals (a scalar constant of the first input's dtype).
Step attributes may be ``"@attr"`` references too.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
import numpy as np

from ..table.errors import Unsupported
from ..ir.gcpause import gc_paused
from ..table.index import thaw as _thaw
from ..ir.graph import OPAQUE, Graph, Node, TensorType, Value
from ..table.loader import Op, Tables

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .registry import Refusal, Rule

MAX_DEPTH = 8


# ----------------------------------------------------------------------------- the pipeline's lowering
def judge(node: Node, ctx: Any, supported: frozenset[str], have: "Mapping[str, Rule]") -> "Refusal | None":
    """Whether ``ctx.target`` emits ``node`` itself: None, or why not (one ``Refusal``).

    In order: the op is supported (cell native/composite AND a rule or snippet), the
    library did not reject this node in an earlier attempt, the target-wide check, the
    cell's ``dtypes`` (unless the rule takes any dtype) and ``rank``, the rule's own check.
    ``supported`` and ``have`` (op id → the target's rule) are computed once per ``lower``.
    """
    from .registry import Refusal, refusal

    target, tables = ctx.target, ctx.tables
    if node.op == OPAQUE:
        return Refusal(node.attrs.get("reason", "unsupported_op"), node.attrs.get("detail", "the frontend could not read it"))
    op = tables.ops.get(node.op)
    if op is None:
        return Refusal("unsupported_op", "op is not in optable.yaml")
    if target.reference:
        return None if node.op in supported else Refusal("unsupported_op", "no reference function")
    if node.op not in supported:
        cell = op.backends.get(target.name)
        if cell is not None and cell.status == "unavailable":
            return Refusal("unsupported_op", cell.notes or "the table marks it unavailable")
        if cell is not None:
            return Refusal("unsupported_op", f"{target.name} has no code for its {cell.status} cell")
        return Refusal("unsupported_op", "no native mapping in optable.yaml")
    if node.name in ctx.rejected:
        return ctx.rejected[node.name]
    if target.accepts is not None:
        why = refusal(target.accepts(node, ctx))
        if why is not None:
            return why
    rule = have.get(node.op)
    cell = op.backends.get(target.name)
    if cell is None:  # a target with its own notion of support and no column in the table
        return refusal(rule.check(node)) if rule is not None and rule.check is not None else None
    first = next((v for v in node.inputs if v is not None), None)
    if not target.cell_limits:
        return refusal(rule.check(node)) if rule is not None and rule.check is not None else None
    if cell.dtypes is not None and not (rule is not None and rule.any_dtype):
        allowed = tables.expand_dtypes(cell.dtypes)
        if first is not None and first.type.dtype is not None and first.type.dtype not in allowed:
            return Refusal("unsupported_dtype",
                           f"{target.name} {cell.name} takes {', '.join(allowed)}; the input is {first.type.dtype}")
    if cell.rank is not None:
        r = first.type.rank if first is not None else None
        lo, hi = cell.rank.get("min"), cell.rank.get("max")
        if r is not None and ((lo is not None and r < lo) or (hi is not None and r > hi)):
            span = f"{lo if lo is not None else 0}..{hi if hi is not None else 'any'}"
            return Refusal("rank_limit", f"{target.name} {cell.name} takes rank {span}; the input has rank {r}")
    if rule is not None and rule.check is not None:
        return refusal(rule.check(node))
    return None


def lower(graph: Graph, ctx: Any) -> None:
    """Rewrite ``graph`` (and its subgraphs) so that ``ctx.target`` emits every node itself:
    native where ``judge`` says so, else the op's table decomposition where it applies, else a
    refusal (raised, or collected in ``ctx.refusals`` by ``pipeline.plan``)."""
    from .registry import rules
    from .registry import supported as supported_ops

    own = ctx.target.extra.get("supports") if ctx.target.extra else None
    supported = own(ctx.tables) if own is not None else supported_ops(ctx.target, ctx.tables)
    also = ctx.target.extra.get("also_supports") if ctx.target.extra else None
    if also is not None:  # ops an option lets the target keep (TFLite's select TF ops)
        supported = supported | also(ctx)
    have = rules(ctx.target.columns)
    with gc_paused():
        _lower_in(graph, ctx, supported, have)


def _lower_in(graph: Graph, ctx: Any, supported: frozenset[str], have: "Mapping[str, Rule]") -> None:
    for node in list(graph.nodes):
        for sub in node.subgraphs():
            _lower_in(sub, ctx, supported, have)
    _lower_list(graph, list(graph.nodes), ctx, supported, have, 0)


def _lower_list(graph: Graph, nodes: list[Node], ctx: Any, supported: frozenset[str], have: "Mapping[str, Rule]",
                depth: int) -> None:
    from . import unroll
    from .registry import Refusal

    tables, name = ctx.tables, ctx.target.name
    for node in nodes:
        why = judge(node, ctx, supported, have)
        if why is None:
            ctx.how.setdefault(node.name, "native")
            continue
        op = tables.ops.get(node.op)
        widened = _widened(graph, node, op, ctx) if op is not None and why.code == "unsupported_dtype" else None
        if widened is not None:  # per-op dtype legalization of an op that only moves data
            ctx.how[node.name] = "legalized"
            _settle(graph, widened, ctx)
            _lower_list(graph, widened, ctx, supported, have, depth + 1)
            continue
        # the Python expansion first where it is the exact form (unroll.PREFERRED), unless the
        # target rejected the loop it wrote last time and that loop cannot be unrolled (a
        # run-time length): then the table's decomposition
        python_first = node.op in unroll.PREFERRED and (unroll.unrollable(node) or not any(
            k.startswith(node.name + "/") for k in (getattr(ctx, "rejected", None) or {})))
        not_unrolled = unroll.why_not(node) if (op is None or not op.decomposition or python_first) \
            and depth < MAX_DEPTH and node.op in unroll.OPS else "n/a"
        if node.op in unroll.PREFERRED and not python_first and op is not None and op.decomposition:
            ctx.warn(f"{node.op} {node.name!r}: {ctx.target.name} rejected its exact form (a loop with the run-time "
                     "quantization); written in the table's float form, which differs from onnxruntime by that rounding")
        if not_unrolled is None:  # a decomposition over static shapes (translator/compile/unroll.py)
            new_nodes = unroll.expand(graph, node)
            ctx.decomposed.append((node.name, node.op))
            ctx.how[node.name] = "decomposed"
            _settle(graph, new_nodes, ctx)
            new_nodes = _fold_new(graph, new_nodes, ctx)
            for n in new_nodes:  # a decomposition that builds a loop: its body is lowered too
                for sub in n.subgraphs():
                    _lower_in(sub, ctx, supported, have)
            _lower_list(graph, new_nodes, ctx, supported, have, depth + 1)
            continue
        why_not = applies(op, node) if op is not None and op.decomposition else None
        if op is None or not op.decomposition or why_not is not None or depth >= MAX_DEPTH:
            refusal = why
            if node.op not in supported and op is not None:
                if why_not is not None:
                    refusal = Refusal("unsupported_op", f"not native, and {why_not}")
                elif depth >= MAX_DEPTH:
                    refusal = Refusal("unsupported_op", "decomposition nests too deep")
                elif op.backends.get(name) is None or op.backends[name].status != "unavailable":
                    refusal = Refusal("unsupported_op", "no native mapping and no decomposition in optable.yaml")
            if node.op == "loop" and not_unrolled != "n/a":  # why the static unrolling did not apply either
                refusal = Refusal(refusal.code, f"{refusal.detail}; not unrolled: {not_unrolled}")
            if ctx.refusals is not None:
                ctx.refusals[node.name] = refusal
                continue
            raise Unsupported(node.op, name, refusal.code, refusal.detail, node.name)
        new_nodes = expand(graph, node, op, tables)
        ctx.decomposed.append((node.name, node.op))
        ctx.how[node.name] = "decomposed"
        _settle(graph, new_nodes, ctx)
        new_nodes = _fold_new(graph, new_nodes, ctx)
        _lower_list(graph, new_nodes, ctx, supported, have, depth + 1)


def _fold_new(graph: Graph, new_nodes: list[Node], ctx: Any) -> list[Node]:
    """A decomposition's steps over constants fold as they are inserted (a quantized LSTM's
    weight dequantization: Core ML's lstm takes constant weights only; a loop's trip count
    read from a static shape: the loop can then be unrolled); returns the nodes left."""
    if not ctx.target.fold:
        return new_nodes
    from .passes.fold_constants import fold_nodes

    folded = fold_nodes(graph, new_nodes)
    return [n for n in new_nodes if id(n) not in folded]


def _widened(graph: Graph, node: Node, op: Op, ctx: Any) -> list[Node] | None:
    """A ``moves_data`` op whose data dtype the target's cell lacks (a bool gather on Core ML),
    computed in a dtype the cell has and cast back: exact, since every output element is a
    copy of an input element. Returns the inserted nodes (casts in, the op, casts out), or
    None when the op or dtype does not allow it."""
    from ..table.dtypes import onnx_enum_of
    from .passes.legalize_dtypes import SUBSTITUTES

    cell = op.backends.get(ctx.target.name)
    sig = op.signature
    if "moves_data" not in op.traits or cell is None or cell.dtypes is None or sig is None or not node.outputs:
        return None
    if str(node.attrs.get("reduction", "none")) != "none":  # a scatter that combines values is arithmetic
        return None
    tv = sig.outputs[0].type
    d = node.outputs[0].type.dtype
    allowed = set(ctx.tables.expand_dtypes(cell.dtypes))
    if d is None or d in allowed:
        return None
    # an 8/16-bit integer is exactly a float32 too (a max pool on Core ML takes floats only)
    src = (node.meta.get("source_in_dtypes") or [None])[0] or d  # before legalization widened it
    wider = (*SUBSTITUTES.get(d, ()), "int32", *(("float32",) if src in ("int8", "uint8", "int16", "uint16") else ()))
    sub = next((s for s in wider if s in allowed and (ctx.legal is None or s in ctx.legal)), None)
    if sub is None:
        return None
    scale = _quantized_by(node.inputs[0]) if sub == "float32" else None
    data: list[int] = []
    k = 0
    for port in sig.inputs:
        span = range(k, len(node.inputs)) if port.variadic else range(k, k + 1)
        if port.type == tv:
            data.extend(i for i in span if i < len(node.inputs))
        k = span.stop
    enum = onnx_enum_of(ctx.tables)
    inserted: list[Node] = []
    ins = list(node.inputs)
    for i in data:
        v = ins[i]
        if v is not None and v.type.dtype == d:
            # a quantized tensor moves as its dequantized values and is quantized back with the same
            # parameters (exact: the op selects, Q(DQ(q)) = q), which keeps it in the QDQ form a
            # quantizing target writes as int8; any other tensor is cast
            c = graph.add_node(*(("dequantize_linear", [v, *scale], {}) if scale else ("cast", [v], {"to": enum[sub]})),
                               outputs=[f"{v.name}_as_{sub}"], name=f"{node.name}/to_{sub}{i}",
                               types=[TensorType(sub, v.type.shape)], before=node)
            c.meta["source_in_dtypes"] = [src] + [None] * (len(c.inputs) - 1)
            ins[i] = c.outputs[0]
            inserted.append(c)
    outs = [TensorType(sub, o.type.shape) if o.type.dtype == d else o.type for o in node.outputs]
    new = graph.add_node(node.op, ins, dict(node.attrs), outputs=[f"{o.name}_as_{sub}" for o in node.outputs],
                         name=f"{node.name}/{sub}", types=outs, before=node)
    new.meta.update(node.meta)
    inserted.append(new)
    results: list[Value] = []
    for old, w in zip(node.outputs, new.outputs):
        if w.type.dtype != sub or old.type.dtype != d:
            results.append(w)
            continue
        back = graph.add_node(*(("quantize_linear", [w, *scale], {}) if scale else ("cast", [w], {"to": enum[d]})),
                              outputs=[f"{old.name}_back"], name=f"{node.name}/to_{d}", types=[old.type], before=node)
        back.meta["source_dtypes"] = [src]
        inserted.append(back)
        results.append(back.outputs[0])
    graph.replace_node(node, results, keep_types=False)
    ctx.warn(f"{ctx.target.name}: node {node.name!r} ({node.op}) moves {src} data as {sub} "
             f"(the target's {node.op} lacks {d}; exact, " + ("dequantized and quantized back with the same "
                                                            "parameters)" if scale else "cast back)"))
    return inserted


def _quantized_by(v: Value | None) -> tuple[Value, Value] | None:
    """(scale, zero point) of ``v`` when a per-tensor ``quantize_linear`` with constant
    parameters computes it (through reshapes of the quantized values), else None."""
    from .quantized import _RESHAPES

    p = v.producer if v is not None else None
    while p is not None and p.op in _RESHAPES and p.inputs[0] is not None:
        p = p.inputs[0].producer
    if p is None or p.op != "quantize_linear" or len(p.inputs) < 3 or int(p.attrs.get("block_size", 0) or 0):
        return None
    sc, zp = p.inputs[1], p.inputs[2]
    if sc is None or zp is None or not (sc.is_const and zp.is_const) or np.asarray(sc.const).size != 1 \
            or np.asarray(zp.const).size != 1:
        return None
    return sc, zp


def _settle(graph: Graph, new_nodes: list[Node], ctx: Any) -> None:
    """Type what a decomposition inserted and legalize its dtypes before judging it."""
    vals = [v for n in new_nodes for v in list(n.inputs) + list(n.outputs) if v is not None]
    if any(v.type.dtype is None and v.type.kind == "tensor" for v in vals):
        from ..ir.infer import infer

        infer(graph, ctx.tables)
    legal = ctx.legal
    if legal is not None and any(v.type.kind == "tensor" and v.type.dtype is not None and v.type.dtype not in legal
                                 for v in vals):
        from .passes import legalize_dtypes

        top = ctx.model is None or graph is ctx.model.graph
        ctx.warn(legalize_dtypes.run(graph, ctx.target.name, ctx.tables, legal=legal, top=top))
    for n in new_nodes:  # a decomposition that builds a loop: its body follows the same dtypes
        for sub in n.subgraphs():
            _settle(sub, list(sub.nodes), ctx)


def _literal(graph: Graph, value: Any, like: Value | None, name: str) -> Value:
    import numpy as np

    from ..table.dtypes import numpy_dtype

    dtype = like.type.dtype if like is not None and like.type.dtype else "float32"
    arr = np.asarray(value, dtype=numpy_dtype(dtype))
    return graph.add_constant(name, arr, dtype)


def applies(op: Op, node: Node) -> str | None:
    """Why the op's decomposition does not apply to this node (None when it does)."""
    when = op.decomposition_when
    if not when:
        return None
    attrs = dict(op.signature and {a.name: a.default for a in op.signature.attributes} or {})
    attrs.update(node.attrs)
    for k, v in (when.get("attrs") or {}).items():
        if _thaw(attrs.get(k)) != _thaw(v):
            return f"the decomposition needs {k}={_thaw(v)!r} (node has {attrs.get(k)!r})"

    def given(name: str) -> Value | None:
        idx = op.signature.input_index(name) if op.signature is not None else None
        return node.inputs[idx] if idx is not None and idx < len(node.inputs) else None

    kinds = when.get("dtype_kind")
    of = when.get("dtype_of")
    first = given(of) if of is not None and op.signature is not None else next((v for v in node.inputs if v is not None), None)
    if kinds and first is not None and first.type.dtype is not None:
        from ..table.dtypes import numpy_dtype

        kind = {"f": "float", "i": "int", "u": "uint", "b": "bool", "c": "complex"}.get(numpy_dtype(first.type.dtype).kind, "?")
        if kind not in kinds:
            what = f"input {of!r}" if of else "input"
            return f"the decomposition needs a {'/'.join(kinds)} {what} (node has {first.type.dtype})"
    if op.signature is not None:
        for name in when.get("present") or ():
            if given(name) is None:
                return f"the decomposition needs input {name!r}"
    return None


def expand(graph: Graph, node: Node, op: Op, tables: Tables) -> list[Node]:
    """Replace ``node`` by its op's decomposition; returns the inserted nodes.

    A step with ``if_present: [names]`` runs only when those optional inputs are given (else
    its outputs are absent, None to the steps that take them). Step inputs: a signature input
    name; ``name...`` (all variadic inputs); ``#name``
    (their count, a scalar of the first input's dtype); ``@attr`` (an attribute as a
    constant; ``@attr:1d`` wraps a scalar into a 1-D tensor); a number (a scalar of the
    first input's dtype); ``{value: ..., dtype: ...}`` (a typed constant); or null.
    """
    import numpy as np

    from ..table.dtypes import dtype_id, numpy_dtype

    assert op.decomposition is not None
    why = applies(op, node)
    if why is not None:
        raise Unsupported(node.op, "ir", "unsupported_attribute_value", why, node.name)
    sig = op.signature
    env: dict[str, Value | None] = {}
    variadic: dict[str, list[Value | None]] = {}
    if sig is not None:
        ins = list(node.inputs)
        k = 0
        for port in sig.inputs:
            if port.variadic:
                variadic[port.name] = ins[k:]
                env[port.name] = ins[k] if k < len(ins) else None
                k = len(ins)
            else:
                env[port.name] = ins[k] if k < len(ins) else None
                k += 1
    attrs: dict[str, Any] = {}
    if sig is not None:
        attrs = {a.name: _thaw(a.default) for a in sig.attributes}
    attrs.update(node.attrs)
    first = next((v for v in node.inputs if v is not None), None)
    inserted: list[Node] = []
    last_outs: tuple[Value, ...] = ()
    for i, step in enumerate(op.decomposition):
        if any(env.get(name) is None for name in step.if_present):  # an omitted optional input
            for o in step.outs:
                env[o] = None
            continue
        vals: list[Value | None] = []
        like = first
        for ref in step.ins:  # literals take the dtype of the step's first non-bool tensor input
            v = env.get(ref) if isinstance(ref, str) else None
            if v is not None and v.type.dtype not in (None, "bool"):
                like = v
                break
        for ref in step.ins:
            if isinstance(ref, str) and ref.startswith("@"):
                name, _, form = ref[1:].partition(":")
                a = attrs.get(name)
                if a is None:
                    vals.append(None)
                    continue
                arr = np.asarray(a)
                if form == "1d":
                    arr = arr.reshape(-1)
                if arr.dtype.kind in "iub":
                    arr = arr.astype(np.int64) if arr.dtype.kind in "iu" else arr
                    vals.append(graph.add_constant(f"{node.name}_{name}", arr, dtype_id(arr.dtype)))
                else:
                    vals.append(_literal(graph, arr, like, f"{node.name}_{name}"))
            elif isinstance(ref, str) and ref.endswith("..."):
                vals.extend(variadic.get(ref[:-3], []))
            elif isinstance(ref, str) and ref.startswith("#"):
                vals.append(_literal(graph, len(variadic.get(ref[1:], [])), like, f"{node.name}_count"))
            elif isinstance(ref, str):
                if ref not in env:
                    raise Unsupported(node.op, "ir", "verifier", f"decomposition refers to unknown value {ref!r}", node.name)
                vals.append(env[ref])
            elif ref is None:
                vals.append(None)
            elif hasattr(ref, "items"):
                arr = np.asarray(_thaw(ref["value"]), dtype=numpy_dtype(ref["dtype"]))
                vals.append(graph.add_constant(f"{node.name}_c{i}", arr, ref["dtype"]))
            else:
                vals.append(_literal(graph, ref, like, f"{node.name}_c{i}"))
        step_attrs = {k: (attrs.get(v[1:]) if isinstance(v, str) and v.startswith("@") else _thaw(v))
                      for k, v in step.attrs.items()}
        step_attrs = {k: v for k, v in step_attrs.items() if v is not None}
        new = graph.add_node(step.op, vals, step_attrs, outputs=[f"{node.name}_{o}" for o in step.outs],
                             name=f"{node.name}/{step.op}{i}", before=node)
        new.meta["decomposed_from"] = node.op
        new.meta["decomposed_root"] = node.meta.get("decomposed_root", node.name)  # the model's node it replaces
        inserted.append(new)
        for o, v in zip(step.outs, new.outputs):
            env[o] = v
        last_outs = new.outputs
    results = [env.get(p.name) for p in sig.outputs] if sig is not None else list(last_outs)
    source = node.meta.get("source_dtypes") or []
    for k, v in enumerate(results):  # the step giving an output computes in the op's model dtype
        p = v.producer if v is not None else None
        if p is not None and k < len(source) and source[k] is not None and p in inserted:
            was = list(p.meta.get("source_dtypes") or [o.type.dtype for o in p.outputs])
            was[p.outputs.index(v)] = source[k]
            p.meta["source_dtypes"] = was
    given = dict(zip((id(v) for v in node.inputs if v is not None),
                     (d for v, d in zip(node.inputs, node.meta.get("source_in_dtypes") or []) if v is not None)))
    for p in inserted:  # a step reading the op's own inputs reads them in their model dtypes too
        if given and any(v is not None and id(v) in given for v in p.inputs):
            p.meta["source_in_dtypes"] = [given.get(id(v), v.type.dtype) if v is not None else None for v in p.inputs]
    graph.replace_node(node, results)
    return inserted


__all__ = ["MAX_DEPTH", "judge", "lower", "applies", "expand", "TensorType"]


def decompose_now(g: Graph, ctx: Any, ops: tuple[str, ...], tables: Tables | None = None) -> int:
    """The nodes of ``g`` whose op is in ``ops`` replaced by their table decompositions now,
    typed and legalized as lowering does (a target's ``prepare`` that reads the expanded form:
    a QOperator model's products as QDQ before ``quantized.integer_domain``, which a target
    without native rules for them would decompose while lowering anyway). With ``ctx`` None
    (no target: the check's rewrite of the reference model), ``tables``' decompositions,
    left untyped for the caller's ``infer``. Returns the nodes expanded."""
    tables = ctx.tables if ctx is not None else tables
    done = 0
    for node in list(g.nodes):
        op = tables.ops.get(node.op) if node.op in ops else None
        if op is None or not op.decomposition or node.graph is not g:
            continue
        new = expand(g, node, op, tables)
        if ctx is not None:
            _settle(g, new, ctx)
        done += 1
    return done
