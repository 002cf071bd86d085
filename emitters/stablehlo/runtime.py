"""The framework side of the StableHLO target: the artifact, saving and loading it, running it.

The artifact is a folder: ``model.py`` (the generated JAX function), ``weights.safetensors``
(its weights), ``model.jax_export`` (``jax.export``'s serialization of the jitted function,
weights as its first argument) and ``model.mlir`` (that export's StableHLO module as text),
written atomically. ``run`` of an artifact read back from disk calls the deserialized export;
of one still in memory, the jitted function. jax is imported inside the functions only.
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
from translator.table.errors import OpbridgeError

from .registry import NAME

MODULE_FILE = "model.py"
WEIGHTS_FILE = "weights.safetensors"
EXPORT_FILE = "model.jax_export"
MLIR_FILE = "model.mlir"


def namespace(helper_sources: list[str] | None = None) -> dict[str, Any]:
    """The globals a generated module's code runs with (what its imports bind), plus helpers."""
    import functools
    import itertools
    import math

    import jax
    import jax.numpy as jnp
    from jax import lax

    ns: dict[str, Any] = {"__name__": "opbridge_stablehlo_module", "functools": functools, "itertools": itertools,
                          "math": math, "os": os, "np": np, "jax": jax, "jnp": jnp, "lax": lax}
    for src in helper_sources or ():
        exec(compile(src, "<opbridge-stablehlo-helper>", "exec"), ns)  # noqa: S102 - our own template
    return ns


@dataclass
class JaxArtifact:
    """The generated function: its source, its weights, and (once written) its export."""

    source: str
    weights: dict[str, np.ndarray]
    input_names: list[str]
    output_names: list[str]
    #: (shape, dtype) of each input as the export declares it: a dim is a size or the name of a
    #: symbolic dim, exported as a ``jax.export`` symbolic dimension (None: unknown rank or dtype)
    input_specs: list[tuple[tuple[int | str, ...], str] | None]
    decomposed: list[tuple[str, str]] = field(default_factory=list)
    legalized: list[str] = field(default_factory=list)
    input_dtypes: dict[str, str] = field(default_factory=dict)
    output_dtypes: dict[int, str] = field(default_factory=dict)
    output_legal: dict[int, str] = field(default_factory=dict)
    io_names: dict[str, dict[str, str]] = field(default_factory=dict)
    io_warnings: list[str] = field(default_factory=list)
    #: ``jax.export`` serialization read back from a written folder (None: in memory)
    exported: bytes | None = None
    #: inputs the code reads as NumPy values (axes, shapes fed at run time): static arguments
    #: of ``jax.jit``, so the function is specialized per value and no export is written
    static_inputs: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    #: the ``jax.export.Exported`` made while emitting (a model with symbolic dims), reused by ``save``
    export_cache: Any = field(default=None, repr=False, compare=False)

    @property
    def warnings(self) -> list[str]:
        return list(self.legalized) + list(self.io_warnings)

    def function(self) -> Any:
        """The module's ``forward`` (its source executed in a fresh namespace)."""
        import hashlib
        import linecache

        filename = f"<opbridge-stablehlo-{hashlib.sha256(self.source.encode()).hexdigest()[:12]}>"
        linecache.cache[filename] = (len(self.source), None, self.source.splitlines(True), filename)
        ns = namespace()
        exec(compile(self.source, filename, "exec"), ns)  # noqa: S102 - our own generated code
        return ns["forward"]

    def params(self) -> dict[str, Any]:
        import jax
        import jax.numpy as jnp

        with jax.enable_x64(True):
            return {k: jnp.asarray(v) for k, v in self.weights.items()}

    def export(self) -> Any:
        """``jax.export.Exported`` of the jitted function at the declared input shapes."""
        import jax
        from jax import export

        if any(s is None for s in self.input_specs):
            raise OpbridgeError("dynamic_shape", "the StableHLO export needs every input's rank and dtype")
        # no Python tracebacks in the module's locations: they name this file's path and the
        # generated code's columns, and the export must be the same bytes on every run and install
        limit = jax.config.jax_traceback_in_locations_limit
        jax.config.update("jax_traceback_in_locations_limit", 0)
        try:
            with jax.enable_x64(True):
                params = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in self.weights.items()}
                args = shape_structs(self.input_specs)  # type: ignore[arg-type]
                return export.export(jax.jit(self.function()))(params, *args)
        finally:
            jax.config.update("jax_traceback_in_locations_limit", limit)

    @property
    def symbolic_dims(self) -> list[str]:
        """The names of the symbolic dims the export keeps (shape polymorphism)."""
        return sorted({d for s in self.input_specs if s is not None for d in s[0] if isinstance(d, str)})

    def save(self, out_dir: str | os.PathLike[str]) -> Path:
        """Write the folder atomically (``write_folder``); the export and its MLIR text only
        where the function has no static (value-steering) inputs."""
        import jax
        from safetensors.numpy import save as st_save

        meta = {"opbridge.io_names": json.dumps(self.io_names, sort_keys=True)} if self.io_names.get("inputs") else None
        files = {WEIGHTS_FILE: st_save({k: np.ascontiguousarray(v) for k, v in self.weights.items()}, metadata=meta),
                 MODULE_FILE: self.source.encode("utf-8")}
        if not self.static_inputs:
            exp = self.export_cache if self.export_cache is not None else self.export()
            with jax.enable_x64(True):
                files[EXPORT_FILE] = bytes(exp.serialize())
                files[MLIR_FILE] = exp.mlir_module().encode("utf-8")
        return write_folder(out_dir, files)


def shape_structs(specs: list[tuple[tuple[int | str, ...], str]]) -> list[Any]:
    """``jax.ShapeDtypeStruct`` of each (shape, dtype): a named dim becomes a ``jax.export``
    symbolic dimension, one symbol per name for all of them (the same name is the same size
    everywhere). Symbols are ``d0``, ``d1``... in the order of the sorted names, so a model's dim
    names never reach JAX's parser."""
    import jax
    from jax import export

    from translator.table.dtypes import numpy_dtype

    names = sorted({d for s, _ in specs for d in s if not isinstance(d, int)})
    symbols = dict(zip(names, export.symbolic_shape(", ".join(f"d{i}" for i in range(len(names)))))) if names else {}
    return [jax.ShapeDtypeStruct(tuple(d if isinstance(d, int) else symbols[d] for d in s), numpy_dtype(dt))
            for s, dt in specs]


class Static:
    """A NumPy array as a static argument of ``jax.jit`` (hashable by dtype, shape and bytes);
    the generated function reads it back with ``np.asarray``. (``model.py`` has its own.)"""

    def __init__(self, value: Any) -> None:
        self.value = np.asarray(value)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.value if dtype is None else self.value.astype(dtype)

    def __hash__(self) -> int:
        return hash((self.value.dtype.str, self.value.shape, self.value.tobytes()))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Static) and self.value.dtype == other.value.dtype
                and self.value.shape == other.value.shape and self.value.tobytes() == other.value.tobytes())



def save(artifact: JaxArtifact, path: Path) -> Path:
    return artifact.save(path)


def load(path: Path, artifact: JaxArtifact) -> JaxArtifact:
    """The folder as written: the source, the weights (safetensors) and the serialized export."""
    from safetensors.numpy import load_file

    path = Path(path)
    return dataclasses.replace(artifact, source=(path / MODULE_FILE).read_text(encoding="utf-8"),
                               weights=dict(load_file(str(path / WEIGHTS_FILE))),
                               exported=(path / EXPORT_FILE).read_bytes() if (path / EXPORT_FILE).exists() else None)


def output_ports(artifact: JaxArtifact) -> list[OutputPort]:
    return [OutputPort(n, artifact.output_legal.get(i)) for i, n in enumerate(artifact.output_names)]


def runner(artifact: JaxArtifact) -> Any:
    """feeds → NumPy outputs (graph order): the deserialized export when the artifact was read
    back from its folder, else the jitted function; 64-bit types enabled."""
    import jax
    from jax import export

    from translator.run.harness import declared_outputs, feed_arrays

    params = artifact.params()
    static = [i + 1 for i, n in enumerate(artifact.input_names) if n in artifact.static_inputs]
    if artifact.exported is not None:
        fn = export.deserialize(bytearray(artifact.exported)).call
        if not static:
            fn = jax.jit(fn)  # compiled once: an eager call of an export lowers it again on every call
    else:
        fn = jax.jit(artifact.function(), static_argnums=static)

    def call(inputs: Mapping[str, Any]) -> list[Any]:
        args = feed_arrays(artifact.input_names, inputs, artifact.input_dtypes)
        args = [Static(x) if n in artifact.static_inputs else x for n, x in zip(artifact.input_names, args)]
        with jax.enable_x64(True):
            outs = [np.asarray(o) for o in jax.block_until_ready(fn(params, *args))]
        return declared_outputs(outs, artifact.output_dtypes)

    return call


def run(artifact: JaxArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    return runner(artifact)(inputs)


def integer_kernels(path: Path) -> Any:
    """Float kernels over weights the folder keeps 8-bit (``quantized.stored_int8_weights``)."""
    from translator.compile.quantized import stored_int8_weights

    return stored_int8_weights(Path(path) / WEIGHTS_FILE, "dequantized in the function; JAX has no 8-bit kernels")


def version() -> str:
    from translator.compile.target import dist_version

    return dist_version("jax")


__all__ = ["NAME", "JaxArtifact", "MODULE_FILE", "WEIGHTS_FILE", "EXPORT_FILE", "MLIR_FILE", "save", "load", "run",
           "runner", "output_ports", "version", "namespace"]
