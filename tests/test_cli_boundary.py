"""The CLI boundary: exit codes that mean what they say, one line on stderr with a reason
code, no traceback (unless -v), nothing left at -o unless the command ends with 0 or 1,
names from the model escaped on the terminal."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import numpy as np
from onnx import TensorProto, helper

from translator.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"


def _relu(tmp_path: Path, out_name: str = "y") -> Path:
    g = helper.make_graph([helper.make_node("Relu", ["x"], [out_name])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, [2, 3])])
    p = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
    return p


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_an_internal_error_is_one_line_with_its_code_and_writes_nothing(tmp_path, capsys, monkeypatch):
    import emitters.onnx as eo

    def boom(*a, **k):
        raise KeyError("tuple index out of range")

    monkeypatch.setattr(eo.codegen.Emitter, "graph", boom)
    model = _relu(tmp_path)
    code, out, err = _run(capsys, "convert", str(model), "--to", "onnx", "-o", str(tmp_path / "o.onnx"), "-q")
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "[internal_error]" in err and "Traceback" not in err
    assert _leftovers(tmp_path) == ["relu.onnx"]
    code, out, err = _run(capsys, "convert", str(model), "--to", "onnx", "-o", str(tmp_path / "o.onnx"), "-q", "-v")
    assert code == 2 and "Traceback" in err  # -v shows where


def test_an_exception_outside_any_target_is_caught_at_the_boundary(capsys, monkeypatch, tmp_path):
    import translator.run.check as C

    def boom(path, **opts):
        raise ZeroDivisionError("integer division or modulo by zero")

    monkeypatch.setattr(C, "model_loader", boom)
    code, out, err = _run(capsys, "report", str(_relu(tmp_path)))
    assert code == 2 and err.count("\n") == 1 and "ZeroDivisionError" in err and "[internal_error]" in err


def test_a_check_that_could_not_run_is_not_a_pass(tmp_path, capsys, monkeypatch):
    import translator.run.check as C

    real = C.check_model

    def cannot_run(*a, **k):
        res = real(*a, **k)
        for r in res["backends"]:
            r.status, r.reason, r.detail, r.outputs = "error", "runtime_error:RuntimeError", "the runtime crashed", []
        return res

    monkeypatch.setattr(C, "check_model", cannot_run)
    code, out, err = _run(capsys, "convert", str(_relu(tmp_path)), "--to", "onnx", "-o", str(tmp_path / "o.onnx"), "-q")
    assert code == 2 and "cannot check onnx" in err and "[runtime_error:RuntimeError]" in err
    assert err.count("\n") == 1 and _leftovers(tmp_path) == ["relu.onnx"]
    code, out, err = _run(capsys, "convert", str(_relu(tmp_path)), "--to", "onnx", "-o", str(tmp_path / "o.onnx"), "-q",
                          "--no-check")
    assert code == 0 and _leftovers(tmp_path) == ["o.onnx", "relu.onnx"]


def test_a_mismatch_exits_1_and_keeps_the_artifact_for_inspection(tmp_path, capsys, monkeypatch):
    import translator.run.check as C

    real = C.check_model

    def mismatch(*a, **k):
        res = real(*a, **k)
        for r in res["backends"]:
            r.status, r.reason = "fail", "mismatch"
        return res

    monkeypatch.setattr(C, "check_model", mismatch)
    code, out, err = _run(capsys, "convert", str(_relu(tmp_path)), "--to", "onnx", "-o", str(tmp_path / "o.onnx"), "-q")
    assert code == 1 and "kept for inspection" in out and (tmp_path / "o.onnx").exists()


def test_one_target_refused_writes_the_others_and_names_it(tmp_path, capsys, monkeypatch):
    """``--to onnx,openvino`` with openvino refused: onnx is written (atomically, as alone),
    nothing of openvino is left, exit 2 names the refused target; ``--all-or-nothing`` writes
    none, as before, with a hint."""
    import dataclasses

    import emitters.openvino as ov
    from translator.compile import target as T

    def refuse(*a, **k):
        from translator.table.errors import Unsupported

        raise Unsupported("relu", "openvino", "unsupported_op", "pretend it is missing", "n0")

    real = T.get
    monkeypatch.setattr(T, "get", lambda name: dataclasses.replace(ov.TARGET, emit=refuse) if name == "openvino"
                        else real(name))
    out_dir = tmp_path / "out"
    code, out, err = _run(capsys, "convert", str(_relu(tmp_path)), "--to", "onnx,openvino", "-o", str(out_dir), "-q",
                          "--json")
    assert code == 2 and sorted(p.name for p in out_dir.iterdir()) == ["relu.onnx"], list(out_dir.iterdir())
    assert err.count("\n") == 1 and "[unsupported_op]" in err and "written: onnx" in err, err
    doc = json.loads(out)
    assert doc["written"] is False and doc["written_targets"] == ["onnx"]
    assert [t["status"] for t in doc["targets"]] == ["ok", "failed"] and "output" not in doc["targets"][1]
    out_dir = tmp_path / "strict"
    code, out, err = _run(capsys, "convert", str(_relu(tmp_path)), "--to", "onnx,openvino", "-o", str(out_dir), "-q",
                          "--json", "--all-or-nothing")
    assert code == 2 and not out_dir.exists() and sorted(_leftovers(tmp_path)) == ["out", "relu.onnx"]
    assert err.count("\n") == 1 and "[unsupported_op]" in err and "nothing written" in err and "--to onnx" in err
    assert json.loads(out)["written_targets"] == []


def test_names_are_escaped_on_the_terminal(tmp_path, capsys):
    evil = "y\x1b[2J\nFAKE: ok"
    code, out, err = _run(capsys, "convert", str(_relu(tmp_path, evil)), "--to", "onnx", "-o", str(tmp_path / "o.onnx"),
                          "-q")
    assert code == 0 and "\x1b" not in out and "\nFAKE" not in out and "\\x1b[2J\\nFAKE" in out
    assert cli.safe("a\u202eb\x00") == "a\\u202eb\\x00"


def test_native_log_lines_are_filtered_from_the_console():
    """TensorFlow's C++ prints absl lines on fd 2 at import; with the console filter (main()
    installs it unless -v) none of them shows, while other native output and our own lines do."""
    code = ("import os, sys\n"
            "from translator.cli import main as cli\n"
            "cli.filter_native_stderr()\n"
            "os.write(2, b'I0000 00:00:1795554494.548140    6850 port.cc:153] noise\\n')\n"
            "os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n')\n"
            "os.write(2, b'a real native error\\n')\n"
            "print('[convert] ours', file=sys.stderr)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "port.cc" not in p.stderr and "absl::InitializeLog" not in p.stderr
    assert "a real native error" in p.stderr and "[convert] ours" in p.stderr
    p = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(MODEL), "--to", "tensorflow", "-o",
                        "/nonexistent/x/y", "-q", "--no-check"], capture_output=True, text=True, cwd=ROOT)
    assert "port.cc" not in p.stderr and "absl" not in p.stderr


@pytest.mark.parametrize("argv", [["check", "{m}", "--backends", "numpy,onnx"], ["report", "{m}"]])
def test_check_and_report_exit_0_on_a_good_model(tmp_path, capsys, argv):
    code, out, err = _run(capsys, *[a.format(m=_relu(tmp_path)) for a in argv])
    assert code == 0, err


def test_onnxruntime_logs_nothing_of_its_own_unless_verbose(tmp_path):
    """A kernel failure is reported as our one line (found by tests/fuzz: onnxruntime also
    printed its own coloured executor error on stderr)."""
    from onnx import numpy_helper

    pads = numpy_helper.from_array(np.array([1, 1], np.int64), "pads")
    value = numpy_helper.from_array(np.array([0.0, 1.0], np.float32), "value")  # must be a scalar
    g = helper.make_graph([helper.make_node("Pad", ["x", "pads", "value"], ["y"], name="pad")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [pads, value])
    model = tmp_path / "pad.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)
    p = subprocess.run([sys.executable, "-m", "translator.cli", "check", str(model), "--backends", "numpy,onnx",
                        "--json"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and "[E:onnxruntime" not in p.stderr and "sequential_executor" not in p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.rstrip().endswith("[runtime_error:Fail]")
