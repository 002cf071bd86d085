"""The Core ML emitter: a standalone builder script, verification by reload and by MIL value
inference (Linux: no Core ML runtime), hostile names, determinism, atomic saves, legalization."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("coremltools")

from emitters import coreml  # noqa: E402
from translator.errors import Unsupported  # noqa: E402
from translator.harness import compare, single_op_model  # noqa: E402
from translator.ir import Graph, Model, TensorType  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(0)


def _chain_model(in_name: str = "x", out_name: str = "y", node_name: str = "n") -> tuple[Model, dict]:
    """y = relu(x * w + b) with constants, for end-to-end checks."""
    rng = np.random.default_rng(1)
    g = Graph("chain")
    x = g.add_input(in_name, TensorType("float32", (2, 3)))
    w = g.add_constant("w", rng.standard_normal((2, 3)).astype(np.float32), "float32")
    b = g.add_constant("b", rng.standard_normal((3,)).astype(np.float32), "float32")
    m = g.add_node("mul", [x, w], name=node_name)
    a = g.add_node("add", [m.outputs[0], b], name=node_name + "_add")
    r = g.add_node("relu", [a.outputs[0]], outputs=[out_name], name=node_name + "_relu")
    g.outputs = [r.outputs[0]]
    feeds = {x.name: rng.standard_normal((2, 3)).astype(np.float32)}
    return Model(g, source="chain.onnx", source_format="ir"), feeds


def _files(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()}


def test_value_inference_gives_the_reference_numbers():
    model, feeds = _chain_model()
    w = model.graph.constants["w"].const
    b = model.graph.constants["b"].const
    art = coreml.emit(model)
    (y,) = coreml.run(art, feeds)
    assert compare(np.maximum(feeds["x"] * w + b, 0), y).ok


def test_package_reloads_with_the_declared_interface():
    model, _ = single_op_model("equal", [np.ones((2, 3), np.float32), np.zeros((2, 3), np.float32)], {})
    art = coreml.emit(model)
    import coremltools as ct

    spec = ct.models.MLModel(str(art.package), skip_model_load=True).get_spec()
    assert [i.name for i in spec.description.input] == ["in0", "in1"]
    assert art.interface["inputs"] == [("in0", "FLOAT32", (2, 3)), ("in1", "FLOAT32", (2, 3))]
    # a bool output travels as fp32 at the Core ML boundary (coremltools' I/O rule); run gives bool back
    assert art.interface["outputs"] == [("out0", "FLOAT32", (2, 3))]
    assert spec.specificationVersion >= 8  # iOS17 ML program
    assert spec.WhichOneof("Type") == "mlProgram"


def test_ops_without_value_inference_are_structural_only():
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    model, feeds = single_op_model("conv", [x, w], {"pads": [1, 1, 1, 1]})
    art = coreml.emit(model)
    assert art.interface["outputs"] == [("out0", "FLOAT32", (1, 3, 5, 5))]
    with pytest.raises(Unsupported) as ei:
        coreml.run(art, feeds)
    assert ei.value.code == "structural_only" and "conv" in str(ei.value)


def test_saved_builder_is_standalone(tmp_path):
    model, _ = _chain_model()
    art = coreml.emit(model)
    out = coreml.save(art, tmp_path / "m")
    assert sorted(p.name for p in out.iterdir()) == ["builder.py", "model.mlpackage", "weights.npz"]
    with np.load(out / "weights.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["b", "w"]
    pkg = tmp_path / "again.mlpackage"
    p = subprocess.run([sys.executable, str(out / "builder.py"), str(pkg)], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    import coremltools as ct

    spec = ct.models.MLModel(str(pkg), skip_model_load=True).get_spec()
    assert [o.name for o in spec.description.output] == ["y"]


def test_same_model_gives_byte_identical_files(tmp_path):
    a = coreml.save(coreml.emit(_chain_model()[0]), tmp_path / "a")
    b = coreml.save(coreml.emit(_chain_model()[0]), tmp_path / "b")
    fa, fb = _files(a), _files(b)
    assert fa == fb and "model.mlpackage/Manifest.json" in fa


def test_hostile_names_never_reach_code_raw():
    evil = 'x"); import os; os.system("echo pwned") #'
    model, feeds = _chain_model(in_name=evil, out_name="class", node_name="__import__('os')")
    art = coreml.emit(model)
    assert "os.system" not in art.source and "__import__" not in art.source
    assert art.inputs[0].coreml.isidentifier() and art.outputs[0].coreml.isidentifier()
    compile(art.source, "builder.py", "exec")
    (y,) = coreml.run(art, feeds)
    assert y.shape == (2, 3)


def test_save_is_atomic(tmp_path, monkeypatch):
    art = coreml.emit(_chain_model()[0])
    out = coreml.save(art, tmp_path / "m")
    before = _files(out)

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(coreml.shutil, "copytree", boom)
    with pytest.raises(OSError):
        coreml.save(art, tmp_path / "m")
    with pytest.raises(OSError):
        coreml.save(art, tmp_path / "n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    assert _files(out) == before


def test_int64_and_float64_are_legalized_and_reported():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    model, feeds = single_op_model("add", [a, a], {})
    art = coreml.emit(model)
    assert any("int64 -> int32" in w for w in art.warnings)
    assert art.interface["inputs"][0][1] == "INT32"
    (y,) = coreml.run(art, feeds)
    assert y.dtype == np.int64 and y.tolist() == (a + a).tolist()
    f = np.linspace(-1, 1, 6).reshape(2, 3)
    model, feeds = single_op_model("tanh", [f], {})
    art = coreml.emit(model)
    assert any("float64 -> float32" in w for w in art.warnings)
    (y,) = coreml.run(art, feeds)
    assert y.dtype == np.float64 and compare(np.tanh(f), y).ok
    art = coreml.emit(single_op_model("add", [a, a], {})[0])
    with pytest.raises(Unsupported) as ei:  # an int64 feed that int32 cannot hold is refused, never wrapped
        coreml.run(art, {"in0": a + 2**40, "in1": a})
    assert ei.value.code == "unsupported_dtype"


def test_non_constant_axes_are_refused_with_a_reason():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    model, _ = single_op_model("reduce_sum", [x, np.asarray([1], np.int64)], {})
    with pytest.raises(Unsupported) as ei:
        coreml.emit(model)
    assert ei.value.code == "requires_constant_input" and ei.value.op == "reduce_sum"


def test_decomposition_and_composite_cells():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    model, feeds = single_op_model("selu", [x], {})  # composite cell without a snippet: the table decomposition
    art = coreml.emit(model)
    assert art.decomposed == [("selu", "selu")] and "mb.exp(" in art.source
    (y,) = coreml.run(art, feeds)
    a, g = 1.67326319, 1.05070102
    assert compare(g * np.where(x > 0, x, a * (np.exp(x) - 1)), y).ok
    model, feeds = single_op_model("is_nan", [np.asarray([1.0, np.nan], np.float32)], {})  # composite cell
    art = coreml.emit(model)
    assert "mb.not_equal(" in art.source and coreml.run(art, feeds)[0].tolist() == [False, True]


def test_deployment_target_is_an_option():
    model, feeds = single_op_model("relu", [np.ones((2, 2), np.float32)], {})
    art = coreml.emit(model, target="iOS16")
    assert "ct.target.iOS16" in art.source
    assert coreml.run(art, feeds)[0].tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_importing_the_emitter_imports_no_framework():
    code = ("import sys; import emitters.coreml, emitters.coreml_ops; "
            "print(any(m.split('.')[0] in ('coremltools', 'torch', 'tensorflow') for m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.stdout.strip() == "False", p.stderr[-2000:]


def test_every_snippet_is_one_line_for_a_known_op():
    from translator.tables import load_tables

    tables = load_tables()
    from emitters.coreml_ops import LOWER

    for op_id, text in coreml.snippets().items():
        assert op_id in tables.ops and "\n" not in text and text.count("{out}") == 1
        assert op_id not in LOWER, f"{op_id} has both a snippet and a lowering"
    assert coreml.supported_ops(tables) >= {"add", "conv", "gemm", "is_nan"}


def test_scalar_constants_keep_rank_zero():
    """A 0-d index (``x[:, 0]``) must stay 0-d in the weights, or gather keeps the axis."""
    g = Graph("scalar_gather")
    x = g.add_input("x", TensorType("float32", (1, 5, 4)))
    i = g.add_constant("i", np.asarray(2, dtype=np.int64), "int64")
    n = g.add_node("gather", [x, i], attrs={"axis": 1}, name="g")
    g.outputs = [n.outputs[0]]
    art = coreml.emit(Model(g, source="scalar.onnx", source_format="ir"))
    assert art.weights["i"].shape == () and art.interface["outputs"] == [("g_out0", "FLOAT32", (1, 4))]
    feeds = {"x": RNG.standard_normal((1, 5, 4)).astype(np.float32)}
    assert compare(feeds["x"][:, 2], coreml.run(art, feeds)[0]).ok


def test_shape_arithmetic_folds_into_constant_slice_bounds():
    """Exported attention computes a Slice end as ``Reshape(Mod(k, 3))`` and feeds it a Shape:
    on static shapes the whole subgraph folds, the slice gets constant bounds, and the values
    behind it get their shapes back (re-inference after folding)."""
    g = Graph("shape_slice")
    x = g.add_input("x", TensorType("float32", (2, 6)))
    shp = g.add_node("shape", [x], name="shape").outputs[0]
    m = g.add_node("floor_mod", [g.add_constant("a", np.asarray(-2, np.int64), "int64"),
                                 g.add_constant("b", np.asarray(3, np.int64), "int64")], name="mod").outputs[0]
    end = g.add_node("reshape", [m, g.add_constant("one", np.asarray([1], np.int64), "int64")], name="r").outputs[0]
    s = g.add_node("slice", [shp, g.add_constant("z", np.asarray([0], np.int64), "int64"), end], name="s").outputs[0]
    y = g.add_node("reshape", [x, g.add_node("concat", [s, g.add_constant("k", np.asarray([-1], np.int64), "int64")],
                                             attrs={"axis": 0}, name="c").outputs[0]], name="y").outputs[0]
    u = g.add_node("unsqueeze", [y, g.add_constant("ax", np.asarray([0], np.int64), "int64")], name="u")
    g.outputs = [u.outputs[0]]
    art = coreml.emit(Model(g, source="shape_slice.onnx", source_format="ir"))
    assert art.interface["outputs"] == [("u_out0", "FLOAT32", (1, 2, 6))]
    feeds = {"x": RNG.standard_normal((2, 6)).astype(np.float32)}
    assert compare(feeds["x"][None], coreml.run(art, feeds)[0]).ok


#: Core ML I/O type of an ONNX element type: float32 as is; int64 legalized to int32
#: (coremltools has no int64 tensors); bool crosses the boundary as fp32 (coremltools' I/O rule)
_COREML_IO = {"FLOAT": "FLOAT32", "FLOAT16": "FLOAT16", "INT32": "INT32", "INT64": "INT32", "BOOL": "FLOAT32",
              "DOUBLE": "FLOAT32"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "transformer_encoder"])
def test_suite_model_mlpackage_reloads_with_the_onnx_interface(models_dir, tmp_path, name):
    """Issue 5: the .mlpackage loads back (no compilation: Linux has no Core ML runtime) and
    declares the ONNX graph's inputs and outputs. Names are the ONNX names made identifiers
    (``render.ident``: unchanged for these models), dims are static, dtypes per ``_COREML_IO``."""
    import coremltools as ct
    import onnx

    from translator.frontends.onnx import load_onnx
    from translator.render import ident

    path = models_dir / f"{name}.onnx"
    out = coreml.save(coreml.emit(load_onnx(path)), tmp_path / name)
    spec = ct.models.MLModel(str(out / "model.mlpackage"), skip_model_load=True).get_spec()
    graph = onnx.load(str(path), load_external_data=False).graph

    def onnx_ports(values) -> list[tuple[str, str, tuple[int, ...]]]:
        return [(ident(v.name), _COREML_IO[onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type)],
                 tuple(d.dim_value for d in v.type.tensor_type.shape.dim)) for v in values]

    def coreml_ports(features) -> list[tuple[str, str, tuple[int, ...]]]:
        dt = ct.proto.FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name
        return [(f.name, dt(f.type.multiArrayType.dataType), tuple(f.type.multiArrayType.shape)) for f in features]

    weights = {t.name for t in graph.initializer}
    want_in, want_out = onnx_ports([v for v in graph.input if v.name not in weights]), onnx_ports(graph.output)
    assert all(all(d > 0 for d in s) for _, _, s in want_in + want_out), "the suite models have static shapes"
    assert coreml_ports(spec.description.input) == want_in
    assert coreml_ports(spec.description.output) == want_out
    assert spec.WhichOneof("Type") == "mlProgram"
