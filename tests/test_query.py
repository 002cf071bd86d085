"""``opbridge query/dtype/ops/backends`` and their Python twins."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import translator
from translator.quick import NotFound

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True, cwd=ROOT)


def ids(res: dict) -> list[str]:
    return [m["id"] for m in res["matches"]]


@pytest.mark.parametrize("spelling, expected", [
    ("conv", "conv"),
    ("CONV", "conv"),
    ("Modulus Floor", "floor_mod"),
    ("DML_OPERATOR_ELEMENT_WISE_IF", "where"),
    ("GreaterOrEqual", "greater_equal"),
    ("greater-or-equal", "greater_equal"),
    ("HardSwish", "hard_swish"),
    ("IsNaN", "is_nan"),
])
def test_any_spelling_finds_the_op(spelling, expected):
    assert ids(translator.query(spelling)) == [expected]


def test_reverse_lookup_shows_every_backend():
    res = translator.query("DML_OPERATOR_ELEMENT_WISE_IF")
    m = res["matches"][0]
    assert m["matched_via"] == "dml"
    assert {"onnx", "dml"} <= set(m["backends"])
    assert m["backends"]["onnx"]["name"] == "Where"


def test_onnx_mod_is_explained_by_fmod():
    res = translator.query("Mod")
    assert sorted(ids(res)) == ["floor_mod", "trunc_mod"]
    assert "fmod=1 is trunc_mod" in res["explanation"] and "fmod=0 is floor_mod" in res["explanation"]
    p = cli("query", "Mod")
    assert p.returncode == 0 and "fmod=0 is floor_mod" in p.stdout


def test_backend_filter_and_aliases():
    res = translator.query("floor_mod", ["torch", "ov"])
    assert set(res["matches"][0]["backends"]) <= {"pytorch", "openvino"}
    with pytest.raises(NotFound, match="unknown backend"):
        translator.query("add", ["pytorchh"])


def test_typo_suggests_and_exits_2():
    with pytest.raises(NotFound) as ei:
        translator.query("convv")
    assert "conv" in ei.value.suggestions
    p = cli("query", "convv")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == ["opbridge: error: unknown op 'convv'; did you mean conv, conv_transpose?"] \
        or "did you mean conv" in p.stderr


def test_cli_json_equals_python_api():
    p = cli("query", "relu", "--backend", "onnx", "--json")
    assert p.returncode == 0
    assert json.loads(p.stdout) == translator.query("relu", ["onnx"])


@pytest.mark.parametrize("args", [["query", "add", "--json"], ["dtype", "--json"], ["dtype", "bf16", "--json"],
                                  ["ops", "--json"], ["ops", "--category", "reduction", "--json"],
                                  ["ops", "--backend", "tflite", "--missing", "--json"], ["backends", "--json"]])
def test_every_command_has_json(args):
    p = cli(*args)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)


def test_ops_and_dtypes_counts():
    assert len(json.loads(cli("ops", "--json").stdout)) >= 150
    assert len(json.loads(cli("dtype", "--json").stdout)) >= 27
    reductions = translator.ops(category="reduction")
    assert "reduce_sum" in [r["id"] for r in reductions]


def test_missing_needs_backend():
    p = cli("ops", "--missing")
    assert p.returncode == 2 and "--missing needs --backend" in p.stderr


def test_dtype_lookup_by_backend_spelling():
    d = translator.dtype("torch.bfloat16")[0]
    assert d["id"] == "bfloat16" and d["layout"]["exponent"] == 8
    p = cli("dtype", "float33")
    assert p.returncode == 2 and "unknown dtype" in p.stderr


def test_terminal_output_is_readable():
    p = cli("query", "softmax", "-b", "onnx", "-b", "pytorch")
    assert p.returncode == 0
    assert "softmax — Soft Maximum" in p.stdout and "backend" in p.stdout


def test_query_path_imports_no_heavy_framework():
    code = ("import sys, translator.cli as c; c.main(['query','conv','--backend','openvino']); "
            "heavy=[m for m in ('numpy','yaml','torch','tensorflow','onnx','openvino','coremltools','jinja2') "
            "if m in sys.modules]; print('HEAVY', heavy)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "HEAVY []"
