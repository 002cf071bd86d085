"""Answering "what is op X called in backend Y?" from the tables.

Any spelling is accepted: an op id, the seed title, an alias, or any backend's native
name (reverse lookup). Matching is case-insensitive, then tolerant of separators
(``greater_equal`` = ``GreaterEqual``), then by the last part of a dotted name
(``relu`` finds ``torch.nn.functional.relu``). Unknown spellings raise ``NotFound``
with close suggestions.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Iterable

from .tables import API_KEYS, API_TITLES, TARGETS, Cell, DType, Op, Tables, load_tables

__all__ = ["Match", "NotFound", "lookup", "query", "dtype_query", "list_ops", "backends_summary"]


class NotFound(LookupError):
    def __init__(self, kind: str, spelling: str, suggestions: list[str]) -> None:
        self.kind, self.spelling, self.suggestions = kind, spelling, suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {kind} {spelling!r}{hint}")


@dataclass(frozen=True)
class Match:
    op: Op
    via: str  # "id", "title", "alias", or the API key whose native name matched
    spelling: str


def _loose(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


class _Index:
    def __init__(self, tables: Tables) -> None:
        self.exact: dict[str, list[tuple[str, str]]] = {}
        self.loose: dict[str, list[tuple[str, str]]] = {}
        self.tail: dict[str, list[tuple[str, str]]] = {}
        for op in tables.ops.values():
            self._add(op.id, op.id, "id")
            self._add(op.title, op.id, "title")
            for a in op.aliases:
                self._add(a, op.id, "alias")
            for api, cell in op.backends.items():
                for n in cell.names:
                    self._add(n, op.id, api)
                    if "." in n:
                        self._put(self.tail, n.rsplit(".", 1)[1].lower(), op.id, api)

    @staticmethod
    def _put(d: dict[str, list[tuple[str, str]]], key: str, op_id: str, via: str) -> None:
        lst = d.setdefault(key, [])
        if (op_id, via) not in lst:
            lst.append((op_id, via))

    def _add(self, spelling: str, op_id: str, via: str) -> None:
        self._put(self.exact, spelling.lower(), op_id, via)
        self._put(self.loose, _loose(spelling), op_id, via)

    def find(self, spelling: str) -> list[tuple[str, str]]:
        for table, key in ((self.exact, spelling.lower()), (self.loose, _loose(spelling)),
                           (self.tail, spelling.lower())):
            hits = table.get(key)
            if hits:
                own = [h for h in hits if h[1] in ("id", "title", "alias")]
                return own or hits
        return []

    def keys(self) -> list[str]:
        return list(self.exact)


_INDEX: dict[int, _Index] = {}


def _index(tables: Tables) -> _Index:
    ix = _INDEX.get(id(tables))
    if ix is None:
        ix = _INDEX[id(tables)] = _Index(tables)
    return ix


def lookup(spelling: str, tables: Tables | None = None) -> list[Match]:
    """All ops a spelling names, best first; raises NotFound with suggestions."""
    tables = tables or load_tables()
    hits = _index(tables).find(spelling.strip())
    if not hits:
        raise NotFound("op", spelling, suggest(spelling, tables))
    seen: dict[str, Match] = {}
    for op_id, via in hits:
        seen.setdefault(op_id, Match(tables.ops[op_id], via, spelling))
    return list(seen.values())


def suggest(spelling: str, tables: Tables | None = None, n: int = 5) -> list[str]:
    tables = tables or load_tables()
    keys = _index(tables).keys()
    close = difflib.get_close_matches(spelling.lower(), keys, n=n * 3, cutoff=0.6)
    out: list[str] = []
    for k in close:
        for op_id, _ in _index(tables).exact[k]:
            if op_id not in out:
                out.append(op_id)
    return out[:n]


def _check_backends(backends: Iterable[str] | None) -> tuple[str, ...]:
    if not backends:
        return API_KEYS
    out = []
    for b in backends:
        key = _backend_key(b)
        out.append(key)
    return tuple(out)


def _backend_key(b: str) -> str:
    low = b.lower()
    aliases = {"torch": "pytorch", "tf": "tensorflow", "tensorflowlite": "tflite", "ov": "openvino",
               "directml": "dml", "ann": "nnapi", "mil": "coreml", "np": "numpy", "litert": "tflite"}
    low = aliases.get(low, low)
    if low in API_TITLES:
        return low
    for k, title in API_TITLES.items():
        if _loose(title) == _loose(b):
            return k
    raise NotFound("backend", b, difflib.get_close_matches(low, list(API_KEYS), n=3, cutoff=0.5))


def cell_dict(cell: Cell) -> dict[str, Any]:
    d = cell.to_dict()
    d["api"] = cell.api
    return d


def op_dict(op: Op, apis: Iterable[str] = API_KEYS, verified: dict[str, Any] | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"id": op.id, "title": op.title, "category": op.category, "broadcast": op.broadcast,
                         "precision": op.precision, "formula": op.formula}
    if op.aliases:
        d["aliases"] = list(op.aliases)
    if op.notes:
        d["notes"] = list(op.notes)
    if op.errata:
        d["errata"] = [dict(e) for e in op.errata]
    if op.signature is not None:
        sig = op.signature
        d["signature"] = {
            "inputs": [{"name": p.name, "type": p.type, "optional": p.optional, "variadic": p.variadic} for p in sig.inputs],
            "attributes": [{"name": a.name, "type": a.type, "default": _thaw(a.default), "required": a.required}
                           for a in sig.attributes],
            "outputs": [{"name": p.name, "type": p.type} for p in sig.outputs],
            "types": {k: list(v) for k, v in sig.types.items()},
        }
    if op.decomposition:
        d["decomposition"] = {"comment": op.decomposition_comment,
                              "body": [{"op": s.op, "in": [_thaw(i) for i in s.ins], "out": list(s.outs),
                                        "attrs": _thaw(s.attrs)} for s in op.decomposition]}
    d["backends"] = {api: cell_dict(op.backends[api]) for api in apis if api in op.backends}
    if verified is not None:
        d["verified"] = {api: verified[api] for api in apis if api in verified}
    return d


def _thaw(v: Any) -> Any:
    if hasattr(v, "items"):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    return v


def query(spelling: str, backends: Iterable[str] | None = None, tables: Tables | None = None) -> dict[str, Any]:
    """The Python twin of ``opbridge query``: a JSON-able answer."""
    tables = tables or load_tables()
    apis = _check_backends(backends)
    matches = lookup(spelling, tables)
    from .verified import load_verified

    ver = load_verified()
    results = []
    for m in matches:
        d = op_dict(m.op, apis, ver.get(m.op.id, {}))
        d["matched_via"] = m.via
        if m.via in API_TITLES:
            d["matched_cell"] = cell_dict(m.op.backends[m.via])
        results.append(d)
    out: dict[str, Any] = {"query": spelling, "matches": results}
    if len(results) > 1:
        out["explanation"] = _explain_ambiguity(matches)
    return out


def _explain_ambiguity(matches: list[Match]) -> str:
    parts = []
    for m in matches:
        if m.via in API_TITLES:
            cell = m.op.backends[m.via]
            attrs = ", ".join(f"{k}={v}" for k, v in cell.attrs.items())
            parts.append(f"{API_TITLES[m.via]} {cell.name}" + (f" with {attrs}" if attrs else "") + f" is {m.op.id}")
        else:
            parts.append(f"{m.op.id} ({m.op.title})")
    return f"{matches[0].spelling!r} names {len(matches)} ops: " + "; ".join(parts)


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
                           "details": d.details, "layout": _thaw(d.layout) if d.layout else None, "nan": d.nan,
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
    tables = tables or load_tables()
    n = len(tables.ops)
    rows = []
    for api, title in API_TITLES.items():
        counts = {"native": 0, "composite": 0, "unavailable": 0, "unknown": 0}
        for op in tables.ops.values():
            cell = op.backends.get(api)
            counts[cell.status if cell else "unknown"] += 1
        rows.append({"key": api, "title": title, "target": api in TARGETS, "ops": n, **counts})
    return rows
