"""Execution proofs for the table's columns that are not conversion targets.

The six targets are proven by converting one-op models (tests/test_ops.py). Other APIs run
on this machine too (StableHLO through jaxlib, TOSA's reference model, MLX, ncnn, XNNPACK
through LiteRT, oneDNN inside TensorFlow/PyTorch): for them, a *prover* runs the op's
one-op program in the API's own runtime, using the name(s) the op's cell gives, and
tests/test_proofs.py compares the result with the NumPy reference on the same samples and
tolerances as the targets. A pass is recorded in verified.json ("by": tests/test_proofs.py,
"runtime": the package and version that ran it), which `opbridge query`, `opbridge backends`
and `report --table` show as verified by execution.

A prover is one module of this package named after its column (``translator/proofs/mlx.py``
proves the ``mlx`` cells) with these names:

``API``                 the optable.yaml column it proves
``EXTRA``               the pyproject extra that installs its runtime (``opbridge[mlx]``)
``missing() -> str|None``   None when the runtime runs here, else why not (one line)
``version() -> str``    the runtime and its version, e.g. ``"mlx 0.29.3"``
``resolves(name) -> bool``  whether a native name of the column exists in the runtime
``provable(op, cell) -> bool``  whether the prover can build the cell's one-op program
``run(op, cell, sample) -> list[np.ndarray]``  build and run it on ``sample``
                        (translator.samples.Sample); raise ``ProofError`` with the reason
                        when the runtime rejects it

The runtimes are imported inside these functions only: importing a prover is cheap and
`opbridge query` never imports one.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


class ProofError(RuntimeError):
    """The API's runtime rejected or failed the one-op program (the reason is the message)."""


def names() -> list[str]:
    """The columns with a prover, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def get(api: str) -> ModuleType:
    if api not in names():
        raise KeyError(f"no prover for {api!r} (have: {', '.join(names())})")
    return importlib.import_module(f"{__name__}.{api}")


def dist_version(*dists: str) -> str | None:
    """``"name version"`` of the first installed distribution among ``dists``."""
    from importlib import metadata

    for d in dists:
        try:
            return f"{d} {metadata.version(d)}"
        except metadata.PackageNotFoundError:
            continue
    return None
