"""``opbridge convert``: atomic output, check on by default, reason codes and exit codes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_convert_to_onnx_checks_by_default(tmp_path):
    out = tmp_path / "m.onnx"
    p = cli("convert", str(MODEL), "--to", "onnx", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)["targets"][0]
    assert r["status"] == "ok" and r["check"]["status"] == "pass"
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)
    assert [f.name for f in tmp_path.iterdir()] == ["m.onnx"]


def test_progress_goes_to_stderr_and_quiet_silences_it(tmp_path):
    p = cli("convert", str(MODEL), "--to", "onnx", "-o", str(tmp_path / "a.onnx"))
    assert "[convert] onnx: lowering and emitting" in p.stderr
    p = cli("convert", str(MODEL), "--to", "onnx", "-o", str(tmp_path / "b.onnx"), "--quiet", "--no-check")
    assert p.returncode == 0 and p.stderr == ""


def test_cannot_convert_exits_2_with_a_reason_and_writes_nothing(tmp_path):
    g = helper.make_graph([helper.make_node("Reverse", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    p = cli("convert", str(bad), "--to", "onnx", "-o", str(tmp_path / "out.onnx"))
    assert p.returncode == 2 and "Reverse" in p.stderr
    assert not (tmp_path / "out.onnx").exists()


def test_several_targets_onto_an_existing_file_is_one_line_exit_2(tmp_path):
    """A file left by a one-target run where several targets want a folder: a reason, not a traceback."""
    out = tmp_path / "out"
    out.write_bytes(b"from an earlier run")
    p = cli("convert", str(MODEL), "--to", "onnx,pytorch", "-o", str(out))
    assert p.returncode == 2 and "an existing file" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert out.read_bytes() == b"from an earlier run"


def test_one_file_into_an_existing_folder_and_a_folder_onto_an_existing_file(tmp_path):
    """``-o`` naming an existing folder for a one-file artifact writes into it, as ``cp`` does
    (it replaced the folder and everything in it); a folder artifact onto an existing file is
    one line and exit 2, the file untouched (it was an internal error after converting)."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    p = cli("convert", str(MODEL), "--to", "onnx", "-o", str(folder), "--no-check")
    assert p.returncode == 0, p.stderr
    assert (folder / "notes.txt").read_text() == "mine" and (folder / (MODEL.stem + ".onnx")).is_file()
    f = tmp_path / "taken"
    f.write_bytes(b"from an earlier run")
    p = cli("convert", str(MODEL), "--to", "pytorch", "-o", str(f), "--no-check")
    assert p.returncode == 2 and "an existing file" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert f.read_bytes() == b"from an earlier run"


def test_unknown_target_exits_2():
    p = cli("convert", str(MODEL), "--to", "caffe", "-o", "/tmp/never")
    assert p.returncode == 2 and "unknown target" in p.stderr


def test_check_uses_what_was_written_and_compares_with_onnxruntime_too(tmp_path):
    p = cli("convert", str(MODEL), "--to", "pytorch", "-o", str(tmp_path / "pt"), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    check = doc["targets"][0]["check"]
    assert check["source"] == "onnxruntime"
    assert check["outputs"] and all(o["vs_source"]["max_abs"] <= 1e-4 for o in check["outputs"])
    text = cli("convert", str(MODEL), "--to", "onnx", "-o", str(tmp_path / "m.onnx"))
    assert "vs onnxruntime" in text.stdout


def test_channels_last_io_converts_and_checks(tmp_path):
    p = cli("convert", str(MODEL), "--to", "tensorflow", "-o", str(tmp_path / "tf"), "--json", "--channels-last-io")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)["targets"][0]
    assert r["check"]["status"] == "pass", r
    q = cli("convert", str(MODEL), "--to", "tensorflow", "-o", str(tmp_path / "tf2"), "--json")
    # channels-last I/O needs fewer transposes than keeping the model's NCHW I/O
    assert r["transposes"] < json.loads(q.stdout)["targets"][0]["transposes"]


def test_repeated_warnings_are_grouped_on_the_terminal():
    from translator.cli.models import _grouped

    ws = [f"tflite: constant 'c{i}' int64 -> int32" for i in range(5)] + ["tflite: input 'x' int64 -> int32"]
    assert _grouped(ws) == ["tflite: constants int64 -> int32 — 5 tensors ('c0', 'c1', 'c2', …)",
                            "tflite: input 'x' int64 -> int32"]


def test_python_api_is_quiet_and_leaves_stderr_working(tmp_path):
    """``opbridge.convert`` from Python: no TensorFlow/absl/TFLite native log lines during the
    call (as the CLI without -v), and the caller's own stderr writes still arrive afterwards."""
    code = ("import os, sys, opbridge\n"
            f"r = opbridge.convert({str(MODEL)!r}, to='tflite,tensorflow', out={str(tmp_path / 'out')!r})\n"
            "assert r['written'], r\n"
            "print('caller line', file=sys.stderr, flush=True)\n"
            "os.write(2, b'caller fd line\\n')\n")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("OPBRIDGE_VERBOSE", "TF_CPP_MIN_LOG_LEVEL")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert lines == ["caller line", "caller fd line"], p.stderr
