"""The Core ML emitter: a standalone builder script, verification by reload and by the MIL
evaluator / MIL value inference (Linux: no Core ML runtime), hostile names, determinism, atomic saves, legalization."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("coremltools")

from emitters import coreml  # noqa: E402
from translator.table.errors import OpbridgeError, Unsupported  # noqa: E402
from translator.run.harness import compare, single_op_model  # noqa: E402
from translator.ir.graph import Graph, Model, TensorType  # noqa: E402

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


def test_conv_is_computed_by_the_mil_evaluator():
    """coremltools has no value inference for conv: the project's MIL evaluator computes the
    written package instead (emitters/coreml/mil_eval.py)."""
    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    model, feeds = single_op_model("conv", [x, w], {"pads": [1, 1, 1, 1]})
    art = coreml.emit(model)
    assert art.interface["outputs"] == [("out0", "FLOAT32", (1, 3, 5, 5))]
    (y,) = coreml.run(art, feeds)
    ref = sum(np.einsum("nchw,oc->nohw", np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)])[:, :, i:i + 5, j:j + 5],
                        w[:, :, i, j]) for i in range(3) for j in range(3))
    assert compare(ref, y).ok


def test_ops_the_evaluator_lacks_are_structural_only(monkeypatch):
    from emitters.coreml import mil_eval

    x = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)
    model, feeds = single_op_model("conv", [x, w], {"pads": [1, 1, 1, 1]})
    art = coreml.emit(model)
    mil_eval.ensure_registered()
    monkeypatch.delitem(mil_eval.OPS, "conv")
    with pytest.raises(Unsupported) as ei:  # nor has coremltools' value inference a conv
        coreml.run(art, feeds)
    assert ei.value.code == "structural_only" and "no conv" in str(ei.value)


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
    from emitters.coreml import runtime

    art = coreml.emit(_chain_model()[0])
    out = coreml.save(art, tmp_path / "m")
    before = _files(out)

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(runtime.shutil, "copytree", boom)
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
    assert "TARGET = getattr(ct.target, 'iOS16')" in art.source
    assert coreml.run(art, feeds)[0].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert coreml.emit(single_op_model("relu", [np.ones(2, np.float32)], {})[0], target="ios16").target == "iOS16"
    with pytest.raises(OpbridgeError, match=r"unknown Core ML deployment target 'iOS16\)\s*; import os'.*\[bad_option\]"):
        coreml.emit(model, target="iOS16) ; import os")


def test_importing_the_emitter_imports_no_framework():
    code = ("import sys; import emitters.coreml; "
            "print(any(m.split('.')[0] in ('coremltools', 'torch', 'tensorflow') for m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.stdout.strip() == "False", p.stderr[-2000:]


def test_every_snippet_is_one_mil_call_of_a_known_op_and_rules_and_snippets_do_not_overlap():
    from translator.compile.registry import rules
    from translator.table.loader import load_tables

    tables = load_tables()
    have = rules(coreml.NAME)
    cells = {op.id: op.backends[coreml.NAME] for op in tables.ops.values()
             if op.backends.get(coreml.NAME) is not None and op.backends[coreml.NAME].snippet}
    assert len(cells) >= 40
    for op_id, cell in cells.items():
        assert cell.snippet.startswith("mb.") and cell.snippet.endswith(")") and "\n" not in cell.snippet, op_id
        assert op_id not in have, f"{op_id} has both a snippet and a rule"
    assert coreml.supported_ops(tables) >= {"add", "conv", "gemm", "is_nan", "dynamic_quantize_linear"}
    assert not (ROOT / "templates" / "coreml" / "snippets.yaml").exists()


def test_target_describes_the_backend():
    from translator.compile.target import get

    t = get("coreml")
    assert t is coreml.TARGET and t.suffix == "_coreml" and t.written == "model"
    assert t.legal_dtypes is not None
    from translator.table.loader import load_tables

    assert t.legal_dtypes(load_tables()) == frozenset({"float16", "float32", "int32", "bool"})
    assert [o.flag for o in t.options] == ["--target"]


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
    from translator.compile.render import ident

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


# ----------------------------------------------------------------------------- einsum, quantization, resize, RNNs
def _reference(op: str, inputs: list, attrs: dict, n_outputs: int = 1, const: tuple[int, ...] = ()) -> list:
    from translator.compile import interpreter

    model, feeds = single_op_model(op, inputs, attrs, n_outputs, const)
    return [np.asarray(v) for v in interpreter.run(model, feeds)]


def _numeric(op: str, inputs: list, attrs: dict, n_outputs: int = 1, const: tuple[int, ...] = ()) -> str:
    """Emit and run through MIL value inference; assert the reference's numbers; the source."""
    model, feeds = single_op_model(op, inputs, attrs, n_outputs, const)
    art = coreml.emit(model)
    got = coreml.run(art, feeds)
    for want, y in zip(_reference(op, inputs, attrs, n_outputs, const), got):
        assert want.shape == np.asarray(y).shape and compare(want, np.asarray(y)).ok, (op, attrs)
    return art.source


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("i,i", [(3,), (3,)]), ("ij->ji", [(3, 4)]), ("...ii->...i", [(2, 3, 3)]),
    ("ii", [(3, 3)]), ("i,j->ij", [(3,), (4,)]), ("ij,ji->ij", [(3, 4), (4, 3)]), ("ij,kj->", [(2, 3), (4, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 5)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk->ik", [(3, 1), (4, 5)])])
def test_einsum_general_equations_lower_to_matmul(eq, shapes):
    src = _numeric("einsum", [_f32(*s) for s in shapes], {"equation": eq})
    assert "mb.einsum(" not in src


def test_einsum_keeps_the_native_mil_form():
    src = _numeric("einsum", [_f32(1, 2, 3, 4), _f32(1, 4, 3, 5)], {"equation": "abcd,adce->abce"})
    assert "mb.einsum(" in src and "mb.matmul(" not in src


def test_quantize_and_dequantize_use_mil_ops_for_constant_parameters():
    x = (_f32(2, 3, 4) * 40)
    src = _numeric("quantize_linear", [x, np.float32(0.37), np.uint8(128)], {}, const=(1, 2))
    assert "mb.quantize(" in src and "output_dtype='uint8'" in src
    src = _numeric("quantize_linear", [x.astype(np.float16), np.array([0.3, 0.5, 0.7], np.float32),
                                       np.array([1, -2, 3], np.int8)], {"axis": 1}, const=(1, 2))
    assert "mb.quantize(" in src and "axis=1" in src
    q = RNG.integers(0, 255, (2, 3, 4)).astype(np.uint8)
    model, feeds = single_op_model("dequantize_linear", [q, np.float32(0.05), np.uint8(3)], {}, const=(1, 2))
    art = coreml.emit(model)
    assert "mb.dequantize(" in art.source
    (y,) = coreml.run(art, feeds)  # the MIL evaluator (coremltools 9.0 has no value_inference for it)
    assert compare((q.astype(np.float32) - 3) * np.float32(0.05), y).ok


def test_quantization_with_runtime_parameters_or_16_bit_data_is_composed():
    x = (_f32(2, 3, 4) * 40)
    src = _numeric("quantize_linear", [x, np.array([0.3, 0.5, 0.7], np.float32), np.array([1, 2, 3], np.uint8)],
                   {"axis": 1})
    assert "mb.quantize(" not in src and "mb.round(" in src
    _numeric("quantize_linear", [x, np.float32(0.37), np.int16(-7)], {}, const=(1, 2))
    q = RNG.integers(0, 255, (2, 3, 4)).astype(np.uint8)
    _numeric("dequantize_linear", [q, np.float32(0.05), np.uint8(3)], {})
    _numeric("dequantize_linear", [q.astype(np.int16) * 100, np.array([0.3, 0.5, 0.7], np.float32),
                                   np.array([1, 2, 3], np.int16)], {"axis": 1}, const=(1, 2))
    model, _ = single_op_model("quantize_linear", [x, np.float32(0.37), np.uint8(128)], {"block_size": 2}, const=(1, 2))
    with pytest.raises(Unsupported) as ei:
        coreml.emit(model)
    assert ei.value.code == "unsupported_attribute_value" and "block_size" in str(ei.value)


def _resize_choice(inputs: list, attrs: dict, const: tuple[int, ...]):
    from emitters.coreml.nn import _resize_choice as choice

    model, _ = single_op_model("resize", inputs, attrs, 1, const)
    return choice(model.graph.nodes[0])


@pytest.mark.parametrize("attrs,scales,want", [
    ({}, (1, 1, 2, 2), "upsample"),  # half_pixel + round_prefer_floor at x2 samples floor(out / 2)
    ({"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, (1, 1, 3, 3), "upsample"),
    ({"nearest_mode": "round_prefer_ceil"}, (1, 1, 1.5, 1.5), "resize"),
    ({"mode": "linear"}, (1, 1, 2, 2), "UNALIGN_CORNERS"),
    ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, (1, 1, 3, 3), "UNALIGN_CORNERS"),
    ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, (1, 1, 2, 2), "STRICT_ALIGN_CORNERS"),
    ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, (1, 1, 2, 2), "DEFAULT")])
def test_resize_picks_the_mil_op_that_samples_like_onnx(attrs, scales, want):
    kind, (how, _, _) = _resize_choice([_f32(1, 2, 3, 4), None, np.asarray(scales, np.float32)], attrs, (2,))
    assert kind == "native" and how == want


@pytest.mark.parametrize("attrs,scales,sizes,op", [
    ({"nearest_mode": "floor"}, (1, 1, 2, 2), None, "mb.gather("),
    # paddle2onnx's FPN: nearest, asymmetric + floor, to an odd size (16 -> 31: no integer factor)
    ({"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, None, (1, 2, 7, 9), "mb.gather("),
    ({"mode": "linear"}, (1, 1, 1.5, 1.5), None, "mb.matmul("),  # 3 -> 4: ONNX scale 1.5, MIL 4/3
    ({"mode": "linear", "antialias": 1}, (1, 1, 1, 0.5), None, "mb.matmul("),
    ({}, (1, 2, 1, 1), None, "mb.gather("),  # a resized channel axis
    ({"coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 3.0}, None, (1, 2, 5, 6),
     "mb.gather(")])
def test_resize_that_no_mil_op_samples_takes_the_reference_sampling_per_axis(attrs, scales, sizes, op):
    """Where no MIL resize samples ONNX's pixels (a nearest rule, a fractional grid, antialias,
    a resized axis before the last two, extrapolation), each resized axis is the reference's
    own sampling: a gather of the picked inputs (nearest) or a constant (out, in) matmul."""
    roi = np.asarray([0, 0, 0.1, 0.2, 1, 1, 0.9, 1.3], np.float32) if "tf_crop" in str(attrs) else None
    inputs = [_f32(1, 2, 3, 4), roi, None if scales is None else np.asarray(scales, np.float32)]
    if sizes is not None:
        inputs.append(np.asarray(sizes, np.int64))
    const = tuple(k for k in (1, 2, 3) if k < len(inputs) and inputs[k] is not None)
    assert _resize_choice(inputs, attrs, const)[0] == "matmul"
    src = _numeric("resize", inputs, attrs, const=const)
    assert op in src and "mb.resize_" not in src and "mb.upsample" not in src


def test_resize_cubic_is_a_constant_matmul_per_axis():
    src = _numeric("resize", [_f32(1, 2, 3, 4), None, None, np.asarray([1, 2, 5, 7], np.int64)],
                   {"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, const=(3,))
    assert src.count("mb.matmul(") == 2
    _numeric("resize", [_f32(1, 2, 3, 4), None, np.asarray([1, 1, 2, 0.5], np.float32)],
             {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5}, const=(2,))


def _mil_resize_value_inference(monkeypatch):
    """coremltools 9.0 has no value_inference for the resize ops: give them one from their
    docstrings (nearest: floor(out / k), floor((out + 0.5) * in / out); bilinear grids), to
    check the emitter's plumbing (factors, sizes, rank-2 reshapes) against the reference."""
    from coremltools.converters.mil.mil.ops.defs.iOS15 import image_resizing as ir

    def apply(x, rows, cols):
        return np.einsum("oh,...hw,pw->...op", rows, x, cols).astype(x.dtype)

    def nearest(idx, n_in):
        m = np.zeros((len(idx), n_in))
        m[np.arange(len(idx)), np.minimum(idx, n_in - 1)] = 1
        return m

    def bilinear(n_in, n_out, mode):
        i = np.arange(n_out, dtype=np.float64)
        g = {"STRICT_ALIGN_CORNERS": i * (n_in - 1) / max(n_out - 1, 1), "DEFAULT": i * n_in / n_out,
             "UNALIGN_CORNERS": (i + 0.5) * n_in / n_out - 0.5}[mode]
        g = np.clip(g, 0, n_in - 1)
        lo = np.floor(g).astype(int)
        m = np.zeros((n_out, n_in))
        np.add.at(m, (np.arange(n_out), lo), 1 - (g - lo))
        np.add.at(m, (np.arange(n_out), np.minimum(lo + 1, n_in - 1)), g - lo)
        return m

    def up_nn(self):
        x = self.x.val
        if x is None:
            return None
        kh, kw = int(self.scale_factor_height.val), int(self.scale_factor_width.val)
        h, w = x.shape[-2:]
        return apply(x, nearest(np.arange(h * kh) // kh, h), nearest(np.arange(w * kw) // kw, w))

    def resize_nn(self):
        x = self.x.val
        if x is None:
            return None
        (h, w), oh, ow = x.shape[-2:], int(self.target_size_height.val), int(self.target_size_width.val)
        return apply(x, nearest(np.floor((np.arange(oh) + 0.5) * h / oh).astype(int), h),
                     nearest(np.floor((np.arange(ow) + 0.5) * w / ow).astype(int), w))

    def resize_bl(self):
        x = self.x.val
        if x is None:
            return None
        (h, w), mode = x.shape[-2:], self.sampling_mode.val
        return apply(x, bilinear(h, int(self.target_size_height.val), mode),
                     bilinear(w, int(self.target_size_width.val), mode))

    monkeypatch.setattr(ir.upsample_nearest_neighbor, "value_inference", up_nn, raising=False)
    monkeypatch.setattr(ir.resize_nearest_neighbor, "value_inference", resize_nn, raising=False)
    monkeypatch.setattr(ir.resize_bilinear, "value_inference", resize_bl, raising=False)


@pytest.mark.parametrize("op,x,attrs,scales", [
    ("resize", (1, 2, 3, 4), {}, (1, 1, 2, 3)),
    ("resize", (1, 2, 3, 4), {"nearest_mode": "round_prefer_ceil"}, (1, 1, 1.5, 0.5)),
    ("resize", (1, 2, 3, 4), {"mode": "linear"}, (1, 1, 2, 2)),
    ("resize", (3, 4), {"mode": "linear", "coordinate_transformation_mode": "align_corners"}, (3, 2)),
    ("upsample", (1, 1, 2, 2), {}, (1, 1, 2, 3)),
    ("upsample", (1, 1, 2, 2), {"mode": "linear"}, (1, 1, 2, 2))])
def test_resize_lowerings_match_the_reference_under_the_documented_mil_grids(monkeypatch, op, x, attrs, scales):
    _mil_resize_value_inference(monkeypatch)
    sc = np.asarray(scales, np.float32)
    inputs = [_f32(*x), None, sc] if op == "resize" else [_f32(*x), sc]
    src = _numeric(op, inputs, attrs, const=(len(inputs) - 1,))
    assert "mb.matmul(" not in src


def _mil_rnn_value_inference(monkeypatch):
    """coremltools 9.0 has no value_inference for gru/lstm: give them the numpy reference of
    coremltools' own MIL tests (iOS14 test_recurrent.py: GRU gates r, o, z with c = r * h,
    o = act(W_o x + R_o c + b_o); LSTM gates i, f, o, z, peepholes i, f, o, o peeking at the new
    cell), run in processing order, to check gate re-layout, directions and output layouts."""
    from coremltools.converters.mil.mil.ops.defs.iOS17 import recurrent as rec

    acts = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh, "relu": lambda v: np.maximum(v, 0)}

    def run_gru(self):
        vals = [self.x.val, self.initial_h.val, self.weight_ih.val, self.weight_hh.val]
        if any(v is None for v in vals):
            return None
        x, h, wi, wh = (np.asarray(v, np.float64) for v in vals)
        b = np.asarray(self.bias.val if self.bias is not None else np.zeros(wi.shape[0]), np.float64)
        ra, a = acts[self.recurrent_activation.val], acts[self.activation.val]
        (wr, wo, wz), (rr, ro, rz), (br, bo, bz) = np.split(wi, 3), np.split(wh, 3), np.split(b, 3)
        seq = x if self.direction.val == "forward" else x[::-1]
        ys = []
        for xt in seq:
            r = ra(xt @ wr.T + h @ rr.T + br)
            z = ra(xt @ wz.T + h @ rz.T + bz)
            o = a(xt @ wo.T + (r * h) @ ro.T + bo)
            h = (1 - z) * o + z * h
            ys.append(h)
        dt = self.x.val.dtype
        return np.stack(ys).astype(dt), h.astype(dt)

    def run_lstm(self):
        vals = [self.x.val, self.initial_h.val, self.initial_c.val, self.weight_ih.val, self.weight_hh.val]
        if any(v is None for v in vals):
            return None
        x, h, c, wi, wh = (np.asarray(v, np.float64) for v in vals)
        b = np.asarray(self.bias.val if self.bias is not None else np.zeros(wi.shape[0]), np.float64)
        p = np.asarray(self.peephole.val if self.peephole is not None else np.zeros(3 * h.shape[-1]), np.float64)
        ra, ca, a = (acts[self.recurrent_activation.val], acts[self.cell_activation.val], acts[self.activation.val])
        (wI, wF, wO, wZ), (rI, rF, rO, rZ), (bI, bF, bO, bZ) = np.split(wi, 4), np.split(wh, 4), np.split(b, 4)
        pI, pF, pO = np.split(p, 3)
        seq = x if self.direction.val == "forward" else x[::-1]
        ys = []
        for xt in seq:
            i = ra(xt @ wI.T + h @ rI.T + bI + c * pI)
            f = ra(xt @ wF.T + h @ rF.T + bF + c * pF)
            z = ca(xt @ wZ.T + h @ rZ.T + bZ)
            c = f * c + i * z
            o = ra(xt @ wO.T + h @ rO.T + bO + c * pO)
            h = o * a(c)
            ys.append(h)
        dt = self.x.val.dtype
        return np.stack(ys).astype(dt), h.astype(dt), c.astype(dt)

    monkeypatch.setattr(rec.gru, "value_inference", run_gru, raising=False)
    monkeypatch.setattr(rec.lstm, "value_inference", run_lstm, raising=False)


@pytest.mark.parametrize("attrs,n_dir,init,layout", [
    ({}, 1, False, 0), ({"direction": "reverse"}, 1, True, 0), ({"direction": "bidirectional"}, 2, True, 0),
    ({"direction": "bidirectional", "layout": 1}, 2, True, 1), ({"activations": ["Relu", "Tanh"]}, 1, False, 0)])
def test_gru_matches_the_reference_under_coremltools_gru_semantics(monkeypatch, attrs, n_dir, init, layout):
    _mil_rnn_value_inference(monkeypatch)
    x = _f32(2, 3, 4) if layout else _f32(3, 2, 4)
    w, r, b = _f32(n_dir, 15, 4) * 0.5, _f32(n_dir, 15, 5) * 0.5, _f32(n_dir, 30) * 0.5
    h0 = [None, (_f32(2, n_dir, 5) if layout else _f32(n_dir, 2, 5))] if init else []
    src = _numeric("gru", [x, w, r, b] + h0, {"hidden_size": 5, **attrs}, n_outputs=2, const=(1, 2, 3))
    assert src.count("mb.gru(") == n_dir and "direction='forward'" in src


@pytest.mark.parametrize("attrs,n_dir,extra,layout", [
    ({}, 1, False, 0), ({"direction": "reverse"}, 1, True, 0), ({"direction": "bidirectional"}, 2, True, 0),
    ({"direction": "bidirectional", "layout": 1}, 2, True, 1)])
def test_lstm_matches_the_reference_under_coremltools_lstm_semantics(monkeypatch, attrs, n_dir, extra, layout):
    _mil_rnn_value_inference(monkeypatch)
    x = _f32(2, 3, 4) if layout else _f32(3, 2, 4)
    w, r, b = _f32(n_dir, 20, 4) * 0.5, _f32(n_dir, 20, 5) * 0.5, _f32(n_dir, 40) * 0.5
    state = (lambda: _f32(2, n_dir, 5)) if layout else (lambda: _f32(n_dir, 2, 5))
    more = [None, state(), state(), _f32(n_dir, 15) * 0.5] if extra else []
    const = (1, 2, 3, 7) if extra else (1, 2, 3)
    src = _numeric("lstm", [x, w, r, b] + more, {"hidden_size": 5, **attrs}, n_outputs=3, const=const)
    assert src.count("mb.lstm(") == n_dir


def test_rnn_refusals_name_the_attribute():
    """What neither MIL's gru nor the unrolled cells (translator/compile/unroll.py) take is refused by
    name; linear_before_reset=1 (MIL's gru lacks reset_after on iOS17) falls back to the cells."""
    x, w, r = _f32(3, 2, 4), _f32(1, 15, 4), _f32(1, 15, 5)
    model, _ = single_op_model("gru", [x, w, r], {"hidden_size": 5, "linear_before_reset": 1}, 2, (1, 2))
    assert "mb.gru(" not in coreml.emit(model).source
    for attrs, word in (({"clip": 3.0}, "clip"), ({"activations": ["HardSigmoid", "Tanh"]}, "activations")):
        model, _ = single_op_model("gru", [x, w, r], {"hidden_size": 5, **attrs}, 2, (1, 2))
        with pytest.raises(Unsupported) as ei:
            coreml.emit(model)
        assert ei.value.code == "unsupported_attribute_value" and word in str(ei.value)
    model, _ = single_op_model("gru", [x, w, r], {"hidden_size": 5}, 2)
    with pytest.raises(Unsupported) as ei:
        coreml.emit(model)
    assert ei.value.code == "requires_constant_input"


def test_dynamic_quantize_linear_is_composed():
    x = _f32(2, 3, 4) * 10
    src = _numeric("dynamic_quantize_linear", [x], {}, n_outputs=3)
    assert "mb.round(" in src and "mb.quantize(" not in src
    _numeric("dynamic_quantize_linear", [np.zeros((2, 3), np.float32)], {}, n_outputs=3)  # scale 0: y = 0, zp = 0


def test_program_text_is_not_rendered_for_dropped_debug_logs():
    """coremltools' pass pipeline formats the whole program into debug-log f-strings; while
    we convert, that rendering is a one-line summary unless debug logging is on, and the
    full text is back afterwards."""
    import logging

    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import Function, Program, types

    from emitters.coreml import runtime

    with Function({"x": mb.placeholder(shape=(2,), dtype=types.fp32)}) as fn:
        fn.set_outputs([mb.relu(x=fn.inputs["x"], name="r")])
    prog = Program()
    prog.add_function("main", fn)
    full = str(prog)
    assert "relu" in full
    with runtime._unrendered_program_logs():
        assert str(prog) == "<MIL program, 1 function(s)>"
    assert str(prog) == full
    log = logging.getLogger("coremltools")
    level = log.level
    log.setLevel(logging.DEBUG)
    try:
        with runtime._unrendered_program_logs():
            assert str(prog) == full
    finally:
        log.setLevel(level)


# ----------------------------------------------------------------------------- legalized values, in the graph
def _written(art, feeds):
    """Run the artifact as written (saved, loaded back): what the node-test bench judges."""
    from translator.run.artifact_io import run_written

    return run_written("coreml", art, feeds)


def test_bfloat16_results_are_rounded_in_the_graph():
    """bfloat16 is computed in fp32 (legalized); the graph rounds each bfloat16 result to the
    nearest bfloat16 (inf and NaN kept, |x| > 2^64 too), so the runner retypes exactly."""
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    a = np.asarray([1.0, 3.0, -1.5e30, np.inf, np.nan, 2.0 ** 100, 0.1], np.float32).astype(bf16)
    b = np.asarray([1 / 3, 1 / 7, -1e29, 1.0, 1.0, 2.0 ** 93, 1e-3], np.float32).astype(bf16)
    model, feeds = single_op_model("add", [a, b], {})
    art = coreml.emit(model)
    assert art.outputs[0].dtype == "bfloat16" and art.outputs[0].legal == "float32"
    (y,) = _written(art, feeds)
    want = (a.astype(np.float32) + b.astype(np.float32)).astype(bf16)
    assert y.dtype == bf16
    assert np.array_equal(y.astype(np.float32), want.astype(np.float32), equal_nan=True)


@pytest.mark.parametrize("op,x,want", [
    ("bitwise_not", np.asarray([0, 1, 200, 255], np.uint8), np.asarray([255, 254, 55, 0], np.uint8)),
    ("bitwise_not", np.asarray([0, 1, -128, 127], np.int8), np.asarray([-1, -2, 127, -128], np.int8)),
    ("neg", np.asarray([-32768, 1, 5], np.int16), np.asarray([-32768, -1, -5], np.int16))])
def test_narrow_integers_wrap_around_in_the_graph(op, x, want):
    """8/16-bit integers are computed in int32; results wrap as the narrow type would."""
    model, feeds = single_op_model(op, [x], {})
    art = coreml.emit(model)
    (y,) = _written(art, feeds)
    assert y.dtype == want.dtype and y.tolist() == want.tolist()


@pytest.mark.parametrize("direction,want", [("bit_shift_left", [0, 0, 16, -128]), ("bit_shift_right", [-1, 0, 0, -1])])
def test_bit_shifts_outside_the_width(direction, want):
    """A shift < 0 or >= the width: 0 to the left, the sign fill to the right (ONNX)."""
    x = np.asarray([-8, 4, 2, -1], np.int8)
    s = np.asarray([-1, 8, 3, 7], np.int8)
    model, feeds = single_op_model(direction, [x, s], {})
    (y,) = _written(coreml.emit(model), feeds)
    assert y.dtype == np.int8 and y.tolist() == want


@pytest.mark.parametrize("axis,const", [(0, ()), (1, (1,)), (None, ())])
def test_compress_gathers_the_true_positions(axis, const):
    x = _f32(3, 2)
    cond = np.asarray([True, False, True]) if axis in (0, None) else np.asarray([False, True])
    attrs = {} if axis is None else {"axis": axis}
    model, feeds = single_op_model("compress", [x, cond], attrs, const=const)
    (y,) = _written(coreml.emit(model), feeds)
    want = np.compress(cond, x, axis=axis)
    assert compare(want, y).ok


@pytest.mark.parametrize("pos,neg", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_is_inf_detects_what_it_is_asked_to(pos, neg):
    x = np.asarray([np.inf, -np.inf, np.nan, 1.0], np.float32)
    model, feeds = single_op_model("is_inf", [x], {"detect_positive": pos, "detect_negative": neg})
    (y,) = coreml.run(coreml.emit(model), feeds)
    assert y.tolist() == [bool(pos), bool(neg), False, False]


def test_matmul_of_two_vectors_is_a_dot_product_with_value_inference():
    a, b = _f32(4), _f32(4)
    model, feeds = single_op_model("matmul", [a, b], {})
    (y,) = coreml.run(coreml.emit(model), feeds)
    assert y.shape == () and compare(np.dot(a, b), y).ok


def test_a_1d_tensor_dequantized_with_the_default_axis_is_a_reason_not_a_crash():
    """onnxruntime's QDQ quantizer writes a bias as int32 [C] with a one-element scale and the
    default axis 1, which names no axis of a 1-D tensor: Core ML's quantization check gives a
    reason (report and convert agree) instead of an IndexError."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    from translator.compile.pipeline import plan
    from translator.frontends.onnx import from_proto

    g = h.make_graph([h.make_node("DequantizeLinear", ["b", "s"], ["bf"]), h.make_node("Add", ["x", "bf"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 4])], [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
                     [nh.from_array(np.arange(4, dtype=np.int32), "b"), nh.from_array(np.array([0.5], np.float32), "s")])
    model = from_proto(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]))
    ctx = plan(model, "coreml")
    assert all(r.code != "internal_error" for r in (ctx.refusals or {}).values())


def test_a_1d_bias_with_a_scale_per_element_and_the_default_axis_dequantizes(tmp_path):
    """pipecat's smart-turn (onnxruntime QDQ, per-channel): the classifier bias is int32 [C]
    with a scale per element and the default axis 1, which onnxruntime and the reference take
    modulo the rank (axis 0); Core ML does the same and checks."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh
    import onnx

    import opbridge

    g = h.make_graph([h.make_node("DequantizeLinear", ["b", "s"], ["bf"]), h.make_node("Add", ["x", "bf"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 4])], [h.make_tensor_value_info("y", T.FLOAT, [2, 4])],
                     [nh.from_array(np.arange(4, dtype=np.int32) - 2, "b"),
                      nh.from_array(np.array([0.5, 0.25, 2.0, 1.0], np.float32), "s")])
    src = tmp_path / "bias.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]), str(src))
    (rec,) = opbridge.convert(str(src), to="coreml", out=str(tmp_path / "out"))["targets"]
    assert rec["status"] == "ok", (rec.get("reason"), rec.get("detail"))


def test_a_one_element_scale_is_per_tensor():
    """onnxruntime's quantize_static writes a conv bias as DequantizeLinear(int32 [C], scale
    [1], zero point []) with the default axis: a one-element scale (or zero point) is one
    value for the whole tensor, whatever the axis says."""
    b = RNG.integers(-5000, 5000, (8,)).astype(np.int32)
    _numeric("dequantize_linear", [b, np.array([0.002], np.float32), np.int32(0)], {}, const=(1, 2))
    x = _f32(1, 3, 4, 4)
    _numeric("quantize_linear", [x, np.array([0.05], np.float32), np.array([3], np.int8)], {}, const=(1, 2))
    q = RNG.integers(0, 255, (2, 5, 3)).astype(np.uint8)
    _numeric("dequantize_linear", [q, np.array([0.1], np.float32), np.array([128], np.uint8)], {"axis": 1}, const=(1, 2))
