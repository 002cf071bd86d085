"""Peer of the coreml backend: ONNX → PyTorch (onnx2torch) → coremltools' PyTorch frontend.

coremltools dropped its ONNX converter (version 6), so this is the usual route from an ONNX
model to a Core ML ML program: ``onnx2torch.convert``, ``torch.jit.trace`` on the case's
inputs, ``ct.convert(..., convert_to="mlprogram", iOS17, fp32)``, save, reload with
``skip_model_load=True``. It runs in the peers' venv (``bench/setup_peer_coreml.sh``: torch,
torchvision, onnx2torch, coremltools) through one long-lived worker process.

Like our backend on Linux, it cannot run Core ML: a converted, saved and reloaded model is
reported as ``("unsupported", "structural_only")`` — the reason code our backend gets for a
built model it cannot compute — so ``built and saved`` compares like for like. The peer never
reports ``pass``: nothing it produces is numerically checked.
"""
from __future__ import annotations

import base64
import io
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._common import as_value, feeds_for

VENV_PY = Path(__file__).resolve().parent.parent / ".venv-peers" / "bin" / "python"
TIMEOUT = 120.0
_WORKER: subprocess.Popen[str] | None = None

_WORKER_CODE = r'''
import base64, io, json, os, shutil, sys, tempfile, warnings, logging
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
import numpy as np
stdout = sys.stdout
sys.stdout = sys.stderr
import onnx, torch, onnx2torch
import coremltools as ct

def one(req):
    model = onnx.load_from_string(base64.b64decode(req["model"]))
    with np.load(io.BytesIO(base64.b64decode(req["inputs"])), allow_pickle=False) as z:
        feeds = [z[k] for k in req["names"]]
    try:
        module = onnx2torch.convert(model).eval()
    except Exception as e:
        return "unsupported", "onnx2torch:" + type(e).__name__
    args = tuple(torch.from_numpy(np.ascontiguousarray(x)) for x in feeds)
    try:
        with torch.no_grad():
            traced = torch.jit.trace(module, args, check_trace=False, strict=False)
    except Exception as e:
        return "unsupported", "torch_trace:" + type(e).__name__
    try:
        inputs = [ct.TensorType(name=f"in{i}", shape=tuple(x.shape)) for i, x in enumerate(feeds)]
        m = ct.convert(traced, inputs=inputs, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS17,
                       compute_precision=ct.precision.FLOAT32, skip_model_load=True)
    except Exception as e:
        return "unsupported", "coremltools_convert:" + type(e).__name__
    d = tempfile.mkdtemp()
    try:
        m.save(os.path.join(d, "m.mlpackage"))
        ct.models.MLModel(os.path.join(d, "m.mlpackage"), skip_model_load=True)
    except Exception as e:
        return "error", "coremltools_save:" + type(e).__name__
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return "unsupported", "structural_only"

for line in sys.stdin:
    try:
        status, reason = one(json.loads(line))
    except Exception as e:
        status, reason = "error", "peer_error:" + type(e).__name__
    stdout.write(json.dumps([status, reason]) + "\n")
    stdout.flush()
'''


def _worker() -> subprocess.Popen[str] | None:
    global _WORKER
    if _WORKER is not None and _WORKER.poll() is None:
        return _WORKER
    if not VENV_PY.exists():
        return None
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore")
    _WORKER = subprocess.Popen([str(VENV_PY), "-c", _WORKER_CODE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, env=env)
    return _WORKER


def _stop() -> None:
    global _WORKER
    if _WORKER is not None:
        _WORKER.kill()
        _WORKER.wait()
        _WORKER = None


def run(case: Any) -> tuple[str, str]:
    import numpy as np

    w = _worker()
    if w is None:
        return "unsupported", "peer_unavailable"
    inputs, _ = case.data_sets[0]
    feeds = feeds_for(case.model, inputs)
    if not all(isinstance(v, np.ndarray) and v.dtype.kind in "biuf" for v in feeds.values()):
        return "unsupported", "non_tensor_inputs"
    buf = io.BytesIO()
    np.savez(buf, **{f"a{i}": np.asarray(as_value(v)) for i, v in enumerate(feeds.values())})
    req = {"model": base64.b64encode(case.model.SerializeToString()).decode(),
           "inputs": base64.b64encode(buf.getvalue()).decode(), "names": [f"a{i}" for i in range(len(feeds))]}
    assert w.stdin is not None and w.stdout is not None
    try:
        w.stdin.write(json.dumps(req) + "\n")
        w.stdin.flush()
        ready, _, _ = select.select([w.stdout], [], [], TIMEOUT)
        line = w.stdout.readline() if ready else ""
    except (BrokenPipeError, OSError):
        line = ""
    if not line:
        _stop()
        return "error", "peer_timeout_or_crash"
    status, reason = json.loads(line)
    return status, reason

