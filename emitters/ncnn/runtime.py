"""The framework side of the ncnn target: the artifact, saving and loading it, running it.

The artifact is a folder: ``model.param`` (the layers, ncnn's text format), ``model.bin``
(their weights) and ``model.io.json`` (each model input and output: its blob, the blob's
shape and the model's dtype), written atomically. Blob names are ``in0``... and ``out0``...;
an integer input whose values index a table (token ids) is also fed as int32 words to a blob of
its own (``words``: ncnn's ``Embed`` reads them so);
an input is fed as its blob's shape (its batch of 1 dropped where the network reads it so)
and an output read back in the model's shape. Runs on the CPU in fp32
(``translator.proofs.ncnn.fp32_net``; weights written in float16 with ``--fp16-storage`` are
widened to float32 as ncnn loads them), one thread unless ``OPBRIDGE_NCNN_THREADS`` says
otherwise. ncnn is imported inside functions only.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from translator.compile.target import OutputPort, write_folder
from translator.proofs.ncnn import extract, open_net

PARAM_FILE = "model.param"
BIN_FILE = "model.bin"
IO_FILE = "model.io.json"


@dataclass
class Port:
    """One model input or output: the model's name, its blob, the blob's shape, the dtype."""

    name: str
    blob: str
    shape: list[int]
    dtype: str
    #: an integer input also fed as int32 words (ncnn's ``Embed`` reads its indices so): a
    #: negative value counts from the end of a table of ``rows`` rows (ONNX), fed as value + rows
    words: str | None = None
    rows: int | None = None

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class NcnnArtifact:
    param: str
    weights: bytes
    inputs: list[Port]
    outputs: list[Port]
    reshapes: int = 0
    #: the dtype convolution and inner-product kernels are stored in (``--fp16-storage``: float16)
    weight_dtype: str = "float32"
    decomposed: list[tuple[str, str]] = field(default_factory=list)
    legalized: list[str] = field(default_factory=list)
    output_legal: dict[int, str] = field(default_factory=dict)
    path: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        """The legalizations (no name is changed: model.io.json keeps the model's names)."""
        return list(self.legalized)

    @property
    def input_names(self) -> list[str]:
        return list(dict.fromkeys(p.name for p in self.inputs))

    @property
    def output_names(self) -> list[str]:
        return [p.name for p in self.outputs]

    def io(self) -> dict[str, Any]:
        return {"inputs": [p.record() for p in self.inputs], "outputs": [p.record() for p in self.outputs],
                "reshapes": self.reshapes, "weight_dtype": self.weight_dtype}

    def save(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write the folder atomically (``write_folder``)."""
        return write_folder(out_dir, {PARAM_FILE: self.param.encode("ascii"), BIN_FILE: self.weights,
                                      IO_FILE: (json.dumps(self.io(), indent=1, sort_keys=True) + "\n").encode()})


def save(artifact: NcnnArtifact, path: Path) -> Path:
    return artifact.save(path)


def load(path: Path, artifact: NcnnArtifact) -> NcnnArtifact:
    """The folder as written (its three files read back)."""
    import dataclasses

    path = Path(path)
    io = json.loads((path / IO_FILE).read_text(encoding="utf-8"))
    return dataclasses.replace(artifact, param=(path / PARAM_FILE).read_text(encoding="ascii"),
                               weights=(path / BIN_FILE).read_bytes(), inputs=[Port(**p) for p in io["inputs"]],
                               outputs=[Port(**p) for p in io["outputs"]],
                               weight_dtype=io.get("weight_dtype", "float32"), path=path)


def output_ports(artifact: NcnnArtifact) -> list[OutputPort]:
    return [OutputPort(p.name, artifact.output_legal.get(i)) for i, p in enumerate(artifact.outputs)]


def _threads() -> int:
    try:
        return max(1, int(os.environ.get("OPBRIDGE_NCNN_THREADS", "1")))
    except ValueError:
        return 1


def runner(artifact: NcnnArtifact) -> Any:
    """feeds (by model input name) → NumPy outputs in the model's shapes and dtypes."""
    import tempfile

    tmp = None
    if artifact.path is not None:
        pp, bp = artifact.path / PARAM_FILE, artifact.path / BIN_FILE
    else:
        tmp = tempfile.TemporaryDirectory(prefix="opbridge-ncnn-")
        pp, bp = Path(tmp.name) / PARAM_FILE, Path(tmp.name) / BIN_FILE
        pp.write_text(artifact.param, encoding="ascii")
        bp.write_bytes(artifact.weights)
    net = open_net(str(pp), str(bp), _threads())
    if tmp is not None:
        tmp.cleanup()

    def call(inputs: Mapping[str, Any]) -> list[Any]:
        feeds = {}
        for p in artifact.inputs:
            if p.name not in inputs:
                raise KeyError(f"missing input {p.name!r}")
            a = np.asarray(inputs[p.name])
            if a.size != int(np.prod(p.shape)):
                raise ValueError(f"input {p.name!r} has {a.size} values; the network reads {p.shape}")
            if p.words == "int32":
                a = a.astype(np.int64)
                feeds[p.blob] = np.where(a < 0, a + int(p.rows or 0), a).astype(np.int32).view(np.float32).reshape(p.shape)
            else:
                feeds[p.blob] = np.asarray(a, dtype=np.float32).reshape(p.shape)  # extract copies it once
        got = extract(net, feeds, [p.blob for p in artifact.outputs])
        outs = []
        for p, g in zip(artifact.outputs, got):
            outs.append(_declared(g.reshape(p.shape), p.dtype))
        return outs

    call.net = net  # type: ignore[attr-defined]  # kept alive with the callable
    return call


def _declared(g: np.ndarray, dtype: str) -> np.ndarray:
    """A float32 blob as the model's dtype: bool from the 0/1 mask; an integer dtype when every
    value is integral and in its range (else the float32 values, which the comparison reports)."""
    if dtype == "bool":
        return g != 0
    if dtype in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(dtype)
        if g.size == 0 or (np.all(np.isfinite(g)) and np.all(g == np.round(g)) and g.min() >= info.min
                           and g.max() <= info.max):
            return g.astype(dtype)
    return g


def run(artifact: NcnnArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    return runner(artifact)(inputs)


def version() -> str:
    from translator.compile.target import dist_version

    return dist_version("ncnn")


__all__ = ["NcnnArtifact", "Port", "PARAM_FILE", "BIN_FILE", "IO_FILE", "open_net", "extract", "save", "load",
           "run", "runner", "output_ports", "version"]
