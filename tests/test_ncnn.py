"""The ncnn target: the written network (model.param, model.bin, model.io.json) loaded by the
``ncnn`` package and held to onnxruntime; the batch-less blob layout; a batch > 1 written per
item; integer values as float32 blobs; refusals per node with their reasons; determinism."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

pytest.importorskip("ncnn", reason="the ncnn target needs ncnn: pip install 'opbridge[ncnn]'")


def _cnn(batch: int) -> onnx.ModelProto:
    """conv (bias) → BatchNormalization → Relu → MaxPool → conv (groups) → Add (a per-channel
    constant) → GlobalAveragePool → Flatten → Gemm → Softmax."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w1"),
             nh.from_array(rng.standard_normal(8).astype(np.float32), "b1"),
             nh.from_array(rng.random(8).astype(np.float32) + 0.5, "g"),
             nh.from_array(rng.standard_normal(8).astype(np.float32), "be"),
             nh.from_array(rng.standard_normal(8).astype(np.float32), "mu"),
             nh.from_array(rng.random(8).astype(np.float32) + 0.5, "var"),
             nh.from_array(rng.standard_normal((8, 2, 3, 3)).astype(np.float32) * 0.3, "w2"),
             nh.from_array(rng.standard_normal((1, 8, 1, 1)).astype(np.float32), "cb"),
             nh.from_array(rng.standard_normal((5, 8)).astype(np.float32), "fw"),
             nh.from_array(rng.standard_normal(5).astype(np.float32), "fb")]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c1", "g", "be", "mu", "var"], ["n1"]),
             h.make_node("Relu", ["n1"], ["r1"]),
             h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2"], ["c2"], group=4, pads=[1, 1, 1, 1]),
             h.make_node("Add", ["c2", "cb"], ["a2"]),
             h.make_node("GlobalAveragePool", ["a2"], ["gp"]),
             h.make_node("Flatten", ["gp"], ["fl"]),
             h.make_node("Gemm", ["fl", "fw", "fb"], ["fc"], transB=1),
             h.make_node("Softmax", ["fc"], ["y"], axis=-1)]
    g = h.make_graph(nodes, "cnn", [h.make_tensor_value_info("x", T.FLOAT, [batch, 3, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [batch, 5])], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _convert(tmp_path: Path, model: onnx.ModelProto, name: str = "m", **kw):
    import opbridge

    src = tmp_path / f"{name}.onnx"
    onnx.save(model, src)
    res = opbridge.convert(str(src), to="ncnn", out=str(tmp_path / f"{name}_out"), **kw)
    (rec,) = res["targets"]
    return src, rec, Path(rec["output"]) if "output" in rec else None


def _run(folder: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from emitters.ncnn import runtime

    art = runtime.load(folder, runtime.NcnnArtifact("", b"", [], []))
    return runtime.run(art, feeds)


def _ort(src: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    return ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_a_cnn_is_written_in_ncnn_layers_and_checks(tmp_path):
    src, rec, folder = _convert(tmp_path, _cnn(1), check=True)
    assert rec["status"] == "ok", rec
    param = (folder / "model.param").read_text()
    types = [ln.split()[0] for ln in param.splitlines()[2:]]
    assert {"Convolution", "ConvolutionDepthWise", "Pooling", "InnerProduct", "Softmax"} <= set(types), types
    assert "Reshape" not in types  # every value is held in the form its readers take
    assert "BatchNormalization" not in types and "BatchNorm" not in types  # folded into the first conv
    io = json.loads((folder / "model.io.json").read_text())
    assert io["inputs"] == [{"blob": "in0", "dtype": "float32", "name": "x", "shape": [3, 16, 16]}]
    assert io["outputs"][0]["blob"] == "out0" and io["outputs"][0]["shape"] == [1, 5]
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_a_batch_of_two_runs_per_item(tmp_path):
    """ncnn blobs have no batch: each per-item layer (the convolutions, the pools) is written
    once per item between a Slice and a Concat, and the outputs agree with onnxruntime."""
    src, rec, folder = _convert(tmp_path, _cnn(2), check=True)
    assert rec["status"] == "ok", rec
    types = [ln.split()[0] for ln in (folder / "model.param").read_text().splitlines()[2:]]
    assert types.count("Convolution") == 2 and "Slice" in types and "Concat" in types, types
    x = np.random.default_rng(2).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_integers_are_float32_values_and_come_back_in_their_dtype(tmp_path):
    g = h.make_graph([h.make_node("Add", ["a", "b"], ["s"]), h.make_node("Mul", ["s", "a"], ["y"])], "ints",
                     [h.make_tensor_value_info("a", T.INT32, [2, 3]), h.make_tensor_value_info("b", T.INT32, [3])],
                     [h.make_tensor_value_info("y", T.INT32, [2, 3])])
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok", rec
    feeds = {"a": np.arange(-3, 3, dtype=np.int32).reshape(2, 3), "b": np.array([5, -7, 11], np.int32)}
    (got,) = _run(folder, feeds)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, _ort(src, feeds)[0])


def test_integer_division_is_refused_by_the_trial(tmp_path):
    """ncnn divides in float: the trial compares with the reference's integer division and
    refuses the node, naming it and the reason, before anything is written."""
    g = h.make_graph([h.make_node("Div", ["a", "b"], ["y"], name="intdiv")], "div",
                     [h.make_tensor_value_info("a", T.INT32, [4]), h.make_tensor_value_info("b", T.INT32, [4])],
                     [h.make_tensor_value_info("y", T.INT32, [4])])
    _, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    assert rec["status"] == "failed" and rec["reason"] == "runtime_error", rec
    assert "node 'intdiv'" in rec["detail"] and "integers" in rec["detail"]
    assert folder is None and not (tmp_path / "m_out").exists()


def test_five_dims_with_a_batch_are_refused_with_the_rank_limit(tmp_path):
    g = h.make_graph([h.make_node("Relu", ["x"], ["y"], name="relu5")], "r5",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 2, 3, 4, 5])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 2, 3, 4, 5])])
    _, rec, _ = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    assert rec["status"] == "failed" and rec["reason"] == "rank_limit" and "at most 4 dims" in rec["detail"], rec


@pytest.mark.parametrize("form", ["same_positions", "constant_line", "differing_rows"])
def test_gather_elements_in_the_two_forms_ncnn_can_write(tmp_path, form):
    """GatherElements with constant indices that pick the same positions in every row is a
    Gather of them; a constant line read by run-time indices (RoBERTa's token-type buffer by
    its position ids) is a lookup; indices that differ between rows are refused by reason."""
    rng = np.random.default_rng(4)
    if form == "constant_line":
        nodes = [h.make_node("Add", ["ids", "one"], ["idx"]), h.make_node("GatherElements", ["line", "idx"], ["g"], axis=1),
                 h.make_node("Cast", ["g"], ["y"], to=T.FLOAT)]
        inits = [nh.from_array(np.array(1, np.int64), "one"), nh.from_array(rng.standard_normal((1, 20)).astype(np.float32), "line")]
        ins = [h.make_tensor_value_info("ids", T.INT64, [1, 8])]
        feeds = {"ids": rng.integers(0, 19, (1, 8)).astype(np.int64)}
    else:
        rows = [[3, 0, 1], [3, 0, 1]] if form == "same_positions" else [[3, 0, 1], [2, 2, 0]]
        nodes = [h.make_node("GatherElements", ["x", "i"], ["y"], axis=1)]
        inits = [nh.from_array(np.array(rows, np.int64), "i")]
        ins = [h.make_tensor_value_info("x", T.FLOAT, [2, 5])]
        feeds = {"x": rng.standard_normal((2, 5)).astype(np.float32)}
    g = h.make_graph(nodes, "ge", ins, [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    if form == "differing_rows":
        assert rec["status"] == "failed" and rec["reason"] == "unsupported_attribute_value", rec
        return
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    np.testing.assert_allclose(_run(folder, feeds)[0], _ort(src, feeds)[0], rtol=1e-6)


def test_grouped_query_attentions_repeat_of_heads_is_tiled_on_five_dims(tmp_path):
    """Llama's ``repeat_kv``: [1, kv, S, D] unsqueezed to [1, kv, 1, S, D], expanded to
    [1, kv, rep, S, D] and reshaped to [1, kv * rep, S, D]; the five-dim expand is a ``Tile`` of
    the batch-less blob, and the result checks."""
    nodes = [h.make_node("Unsqueeze", ["k", "ax"], ["u"]), h.make_node("Expand", ["u", "to"], ["x"]),
             h.make_node("Reshape", ["x", "s"], ["r"]), h.make_node("Mul", ["r", "r"], ["y"])]
    inits = [nh.from_array(np.array([2], np.int64), "ax"), nh.from_array(np.array([1, 2, 3, 4, 5], np.int64), "to"),
             nh.from_array(np.array([1, 6, 4, 5], np.int64), "s")]
    g = h.make_graph(nodes, "gqa", [h.make_tensor_value_info("k", T.FLOAT, [1, 2, 4, 5])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 6, 4, 5])], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert "Tile" in (folder / "model.param").read_text()
    k = np.random.default_rng(6).standard_normal([1, 2, 4, 5]).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"k": k})[0], _ort(src, {"k": k})[0], rtol=1e-6)


def test_a_hard_swish_in_pieces_is_one_layer_and_a_scalar_operand_no_blob(tmp_path):
    """``conv → x · clip(x + 3, 0, 6) / 6 → + 0.5 → max(·, -inf)`` (paddle2onnx's hard swish):
    one ``HardSwish`` layer, the ``+ 0.5`` a scalar ``BinaryOp`` with no ``MemoryData`` (the -inf
    keeps its blob: ncnn's .param reader takes no inf); it checks."""
    rng = np.random.default_rng(8)
    nodes = [h.make_node("Conv", ["x", "w"], ["v"], pads=[1, 1, 1, 1]), h.make_node("Add", ["v", "three"], ["a"]),
             h.make_node("Clip", ["a", "zero", "six"], ["c"]), h.make_node("Mul", ["v", "c"], ["m"]),
             h.make_node("Div", ["m", "six"], ["hs"]), h.make_node("Add", ["half", "hs"], ["s"]),
             h.make_node("Max", ["s", "ninf"], ["y"])]  # -inf stays a blob: ncnn's .param takes no inf
    inits = [nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")] + [
        nh.from_array(np.array(v, np.float32), n) for n, v in (("three", 3.0), ("zero", 0.0), ("six", 6.0), ("half", 0.5),
                                                             ("ninf", -np.inf))]
    g = h.make_graph(nodes, "hs", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    types = [ln.split()[0] for ln in (folder / "model.param").read_text().splitlines()[2:]]
    assert types.count("HardSwish") == 1 and "Clip" not in types and types.count("MemoryData") == 1, types
    x = rng.standard_normal([1, 3, 8, 8]).astype(np.float32) * 3
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_a_gather_to_five_dims_is_held_squeezed(tmp_path):
    """Constant indices of two dims gathered from four dims give five, with dims of 1 among
    them: the result is held without them (``S``) and read on, not a crash of the writer."""
    nodes = [h.make_node("Gather", ["x", "i"], ["g"], axis=2), h.make_node("Reshape", ["g", "s"], ["r"]),
             h.make_node("Relu", ["r"], ["y"])]
    inits = [nh.from_array(np.array([[0, 2], [3, 1]], np.int64), "i"), nh.from_array(np.array([1, 4, 6], np.int64), "s")]
    g = h.make_graph(nodes, "g5", [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 4, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 6])], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    x = np.random.default_rng(2).standard_normal([1, 1, 4, 6]).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0])


@pytest.mark.parametrize("nd,cin,cout,group,attrs", [
    (2, 16, 1, 1, {"strides": [2, 2]}),  # mediapipe's segmentation head: one output channel and a bias
    (2, 4, 6, 1, {"strides": [2, 2], "pads": [1, 0, 1, 0], "output_padding": [1, 1]}),
    (2, 6, 6, 3, {"strides": [2, 1], "dilations": [1, 2]}),  # grouped
    (2, 4, 4, 4, {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),  # depthwise, SAME
    (2, 3, 5, 1, {"strides": [3, 2], "output_shape": [13, 7]}),
    (1, 4, 3, 1, {"strides": [2], "pads": [1, 2]}),
    (1, 4, 4, 2, {"strides": [3], "output_padding": [2]})])
def test_a_transposed_convolution_keeps_its_bias_and_window(tmp_path, nd, cin, cout, group, attrs):
    """ConvTranspose over a constant kernel and bias is one ``Deconvolution`` layer with both
    stored (the table's dynamic-weight snippet dropped the bias: mediapipe's selfie segmentation
    was off by it), its output window resolved on the shapes; it checks against onnxruntime."""
    rng = np.random.default_rng(7)
    k = [3, 2][:nd]
    sp = [5, 4][:nd]
    w = rng.standard_normal([cin, cout // group] + k).astype(np.float32)
    out = onnx.shape_inference.infer_shapes(h.make_model(h.make_graph(
        [h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], group=group, **attrs)], "ct",
        [h.make_tensor_value_info("x", T.FLOAT, [1, cin] + sp)], [h.make_tensor_value_info("y", T.FLOAT, None)],
        [nh.from_array(w, "w"), nh.from_array(rng.standard_normal(cout).astype(np.float32), "b")]),
        opset_imports=[h.make_opsetid("", 17)]))
    src, rec, folder = _convert(tmp_path, out, check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    types = [ln.split()[0] for ln in (folder / "model.param").read_text().splitlines()[2:]]
    assert [t for t in types if t.startswith("Deconvolution")] == [
        "Deconvolution" + ("DepthWise" if group > 1 else "") + ("1D" if nd == 1 else "")], types
    x = rng.standard_normal([1, cin] + sp).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rank", [3, 4])
def test_a_channels_last_model_permutes_its_items_without_reshapes(tmp_path, rank):
    """A transpose that keeps a batch of 1 first (a channels-last model: NHWC input → conv →
    NHWC heads, as tf2onnx exports Keras) is one ``Permute`` of the batch-less blob, with no
    ``Reshape`` on either side, and checks."""
    rng = np.random.default_rng(5)
    sp = [6, 7][: rank - 2]
    into, back = ([0, 2, 1], [0, 2, 1]) if rank == 3 else ([0, 3, 1, 2], [0, 2, 3, 1])
    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=into),
             h.make_node("Conv", ["xt", "w"], ["c"], pads=[1] * (2 * len(sp))),
             h.make_node("Relu", ["c"], ["r"]),
             h.make_node("Transpose", ["r"], ["rt"], perm=back),
             h.make_node("Softmax", ["rt"], ["y"], axis=-1)]
    inits = [nh.from_array(rng.standard_normal([4, 3] + [3] * len(sp)).astype(np.float32), "w")]
    g = h.make_graph(nodes, "nhwc", [h.make_tensor_value_info("x", T.FLOAT, [1] + sp + [3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1] + sp + [4])], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    types = [ln.split()[0] for ln in (folder / "model.param").read_text().splitlines()[2:]]
    assert types.count("Permute") == 2 and "Reshape" not in types, types
    x = rng.standard_normal([1] + sp + [3]).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,perm", [((2, 8, 3, 1, 4), (3, 1, 2, 0, 4)),  # PyTorch MHA's q/k/v split
                                         ((1, 5, 3, 2, 4), (0, 2, 4, 1, 3)),  # a batch of 1 and four dims
                                         ((2, 1, 3, 1, 4), (1, 3, 0, 2, 4))])  # unit dims moved only
def test_five_dims_move_through_their_dims_other_than_one(tmp_path, shape, perm):
    """A value of five dims with at most four dims other than 1 (``unsqueeze`` then
    ``transpose`` then ``squeeze``, as torch's attention exports its q/k/v split) is held
    squeezed: the transpose permutes the dims other than 1, and the result checks."""
    out = tuple(shape[p] for p in perm)
    squeezed = [d for d in out if d != 1]
    nodes = [h.make_node("Relu", ["x"], ["r"]), h.make_node("Reshape", ["r", "s5"], ["x5"]),
             h.make_node("Transpose", ["x5"], ["t"], perm=list(perm)),
             h.make_node("Reshape", ["t", "s4"], ["t4"]), h.make_node("Mul", ["t4", "t4"], ["y"])]
    flat = [shape[0] * shape[1], int(np.prod(shape[2:]))]
    inits = [nh.from_array(np.array(shape, np.int64), "s5"), nh.from_array(np.array(squeezed, np.int64), "s4")]
    g = h.make_graph(nodes, "t5", [h.make_tensor_value_info("x", T.FLOAT, flat)],
                     [h.make_tensor_value_info("y", T.FLOAT, squeezed)], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    x = np.random.default_rng(3).standard_normal(flat).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-6)


@pytest.mark.parametrize("axis,start,end", [(0, 1, 2), (3, 2, 6), (4, -5, 15)])
def test_a_slice_of_five_dims_runs_on_the_squeezed_blob(tmp_path, axis, start, end):
    """Paddle's attention takes q, k and v by slicing a [3, 1, heads, seq, dim] value: a slice
    of five dims that touches no dim of 1 crops the squeezed blob."""
    shape = (3, 1, 8, 6, 15)
    out = list(shape)
    out[axis] = len(range(*slice(start, end).indices(shape[axis])))
    nodes = [h.make_node("Reshape", ["x", "s5"], ["x5"]),
             h.make_node("Slice", ["x5", "st", "en", "ax"], ["t"]),
             h.make_node("Reshape", ["t", "s3"], ["y"])]
    flat = [int(np.prod(out[:3])), int(np.prod(out[3:]))]
    inits = [nh.from_array(np.array(shape, np.int64), "s5"), nh.from_array(np.array([start], np.int64), "st"),
             nh.from_array(np.array([end], np.int64), "en"), nh.from_array(np.array([axis], np.int64), "ax"),
             nh.from_array(np.array(flat, np.int64), "s3")]
    g = h.make_graph(nodes, "s5", [h.make_tensor_value_info("x", T.FLOAT, [3 * 8, 6 * 15])],
                     [h.make_tensor_value_info("y", T.FLOAT, flat)], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    x = np.random.default_rng(7).standard_normal((24, 90)).astype(np.float32)
    np.testing.assert_array_equal(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0])


@pytest.mark.parametrize("shape", [(1, 4, 7), (1, 4, 5, 6)])
def test_instance_normalization_over_frames_and_images(tmp_path, shape):
    """InstanceNorm over a 1-D input (a speech model's [1, C, L] frames: held as (C, 1, L)) and
    over an image."""
    rng = np.random.default_rng(8)
    c = shape[1]
    g = h.make_graph([h.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, list(shape))],
                     [nh.from_array(rng.random(c).astype(np.float32) + 0.5, "s"),
                      nh.from_array(rng.standard_normal(c).astype(np.float32), "b")])
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_one_hot_is_a_mask_scaled_to_its_values(tmp_path):
    """OneHot (ncnn has no such layer): |index - row| < 0.5 against 0..depth-1, negative
    indices counted from the end, scaled to the off and on values."""
    g = h.make_graph([h.make_node("OneHot", ["i", "d", "v"], ["y"], axis=-1)], "g",
                     [h.make_tensor_value_info("i", T.INT64, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3, 9])],
                     [nh.from_array(np.array(9, np.int64), "d"), nh.from_array(np.array([-2.0, 3.5], np.float32), "v")])
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    feeds = {"i": np.array([[0, 8, -1], [-9, 4, 4]], np.int64)}
    np.testing.assert_array_equal(_run(folder, feeds)[0], _ort(src, feeds)[0])


@pytest.mark.parametrize("shape", [(2, 6), (1, 6, 5)])
def test_batch_normalization_over_computed_statistics_decomposes(tmp_path, shape):
    """tf2onnx's Keras layer norm: FusedBatchNormV3 over statistics computed in the graph
    (ncnn's BatchNorm stores them as weights): the table's decomposition, per channel (axis 1)
    at any rank."""
    rng = np.random.default_rng(9)
    c = shape[1]
    nodes = [h.make_node("ReduceMean", ["x"], ["m4"], axes=[0] + list(range(2, len(shape))), keepdims=0),
             h.make_node("Abs", ["m4"], ["v"]),
             h.make_node("BatchNormalization", ["x", "s", "b", "m4", "v"], ["y"], epsilon=1e-3)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, list(shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, list(shape))],
                     [nh.from_array(rng.random(c).astype(np.float32) + 0.5, "s"),
                      nh.from_array(rng.standard_normal(c).astype(np.float32), "b")])
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert "BatchNorm" not in (folder / "model.param").read_text()  # (x - m) / sqrt(v + eps) in BinaryOps
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("src", [T.INT64, T.FLOAT])
def test_a_cast_to_bool_is_a_mask_of_the_nonzero_values(tmp_path, src):
    """Cast to bool (an attention mask's ``mask.bool()``): |x| > 0 as a 0/1 mask, read by a Where."""
    g = h.make_graph([h.make_node("Cast", ["m"], ["b"], to=T.BOOL), h.make_node("Where", ["b", "x", "zero"], ["y"])],
                     "g", [h.make_tensor_value_info("m", src, [2, 5]), h.make_tensor_value_info("x", T.FLOAT, [2, 5])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 5])], [nh.from_array(np.array(0.0, np.float32), "zero")])
    src_path, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    m = np.array([[0, 1, -3, 0, 7], [2, 0, 0, 1, -1]])
    feeds = {"m": m.astype(np.int64 if src == T.INT64 else np.float32) * (1 if src == T.INT64 else 0.25),
             "x": np.arange(10, dtype=np.float32).reshape(2, 5) + 1}
    np.testing.assert_array_equal(_run(folder, feeds)[0], _ort(src_path, feeds)[0])


@pytest.mark.parametrize("group", [1, 4])
def test_a_1d_convolution_over_a_batch_is_one_2d_layer(tmp_path, group):
    """A 1-D convolution over a batch of 63 frames (a streaming VAD's encoder): the batch moved
    to the rows of one 2-D convolution with a 1 x k kernel, not 63 layers."""
    rng = np.random.default_rng(10)
    cout = 6 if group == 1 else 4
    g = h.make_graph([h.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 2], strides=[2], group=group)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [63, 4, 10])], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(rng.standard_normal((cout, 4 // group, 3)).astype(np.float32), "w"),
                      nh.from_array(rng.standard_normal(cout).astype(np.float32), "b")])
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    types = [ln.split()[0] for ln in (folder / "model.param").read_text().splitlines()[2:]]
    assert types.count("Permute") == 2 and sum(t.startswith("Convolution") for t in types) == 1, types
    x = rng.standard_normal((63, 4, 10)).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_a_matmul_then_add_is_one_inner_product_with_its_bias(tmp_path):
    """MatMul by a constant then Add of a constant vector (a transformer's projection): one
    InnerProduct with the vector as its bias, no BinaryOp or MemoryData left."""
    rng = np.random.default_rng(11)
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "b"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 5, 8])], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w"),
                      nh.from_array(rng.standard_normal(6).astype(np.float32), "b")])
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    lines = (folder / "model.param").read_text().splitlines()[2:]
    types = [ln.split()[0] for ln in lines]
    assert "BinaryOp" not in types and "MemoryData" not in types, types
    assert any(ln.startswith("InnerProduct") and " 1=1 " in ln for ln in lines), lines
    x = rng.standard_normal((1, 5, 8)).astype(np.float32)
    np.testing.assert_allclose(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_an_if_on_a_run_time_condition_is_both_branches_and_a_where(tmp_path):
    """openWakeWord's detector ends in If(score >= threshold): ncnn has no control flow, so both
    branches are computed and a where picks (``control.ifs_as_where``), for either outcome."""
    then_b = h.make_graph([h.make_node("Mul", ["x", "two"], ["t"])], "then", [], [h.make_tensor_value_info("t", T.FLOAT, [1, 4])],
                          [nh.from_array(np.array(2.0, np.float32), "two")])
    else_b = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [h.make_tensor_value_info("e", T.FLOAT, [1, 4])])
    nodes = [h.make_node("ReduceMean", ["x"], ["m"], keepdims=0), h.make_node("GreaterOrEqual", ["m", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4])], [nh.from_array(np.array(0.0, np.float32), "zero")])
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    for x in (np.array([[1.0, 2.0, -0.5, 3.0]], np.float32), np.array([[-1.0, 2.0, -5.5, 3.0]], np.float32)):
        np.testing.assert_array_equal(_run(folder, {"x": x})[0], _ort(src, {"x": x})[0])


@pytest.mark.parametrize("fill,const_mask,branch", [(-np.inf, True, "Y"), (-np.inf, False, "Y"),
                                                    (np.inf, False, "X"), (-np.inf, False, "X")])
def test_a_mask_filled_with_infinities_selects_exactly(tmp_path, fill, const_mask, branch):
    """``where(mask, scores, -inf)`` (a causal attention mask) then softmax: the mask's products
    would give 0 * inf = NaN, so the infinite branch is a min/max against +-inf made from the
    mask; either branch, either sign, the mask a constant or computed at run time."""
    rng = np.random.default_rng(4)
    tri = np.tril(np.ones((6, 6), bool))
    fill_t = nh.from_array(np.array(fill, np.float32), "fill")
    ins = ["mask", "s", "fill"] if branch == "Y" else ["mask", "fill", "s"]
    after = h.make_node("Softmax", ["w"], ["y"], axis=-1) if fill < 0 else h.make_node("Neg", ["w"], ["y"])
    nodes = [h.make_node("Where", ins, ["w"]), after]  # (a softmax over +inf is NaN everywhere)
    inits = [fill_t]
    inputs = [h.make_tensor_value_info("s", T.FLOAT, [1, 2, 6, 6])]
    if const_mask:
        inits.append(nh.from_array(tri, "mask"))
    else:
        nodes.insert(0, h.make_node("Greater", ["m_in", "half"], ["mask"]))
        inits.append(nh.from_array(np.array(0.5, np.float32), "half"))
        inputs.append(h.make_tensor_value_info("m_in", T.FLOAT, [6, 6]))
    g = h.make_graph(nodes, "mask", inputs, [h.make_tensor_value_info("y", T.FLOAT, [1, 2, 6, 6])], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    feeds = {"s": rng.standard_normal((1, 2, 6, 6)).astype(np.float32)}
    if not const_mask:
        feeds["m_in"] = tri.astype(np.float32) if branch == "Y" else (~tri).astype(np.float32)
    got, want = _run(folder, feeds)[0], _ort(src, feeds)[0]
    assert np.isnan(got).sum() == np.isnan(want).sum()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fp16_storage_halves_the_kernels_and_checks_within_their_rounding(tmp_path):
    """``--fp16-storage``: convolution and inner-product kernels carry ncnn's float16 tag and
    take half the bytes (biases stay float32); the check passes, held to what rounding the
    weights to float16 moves the reference; model.io.json says so."""
    import struct

    src, full, folder32 = _convert(tmp_path, _cnn(1), "m32", check=True)
    _, half, folder16 = _convert(tmp_path, _cnn(1), "m16", check=True, options={"fp16_storage": True})
    assert full["status"] == half["status"] == "ok" and half["check"]["status"] == "pass", half
    bin32, bin16 = (folder32 / "model.bin").read_bytes(), (folder16 / "model.bin").read_bytes()
    kernels = (8 * 3 * 3 * 3 + 8 * 2 * 3 * 3 + 5 * 8) * 2  # the bytes float16 saves
    assert len(bin32) - len(bin16) == kernels, (len(bin32), len(bin16))
    assert struct.pack("<I", 0x01306B47) in bin16 and struct.pack("<I", 0x01306B47) not in bin32
    assert json.loads((folder16 / "model.io.json").read_text())["weight_dtype"] == "float16"
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    got, want = _run(folder16, {"x": x})[0], _ort(src, {"x": x})[0]
    assert not np.array_equal(got, _run(folder32, {"x": x})[0])  # the kernels are rounded
    np.testing.assert_allclose(got, want, atol=2e-3)


@pytest.mark.parametrize("trans_b", [0, 1])
def test_a_gemm_of_two_run_time_inputs_without_c(tmp_path, trans_b):
    """Gemm whose B is computed and whose C is omitted (a mel filterbank applied to a
    computed spectrum): ncnn's Gemm layer with two bottoms."""
    b_shape = [5, 4] if trans_b else [4, 5]
    g = h.make_graph([h.make_node("Gemm", ["a", "b"], ["y"], transB=trans_b, alpha=0.5)], "g",
                     [h.make_tensor_value_info("a", T.FLOAT, [3, 4]), h.make_tensor_value_info("b", T.FLOAT, b_shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, [3, 5])])
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    rng = np.random.default_rng(6)
    feeds = {"a": rng.standard_normal((3, 4)).astype(np.float32), "b": rng.standard_normal(b_shape).astype(np.float32)}
    np.testing.assert_allclose(_run(folder, feeds)[0], _ort(src, feeds)[0], rtol=1e-5, atol=1e-6)


def test_the_written_files_are_byte_identical_and_carry_no_model_names(tmp_path):
    m = _cnn(1)
    hostile = "x; rm -rf / #\n7767517"
    for n in m.graph.node:
        n.input[:] = [hostile if i == "x" else i for i in n.input]
    m.graph.input[0].name = hostile
    _, rec1, f1 = _convert(tmp_path, m, "a")
    _, rec2, f2 = _convert(tmp_path, m, "b")
    assert rec1["status"] == rec2["status"] == "ok"
    for name in ("model.param", "model.bin", "model.io.json"):
        assert (f1 / name).read_bytes() == (f2 / name).read_bytes(), name
    param = (f1 / "model.param").read_text()
    assert "rm -rf" not in param and param.count("7767517") == 1
    assert json.loads((f1 / "model.io.json").read_text())["inputs"][0]["name"] == hostile


@pytest.mark.parametrize("op", ["lstm", "gru"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrences_run_on_ncnns_own_layers(op, direction):
    """ONNX's LSTM and GRU as ncnn's LSTM / GRU layers (gate blocks re-ordered, biases folded
    as ncnn keeps them), Y and the last hidden state Y_h both as the reference computes them."""
    from translator import reference
    from translator.compile import target as targets
    from translator.compile.pipeline import compile
    from translator.run.harness import compare, single_op_model

    rng = np.random.default_rng(3)
    gates, d, hidden, size, steps = {"lstm": 4, "gru": 3}[op], 2 if direction == "bidirectional" else 1, 5, 4, 6
    ins = [rng.standard_normal((steps, 1, size)).astype(np.float32),
           (rng.standard_normal((d, gates * hidden, size)) * 0.5).astype(np.float32),
           (rng.standard_normal((d, gates * hidden, hidden)) * 0.5).astype(np.float32),
           (rng.standard_normal((d, 2 * gates * hidden)) * 0.5).astype(np.float32)]
    attrs = {"hidden_size": hidden, "direction": direction, **({"linear_before_reset": 1} if op == "gru" else {})}
    model, feeds = single_op_model(op, ins, attrs, n_outputs=2, const=(1, 2, 3))
    target = targets.get("ncnn")
    art = compile(model, target).artifact
    assert op.upper() in [ln.split()[0] for ln in art.param.splitlines()[2:]]
    got, want = target.run(art, feeds), reference.get(op)(*ins, **attrs)
    for w, g in zip(want[:2], got):
        assert compare(w, g).ok, (op, direction)


@pytest.mark.parametrize("rows,computed", [(40, False), (5000, False), (40, True), (5000, "moved")])
def test_an_embedding_lookup_by_run_time_indices(tmp_path, rows, computed):
    """Rows of a constant table by indices fed at run time (negative ones count from the end),
    checked against onnxruntime. Token ids that are a model input: ncnn's ``Embed`` on the input
    fed as int32 words (any table size; model.io.json says so). Indices computed in the network
    (float32 values): a 0/1 mask of index = row number times the table."""
    rng = np.random.default_rng(4)
    table = nh.from_array(rng.standard_normal((rows, 6)).astype(np.float32), "table")
    nodes = [h.make_node("Gather", ["table", "ix"], ["y"], axis=0)]
    inits = [table]
    ids_shape = [1, 9]
    if computed == "moved":  # x[:, 1] of a [1, 2, 9] input, then transposed: the words move through Crop/Permute
        ids_shape = [1, 2, 9]
        nodes[:0] = [h.make_node("Gather", ["ids", "one"], ["sel"], axis=1),
                     h.make_node("Transpose", ["sel"], ["sel_t"], perm=[1, 0]),
                     h.make_node("Transpose", ["sel_t"], ["ix"], perm=[1, 0])]
        inits.append(nh.from_array(np.array(1, np.int64), "one"))
    elif computed:
        nodes.insert(0, h.make_node("Add", ["ids", "zero"], ["ix"]))
        inits.append(nh.from_array(np.zeros((1, 9), np.int64), "zero"))
    else:
        nodes[0].input[1] = "ids"
    g = h.make_graph(nodes, "emb", [h.make_tensor_value_info("ids", T.INT64, ids_shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 9, 6])], inits)
    src, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    types = [ln.split()[0] for ln in (folder / "model.param").read_text().splitlines()[2:]]
    io = json.loads((folder / "model.io.json").read_text())
    if computed is True:
        assert "InnerProduct" in types and "Embed" not in types, types
    else:
        assert "Embed" in types and "InnerProduct" not in types, types
        (port,) = io["inputs"]  # the float32 blob of the ids is read by nothing: only the words are fed
        assert port.pop("blob").startswith("w") and port == {"dtype": "int64", "name": "ids", "rows": rows,
                                                              "shape": ids_shape, "words": "int32"}, port
    ids = np.array([[0, 5, rows - 1, -1, -rows, 17, 17, 2, rows - 2]], np.int64)
    feeds = {"ids": np.stack([ids[:, ::-1], ids], axis=1) if computed == "moved" else ids}
    np.testing.assert_allclose(_run(folder, feeds)[0], _ort(src, feeds)[0], rtol=1e-6, atol=1e-6)

def test_a_max_pools_indices_output_is_refused_by_reason(tmp_path):
    """MaxPool's second output (the argmax) has no ncnn layer: a refusal naming it, not an
    internal error about a value read before it is computed."""
    g = h.make_graph([h.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])], "mp",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 4, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 2, 2, 2]), h.make_tensor_value_info("i", T.INT64, [1, 2, 2, 2])])
    _, rec, _ = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
    assert rec["status"] == "failed" and rec["reason"] == "unsupported_attribute_value" and "Indices" in rec["detail"], rec


def test_a_where_that_selects_nan_away_is_written_with_a_warning(tmp_path):
    """``where(is_nan(x), 0, x)`` (transformers' guard against fully masked attention rows):
    ncnn's select is arithmetic, so a NaN stays NaN; the conversion says so."""
    nodes = [h.make_node("IsNaN", ["x"], ["m"]), h.make_node("Where", ["m", "zero", "x"], ["y"])]
    g = h.make_graph(nodes, "nan", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])], [nh.from_array(np.array(0.0, np.float32), "zero")])
    _, rec, folder = _convert(tmp_path, h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), check=True)
    assert rec["status"] == "ok", rec
    assert any("select NaN values away" in w for w in rec.get("warnings", [])), rec
