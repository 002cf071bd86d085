"""Adding a plain elementwise op touches its optable.yaml entry and its reference function,
nothing else: this test appends an ``expm1`` entry (two snippet lines, in its pytorch and
tensorflow cells; the other targets use the entry's decomposition) to a copy of the table,
registers a reference function, and converts and runs a one-node model on every target.
docs/ARCHITECTURE.md states the count this measures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from translator.compile.target import names

ROOT = Path(__file__).resolve().parents[1]

ENTRY = """
- id: expm1
  title: Exponential Minus One
  category: Elementwise, Math
  formula: expm1(x) = exp(x) - 1, accurate near 0
  precision: <= Exp precision
  broadcast: none
  traits:
  - elementwise
  signature:
    inputs:
    - name: X
      type: T
    outputs:
    - name: Y
      type: T
    types:
      T:
      - float32
  decomposition:
    comment: expm1(x) = exp(x) - 1
    body:
    - op: exp
      in:
      - X
      out: e
    - op: sub
      in:
      - e
      - 1
      out: Y
  backends:
    pytorch:
      status: native
      name: torch.expm1
      source: doc:https://pytorch.org/docs/stable/generated/torch.expm1.html
      snippet: torch.expm1({X})
    tensorflow:
      status: native
      name: tf.math.expm1
      source: doc:https://www.tensorflow.org/api_docs/python/tf/math/expm1
      snippet: tf.math.expm1({X})
"""


@pytest.fixture(scope="module")
def with_expm1(tmp_path_factory):
    from translator.table import paths
    from translator import reference

    folder = tmp_path_factory.mktemp("table")
    table = folder / "optable.yaml"
    table.write_text(Path(paths.optable_path()).read_text(encoding="utf-8").rstrip("\n") + "\n" + ENTRY.lstrip("\n"),
                     encoding="utf-8")
    mp = pytest.MonkeyPatch()
    mp.setattr(paths, "optable_path", lambda: str(table))
    mp.setitem(reference.REGISTRY, "expm1", lambda x: np.expm1(x))
    yield
    mp.undo()


@pytest.mark.parametrize("name", names(include_reference=False))
def test_a_new_elementwise_op_converts_on_every_target(with_expm1, name):
    from translator.run.artifact_io import run_written
    from translator.run.harness import compare, single_op_model
    from translator.compile.pipeline import compile
    from translator.table.loader import load_tables

    assert "expm1" in load_tables().ops
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    model, feeds = single_op_model("expm1", [x], {})
    done = compile(model, name)
    got = run_written(name, done.artifact, feeds)
    d = compare(np.expm1(x), np.asarray(got[0]), rtol=1e-4, atol=1e-5)
    assert d.ok, (name, d.reason)
    native = name in ("pytorch", "tensorflow")
    assert (("expm1", "expm1") in [(n, o) for n, o in done.ctx.decomposed]) != native, done.ctx.decomposed
