"""Unique names in linear time (no project imports): the IR's value names and the
emitters' generated identifiers both come from here."""
from __future__ import annotations

from typing import Iterable


class NameSet:
    """A set of taken names that hands out ``root``, else ``root_1``, ``root_2``, … (``sep`` between; the
    smallest free suffix, as a plain scan from 1 would give).

    Names are never released, so every suffix below a root's counter is taken: the scan
    resumes where that root's last one stopped. Many names from one root (a decomposition
    repeated over a large graph, constants all hinted ``c``) then cost O(1) each instead of
    O(count).
    """

    __slots__ = ("taken", "sep", "_next")

    def __init__(self, taken: Iterable[str] = (), sep: str = "_") -> None:
        self.taken: set[str] = set(taken)
        self.sep = sep
        self._next: dict[str, int] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.taken

    def add(self, name: str) -> None:
        self.taken.add(name)

    def take(self, root: str) -> str:
        if root not in self.taken:
            self.taken.add(root)
            return root
        k = self._next.get(root, 1)
        name = f"{root}{self.sep}{k}"
        while name in self.taken:
            k += 1
            name = f"{root}{self.sep}{k}"
        self._next[root] = k + 1
        self.taken.add(name)
        return name
