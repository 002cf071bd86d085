"""The MLX target's control flow: ONNX Loop runs its body in a host while loop (MLX has no
loop construct and runs eagerly), with a trip count and a condition fed at run time, carried
values, scan outputs stacked, and no iteration at all; checked against onnxruntime."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

pytest.importorskip("mlx.core", reason="the mlx target needs mlx: pip install 'opbridge[mlx]'")


def _loop_model() -> onnx.ModelProto:
    """``acc`` carried (acc = acc * 0.5 + x * i), the running ``acc`` scanned, the loop left
    when the sum passes ``limit`` (the condition computed by the body) or after ``n`` trips."""
    one = nh.from_array(np.float32(0.5), "half")
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
         h.make_node("Mul", ["x", "fi"], ["xi"]),
         h.make_node("Mul", ["acc_in", "half"], ["acc_half"]),
         h.make_node("Add", ["acc_half", "xi"], ["acc_out"]),
         h.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
         h.make_node("Less", ["total", "limit"], ["cond_out"]),
         h.make_node("Identity", ["acc_out"], ["scan_out"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("acc_in", T.FLOAT, ["n"])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("acc_out", T.FLOAT, ["n"]),
         h.make_tensor_value_info("scan_out", T.FLOAT, ["n"])])
    g = h.make_graph(
        [h.make_node("Loop", ["trips", "go", "acc0"], ["acc", "history"], body=body)], "loop",
        [h.make_tensor_value_info("trips", T.INT64, []), h.make_tensor_value_info("go", T.BOOL, []),
         h.make_tensor_value_info("acc0", T.FLOAT, ["n"]), h.make_tensor_value_info("x", T.FLOAT, ["n"]),
         h.make_tensor_value_info("limit", T.FLOAT, [])],
        [h.make_tensor_value_info("acc", T.FLOAT, ["n"]), h.make_tensor_value_info("history", T.FLOAT, ["k", "n"])],
        [one])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _import(folder: Path):
    spec = importlib.util.spec_from_file_location("converted_mlx_model", folder / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("trips,go,limit", [(6, True, 1e9), (50, True, 40.0), (0, True, 1e9), (5, False, 1e9)],
                         ids=["all_trips", "condition_ends_it", "no_trip", "false_at_entry"])
def test_a_loop_runs_on_the_host_with_its_scan_outputs(tmp_path, trips, go, limit):
    import mlx.core as mx
    import onnxruntime as ort

    import opbridge

    src = tmp_path / "loop.onnx"
    onnx.save(_loop_model(), src)
    res = opbridge.convert(str(src), to="mlx", out=str(tmp_path / "out"), check=False)
    (rec,) = res["targets"]
    assert rec["status"] == "ok", rec
    fn = _import(next(p.parent for p in (tmp_path / "out").rglob("model.py"))).load()
    rng = np.random.default_rng(0)
    feeds = {"trips": np.array(trips, np.int64), "go": np.array(go), "acc0": rng.standard_normal(7).astype(np.float32),
             "x": rng.random(7).astype(np.float32), "limit": np.array(limit, np.float32)}
    want = ort.InferenceSession(src.read_bytes(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = fn(*[mx.array(v) for v in feeds.values()])
    for w, g in zip(want, got):
        g = np.array(g)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("node,dims", [
    (h.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=1), [1, 3, 320, 320]),
    (h.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=1), [1, 3, "H", "W"]),  # decided at run time
    (h.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0), [2, 3, 320, 320]),
    (h.make_node("GlobalAveragePool", ["x"], ["y"]), ["N", 3, 320, 320])], ids=["mean", "mean_dyn", "sum", "gap"])
def test_a_long_reduction_keeps_float32_accuracy(tmp_path, node, dims):
    """A float32 sum or mean over 320 x 320 values (a squeeze-excite block on a detector's
    640 x 640 input) is written one axis at a time: MLX's CPU reduction over the whole run is
    off by ~1e-5 of the result, which a deep model grows past the check's tolerance (PaddleOCR's
    v6 detector: 1.6e-3)."""
    import mlx.core as mx

    import opbridge

    rng = np.random.default_rng(1)
    inits = [nh.from_array(np.array([2, 3], np.int64), "ax")] if "ax" in node.input else []
    g = h.make_graph([node], "r", [h.make_tensor_value_info("x", T.FLOAT, dims)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    src = tmp_path / "r.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), src)
    res = opbridge.convert(str(src), to="mlx", out=str(tmp_path / "out"), check=False)
    (rec,) = res["targets"]
    assert rec["status"] == "ok", rec
    fn = _import(tmp_path / "out").load()
    shape = [d if isinstance(d, int) else {"N": 1}.get(d, 320) for d in dims]
    x = (rng.random(shape) * 3 + 1).astype(np.float32)
    want = x.astype(np.float64)
    want = want.sum(axis=(2, 3)) if node.op_type == "ReduceSum" else want.mean(axis=(2, 3), keepdims=True)
    out = fn(mx.array(x))
    got = np.array(out[0] if isinstance(out, (list, tuple)) else out)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-6 * np.abs(want).max(), np.abs(got - want).max() / np.abs(want).max()
