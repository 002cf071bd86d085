"""The ONNX backend node tests through opbridge (bench/nodetests.py), as acceptance gates.

Marked slow: they run in CI's second step (``make test-slow``). Thresholds are the
issue's acceptance criteria, measured side by side with onnxruntime in the same run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(backend: str, peers: str, tmp_path: Path) -> dict:
    out = tmp_path / f"{backend}.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "nodetests.py"), "--backend", backend, "--peers", peers,
                        "--json", str(out), "-q"], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text())


def test_onnx_backend_passes_at_least_what_onnxruntime_passes_natively(tmp_path):
    r = _run("onnx", "onnxruntime", tmp_path)
    ours, peer = r["counts"]["pass"], r["peers"]["onnxruntime"]["counts"]["pass"]
    assert r["cases"] >= 1800
    assert ours >= peer, f"onnx backend {ours} < onnxruntime {peer}"
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass"), "every failure needs a reason code"


def test_numpy_reference_passes_1200(tmp_path):
    r = _run("numpy", "none", tmp_path)
    assert r["counts"]["pass"] >= 1200
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass")
