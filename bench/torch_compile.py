"""The PyTorch artifact under ``torch.export`` and ``torch.compile`` on every zoo model (issue 25:
"the PyTorch artifact still passes torch.export and now also torch.compile on every zoo model").

Per model (a child process with a timeout, so a crash or a hang is one row): opbridge converts
the static TorchScript export (``bench/.cache/zoo/<model>/ts.onnx``) to a PyTorch module, which
runs eagerly on the zoo's own inputs under ``torch.inference_mode``; then

* ``torch.export.export(module, inputs)``: the exported program's outputs against eager;
* ``torch.compile(module)`` (inductor, the default backend, ``fullgraph=True``: a graph break
  is a failure, not a fallback): its outputs against eager, compile seconds, and the latency
  of the compiled module beside eager (one thread, alternately, median of ``-n``).

Outputs agree when ``|a - b| <= atol + rtol * |b|`` with atol = rtol = 1e-4 (inductor fuses and
reorders float arithmetic); integer and bool outputs must be equal. Printed: per model one
line, then how many pass each and every failure with its first line.

    python bench/torch_compile.py [--only resnet18,bert] [--variant ts] [-n 10] [--timeout 900]
                                  [--json out.json] [--render out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore", "TORCHINDUCTOR_COMPILE_THREADS": "1"}
ATOL = RTOL = 1e-4


def _agree(want: Any, got: Any) -> str | None:
    """None when the two output tuples agree, else why not (first output that differs)."""
    import torch

    want = list(want) if isinstance(want, (list, tuple)) else [want]
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    if len(want) != len(got):
        return f"{len(got)} outputs, eager has {len(want)}"
    for i, (w, g) in enumerate(zip(want, got)):
        if tuple(w.shape) != tuple(g.shape):
            return f"output {i}: shape {tuple(g.shape)}, eager {tuple(w.shape)}"
        if w.dtype.is_floating_point:
            ok = torch.allclose(g.to(w.dtype), w, atol=ATOL, rtol=RTOL, equal_nan=True)
        else:
            ok = bool(torch.equal(g.to(w.dtype), w))
        if not ok:
            d = (g.double() - w.double()).abs().max().item()
            return f"output {i}: max abs difference {d:.3g}"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def one(name: str, variant: str, n: int) -> dict[str, Any]:
    """Child: one zoo model's row."""
    import torch

    from translator.compile.pipeline import compile as to_target
    from translator.frontends import load
    from zoo_models import CACHE

    torch.set_num_threads(1)
    path = CACHE / name / f"{variant}.onnx"
    with np.load(CACHE / name / "inputs.npz", allow_pickle=False) as z:
        feeds = {k: z[k] for k in z.files}
    t = time.perf_counter()
    art = to_target(load(str(path)), "pytorch").artifact
    row: dict[str, Any] = {"model": f"{name}/{variant}", "convert_s": time.perf_counter() - t}
    m = art.instantiate()
    args = tuple(torch.from_numpy(np.asarray(feeds[k]).astype(art.input_dtypes.get(k, feeds[k].dtype)))
                 for k in art.input_names)
    with torch.inference_mode():
        want = m(*args)
    try:
        t = time.perf_counter()
        ep = torch.export.export(m, args)
        with torch.inference_mode():
            why = _agree(want, ep.module()(*args))
        row["export"] = {"ok": why is None, "seconds": time.perf_counter() - t, **({"error": why} if why else {})}
    except Exception as exc:  # noqa: BLE001 - a failure is this cell's result
        row["export"] = {"ok": False, "error": _first_line(exc)}
    try:
        torch._dynamo.reset()
        compiled = torch.compile(m, fullgraph=True)
        t = time.perf_counter()
        with torch.inference_mode():
            got = compiled(*args)
        seconds = time.perf_counter() - t
        why = _agree(want, got)
        cell: dict[str, Any] = {"ok": why is None, "compile_s": seconds, **({"error": why} if why else {})}
        if why is None:
            times: dict[str, list[float]] = {"eager": [], "compiled": []}
            with torch.inference_mode():
                for _ in range(n):
                    for key, f in (("eager", m), ("compiled", compiled)):
                        s = time.perf_counter()
                        f(*args)
                        times[key].append(time.perf_counter() - s)
            cell.update(eager_s=statistics.median(times["eager"]), compiled_s=statistics.median(times["compiled"]))
        row["compile"] = cell
    except Exception as exc:  # noqa: BLE001
        row["compile"] = {"ok": False, "error": _first_line(exc)}
    return row


def summary(rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for key, what in (("export", "torch.export"), ("compile", "torch.compile (inductor, fullgraph)")):
        done = [r for r in rows if key in r]
        ok = [r for r in done if r[key].get("ok")]
        lines.append(f"{what}: {len(ok)}/{len(rows)} pass")
        for r in rows:
            if key not in r:
                lines.append(f"    {r['model']}: {r.get('error', 'not run')}")
            elif not r[key].get("ok"):
                lines.append(f"    {r['model']}: {r[key].get('error')}")
    sp = [r["compile"]["eager_s"] / r["compile"]["compiled_s"] for r in rows
          if r.get("compile", {}).get("compiled_s")]
    if sp:
        lines.append(f"compiled vs eager (one thread): speedup median {statistics.median(sp):.2f}, "
                     f"min {min(sp):.2f}, max {max(sp):.2f} over {len(sp)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated zoo model names")
    ap.add_argument("--variant", default="ts", help="which export of each zoo model (default ts)")
    ap.add_argument("-n", type=int, default=10, help="timed runs of eager and compiled (median)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model's child process")
    ap.add_argument("--json", help="write the rows here (rewritten after every model)")
    ap.add_argument("--render", metavar="JSON", help="print the summary of an earlier --json run; no run")
    a = ap.parse_args(argv)
    if a.render:
        print("\n".join(summary(json.loads(Path(a.render).read_text()))))
        return 0
    from zoo_models import CACHE, MODELS

    names = [s.strip() for s in a.only.split(",")] if a.only else [m for m in MODELS
                                                                   if (CACHE / m / f"{a.variant}.onnx").exists()]
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for k, name in enumerate(names, 1):
        print(f"[{k}/{len(names)}] {name}/{a.variant}", flush=True)
        with tempfile.TemporaryDirectory(prefix="opbridge-compile-") as work:
            out = Path(work) / "row.json"
            code = (f"import sys, json; sys.path[:0] = [{str(HERE)!r}, {str(ROOT)!r}]; import torch_compile as t; "
                    f"r = json.dumps(t.one({name!r}, {a.variant!r}, {a.n}), default=float); "
                    f"open({str(out)!r}, 'w').write(r)")  # (written only once the row is complete)
            try:
                p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=a.timeout,
                                   env={**os.environ, **QUIET_ENV, "TORCHINDUCTOR_CACHE_DIR": str(Path(work) / "inductor")})
                row = json.loads(out.read_text()) if out.exists() else \
                    {"model": f"{name}/{a.variant}", "error": f"exit {p.returncode}: "
                     + ((p.stderr.strip().splitlines() or ['no output'])[-1][:300])}
            except subprocess.TimeoutExpired:
                row = {"model": f"{name}/{a.variant}", "error": f"timed out after {a.timeout:.0f} s"}
        rows.append(row)
        e, c = row.get("export", {}), row.get("compile", {})
        print(f"    export {'ok' if e.get('ok') else e.get('error', row.get('error'))}; compile "
              + (f"ok in {c['compile_s']:.1f} s, {c['eager_s'] * 1e3:.2f} ms eager, {c['compiled_s'] * 1e3:.2f} ms compiled"
                 if c.get("ok") else str(c.get("error", row.get("error")))), flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(rows, indent=1, default=float))
    print("\n".join(summary(rows)))
    print(f"{len(rows)} models, {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
