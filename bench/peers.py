"""Real models, opbridge and the peers that target the same backend, side by side in one run.

For each model of the suite (bench/export_models.py, cached in bench/.cache/models) and
each backend, opbridge converts (frontend → IR → emitter → saved artifact) and runs the
result; the peer for that backend does the same in its own venv (subprocess):

| backend | peer | where |
|---|---|---|
| pytorch | onnx2torch 1.5.15 | bench/.venv-peers (bench/setup_peers.sh) |
| tflite | onnx2tf 1.28.8 (not_use_onnxsim=True) | bench/.venv-onnx2tf (bench/setup_peer_onnx2tf.sh) |
| openvino | openvino.convert_model (f32 inference precision) | this process |

Printed per (model, backend): success, conversion seconds, max abs diff against
onnxruntime on the same inputs, emitted-model latency (median of N runs), TFLite
transpose counts, and every figure as a ratio opbridge / peer.

    python bench/peers.py [--models suite|a,b] [--backends pytorch,tflite,openvino] [-n 20] [--json out.json]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MODELS = ROOT / "bench" / ".cache" / "models"
SUITE = ("resnet50", "mobilenet_v3_large", "efficientnet_b0", "vit_small", "transformer_encoder", "gpt2_blocks")
PEER_OF = {"pytorch": "onnx2torch", "tflite": "onnx2tf", "openvino": "openvino_fe"}
VENV = {"onnx2torch": ROOT / "bench" / ".venv-peers", "onnx2tf": ROOT / "bench" / ".venv-onnx2tf"}
RUNNER = {"onnx2torch": "_model_onnx2torch.py", "onnx2tf": "_model_onnx2tf.py"}


def inputs_for(path: Path) -> dict[str, np.ndarray]:
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        tt = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        if tt.elem_type == onnx.TensorProto.INT64:
            feeds[i.name] = rng.integers(0, 200, size=shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def onnxruntime_outputs(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def max_abs(expected: list[np.ndarray], got: list[np.ndarray]) -> float | None:
    worst = 0.0
    for e, g in zip(expected, got):
        g = np.asarray(g)
        if g.shape != e.shape and g.size == e.size and g.ndim == 3:
            g = g.transpose(0, 2, 1)  # a channels-last 3-D output from a peer
        if g.shape != e.shape:
            return None
        worst = max(worst, float(np.max(np.abs(g.astype(np.float64) - e.astype(np.float64)))))
    return worst


def run_ours(backend: str, path: Path, feeds: dict[str, np.ndarray], n: int, out_dir: Path) -> dict[str, Any]:
    from translator.frontends.onnx import load_onnx
    from translator.harness import backend_module

    mod = backend_module(backend)
    mod.emit(load_onnx(ROOT / "examples" / "models" / "tiny_cnn.onnx"))  # warm-up: imports, probes
    t = time.perf_counter()
    art = mod.emit(load_onnx(path))
    if hasattr(mod, "save"):
        mod.save(art, out_dir / f"ours_{backend}")
    elif hasattr(art, "save"):
        art.save(out_dir / f"ours_{backend}")
    convert_s = time.perf_counter() - t
    runner = mod.runner(art) if hasattr(mod, "runner") else (lambda x: mod.run(art, x))  # prepared once if offered
    outs = runner(feeds)
    times = []
    for _ in range(n):
        s = time.perf_counter()
        runner(feeds)
        times.append(time.perf_counter() - s)
    rec = {"ok": True, "convert_s": convert_s, "latency_s": statistics.median(times), "outputs": outs}
    if getattr(art, "transposes", None) is not None:
        rec["transposes"] = art.transposes
    return rec


def run_openvino_fe(path: Path, feeds: dict[str, np.ndarray], n: int) -> dict[str, Any]:
    import openvino as ov

    t = time.perf_counter()
    model = ov.convert_model(str(path))
    convert_s = time.perf_counter() - t
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    req = compiled.create_infer_request()
    vals = list(feeds.values())
    req.infer(vals)
    times = []
    for _ in range(n):
        s = time.perf_counter()
        req.infer(vals)
        times.append(time.perf_counter() - s)
    outs = [req.get_output_tensor(i).data.copy() for i in range(len(compiled.outputs))]
    return {"ok": True, "convert_s": convert_s, "latency_s": statistics.median(times), "outputs": outs}


def run_subprocess_peer(peer: str, path: Path, feeds: dict[str, np.ndarray], n: int, out_dir: Path) -> dict[str, Any]:
    py = VENV[peer] / "bin" / "python"
    if not py.exists():
        return {"ok": False, "error": f"{peer} venv missing (run bench/setup_peers.sh / setup_peer_onnx2tf.sh)"}
    work = out_dir / peer
    work.mkdir(parents=True, exist_ok=True)
    np.savez(work / "inputs.npz", **feeds)
    p = subprocess.run([str(py), str(ROOT / "bench" / "peers" / RUNNER[peer]), str(path), str(work / "inputs.npz"),
                        str(work), str(n)], capture_output=True, text=True, timeout=1800,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"ok": False, "error": tail[:300]}
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    with np.load(work / "outputs.npz", allow_pickle=False) as z:
        rec["outputs"] = [z[k] for k in sorted(z.files, key=lambda s: int(s.split("_")[1]))]
    rec["ok"] = True
    return rec


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="suite")
    ap.add_argument("--backends", default="pytorch,tflite,openvino")
    ap.add_argument("-n", type=int, default=20, help="latency runs (median)")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    models = SUITE if args.models == "suite" else args.models.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            path = MODELS / f"{name}.onnx"
            if not path.exists():
                print(f"{name}: missing {path} (run bench/export_models.py --models suite in bench/.venv-peers)")
                continue
            feeds = inputs_for(path)
            expected = onnxruntime_outputs(path, feeds)
            for b in args.backends.split(","):
                out_dir = Path(tmp) / name / b
                out_dir.mkdir(parents=True, exist_ok=True)
                try:
                    ours = run_ours(b, path, feeds, args.n, out_dir)
                except Exception as exc:  # noqa: BLE001 - a failed conversion is a result
                    ours = {"ok": False, "error": str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__}
                peer = PEER_OF.get(b)
                if peer == "openvino_fe":
                    try:
                        theirs = run_openvino_fe(path, feeds, args.n)
                    except Exception as exc:  # noqa: BLE001
                        theirs = {"ok": False, "error": str(exc).splitlines()[0][:300]}
                elif peer:
                    theirs = run_subprocess_peer(peer, path, feeds, args.n, out_dir)
                else:
                    theirs = {"ok": False, "error": "no peer"}
                for r in (ours, theirs):
                    if r.get("ok"):
                        r["max_abs"] = max_abs(expected, r.pop("outputs"))
                rows.append({"model": name, "backend": b, "peer": peer, "ours": ours, "peer_result": theirs})
                o, t = ours, theirs
                print(f"{name:20s} {b:9s} ours: {'ok' if o['ok'] else 'FAIL'} "
                      f"conv {o.get('convert_s', float('nan')):.2f}s lat {1000 * o.get('latency_s', float('nan')):.2f}ms "
                      f"diff {o.get('max_abs')} tr {o.get('transposes', '-')} | {peer}: {'ok' if t['ok'] else 'FAIL'} "
                      f"conv {t.get('convert_s', float('nan')):.2f}s lat {1000 * t.get('latency_s', float('nan')):.2f}ms "
                      f"diff {t.get('max_abs')} tr {t.get('transposes', '-')} | ratios conv "
                      f"{ratio(o.get('convert_s'), t.get('convert_s'))} lat {ratio(o.get('latency_s'), t.get('latency_s'))}"
                      f" tr {ratio(o.get('transposes'), t.get('transposes'))}", flush=True)
                for r in (o, t):
                    if not r["ok"]:
                        print(f"    {'ours' if r is o else peer}: {r['error']}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1, default=float) + "\n")
    ok_ours = sum(1 for r in rows if r["ours"]["ok"])
    ok_peer = sum(1 for r in rows if r["peer_result"]["ok"])
    print(f"converted: opbridge {ok_ours}/{len(rows)}, peers {ok_peer}/{len(rows)}")
    lat = [r["ours"]["latency_s"] / r["peer_result"]["latency_s"] for r in rows
           if r["ours"].get("latency_s") and r["peer_result"].get("latency_s")]
    if lat:
        print(f"latency ratio opbridge/peer: median {statistics.median(lat):.2f}, worst {max(lat):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
