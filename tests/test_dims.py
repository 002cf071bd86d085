"""Symbolic input dims end to end (``translator.ir.dims``): kept dynamic where the target keeps
them and checked at two sizes, fixed (and said so) where it does not, ``--fix-dim`` on demand."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from translator.ir import dims
from translator.table.errors import OpbridgeError

ROOT = Path(__file__).resolve().parents[1]


def _mlp(path: Path) -> Path:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    w = nh.from_array(np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32), "W")
    g = h.make_graph([h.make_node("MatMul", ["x", "W"], ["y0"]), h.make_node("Relu", ["y0"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, ["batch", 8])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])], [w])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def test_parse_and_labels():
    assert dims.parse(["batch=1", "x:1=16"]) == {"batch": 1, "x:1": 16}
    for bad in ("batch", "=3", "batch=0", "batch=two"):
        with pytest.raises(OpbridgeError, match="fix-dim"):
            dims.parse([bad])
    assert dims.label("x", 0, "batch") == "batch" and dims.label("x", 2, None) == "x:2"


def test_fix_names_unknown_dims():
    from translator.frontends import load

    with pytest.raises(OpbridgeError, match="no such symbolic input dim .*it has: batch"):
        dims.fix(load(str(_mlp_tmp())), {"bat": 2}, every=False)


def test_fixing_a_symbol_types_every_value_named_with_it(tmp_path):
    """A fixed ``batch`` is 1 wherever the model's types say ``batch`` (an LSTM's outputs, which
    shape inference does not recompute), not only on the input."""
    from translator.frontends import load

    model = load(str(_mlp(tmp_path / "mlp.onnx")))
    assert dims.fix(model, {}, every=True) == {"batch": 1}
    assert [tuple(n.outputs[0].type.shape) for n in model.graph.nodes] == [(1, 4), (1, 4)]


def _mlp_tmp() -> Path:
    import tempfile

    return _mlp(Path(tempfile.mkdtemp()) / "mlp.onnx")


def test_dynamic_batch_kept_and_checked_at_two_sizes_flexible_on_coreml(tmp_path):
    """Every target keeps the batch dim; Core ML declares it flexible (``ct.RangeDim`` from 1,
    default the first checked size) and the written package is evaluated at both sizes."""
    import onnx

    import opbridge

    model = _mlp(tmp_path / "mlp.onnx")
    res = opbridge.convert(str(model), to="onnx,pytorch,openvino,coreml", out=str(tmp_path / "out"))
    assert res["written"], res
    by = {r["target"]: r for r in res["targets"]}
    for t in ("onnx", "pytorch", "openvino", "coreml"):
        assert by[t]["status"] == "ok", by[t]
        assert by[t]["dynamic_dims"] == {"x": ["batch"]}
        assert by[t]["check"]["sizes"] == [{"batch": n} for n in dims.CHECK_SIZES]
        assert by[t]["check"]["status"] == "pass"
        assert "fixed_dims" not in by[t]
    written = onnx.load(by["onnx"]["output"])
    assert written.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    from coremltools.models import MLModel

    spec = MLModel(str(Path(by["coreml"]["output"]) / "model.mlpackage"), skip_model_load=True).get_spec()
    arr = spec.description.input[0].type.multiArrayType
    assert arr.shape[0] == dims.CHECK_SIZES[0] and arr.shapeRange.sizeRanges[0].lowerBound == 1
    assert arr.shapeRange.sizeRanges[0].upperBound > 1000


def test_fix_dim_on_request_checks_at_that_size(tmp_path):
    import opbridge

    model = _mlp(tmp_path / "mlp.onnx")
    res = opbridge.convert(str(model), to="onnx", out=str(tmp_path / "m.onnx"), fix_dims={"batch": 2})
    rec = res["targets"][0]
    assert rec["status"] == "ok" and rec["fixed_dims"] == {"batch": 2} and "dynamic_dims" not in rec
    import onnx

    assert onnx.load(rec["output"]).graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2


def test_cli_unknown_fix_dim_is_one_line_exit_2(tmp_path):
    model = _mlp(tmp_path / "mlp.onnx")
    out = tmp_path / "o.onnx"
    p = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(model), "--to", "onnx", "-o", str(out),
                        "--fix-dim", "bat=2", "-q"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "bat" in p.stderr and "it has: batch" in p.stderr
    assert not out.exists()


def test_check_dims_choose_the_sizes_and_the_fixed_size(tmp_path):
    import opbridge

    assert dims.parse_check(["samples=400,800"]) == {"samples": (400, 800)}
    for bad in ("samples=400", "samples=0,3", "samples"):
        with pytest.raises(OpbridgeError, match="check-dim"):
            dims.parse_check([bad])
    model = _mlp(tmp_path / "mlp.onnx")
    res = opbridge.convert(str(model), to="pytorch,coreml", out=str(tmp_path / "out"), check_dims={"batch": (2, 5)})
    by = {r["target"]: r for r in res["targets"]}
    assert by["pytorch"]["check"]["sizes"] == [{"batch": 2}, {"batch": 5}] and by["pytorch"]["status"] == "ok"
    assert by["coreml"]["check"]["sizes"] == [{"batch": 2}, {"batch": 5}] and by["coreml"]["status"] == "ok"
    with pytest.raises(OpbridgeError, match="check-dim bat"):
        opbridge.convert(str(model), to="onnx", out=str(tmp_path / "x.onnx"), check_dims={"bat": (2, 5)})


def _conv1d(path: Path) -> Path:
    """A length-5 kernel over a symbolic length, plus a (1, 2, 12) position table (wav2vec2's
    pattern): only a length of 16 runs; fixed to 1 the shapes do not broadcast."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    w = nh.from_array(np.random.default_rng(1).standard_normal((2, 1, 5)).astype(np.float32), "W")
    pos = nh.from_array(np.random.default_rng(2).standard_normal((1, 2, 12)).astype(np.float32), "P")
    g = h.make_graph([h.make_node("Conv", ["x", "W"], ["c"], kernel_shape=[5]), h.make_node("Add", ["c", "P"], ["y"])],
                     "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 1, "len"])],
                     [h.make_tensor_value_info("y", T.FLOAT, ["batch", 2, 12])], [w, pos])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def test_report_judges_at_the_sizes_convert_fixes(tmp_path):
    """``report`` takes convert's --fix-dim, so it predicts at the size convert converts at
    (fixed to 1 the length does not broadcast with the position table: refused on every
    target; fixed to 16 it does), and an unknown dim is the same bad_option."""
    import opbridge

    model = str(_conv1d(tmp_path / "c.onnx"))
    def refused(rep: dict) -> list:
        return [n for n in rep["backends"]["coreml"]["nodes"] if n["status"] == "unsupported"]

    assert not refused(opbridge.report(model, backends=["coreml"]))  # symbolic: flexible on Core ML
    assert refused(opbridge.report(model, backends=["coreml"], fix_dims={"len": 1}))
    assert not refused(opbridge.report(model, backends=["coreml"], fix_dims={"len": 16}))
    res = opbridge.convert(model, to="coreml", out=str(tmp_path / "c.mlpackage"), fix_dims={"len": 16},
                           check_dims={"batch": (1, 2)})
    rec = res["targets"][0]
    assert rec["status"] == "ok" and rec["fixed_dims"] == {"len": 16} and rec["dynamic_dims"] == {"x": ["batch"]}
    with pytest.raises(OpbridgeError, match="no such symbolic input dim"):
        opbridge.report(model, backends=["coreml"], fix_dims={"lenn": 4})


def _channel_if(path: Path) -> Path:
    """``if x.shape[1] == 1: x = x.squeeze(1).unsqueeze(1) else: x = x[None]`` then a transpose
    without ``perm`` (pyannote's mono check, as torch.onnx writes it): the branches differ in
    rank and both run (a transpose takes any rank; a 1-D pool would not, and the model would
    then run only at C = 1), so no target that needs the rank can type it while the channel
    count is symbolic; the batch and the length do not matter to it."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    one = nh.from_array(np.array(1, np.int64), "one")
    ax1 = nh.from_array(np.array([1], np.int64), "ax1")
    ax0 = nh.from_array(np.array([0], np.int64), "ax0")
    then = h.make_graph([h.make_node("Squeeze", ["x", "ax1"], ["sq"]), h.make_node("Unsqueeze", ["sq", "ax1"], ["t"])],
                        "then", [], [h.make_tensor_value_info("t", T.FLOAT, None)])
    other = h.make_graph([h.make_node("Unsqueeze", ["x", "ax0"], ["e"])], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, None)])
    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "one"], ["c"], axis=0),
             h.make_node("Equal", ["c", "one"], ["mono"]),
             h.make_node("If", ["mono"], ["m"], then_branch=then, else_branch=other),
             h.make_node("Transpose", ["m"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["B", "C", "T"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], [one, ax1, ax0])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def test_only_the_dim_a_target_cannot_keep_is_fixed(tmp_path):
    """The fewest dims fixed (``pipeline.fewest_dims_to_fix``): the channel count, said with the
    reason; batch and length stay dynamic and are checked at two sizes; report agrees."""
    import opbridge

    model = str(_channel_if(tmp_path / "mono.onnx"))
    res = opbridge.convert(model, to="openvino", out=str(tmp_path / "m.xml"),
                           check_dims={"B": (1, 2), "C": (1, 1), "T": (8, 12)})
    (rec,) = res["targets"]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert rec["fixed_dims"] == {"C": 1} and rec["dynamic_dims"] == {"x": ["B", "T"]}, rec
    assert rec["check"]["sizes"] == [{"B": 1, "T": 8}, {"B": 2, "T": 12}], rec
    assert any("fixed: C=1" in w and "the others stay dynamic" in w for w in rec["warnings"]), rec["warnings"]
    rep = opbridge.report(model, backends=["openvino"], check_dims={"B": (1, 2), "C": (1, 1), "T": (8, 12)})
    assert all(n["status"] != "unsupported" for n in rep["backends"]["openvino"]["nodes"]), rep
