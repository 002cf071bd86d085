"""What real exporters declare at a model's boundary, through every target: an output that is
also an input (or a constant) is checked under the model's own name; a
0-d boolean input (an ``If`` condition fed by the caller) is fed as a 0-d array; a declared
dim of -1 is unknown."""
from __future__ import annotations

import numpy as np
import pytest

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")


def _model(path, nodes, inputs, outputs, inits=()):
    import onnx
    from onnx import helper as h

    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def _vi(name, shape, dtype=None):
    from onnx import TensorProto as T
    from onnx import helper as h

    return h.make_tensor_value_info(name, dtype or T.FLOAT, shape)


@pytest.mark.parametrize("target", TARGETS)
def test_outputs_that_are_inputs_or_constants_check_under_their_names(target, tmp_path):
    from onnx import helper as h
    from onnx import numpy_helper as nh

    import opbridge

    src = _model(tmp_path / "m.onnx", [h.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3])],
                 [_vi("y", [2, 3]), _vi("x", [2, 3]), _vi("k", [3])],
                 [nh.from_array(np.arange(3, dtype=np.float32), "k")])
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"))
    (rec,) = res["targets"]
    assert rec["status"] == "ok", rec
    assert rec["check"]["status"] == "pass", rec


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "coreml"])
def test_a_boolean_scalar_input_is_fed_as_a_0d_array(target, tmp_path):
    from onnx import TensorProto as T
    from onnx import helper as h

    import opbridge

    then = h.make_graph([h.make_node("Relu", ["x"], ["t"])], "then", [], [_vi("t", [2, 3])])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", [2, 3])])
    src = _model(tmp_path / "m.onnx", [h.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
                 [_vi("cond", [], T.BOOL), _vi("x", [2, 3])], [_vi("y", [2, 3])])
    for flag in (True, False):
        feeds = tmp_path / f"in_{flag}.npz"
        np.savez(feeds, cond=np.array(flag), x=np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
        res = opbridge.convert(str(src), to=target, out=str(tmp_path / f"out_{flag}"), inputs=str(feeds))
        (rec,) = res["targets"]
        assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out_random"))  # the check's own 0-d input
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec


def test_random_inputs_are_arrays_even_when_0d():
    from translator.run.check import random_inputs
    from translator.ir.graph import Model, Graph, TensorType

    g = Graph("g")
    for name, dt in (("b", "bool"), ("i", "int64"), ("f", "float32")):
        g.add_input(name, TensorType(dt, ()))
    feeds = random_inputs(Model(g))
    assert all(isinstance(v, np.ndarray) and v.shape == () for v in feeds.values()), feeds


def test_stale_value_info_is_dropped_with_a_warning(tmp_path):
    """A declared value_info that strict inference contradicts (a Reshape's rank) is a stale
    hint onnxruntime merges leniently: dropped, said once, the artifact passes its checker."""
    from onnx import helper as h
    from onnx import numpy_helper as nh
    import onnx

    import opbridge

    g = h.make_graph([h.make_node("Reshape", ["x", "s"], ["r"]), h.make_node("Relu", ["r"], ["y"])], "g",
                     [_vi("x", [2, 3])], [_vi("y", None)], [nh.from_array(np.array([6], np.int64), "s")],
                     value_info=[_vi("r", [2, 3, 1])])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(src))
    res = opbridge.convert(str(src), to="onnx,tflite", out=str(tmp_path / "out"))
    for rec in res["targets"]:
        assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
        assert any("value_info" in w and "'r'" in w for w in rec["warnings"]), rec


def test_dims_named_question_mark_are_each_their_own(tmp_path):
    """paddle2onnx 0.x names every unknown dim "?": H and W are not one symbol."""
    from onnx import helper as h
    import onnx

    from translator.frontends import load
    from translator.ir import dims

    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [_vi("x", ["?", 3, "?", "?"])], [_vi("y", None)])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(src))
    assert dims.symbolic(load(str(src))) == {"x": ["x:0", "x:2", "x:3"]}


@pytest.mark.parametrize("target", ["onnx", "coreml"])
def test_a_declared_output_size_the_computation_contradicts_gives_way(target, tmp_path):
    """speechmos' AECMOS: x [batch, 1, 4] → Squeeze (no axes) → output declared [batch]. At
    batch 1 the squeeze keeps the 4 (onnxruntime returns [4]); once batch is fixed (Core ML)
    the declared (1,) is contradicted by the computed (4,), and the computed size wins."""
    from onnx import helper as h

    import opbridge

    src = _model(tmp_path / "m.onnx", [h.make_node("Squeeze", ["x"], ["s"]), h.make_node("Sigmoid", ["s"], ["y"])],
                 [_vi("x", ["batch", 1, 4])], [_vi("y", ["batch"])])
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.linspace(-2, 2, 4, dtype=np.float32).reshape(1, 1, 4))
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), inputs=str(feeds))
    (rec,) = res["targets"]
    assert rec["status"] == "ok", (rec.get("reason"), rec.get("detail"))


@pytest.mark.parametrize("target", ["onnx", "tensorflow", "tflite"])
def test_a_declared_output_rank_the_computation_contradicts_gives_way(target, tmp_path):
    """ddddocr (onnxruntime's dynamic quantizer kept the float model's output declaration): a
    Reshape to a shape computed at run time ([rows, 1, -1], rank 3) whose output is declared
    [1, seqlen] (rank 2). The declared rank is stale; the computed one is what runs."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    import opbridge

    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Slice", ["s", "zero", "one"], ["rows"]),
             h.make_node("Concat", ["rows", "tail"], ["shape"], axis=0),
             h.make_node("Relu", ["x"], ["r"]), h.make_node("Reshape", ["r", "shape"], ["y"])]
    inits = [nh.from_array(np.asarray([0], np.int64), "zero"), nh.from_array(np.asarray([1], np.int64), "one"),
             nh.from_array(np.asarray([1, -1], np.int64), "tail")]
    src = _model(tmp_path / "m.onnx", nodes, [_vi("x", ["rows", 6])], [_vi("y", [1, "seqlen"], T.FLOAT)], inits)
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.linspace(-2, 2, 30, dtype=np.float32).reshape(5, 6))
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), inputs=str(feeds))
    (rec,) = res["targets"]
    assert rec["status"] == "ok", (rec.get("reason"), rec.get("detail"), rec.get("check"))


def test_a_rank_decided_at_run_time_is_settled_by_fixing_the_dims(tmp_path):
    """pyannote's segmentation model: If(channels == 1) keeps x [B, C, T] (rank 3), else
    averages the channels (rank 2); a Flatten follows (both ranks run: with a 1-D pool the
    rank-2 branch could not, and that branch would be inlined instead). The rank is unknown
    while C is symbolic: TensorFlow refuses with dynamic_shape, so the check fixes the dims
    (C=1 folds the If) and says so."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    import opbridge

    then = h.make_graph([h.make_node("Identity", ["x"], ["t"])], "then", [], [_vi("t", None)])
    other = h.make_graph([h.make_node("ReduceMean", ["x"], ["e"], axes=[1], keepdims=0)], "else", [], [_vi("e", None)])
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "one"], ["c"], axis=0),
             h.make_node("Equal", ["c", "one"], ["mono"]),
             h.make_node("If", ["mono"], ["m"], then_branch=then, else_branch=other),
             h.make_node("Flatten", ["m"], ["y"], axis=1)]
    src = _model(tmp_path / "m.onnx", nodes, [_vi("x", ["B", "C", "T"])], [_vi("y", None, T.FLOAT)],
                 [nh.from_array(np.asarray(1, np.int64), "one")])
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.linspace(-2, 2, 60, dtype=np.float32).reshape(2, 1, 30))
    res = opbridge.convert(str(src), to="tensorflow", out=str(tmp_path / "out"), inputs=str(feeds))
    (rec,) = res["targets"]
    assert rec["status"] == "ok", (rec.get("reason"), rec.get("detail"), rec.get("check"))
    assert rec.get("fixed_dims", {}).get("C") == 1, rec


@pytest.mark.parametrize("declared, rows", [([], 1), (["N"], 3)])
def test_an_axesless_squeeze_over_run_time_dims_takes_the_declared_rank_on_openvino(declared, rows, tmp_path):
    """speechmos PLCMOS: a score [N, 1] squeezed without axes, then a sigmoid, declared [] (so N
    is 1 at run time); with the output declared [N] only the static 1 goes. OpenVINO's CPU
    plugin refuses the dynamic rank of an axes-less squeeze; the declared rank gives the axes."""
    from onnx import helper as h

    import opbridge

    from onnx import numpy_helper as nh

    nodes = [h.make_node("Squeeze", ["x"], ["s"]), h.make_node("Sigmoid", ["s"], ["g"]),
             h.make_node("Mul", ["g", "four"], ["m"]), h.make_node("Add", ["m", "one"], ["y"])]  # a MOS in [1, 5]
    src = _model(tmp_path / "m.onnx", nodes, [_vi("x", ["N", 1])], [_vi("y", declared)],
                 [nh.from_array(np.asarray(4.0, np.float32), "four"), nh.from_array(np.asarray(1.0, np.float32), "one")])
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=np.linspace(-2, 2, rows, dtype=np.float32).reshape(rows, 1))
    res = opbridge.convert(str(src), to="openvino", out=str(tmp_path / "out"), inputs=str(feeds))
    (rec,) = res["targets"]
    assert rec["status"] == "ok", (rec.get("reason"), rec.get("detail"), rec.get("check"))
