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

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .harness import backend_module

#: the file or folder each backend's ``save`` writes (inside a scratch directory)
WRITTEN = {"onnx": "model.onnx", "pytorch": "model", "tensorflow": "saved_model", "tflite": "model.tflite",
           "openvino": "model", "coreml": "model"}
#: PyTorch computes these dtypes in the next wider signed type (``emitters/pytorch.WIDENED``)
TORCH_WIDENED = {"uint16": "int32", "uint32": "int64"}


@dataclass(frozen=True)
class OutputPort:
    name: str
    #: the dtype id the artifact documents returning instead of the declared one, else None
    legal: str | None = None


def output_ports(backend: str, artifact: Any) -> list[OutputPort]:
    """The artifact's outputs in order: the model's names and documented legalizations."""
    if backend == "numpy":
        return [OutputPort(v.name) for v in artifact.graph.outputs]
    if backend == "onnx":
        return [OutputPort(o.name) for o in artifact.graph.output]
    if backend == "pytorch":
        legal = {i: TORCH_WIDENED.get(d, d) for i, d in artifact.output_dtypes.items()}
        return [OutputPort(n, legal.get(i)) for i, n in enumerate(artifact.output_names)]
    if backend in ("tensorflow", "tflite"):
        return [OutputPort(p.name, p.dtype if p.source_dtype and p.source_dtype != p.dtype else None)
                for p in artifact.outputs]
    if backend == "openvino":
        from emitters.openvino import BOUNDARY

        return [OutputPort(n, BOUNDARY.get(d)) for n, d in artifact.outputs]
    if backend == "coreml":
        return [OutputPort(p.name, p.legal if p.legal != p.dtype else None) for p in artifact.outputs]
    raise ValueError(f"unknown backend {backend!r}")


def save(backend: str, artifact: Any, path: Path) -> Path:
    mod = backend_module(backend)
    if backend == "pytorch":
        return artifact.save(path)
    return mod.save(artifact, path)


def load_written(backend: str, path: Path, artifact: Any) -> Any:
    """The artifact as read back from the written ``path`` (the framework's own loader); the
    in-memory ``artifact`` only supplies its documented interface (names, ports, layout)."""
    if backend == "onnx":
        import onnx

        return onnx.load(str(path))
    if backend == "pytorch":
        import numpy as np
        from safetensors.torch import load_file

        from emitters.pytorch import MODULE_FILE, WEIGHTS_FILE, to_numpy

        weights = {k: np.asarray(to_numpy(v)) for k, v in load_file(str(path / WEIGHTS_FILE)).items()}
        return dataclasses.replace(artifact, source=(path / MODULE_FILE).read_text(encoding="utf-8"),
                                   weights=weights, _cls=None)
    if backend == "tensorflow":
        import tensorflow as tf

        from emitters.tensorflow import _quiet_tf

        _quiet_tf()
        return dataclasses.replace(artifact, _instance=tf.saved_model.load(str(path)))
    if backend == "tflite":
        return dataclasses.replace(artifact, tflite=Path(path).read_bytes())
    if backend == "openvino":
        from emitters.openvino import core

        return dataclasses.replace(artifact, _model=core().read_model(str(Path(path) / "model.xml")), _compiled=None)
    if backend == "coreml":
        import numpy as np

        with np.load(Path(path) / "weights.npz", allow_pickle=False) as z:
            weights = {k: z[k] for k in z.files}
        return dataclasses.replace(artifact, source=(Path(path) / "builder.py").read_text(encoding="utf-8"),
                                   weights=weights, package=Path(path) / "model.mlpackage", namespace={})
    raise ValueError(f"unknown backend {backend!r}")


def run_written(backend: str, artifact: Any, inputs: Mapping[str, Any], written: Path | None = None) -> list[Any]:
    """Load the written file back and run it: ``written`` when the caller has saved
    ``artifact`` already (``convert``), else a save into a scratch directory first."""
    mod = backend_module(backend)
    if backend == "numpy":
        return list(mod.run(artifact, inputs))
    if written is not None:
        return list(mod.run(load_written(backend, Path(written), artifact), inputs))
    with tempfile.TemporaryDirectory(prefix="opbridge-run-") as d:
        path = Path(d) / WRITTEN[backend]
        written = save(backend, artifact, path) or path
        return list(mod.run(load_written(backend, Path(written), artifact), inputs))
