"""The MIL evaluator (emitters/coreml/mil_eval*.py) against the NumPy reference.

For every op with a generated sample (``translator.run.samples.op_samples``, the samples of
tests/test_ops.py) that the Core ML target emits: the op alone in a graph is compiled for
coreml, the package is written and loaded back, and the evaluator computes the written
program (not the IR) directly; its outputs must match the reference under the op's
tolerance. A program with a MIL op the evaluator lacks fails its case, naming the op types, so
no op the emitter uses is left structural-only unnoticed.
Expected failures are the op's coreml ``xfail`` entries in optable.yaml (strict).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("coremltools")

from emitters.coreml import mil_eval  # noqa: E402
from translator.compile import target as targets  # noqa: E402
from translator.run.artifact_io import load_written, save  # noqa: E402
from translator.run.harness import compare, single_op_model  # noqa: E402
from translator.compile.pipeline import compile  # noqa: E402
from translator.compile.registry import supported  # noqa: E402
from translator.run.samples import op_samples, output_tolerances, xfail_reasons  # noqa: E402
from translator.table.loader import load_tables  # noqa: E402

TABLES = load_tables()
CORE = targets.get("coreml")
SUPPORTED = supported(CORE, TABLES)


#: cases where the written program itself is inconsistent (found by this evaluator; emitter fixes pending)
PROGRAM_DEFECTS: dict[tuple[str, str], str] = {}


def _cases():
    for op in TABLES.ops.values():
        if "random" in op.traits or op.no_case is not None:
            continue
        if op.id not in SUPPORTED and not op.decomposition:
            continue
        for dtype, smp, outs in op_samples(op, TABLES):
            marks = [pytest.mark.xfail(reason=r, strict=True) for r in xfail_reasons(op, "coreml", dtype)]
            if (op.id, dtype) in PROGRAM_DEFECTS:
                marks.append(pytest.mark.xfail(reason=PROGRAM_DEFECTS[op.id, dtype], raises=mil_eval.EvalError,
                                               strict=True))
            yield pytest.param(op.id, dtype, smp, outs, marks=marks, id=f"{op.id}-{dtype}")


CASES = list(_cases())


def written_program(op_id: str, smp, d: Path, n_outputs: int = 1) -> tuple:
    """(artifact as loaded back, evaluator program, feeds) of ``op_id``'s sample written under
    ``d``, or a refusal."""
    model, feeds = single_op_model(op_id, smp.inputs, smp.attrs, n_outputs=n_outputs, const=smp.const)
    art = compile(model, CORE).artifact
    path = save("coreml", art, d / "model.coreml") or d / "model.coreml"
    loaded = load_written("coreml", Path(path), art)
    return loaded, mil_eval.load(loaded.package), feeds


def evaluate_case(op_id: str, smp, n_outputs: int = 1) -> tuple[list[np.ndarray], list]:
    from emitters.coreml.runtime import _back, _feeds

    with tempfile.TemporaryDirectory(prefix="opbridge-mil-eval-test-") as d:
        art, prog, feeds = written_program(op_id, smp, Path(d), n_outputs)
        got = mil_eval.evaluate(prog, _feeds(art, feeds))
        return _back(art, [got[p.coreml] for p in art.outputs]), list(CORE.output_ports(art))


@pytest.mark.parametrize("op_id, dtype, smp, expected", CASES)
def test_op_evaluates_like_the_reference(op_id, dtype, smp, expected):
    op = TABLES.ops[op_id]
    model, feeds = single_op_model(op_id, smp.inputs, smp.attrs, n_outputs=len(expected), const=smp.const)
    tols = output_tolerances(op, dtype, model, feeds, expected)  # (as the check holds a float DynamicQuantizeLSTM)
    try:
        got, ports = evaluate_case(op_id, smp, len(expected))
    except mil_eval.MissingOps as exc:
        pytest.fail(f"the MIL evaluator lacks {', '.join(exc.ops)}")
    got = got[:len(expected)]
    assert len(got) == len(expected)
    for e, g, port, tol in zip(expected, got, ports, tols):
        d = compare(e, g, **tol, legalized=port.legal if port is not None else None)
        assert d.ok, f"{op_id} ({dtype}) evaluated from the written package: {d.reason}"


# ----------------------------------------------------------------------------- the evaluator itself
def _conv_model():
    from onnx import TensorProto, helper

    from translator.frontends.onnx import from_proto

    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 0, 1, 2], strides=[2, 1], group=1),
         helper.make_node("Relu", ["c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 7, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel().tolist())])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return from_proto(m, ".", "conv"), {"x": rng.standard_normal((1, 2, 7, 6)).astype(np.float32)}


def test_conv_is_checked_numerically_through_run():
    """A conv model (no coremltools value inference for conv) gets numbers from coreml.run."""
    from translator.run.artifact_io import run_written
    from translator.run.harness import convert

    model, feeds = _conv_model()
    got = run_written("coreml", convert("coreml", model), feeds)
    want = targets.get("numpy").run(convert("numpy", _conv_model()[0]), feeds)
    assert compare(want[0], got[0]).ok


def test_the_weights_are_read_from_the_written_package(tmp_path):
    """The evaluator reads the package's blob file: changing the written weights changes the result."""
    from translator.run.harness import convert

    model, feeds = _conv_model()
    art = convert("coreml", model)
    prog = mil_eval.load(art.package)
    before = mil_eval.evaluate(prog, feeds)
    blob = next(Path(art.package).rglob("weight.bin"))
    data = bytearray(blob.read_bytes())
    data[-64:] = bytes(64)  # zero the last weights in the blob
    blob.write_bytes(bytes(data))
    after = mil_eval.evaluate(mil_eval.load(art.package), feeds)
    assert not all(np.array_equal(before[k], after[k]) for k in before)


def test_an_unknown_op_is_named_never_evaluated():
    from translator.run.harness import convert

    model, feeds = _conv_model()
    art = convert("coreml", model)
    prog = mil_eval.load(art.package)
    saved = mil_eval.OPS.pop("conv")
    try:
        assert mil_eval.missing_ops(prog) == ["conv"]
        with pytest.raises(mil_eval.MissingOps, match="conv"):
            mil_eval.evaluate(prog, feeds)
    finally:
        mil_eval.OPS["conv"] = saved


def test_a_result_unlike_the_declared_type_is_an_error():
    from translator.run.harness import convert

    model, feeds = _conv_model()
    art = convert("coreml", model)
    prog = mil_eval.load(art.package)
    saved = mil_eval.OPS["relu"]
    mil_eval.OPS["relu"] = lambda a: np.asarray(a("x"))[..., :1]  # a wrong shape
    try:
        with pytest.raises(mil_eval.EvalError, match="shape"):
            mil_eval.evaluate(prog, feeds)
    finally:
        mil_eval.OPS["relu"] = saved
