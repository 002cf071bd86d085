"""The fuzzer's verdicts as tests: a fast slice in ``make test``, >= 2,000 cases in the
slow step. Every violation class must be zero (see ``tests/fuzz/run.py`` for what each
one means); the runner runs as a subprocess (it forks one child per case)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.cases import FAMILIES, TARGETS, generate

ROOT = Path(__file__).resolve().parents[2]


def _fuzz(tmp_path: Path, cases: int, seed: int, timeout: int) -> dict:
    out = tmp_path / "fuzz.json"
    p = subprocess.run([sys.executable, "-m", "tests.fuzz.run", "--cases", str(cases), "--seed", str(seed),
                        "--workers", "2", "--json", str(out), "--keep", str(tmp_path / "cases")],
                       capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert out.exists(), p.stderr[-3000:]
    res = json.loads(out.read_text())
    print(json.dumps({k: res[k] for k in ("cases", "seconds", "violations", "exit_codes", "targets", "reasons",
                                          "max_rss_mb", "max_seconds")}, indent=1))
    return res


def _assert_clean(res: dict) -> None:
    bad = {k: v for k, v in res["violations"].items() if v}
    assert not bad, f"{bad}: " + "; ".join(f"{f['id']} {f['violations']} {f['notes']} {f.get('stderr', '')[:160]}"
                                           for f in res["failures"][:8])


def test_the_generator_is_deterministic_and_covers_every_family_and_target():
    a, b = generate(300, seed=3), generate(300, seed=3)
    assert [(c.id, c.files, c.argv) for c in a] == [(c.id, c.files, c.argv) for c in b]
    assert {c.family for c in a} == set(FAMILIES)
    assert {c.target for c in a if c.target} == set(TARGETS)


def test_fuzz_fast_slice(tmp_path):
    res = _fuzz(tmp_path, 40, seed=11, timeout=900)
    assert res["cases"] == 40
    _assert_clean(res)


@pytest.mark.slow
@pytest.mark.fuzz
def test_fuzz_two_thousand_cases(tmp_path):
    res = _fuzz(tmp_path, 2000, seed=0, timeout=3000)
    assert res["cases"] >= 2000 and set(TARGETS) <= set(res["targets"])
    _assert_clean(res)
