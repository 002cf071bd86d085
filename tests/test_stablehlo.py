"""The StableHLO target (``--to stablehlo`` / ``--to jax``): a standalone JAX module, its
``jax.export`` serialization and StableHLO text; inputs that steer the code (axes, shapes
fed at run time) as static arguments; a node JAX rejects refused while lowering."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from translator.compile.pipeline import compile
from translator.compile.target import aliases, get
from translator.frontends.onnx import from_proto
from translator.table.errors import Unsupported

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("jax", reason="the stablehlo target needs jax: pip install 'opbridge[stablehlo]'")


def _cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.standard_normal((4 * 4 * 4, 5)).astype(np.float32), "fc")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "shape")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["p", "shape"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], [w, b, fc, shape])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _reference(model: onnx.ModelProto, feeds: dict) -> list:
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, feeds)


def _import(folder: Path):
    spec = importlib.util.spec_from_file_location("converted_jax_model", folder / "model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_jax_is_another_name_of_the_stablehlo_target():
    assert aliases()["jax"] == "stablehlo"
    assert get("jax") is get("stablehlo")


def test_the_folder_is_a_standalone_module_its_export_and_stablehlo_text(tmp_path):
    import jax
    from jax import export

    model = _cnn()
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = _reference(model, {"x": x})[0]
    target = get("stablehlo")
    art = compile(from_proto(model, ".", "cnn"), target).artifact
    out = target.save(art, tmp_path / "cnn_jax")
    assert sorted(p.name for p in out.iterdir()) == ["model.jax_export", "model.mlir", "model.py",
                                                     "weights.safetensors"]
    source = (out / "model.py").read_text()
    assert "opbridge" not in source.split('"""', 2)[2].split("VERSION")[0]  # no opbridge import
    assert "import translator" not in source and "from translator" not in source
    # the module as a user imports it
    got = _import(out).load()(x)
    np.testing.assert_allclose(np.asarray(got[0]), want, rtol=1e-4, atol=1e-5)
    # the serialized export, weights as its first argument (never baked into the module)
    from safetensors.numpy import load_file

    exp = export.deserialize(bytearray((out / "model.jax_export").read_bytes()))
    params = load_file(str(out / "weights.safetensors"))
    np.testing.assert_allclose(np.asarray(exp.call(params, x)[0]), want, rtol=1e-4, atol=1e-5)
    text = (out / "model.mlir").read_text()
    assert "stablehlo.convolution" in text and "stablehlo.reduce_window" in text and "stablehlo.dot_general" in text
    # no Python traceback locations: they named opbridge's own path and the generated code's
    # columns, and two conversions of one model differed by a byte
    assert "runtime.py" not in text and '"<string>"' not in text
    again = target.save(compile(from_proto(model, ".", "cnn"), target).artifact, tmp_path / "again")
    for name in ("model.jax_export", "model.mlir", "model.py", "weights.safetensors"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name
    [main] = [line for line in text.splitlines() if "func.func public @main" in line]
    assert "tensor<4x3x3x3xf32>" in main.split("->", 1)[0]  # the conv weight is an argument
    # the written folder runs through the target's own loader: the deserialized export
    back = target.load(out, art)
    assert back.exported is not None
    np.testing.assert_allclose(target.run(back, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    del jax


def test_an_input_that_steers_the_code_is_a_static_argument(tmp_path):
    """ReduceSum's axes fed at run time: JAX needs them when it traces, so the function is
    specialized per value (jax.jit static argument) and no single export is written."""
    g = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)], "rs",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                           helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    target = get("stablehlo")
    art = compile(from_proto(model, ".", "rs"), target).artifact
    assert art.static_inputs == ["axes"]
    out = target.save(art, tmp_path / "rs_jax")
    assert not (out / "model.jax_export").exists()
    call = _import(out).load()
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for axis in (0, 2, -1):
        axes = np.array([axis], np.int64)
        np.testing.assert_allclose(np.asarray(call(x, axes)[0]), _reference(model, {"x": x, "axes": axes})[0])
        np.testing.assert_allclose(target.run(target.load(out, art), {"x": x, "axes": axes})[0],
                                   x.sum(axis=axis, keepdims=True))


def test_code_jax_rejects_is_a_refusal_with_its_reason():
    """Pow of an int32 base by a float exponent: jax.numpy's pow takes no integer base with a
    float exponent; the trial (jax.eval_shape) finds it while lowering, so it is a refusal
    naming the node, not a crash when the module first runs."""
    g = helper.make_graph([helper.make_node("Pow", ["x", "e"], ["y"], name="the_pow")], "p",
                          [helper.make_tensor_value_info("x", TensorProto.INT32, [3]),
                           helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT32, [3])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    with pytest.raises(Unsupported) as err:
        compile(from_proto(model, ".", "p"), get("stablehlo"))
    assert "the_pow" in str(err.value) and "JAX rejects the code" in str(err.value)


def test_cli_converts_to_jax_and_checks(tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(_cnn(), path)
    proc = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(path), "--to", "jax", "-o",
                           str(tmp_path / "out"), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    [rec] = json.loads(proc.stdout)["targets"]
    assert rec["target"] == "stablehlo" and rec["status"] == "ok" and rec["check"]["status"] == "pass"
    assert rec["check"]["outputs"][0]["vs_source"]["ok"]
    bad = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(path), "--to", "jaxx", "-o",
                          str(tmp_path / "bad")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "jax" in bad.stderr and "stablehlo" in bad.stderr


def _symbolic_cnn() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["y"])]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], [w, fc])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_symbolic_dims_are_exported_as_shape_polymorphism(tmp_path):
    """Batch, height and width stay symbolic in the export (``?`` in the StableHLO module), and
    the one deserialized export runs at two sizes of each."""
    import opbridge
    from jax import export

    path = tmp_path / "cnn.onnx"
    onnx.save(_symbolic_cnn(), path)
    res = opbridge.convert(str(path), to="jax", out=str(tmp_path / "out"))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert rec["dynamic_dims"] == {"x": ["N", "H", "W"]} and "fixed_dims" not in rec
    folder = next(p.parent for p in (tmp_path / "out").rglob("model.jax_export"))
    assert "tensor<?x3x?x?xf32>" in (folder / "model.mlir").read_text()
    exp = export.deserialize(bytearray((folder / "model.jax_export").read_bytes()))
    assert exp.in_avals[-1].shape[1] == 3 and not isinstance(exp.in_avals[-1].shape[0], int)
    from safetensors.numpy import load_file

    params = load_file(str(folder / "weights.safetensors"))
    for shape in [(1, 3, 8, 8), (3, 3, 5, 7)]:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        (want,) = _reference(_symbolic_cnn(), {"x": x})
        np.testing.assert_allclose(np.asarray(exp.call(params, x)[0]), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 0]}),
    ("MaxPool", {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 1], "auto_pad": "SAME_LOWER"}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 1, 1, 0], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [1, 1, 1, 1], "dilations": [2, 1]})])
def test_a_pool_over_symbolic_sizes_stays_symbolic(tmp_path, op, attrs):
    """Max and average pooling over symbolic height and width (explicit, SAME_UPPER, SAME_LOWER
    pads; averages counting the pads or not) are exported as shape polymorphism, not fixed to
    one size; the one export runs at sizes of both parities against onnxruntime."""
    import onnxruntime as ort
    from jax import export
    from safetensors.numpy import load_file

    import opbridge

    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "pool",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "pool.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]), path)
    res = opbridge.convert(str(path), to="jax", out=str(tmp_path / "out"))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert rec["dynamic_dims"] == {"x": ["N", "H", "W"]} and "fixed_dims" not in rec, rec
    folder = next(p.parent for p in (tmp_path / "out").rglob("model.jax_export"))
    exp = export.deserialize(bytearray((folder / "model.jax_export").read_bytes()))
    params = load_file(str(folder / "weights.safetensors")) if (folder / "weights.safetensors").exists() else {}
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for shape in [(1, 2, 9, 8), (2, 2, 6, 11)]:
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(np.asarray(exp.call(params, x)[0]), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,mult,attrs", [
    ([1, 4, 9, 8], 1, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ([2, 3, 10, 7], 2, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 0, 1]}),
    ([1, 4, 11, 9], 1, {"kernel_shape": [5, 3], "strides": [2, 1], "dilations": [1, 2], "auto_pad": "SAME_UPPER"}),
    ([1, 4, 12], 1, {"kernel_shape": [3], "strides": [2], "auto_pad": "SAME_LOWER"})])
def test_a_depthwise_convolution_is_the_sum_of_its_taps(tmp_path, shape, mult, attrs):
    """A depthwise convolution over static sizes is written as the ``_depthwise`` helper's sum
    of strided slices (XLA's CPU grouped convolution is a generic loop), with any channel
    multiplier, strides, dilations and pads; it checks against onnxruntime."""
    import opbridge

    c, nd = shape[1], len(shape) - 2
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal([c * mult, 1] + attrs["kernel_shape"]).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(c * mult).astype(np.float32), "b")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], group=c, **attrs)], "dw",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, b])
    path = tmp_path / "dw.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    res = opbridge.convert(str(path), to="jax", out=str(tmp_path / "out"))
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    folder = next(p.parent for p in (tmp_path / "out").rglob("model.py"))
    assert "_depthwise(" in (folder / "model.py").read_text() and nd in (1, 2)


def _reshape_by_shape_model(merge: bool) -> onnx.ModelProto:
    """``Shape → Slice → Concat → Reshape`` on x [N, S, 8]: an exporter's reshape keeping the
    leading dims (to [N, S, 2, 4]); ``merge``: the two leading dims multiplied on the way
    (``ReduceProd``, to [N*S, 8]), a dim no input names."""
    c = numpy_helper.from_array
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Slice", ["s", "z", "two"], ["lead"])]
    if merge:
        nodes += [helper.make_node("ReduceProd", ["lead"], ["rows"], keepdims=1),
                  helper.make_node("Concat", ["rows", "eight"], ["shp"], axis=0)]
    else:
        nodes.append(helper.make_node("Concat", ["lead", "tail"], ["shp"], axis=0))
    nodes.append(helper.make_node("Reshape", ["x", "shp"], ["y"]))
    inits = [c(np.array([0], np.int64), "z"), c(np.array([2], np.int64), "two"), c(np.array([2, 4], np.int64), "tail"),
             c(np.array([8], np.int64), "eight")]
    out = ["NS", 8] if merge else ["N", "S", 2, 4]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_a_reshape_to_a_shape_computed_from_symbolic_dims_keeps_them(tmp_path):
    """The reshape's shape input is computed from N and S; the IR infers its output as
    [N, S, 2, 4], so the code reshapes to ``(x.shape[0], x.shape[1], 2, 4)`` and both dims
    stay symbolic in the export."""
    import opbridge

    path = tmp_path / "r.onnx"
    onnx.save(_reshape_by_shape_model(False), path)
    (rec,) = opbridge.convert(str(path), to="jax", out=str(tmp_path / "out"))["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert rec["dynamic_dims"] == {"x": ["N", "S"]} and "fixed_dims" not in rec
    folder = next(p.parent for p in (tmp_path / "out").rglob("model.mlir"))
    assert "tensor<?x?x8xf32>" in (folder / "model.mlir").read_text()


def test_a_shape_the_ir_cannot_name_fixes_the_fewest_dims(tmp_path):
    """The leading dims merged on the way: no input dim names the output's first, the code
    would read the computed shape with NumPy, so the dims it needs are fixed and the record
    says why."""
    import opbridge

    path = tmp_path / "r.onnx"
    onnx.save(_reshape_by_shape_model(True), path)
    (rec,) = opbridge.convert(str(path), to="jax", out=str(tmp_path / "out"))["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["fixed_dims"]) <= {"N", "S"} and rec["fixed_dims"]
    assert any("computes from symbolic dims" in w and "dynamic_shape" in w for w in rec["warnings"]), rec["warnings"]
