"""The plain-data query index: every op as JSON-able data plus the spelling → op maps.

Built from the validated tables by ``build_index`` and cached as JSON by
``quick.load_index`` (the fast ``opbridge query`` path reads only those JSON files).
"""
from __future__ import annotations

from typing import Any, Iterable

from .constants import API_KEYS, loose
from .loader import Cell, Op, Tables


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
            "attributes": [{"name": a.name, "type": a.type, "default": thaw(a.default), "required": a.required}
                           for a in sig.attributes],
            "outputs": [{"name": p.name, "type": p.type} for p in sig.outputs],
            "types": {k: list(v) for k, v in sig.types.items()},
        }
    if op.decomposition:
        d["decomposition"] = {"comment": op.decomposition_comment,
                              "body": [{"op": s.op, "in": [thaw(i) for i in s.ins], "out": list(s.outs),
                                        "attrs": thaw(s.attrs)} for s in op.decomposition]}
    d["backends"] = {api: cell_dict(op.backends[api]) for api in apis if api in op.backends}
    if verified is not None:
        d["verified"] = {api: verified[api] for api in apis if api in verified}
    return d


def thaw(v: Any) -> Any:
    if hasattr(v, "items"):
        return {k: thaw(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return [thaw(x) for x in v]
    return v


def build_index(tables: Tables, verified: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain-data lookup index (cached as JSON by ``quick.load_index``); with ``verified``
    (verified.json), each op carries its own verified-by-execution record."""
    exact: dict[str, list[list[str]]] = {}
    loose_: dict[str, list[list[str]]] = {}
    tail: dict[str, list[list[str]]] = {}

    def put(d: dict[str, list[list[str]]], key: str, op_id: str, via: str) -> None:
        lst = d.setdefault(key, [])
        if [op_id, via] not in lst:
            lst.append([op_id, via])

    for op in tables.ops.values():
        for spelling, via in [(op.id, "id"), (op.title, "title")] + [(a, "alias") for a in op.aliases]:
            put(exact, spelling.lower(), op.id, via)
            put(loose_, loose(spelling), op.id, via)
        for api, cell in op.backends.items():
            if cell.status != "native":
                continue  # a composite names its building blocks, not this op
            for n in cell.names:
                put(exact, n.lower(), op.id, api)
                put(loose_, loose(n), op.id, api)
                if "." in n:
                    put(tail, n.rsplit(".", 1)[1].lower(), op.id, api)
    ops = {op.id: op_dict(op, verified=(verified or {}).get(op.id, {}) if verified is not None else None)
           for op in tables.ops.values()}
    return {"ops": ops, "exact": exact, "loose": loose_, "tail": tail}
