"""bench/latency.py's arithmetic (issue 25): each target's ratio is to the fastest of the
source runtime and the peer, failures are counted apart, the bounds are the issue's."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import latency  # noqa: E402


def _row(model, source, ours, peer=None, alongside=None):
    cell = {"ours": {"ok": ours is not None, "latency_s": ours, "convert_s": 2.0}}
    if peer is not None:
        cell["peer"] = {"ok": True, "latency_s": peer, "convert_s": 4.0}
        cell["peer_name"] = "onnx2tf"
    if alongside is not None:
        cell["source_alongside_s"] = alongside
    return {"model": model, "source_s": source, "targets": {"tflite": cell}}


def test_the_ratio_is_to_the_fastest_of_source_and_peer_and_failures_are_counted_apart():
    rows = [_row("a", 1.0, 1.1, peer=2.0), _row("b", 3.0, 3.0, peer=1.5), _row("c", 1.0, None),
            _row("d", 1.0, 2.0, alongside=0.5)]
    assert latency.fastest_other(rows[0], "tflite") == (1.0, "source")
    assert latency.fastest_other(rows[1], "tflite") == (1.5, "onnx2tf")
    assert latency.fastest_other(rows[3], "tflite") == (0.5, "source")  # measured alongside wins over the solo run
    lines = latency.summary(rows, ["tflite"])
    assert "median 2.00" in lines[0] and "bound 1.2: NOT met" in lines[0] and "1 not timed" in lines[0]
    assert "above 1.5: 2/3" in lines[0] and "conversion time / peer's: median 0.50 over 2" in lines[0]
    assert lines[1].split(": ", 1)[1].startswith("d 4.00 (vs source)")
