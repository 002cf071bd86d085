"""The framework side of the PyTorch target: the artifact, saving and loading it, running it.

The artifact is a standalone module: ``model.py`` (the generated source) and
``weights.safetensors`` (its buffers) in one folder, written atomically. ``load`` reads both
back with safetensors' own loader; ``run`` executes the module eagerly under
``torch.no_grad()``. torch is imported inside the functions that need it.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from translator.table.errors import OpbridgeError, Unsupported
from translator.compile.target import OutputPort, write_folder

from .registry import NAME

MODULE_FILE = "model.py"
WEIGHTS_FILE = "weights.safetensors"


@dataclass
class PyTorchArtifact:
    """The generated module: its source, its weights, and how to save or instantiate it."""

    source: str
    weights: dict[str, np.ndarray]
    class_name: str
    input_names: list[str]
    output_names: list[str]
    decomposed: list[tuple[str, str]] = field(default_factory=list)
    #: dtype legalization (``passes/legalize_dtypes``): the lines it reported, the dtype each
    #: legalized input is fed as, the dtype each legalized output was declared as (the module
    #: wraps such outputs itself) and the dtype it is returned as
    legalized: list[str] = field(default_factory=list)
    input_dtypes: dict[str, str] = field(default_factory=dict)
    output_dtypes: dict[int, str] = field(default_factory=dict)
    output_legal: dict[int, str] = field(default_factory=dict)
    #: model input name -> ``forward`` parameter, where they differ (``names.io_names``), and why
    io_names: dict[str, dict[str, str]] = field(default_factory=dict)
    io_warnings: list[str] = field(default_factory=list)
    #: how it was written, for ``convert`` (``features``: ``dynamic_range`` when a run-time
    #: activation quantization was read as int8 weights and float activations)
    options: dict[str, Any] = field(default_factory=dict)
    _cls: Any = field(default=None, repr=False)

    @property
    def warnings(self) -> list[str]:
        """Everything the conversion changed: legalized dtypes, renamed parameters."""
        return list(self.legalized) + list(self.io_warnings)

    @property
    def module_class(self) -> Any:
        """The generated ``nn.Module`` class (the source executed in a fresh namespace)."""
        if self._cls is None:
            import hashlib
            import linecache

            filename = f"<opbridge-pytorch-{hashlib.sha256(self.source.encode()).hexdigest()[:12]}>"
            linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
            namespace: dict[str, Any] = {"__name__": filename.strip("<>").replace("-", "_")}
            exec(compile(self.source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
            self._cls = namespace[self.class_name]
        return self._cls

    def state_dict(self) -> dict[str, Any]:
        return {k: to_torch(v) for k, v in self.weights.items()}

    def instantiate(self) -> Any:
        """A module instance with the weights loaded, in eval mode."""
        model = self.module_class()
        model.load_state_dict(self.state_dict())
        return model.eval()

    def save(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write ``model.py`` and ``weights.safetensors`` into ``out_dir`` atomically
        (``write_folder``: both written into a temporary folder first, moved in by rename)."""
        from safetensors.torch import save as st_save

        # the forward() parameters renamed from the model's input names, for a reader of the folder
        meta = {"opbridge.io_names": json.dumps(self.io_names, sort_keys=True)} if self.io_names.get("inputs") else None
        return write_folder(out_dir, {WEIGHTS_FILE: st_save({k: v.contiguous() for k, v in self.state_dict().items()},
                                                            metadata=meta),
                                      MODULE_FILE: self.source.encode("utf-8")})


# ----------------------------------------------------------------------------- value conversion
def to_torch(x: Any) -> Any:
    import torch

    a = np.asarray(x)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(np.array(a, copy=True).view(np.uint16)).view(torch.bfloat16)
    if a.dtype.kind in "OSUV":
        raise Unsupported("cast", NAME, "unsupported_dtype", f"no torch tensor holds {a.dtype} values")
    return torch.from_numpy(np.array(a, copy=True))


def to_numpy(t: Any) -> Any:
    import torch

    if t is None:
        return None
    if isinstance(t, (list, tuple)):
        return [to_numpy(x) for x in t]
    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.contiguous().view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return t.resolve_conj().resolve_neg().numpy().copy()


# ----------------------------------------------------------------------------- the target's I/O
def save(artifact: PyTorchArtifact, path: Path) -> Path:
    return artifact.save(path)


def load(path: Path, artifact: PyTorchArtifact) -> PyTorchArtifact:
    """The module as written: ``model.py`` and the weights read back with safetensors."""
    from safetensors.torch import load_file

    path = Path(path)
    weights = {k: np.asarray(to_numpy(v)) for k, v in load_file(str(path / WEIGHTS_FILE)).items()}
    return dataclasses.replace(artifact, source=(path / MODULE_FILE).read_text(encoding="utf-8"),
                               weights=weights, _cls=None)


def output_ports(artifact: PyTorchArtifact) -> list[OutputPort]:
    """Outputs in order; a legalized one documents the dtype the module returns it as."""
    return [OutputPort(n, artifact.output_legal.get(i)) for i, n in enumerate(artifact.output_names)]


def runner(artifact: PyTorchArtifact) -> Any:
    """A function feeds → NumPy outputs (graph order) around one instance of the module:
    inputs by graph input name, legalized dtypes converted on the way in and back out."""
    import torch

    from translator.run.harness import exact_astype

    model = artifact.instantiate()

    def call(inputs: Mapping[str, Any]) -> list[Any]:
        args = []
        for name in artifact.input_names:
            if name not in inputs:
                raise OpbridgeError("bad_model", f"no value fed for input {name!r}")
            x = inputs[name]
            if name in artifact.input_dtypes and x is not None:
                x = np.asarray(x).astype(artifact.input_dtypes[name])
            args.append([to_torch(t) for t in x] if isinstance(x, list) else None if x is None else to_torch(x))
        with torch.no_grad():
            outs = [to_numpy(o) for o in model(*args)]
        for i, d in artifact.output_dtypes.items():  # documented widening, back only when exact
            outs[i] = exact_astype(outs[i], d)
        return outs

    return call


def run(artifact: PyTorchArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    """Run the generated module eagerly under ``torch.no_grad()``; NumPy outputs in graph order."""
    return runner(artifact)(inputs)


def version() -> str:
    import torch

    return f"torch {torch.__version__}"


def integer_kernels(path: Path) -> Any:
    """What is integer is the storage (``quantized.stored_int8_weights``): PyTorch runs float
    kernels on weights dequantized once at load, except the products of 8-bit activations with
    int8 matrices, which ``torch._int_mm`` computes in int8 (``quantized.integer_matmuls``),
    counted from the module's code."""
    from translator.compile.quantized import stored_int8_weights

    k = stored_int8_weights(Path(path) / WEIGHTS_FILE, "dequantized once at load")
    n = (Path(path) / MODULE_FILE).read_text(encoding="utf-8").count("torch._int_mm(")
    if not n:
        return k
    return dataclasses.replace(k, how=k.how[:-1] + f"; {n} matrix products as torch._int_mm, int8 x int8 -> int32)")
