"""YAML → plain Python data that remembers source lines.

The strict table loader needs the line of every mapping and key to name it in an
error. ``load_with_lines`` composes the document with PyYAML's safe composer (the C
one when libyaml is present) and converts the node tree into ``LDict``/``LList``
objects carrying ``line`` (1-based) and, for mappings, ``key_lines``.
"""
from __future__ import annotations

from typing import Any

import yaml

from .constants import TableError

try:  # libyaml is several times faster; fall back to the pure-Python safe loader
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader


class LDict(dict):
    __slots__ = ("line", "key_lines")

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}


class LList(list):
    __slots__ = ("line",)

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line


def _construct(node: yaml.Node, path: str, scalar_loader: Any) -> Any:
    line = node.start_mark.line + 1
    expected = {yaml.MappingNode: "tag:yaml.org,2002:map", yaml.SequenceNode: "tag:yaml.org,2002:seq"}.get(type(node))
    if expected is not None and node.tag != expected:
        raise TableError(path, line, "", f"invalid YAML: tag {node.tag!r} is not allowed (safe YAML only)")
    if isinstance(node, yaml.MappingNode):
        out = LDict(line)
        for knode, vnode in node.value:
            key = _construct(knode, path, scalar_loader)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise TableError(path, knode.start_mark.line + 1, "", f"mapping key {key!r} is not a scalar")
            if key in out:
                raise TableError(path, knode.start_mark.line + 1, "", f"duplicate key {key!r}")
            out[key] = _construct(vnode, path, scalar_loader)
            out.key_lines[key] = knode.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        seq = LList(line)
        seq.extend(_construct(v, path, scalar_loader) for v in node.value)
        return seq
    return scalar_loader.construct_object(node, deep=True)


def load_with_lines(text: str, path: str) -> Any:
    """Parse ``text`` (YAML, safe subset only) into LDict/LList/scalars."""
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                raise TableError(path, None, "", "empty document")
            return _construct(node, path, loader)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TableError(path, line, "", f"invalid YAML: {problem}") from None
