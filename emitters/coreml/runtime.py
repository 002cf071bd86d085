"""The framework side of the Core ML backend: build, convert, save, load and run.

``package(art)`` executes the generated builder script (``codegen.emit``) to build the MIL
program and converts it with coremltools' own pipeline (``ct.convert(prog,
convert_to="mlprogram")``, fp32 kept). The package is saved with deterministic bytes and
loaded back (``MLModel(path, skip_model_load=True)``) to check its interface: input/output
names, shapes and dtypes.

What ``run`` can claim depends on the machine:

* macOS with Core ML: ``predict`` on the saved package (CPU only).
* elsewhere: the project's MIL evaluator (``mil_eval``: NumPy, one function per MIL op)
  reads the written package (program and weights) and computes its outputs. A program
  with an op type the evaluator lacks falls back to coremltools' MIL value inference (the
  script built again with the inputs as constants; ops that implement ``value_inference``
  compute their outputs while the program is built). When neither gives every output,
  ``run`` raises ``Unsupported(..., "structural_only", ...)`` naming the MIL ops the
  evaluator lacks: the model was built, converted, serialized and reloaded, nothing more.

Inputs and outputs cross the boundary in their legalized dtypes (``legal`` of each
``Port``); ``run`` converts inputs into them (refusing values they cannot hold) and
outputs back only where every value survives (``harness.exact_astype``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import uuid
import weakref
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from translator.table.errors import OpbridgeError, Unsupported
from translator.compile.target import OutputPort

from .mil import IO_DTYPE, NAME, SCRIPT, CoreMLArtifact, ct, mil_dtype


def package(art: CoreMLArtifact) -> CoreMLArtifact:
    """Build the MIL program from ``art``'s script, convert, save and reload it (in place)."""
    prog = _build(art)
    _complete_outputs(art, prog)
    _convert_and_save(art, prog)
    return art


def _complete_outputs(art: CoreMLArtifact, prog: Any) -> None:
    """Outputs whose dtype the IR did not infer take the dtype MIL inferred."""
    from coremltools.converters.mil.mil import types

    from translator.table.dtypes import dtype_id

    for p, var in zip(art.outputs, prog.functions["main"].outputs):
        if not p.legal:
            p.legal = dtype_id(types.nptype_from_builtin(var.dtype))
            p.dtype = p.dtype or p.legal


@contextlib.contextmanager
def _fresh_names() -> Any:
    """coremltools names unnamed ops with a process-wide counter; start it at zero for each
    build so the same model gives the same op names (deterministic packages)."""
    from coremltools.converters.mil.mil import Builder as mb

    saved = mb.name_count
    mb.name_count = type(saved)(int)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        mb.name_count = saved


def _namespace(art: CoreMLArtifact) -> dict[str, Any]:
    if not art.namespace:
        ct()
        ns: dict[str, Any] = {"__name__": "opbridge_coreml_builder", "__file__": "builder.py"}
        exec(compile(art.source, SCRIPT, "exec"), ns)  # noqa: S102 - our own rendered script
        art.namespace = ns
    return art.namespace


def _build(art: CoreMLArtifact, feeds: Mapping[str, np.ndarray] | None = None) -> Any:
    ns = _namespace(art)
    try:
        with _fresh_names():
            return ns["build"](art.weights, feeds)
    except OpbridgeError:
        raise
    except Exception as exc:  # noqa: BLE001 - MIL type inference: name the op and why
        raise _mil_error(art, exc, "the MIL builder") from None


def _mil_error(art: CoreMLArtifact, exc: BaseException, where: str) -> OpbridgeError:
    import re
    import traceback

    msg = " ".join(str(exc).split()) or type(exc).__name__
    op, node = "?", None
    lines = art.source.splitlines()
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == SCRIPT and 0 < lineno <= len(lines):
            m = re.search(r"name='([^']*)'\)\s*$", lines[lineno - 1])
            if m and m.group(1) in art.origin:
                op, node = art.origin[m.group(1)], m.group(1)
    for mil_name, op_id in art.origin.items():
        if node is not None:
            break
        if f"named {mil_name}," in msg or f"'{mil_name}'" in msg or f'"{mil_name}"' in msg:
            op, node = op_id, mil_name
            break
    low = msg.lower()
    if "supports tensors with rank <=" in low:
        return Unsupported(op, NAME, "rank_limit", f"{where}: {msg[:300]}", node)
    if "const" in low and ("must be" in low or "should be" in low or "not const" in low or "expected" in low):
        return Unsupported(op, NAME, "requires_constant_input", f"{where}: {msg[:300]}", node)
    return Unsupported(op, NAME, "runtime_error", f"{where}: {type(exc).__name__}: {msg[:300]}", node)


@contextlib.contextmanager
def _unrendered_program_logs() -> Any:
    """coremltools' pass pipeline logs ``f"Program before {pipeline} pipeline:\\n{prog}"`` (and
    after) at debug level: the f-string renders the whole program before ``logger.debug``
    can drop it, and the renderer builds its text by repeated string concatenation, which
    is quadratic. On a 4k-op program that is a quarter of the conversion and it grows with
    the square of the size. While we convert, and unless coremltools' debug logging is on,
    a program's ``str`` is a one-line summary (the program itself is not touched)."""
    from coremltools.converters.mil.mil import Program

    if logging.getLogger("coremltools").isEnabledFor(logging.DEBUG):
        yield
        return
    saved = Program.__str__
    Program.__str__ = lambda self: f"<MIL program, {len(self.functions)} function(s)>"  # type: ignore[method-assign]
    try:
        yield
    finally:
        Program.__str__ = saved  # type: ignore[method-assign]


@contextlib.contextmanager
def _no_full_collection() -> Any:
    """coremltools' ``convert`` ends with a full ``gc.collect()``: in a process that holds many
    objects (a test run, the node-test bench: every case loaded) that one call took 0.44 s of
    each 0.5 s conversion. Python's own generational collection still runs; only that explicit
    full pass is skipped, in that module only."""
    import types

    from coremltools.converters import _converters_entry as entry

    saved = entry.gc
    entry.gc = types.SimpleNamespace(collect=lambda *a, **k: 0)
    try:
        yield
    finally:
        entry.gc = saved


def _convert_and_save(art: CoreMLArtifact, prog: Any) -> None:
    ns = _namespace(art)
    try:
        with _fresh_names(), _unrendered_program_logs(), _no_full_collection():
            mlmodel = ns["convert"](prog, skip_model_load=not _can_predict())
    except Exception as exc:  # noqa: BLE001 - a pass or the serializer refused the program
        raise _mil_error(art, exc, "coremltools conversion") from None
    tmp = Path(tempfile.mkdtemp(prefix="opbridge-coreml-"))
    weakref.finalize(art, shutil.rmtree, str(tmp), True)
    pkg = tmp / "model.mlpackage"
    with contextlib.redirect_stderr(io.StringIO()):
        mlmodel.save(str(pkg))
    _normalize_package(pkg, art)
    art.package = pkg
    art.interface = _check_interface(art)


def _normalize_package(pkg: Path, art: CoreMLArtifact) -> None:
    """Same model → same bytes: item identifiers derived from their paths, no conversion date."""
    from coremltools.proto import Model_pb2

    from translator import __version__

    manifest = pkg / "Manifest.json"
    data = json.loads(manifest.read_text())
    ids = {}
    for old, item in sorted(data.get("itemInfoEntries", {}).items(), key=lambda kv: kv[1].get("path", "")):
        ids[old] = str(uuid.uuid5(uuid.NAMESPACE_URL, "opbridge-coreml:" + item.get("path", "")))
    data["itemInfoEntries"] = {ids[k]: v for k, v in data.get("itemInfoEntries", {}).items()}
    data["rootModelIdentifier"] = ids.get(data.get("rootModelIdentifier"), data.get("rootModelIdentifier"))
    manifest.write_text(json.dumps(data, indent=4, sort_keys=True) + "\n")
    for item in data["itemInfoEntries"].values():
        if item.get("name") == "model.mlmodel" or str(item.get("path", "")).endswith(".mlmodel"):
            spec_path = pkg / "Data" / item["path"]
            spec = Model_pb2.Model()
            spec.ParseFromString(spec_path.read_bytes())
            meta = spec.description.metadata.userDefined
            meta.pop("com.github.apple.coremltools.conversion_date", None)
            meta["opbridge.version"] = __version__
            meta["opbridge.target"] = art.target
            renamed = {"inputs": {p.name: p.coreml for p in art.inputs if p.name != p.coreml},
                       "outputs": {p.name: p.coreml for p in art.outputs if p.name != p.coreml}}
            if renamed["inputs"] or renamed["outputs"]:  # model name -> Core ML name, where they differ
                meta["opbridge.io_names"] = json.dumps(renamed, sort_keys=True)
            spec_path.write_bytes(spec.SerializeToString(deterministic=True))


def _labels(p: Any) -> tuple[Any, ...]:
    """An input's shape with each symbolic dim as its label (the key of ``art.flexible``)."""
    from translator.ir.dims import label

    return tuple(d if isinstance(d, int) else label(p.name, i, d) for i, d in enumerate(p.shape or ()))


def _check_interface(art: CoreMLArtifact) -> dict[str, Any]:
    """Load the package back (no compilation) and check what it declares against the IR."""
    cmt = ct()
    with contextlib.redirect_stderr(io.StringIO()):
        m = cmt.models.MLModel(str(art.package), skip_model_load=True)
    desc = m.get_spec().description

    def ports(features: Any) -> list[tuple[str, str, tuple[int, ...]]]:
        out = []
        for f in features:
            arr = f.type.multiArrayType
            dt = cmt.proto.FeatureTypes_pb2.ArrayFeatureType.ArrayDataType.Name(arr.dataType)
            out.append((f.name, dt, tuple(int(d) for d in arr.shape)))
        return out

    got = {"inputs": ports(desc.input), "outputs": ports(desc.output)}
    want_in = [(p.coreml, IO_DTYPE[mil_dtype(p.legal)], tuple(d if isinstance(d, int) else art.flexible[d]
                                                             for d in _labels(p)) or (1,)) for p in art.inputs]
    if got["inputs"] != want_in:
        raise OpbridgeError("verifier", f"coreml: the saved package declares inputs {got['inputs']}, expected {want_in}")
    for (name, dt, shape), p in zip(got["outputs"], art.outputs):
        want_shape = tuple(p.shape) if p.shape is not None and all(isinstance(d, int) for d in p.shape) else None
        if name != p.coreml or dt != IO_DTYPE[mil_dtype(p.legal)] or (want_shape and shape and shape != want_shape):
            raise OpbridgeError("verifier", f"coreml: the saved package declares output {(name, dt, shape)}, expected "
                                f"{(p.coreml, IO_DTYPE[mil_dtype(p.legal)], want_shape)}")
    if len(got["outputs"]) != len(art.outputs):
        raise OpbridgeError("verifier", f"coreml: the saved package has {len(got['outputs'])} outputs, "
                            f"expected {len(art.outputs)}")
    return got


# ----------------------------------------------------------------------------- saving
def _write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """An .npz with fixed timestamps (np.savez stamps the current time): same arrays, same bytes."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
        for key, arr in arrays.items():
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr), allow_pickle=False)
            z.writestr(info, buf.getvalue())


def save(art: CoreMLArtifact, path: str | os.PathLike[str]) -> Path:
    """Write ``path/`` = builder.py + weights.npz + model.mlpackage, atomically (temp dir + rename)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    old = out.with_name(f".{out.name}.{os.getpid()}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        (tmp / "builder.py").write_text(art.source, encoding="utf-8")
        _write_npz(tmp / "weights.npz", art.weights)
        if art.package is None:
            raise OpbridgeError("verifier", "coreml: the artifact has no converted package")
        shutil.copytree(art.package, tmp / "model.mlpackage")
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return out


# ----------------------------------------------------------------------------- running
def _can_predict() -> bool:
    """Core ML prediction exists only on macOS (coremltools' native extension)."""
    if sys.platform != "darwin":
        return False
    try:
        import coremltools.libcoremlpython  # noqa: F401
    except ImportError:
        return False
    return True


def _feeds(art: CoreMLArtifact, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    from translator.table.dtypes import numpy_dtype

    feeds = {}
    for p in art.inputs:
        if p.name not in inputs:
            raise OpbridgeError("bad_model", f"coreml: input {p.name!r} is not fed")
        x = np.asarray(inputs[p.name])
        target = numpy_dtype(p.legal)
        if x.dtype.kind in "iu" and np.dtype(target).kind in "iu" and x.size:
            info = np.iinfo(target)
            if x.min() < info.min or x.max() > info.max:
                raise Unsupported("cast", NAME, "unsupported_dtype",
                                  f"input {p.name!r} has values outside {p.legal} (legalized from {p.dtype})")
        feeds[p.coreml] = x.astype(target)
    return feeds


def _back(art: CoreMLArtifact, values: list[Any]) -> list[np.ndarray]:
    from translator.table.dtypes import numpy_dtype
    from translator.run.harness import exact_astype

    out = []
    for p, v in zip(art.outputs, values):
        a = np.asarray(v)
        if p.shape is not None and len(p.shape) == 0 and a.shape == (1,):
            a = a.reshape(())
        # the MIL output's declared dtype, then the source dtype only when exact (legalized)
        out.append(exact_astype(a.astype(numpy_dtype(p.legal)), numpy_dtype(p.dtype)))
    return out


#: when the MIL evaluator lacks an op, try coremltools' value inference before giving up
VALUE_INFERENCE_FALLBACK = True


def run(art: CoreMLArtifact, inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """Outputs in graph order: Core ML predict on macOS; elsewhere the project's MIL
    evaluator on the written package (``mil_eval``), then coremltools' value inference for
    a program with ops the evaluator lacks, else ``Unsupported(structural_only)`` naming them."""
    feeds = _feeds(art, inputs)
    if _can_predict():
        return _predict(art, feeds)
    got, why = _evaluate(art, feeds)
    if why is None:
        return got
    if VALUE_INFERENCE_FALLBACK:
        got = _value_inference(art, feeds)
        if got is not None:
            return got
    raise Unsupported(why[0], NAME, "structural_only", f"built, converted and saved; {why[1]}")


def smoke(art: CoreMLArtifact) -> str | None:
    """Why the MIL evaluator cannot run the package on zeros at its default input sizes (a
    flexible dim at its default), or None (it runs, or it lacks an op: no verdict on shapes)."""
    from translator.table.dtypes import numpy_dtype
    from translator.ir.dims import label

    feeds = {}
    for p in art.inputs:
        shape = tuple(d if isinstance(d, int) else art.flexible[label(p.name, i, d)] for i, d in enumerate(p.shape or ()))
        feeds[p.coreml] = np.zeros(shape, numpy_dtype(p.legal))
    if _can_predict():
        return None
    _, why = _evaluate(art, feeds)
    return why[1] if why is not None and "evaluator failed" in why[1] else None


def _evaluate(art: CoreMLArtifact, feeds: Mapping[str, np.ndarray]) -> tuple[Any, tuple[str, str] | None]:
    """(outputs, None) from the MIL evaluator on the written package, or (None, (IR op, why))."""
    from . import mil_eval

    if art.package is None:
        return None, ("?", "no written package to evaluate")
    try:
        prog = mil_eval.load(art.package)
    except mil_eval.EvalError as exc:
        return None, ("?", f"the MIL evaluator cannot read the package: {str(exc)[:300]}")
    missing = mil_eval.missing_ops(prog)
    if missing:
        first = art.origin.get(mil_eval.first_op_of(prog, missing), "?")
        return None, (first, f"the MIL evaluator has no {', '.join(missing)}")
    try:
        got = mil_eval.evaluate(prog, feeds)
    except mil_eval.EvalError as exc:  # e.g. a result unlike the type the program declares
        return None, ("?", f"the MIL evaluator failed: {str(exc)[:300]}")
    return _back(art, [got[p.coreml] for p in art.outputs]), None


def _value_inference(art: CoreMLArtifact, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray] | None:
    """coremltools' MIL value inference: the script built again with the inputs as constants."""
    prog = _build(art, feeds)
    vals = [o.val for o in prog.functions["main"].outputs]
    return None if any(v is None for v in vals) else _back(art, vals)


def _predict(art: CoreMLArtifact, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """macOS: Core ML itself runs the saved package (CPU only); bool I/O travels as fp32."""
    cmt = ct()
    m = cmt.models.MLModel(str(art.package), compute_units=cmt.ComputeUnit.CPU_ONLY)
    io_feeds = {k: (v.astype(np.float32) if v.dtype == np.bool_ else v) for k, v in feeds.items()}
    got = m.predict(io_feeds)
    return _back(art, [got[p.coreml] for p in art.outputs])


def output_ports(art: CoreMLArtifact) -> list[OutputPort]:
    """The package's outputs: the model's names, and the dtype each is returned in where
    that is a legalization (int64 → int32, float64 → float32, ...)."""
    return [OutputPort(p.name, p.legal if p.legal != p.dtype else None) for p in art.outputs]


def load(path: Path, art: CoreMLArtifact) -> CoreMLArtifact:
    """The artifact as written: builder.py, weights.npz and model.mlpackage read back from ``path``."""
    with np.load(Path(path) / "weights.npz", allow_pickle=False) as z:
        weights = {k: z[k] for k in z.files}
    return dataclasses.replace(art, source=(Path(path) / "builder.py").read_text(encoding="utf-8"),
                               weights=weights, package=Path(path) / "model.mlpackage", namespace={})


def version() -> str:
    from importlib.metadata import version as dist_version

    return f"coremltools {dist_version('coremltools')}"


__all__ = ["package", "run", "save", "load", "output_ports", "version"]


def integer_kernels(path: Path) -> Any:
    """Structural (Core ML does not run on Linux): the conv/linear/matmul/recurrent ops of the
    written MIL program and the int8 weights (``constexpr_affine_dequantize``) feeding them."""
    from translator.compile.target import KernelCount

    text = (Path(path) / "builder.py").read_text(encoding="utf-8")
    n = text.count("constexpr_affine_dequantize(")
    layers = sum(text.count(f"mb.{op}(") for op in ("conv", "linear", "matmul", "conv_transpose", "lstm", "gru", "rnn"))
    return KernelCount(min(n, layers), layers, f"{n} int8 weights (constexpr_affine_dequantize) for {layers} "
                       "conv/linear/matmul/recurrent ops (structural_only)", stored=True)
