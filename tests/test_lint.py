"""The table and the code agree both ways (``translator.compile.lint``); each check is shown firing."""
from __future__ import annotations

import dataclasses

import pytest

from translator.compile import lint, registry
from translator.table.loader import load_tables
from translator.compile.target import get, names


def _with_cell(tables, op_id: str, backend: str, cell):
    op = tables.ops[op_id]
    cells = dict(op.backends)
    if cell is None:
        cells.pop(backend, None)
    else:
        cells[backend] = cell
    return dataclasses.replace(tables, ops={**tables.ops, op_id: dataclasses.replace(op, backends=cells)})


@pytest.mark.parametrize("name", names(include_reference=False))
def test_every_target_agrees_with_its_column(name):
    found = lint.lint([name])
    assert not found, "\n".join(map(str, found))


def test_a_rule_without_a_cell_is_found(monkeypatch):
    tables = load_tables()
    target = get("openvino")
    op = next(o.id for o in tables.ops.values()
              if (c := o.backends.get("openvino")) is not None and c.status == "unavailable"
              and ("openvino" not in {b for (i, b) in registry.RULES if i == o.id}))
    monkeypatch.setitem(registry.RULES, (op, "openvino"), registry.Rule("openvino", op, lambda g, n: None))
    found = lint.lint_target(target, tables)
    assert [(f.op, f.kind) for f in found] == [(op, "rule without cell")], found


def test_a_native_cell_without_code_is_found_unless_declared():
    tables = load_tables()
    target = get("pytorch")
    cell = tables.ops["relu"].backends["pytorch"]
    bare = dataclasses.replace(cell, snippet=None)
    op = "relu"
    assert (op, "pytorch") not in registry.RULES or pytest.fail("relu must be a snippet op on pytorch for this test")
    found = lint.lint_target(target, _with_cell(tables, op, "pytorch", bare))
    assert [(f.op, f.kind) for f in found] == [(op, "cell without code")], found
    declared = dataclasses.replace(bare, unimplemented="not written yet")
    assert lint.lint_target(target, _with_cell(tables, op, "pytorch", declared)) == []


def test_a_snippet_calling_another_function_is_found():
    tables = load_tables()
    target = get("openvino")
    cell = tables.ops["relu"].backends["openvino"]
    wrong = dataclasses.replace(cell, snippet="ops.sqrt({X})")
    found = lint.lint_target(target, _with_cell(tables, "relu", "openvino", wrong))
    assert [(f.op, f.kind) for f in found] == [("relu", "snippet names another function")], found


def test_the_lint_command_exits_nonzero_on_a_finding(monkeypatch, capsys):
    monkeypatch.setitem(registry.RULES, ("no_such_op", "onnx"), registry.Rule("onnx", "no_such_op", lambda *a: None))
    assert lint.main(["--backend", "onnx"]) == 1
    assert "onnx/no_such_op: rule without cell" in capsys.readouterr().out
