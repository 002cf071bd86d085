"""Peer: pnnx (ncnn's own converter) on the original model, its ncnn files run by ncnn.

pnnx lives in its own venv, bench/.venv-pnnx (bench/setup_peer_pnnx.sh): its wheel carries a
standalone executable that converts an ONNX file to ``model.ncnn.param`` / ``.bin``. Each case
is converted once (``inputshape`` from the first data set, with pnnx's dtype suffixes; fp16
off), and every data set runs through the project's ``ncnn`` package (CPU, one thread, fp32
storage and arithmetic): the same runtime opbridge's ncnn target is checked with, so this is
that target's peer (``--backend ncnn --peers onnxruntime,pnnx``).

How pnnx's ncnn files are fed and read, as its own generated ``*_ncnn.py`` does: inputs
``in0, in1...`` in the model's input order, outputs ``out0, out1...``; an ncnn blob has no
batch, so an input whose first dim is 1 goes in without it, and an output is read in the
expected shape when the element counts agree (ncnn drops and adds size-1 dims). Every blob is
float32 (ncnn's blob interface): integer and bool inputs go in as float32 and outputs come
back as the expected dtype when their values are integral. A conversion pnnx refuses
(non-zero exit, or no ncnn files) is ``unsupported`` with the reason code ``pnnx_failed``;
a net ncnn cannot load or run is an ``error`` (run in a process of its own,
``_pnnx_ncnn_runner.py``: a crash of ncnn is ``runtime_crash``); a case whose inputs are not tensors is
``unsupported``. A conversion that takes longer than 120 s is an ``error`` (``timeout``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._common import as_value, check_outputs, feeds_for

HERE = Path(__file__).resolve().parent
VENV = HERE.parent / ".venv-pnnx"
_SUFFIX = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64", "int32": "i32", "int16": "i16",
           "int8": "i8", "uint8": "u8", "bool": "b"}


def executable() -> Path | None:
    found = sorted(VENV.glob("lib/python3*/site-packages/pnnx/pnnx"))
    return found[0] if found else None


def available() -> bool:
    return executable() is not None


def _inputshape(feeds: dict[str, Any]) -> str | None:
    import numpy as np

    parts = []
    for v in feeds.values():
        a = np.asarray(v)
        if a.dtype.name not in _SUFFIX:
            return None
        parts.append("[" + ",".join(str(d) for d in a.shape) + "]" + _SUFFIX[a.dtype.name])
    return ",".join(parts)


def _net(param: Path, weights: Path) -> Any:
    from translator.proofs.ncnn import fp32_net

    net = fp32_net()
    if net.load_param(str(param)) != 0 or net.load_model(str(weights)) != 0:
        raise RuntimeError("ncnn could not load pnnx's files")
    return net


def convert(src: str | os.PathLike[str], feeds: dict[str, Any], work: Path, timeout: float = 900.0) -> tuple[Path, Path, float]:
    """pnnx on the ONNX file ``src`` at the shapes of ``feeds`` (its ``inputshape``, fp16 off) →
    (``m.ncnn.param``, ``m.ncnn.bin``, seconds) in ``work``. A refusal raises RuntimeError with
    pnnx's exit code and last line; a missing venv or an input dtype pnnx cannot spell too."""
    import time

    exe = executable()
    if exe is None:
        raise RuntimeError("bench/.venv-pnnx is not set up (bench/setup_peer_pnnx.sh)")
    shapes = _inputshape(feeds)
    if shapes is None:
        raise RuntimeError("an input dtype pnnx's inputshape cannot spell")
    work.mkdir(parents=True, exist_ok=True)
    files = {k: work / v for k, v in (("ncnnparam", "m.ncnn.param"), ("ncnnbin", "m.ncnn.bin"), ("ncnnpy", "m_ncnn.py"),
                                       ("pnnxparam", "m.pnnx.param"), ("pnnxbin", "m.pnnx.bin"),
                                       ("pnnxpy", "m_pnnx.py"), ("pnnxonnx", "m.pnnx.onnx"))}
    for f in files.values():
        f.unlink(missing_ok=True)
    t = time.perf_counter()
    p = subprocess.run([str(exe), str(src), "fp16=0", f"inputshape={shapes}"] + [f"{k}={v}" for k, v in files.items()],
                       cwd=work, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))
    seconds = time.perf_counter() - t
    if p.returncode != 0 or not files["ncnnparam"].exists() or not files["ncnnbin"].exists():
        tail = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or [""])[-1]
        raise RuntimeError(f"pnnx exited {p.returncode}: {tail[:200]}")
    return files["ncnnparam"], files["ncnnbin"], seconds


def output_count(param: Path) -> int:
    """How many ``out<k>`` blobs pnnx's net has (its outputs, in the model's order)."""
    return sum(1 for line in param.read_text().splitlines()[2:] for t in line.split()[4:]
               if t.startswith("out") and t[3:].isdigit() and line.split()[0] != "Input")


def blob(value: Any) -> Any:
    """An input as pnnx's generated script feeds it: float32, a batch of 1 dropped."""
    import numpy as np

    a = np.ascontiguousarray(value, dtype=np.float32)
    return a[0] if a.ndim > 1 and a.shape[0] == 1 else a


def caller(net: Any, feeds: dict[str, Any], n_out: int) -> Any:
    """A zero-argument callable feeding ``feeds`` to pnnx's net as its generated script does
    (``in0``..., a batch of 1 dropped) and reading ``out0``... as float32 arrays."""
    import ncnn
    import numpy as np

    arrays = [blob(v) for v in feeds.values()]

    def call() -> list[Any]:
        ex = net.create_extractor()
        ms = [ncnn.Mat(a).clone() for a in arrays]
        for k, m in enumerate(ms):
            ex.input(f"in{k}", m)
        outs = []
        for k in range(n_out):
            rc, m = ex.extract(f"out{k}")
            if rc != 0:
                raise RuntimeError(f"ncnn could not compute pnnx's out{k}")
            outs.append(np.array(m, copy=True))
        return outs

    return call


def _read(m: Any, want: Any) -> Any:
    import numpy as np

    got = np.array(m, copy=True)
    w = np.asarray(want)
    if got.size == w.size and got.shape != w.shape:
        got = got.reshape(w.shape)
    if w.dtype != got.dtype and got.size == w.size:
        if w.dtype.kind in "iub":
            if not np.all(np.isfinite(got)) or not np.all(got == np.round(got)):
                return got  # not integral: compared as it is (a mismatch)
            got = got.astype(w.dtype)
        elif w.dtype.kind == "f":
            got = got.astype(w.dtype)
    return got


def run(case: Any) -> tuple[str, str]:
    import numpy as np

    exe = executable()
    if exe is None:
        return "unsupported", "peer_not_installed"
    with tempfile.TemporaryDirectory(prefix="pnnx-peer-") as d:
        tmp = Path(d)
        model = tmp / "model.onnx"
        model.write_bytes(case.model.SerializeToString())
        first = feeds_for(case.model, case.data_sets[0][0])
        if any(isinstance(v, list) or v is None for v in first.values()):
            return "unsupported", "inputs_not_tensors"
        shapes = _inputshape(first)
        if shapes is None:
            return "unsupported", "input_dtype"
        try:
            param, weights, _ = convert(model, first, tmp, timeout=120)
        except subprocess.TimeoutExpired:
            return "error", "timeout"
        except RuntimeError:
            return "unsupported", "pnnx_failed"
        n_out = output_count(param)
        feeds = {}
        for j, (inputs, _) in enumerate(case.data_sets):
            for k, v in enumerate(feeds_for(case.model, inputs).values()):
                feeds[f"s{j}_in{k}"] = blob(as_value(v))
        np.savez(tmp / "feeds.npz", **feeds)
        try:
            p = subprocess.run([sys.executable, str(HERE / "_pnnx_ncnn_runner.py"), str(param), str(weights),
                                str(tmp / "feeds.npz"), str(len(case.data_sets)), str(n_out), str(tmp / "out.npz")],
                               capture_output=True, text=True, timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
        except subprocess.TimeoutExpired:
            return "error", "timeout"
        if p.returncode < 0:
            return "error", f"runtime_crash:{signal.Signals(-p.returncode).name}"
        if p.returncode != 0:
            return "error", "runtime_error:load" if p.returncode == 3 else f"runtime_error:exit_{p.returncode}"
        with np.load(tmp / "out.npz", allow_pickle=False) as z:
            outs = {k: z[k] for k in z.files}
        for j, (_, expected) in enumerate(case.data_sets):
            if any(f"s{j}_out{k}" not in outs for k in range(len(expected))):
                return "fail", "missing_outputs"
            if n_out > len(expected):
                return "fail", "extra_outputs"
            got = [_read(outs[f"s{j}_out{k}"], as_value(e)) for k, e in enumerate(expected)]
            ok, why = check_outputs(expected, got)
            if not ok:
                return "fail", why
        return "pass", ""
