"""``pip install .`` ships both tables and the templates, and the CLI finds them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    (whl,) = out.glob("opbridge-*.whl")
    return whl


def test_wheel_contains_data_and_entry_point(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for f in ("translator/_data/optable.yaml", "translator/_data/dtypes.yaml", "translator/_data/templates/onnx/doc_string.j2",
              "translator/cli/main.py", "emitters/onnx/__init__.py"):
        assert f in names, f
    ep = next(n for n in names if n.endswith("entry_points.txt"))
    assert "opbridge = translator.cli.main:main" in zipfile.ZipFile(wheel).read(ep).decode()


def test_installed_wheel_answers_queries_outside_the_checkout(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = dict(os.environ, PYTHONPATH=str(site), OPBRIDGE_CACHE=str(tmp_path / "cache"))
    code = ("import json, translator.table.paths as p, translator; "
            "print(json.dumps([p.data_root(), translator.query('Mod', ['onnx'])['explanation']]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    root, explanation = json.loads(r.stdout)
    assert root.startswith(str(site)) and root.endswith("_data")
    assert "fmod=1 is trunc_mod" in explanation
