"""The framework side of the OpenVINO backend: build, save, load back and run an artifact.

``save(artifact, folder)`` writes ``builder.py``, ``weights.npz``, ``model.xml`` and
``model.bin`` atomically (``openvino.save_model(..., compress_to_fp16=False)``: its
default stores float32 weights as float16). ``load`` reads ``model.xml`` back with
OpenVINO's own reader. ``run`` compiles on the CPU plugin with
``INFERENCE_PRECISION_HINT=f32``: on CPUs with AVX512_BF16 the plugin otherwise infers in
bfloat16 (see docs/BACKENDS.md). int4/uint4 cross the model boundary as int8/uint8
(``BOUNDARY``, documented by ``output_ports``).
"""
from __future__ import annotations

import dataclasses
import io
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from translator.table.errors import OpbridgeError
from translator.compile.target import OutputPort

#: the CPU plugin's compile configuration used by ``run`` (and by the openvino_fe peer)
CPU_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
#: element types the Python API cannot feed or read: inputs/outputs cross the model
#: boundary as the wider type and are converted inside the graph
BOUNDARY = {"int4": "int8", "uint4": "uint8"}


# ----------------------------------------------------------------------------- the artifact
@dataclass
class Artifact:
    """A rendered builder script, its weights, and (built on demand) the ``ov.Model``."""

    source: str
    weights: dict[str, np.ndarray]
    inputs: list[tuple[str, str]]
    outputs: list[tuple[str, str]]
    _model: Any = None
    _compiled: Any = None
    #: how it was written, for ``convert`` (``features``: ``dynamic_range`` when onnxruntime's dynamic
    #: quantization became int8-weight matmuls, which ``convert`` rewrites exactly if they stray)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = build_from_source(self.source, self.weights)
        return self._model

    def save(self, folder: str | os.PathLike[str]) -> Path:
        return save(self, folder)


def ov_message(exc: BaseException) -> str:
    """The informative line of an OpenVINO exception (not its 'Exception from file:line' chain)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith("Exception from ")]
    text = " ".join(useful) or (lines[0] if lines else type(exc).__name__)
    return text[:300]


#: OpenVINO's modules that bind its usage-telemetry package when imported
_TELEMETRY_USERS = ("openvino.tools.ovc", "openvino.tools.ovc.convert_impl", "openvino.tools.ovc.utils")


def openvino() -> Any:
    """``import openvino``, with its usage telemetry off. Importing OpenVINO imports its model
    converter, which sends an event from a worker thread that forks a process to do it: traffic
    nobody converting a model asked for, and a fork that can deadlock against OpenBLAS threads
    busy in the same process (a check's reference matmul hung that way). While these modules are
    first imported the telemetry package is hidden, so OpenVINO binds its own no-op stub; the
    package is visible again afterwards, to anything else that imports it."""
    import importlib
    import sys

    if "openvino" not in sys.modules:
        missing = object()
        saved = sys.modules.get("openvino_telemetry", missing)
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]  # import raises ImportError
        try:
            for name in ("openvino", *_TELEMETRY_USERS):
                try:
                    importlib.import_module(name)
                except ImportError:
                    if name == "openvino":
                        raise
        finally:
            if saved is missing:
                del sys.modules["openvino_telemetry"]
            else:
                sys.modules["openvino_telemetry"] = saved  # type: ignore[assignment]
    return sys.modules["openvino"]


def build_from_source(source: str, weights: Mapping[str, np.ndarray]) -> Any:
    """Execute a builder script (as a module, not as __main__) and call its ``build(w)``."""
    openvino()  # imported with its telemetry off before the script imports it
    ns: dict[str, Any] = {"__name__": "opbridge_openvino_builder"}
    exec(compile(source, "<builder.py>", "exec"), ns)  # noqa: S102 - our own rendered script
    try:
        return ns["build"](dict(weights))
    except RuntimeError as exc:  # OpenVINO's shape/type validation while building
        raise OpbridgeError("runtime_error", f"OpenVINO rejected the built model: {ov_message(exc)}") from None


# ----------------------------------------------------------------------------- saving
def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The bytes ``np.savez`` writes, with fixed zip timestamps (byte-identical reruns)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for key in sorted(arrays):
            info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(arrays[key]), allow_pickle=False)
    return buf.getvalue()


def save(artifact: Artifact, folder: str | os.PathLike[str]) -> Path:
    """Write ``builder.py``, ``weights.npz``, ``model.xml``, ``model.bin`` into ``folder``.

    Everything is produced in a temporary sibling folder first, then moved into place
    file by file (``os.replace``): a failure leaves no partial output behind.
    """
    ov = openvino()
    out = Path(folder)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "builder.py").write_text(artifact.source)
        (tmp / "weights.npz").write_bytes(npz_bytes(artifact.weights))
        ov.save_model(artifact.model, str(tmp / "model.xml"), compress_to_fp16=False)
        if not out.exists():  # one rename: all or nothing
            os.replace(tmp, out)
            return out
        for name in ("builder.py", "weights.npz", "model.bin", "model.xml"):
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# ----------------------------------------------------------------------------- running
@lru_cache(maxsize=None)
def core() -> Any:
    return openvino().Core()


def compile_model(ov_model: Any) -> Any:
    """Compile on the CPU plugin with f32 inference precision (not the bf16 default)."""
    return core().compile_model(ov_model, "CPU", CPU_CONFIG)


def infer(compiled: Any, feeds: list[Any], request: Any = None) -> list[np.ndarray]:
    """Run a compiled model on positional inputs; outputs as NumPy arrays, in order."""
    ov = openvino()
    req = request if request is not None else compiled.create_infer_request()
    tensors = {}
    for i, (port, x) in enumerate(zip(compiled.inputs, feeds)):
        tensors[i] = _tensor(port.get_element_type(), np.asarray(x), ov)
    req.infer(tensors)
    result = []
    for i in range(len(compiled.outputs)):
        t = req.get_output_tensor(i)
        result.append(_array(t, ov))
    return result


def _tensor(et: Any, x: np.ndarray, ov: Any) -> Any:
    """An input tensor of element type ``et`` and exactly the shape of ``x`` (0-d included)."""
    t = ov.Tensor(et, ov.Shape(list(x.shape)))
    if x.size:
        if et == ov.Type.bf16:
            t.data.view(np.uint16)[...] = np.asarray(x).view(np.uint16)
        else:
            t.data[...] = x
    return t


def _array(t: Any, ov: Any) -> np.ndarray:
    et = t.element_type
    if et == ov.Type.bf16:
        import ml_dtypes

        return t.data.view(np.uint16).view(ml_dtypes.bfloat16).reshape(tuple(t.shape)).copy()
    if et == ov.Type.string:
        return np.asarray(t.str_data, dtype=object)
    return np.array(t.data, copy=True).reshape(tuple(t.shape))


def runner(artifact: Artifact) -> Callable[[Mapping[str, Any]], list[np.ndarray]]:
    """A callable running the artifact repeatedly: compiled once, one reused infer request."""
    from translator.table.dtypes import numpy_dtype
    from translator.run.harness import exact_astype

    if artifact._compiled is None:
        try:
            artifact._compiled = compile_model(artifact.model)
        except RuntimeError as exc:
            raise OpbridgeError("runtime_error", f"OpenVINO CPU plugin failed to compile: {ov_message(exc)}") from None
    compiled = artifact._compiled
    request = compiled.create_infer_request()

    def call(inputs: Mapping[str, Any]) -> list[np.ndarray]:
        missing = [n for n, _ in artifact.inputs if n not in inputs]
        if missing:
            raise OpbridgeError("bad_model", f"no value fed for input {missing[0]!r}")
        feeds = [np.asarray(inputs[n], dtype=numpy_dtype(BOUNDARY.get(d, d))) for n, d in artifact.inputs]
        try:
            outs = infer(compiled, feeds, request)
        except RuntimeError as exc:
            raise OpbridgeError("runtime_error", f"OpenVINO inference failed: {ov_message(exc)}") from None
        # int4/uint4 cross the boundary as int8/uint8 (documented: BOUNDARY); converted back
        # only when every value is in range, never wrapped here
        return [exact_astype(o, numpy_dtype(d)) for o, (_, d) in zip(outs, artifact.outputs)]

    return call


def run(artifact: Artifact, inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """Compile (once per artifact) and infer; ``inputs`` by the model's input names."""
    return runner(artifact)(inputs)


def load(path: str | os.PathLike[str], artifact: Artifact) -> Artifact:
    """The artifact as OpenVINO reads the written folder back (``model.xml``/``model.bin``);
    the in-memory artifact supplies only its documented interface (names, dtypes)."""
    return dataclasses.replace(artifact, _model=core().read_model(str(Path(path) / "model.xml")), _compiled=None)


def output_ports(artifact: Artifact) -> list[OutputPort]:
    """The outputs in order; int4/uint4 ones are documented as returned in int8/uint8."""
    return [OutputPort(n, BOUNDARY.get(d)) for n, d in artifact.outputs]


def version() -> str:
    from importlib import metadata

    return f"openvino {metadata.version('openvino')}"


#: the CPU plugin's compute layer types
COMPUTE_LAYERS = ("Convolution", "GroupConvolution", "FullyConnected", "MatMul", "Deconvolution")
#: the IR's recurrences (int8 weights decompressed when compiled, unless X and the state are
#: quantized too: then the CPU plugin's integer LSTM)
RECURRENT = ("LSTMSequence", "GRUSequence", "RNNSequence")
#: the compiled model's layer types of the recurrences
RECURRENT_LAYERS = ("RNNSeq", "RNNCell")
#: the IR's ops that read weights, and which inputs are the weights
WEIGHT_INPUTS = {"Convolution": (1,), "GroupConvolution": (1,), "MatMul": (1,), "ConvolutionBackpropData": (1,),
                 "LSTMSequence": (4, 5), "GRUSequence": (3, 4), "RNNSequence": (3, 4)}


def integer_kernels(path: Path) -> Any:
    """The runtime precision of each compute layer of the model as the CPU plugin compiles it
    (its low-precision transformations decide: u8/i8 is an integer kernel; an i8 layer whose
    primitive is a float one decompresses int8 weights: said, and ``stored`` when all are)."""
    from translator.compile.target import KernelCount

    xml = next(Path(path).rglob("*.xml")) if Path(path).is_dir() else Path(path)
    model = core().read_model(str(xml))
    rt = core().compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 1}).get_runtime_model()
    kinds, decompressed = [], 0
    for op in rt.get_ops():
        info = op.get_rt_info()
        kind = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
        if kind in COMPUTE_LAYERS or kind in RECURRENT_LAYERS:
            prec = info["runtimePrecision"].astype(str).lower() if "runtimePrecision" in info else "?"
            prim = info["primitiveType"].astype(str).lower() if "primitiveType" in info else ""
            kinds.append(prec)
            # an i8 layer whose primitive computes in floats keeps int8 weights and decompresses them
            decompressed += prec in ("u8", "i8") and ("f32" in prim or "bf16" in prim or "f16" in prim)
    n = sum(1 for p in kinds if p in ("u8", "i8"))
    how = f"the CPU plugin runs {n} of {len(kinds)} convolutions/matmuls/recurrences in u8/i8"
    if decompressed:
        how += f" ({decompressed} of them int8 weights decompressed in a float kernel: int8 storage, float arithmetic)"
    if n == decompressed:  # no integer arithmetic: what is integer is the IR's storage of the weights
        stored = _int8_weights_in_ir(model)
        if stored > n:
            return KernelCount(stored, len(kinds), f"{stored} of {len(kinds)} convolutions/matmuls/recurrences read int8 weights "
                               "stored in the IR (decompressed when compiled: float kernels)", stored=True)
    return KernelCount(n, len(kinds), how, stored=decompressed == n > 0)


def _int8_weights_in_ir(model: Any) -> int:
    """The convolutions/matmuls/recurrences of an IR whose weight inputs are 8-bit constants
    behind their decompression (Convert, Subtract, Multiply, Reshape, Transpose of constants;
    a recurrence's gate blocks re-ordered by slices and a Concat)."""
    through = ("Convert", "Subtract", "Multiply", "Reshape", "Transpose", "Unsqueeze", "Squeeze", "Concat",
               "StridedSlice", "Slice", "Split", "VariadicSplit", "Gather")
    n = 0
    for op in model.get_ops():
        ports = WEIGHT_INPUTS.get(op.get_type_name())
        if ports is None:
            continue
        found = True
        for port in ports:
            todo, int8 = [op.input_value(port).get_node()], False
            while todo and not int8:
                node = todo.pop()
                if node.get_type_name() == "Constant":
                    int8 = node.get_output_element_type(0).get_type_name() in ("i8", "u8")
                elif node.get_type_name() in through:
                    todo += [v.get_node() for v in node.input_values()]
            found = found and int8
        n += found
    return n
