"""bench/keras_models.py: the pure parts (cell summaries, peer comparison, failure grouping,
the table) on hand-made records; no framework is imported."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import keras_models as km  # noqa: E402
import keras_peers as kp  # noqa: E402


def test_peer_compare_float_int8_and_shape():
    ref = [np.array([[1.0, 2.0, 3.0]], np.float32)]
    assert kp.compare(ref, [ref[0] + 1e-4], quantized=False)[0] == "ok"
    st, detail, err = kp.compare(ref, [ref[0] + 0.1], quantized=False)
    assert st == "check_failed" and "3 of 3" in detail and abs(err - 0.1) < 1e-6
    q = [np.array([[5, -3]], np.int8)]
    assert kp.compare(q, [np.array([[6, -3]], np.int8)], quantized=True)[0] == "ok"
    assert kp.compare(q, [np.array([[7, -3]], np.int8)], quantized=True)[0] == "check_failed"
    assert kp.compare(q, [np.array([[5.0, -3.0]], np.float32)], quantized=True)[1].endswith("!= source int8")
    assert "shape" in kp.compare(ref, [np.zeros((2, 2), np.float32)], quantized=False)[1]


def test_summarize_target_statuses_and_times():
    stamps = [[0.1, "reading x"], [2.0, "read 10 nodes in 1.90 s"], [2.5, "onnx: emitted (0.40 s)"]]
    ok = {"target": "onnx", "status": "ok", "check": {"outputs": [{"max_abs": 0.0, "vs_source": {"max_abs": 3e-7}}]}}
    c = km.summarize_target({}, ok, stamps)
    assert c["status"] == "ok" and c["max_err"] == 3e-7 and c["seconds"] == 2.4
    no_src = {"target": "onnx", "status": "ok", "check": {"outputs": [{"max_abs": 0.0}], "source": "not installed"}}
    assert km.summarize_target({}, no_src, stamps)["status"] == "error"  # no proof against the source: not an ok
    cm = {"target": "coreml", "status": "ok", "check_note": "structural_only: no runtime"}
    assert km.summarize_target({}, cm, stamps)["status"] == "structural"
    bad = {"target": "onnx", "status": "failed", "reason": "internal_error", "detail": "boom"}
    assert km.summarize_target({}, bad, stamps)["status"] == "error"
    ref = {"target": "onnx", "status": "failed", "reason": "unsupported_op", "detail": "no"}
    assert km.summarize_target({}, ref, stamps)["status"] == "refused"


def test_failures_grouped_by_mechanism_without_paths_and_nodes():
    def row(model, node):
        c = {"target": "onnx", "status": "refused", "reason": "unsupported_op",
             "detail": f"/x/y/{model}/float32.tflite: node '{node}': 1 TFLite op type(s) have no IR mapping: UNPACK"}
        return {"model": model, "format": "tflite", "opbridge": [c], "peers": {"tf2onnx": {"status": "ok"}}}
    lines = km.failures([row("a", "n1"), row("b", "n2")])
    assert len(lines) == 1 and "×2" in lines[0] and "UNPACK" in lines[0] and "a/tflite→onnx, b/tflite→onnx" in lines[0]
    table = km.render([row("a", "n1")], ["onnx"], ["tf2onnx"])
    assert "refused" in table.splitlines()[2] and "ok" in table.splitlines()[2]
