"""``opbridge report DIR/`` (or several model files): one summary over a folder of models.

Each model is judged exactly as ``opbridge report MODEL`` judges it (``report.plan_model``,
the same dim options), in a pool of worker processes (every core by default), with progress
on stderr. The result is a model × target matrix of verdicts (``ok``: every node converts;
``ok, fixes N=1``: after fixing the dims the target must fix; ``refuses K``: K nodes refused),
the refusal reasons counted over the folder (node groups by reason and op), and per model the
error that stopped its reading, if any (a file that is not a model is a row with its reason,
never the end of the sweep)."""
from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable

#: what counts as a model inside a folder
MODEL_SUFFIXES = (".onnx", ".tflite", ".keras", ".h5")


def collect(paths: list[str]) -> list[str]:
    """Model files given directly, and those inside given folders (a SavedModel folder is one
    model; a folder is searched recursively, in sorted order)."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir() and not (path / "saved_model.pb").exists():
            for f in sorted(path.rglob("*")):
                if f.is_file() and f.suffix.lower() in MODEL_SUFFIXES:
                    out.append(str(f))
                elif f.is_dir() and (f / "saved_model.pb").exists():
                    out.append(str(f))
        else:
            out.append(str(path))
    return list(dict.fromkeys(out))


def judge(path: str, backends: list[str], fix_dims: dict[str, int] | None = None) -> dict[str, Any]:
    """One model's row: per backend the verdict, node counts, dims fixed and refused groups
    (as ``opbridge report MODEL --json`` computes them), or the error that stopped reading it."""
    from ..table.errors import OpbridgeError
    from . import report as R
    from .check import model_loader

    try:
        model = model_loader(path, keep_unread=True)()  # an unreadable op: one refused node
        opts = R.dim_options(fix_dims, None, model, backends)
        plans = R.plan_model(model, backends, **opts)
        found = R.problems(plans, model, **opts)
    except OpbridgeError as exc:
        return {"model": path, "error": str(exc).splitlines()[0], "reason": exc.code}
    except Exception as exc:  # noqa: BLE001 - one model's crash is its row, not the sweep's end
        return {"model": path, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                "reason": "internal_error"}
    row: dict[str, Any] = {"model": path, "nodes": len(plans[0].nodes) if plans else 0, "backends": {}}
    for bp in plans:
        c = bp.counts()
        row["backends"][bp.backend] = {
            "verdict": verdict(c["unsupported"], bp.fixed_dims), "counts": c, "fixed_dims": bp.fixed_dims,
            "problems": [{"reason": p.reason, "op": p.op, "nodes": len(p.nodes), "detail": p.detail,
                          "remedy": p.remedy} for p in found if p.backend == bp.backend]}
    return row


def verdict(refused: int, fixed: dict[str, int]) -> str:
    if refused:
        return f"refuses {refused}"
    return "ok" + (", fixes " + ", ".join(f"{k}={v}" for k, v in fixed.items()) if fixed else "")


def cluster(address: str) -> Any:
    """A Dask ``distributed`` client on the scheduler at ``address`` (``tcp://HOST:PORT``); its
    workers must run this opbridge and see the model paths (a shared filesystem)."""
    from ..table.errors import OpbridgeError

    try:
        from distributed import Client
    except ImportError:
        raise OpbridgeError("missing_dependency", "--scheduler sends the jobs to a Dask cluster: "
                            "pip install 'opbridge[cluster]' (dask distributed)") from None
    try:
        return Client(address, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise OpbridgeError("bad_option", f"--scheduler {address}: no Dask scheduler answers there "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None


def report_many(paths: list[str], backends: list[str], fix_dims: dict[str, int] | None = None,
                workers: int | None = None, progress: Callable[[str], None] | None = None,
                scheduler: str | None = None) -> dict[str, Any]:
    """Every model of ``paths`` judged in a process pool, or with ``scheduler`` by the workers
    of a Dask cluster (the same jobs through its ``concurrent.futures`` executor); the rows in
    the given order."""
    files = collect(paths)
    say = progress or (lambda s: None)
    rows: dict[str, dict[str, Any]] = {}
    n = max(1, min(workers or os.cpu_count() or 1, len(files) or 1))
    if n == 1 and scheduler is None:
        for i, f in enumerate(files):
            rows[f] = judge(f, backends, fix_dims)
            say(f"{i + 1}/{len(files)} {f}")
    else:
        client = cluster(scheduler) if scheduler is not None else None
        pool = client.get_executor(pure=False) if client is not None else ProcessPoolExecutor(max_workers=n)
        try:
            futs = {pool.submit(judge, f, backends, fix_dims): f for f in files}
            for i, fut in enumerate(as_completed(futs)):
                rows[futs[fut]] = fut.result()
                say(f"{i + 1}/{len(files)} {futs[fut]}")
        finally:
            pool.shutdown(wait=True)
            if client is not None:
                client.close()
    ordered = [rows[f] for f in files]
    reasons: Counter[tuple[str, str, str]] = Counter()
    for r in ordered:
        for b, cell in (r.get("backends") or {}).items():
            for p in cell["problems"]:
                reasons[(b, p["reason"], p["op"])] += p["nodes"]
    per_target = {b: sum(1 for r in ordered if (r.get("backends") or {}).get(b, {}).get("verdict", "").startswith("ok"))
                  for b in backends}
    return {"models": ordered, "backends": backends, "converts": per_target, "unreadable":
            sum(1 for r in ordered if "error" in r),
            "top_reasons": [{"backend": b, "reason": why, "op": op, "nodes": k}
                            for (b, why, op), k in reasons.most_common(20)]}


def text(doc: dict[str, Any]) -> str:
    """The matrix as terminal lines (verdict per cell), then the totals and top reasons."""
    backends = doc["backends"]
    names = [os.path.basename(r["model"].rstrip("/")) for r in doc["models"]]
    w = max([len("model")] + [len(s) for s in names])
    cols = [max(len(b), 12) for b in backends]
    lines = ["model".ljust(w) + "  " + "  ".join(b.ljust(c) for b, c in zip(backends, cols))]
    for name, r in zip(names, doc["models"]):
        if "error" in r:
            lines.append(name.ljust(w) + f"  cannot read [{r['reason']}]: {r['error']}")
            continue
        cells = [(r["backends"][b]["verdict"] if b in r["backends"] else "-") for b in backends]
        lines.append(name.ljust(w) + "  " + "  ".join(c.ljust(k) for c, k in zip(cells, cols)))
    total = len(doc["models"])
    lines.append("converts: " + ", ".join(f"{b} {doc['converts'][b]}/{total}" for b in backends)
                 + (f"; {doc['unreadable']} unreadable" if doc["unreadable"] else ""))
    if doc["top_reasons"]:
        lines.append("top refusals: " + "; ".join(f"{t['backend']} {t['op']} [{t['reason']}] {t['nodes']} node(s)"
                                               for t in doc["top_reasons"][:8]))
    return "\n".join(lines)


def html_page(doc: dict[str, Any]) -> str:
    from .report import _HTML_HEAD, _e

    backends = doc["backends"]
    out = [_HTML_HEAD.format(title="opbridge compatibility report: " + _e(f"{len(doc['models'])} models"))]
    out.append("<div class='wrap'><table id='m'><thead><tr><th>model</th><th>nodes</th>" + "".join(f"<th>{_e(b)}</th>" for b in backends)
               + "</tr></thead><tbody>")
    for r in doc["models"]:
        if "error" in r:
            out.append(f"<tr><td>{_e(r['model'])}</td><td></td><td class='unsupported' colspan='{len(backends)}'>"
                       f"cannot read [{_e(r['reason'])}]: {_e(r['error'])}</td></tr>")
            continue
        tds = []
        for b in backends:
            cell = r["backends"].get(b)
            if cell is None:
                tds.append("<td></td>")
                continue
            why = "; ".join(f"{p['nodes']} {p['op']} [{p['reason']}]" for p in cell["problems"][:3])
            tds.append(f"<td class='{'native' if cell['verdict'].startswith('ok') else 'unsupported'}' "
                       f"title='{_e(why)}'>{_e(cell['verdict'])}</td>")
        out.append(f"<tr><td>{_e(r['model'])}</td><td>{r['nodes']}</td>{''.join(tds)}</tr>")
    out.append("</tbody></table></div><h2>Top refusals</h2><ul class='sum'>" +
               "".join(f"<li>{_e(t['backend'])}: {t['nodes']} {_e(t['op'])} node(s) [{_e(t['reason'])}]</li>"
                       for t in doc["top_reasons"]) + "</ul></body></html>")
    return "".join(out)
