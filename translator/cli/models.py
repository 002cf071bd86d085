"""Model subcommands of the CLI (``check``); heavy imports happen inside the commands."""
from __future__ import annotations

import json
import sys

if False:  # typing only
    import argparse
    from typing import Any, Callable

from ..table.constants import TableError, UserError


def _out(args: "argparse.Namespace", text: str) -> None:
    """Print to the real stdout (``main`` routes framework chatter to stderr under --json)."""
    print(text, file=getattr(args, "real_stdout", None) or sys.stdout)


def cmd_check(args: "argparse.Namespace") -> int:
    from ..run.check import check_model, fit_inputs, load_inputs, model_loader, report_json
    from ..table.errors import OpbridgeError
    from ..compile.target import names

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in backends if b not in names()]
    if unknown:
        raise UserError(f"unknown backend(s) {', '.join(unknown)} (known: {', '.join(names())})")
    try:
        opts = source_opts(args)
        build = model_loader(args.model, **opts)
        say = (lambda s: None) if (args.quiet or args.json) else (lambda s: print(f"[check] {s}", file=sys.stderr))
        feeds, notes = fit_inputs(load_inputs(args.inputs) if args.inputs else None,
                                  [v.name for v in build().graph.inputs])
        for note in notes:
            print(f"warning: {note}", file=sys.stderr)
        res = check_model(build, backends, feeds, say, source=args.model, source_opts=opts,
                          per_node=getattr(args, "per_node", False))
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    out = report_json(res)
    from ..run.terminal import safe

    failed = any(r["status"] == "fail" for r in out["backends"])
    unchecked = [r for r in out["backends"] if r["status"] != "fail" and r["status"] != "pass"
                 and r["reason"] != "structural_only"]
    code = 2 if unchecked else 1 if failed else 0
    if unchecked:
        r = unchecked[0]
        detail = r["detail"] if r["detail"].rstrip().endswith("]") else f"{r['detail']} [{r['reason']}]"
        more = f" (and {len(unchecked) - 1} more backend(s))" if len(unchecked) > 1 else ""
        print(safe(f"opbridge: error: cannot check on {r['backend']}: {detail}{more}"), file=sys.stderr)
    if args.json:
        _out(args, json.dumps(out, indent=2))
        return code
    tol = out["tolerance"]
    print(f"tolerance: rtol {tol['rtol']:g}, atol {tol['atol']:g}")
    rows = []
    for r in out["backends"]:
        if not r["outputs"]:
            rows.append([r["backend"], r["status"], "-", "-", "-", "-", f"{r['reason']}: {r['detail']}"])
        for o in r["outputs"]:
            rows.append([r["backend"], r["status"] if o["ok"] else "FAIL", o["name"], f"{o['max_abs']:.3g}",
                         f"{o['max_rel']:.3g}", f"{o['max_ulp']:.0f}", o["reason"]])
    from ..run.terminal import table as _table

    print(_table(rows, ["backend", "status", "output", "max abs", "max rel", "max ULP", "note"]))
    for r in out["backends"]:
        fd = r["first_divergence"]
        if fd:
            where = f"node {fd.get('node')!r} (op {fd.get('op')}, value {fd.get('value')!r})" if "node" in fd else fd.get("error")
            print(safe(f"{r['backend']}: first diverging {where}"))
        per = r.get("per_node")
        if per is not None:
            bad = [p for p in per if not p["ok"]]
            worst = max(per, key=lambda p: p["max_abs"] or 0.0, default=None)
            line = f"{r['backend']}: per node, {len(per)} values compared, {len(bad)} differ"
            if worst is not None:
                line += f"; largest error at {worst['node']!r} ({worst['op']}): max abs {worst['max_abs']:.3g}"
            print(safe(line))
    return code


MODEL_HELP = ("model.onnx, model.tflite, a SavedModel folder, model.keras, or a PyTorch "
              "'pkg.module:factory' (with --example-inputs)")


def source_opts(args: "argparse.Namespace") -> "dict[str, Any]":
    """What a frontend needs besides the model (a PyTorch factory's example inputs)."""
    ex = getattr(args, "example_inputs", None)
    return {**({"example_inputs": ex} if ex else {}), **({"exact_int8": True} if getattr(args, "exact_int8", False) else {})}


def _write_atomic(path: str, text: str) -> None:
    import os

    tmp = f"{path}.{os.getpid()}.tmp"
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _report_many(args: "argparse.Namespace", paths: "list[str]", backends: "list[str]") -> int:
    """``report DIR/`` or several files: ``run.report_many``."""
    import json

    from ..ir import dims
    from ..run import report_many as RM
    from ..run.terminal import safe
    from ..table.errors import OpbridgeError

    if not RM.collect(paths):
        raise UserError(f"no model files in {', '.join(paths)} (looked for {', '.join(RM.MODEL_SUFFIXES)} and "
                        "SavedModel folders)")
    quiet = args.json or getattr(args, "quiet", False)
    say = (lambda s: None) if quiet else (lambda s: print(f"[report] {s}", file=sys.stderr, flush=True))
    try:
        doc = RM.report_many(paths, backends, dims.parse(args.fix_dim), getattr(args, "workers", None), say,
                             scheduler=getattr(args, "scheduler", None))
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    if args.html:
        _write_atomic(args.html, RM.html_page(doc))
    if args.json:
        _out(args, json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print("\n".join(safe(line) for line in RM.text(doc).split("\n")))
    return 0


def cmd_report(args: "argparse.Namespace") -> int:
    from ..run import report as R
    from ..table.errors import OpbridgeError

    if args.table:
        m = R.table_matrix()
        if args.html:
            _write_atomic(args.html, R.table_html(m))
        if args.md:
            md = R.table_markdown(m)
            if args.md == "-":
                print(md)
            else:
                _write_atomic(args.md, md)
        if args.json:
            _out(args, R.dumps(m))
        elif not args.md == "-":
            print(R.coverage_markdown(m))
        return 0
    if not args.model:
        raise UserError("give a MODEL, or --table for the whole operator table")
    from ..compile.target import names

    targets = names(include_reference=False)
    backends = [b.strip() for b in args.backends.split(",")] if args.backends else targets
    bad = [b for b in backends if b not in targets]
    if bad:
        raise UserError(f"unknown backend(s) {', '.join(bad)} (known: {', '.join(targets)})")
    import os

    many = list(args.model)
    if len(many) > 1 or (os.path.isdir(many[0]) and not os.path.exists(os.path.join(many[0], "saved_model.pb"))):
        return _report_many(args, many, backends)
    args.model = many[0]
    from ..run.check import model_loader

    try:
        if args.graph or args.serve:  # refused before any planning or checking is done
            from ..run.graph import require_onnx

            require_onnx(args.model)
        from ..ir import dims
        from ..ir.freeze import parse as freeze_parse

        # an op no frontend reading exists for is one refused node, the rest is still judged
        model = model_loader(args.model, **source_opts(args), keep_unread=True)()
        frozen = freeze_parse(getattr(args, "freeze", None))
        if frozen:
            from ..ir.freeze import freeze
            from ..run.convert import settle_frozen

            model = settle_frozen(freeze(model.clone(), frozen))
        opts = {**R.dim_options(dims.parse(args.fix_dim), dims.parse_check(args.check_dim), model, backends),
                **given_target_options(args)}
        plans = R.plan_model(model, backends, **opts)
        found = R.problems(plans, model, **opts)
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    per_node = _per_node(args, plans) if args.check else None
    if args.html:
        _write_atomic(args.html, R.model_html(args.model, plans, found, model, per_node))
    if args.graph or args.serve:
        _graph(args, model, plans, per_node)
    if args.md:
        md = R.model_markdown(args.model, plans)
        if args.md == "-":
            print(md)
        else:
            _write_atomic(args.md, md)
    if args.json:
        _out(args, R.dumps(R.model_json(args.model, plans, found)))
    elif args.md != "-":
        from ..run.terminal import safe

        text = R.model_text(plans) + ("\n" + R.problems_text(found) if found else "")
        print("\n".join(safe(line) for line in text.split("\n")))
    return 0


def _per_node(args: "argparse.Namespace", plans: "list[Any]") -> "dict[str, Any]":
    """``report --check``: ``check --per-node`` on every backend that converts the model; each
    one's records (node, value, max abs/rel/ULP error, ok) by backend."""
    from ..run.check import check_model, model_loader, report_json
    from ..table.errors import OpbridgeError

    runs = [p.backend for p in plans if not any(n.status == "unsupported" for n in p.nodes)]
    if not runs:
        return {}
    say = (lambda s: None) if args.json else (lambda s: print(f"[report] {s}", file=sys.stderr, flush=True))
    try:
        res = report_json(check_model(model_loader(args.model, **source_opts(args)), runs, None, say,
                                      source=args.model, source_opts=source_opts(args), per_node=True))
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    return {r["backend"]: r["per_node"] for r in res["backends"] if r.get("per_node")}


def _graph(args: "argparse.Namespace", model: "Any", plans: "list[Any]", per_node: "dict[str, Any] | None") -> None:
    """``report --graph DIR`` (and ``--serve``): Model Explorer node data, one overlay file per
    target (``status-<target>.json``) and, with ``--check``, one of each node's numeric error
    (``error-<target>.json``, from ``check --per-node``); each file written atomically."""
    import os
    import tempfile

    from ..run import graph as G
    from ..table.errors import OpbridgeError

    try:
        overlays, unmatched = G.explorer_overlays(args.model, model, plans, per_node)
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    folder = args.graph or tempfile.mkdtemp(prefix="opbridge-graph-")
    os.makedirs(folder, exist_ok=True)
    files = []
    for name, data in overlays.items():
        path = os.path.join(folder, f"{name}.json")
        _write_atomic(path, json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False))
        files.append(path)
    if not args.json:
        print(f"[report] Model Explorer node data: {len(files)} overlay(s) in {folder}"
              + (f" ({unmatched} node(s) the ONNX adapter does not show)" if unmatched else ""), file=sys.stderr)
    if args.serve:
        G.serve(args.model, files, args.port, open_browser=not args.no_browser)


def register(sub: "Any", add: "Callable[..., Any]", target_options: bool = True) -> None:
    """``target_options``: add every target's own options to ``convert`` and ``report``
    (importing each backend package); the CLI asks for them only for those two commands."""
    register_convert(sub, add, target_options)
    r = add("report", cmd_report, "pre-flight compatibility of a model on every backend, or of the whole table")
    r.add_argument("model", nargs="*", help=MODEL_HELP + "; or a folder of models, or several files: one summary "
                   "(model x target) over all of them, judged in parallel")
    r.add_argument("--workers", type=int, help="folders: worker processes (default: every core)")
    r.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="folders: send the per-model jobs to this Dask "
                   "distributed scheduler instead of local processes (its workers run opbridge and see the paths)")
    r.add_argument("--example-inputs", metavar="INPUTS.npz",
                   help="PyTorch 'pkg.module:factory' models: the example inputs torch.export traces with")
    r.add_argument("--exact-int8", action="store_true", dest="exact_int8",
                   help="quantized .tflite sources: compute the 8-bit layers in LiteRT's integer arithmetic written "
                        "as float ops (bit-exact against the interpreter; the output is a float model)")
    r.add_argument("--table", action="store_true", help="the operator x API matrix instead of a model")
    r.add_argument("--backends", help="comma-separated (default: every conversion target)")
    r.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML report")
    r.add_argument("--md", metavar="OUT.md", nargs="?", const="-", help="Markdown (to a file, or stdout)")
    r.add_argument("--graph", metavar="DIR", help="write Model Explorer node data (one overlay per target) into DIR "
                   "(ONNX models; needs the 'graph' extra: ai-edge-model-explorer, model-explorer-onnx)")
    r.add_argument("--check", action="store_true", help="also run check --per-node on every target that converts: "
                   "each node's max abs error in the HTML table (--html) and as an overlay (--graph)")
    r.add_argument("--serve", action="store_true", help="open Model Explorer on the model with the overlays loaded")
    r.add_argument("--port", type=int, default=8080, help="--serve: Model Explorer's port (default 8080)")
    r.add_argument("--no-browser", action="store_true", dest="no_browser", help="--serve: do not open a browser")
    if target_options:  # planned with them, as convert would (a remedy such as --allow-select-tf-ops, applied)
        add_target_options(r)
    r.add_argument("--fix-dim", action="append", metavar="NAME=SIZE", dest="fix_dim",
                   help="as for convert: judge the model with this symbolic input dim fixed")
    r.add_argument("--check-dim", action="append", metavar="NAME=A,B", dest="check_dim",
                   help="as for convert: a target that must fix the dim (Core ML) fixes it to A")
    r.add_argument("--freeze", action="append", metavar="NAME=VALUE", dest="freeze",
                   help="as for convert: judge the model with this input frozen to the value")
    c = add("check", cmd_check, "run a model on backends and compare every output with the NumPy reference")
    c.add_argument("model", help=MODEL_HELP)
    c.add_argument("--per-node", action="store_true", dest="per_node",
                   help="also compare every intermediate value each backend can expose with the reference "
                        "(per node: max abs / rel / ULP error; the first that differs is named)")
    c.add_argument("--example-inputs", metavar="INPUTS.npz",
                   help="PyTorch 'pkg.module:factory' models: the example inputs torch.export traces with")
    c.add_argument("--exact-int8", action="store_true", dest="exact_int8",
                   help="quantized .tflite sources: compute the 8-bit layers in LiteRT's integer arithmetic written "
                        "as float ops (bit-exact against the interpreter; the output is a float model)")
    c.add_argument("--backends", default="numpy,onnx", help="comma-separated (default: numpy,onnx)")
    c.add_argument("--inputs", help=".npz file of inputs by name (default: seeded random inputs)")
    c.add_argument("--quiet", "-q", action="store_true")


def _target_options() -> "dict[str, tuple[Any, list[str]]]":
    """flag → (Option, the targets that take it), from every discovered target."""
    from ..table.errors import OpbridgeError
    from ..compile.target import get, names

    seen: dict = {}
    for n in names(include_reference=False):
        try:
            t = get(n)
        except OpbridgeError:
            continue
        for o in t.options:
            seen.setdefault(o.flag, (o, []))[1].append(n)
    return seen


def _grouped(warnings: "list[str]", show: int = 3) -> "list[str]":
    """Terminal view of warnings: the same message about many tensors becomes one line
    (``--json`` keeps every warning)."""
    import re

    groups: dict[str, list[str]] = {}
    for w in warnings:
        m = re.match(r"^(.*?)'([^']*)'(.*)$", w)
        key, name = (m.group(1) + "'…'" + m.group(3), m.group(2)) if m else (w, "")
        groups.setdefault(key, []).append(name)
    out = []
    for key, names in groups.items():
        if len(names) == 1:
            out.append(key.replace("'…'", f"'{names[0]}'") if names[0] else key)
        else:
            shown = ", ".join(repr(n) for n in names[:show]) + (", …" if len(names) > show else "")
            head, tail = key.split("'…'", 1)
            out.append(f"{head.rstrip()}s{tail} — {len(names)} tensors ({shown})")
    return out


def cmd_convert(args: "argparse.Namespace") -> int:
    """Convert to each target into a scratch folder, check what was written, then move the
    artifacts into place (``translator.run.convert``). Exit 0: written and checked (or
    --no-check); 1: written, and the check ran and found a mismatch (kept for inspection);
    2: a target cannot be converted or checked, and nothing is left at -o."""
    from ..ir import dims
    from ..ir.freeze import parse as freeze_parse
    from ..run.convert import convert
    from ..table.errors import OpbridgeError
    from ..compile.target import get, names
    from ..run.terminal import safe

    quiet = args.quiet or args.json

    def say(msg: str) -> None:
        if not quiet:
            print(f"[convert] {safe(msg)}", file=sys.stderr, flush=True)

    targets = [t.strip() for t in args.to.split(",") if t.strip()]
    every = names(include_reference=False)
    options = {}
    for t in (every if targets == ["all"] else [t for t in targets if t in every]):
        for o in get(t).options:
            options[o.dest] = getattr(args, o.dest, None)
    try:
        res = convert(args.model, targets, args.output, check=args.check, inputs=args.inputs,
                      example_inputs=getattr(args, "example_inputs", None), options=options, progress=say,
                      source_options={"exact_int8": True} if getattr(args, "exact_int8", False) else None,
                      verbose=getattr(args, "verbose", False), fix_dims=dims.parse(getattr(args, "fix_dim", None)),
                      check_dims=dims.parse_check(getattr(args, "check_dim", None)),
                      freeze=freeze_parse(getattr(args, "freeze", None)),
                      all_or_nothing=getattr(args, "all_or_nothing", False))
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    results, worst, n_nodes = res["targets"], res["exit"], res["nodes"]
    if args.json:
        _out(args, json.dumps({"model": args.model, "nodes": n_nodes, "targets": results,
                               "written": worst < 2, "written_targets": res.get("written_targets", [])}, indent=2))
    else:
        for r in results:
            line = f"{r['target']}: {r['status']}"
            if "output" in r:
                line += f" -> {r['output']}"
            if "reason" in r:
                line += f" [{r['reason']}] {r['detail']}"
            if "check" in r:
                outs = r["check"]["outputs"]
                if outs:
                    line += "; max abs vs reference " + ", ".join(f"{o['name']}={o['max_abs']:.3g}" for o in outs)
                    vs = [o for o in outs if o.get("vs_source")]  # (carried state has no source counterpart)
                    if vs:
                        named = len(vs) != len(outs)
                        line += f"; vs {r['check'].get('source') or 'the source'} " + ", ".join(
                            (f"{o['name']}=" if named else "") + f"{o['vs_source']['max_abs']:.3g}" for o in vs)
                if r["check"].get("first_divergence"):
                    line += f"; first diverging node {r['check']['first_divergence'].get('node')!r}"
            if "transposes" in r:
                line += f"; transposes {r['transposes']}"
            ik = r.get("integer_kernels")
            if ik:
                line += (f"; integer kernels: not inspected ({ik['error']})" if "error" in ik else
                         "; no integer kernels" if not ik["total"] else
                         f"; {'int8 weights' if ik.get('stored_only') else 'integer kernels'} {ik['integer']}/{ik['total']}")
            dg = r.get("delegation")
            if dg:
                line += (f"; delegate not inspected ({dg['error']})" if "error" in dg else
                         f"; {dg['delegate']} takes {dg['delegated']}/{dg['nodes']} nodes" + (
                             f" ({dg['compute_delegated']}/{dg['compute_nodes']} of those computing values)"
                             if "compute_nodes" in dg and dg["delegated"] < dg["nodes"] else "") + (
                             " (left to builtin kernels: " + ", ".join(f"{op} ×{k}" for op, k in dg["left"].items()) + ")"
                             if dg["left"] else ""))
            if any(r.get("check", {}).get("sizes") or ()):
                runs = r["check"]["sizes"]
                line += "; dynamic dims checked at " + " and ".join(
                    ",".join(f"{d}={v}" for d, v in run.items()) for run in runs)
            for why in r.get("check", {}).get("skipped_inputs") or ():
                line += f"; not checked: {why}"
            for note in r.get("check", {}).get("notes") or ():
                line += f"; {note}"
            if "check_note" in r:
                line += f"; check {r['check_note']}"
            if "kept" in r:
                line += f" ({r['kept']})"
            print(safe(line))
            for w in _grouped(r.get("warnings") or []):
                print(f"  warning: {safe(w)}")
    if worst == 2:
        bad = [r for r in results if r["status"] in ("failed", "check_error")]
        good = [r["target"] for r in results if r["status"] not in ("failed", "check_error")]
        written = res.get("written_targets") or []
        first = bad[0]
        more = f" (and {len(bad) - 1} more target(s): {', '.join(r['target'] for r in bad[1:])})" if len(bad) > 1 else ""
        if written:
            hint = f"; written: {', '.join(written)} (--all-or-nothing writes none when one fails)"
        else:
            hint = "; nothing written" + (f"; the others convert alone: --to {','.join(good)}" if good else "")
        verb = "check" if first["status"] == "check_error" else "convert to"
        detail = first["detail"] if first["detail"].rstrip().endswith("]") else f"{first['detail']} [{first['reason']}]"
        print(safe(f"opbridge: error: cannot {verb} {first['target']}: {detail}{more}{hint}"), file=sys.stderr)
    return worst




def register_convert(sub: "Any", add: "Callable[..., Any]", target_options: bool = True) -> None:
    c = add("convert", cmd_convert, "convert a model to one or more backends, optionally checking the outputs")
    c.add_argument("model", help=MODEL_HELP)
    c.add_argument("--example-inputs", metavar="INPUTS.npz",
                   help="PyTorch 'pkg.module:factory' models: the example inputs torch.export traces with")
    from ..compile.target import names

    c.add_argument("--exact-int8", action="store_true", dest="exact_int8",
                   help="quantized .tflite sources: compute the 8-bit layers in LiteRT's integer arithmetic written "
                        "as float ops (bit-exact against the interpreter; the output is a float model)")
    c.add_argument("--to", required=True, help=f"{', '.join(names(include_reference=False))} (comma-separated) or all")
    c.add_argument("-o", "--output", required=True, help="output path (a folder when several targets; an existing folder takes a one-file artifact, .onnx or .tflite, named after the model)")
    c.add_argument("--all-or-nothing", action="store_true",
                   help="several targets: when one fails, write none (default: write every target that converts, "
                        "exit 2 naming the others)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--check", dest="check", action="store_true", default=True,
                   help="run source and target on the same inputs and compare (default)")
    g.add_argument("--no-check", dest="check", action="store_false")
    c.add_argument("--inputs", action="append", metavar="FILE.npz",
                   help=".npz file of inputs by name (default: seeded random inputs); repeatable: each set is "
                        "checked, e.g. two image sizes of a model with symbolic height and width")
    c.add_argument("--fix-dim", action="append", metavar="NAME=SIZE", dest="fix_dim",
                   help="fix a symbolic input dim (its symbol, e.g. batch=1, or INPUT:AXIS=SIZE; repeatable); "
                        "other symbolic dims stay dynamic where the target keeps them and are checked at sizes 1 and 3")
    c.add_argument("--freeze", action="append", metavar="NAME=VALUE", dest="freeze",
                   help="freeze an input to a value (a setting such as a sample rate: sr=16000; a comma list for a "
                        "1-D input; repeatable): it becomes a constant, and the branches it decides fold away")
    c.add_argument("--check-dim", action="append", metavar="NAME=A,B", dest="check_dim",
                   help="the two sizes a dynamic dim is checked at (default 1,3; e.g. samples=400,800 for an audio "
                        "length a conv needs); a target that must fix the dim uses A")
    if target_options:
        add_target_options(c)
    c.add_argument("--quiet", "-q", action="store_true")


def add_target_options(c: "Any") -> None:
    """Every target's own options (``Target.options``) on a subcommand's parser."""
    for flag, (o, owners) in _target_options().items():
        kw: dict = {"dest": o.dest, "help": f"{', '.join(owners)}: {o.help}"}
        if o.action:
            kw["action"] = o.action
        else:
            kw.update(type=o.type or str, default=o.default, metavar=o.metavar)
        c.add_argument(flag, **kw)


def given_target_options(args: "argparse.Namespace") -> "dict[str, Any]":
    """The target options the user gave (``report`` plans with them, as ``convert`` would)."""
    return {o.dest: getattr(args, o.dest) for o, _ in _target_options().values()
            if getattr(args, o.dest, None) not in (None, False)}
