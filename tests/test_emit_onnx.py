"""The ONNX emitter: deterministic bytes, runtime-compatible versions, atomic saves, decompositions."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from emitters import onnx as onnx_backend
from emitters.onnx import runtime as onnx_runtime
from translator.frontends.onnx import load_onnx
from translator.run.harness import compare, single_op_model

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"


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


def _pretend_no_kernel(monkeypatch, op_type: str, from_version: int) -> None:
    """Make the emitter see onnxruntime without a CPU kernel for ``op_type`` from
    ``from_version`` on (its real kernel listing and probe otherwise)."""
    from functools import lru_cache

    version, versions, kernels = onnx_runtime.runtime_kernels()
    fewer = dict(kernels)
    fewer[op_type] = [(f, min(last, from_version - 1), c) for f, last, c in kernels.get(op_type, []) if f < from_version]
    probe = onnx_runtime._runs_without_kernel
    monkeypatch.setattr(onnx_runtime, "runtime_kernels", lambda: (version, versions, fewer))
    monkeypatch.setattr(onnx_runtime, "_runs_without_kernel",
                        lambda op, opset, inputs: op != op_type and probe(op, opset, inputs))
    # the verdicts are cached per (op, opset, types): a fresh cache for the pretended runtime
    monkeypatch.setattr(onnx_runtime, "_verdict", lru_cache(maxsize=None)(onnx_runtime._verdict.__wrapped__))


def _quantize_model():
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    return single_op_model("quantize_linear", [x, np.asarray(0.05, np.float32), np.asarray(128, np.uint8)], {},
                           const=(1, 2))


def test_default_opset_steps_down_to_the_newest_the_runtime_has_every_kernel_for(monkeypatch):
    model, feeds = _quantize_model()
    want = onnx_backend.run(onnx_backend.emit(model), feeds)[0]
    _pretend_no_kernel(monkeypatch, "QuantizeLinear", 24)
    model, _ = _quantize_model()
    proto = onnx_backend.emit(model)
    # QuantizeLinear-24 arrives at opset 24: at 23 the version in force (23) has a kernel
    assert proto.opset_import[0].version == 23
    assert [n.op_type for n in proto.graph.node] == ["QuantizeLinear"]
    assert np.array_equal(onnx_backend.run(proto, feeds)[0], want)


def test_a_node_the_runtime_runs_at_no_opset_is_decomposed(monkeypatch):
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    model, feeds = single_op_model("sinh", [x], {})
    _pretend_no_kernel(monkeypatch, "Sinh", 1)
    proto = onnx_backend.emit(model)
    opset, _ = onnx_backend.runtime_limits()
    assert proto.opset_import[0].version == min(opset, onnx.defs.onnx_opset_version())  # no opset helps: the top one
    assert "Sinh" not in [n.op_type for n in proto.graph.node]
    assert compare(np.sinh(x), onnx_backend.run(proto, feeds)[0]).ok


def test_a_runtime_gap_the_decomposition_does_not_cover_is_refused_with_the_kernel_named(monkeypatch):
    """Where's decomposition is for bool values only (``when: dtype_of: X``): a float Where
    without a kernel is refused, naming the kernel."""
    from translator.table.errors import Unsupported

    c = np.asarray([True, False, True])
    model, _ = single_op_model("where", [c, np.ones(3, np.float32), np.zeros(3, np.float32)], {})
    _pretend_no_kernel(monkeypatch, "Where", 1)
    with pytest.raises(Unsupported, match=r"onnxruntime [\d.]+ has no CPU kernel for Where-\d+ \[unsupported_dtype\]"):
        onnx_backend.emit(model)


def test_bool_where_has_no_kernel_at_any_version_and_is_decomposed():
    c = np.asarray([[True], [False]])
    x, y = np.asarray([True, True, False]), np.asarray([False, True, False])
    model, feeds = single_op_model("where", [c, x, y], {})
    proto = onnx_backend.emit(model)
    assert sorted({n.op_type for n in proto.graph.node}) == ["And", "Not", "Or"]
    got = onnx_backend.run(proto, feeds)[0]
    assert got.dtype == np.bool_ and (got == np.where(c, x, y)).all() and got.shape == (2, 3)


def test_report_plans_the_opset_convert_would_choose(monkeypatch):
    """``opbridge report`` asks the same question as ``convert``: a node onnxruntime runs at a
    lower opset is native; one it runs at none is refused with the kernel named."""
    from translator.run.report import plan_model

    _pretend_no_kernel(monkeypatch, "QuantizeLinear", 24)
    (plan,) = plan_model(_quantize_model()[0], ["onnx"])
    assert [p.status for p in plan.nodes] == ["native"]
    _pretend_no_kernel(monkeypatch, "QuantizeLinear", 1)
    (plan,) = plan_model(_quantize_model()[0], ["onnx"])
    assert [p.status for p in plan.nodes] == ["unsupported"]
    assert "no CPU kernel for QuantizeLinear" in plan.nodes[0].detail


def test_a_constant_node_is_not_a_kernel_gap():
    """onnxruntime lists no kernel for Constant (it makes Constant nodes initializers), and
    none for ops it inlines as functions: the probe lets them through, the model runs."""
    from onnx import TensorProto, helper

    c = helper.make_node("Constant", [], ["c"], value=helper.make_tensor("v", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0]))
    add = helper.make_node("Add", ["x", "c"], ["y"])
    hs = helper.make_node("HardSwish", ["y"], ["z"])
    g = helper.make_graph([c, add, hs], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 3])])
    src = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    from translator.frontends.onnx import from_proto

    model = from_proto(src, ROOT, "constant.onnx")
    ops = [n.op for n in model.graph.nodes]
    assert "constant" in ops
    proto = onnx_backend.emit(model)
    opset, _ = onnx_backend.runtime_limits()
    assert proto.opset_import[0].version == min(opset, onnx.defs.onnx_opset_version())
    assert "hard_swish" in ops and "HardSwish" in [n.op_type for n in proto.graph.node]
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    y = x + np.asarray([1.0, 2.0, 3.0], np.float32)
    assert compare(y * np.clip(y / 6 + 0.5, 0, 1), onnx_backend.run(proto, {"x": x})[0]).ok


def test_the_probe_sets_required_attributes_so_a_missing_kernel_shows():
    """MaxRoiPool-22 (onnxruntime 1.32 has only the kernel from version 1): without its
    required pooled_shape the probe failed on the attribute, not on the kernel, and the
    emitter wrote a node onnxruntime then refused. Checked against a real session."""
    from onnx import TensorProto

    attrs = onnx_runtime._placeholder_attrs("MaxRoiPool", 22)
    assert [a.name for a in attrs] == ["pooled_shape"]
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 4)).astype(np.float32)
    rois = np.asarray([[0, 0, 0, 3, 3]], np.float32)
    for opset in (21, 22):
        runs = onnx_runtime._runs_without_kernel("MaxRoiPool", opset, (TensorProto.FLOAT, TensorProto.FLOAT))
        node = onnx.helper.make_node("MaxRoiPool", ["x", "r"], ["y"], pooled_shape=[2, 2])
        g = onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                                 onnx.helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
                                   [onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", opset)], ir_version=10)
        import onnxruntime as ort

        try:
            ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "r": rois})
            really = True
        except Exception as exc:  # noqa: BLE001
            assert "NOT_IMPLEMENTED" in str(exc), exc
            really = False
        assert runs == really, opset


def test_duplicate_node_names_get_unique_names_in_the_written_model():
    """onnxruntime refuses two nodes of one name (found by tests/fuzz): the emitted model
    names them apart, and runs."""
    from onnx import TensorProto, helper

    from translator.frontends.onnx import from_proto

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["h"], name="same"),
                           helper.make_node("Neg", ["h"], ["y"], name="same")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    proto = onnx_backend.emit(from_proto(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), ".", "m"))
    names = [n.name for n in proto.graph.node]
    assert len(set(names)) == len(names) and "same" in names
    assert onnx_backend.run(proto, {"x": np.array([-1.0, 2.0], np.float32)})[0].tolist() == [0.0, -2.0]


def test_an_output_that_is_a_model_input_is_written_through_an_identity_with_a_warning():
    """An ONNX graph output is a value of its own: a model input returned as an output goes
    through an Identity under a new name, and the compilation says so (not silently)."""
    from translator.ir.graph import Graph, Model, TensorType
    from translator.compile.pipeline import compile

    g = Graph("g")
    x = g.add_input("x", TensorType("float32", (2,)))
    (y,) = g.add_node("relu", [x], {}, outputs=["y"]).outputs
    g.outputs = [y, x]
    done = compile(Model(g), onnx_backend.TARGET)
    names = [o.name for o in done.artifact.graph.output]
    assert names[0] == "y" and names[1] != "x"
    assert any("'x'" in w and "model input" in w and names[1] in w for w in done.ctx.warnings)
    feeds = {"x": np.asarray([-1.0, 2.0], np.float32)}
    ys = onnx_backend.run(done.artifact, feeds)
    assert ys[0].tolist() == [0.0, 2.0] and ys[1].tolist() == [-1.0, 2.0]
    assert [v.name for v in g.outputs] == ["y", "x"] and len(g.nodes) == 1  # the caller's IR is untouched


def test_the_opset_option_is_kept_and_the_plan_refuses_what_convert_refuses(monkeypatch):
    """``--opset`` (``Target.options``) overrides the choice; ``pipeline.plan`` runs the same
    configure/accepts hooks as ``compile`` and collects the refusal instead of raising."""
    from translator.compile.pipeline import plan

    assert [o.dest for o in onnx_backend.TARGET.options] == ["opset", "float_quantization"]
    model, feeds = _quantize_model()
    proto = onnx_backend.emit(model, opset=21)
    assert proto.opset_import[0].version == 21
    _pretend_no_kernel(monkeypatch, "QuantizeLinear", 1)
    ctx = plan(_quantize_model()[0], onnx_backend.TARGET)
    (why,) = ctx.refusals.values()
    assert why.code == "unsupported_dtype" and "no CPU kernel for QuantizeLinear" in why.detail
    assert ctx.options["opset"] == onnx_runtime.top_opset()


def test_every_native_onnx_cell_has_the_node_writer_as_its_rule():
    """The families register ``write_node`` for exactly the ops whose onnx cell is native (and
    not a declared gap, ``unimplemented``), com.microsoft ones included; FusedConv with an
    activation's parameters packs them first (``nn.fused_conv_with_params``)."""
    from translator.compile.registry import rules
    from translator.table.loader import load_tables

    from emitters.onnx.codegen import write_node
    from emitters.onnx.nn import fused_conv_with_params

    native = {op.id for op in load_tables().ops.values()
              if (c := op.backends.get("onnx")) is not None and c.status == "native" and not c.unimplemented}
    have = rules("onnx")
    packed = {"conv_clip", "conv_hard_sigmoid", "conv_leaky_relu"}
    assert set(have) == native
    assert all(r.fn is (fused_conv_with_params if op in packed else write_node) for op, r in have.items())


def test_a_scale_before_a_matmul_stays_where_onnxruntime_fuses_it(tmp_path):
    """Attention as torch.onnx writes it: ``Transpose → Mul(scale) → MatMul`` on both operands.
    onnxruntime folds each scale into the MatMul (``FusedMatMul``'s alpha) only when the Mul
    feeds it directly; the transpose pass used to move the transposes below the Muls (nothing
    cancelled), and the re-emitted file ran more nodes than its source. A transpose still
    moves where it cancels: two inverse transposes around a Relu leave none."""
    import onnxruntime as ort
    from onnx import TensorProto as T
    from onnx import helper as h

    half = onnx.numpy_helper.from_array(np.array(0.5, np.float32), "half")
    quarter = onnx.numpy_helper.from_array(np.array([0.25], np.float32), "quarter")
    nodes = [h.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]), h.make_node("Mul", ["qt", "half"], ["qs"]),
             h.make_node("Sqrt", ["quarter"], ["root"]),  # a scale computed from a constant (the target folds nothing)
             h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 3, 1]), h.make_node("Mul", ["root", "kt"], ["ks"]),
             h.make_node("MatMul", ["qs", "ks"], ["y"]),
             h.make_node("Transpose", ["z"], ["zt"], perm=[0, 2, 3, 1]), h.make_node("Relu", ["zt"], ["zr"]),
             h.make_node("Transpose", ["zr"], ["zb"], perm=[0, 3, 1, 2]), h.make_node("Add", ["zb", "z"], ["w"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, T.FLOAT, [1, 5, 2, 4]) for n in ("q", "k", "z")],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("w", T.FLOAT, None)],
                     [half, quarter])
    src = tmp_path / "attn.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(src))
    import opbridge

    res = opbridge.convert(str(src), to="onnx", out=str(tmp_path / "out.onnx"))
    assert res["targets"][0]["check"]["status"] == "pass", res
    written = onnx.load(str(tmp_path / "out.onnx")).graph
    made = {o: n.op_type for n in written.node for o in n.output}
    mm = next(n for n in written.node if n.op_type == "MatMul")
    assert [made.get(i) for i in mm.input] == ["Mul", "Mul"], [made.get(i) for i in mm.input]
    assert sum(n.op_type == "Transpose" for n in written.node) == 2, [n.op_type for n in written.node]
    counts = []
    for path in (src, tmp_path / "out.onnx"):
        so = ort.SessionOptions()
        so.optimized_model_filepath = str(tmp_path / f"opt_{path.stem}.onnx")
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        counts.append(len(onnx.load(so.optimized_model_filepath).graph.node))
    assert counts[1] <= counts[0], counts
