"""The generic cross-execution test, generated from the table.

One case per (op, backend, dtype, sample): the op alone in a graph, compiled for the target
through the one pipeline (``translator.compile.pipeline.compile``) and run, compared with the NumPy
reference under the op's tolerance. Expected failures are data: an op's ``xfail`` entries in
optable.yaml become strict xfails with their reason. So is the absence of a case: an op
without one says why in its ``no_case`` key (or has the ``random`` trait), and the set of
case-less ops must equal the declared set. A sample the reference cannot evaluate is an
error, never a silently lost case. Results are recorded into verified.json (see
conftest.py) — the verified status `opbridge query` shows.
"""
from __future__ import annotations

import os

import pytest

from translator.compile import target as targets
from translator.compile import unroll
from translator.table.errors import Unsupported
from translator.run.harness import compare, single_op_model
from translator.compile.pipeline import compile
from translator.compile.registry import supported
from translator.run.samples import op_samples, output_tolerances, xfail_reasons
from translator.table.loader import load_tables
from translator.compile.target import names

TARGETS = tuple(names(include_reference=False))

TABLES = load_tables()


def _backends() -> tuple[str, ...]:
    """Every discovered target (``OPBRIDGE_TEST_BACKENDS=a,b`` narrows them; an unknown name is an error)."""
    known = targets.names()
    only = os.environ.get("OPBRIDGE_TEST_BACKENDS")
    if not only:
        return tuple(known)
    wanted = tuple(b.strip() for b in only.split(",") if b.strip())
    unknown = [b for b in wanted if b not in known]
    if unknown:
        raise ValueError(f"OPBRIDGE_TEST_BACKENDS names unknown targets {unknown} (known: {', '.join(known)})")
    return wanted


BACKENDS = _backends()


def _supported(backend: str) -> frozenset[str]:
    """Ops the target emits itself: what the pipeline's lowering judges by (``registry.supported``)."""
    t = targets.get(backend)
    own = t.extra.get("supports") if t.extra else None
    return frozenset(own(TABLES)) if own is not None else supported(t, TABLES)


SUPPORTED = {b: _supported(b) for b in BACKENDS}


#: (op id, dtype, error) of every sample the reference could not evaluate (undeclared ops only)
SAMPLE_ERRORS: list[tuple[str, str, str]] = []
#: ops with at least one evaluated sample (declared ``no_case`` ops included: a stale declaration shows)
SAMPLED: set[str] = set()
REFUSED: list = []


def _cases():
    for op in TABLES.ops.values():
        if "random" in op.traits:  # the output is random: nothing to compare with the reference
            continue

        def error(dtype: str, exc: Exception, op=op) -> None:  # reported by test_every_sample_fits_its_op
            if op.no_case is None:
                SAMPLE_ERRORS.append((op.id, dtype, f"{type(exc).__name__}: {exc}"))

        for dtype, smp, outs in op_samples(op, TABLES, error):
            SAMPLED.add(op.id)
            if op.no_case is not None:
                continue
            for b in BACKENDS:
                case_id = f"{op.id}-{b}-{dtype}"
                marks = [pytest.mark.xfail(reason=r, strict=True) for r in xfail_reasons(op, b, dtype)]
                if op.id not in SUPPORTED[b] and not op.decomposition and op.id not in unroll.OPS:
                    REFUSED.append(pytest.param(op.id, b, dtype, smp, marks=marks, id=case_id))
                    continue
                yield pytest.param(op.id, b, dtype, smp, outs, marks=marks, id=case_id)


CASES = list(_cases())


@pytest.mark.parametrize("op_id, backend, dtype, smp, expected", CASES)
def test_op(op_id, backend, dtype, smp, expected, record_verified):
    op = TABLES.ops[op_id]
    model, feeds = single_op_model(op_id, smp.inputs, smp.attrs, n_outputs=len(expected), const=smp.const)
    # as the check does: a target that does not round dynamically quantized activations the
    # source's way (a float DynamicQuantizeLSTM) is held to twice that rounding's effect
    tols = output_tolerances(op, dtype, model, feeds, expected)
    target = targets.get(backend)
    artifact = compile(model, target).artifact
    try:
        got = list(target.run(artifact, feeds))
    except Unsupported as exc:
        if exc.code != "structural_only":  # built and saved, but nothing here computes numbers (coreml on Linux)
            raise
        record_verified(op_id, backend, dtype, "structural")
        return
    assert len(got) == len(expected)
    # a documented legalization (TFLite's float16 as float32) passes
    ports = list(target.output_ports(artifact)) if target.output_ports is not None else [None] * len(got)
    for i, (e, g, port) in enumerate(zip(expected, got, ports)):
        d = compare(e, g, **tols[i], legalized=port.legal if port is not None else None)
        assert d.ok, f"{op_id} on {backend} ({dtype}): {d.reason}"
    if backend in TARGETS:  # the numpy backend is our reference itself, not the NumPy column's names
        record_verified(op_id, backend, dtype, "numeric")


def test_every_sample_fits_its_op():
    """A sample the op's own reference rejects would silently lose the op's cases."""
    assert SAMPLE_ERRORS == [], "samples the reference cannot evaluate (fix translator/run/samples.py): " + \
        "; ".join(f"{op} at {dt}: {err}" for op, dt, err in SAMPLE_ERRORS)


def test_the_case_less_ops_are_exactly_the_declared_ones():
    """An op without a generated case says why in optable.yaml (``no_case``, or the ``random``
    trait); a declaration whose op has a case now is stale."""
    random = {op.id for op in TABLES.ops.values() if "random" in op.traits}
    declared = {op.id for op in TABLES.ops.values() if op.no_case is not None}
    assert not declared & random, f"random ops need no no_case: {sorted(declared & random)}"
    caseless = set(TABLES.ops) - SAMPLED - random
    assert sorted(caseless - declared) == [], "ops with no case and no declared reason ('no_case' in optable.yaml)"
    assert sorted(declared - caseless) == [], "ops declared no_case that have a case now: remove the declaration"


@pytest.mark.parametrize("op_id, backend, dtype, smp", REFUSED)
def test_declared_gap_is_refused_with_a_reason(op_id, backend, dtype, smp):
    """Where the table gives a backend neither a native op nor a decomposition, conversion
    stops with Unsupported naming the op and a reason code (never a crash or a wrong model).
    A node the pipeline rewrote first (a gather by constant indices as a strided slice:
    ``passes/static_index``) is refused as what it became, under a name derived from the op's."""
    model, _ = single_op_model(op_id, smp.inputs, smp.attrs, const=smp.const)
    names = [n.name for n in model.graph.nodes]
    with pytest.raises(Unsupported) as ei:
        compile(model, backend)
    e = ei.value
    if e.op != op_id:
        assert any((e.node or "").startswith(f"{n}_") for n in names), (e.op, e.node, str(e))
        assert e.code in ("unsupported_op", "unsupported_dtype", "unsupported_attribute_value"), str(e)
    else:
        assert e.code in ("unsupported_op", "unsupported_dtype"), str(e)
