"""Per-op dtype legalization: an op that only moves data (``moves_data`` trait) whose data
dtype the target's cell lacks is computed in one it has and cast back (exact)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh

pytest.importorskip("coremltools")


def _bool_gather_model(tmp_path, op: str):
    idx = nh.from_array(np.array([2, 0], np.int64) if op == "Gather" else np.array([[1], [0]], np.int64), "idx")
    out_shape = [2, 2] if op == "Gather" else [2, 5]
    nodes = [h.make_node(op, ["m", "idx"], ["g"], **({"axis": 1} if op == "Gather" else {})),
             h.make_node("Not", ["g"], ["y"])]
    g = h.make_graph(nodes, "mask", [h.make_tensor_value_info("m", T.BOOL, [2, 5])],
                     [h.make_tensor_value_info("y", T.BOOL, out_shape)], [idx])
    import onnx

    path = tmp_path / f"{op}.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("op", ["Gather", "GatherND"])
def test_a_bool_gather_on_coreml_is_widened_and_exact(tmp_path, op):
    """Core ML's gather/gather_nd take no bool (the padding masks of transformers): the
    node moves int32 copies and casts back; the check is numeric and exact."""
    from translator.run.check import check_model, model_loader
    from translator.compile.pipeline import compile, plan

    path = _bool_gather_model(tmp_path, op)
    model = model_loader(str(path))()
    ctx = plan(model, "coreml")
    assert not ctx.refusals and ctx.how["g"] == "legalized"
    done = compile(model, "coreml")
    assert any("moves bool data as int32" in w for w in done.ctx.warnings), done.ctx.warnings
    rep = check_model(lambda: model, ["coreml"])["backends"][0]
    assert rep.status == "pass" and rep.outputs[0].diff.max_abs == 0


def test_an_op_that_computes_is_not_widened():
    """``moves_data`` is a trait in the table; arithmetic ops never carry it."""
    from translator.table.loader import load_tables

    t = load_tables()
    assert "moves_data" in t.ops["gather"].traits and "moves_data" in t.ops["where"].traits
    assert not any("moves_data" in t.ops[o].traits for o in ("add", "reduce_sum", "cum_sum", "matmul"))


def test_torchscript_pad_sentinels_fold_and_clamp(tmp_path):
    """``F.pad`` as the TorchScript exporter writes it (a Slice with step -1 and end
    -9223372036854775807 on constant pads, then Transpose/Reshape/Cast) and ``x[:, :, :8]``:
    the chain folds, the folded leftovers are not range-checked, a live slice's sentinel
    bounds clamp, and the shape through the reflect pad is static again."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from translator.run.check import check_model, model_loader
    from translator.compile.pipeline import plan

    class M(torch.nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 2, 3, 0), mode="reflect")[:, :, 2:] * 2

    path = tmp_path / "pad.onnx"
    torch.onnx.export(M(), (torch.randn(1, 3, 10, 10),), str(path), dynamo=False, opset_version=17)
    model = model_loader(str(path))()
    for target in ("tflite", "coreml"):
        assert not plan(model, target).refusals, target
    rep = check_model(lambda: model, ["tflite"])["backends"][0]
    assert rep.status == "pass", (rep.reason, rep.detail)
