"""Execution proofs of the non-target columns, generated from the table.

For every column with a prover (translator/proofs) and every op whose cell there is native
or composite and that the prover can build: the op's one-op program runs in the API's own
runtime on the same samples as tests/test_ops.py and is compared with the NumPy reference
under the same tolerances (a column that is also a conversion target, ``stablehlo``, is proven
here by name, the named op in the lowered module, and recorded by tests/test_ops.py, which
runs the converted artifact). A runtime that is not installed makes its cases strict xfails
with the reason (never a silent skip); an op's ``xfail`` entries for the column are strict
xfails too. Passes are recorded in verified.json with the runtime's version.
"""
from __future__ import annotations

import os

import pytest

from translator import proofs
from translator.compile.target import names as target_names
from translator.run.harness import compare
from translator.run.samples import op_samples, tolerance, xfail_reasons
from translator.table.loader import load_tables

TABLES = load_tables()
TARGETS = frozenset(target_names(include_reference=False))
LIVE = ("native", "composite")


def _apis() -> list[str]:
    """Every column with a prover (``OPBRIDGE_PROOFS=a,b`` narrows them; an unknown name is an error)."""
    only = [a.strip() for a in os.environ.get("OPBRIDGE_PROOFS", "").split(",") if a.strip()]
    unknown = [a for a in only if a not in proofs.names()]
    if unknown:
        raise ValueError(f"OPBRIDGE_PROOFS names columns without a prover: {unknown} (have: {', '.join(proofs.names())})")
    return only or proofs.names()


def _cases():
    for api in _apis():
        prover = proofs.get(api)
        why = prover.missing()
        for op in TABLES.ops.values():
            cell = op.backends.get(api)
            if cell is None or cell.status not in LIVE or "random" in op.traits or op.no_case is not None:
                continue
            if not prover.provable(op, cell):
                continue
            allowed = set(TABLES.expand_dtypes(cell.dtypes)) if cell.dtypes else None
            # a sample the reference rejects fails test_ops' own check (test_every_sample_fits_its_op)
            for name, smp, outs in op_samples(op, TABLES):
                if allowed is not None and name not in allowed:
                    continue
                reasons = [why] if why is not None else xfail_reasons(op, api, name)
                marks = [pytest.mark.xfail(reason=r, strict=True) for r in reasons]
                yield pytest.param(api, op.id, name, smp, outs, marks=marks, id=f"{op.id}-{api}-{name}")


CASES = list(_cases())


@pytest.mark.parametrize("api, op_id, dtype, smp, expected", CASES)
def test_proof(api, op_id, dtype, smp, expected, record_verified):
    op = TABLES.ops[op_id]
    prover = proofs.get(api)
    cell = op.backends[api]
    got = list(prover.run(op, cell, smp))
    assert len(got) >= len(expected), f"{op_id} on {api}: {len(got)} outputs, expected {len(expected)}"
    for e, g in zip(expected, got):
        d = compare(e, g, **tolerance(op, dtype))
        assert d.ok, f"{op_id} on {api} ({dtype}): {d.reason}"
    if api not in TARGETS:  # a conversion target's cells are recorded by tests/test_ops.py, through its artifact
        record_verified(op_id, api, dtype, "numeric", by="tests/test_proofs.py", evidence=prover.version())


def _resolution_cases():
    for api in _apis():
        prover = proofs.get(api)
        why = prover.missing()
        marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
        yield pytest.param(api, marks=marks, id=api)


@pytest.mark.parametrize("api", list(_resolution_cases()))
def test_every_native_name_resolves(api):
    """Every native name the column gives exists in the installed runtime (its op registry,
    module attribute or layer table): a misspelled cell fails here."""
    prover = proofs.get(api)
    bad = []
    for op in TABLES.ops.values():
        cell = op.backends.get(api)
        if cell is None or cell.status != "native":
            continue
        bad += [f"{op.id}: {n}" for n in cell.names if not prover.resolves(n)]
    assert bad == [], f"{api} names that do not resolve in {prover.version()}: {bad}"


def test_every_prover_has_the_contract():
    for api in proofs.names():
        p = proofs.get(api)
        assert p.API == api, f"translator/proofs/{api}.py proves {p.API!r}"
        for fn in ("missing", "version", "resolves", "provable", "run"):
            assert callable(getattr(p, fn, None)), f"translator/proofs/{api}.py lacks {fn}()"
        assert isinstance(p.EXTRA, str) and p.EXTRA
