"""The framework side of the MLX target: the artifact, saving and loading it, running it.

The artifact is a folder: ``model.py`` (the generated MLX function) and
``weights.safetensors`` (its weights), written atomically. MLX reads safetensors itself
(``mx.load``) but has no float64 entry there, so a float64 weight is stored as its bits
(uint64) and viewed back by the module's ``load`` (its ``FLOAT64_WEIGHTS``). ``run`` of an
artifact read back from disk calls the module's own ``load()``; of one still in memory, its
``forward`` over the weights. Everything runs on ``mx.cpu``. mlx is imported inside the
functions only.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from translator.compile.target import OutputPort, write_folder

from .registry import NAME

MODULE_FILE = "model.py"
WEIGHTS_FILE = "weights.safetensors"


def namespace(helper_sources: list[str] | None = None) -> dict[str, Any]:
    """The globals a generated module's code runs with (what its imports bind), plus helpers."""
    import itertools
    import math

    import mlx.core as mx
    import mlx.nn as nn

    ns: dict[str, Any] = {"__name__": "opbridge_mlx_module", "itertools": itertools, "math": math, "os": os,
                          "np": np, "mx": mx, "nn": nn}
    for src in helper_sources or ():
        exec(compile(src, "<opbridge-mlx-helper>", "exec"), ns)  # noqa: S102 - our own template
    return ns


def quiet_compile(source: str, filename: str) -> Any:
    """``compile`` without the SyntaxWarning of a snippet's dead branch (``None[0]`` for an
    omitted input, never evaluated)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return compile(source, filename, "exec")


def mx_array(x: Any) -> Any:
    """A NumPy array as an ``mx.array`` of the same dtype (``mx.array`` alone makes float64 float32)."""
    import mlx.core as mx

    a = np.asarray(x)
    if a.dtype == np.float64:
        return mx.array(a, dtype=mx.float64)
    return mx.array(a)


def to_numpy(x: Any) -> np.ndarray:
    """An ``mx.array`` as NumPy (bfloat16 through float32: NumPy's buffer protocol has none)."""
    import mlx.core as mx

    if isinstance(x, mx.array) and x.dtype == mx.bfloat16:
        import ml_dtypes

        return np.array(x.astype(mx.float32)).astype(ml_dtypes.bfloat16)
    return np.array(x, copy=True)


@dataclass
class MlxArtifact:
    """The generated function: its source and its weights (``path``: the folder it was read from)."""

    source: str
    weights: dict[str, np.ndarray]
    input_names: list[str]
    output_names: list[str]
    decomposed: list[tuple[str, str]] = field(default_factory=list)
    legalized: list[str] = field(default_factory=list)
    input_dtypes: dict[str, str] = field(default_factory=dict)
    output_dtypes: dict[int, str] = field(default_factory=dict)
    output_legal: dict[int, str] = field(default_factory=dict)
    io_names: dict[str, dict[str, str]] = field(default_factory=dict)
    io_warnings: list[str] = field(default_factory=list)
    path: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        return list(self.legalized) + list(self.io_warnings)

    def module(self) -> dict[str, Any]:
        """The module's globals (its source executed in a fresh namespace)."""
        import hashlib
        import linecache

        filename = f"<opbridge-mlx-{hashlib.sha256(self.source.encode()).hexdigest()[:12]}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        ns = namespace()
        ns["__file__"] = str(self.path / MODULE_FILE) if self.path is not None else filename
        exec(quiet_compile(self.source, filename), ns)  # noqa: S102 - our own generated code
        return ns

    def function(self) -> Any:
        """``call(*inputs) -> tuple of mx.array``: the written module's ``load()`` when the
        artifact was read back from its folder, else ``forward`` over the in-memory weights."""
        import mlx.core as mx

        ns = self.module()
        if self.path is not None:
            return ns["load"](str(self.path / WEIGHTS_FILE))
        params = {k: mx_array(v) for k, v in self.weights.items()}
        forward = ns["forward"]

        def call(*inputs: Any) -> Any:
            with mx.stream(mx.cpu):
                outs = forward(params, *(mx_array(x) for x in inputs))
                mx.eval(*outs)
            return outs

        return call

    def stored_weights(self) -> dict[str, np.ndarray]:
        """The weights as the safetensors file holds them (float64 as its uint64 bits)."""
        return {k: np.ascontiguousarray(v).view(np.uint64) if v.dtype == np.float64 else np.ascontiguousarray(v)
                for k, v in self.weights.items()}

    def save(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write the folder atomically (``write_folder``)."""
        from safetensors.numpy import save as st_save

        meta = {"opbridge.io_names": json.dumps(self.io_names, sort_keys=True)} if self.io_names.get("inputs") else None
        return write_folder(out_dir, {WEIGHTS_FILE: st_save(self.stored_weights(), metadata=meta),
                                      MODULE_FILE: self.source.encode("utf-8")})


def save(artifact: MlxArtifact, path: Path) -> Path:
    return artifact.save(path)


def load(path: Path, artifact: MlxArtifact) -> MlxArtifact:
    """The folder as written: the module's source (its ``load()`` reads the weights when run)."""
    path = Path(path)
    return dataclasses.replace(artifact, source=(path / MODULE_FILE).read_text(encoding="utf-8"), path=path)


def output_ports(artifact: MlxArtifact) -> list[OutputPort]:
    return [OutputPort(n, artifact.output_legal.get(i)) for i, n in enumerate(artifact.output_names)]


def runner(artifact: MlxArtifact) -> Any:
    """feeds → NumPy outputs (graph order), on ``mx.cpu``."""
    from translator.run.harness import declared_outputs, feed_arrays

    fn = artifact.function()

    def call(inputs: Mapping[str, Any]) -> list[Any]:
        args = feed_arrays(artifact.input_names, inputs, artifact.input_dtypes)
        return declared_outputs([to_numpy(o) for o in fn(*args)], artifact.output_dtypes)

    return call


def run(artifact: MlxArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    return runner(artifact)(inputs)


def integer_kernels(path: Path) -> Any:
    """Float kernels over weights the folder keeps 8-bit (``quantized.stored_int8_weights``)."""
    from translator.compile.quantized import stored_int8_weights

    return stored_int8_weights(Path(path) / WEIGHTS_FILE, "dequantized in the function; MLX has no 8-bit kernels")


def version() -> str:
    from translator.compile.target import dist_version

    return dist_version("mlx")


__all__ = ["NAME", "MlxArtifact", "MODULE_FILE", "WEIGHTS_FILE", "save", "load", "run", "runner", "output_ports",
           "version", "namespace", "mx_array", "to_numpy"]
