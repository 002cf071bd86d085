"""``opbridge query/dtype/ops/backends`` and their Python twins."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import translator
from translator.table.quick import NotFound

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
    code = ("import sys, translator.cli.main as c; c.main(['query','conv','--backend','openvino']); "
            "c.main(['query','conv','--backend','stablehlo']); c.main(['query','conv','--backend','mlx']); "
            "heavy=[m for m in ('numpy','yaml','torch','tensorflow','onnx','openvino','coremltools','jinja2','jax',"
            "'jaxlib','mlx','ncnn') "
            "if m in sys.modules]; print('HEAVY', heavy)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "HEAVY []"


def _table_copy(tmp_path: Path) -> dict:
    """optable.yaml, dtypes.yaml and verified.json copied to tmp_path, and the environment that points opbridge there."""
    import os
    import shutil

    for f in ("optable.yaml", "dtypes.yaml", "verified.json"):
        shutil.copy(ROOT / f, tmp_path / f)
    env = dict(os.environ, OPBRIDGE_OPTABLE=str(tmp_path / "optable.yaml"), OPBRIDGE_DTYPES=str(tmp_path / "dtypes.yaml"),
               OPBRIDGE_VERIFIED=str(tmp_path / "verified.json"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    return env


def _setcells():
    import importlib.util

    spec = importlib.util.spec_from_file_location("setcells", ROOT / "tools" / "setcells.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_an_unknown_cell_says_so_on_one_line(tmp_path):
    """A cell nobody mapped says 'not yet mapped'; a cell marked unknown gives its reason —
    never an empty answer."""
    env = _table_copy(tmp_path)
    cells = tmp_path / "cells.yaml"
    cells.write_text("abs:\n  cntk: null\nrelu:\n  cntk: {status: unknown, notes: 'no public source lists it', source: seed:000}\n")
    _setcells().apply(cells, optable=tmp_path / "optable.yaml")

    def q(*a):
        return subprocess.run([sys.executable, "-m", "translator.cli", "query", *a], capture_output=True, text=True,
                              cwd=ROOT, env=env)

    r = q("abs", "--backend", "cntk")
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "  CNTK: unknown — not yet mapped (no cell in optable.yaml)"
    r = q("relu", "--backend", "cntk")
    assert r.stdout.strip().splitlines()[-1] == "  CNTK: unknown — no public source lists it"
    r = q("relu", "--backend", "cntk", "--backend", "onnx")  # with a known cell: rows of one table
    assert "CNTK     unknown" in r.stdout and "no public source lists it" in r.stdout


def test_unknown_status_needs_its_reason(tmp_path):
    from translator.table.constants import TableError

    _table_copy(tmp_path)
    cells = tmp_path / "cells.yaml"
    cells.write_text("relu:\n  cntk: {status: unknown, source: seed:000}\n")
    before = (tmp_path / "optable.yaml").read_bytes()
    with pytest.raises(TableError, match="notes"):
        _setcells().apply(cells, optable=tmp_path / "optable.yaml")
    assert (tmp_path / "optable.yaml").read_bytes() == before  # nothing written


def test_setcells_rewrites_only_its_cells(tmp_path):
    """Writing a cell changes its lines only; writing it again changes nothing."""
    _table_copy(tmp_path)
    path = tmp_path / "optable.yaml"
    sc = _setcells()
    (tmp_path / "none.yaml").write_text("gelu:\n  stablehlo: null\n")
    sc.apply(tmp_path / "none.yaml", optable=path)
    before = path.read_text().splitlines()
    cells = tmp_path / "cells.yaml"
    cells.write_text("gelu:\n  stablehlo: {status: composite, name: [stablehlo.erf], notes: 'x/2 (1 + erf(x/sqrt 2))', "
                     "source: 'doc:https://openxla.org/stablehlo/spec#erf'}\n"
                     "  _errata:\n  - {field: backends.stablehlo, seed: '?', verified: composite, note: test, source: seed:000}\n")
    sc.apply(cells, optable=path)
    once = path.read_text()
    sc.apply(cells, optable=path)
    assert path.read_text() == once
    import difflib

    added = [ln for ln in difflib.ndiff(before, once.splitlines()) if ln.startswith(("+ ", "- "))]
    assert all(ln.startswith("+ ") for ln in added) and len(added) == 12, added
    from translator.table.loader import load_tables

    t = load_tables(path, use_cache=False)
    assert t.ops["gelu"].backends["stablehlo"].names == ("stablehlo.erf",)
    assert list(t.ops["gelu"].backends).index("stablehlo") < list(t.ops["gelu"].backends).index("numpy")


def test_query_index_follows_verified_json(tmp_path):
    """The cached index is keyed by the files' stamps: a new verified.json shows at once."""
    env = _table_copy(tmp_path)
    v = json.loads((tmp_path / "verified.json").read_text())
    v.setdefault("abs", {})["cntk"] = {"status": "numeric", "dtypes": ["float32"], "by": "test"}

    def q():
        r = subprocess.run([sys.executable, "-m", "translator.cli", "query", "abs", "--json"], capture_output=True,
                           text=True, cwd=ROOT, env=env)
        return json.loads(r.stdout)["matches"][0]["verified"]

    assert "cntk" not in q()
    (tmp_path / "verified.json").write_text(json.dumps(v))
    assert q()["cntk"]["status"] == "numeric"
