"""Feeding onnxruntime types NumPy lacks (bfloat16, float8, ...: ml_dtypes arrays).

onnxruntime's ``run`` rejects ml_dtypes arrays, so such inputs go in as OrtValues
built from the raw bits, and such outputs are read back from the OrtValue's buffer.
Used by the ONNX backend and by the onnxruntime peer alike, so both see the same data.
"""
from __future__ import annotations

import ctypes
from typing import Any, Mapping

import numpy as np

_SPECIAL = {  # onnxruntime type string → (TensorProto enum, ml_dtypes name, storage dtype)
    "tensor(bfloat16)": (16, "bfloat16", np.uint16),
    "tensor(float8e4m3fn)": (17, "float8_e4m3fn", np.uint8),
    "tensor(float8e4m3fnuz)": (18, "float8_e4m3fnuz", np.uint8),
    "tensor(float8e5m2)": (19, "float8_e5m2", np.uint8),
    "tensor(float8e5m2fnuz)": (20, "float8_e5m2fnuz", np.uint8),
}
_BY_NAME = {v[1]: (v[0], v[2]) for v in _SPECIAL.values()}


#: the session option of the note in session_options
PRECISE_INTEGER_PRODUCTS = "session.x64quantprecision"


def session_options(precise: bool = True) -> Any:
    """onnxruntime session options as opbridge uses them: its own log lines (a kernel's
    failure is also raised as an exception) only with ``opbridge -v`` (OPBRIDGE_VERBOSE=1)."""
    import os

    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3 if os.environ.get("OPBRIDGE_VERBOSE") == "1" else 4
    if not precise:
        return so
    # x86 CPUs without VNNI (AVX2, AVX-512 without VNNI) multiply uint8 by int8 with vpmaddubsw, which
    # saturates each pair's sum at int16: MatMulInteger/MatMulIntegerToFloat/QGemm/DynamicQuantizeLSTM
    # with weights outside [-64, 63] then compute something else than the model says, and only on
    # such CPUs. This option (onnxruntime >= 1.13) makes onnxruntime take its exact uint8 x uint8
    # kernels there; it changes nothing on a CPU with VNNI or on ARM.
    so.add_session_config_entry(PRECISE_INTEGER_PRODUCTS, "1")
    return so


#: onnxruntime graph optimizers opbridge turns off: QDQS8ToU8Transformer rewrites int8
#: QuantizeLinear nodes to uint8 and then rejects the model at opset >= 21 ("output_dtype INT8
#: does not match y_zero_point type UINT8"), so every int8 quantized model (e.g. from a
#: full-int8 .tflite) would fail to load
DISABLED_OPTIMIZERS = ["QDQS8ToU8Transformer"]


def session(model: Any, sequential: bool = False) -> Any:
    """An onnxruntime CPU session on ``model`` (a path or serialized bytes) as opbridge runs it;
    ``sequential``: one intra-op thread (a kernel whose numbers depend on how it splits the
    work, DynamicQuantizeLSTM's per-chunk quantization, then computes what it computes
    everywhere)."""
    import onnxruntime as ort

    def make(precise: bool) -> Any:
        so = session_options(precise)
        if sequential:
            so.intra_op_num_threads = 1
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"],
                                    disabled_optimizers=DISABLED_OPTIMIZERS)

    try:
        return make(True)
    except Exception:  # noqa: BLE001 - onnxruntime 1.32's uint8-weight rewrite fails on some graphs
        # ("AddInitializedOrtValue Attempt to replace the existing tensor", two convolutions sharing
        # a weight scale): without the option the session is what any user's default one is
        return make(False)


def _needs_ortvalue(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.name in _BY_NAME


def run_session(sess: Any, feeds: Mapping[str, Any]) -> list[Any]:
    out_types = [o.type for o in sess.get_outputs()]
    if not any(_needs_ortvalue(x) for x in feeds.values()) and not any(t in _SPECIAL for t in out_types):
        return sess.run(None, dict(feeds))
    import ml_dtypes
    import onnxruntime as ort

    vals = {}
    for k, x in feeds.items():
        if _needs_ortvalue(x):
            enum, storage = _BY_NAME[x.dtype.name]
            vals[k] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(x).view(storage), enum)
        else:
            vals[k] = ort.OrtValue.ortvalue_from_numpy(np.asarray(x))
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run_with_ort_values(names, vals)
    result = []
    for o, t in zip(outs, out_types):
        if t in _SPECIAL:
            _, mlname, storage = _SPECIAL[t]
            raw = ctypes.string_at(o.data_ptr(), o.tensor_size_in_bytes())
            arr = np.frombuffer(raw, dtype=storage).view(getattr(ml_dtypes, mlname)).reshape(o.shape())
            result.append(arr.copy())
        else:
            result.append(o.numpy())
    return result
