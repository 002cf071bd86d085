"""Exporter patterns from models in the wild, through every target: what ``torch.onnx``
writes for ``x.expand(2, -1, -1).sum(0)`` (TorchScript with static and dynamic dims, and the
dynamo exporter): an Expand to a shape computed by ConstantOfShape/Mul/Equal/Where, then a
ReduceSum over the expanded axis (once reported wrong on TFLite with no culprit node)."""
from __future__ import annotations

import pytest

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
