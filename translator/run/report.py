"""Compatibility reports: one model across every backend, or the whole table.

Per node and backend a model report says ``native``, ``folded`` (a constant or static
shape subgraph every emitter computes at conversion time), ``decomposed`` (into which ops),
``legalized`` (which dtype change) or ``unsupported`` (reason code, detail), and how the
(op, backend, dtype) cell is backed: ``verified`` by execution (verified.json, written by
the generated tests), ``structural`` (built and serialized, not run), or only
``claimed`` by the table. Nothing is converted: the planner runs the same lowering the
emitters run, on a scratch copy of each node.

Renderers: terminal text, Markdown, JSON, and one self-contained HTML file (no network,
every string escaped, sortable and filterable with a few lines of inline script).
"""
from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..table.constants import API_KEYS, API_TITLES
from ..table.errors import OpbridgeError
from ..ir.graph import OPAQUE, Model
from ..table.loader import Tables, load_tables


@dataclass
class NodePlan:
    node: str
    op: str
    dtype: str | None
    status: str  # native | folded | decomposed | legalized | unsupported
    detail: str = ""
    reason: str = ""
    evidence: str = "claimed"  # verified | structural | claimed | reference (folded by the NumPy reference)
    #: a compute node of a quantized model: integer | int8 weights | float, and why (``Target.integer_plan``)
    integer: str = ""
    integer_detail: str = ""


@dataclass
class BackendPlan:
    backend: str
    nodes: list[NodePlan] = field(default_factory=list)
    #: symbolic input dims this backend fixes (as ``convert`` would), and the sizes
    fixed_dims: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Nodes per status: native, folded, decomposed, legalized, unsupported."""
        return {k: sum(1 for p in self.nodes if p.status == k)
                for k in ("native", "folded", "decomposed", "legalized", "unsupported")}

    def summary(self) -> str:
        n = len(self.nodes)
        bad = [p for p in self.nodes if p.status == "unsupported"]
        ok = n - len(bad)
        s = f"{self.backend}: {ok}/{n} nodes"
        if bad:
            ops = sorted({p.op for p in bad})
            s += f", {len(bad)} unsupported: " + ", ".join(ops[:8]) + (" …" if len(ops) > 8 else "")
        counts = {k: sum(1 for p in self.nodes if p.status == k)
                  for k in ("native", "folded", "decomposed", "legalized")}
        if bad and len(bad) == n and len({(p.reason, p.detail) for p in bad}) == 1:  # the whole model refused
            return s + f" ({bad[0].reason}: {bad[0].detail})"
        return s + " (" + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + ")" + self.quantized()

    def quantized(self) -> str:
        """A quantized model's compute nodes: how many run integer, keep int8 weights, run float."""
        q = [p for p in self.nodes if p.integer]
        if not q:
            return ""
        kinds = {k: sum(1 for p in q if p.integer == k) for k in ("integer", "int8 weights", "float")}
        return f"; quantized: {', '.join(f'{v} {k}' for k, v in kinds.items() if v)} of {len(q)} compute nodes"


def _evidence(verified: dict[str, Any], op: str, backend: str, dtype: str | None) -> str:
    cell = verified.get(op, {}).get(backend)
    if not cell:
        return "claimed"
    if dtype is not None and cell.get("dtypes") and dtype not in cell["dtypes"]:
        return "claimed"
    return "verified" if cell.get("status") == "numeric" else cell.get("status", "claimed")


def dim_options(fix_dims: dict[str, int] | None, check_dims: dict[str, Any] | None, model: Model | None = None,
                backends: list[str] | None = None) -> dict[str, Any]:
    """``convert``'s dim options as pipeline options: dims fixed as asked, and the first check
    size of each dim as the size a target that must fix it uses. With ``model`` and a backend
    among ``backends`` that fixes symbolic dims, the sizes are those ``convert`` derives when
    the model cannot run at the default check sizes (``check.runnable_sizes``)."""
    from ..compile.target import get

    if model is not None and any(not get(b).dynamic_dims for b in backends or ()):
        from ..ir import dims
        from .check import runnable_sizes

        if dims.symbolic(model):
            check_dims = runnable_sizes(model.clone, check_dims)
    out: dict[str, Any] = {}
    if fix_dims:
        out["fix_dims"] = dict(fix_dims)
    if check_dims:
        out["dim_defaults"] = {d: tuple(s)[0] for d, s in check_dims.items()}
    return out


def plan_model(model: Model, backends: list[str], tables: Tables | None = None,
               verified: dict[str, Any] | None = None, **options: Any) -> list[BackendPlan]:
    """Per backend, the compile pipeline without emit (``pipeline.plan``): what ``convert``
    would do with each node of ``model``, in the model's node order. ``options`` are
    ``convert``'s pipeline options (``fix_dims``, ``dim_defaults``: the sizes a target that
    declares static shapes fixes symbolic dims to)."""
    from ..compile.pipeline import fewest_dims_to_fix, plan
    from ..compile.quantized import COMPUTE_OPS
    from ..compile.target import get as get_target
    from ..ir import dims
    from ..table.quick import load_verified

    tables = tables or load_tables()
    verified = load_verified() if verified is None else verified
    order = list(model.graph.walk())
    plans = []
    for b in backends:
        try:
            ctx = plan(model, b, tables, **options)
            refused = [r for r in (ctx.refusals or {}).values() if r.code == "dynamic_shape"]
            if refused and get_target(b).dynamic_dims and not options.get("fix_all_dims") and dims.symbolic(model):
                # as convert does: the target cannot keep the symbolic dims, so it fixes the
                # one that settles it, or else every one
                why = f"{b} cannot run them symbolic: {refused[0]}"
                some = fewest_dims_to_fix(model, b, tables, options, options.get("dim_defaults") or {})
                ctx = (plan(model, b, tables, **options, fix_some_dims=some, fix_reason=why) if some
                       else plan(model, b, tables, **options, fix_all_dims=why))
        except Exception as exc:  # noqa: BLE001 - the whole model refused for this backend (a prepare
            # step, or a bug of ours): the other backends are still judged, as convert judges each target
            if isinstance(exc, OpbridgeError) and exc.code == "bad_option":
                raise  # the user's options, not the model: convert refuses them the same way
            code = exc.code if isinstance(exc, OpbridgeError) else "internal_error"
            detail = getattr(exc, "detail", None) or f"{type(exc).__name__}: {exc}".splitlines()[0]
            if getattr(exc, "node", None):  # where the whole-model refusal arose
                detail = f"at node {exc.node!r}" + (f" ({exc.op})" if getattr(exc, "op", None) else "") + f": {detail}"
            bp = BackendPlan(b)
            for node in order:
                first = next((v for v in node.inputs if v is not None), None)
                bp.nodes.append(NodePlan(node.name, _op_of(node), first.type.dtype if first is not None else None,
                                         "unsupported", detail, code))
            plans.append(bp)
            continue
        lowered = list(ctx.model.graph.walk()) if ctx.model is not None else []
        integer = _integer_plan(model, ctx, lowered, get_target(b))
        final_dtype = {n.name: (n.outputs[0].type.dtype if n.outputs else None) for n in lowered}
        inserted: dict[str, list[str]] = {}  # model node name → the ops its decomposition left
        part_refused: dict[str, Any] = {}  # model node name → a refusal of one of its decomposition's ops
        for n in lowered:
            if "decomposed_root" in n.meta:
                root = n.meta["decomposed_root"]
                inserted.setdefault(root, []).append(n.op)
                why = (ctx.refusals or {}).get(n.name)
                if why is not None and root not in part_refused:
                    part_refused[root] = (n.op, why)
        bp = BackendPlan(b, fixed_dims=dict(ctx.fixed_dims))
        for node in order:
            first = next((v for v in node.inputs if v is not None), None)
            dtype = first.type.dtype if first is not None else (node.outputs[0].type.dtype if node.outputs else None)
            how = ctx.how.get(node.name, "native")
            if how == "folded":
                bp.nodes.append(NodePlan(node.name, _op_of(node), node.outputs[0].type.dtype if node.outputs else None,
                                         "folded", "computed at conversion time (constant or static shape)",
                                         evidence="reference"))
                continue
            plan_ = NodePlan(node.name, _op_of(node), dtype, "native", evidence=_evidence(verified, node.op, b, dtype))
            refusal = (ctx.refusals or {}).get(node.name)
            cell = tables.ops[node.op].backends.get(b) if node.op in tables.ops else None
            if refusal is not None:
                plan_.status, plan_.reason, plan_.detail = "unsupported", refusal.code, refusal.detail
            elif node.name in part_refused:  # decomposed, but an op of the decomposition is refused
                part, why = part_refused[node.name]
                plan_.status, plan_.reason = "unsupported", why.code
                plan_.detail = f"decomposed into {', '.join(sorted(set(inserted.get(node.name, []))))}; its {part}: {why.detail}"
            elif how == "decomposed":
                ops = inserted.get(node.name, [])
                plan_.status = "decomposed"
                plan_.detail = "into " + ", ".join(sorted(set(ops)))
                ev = {_evidence(verified, o, b, dtype) for o in ops}
                plan_.evidence = "verified" if ev == {"verified"} else "claimed" if "claimed" in ev or not ev else "structural"
            elif cell is not None and cell.status == "composite":
                plan_.status, plan_.detail = "decomposed", "library composite: " + ", ".join(cell.names)
            out_dtype = node.outputs[0].type.dtype if node.outputs else None
            now = final_dtype.get(node.name)
            if plan_.status != "unsupported" and now is not None and out_dtype is not None and now != out_dtype:
                plan_.status = "legalized"
                plan_.detail = (plan_.detail + "; " if plan_.detail else "") + f"dtype {out_dtype} -> {now}"
            if node.name in integer and plan_.status != "unsupported" and node.op in COMPUTE_OPS:
                plan_.integer, plan_.integer_detail = integer[node.name]
            bp.nodes.append(plan_)
        plans.append(bp)
    return plans


def _op_of(node: Any) -> str:
    """The op a report names: a table op, or what the source called a node no frontend could read."""
    return str(node.attrs.get("source_op", node.op)) if node.op == OPAQUE else node.op


@dataclass
class Problem:
    """Nodes one backend refuses for one reason, of one op type; ``remedy``: an option that was
    re-planned and makes them convertible (computed, never guessed), or empty."""
    backend: str
    reason: str
    op: str
    detail: str
    nodes: list[str]
    remedy: str = ""
    #: what the remedy does, said after it (default: "makes them convertible")
    remedy_says: str = "makes them convertible"

    @property
    def what(self) -> str:
        """``12 conv node(s)``; ``the whole model (689 nodes)`` when the backend refused the model
        as a whole (``op`` empty: every node, one reason)."""
        return f"{len(self.nodes)} {self.op} node(s)" if self.op else f"the whole model ({len(self.nodes)} nodes)"


def problems(plans: list[BackendPlan], model: Model | None = None, tables: Tables | None = None,
             **options: Any) -> list[Problem]:
    """The refused nodes of every backend grouped by (reason, op), largest groups first. With
    ``model``, a backend's groups get a remedy when one computes: the model re-planned with
    its remaining symbolic dims fixed (at the sizes the check would use) converts the group's
    nodes: ``--fix-dim NAME=SIZE ...``."""
    out: list[Problem] = []
    for bp in plans:
        groups: dict[tuple[str, str], list[NodePlan]] = {}
        for n in bp.nodes:
            if n.status == "unsupported":
                groups.setdefault((n.reason, n.op), []).append(n)
        if len(groups) > 1 and all(n.status == "unsupported" for n in bp.nodes) \
                and len({(n.reason, n.detail) for n in bp.nodes}) == 1:
            groups = {(bp.nodes[0].reason, ""): list(bp.nodes)}  # refused as a whole: one line, not one per op
        if not groups:
            continue
        fixed_plan = _with_dims_fixed(model, bp, tables, options) if model is not None else None
        by_option = _with_remedy_options(model, bp, tables, options) if model is not None else []
        frozen = _with_a_setting_frozen(model, bp, tables, options) if model is not None else None
        for (reason, op), ns in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            pr = Problem(bp.backend, reason, op, ns[0].detail, [n.node for n in ns])
            if fixed_plan is not None:
                plan_, fixed = fixed_plan
                ok = {n.node for n in plan_.nodes if n.status != "unsupported"}
                if fixed and all(name in ok for name in pr.nodes):
                    pr.remedy = " ".join(f"--fix-dim {k}={v}" for k, v in fixed.items())
            for flag, ok, what in by_option:
                if not pr.remedy and all(name in ok for name in pr.nodes):
                    pr.remedy, pr.remedy_says = flag, what
            if not pr.remedy and frozen is not None:
                pr.remedy, pr.remedy_says = frozen
            out.append(pr)
    return out


#: what may stand between a setting input and the If it decides
_CONDITION_OPS = frozenset({"logical_not", "logical_and", "logical_or", "logical_xor", "cast", "identity", "reshape",
                            "squeeze", "unsqueeze"})


def setting_inputs(model: Model) -> list[tuple[str, int | float]]:
    """Graph inputs that are settings, each with the value the model tests it against: a
    one-element input compared by ``Equal`` with a one-element constant whose result decides
    an ``If`` (directly or through not / and / or / casts / reshapes), as a sample-rate switch
    is (``sr == 16000``). Freezing the input to that value (``--freeze``) inlines the branch."""
    out: list[tuple[str, int | float]] = []
    for v in model.graph.inputs:
        shape = v.type.shape
        if shape is None or any(d != 1 for d in shape):
            continue
        for c in v.consumers():
            if c.op != "equal" or len(c.inputs) != 2:
                continue
            other = c.inputs[1] if c.inputs[0] is v else c.inputs[0]
            const = _constant(other)
            if const is None or const.size != 1 or not _decides_an_if(c.outputs[0]):
                continue
            value = const.reshape(()).item()
            if isinstance(value, (bool, int, float)) and (v.name, value) not in out:
                out.append((v.name, value))
    return out


def _constant(v: Any) -> Any:
    """``v``'s array when it is a constant (an initializer or a ``Constant`` node's output)."""
    import numpy as np

    if v is None:
        return None
    if v.is_const:
        return v.const
    p = v.producer
    if p is not None and p.op == "constant" and isinstance(p.attrs.get("value"), np.ndarray):
        return p.attrs["value"]
    return None


def _decides_an_if(v: Any, depth: int = 4) -> bool:
    for c in v.consumers():
        if c.op == "if" and c.inputs and c.inputs[0] is v:
            return True
        if depth and c.op in _CONDITION_OPS and any(_decides_an_if(o, depth - 1) for o in c.outputs):
            return True
    return False


def _with_a_setting_frozen(model: Model, bp: BackendPlan, tables: Tables | None,
                           options: dict[str, Any]) -> tuple[str, str] | None:
    """``bp``'s backend re-planned with a setting input frozen (``setting_inputs``) to the
    value the model tests: the ``--freeze`` flag and what it does, when the whole model then
    converts (the branch not taken is gone, so the refused nodes' names may be too)."""
    from ..ir.freeze import freeze
    from .convert import settle_frozen

    given = dict(options.get("freeze") or {})
    for name, value in setting_inputs(model):
        if name in given:
            continue
        try:
            frozen = settle_frozen(freeze(model.clone(), {name: value}))
            (again,) = plan_model(frozen, [bp.backend], tables, **options)
        except Exception:  # noqa: BLE001 - no remedy when the re-plan itself fails
            continue
        if not any(n.status == "unsupported" for n in again.nodes):
            flag = f"--freeze {name}={int(value) if isinstance(value, bool) else value}"
            return flag, (f"(the value its If tests {name} against: that branch is inlined) makes the whole model "
                          "convertible")
    return None


def _with_remedy_options(model: Model, bp: BackendPlan, tables: Tables | None,
                         options: dict[str, Any]) -> list[tuple[str, set[str], str]]:
    """``bp``'s backend re-planned with each option its target offers as a remedy (the target's
    ``extra["remedies"]``: flag, pipeline options, what it does): the flag, the nodes that
    convert with it, and what it does."""
    from ..compile.target import get

    out = []
    for flag, opts, what in (get(bp.backend).extra or {}).get("remedies", ()):
        if all(options.get(k) == v for k, v in opts.items()):
            continue  # already given
        try:
            (again,) = plan_model(model, [bp.backend], tables, **{**options, **opts})
        except Exception:  # noqa: BLE001 - no remedy when the re-plan itself fails
            continue
        out.append((flag, {n.node for n in again.nodes if n.status != "unsupported"}, what))
    return out


def _with_dims_fixed(model: Model, bp: BackendPlan, tables: Tables | None,
                     options: dict[str, Any]) -> tuple[BackendPlan, dict[str, int]] | None:
    """``bp``'s backend re-planned with every symbolic input dim it keeps fixed."""
    from ..ir import dims

    left = {d for ds in dims.symbolic(model).values() for d in ds} - set(bp.fixed_dims)
    if not left:
        return None
    defaults = dict(options.get("dim_defaults") or {})
    fix = {**dict(options.get("fix_dims") or {}), **bp.fixed_dims,
           **{d: int(defaults.get(d, dims.CHECK_SIZES[0])) for d in sorted(left)}}
    try:
        (again,) = plan_model(model, [bp.backend], tables, **{**options, "fix_dims": fix})
    except Exception:  # noqa: BLE001 - no remedy when the re-plan itself fails
        return None
    return again, {d: fix[d] for d in sorted(left)}


def _integer_plan(model: Model, ctx: Any, lowered: list[Any], target: Any) -> dict[str, tuple[str, str]]:
    """For a quantized model: per source compute node, how the target will run it (the
    writer's rules, ``Target.integer_plan``, on the planned graph; a decomposed node by the
    compute nodes its decomposition left, the most integer of them)."""
    from ..compile.quantized import COMPUTE_OPS, is_quantized

    if target.integer_plan is None or not is_quantized(model.graph):
        return {}
    rank = {"integer": 0, "int8 weights": 1, "float": 2}
    out: dict[str, tuple[str, str]] = {}
    for n in lowered:
        if n.op not in COMPUTE_OPS:
            continue
        root = n.meta.get("decomposed_root", n.name)
        got = target.integer_plan(n, ctx)
        if root not in out or rank[got[0]] < rank[out[root][0]]:
            out[root] = got
    return out


# ----------------------------------------------------------------------------- the whole table
def table_matrix(tables: Tables | None = None, verified: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every op × every API: status, name, and (for the targets) verified-by-execution status."""
    from ..table.quick import load_verified

    tables = tables or load_tables()
    verified = load_verified() if verified is None else verified
    rows = []
    for op in tables.ops.values():
        cells = {}
        for api in API_KEYS:
            c = op.backends.get(api)
            entry: dict[str, Any] = {"status": c.status if c else "unknown", "name": list(c.names) if c else []}
            v = verified.get(op.id, {}).get(api) if api != "numpy" else None  # numpy: the reference itself
            if v:
                entry["verified"] = v.get("status")
                entry["dtypes"] = v.get("dtypes", [])
            cells[api] = entry
        rows.append({"id": op.id, "title": op.title, "category": op.category,
                     "decomposition": bool(op.decomposition), "cells": cells})
    coverage = {}
    for api in API_KEYS:
        native = sum(1 for r in rows if r["cells"][api]["status"] == "native")
        avail = sum(1 for r in rows if r["cells"][api]["status"] in ("native", "composite"))
        ver = sum(1 for r in rows if r["cells"][api].get("verified") == "numeric"
                  and r["cells"][api]["status"] in ("native", "composite"))
        unknown = sum(1 for r in rows if r["cells"][api]["status"] == "unknown")
        unavailable = sum(1 for r in rows if r["cells"][api]["status"] == "unavailable")
        coverage[api] = {"native": native, "available": avail, "verified": ver, "ops": len(rows),
                         "unavailable": unavailable, "unknown": unknown,
                         "available_pct": round(100.0 * avail / len(rows), 1) if rows else 0.0}
    return {"apis": list(API_KEYS), "titles": dict(API_TITLES), "ops": rows, "coverage": coverage}


# ----------------------------------------------------------------------------- renderers
def model_json(source: str, plans: list[BackendPlan], found: list[Problem] | None = None) -> dict[str, Any]:
    out = {"model": source, "backends": {p.backend: {"summary": p.summary(), "counts": p.counts(),
                                                     "fixed_dims": p.fixed_dims, "nodes": [asdict(n) for n in p.nodes]}
                                         for p in plans}}
    if found is not None:
        out["problems"] = [asdict(pr) for pr in found]
    return out


def across_targets(found: list[Problem]) -> list[tuple[list[str], Problem]]:
    """The groups that are the same on several targets (same nodes, reason, detail and remedy:
    a custom op every target refuses) as one, with the targets they stand for, in first-seen order."""
    merged: dict[tuple[Any, ...], tuple[list[str], Problem]] = {}
    for pr in found:
        key = (pr.reason, pr.op, pr.detail, tuple(pr.nodes), pr.remedy, pr.remedy_says)
        merged.setdefault(key, ([], pr))[0].append(pr.backend)
    return list(merged.values())


def problems_text(found: list[Problem], show: int = 12) -> str:
    """The refused groups, one line each (the first ``show``; one line for a group several
    targets share), with the remedy when one computes."""
    lines = []
    groups = across_targets(found)
    for backends, pr in groups[:show]:
        names = ", ".join(pr.nodes[:3]) + (f" and {len(pr.nodes) - 3} more" if len(pr.nodes) > 3 else "")
        line = f"  {', '.join(backends)}: {pr.what} refused [{pr.reason}]: {pr.detail} ({names})"
        if pr.remedy:
            line += f"; {pr.remedy} {pr.remedy_says}"
        lines.append(line)
    if len(groups) > show:
        lines.append(f"  … {len(groups) - show} more groups (--json lists all)")
    return ("problems (refused nodes by reason and op):\n" + "\n".join(lines)) if lines else ""


def _cell_text(n: NodePlan) -> str:
    s = n.status
    if n.status == "unsupported":
        s += f" ({n.reason}: {n.detail})"
    elif n.detail:
        s += f" ({n.detail})"
    return s


def _integer_text(n: NodePlan) -> str:
    """A quantized model's compute node on this backend: integer | int8 weights | float, and why."""
    if not n.integer:
        return ""
    return n.integer + (f" ({n.integer_detail})" if n.integer_detail else "")


def model_markdown(source: str, plans: list[BackendPlan]) -> str:
    lines = [f"# Compatibility of `{_md(source)}`", ""]
    lines += [f"- {_md(p.summary())}" for p in plans]
    lines += ["", "| node | op | " + " | ".join(p.backend for p in plans) + " |",
              "|---|---|" + "---|" * len(plans)]
    for i, n in enumerate(plans[0].nodes if plans else []):
        cells = [f"{_md(_cell_text(p.nodes[i]))} · {p.nodes[i].evidence}"
                 + (f" · quantized: {_md(_integer_text(p.nodes[i]))}" if p.nodes[i].integer else "") for p in plans]
        lines.append(f"| {_md(n.node)} | {_md(n.op)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table_markdown(m: dict[str, Any], apis: list[str] | None = None) -> str:
    apis = apis or list(m["apis"])
    cov = m["coverage"]
    lines = ["| op | " + " | ".join(m["titles"][a] for a in apis) + " |", "|---|" + "---|" * len(apis)]
    mark = {"native": "✓", "composite": "≈", "unavailable": "✗", "unknown": ""}
    for r in m["ops"]:
        cells = []
        for a in apis:
            c = r["cells"][a]
            t = mark[c["status"]]
            if c.get("verified") == "numeric":
                t += "ᵛ"
            elif c.get("verified") == "structural":
                t += "ˢ"
            cells.append(t)
        lines.append(f"| {r['id']} | " + " | ".join(cells) + " |")
    lines.append("| **available** | " + " | ".join(f"{cov[a]['available_pct']}%" for a in apis) + " |")
    return "\n".join(lines) + "\n"


def _md(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


_HTML_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>{title}</title>
<style>
body{{font:13px system-ui,sans-serif;margin:16px;color:#222}}
h1{{font-size:18px}} .sum li{{margin:2px 0}}
table{{border-collapse:collapse;font-size:12px}} th,td{{border:1px solid #ccc;padding:2px 6px;vertical-align:top}}
th{{background:#f3f3f3;cursor:pointer;position:sticky;top:0}}
.native{{background:#e3f6e3}} .folded{{background:#f0f0f0}} .decomposed,.composite{{background:#eef3ff}} .legalized{{background:#fff6d6}}
.unsupported,.unavailable{{background:#fde2e2}} .unknown{{color:#6b6b6b}}
#q{{margin:8px 0;padding:4px;width:320px}}
h2{{font-size:15px;margin:14px 0 6px}} .wrap{{overflow:auto;max-height:85vh;max-width:100%}} details{{margin:2px 0}} #s td{{text-align:right}}
.err-ok{{color:#176117}} .err-bad{{color:#a11;font-weight:bold}} .q-integer{{color:#176117}} .q-int8-weights{{color:#8a5a00}} .q-float{{color:#a11}}
</style></head><body>
<h1>{title}</h1>
"""

_HTML_SCRIPT = """<script>
(function(){
  var t=document.getElementById('m'), q=document.getElementById('q');
  q.addEventListener('input',function(){
    var s=q.value.toLowerCase(), rows=t.tBodies[0].rows;
    for(var i=0;i<rows.length;i++){rows[i].style.display=rows[i].textContent.toLowerCase().indexOf(s)>=0?'':'none';}
  });
  var ths=t.tHead.rows[0].cells;
  for(var c=0;c<ths.length;c++){(function(col){
    ths[col].addEventListener('click',function(){
      var body=t.tBodies[0], rows=Array.prototype.slice.call(body.rows), asc=ths[col].getAttribute('data-asc')!=='1';
      rows.sort(function(a,b){var x=a.cells[col].textContent,y=b.cells[col].textContent;return asc?x.localeCompare(y):y.localeCompare(x);});
      for(var i=0;i<rows.length;i++){body.appendChild(rows[i]);}
      ths[col].setAttribute('data-asc',asc?'1':'0');
    });
  })(c);}
})();
</script></body></html>
"""


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _summary_matrix_html(plans: list[BackendPlan]) -> str:
    """target × native / decomposed / legalized / folded / refused, and the verdict."""
    keys = ("native", "decomposed", "legalized", "folded", "unsupported")
    rows = []
    for p in plans:
        c = p.counts()
        verdict = "converts" if not c["unsupported"] else f"refuses {c['unsupported']} node(s)"
        if p.fixed_dims:
            verdict += " (fixes " + ", ".join(f"{k}={v}" for k, v in p.fixed_dims.items()) + ")"
        rows.append(f"<tr><th>{_e(p.backend)}</th>" + "".join(
            f"<td class='{k if c[k] else ''}'>{c[k]}</td>" for k in keys) +
            f"<td class='{'unsupported' if c['unsupported'] else 'native'}'>{_e(verdict)}</td></tr>")
    head = "".join(f"<th>{'refused' if k == 'unsupported' else k}</th>" for k in keys)
    return f"<table id='s'><thead><tr><th>target</th>{head}<th>verdict</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _problems_html(found: list[Problem]) -> str:
    if not found:
        return "<p>No node is refused on any target.</p>"
    out = ["<h2>Refused nodes, by reason and op</h2>"]
    for backends, pr in across_targets(found):
        remedy = f" <b>{_e(pr.remedy)}</b> {_e(pr.remedy_says)}." if pr.remedy else ""
        out.append(f"<details class='unsupported'><summary>{_e(', '.join(backends))}: {_e(pr.what)} "
                   f"[{_e(pr.reason)}] {_e(pr.detail)}.{remedy}</summary><ul>" +
                   "".join(f"<li>{_e(n)}</li>" for n in pr.nodes) + "</ul></details>")
    return "".join(out)


def model_html(source: str, plans: list[BackendPlan], found: list[Problem] | None = None,
               model: Model | None = None, per_node: dict[str, list[dict[str, Any]]] | None = None) -> str:
    """Problems first: the summary matrix, the refused groups (with computed remedies), then
    with ``model`` the graph view (``run.graph``: laid out here, drawn offline, coloured per
    target), then the per-node table (filterable, sortable), where the nodes every target folds
    are one collapsed line. A graph node's click scrolls to its row (``id='n<i>'``)."""
    out = [_HTML_HEAD.format(title=_e(f"opbridge compatibility report: {source}"))]
    out.append(_summary_matrix_html(plans))
    out.append(_problems_html(found if found is not None else problems(plans)))
    if model is not None:
        from . import graph as G

        out.append("<style>" + G.GRAPH_CSS.format() + "</style>" + G.GRAPH_HTML.format(data=G.html_data(model, plans), legend=G.legend_html()))
    out.append("<h2>Every node</h2><ul class='sum'>" + "".join(f"<li>{_e(p.summary())}</li>" for p in plans) + "</ul>")
    nodes = plans[0].nodes if plans else []
    # ``report --check``: each node's max abs error per target, by its first output value
    err: dict[str, dict[str, dict[str, Any]]] = {b: {r["value"]: r for r in recs} for b, recs in (per_node or {}).items()}
    values = [n.outputs[0].name if n.outputs else None for n in model.graph.walk()] if model is not None and err else []
    folded = [i for i in range(len(nodes)) if all(p.nodes[i].status == "folded" for p in plans)]
    if folded:
        out.append(f"<details id='folded-all'><summary>{len(folded)} node(s) folded on every target (constants and shape "
                   "arithmetic computed at conversion time)</summary><p>" +
                   ", ".join(_e(f"{nodes[i].node} ({nodes[i].op})") for i in folded) + "</p></details>")
    out.append("<input id='q' aria-label='filter the rows' placeholder='filter rows (node, op, status…)'>")
    out.append("<div class='wrap'><table id='m'><thead><tr><th>node</th><th>op</th>" +
               "".join(f"<th>{_e(p.backend)}</th>" for p in plans) + "</tr></thead><tbody>")
    skip = set(folded)
    for i, n in enumerate(nodes):
        if i in skip:
            continue
        tds = "".join(f"<td class='{_e(p.nodes[i].status)}' title='{_e(p.nodes[i].evidence)}'>"
                      f"{_e(_cell_text(p.nodes[i]))}<br><small>{_e(p.nodes[i].evidence)}</small>"
                      + (f"<br><small class='q-{_e(p.nodes[i].integer.replace(' ', '-'))}'>quantized: "
                         f"{_e(_integer_text(p.nodes[i]))}</small>" if p.nodes[i].integer else "")
                      + _error_html(err.get(p.backend, {}).get(values[i]) if values else None) + "</td>"
                      for p in plans)
        out.append(f"<tr id='n{i}'><td>{_e(n.node)}</td><td>{_e(n.op)}</td>{tds}</tr>")
    out.append("</tbody></table></div>")
    out.append(_HTML_SCRIPT)
    return "".join(out)


def _error_html(rec: dict[str, Any] | None) -> str:
    """A node's numeric error on one target (``check --per-node``'s record), or nothing."""
    if rec is None or rec.get("max_abs") is None:
        return ""
    return (f"<br><small class='{'err-ok' if rec.get('ok') else 'err-bad'}'>max abs {rec['max_abs']:.3g}"
            f"{'' if rec.get('ok') else ' (differs)'}</small>")


def table_html(m: dict[str, Any]) -> str:
    apis = m["apis"]
    out = [_HTML_HEAD.format(title="opbridge operator × backend matrix")]
    cov = m["coverage"]
    out.append("<p>✓ native · ≈ composite · ✗ unavailable · blank unknown; "
               "ᵛ verified by execution, ˢ built and serialized only.</p>")
    out.append("<input id='q' aria-label='filter the ops' placeholder='filter ops (id, category, name…)'>")
    out.append("<div class='wrap'><table id='m'><thead><tr><th>op</th><th>category</th>" +
               "".join(f"<th>{_e(m['titles'][a])}<br><small>{cov[a]['available_pct']}%</small></th>" for a in apis) +
               "</tr></thead><tbody>")
    mark = {"native": "✓", "composite": "≈", "unavailable": "✗", "unknown": ""}
    for r in m["ops"]:
        tds = []
        for a in apis:
            c = r["cells"][a]
            v = {"numeric": "ᵛ", "structural": "ˢ"}.get(c.get("verified", ""), "")
            tds.append(f"<td class='{_e(c['status'])}' title='{_e(', '.join(c['name']))}'>{mark[c['status']]}{v}</td>")
        out.append(f"<tr><td>{_e(r['id'])}</td><td>{_e(r['category'])}</td>{''.join(tds)}</tr>")
    out.append("</tbody></table></div>")
    out.append(_HTML_SCRIPT)
    return "".join(out)


def model_text(plans: list[BackendPlan]) -> str:
    return "\n".join(p.summary() for p in plans)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False)


def coverage_markdown(m: dict[str, Any]) -> str:
    cov = m["coverage"]
    lines = ["| API | native | native or composite | unavailable | unknown | verified by execution |",
             "|---|---|---|---|---|---|"]
    for a in m["apis"]:
        c = cov[a]
        lines.append(f"| {m['titles'][a]} | {c['native']} | {c['available']} ({c['available_pct']}%) | "
                     f"{c['unavailable']} | {c['unknown']} | {c['verified'] or ''} |")
    return "\n".join(lines) + "\n"


README_BEGIN, README_END = "<!-- support-matrix:begin (generated by `opbridge report --table --md`; do not edit) -->", \
    "<!-- support-matrix:end -->"


def readme_section(m: dict[str, Any]) -> str:
    return (f"{README_BEGIN}\n{coverage_markdown(m)}\nOf {len(m['ops'])} ops. The full operator × API matrix is "
            f"[docs/SUPPORT.md](docs/SUPPORT.md).\n{README_END}")


def support_doc(m: dict[str, Any]) -> str:
    return ("# Support matrix\n\nGenerated from the tables and verified.json by `tools/update_docs.py`; do not edit.\n"
            "✓ native · ≈ composite · ✗ unavailable · blank unknown; ᵛ verified by execution, ˢ built and "
            "serialized only.\n\n" + table_markdown(m))
