"""ONNX → IR: version-range handlers, semantic op names, and bad input with exit code 2."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from translator.table.errors import FrontendError
from translator.frontends.onnx import from_proto, load_onnx
from translator.run.harness import compare
from translator.compile.interpreter import run

ROOT = Path(__file__).resolve().parent.parent


def _model(nodes, inputs, outputs, opset=17, inits=(), domain_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domain_opsets]
    return helper.make_model(g, opset_imports=ops, ir_version=8)


def vi(name, elem=TensorProto.FLOAT, shape=(2, 3)):
    return helper.make_tensor_value_info(name, elem, list(shape))


@pytest.mark.parametrize("fmod, op_id, expected", [(0, "floor_mod", [2, -2]), (1, "trunc_mod", [-1, 1])])
def test_mod_maps_by_fmod(fmod, op_id, expected):
    m = _model([helper.make_node("Mod", ["a", "b"], ["c"], fmod=fmod)], [vi("a", TensorProto.INT32, (2,)),
               vi("b", TensorProto.INT32, (2,))], [vi("c", TensorProto.INT32, (2,))])
    ir = from_proto(m)
    assert [n.op for n in ir.graph.nodes] == [op_id] and "fmod" not in ir.graph.nodes[0].attrs
    out = run(ir, {"a": np.asarray([-7, 7], np.int32), "b": np.asarray([3, -3], np.int32)})[0]
    assert out.tolist() == expected


def test_version_range_handler_upgrades_reduce_axes_attribute():
    m = _model([helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)], [vi("x")], [vi("y", shape=(2,))],
               opset=11)
    ir = from_proto(m)
    (node,) = ir.graph.nodes
    assert node.op == "reduce_sum" and "axes" not in node.attrs and node.inputs[1].const.tolist() == [1]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert run(ir, {"x": x})[0].tolist() == [3.0, 12.0]


def test_old_softmax_semantics_are_kept():
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [vi("x", shape=(2, 3, 4))], [vi("y", shape=(2, 3, 4))],
               opset=11)
    ir = from_proto(m)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    flat = x.reshape(2, 12)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    expected = (e / e.sum(axis=1, keepdims=True)).reshape(2, 3, 4)
    assert compare(expected, run(ir, {"x": x})[0]).ok


def _check_cli(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "translator.cli", "check", str(path)], capture_output=True, text=True,
                          cwd=ROOT)


def _assert_one_line_exit_2(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("opbridge: error:")]
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_truncated_and_non_onnx_files(tmp_path):
    good = _model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")])
    data = good.SerializeToString()
    t = tmp_path / "truncated.onnx"
    t.write_bytes(data[: len(data) // 2])
    _assert_one_line_exit_2(_check_cli(t), "truncated.onnx")
    n = tmp_path / "notes.onnx"
    n.write_text("hello, I am not a model")
    _assert_one_line_exit_2(_check_cli(n), "not an ONNX model")
    _assert_one_line_exit_2(_check_cli(tmp_path / "missing.onnx"), "file not found")


def test_unknown_op_and_domain_name_the_node(tmp_path):
    m = _model([helper.make_node("FrobnicateX", ["x"], ["y"], name="frob1")], [vi("x")], [vi("y")])
    p = tmp_path / "unknown_op.onnx"
    p.write_bytes(m.SerializeToString())
    _assert_one_line_exit_2(_check_cli(p), "frob1", "FrobnicateX")
    m = _model([helper.make_node("Foo", ["x"], ["y"], name="custom1", domain="com.example")], [vi("x")], [vi("y")],
               domain_opsets=[("com.example", 1)])
    p = tmp_path / "unknown_domain.onnx"
    p.write_bytes(m.SerializeToString())
    _assert_one_line_exit_2(_check_cli(p), "custom1", "com.example", "unknown_domain")


def _external_model(tmp_path: Path) -> Path:
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    init = numpy_helper.from_array(w, "w")
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x")], [vi("y")], inits=[init])
    path = tmp_path / "ext.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="ext.bin",
                    size_threshold=0)
    return path


def test_external_data_is_memory_mapped(tmp_path):
    path = _external_model(tmp_path)
    ir = load_onnx(path)
    (w,) = [v for v in ir.graph.constants.values()]
    assert isinstance(w.const, np.memmap)
    out = run(ir, {"x": np.ones((2, 3), np.float32)})[0]
    assert out.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_missing_external_data_is_a_clear_error(tmp_path):
    path = _external_model(tmp_path)
    (tmp_path / "ext.bin").unlink()
    with pytest.raises(FrontendError) as ei:
        load_onnx(path)
    assert ei.value.code == "missing_external_data" and "ext.bin" in str(ei.value)
    _assert_one_line_exit_2(_check_cli(path), "ext.bin")
