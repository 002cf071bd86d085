"""One way to run an artifact: write it, load the written file with the framework's own
API, run it (``run_written``), and its documented output interface (``output_ports``).

``opbridge check``, ``opbridge convert --check`` and ``bench/nodetests.py`` all judge what
``run_written`` returns. Runners convert nothing back except a dtype legalization the
artifact documents (an output port whose ``legal`` dtype differs from the declared one),
and only when every value survives the conversion (``harness.exact_astype``): a wrapped or
rounded value has to come out of the artifact itself. The comparison is told the
documented dtype (``compare(..., legalized=port.legal)``) and reports such passes as
``pass (legalized int64→int32)``.

Core ML has no runtime on Linux: there the check evaluates the MIL program the package was
converted from (coremltools' value inference); on macOS Core ML predicts on the written
package.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Mapping

from ..table.errors import OpbridgeError
from ..compile.target import OutputPort, get

__all__ = ["OutputPort", "output_ports", "save", "load_written", "run_written"]


def output_ports(backend: str, artifact: Any) -> list[OutputPort]:
    """The artifact's outputs in order: the model's names and documented legalizations."""
    t = get(backend)
    if t.output_ports is None:
        raise OpbridgeError("internal_error", f"target {backend!r} does not describe its outputs")
    return list(t.output_ports(artifact))


def save(backend: str, artifact: Any, path: Path) -> Path:
    t = get(backend)
    if t.save is None:
        raise OpbridgeError("bad_option", f"{backend} writes no artifact")
    return t.save(artifact, path)


def load_written(backend: str, path: Path, artifact: Any) -> Any:
    """The artifact as read back from the written ``path`` (the framework's own loader); the
    in-memory ``artifact`` only supplies its documented interface (names, ports, layout)."""
    t = get(backend)
    return t.load(Path(path), artifact) if t.load is not None else artifact


def run_written(backend: str, artifact: Any, inputs: Mapping[str, Any], written: Path | None = None) -> list[Any]:
    """Load the written file back and run it: ``written`` when the caller has saved
    ``artifact`` already (``convert``), else a save into a scratch directory first."""
    t = get(backend)
    if t.save is None:  # the reference: nothing is written
        return list(t.run(artifact, inputs))
    if written is not None:
        return list(t.run(load_written(backend, Path(written), artifact), inputs))
    with tempfile.TemporaryDirectory(prefix="opbridge-run-") as d:
        path = Path(d) / t.written
        written = save(backend, artifact, path) or path
        return list(t.run(load_written(backend, Path(written), artifact), inputs))
