"""Execution proofs for the table's columns that are not conversion targets.

The conversion targets are proven by converting one-op models (tests/test_ops.py); StableHLO
and MLX are targets too, and their proofs here keep the columns' cells proven by the APIs'
own runtimes beside them. Other APIs run on this machine too (TOSA's reference model, ncnn, XNNPACK
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
                        (translator.run.samples.Sample); raise ``ProofError`` with the reason
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


def importable(*modules: str, hint: str) -> str | None:
    """None when every module imports here, else one line: which failed, why, and ``hint``
    (how to install it). A prover's ``missing()`` for a runtime that lives in this venv."""
    import importlib

    for m in modules:
        try:
            importlib.import_module(m)
        except Exception as e:  # noqa: BLE001 - any import failure means the runtime does not run here
            return f"{m} is not importable here ({type(e).__name__}: {e}); {hint}"
    return None


def sample_node(op, sample, prefix: str):
    """The op applied to ``sample`` as one IR node (inputs ``<prefix>0``, ``<prefix>1``... typed by
    the sample's arrays; a Cast-like ``to`` types output 0), for ``snippets.expand``."""
    import numpy as np

    from ..table.dtypes import dtype_id, onnx_enum
    from ..ir.graph import Node, TensorType, Value

    ins = []
    for i, x in enumerate(sample.inputs):
        if x is None:
            ins.append(None)
            continue
        a = np.asarray(x)
        ins.append(Value(f"{prefix}{i}", TensorType(dtype_id(a.dtype), tuple(a.shape))))
    to = sample.attrs.get("to")
    outs = [Value(f"y{k}", TensorType(onnx_enum().get(to) if (k == 0 and isinstance(to, int)) else None))
            for k, _ in enumerate(op.signature.outputs)]
    return Node(op.id, ins, outs, dict(sample.attrs))
