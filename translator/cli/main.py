"""The ``opbridge`` command line.

Exit codes: 0 success, 1 a check failed, 2 bad input (unknown op/dtype/backend, a
malformed table, an unreadable or unsupported model) with a one-line reason.
Heavy frameworks are imported only by the subcommands that need them.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys

from ..table.constants import API_TITLES, TableError, UserError
from ..run.terminal import internal_error_line, safe  # noqa: F401 - re-exported
from ..run.terminal import table as _table

if False:  # typing only (annotations are strings: nothing is imported at run time)
    import argparse
    from typing import Any, Callable, Iterator, Sequence

EXIT_OK, EXIT_CHECK_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False, default=str) + "\n")


def _cell_detail(c: dict[str, Any]) -> str:
    parts = []
    if c.get("attrs"):
        parts.append(", ".join(f"{k}={v}" for k, v in c["attrs"].items()))
    if c.get("dtypes"):
        parts.append("dtypes: " + ",".join(c["dtypes"]))
    if c.get("rank"):
        r = c["rank"]
        parts.append(f"rank {r.get('min', 0)}..{r.get('max', '∞')}")
    if c.get("seed") and c.get("seed") != c.get("name"):
        parts.append(f"seed: {c['seed']}")
    if c.get("notes"):
        parts.append(c["notes"])
    return "; ".join(parts).replace("\n", " ")


def _print_op(d: dict[str, Any], out: Callable[[str], None]) -> None:
    out(f"{d['id']} — {d['title']}  [{d['category']}]")
    if d.get("aliases"):
        out(f"  aliases:   {', '.join(d['aliases'])}")
    out(f"  precision: {d.get('precision') or '?'}    broadcast: {d['broadcast']}")
    if d.get("formula"):
        lines = d["formula"].strip().splitlines()
        out("  formula:   " + lines[0])
        for ln in lines[1:12]:
            out("             " + ln)
        if len(lines) > 12:
            out(f"             … ({len(lines) - 12} more lines; --json for all)")
    sig = d.get("signature")
    if sig:
        ins = ", ".join(p["name"] + ("?" if p["optional"] else "") + ("..." if p["variadic"] else "") for p in sig["inputs"])
        outs = ", ".join(p["name"] for p in sig["outputs"])
        out(f"  signature: ({ins}) -> ({outs})")
        for a in sig["attributes"]:
            dflt = " (required)" if a["required"] else f" = {a['default']!r}"
            out(f"             @{a['name']}: {a['type']}{dflt}")
    for e in d.get("errata", []):
        out(f"  erratum:   {e['field']}: {e['note']}")
    for n in d.get("notes", []):
        out(f"  note:      {n}")
    if d.get("decomposition"):
        dec = d["decomposition"]
        out(f"  decomposition: {dec.get('comment') or ''}")
    ver = d.get("verified", {})
    cells = dict(d["backends"])  # plus the selected APIs with no cell: not yet mapped
    cells.update((a, {"status": "unknown", "notes": "not yet mapped (no cell in optable.yaml)"}) for a in d.get("unmapped", []))
    order = [a for a in API_TITLES if a in cells]
    if order and all(cells[a]["status"] == "unknown" for a in order):  # one line each
        for api in order:
            out(f"  {API_TITLES[api]}: unknown — {cells[api].get('notes') or 'no public source'}".replace("\n", " "))
        return
    rows = []
    for api in order:
        c = cells[api]
        name = c.get("name", "")
        name = ", ".join(name) if isinstance(name, list) else name
        v = ver.get(api, {}).get("status", "") if isinstance(ver.get(api), dict) else ""
        if v and ver[api].get("runtime"):  # a non-target column: which runtime ran it
            v = f"{v} ({ver[api]['runtime']})"
        src = c.get("source")
        src = ", ".join(src) if isinstance(src, list) else src
        rows.append([API_TITLES[api], c["status"], name or "-", _cell_detail(c), v or "-", src or ""])
    out(_table(rows, ["backend", "status", "name", "attributes / constraints / notes", "executed", "source"]))


def cmd_query(args: argparse.Namespace) -> int:
    from ..table.quick import query

    res = query(args.op, args.backend)
    if args.json:
        _emit_json(res)
        return EXIT_OK
    if res.get("explanation"):
        print(res["explanation"])
        print()
    for i, d in enumerate(res["matches"]):
        if i:
            print()
        _print_op(d, print)
    return EXIT_OK


def cmd_dtype(args: argparse.Namespace) -> int:
    from ..run.catalog import dtype_query

    res = dtype_query(args.name, args.backend)
    if args.json:
        _emit_json(res)
        return EXIT_OK
    if args.name is None:
        rows = [[d["id"], d["kind"], str(d["bits"] or "-"), d["numpy"] or "-",
                 str(sum(1 for c in d["backends"].values() if c["status"] == "native"))] for d in res]
        print(_table(rows, ["dtype", "kind", "bits", "numpy holder", "#APIs native"]))
        return EXIT_OK
    for d in res:
        print(f"{d['id']} — {d['title']}  [{d['category']}]  kind={d['kind']} bits={d['bits']}")
        if d.get("details"):
            print(f"  details: {d['details']}")
        if d.get("layout"):
            print("  layout:  " + ", ".join(f"{k}={v}" for k, v in d["layout"].items()))
        flags = [f"{k}={d[k]}" for k in ("nan", "inf", "negative_zero") if d.get(k) is not None]
        if flags:
            print("  special: " + ", ".join(flags))
        print(f"  numpy:   {d['numpy'] or '(no NumPy/ml_dtypes holder)'}")
        for e in d.get("errata", []):
            print(f"  erratum: {e['field']}: {e['note']}")
        rows = []
        for api, c in d["backends"].items():
            name = c.get("name", "")
            rows.append([API_TITLES[api], c["status"], ", ".join(name) if isinstance(name, list) else (name or "-"),
                         c.get("notes") or ""])
        print(_table(rows, ["backend", "status", "name", "notes"]))
    return EXIT_OK


def cmd_ops(args: argparse.Namespace) -> int:
    from ..run.catalog import list_ops

    if args.missing and not args.backend:
        raise UserError("--missing needs --backend B")
    rows = list_ops(args.category, args.backend, args.missing)
    if args.json:
        _emit_json(rows)
        return EXIT_OK
    if args.backend:
        print(_table([[r["id"], r["category"], r["status"], ", ".join(r["name"]) or "-"] for r in rows],
                     ["op", "category", "status", "name"]))
    else:
        print(_table([[r["id"], r["title"], r["category"]] for r in rows], ["op", "title", "category"]))
    print(f"{len(rows)} ops", file=sys.stderr)
    return EXIT_OK


def cmd_backends(args: argparse.Namespace) -> int:
    from ..run.catalog import backends_summary

    rows = backends_summary()
    if args.json:
        _emit_json(rows)
        return EXIT_OK
    print(_table([[r["key"], r["title"], "yes" if r["target"] else "", str(r["native"]), str(r["composite"]),
                   str(r["unavailable"]), str(r["unknown"]), str(r["verified"])] for r in rows],
                 ["key", "API", "target", "native", "composite", "unavailable", "unknown", "verified"]))
    print("verified: cells proven by execution (verified.json: tests/test_ops.py for the targets, "
          "tests/test_proofs.py for the other runnable APIs)", file=sys.stderr)
    return EXIT_OK


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """``argv`` (when known) lets commands other than ``convert`` skip importing every backend
    package for the targets' own ``convert`` options."""
    import argparse

    p = argparse.ArgumentParser(prog="opbridge", description="Cross-backend operator tables and model translation.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.add_argument("--json", action="store_true", help="machine-readable output")
        sp.add_argument("-v", "--verbose", action="store_true",
                        help="show the frameworks' own log output, and a traceback on an internal error")
        sp.set_defaults(func=fn)
        return sp

    q = add("query", cmd_query, "what is op X called in each backend (any spelling: id, title, native name)")
    q.add_argument("op")
    q.add_argument("--backend", "-b", action="append", help="limit to these APIs (repeatable)")
    d = add("dtype", cmd_dtype, "a datatype's bit layout and per-backend spelling (all dtypes without NAME)")
    d.add_argument("name", nargs="?")
    d.add_argument("--backend", "-b", action="append")
    o = add("ops", cmd_ops, "list ops, by category, or those a backend lacks")
    o.add_argument("--category", "-c")
    o.add_argument("--backend", "-b")
    o.add_argument("--missing", action="store_true", help="only ops the backend has no native name for")
    add("backends", cmd_backends, "the APIs in the tables and their coverage")
    for extra in _extra_commands():
        extra(sub, add, target_options=argv is None or list(argv[:1]) in (["convert"], ["report"]))
    return p


def _extra_commands() -> list[Callable[..., None]]:
    """Subcommands that live in other modules (model conversion, checks, reports)."""
    try:
        from .models import register
    except ImportError:
        return []
    return [register]


class _QuickArgs:
    """The parsed form of the common ``opbridge query OP [-b B]... [--json]`` (no argparse)."""

    def __init__(self, op: str, backend: list[str] | None, json_: bool) -> None:
        self.op, self.backend, self.json, self.func = op, backend, json_, cmd_query


def _quick_parse(argv: Sequence[str]) -> _QuickArgs | None:
    if len(argv) < 2 or argv[0] != "query":
        return None
    op, backends, as_json = None, [], False
    it = iter(argv[1:])
    for tok in it:
        if tok == "--json":
            as_json = True
        elif tok in ("--backend", "-b"):
            nxt = next(it, None)
            if nxt is None:
                return None
            backends.append(nxt)
        elif tok.startswith("--backend="):
            backends.append(tok.split("=", 1)[1])
        elif tok.startswith("-") or op is not None:
            return None  # anything else (--help, typos): the full parser explains
        else:
            op = tok
    return _QuickArgs(op, backends or None, as_json) if op is not None else None


def quiet_frameworks() -> None:
    """TensorFlow/absl/gRPC log to stderr from C++ at import: off unless ``-v``."""
    for k, v in (("TF_CPP_MIN_LOG_LEVEL", "3"), ("GRPC_VERBOSITY", "ERROR"), ("GLOG_minloglevel", "3")):
        os.environ.setdefault(k, v)
    if "logging" in sys.modules or "translator.cli.models" in sys.modules:  # not on the fast query path
        import logging

        for name in ("tensorflow", "absl", "coremltools", "jax"):
            logging.getLogger(name).setLevel(logging.ERROR)


#: what native libraries print on file descriptor 2 by themselves: absl's pre-init notice
#: and glog/absl-formatted INFO/WARNING lines (``I0000 00:00:... port.cc:153] ...``)
NATIVE_LOG = re.compile(rb"^(WARNING: All log messages before absl::InitializeLog\(\)|"
                        rb"[IWE]\d{4} [\d:.]+\s+\d+ [\w.-]+:\d+\] |"
                        rb"INFO: (Created|Initialized|Replacing) TensorFlow Lite )")  # TFLite's minimal logger
_FILTERING = False


@contextlib.contextmanager
def native_stderr_filtered() -> Iterator[None]:
    """Within the block, file descriptor 2 goes through a filter that drops native libraries'
    log lines (TensorFlow's C++ logs through absl before any setting can silence it); every
    other line passes on, in order. Python's ``sys.stderr`` writes to the real stream directly.
    Nested or already-filtered uses do nothing."""
    import threading

    global _FILTERING
    if _FILTERING:
        yield
        return
    try:
        sys.stderr.flush()
        real = os.dup(2)
        r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
    except OSError:
        yield
        return
    saved_stderr = sys.stderr
    sys.stderr = open(real, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)

    def pump() -> None:
        with open(r, "rb", buffering=0) as src:
            for line in iter(src.readline, b""):
                if not NATIVE_LOG.match(line):
                    os.write(real, line)

    t = threading.Thread(target=pump, name="opbridge-stderr-filter", daemon=True)
    t.start()
    _FILTERING = True
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
            os.dup2(real, 2)  # closes the pipe's last write end: the pump drains and stops
        except OSError:
            pass
        t.join(timeout=2)
        sys.stderr = saved_stderr
        os.close(real)
        _FILTERING = False


def filter_native_stderr() -> None:
    """``native_stderr_filtered`` for the rest of the process (the console command), undone at exit."""
    import atexit

    cm = native_stderr_filtered()
    cm.__enter__()
    atexit.register(lambda: cm.__exit__(None, None, None))


def _models_command(args: Any) -> bool:
    """Whether the parsed command is one of the model commands (``cli/models.py``)."""
    func = getattr(args, "func", None)
    return func is not None and func.__module__ == f"{__package__}.models"


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (``argv`` None: ``sys.argv``, and this process's file descriptor 2
    is filtered of native log lines; a caller passing ``argv`` keeps its own)."""
    from_console = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _quick_parse(argv) or build_parser(argv).parse_args(argv)
    from ..table.quick import NotFound

    verbose = bool(getattr(args, "verbose", False))
    was_verbose = os.environ.get("OPBRIDGE_VERBOSE")
    if verbose:
        os.environ["OPBRIDGE_VERBOSE"] = "1"  # runtimes opbridge configures show their own logs
    else:
        quiet_frameworks()
        if from_console and _models_command(args):
            filter_native_stderr()
    if from_console:  # a terminated conversion still removes its scratch folder (finally blocks run)
        import signal

        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        if getattr(args, "json", False) and _models_command(args):
            # frameworks (coremltools) print notices on stdout: keep stdout for the JSON document
            import contextlib

            real = sys.stdout
            with contextlib.redirect_stdout(sys.stderr):
                args.real_stdout = real
                return int(args.func(args))
        return int(args.func(args))
    except (NotFound, TableError, UserError) as exc:
        print(f"opbridge: error: {safe(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("opbridge: interrupted; nothing written", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI boundary: one line, never a bare traceback
        from ..table.errors import OpbridgeError

        if verbose:
            import traceback

            traceback.print_exc()
        line = str(exc) if isinstance(exc, OpbridgeError) else internal_error_line(exc)
        print(f"opbridge: error: {safe(line)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        if verbose and was_verbose is None:  # a caller in the same process keeps its environment
            os.environ.pop("OPBRIDGE_VERBOSE", None)

