"""Core ML keeps symbolic input dims as flexible ones (``ct.RangeDim``): the patterns trained
models put over a symbolic height, width, batch or sequence (a detector's upsampling by
integer factors, transposed convolutions, slices with negative and open-ended bounds, a
softmax over a flattened tensor, recurrent layers, quantize/dequantize pairs), each converted
with ``--check`` at two sizes through the written package (the MIL evaluator on Linux). Where
MIL cannot run a pattern over symbolic dims the dims are fixed and the reason is said."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

RNG = np.random.default_rng(11)


def _save(path: Path, nodes: list, inputs: list, inits: list, opset: int = 17) -> str:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    outs = [h.make_tensor_value_info(n.output[0], T.FLOAT, None) for n in nodes if n.output[0].startswith("y")]
    g = h.make_graph(nodes, "g", inputs, outs, inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), str(path))
    return str(path)


def _const(name: str, arr: np.ndarray):
    from onnx import numpy_helper as nh

    return nh.from_array(np.asarray(arr), name)


def _convert(model: str, tmp_path: Path, **kw) -> dict:
    import opbridge

    res = opbridge.convert(model, to="coreml", out=str(tmp_path / "m_coreml"), check=True, **kw)
    return res["targets"][0]


def _image_input(name: str = "x", c: int = 2):
    from onnx import TensorProto as T
    from onnx import helper as h

    return h.make_tensor_value_info(name, T.FLOAT, ["N", c, "H", "W"])


@pytest.mark.parametrize("mode,ctm,nearest", [
    ("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_floor"),
    ("linear", "half_pixel", None), ("linear", "pytorch_half_pixel", None), ("linear", "align_corners", None),
    ("linear", "asymmetric", None)])
def test_resize_by_integer_scales_stays_flexible(tmp_path, mode, ctm, nearest):
    from onnx import helper as h

    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, **({"nearest_mode": nearest} if nearest else {})}
    nodes = [h.make_node("Resize", ["x", "", "s"], ["y"], **attrs)]
    model = _save(tmp_path / "r.onnx", nodes, [_image_input()], [_const("s", np.array([1, 1, 2, 3], np.float32))])
    rec = _convert(model, tmp_path)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "H", "W"} and "fixed_dims" not in rec
    assert len(rec["check"]["sizes"]) == 2


def test_resize_by_a_fraction_fixes_the_dims_and_says_why(tmp_path):
    """MIL upsamples by integer factors; 0.5 over a symbolic size is refused symbolic, so every
    dim is fixed (reported) and the conversion still checks."""
    from onnx import helper as h

    nodes = [h.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")]
    model = _save(tmp_path / "r.onnx", nodes, [_image_input()], [_const("s", np.array([1, 1, 0.5, 0.5], np.float32))])
    rec = _convert(model, tmp_path, check_dims={"H": (8, 6), "W": (8, 10)})
    assert rec["status"] == "ok" and set(rec["fixed_dims"]) == {"N", "H", "W"}, rec
    assert any("integer factors" in w for w in rec["warnings"]), rec["warnings"]


def test_detector_head_transposed_conv_slices_and_softmax(tmp_path):
    """paddle2onnx's DB head and a CRNN tail in one: ConvTranspose (stride 2, no output_shape),
    Slice with negative and open-ended bounds on symbolic axes, a reversed slice, and an
    opset-11 Softmax (flattened to 2-D over symbolic dims)."""
    from onnx import helper as h

    big = np.iinfo(np.int64).max
    nodes = [
        h.make_node("ConvTranspose", ["x", "wt", "bt"], ["up"], strides=[2, 2], kernel_shape=[2, 2]),
        h.make_node("Slice", ["up", "st", "en", "ax"], ["cut"]),
        h.make_node("Slice", ["cut", "rs", "re", "rax", "rst"], ["rev"]),
        h.make_node("Softmax", ["rev"], ["y"], axis=3),
    ]
    inits = [_const("wt", RNG.standard_normal((2, 3, 2, 2)).astype(np.float32)),
             _const("bt", RNG.standard_normal(3).astype(np.float32)),
             _const("st", np.array([1, -5], np.int64)), _const("en", np.array([big, -1], np.int64)),
             _const("ax", np.array([2, 3], np.int64)),
             _const("rs", np.array([-1], np.int64)), _const("re", np.array([-big], np.int64)),
             _const("rax", np.array([3], np.int64)), _const("rst", np.array([-1], np.int64))]
    model = _save(tmp_path / "d.onnx", nodes, [_image_input()], inits, opset=11)
    rec = _convert(model, tmp_path, check_dims={"N": (1, 2), "H": (4, 7), "W": (6, 9)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "H", "W"} and "fixed_dims" not in rec


@pytest.mark.parametrize("op,gates,direction,with_state", [("LSTM", 4, "bidirectional", False),
                                                           ("GRU", 3, "forward", True)])
def test_recurrent_layers_over_symbolic_time_and_batch(tmp_path, op, gates, direction, with_state):
    from onnx import TensorProto as T
    from onnx import helper as h

    hidden, feat = 5, 3
    nd = 2 if direction == "bidirectional" else 1
    inits = [_const("W", (RNG.standard_normal((nd, gates * hidden, feat)) * 0.5).astype(np.float32)),
             _const("R", (RNG.standard_normal((nd, gates * hidden, hidden)) * 0.5).astype(np.float32)),
             _const("B", (RNG.standard_normal((nd, 2 * gates * hidden)) * 0.1).astype(np.float32))]
    inputs = [h.make_tensor_value_info("x", T.FLOAT, ["T", "N", feat])]
    names = ["x", "W", "R", "B", ""]
    if with_state:
        names.append("h0")
        inputs.append(h.make_tensor_value_info("h0", T.FLOAT, [nd, "N", hidden]))
    nodes = [h.make_node(op, names, ["y", "yh"], hidden_size=hidden, direction=direction)]
    model = _save(tmp_path / "r.onnx", nodes, inputs, inits, opset=14)
    rec = _convert(model, tmp_path)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"T", "N"} and "fixed_dims" not in rec


def test_quantize_dequantize_per_axis_over_symbolic_dims(tmp_path):
    from onnx import helper as h

    nodes = [h.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], axis=1),
             h.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"], axis=1)]
    inits = [_const("sc", np.array([0.02, 0.05], np.float32)), _const("zp", np.array([3, -2], np.int8))]
    model = _save(tmp_path / "q.onnx", nodes, [_image_input()], inits)
    rec = _convert(model, tmp_path)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "H", "W"}


def test_flexible_dims_are_declared_in_the_package(tmp_path):
    """The package declares each symbolic dim as a range from 1 (default: the first size
    checked), and inputs sharing a symbol share it: one model, two inputs over ``N``."""
    from coremltools.models import MLModel
    from onnx import helper as h

    nodes = [h.make_node("Add", ["x", "z"], ["y"])]
    model = _save(tmp_path / "a.onnx", nodes, [_image_input("x"), _image_input("z")], [])
    rec = _convert(model, tmp_path, check_dims={"N": (2, 3), "H": (4, 5), "W": (6, 7)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    spec = MLModel(str(Path(rec["output"]) / "model.mlpackage"), skip_model_load=True).get_spec()
    for f in spec.description.input:
        arr = f.type.multiArrayType
        assert list(arr.shape) == [2, 2, 4, 6]
        ranges = [(r.lowerBound, r.upperBound) for r in arr.shapeRange.sizeRanges]
        assert ranges[1] == (2, 2) and all(lo == 1 and hi >= 1 << 20 for lo, hi in (ranges[0], *ranges[2:]))


def test_a_program_mil_cannot_run_over_flexible_dims_is_fixed_with_the_reason(tmp_path, monkeypatch):
    """When coremltools builds the program over MIL symbols but the MIL evaluator cannot run it
    at the default sizes (``runtime.smoke``: recognizers whose transposes and concats MIL types
    apart over symbols), the target refuses the symbolic dims and convert fixes them, saying why."""
    from onnx import helper as h

    import emitters.coreml.target as target

    monkeypatch.setattr(target, "smoke", lambda art: "the MIL evaluator failed: concat of is6 and is87")
    nodes = [h.make_node("Relu", ["x"], ["y"])]
    model = _save(tmp_path / "r.onnx", nodes, [_image_input()], [])
    rec = _convert(model, tmp_path)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["fixed_dims"]) == {"N", "H", "W"} and "dynamic_dims" not in rec, rec
    assert any("over flexible input dims: the MIL evaluator failed: concat" in w for w in rec["warnings"]), rec


def test_reshape_copying_symbolic_dims_with_zeros(tmp_path):
    """tf2onnx's Tensordot: ``Reshape(x, [0, -1])`` and ``Reshape(x, [0, 0, 2, 2])`` copy
    symbolic dims by 0 (MIL reads 0 as a size of 0): one unknown is written as -1, more are
    built from the input's run-time shape."""
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Reshape", ["x", "s1"], ["y1"]), h.make_node("Reshape", ["x", "s2"], ["y2"])]
    inits = [_const("s1", np.array([0, -1], np.int64)), _const("s2", np.array([0, 0, 2, 2], np.int64))]
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", "S", 4])
    model = _save(tmp_path / "r.onnx", nodes, [x], inits)
    rec = _convert(model, tmp_path)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "S"} and "fixed_dims" not in rec


@pytest.mark.parametrize("direction,with_state,layout", [("forward", False, 0), ("bidirectional", True, 0),
                                                     ("reverse", True, 1)])
def test_a_gru_with_linear_before_reset_runs_as_a_loop_over_symbolic_dims(tmp_path, direction, with_state, layout):
    """linear_before_reset=1 (PyTorch's GRU, in nsnet2, DeepFilterNet, the speechmos models and
    seq2seq encoders): MIL's gru lacks it before iOS18 and the unrolled decomposition needs a
    static length and batch, so the steps become a MIL while_loop over the run-time length:
    the sequence and batch stay flexible, checked at two sizes each."""
    from onnx import TensorProto as T
    from onnx import helper as h

    hidden, feat = 4, 3
    nd = 2 if direction == "bidirectional" else 1
    inits = [_const("W", (RNG.standard_normal((nd, 3 * hidden, feat)) * 0.5).astype(np.float32)),
             _const("R", (RNG.standard_normal((nd, 3 * hidden, hidden)) * 0.5).astype(np.float32)),
             _const("B", (RNG.standard_normal((nd, 6 * hidden)) * 0.1).astype(np.float32))]
    x_dims, h_dims = (["N", "T", feat], ["N", nd, hidden]) if layout else (["T", "N", feat], [nd, "N", hidden])
    inputs = [h.make_tensor_value_info("x", T.FLOAT, x_dims)]
    names = ["x", "W", "R", "B"]
    if with_state:
        names += ["", "h0"]
        inputs.append(h.make_tensor_value_info("h0", T.FLOAT, h_dims))
    nodes = [h.make_node("GRU", names, ["y", "yh"], hidden_size=hidden, linear_before_reset=1, direction=direction,
                         layout=layout)]
    model = _save(tmp_path / "g.onnx", nodes, inputs, inits, 14)
    rec = _convert(model, tmp_path, check_dims={"T": (5, 2), "N": (1, 3)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"T", "N"} and "fixed_dims" not in rec, rec


def test_a_gru_with_linear_before_reset_over_a_run_time_batch_stays_flexible(tmp_path):
    """The same GRU with a static sequence length and a run-time batch (speechmos' AECMOS:
    frames become the batch): the unrolled decomposition would need the batch static too; the
    loop keeps the dims the batch is made of flexible."""
    from onnx import TensorProto as T
    from onnx import helper as h

    hidden, feat = 4, 3
    inits = [_const("W", (RNG.standard_normal((1, 3 * hidden, feat)) * 0.5).astype(np.float32)),
             _const("R", (RNG.standard_normal((1, 3 * hidden, hidden)) * 0.5).astype(np.float32)),
             _const("B", (RNG.standard_normal((1, 6 * hidden)) * 0.1).astype(np.float32)),
             _const("shape", np.array([5, -1, feat], np.int64))]
    nodes = [h.make_node("Reshape", ["x", "shape"], ["xs"]),
             h.make_node("GRU", ["xs", "W", "R", "B"], ["y"], hidden_size=hidden, linear_before_reset=1),
             h.make_node("ReduceMean", ["y"], ["m"], axes=[0, 1], keepdims=0)]
    model = _save(tmp_path / "g.onnx", nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 5, "F", feat])], inits, 14)
    rec = _convert(model, tmp_path, check_dims={"N": (1, 2), "F": (2, 3)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "F"} and "fixed_dims" not in rec, rec


@pytest.mark.parametrize("eq,x_shape,w_shape", [
    ("abcd,cde->abe", ["N", "S", 4, 3], [4, 3, 5]),   # Keras EinsumDense (attention output) over batch and sequence
    ("btgi,gih->btgh", [1, "T", 2, 3], [2, 3, 4]),    # a grouped linear over time (DeepFilterNet)
    ("bij,bjk->bik", ["N", "S", 3], ["N", 3, 2]),     # a batched matmul, both operands symbolic
    ("...ij,jk->...ik", ["N", "S", 3], [3, 2]),
    ("bii->bi", ["N", 3, 3], None)])                  # a diagonal under a symbolic batch
def test_einsum_over_symbolic_dims_stays_flexible(tmp_path, eq, x_shape, w_shape):
    """Einsum equations trained models carry, with symbolic batch/sequence dims: lowered to
    transposes, reshapes (run-time sizes read from the operands) and one batched matmul, so the
    dims stay flexible; checked at two sizes."""
    from onnx import TensorProto as T
    from onnx import helper as h

    inputs = [h.make_tensor_value_info("x", T.FLOAT, x_shape)]
    inits, names = [], ["x"]
    if w_shape is not None and any(isinstance(d, str) for d in w_shape):
        inputs.append(h.make_tensor_value_info("w", T.FLOAT, w_shape))
        names.append("w")
    elif w_shape is not None:
        inits.append(_const("w", RNG.standard_normal(w_shape).astype(np.float32)))
        names.append("w")
    model = _save(tmp_path / "e.onnx", [h.make_node("Einsum", names, ["y"], equation=eq)], inputs, inits, opset=13)
    sym = sorted({d for d in x_shape if isinstance(d, str)})
    rec = _convert(model, tmp_path, check_dims={s: (2, 5) for s in sym})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == set(sym) and "fixed_dims" not in rec, rec


def test_a_loop_whose_scan_output_has_a_symbolic_batch_stays_flexible(tmp_path):
    """A run-time Loop (onnxruntime's DynamicQuantizeLSTM read as a loop over time, a decoder)
    carrying a [N, H] state and emitting it at every step: MIL lists need a static element
    shape, so the scan output is gathered flat beside its run-time shape, and N stays flexible."""
    from onnx import TensorProto as T
    from onnx import helper as h

    w = _const("w", (RNG.standard_normal((3, 3)) * 0.5).astype(np.float32))
    body = h.make_graph(
        [h.make_node("MatMul", ["h_in", "w"], ["mm"]), h.make_node("Tanh", ["mm"], ["h_out"]),
         h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Relu", ["h_out"], ["scan"])],
        "body", [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
                 h.make_tensor_value_info("h_in", T.FLOAT, ["N", 3])],
        [h.make_tensor_value_info("c_out", T.BOOL, []), h.make_tensor_value_info("h_out", T.FLOAT, ["N", 3]),
         h.make_tensor_value_info("scan", T.FLOAT, ["N", 3])])
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", "S"])
    nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Gather", ["sh", "one"], ["steps"]),
             h.make_node("Slice", ["x", "zero", "three", "one"], ["h0"]),
             h.make_node("Loop", ["steps", "", "h0"], ["y_h", "y_scan"], body=body)]
    inits = [w, _const("one", np.array([1], np.int64)), _const("zero", np.array([0], np.int64)),
             _const("three", np.array([3], np.int64))]
    import onnx
    g = h.make_graph(nodes, "g", [x], [h.make_tensor_value_info("y_h", T.FLOAT, None),
                                        h.make_tensor_value_info("y_scan", T.FLOAT, None)], inits)
    path = tmp_path / "loop.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    rec = _convert(str(path), tmp_path, check_dims={"N": (2, 3), "S": (4, 6)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "S"} and "fixed_dims" not in rec, rec["warnings"]


@pytest.mark.parametrize("axes,dims", [
    ([2], {"N": (1, 3), "H": (1, 1), "W": (4, 6)}), ([2, 3], {"N": (1, 3), "H": (1, 1), "W": (1, 1)}),
    ([0, 2], {"N": (1, 1), "H": (1, 1), "W": (4, 6)})])
def test_squeezing_a_symbolic_dim_keeps_the_rank(tmp_path, axes, dims):
    """PaddleOCR's recognizers pool the symbolic height to 1 and ``Squeeze(axes=[2])`` it before
    a transpose: MIL's squeeze keeps a dim it cannot prove is 1 (rank 4, and the transpose's
    perm no longer fits), so the squeeze is a reshape to the other dims."""
    from onnx import TensorProto as T
    from onnx import helper as h

    perm = list(range(4 - len(axes)))[::-1]
    nodes = [h.make_node("Squeeze", ["x", "axes"], ["s"]), h.make_node("Transpose", ["s"], ["y"], perm=perm)]
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", 2, "H", "W"])
    model = _save(tmp_path / "s.onnx", nodes, [x], [_const("axes", np.array(axes, np.int64))], opset=13)
    rec = _convert(model, tmp_path, check_dims=dims)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert "fixed_dims" not in rec, rec


def test_reshape_to_a_shape_assembled_at_run_time_with_a_copying_zero(tmp_path):
    """paddle2onnx's attention: ``Reshape(x, Concat([0], Shape(x)[1:2], [3, 2]))`` copies the
    symbolic batch by a constant 0 inside a shape assembled at run time (MIL reads 0 as a size
    of 0): the 0s are replaced by the input's sizes; and a reshape to a scalar (an empty shape
    constant) is an int32 empty shape, not MIL's float empty list."""
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Slice", ["sh", "one", "two"], ["seq"]),
             h.make_node("Concat", ["zero", "seq", "tail"], ["target"], axis=0),
             h.make_node("Reshape", ["x", "target"], ["y"]),
             h.make_node("ReduceSum", ["x"], ["total"], keepdims=1),
             h.make_node("Reshape", ["total", "empty"], ["y_scalar"])]
    inits = [_const("one", np.array([1], np.int64)), _const("two", np.array([2], np.int64)),
             _const("zero", np.array([0], np.int64)), _const("tail", np.array([3, 2], np.int64)),
             _const("empty", np.zeros((0,), np.int64))]
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", "S", 6])
    model = _save(tmp_path / "r.onnx", nodes, [x], inits, opset=13)
    rec = _convert(model, tmp_path, check_dims={"N": (1, 2), "S": (4, 5)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "S"} and "fixed_dims" not in rec, rec["warnings"]


def test_squeezing_a_unit_dim_behind_a_run_time_reshape(tmp_path):
    """PP-OCRv5/v6 recognizers: a reshape to a shape assembled at run time gives a dim the graph
    knows is 1 but MIL types as a symbol; squeezing it and transposing must keep the rank."""
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Slice", ["sh", "one", "two"], ["seq"]),
             h.make_node("Concat", ["zero", "seq", "tail"], ["target"], axis=0),
             h.make_node("Reshape", ["x", "target"], ["r"]), h.make_node("Squeeze", ["r", "axes"], ["s"]),
             h.make_node("Transpose", ["s"], ["y"], perm=[0, 2, 1])]
    inits = [_const("one", np.array([1], np.int64)), _const("two", np.array([2], np.int64)),
             _const("zero", np.array([0], np.int64)), _const("tail", np.array([1, 6], np.int64)),
             _const("axes", np.array([2], np.int64))]
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", "S", 6])
    model = _save(tmp_path / "r.onnx", nodes, [x], inits, opset=13)
    rec = _convert(model, tmp_path, check_dims={"N": (1, 2), "S": (4, 5)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "S"} and "fixed_dims" not in rec, rec["warnings"]


@pytest.mark.parametrize("dims", [[5, "N", 3], ["T", "N", 3]])
def test_a_reversed_sequence_over_symbolic_dims_keeps_its_length(tmp_path, dims):
    """A bidirectional RNN unrolled by torch.onnx reverses the backward outputs with
    ``Slice(starts=-1, ends=INT64_MIN, steps=-1)`` and concatenates them with the forward ones:
    over a symbolic batch MIL typed the reversed sequence one step short and refused the
    concat. The far bound is the end itself (a mask), a static axis' bounds are resolved."""
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Slice", ["x", "start", "end", "axis", "step"], ["rev"]),
             h.make_node("Concat", ["x", "rev"], ["y"], axis=2)]
    inits = [_const("start", np.array([-1], np.int64)), _const("end", np.array([-(1 << 63) + 1], np.int64)),
             _const("axis", np.array([0], np.int64)), _const("step", np.array([-1], np.int64))]
    x = h.make_tensor_value_info("x", T.FLOAT, dims)
    model = _save(tmp_path / "r.onnx", nodes, [x], inits, opset=13)
    sym = {d for d in dims if isinstance(d, str)}
    rec = _convert(model, tmp_path, check_dims={s: (2, 4) for s in sym})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == sym and "fixed_dims" not in rec, rec["warnings"]


def test_where_widened_by_its_condition_over_symbolic_dims(tmp_path):
    """A BERT attention mask exported by torch.onnx's dynamo exporter: ``Where(mask[B,1,S,S],
    scalar, scalar)``. coremltools types select's output from ``a`` and ``b`` only (a scalar
    here), so ``a`` is widened to the condition's run-time shape first."""
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Unsqueeze", ["m", "ax12"], ["m4"]), h.make_node("Cast", ["m4"], ["mb"], to=T.BOOL),
             h.make_node("Unsqueeze", ["m", "ax13"], ["m4t"]), h.make_node("Cast", ["m4t"], ["mbt"], to=T.BOOL),
             h.make_node("And", ["mb", "mbt"], ["cond"]), h.make_node("Where", ["cond", "zero", "neg"], ["y"])]
    inits = [_const("ax12", np.array([1, 2], np.int64)), _const("ax13", np.array([1, 3], np.int64)),
             _const("zero", np.array(0.0, np.float32)), _const("neg", np.array(-1e4, np.float32))]
    m = h.make_tensor_value_info("m", T.INT64, ["B", "S"])
    model = _save(tmp_path / "w.onnx", nodes, [m], inits, opset=13)
    rec = _convert(model, tmp_path, check_dims={"B": (1, 2), "S": (4, 6)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["m"]) == {"B", "S"} and "fixed_dims" not in rec, rec["warnings"]


@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners"])
@pytest.mark.parametrize("computed", [True, False])
def test_a_linear_resize_to_sizes_over_symbolic_dims_stays_flexible(tmp_path, ctm, computed):
    """A detector's decoder resizes a feature map to the size of another one (paddle2onnx:
    ``Resize(x, sizes=Concat(Shape(x)[:2], Shape(skip)[2:]))``), or to constant sizes of the
    last two dims (``axes``): iOS17's resize takes the output size at run time, with the
    sampling mode whose grid is ONNX's (half_pixel: UNALIGN_CORNERS, align_corners:
    STRICT_ALIGN_CORNERS); checked at two sizes, dims kept."""
    from onnx import TensorProto as T
    from onnx import helper as h

    if computed:
        nodes = [h.make_node("Shape", ["x"], ["sx"]), h.make_node("Shape", ["skip"], ["ss"]),
                 h.make_node("Slice", ["sx", "z", "two"], ["nc"]), h.make_node("Slice", ["ss", "two", "four"], ["hw"]),
                 h.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
                 h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", coordinate_transformation_mode=ctm)]
        inits = [_const("z", np.array([0], np.int64)), _const("two", np.array([2], np.int64)),
                 _const("four", np.array([4], np.int64))]
        inputs = [_image_input("x"), h.make_tensor_value_info("skip", 1, ["N", 2, "H2", "W2"])]
        dims = {"N": (1, 2), "H": (4, 6), "W": (5, 7), "H2": (9, 11), "W2": (7, 13)}
    else:
        nodes = [h.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", coordinate_transformation_mode=ctm,
                             axes=[2, 3])]
        inits = [_const("sizes", np.array([9, 7], np.int64))]
        inputs = [_image_input("x")]
        dims = {"N": (1, 2), "H": (4, 6), "W": (5, 11)}
    model = _save(tmp_path / "r.onnx", nodes, inputs, inits, opset=18)
    rec = _convert(model, tmp_path, check_dims=dims)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "H", "W"} and "fixed_dims" not in rec, rec["warnings"]


def test_a_slice_at_run_time_bounds_over_symbolic_dims_stays_flexible(tmp_path):
    """T5's relative attention and a TFLite audio front end slice a symbolic-length tensor at
    bounds computed from its shape (``Slice(x, [0], Shape(x)[1:2] - 1, [1])``, a frame count):
    the bounds are clamped against the input's run-time shape in the graph, and the dims stay
    flexible; checked at two sizes."""
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Shape", ["x"], ["sh"]), h.make_node("Slice", ["sh", "one", "two"], ["seq"]),
             h.make_node("Sub", ["seq", "one"], ["end"]), h.make_node("Neg", ["end"], ["start"]),
             h.make_node("Slice", ["x", "zero", "end", "one"], ["y"]),
             h.make_node("Slice", ["x", "start", "big", "one"], ["y_tail"])]
    inits = [_const("one", np.array([1], np.int64)), _const("two", np.array([2], np.int64)),
             _const("zero", np.array([0], np.int64)), _const("big", np.array([1 << 40], np.int64))]
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", "S", 3])
    model = _save(tmp_path / "s.onnx", nodes, [x], inits, opset=13)
    rec = _convert(model, tmp_path, check_dims={"N": (1, 2), "S": (4, 7)})
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert set(rec["dynamic_dims"]["x"]) == {"N", "S"} and "fixed_dims" not in rec, rec["warnings"]


@pytest.mark.parametrize("axis,outs", [(-1, 3), (1, 2)])
def test_an_even_split_along_a_static_axis_over_symbolic_dims_stays_flexible(tmp_path, axis, outs):
    """The dynamo exporter writes attention's q, k, v as ``Split(num_outputs=3)`` of a
    [batch, seq, 3C] along the static channel axis: only the split axis needs its size, the
    symbolic batch and sequence stay flexible. Split along a symbolic axis still fixes them."""
    from onnx import TensorProto as T
    from onnx import helper as h

    names = [f"o{i}" for i in range(outs)]
    nodes = [h.make_node("Split", ["x"], names, axis=axis, num_outputs=outs)]
    nodes += [h.make_node("Add", [names[0], names[-1]], ["y"])]
    shape = ["B", "S", 12] if axis == -1 else ["B", 6, "S"]
    x = h.make_tensor_value_info("x", T.FLOAT, shape)
    model = _save(tmp_path / "split.onnx", nodes, [x], [], opset=18)
    rec = _convert(model, tmp_path)
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    assert "fixed_dims" not in rec, rec
    bad = _save(tmp_path / "split_s.onnx", [h.make_node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
                                             h.make_node("Add", ["a", "b"], ["y"])],
                [h.make_tensor_value_info("x", T.FLOAT, ["B", "S", 4])], [], opset=18)
    rec = _convert(bad, tmp_path / "s2")
    assert rec["status"] == "ok" and rec["fixed_dims"], rec
