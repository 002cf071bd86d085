"""Pausing Python's cyclic garbage collector around graph-sized work (no project imports)."""
from __future__ import annotations

import functools
import gc
from contextlib import contextmanager
from typing import Callable, Iterator, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a graph is built or rewritten.

    Building an IR allocates a few container objects per node that all stay alive, so
    the collector's passes find nothing to free, and each full pass walks the whole heap:
    on a 100k-node graph that is a growing share of the time (superlinear). Reference
    counting still frees everything acyclic; the collector resumes afterwards (nested
    uses keep it paused until the outermost one ends).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def paused_gc(fn: "Callable[P, R]") -> "Callable[P, R]":
    """Decorator: ``fn`` runs inside :func:`gc_paused` (emitters building a whole artifact)."""
    @functools.wraps(fn)
    def wrapper(*args: "P.args", **kwargs: "P.kwargs") -> "R":
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper
