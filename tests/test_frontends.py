"""The frontend contract, the check against the source framework's runtime, and the Python API."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"


def test_every_frontend_has_the_contract_names():
    from translator import frontends

    for name in frontends.FRONTENDS:
        mod = frontends.get(name)
        assert mod.NAME == name
        for attr in ("RUNTIME", "matches", "load", "run_source"):
            assert hasattr(mod, attr), f"frontend {name} lacks {attr}"


def test_detect_picks_by_form_and_refuses_the_rest(tmp_path):
    from translator import frontends
    from translator.table.errors import FrontendError

    assert frontends.detect(str(MODEL)).NAME == "onnx"
    other = tmp_path / "weights.bin"
    other.write_bytes(b"\0" * 8)
    with pytest.raises(FrontendError) as e:
        frontends.detect(str(other))
    assert e.value.code == "bad_model" and "weights.bin" in str(e.value)


def test_cli_refuses_an_unknown_model_form_in_one_line(tmp_path):
    other = tmp_path / "notes.txt"
    other.write_text("not a model")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(other), "--to", "onnx", "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("opbridge: error:")]
    assert len(lines) == 1 and "notes.txt" in lines[0] and "[bad_model]" in lines[0], p.stderr
    assert not out.exists()


def _fake_frontend(runtime_outputs):
    """A frontend whose source runtime answers ``runtime_outputs(feeds)`` (the IR is the ONNX model's)."""
    from translator.frontends import onnx as onnx_fe

    mod = types.ModuleType("fake_frontend")
    mod.NAME, mod.RUNTIME = "fake", "FakeRT 1.0"
    mod.matches = lambda s: False
    mod.load = onnx_fe.load
    mod.run_source = lambda source, feeds, names, **o: runtime_outputs(feeds)
    return mod


@pytest.mark.parametrize("widen, verdict", [(None, "fail"), (10.0, "pass")])
def test_a_non_onnx_source_runtime_decides(monkeypatch, widen, verdict):
    """For a non-ONNX source the source runtime is the oracle: a translation the reference and
    the target agree on but the source does not is a failure (``source_mismatch``), unless the
    frontend widened that output's tolerance (e.g. one int8 quantization step)."""
    from translator.run import check as C
    from translator import frontends

    model = frontends.load(str(MODEL))
    model.source_format = "fake"
    if widen is not None:
        model.metadata = {**(model.metadata or {}), "opbridge.source_atol": json.dumps({"probs": widen})}
    ref = C.check_model(lambda: model, ["numpy"])["backends"][0]
    assert ref.status == "pass"

    def wrong(feeds):  # the source computes something else: outputs shifted by 0.5
        from translator.compile import interpreter
        from translator.run.harness import convert

        return [np.asarray(o) + 0.5 for o in interpreter.run(convert("numpy", model.clone()), feeds, {})]

    real_get = frontends.get
    monkeypatch.setattr(frontends, "get", lambda name: _fake_frontend(wrong) if name == "fake" else real_get(name))
    res = C.check_model(lambda: model, ["numpy"], source="whatever.fake")
    rep = res["backends"][0]
    assert res["source"] == "FakeRT 1.0"
    assert rep.status == verdict
    if verdict == "fail":
        assert rep.reason == "source_mismatch" and "FakeRT" in rep.detail


def test_an_onnx_source_informs_but_the_reference_decides():
    from translator.run.check import check_model, model_loader

    res = check_model(model_loader(str(MODEL)), ["numpy"], source=str(MODEL))
    assert res["source"] == "onnxruntime"
    out = res["backends"][0].outputs[0]
    assert out.vs_source is not None and out.vs_source.ok


def test_import_opbridge_is_the_python_api_and_imports_no_framework():
    code = ("import sys, opbridge; "
            "assert all(callable(getattr(opbridge, f)) for f in ('convert', 'query', 'report', 'check')); "
            "print(sorted(m for m in ('numpy', 'torch', 'tensorflow', 'onnx', 'coremltools', 'openvino') "
            "if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_python_api_convert_report_check(tmp_path):
    import opbridge

    res = opbridge.convert(str(MODEL), to="onnx,pytorch", out=str(tmp_path / "out"))
    assert res["written"] and [t["status"] for t in res["targets"]] == ["ok", "ok"]
    assert (tmp_path / "out" / "tiny_cnn.onnx").is_file()
    assert res["targets"][0]["check"]["source"] == "onnxruntime"
    rep = opbridge.report(str(MODEL), backends=["onnx", "tflite"])
    assert list(rep["backends"]) == ["onnx", "tflite"]
    chk = opbridge.check(str(MODEL), backends="numpy")
    assert chk["backends"][0]["status"] == "pass"
    assert opbridge.query("conv")["query"] == "conv"


def test_python_api_convert_refuses_without_writing(tmp_path):
    import opbridge
    from translator.table.errors import OpbridgeError

    with pytest.raises(OpbridgeError):
        opbridge.convert(str(MODEL), to="no_such_target", out=str(tmp_path / "x"))
    assert not (tmp_path / "x").exists()


def test_the_bundled_tflite_converts_back_quietly(tmp_path):
    """`make demo`'s non-ONNX step: the bundled .tflite (TensorFlow's own converter) to ONNX,
    checked against the TFLite interpreter; no third-party log line without -v."""
    out = tmp_path / "m.onnx"
    p = subprocess.run([sys.executable, "-m", "translator.cli", "convert", "examples/models/tiny_cnn.tflite",
                        "--to", "onnx", "-o", str(out), "-q"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stderr == "", p.stderr
    assert p.stdout.startswith("onnx: ok") and "vs LiteRT" in p.stdout, p.stdout
    assert out.is_file()


@pytest.mark.parametrize("step, verdict", [(1, "pass"), (2, "fail")])
def test_an_int8_output_may_differ_from_its_source_by_the_recorded_steps(tmp_path, monkeypatch, step, verdict):
    """A quantized output: the targets compute in float and requantize, the source's integer
    kernels round their own way; the frontend records one step (``source_atol``) and no more passes."""
    import onnx
    from onnx import TensorProto as T, helper as h, numpy_helper as nh

    from translator.run import check as C
    from translator import frontends

    g = h.make_graph([h.make_node("Mul", ["x", "k"], ["m"]), h.make_node("Cast", ["m"], ["y"], to=T.INT8)], "q",
                     [h.make_tensor_value_info("x", T.FLOAT, [4])], [h.make_tensor_value_info("y", T.INT8, [4])],
                     [nh.from_array(np.array(3.0, np.float32), "k")])
    path = tmp_path / "q.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))
    model = frontends.load(str(path))
    model.source_format = "fake"
    model.metadata = {"opbridge.source_atol": json.dumps({"y": 1})}
    feeds = {"x": np.array([0.0, 1.0, 2.0, 3.0], np.float32)}

    def off_by(feeds):  # the source rounds `step` apart on one element
        y = (feeds["x"] * 3).astype(np.int8)
        y[1] += step
        return [y]

    real_get = frontends.get
    monkeypatch.setattr(frontends, "get", lambda name: _fake_frontend(off_by) if name == "fake" else real_get(name))
    rep = C.check_model(lambda: model, ["numpy"], feeds, source="q.fake")["backends"][0]
    assert rep.status == verdict, (rep.reason, rep.detail)
