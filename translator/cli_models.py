"""Model subcommands of the CLI (``check``); heavy imports happen inside the commands."""
from __future__ import annotations

import json
import sys

if False:  # typing only
    import argparse
    from typing import Any, Callable

from .constants import TableError, UserError


def cmd_check(args: "argparse.Namespace") -> int:
    from .check import check_model, load_inputs, model_loader, report_json
    from .errors import OpbridgeError
    from .harness import BACKENDS

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise UserError(f"unknown backend(s) {', '.join(unknown)} (known: {', '.join(BACKENDS)})")
    try:
        build = model_loader(args.model)
        feeds = load_inputs(args.inputs) if args.inputs else None
        say = (lambda s: None) if (args.quiet or args.json) else (lambda s: print(f"[check] {s}", file=sys.stderr))
        res = check_model(build, backends, feeds, say)
    except OpbridgeError as exc:
        raise UserError(str(exc)) from None
    out = report_json(res)
    failed = any(r["status"] != "pass" for r in out["backends"])
    if args.json:
        print(json.dumps(out, indent=2))
        return 1 if failed else 0
    tol = out["tolerance"]
    print(f"tolerance: rtol {tol['rtol']:g}, atol {tol['atol']:g}")
    rows = []
    for r in out["backends"]:
        if not r["outputs"]:
            rows.append([r["backend"], r["status"], "-", "-", "-", "-", f"{r['reason']}: {r['detail']}"])
        for o in r["outputs"]:
            rows.append([r["backend"], r["status"] if o["ok"] else "FAIL", o["name"], f"{o['max_abs']:.3g}",
                         f"{o['max_rel']:.3g}", f"{o['max_ulp']:.0f}", o["reason"]])
    from .cli import _table

    print(_table(rows, ["backend", "status", "output", "max abs", "max rel", "max ULP", "note"]))
    for r in out["backends"]:
        fd = r["first_divergence"]
        if fd:
            where = f"node {fd.get('node')!r} (op {fd.get('op')}, value {fd.get('value')!r})" if "node" in fd else fd.get("error")
            print(f"{r['backend']}: first diverging {where}")
    return 1 if failed else 0


def register(sub: "Any", add: "Callable[..., Any]") -> None:
    c = add("check", cmd_check, "run a model on backends and compare every output with the NumPy reference")
    c.add_argument("model")
    c.add_argument("--backends", default="numpy,onnx", help="comma-separated (default: numpy,onnx)")
    c.add_argument("--inputs", help=".npz file of inputs by name (default: seeded random inputs)")
    c.add_argument("--quiet", "-q", action="store_true")
