"""The fast path of ``opbridge query``: a lookup index cached as JSON, one file per op.

A cold ``opbridge query`` must cost a few times ``python -c pass`` however large the
tables grow, so this module imports only ``json``, ``os`` and ``zlib``, and a query reads
a few small files: the bucket of each spelling map holding the spelling (``spell/``), and
the one op it answers (``ops/<id>.json``, the op as plain data with its verified-by-execution
record). The
index is built by ``index.build_index`` from the validated tables on a cache miss; the
cache folder is keyed by the size and modification time of optable.yaml, dtypes.yaml and
verified.json, so editing any of them (or checking out another commit) rebuilds it.
Both the CLI and ``translator.query`` answer through ``query_index``: one logic.
"""
from __future__ import annotations

import json
import os
import zlib

from . import paths
from .constants import API_KEYS, API_TITLES, BACKEND_ALIASES, loose

INDEX_VERSION = "6"


class NotFound(LookupError):
    def __init__(self, kind: str, spelling: str, suggestions: list) -> None:
        self.kind, self.spelling, self.suggestions = kind, spelling, suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown {kind} {spelling!r}{hint}")


def _stamp() -> str:
    """The cache key: the three files' paths, sizes and modification times (no file is read)."""
    parts = []
    for p in (paths.optable_path(), paths.dtypes_path(), paths.verified_path()):
        try:
            st = os.stat(p)
            parts.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{p}:missing")
    text = "|".join(parts).encode()
    return f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}"


class _Ops(dict):
    """op id -> op data, each read from its own file on first use."""

    def __init__(self, folder: str, ids: list) -> None:
        super().__init__()
        self._folder, self._ids = folder, set(ids)

    def __missing__(self, op_id: str) -> dict:
        if op_id not in self._ids:
            raise KeyError(op_id)
        with open(os.path.join(self._folder, "ops", f"{op_id}.json"), encoding="utf-8") as f:
            d = self[op_id] = json.load(f)
        return d

    def __contains__(self, op_id: object) -> bool:
        return op_id in self._ids


#: spelling maps are split into this many files by a hash of the spelling: a query reads one or three
_BUCKETS = 32


def _bucket(key: str) -> str:
    return f"{zlib.crc32(key.encode()) % _BUCKETS:02d}"


class _Spell:
    """One spelling map (exact / loose / tail): spelling -> [[op id, via]], read bucket by bucket."""

    def __init__(self, folder: str, table: str) -> None:
        self._folder, self._table, self._loaded = folder, table, {}

    def _part(self, bucket: str) -> dict:
        part = self._loaded.get(bucket)
        if part is None:
            with open(os.path.join(self._folder, "spell", f"{self._table}-{bucket}.json"), encoding="utf-8") as f:
                part = self._loaded[bucket] = json.load(f)
        return part

    def get(self, key: str, default: object = None) -> object:
        return self._part(_bucket(key)).get(key, default)

    def __getitem__(self, key: str) -> list:
        return self._part(_bucket(key))[key]

    def __iter__(self):  # every spelling (suggestions after a miss: all buckets)
        for b in range(_BUCKETS):
            yield from self._part(f"{b:02d}")


def _write_index(folder: str, index: dict) -> None:
    tmp = f"{folder}.{os.getpid()}.tmp"
    os.makedirs(os.path.join(tmp, "ops"), exist_ok=True)
    os.makedirs(os.path.join(tmp, "spell"), exist_ok=True)
    for op_id, d in index["ops"].items():
        with open(os.path.join(tmp, "ops", f"{op_id}.json"), "w", encoding="utf-8") as f:
            json.dump(d, f, separators=(",", ":"))
    for table in ("exact", "loose", "tail"):
        parts: dict = {f"{b:02d}": {} for b in range(_BUCKETS)}
        for key, hits in index[table].items():
            parts[_bucket(key)][key] = hits
        for b, part in parts.items():
            with open(os.path.join(tmp, "spell", f"{table}-{b}.json"), "w", encoding="utf-8") as f:
                json.dump(part, f, separators=(",", ":"))
    with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
        json.dump({"ids": list(index["ops"])}, f, separators=(",", ":"))
    try:
        os.rename(tmp, folder)
    except OSError:  # another process built it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def load_index() -> dict:
    """The cached index (its ops read lazily), rebuilt (full strict load) when a file changed."""
    folder = os.path.join(paths.cache_dir(), f"query-{INDEX_VERSION}-{_stamp()}")
    try:
        with open(os.path.join(folder, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        index: dict = {k: _Spell(folder, k) for k in ("exact", "loose", "tail")}
        index["ops"] = _Ops(folder, meta["ids"])
        return index
    except (OSError, ValueError, KeyError):
        pass
    from .index import build_index
    from .loader import load_tables

    index = build_index(load_tables(), load_verified())
    try:
        os.makedirs(os.path.dirname(folder), exist_ok=True)
        _write_index(folder, index)
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
        d["unmapped"] = [a for a in apis if a not in cells]  # no cell at all: not yet mapped
        ver = verified.get(op_id, {}) if verified is not None else d.get("verified", {})
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
    return query_index(load_index(), spelling, backends)
