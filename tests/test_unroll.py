"""The unrolled recurrences (translator/compile/unroll.py): exact against the ONNX node tests' expected
outputs, against onnxruntime on PyTorch's own GRU/LSTM exports, and used by the pipeline
when a target's native rule refuses (Core ML's gru without reset_after)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from translator.compile import interpreter, unroll
from translator.run.harness import convert
from translator.ir.infer import infer
from translator.table.loader import load_tables

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def _unrolled_run(model, feeds):
    """Freeze the recurrence's W/R/B/P inputs into constants, unroll it, run the reference."""
    m = convert("numpy", model)
    g = m.graph
    node = next(n for n in g.nodes if n.op in unroll.OPS)
    feeds = dict(feeds)
    for i in (1, 2, 3, 7):
        if i < len(node.inputs) and node.inputs[i] is not None and node.inputs[i] in g.inputs:
            v = node.inputs[i]
            k = g.add_constant(v.name + "_c", feeds.pop(v.name), v.type.dtype)
            g.replace_all_uses_with(v, k)
            g.inputs.remove(v)
    why = unroll.why_not(node)
    if why:
        return why, None
    n_before = len(g.nodes)
    unroll.expand(g, node)
    infer(g, load_tables())
    assert len(g.nodes) > n_before and not any(n.op in unroll.OPS for n in g.nodes)
    return None, interpreter.run(m, feeds, {})


def _node_cases():
    from nodetests import load_cases

    return load_cases(r"test_(gru|lstm|simple_rnn|rnn)_", None)


@pytest.mark.parametrize("case", _node_cases(), ids=lambda c: c.name)
def test_unrolled_matches_the_node_test(case):
    from peers._common import feeds_for
    from translator.frontends.onnx import from_proto

    for inputs, expected in case.data_sets:
        why, got = _unrolled_run(from_proto(case.model, ".", case.name), feeds_for(case.model, inputs))
        if why is not None:  # declared limits: the node keeps its native lowering or is refused
            assert case.name == "test_lstm_with_peepholes" and "sequence_lens" in why
            return
        for e, g in zip(expected, got):
            np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(e, np.float64), rtol=1e-5, atol=1e-6)


def _torch_rnn_onnx(tmp_path, kind: str, bidirectional: bool) -> Path:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    cls = {"gru": torch.nn.GRU, "lstm": torch.nn.LSTM}[kind]
    mod = cls(8, 16, num_layers=2, bidirectional=bidirectional).eval()
    path = tmp_path / f"{kind}.onnx"
    torch.onnx.export(mod, (torch.randn(5, 2, 8),), str(path), dynamo=False, input_names=["x"],
                      output_names=["y", *(["h", "c"] if kind == "lstm" else ["h"])])
    return path


@pytest.mark.parametrize("kind, bidirectional", [("gru", False), ("gru", True), ("lstm", True)])
def test_unrolled_pytorch_exports_match_onnxruntime(tmp_path, kind, bidirectional):
    """PyTorch exports GRU with linear_before_reset=1 and weights as initializers."""
    import onnxruntime as ort

    from translator.frontends.onnx import load_onnx

    path = _torch_rnn_onnx(tmp_path, kind, bidirectional)
    model = load_onnx(path)
    if kind == "gru":
        assert all(int(n.attrs.get("linear_before_reset", 0)) == 1 for n in model.graph.nodes if n.op == "gru")
    x = np.random.default_rng(0).standard_normal((5, 2, 8)).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    m = convert("numpy", model)
    for node in [n for n in m.graph.nodes if n.op in unroll.OPS]:
        assert unroll.why_not(node) is None
        unroll.expand(m.graph, node)
    infer(m.graph, load_tables())
    got = interpreter.run(m, {"x": x}, {})
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_a_refused_native_gru_falls_back_to_the_unrolled_cells(tmp_path):
    """Core ML's MIL gru has no reset_after on iOS17 (linear_before_reset=1, PyTorch's form):
    the rule refuses, and the pipeline decomposes instead of failing."""
    pytest.importorskip("coremltools")
    from translator.frontends.onnx import load_onnx
    from translator.compile.pipeline import plan

    model = load_onnx(_torch_rnn_onnx(tmp_path, "gru", False))
    ctx = plan(model, "coreml")
    assert not ctx.refusals, ctx.refusals
    grus = [n.name for n in model.graph.nodes if n.op == "gru"]
    assert grus and all(ctx.how.get(n) == "decomposed" for n in grus)
