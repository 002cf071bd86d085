"""PyTorch's own test suite as the oracle: the OpInfo database through opbridge's PyTorch frontend.

For each op of ``torch.testing._internal.common_methods_invocations.op_db`` (float32, CPU,
forward), the first ``K`` samples (``op.sample_inputs("cpu", torch.float32)``) whose
arguments are tensors and plain Python values are wrapped in a module (the sample's tensors
are its inputs, everything else is fixed), exported (``torch.export``), read into the IR
(``translator.frontends.pytorch``), converted in-process to every target
(``pipeline.compile`` + the target's ``run``) and compared with eager PyTorch: floats within
the op's OpInfo tolerance when it declares one for float32, else rtol 1e-3 / atol 1e-4;
other dtypes exactly. Core ML on a machine that cannot run it builds the model only:
``structural_only``, counted apart (never a pass).

The peer runs side by side on the same samples: ``torch.onnx.export(..., dynamo=True)`` +
onnxruntime. Per target the pass count, and its ratio to the peer's.
Goal: onnx >= the peer; every other target >= 80 % of it.

    python bench/opinfo.py [--k 1] [--limit N] [--ops a,b] [--targets onnx,tflite] [--json out.json]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import signal
import sys
import time
import warnings

import numpy as np
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")
RTOL, ATOL = 1e-3, 1e-4
PEER = "torch.onnx(dynamo)+ort"


class CaseTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    def fire(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"over {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def quiet():
    """Third-party chatter (warnings, stdout/stderr prints of converters) is dropped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield


def first_line(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip():
            return f"{type(exc).__name__}: {' '.join(line.split())[:200]}"
    return type(exc).__name__


# ---------------------------------------------------------------------------- samples
_PLAIN = (bool, int, float, str, type(None))


def _ok_leaf(x: Any) -> bool:
    import torch

    if isinstance(x, torch.Tensor):
        return x.device.type == "cpu" and not x.is_complex() and x.layout == torch.strided
    return isinstance(x, _PLAIN) or isinstance(x, torch.dtype)


def make_case(op: Any, sample: Any) -> tuple[Any, tuple[Any, ...]] | None:
    """(module, tensors) for one sample, or None when its arguments are not tensors/python values."""
    import torch
    import torch.utils._pytree as pytree

    tree = (sample.input, tuple(sample.args), dict(sample.kwargs))
    leaves, spec = pytree.tree_flatten(tree)
    if not all(_ok_leaf(x) for x in leaves):
        return None
    slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    if not slots:
        return None
    tensors = tuple(leaves[i].detach().clone() for i in slots)
    fn = op.op

    class OpSample(torch.nn.Module):
        def forward(self, *ts: Any) -> Any:
            filled = list(leaves)
            for i, t in zip(slots, ts):
                filled[i] = t
            inp, args, kwargs = pytree.tree_unflatten(filled, spec)
            return fn(inp, *args, **kwargs)

    return OpSample(), tensors


def eager(module: Any, tensors: tuple[Any, ...]) -> list[Any] | None:
    import torch
    import torch.utils._pytree as pytree

    with torch.no_grad():
        out = module(*[t.clone() for t in tensors])
    leaves = pytree.tree_leaves(out)
    res = []
    for x in leaves:
        if not isinstance(x, torch.Tensor) or x.is_complex() or x.dtype == torch.bfloat16:
            return None
        res.append(x.detach().numpy().copy())
    return res or None


def tolerance(op: Any) -> tuple[float, float]:
    """The op's own float32 tolerance override (OpInfo ``toleranceOverride`` decorators), else the default."""
    import torch

    rtol, atol = RTOL, ATOL
    for d in getattr(op, "decorators", ()) or ():
        cls = getattr(d, "cls_name", None)
        over = getattr(getattr(d, "decorator", None), "d", None)
        if cls is None or not isinstance(over, dict):
            continue
        t = over.get(torch.float32)
        if t is not None:
            atol, rtol = max(atol, float(t.atol)), max(rtol, float(t.rtol))
    return rtol, atol


def compare(expected: list[Any], got: list[Any], rtol: float, atol: float, legal: list[Any] | None) -> tuple[bool, str]:
    from translator.run.harness import compare as cmp

    if len(got) != len(expected):
        return False, f"{len(got)} outputs, expected {len(expected)}"
    for i, (e, g) in enumerate(zip(expected, got)):
        d = cmp(e, g, rtol, atol, legalized=legal[i] if legal else None)
        if not d.ok:
            return False, d.reason[:160]
    return True, ""


# ---------------------------------------------------------------------------- runners
def run_peer(module: Any, tensors: tuple[Any, ...], expected: list[Any], rtol: float, atol: float,
             scratch: Path) -> tuple[str, str]:
    import onnxruntime as ort
    import torch

    path = scratch / "peer.onnx"
    try:
        with quiet():
            prog = torch.onnx.export(module, tensors, dynamo=True, verbose=False)
            prog.save(str(path))
    except Exception as exc:  # noqa: BLE001
        return "convert_error", first_line(exc)
    try:
        with quiet():
            so = ort.SessionOptions()
            so.log_severity_level = 3
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            names = [i.name for i in sess.get_inputs()]
            got = sess.run(None, {n: t.numpy() for n, t in zip(names, tensors)})
    except Exception as exc:  # noqa: BLE001
        return "run_error", first_line(exc)
    ok, why = compare(expected, got, rtol, atol, None)
    return ("pass" if ok else "fail"), why


def run_target(name: str, model: Any, feeds: dict[str, Any], expected: list[Any], rtol: float, atol: float) -> tuple[str, str]:
    from translator.table.errors import OpbridgeError
    from translator.compile.pipeline import compile
    from translator.compile.target import get

    target = get(name)
    try:
        with quiet():
            done = compile(model, target)
    except OpbridgeError as exc:
        return "convert_error", f"{exc.code}: {exc.detail[:160]}"
    except Exception as exc:  # noqa: BLE001
        return "convert_error", first_line(exc)
    try:
        with quiet():
            got = list(target.run(done.artifact, feeds))
    except OpbridgeError as exc:
        if exc.code == "structural_only":
            return "structural_only", exc.detail[:120]
        return "run_error", f"{exc.code}: {exc.detail[:160]}"
    except Exception as exc:  # noqa: BLE001
        return "run_error", first_line(exc)
    legal = None
    if target.output_ports is not None:
        try:
            legal = [p.legal for p in target.output_ports(done.artifact)]
        except Exception:  # noqa: BLE001
            legal = None
    ok, why = compare(expected, got, rtol, atol, legal)
    return ("pass" if ok else "fail"), why


def run_case(op: Any, idx: int, module: Any, tensors: tuple[Any, ...], targets: list[str], scratch: Path,
             limit_s: float, peer: bool = True) -> dict[str, Any]:
    from translator.frontends import pytorch as frontend

    rec: dict[str, Any] = {"op": op.name, "sample": idx, "results": {}}
    expected = eager(module, tensors)
    if expected is None:
        rec["skipped"] = "eager output is not real tensors"
        return rec
    again = eager(module, tensors)
    if again is None or any(a.shape != b.shape or not np.array_equal(a, b, equal_nan=True)
                            for a, b in zip(expected, again)):
        rec["skipped"] = "random: two eager runs differ"
        return rec
    rtol, atol = tolerance(op)
    try:
        with time_limit(limit_s), quiet():
            t0 = time.perf_counter()
            model = frontend.load(module, example_inputs=tensors)
            rec["read_s"] = round(time.perf_counter() - t0, 3)
    except CaseTimeout as exc:
        model, rec["frontend"] = None, f"time_limit: {exc}"
    except Exception as exc:  # noqa: BLE001
        model = None
        code = getattr(exc, "code", None)
        rec["frontend"] = f"{code}: {exc.detail}" if code else first_line(exc)
    if model is not None:
        feeds = {v.name: t.numpy() for v, t in zip(model.graph.inputs, tensors)}
    for t in targets:
        if model is None:
            rec["results"][t] = ("frontend_error", rec["frontend"][:200])
            continue
        try:
            with time_limit(limit_s):
                rec["results"][t] = run_target(t, model, feeds, expected, rtol, atol)
        except CaseTimeout as exc:
            rec["results"][t] = ("time_limit", str(exc))
        except Exception as exc:  # noqa: BLE001
            rec["results"][t] = ("error", first_line(exc))
    if not peer:
        return rec
    try:
        with time_limit(limit_s):
            rec["results"][PEER] = run_peer(module, tensors, expected, rtol, atol, scratch)
    except CaseTimeout as exc:
        rec["results"][PEER] = ("time_limit", str(exc))
    except Exception as exc:  # noqa: BLE001
        rec["results"][PEER] = ("error", first_line(exc))
    return rec


# ---------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=1, help="samples per op (the first K usable ones)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N ops")
    ap.add_argument("--ops", default=None, help="comma-separated OpInfo names (e.g. add,nn.functional.conv2d)")
    ap.add_argument("--only", default=None, help="alias of --ops")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--no-peer", action="store_true", help="do not run the peer")
    ap.add_argument("--stride", type=int, default=1, help="every N-th op of op_db only (a spread subset)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per case and target")
    ap.add_argument("--json", default=None, help="write every case's result here")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every failing case")
    a = ap.parse_args(argv)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    logging.disable(logging.WARNING)
    import tempfile

    with quiet():
        import torch
        from torch.testing._internal.common_methods_invocations import op_db
    torch.manual_seed(0)
    targets = [t for t in a.targets.split(",") if t]
    peers = [] if a.no_peer else [PEER]
    wanted = set((a.ops or a.only or "").split(",")) - {""}
    ops = [op for op in op_db if (not wanted or op.name in wanted or f"{op.name}.{op.variant_test_name}" in wanted)
           and torch.float32 in op.supported_dtypes("cpu")]
    ops = ops[::max(1, a.stride)]
    if a.limit:
        ops = ops[:a.limit]
    cases: list[dict[str, Any]] = []
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opinfo-") as d:
        scratch = Path(d)
        for n, op in enumerate(ops, 1):
            label = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
            try:
                with quiet():
                    samples = op.sample_inputs("cpu", torch.float32, requires_grad=False)
                taken = 0
                for idx, sample in enumerate(samples):
                    if taken >= a.k:
                        break
                    made = make_case(op, sample)
                    if made is None:
                        continue
                    taken += 1
                    rec = run_case(op, idx, *made, targets, scratch, a.time_limit, peer=not a.no_peer)
                    rec["op"] = label
                    cases.append(rec)
                    res = rec["results"]
                    line = " ".join(f"{k.split('(')[0]}={v[0]}" for k, v in res.items())
                    if rec.get("frontend"):
                        line += f" | frontend: {rec['frontend'][:240]}"
                    print(f"[{n}/{len(ops)}] {label}#{idx}: {rec.get('skipped') or line}", file=sys.stderr, flush=True)
            except Exception as exc:  # noqa: BLE001 - sample generation itself failed
                print(f"[{n}/{len(ops)}] {label}: samples: {first_line(exc)}", file=sys.stderr, flush=True)
    wall = time.perf_counter() - t_start
    counted = [c for c in cases if "skipped" not in c]
    summary = summarize(counted, targets, peers)
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "cases": cases, "seconds": round(wall, 1)}, indent=1,
                                           default=str))
    print_table(summary, len(counted), wall)
    if a.verbose:
        for c in counted:
            for t, (s, why) in c["results"].items():
                if s != "pass":
                    print(f"  {c['op']}#{c['sample']} {t}: {s} {why}")
    return 0


def summarize(cases: list[dict[str, Any]], targets: list[str], peers: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    peer = sum(1 for c in cases if c["results"].get(PEER, ("",))[0] == "pass")
    for t in targets + peers:
        st = Counter(c["results"].get(t, ("missing",))[0] for c in cases)
        passed = st.get("pass", 0)
        out[t] = {"pass": passed, "structural_only": st.get("structural_only", 0), "samples": len(cases),
                  "ratio_to_peer": round(passed / peer, 3) if peer else None, "statuses": dict(st)}
    fe = Counter((c.get("frontend") or "").split(":")[0] for c in cases if c.get("frontend"))
    out["frontend_errors"] = dict(fe)
    return out


def print_table(summary: dict[str, Any], n: int, wall: float) -> None:
    print(f"OpInfo float32 forward samples: {n} ({wall:.0f} s)")
    print(f"{'target':<28}{'pass':>6}{'struct':>8}{'samples':>9}{'vs peer':>9}  goal")
    for t, s in summary.items():
        if t == "frontend_errors":
            continue
        goal = "" if t == PEER else (">= 1.00" if t == "onnx" else ">= 0.80")
        r = s["ratio_to_peer"]
        ok = "" if r is None or t == PEER else (" met" if r >= (1.0 if t == "onnx" else 0.8) else " NOT met")
        print(f"{t:<28}{s['pass']:>6}{s['structural_only']:>8}{s['samples']:>9}"
              f"{(f'{r:.2f}' if r is not None else '-'):>9}  {goal}{ok}")
    if summary.get("frontend_errors"):
        print("frontend errors: " + ", ".join(f"{k} {v}" for k, v in summary["frontend_errors"].items()))


if __name__ == "__main__":
    sys.exit(main())
