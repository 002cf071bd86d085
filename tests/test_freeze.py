"""``convert --freeze NAME=VALUE``: an input that is a setting (silero-vad's sample rate ``sr``,
which an ``If`` turns into a 16 kHz or an 8 kHz network) becomes a constant, the ``If`` folds,
and the branch never taken is gone from every artifact; the check still feeds the value to
the source runtime, which takes the input."""
from __future__ import annotations

import numpy as np
import pytest


def _vad_like(path):
    """out = If(sr == 16000, then: relu(x) * 2, else: a branch TensorFlow cannot type at any
    size (a Reshape of x to a run-time shape of run-time length, then a 1-D MaxPool))."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    vi = h.make_tensor_value_info
    then = h.make_graph([h.make_node("Relu", ["x"], ["r"]), h.make_node("Mul", ["r", "two"], ["t"])], "then", [],
                        [vi("t", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Shape", ["x"], ["s"]), h.make_node("Concat", ["one", "s"], ["s2"], axis=0),
                          h.make_node("Reshape", ["x", "s2"], ["u"]),
                          h.make_node("MaxPool", ["u"], ["e"], kernel_shape=[2], strides=[2])], "else", [],
                         [vi("e", T.FLOAT, None)])
    nodes = [h.make_node("Equal", ["sr", "k16"], ["c"]), h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    inits = [nh.from_array(np.asarray(16000, np.int64), "k16"), nh.from_array(np.asarray(2.0, np.float32), "two"),
             nh.from_array(np.asarray([1], np.int64), "one")]
    g = h.make_graph(nodes, "vad", [vi("x", T.FLOAT, [1, "n"]), vi("sr", T.INT64, [])], [vi("y", T.FLOAT, None)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("target", ["onnx", "tensorflow", "tflite", "openvino"])
def test_a_frozen_setting_folds_its_if_and_checks_against_the_source(target, tmp_path):
    import opbridge

    src = _vad_like(tmp_path / "vad.onnx")
    sets = [{"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8), "sr": np.asarray(16000, np.int64)}]
    res = opbridge.convert(str(src), to=target, out=str(tmp_path / "out"), inputs=sets, freeze={"sr": 16000})
    (rec,) = res["targets"]
    assert rec["status"] == "ok", (rec.get("reason"), rec.get("detail"), rec.get("check"))
    assert rec["frozen_inputs"] == {"sr": 16000}
    assert rec["check"]["source"] == "onnxruntime"


def test_frozen_inputs_leave_the_graph():
    from translator.ir.freeze import freeze, frozen_values, parse
    from translator.ir.graph import Graph, Model, TensorType

    g = Graph()
    x = g.add_input("x", TensorType("float32", (2,)))
    sr = g.add_input("sr", TensorType("int64", ()))
    g.outputs = [g.add_node("cast", [sr], {"to": 1}, outputs=["c"]).outputs[0], x]
    m = freeze(Model(g, source="<m>", source_format="ir"), parse(["sr=8000"]))
    assert [v.name for v in m.graph.inputs] == ["x"]
    assert m.graph.nodes[0].inputs[0].is_const and int(m.graph.nodes[0].inputs[0].const) == 8000
    assert frozen_values(m.metadata)["sr"].dtype == np.int64


@pytest.mark.parametrize("spec, why", [(["sr"], "NAME=VALUE"), (["sr=fast"], "not a number"),
                                       (["rate=1"], "no such input"), (["sr=1,2"], "shape")])
def test_bad_freeze_options_are_one_line(spec, why):
    from translator.ir.freeze import freeze, parse
    from translator.ir.graph import Graph, Model, TensorType
    from translator.table.errors import OpbridgeError

    g = Graph()
    g.add_input("sr", TensorType("int64", ()))
    with pytest.raises(OpbridgeError) as e:
        freeze(Model(g, source="<m>", source_format="ir"), parse(spec))
    assert e.value.code == "bad_option" and why in str(e.value) and "\n" not in str(e.value)


def test_the_cli_freezes_and_says_so(tmp_path):
    import json
    import subprocess
    import sys

    src = _vad_like(tmp_path / "vad.onnx")
    np.savez(tmp_path / "a.npz", x=np.ones((1, 6), np.float32), sr=np.asarray(16000, np.int64))
    p = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(src), "--to", "onnx", "-o",
                        str(tmp_path / "o.onnx"), "--freeze", "sr=16000", "--inputs", str(tmp_path / "a.npz"), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    rec = json.loads(p.stdout)["targets"][0]
    assert rec["frozen_inputs"] == {"sr": 16000} and rec["status"] == "ok"
    bad = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(src), "--to", "onnx", "-o",
                          str(tmp_path / "b.onnx"), "--freeze", "rate=1"], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "no such input" in bad.stderr and not (tmp_path / "b.onnx").exists()
