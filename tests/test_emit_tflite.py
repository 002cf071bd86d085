"""The TFLite emitter: conversion with builtins only, reported dtype legalization with a
range check, retrying through the table's decompositions, atomic and deterministic saves."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from emitters import tflite  # noqa: E402
from translator.table.errors import Unsupported  # noqa: E402
from translator.frontends.onnx import load_onnx  # noqa: E402
from translator.run.harness import compare, single_op_model  # noqa: E402
from translator.compile.interpreter import run as ref_run  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"


def test_tiny_cnn_converts_and_matches_the_reference():
    model = load_onnx(MODEL)
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    expected = ref_run(load_onnx(MODEL), {"input": x})[0]
    art = tflite.emit(model)
    assert art.tflite[4:8] == b"TFL3" and art.transposes == 1
    assert compare(expected, tflite.run(art, {"input": x})[0], rtol=1e-4, atol=1e-5).ok


def test_int64_is_legalized_with_a_warning_and_a_range_check():
    a = np.asarray([1, 2, 3], np.int64)
    model, feeds = single_op_model("add", [a, a], {})
    art = tflite.emit(model)
    assert "tflite: input 'in0' int64 -> int32" in art.warnings
    assert "WARNING" in art.source and "    \"tflite: input 'in0' int64 -> int32\"," in art.source
    y = tflite.run(art, feeds)[0]
    assert y.dtype == np.int64 and y.tolist() == [2, 4, 6]  # the model's interface keeps int64
    with pytest.raises(Unsupported) as ei:
        tflite.run(art, {"in0": np.asarray([2**40, 0, 0]), "in1": a})
    assert ei.value.code == "unsupported_dtype"


def test_a_rejected_tensorflow_op_is_decomposed_through_the_table():
    x = np.linspace(-1, 1, 6, dtype=np.float32)
    model, feeds = single_op_model("sinh", [x], {})
    art = tflite.emit(model)  # tf.math.sinh has no builtin: the table's decomposition is used
    assert ("sinh", "sinh") in art.decomposed
    assert compare(np.sinh(x), tflite.run(art, feeds)[0], rtol=1e-5, atol=1e-6).ok


def test_an_op_without_builtin_or_decomposition_is_refused():
    model, _ = single_op_model("det", [np.eye(3, dtype=np.float32)], {})  # tf.linalg.det: no TFLite builtin
    with pytest.raises(Unsupported) as ei:
        tflite.emit(model)
    assert ei.value.code == "unsupported_op" and ei.value.backend == "tflite"


def test_erf_without_a_builtin_goes_through_its_table_decomposition():
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    model, feeds = single_op_model("erf", [x], {})
    art = tflite.emit(model)
    assert ("erf", "erf") in art.decomposed
    from math import erf

    assert compare(np.asarray([erf(v) for v in x.tolist()], np.float32), tflite.run(art, feeds)[0],
                   rtol=0, atol=2e-7).ok  # A&S 7.1.26: |error| <= 1.5e-7


def test_backend_spelling_of_an_op_uses_builtins():
    x = np.linspace(-0.9, 0.9, 7, dtype=np.float32)
    model, feeds = single_op_model("asin", [x], {})
    art = tflite.emit(model)
    assert "tf.math.atan2" in art.source
    assert compare(np.arcsin(x), tflite.run(art, feeds)[0], rtol=1e-4, atol=1e-5).ok


def test_save_is_atomic_and_deterministic(tmp_path):
    a, b = tflite.emit(load_onnx(MODEL)), tflite.emit(load_onnx(MODEL))
    assert a.tflite == b.tflite
    out = tflite.save(a, tmp_path / "m.tflite")
    assert out.read_bytes() == a.tflite and [p.name for p in tmp_path.iterdir()] == ["m.tflite"]
    a.tflite = None
    with pytest.raises(Exception):
        tflite.save(a, tmp_path / "n.tflite")
    assert [p.name for p in tmp_path.iterdir()] == ["m.tflite"]


def test_hostile_tensor_name_stays_data():
    from test_emit_tensorflow import HOSTILE, _assert_inert, _hostile_model

    art = tflite.emit(_hostile_model())
    _assert_inert(art.source, art.warnings)
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    expected = ref_run(_hostile_model(), {HOSTILE: x})[0]
    assert compare(expected, tflite.run(art, {HOSTILE: x})[0], rtol=1e-4, atol=1e-5).ok


@pytest.mark.slow
def test_node_tests_pass_1380_with_a_reason_for_every_gap(tmp_path):
    """The ONNX backend node tests through the TFLite emitter (bench/nodetests.py), on the
    flatbuffer as written: measured 1,165 in the declared dtypes + 228 in TFLite's documented
    legalizations (int64 as int32, float16/float64 as float32, bfloat16 rounded in the graph
    and carried as float32, 8/16-bit integers wrapped in the graph and carried as int32)."""
    from conftest import run_nodetests

    r = run_nodetests("tflite", "none", tmp_path, timeout=5400)
    assert r["cases"] >= 1800 and r["counts"]["pass"] >= 1150
    assert r["counts"]["pass"] + r["counts"]["pass_legalized"] >= 1380
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass")


def test_a_prepared_runner_gives_what_run_gives():
    model = load_onnx(MODEL)
    x = np.random.default_rng(4).standard_normal((1, 3, 16, 16)).astype(np.float32)
    art = tflite.emit(model)
    call = tflite.runner(art)
    first, again = call({"input": x})[0], call({"input": x})[0]
    assert np.array_equal(first, again) and np.array_equal(first, tflite.run(art, {"input": x})[0])


def _depthwise(c: int, mult: int, attrs: dict):
    from translator.ir.graph import Graph, Model, TensorType

    rng = np.random.default_rng(5)  # the same weights every time
    g = Graph()
    x = g.add_input("x", TensorType("float32", (1, c, 9, 8)))
    w = g.add_constant("w", rng.standard_normal((c * mult, 1, 3, 3)).astype(np.float32), "float32")
    b = g.add_constant("b", rng.standard_normal(c * mult).astype(np.float32), "float32")
    g.outputs = [g.add_node("conv", [x, w, b], {"group": c, **attrs}, outputs=["y"]).outputs[0]]
    return Model(g, source="<depthwise>")


@pytest.mark.parametrize("mult,strides,dil,pads", [(1, [1, 1], [1, 1], [1, 1, 1, 1]), (2, [2, 2], [1, 1], [0, 0, 1, 1]),
                                                   (1, [1, 1], [2, 2], [2, 2, 2, 2]), (3, [2, 1], [1, 2], [1, 0, 0, 2])])
def test_depthwise_conv_is_a_depthwise_builtin(mult, strides, dil, pads):
    """group == channels (ONNX weight (C·m, 1, kh, kw)) becomes DEPTHWISE_CONV_2D, not a grouped CONV_2D."""
    import warnings

    import tensorflow as tf

    attrs = {"strides": strides, "dilations": dil, "pads": pads}
    feeds = {"x": np.random.default_rng(6).standard_normal((1, 4, 9, 8)).astype(np.float32)}
    expected = ref_run(_depthwise(4, mult, attrs), feeds)[0]
    art = tflite.emit(_depthwise(4, mult, attrs))
    assert "tf.nn.depthwise_conv2d" in art.source
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tf.lite.Interpreter's deprecation notice
        ops = {o["op_name"] for o in tf.lite.Interpreter(model_content=art.tflite)._get_ops_details()}
    assert "DEPTHWISE_CONV_2D" in ops and "CONV_2D" not in ops
    assert compare(expected, tflite.run(art, feeds)[0], rtol=1e-4, atol=1e-5).ok


def _branchy_model(n_blocks: int):
    """Residual blocks on float32 plus an int64 counter chain; an early value is both a
    model output and read by the last block, so values cross every cut."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], [numpy_helper.from_array(np.full((1, 4), 0.5, np.float32), "half"),
                        numpy_helper.from_array(np.asarray([3], np.int64), "three")]
    x, k = "x", "k"
    early = None
    for i in range(n_blocks):
        nodes += [helper.make_node("Mul", [x, "half"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"r{i}"]),
                  helper.make_node("Add", [x, f"r{i}"], [f"x{i}"]), helper.make_node("Add", [k, "three"], [f"k{i}"])]
        x, k = f"x{i}", f"k{i}"
        if i == 1:
            early = x
    nodes.append(helper.make_node("Sub", [x, early], ["y"]))
    g = helper.make_graph(nodes, "branchy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                                             helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4]),
                           helper.make_tensor_value_info(early, TensorProto.FLOAT, [1, 4]),
                           helper.make_tensor_value_info(k, TensorProto.INT64, [1])], inits)
    return onnx.helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_large_graph_converts_in_segments_joined_into_one_model(monkeypatch, tmp_path):
    """With the threshold lowered to 8 nodes, a 33-node graph converts in 5 segments; the
    joined flatbuffer has one subgraph, no segment-boundary tensors left as inputs, and
    gives what the whole conversion and the reference give."""
    import onnx
    from tensorflow.lite.tools import flatbuffer_utils

    from emitters.tflite import segments as tflite_segments

    path = tmp_path / "branchy.onnx"
    onnx.save_model(_branchy_model(8), str(path))
    feeds = {"x": np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32),
             "k": np.asarray([5], np.int64)}
    expected = ref_run(load_onnx(path), feeds)
    whole = tflite.emit(load_onnx(path))
    monkeypatch.setattr(tflite_segments, "SEGMENT_NODES", 8)
    art = tflite.emit(load_onnx(path))
    assert art.options["segments"] == 5 and "segments" not in whole.options
    fb = flatbuffer_utils.convert_bytearray_to_object(bytearray(art.tflite))
    assert len(fb.subgraphs) == 1 and len(fb.subgraphs[0].inputs) == 2 and len(fb.subgraphs[0].outputs) == 3
    got, ref_whole = tflite.run(art, feeds), tflite.run(whole, feeds)
    assert [p.name for p in art.outputs] == [p.name for p in whole.outputs]
    for e, g, w in zip(expected, got, ref_whole):
        assert g.dtype == e.dtype and compare(e, g, rtol=1e-6, atol=1e-6).ok and np.array_equal(g, w)
    assert got[2].tolist() == [5 + 3 * 8]
    assert tflite.emit(load_onnx(path)).tflite == art.tflite  # deterministic


def test_allow_select_tf_ops_keeps_an_op_without_builtin_as_a_flex_op_and_report_computes_that_remedy(tmp_path):
    """``bitwise_and`` has no TFLite builtin and no decomposition: refused by default; report's
    remedy, computed by re-planning with the option, is ``--allow-select-tf-ops``; applied, the
    conversion keeps TensorFlow's BitwiseAnd as a Flex op. This interpreter has no Flex
    delegate: the check says so (structural_only), it does not fail the model."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    import opbridge
    from translator import frontends
    from translator.run import report as R

    g = h.make_graph([h.make_node("BitwiseAnd", ["a", "b"], ["c"], name="band"),
                      h.make_node("Cast", ["c"], ["f"], to=T.FLOAT, name="tofloat"),
                      h.make_node("Relu", ["f"], ["y"], name="relu")], "g",
                     [h.make_tensor_value_info("a", T.INT32, [4]), h.make_tensor_value_info("b", T.INT32, [4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [4])])
    path = tmp_path / "band.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), str(path))
    model = frontends.load(str(path))
    plans = R.plan_model(model, ["tflite"])
    (pr,) = R.problems(plans, model)
    assert (pr.op, pr.nodes, pr.remedy) == ("bitwise_and", ["band"], "--allow-select-tf-ops"), pr
    (again,) = R.plan_model(model, ["tflite"], allow_select_tf_ops=True)
    assert all(n.status != "unsupported" for n in again.nodes)
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    for extra, refused in (([], 1), (["--allow-select-tf-ops"], 0)):  # report takes the remedy as convert does
        p = subprocess.run([sys.executable, "-m", "translator.cli", "report", str(path), "--backends", "tflite",
                            "--json", *extra], capture_output=True, text=True, cwd=root)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["backends"]["tflite"]["counts"]["unsupported"] == refused, extra
    (no,) = opbridge.convert(str(path), to="tflite", out=str(tmp_path / "no.tflite"))["targets"]
    assert no["status"] != "ok" and no["reason"] == "unsupported_op" and not (tmp_path / "no.tflite").exists(), no
    res = opbridge.convert(str(path), to="tflite", out=str(tmp_path / "m.tflite"), options={"allow_select_tf_ops": True})
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and b"FlexBitwiseAnd" in (tmp_path / "m.tflite").read_bytes()
    assert rec["check"]["reason"] == "structural_only" and "Flex delegate" in rec["check"]["detail"], rec["check"]


@pytest.mark.parametrize("slope_shape", [(4, 1, 1), (1,)])
def test_prelu_with_a_constant_slope_is_the_prelu_builtin_xnnpack_takes(slope_shape):
    """The tflite cell's form ``relu(x) + (-slope)·relu(-x)`` is what the converter fuses into
    PRELU (a per-channel slope; one slope value stays RELU, NEG, MUL, ADD); the TensorFlow
    form ``where(x < 0, slope·x, x)`` stays LESS + SELECT_V2, two nodes the XNNPACK delegate
    leaves to the builtin kernels around every activation."""
    from translator.ir.graph import Graph, Model, TensorType
    from emitters.tflite.runtime import allocated_ops, delegated_share

    g = Graph()
    x = g.add_input("x", TensorType("float32", (1, 4, 5, 6)))
    s = g.add_constant("s", (np.arange(np.prod(slope_shape)).reshape(slope_shape) * 0.1 + 0.05).astype(np.float32),
                       "float32")
    g.outputs = [g.add_node("prelu", [x, s], outputs=["y"]).outputs[0]]
    model = Model(g, source="<prelu>")
    feeds = {"x": np.random.default_rng(7).standard_normal((1, 4, 5, 6)).astype(np.float32)}
    expected = ref_run(model, feeds)[0]
    art = tflite.emit(Model(g, source="<prelu>"))
    ops = allocated_ops(art.tflite)
    names = [o["op_name"] for o in ops if o["op_name"] != "DELEGATE"]
    assert names == ["PRELU"] if slope_shape != (1,) else "SELECT_V2" not in names, names
    assert delegated_share(ops)["left"] == {}
    assert compare(expected, tflite.run(art, feeds)[0], rtol=1e-6, atol=1e-6).ok


@pytest.mark.parametrize("ctm, nearest", [("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"),
                                          ("align_corners", "round_prefer_floor")])
def test_a_static_nearest_upsampling_is_copies_the_delegate_takes(ctm, nearest):
    """Nearest 2× (and 3×) upsampling at static sizes whose index map is each element
    repeated: expand, concatenate, reshape, all inside XNNPACK's partition (a GATHER is not)."""
    from translator.ir.graph import Graph, Model, TensorType
    from emitters.tflite.runtime import allocated_ops, delegated_share

    g = Graph()
    x = g.add_input("x", TensorType("float32", (1, 4, 5, 6)))
    sc = g.add_constant("sc", np.array([1.0, 1.0, 2.0, 3.0], np.float32), "float32")
    g.outputs = [g.add_node("resize", [x, None, sc], {"mode": "nearest", "coordinate_transformation_mode": ctm,
                                                       "nearest_mode": nearest}, outputs=["y"]).outputs[0]]
    feeds = {"x": np.random.default_rng(8).standard_normal((1, 4, 5, 6)).astype(np.float32)}
    expected = ref_run(Model(g, source="<resize>"), feeds)[0]
    art = tflite.emit(Model(g, source="<resize>"))
    share = delegated_share(allocated_ops(art.tflite))
    repeated = ctm != "align_corners"  # align_corners' map at 6 → 18 is not i // 3: its gather stays
    assert (share["left"] == {}) == repeated, share
    np.testing.assert_array_equal(tflite.run(art, feeds)[0], expected)


@pytest.mark.parametrize("sizes, builtin", [([4, 4], "SPLIT"), ([2, 6], "STRIDED_SLICE")])
def test_a_split_into_equal_parts_is_the_split_builtin_xnnpack_takes(sizes, builtin):
    """YOLOv8's C2f splits its channels in two halves, given as sizes: written as a count, the
    converter's SPLIT (inside XNNPACK's partition), not SPLIT_V (left to the builtin kernel);
    unequal parts are one slice each (STRIDED_SLICE, which the delegate takes too)."""
    from translator.ir.graph import Graph, Model, TensorType
    from emitters.tflite.runtime import allocated_ops, delegated_share

    g = Graph()
    x = g.add_input("x", TensorType("float32", (1, 8, 3, 3)))
    sz = g.add_constant("sz", np.array(sizes, np.int64), "int64")
    a, b = g.add_node("split", [x, sz], {"axis": 1}, outputs=["a", "b"]).outputs
    g.outputs = [g.add_node("mul", [a, a], outputs=["ya"]).outputs[0], g.add_node("relu", [b], outputs=["yb"]).outputs[0]]
    feeds = {"x": np.random.default_rng(9).standard_normal((1, 8, 3, 3)).astype(np.float32)}
    expected = ref_run(Model(g, source="<split>"), feeds)
    art = tflite.emit(Model(g, source="<split>"))
    ops = allocated_ops(art.tflite)
    assert builtin in {o["op_name"] for o in ops} and "SPLIT_V" not in {o["op_name"] for o in ops}
    assert delegated_share(ops)["left"] == {}
    for e, got in zip(expected, tflite.run(art, feeds)):
        np.testing.assert_array_equal(got, e)


@pytest.mark.parametrize("before, attrs, shape", [
    ("relu", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), (1, 4, 8, 8)),    # ResNet's stem
    ("neg", dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]), (1, 4, 7, 7)),    # YOLO's SPPF: SAME
    ("neg", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]), (1, 4, 8, 8)),    # SAME at this size
    ("neg", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), (1, 4, 8, 8)),    # -inf pads: PADV2
])
def test_a_padded_max_pool_needs_no_minus_infinity_pad_where_its_windows_allow(before, attrs, shape):
    """A max pool's pads never win the max: TensorFlow's SAME windows where they are the same
    windows, a pad of 0 after a ReLU; only otherwise a -inf pad (PADV2, outside XNNPACK)."""
    from translator.ir.graph import Graph, Model, TensorType
    from emitters.tflite.runtime import allocated_ops, delegated_share

    g = Graph()
    x = g.add_input("x", TensorType("float32", shape))
    a = g.add_node(before, [x], outputs=["a"]).outputs[0]
    g.outputs = [g.add_node("max_pool", [a], attrs, outputs=["y"]).outputs[0]]
    feeds = {"x": np.random.default_rng(10).standard_normal(shape).astype(np.float32)}
    expected = ref_run(Model(g, source="<pool>"), feeds)[0]
    art = tflite.emit(Model(g, source="<pool>"))
    left = delegated_share(allocated_ops(art.tflite))["left"]
    assert left == ({"PADV2": 1} if before == "neg" and attrs["pads"] == [1, 1, 1, 1] else {}), left
    np.testing.assert_array_equal(tflite.run(art, feeds)[0], expected)


def test_the_flatbuffer_is_signed_and_its_interface_tensors_carry_their_names(tmp_path):
    """The converter runs on the frozen function (no SavedModel written and read back), which
    writes no signature: the flatbuffer still has LiteRT's ``serving_default`` signature with
    the model's input and output names (outputs declared out of sorted order map to the right
    tensors), and the interface tensors are named by them (the converter's are "Identity_1",
    or "serving_default_x:0" through a SavedModel)."""
    import onnx
    from ai_edge_litert.interpreter import Interpreter
    from onnx import TensorProto as T
    from onnx import helper as h

    import opbridge

    g = h.make_graph([h.make_node("Relu", ["x"], ["zeta"]), h.make_node("Neg", ["x"], ["alpha"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("zeta", T.FLOAT, [2, 3]), h.make_tensor_value_info("alpha", T.FLOAT, [2, 3])])
    src, out = tmp_path / "m.onnx", tmp_path / "m.tflite"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    assert opbridge.convert(str(src), to="tflite", out=str(out))["targets"][0]["status"] == "ok"
    it = Interpreter(str(out))
    assert it.get_signature_list() == {"serving_default": {"inputs": ["x"], "outputs": ["alpha", "zeta"]}}
    assert [d["name"] for d in it.get_input_details()] == ["x"]
    assert sorted(d["name"] for d in it.get_output_details()) == ["alpha", "zeta"]
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
    res = it.get_signature_runner()(x=x)
    assert np.array_equal(res["zeta"], np.maximum(x, 0)) and np.array_equal(res["alpha"], -x)


def test_equal_constants_share_one_buffer_and_no_conversion_record_is_written(tmp_path):
    """The converter's own buffer merge (and its conversion record) each parsed and wrote the
    model once more; the merge is done in the one parse ``signed`` makes. Constants with the
    same bytes and different shapes (the converter's CSE keeps both) share one buffer, as
    TensorFlow's merge leaves them (it finds nothing left), and no CONVERSION_METADATA is
    written; the model computes what it did."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from tensorflow.lite.python import convert as tfc
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    from emitters.tflite import codegen

    ones = np.arange(1, 13, dtype=np.float32)
    g = h.make_graph([h.make_node("Add", ["x", "a"], ["y"]), h.make_node("Reshape", ["y", "s"], ["r"]),
                      h.make_node("Mul", ["r", "b"], ["z"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [12])], [h.make_tensor_value_info("z", T.FLOAT, [3, 4])],
                     [nh.from_array(ones, "a"), nh.from_array(ones.reshape(3, 4), "b"),
                      nh.from_array(np.array([3, 4], np.int64), "s")])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    art = tflite.emit(load_onnx(src))
    m = fbu.convert_bytearray_to_object(bytearray(art.tflite))
    names = [md.name.decode() if isinstance(md.name, bytes) else md.name for md in m.metadata or []]
    assert "CONVERSION_METADATA" not in names, names
    consts = [t.buffer for t in m.subgraphs[0].tensors if t.type == 0 and m.buffers[t.buffer].data is not None
              and len(m.buffers[t.buffer].data) == 48]
    assert len(consts) == 2 and consts[0] == consts[1], consts  # one buffer for both
    assert len(tfc.deduplicate_readonly_buffers(art.tflite)) == len(art.tflite)
    x = np.linspace(-2, 2, 12, dtype=np.float32)
    np.testing.assert_allclose(tflite.run(art, {"x": x})[0], ((x + ones).reshape(3, 4) * ones.reshape(3, 4)),
                               rtol=1e-6)
    # the merge on its own: a copy of a buffer is pointed back at the first, its data dropped
    buf = m.buffers[consts[0]]
    m.buffers.append(type(buf)())
    m.buffers[-1].data = buf.data.copy()
    reader = next(t for t in m.subgraphs[0].tensors if t.buffer == consts[0])
    reader.buffer = len(m.buffers) - 1
    assert codegen.merge_constants(m) == 1
    assert reader.buffer == consts[0] and m.buffers[-1].data is None


def test_a_float_conversion_parses_the_flatbuffer_once(monkeypatch, tmp_path):
    """TensorFlow's converter writes the flatbuffer; opbridge then reads it with the Python object
    API (0.1-0.5 s a model) once: the signature, the merged constants and the renamed interface
    names (``opbridge.io_names``) are written in that one pass, and the converter's own merge
    and conversion record no longer parse it."""
    import json

    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    from emitters.tflite import codegen

    g = h.make_graph([h.make_node("Relu", ["x.1"], ["y:0"])], "g", [h.make_tensor_value_info("x.1", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("y:0", T.FLOAT, [2, 3])])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    model = load_onnx(src)
    parse = fbu.convert_bytearray_to_object
    calls = []
    monkeypatch.setattr(fbu, "convert_bytearray_to_object", lambda b: calls.append(1) or parse(b))
    art = tflite.emit(model)
    assert len(calls) == 1, calls
    m = parse(bytearray(art.tflite))
    entries = [bytes(m.buffers[md.buffer].data) for md in m.metadata
               if (md.name.decode() if isinstance(md.name, bytes) else md.name) == codegen.IO_NAMES_METADATA]
    assert [json.loads(e) for e in entries] == [art.io_names] and art.io_names.get("inputs"), entries
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    np.testing.assert_array_equal(tflite.run(art, {"x.1": x})[0], np.maximum(x, 0))


def test_a_model_converted_in_segments_records_its_own_renamed_names(monkeypatch, tmp_path):
    """The joined flatbuffer's ``opbridge.io_names`` entry is the whole model's renamed names,
    not the first segment's (which the joined model's options must not stand in for)."""
    import json

    import onnx
    from tensorflow.lite.tools import flatbuffer_utils

    from emitters.tflite import segments as tflite_segments

    proto = _branchy_model(8)
    for n in proto.graph.node:
        n.input[:] = ["x.in" if i == "x" else i for i in n.input]
        n.output[:] = ["y:0" if o == "y" else o for o in n.output]
    proto.graph.input[0].name, proto.graph.output[0].name = "x.in", "y:0"
    path = tmp_path / "branchy_renamed.onnx"
    onnx.save_model(proto, str(path))
    monkeypatch.setattr(tflite_segments, "SEGMENT_NODES", 8)
    art = tflite.emit(load_onnx(path))
    assert art.options["segments"] == 5 and art.io_names["inputs"] and art.io_names["outputs"], art.io_names
    fb = flatbuffer_utils.convert_bytearray_to_object(bytearray(art.tflite))
    entries = [bytes(fb.buffers[md.buffer].data) for md in fb.metadata
               if (md.name.decode() if isinstance(md.name, bytes) else md.name) == tflite.IO_NAMES_METADATA]
    assert [json.loads(e) for e in entries] == [art.io_names], entries
    feeds = {"x.in": np.random.default_rng(1).standard_normal((1, 4)).astype(np.float32),
             "k": np.asarray([5], np.int64)}
    expected = ref_run(load_onnx(path), feeds)
    for e, g in zip(expected, tflite.run(art, feeds)):
        assert compare(e, g, rtol=1e-6, atol=1e-6).ok


def test_control_flow_converts_to_the_same_bytes_in_one_process_and_through_tensorflows_own_freeze(
        tmp_path, monkeypatch):
    """A model with an If on a run-time condition keeps it as an IF over two subgraphs, whose
    names TensorFlow takes from process-wide counters: converted twice in one process (other
    functions traced between), the bytes are the same (the counters renumbered from 0). The
    frozen GraphDef's tensors are read from one import of it (``_frozen_by_import``), not from
    the concrete function TensorFlow's converter rebuilds: the flatbuffer is the same either
    way, and computes the If. A captured constant's counter name is renumbered as well."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from tensorflow.lite.tools import flatbuffer_utils as fbu

    from emitters.tflite import codegen

    w = np.arange(6, dtype=np.float32).reshape(1, 6) / 8
    then = h.make_graph([h.make_node("Mul", ["x", "w"], ["a"])], "then", [], [h.make_tensor_value_info("a", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Sub", ["x", "w"], ["b"])], "else", [], [h.make_tensor_value_info("b", T.FLOAT, None)])
    g = h.make_graph([h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
                      h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 6])], [h.make_tensor_value_info("y", T.FLOAT, [2, 6])],
                     [nh.from_array(w, "w"), nh.from_array(np.array(0, np.float32), "zero")])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    first = tflite.emit(load_onnx(src))
    m = fbu.convert_bytearray_to_object(bytearray(first.tflite))
    assert len(m.subgraphs) == 3, "the If stays an IF over two subgraphs"
    names = sorted(sg.name.decode() for sg in m.subgraphs[1:])
    assert all(not any(len(part) > 2 and part.isdigit() for part in n.split("_")) for n in names), names
    tflite.emit(load_onnx(MODEL))  # more functions traced: TensorFlow's counters move on
    assert tflite.emit(load_onnx(src)).tflite == first.tflite
    monkeypatch.setattr(codegen, "_frozen_by_import", lambda conv, fn: None)  # TensorFlow's own freeze
    assert tflite.emit(load_onnx(src)).tflite == first.tflite
    # a captured constant named by a counter under its op's scope is renumbered too; the
    # interface's tensors keep their names
    consts = [k for k, t in enumerate(m.subgraphs[0].tensors) if m.buffers[t.buffer].data is not None]
    assert consts, "the model has a constant tensor"
    m.subgraphs[0].tensors[consts[0]].name = b"Shape_2/4138"
    assert codegen.stable_names(m) >= 1
    assert m.subgraphs[0].tensors[consts[0]].name == b"Shape_2/0"
    assert [m.subgraphs[0].tensors[k].name for k in m.subgraphs[0].inputs] == [b"x"]
    rng = np.random.default_rng(3)
    for x in (rng.random((2, 6), np.float32), -rng.random((2, 6), np.float32)):
        np.testing.assert_allclose(tflite.run(first, {"x": x})[0], x * w if x.sum() > 0 else x - w, rtol=1e-6)
