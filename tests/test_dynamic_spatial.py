"""Symbolic height and width (and a width that becomes a sequence) stay dynamic: the models
of ``tests/spatial_models.py`` convert to every target that runs dynamic shapes, keep ``H``
and ``W`` (nothing fixed) and check against the NumPy reference and onnxruntime at two sizes
each. Where a target cannot yet, the case is a strict xfail with the reason (data)."""
from __future__ import annotations

import numpy as np
import pytest

import spatial_models as S

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino")

#: (model, target) → why it does not convert and check yet
PENDING: dict[tuple[str, str], str] = {
}


def _case(model: str, target: str) -> object:
    why = PENDING.get((model, target))
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(model, target, marks=marks, id=f"{model}-{target}")


@pytest.mark.parametrize("model, target", [_case(m, t) for m in S.MODELS for t in TARGETS])
def test_symbolic_spatial_dims_stay_dynamic(model, target, tmp_path):
    import opbridge

    src = S.MODELS[model](tmp_path / f"{model}.onnx")
    check_dims = {d: s for d, s in S.CHECK_DIMS.items() if not (model == "crnn" and d == "H")}
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), check_dims=check_dims)
    (rec,) = res["targets"]
    assert rec["status"] == "ok", rec
    assert "fixed_dims" not in rec, rec
    kept = set(rec["dynamic_dims"]["x"])
    assert {"N", "W"} <= kept and (model == "crnn" or "H" in kept), rec
    assert rec["check"]["status"] == "pass", rec
    assert [s["W"] for s in rec["check"]["sizes"]] == list(S.CHECK_DIMS["W"]), rec


#: pooling geometries whose pads depend on the run-time size (SAME), or whose last window
#: may not start in the end padding (ceil mode), with pads counted in the mean or not
POOLS = {
    "max_ceil_pads": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 0], ceil_mode=1)),
    "avg_ceil_include": ("AveragePool", dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 1, 0, 1], ceil_mode=1,
                                             count_include_pad=1)),
    "avg_ceil_exclude": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 3], pads=[1, 1, 1, 1], ceil_mode=1)),
    "avg_same_lower": ("AveragePool", dict(kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_LOWER")),
    "max_same_upper_dilated": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 1], dilations=[2, 2],
                                               auto_pad="SAME_UPPER")),
    "lp_valid_ceil": ("LpPool", dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="VALID", p=2)),
    "max_unpadded": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2])),
    "avg_unpadded": ("AveragePool", dict(kernel_shape=[3, 2], strides=[2, 2])),
}


@pytest.mark.parametrize("pool", sorted(POOLS))
@pytest.mark.parametrize("target", ["tensorflow", "tflite"])
def test_pool_geometry_at_run_time_sizes(pool, target, tmp_path):
    """Odd and even sizes: every ONNX pooling rule computed from ``tf.shape`` matches the reference."""
    from onnx import helper as h

    op, attrs = POOLS[pool]
    rec = _one_node_checked(tmp_path, h.make_node(op, ["x"], ["y"], **attrs), [], 19, target,
                            {"H": (7, 10), "W": (9, 12)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert {"H", "W"} <= set(rec["dynamic_dims"]["x"]), rec
    if target == "tflite" and pool.endswith("_unpadded"):  # no pad op (PADV2 is not XNNPACK's)
        assert rec["delegation"]["left"] == {}, rec["delegation"]


def _one_node_checked(tmp_path, node, inits: list, opset: int, target: str, check_dims: dict) -> dict:
    """``node`` over ``x: [N, 3, H, W]`` as a model, converted to ``target`` and checked at
    ``check_dims``: the target's convert record."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    import opbridge

    g = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, "H", "W"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), str(src))
    (rec,) = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), check_dims=check_dims)["targets"]
    return rec


DECONVS = {
    "pads_outpad": dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
    "grouped_dilated": dict(kernel_shape=[2, 3], strides=[2, 1], pads=[0, 1, 1, 0], dilations=[2, 1], group=3),
}


@pytest.mark.parametrize("deconv", sorted(DECONVS))
@pytest.mark.parametrize("target", ["tensorflow", "tflite"])
def test_conv_transpose_at_run_time_sizes(deconv, target, tmp_path):
    from onnx import helper as h

    attrs = DECONVS[deconv]
    inits = [S._w("w", (3, 2, *attrs["kernel_shape"]), 21), S._w("b", (2 * attrs.get("group", 1),), 22)]
    rec = _one_node_checked(tmp_path, h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs), inits, 17,
                            target, {"H": (5, 8), "W": (6, 9)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert {"H", "W"} <= set(rec["dynamic_dims"]["x"]), rec


@pytest.mark.parametrize("ctm, nearest, repeated", [("asymmetric", "floor", True),
                                                    ("half_pixel", "round_prefer_floor", True),
                                                    ("asymmetric", "round_prefer_ceil", False)])
@pytest.mark.parametrize("target", ["tensorflow", "tflite"])
def test_a_nearest_resize_by_a_whole_factor_is_each_element_repeated(ctm, nearest, repeated, target, tmp_path):
    """PyTorch's and Paddle's 2× nearest upsampling over run-time spatial dims: where its index
    map is ``i // 2`` at every length, copies concatenated and merged (no gather over a run-time
    index range; TFLite: no GATHER, RANGE or CAST left); otherwise the general form. Both check
    at odd and even sizes."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    scales = nh.from_array(np.array([1.0, 1.0, 2.0, 3.0], np.float32), "scales")
    node = h.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest", coordinate_transformation_mode=ctm,
                       nearest_mode=nearest)
    rec = _one_node_checked(tmp_path, node, [scales], 19, target, {"H": (7, 10), "W": (9, 12)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert {"H", "W"} <= set(rec["dynamic_dims"]["x"]), rec
    if target == "tflite":
        left = rec["delegation"]["left"]
        assert ("GATHER" not in left and "RANGE" not in left) == repeated, left
