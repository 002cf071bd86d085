"""Pausing Python's cyclic garbage collector around graph-sized work (no project imports)."""
from __future__ import annotations

import functools
import gc
import sys
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

    A module imported meanwhile (a framework on first use: TensorFlow brings 400k objects)
    lives as long as the process. When the outermost pause ends after such an import,
    everything alive is frozen (``gc.freeze``): no later pass walks it again, where the next
    one would have walked all of it (0.2–0.5 s of a conversion). What else is alive then (the
    graph being converted) is frozen with it, once per import: freed by reference counting,
    never as cyclic garbage.
    """
    was_enabled = gc.isenabled()
    modules = len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if len(sys.modules) > modules:
                gc.freeze()
            gc.enable()


def paused_gc(fn: "Callable[P, R]") -> "Callable[P, R]":
    """Decorator: ``fn`` runs inside :func:`gc_paused` (emitters building a whole artifact)."""
    @functools.wraps(fn)
    def wrapper(*args: "P.args", **kwargs: "P.kwargs") -> "R":
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper
