"""bench/report_dir.py: the folder report against each model's own report, in one run."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import ROOT
from translator.compile.target import names


def test_the_folder_report_agrees_with_each_models_own_report_and_a_broken_file_fails_alike(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    g = helper.make_graph([helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("Det", ["a"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                          [numpy_helper.from_array(np.ones([3, 3], np.float32), "c")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), folder / "det.onnx")
    (folder / "broken.onnx").write_bytes(b"not a protobuf")
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "report_dir.py"), str(folder), "--workers", "2",
                        "--json", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    doc = json.loads(out.read_text())
    pairs = len(names(include_reference=False)) + 1  # every target, and the unreadable file
    assert doc["models"] == 2 and doc["pairs"] == pairs and doc["disagree"] == [], doc
    assert f"report DIR vs report MODEL: {pairs}/{pairs}" in p.stdout
