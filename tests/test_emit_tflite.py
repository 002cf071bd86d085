"""The TFLite emitter: conversion with builtins only, reported dtype legalization with a
range check, retrying through the table's decompositions, atomic and deterministic saves."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from emitters import tflite  # noqa: E402
from translator.errors import Unsupported  # noqa: E402
from translator.frontends.onnx import load_onnx  # noqa: E402
from translator.harness import compare, single_op_model  # noqa: E402
from translator.interpreter import run as ref_run  # noqa: E402

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
    assert "# warning:" in art.source
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
    model, _ = single_op_model("erf", [np.zeros(3, np.float32)], {})
    with pytest.raises(Unsupported) as ei:
        tflite.emit(model)
    assert ei.value.code == "unsupported_op" and ei.value.backend == "tflite"


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
