"""Converted models as fast as the target allows (issue 25): every ONNX model of a corpus,
opbridge's artifact per target timed against the source runtime on the original file and
against the peer's artifact for that target, same inputs, same thread count, one run.

Per model (a child process with a timeout, so a crash or a hang is one row):

| target | timed against | how |
|---|---|---|
| onnx | onnxruntime on the source file | both sessions in this process, same SessionOptions, alternately; onnxruntime's optimized node count of each |
| tensorflow | onnxruntime on the source file | the generated ``tf.function`` (prepared runner) and the source session, alternately |
| pytorch | onnxruntime; onnx2torch; the original ``nn.Module`` (zoo) | ours and onnx2torch's module in the peers venv (``peers.compare_pytorch``); ours and the zoo's own module in the zoo venv (``zoo_models.py _time``) |
| tflite | onnxruntime; onnx2tf | both flatbuffers in onnx2tf's venv, one TFLite build (``peers.compare_tflite``) |
| openvino | onnxruntime; OpenVINO's own reader | both ``ov.Model``s compiled with the same CPU config (``peers.compare_openvino``) |
| stablehlo | onnxruntime on the source file | the jitted function (prepared runner, compiled by the warm-up) and the source session, alternately; XLA's CPU client on ``--threads`` threads (``XLA_FLAGS`` set in the child before JAX loads) |
| mlx | onnxruntime on the source file | the module's function on ``mx.cpu`` (prepared runner) and the source session, alternately; MLX has no thread setting |
| ncnn | onnxruntime; pnnx | our files and pnnx's for the same ONNX file, both run by the ncnn package with the same options (CPU, fp32, ``--threads``), alternately (``peers.compare_ncnn``) |

The source runtime is timed in this process with ``intra_op_num_threads`` = ``--threads``;
every latency is a median of ``-n`` runs after a warm-up (``peers.samples``: the callables of
one process alternate, so a burst of load hits them alike). Conversion seconds are
frontend → in-memory artifact for opbridge, the peer's own conversion for the peer.

Printed per target: the median and the worst ratio of our latency to the fastest of (source
runtime, peer), the worst five models, the median conversion-time ratio to the peer; the
acceptance bounds of issue 25 are printed beside them. Corpora: ``wild`` (the ONNX files of
bench/wild, their first check inputs where the wild run saved them), ``zoo`` (static
variants, their cached meaningful inputs), ``suite`` (bench/.cache/models). Non-ONNX sources
are not timed yet (said in the notes).

    python bench/latency.py [--corpus wild|zoo|suite] [--only a,b] [--targets onnx,tflite,...]
                            [--threads 1] [-n 20] [--timeout 900] [--json out.json] [--render out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
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

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino")
#: issue 25's bounds on the ratio ours / fastest(source, peer), per target (issue 27 gives the
#: Python-source targets none: their ratios are printed)
BOUND = {"onnx": 1.0, "openvino": 1.0, "tflite": 1.2, "pytorch": 1.3, "tensorflow": 1.3}
#: issue 27's bound on ours / the peer's artifact (ncnn against pnnx)
PEER_BOUND = {"ncnn": 1.1, "tflite": 1.0}
PEER_OF_NAME = {"ncnn": "pnnx", "tflite": "onnx2tf"}
#: targets timed as a prepared in-process callable beside the source session
IN_PROCESS = ("tensorflow", "stablehlo", "mlx")
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR", "PYTHONWARNINGS": "ignore",
             "OPENVINO_TELEMETRY_DISABLE": "1", "CUDA_VISIBLE_DEVICES": ""}


def peers_py() -> Any:
    """bench/peers.py (the per-target comparisons with the peers and the shared timing), by
    file: the bench/peers/ package shadows its module name."""
    from peers import timing

    return timing()


def corpus(name: str) -> list[tuple[str, Path, Path | None]]:
    """(model id, ONNX file, inputs .npz or None) of a corpus, in its order."""
    if name == "suite":
        MODELS, SUITE = peers_py().MODELS, peers_py().SUITE
        return [(m, MODELS / f"{m}.onnx", None) for m in SUITE if (MODELS / f"{m}.onnx").exists()]
    if name == "zoo":
        from zoo_models import CACHE, MODELS

        out = []
        for m in MODELS:
            for ex in ("ts", "dynamo"):
                f = CACHE / m / f"{ex}.onnx"
                if f.exists():
                    out.append((f"{m}/{ex}", f, CACHE / m / "inputs.npz"))
        return out
    if name == "wild":
        sys.path.insert(0, str(HERE / "wild"))
        import fetch

        outs = HERE / ".cache" / "wild" / "out"
        rows = []
        for e in fetch.load_corpus(fetch.CORPUS):
            f = fetch.model_path(e)
            if f.suffix == ".onnx" and f.exists():
                npz = outs / e["id"] / "inputs_a.npz"
                rows.append((e["id"], f, npz if npz.exists() else None))
        return rows
    raise SystemExit(f"unknown corpus {name!r} (wild, zoo, suite)")


def _feeds(path: Path, npz: Path | None) -> dict[str, np.ndarray]:
    inputs_for = peers_py().inputs_for
    if npz is not None:
        with np.load(npz, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    return inputs_for(path)


def session(path: Path, threads: int, optimized_to: Path | None = None) -> Any:
    """An onnxruntime session on ``path`` with ``threads`` intra-op threads (sequential);
    ``optimized_to``: where onnxruntime writes the graph it optimized."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.log_severity_level = 3
    if optimized_to is not None:
        so.optimized_model_filepath = str(optimized_to)
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def optimized_nodes(path: Path, threads: int, work: Path) -> int | None:
    """How many nodes onnxruntime runs for ``path`` after its graph optimizations."""
    import onnx

    out = work / f"optimized_{path.stem}_{abs(hash(str(path)))}.onnx"
    try:
        session(path, threads, out)
        return len(onnx.load(str(out), load_external_data=False).graph.node)
    except Exception:  # noqa: BLE001 - a count that cannot be had is left out
        return None


def time_model(path: Path, npz: Path | None, targets: list[str], n: int, threads: int, work: Path) -> dict[str, Any]:
    """One model's row: the source runtime's latency, and per target ours and the peer's
    (latency, conversion seconds, or the error)."""
    peers = peers_py()
    feeds = _feeds(path, npz)
    src = session(path, threads)
    names = [i.name for i in src.get_inputs()]
    feeds = {k: v for k, v in feeds.items() if k in names}
    src_call = lambda: src.run(None, feeds)  # noqa: E731
    row: dict[str, Any] = {"source_s": peers.timed({"source": src_call}, n)["source"], "targets": {}}
    for t in targets:
        out_dir = work / t
        out_dir.mkdir(parents=True, exist_ok=True)
        try:
            if t in peers.COMPARE:
                ours, theirs = peers.COMPARE[t](path, feeds, n, out_dir, threads)
                expected = src_call()
                for rec in (ours, theirs):
                    if rec.get("ok") and rec.get("outputs") is not None:
                        rec["max_err"], rec["agrees"] = agreement(expected, rec["outputs"])
                cell = {"ours": _slim(ours), "peer": _slim(theirs), "peer_name": peers.PEER_OF[t]}
                if t == "pytorch" and ours.get("ok"):
                    floor = framework_floor(path, out_dir / "ours_for_peer_venv", n, threads)
                    if floor is not None:
                        cell["framework"] = floor
            elif t == "onnx":
                target, art, convert_s = peers.convert_ours("onnx", path, out_dir, feeds)
                written = out_dir / "ours_onnx"  # the saved file, in a session set up as the source's
                mine = session(written if written.is_file() else written / "model.onnx", threads)
                lat = peers.timed({"ours": lambda: mine.run(None, feeds), "source": src_call}, n)
                cell = {"ours": {"ok": True, "convert_s": convert_s, "latency_s": lat["ours"]},
                        "source_alongside_s": lat["source"],
                        "optimized_nodes": {"ours": optimized_nodes(written if written.is_file() else written / "model.onnx",
                                                                    threads, out_dir),
                                            "source": optimized_nodes(path, threads, out_dir)}}
            elif t in IN_PROCESS:
                target, art, convert_s = peers.convert_ours(t, path, out_dir, feeds)
                call = target.prepared(art)
                lat = peers.timed({"ours": lambda: call(feeds), "source": src_call}, n)
                cell = {"ours": {"ok": True, "convert_s": convert_s, "latency_s": lat["ours"]},
                        "source_alongside_s": lat["source"]}
            else:
                cell = {"ours": {"ok": False, "error": f"{t}: not timed here (no runtime on this machine)"}}
        except Exception as exc:  # noqa: BLE001 - one target's failure is its cell
            cell = {"ours": peers.failed(exc)}
        row["targets"][t] = cell
    return row


def framework_floor(path: Path, ours: Path, n: int, threads: int) -> dict[str, Any] | None:
    """A zoo model's original ``nn.Module`` beside opbridge's PyTorch module, in the zoo venv
    (``zoo_models.py _time``): the framework's own kernels, the floor issue 25 reports for
    pytorch. None for a model not from the zoo; the error when the child fails."""
    import subprocess

    from zoo_models import CACHE

    venv = HERE / ".venv-zoo" / "bin" / "python"
    if path.parent.parent.resolve() != CACHE.resolve() or not (ours / "model.py").exists():
        return None
    if not venv.exists():
        return {"ok": False, "error": "bench/.venv-zoo is not set up (bench/setup_zoo.sh)"}
    p = subprocess.run([str(venv), str(HERE / "zoo_models.py"), "_time", path.parent.name, str(ours), str(n), str(threads)],
                       capture_output=True, text=True, timeout=1800, env={**os.environ, **QUIET_ENV})
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"ok": False, "error": f"zoo_models.py _time exited {p.returncode}: {tail[:300]}"}
    return {"ok": True, **json.loads(lines[-1])}


def _slim(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k in ("ok", "error", "convert_s", "latency_s", "save_s", "max_err", "agrees",
                                                "delegation")}


def agreement(expected: list[Any], got: list[Any]) -> tuple[float | None, bool]:
    """(max abs error, whether it is within 1e-3 of the outputs' scale) of an artifact's outputs
    against the source runtime's on the timed inputs; an output of the same size in another shape
    (ncnn drops a batch of 1) is compared in the expected shape, or channels-last moved back. A timing of an artifact that
    computes something else is no measure to hold ours against."""
    worst, scale = 0.0, 1.0
    for e, g in zip(expected, got):
        e, g = np.asarray(e), np.asarray(g)
        if g.size != e.size:
            return None, False
        if e.size == 0:
            continue
        forms = [g.reshape(e.shape)]
        if g.ndim == e.ndim >= 3 and np.moveaxis(g, -1, 1).shape == e.shape:
            forms.append(np.moveaxis(g, -1, 1))  # a channels-last output (onnx2tf's)
        errs = [np.abs(f.astype(np.float64) - e.astype(np.float64)) for f in forms]
        errs = [float(d.max()) for d in errs if np.all(np.isfinite(d))]
        if not errs:
            return None, False
        worst = max(worst, min(errs))
        scale = max(scale, float(np.max(np.abs(e.astype(np.float64)))))
    return worst, len(got) >= len(expected) and worst <= 1e-3 * scale


def child_main(path: str, npz: str, targets: str, n: str, threads: str, result: str) -> None:
    """The child's work: one model, its row written to ``result``."""
    os.environ.update(QUIET_ENV)
    t = int(threads)
    if "stablehlo" in targets.split(","):  # before JAX loads: XLA's CPU client takes its threads from these
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_cpu_multi_thread_eigen={'true' if t > 1 else 'false'}"
                                   f" intra_op_parallelism_threads={t}").strip()
    try:
        import torch

        torch.set_num_threads(t)
    except ImportError:
        pass
    try:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(t)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except ImportError:
        pass
    with tempfile.TemporaryDirectory(prefix="opbridge-latency-") as work:
        row = time_model(Path(path), Path(npz) if npz else None, targets.split(","), int(n), t, Path(work))
    Path(result).write_text(json.dumps(row, default=float))


def fastest_other(row: dict[str, Any], t: str) -> tuple[float | None, str]:
    """The fastest of (source runtime, the peer's artifact) for target ``t``, and which."""
    cell = row["targets"].get(t, {})
    options = [(cell.get("source_alongside_s") or row.get("source_s"), "source")]
    peer = cell.get("peer") or {}
    if peer.get("ok") and peer.get("latency_s") and peer.get("agrees", True):
        options.append((peer["latency_s"], cell.get("peer_name", "peer")))
    options = [o for o in options if o[0]]
    return min(options) if options else (None, "")


def summary(rows: list[dict[str, Any]], targets: list[str]) -> list[str]:
    lines = []
    for t in targets:
        ratios, conv = [], []
        failed = 0
        for r in rows:
            cell = r.get("targets", {}).get(t)
            if not cell:
                continue
            ours = cell["ours"]
            if not ours.get("ok") or not ours.get("latency_s"):
                failed += 1
                continue
            best, who = fastest_other(r, t)
            if best:
                ratios.append((ours["latency_s"] / best, r["model"], who))
            peer = cell.get("peer") or {}
            if peer.get("ok") and peer.get("convert_s") and ours.get("convert_s"):
                conv.append(ours["convert_s"] / peer["convert_s"])
        if not ratios:
            lines.append(f"{t:11s} no timed model" + (f" ({failed} failed)" if failed else ""))
            continue
        med = statistics.median(r for r, _, _ in ratios)
        worst = sorted(ratios, reverse=True)[:5]
        over = sum(1 for r, _, _ in ratios if r > 1.5)
        bound = (f" (bound {BOUND[t]:.1f}: {'met' if med <= BOUND[t] else 'NOT met'})" if t in BOUND else "")
        lines.append(f"{t:11s} latency / fastest(source, peer): median {med:.2f}{bound}, worst {worst[0][0]:.2f}, "
                     f"above 1.5: {over}/{len(ratios)}"
                     + (f"; {failed} not timed" if failed else "")
                     + (f"; conversion time / peer's: median {statistics.median(conv):.2f} over {len(conv)}" if conv else ""))
        lines.append("            worst five: " + ", ".join(f"{m} {x:.2f} (vs {who})" for x, m, who in worst))
        vs_peer = sorted(((c["ours"]["latency_s"] / c["peer"]["latency_s"], r["model"]) for r in rows
                          for c in [r.get("targets", {}).get(t) or {}]
                          if c.get("ours", {}).get("latency_s") and (c.get("peer") or {}).get("latency_s")
                          and c["peer"].get("agrees", True)), reverse=True)
        wrong = sorted(r["model"] for r in rows for c in [r.get("targets", {}).get(t) or {}]
                       if (c.get("peer") or {}).get("agrees") is False)
        if wrong:
            lines.append(f"            {PEER_OF_NAME.get(t, 'the peer')}'s outputs disagree with the source on {len(wrong)} "
                         f"(not timed against): {', '.join(wrong)}")
        if vs_peer and t in PEER_BOUND:
            pm = statistics.median(x for x, _ in vs_peer)
            lines.append(f"            vs {PEER_OF_NAME.get(t, 'the peer')} alone: median {pm:.2f} (bound {PEER_BOUND[t]:.1f}: "
                         f"{'met' if pm <= PEER_BOUND[t] else 'NOT met'}) over {len(vs_peer)}; worst five: "
                         + ", ".join(f"{m} {x:.2f}" for x, m in vs_peer[:5]))
        counts = [(c["optimized_nodes"]["ours"], c["optimized_nodes"]["source"], r["model"]) for r in rows
                  for c in [r.get("targets", {}).get(t) or {}]
                  if c.get("optimized_nodes") and None not in c["optimized_nodes"].values()]
        if counts:
            more = sorted(((o - s_, m) for o, s_, m in counts if o > s_), reverse=True)
            lines.append(f"            onnxruntime's optimized graph, ours vs the source's: {sum(o for o, _, _ in counts)} vs "
                         f"{sum(s_ for _, s_, _ in counts)} nodes over {len(counts)} models; more nodes on {len(more)}"
                         + (": " + ", ".join(f"{m} +{d}" for d, m in more[:5]) if more else ""))
        lines += delegation_lines(rows, t)
        own = sorted(((c["framework"]["ours_s"] / c["framework"]["original_s"], r["model"]) for r in rows
                      for c in [r.get("targets", {}).get(t) or {}] if (c.get("framework") or {}).get("ok")), reverse=True)
        if own:
            lines.append(f"            vs the original nn.Module (the framework's own kernels, same process): median "
                         f"{statistics.median(x for x, _ in own):.2f} (bound {BOUND[t]:.1f}), above 1.5: "
                         f"{sum(1 for x, _ in own if x > 1.5)}/{len(own)}; worst five: "
                         + ", ".join(f"{m} {x:.2f}" for x, m in own[:5]))
    return lines


def delegation_lines(rows: list[dict[str, Any]], t: str) -> list[str]:
    """TFLite: the share of each artifact's nodes the XNNPACK delegate took (ours and the
    peer's, read from one LiteRT build), and the ops ours leaves to builtin kernels."""
    lines = []
    for who in ("ours", "peer"):
        shares = [(c[who]["delegation"], r["model"]) for r in rows for c in [r.get("targets", {}).get(t) or {}]
                  if (c.get(who) or {}).get("delegation")]
        if not shares:
            continue
        whole = sum(1 for d, _ in shares if d["delegated"] == d["nodes"])
        ratio = [d["delegated"] / d["nodes"] for d, _ in shares if d["nodes"]]
        name = "ours" if who == "ours" else PEER_OF_NAME.get(t, "the peer")
        line = (f"            XNNPACK, {name}: every node delegated on {whole}/{len(shares)}, median share "
                f"{100 * statistics.median(ratio):.1f} %, {sum(d['delegated'] for d, _ in shares)} of "
                f"{sum(d['nodes'] for d, _ in shares)} nodes")
        fl = [d for d, _ in shares if d.get("compute_nodes")]
        if fl:
            line += (f"; of those computing values (float, 8/16-bit): every one on "
                     f"{sum(1 for d in fl if d['compute_delegated'] == d['compute_nodes'])}/{len(fl)}, median "
                     f"{100 * statistics.median(d['compute_delegated'] / d['compute_nodes'] for d in fl):.1f} %")
        if who == "ours":
            left: dict[str, list[str]] = {}
            for d, m in shares:
                for op, k in d["left"].items():
                    left.setdefault(op, []).extend([m] * k)
            top = sorted(left.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:8]
            if top:
                line += "; left to builtin kernels: " + ", ".join(f"{op} {len(ms)} (in {len(set(ms))})" for op, ms in top)
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    os.environ.update({k: v for k, v in QUIET_ENV.items() if k not in os.environ})
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="wild", choices=("wild", "zoo", "suite"))
    ap.add_argument("--only", help="comma-separated model ids")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--threads", type=int, default=1, help="inference threads for every runtime (default 1)")
    ap.add_argument("-n", type=int, default=20, help="timed runs per artifact (median)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per model's child process")
    ap.add_argument("--json", help="write the rows here (rewritten after every model)")
    ap.add_argument("--render", metavar="JSON", help="print the summary of an earlier --json run; no run")
    a = ap.parse_args(argv)
    targets = [t for t in a.targets.split(",") if t]
    if a.render:
        doc = json.loads(Path(a.render).read_text())
        print("\n".join(summary(doc["rows"], targets)))
        return 0
    from keras_models import child, say

    models = corpus(a.corpus)
    if a.only:
        keep = set(a.only.split(","))
        models = [m for m in models if m[0] in keep]
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opbridge-latency-") as tmp:
        for i, (mid, path, npz) in enumerate(models):
            result = Path(tmp) / f"{i}.json"
            say(f"[{i + 1}/{len(models)}] {mid}")
            rc, last = child(["--_model", str(path), str(npz or ""), ",".join(targets), str(a.n), str(a.threads),
                              str(result)], a.timeout, __file__, QUIET_ENV)
            if result.exists():
                row = json.loads(result.read_text())
            else:
                row = {"error": "timeout" if rc is None else f"crash: {last[-200:]}", "targets": {}}
            row["model"] = mid
            rows.append(row)
            cells = []
            for t in targets:
                c = row["targets"].get(t)
                if not c or not c["ours"].get("latency_s"):
                    cells.append(f"{t} -")
                    continue
                best, who = fastest_other(row, t)
                cells.append(f"{t} {1e3 * c['ours']['latency_s']:.2f}ms" + (f" x{c['ours']['latency_s'] / best:.2f} vs {who}"
                                                                          if best else ""))
            say(f"    source {1e3 * row.get('source_s', float('nan')):.2f}ms  " + "  ".join(cells))
            if a.json:
                Path(a.json).write_text(json.dumps({"rows": rows, "threads": a.threads, "n": a.n, "corpus": a.corpus,
                                                    "partial": True}, indent=1, default=float))
    print("\n".join(summary(rows, targets)))
    print(f"{len(rows)} models, {a.threads} thread(s), {a.n} runs each, {time.perf_counter() - t0:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "threads": a.threads, "n": a.n, "corpus": a.corpus,
                                            "partial": False}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--_model"]:
        child_main(*sys.argv[2:8])
    else:
        sys.exit(main())
