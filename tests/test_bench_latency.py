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


def test_a_peer_whose_outputs_disagree_with_the_source_is_not_timed_against(monkeypatch):
    """An artifact computing something else (pnnx's file fed a batch of 4 it cannot hold) is
    reported, and neither the fastest-other ratio nor the peer-alone ratio uses its time."""
    import numpy as np

    ref = [np.arange(12, dtype=np.float32).reshape(1, 3, 4)]
    assert latency.agreement(ref, [ref[0].reshape(3, 4) + 1e-6]) == (latency.agreement(ref, [ref[0] + 1e-6])[0], True)
    assert latency.agreement(ref, [np.moveaxis(ref[0], 1, -1)])[1]  # channels-last, moved back
    assert latency.agreement(ref, [ref[0] + 0.5]) == (0.5, False)
    assert latency.agreement(ref, [ref[0][:, :2]]) == (None, False)
    assert latency.agreement(ref, []) == (0.0, False)  # an output missing
    rows = [_row("a", 1.0, 1.0, peer=0.25), _row("b", 1.0, 1.2, peer=1.0)]
    rows[0]["targets"]["tflite"]["peer"]["agrees"] = False
    assert latency.fastest_other(rows[0], "tflite") == (1.0, "source")
    monkeypatch.setitem(latency.PEER_BOUND, "tflite", 1.1)
    lines = latency.summary(rows, ["tflite"])
    assert any("onnx2tf's outputs disagree with the source on 1 (not timed against): a" in ln for ln in lines), lines
    assert any("vs onnx2tf alone: median 1.20" in ln and "over 1" in ln for ln in lines), lines


def test_timed_calls_alternate_their_order_with_the_collector_off():
    """Neither artifact always runs first in a round (the one after the other's call meets
    its caches), and no garbage collection lands inside a timed call."""
    import gc

    peers = latency.peers_py()
    log = []
    calls = {"ours": lambda: log.append(("ours", gc.isenabled())), "peer": lambda: log.append(("peer", gc.isenabled()))}
    peers.samples(calls, 3)
    timed = log[2 * peers.WARMUP:]
    assert [k for k, _ in timed] == ["ours", "peer", "peer", "ours", "ours", "peer"]
    assert not any(on for _, on in timed) and gc.isenabled()


def test_the_share_of_nodes_xnnpack_takes_is_summed_per_artifact_and_ours_names_what_it_left():
    from emitters.tflite.runtime import delegated_share

    def op(i, name, ins, outs, fl=True):
        return {"index": i, "op_name": name, "inputs": ins, "outputs": outs, "compute": fl}

    whole = [op(0, "CONV_2D", [0, 9], [1]), op(1, "DELEGATE", [0], [1])]
    split = [op(0, "CONV_2D", [0, 9], [1]), op(1, "GATHER", [1, 8], [2]), op(2, "SHAPE", [2], [3], fl=False),
             op(3, "DELEGATE", [0], [1])]
    rows = [_row("a", 1.0, 1.0, peer=1.0), _row("b", 1.0, 1.0, peer=1.0)]
    for r, ours, theirs in ((rows[0], whole, split), (rows[1], split, whole)):
        r["targets"]["tflite"]["ours"]["delegation"] = delegated_share(ours)
        r["targets"]["tflite"]["peer"]["delegation"] = delegated_share(theirs)
    assert delegated_share(split) == {"nodes": 3, "delegated": 1, "partitions": 1, "left": {"GATHER": 1, "SHAPE": 1},
                                      "compute_nodes": 2, "compute_delegated": 1}
    ours, peer = latency.delegation_lines(rows, "tflite")
    assert "ours: every node delegated on 1/2, median share 66.7 %, 2 of 4 nodes" in ours
    assert "of those computing values (float, 8/16-bit): every one on 1/2, median 75.0 %" in ours
    assert ours.endswith("left to builtin kernels: GATHER 1 (in 1), SHAPE 1 (in 1)")
    assert "onnx2tf: every node delegated on 1/2" in peer and "left to" not in peer


def test_the_fallback_probe_checks_on_the_timed_inputs(tmp_path, monkeypatch):
    """An artifact with a fallback (a channels-last PyTorch module) is checked by ``convert``
    on the inputs the bench times, to learn which form ``convert`` writes: random inputs at
    other sizes can be ones the model cannot run (speechmos_aecmos: an initial GRU state of
    batch 1 beside a symbolic batch), and then the bench lost the model."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    import opbridge

    peers = latency.peers_py()
    rng = np.random.default_rng(0)
    w = rng.standard_normal([32, 1, 3, 3]).astype(np.float32)
    w2 = rng.standard_normal([32, 32, 3, 3]).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Conv", ["c", "w2"], ["y"], pads=[1, 1, 1, 1])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel()),
         helper.make_tensor("w2", TensorProto.FLOAT, w2.shape, w2.ravel())])
    path = tmp_path / "cnn.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    feeds = {"x": rng.standard_normal([2, 1, 8, 8]).astype(np.float32)}
    seen = []
    real = opbridge.convert

    def spy(*args, **kw):
        seen.append(kw.get("inputs"))
        return real(*args, **kw)

    monkeypatch.setattr(opbridge, "convert", spy)
    target, art, _ = peers.convert_ours("pytorch", path, tmp_path / "work", feeds)
    assert "channels_last" in art.source and len(seen) == 1 and seen[0] is feeds, seen
