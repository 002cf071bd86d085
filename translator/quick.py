"""The fast path of ``opbridge query``: a lookup index cached as JSON by the tables' hash.

A cold ``opbridge query`` must cost a few times ``python -c pass``, so this module
imports only ``json``, ``hashlib`` and ``os``. The index (every op as plain data plus
the spelling → op maps) is built by ``index.build_index`` from the validated tables
on a cache miss, and read back on every later call while both YAML files hash the same.
Both the CLI and ``translator.query`` answer through ``query_index``: one logic.
"""
from __future__ import annotations

import hashlib
import json
import os

from . import paths
from .constants import API_KEYS, API_TITLES, BACKEND_ALIASES, loose

INDEX_VERSION = "4"


class NotFound(LookupError):
    def __init__(self, kind: str, spelling: str, suggestions: list) -> None:
        self.kind, self.spelling, self.suggestions = kind, spelling, suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {kind} {spelling!r}{hint}")


def _digest() -> str:
    h = hashlib.sha256()
    for p in (paths.optable_path(), paths.dtypes_path()):
        try:
            with open(p, "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(b"missing:" + p.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def load_index() -> dict:
    """The cached index, rebuilt (full strict load) when a table changed."""
    cache = os.path.join(paths.cache_dir(), f"query-{INDEX_VERSION}-{_digest()}.json")
    try:
        with open(cache, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        pass
    from .index import build_index
    from .tables import load_tables

    index = build_index(load_tables())
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        tmp = f"{cache}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(index, f, separators=(",", ":"))
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home only costs speed
    return index


def backend_key(b: str) -> str:
    low = BACKEND_ALIASES.get(b.lower(), b.lower())
    if low in API_TITLES:
        return low
    for k, title in API_TITLES.items():
        if loose(title) == loose(b):
            return k
    import difflib

    raise NotFound("backend", b, difflib.get_close_matches(low, list(API_KEYS), n=3, cutoff=0.5))


def find(index: dict, spelling: str) -> list:
    """[(op id, via)] for a spelling: exact (case-insensitive), then loose, then dotted tail."""
    s = spelling.strip()
    for table, key in (("exact", s.lower()), ("loose", loose(s)), ("tail", s.lower())):
        hits = index[table].get(key)
        if hits:
            own = [h for h in hits if h[1] in ("id", "title", "alias")]
            return own or hits
    return []


def suggest(index: dict, spelling: str, n: int = 5) -> list:
    import difflib

    out: list = []
    for k in difflib.get_close_matches(spelling.lower(), list(index["exact"]), n=n * 3, cutoff=0.6):
        for op_id, _ in index["exact"][k]:
            if op_id not in out:
                out.append(op_id)
    return out[:n]


def query_index(index: dict, spelling: str, backends: list | None = None, verified: dict | None = None) -> dict:
    apis = [backend_key(b) for b in backends] if backends else list(API_KEYS)
    hits = find(index, spelling)
    if not hits:
        raise NotFound("op", spelling, suggest(index, spelling))
    seen: dict = {}
    for op_id, via in hits:
        seen.setdefault(op_id, via)
    results = []
    for op_id, via in seen.items():
        d = dict(index["ops"][op_id])
        cells = d["backends"]
        d["backends"] = {a: cells[a] for a in apis if a in cells}
        if verified is not None:
            ver = verified.get(op_id, {})
            d["verified"] = {a: ver[a] for a in apis if a in ver}
        d["matched_via"] = via
        if via in API_TITLES:
            d["matched_cell"] = cells[via]
        results.append(d)
    out = {"query": spelling, "matches": results}
    if len(results) > 1:
        parts = []
        for d in results:
            via = d["matched_via"]
            if via in API_TITLES:
                c = d["matched_cell"]
                name = c["name"] if isinstance(c.get("name"), str) else ", ".join(c.get("name") or [])
                attrs = ", ".join(f"{k}={v}" for k, v in (c.get("attrs") or {}).items())
                parts.append(f"{API_TITLES[via]} {name}" + (f" with {attrs}" if attrs else "") + f" is {d['id']}")
            else:
                parts.append(f"{d['id']} ({d['title']})")
        out["explanation"] = f"{spelling!r} names {len(results)} ops: " + "; ".join(parts)
    return out


def load_verified() -> dict:
    try:
        with open(paths.verified_path(), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def query(spelling: str, backends: list | None = None) -> dict:
    return query_index(load_index(), spelling, backends, load_verified())
