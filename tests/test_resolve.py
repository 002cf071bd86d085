"""Every name in the target columns exists in the installed library.

Generated from the table: one case per (API, op) cell that names a symbol. A name the
installed library does not have fails.
"""
from __future__ import annotations

import pytest

from translator.resolvers import RESOLVABLE, resolver
from translator.table.loader import load_tables

TABLES = load_tables()
CELLS = [(api, op.id, cell.names) for op in TABLES.ops.values() for api, cell in op.backends.items()
         if api in RESOLVABLE and cell.status in ("native", "composite") and cell.names]
MINIMUM = {"pytorch": 100, "tensorflow": 100, "openvino": 100, "tflite": 80, "coreml": 80, "numpy": 80}


@pytest.mark.parametrize("api, op_id, names", CELLS, ids=[f"{a}-{o}" for a, o, _ in CELLS])
def test_name_resolves(api, op_id, names):
    res = resolver(api)
    bad = [n for n in names if not res.resolve(n)]
    assert bad == [], f"{op_id}: {api} names {bad} do not exist in {res.library_version()}"


@pytest.mark.parametrize("api", sorted(MINIMUM))
def test_enough_ops_are_filled(api):
    n = sum(1 for a, _, _ in CELLS if a == api)
    assert n >= MINIMUM[api], f"{api}: only {n} ops have a resolving name"
