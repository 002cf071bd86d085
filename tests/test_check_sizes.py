"""Default check sizes the model itself can run at: a symbolic H/W that a 2×2 pool and an
unpadded 3×3 conv cannot take at 1 pixel is checked at the smallest sizes the NumPy
reference runs it at without an empty window (``check.runnable_sizes``), said in the
record; sizes the user gives win; where a target cannot keep the dims (Core ML and a resize to
run-time sizes) ``report`` fixes them at the size convert uses."""
from __future__ import annotations

import pytest

import spatial_models as S


def test_a_cnn_is_checked_at_sizes_its_pools_can_take(tmp_path):
    import opbridge

    src = S.cnn_pools(tmp_path / "cnn.onnx")
    res = opbridge.convert(str(src), to="onnx", out=str(tmp_path / "m.onnx"))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    sizes = res["check_sizes"]
    assert set(sizes) == {"H", "W"} and "N" not in sizes, sizes  # the batch keeps 1 and 3
    assert all(2 <= a < b for a, b in sizes.values()), sizes
    assert [s["H"] for s in rec["check"]["sizes"]] == sizes["H"], rec
    assert [s["N"] for s in rec["check"]["sizes"]] == [1, 3], rec


def test_an_unnamed_batch_dim_keeps_the_default_sizes(tmp_path):
    """Dims with no name (None: paddle2onnx's -1 and "?") are labelled by input and axis; the
    first one is still the batch, kept at 1 and 3 while H and W are raised (a static target
    then fixes the batch at 1, not at the spatial size: ncnn writes one layer per item)."""
    from translator.run.check import model_loader, runnable_sizes

    src = S.cnn_pools(tmp_path / "cnn.onnx", (None, 3, None, None))
    sizes = runnable_sizes(model_loader(str(src)))
    assert sizes["x:0"] == (1, 3), sizes
    assert all(2 <= a < b for a, b in (sizes["x:2"], sizes["x:3"])), sizes


def test_a_model_that_runs_at_the_defaults_keeps_them(tmp_path):
    import opbridge

    src = S.reflect_pad(tmp_path / "pad.onnx")
    res = opbridge.convert(str(src), to="onnx", out=str(tmp_path / "m.onnx"))
    assert "check_sizes" not in res, res
    (rec,) = res["targets"]
    assert [s["H"] for s in rec["check"]["sizes"]] == [1, 3], rec


def test_the_users_sizes_win(tmp_path):
    import opbridge

    src = S.cnn_pools(tmp_path / "cnn.onnx")
    res = opbridge.convert(str(src), to="onnx", out=str(tmp_path / "m.onnx"), check_dims={"H": (10, 12)})
    (rec,) = res["targets"]
    assert [s["H"] for s in rec["check"]["sizes"]] == [10, 12], rec
    assert set(res.get("check_sizes", {})) == {"W"}, res


def test_report_fixes_dims_where_convert_does(tmp_path):
    """Core ML keeps the CNN's dims flexible, and a DB head's linear resize to the input's
    run-time size too (iOS17's resize takes the size at run time); a *nearest* resize to a
    run-time size (iOS17's nearest samples at half-pixel centres, not ONNX's pixels) makes it
    fix them, in report as in convert."""
    import opbridge

    src = S.cnn_pools(tmp_path / "cnn.onnx")
    res = opbridge.convert(str(src), to="coreml", out=str(tmp_path / "m"))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and set(rec["dynamic_dims"]["x"]) == {"N", "H", "W"}, rec
    assert [s["H"] for s in rec["check"]["sizes"]] == res["check_sizes"]["H"], rec

    res = opbridge.convert(str(S.db_head(tmp_path / "db_linear.onnx")), to="coreml", out=str(tmp_path / "l"))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and set(rec["dynamic_dims"]["x"]) == {"N", "H", "W"} and "fixed_dims" not in rec, rec
    src = S.db_head(tmp_path / "db.onnx", full_mode="nearest")
    rep = opbridge.report(str(src), backends=["coreml"])
    res = opbridge.convert(str(src), to="coreml", out=str(tmp_path / "d"))
    (rec,) = res["targets"]
    first = res.get("check_sizes", {}).get("H", [1])[0]  # 1 unless the model cannot run at 1
    assert rec["status"] == "ok" and rec["fixed_dims"]["H"] == first, rec
    assert any("cannot run them symbolic" in w for w in rec["warnings"]), rec["warnings"]
    nodes = rep["backends"]["coreml"]["nodes"]
    assert nodes and all(n["status"] in ("native", "folded", "decomposed") for n in nodes), nodes


def test_several_input_sets_are_each_checked(tmp_path):
    """``convert --inputs a.npz --inputs b.npz``: two image sizes, each checked on every artifact
    that keeps the dims (Core ML's flexible ones too); a target that must fix them (Core ML
    and a resize to run-time sizes) fixes them at the first set's sizes and says the other set
    was not checked, and why."""
    import numpy as np

    import opbridge

    rng = np.random.default_rng(0)
    sets = [{"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)},
            {"x": rng.standard_normal((2, 3, 48, 64)).astype(np.float32)}]
    both = [{"N": 1, "H": 32, "W": 32}, {"N": 2, "H": 48, "W": 64}]
    src = S.cnn_pools(tmp_path / "cnn.onnx")
    res = opbridge.convert(str(src), to="onnx,coreml", out=str(tmp_path / "out"), inputs=sets)
    by = {r["target"]: r for r in res["targets"]}
    for t in ("onnx", "coreml"):
        assert by[t]["check"]["status"] == "pass" and by[t]["check"]["sizes"] == both, by[t]
    src = S.db_head(tmp_path / "db.onnx", full_mode="nearest")
    res = opbridge.convert(str(src), to="coreml", out=str(tmp_path / "out2"), inputs=sets)
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["fixed_dims"] == {"N": 1, "H": 32, "W": 32}, rec
    (why,) = rec["check"]["skipped_inputs"]
    assert "input set 2" in why and "H=48" in why, why


def test_an_output_where_the_reference_is_the_outlier_is_not_a_mismatch(tmp_path):
    """A float32 sum that cancels (1e4 + 0.01 - 1e4) then a log: onnxruntime and the written
    artifact agree, the float64-accumulating reference parts from both. The verdict rests on
    the source runtime and says so (``check.notes``); it is no mismatch of the conversion."""
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    import opbridge

    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Abs", ["m"], ["a"]),
                      h.make_node("Add", ["a", "eps"], ["b"]), h.make_node("Log", ["b"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [4, 3])], [h.make_tensor_value_info("y", T.FLOAT, [4, 1])],
                     [nh.from_array(np.ones((3, 1), np.float32), "w"), nh.from_array(np.array(1e-12, np.float32), "eps")])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.array([[1e4, 1e-2, -1e4]] * 4, np.float32) * np.array([[1], [2], [3], [4]], np.float32))
    res = opbridge.convert(str(src), to="onnx", out=str(tmp_path / "m_out.onnx"), inputs=str(feeds))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert rec["check"]["notes"] and "reference differs from onnxruntime" in rec["check"]["notes"][0], rec


def test_an_artifact_evaluated_in_float64_is_held_to_the_source_as_the_reference_is(tmp_path):
    """The mirror of the case above for a non-ONNX source, whose runtime decides: off macOS a
    Core ML package runs in the MIL evaluator, which sums in float64 like the reference. On
    an output that cancels, LiteRT's float32 parts from both alike: the artifact matches the
    reference, the verdict says why LiteRT differs (``check.notes``), no source mismatch."""
    import numpy as np
    import tensorflow as tf

    import opbridge

    w = tf.constant(np.ones((3, 1), np.float32))

    @tf.function(input_signature=[tf.TensorSpec([4, 3], tf.float32)])
    def f(x):
        return tf.math.log(tf.abs(tf.matmul(x, w)) + 1e-12)

    conv = tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()])
    src = tmp_path / "m.tflite"
    src.write_bytes(conv.convert())
    x = np.array([[1e4, 1e-2, -1e4]] * 4, np.float32) * np.array([[1], [2], [3], [4]], np.float32)
    res = opbridge.convert(str(src), to="coreml", out=str(tmp_path / "out"), inputs=[{"x": x}])
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert any("evaluated in float64 here" in n for n in rec["check"]["notes"]), rec
