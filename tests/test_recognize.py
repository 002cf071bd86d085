"""translator/compile/passes/recognize.py: a hard swish spelled in elementwise pieces is one
``hard_swish`` node, in every spelling exporters write, and nothing else is."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from translator.compile.passes import recognize
from translator.frontends.onnx import from_proto


def _model(nodes, extra_out=None):
    consts = [nh.from_array(np.array(v, np.float32), n) for n, v in
              (("three", 3.0), ("zero", 0.0), ("six", 6.0), ("sixth", np.float32(1 / 6)), ("five", 5.0))]
    outs = [h.make_tensor_value_info("y", T.FLOAT, [2, 3])]
    if extra_out:
        outs.append(h.make_tensor_value_info(extra_out, T.FLOAT, [2, 3]))
    g = h.make_graph(nodes, "hs", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], outs, consts)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _gate(top="c"):
    return [h.make_node("Add", ["x", "three"], ["a"]), h.make_node("Clip", ["a", "zero", "six"], [top])]


SPELLINGS = {
    "div_after": _gate() + [h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Div", ["m", "six"], ["y"])],
    "mul_sixth_after": _gate() + [h.make_node("Mul", ["c", "x"], ["m"]), h.make_node("Mul", ["sixth", "m"], ["y"])],
    "div_inside": _gate() + [h.make_node("Div", ["c", "six"], ["d"]), h.make_node("Mul", ["x", "d"], ["y"])],
    "mul_sixth_inside": _gate() + [h.make_node("Mul", ["c", "sixth"], ["d"]), h.make_node("Mul", ["d", "x"], ["y"])],
    "hard_sigmoid": [h.make_node("HardSigmoid", ["x"], ["d"], alpha=1 / 6, beta=0.5), h.make_node("Mul", ["x", "d"], ["y"])],
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_every_spelling_is_one_hard_swish(name):
    from translator import reference

    m = from_proto(_model(SPELLINGS[name]))
    x = np.linspace(-5, 5, 6, dtype=np.float32).reshape(2, 3)
    want = x * np.clip(x + 3, 0, 6) / 6
    assert recognize.hard_swish(m.graph) == 1
    assert [n.op for n in m.graph.nodes] == ["hard_swish"] and m.graph.outputs[0].name == "y"
    got = reference.get("hard_swish")(x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", ["other_constant", "piece_read_elsewhere", "other_alpha", "other_input"])
def test_look_alikes_are_left_as_they_are(case):
    nodes = {
        "other_constant": _gate() + [h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Div", ["m", "five"], ["y"])],
        "piece_read_elsewhere": _gate() + [h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Div", ["m", "six"], ["y"]),
                                           h.make_node("Neg", ["c"], ["z"])],
        "other_alpha": [h.make_node("HardSigmoid", ["x"], ["d"], alpha=0.2, beta=0.5), h.make_node("Mul", ["x", "d"], ["y"])],
        "other_input": [h.make_node("Neg", ["x"], ["n"]), h.make_node("Add", ["n", "three"], ["a"]),
                        h.make_node("Clip", ["a", "zero", "six"], ["c"]), h.make_node("Mul", ["x", "c"], ["m"]),
                        h.make_node("Div", ["m", "six"], ["y"])],
    }[case]
    m = from_proto(_model(nodes, extra_out="z" if case == "piece_read_elsewhere" else None))
    before = [n.op for n in m.graph.nodes]
    assert recognize.hard_swish(m.graph) == 0
    assert [n.op for n in m.graph.nodes] == before
