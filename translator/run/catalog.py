"""Answering "what is op X called in backend Y?" from the tables.

Any spelling is accepted: an op id, the seed title, an alias, or any backend's native
name (reverse lookup). Matching is case-insensitive, then tolerant of separators
(``greater_equal`` = ``GreaterEqual``), then by the last part of a dotted name
(``relu`` finds ``torch.nn.functional.relu``). Unknown spellings raise ``NotFound``
with close suggestions.
"""
from __future__ import annotations

import difflib
import json
from typing import Any, Iterable

from ..table.index import build_index, cell_dict, thaw
from ..table.quick import NotFound, backend_key
from ..table.loader import API_KEYS, API_TITLES, DType, Tables, load_tables

__all__ = ["NotFound", "build_index", "query", "dtype_query", "list_ops", "backends_summary"]


def _backend_key(b: str) -> str:
    return backend_key(b)


def _check_backends(backends: Iterable[str] | None) -> tuple[str, ...]:
    return tuple(backend_key(b) for b in backends) if backends else API_KEYS


_INDEX_MEMO: dict[int, dict[str, Any]] = {}


def query(spelling: str, backends: Iterable[str] | None = None, tables: Tables | None = None) -> dict[str, Any]:
    """The Python twin of ``opbridge query``: a JSON-able answer."""
    from ..table.quick import load_verified, query_index

    tables = tables or load_tables()
    index = _INDEX_MEMO.get(id(tables))
    if index is None:
        index = _INDEX_MEMO[id(tables)] = json.loads(json.dumps(build_index(tables)))
    return query_index(index, spelling, list(backends) if backends else None, load_verified())


def _dtype_index(tables: Tables) -> dict[str, str]:
    ix: dict[str, str] = {}
    for d in tables.dtypes.values():
        for s in (d.id, d.title, *d.aliases):
            ix.setdefault(s.lower(), d.id)
        for cell in d.backends.values():
            for n in cell.names:
                ix.setdefault(n.lower(), d.id)
                if "." in n:
                    ix.setdefault(n.rsplit(".", 1)[1].lower(), d.id)
    return ix


def dtype_dict(d: DType, apis: Iterable[str] = API_KEYS) -> dict[str, Any]:
    out: dict[str, Any] = {"id": d.id, "title": d.title, "category": d.category, "kind": d.kind, "bits": d.bits,
                           "details": d.details, "layout": thaw(d.layout) if d.layout else None, "nan": d.nan,
                           "inf": d.inf, "negative_zero": d.negative_zero, "numpy": d.numpy}
    if d.errata:
        out["errata"] = [dict(e) for e in d.errata]
    if d.notes:
        out["notes"] = list(d.notes)
    out["backends"] = {api: cell_dict(d.backends[api]) for api in apis if api in d.backends}
    return out


def dtype_query(name: str | None = None, backends: Iterable[str] | None = None,
                tables: Tables | None = None) -> list[dict[str, Any]]:
    tables = tables or load_tables()
    apis = _check_backends(backends)
    if name is None:
        return [dtype_dict(d, apis) for d in tables.dtypes.values()]
    ix = _dtype_index(tables)
    did = ix.get(name.strip().lower())
    if did is None:
        raise NotFound("dtype", name, difflib.get_close_matches(name.lower(), list(ix), n=5, cutoff=0.6))
    return [dtype_dict(tables.dtypes[did], apis)]


def list_ops(category: str | None = None, backend: str | None = None, missing: bool = False,
             tables: Tables | None = None) -> list[dict[str, Any]]:
    """Ops, optionally of a category (substring, case-insensitive) and their status on one backend.

    With ``missing`` (needs ``backend``): only ops the backend has no native name for.
    """
    tables = tables or load_tables()
    api = _backend_key(backend) if backend else None
    out = []
    for op in tables.ops.values():
        if category and category.lower() not in op.category.lower():
            continue
        row: dict[str, Any] = {"id": op.id, "title": op.title, "category": op.category}
        if api:
            cell = op.backends.get(api)
            row["status"] = cell.status if cell else "unknown"
            row["name"] = list(cell.names) if cell else []
            if missing and cell is not None and cell.status == "native":
                continue
        out.append(row)
    return out


def backends_summary(tables: Tables | None = None) -> list[dict[str, Any]]:
    """Per API: how many cells are native, composite, unavailable, unknown, and verified by
    execution: the coverage ``report --table`` computes (one count for both commands)."""
    from .report import table_matrix
    from ..compile.target import names

    tables = tables or load_tables()
    targets = names(include_reference=False)
    cov = table_matrix(tables)["coverage"]
    n = len(tables.ops)
    return [{"key": api, "title": title, "target": api in targets, "ops": n, "native": cov[api]["native"],
             "composite": cov[api]["available"] - cov[api]["native"], "unavailable": cov[api]["unavailable"],
             "unknown": cov[api]["unknown"], "verified": cov[api]["verified"],
             "unknown_pct": round(100.0 * cov[api]["unknown"] / n, 1) if n else 0.0}
            for api, title in API_TITLES.items()]
