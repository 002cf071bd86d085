"""Real models exported from torchvision (random weights) through ``opbridge check``.

Slow: builds the peers' venv (bench/setup_peers.sh) once, exports with
bench/export_models.py, then checks every backend against the NumPy reference.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PEERS_PY = ROOT / "bench" / ".venv-peers" / "bin" / "python"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def models_dir() -> Path:
    if not PEERS_PY.exists():
        subprocess.run(["bash", str(ROOT / "bench" / "setup_peers.sh")], check=True, timeout=1200)
    out = ROOT / "bench" / ".cache" / "models"
    if not (out / "resnet18.onnx").exists():
        subprocess.run([str(PEERS_PY), str(ROOT / "bench" / "export_models.py"), "--models", "resnet18"], check=True,
                       timeout=600)
    return out


def test_resnet18_numpy_and_onnx_agree(models_dir):
    p = subprocess.run([sys.executable, "-m", "translator.cli", "check", str(models_dir / "resnet18.onnx"),
                        "--backends", "numpy,onnx", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout)
    for b in r["backends"]:
        assert b["status"] == "pass", b
        assert b["outputs"][0]["max_abs"] <= 1e-4, b
