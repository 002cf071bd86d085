"""``opbridge check`` on the bundled model: every backend agrees with the reference."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_bundled_model_is_up_to_date():
    sys.path.insert(0, str(ROOT / "examples"))
    import make_tiny_model

    assert MODEL.read_bytes() == make_tiny_model.build().SerializeToString(deterministic=True)


def test_check_json_reports_every_backend():
    p = cli("check", str(MODEL), "--backends", "numpy,onnx", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert [b["backend"] for b in r["backends"]] == ["numpy", "onnx"]
    for b in r["backends"]:
        assert b["status"] == "pass" and b["outputs"][0]["max_abs"] <= 1e-5


def test_check_with_user_inputs(tmp_path):
    x = np.random.default_rng(7).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=x)
    p = cli("check", str(MODEL), "--inputs", str(tmp_path / "in.npz"), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["inputs"]["input"]["shape"] == [1, 3, 16, 16]


def test_mismatch_names_the_first_diverging_node(monkeypatch):
    """A disagreement is caught and traced to the node that caused it (here the oracle's relu
    is deliberately perturbed, so onnxruntime's correct relu1 is the first divergence)."""
    from translator import reference
    from translator.run.check import check_model, model_loader

    build = model_loader(str(MODEL))
    reference.get("relu")  # load the registry before patching it
    monkeypatch.setitem(reference.REGISTRY, "relu", lambda x: np.maximum(x, 0) + np.where(x < 0, 0.5, 0).astype(x.dtype))
    res = check_model(build, ["onnx"])
    rep = res["backends"][0]
    assert rep.status == "fail", rep
    assert rep.first_divergence["op"] == "relu" and rep.first_divergence["node"] == "relu1"


def test_unknown_backend_exits_2():
    p = cli("check", str(MODEL), "--backends", "numpy,nosuch")
    assert p.returncode == 2 and "unknown backend" in p.stderr


def test_a_model_output_passes_scaled_to_its_magnitude_but_not_beyond():
    import numpy as np

    from translator.run.check import SCALED_EPS, compare_output

    tol = {"rtol": 1e-3, "atol": 1e-5}
    e = np.array([4.0, 5e4], dtype=np.float32)
    small = SCALED_EPS * np.finfo(np.float32).eps * 5e4 * 0.5  # summation-order noise at the big end
    d = compare_output(e, e + np.array([small, 0], dtype=np.float32), tol)
    assert d.ok and d.reason.startswith("scaled")
    assert not compare_output(e, e + np.array([small * 4, 0], dtype=np.float32), tol).ok
    assert not compare_output(e.astype(np.int32), e.astype(np.int32) + 1, tol).ok


def test_unnamed_arrays_are_read_in_input_order_and_unknown_names_are_a_bad_option(tmp_path):
    """``np.savez(f, x)`` stores ``arr_0``: convert and check read it as the first input and say
    so; a file whose names match no input is a ``bad_option`` listing the inputs expected (the
    model is not at fault), exit 2, nothing written."""
    x = np.random.default_rng(7).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "pos.npz", x)
    p = cli("check", str(MODEL), "--backends", "numpy,onnx", "--inputs", str(tmp_path / "pos.npz"), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["inputs"]["input"]["shape"] == [1, 3, 16, 16]
    p = cli("convert", str(MODEL), "--to", "onnx", "-o", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "pos.npz"),
            "--json")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)["targets"][0]
    assert rec["check"]["status"] == "pass" and any("arr_0 -> 'input'" in w for w in rec["warnings"]), rec
    np.savez(tmp_path / "wrong.npz", image=x)
    for cmd in (["check", str(MODEL)], ["convert", str(MODEL), "--to", "onnx", "-o", str(tmp_path / "w.onnx")]):
        p = cli(*cmd, "--inputs", str(tmp_path / "wrong.npz"))
        assert p.returncode == 2 and "[bad_option]" in p.stderr and "'input'" in p.stderr and "'image'" in p.stderr, \
            p.stderr
    assert not (tmp_path / "w.onnx").exists()


def test_per_node_names_the_same_first_diverging_node_as_the_check(monkeypatch):
    """``check --per-node``: every intermediate value a backend exposes is compared with the
    reference; with one op broken on purpose (the reference's relu), the first value that
    differs is the node the check's own divergence search names, and the values before it
    agree."""
    from translator import reference
    from translator.run.check import check_model, model_loader

    build = model_loader(str(MODEL))
    reference.get("relu")
    monkeypatch.setitem(reference.REGISTRY, "relu", lambda x: np.maximum(x, 0) + np.where(x < 0, 0.5, 0).astype(x.dtype))
    plain = check_model(build, ["onnx", "openvino"])["backends"]
    per = check_model(build, ["onnx", "openvino"], per_node=True)["backends"]
    for a, b in zip(plain, per):
        assert a.status == b.status == "fail"
        first = next(p for p in b.per_node if not p["ok"])
        assert first["node"] == a.first_divergence["node"] == b.first_divergence["node"] == "relu1", (a, b.per_node)
        before = b.per_node[:b.per_node.index(first)]
        assert before and all(p["ok"] for p in before)
        assert all(set(p) >= {"node", "op", "max_abs", "max_rel", "max_ulp"} for p in b.per_node)


def test_per_node_on_the_command_line():
    p = cli("check", str(MODEL), "--backends", "onnx", "--per-node", "--json")
    assert p.returncode == 0, p.stderr
    per = json.loads(p.stdout)["backends"][0]["per_node"]
    assert per and all(x["ok"] for x in per)
    p = cli("check", str(MODEL), "--backends", "onnx", "--per-node")
    assert p.returncode == 0 and "per node," in p.stdout and "0 differ" in p.stdout, p.stdout
