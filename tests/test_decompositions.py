"""Every decomposition in optable.yaml against its op's reference, on random inputs.

Generated from the table: the op is evaluated once by its own NumPy reference and once
through its decomposition: the one pipeline (``translator.compile.pipeline.compile``) for the NumPy
reference target with the op itself removed from what it supports, so the expansion is
recursive down to ops that have a reference.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from translator import reference
from translator.compile import target as targets
from translator.run.harness import compare, single_op_model
from translator.compile.pipeline import compile
from translator.run.samples import sample
from translator.table.loader import load_tables

TABLES = load_tables()
DECOMPOSED = [op for op in TABLES.ops.values() if op.decomposition]


@pytest.mark.parametrize("op", DECOMPOSED, ids=[op.id for op in DECOMPOSED])
def test_decomposition_matches_reference(op):
    fn = reference.get(op.id)
    assert fn is not None, f"{op.id} has a decomposition but no reference function to check it against"
    kinds = (op.decomposition_when or {}).get("dtype_kind") or ("float",)
    dtype = {"float": np.float32, "int": np.int32, "uint": np.uint8, "bool": np.bool_}[kinds[0]]
    smp = sample(op, dtype)
    assert smp is not None, f"no sample for {op.id} at {np.dtype(dtype)}"
    expected = fn(*smp.inputs, **smp.attrs)
    expected = expected if isinstance(expected, tuple) else (expected,)

    model, feeds = single_op_model(op.id, smp.inputs, smp.attrs, const=smp.const)
    numpy_target = targets.get("numpy")
    without = dataclasses.replace(  # the reference target without the op: its decomposition runs instead
        numpy_target, extra={"supports": lambda tables: frozenset(reference.implemented()) - {op.id}})
    compiled = compile(model, without, TABLES)
    assert compiled.ctx.decomposed and compiled.ctx.decomposed[0][1] == op.id
    assert all(n.op != op.id for n in compiled.model.graph.walk())
    got = numpy_target.run(compiled.artifact, feeds)
    for e, g in zip(expected, got):
        d = compare(e, g, rtol=1e-4, atol=1e-5)
        assert d.ok, f"{op.id}: {d.reason}"

