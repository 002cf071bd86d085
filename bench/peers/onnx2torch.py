"""Peer: onnx2torch (ONNX → torch.fx GraphModule) on the original model, run eagerly.

onnx2torch lives in bench/.venv-peers (created by bench/setup_peers.sh), never in the
project's environment: one runner process (``_onnx2torch_runner.py``) is started in that
venv and kept for the whole benchmark; each case is handed over as files (the model, its
inputs as .npz) and the outputs come back as .npz, compared here like every other peer. A
runner that dies or hangs is restarted and the case counted as an error.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

from ._common import check_outputs, feeds_for

HERE = Path(__file__).resolve().parent
VENV_PYTHON = HERE.parent / ".venv-peers" / "bin" / "python"
RUNNER = HERE / "_onnx2torch_runner.py"
TIMEOUT_S = 120.0


class _Runner:
    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.tmp = tempfile.TemporaryDirectory(prefix="onnx2torch-peer-")

    def start(self) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        self.proc = subprocess.Popen([str(VENV_PYTHON), "-P", str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def ask(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """One request/reply; None if the runner died or did not answer in time (then restarted)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        out = proc.stdout
        reply: list[str] = []
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            reader = threading.Thread(target=lambda: reply.append(out.readline()), daemon=True)
            reader.start()
            reader.join(TIMEOUT_S)
        except (BrokenPipeError, OSError):
            pass
        if not reply or not reply[0]:
            self.stop()
            return None
        return json.loads(reply[0])


_RUNNER: _Runner | None = None


def available() -> bool:
    return VENV_PYTHON.is_file()


def _encode(feeds: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """Inputs as plain NumPy arrays for .npz (bfloat16 as float32); None if one cannot travel."""
    import numpy as np

    arrays, meta = {}, {}
    for i, (name, value) in enumerate(feeds.items()):
        a = np.asarray(value) if not isinstance(value, list) else None
        if a is None or a.dtype.kind in "OSUV" and a.dtype.name != "bfloat16":
            return None
        key = f"i{i}"
        if a.dtype.name == "bfloat16":
            arrays[key], meta[key] = a.astype(np.float32), {"dtype": "bfloat16", "name": name}
        else:
            arrays[key], meta[key] = a, {"dtype": a.dtype.name, "name": name}
    return arrays, meta


def _decode(path: str, meta: list[dict[str, Any]]) -> list[Any]:
    import ml_dtypes
    import numpy as np

    def cast(a: Any, dt: str) -> Any:
        return a.astype(ml_dtypes.bfloat16) if dt == "bfloat16" else a

    out: list[Any] = []
    with np.load(path, allow_pickle=False) as data:
        for i, m in enumerate(meta):
            if m["kind"] == "none":
                out.append(None)
            elif m["kind"] == "list":
                out.append([cast(data[f"o{i}_{j}"], m["dtypes"][j]) for j in range(m["n"])])
            else:
                out.append(cast(data[f"o{i}"], m["dtype"]))
    return out


def run(case: Any) -> tuple[str, str]:
    """onnx2torch's conversion of the original model, run in the peers venv."""
    import numpy as np

    global _RUNNER
    if not available():
        return "unsupported", "peer_not_installed"
    if _RUNNER is None:
        _RUNNER = _Runner()
    tmp = Path(_RUNNER.tmp.name)
    model_path = tmp / "model.onnx"
    model_path.write_bytes(case.model.SerializeToString())
    try:
        for inputs, expected in case.data_sets:
            enc = _encode(feeds_for(case.model, inputs))
            if enc is None:
                return "unsupported", "inputs_not_tensors"
            arrays, meta = enc
            np.savez(tmp / "inputs.npz", **arrays)
            reply = _RUNNER.ask({"model": str(model_path), "inputs": str(tmp / "inputs.npz"),
                                 "outputs": str(tmp / "outputs.npz"), "meta": meta})
            if reply is None:
                return "error", "runner_died"
            if reply["status"] != "ok":
                return reply["status"], reply["reason"]
            ok, why = check_outputs(expected, _decode(str(tmp / "outputs.npz"), reply["outputs"]))
            if not ok:
                return "fail", why
        return "pass", ""
    except Exception as exc:  # noqa: BLE001
        return "error", f"runtime_error:{type(exc).__name__}"
