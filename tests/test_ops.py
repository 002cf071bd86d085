"""The generic cross-execution test, generated from the table.

One case per (op, backend, dtype, sample): the op alone in a graph, converted for the
backend and run, compared with the NumPy reference under the op's tolerance. Expected
failures are data: an op's ``xfail`` entries in optable.yaml become strict xfails with
their reason. Results are recorded into verified.json (see conftest.py) — the verified
status `opbridge query` shows.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from translator import reference
from translator.errors import Unsupported
from translator.artifact_io import output_ports
from translator.harness import backend_module, compare, single_op_model
from translator.lowering import how
from translator.samples import sample
from translator.tables import TARGETS, load_tables

TABLES = load_tables()
def _available_backends() -> tuple[str, ...]:
    """Every backend with an emitter module (emitters/<name>.py) whose framework imports here."""
    import importlib.util

    from translator.harness import BACKENDS as ALL

    only = os.environ.get("OPBRIDGE_TEST_BACKENDS")
    names = only.split(",") if only else ALL
    return tuple(b for b in names if importlib.util.find_spec(f"emitters.{b}") is not None)


BACKENDS = _available_backends()


def _emitter_native(backend: str) -> frozenset:
    """Ops an emitter declares native beyond its table column (its ``supported_ops()``, e.g.
    composite cells it writes itself); importing it also registers its Python lowerings."""
    import importlib

    try:
        mod = importlib.import_module(f"emitters.{backend}")
    except ImportError:  # the test itself reports it
        return frozenset()
    fn = getattr(mod, "supported_ops", None)
    return frozenset(fn()) if fn is not None else frozenset()


EMITTER_NATIVE = {b: _emitter_native(b) for b in BACKENDS}
DTYPES = {"float": [np.float32, np.float16], "int": [np.int32], "bool": [np.bool_]}


def _kinds(op) -> list:
    if op.signature is None or not op.signature.inputs:
        return []
    first = op.signature.inputs[0]
    allowed = set(TABLES.expand_dtypes(op.signature.types.get(first.type, (first.type,))))
    out = []
    if "float32" in allowed:
        out.append(np.float32)
        if "float16" in allowed:
            out.append(np.float16)
    elif "int32" in allowed:
        out.append(np.int32)
    elif allowed == {"bool"}:
        out.append(np.bool_)
    return out


def _valid_sample(op, dt):
    """A sample the reference itself evaluates (an op the reference rejects gets none)."""
    fn = reference.get(op.id)
    if fn is None:
        return None
    smp = sample(op, dt)
    if smp is None:
        return None
    try:
        with np.errstate(all="ignore"):
            out = fn(*smp.inputs, **smp.attrs)
    except Exception:  # noqa: BLE001 - the sample does not fit the op: no case
        return None
    outs = out if isinstance(out, tuple) else (out,)
    if smp.outputs is not None:
        outs = outs[: smp.outputs]
    if not all(isinstance(o, np.ndarray) for o in outs):
        return None
    return smp, outs


def _cases():
    for op in TABLES.ops.values():
        if op.category.startswith("Generation, Random") or op.id in ("bernoulli", "multinomial", "dropout"):
            continue
        seen = set()
        for dt in _kinds(op):
            got = _valid_sample(op, dt)
            if got is None:
                continue
            smp, outs = got
            # the case's dtype is what the sample's first input really is (a sample may fix it, e.g. uint8)
            dt = next((np.asarray(x).dtype for x in smp.inputs if x is not None), np.dtype(dt))
            if np.dtype(dt).name in seen:
                continue
            seen.add(np.dtype(dt).name)
            for b in BACKENDS:
                if b != "numpy" and how(op, b, EMITTER_NATIVE[b]) == "unsupported":
                    REFUSED.append(pytest.param(op.id, b, np.dtype(dt).name, smp, id=f"{op.id}-{b}-{np.dtype(dt).name}"))
                    continue
                marks = []
                for xf in op.xfail:
                    if xf["backend"] == b and xf.get("dtype") in (None, np.dtype(dt).name):
                        marks.append(pytest.mark.xfail(reason=xf["reason"], strict=True))
                yield pytest.param(op.id, b, np.dtype(dt).name, smp, outs, marks=marks,
                                   id=f"{op.id}-{b}-{np.dtype(dt).name}")


REFUSED: list = []
CASES = list(_cases())


def _tolerance(op, dtype: str) -> dict:
    tol = {"rtol": 1e-3, "atol": 1e-5}
    if dtype == "float16":
        tol = {"rtol": 2e-2, "atol": 2e-3}
    if op.tolerance:
        tol.update({k: float(v) for k, v in op.tolerance.items() if k in ("rtol", "atol")})
    return tol


@pytest.mark.parametrize("op_id, backend, dtype, smp, expected", CASES)
def test_op(op_id, backend, dtype, smp, expected, record_verified):
    op = TABLES.ops[op_id]
    model, feeds = single_op_model(op_id, smp.inputs, smp.attrs, n_outputs=len(expected), const=smp.const)
    mod = backend_module(backend)
    artifact = mod.emit(model)
    try:
        got = list(mod.run(artifact, feeds))
    except Unsupported as exc:
        if exc.code != "structural_only":  # built and saved, but nothing here computes numbers (coreml on Linux)
            raise
        record_verified(op_id, backend, dtype, "structural")
        return
    assert len(got) == len(expected)
    ports = output_ports(backend, artifact)  # a documented legalization (TFLite's float16 as float32) passes
    for e, g, port in zip(expected, got, ports):
        d = compare(e, g, **_tolerance(op, dtype), legalized=port.legal)
        assert d.ok, f"{op_id} on {backend} ({dtype}): {d.reason}"
    if backend in TARGETS:  # the numpy backend is our reference itself, not the NumPy column's names
        record_verified(op_id, backend, dtype, "numeric")


def test_enough_ops_are_cross_executed():
    ops = {c.values[0] for c in CASES}
    assert len(ops) >= 140, f"only {len(ops)} ops have a generated cross-execution case"


@pytest.mark.parametrize("op_id, backend, dtype, smp", REFUSED)
def test_declared_gap_is_refused_with_a_reason(op_id, backend, dtype, smp):
    """Where the table gives a backend neither a native op nor a decomposition, conversion
    stops with Unsupported naming the op and a reason code (never a crash or a wrong model)."""
    model, _ = single_op_model(op_id, smp.inputs, smp.attrs, const=smp.const)
    with pytest.raises(Unsupported) as ei:
        backend_module(backend).emit(model)
    assert ei.value.op == op_id and ei.value.code in ("unsupported_op", "unsupported_dtype")
