"""Hostile and broken models (issue 15): the validation stage, resource budgets, invalid graphs.

Every refusal is an ``OpbridgeError`` whose one-line message names the file/node/op and
ends with ``[reason_code]``; nothing allocates more than the budget (``Range(0, 2**40)``
is refused before a single element exists) and nothing runs away (Loop trip counts).
"""
from __future__ import annotations

import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from translator.table import budget
from translator.table.errors import REASON_CODES, OpbridgeError

OPSET = 17


def vi(name, shape=None, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs, outputs, inits=(), opset=OPSET, functions=(), ir=None):
    g = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], functions=list(functions))
    if ir is not None:
        m.ir_version = ir
    return m


def i64(name, values, dims=None):
    values = list(values)
    return helper.make_tensor(name, T.INT64, [len(values)] if dims is None else dims, values)


def refused(fn, code, *words):
    """``fn()`` raises an OpbridgeError with ``code``, one line, mentioning ``words``."""
    with pytest.raises(OpbridgeError) as ei:
        fn()
    msg = str(ei.value)
    assert ei.value.code == code, msg
    assert "\n" not in msg and msg.endswith(f"[{code}]"), msg
    for w in words:
        assert w in msg, msg
    return ei.value


def load(m, base_dir=".", validate=True):
    from translator.frontends.onnx import from_proto

    return from_proto(m, base_dir, "m.onnx", validate=validate)


def reference_run(m, feeds=None, validate=True):
    from translator.compile import interpreter
    from translator.run.check import random_inputs

    ir = load(m, validate=validate)
    interpreter.prepare(ir)
    return interpreter.run(ir, feeds if feeds is not None else random_inputs(ir))


def test_reason_codes():
    assert "too_large" in REASON_CODES and "time_limit" in REASON_CODES and "bad_model" in REASON_CODES


# ----------------------------------------------------------------------------- structure and versions
def relu_model(**kw):
    return model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], **kw)


def test_valid_model_accepted():
    x = np.array([-1.0, 2.0], np.float32)
    assert np.array_equal(reference_run(relu_model(), {"x": x})[0], [0.0, 2.0])


def test_two_nodes_writing_one_output():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")],
              [vi("x", [2])], [vi("y", [2])])
    refused(lambda: load(m), "bad_model", "m.onnx", "'b'", "'y'", "node 'a'")


def test_single_producer_in_subgraphs():
    two = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="p"), helper.make_node("Neg", ["x"], ["t"], name="q")],
                            "body", [], [vi("t", [2])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=two, else_branch=two, name="if")],
              [vi("c", [], T.BOOL), vi("x", [2])], [vi("y", [2])])
    refused(lambda: load(m), "bad_model", "subgraph 'body' of node 'if'", "'t'", "node 'q'")
    # a subgraph writing a value of the enclosing graph: the ONNX checker's SSA rule
    shadow = helper.make_graph([helper.make_node("Relu", ["x"], ["x"], name="inner")], "body", [], [vi("x", [2])])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=shadow, else_branch=shadow, name="if")],
              [vi("c", [], T.BOOL), vi("x", [2])], [vi("y", [2])])
    refused(lambda: load(m), "bad_model")


def test_duplicated_graph_outputs():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2]), vi("y", [2])])
    refused(lambda: load(m), "bad_model", "'y'", "twice")


def test_no_outputs_and_empty_graph():
    refused(lambda: load(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [])), "bad_model", "no outputs")
    refused(lambda: load(model([], [], [])), "bad_model", "empty")


def test_ir_version_and_opset_out_of_range():
    refused(lambda: load(relu_model(ir=99)), "bad_model", "IR version 99", str(onnx.IR_VERSION))
    refused(lambda: load(relu_model(opset=99)), "bad_model", "opset 99", str(onnx.defs.onnx_opset_version()))
    m = relu_model()
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 99))
    refused(lambda: load(m), "bad_model", "opset 99 of domain 'ai.onnx.ml'")


def test_recursive_local_function():
    f = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain="local")],
                             [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])
    g = helper.make_graph([helper.make_node("F", ["x"], ["y"], domain="local")], "g", [vi("x", [2])], [vi("y", [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)], functions=[f])
    refused(lambda: load(m), "bad_model", "calls itself", "local.F -> local.F")


def test_a_negative_declared_dim_is_unknown():
    """paddle2onnx declares unknown dims as -1; onnxruntime runs such files: the dim is unknown."""
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [-1, 3])], [vi("y", [-1, 3])])
    ir = load(m)
    assert ir.graph.inputs[0].type.shape == (None, 3)


@pytest.mark.parametrize("node,inits,words", [
    (helper.make_node("Conv", ["x", "w"], ["y"], strides=[0, 0], name="c"), ["w"], ["strides"]),
    (helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1], name="c"), ["w"], ["pads"]),
    (helper.make_node("Transpose", ["x"], ["y"], perm=[0, 1, 2, 7], name="t"), [], ["perm"]),
    (helper.make_node("Softmax", ["x"], ["y"], axis=9, name="s"), [], ["axis"]),
    (helper.make_node("Split", ["x", "s"], ["y", "z"], axis=2, name="sp"), ["s"], ["split"]),
], ids=["conv_strides0", "conv_pads_len", "transpose_perm", "softmax_axis", "split_sum"])
def test_invalid_attributes_refused_by_inference(node, inits, words):
    all_inits = {"w": helper.make_tensor("w", T.FLOAT, [1, 1, 3, 3], np.ones(9, np.float32)), "s": i64("s", [1, 1])}
    outs = [vi(o) for o in node.output]
    m = model([node], [vi("x", [1, 1, 5, 5])], outs, [all_inits[k] for k in inits])
    refused(lambda: load(m), "bad_model", "m.onnx", f"op {node.op_type}", *words)


# ----------------------------------------------------------------------------- external data
def external_model(tmp_path, loc="w.bin", offset=None, length=None, dims=(4,), dtype=T.FLOAT, data=True):
    if data:
        np.arange(4, dtype=np.float32).tofile(tmp_path / "w.bin")
    t = T(name="w", data_type=dtype, dims=list(dims), data_location=T.EXTERNAL)
    for k, v in (("location", loc), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4])], [vi("y", [4])], [t])


def test_external_data_valid(tmp_path):
    m = external_model(tmp_path, offset=0, length=16)
    from translator.compile import interpreter

    ir = load(m, tmp_path)
    interpreter.prepare(ir)
    assert np.array_equal(interpreter.run(ir, {"x": np.ones(4, np.float32)})[0], [1, 2, 3, 4])


@pytest.mark.parametrize("kw,code,words", [
    ({"dims": (2 ** 40, 2 ** 40)}, "too_large", ["'w'", "elements"]),
    ({"dims": (2 ** 30,), "dtype": T.DOUBLE}, "too_large", ["'w'", "bytes"]),
    ({"offset": -4}, "bad_model", ["offset '-4'"]),
    ({"offset": "1.5"}, "bad_model", ["offset '1.5'"]),
    ({"offset": "abc"}, "bad_model", ["offset"]),
    ({"length": 3}, "bad_model", ["length 3", "16 bytes"]),
    ({"length": -16}, "bad_model", ["length"]),
    ({"loc": "w\0.bin"}, "bad_model", ["NUL"]),
    ({"loc": "../w.bin"}, "bad_model", ["escapes"]),
    ({"loc": "/etc/passwd"}, "bad_model", ["absolute"]),
    ({"loc": "nope.bin"}, "missing_external_data", ["not found"]),
    ({"offset": 8}, "missing_external_data", ["holds 16 bytes"]),
    ({"dtype": T.UNDEFINED}, "bad_model", ["undefined element type"]),
    ({"dtype": 999}, "bad_model", ["undefined element type"]),
    ({"dims": (-4,)}, "bad_model", ["negative dimension"]),
], ids=["huge_dims", "over_bytes", "neg_offset", "float_offset", "text_offset", "bad_length", "neg_length", "nul",
        "escape", "absolute", "missing", "truncated", "undefined_dtype", "unknown_dtype", "neg_dim"])
def test_external_data_fields(tmp_path, kw, code, words):
    m = external_model(tmp_path, **kw)
    refused(lambda: load(m, tmp_path), code, "m.onnx", *words)


def test_declared_initializer_over_budget():
    t = helper.make_tensor("w", T.FLOAT, [4], np.ones(4, np.float32))
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4])], [vi("y", [4])], [t])
    with budget.override(max_elements=3):
        refused(lambda: load(m), "too_large", "'w'", "OPBRIDGE_MAX_ELEMENTS")


# ----------------------------------------------------------------------------- budgets in the reference
def range_model(limit, as_inputs=False):
    node = helper.make_node("Range", ["a", "b", "c"], ["y"], name="r")
    if as_inputs:
        return model([node], [vi(n, [], T.INT64) for n in "abc"], [vi("y", [None], T.INT64)])
    return model([node], [], [vi("y", [None], T.INT64)],
                 [helper.make_tensor("a", T.INT64, [], [0]), helper.make_tensor("b", T.INT64, [], [limit]),
                  helper.make_tensor("c", T.INT64, [], [1])])


def test_range_over_budget_refused_fast():
    t0 = time.perf_counter()
    refused(lambda: reference_run(range_model(2 ** 40)), "too_large", "node 'r'", "op range", "OPBRIDGE_MAX_ELEMENTS")
    feeds = {"a": np.array(0), "b": np.array(2 ** 40), "c": np.array(1)}
    refused(lambda: reference_run(range_model(0, True), feeds), "too_large", "node 'r'")
    assert time.perf_counter() - t0 < 10
    assert list(reference_run(range_model(5))[0]) == [0, 1, 2, 3, 4]


def test_range_delta_zero():
    feeds = {"a": np.array(0), "b": np.array(5), "c": np.array(0)}
    refused(lambda: reference_run(range_model(0, True), feeds), "bad_model", "node 'r'", "delta is 0")


@pytest.mark.parametrize("node,inits", [
    (helper.make_node("ConstantOfShape", ["s"], ["y"], name="n"), [i64("s", [2 ** 14] * 3)]),
    (helper.make_node("Expand", ["x", "s"], ["y"], name="n"), [i64("s", [2 ** 20, 2 ** 20, 4])]),
    (helper.make_node("Tile", ["x", "s"], ["y"], name="n"), [i64("s", [2 ** 40])]),
    (helper.make_node("Pad", ["x", "s"], ["y"], name="n"), [i64("s", [0, 2 ** 40])]),
], ids=["constant_of_shape", "expand", "tile", "pad"])
def test_allocations_over_budget_refused_before_allocating(node, inits):
    m = model([node], [vi("x", [4])], [vi("y")], inits)
    feeds = {"x": np.ones(4, np.float32)}
    t0 = time.perf_counter()
    refused(lambda: reference_run(m, feeds, validate=False), "too_large", "node 'n'")
    assert time.perf_counter() - t0 < 10


def test_broadcast_over_budget():
    m = model([helper.make_node("Add", ["a", "b"], ["y"], name="n")], [vi("a", [2 ** 15, 1]), vi("b", [1, 2 ** 15])],
              [vi("y")])
    feeds = {"a": np.ones((2 ** 15, 1), np.float32), "b": np.ones((1, 2 ** 15), np.float32)}
    with budget.override(max_elements=2 ** 30, max_bytes=2 ** 30):
        refused(lambda: reference_run(m, feeds), "too_large", "node 'n'", "OPBRIDGE_MAX_BYTES")


def loop_model(trip, with_cond):
    body = helper.make_graph(
        [helper.make_node("Identity", ["cin"], ["cout"]), helper.make_node("Add", ["v", "one"], ["vout"])],
        "body", [vi("i", [], T.INT64), vi("cin", [], T.BOOL), vi("v", [1])], [vi("cout", [], T.BOOL), vi("vout", [1])],
        [helper.make_tensor("one", T.FLOAT, [1], [1.0])])
    inits = [helper.make_tensor("M", T.INT64, [], [trip]), helper.make_tensor("c", T.BOOL, [], [True])]
    node = helper.make_node("Loop", ["M", "c" if with_cond else "", "v0"], ["vfinal"], body=body, name="loop")
    return model([node], [vi("v0", [1])], [vi("vfinal", [1])], inits)


def test_loop_trip_count_over_budget_refused_up_front():
    t0 = time.perf_counter()
    refused(lambda: reference_run(loop_model(2 ** 40, False), {"v0": np.zeros(1, np.float32)}),
            "too_large", "node 'loop'", "trip count", "OPBRIDGE_MAX_LOOP_ITERS")
    assert time.perf_counter() - t0 < 10
    assert reference_run(loop_model(3, False), {"v0": np.zeros(1, np.float32)})[0][0] == 3


def test_loop_iterations_over_budget():
    with budget.override(max_loop_iters=50):
        refused(lambda: reference_run(loop_model(2 ** 40, True), {"v0": np.zeros(1, np.float32)}),
                "too_large", "node 'loop'", "50 loop iterations")


def test_time_limit():
    with budget.override(time_limit=1e-9):
        refused(lambda: reference_run(relu_model(), {"x": np.ones(2, np.float32)}), "time_limit", "OPBRIDGE_TIME_LIMIT")


def test_budget_from_environment(monkeypatch):
    monkeypatch.setenv("OPBRIDGE_MAX_ELEMENTS", "1000")
    monkeypatch.setenv("OPBRIDGE_MAX_LOOP_ITERS", "7")
    monkeypatch.setenv("OPBRIDGE_TIME_LIMIT", "2.5")
    b = budget.current()
    assert (b.max_elements, b.max_loop_iters, b.time_limit, b.max_bytes) == (1000, 7, 2.5, budget.DEFAULT_MAX_BYTES)
    refused(lambda: reference_run(range_model(5000)), "too_large", "1000")
    monkeypatch.setenv("OPBRIDGE_MAX_ELEMENTS", "lots")
    refused(budget.current, "bad_model", "OPBRIDGE_MAX_ELEMENTS")


def test_constant_folding_never_evaluates_a_huge_range():
    """Emitters fold shape subgraphs with the reference: a huge constant Range stays a node."""
    from translator.ir.graph import Graph, TensorType
    from translator.compile.passes import fold_constants

    g = Graph("g")
    a, b, c = (g.add_constant(n, np.array(v, np.int64), "int64") for n, v in (("a", 0), ("b", 2 ** 40), ("c", 1)))
    node = g.add_node("range", [a, b, c], {}, outputs=1, name="r")
    g.outputs.append(node.outputs[0])
    node.outputs[0].type = TensorType("int64", (None,))
    t0 = time.perf_counter()
    assert fold_constants.run(g) == 0
    assert time.perf_counter() - t0 < 5


# ----------------------------------------------------------------------------- invalid graphs past validation
@pytest.mark.parametrize("node,inputs,feeds,inits,words", [
    (helper.make_node("Reshape", ["x", "s"], ["y"], name="n"), [vi("x", [4])], {"x": np.ones(4, np.float32)},
     [i64("s", [7, 3])], ["reshape"]),
    (helper.make_node("Gather", ["x", "i"], ["y"], axis=0, name="n"), [vi("x", [4])], {"x": np.ones(4, np.float32)},
     [i64("i", [7])], ["IndexError"]),
    (helper.make_node("Split", ["x", "s"], ["y"], axis=0, name="n"), [vi("x", [4])], {"x": np.ones(4, np.float32)},
     [i64("s", [1, 1])], []),
    (helper.make_node("Conv", ["x", "w"], ["y"], group=3, name="n"), [vi("x", [1, 2, 3, 3])],
     {"x": np.ones((1, 2, 3, 3), np.float32)}, [helper.make_tensor("w", T.FLOAT, [1, 1, 1, 1], [1.0])], []),
], ids=["impossible_reshape", "gather_out_of_range", "split_sum", "conv_bad_group"])
def test_reference_on_invalid_graphs(node, inputs, feeds, inits, words):
    """Past the validation stage (validate=False: what ONNX inference cannot see), the reference
    still names the node and op instead of a traceback."""
    m = model([node], inputs, [vi(o) for o in node.output], inits)
    e = refused(lambda: reference_run(m, feeds, validate=False), "bad_model", "node 'n'", *words)
    assert e.op is not None


def test_float_axis_in_reference():
    from translator.compile import interpreter
    from translator.ir.graph import Graph, Model, TensorType

    g = Graph("g")
    x = g.add_input("x", TensorType("float32", (2, 3)))
    node = g.add_node("softmax", [x], {"axis": 1.5}, outputs=1, name="n")
    g.outputs.append(node.outputs[0])
    refused(lambda: interpreter.run(Model(g), {"x": np.ones((2, 3), np.float32)}), "bad_model", "node 'n'", "op softmax")


def test_loop_body_with_missing_inputs():
    body = helper.make_graph([helper.make_node("Identity", ["cin"], ["cout"]), helper.make_node("Add", ["v", "w"], ["vout"])],
                             "body", [vi("i", [], T.INT64), vi("cin", [], T.BOOL), vi("v", [1]), vi("w", [1])],
                             [vi("cout", [], T.BOOL), vi("vout", [1])])
    node = helper.make_node("Loop", ["M", "", "v0"], ["vfinal"], body=body, name="loop")
    m = model([node], [vi("v0", [1])], [vi("vfinal", [1])], [helper.make_tensor("M", T.INT64, [], [2])])
    with pytest.raises(OpbridgeError) as ei:
        reference_run(m, {"v0": np.zeros(1, np.float32)}, validate=False)
    assert ei.value.code in ("bad_model", "verifier") and ei.value.node and "\n" not in str(ei.value)


@pytest.mark.parametrize("op,attrs,shape", [
    ("conv", {"strides": [0, 0]}, (1, 1, 5, 5)),
    ("transpose", {"perm": [0, 9]}, (2, 3)),
    ("gather", {"axis": 5}, (2, 3)),
    ("concat", {"axis": 7}, (2, 3)),
], ids=["conv_strides0", "transpose_perm", "gather_axis", "concat_axis"])
def test_shape_inference_on_invalid_attributes(op, attrs, shape):
    from translator.ir.infer import infer
    from translator.ir.graph import Graph, TensorType

    g = Graph("g")
    x = g.add_input("x", TensorType("float32", shape))
    second = {"conv": lambda: g.add_constant("w", np.ones((1, 1, 3, 3), np.float32), "float32"),
              "gather": lambda: g.add_constant("i", np.array([0], np.int64), "int64"),
              "concat": lambda: x}.get(op)
    ins = [x] + ([second()] if second else [])
    node = g.add_node(op, ins, attrs, outputs=1, name="n")
    g.outputs.append(node.outputs[0])
    e = refused(lambda: infer(g), "bad_model", "node 'n'", f"op {op}")
    assert e.op == op


# ----------------------------------------------------------------------------- the check's random inputs
def test_random_inputs_refuses_what_it_cannot_generate():
    from translator.run.check import random_inputs

    opt = helper.make_value_info("o", helper.make_optional_type_proto(helper.make_tensor_type_proto(T.FLOAT, [2])))
    m = model([helper.make_node("OptionalHasElement", ["o"], ["y"])], [opt], [vi("y", [], T.BOOL)], opset=18)
    refused(lambda: random_inputs(load(m)), "dynamic_shape", "'o'", "--inputs")
    big = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2 ** 20, 2 ** 20])], [vi("y", [2 ** 20, 2 ** 20])])
    refused(lambda: random_inputs(load(big)), "too_large", "'x'")
    norank = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")])
    refused(lambda: random_inputs(load(norank)), "dynamic_shape", "'x'")


# ----------------------------------------------------------------------------- the command line
@pytest.mark.parametrize("name,build,code", [
    ("range", lambda tmp: range_model(2 ** 40), "too_large"),
    ("dup_out", lambda tmp: model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2]), vi("y", [2])]),
     "bad_model"),
    ("loop", lambda tmp: loop_model(2 ** 40, False), "too_large"),
    ("ext", lambda tmp: external_model(tmp, offset=-1), "bad_model"),
], ids=["range", "dup_out", "loop", "external_offset"])
def test_cli_check_exits_2_with_one_line(tmp_path, capsys, name, build, code):
    from translator.cli.main import main

    path = tmp_path / f"{name}.onnx"
    onnx.save(build(tmp_path), path)
    rc = main(["check", str(path), "--backends", "numpy", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and f"[{code}]" in err, err


def test_required_input_left_empty_is_refused_before_shape_inference():
    """ONNX's shape inference crashes the process on this node; the structural checker runs first."""
    node = helper.make_node("LabelEncoder", [""], ["y"], domain="ai.onnx.ml", keys_strings=["a", "b"],
                            values_int64s=[0, 1], default_int64=42, name="enc")
    g = helper.make_graph([node], "g", [vi("x", [2], T.STRING)], [vi("y", [2], T.INT64)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", 2)])
    refused(lambda: load(m), "bad_model", "op LabelEncoder", "empty")


def test_checker_crash_is_a_refusal(monkeypatch):
    """ONNX's C++ checker/inference runs in a worker process: its death is a one-line refusal."""
    import subprocess
    import sys

    from translator.frontends import validate

    worker = validate._Worker()
    monkeypatch.setattr(worker, "_start", lambda: subprocess.Popen(
        [sys.executable, "-c", "import os, sys; sys.stdin.buffer.read(8); os.abort()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
    monkeypatch.setattr(validate, "_WORKER", worker)
    monkeypatch.delenv("OPBRIDGE_CHECKER_IN_PROCESS", raising=False)
    refused(lambda: load(relu_model()), "bad_model", "m.onnx", "crashed", "SIGABRT")
    monkeypatch.setattr(validate, "_WORKER", validate._Worker())
    assert load(relu_model()) is not None  # a fresh worker serves again


def test_a_computed_tensor_over_budget_is_refused_before_any_backend_builds_it(tmp_path):
    """ConstantOfShape of 2^41 elements from a constant shape: the TFLite converter hung
    materializing it (found by tests/fuzz); every target now refuses it at verification."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from translator.cli.main import main

    sh = numpy_helper.from_array(np.array([2 ** 20, 2 ** 20, 2], np.int64), "sh")
    g = helper.make_graph([helper.make_node("ConstantOfShape", ["sh"], ["k"], name="k"),
                           helper.make_node("Add", ["k", "x"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [sh])
    model = tmp_path / "cos.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    for target in ("tflite", "onnx"):
        assert main(["convert", str(model), "--to", target, "-o", str(tmp_path / target), "-q", "--no-check"]) == 2
        assert not (tmp_path / target).exists()


@pytest.mark.parametrize("nodes,inputs,inits,code,text", [
    ([("Reshape", ["a", "s"], {})], [("a", [2, 3])], {"s": np.array([4, 2], np.int64)}, "bad_model", "cannot reshape 6"),
    ([("Conv", ["a", "w"], {})], [("a", [1, 5, 4, 4])], {"w": np.ones((2, 3, 1, 1), np.float32)}, "bad_model",
     "input channels 5"),
    ([("MaxPool", ["a"], {"kernel_shape": [1, 1], "strides": [1, 2 ** 40]})], [("a", [1, 1, 4, 4])], {},
     "unsupported_attribute_value", "beyond int32"),
])
def test_inference_refuses_inconsistent_static_shapes(nodes, inputs, inits, code, text):
    """Found by tests/fuzz: models whose declared shapes contradict their ops reached
    TensorFlow's tracer, whose ValueError was reported as an internal error."""
    from onnx import TensorProto, helper, numpy_helper

    from translator.table.errors import OpbridgeError
    from translator.frontends.onnx import from_proto
    from translator.compile.pipeline import prepare

    g = helper.make_graph([helper.make_node(op, ins, ["y"], name="n", **attrs) for op, ins, attrs in nodes], "g",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    with pytest.raises(OpbridgeError) as ei:
        prepare(from_proto(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), ".", "m.onnx"))
    assert ei.value.code == code and text in str(ei.value)


def test_inference_refuses_a_matmul_whose_contraction_dimensions_differ():
    from translator.table.errors import OpbridgeError
    from translator.run.harness import single_op_model
    from translator.compile.pipeline import prepare

    model, _ = single_op_model("matmul", [np.ones(2, np.float32), np.ones((4, 3), np.float32)], {})
    with pytest.raises(OpbridgeError, match=r"contraction dimensions differ: \(2,\) @ \(4, 3\) \[bad_model\]"):
        prepare(model)


def test_shape_inference_computing_a_huge_constant_is_refused_within_the_checkers_memory_cap():
    """ONNX's shape inference with data propagation computes constant subgraphs: a Range of
    2^40 elements read by a Cast grows until the machine kills it (24 GB here). A Range of
    constant bounds is held to the element budget before shape inference (at once: the fuzz
    run's range bomb); past that budget (raised here), the checker worker runs under an
    address-space cap, so the allocation fails and the model is refused with the reason."""
    from translator.table import budget

    m = model([helper.make_node("Range", ["s", "l", "d"], ["r"]), helper.make_node("Cast", ["r"], ["y"], to=T.FLOAT)],
              [vi("x", [2])], [vi("y")], [helper.make_tensor("s", T.INT64, [], [0]),
                                            helper.make_tensor("l", T.INT64, [], [2 ** 40]),
                                            helper.make_tensor("d", T.INT64, [], [1])])
    t0 = time.perf_counter()
    refused(lambda: load(m), "too_large", "Range from 0 to", "OPBRIDGE_MAX_ELEMENTS")
    assert time.perf_counter() - t0 < 5
    t0 = time.perf_counter()
    with budget.override(max_elements=2 ** 41, max_bytes=2 ** 44):
        refused(lambda: load(m), "bad_model", "shape inference needs more than", "MB")
    assert time.perf_counter() - t0 < 60
