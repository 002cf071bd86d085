"""What every emitter runs first: verify, then the passes the backend asks for, then lowering."""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

from .ir import Model
from .passes import verify


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


def prepare(model: Model) -> Model:
    """Infer missing types and verify the IR (raises VerifyError with the node's name)."""
    with gc_paused():
        verify.run(model.graph)
    return model
