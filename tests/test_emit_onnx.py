"""The ONNX emitter: deterministic bytes, runtime-compatible versions, atomic saves, decompositions."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from emitters import onnx as onnx_backend
from translator.frontends.onnx import load_onnx
from translator.harness import compare, single_op_model

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"


def test_same_input_gives_byte_identical_output():
    a = onnx_backend.emit(load_onnx(MODEL)).SerializeToString(deterministic=True)
    b = onnx_backend.emit(load_onnx(MODEL)).SerializeToString(deterministic=True)
    assert a == b


def test_versions_are_what_the_runtime_loads():
    proto = onnx_backend.emit(load_onnx(MODEL))
    opset, irv = onnx_backend.runtime_limits()
    assert proto.opset_import[0].version == opset and proto.ir_version == irv
    onnx.checker.check_model(proto, full_check=True)


def test_save_is_atomic(tmp_path):
    out = tmp_path / "m.onnx"

    class Boom:
        def SerializeToString(self, deterministic=True):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        onnx_backend.save(Boom(), out)
    assert list(tmp_path.iterdir()) == []
    onnx_backend.save(onnx_backend.emit(load_onnx(MODEL)), out)
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_an_op_without_onnx_counterpart_is_decomposed():
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    model, feeds = single_op_model("scaled_tanh", [x], {"alpha": 2.0, "beta": 0.5})
    proto = onnx_backend.emit(model)
    assert [n.op_type for n in proto.graph.node] == ["Mul", "Tanh", "Mul"]
    (y,) = onnx_backend.run(proto, feeds)
    assert compare(2.0 * np.tanh(0.5 * x), y).ok


def test_float_floor_mod_is_decomposed_but_integer_floor_mod_is_native():
    f = np.asarray([-7.0, 7.0], np.float32), np.asarray([3.0, -3.0], np.float32)
    model, feeds = single_op_model("floor_mod", list(f), {})
    proto = onnx_backend.emit(model)
    assert "Mod" in [n.op_type for n in proto.graph.node]  # the trunc_mod inside, with fmod=1
    assert onnx_backend.run(proto, feeds)[0].tolist() == [2.0, -2.0]
    i = np.asarray([-7, 7], np.int32), np.asarray([3, -3], np.int32)
    model, feeds = single_op_model("floor_mod", list(i), {})
    proto = onnx_backend.emit(model)
    assert [n.op_type for n in proto.graph.node] == ["Mod"]
    assert onnx_backend.run(proto, feeds)[0].tolist() == [2, -2]
