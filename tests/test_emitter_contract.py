"""What every target promises, one parametrized test per promise over every discovered target
(instead of a copy per backend): the caller's IR is not modified, saving twice writes the same
bytes, a save that fails leaves nothing half-written, a node the target cannot take is refused
with one line naming it and a reason code, and what was written runs back to the reference."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from translator.compile.target import get, names

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "examples" / "models" / "tiny_cnn.onnx"
TARGETS = names(include_reference=False)


def _files(folder: Path) -> dict[str, bytes]:
    if folder.is_file():
        return {folder.name: folder.read_bytes()}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _ir_fingerprint(model) -> list:
    return [(n.name, n.op, tuple(sorted(n.attrs)), tuple(v.name if v is not None else None for v in n.inputs),
             tuple((o.name, o.type.dtype, o.type.shape) for o in n.outputs)) for n in model.graph.walk()]


@pytest.fixture(scope="module")
def tiny():
    from translator.frontends.onnx import load_onnx

    return load_onnx(TINY)


def _available(name: str):
    from translator.table.errors import OpbridgeError

    try:
        return get(name)
    except OpbridgeError as exc:
        pytest.xfail(f"{name} is not available here: {exc}")


@pytest.mark.parametrize("name", TARGETS)
def test_compile_leaves_the_callers_ir_alone_and_saves_the_same_bytes_twice(name, tiny, tmp_path):
    from translator.compile.pipeline import compile

    target = _available(name)
    before = _ir_fingerprint(tiny)
    runs = []
    for d in ("a", "b"):
        art = compile(tiny, target).artifact
        (tmp_path / d).mkdir()
        written = target.save(art, tmp_path / d / target.written)
        runs.append(_files(Path(written)))
    assert _ir_fingerprint(tiny) == before
    assert runs[0] == runs[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


@pytest.mark.parametrize("name", TARGETS)
def test_the_target_names_its_library_version(name):
    t = _available(name)
    v = t.version() if t.version is not None else ""
    assert v and "not installed" not in v and any(ch.isdigit() for ch in v), v


@pytest.mark.parametrize("name", TARGETS)
def test_a_failed_save_leaves_nothing_behind(name, tiny, tmp_path, monkeypatch):
    from translator.compile.pipeline import compile

    target = _available(name)
    art = compile(tiny, target).artifact
    out = tmp_path / "out" / target.written
    out.parent.mkdir()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    monkeypatch.setattr(os, "rename", boom)
    with pytest.raises(OSError):
        target.save(art, out)
    monkeypatch.undo()
    assert list(out.parent.iterdir()) == [], "a failed save left files behind"
    written = Path(target.save(art, out))  # a failed overwrite leaves the previous artifact as it was
    before = _files(written)
    monkeypatch.setattr(os, "replace", boom)
    monkeypatch.setattr(os, "rename", boom)
    with pytest.raises(OSError):
        target.save(art, out)
    monkeypatch.undo()
    assert _files(written) == before
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name], "a failed overwrite left files behind"


@pytest.mark.parametrize("name", TARGETS)
def test_what_was_written_runs_back_like_the_reference(name, tiny):
    from translator.run.artifact_io import output_ports, run_written
    from translator.run.check import random_inputs
    from translator.run.harness import compare, convert

    _available(name)
    feeds = random_inputs(tiny)
    expected = get("numpy").run(convert("numpy", tiny), feeds)
    art = convert(name, tiny)
    got = run_written(name, art, feeds)
    ports = output_ports(name, art)
    assert [p.name for p in ports] == [v.name for v in tiny.graph.outputs]
    for e, g, p in zip(expected, got, ports):
        d = compare(np.asarray(e), np.asarray(g), rtol=1e-3, atol=1e-4, legalized=p.legal)
        assert d.ok, (name, d.reason)


@pytest.mark.parametrize("name", TARGETS)
def test_a_node_without_code_or_decomposition_is_refused_in_one_line(name):
    """A gap (here made on a copy of the table: ``relu`` without this target's cell and
    without its decomposition) is refused with one line naming the node, the op and a reason
    code; ``plan`` reports the same node as refused instead of raising."""
    import dataclasses

    from translator.table.errors import Unsupported
    from translator.run.harness import single_op_model
    from translator.compile.pipeline import compile, plan
    from translator.table.loader import load_tables

    target = _available(name)
    tables = load_tables()
    relu = tables.ops["relu"]
    gap = dataclasses.replace(relu, decomposition=None,
                              backends={k: v for k, v in relu.backends.items() if k != name})
    tables = dataclasses.replace(tables, ops={**tables.ops, "relu": gap})
    model, _ = single_op_model("relu", [np.ones((2, 3), np.float32)], {})
    with pytest.raises(Unsupported) as info:
        compile(model, target, tables)
    line = str(info.value)
    assert "\n" not in line and "relu" in line and line.rstrip().endswith("[unsupported_op]"), line
    refused = plan(model, target, tables).refusals
    assert list(refused) == ["relu"] and refused["relu"].code == "unsupported_op", refused
