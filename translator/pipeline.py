"""What every emitter runs first: verify, then the passes the backend asks for, then lowering."""
from __future__ import annotations

from .gcpause import gc_paused, paused_gc  # noqa: F401 - re-exported (emitters, frontend, lowering)
from .ir import Model
from .passes import verify


def prepare(model: Model) -> Model:
    """Infer missing types and verify the IR (raises VerifyError with the node's name)."""
    with gc_paused():
        verify.run(model.graph)
    return model
