"""Model subcommands of the CLI (``check``); heavy imports happen inside the commands."""
from __future__ import annotations

import json
import sys

if False:  # typing only
    import argparse
    from typing import Any, Callable

from .constants import TableError, UserError


def _out(args: "argparse.Namespace", text: str) -> None:
    """Print to the real stdout (``main`` routes framework chatter to stderr under --json)."""
    print(text, file=getattr(args, "real_stdout", None) or sys.stdout)


def cmd_check(args: "argparse.Namespace") -> int:
    from .check import check_model, load_inputs, model_loader, report_json
    from .errors import OpbridgeError
    from .target import names

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in backends if b not in names()]
    if unknown:
        raise UserError(f"unknown backend(s) {', '.join(unknown)} (known: {', '.join(names())})")
    try:
        build = model_loader(args.model)
        feeds = load_inputs(args.inputs) if args.inputs else None
        say = (lambda s: None) if (args.quiet or args.json) else (lambda s: print(f"[check] {s}", file=sys.stderr))
        res = check_model(build, backends, feeds, say)
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    out = report_json(res)
    from .terminal import safe

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
    from .terminal import table as _table

    print(_table(rows, ["backend", "status", "output", "max abs", "max rel", "max ULP", "note"]))
    for r in out["backends"]:
        fd = r["first_divergence"]
        if fd:
            where = f"node {fd.get('node')!r} (op {fd.get('op')}, value {fd.get('value')!r})" if "node" in fd else fd.get("error")
            print(safe(f"{r['backend']}: first diverging {where}"))
    return code


def _write_atomic(path: str, text: str) -> None:
    import os

    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cmd_report(args: "argparse.Namespace") -> int:
    from . import report as R
    from .errors import OpbridgeError

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
    from .target import names

    targets = names(include_reference=False)
    backends = [b.strip() for b in args.backends.split(",")] if args.backends else targets
    bad = [b for b in backends if b not in targets]
    if bad:
        raise UserError(f"unknown backend(s) {', '.join(bad)} (known: {', '.join(targets)})")
    from .check import model_loader

    try:
        model = model_loader(args.model)()
        plans = R.plan_model(model, backends)
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    if args.html:
        _write_atomic(args.html, R.model_html(args.model, plans))
    if args.md:
        md = R.model_markdown(args.model, plans)
        if args.md == "-":
            print(md)
        else:
            _write_atomic(args.md, md)
    if args.json:
        _out(args, R.dumps(R.model_json(args.model, plans)))
    elif args.md != "-":
        from .terminal import safe

        print("\n".join(safe(line) for line in R.model_text(plans).split("\n")))
    return 0


def register(sub: "Any", add: "Callable[..., Any]", target_options: bool = True) -> None:
    """``target_options``: add every target's own ``convert`` options (importing each backend
    package); the CLI asks for them only when the command is ``convert``."""
    register_convert(sub, add, target_options)
    r = add("report", cmd_report, "pre-flight compatibility of a model on every backend, or of the whole table")
    r.add_argument("model", nargs="?")
    r.add_argument("--table", action="store_true", help="the operator x API matrix instead of a model")
    r.add_argument("--backends", help="comma-separated (default: all six targets)")
    r.add_argument("--html", metavar="OUT.html", help="write a self-contained HTML report")
    r.add_argument("--md", metavar="OUT.md", nargs="?", const="-", help="Markdown (to a file, or stdout)")
    c = add("check", cmd_check, "run a model on backends and compare every output with the NumPy reference")
    c.add_argument("model")
    c.add_argument("--backends", default="numpy,onnx", help="comma-separated (default: numpy,onnx)")
    c.add_argument("--inputs", help=".npz file of inputs by name (default: seeded random inputs)")
    c.add_argument("--quiet", "-q", action="store_true")


def _target_options() -> "dict[str, tuple[Any, list[str]]]":
    """flag → (Option, the targets that take it), from every discovered target."""
    from .errors import OpbridgeError
    from .target import get, names

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


def _staging(final: str) -> "Any":
    """A scratch folder beside ``final`` (same file system: moving in is a rename)."""
    import os
    import tempfile
    from pathlib import Path

    parent = Path(os.path.abspath(final)).parent
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".opbridge-", dir=parent))


def _move_into_place(staged: "Any", final: str) -> None:
    """``staged`` becomes ``final`` by rename (an existing ``final`` is replaced, as each
    backend's ``save`` does)."""
    import os
    import shutil
    from pathlib import Path

    dest = Path(final)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_dir() and not dest.is_symlink():
        old = staged.with_name(staged.name + ".old")
        os.replace(dest, old)
        os.replace(staged, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, dest)


#: a check status that is a verdict on the artifact (the rest: the check could not run)
_CHECKED = ("pass", "fail")


def cmd_convert(args: "argparse.Namespace") -> int:
    """Convert to each target into a scratch folder, check what was written, then move the
    artifacts into place. Exit 0: written and checked (or --no-check); 1: written, and the
    check ran and found a mismatch (kept for inspection); 2: a target cannot be converted
    or checked, and nothing is left at -o."""
    import os
    import shutil
    import time

    from .check import check_model, load_inputs, model_loader, report_json
    from .terminal import internal_error_line, safe
    from .errors import OpbridgeError
    from .harness import classify
    from .pipeline import compile
    from .target import get, names

    every = names(include_reference=False)
    targets = [t.strip() for t in args.to.split(",") if t.strip()]
    if targets == ["all"]:
        targets = every
    unknown = [t for t in targets if t not in every]
    if unknown:
        raise UserError(f"unknown target(s) {', '.join(unknown)} (known: {', '.join(every)}, all)")
    quiet = args.quiet or args.json

    def say(msg: str) -> None:
        if not quiet:
            print(f"[convert] {safe(msg)}", file=sys.stderr, flush=True)

    try:
        t0 = time.perf_counter()
        say(f"reading {args.model}")
        build = model_loader(args.model)
        n_nodes = len(build().graph.nodes)
        say(f"read {n_nodes} nodes in {time.perf_counter() - t0:.2f} s")
        feeds = load_inputs(args.inputs) if args.inputs else None
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    stem = os.path.splitext(os.path.basename(args.model))[0]
    finals = {t: (args.output if len(targets) == 1 else os.path.join(args.output, stem + get(t).suffix)) for t in targets}
    stage = _staging(args.output)
    staged: dict[str, "Any"] = {}
    results = []
    worst = 0
    try:
        for t in targets:
            rec: dict = {"target": t, "status": "ok"}
            t1 = time.perf_counter()
            try:
                target = get(t)
                say(f"{t}: lowering and emitting")
                kwargs = {o.dest: getattr(args, o.dest) for o in target.options
                          if getattr(args, o.dest, None) not in (None, False)}
                done = compile(build(), target, **kwargs)
                artifact = done.artifact
                staged[t] = stage / t / os.path.basename(finals[t])
                staged[t].parent.mkdir()
                saved = str(target.save(artifact, staged[t]))  # atomic; the written path
                say(f"{t}: emitted ({time.perf_counter() - t1:.2f} s)")
                if target.version is not None:
                    rec["library"] = target.version()
                if done.ctx.layout is not None:
                    rec["transposes"] = done.ctx.layout.transposes
                warnings = list(done.ctx.warnings)  # the pipeline's, then any the emitter kept apart
                warnings += [w for w in getattr(artifact, "warnings", None) or () if w not in warnings]
                if warnings:
                    rec["warnings"] = warnings
            except Exception as exc:  # noqa: BLE001 - reported with a reason code
                if isinstance(exc, OpbridgeError):
                    code, detail = classify(exc)[1], str(exc).splitlines()[0]
                else:  # a bug of ours, not a property of the model
                    code, detail = "internal_error", internal_error_line(exc)
                    if getattr(args, "verbose", False):
                        import traceback

                        traceback.print_exc()
                rec.update(status="failed", reason=code, detail=detail)
                say(f"{t}: cannot convert: {detail}")
                worst = 2
                results.append(rec)
                continue
            if args.check:
                say(f"{t}: checking against the NumPy reference")
                res = report_json(check_model(build, [t], feeds, artifacts={t: artifact}, source=args.model,
                                              written={t: saved}))
                b = res["backends"][0]
                b["source"] = res.get("source", "")  # "onnxruntime", or why the source could not run
                rec["check"] = b
                if b["status"] == "fail":
                    rec["status"] = "check_failed"
                    worst = max(worst, 1)
                elif b["status"] not in _CHECKED and b["reason"] == "structural_only":
                    rec["check_note"] = f"{b['reason']}: {b['detail']}".strip()
                elif b["status"] not in _CHECKED:  # the check could not run: not a pass
                    rec.update(status="check_error", reason=b["reason"] or "runtime_error",
                               detail=f"the written artifact could not be checked: {b['detail']}")
                    worst = 2
            results.append(rec)
        if worst < 2:
            for t, path in staged.items():
                _move_into_place(path, finals[t])
                rec = next(r for r in results if r["target"] == t)
                rec["output"] = finals[t]
                if rec["status"] == "check_failed":
                    rec["kept"] = "kept for inspection: the check ran and found a mismatch"
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if args.json:
        _out(args, json.dumps({"model": args.model, "nodes": n_nodes, "targets": results,
                               "written": worst < 2}, indent=2))
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
                    if all("vs_source" in o for o in outs):
                        line += "; vs onnxruntime " + ", ".join(f"{o['vs_source']['max_abs']:.3g}" for o in outs)
                if r["check"].get("first_divergence"):
                    line += f"; first diverging node {r['check']['first_divergence'].get('node')!r}"
            if "transposes" in r:
                line += f"; transposes {r['transposes']}"
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
        first = bad[0]
        more = f" (and {len(bad) - 1} more target(s))" if len(bad) > 1 else ""
        hint = f"; the others convert alone: --to {','.join(good)}" if good else ""
        verb = "check" if first["status"] == "check_error" else "convert to"
        detail = first["detail"] if first["detail"].rstrip().endswith("]") else f"{first['detail']} [{first['reason']}]"
        print(safe(f"opbridge: error: cannot {verb} {first['target']}: {detail}{more}; nothing written{hint}"),
              file=sys.stderr)
    return worst


def register_convert(sub: "Any", add: "Callable[..., Any]", target_options: bool = True) -> None:
    c = add("convert", cmd_convert, "convert a model to one or more backends, optionally checking the outputs")
    c.add_argument("model")
    from .target import names

    c.add_argument("--to", required=True, help=f"{', '.join(names(include_reference=False))} (comma-separated) or all")
    c.add_argument("-o", "--output", required=True, help="output path (a folder when several targets)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--check", dest="check", action="store_true", default=True,
                   help="run source and target on the same inputs and compare (default)")
    g.add_argument("--no-check", dest="check", action="store_false")
    c.add_argument("--inputs", help=".npz file of inputs by name (default: seeded random inputs)")
    for flag, (o, owners) in (_target_options() if target_options else {}).items():  # Target.options
        kw: dict = {"dest": o.dest, "help": f"{', '.join(owners)}: {o.help}"}
        if o.action:
            kw["action"] = o.action
        else:
            kw.update(type=o.type or str, default=o.default, metavar=o.metavar)
        c.add_argument(flag, **kw)
    c.add_argument("--quiet", "-q", action="store_true")
