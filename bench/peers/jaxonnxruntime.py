"""Peer: jaxonnxruntime (Google's JAX-based ONNX runtime) on the original model.

jaxonnxruntime lives in its own venv, bench/.venv-jaxort (bench/setup_peer_jaxonnxruntime.sh),
never in the project's environment; it runs on the same jax/jaxlib as the project, so this is
the StableHLO backend's natural peer (``--backend stablehlo --peers onnxruntime,jaxonnxruntime``).
One runner process (``_jaxonnxruntime_runner.py``) is started there and kept for the whole
benchmark; it runs each case through jaxonnxruntime's ONNX backend API (``Backend.prepare``,
then ``run`` per data set) with 64-bit JAX, as jaxonnxruntime's own node tests do. A case goes
over as files (the model, each data set's inputs as .npz) and the outputs come back as .npz,
compared here like every other peer. NotImplementedError in jaxonnxruntime (an op, op version
or attribute it lacks) is ``unsupported`` with that exception's first line as the reason; any
other exception is an ``error``. A runner that dies or takes longer than 120 s on a case is
restarted and the case counted as an error.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ._common import check_outputs, feeds_for
from .onnx2torch import _Runner

HERE = Path(__file__).resolve().parent
VENV_PYTHON = HERE.parent / ".venv-jaxort" / "bin" / "python"
RUNNER = HERE / "_jaxonnxruntime_runner.py"

_BITS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


class _JaxRunner(_Runner):
    """onnx2torch's persistent runner (one JSON line each way, 120 s per request), in .venv-jaxort."""

    def __init__(self) -> None:
        self.proc = None
        self.tmp = tempfile.TemporaryDirectory(prefix="jaxonnxruntime-peer-")

    def start(self) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", JAX_PLATFORMS="cpu",
                   TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
        self.proc = subprocess.Popen([str(VENV_PYTHON), "-P", str(RUNNER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                     cwd=self.tmp.name)


_RUNNER: _JaxRunner | None = None


def available() -> bool:
    return VENV_PYTHON.is_file()


def _wire(value: Any) -> tuple[Any, str] | None:
    """One tensor → (array .npz stores without pickle, dtype name); None if it cannot travel
    (strings, objects). ml_dtypes types (bfloat16, float8…, int4…) travel as their bits."""
    import numpy as np

    a = np.asarray(value)
    if a.dtype.kind in "OSU":
        return None
    if a.dtype.type.__module__ != "numpy":  # ml_dtypes (float8_e5m2 even claims kind "f")
        if a.dtype.itemsize not in _BITS:
            return None
        return a.view(np.dtype(_BITS[a.dtype.itemsize])), a.dtype.name
    return a, a.dtype.name


def _unwire(a: Any, dtype: str) -> Any:
    import ml_dtypes
    import numpy as np

    return a if a.dtype.name == dtype else a.view(np.dtype(getattr(ml_dtypes, dtype)))


def _encode(feeds: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    """Inputs as .npz arrays plus their description; None if one cannot travel."""
    arrays: dict[str, Any] = {}
    meta: list[dict[str, Any]] = []
    for k, (name, value) in enumerate(feeds.items()):
        if value is None:
            meta.append({"name": name, "kind": "none"})
        elif isinstance(value, list):
            dts = []
            for j, t in enumerate(value):
                w = _wire(t)
                if w is None:
                    return None
                arrays[f"i{k}_{j}"], dt = w
                dts.append(dt)
            meta.append({"name": name, "kind": "list", "n": len(value), "dtypes": dts})
        else:
            w = _wire(value)
            if w is None:
                return None
            arrays[f"i{k}"], dt = w
            meta.append({"name": name, "kind": "tensor", "dtype": dt})
    return arrays, meta


def _decode(path: Path, meta: list[dict[str, Any]]) -> list[Any]:
    import numpy as np

    out: list[Any] = []
    with np.load(path, allow_pickle=False) as data:
        for i, m in enumerate(meta):
            if m["kind"] == "none":
                out.append(None)
            elif m["kind"] == "list":
                out.append([_unwire(data[f"o{i}_{j}"], m["dtypes"][j]) for j in range(m["n"])])
            else:
                out.append(_unwire(data[f"o{i}"], m["dtype"]))
    return out


def run(case: Any) -> tuple[str, str]:
    """jaxonnxruntime's Backend on the original model, in the .venv-jaxort runner."""
    import numpy as np

    global _RUNNER
    if not available():
        return "unsupported", "peer_not_installed"
    if _RUNNER is None:
        _RUNNER = _JaxRunner()
    tmp = Path(_RUNNER.tmp.name)
    model_path = tmp / "model.onnx"
    try:
        model_path.write_bytes(case.model.SerializeToString())
        sets, expected_all = [], []
        for k, (inputs, expected) in enumerate(case.data_sets):
            enc = _encode(feeds_for(case.model, inputs))
            if enc is None:
                return "unsupported", "inputs_not_tensors"
            arrays, meta = enc
            np.savez(tmp / f"inputs{k}.npz", **arrays)
            sets.append({"inputs": str(tmp / f"inputs{k}.npz"), "outputs": str(tmp / f"outputs{k}.npz"), "meta": meta})
            expected_all.append(expected)
        reply = _RUNNER.ask({"model": str(model_path), "sets": sets})  # one request = one case, 120 s
        if reply is None:
            return "error", "runner_died"
        if reply["status"] != "ok":
            return reply["status"], reply["reason"]
        for k, (expected, out_meta) in enumerate(zip(expected_all, reply["sets"])):
            ok, why = check_outputs(expected, _decode(tmp / f"outputs{k}.npz", out_meta))
            if not ok:
                return "fail", why
        return "pass", ""
    except Exception as exc:  # noqa: BLE001
        return "error", f"runtime_error:{type(exc).__name__}"
