"""The PyTorch emitter: a standalone module, safe names, determinism, atomic saves,
torch.export, runtime helpers and the snippet table."""
from __future__ import annotations

import ast
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

torch = pytest.importorskip("torch")

from emitters import numpy as numpy_backend  # noqa: E402
from emitters import pytorch as pt  # noqa: E402
from translator.table.errors import Unsupported  # noqa: E402
from translator.frontends.onnx import from_proto, load_onnx  # noqa: E402
from translator.run.harness import compare, single_op_model  # noqa: E402
from translator.ir.graph import Graph, Model, TensorType  # noqa: E402
from translator.table.loader import load_tables  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"
RNG = np.random.default_rng(7)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _reference(model_fn, feeds):
    return numpy_backend.run(numpy_backend.emit(model_fn()), feeds)


def _onnx_model(nodes, inputs, outputs, inits=(), opset=21):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


# ----------------------------------------------------------------------------- the artifact
def test_tiny_cnn_matches_the_reference():
    x = _x(1, 3, 16, 16)
    art = pt.emit(load_onnx(MODEL))
    (got,) = pt.run(art, {"input": x})
    (want,) = _reference(lambda: load_onnx(MODEL), {"input": x})
    assert compare(want, got).ok


def test_saved_module_runs_without_opbridge(tmp_path):
    """The saved folder is all a user needs: model.py imports torch and safetensors only."""
    art = pt.emit(load_onnx(MODEL))
    out = art.save(tmp_path / "tiny")
    assert sorted(p.name for p in out.iterdir()) == [pt.MODULE_FILE, pt.WEIGHTS_FILE]
    imported = set()
    for n in ast.walk(ast.parse(art.source)):
        if isinstance(n, ast.Import):
            imported |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            imported.add((n.module or "").split(".")[0])
    assert imported <= {"math", "os", "torch", "safetensors"}
    x = _x(1, 3, 16, 16)
    np.save(tmp_path / "x.npy", x)
    script = (
        "import importlib.util, sys, numpy as np, torch\n"
        f"spec = importlib.util.spec_from_file_location('generated', {str(out / pt.MODULE_FILE)!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "m = mod.load()\n"
        f"x = torch.from_numpy(np.load({str(tmp_path / 'x.npy')!r}))\n"
        "with torch.no_grad(): y = m(x)[0]\n"
        f"np.save({str(tmp_path / 'y.npy')!r}, y.numpy())\n"
        "assert not any(k == 'translator' or k.startswith(('translator.', 'emitters')) for k in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-I", "-c", script], check=True, cwd=tmp_path, env=env, timeout=300)
    (want,) = pt.run(art, {"input": x})
    assert compare(want, np.load(tmp_path / "y.npy")).ok


def test_save_is_atomic(tmp_path, monkeypatch):
    art = pt.emit(load_onnx(MODEL))
    import safetensors.torch

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(safetensors.torch, "save", boom)
    with pytest.raises(RuntimeError):
        art.save(tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    art.save(tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    monkeypatch.setattr(safetensors.torch, "save", boom)
    with pytest.raises(RuntimeError):
        art.save(tmp_path / "out")  # a failed overwrite leaves the previous files as they were
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_layers_are_torch_nn_modules_and_small_constants_are_literals():
    """A convolution or a product with its own float32 weight is the ``torch.nn`` layer a
    PyTorch user writes (``state_dict`` keys ``<layer>.weight``); constants that steer the
    code are literals."""
    art = pt.emit(load_onnx(MODEL))
    assert art.weights["conv1.weight"].shape == (8, 3, 3, 3) and art.weights["conv1.bias"].shape == (8,)
    assert "self.conv1 = torch.nn.Conv2d(3, 8, [3, 3], padding=[1, 1])" in art.source
    assert "self.fc = torch.nn.Linear(16, 10)" in art.source and "= self.fc(" in art.source
    assert not any(k.startswith("c1_w") for k in art.weights) and "register_buffer" not in art.source
    model, feeds = single_op_model("reshape", [_x(2, 3, 4), np.array([4, -1], np.int64)], {})
    shape = model.graph.inputs[1]
    c = model.graph.add_constant("target_shape", np.array([4, -1], np.int64), "int64")
    model.graph.nodes[0].replace_input(1, c)
    model.graph.inputs.remove(shape)
    art = pt.emit(model)
    assert ".reshape([4, -1])" in art.source and not art.weights


# ----------------------------------------------------------------------------- names
HOSTILE = ['x); import os; os.system("echo pwned") #', "self", "torch", "class", "1st input", "F", "x.y",
           "x-y", "x y", "__init__", "forward", "training", "os", "float", "a\nb", '"""', ""]


def _hostile_model() -> tuple[Model, dict]:
    g = Graph("bad name\"'\n")
    feeds = {}
    ins = []
    for i, name in enumerate(HOSTILE[:8]):
        v = g.add_input(name, TensorType("float32", (2, 3)))
        feeds[v.name] = _x(2, 3)
        ins.append(v)
    acc = ins[0]
    for i, v in enumerate(ins[1:]):
        acc = g.add_node("add", [acc, v], outputs=[HOSTILE[(i + 8) % len(HOSTILE)]], name=HOSTILE[i]).outputs[0]
    w = g.add_constant("training", np.arange(6, dtype=np.float32).reshape(2, 3), "float32")
    out = g.add_node("mul", [acc, w], outputs=['"""'], name="eval").outputs[0]
    g.outputs = [out, acc]
    return Model(g, source='/tmp/""" + __import__("os").system("x") + """.onnx', source_format="ir"), feeds


def test_hostile_names_become_safe_identifiers():
    model, feeds = _hostile_model()
    art = pt.emit(model)
    tree = ast.parse(art.source)  # compiles
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert not any("system" in c or "__import__" in c for c in calls)
    fwd = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    params = [a.arg for a in fwd.args.args]
    assert len(params) == len(set(params)) == 9 and all(p.isidentifier() for p in params)
    assert not {"torch", "F", "os", "float", "class"} & set(params[1:])
    model2, _ = _hostile_model()
    got = pt.run(art, feeds)
    want = _reference(lambda: model2, feeds)
    assert all(compare(w, g).ok for w, g in zip(want, got))


def test_duplicate_sanitized_names_are_deduplicated():
    g = Graph("dups")
    a = g.add_input("a.b", TensorType("float32", (3,)))
    b = g.add_input("a b", TensorType("float32", (3,)))
    c = g.add_input("a-b", TensorType("float32", (3,)))
    s = g.add_node("add", [a, b], outputs=["a:b"]).outputs[0]
    t = g.add_node("add", [s, c], outputs=["a/b"]).outputs[0]
    g.outputs = [t]
    art = pt.emit(Model(g, source="dups", source_format="ir"))
    assert "def forward(self, a_b, a_b_1, a_b_2):" in art.source
    feeds = {"a.b": _x(3), "a b": _x(3), "a-b": _x(3)}
    (got,) = pt.run(art, feeds)
    assert compare(feeds["a.b"] + feeds["a b"] + feeds["a-b"], got).ok


# ----------------------------------------------------------------------------- torch.export / compile
def _export_ok(art, feeds) -> None:
    m = art.instantiate()
    args = tuple(pt.to_torch(feeds[n]) for n in art.input_names)
    ep = torch.export.export(m, args)
    with torch.no_grad():
        want = m(*args)
        got = ep.module()(*args)
    for w, g in zip(want, got):
        assert torch.allclose(w, g, atol=1e-6, equal_nan=True)


def test_tiny_cnn_passes_torch_export():
    x = _x(1, 3, 16, 16)
    _export_ok(pt.emit(load_onnx(MODEL)), {"input": x})


def _const_inputs_model(op: str, inputs: list, attrs: dict, const_from: int = 1) -> tuple[Model, dict]:
    """A one-node model whose inputs from index ``const_from`` on are constants."""
    model, feeds = single_op_model(op, inputs, attrs)
    g = model.graph
    node = g.nodes[0]
    for i in range(const_from, len(inputs)):
        if inputs[i] is None:
            continue
        old = node.inputs[i]
        arr = np.asarray(inputs[i])
        c = g.add_constant(f"k{i}", arr, old.type.dtype)
        node.replace_input(i, c)
        g.inputs.remove(old)
        feeds.pop(old.name)
    return model, feeds


EXPORT_CASES = {
    "conv_asymmetric_pads": ("conv", [_x(1, 2, 7, 7), _x(3, 2, 3, 3)], {"pads": [0, 1, 2, 1], "strides": [2, 1]}),
    "reduce_sum_axes_input": ("reduce_sum", [_x(2, 3, 4), np.array([0, -1], np.int64)], {"keepdims": 0}),
    "resize_linear_scales": ("resize", [_x(1, 1, 3, 4), None, np.array([1, 1, 2, 1.5], np.float32)], {"mode": "linear"}),
    "resize_cubic_helper": ("resize", [_x(1, 1, 3, 4), None, np.array([1, 1, 2, 2], np.float32)],
                            {"mode": "cubic", "coordinate_transformation_mode": "asymmetric"}),
    "gather_negative_axis": ("gather", [_x(3, 4, 5), np.array([[0, -1], [2, 1]], np.int64)], {"axis": -2}),
    "scatter_elements_add": ("scatter_elements", [_x(3, 4), np.array([[0, 1], [2, 0]], np.int64), _x(2, 2)],
                             {"axis": 1, "reduction": "add"}),
    "slice_negative_step": ("slice", [_x(5, 6), np.array([4, -1], np.int64), np.array([0, -7], np.int64),
                                      np.array([0, 1], np.int64), np.array([-2, -1], np.int64)], {}),
    "pad_reflect": ("pad", [_x(1, 2, 4, 5), np.array([0, 0, 1, 3, 0, 0, 2, 1], np.int64)], {"mode": "reflect"}),
    "max_pool_ceil": ("max_pool", [_x(1, 1, 6, 7)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
}


@pytest.mark.parametrize("case", sorted(EXPORT_CASES))
def test_ops_pass_torch_export_and_match_the_reference(case):
    op, inputs, attrs = EXPORT_CASES[case]
    model, feeds = _const_inputs_model(op, inputs, attrs)
    art = pt.emit(model)
    got = pt.run(art, feeds)
    want = _reference(lambda: _const_inputs_model(op, inputs, attrs)[0], feeds)
    assert all(compare(w, g).ok for w, g in zip(want, got)), case
    _export_ok(art, feeds)


def test_tiny_cnn_is_dynamo_traceable():
    art = pt.emit(load_onnx(MODEL))
    m = art.instantiate()
    x = torch.from_numpy(_x(1, 3, 16, 16))
    compiled = torch.compile(m, backend="eager", fullgraph=True)
    with torch.no_grad():
        assert torch.allclose(compiled(x)[0], m(x)[0])


@pytest.mark.slow
def test_tiny_cnn_compiles_with_inductor():
    art = pt.emit(load_onnx(MODEL))
    m = art.instantiate()
    x = torch.from_numpy(_x(1, 3, 16, 16))
    with torch.no_grad():
        assert torch.allclose(torch.compile(m)(x)[0], m(x)[0], atol=1e-5)


# ----------------------------------------------------------------------------- dynamic values, subgraphs
def test_runtime_shape_input_uses_a_helper():
    x = _x(2, 3, 4)
    model, feeds = single_op_model("reshape", [x, np.array([0, -1], np.int64)], {})
    art = pt.emit(model)
    assert "def _reshape(" in art.source
    (got,) = pt.run(art, feeds)
    assert got.shape == (2, 12)
    (got,) = pt.run(art, {**feeds, "in1": np.array([8, 0], np.int64)})
    assert got.shape == (8, 3)


def test_loop_body_is_a_nested_function():
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["acc_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("scan_out", TensorProto.FLOAT, [2])])
    m = _onnx_model([helper.make_node("Loop", ["n", "", "init"], ["final", "scans"], body=body)],
                    [helper.make_tensor_value_info("n", TensorProto.INT64, []),
                     helper.make_tensor_value_info("init", TensorProto.FLOAT, [2]),
                     helper.make_tensor_value_info("step", TensorProto.FLOAT, [2])],
                    [helper.make_tensor_value_info("final", TensorProto.FLOAT, [2]),
                     helper.make_tensor_value_info("scans", TensorProto.FLOAT, [None, 2])])
    art = pt.emit(from_proto(m))
    assert "def body_fn(" in art.source and "_loop(" in art.source
    feeds = {"n": np.array(3, np.int64), "init": np.zeros(2, np.float32), "step": np.array([1, 2], np.float32)}
    final, scans = pt.run(art, feeds)
    assert final.tolist() == [3.0, 6.0] and scans.shape == (3, 2)


def test_a_gap_is_refused_with_the_op_and_a_reason():
    model, _ = single_op_model("string_concat", [np.array(["a"], dtype=object), np.array(["b"], dtype=object)], {})
    with pytest.raises(Unsupported) as ei:
        pt.emit(model)
    assert ei.value.op == "string_concat" and ei.value.code in ("unsupported_op", "unsupported_dtype")


def test_an_op_without_snippet_is_decomposed():
    """mean_variance_normalization has no snippet or lowering: the table's decomposition runs."""
    x = _x(2, 3, 4, 5)
    model, feeds = single_op_model("mean_variance_normalization", [x], {})
    art = pt.emit(model)
    assert [op for _, op in art.decomposed] == ["mean_variance_normalization"]
    (got,) = pt.run(art, feeds)
    (want,) = _reference(lambda: single_op_model("mean_variance_normalization", [x], {})[0], feeds)
    assert compare(want, got, rtol=1e-3, atol=1e-4).ok


# ----------------------------------------------------------------------------- the tables
def test_snippets_come_from_the_cells_through_the_binder():
    """A cell's snippet fills inputs by signature name, attributes as literals ({@alpha}) and
    dtypes ({$output}); an op whose rule only adds a check (bit_cast) writes the same line."""
    tables = load_tables()
    assert tables.ops["leaky_relu"].backends[pt.NAME].snippet == "F.leaky_relu({X}, {@alpha})"
    model, feeds = single_op_model("leaky_relu", [_x(2, 3)], {"alpha": 0.25})
    art = pt.emit(model)
    assert "F.leaky_relu(" in art.source and ", 0.25)" in art.source
    (got,) = pt.run(art, feeds)
    (x,) = feeds.values()
    assert np.allclose(got, np.where(x < 0, 0.25 * x, x))
    m = _onnx_model([helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32)],
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                    [helper.make_tensor_value_info("y", TensorProto.INT32, [2, 3])], opset=26)
    art = pt.emit(from_proto(m))
    assert ".view(torch.int32)" in art.source
    x = _x(2, 3)
    (got,) = pt.run(art, {"x": x})
    assert np.array_equal(got, x.view(np.int32))


def test_a_node_a_rule_cannot_write_is_decomposed_by_the_pipeline():
    """A node its rule cannot write (here: layer_normalization of an input whose rank is
    unknown) is refused while lowering (the rule is tried on it): the table's decomposition
    is written instead, and the plan (``opbridge report``) says so too."""
    from translator.compile.pipeline import plan

    g = Graph("g")
    x = g.add_input("x", TensorType("float32", None))
    scale = g.add_constant("scale", np.full(4, 2.0, np.float32), "float32")
    bias = g.add_constant("bias", np.full(4, 0.5, np.float32), "float32")
    y = g.add_node("layer_normalization", [x, scale, bias], {"axis": -1}, outputs=["y"], name="ln").outputs[0]
    g.outputs = [y]
    model = Model(g, source="ln", source_format="ir")
    art = pt.emit(model)
    assert ("ln", "layer_normalization") in art.decomposed and "F.layer_norm" not in art.source
    assert plan(model, pt.TARGET).how["ln"] == "decomposed"
    feeds = {"x": _x(2, 3, 4)}
    (got,) = pt.run(art, feeds)
    xm = feeds["x"] - feeds["x"].mean(-1, keepdims=True)
    want = xm / np.sqrt((xm ** 2).mean(-1, keepdims=True) + 1e-5) * 2.0 + 0.5
    assert np.allclose(got, want, atol=1e-4)


def test_supported_ops_need_a_cell_and_code():
    tables = load_tables()
    sup = pt.supported_ops(tables)
    assert len(sup) >= 150
    for op_id in sup:
        assert tables.ops[op_id].backends[pt.NAME].status in ("native", "composite")
    assert "sequence_at" not in sup  # unavailable in the table: never claimed


def test_helpers_stand_alone():
    """Each helper compiles with only torch, F, math and the helpers it declares."""
    for name in pt.helpers():
        src = "\n\n".join(pt.helper_source(h) for h in pt.helper_deps(name))
        ns = {"torch": torch, "F": torch.nn.functional, "math": __import__("math")}
        exec(compile(src, name, "exec"), ns)  # noqa: S102 - our own helper file
        assert callable(ns[name])


def test_reflect_pad_helper_matches_numpy():
    ns = {"torch": torch, "F": torch.nn.functional, "math": __import__("math")}
    exec(compile("\n\n".join(pt.helper_source(h) for h in pt.helper_deps("_pad")), "h", "exec"), ns)
    x = _x(3, 5)
    for mode, np_mode in (("reflect", "reflect"), ("edge", "edge"), ("wrap", "wrap")):
        got = ns["_pad"](torch.from_numpy(x), torch.tensor([2, 7, 1, 0]), None, None, mode)
        assert np.array_equal(got.numpy(), np.pad(x, [(2, 1), (7, 0)], mode=np_mode)), mode


@pytest.mark.slow
def test_node_tests_pass_1520_with_a_reason_for_every_gap(tmp_path):
    """The ONNX backend node tests through the PyTorch emitter (bench/nodetests.py): measured
    1,541 in the declared dtypes + 20 uint16/uint32 outputs computed widened (legalized)."""
    from conftest import run_nodetests

    r = run_nodetests("pytorch", "none", tmp_path, timeout=1800)
    assert r["counts"]["pass"] >= 1520 and r["counts"]["pass"] + r["counts"]["pass_legalized"] >= 1540
    assert all(x["reason"] for x in r["results"] if x["status"] != "pass")


def test_uint16_is_widened_reported_and_returned_as_uint16():
    a = np.array([65535, 7, 0], np.uint16)
    b = np.array([1, 9, 3], np.uint16)
    model, feeds = single_op_model("add", [a, b], {})
    art = pt.emit(model)
    assert art.legalized and "LEGALIZED = [" in art.source
    (got,) = pt.run(art, feeds)
    assert got.dtype == np.uint16 and got.tolist() == [0, 16, 3]  # wraps like uint16 arithmetic
    model, _ = single_op_model("add", [a.astype(np.uint64), b.astype(np.uint64)], {})
    with pytest.raises(Unsupported) as ei:
        pt.emit(model)
    assert ei.value.code == "unsupported_dtype"


@pytest.mark.parametrize("src,dst", [(np.float16, np.uint16), (np.uint16, np.int16), (np.uint32, np.float32)])
def test_bit_cast_keeps_the_declared_width_when_a_side_is_widened(src, dst):
    """uint16 / uint32 are computed in int32 / int64: bit_cast reinterprets the declared bits."""
    enum = {np.float16: TensorProto.FLOAT16, np.uint16: TensorProto.UINT16, np.int16: TensorProto.INT16,
            np.uint32: TensorProto.UINT32, np.float32: TensorProto.FLOAT}
    m = _onnx_model([helper.make_node("BitCast", ["x"], ["y"], to=enum[dst])],
                    [helper.make_tensor_value_info("x", enum[src], [4])],
                    [helper.make_tensor_value_info("y", enum[dst], [4])], opset=26)
    x = np.array([-1.5, 0.0, 65504.0, 3.0]).astype(src) if src is np.float16 else \
        np.array([0, 1, np.iinfo(src).max, 40000], src)
    (got,) = pt.run(pt.emit(from_proto(m)), {"x": x})
    assert got.dtype == dst and got.tobytes() == x.tobytes()


@pytest.mark.parametrize("args", [(8, 32, 8000, 100.0, 3500.0), (20, 16, 16000, 0.0, 8000.0), (3, 64, 22050, 300.0, 900.0)])
def test_mel_weight_matrix_matches_the_reference(args):
    """Narrow bands (edges snapped to one DFT bin) included: no division by a zero width."""
    mels, n, rate, lo, hi = args
    ins = [np.array(mels, np.int64), np.array(n, np.int64), np.array(rate, np.int64), np.array(lo, np.float32),
           np.array(hi, np.float32)]
    model, feeds = single_op_model("mel_weight_matrix", ins, {})
    (got,) = pt.run(pt.emit(model), feeds)
    (want,) = _reference(lambda: single_op_model("mel_weight_matrix", ins, {})[0], feeds)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.allclose(got, want, atol=1e-6)


# ----------------------------------------------------------------------------- recurrences on torch's kernels
_NEEDS_ORT = pytest.mark.xfail(__import__("importlib").util.find_spec("onnxruntime") is None, strict=True,
                               reason="onnxruntime is not installed (the oracle of these tests)")


def _ort_run(path, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _export_rnn(module, args, path, names):
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and batch-size notes
        torch.onnx.export(module.eval(), args, str(path), dynamo=False, input_names=names)
    return path


def _forward(art):
    """The generated ``forward`` (what runs; the copied helpers above it are not)."""
    return art.source.split("\nclass ", 1)[1]


@_NEEDS_ORT
def test_two_layer_lstm_runs_on_torchs_kernel_and_matches_onnxruntime(tmp_path):
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(16, 32, num_layers=2)

        def forward(self, x):
            return self.rnn(x)

    path = _export_rnn(Net(), (torch.zeros(12, 2, 16),), tmp_path / "lstm.onnx", ["x"])
    art = pt.emit(load_onnx(path))
    body = _forward(art)
    assert body.count("_rnn_native('lstm'") == 2 and "_recurrence(" not in body
    assert "torch.lstm(" in art.source
    x = _x(12, 2, 16)
    got, want = pt.run(art, {"x": x}), _ort_run(path, {"x": x})
    assert len(got) == len(want) == 3
    for g, w in zip(got, want):
        assert g.dtype == np.float32 and g.shape == w.shape
        assert np.abs(g - w).max() <= 1e-5
    again = pt.emit(load_onnx(path))  # deterministic: the same source and buffers
    assert again.source == art.source and list(again.weights) == list(art.weights)
    assert all(again.weights[k].tobytes() == art.weights[k].tobytes() for k in art.weights)
    model = art.instantiate()
    ep = torch.export.export(model, (torch.from_numpy(x),))
    assert torch.allclose(ep.module()(torch.from_numpy(x))[0], model(torch.from_numpy(x))[0])


@_NEEDS_ORT
def test_bidirectional_gru_runs_on_torchs_kernel_and_matches_onnxruntime(tmp_path):
    """batch_first with an initial state: linear_before_reset=1 (what torch exports) is torch.gru."""
    torch.manual_seed(1)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(8, 24, num_layers=2, bidirectional=True, batch_first=True)

        def forward(self, x, h):
            return self.rnn(x, h)

    path = _export_rnn(Net(), (torch.zeros(3, 10, 8), torch.zeros(4, 3, 24)), tmp_path / "gru.onnx", ["x", "h"])
    art = pt.emit(load_onnx(path))
    body = _forward(art)
    assert body.count("_rnn_native('gru'") == 2 and "_recurrence(" not in body
    assert "torch.gru(" in art.source
    feeds = {"x": _x(3, 10, 8), "h": _x(4, 3, 24)}
    got, want = pt.run(art, feeds), _ort_run(path, feeds)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert g.shape == w.shape and np.abs(g - w).max() <= 1e-5


def _rnn_node_model(op, gates, attrs, hidden=5, steps=4, batch=2, size=3, dirs=1, peepholes=False):
    """One ONNX RNN/GRU/LSTM node whose W, R, B (and P) are graph inputs (known at run time only)."""
    f = TensorProto.FLOAT
    shapes = {"X": [steps, batch, size], "W": [dirs, gates * hidden, size], "R": [dirs, gates * hidden, hidden],
              "B": [dirs, 2 * gates * hidden]}
    if peepholes:
        shapes["P"] = [dirs, 3 * hidden]
    names = ["X", "W", "R", "B"] + (["", "", "", "P"] if peepholes else [])
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=hidden, **attrs)
    m = _onnx_model([node], [helper.make_tensor_value_info(k, f, s) for k, s in shapes.items()],
                    [helper.make_tensor_value_info(o, f, None) for o in outs], opset=14)
    return m, {k: _x(*s) for k, s in shapes.items()}


@_NEEDS_ORT
@pytest.mark.parametrize("op,gates,attrs,peepholes,native", [
    ("LSTM", 4, {"direction": "reverse"}, False, True),
    ("GRU", 3, {"direction": "bidirectional", "linear_before_reset": 1}, False, True),
    ("RNN", 1, {"direction": "bidirectional", "activations": ["Relu", "Relu"]}, False, True),
    ("GRU", 3, {"linear_before_reset": 0}, False, False),  # torch's GRU is linear_before_reset=1 only
    ("LSTM", 4, {}, True, False),  # peepholes
    ("LSTM", 4, {"clip": 0.5}, False, False),
    ("RNN", 1, {"activations": ["Sigmoid"]}, False, False),
])
def test_recurrence_kernel_choice_matches_onnxruntime(tmp_path, op, gates, attrs, peepholes, native):
    """Torch's kernel where ONNX means the same (run-time weights reordered by _rnn_flat_weights),
    the exact float64 loop otherwise; both agree with onnxruntime."""
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    m, feeds = _rnn_node_model(op, gates, attrs, dirs=dirs, peepholes=peepholes)
    path = tmp_path / "rnn.onnx"
    path.write_bytes(m.SerializeToString())
    art = pt.emit(from_proto(m))
    body = _forward(art)
    assert ("_rnn_native(" in body) is native and ("_recurrence(" in body) is not native
    got, want = pt.run(art, feeds), _ort_run(path, feeds)
    for g, w in zip(got, want):  # float32 rounding grows with the values (a ReLU recurrence reaches ~5)
        assert g.shape == w.shape and np.abs(g - w).max() <= 1e-5 * max(1.0, float(np.abs(w).max()))


# ----------------------------------------------------------------------------- symbolic spatial dims
# Rules that used to want static spatial dims compute on any size: SAME pads from the run-time
# size, pools in ceil mode, non-constant pads, conv_transpose to an output_shape, resize by
# scales, depth/space rearrangements... Each model has x: [N, C, H, W] (or a symbolic length),
# converts with the dims kept and checks against the reference and onnxruntime at two sizes,
# odd and even (SAME pads differ by the size's remainder), with the node written by its rule.
SPATIAL_SIZES = {"H": (7, 10), "W": (9, 12)}


def _spatial_model(path, nodes, inits, x_shape=("N", 3, "H", "W"), opset=19, out_rank=4):
    import onnx
    from onnx import numpy_helper as nh

    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * out_rank)],
                          [nh.from_array(np.asarray(v), k) for k, v in inits.items()])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


def _wt(*shape, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 0.3).astype(np.float32)


def _one(op, attrs, inits=None, extra=(), **kw):
    """A one-node model ``y = op(x, *extra)`` (extra inputs are initializers)."""
    def build(path):
        return _spatial_model(path, [helper.make_node(op, ["x", *extra], ["y"], **attrs)], inits or {}, **kw)
    return build


def _i(*v):
    return np.array(v, np.int64)


SPATIAL_CASES = {
    # SAME: the total pad is ext - 1 - (size - 1) % stride; UPPER puts the odd one at the end
    "conv_same_upper_s2": (_one("Conv", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
                                {"w": _wt(4, 3, 3, 3)}, ["w"]), ["(F.pad(x, [", "x.shape[3]"]),
    "conv_same_lower_even_kernel": (_one("Conv", {"kernel_shape": [4, 4], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
                                         {"w": _wt(4, 3, 4, 4, seed=1)}, ["w"]), ["x.shape[2]"]),
    "conv_same_s3_kernel_2": (_one("Conv", {"kernel_shape": [2, 2], "strides": [3, 3], "auto_pad": "SAME_UPPER"},
                                   {"w": _wt(4, 3, 2, 2, seed=2)}, ["w"]), ["torch.sym_max("]),
    "conv_same_s2_kernel_1": (_one("Conv", {"kernel_shape": [1, 1], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
                                   {"w": _wt(4, 3, 1, 1, seed=3)}, ["w"]), ["stride=[2, 2]"]),
    "conv1d_same_lower_sequence": (_one("Conv", {"kernel_shape": [5], "strides": [3], "auto_pad": "SAME_LOWER"},
                                        {"w": _wt(4, 3, 5, seed=4)}, ["w"], x_shape=("N", 3, "W"), out_rank=3),
                                   ["F.pad(x, [(5 - (x.shape[2] - 1) % 3) // 2, (4 - (x.shape[2] - 1) % 3) // 2])"]),
    "max_pool_same_lower": (_one("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
                            ["value=-float('inf')", "x.shape[3]"]),
    "max_pool_2x2": (_one("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}),
                     ["_max_pool(x, [2, 2], [2, 2], [1, 1], [0, 0], [0, 0], False, -float('inf'))"]),
    "max_pool_ceil_uneven_pads": (_one("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 2, 1],
                                                   "ceil_mode": 1}),
                                  ["(x.shape[2] + 1) // 2"]),
    "average_pool_same_upper": (_one("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                     "auto_pad": "SAME_UPPER"}), ["torch.ones_like(x[:1, :1]"]),
    "average_pool_same_counting_pads": (_one("AveragePool", {"kernel_shape": [2, 3], "strides": [2, 2],
                                                             "auto_pad": "SAME_LOWER", "count_include_pad": 1}),
                                        ["value=1.0"]),
    "average_pool_ceil_uneven_pads": (_one("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                           "pads": [1, 0, 2, 1], "ceil_mode": 1}), ["x.shape[2]"]),
    "average_pool_ceil_counting_pads": (_one("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 3],
                                                             "pads": [0, 1, 1, 1], "ceil_mode": 1,
                                                             "count_include_pad": 1}), ["x.shape[3]"]),
    "lp_pool_same": (_one("LpPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER", "p": 2}),
                     ["x.shape[2]"]),
    "conv_transpose_same_upper": (_one("ConvTranspose", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                         "auto_pad": "SAME_UPPER"}, {"w": _wt(3, 2, 3, 3, seed=5)},
                                       ["w"]), ["F.conv_transpose2d("]),
    "conv_transpose_uneven_pads": (_one("ConvTranspose", {"kernel_shape": [3, 3], "strides": [2, 2],
                                                          "pads": [0, 1, 1, 0], "output_padding": [1, 1]},
                                        {"w": _wt(3, 2, 3, 3, seed=6)}, ["w"]), ["F.conv_transpose2d("]),
    "pad_edge_wrap_crop": (lambda p: _spatial_model(p, [
        helper.make_node("Pad", ["x", "p1"], ["e"], mode="edge"),
        helper.make_node("Pad", ["e", "p2"], ["y"], mode="wrap")],
        {"p1": _i(0, 0, 2, -1, 0, 0, -1, 3), "p2": _i(0, 0, -2, 1, 0, 0, 2, 0)}), ["e.shape[2]", "% e.shape[3]"]),
    "pad_reflect_axes": (_one("Pad", {"mode": "reflect"}, {"p": _i(2, 1, 1, 2), "a": _i(-1, 2)}, ["p", "", "a"]),
                         ["_reflect_index("]),
    "resize_linear_scales": (_one("Resize", {"mode": "linear"}, {"s": np.array([1, 1, 2, 1.5], np.float32)},
                                  ["", "s"]), ["F.interpolate(x, scale_factor=[2.0, 1.5], mode='bilinear'"]),
    "resize_nearest_torch_export": (_one("Resize", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                                    "nearest_mode": "floor"},
                                         {"s": np.array([1, 1, 2, 3], np.float32)}, ["", "s"]),
                                    ["F.interpolate(x, scale_factor=[2.0, 3.0], mode='nearest')"]),
    "depth_space_round_trip": (lambda p: _spatial_model(p, [
        helper.make_node("SpaceToDepth", ["x"], ["s"], blocksize=2),
        helper.make_node("Relu", ["s"], ["r"]),
        helper.make_node("DepthToSpace", ["r"], ["y"], blocksize=2, mode="DCR")], {}), ["2 * r.shape[2]"]),
    "slice_reversed_channels": (_one("Slice", {}, {"s": _i(-1), "e": _i(-(2 ** 62)), "a": _i(1), "st": _i(-1)},
                                     ["s", "e", "a", "st"]), ["torch.flip(x, [1])"]),
    "reduce_max_channels": (_one("ReduceMax", {"keepdims": 1}, {"a": _i(1)}, ["a"]), ["torch.amax(x"]),
    "max_unpool": (lambda p: _spatial_model(p, [
        helper.make_node("MaxPool", ["x"], ["m", "i"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("MaxUnpool", ["m", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], {}),
        ["torch.zeros([m.shape[0], 3, 2 * (m.shape[2] - 1) + 2"]),
}
#: sizes a case needs instead (even sizes for space_to_depth and the unpooled pool's inverse)
_CASE_SIZES = {"depth_space_round_trip": {"H": (6, 10), "W": (8, 12)},
               "max_unpool": {"H": (6, 10), "W": (8, 12)}, "conv1d_same_lower_sequence": {"W": (9, 13)}}


@pytest.mark.parametrize("case", sorted(SPATIAL_CASES))
def test_symbolic_spatial_dims_are_computed_at_run_time(case, tmp_path):
    import opbridge
    from translator.compile.pipeline import plan

    build, expected = SPATIAL_CASES[case]
    src = build(tmp_path / f"{case}.onnx")
    sizes = _CASE_SIZES.get(case, SPATIAL_SIZES)
    res = opbridge.convert(str(src), to="pytorch", out=str(tmp_path / "out"), check_dims=sizes)
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and "fixed_dims" not in rec, rec
    assert set(sizes) <= set(rec["dynamic_dims"]["x"]), rec
    assert rec["check"]["status"] == "pass", rec
    assert all(o["vs_source"]["ok"] for o in rec["check"]["outputs"]), rec  # onnxruntime agrees too
    for dim, want in sizes.items():
        assert [s[dim] for s in rec["check"]["sizes"]] == list(want), rec
    how = plan(load_onnx(src), pt.TARGET).how
    assert "decomposed" not in how.values(), how  # each node written by its own rule
    source = (Path(rec["output"]) / pt.MODULE_FILE).read_text()
    for text in expected:
        assert text in source, (text, source)


@pytest.mark.parametrize("case", ["conv_same_upper_s2", "conv_same_s3_kernel_2", "conv1d_same_lower_sequence",
                                  "max_pool_same_lower", "max_pool_2x2",
                                  "average_pool_same_counting_pads",
                                  "conv_transpose_uneven_pads", "pad_edge_wrap_crop", "resize_linear_scales"])
def test_run_time_sizes_pass_torch_export_with_dynamic_dims(case, tmp_path):
    """The sizes are torch arithmetic on ``x.shape`` (``torch.sym_max`` where a SAME total could
    be negative), so ``torch.export`` keeps the dims symbolic; the program matches eager at
    sizes other than the traced ones."""
    src = SPATIAL_CASES[case][0](tmp_path / f"{case}.onnx")
    m = pt.emit(load_onnx(src)).instantiate()
    rank = 3 if case.startswith("conv1d") else 4
    dims = {2: torch.export.Dim("W", min=16, max=512)} if rank == 3 else \
        {2: torch.export.Dim("H", min=16, max=512), 3: torch.export.Dim("W", min=16, max=512)}
    ep = torch.export.export(m, (torch.from_numpy(_x(2, 3, 20, 24)[..., 0] if rank == 3 else _x(2, 3, 20, 24)),),
                             dynamic_shapes=(dims,))
    for shape in ((2, 3, 17, 31), (2, 3, 26, 40)):
        x = torch.from_numpy(_x(*shape[:rank]))
        with torch.no_grad():
            for want, got in zip(m(x), ep.module()(x)):
                assert want.shape == got.shape and torch.allclose(want, got, atol=1e-6), (case, shape)


def test_a_weight_two_layers_share_stays_one_buffer():
    """Two convolutions reading one weight: a layer of its own would load it twice (and let the
    two drift apart when trained); it stays one buffer both read."""
    from onnx import numpy_helper

    w = numpy_helper.from_array(_wt(3, 3, 3, 3), "shared")
    nodes = [helper.make_node("Conv", ["x", "shared"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "shared"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    art = pt.emit(from_proto(m))
    assert list(art.weights) == ["shared"] and "torch.nn.Conv2d" not in art.source, art.source
    x = _x(1, 3, 8, 8)
    (got,) = pt.run(art, {"x": x})
    (want,) = _reference(lambda: from_proto(m), {"x": x})
    assert compare(want, got).ok


@pytest.mark.parametrize("weight", ["forward.weight", "_prepare.weight", "__init__.weight", "a b;import os.weight"])
def test_a_layer_named_after_a_module_attribute_does_not_shadow_it(weight):
    """A layer's name comes from its weight's name: one that would shadow ``forward``, the
    module's ``_prepare`` or any ``torch.nn.Module`` attribute gets a suffix; any text is
    sanitized into an identifier."""
    from onnx import numpy_helper

    w = numpy_helper.from_array(_wt(3, 3, 3, 3), weight)
    g = helper.make_graph([helper.make_node("Conv", ["x", weight], ["y"], pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    art = pt.emit(from_proto(m))
    (name,) = {k.rsplit(".", 1)[0] for k in art.weights}
    assert name.isidentifier() and name not in ("forward", "_prepare", "__init__"), name
    x = _x(1, 3, 8, 8)
    (got,) = pt.run(art, {"x": x})
    (want,) = _reference(lambda: from_proto(m), {"x": x})
    assert compare(want, got).ok


@pytest.mark.parametrize("bias_read_twice", [False, True], ids=["folded", "bias_shared"])
def test_a_matmul_and_its_bias_add_are_one_linear_layer(bias_read_twice):
    """torch.onnx writes ``nn.Linear`` on a 3-D input as MatMul + Add: the product with a
    constant matrix is a ``torch.nn.Linear`` and the Add of a bias nothing else reads is its
    bias; a bias another node also reads stays an Add over a buffer."""
    from onnx import numpy_helper

    w = numpy_helper.from_array(_wt(4, 5), "proj.weight_t")
    b = numpy_helper.from_array(_wt(5, seed=1), "proj.bias")
    nodes = [helper.make_node("MatMul", ["x", "proj.weight_t"], ["m"], name="/proj/MatMul"),
             helper.make_node("Add", ["m", "proj.bias"], ["y"], name="/proj/Add")]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])]
    if bias_read_twice:
        nodes.append(helper.make_node("Mul", ["v", "proj.bias"], ["z"]))
        ins.append(helper.make_tensor_value_info("v", TensorProto.FLOAT, [5]))
        outs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [5]))
    g = helper.make_graph(nodes, "g", ins, outs, [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    art = pt.emit(from_proto(m))
    if bias_read_twice:
        assert "self.proj = torch.nn.Linear(4, 5, bias=False)" in art.source, art.source
    else:
        assert "self.proj = torch.nn.Linear(4, 5)" in art.source and sorted(art.weights) == ["proj.bias", "proj.weight"]
        np.testing.assert_array_equal(art.weights["proj.weight"], _wt(4, 5).T)
    feeds = {"x": _x(2, 3, 4), **({"v": _x(5)} if bias_read_twice else {})}
    got = pt.run(art, feeds)
    want = _reference(lambda: from_proto(m), feeds)
    assert len(got) == len(want) and all(compare(a, b_).ok for a, b_ in zip(want, got))


def test_one_element_constants_are_numbers_and_a_spelled_out_hard_swish_is_one_call():
    """Nothing is built on every ``forward`` for a scalar operand: a one-element constant of the
    other operand's dtype is a Python number (``torch.add(x, 3.0)``, ``torch.rsub`` for a
    constant minuend, ``torch.clamp(x, 0.0, 6.0)``, whose tensor-bound kernel is much slower),
    with the bits of the 0-d tensor form; a constant that would add a dim stays a tensor.
    paddle2onnx's ``x * clip(x + 3, 0, 6) / 6`` is ``F.hardswish``."""
    from onnx import numpy_helper as nh

    from translator.run.harness import convert

    H = helper
    f = TensorProto.FLOAT
    nodes = [H.make_node("Add", ["x", "three"], ["a"]), H.make_node("Clip", ["a", "zero", "six"], ["c"]),
             H.make_node("Mul", ["x", "c"], ["m"]), H.make_node("Div", ["m", "six"], ["hs"]),
             H.make_node("Sub", ["tenth", "x"], ["s"]), H.make_node("Mul", ["tenth", "s"], ["p"]),
             H.make_node("Div", ["p", "seventh"], ["q"]), H.make_node("Clip", ["q", "zero", "six"], ["r"]),
             H.make_node("Add", ["x", "row"], ["w"])]
    inits = [nh.from_array(np.array(v, np.float32), n) for n, v in
             [("three", 3.0), ("zero", 0.0), ("six", 6.0), ("tenth", 0.1), ("seventh", 7.0)]]
    inits.append(nh.from_array(np.full((1, 1, 1), 0.3, np.float32), "row"))
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", f, [2, 5])],
                     [H.make_tensor_value_info(n, f, None) for n in ("hs", "r", "w")], inits)
    model = from_proto(H.make_model(g, opset_imports=[H.make_opsetid("", 17)]))
    art = convert("pytorch", model)
    fwd = art.source[art.source.index("def forward"):]
    assert "F.hardswish(" in fwd and "torch.clamp(x" not in fwd
    assert "torch.rsub(x, 0.10000000149011612)" in fwd and "torch.div(" in fwd and ", 7.0)" in fwd
    assert ", 0.0, 6.0)" in fwd
    lines = [ln.strip() for ln in fwd.splitlines() if "torch.tensor(" in ln]
    assert lines == ["w = torch.add(x, torch.tensor([[[0.30000001192092896]]], dtype=torch.float32))"], lines
    x = np.linspace(-7, 7, 10, dtype=np.float32).reshape(2, 5)
    got = pt.run(art, {"x": x})
    t = torch.from_numpy(x)
    c = {k: torch.tensor(v, dtype=torch.float32) for k, v in [("three", 3.0), ("zero", 0.0), ("six", 6.0),
                                                                ("tenth", 0.1), ("seventh", 7.0)]}
    r = torch.clamp(torch.div(torch.mul(c["tenth"], torch.sub(c["tenth"], t)), c["seventh"]), c["zero"], c["six"])
    np.testing.assert_array_equal(got[1], r.numpy())  # the 0-d tensor form's bits
    np.testing.assert_array_equal(got[0], torch.nn.functional.hardswish(t).numpy())
    assert got[2].shape == (1, 2, 5)


@pytest.mark.parametrize("nd, attrs", [(1, {"kernel_shape": [5], "dilations": [3], "pads": [6, 6]}),
                                       (2, {"kernel_shape": [3, 3], "dilations": [2, 1], "strides": [2, 1],
                                            "pads": [2, 1, 2, 1]})])
def test_a_dilated_convolution_layer_of_a_small_input_is_one_matrix_product(nd, attrs, tmp_path):
    """torch runs a dilated convolution of a batch-1 input under 20480 values with its native
    dilated loop (4x slower): the layer is called through ``_dilated_conv``, one product over the
    taps there, the layer itself for larger inputs and when traced (torch.export keeps the dims)."""
    import onnx
    from onnx import numpy_helper as nh

    import opbridge

    rng = np.random.default_rng(5)
    w = rng.standard_normal((6, 4, *attrs["kernel_shape"])).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    shape = [1, 4, "L"] if nd == 1 else [1, 4, "H", "W"]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [nh.from_array(w, "w"), nh.from_array(b, "b")])
    src = tmp_path / "dil.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    sizes = {"L": (30, 6000)} if nd == 1 else {"H": (9, 90), "W": (11, 80)}  # under and over 20480 values
    (rec,) = opbridge.convert(str(src), to="pytorch", out=str(tmp_path / "out"), check_dims=sizes)["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    art = pt.emit(load_onnx(src))
    assert "_dilated_conv(self." in art.source
    m = art.instantiate()
    layer = next(c for c in m.modules() if isinstance(c, (torch.nn.Conv1d, torch.nn.Conv2d)))
    x = torch.from_numpy(_x(1, 4, 30) if nd == 1 else _x(1, 4, 9, 11))
    with torch.no_grad():
        assert torch.allclose(m(x)[0], layer(x), atol=1e-5)
        dims = {2: torch.export.Dim("L", min=20, max=4000)} if nd == 1 else \
            {2: torch.export.Dim("H", min=8, max=64), 3: torch.export.Dim("W", min=8, max=64)}
        ep = torch.export.export(m, (x,), dynamic_shapes=(dims,))
        x2 = torch.from_numpy(_x(1, 4, 41) if nd == 1 else _x(1, 4, 13, 17))
        assert torch.allclose(ep.module()(x2)[0], layer(x2), atol=1e-5)


def test_whole_axis_reversal_of_a_run_time_size_is_a_flip(tmp_path):
    """A step -1 slice from the end to past the start (torch.onnx's ``flip``: starts -1, ends
    INT64_MIN) over an axis whose size is known only at run time is ``torch.flip``, not the
    run-time slice helper; it reverses at every size."""
    from onnx import numpy_helper as nh

    inits = [nh.from_array(np.array(v, np.int64), n) for n, v in
             (("st", [-1]), ("en", [-(2**63) + 1]), ("ax", [-1]), ("sp", [-1]))]
    m = from_proto(_onnx_model([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
                               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "t"])],
                               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, "t"])], inits))
    art = pt.emit(m)
    assert "torch.flip(" in art.source and "_slice(" not in art.source.split("class ")[1]
    for t in (1, 5):
        x = _x(1, 3, t)
        (got,) = pt.run(art, {"x": x})
        np.testing.assert_array_equal(got, x[..., ::-1])


def test_a_constant_exponent_is_a_number():
    """``x ** 2`` with the exponent a constant is torch's tensor-scalar pow (a square is x * x),
    not the general elementwise pow over a 0-d tensor built on every forward; same values."""
    x = _x(2, 3)
    model, feeds = single_op_model("pow", [x, np.array(2.0, np.float32)], {}, const=(1,))
    art = pt.emit(model)
    assert ", 2.0)" in art.source and "torch.tensor(2.0" not in art.source, art.source
    (got,) = pt.run(art, feeds)
    np.testing.assert_allclose(got, x ** 2, rtol=1e-6)


@pytest.mark.parametrize("case", ["2d_depthwise", "2d_dense_bias", "1d_dense", "2d_one_output", "2d_dynamic"])
def test_a_deconvolution_whose_kernel_is_its_stride_is_one_product_tiled_into_place(case):
    """A ConvTranspose with kernel = stride and no pads writes each input pixel's own block: the
    module computes it as one matmul over the pixels (depthwise: one broadcast multiply) and a
    copy into place, not ``F.conv_transpose*d`` (2-3x slower on one thread for paddle's 2x2 DB
    heads), with onnxruntime's values, at static and symbolic sizes."""
    import onnxruntime as ort

    rng = np.random.default_rng(4)
    nd = 1 if case.startswith("1d") else 2
    c = 6
    o, group = {"2d_depthwise": (1, c), "2d_one_output": (1, 1)}.get(case, (4, 1))
    k = [2, 3][:nd] if case != "1d_dense" else [4]
    w = rng.standard_normal([c, o] + k).astype(np.float32)
    spatial = [5, 7][:nd]
    inits = [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel())]
    ins = ["x", "w"]
    if case == "2d_dense_bias":
        b = rng.standard_normal(o * group).astype(np.float32)
        inits.append(helper.make_tensor("b", TensorProto.FLOAT, b.shape, b))
        ins.append("b")
    x_dims = ["n", c, "h", "w"] if case == "2d_dynamic" else [2, c] + spatial
    node = helper.make_node("ConvTranspose", ins, ["y"], kernel_shape=k, strides=k, group=group)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    art = pt.emit(from_proto(proto))
    assert "F.conv_transpose" not in art.source and ".flatten(2, 3)" in art.source, art.source
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    shapes = [[2, c] + spatial] + ([[1, c, 3, 9]] if case == "2d_dynamic" else [])
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        (got,) = pt.run(art, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- memory format
def _conv_net(channels: list[int], depthwise_at: int | None = None, dims=None) -> "onnx.ModelProto":
    """Convolutions 3×3 (``channels[i] → channels[i + 1]``; a depthwise one at ``depthwise_at``)
    with ReLUs, a global average pool and a Gemm."""
    rng = np.random.default_rng(3)
    nodes, inits, x = [], [], "x"
    for i, (cin, cout) in enumerate(zip(channels, channels[1:])):
        group = cin if i == depthwise_at else 1
        w = (rng.standard_normal([cout, cin // group, 3, 3]) / np.sqrt(9 * cin / group)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32)
        inits += [helper.make_tensor(f"w{i}", TensorProto.FLOAT, w.shape, w.ravel()),
                  helper.make_tensor(f"b{i}", TensorProto.FLOAT, b.shape, b)]
        nodes += [helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], group=group),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        x = f"r{i}"
    fc = rng.standard_normal([channels[-1], 5]).astype(np.float32)
    inits.append(helper.make_tensor("fc", TensorProto.FLOAT, fc.shape, fc.ravel()))
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]), helper.make_node("Flatten", ["gap"], ["f"]),
              helper.make_node("Gemm", ["f", "fc"], ["y"]), helper.make_node("Add", [x, x], ["twice"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       dims or [1, channels[0], 12, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("twice", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("dims", [None, ["n", 1, "h", "w"]], ids=["static", "symbolic"])
def test_a_convolutional_model_holds_its_filters_channels_last(dims, tmp_path):
    """Where most filter weights are in convolutions with 16+ output channels over 16+ input
    channels per group (or one: depthwise, or a single input plane), the module holds its 2-D
    filters channels-last (``module.to(memory_format=torch.channels_last)``: what a PyTorch user
    writes for oneDNN), so the convolutions and the ops between them run over NHWC; the values
    are onnxruntime's, at static and symbolic sizes, saved and loaded back, and under
    ``torch.export``; ``--contiguous`` keeps torch's default layout."""
    import onnxruntime as ort

    proto = _conv_net([1, 32, 32, 32, 24], depthwise_at=2, dims=dims)
    art = pt.emit(from_proto(proto))
    assert "self.to(memory_format=torch.channels_last)" in art.source, art.source
    assert art.options.get("features") == ["channels_last"], art.options
    m = art.instantiate()
    convs = [c for c in m.modules() if isinstance(c, torch.nn.Conv2d)]
    assert len(convs) == 4 and all(c.weight.is_contiguous(memory_format=torch.channels_last) for c in convs)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in [[1, 1, 12, 10]] + ([[3, 1, 7, 9]] if dims else []):
        x = RNG.standard_normal(shape).astype(np.float32)
        want = sess.run(None, {"x": x})
        got = pt.run(art, {"x": x})
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    loaded = pt.load(art.save(tmp_path / "cl"), art)
    for w, g in zip(want, pt.run(loaded, {"x": x})):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    _export_ok(art, {"x": x})
    plain = pt.emit(from_proto(proto), contiguous=True)
    assert "channels_last" not in plain.source and not plain.options.get("features"), plain.options


@pytest.mark.parametrize("channels", [[1, 8, 8, 4], [3, 8, 16, 8], [1, 1, 1]], ids=["narrow", "few_inputs", "single"])
def test_a_model_of_narrow_convolutions_stays_contiguous(channels):
    """Convolutions of few channels (1–8 per group, or 2–15 inputs) run no faster over NHWC
    (a pitch tracker's single-plane filters ran 1.4× slower): the module keeps torch's
    default layout."""
    art = pt.emit(from_proto(_conv_net(channels)))
    assert "channels_last" not in art.source and not art.options.get("features"), art.source


def test_convert_falls_back_to_contiguous_filters_when_channels_last_fails_the_check(tmp_path, monkeypatch):
    """A channels-last module sums its convolutions in another order: where that strays past
    the check, ``convert`` writes the module again with ``--contiguous``, says so, and records
    it (``fell_back_to``)."""
    import onnx
    import opbridge
    from translator.run import convert as convert_mod

    proto = _conv_net([1, 32, 32, 24])
    path = tmp_path / "cnn.onnx"
    onnx.save(proto, path)
    real = convert_mod._check_at_sizes

    def strict(build, t, feeds, rec, artifact, *rest, **kw):
        b = real(build, t, feeds, rec, artifact, *rest, **kw)
        if "channels_last" in (artifact.options.get("features") or ()):  # as if NHWC strayed
            return {**b, "status": "fail"}
        return b

    monkeypatch.setattr(convert_mod, "_check_at_sizes", strict)
    x = RNG.standard_normal([1, 1, 12, 10]).astype(np.float32)
    (rec,) = opbridge.convert(str(path), to="pytorch", out=str(tmp_path / "out"), inputs={"x": x})["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert rec["fell_back_to"] == {"contiguous": True}, rec.get("fell_back_to")
    assert any("--contiguous" in w for w in rec.get("warnings", [])), rec.get("warnings")
    assert "channels_last" not in (tmp_path / "out" / pt.MODULE_FILE).read_text()


# ----------------------------------------------------------------------------- in place
def _residual_net() -> "onnx.ModelProto":
    """conv → relu → conv → add(skip: the first relu) → relu, plus cases that must not be in
    place: a relu of the input, of a value read twice, of a view (reshape), a broadcasting add,
    a sigmoid of a mul and a sub whose second operand is the fresh one."""
    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal([8, 3, 3, 3]) / 5).astype(np.float32)
    w2 = (rng.standard_normal([8, 8, 3, 3]) / 8).astype(np.float32)
    bias = rng.standard_normal([1, 8, 1, 1]).astype(np.float32)
    inits = [helper.make_tensor("w1", TensorProto.FLOAT, w1.shape, w1.ravel()),
             helper.make_tensor("w2", TensorProto.FLOAT, w2.shape, w2.ravel()),
             helper.make_tensor("bias", TensorProto.FLOAT, bias.shape, bias.ravel()),
             helper.make_tensor("flat", TensorProto.INT64, [2], [1, -1])]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"]),
             helper.make_node("Relu", ["x"], ["rx"]),                      # a graph input
             helper.make_node("Conv", ["x", "w1"], ["c3"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c3"], ["r3"]),                     # c3 is read twice
             helper.make_node("Add", ["r3", "c3"], ["twice"]),
             helper.make_node("Conv", ["x", "w1"], ["c5"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c5", "flat"], ["view"]),
             helper.make_node("Relu", ["view"], ["rv"]),                   # a view of c5
             helper.make_node("Conv", ["x", "w1"], ["c6"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c6"], ["r6"]),                     # c6 is a graph output
             helper.make_node("Conv", ["x", "w1"], ["c4"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("ReduceMean", ["c4"], ["m"], keepdims=1),
             helper.make_node("Add", ["m", "bias"], ["b"]),                # broadcasts m: not in place
             helper.make_node("Mul", ["b", "b"], ["bb"]),
             helper.make_node("Sigmoid", ["bb"], ["sb"]),                   # mul's output: in place
             helper.make_node("Sub", ["bias", "sb"], ["d"])]                # the second operand: not
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
                           for n in ("y", "rx", "twice", "rv", "d", "c6", "r6")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_activations_and_adds_overwrite_a_fresh_operand_nothing_else_reads(tmp_path):
    """A relu / sigmoid / tanh, an add or a sub writes over its operand where that is a new
    tensor a convolution, product or arithmetic op wrote, read by nothing else and of the
    output's shape and dtype (``nn.ReLU(inplace=True)``: no new pages per call); never over an
    input, a value read twice, a view, a graph output or a broadcast operand. The values are
    onnxruntime's, torch.export takes it, and in training its gradients are the out-of-place
    module's (autograd keeps what it needs: only ops whose backward reads their output, or
    nothing, are written in place, over outputs no backward reads)."""
    import onnxruntime as ort

    proto = _residual_net()
    art = pt.emit(from_proto(proto))
    src = art.source.split("def forward", 1)[1]
    assert src.count(".relu_()") == 2 and src.count(".add_(") == 1 and src.count(".sigmoid_()") == 1, src
    assert ".sub_(" not in src and "torch.relu(x)" in src, src
    x = RNG.standard_normal([1, 3, 6, 5]).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for w, got in zip(want, pt.run(art, {"x": x})):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    _export_ok(art, {"x": x})
    m = art.instantiate().train()
    xt = torch.from_numpy(x).requires_grad_(True)
    sum(o.sum() for o in m(xt)).backward()
    plain = pt.emit(from_proto(proto), fold=True)
    plain_src = plain.source.replace(".relu_()", ".relu()").replace(".sigmoid_()", ".sigmoid()")
    plain_src = re.sub(r"(\w+)\.add_\(", r"torch.add(\1, ", plain_src)
    ns: dict = {}
    exec(compile(plain_src, "<plain>", "exec"), ns)  # noqa: S102 - our own generated code
    ref = ns[plain.class_name]()
    ref.load_state_dict(plain.state_dict())
    xr = torch.from_numpy(x).requires_grad_(True)
    sum(o.sum() for o in ref.train()(xr)).backward()
    torch.testing.assert_close(xt.grad, xr.grad)
    for (name, p), (_, q) in zip(m.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_nothing_is_written_in_place_where_a_subgraph_may_read_it():
    """A graph with a Loop: its body may read any outer value, which no use list records."""
    body = helper.make_graph(
        [helper.make_node("Add", ["c", "c"], ["c2"]), helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("c2", TensorProto.FLOAT, [2])])
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
         helper.make_node("Loop", ["n", "", "r"], ["out"], body=body)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2])])
    art = pt.emit(from_proto(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])))
    assert "_()" not in art.source.split("def forward", 1)[1] and ".add_(" not in art.source, art.source


def test_no_op_nodes_are_the_same_tensor_and_a_returned_one_is_a_copy():
    """An identity, a full slice and a pad by nothing are their input under a new name (no copy
    per call), a gather of one constant index is a Python-int select (``state[0]``); where the
    graph returns such a value it is a copy (an output is never an input or another output)."""
    starts = helper.make_tensor("st", TensorProto.INT64, [1], [0])
    ends = helper.make_tensor("en", TensorProto.INT64, [1], [2**62])
    zero = helper.make_tensor("zero", TensorProto.INT64, [], [1])
    nodes = [helper.make_node("Identity", ["x"], ["i1"]),
             helper.make_node("Slice", ["i1", "st", "en"], ["s1"]),
             helper.make_node("Gather", ["s1", "zero"], ["g1"], axis=0),
             helper.make_node("Relu", ["g1"], ["y"]),
             helper.make_node("Identity", ["x"], ["returned"]),
             helper.make_node("Gather", ["x", "zero"], ["g2"], axis=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "returned", "g2")],
                          [starts, ends, zero])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    art = pt.emit(from_proto(proto))
    fwd = art.source.split("def forward", 1)[1]
    assert fwd.count("torch.clone(") == 2 and "[1]" in fwd and "torch.tensor(1" not in fwd, fwd
    x = _x(3, 4)
    y, returned, g2 = pt.run(art, {"x": x})
    np.testing.assert_array_equal(y, np.maximum(x[1], 0))
    np.testing.assert_array_equal(returned, x)
    np.testing.assert_array_equal(g2, x[:, 1])
    m = art.instantiate()
    xt = torch.from_numpy(x)
    outs = m(xt)
    assert all(o.data_ptr() != xt.data_ptr() for o in outs[1:])  # copies, not the input
    _export_ok(art, {"x": x})
