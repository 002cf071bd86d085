"""Peer: onnx2tf (ONNX → TensorFlow / TFLite, PINTO0309) on the original model.

onnx2tf lives in its own venv, bench/.venv-onnx2tf (bench/setup_peer_onnx2tf.sh), never in the
project's environment. One runner process (``_onnx2tf_runner.py``) is started there and kept
for the whole benchmark; each case goes over as files: onnx2tf converts it with
``not_use_onnxsim=True`` (inputs kept in their ONNX layout) and its float32 .tflite runs in
the TFLite interpreter. onnx2tf hands 3-D to 5-D outputs back channels-last: an output whose
shape is the expected one transposed N…C is transposed back before the comparison, and
integer outputs are compared in the expected integer type (onnx2tf narrows int64 to int32).
The runner works in a folder holding a seeded stand-in for the sample images onnx2tf would
otherwise download (``offline_sample_data``). A runner that dies or hangs is restarted and
the case counted as an error.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ._common import as_value, check_outputs, feeds_for
from .onnx2torch import _Runner

HERE = Path(__file__).resolve().parent
VENV_PYTHON = HERE.parent / ".venv-onnx2tf" / "bin" / "python"
RUNNER = HERE / "_onnx2tf_runner.py"


#: onnx2tf's dummy-inference images (``download_test_image_data``): it fetches them from GitHub
#: unless this file is in its working directory, for any model whose inputs all look like NHWC
#: images with 3 channels; offline that is a ConnectionError that says nothing about onnx2tf
SAMPLE_DATA = "calibration_image_sample_data_20x128x128x3_float32.npy"


def offline_sample_data(folder: Path) -> None:
    """A seeded stand-in for onnx2tf's sample images (only fed to its per-op ONNX/TF output check)."""
    import numpy as np

    if not (folder / SAMPLE_DATA).is_file():
        np.save(folder / SAMPLE_DATA, np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32))


class _TFRunner(_Runner):
    def start(self) -> None:
        import os
        import subprocess

        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", TF_CPP_MIN_LOG_LEVEL="3",
                   CUDA_VISIBLE_DEVICES="")
        offline_sample_data(Path(self.tmp.name))
        self.proc = subprocess.Popen([str(VENV_PYTHON), "-P", str(RUNNER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                                     cwd=self.tmp.name)


_RUNNER: _TFRunner | None = None


def available() -> bool:
    return VENV_PYTHON.is_file()


def _align(expected: list[Any], got: list[Any]) -> list[Any]:
    """Undo onnx2tf's channels-last outputs and int32 narrowing, where shapes say so."""
    import numpy as np

    out = []
    for e, g in zip(expected, got):
        e, g = np.asarray(as_value(e)), np.asarray(g)
        if e.shape != g.shape and g.ndim == e.ndim >= 3 and g.shape == tuple(e.shape[k] for k in [0, *range(2, e.ndim), 1]):
            g = g.transpose([0, e.ndim - 1, *range(1, e.ndim - 1)])
        if e.dtype != g.dtype and e.dtype.kind in "iub" and g.dtype.kind in "iub":
            g = g.astype(e.dtype)
        out.append(g)
    return out + list(got[len(out):])


def run(case: Any) -> tuple[str, str]:
    import numpy as np

    global _RUNNER
    if not available():
        return "unsupported", "peer_not_installed"
    if _RUNNER is None:
        _RUNNER = _TFRunner()
    tmp = Path(_RUNNER.tmp.name)
    model_path = tmp / "model.onnx"
    model_path.write_bytes(case.model.SerializeToString())
    try:
        for inputs, expected in case.data_sets:
            feeds = feeds_for(case.model, inputs)
            arrays = {}
            for i, v in enumerate(feeds.values()):
                a = np.asarray(v) if not isinstance(v, list) else None
                if a is None or a.dtype.kind in "OSUV" or a.dtype.name == "bfloat16":
                    return "unsupported", "inputs_not_plain_tensors"
                arrays[f"i{i}"] = a
            np.savez(tmp / "inputs.npz", **arrays)
            reply = _RUNNER.ask({"model": str(model_path), "inputs": str(tmp / "inputs.npz"),
                                 "outputs": str(tmp / "outputs.npz"), "work": str(tmp / "tf"), "names": list(feeds)})
            if reply is None:
                return "error", "runner_died"
            if reply["status"] != "ok":
                return reply["status"], reply["reason"]
            with np.load(tmp / "outputs.npz", allow_pickle=False) as data:
                got = [data[f"o{k}"] for k in range(len(reply["outputs"]))]
            names = [o.name for o in case.model.graph.output]
            if sorted(reply["outputs"]) == sorted(names):  # by name when onnx2tf kept them
                got = [got[reply["outputs"].index(n)] for n in names]
            ok, why = check_outputs(expected, _align(expected, got))
            if not ok:
                return "fail", why
        return "pass", ""
    except Exception as exc:  # noqa: BLE001
        return "error", f"runtime_error:{type(exc).__name__}"
