"""The PyTorch frontend: torch.export → core ATen → IR, checked against eager PyTorch."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

ROOT = Path(__file__).resolve().parent.parent


def _check(module, args, backends, **opts):
    from translator.run.check import check_model, report_json
    from translator.frontends import pytorch as frontend

    model = frontend.load(module, example_inputs=args, **opts)
    feeds = {v.name: a.numpy() for v, a in zip(model.graph.inputs, args)}
    res = report_json(check_model(lambda: model, backends, feeds, source=module, source_opts={}))
    assert res["source"].startswith("PyTorch"), res["source"]
    for b in res["backends"]:
        assert b["status"] == "pass", (b["backend"], b["reason"], b["detail"])
        for o in b["outputs"]:
            assert o["vs_source"] is not None and o["vs_source"]["ok"], (b["backend"], o)
    return model


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, groups=2)
        self.head = nn.Linear(8, 5)

    def forward(self, image):
        y = torch.relu(self.bn(self.conv(image)))
        y = nn.functional.max_pool2d(y, 2)
        y = nn.functional.interpolate(self.conv2(nn.functional.pad(y, (1, 1, 1, 1))), scale_factor=2)
        y = nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.softmax(self.head(y), dim=-1)


def _seeded(make):
    torch.manual_seed(0)
    m = make()
    with torch.no_grad():  # batch norm statistics other than 0/1
        for b in m.modules():
            if isinstance(b, nn.BatchNorm2d):
                b.running_mean.uniform_(-0.5, 0.5)
                b.running_var.uniform_(0.5, 1.5)
    return m.eval()


def test_small_cnn_numpy_onnx():
    m = _seeded(SmallCNN)
    model = _check(m, (torch.randn(2, 3, 16, 16),), ["numpy", "onnx"])
    assert [v.name for v in model.graph.inputs] == ["image"]
    assert [v.name for v in model.graph.outputs] == ["output"]
    hist = model.op_histogram()
    assert hist["conv"] == 2 and hist["batch_normalization"] == 1 and "max_pool" in hist


def test_mlp_layer_norm_gelu_every_runtime():
    m = _seeded(lambda: nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(approximate="tanh"),
                                      nn.Linear(16, 4)))
    model = _check(m, (torch.randn(3, 8),), ["numpy", "onnx", "pytorch", "openvino", "tflite"])
    assert model.op_histogram().get("layer_normalization") == 1
    gelu = next(n for n in model.graph.nodes if n.op == "gelu")
    assert gelu.attrs["approximate"] == "tanh"


def test_transformer_encoder_layer():
    m = _seeded(lambda: nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True))
    _check(m, (torch.randn(2, 5, 16),), ["numpy", "onnx"])


class LSTMNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 12, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return out, h


def test_lstm_unrolled():
    model = _check(_seeded(LSTMNet), (torch.randn(2, 4, 8),), ["numpy", "onnx"])
    assert [v.name for v in model.graph.outputs] == ["output_0", "output_1"]


def test_dynamic_batch_onnx_runs_at_two_sizes():
    import onnxruntime as ort

    from translator.frontends import pytorch as frontend
    from translator.compile.pipeline import compile

    m = _seeded(lambda: nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Flatten(0)))
    batch = torch.export.Dim("batch", min=1, max=64)
    model = frontend.load(m, example_inputs=(torch.randn(2, 6),), dynamic_shapes=({0: batch},))
    assert model.graph.inputs[0].type.shape == ("batch", 6)
    proto = compile(model, "onnx").artifact
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 3):
        x = torch.randn(n, 6)
        got = sess.run(None, {"input": x.numpy()})[0]
        np.testing.assert_allclose(got, m(x).detach().numpy(), rtol=1e-5, atol=1e-6)
        assert got.shape == (4 * n,)


def test_python_api_convert(tmp_path):
    import opbridge

    m = _seeded(lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.Sigmoid()))
    out = tmp_path / "m.onnx"
    rec = opbridge.convert(m, (torch.randn(1, 3, 8, 8),), to="onnx", out=str(out))
    assert rec["written"] and out.is_file(), rec
    assert rec["targets"][0]["check"]["status"] == "pass", rec


_FACTORY = """
import torch

def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())

class Bad(torch.nn.Module):
    def forward(self, x):
        return torch.lgamma(x) + torch.digamma(x)

def bad():
    return Bad()
"""


def _cli(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_factory_and_unmapped_op(tmp_path):
    import onnxruntime as ort

    (tmp_path / "tinymods.py").write_text(textwrap.dedent(_FACTORY))
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = _cli(tmp_path, "convert", "tinymods:make", "--example-inputs", "in.npz", "--to", "onnx", "-o", "out.onnx",
             "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(r.stdout)
    assert rec["targets"][0]["check"]["status"] == "pass", rec
    assert rec["targets"][0]["check"]["source"].startswith("PyTorch")
    sys.path.insert(0, str(tmp_path))
    try:
        import tinymods
    finally:
        sys.path.remove(str(tmp_path))
    sess = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    assert name == "input"  # nn.Sequential.forward's parameter
    np.testing.assert_allclose(sess.run(None, {name: x})[0], tinymods.make()(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    # every unmapped ATen op in one line, with the first node's name; exit 2; nothing written
    r = _cli(tmp_path, "convert", "tinymods:bad", "--example-inputs", "in.npz", "--to", "onnx", "-o", "bad.onnx")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "unsupported_op" in ln]
    assert len(lines) == 1, r.stdout + r.stderr
    assert "aten.lgamma.default" in lines[0] and "aten.digamma.default" in lines[0] and "node 'lgamma'" in lines[0]
    assert not (tmp_path / "bad.onnx").exists()


def test_every_handler_resolves_through_the_table():
    from translator.frontends.pytorch_ops import HANDLERS, OPS
    from translator.table.loader import load_tables

    index = load_tables().reverse_index("pytorch")
    wrong = {k: (OPS[k], [op for op, _ in index.get(k, [])]) for k in HANDLERS
             if not index.get(k) or index[k][0][0] != OPS[k]}
    assert not wrong, wrong


def test_detection_is_cheap_and_exact(tmp_path):
    from translator.frontends import detect, pytorch

    assert pytorch.matches("pkg.mod:make") and not pytorch.matches("model.onnx")
    assert pytorch.matches(nn.ReLU()) and not pytorch.matches(object())
    p = tmp_path / "a:b"
    p.write_text("")
    assert not pytorch.matches(str(p))  # an existing path is not a factory
    assert detect("x.y:z").NAME == "pytorch"


def test_pt2_file(tmp_path):
    """A torch.export.save file is read with torch.export.load (not pickle) and checked against its module."""
    m = _seeded(lambda: nn.Sequential(nn.Linear(4, 3), nn.Softplus(beta=2.0)))
    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(m, (torch.randn(2, 4),)), str(path))
    from translator.run.check import check_model, report_json
    from translator.frontends import detect

    fe = detect(str(path))
    assert fe.NAME == "pytorch"
    model = fe.load(str(path))
    res = report_json(check_model(lambda: model, ["numpy"], None, source=str(path), source_opts={}))
    b = res["backends"][0]
    assert b["status"] == "pass" and b["outputs"][0]["vs_source"]["ok"], b


def test_instance_norm_reads_as_batch_statistics(tmp_path):
    """``nn.InstanceNorm2d`` (affine or not) exports as ``_native_batch_norm_legit.no_stats`` over
    the input reshaped to one channel per instance: the batch's own statistics, no running ones."""
    import torch

    import opbridge

    class UNetBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.n1 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.InstanceNorm2d(8, affine=True)
            self.c2, self.n2 = torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.InstanceNorm2d(8)
            self.out = torch.nn.Conv2d(16, 1, 1)

        def forward(self, x):
            a = torch.relu(self.n1(self.c1(x)))
            b = torch.relu(self.n2(self.c2(torch.nn.functional.max_pool2d(a, 2))))
            return torch.sigmoid(self.out(torch.cat([a, torch.nn.functional.interpolate(b, scale_factor=2.0)], 1)))

    res = opbridge.convert(UNetBlock().eval(), (torch.randn(2, 3, 16, 16),), to="onnx,tflite",
                           out=str(tmp_path / "out"))
    for rec in res["targets"]:
        assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
