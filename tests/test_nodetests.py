"""The ONNX backend node tests through opbridge (bench/nodetests.py), as acceptance gates.

Marked slow: they run in CI's second step (``make test-slow``). Thresholds are the
issue's acceptance criteria, measured side by side with onnxruntime in the same run.
Since issue 16 the bench judges the written artifact (saved, loaded back, run) with the
declared dtypes: ``pass`` is the declared dtype, ``pass_legalized`` a legalization the
artifact documents (counted apart); the thresholds sit a little below what was measured.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_nodetests

pytestmark = pytest.mark.slow


def _run(backend: str, peers: str, tmp_path: Path) -> dict:
    return run_nodetests(backend, peers, tmp_path, timeout=2700)


def test_onnx_backend_passes_at_least_what_onnxruntime_passes_natively(tmp_path):
    r = _run("onnx", "onnxruntime", tmp_path)
    ours, peer = r["counts"]["pass"], r["peers"]["onnxruntime"]["counts"]["pass"]
    assert r["cases"] >= 1800
    assert r["counts"]["pass_legalized"] == 0  # ONNX to ONNX legalizes nothing
    assert ours >= peer and ours >= 1670, f"onnx backend {ours} < onnxruntime {peer}"
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass"), "every failure needs a reason code"


def test_numpy_reference_passes_1800(tmp_path):
    r = _run("numpy", "none", tmp_path)
    assert r["counts"]["pass"] >= 1800 and r["counts"]["pass_legalized"] == 0  # measured 1,821
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass")


def test_coreml_builds_1000_and_verifies_940_numerically(tmp_path):
    """Issue 5's gate: built and saved ≥ 1,000, numerically verified through coremltools' MIL
    value inference (structural-only cases are counted apart, never as numeric). Measured
    1,067 built, 808 passes in the declared dtypes + 153 in documented legalizations (int64
    as int32, float64 as float32...)."""
    r = _run("coreml", "none", tmp_path)
    assert r["built_and_saved"] >= 1000 and r["numerically_verified"] >= 940, \
        (r["built_and_saved"], r["numerically_verified"])
    assert r["counts"]["pass"] >= 790
    assert r["numerically_verified"] + r["structural_only"] <= r["built_and_saved"]
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass")


def test_stablehlo_passes_1450(tmp_path):
    """Issue 27's gate for the JAX / StableHLO target (the written folder: the deserialized
    jax.export, or the jitted module where an input steers the code). Measured 1,567 beside
    onnxruntime's 1,674 and jaxonnxruntime 0.3.0's 429 (bench/peers/jaxonnxruntime.py)."""
    r = _run("stablehlo", "onnxruntime", tmp_path)
    assert r["counts"]["pass"] >= 1450, r["counts"]
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass"), "every failure needs a reason code"


def test_mlx_passes_1350(tmp_path):
    """Issue 27's gate for the MLX target (the written model.py and its weights, run on mx.cpu).
    Measured 1,470 (1,460 before Loop ran on the host; 1,445 before the recurrences, Slice and If rules)."""
    r = _run("mlx", "none", tmp_path)
    assert r["counts"]["pass"] >= 1350, r["counts"]
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass"), "every failure needs a reason code"


def test_ncnn_passes_600(tmp_path):
    """Issue 27's gate for the ncnn target (the written model.param / model.bin, run by the ncnn
    package on the CPU in fp32). Integer values are float32 blobs: their passes are documented
    legalizations (``int64→float32``), counted apart. Measured 556 passes + 85 legalized = 641."""
    r = _run("ncnn", "none", tmp_path)
    assert r["counts"]["pass"] >= 520 and r["counts"]["pass"] + r["counts"]["pass_legalized"] >= 600, r["counts"]
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass"), "every failure needs a reason code"
