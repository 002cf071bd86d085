"""A new backend is a package: this test writes a minimal NumPy-based one into a temporary
folder, declares it through the ``opbridge.targets`` entry point, and runs ``convert``,
``check`` and ``report`` on it through the console CLI, without editing any file of the
project. Its supported set leaves out ``hard_swish``, so the pipeline must decompose it from
the table for the new backend exactly as for the built-in ones."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PACKAGE = '''
"""toyback: the opbridge IR as its own artifact, run by the NumPy reference."""
import json
import os
from pathlib import Path

from translator.compile.target import OutputPort, Target

LACKS = {"hard_swish"}


def supports(tables):
    from translator import reference

    return frozenset(reference.implemented()) - LACKS


def emit(model, ctx):
    return model


def manifest(model):
    return json.dumps({"nodes": [[n.name, n.op] for n in model.graph.walk()],
                       "outputs": [v.name for v in model.graph.outputs]}, sort_keys=True)


def save(model, path):
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(manifest(model), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load(path, model):
    if Path(path).read_text(encoding="utf-8") != manifest(model):
        raise ValueError("the written manifest is not this model's")
    return model


def run(model, inputs):
    from translator.compile import interpreter

    return interpreter.run(model, inputs)


TARGET = Target(name="toy", title="Toy", emit=emit, run=run, save=save, load=load,
                output_ports=lambda m: [OutputPort(v.name) for v in m.graph.outputs],
                suffix=".toy.json", written="model.toy.json", extra={"supports": supports})
'''


@pytest.fixture()
def plugin(tmp_path):
    site = tmp_path / "site"
    (site / "toyback").mkdir(parents=True)
    (site / "toyback" / "__init__.py").write_text(textwrap.dedent(PACKAGE))
    dist = site / "toyback-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toyback\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[opbridge.targets]\ntoy = toyback:TARGET\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    return site, env


def _model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("HardSwish", ["r"], ["h"], name="hswish"),
         helper.make_node("Add", ["h", "x"], ["y"], name="add")],
        "toy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    return path


def _cli(env, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


def test_a_backend_from_a_temporary_package_converts_checks_and_reports(plugin, tmp_path):
    site, env = plugin
    model = _model(tmp_path / "m.onnx")
    out = tmp_path / "m.toy.json"
    p = _cli(env, "convert", str(model), "--to", "toy", "-o", str(out), "--json")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["targets"][0]["target"] == "toy" and rec["targets"][0]["status"] == "ok", rec
    written = json.loads(out.read_text())
    ops = [op for _, op in written["nodes"]]
    assert "hard_swish" not in ops and "relu" in ops and "add" in ops, ops  # decomposed from the table

    p = _cli(env, "check", str(model), "--backends", "numpy,toy", "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert [b["status"] for b in res["backends"]] == ["pass", "pass"], res

    p = _cli(env, "report", str(model), "--backends", "toy", "--json")
    assert p.returncode == 0, p.stderr
    nodes = {n["node"]: n for n in json.loads(p.stdout)["backends"]["toy"]["nodes"]}
    assert nodes["hswish"]["status"] == "decomposed" and nodes["relu"]["status"] == "native", nodes


def test_the_temporary_backend_is_invisible_without_its_package(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = _cli(env, "convert", str(_model(tmp_path / "m.onnx")), "--to", "toy", "-o", str(tmp_path / "x"))
    assert p.returncode == 2 and "unknown target(s) toy" in p.stderr, p.stderr
    assert not (tmp_path / "x").exists()
