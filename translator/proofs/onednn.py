"""oneDNN through the frameworks that carry it: PyTorch's mkldnn tensors/ops (ideep) and
TensorFlow's oneDNN build. The one-op program runs in a worker process started with
``ONEDNN_VERBOSE=1`` (translator/proofs/_onednn_worker.py, one worker for all cases); oneDNN
prints every primitive it executes (``onednn_verbose,...,exec,cpu,<kind>,...,alg:<algorithm>``).
The proof fails unless the primitive kind(s) the cell names — and its ``attrs.algorithm``, when
given — appear among the executed primitives, then the outputs are compared as usual.

A cell's native name is a primitive class of oneDNN's C++ API (``dnnl::eltwise_forward``,
https://uxlfoundation.github.io/oneDNN/) or a Graph API op kind (``dnnl::graph::op::kind::SoftMax``);
``resolves`` checks both against the lists below, taken from include/oneapi/dnnl/dnnl.hpp and
dnnl_graph.hpp of uxlfoundation/oneDNN at 3f27bec21fdce6b550f233bf6e0afd086ee8d543.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import re
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from . import ProofError, dist_version

API = "onednn"
EXTRA = "all"  # PyTorch and TensorFlow, the two oneDNN carriers the recipes use

DOCS = "https://uxlfoundation.github.io/oneDNN/"
#: the primitive classes of include/oneapi/dnnl/dnnl.hpp (struct X : public primitive)
PRIMITIVES = frozenset(
    "reorder concat sum convolution_forward convolution_backward_data convolution_backward_weights deconvolution_forward "
    "deconvolution_backward_data deconvolution_backward_weights lrn_forward lrn_backward eltwise_forward eltwise_backward "
    "softmax_forward softmax_backward batch_normalization_forward batch_normalization_backward group_normalization_forward "
    "group_normalization_backward layer_normalization_forward layer_normalization_backward inner_product_forward "
    "inner_product_backward_data inner_product_backward_weights vanilla_rnn_forward vanilla_rnn_backward lstm_forward "
    "lstm_backward gru_forward gru_backward lbr_gru_forward lbr_gru_backward augru_forward augru_backward lbr_augru_forward "
    "lbr_augru_backward shuffle_forward shuffle_backward binary matmul resampling_forward resampling_backward pooling_forward "
    "pooling_backward prelu_forward prelu_backward reduction".split())
#: dnnl::graph::op::kind of include/oneapi/dnnl/dnnl_graph.hpp
GRAPH_OPS = frozenset(
    "Abs AbsBackward Add AvgPool AvgPoolBackward BatchNormForwardTraining BatchNormInference BatchNormTrainingBackward BiasAdd "
    "BiasAddBackward Clamp ClampBackward Concat Convolution ConvolutionBackwardData ConvolutionBackwardWeights ConvTranspose "
    "ConvTransposeBackwardData Dequantize Divide DynamicDequantize DynamicQuantize Elu EluBackward End Exp GELU GELUBackward "
    "GroupNorm HardSigmoid HardSigmoidBackward HardSwish HardSwishBackward Interpolate InterpolateBackward LayerNorm "
    "LayerNormBackward LeakyReLU Log LogSoftmax LogSoftmaxBackward MatMul Maximum MaxPool MaxPoolBackward Minimum Mish "
    "MishBackward Multiply Pow PReLU PReLUBackward Quantize Reciprocal ReduceL1 ReduceL2 ReduceMax ReduceMean ReduceMin "
    "ReduceProd ReduceSum ReLU ReLUBackward Reorder Round RMSNorm Select Sigmoid SigmoidBackward SoftMax SoftMaxBackward "
    "SoftPlus SoftPlusBackward Sqrt SqrtBackward Square SquaredDifference StaticReshape StaticTranspose Subtract Tanh "
    "TanhBackward TypeCast Wildcard GenIndex GreaterEqual Dropout".split())
_RNN = {"vanilla_rnn_forward", "lstm_forward", "gru_forward", "lbr_gru_forward", "augru_forward", "lbr_augru_forward"}


def missing() -> str | None:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return f"PyTorch (which carries oneDNN as mkldnn) is not importable: {exc}"
    if not torch.backends.mkldnn.is_available():
        return "this PyTorch build has no oneDNN (torch.backends.mkldnn.is_available() is False)"
    from importlib.util import find_spec

    if find_spec("tensorflow") is None:
        return "TensorFlow (whose oneDNN build runs the matmul/einsum/swish/mish/layout recipes) is not installed"
    return None


@functools.lru_cache(maxsize=None)
def version() -> str:
    torch_v = dist_version("torch") or "torch"
    try:
        import torch

        m = re.search(r"(?:MKL-DNN|oneDNN) (v[0-9.]+)", torch.__config__.show())
        if m:
            torch_v += f" (oneDNN {m.group(1)})"
    except Exception:  # noqa: BLE001 - the version string stays without it
        pass
    tf_v = dist_version("tensorflow-cpu", "tensorflow")
    return torch_v + (f" + {tf_v}" if tf_v else "")


def resolves(name: str) -> bool:
    if name.startswith("dnnl::graph::op::kind::"):
        return name.rsplit("::", 1)[1] in GRAPH_OPS
    return name.startswith("dnnl::") and name[6:] in PRIMITIVES


def verbose_kind(name: str) -> str | None:
    """The primitive kind oneDNN's verbose log prints for a primitive class (None: a Graph API op)."""
    if not name.startswith("dnnl::") or name.startswith("dnnl::graph::"):
        return None
    p = name[6:]
    if p in _RNN:
        return "rnn"
    if p.startswith("convolution_"):
        return "convolution"
    if p.startswith("deconvolution_"):
        return "deconvolution"
    return re.sub(r"_(forward|backward(_data|_weights)?)$", "", p)


def provable(op: Any, cell: Any) -> bool:
    from ._onednn_worker import RECIPES

    return cell.status in ("native", "composite") and op.id in RECIPES and \
        all(verbose_kind(n) is not None for n in cell.names)


class _Worker:
    def __init__(self) -> None:
        env = dict(os.environ, ONEDNN_VERBOSE="1", TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1",
                   TF_ENABLE_ONEDNN_OPTS="1")  # TensorFlow turns its oneDNN path on by itself only on AVX-512 CPUs
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.tmp = tempfile.TemporaryDirectory(prefix="opbridge-onednn-")
        self.proc = subprocess.Popen([sys.executable, "-m", "translator.proofs._onednn_worker"], cwd=root, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1)
        self.n = 0
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.tmp.cleanup()

    def _line(self, timeout: float = 300.0) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise ProofError("the oneDNN worker did not answer in time") from None
        if line is None:
            raise ProofError(f"the oneDNN worker exited (code {self.proc.poll()})")
        return line

    def call(self, op_id: str, inputs: list, attrs: dict) -> tuple[list[str], list[np.ndarray]]:
        self.n += 1
        rid = str(self.n)
        src = os.path.join(self.tmp.name, f"in{rid}.npz")
        dst = os.path.join(self.tmp.name, f"out{rid}.npz")
        np.savez(src, **{f"a{i}": np.asarray(x) for i, x in enumerate(inputs) if x is not None})
        req = {"id": rid, "op": op_id, "attrs": attrs, "inputs": src, "out": dst, "n": len(inputs)}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        while self._line() != f"@@BEGIN {rid}":
            pass
        log = []
        while True:
            line = self._line()
            if line.startswith(f"@@END {rid} "):
                status = line[len(f"@@END {rid} "):]
                break
            log.append(line)
        if status != "ok":
            raise ProofError(f"the one-op program failed: {status[4:]}")
        with np.load(dst, allow_pickle=False) as z:
            outs = [z[f"y{i}"] for i in range(len(z.files))]
        return log, outs


_WORKER: _Worker | None = None


def _worker() -> _Worker:
    global _WORKER
    if _WORKER is None or _WORKER.proc.poll() is not None:
        _WORKER = _Worker()
        atexit.register(_WORKER.close)
    return _WORKER


def executed(log: list[str]) -> list[tuple[str, str]]:
    """(primitive kind, algorithm or '') of every ``exec`` line of oneDNN's verbose log."""
    out = []
    for line in log:
        if not line.startswith("onednn_verbose"):
            continue
        f = line.split(",")
        if "exec" not in f:
            continue
        i = f.index("exec")
        if i + 2 >= len(f):
            continue
        m = re.search(r"\balg:([a-z0-9_]+)", line)
        out.append((f[i + 2], m.group(1) if m else ""))
    return out


def _plain(v: Any) -> Any:
    if hasattr(v, "items"):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def run(op: Any, cell: Any, sample: Any) -> list[np.ndarray]:
    attrs = _plain(dict(sample.attrs))
    log, outs = _worker().call(op.id, list(sample.inputs), attrs)
    ran = executed(log)
    kinds = {k for k, _ in ran}
    want = [verbose_kind(n) for n in cell.names]
    if cell.status == "native":
        if not any(k in kinds for k in want):
            raise ProofError(f"oneDNN executed {sorted(kinds) or 'no primitive'}, not the cell's {want}")
    else:
        lost = [k for k in want if k not in kinds]
        if lost:
            raise ProofError(f"oneDNN executed {sorted(kinds) or 'no primitive'}; the composite's {lost} did not run")
    alg = (cell.attrs or {}).get("algorithm")
    if alg:
        algs = [alg] if isinstance(alg, str) else list(alg)
        if not any(a == x for _, a in ran for x in algs):
            raise ProofError(f"oneDNN ran {ran}, not the algorithm {algs}")
    return outs
