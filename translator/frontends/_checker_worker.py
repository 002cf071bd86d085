"""The ONNX checker and strict shape inference, in a process of their own.

ONNX's C++ checker and shape inference abort or crash the process on some invalid models
(Split-18 with more outputs than ``num_outputs`` fails an assertion; a required input left
empty segfaults inference). ``validate.py`` therefore sends the model (its weight-free view)
to this worker: a crash is then a refusal with a reason, not a dead opbridge. The worker
imports only ``onnx`` and serves requests until its stdin closes.

Protocol on stdin/stdout: 8-byte little-endian length + a serialized ModelProto; the reply
is 8-byte length + JSON: ``{"ok": true}`` or ``{"stage", "message"}`` (the checker's or
inference's own message, one line). ``check_view`` is also called in process where no
worker can be started.
"""
from __future__ import annotations

import json
import sys
from typing import Any


def check_view(view: Any) -> dict[str, Any]:
    """The structural checker, then strict shape inference, on ``view`` (a ModelProto whose
    weights are graph inputs). The checker comes first: inference crashes on some nodes it
    refuses. It requires a shape on main-graph values; an unknown rank is legal for us."""
    import onnx
    import onnx.shape_inference

    structural = onnx.ModelProto()
    structural.CopyFrom(view)
    g = structural.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
            vi.type.tensor_type.shape.SetInParent()
    try:
        onnx.checker.check_model(structural, full_check=False)
    except Exception as exc:  # noqa: BLE001 - ValidationError
        return {"stage": "checker", "message": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
    try:
        onnx.shape_inference.infer_shapes(view, check_type=True, strict_mode=True, data_prop=True)
    except Exception as exc:  # noqa: BLE001 - InferenceError, MemoryError (std::bad_alloc)
        return {"stage": "inference", "message": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
    return {"ok": True}


def _read(stream: Any, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


#: the worker's address-space cap (MiB; ``OPBRIDGE_CHECKER_MEMORY_MB``): ONNX's shape inference
#: with data propagation computes constant subgraphs, so a ``Range(0, 2**40)`` grows until the
#: machine kills it (24 GB here); under the cap its allocation fails at once (MemoryError). Room
#: is left for data propagation's own cost on valid models: it holds every value of a 1-D tensor
#: as a proto (3 GB for 40 Adds of 2^20 floats), and the frontend's own inference repeats it
MEMORY_MB = 5120


def _cap_memory() -> None:
    import os

    try:
        import resource

        mb = int(os.environ.get("OPBRIDGE_CHECKER_MEMORY_MB") or MEMORY_MB)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = mb << 20 if hard == resource.RLIM_INFINITY else min(mb << 20, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, ValueError, OSError):
        pass  # no rlimits here (Windows): the host's own limits apply


def main() -> None:
    _cap_memory()
    import onnx

    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        head = _read(inp, 8)
        if head is None:
            return
        data = _read(inp, int.from_bytes(head, "little"))
        if data is None:
            return
        try:
            view = onnx.ModelProto()
            view.ParseFromString(data)
            reply = check_view(view)
        except Exception as exc:  # noqa: BLE001
            reply = {"stage": "checker", "message": f"{type(exc).__name__}: {' '.join(str(exc).split())}"}
        body = json.dumps(reply).encode()
        out.write(len(body).to_bytes(8, "little") + body)
        out.flush()


if __name__ == "__main__":
    main()
