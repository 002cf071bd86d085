"""Graph I/O names per backend (``translator/ir/names.py``: one rule set for every emitter)
and byte-identical artifacts: hostile names (``x`` and ``X``, Python keywords and
builtins, coremltools' reserved ``tuple``) convert and check on every target; converting
twice gives the same bytes in every file of every target."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from translator.ir.names import IO_RULES, io_names
from translator.compile.target import names

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "examples" / "models" / "tiny_cnn.onnx"
TARGETS = tuple(names(include_reference=False))
HOSTILE_IN = ["x", "X", "tuple", "self", "class", "input", "__init__"]
HOSTILE_OUT = ["Y", "y", "return"]


def hostile_model(path: Path) -> Path:
    """y = relu(x + X + tuple + …), Y = -(…), return = (…) * 2 over inputs named to collide."""
    nodes, cur = [], HOSTILE_IN[0]
    for i, name in enumerate(HOSTILE_IN[1:]):
        nodes.append(helper.make_node("Add", [cur, name], [f"t{i}"]))
        cur = f"t{i}"
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes += [helper.make_node("Neg", [cur], ["Y"]), helper.make_node("Relu", [cur], ["y"]),
              helper.make_node("Mul", [cur, "two"], ["return"])]
    g = helper.make_graph(nodes, "hostile", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])
                                             for n in HOSTILE_IN],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in HOSTILE_OUT], [two])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


# ----------------------------------------------------------------------------- the rules
def test_tensorflow_names_differ_in_more_than_case():
    io = io_names("tensorflow", ["x", "X", "Input", "in"], ["Y", "y"])
    assert io.inputs == ["x", "x_1", "input_", "in_"]
    assert io.outputs == ["Y", "y"]  # output keys are not lowercased by TensorFlow
    assert "tensorflow: input 'X' is named 'x_1' in the TensorFlow signature " \
           "(TensorFlow lowercases signature argument names; collides with 'x')" in io.warnings
    assert io.renamed() == {"inputs": {"X": "x_1", "Input": "input_", "in": "in_"}, "outputs": {}}
    assert all(k == k.lower() and k.isidentifier() for k in io.inputs)


def test_every_backend_gives_unique_valid_names():
    names_in = HOSTILE_IN + ["a.b", "a:b", "0x", "", "X_1", "x_1"]
    for backend, (rin, rout) in IO_RULES.items():
        io = io_names(backend, names_in, HOSTILE_OUT + ["x"])
        assert io == io_names(backend, names_in, HOSTILE_OUT + ["x"])  # deterministic
        key = str.lower if rin.case_insensitive else str
        assert len({key(n) for n in io.inputs}) == len(io.inputs), (backend, io.inputs)
        if rin.shared:
            assert not {key(n) for n in io.inputs} & {key(n) for n in io.outputs}, (backend, io.outputs)
        for n, rules in [(n, rin) for n in io.inputs] + [(n, rout) for n in io.outputs]:
            assert n, backend
            if rules.identifier:
                assert n.isidentifier() and n not in rules.reserved, (backend, n)
            if rules.python:
                assert not n in ("tuple", "self", "class", "input", "return"), (backend, n)
        changed = io.renamed()
        assert len(io.warnings) == len(changed["inputs"]) + (0 if rout.silent else len(changed["outputs"]))


def test_names_kept_where_the_backend_allows_them():
    assert io_names("onnx", HOSTILE_IN, HOSTILE_OUT).inputs == HOSTILE_IN
    assert io_names("openvino", ["a.b:0", "X"], ["y"]).inputs == ["a.b:0", "X"]
    assert io_names("coreml", ["x", "X", "tuple", "state"], ["y"]).inputs == ["x", "X", "tuple_", "state_"]
    assert io_names("pytorch", ["x", "X", "class"], ["y"]).inputs == ["x", "X", "class_"]
    assert io_names("onnx", ["x"], ["y"]).warnings == []


# ----------------------------------------------------------------------------- every target
def _convert(model: Path, out: Path, *extra: str) -> dict:
    import contextlib
    import io

    from translator.cli.main import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["convert", str(model), "--to", "all", "-o", str(out), "--json", *extra])
    doc = json.loads(buf.getvalue())
    doc["rc"] = rc
    return doc


def test_hostile_names_convert_and_check_on_every_target(tmp_path):
    model = hostile_model(tmp_path / "hostile.onnx")
    doc = _convert(model, tmp_path / "out")
    by = {r["target"]: r for r in doc["targets"]}
    assert sorted(by) == sorted(TARGETS)
    for t, r in by.items():
        assert r["status"] == "ok", (t, r)
        assert r["check"]["status"] in ("pass", "structural_only"), (t, r["check"])
    assert doc["rc"] == 0
    assert any("input 'X' is named 'x_1' in the TensorFlow signature" in w for w in by["tensorflow"]["warnings"])
    assert any("input 'tuple' is named 'tuple_' in the Core ML model" in w for w in by["coreml"]["warnings"])

    # TFLite: one serving_default signature holding every input
    import tensorflow as tf

    interp = tf.lite.Interpreter(model_path=by["tflite"]["output"])
    sig = interp.get_signature_list()
    assert list(sig) == ["serving_default"]
    assert sig["serving_default"]["inputs"] == sorted(["x", "x_1", "tuple_", "self_", "class_", "input_", "init"])
    assert sorted(sig["serving_default"]["outputs"]) == sorted(HOSTILE_OUT)
    feeds = {n: np.full((2, 3), k + 1, np.float32) for k, n in enumerate(HOSTILE_IN)}
    total = sum(feeds.values())
    keys = dict(zip(HOSTILE_IN, io_names("tflite", HOSTILE_IN, HOSTILE_OUT).inputs))
    got = interp.get_signature_runner()(**{keys[n]: v for n, v in feeds.items()})
    np.testing.assert_allclose(got["return"], total * 2)
    from tensorflow.lite.tools import flatbuffer_utils

    fbm = flatbuffer_utils.read_model(by["tflite"]["output"])
    meta = {(md.name.decode() if isinstance(md.name, bytes) else md.name): bytes(fbm.buffers[md.buffer].data)
            for md in fbm.metadata}
    assert json.loads(meta["opbridge.io_names"])["inputs"]["X"] == "x_1"

    # the SavedModel's signature: the same keys, and the mapping in its report
    saved = tf.saved_model.load(by["tensorflow"]["output"]).signatures["serving_default"]
    got = saved(**{keys[n]: tf.constant(v) for n, v in feeds.items()})
    np.testing.assert_allclose(got["Y"].numpy(), -total)
    report = json.loads((Path(by["tensorflow"]["output"]) / "assets.extra" / "opbridge.json").read_text())
    assert report["io_names"]["inputs"]["X"] == "x_1"

    # Core ML: the package keeps the mapping in its metadata
    from coremltools.proto import Model_pb2

    pkg = Path(by["coreml"]["output"]) / "model.mlpackage"
    spec = Model_pb2.Model()
    spec.ParseFromString(next(pkg.rglob("*.mlmodel")).read_bytes())
    assert [f.name for f in spec.description.input] == ["x", "X", "tuple_", "self", "class_", "input", "init"]
    meta = json.loads(spec.description.metadata.userDefined["opbridge.io_names"])
    assert meta["inputs"]["tuple"] == "tuple_" and meta["outputs"]["return"] == "return_"


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("which", ["tiny_cnn", "hostile"])
def test_every_target_writes_the_same_bytes_twice(tmp_path, which):
    model = TINY if which == "tiny_cnn" else hostile_model(tmp_path / "hostile.onnx")
    runs = []
    for d in ("a", "b"):
        doc = _convert(model, tmp_path / d, "--no-check", "--quiet")
        assert doc["rc"] == 0, doc
        runs.append(_files(tmp_path / d))
    a, b = runs
    assert sorted(a) == sorted(b)
    stem = model.stem
    for t, suffix in (("onnx", ".onnx"), ("pytorch", "_pytorch"), ("tensorflow", "_savedmodel"),
                      ("tflite", ".tflite"), ("openvino", "_openvino"), ("coreml", "_coreml"),
                      ("stablehlo", "_jax"), ("mlx", "_mlx")):
        mine = [k for k in a if k.startswith(stem + suffix)]
        assert mine, (t, sorted(a))
        differ = [k for k in mine if a[k] != b[k]]
        assert not differ, f"{t}: {differ} differ between two conversions"
    assert any(k.endswith("fingerprint.pb") for k in a)  # TensorFlow's fingerprint is kept, deterministic


def test_saved_model_loads_and_converts_after_normalization(tmp_path):
    import tensorflow as tf

    doc = _convert(TINY, tmp_path / "o", "--no-check", "--quiet")
    saved = next(r["output"] for r in doc["targets"] if r["target"] == "tensorflow")
    fn = tf.saved_model.load(saved).signatures["serving_default"]
    x = np.random.RandomState(0).randn(*fn.structured_input_signature[1]["input_"].shape).astype(np.float32)
    import onnxruntime as ort

    want = ort.InferenceSession(str(TINY)).run(None, {"input": x})[0]
    got = list(fn(input_=tf.constant(x)).values())[0].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert tf.saved_model.experimental.read_fingerprint(saved).saved_model_checksum
    assert tf.lite.TFLiteConverter.from_saved_model(saved).convert()


def test_tflite_segments_keep_the_names_of_an_unsegmented_conversion(monkeypatch, tmp_path):
    from emitters import tflite
    from emitters.tflite import segments as tflite_segments
    from translator.frontends.onnx import load_onnx

    path = hostile_model(tmp_path / "hostile.onnx")
    whole = tflite.emit(load_onnx(path))
    monkeypatch.setattr(tflite_segments, "SEGMENT_NODES", 3)
    art = tflite.emit(load_onnx(path))
    assert art.options.get("segments", 1) > 1
    assert [(p.name, p.key) for p in art.inputs] == [(p.name, p.key) for p in whole.inputs]
    assert [(p.name, p.key) for p in art.outputs] == [(p.name, p.key) for p in whole.outputs]
    assert [w for w in art.warnings if " is named " in w] == whole.io_warnings
    from tensorflow.lite.tools import flatbuffer_utils

    fbm = flatbuffer_utils.convert_bytearray_to_object(bytearray(art.tflite))
    names = [md.name.decode() if isinstance(md.name, bytes) else md.name for md in fbm.metadata]
    assert names.count("opbridge.io_names") == 1
    feeds = {n: np.full((2, 3), k + 1, np.float32) for k, n in enumerate(HOSTILE_IN)}
    for a, b in zip(tflite.run(art, feeds), tflite.run(whole, feeds)):
        np.testing.assert_array_equal(a, b)


def test_pytorch_folder_records_renamed_parameters(tmp_path):
    from safetensors import safe_open

    from emitters import pytorch
    from translator.frontends.onnx import load_onnx

    art = pytorch.emit(load_onnx(hostile_model(tmp_path / "hostile.onnx")))
    assert "def forward(self, x, X, tuple_, self_, class_, input_, init):" in art.source
    assert any("input 'self' is named 'self_' in the PyTorch forward()" in w for w in art.warnings)
    art.save(tmp_path / "pt")
    with safe_open(str(tmp_path / "pt" / pytorch.WEIGHTS_FILE), "pt") as f:
        meta = json.loads(f.metadata()["opbridge.io_names"])
    assert meta["inputs"] == {"tuple": "tuple_", "self": "self_", "class": "class_", "input": "input_",
                              "__init__": "init"}
