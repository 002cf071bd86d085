"""Runs inside bench/.venv-jaxort (jaxonnxruntime 0.3.0 on the project's jax), never in the project's venv.

jaxonnxruntime is used through its ONNX backend API (``jaxonnxruntime.backend.Backend``:
``prepare(model)`` then ``run(inputs)`` per data set), configured as its own ONNX node tests
configure it: ``jax_enable_x64`` on (int64/float64 stay 64-bit) and
``jaxort_only_allow_initializers_as_static_args`` off (shape-like inputs such as Reshape's
``shape`` may come from graph inputs, as they do in the node tests).

Protocol (one JSON object per line on stdin, one reply per line on stdout), one request per case:
request  {"model": path.onnx,
          "sets": [{"inputs": path.npz, "outputs": path.npz, "meta": [input, ...]}, ...]}
         input = {"name": graph input, "kind": "tensor"|"list"|"none", "dtype": ..., "n": k, "dtypes": [...]}
reply    {"status": "ok", "sets": [[output, ...], ...]}
         output = {"kind": "tensor"|"list"|"none", "dtype": ..., "n": k, "dtypes": [...]}
         {"status": "unsupported"|"error", "reason": "..."}
Arrays travel as .npz files written and read without pickle: tensor k of a set is ``i<k>``
(``i<k>_<j>`` for item j of a sequence), output k is ``o<k>`` (``o<k>_<j>``). Dtypes NumPy
alone does not have (ml_dtypes: bfloat16, float8…, int4…) travel as their bits (an unsigned
integer array of the same item size) with the dtype's name, and are viewed back on the other
side. Unsupported = jaxonnxruntime raised NotImplementedError (an op, an op version or an
attribute it does not implement); the reason is that exception's first line. Everything the
library or JAX prints goes to stderr, so stdout carries only replies.
"""
from __future__ import annotations

import json
import os
import sys
import warnings

_BITS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}


def _unwire(a, dtype):
    import ml_dtypes
    import numpy as np

    if a.dtype.name == dtype:
        return a
    return a.view(np.dtype(getattr(ml_dtypes, dtype)))


def _wire(value):
    """One output → (NumPy array that .npz stores without pickle, dtype name)."""
    import numpy as np

    a = np.asarray(value)
    name = a.dtype.name
    if a.dtype.kind in "OSU":
        raise TypeError(f"output of dtype {name} cannot travel")
    if a.dtype.type.__module__ != "numpy":  # ml_dtypes (bfloat16, float8_*, int4…): their bits
        return a.view(np.dtype(_BITS[a.dtype.itemsize])), name
    return a, name


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0].strip() if text else ""
    return (line or type(exc).__name__)[:200]


def _load_inputs(path, meta):
    import numpy as np

    feeds = {}
    with np.load(path, allow_pickle=False) as data:
        for k, m in enumerate(meta):
            if m["kind"] == "none":
                feeds[m["name"]] = None
            elif m["kind"] == "list":
                feeds[m["name"]] = [_unwire(data[f"i{k}_{j}"], m["dtypes"][j]) for j in range(m["n"])]
            else:
                feeds[m["name"]] = _unwire(data[f"i{k}"], m["dtype"])
    return feeds


def _save_outputs(path, res):
    import numpy as np

    res = list(res) if isinstance(res, (tuple, list)) else [res]
    arrays, meta = {}, []
    for i, r in enumerate(res):
        if r is None:
            meta.append({"kind": "none"})
        elif isinstance(r, (list, tuple)):
            dts = []
            for j, t in enumerate(r):
                arrays[f"o{i}_{j}"], dt = _wire(t)
                dts.append(dt)
            meta.append({"kind": "list", "n": len(r), "dtypes": dts})
        else:
            arrays[f"o{i}"], dt = _wire(r)
            meta.append({"kind": "tensor", "dtype": dt})
    np.savez(path, **arrays)
    return meta


def _serve(out) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    import onnx
    from jaxonnxruntime import config as jort_config
    from jaxonnxruntime.backend import Backend

    jort_config.update("jaxort_only_allow_initializers_as_static_args", False)

    for line in sys.stdin:
        req = json.loads(line)
        try:
            model = onnx.load(req["model"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rep = Backend.prepare(model, "CPU")
                sets = []
                for s in req["sets"]:
                    res = rep.run(_load_inputs(s["inputs"], s["meta"]))
                    sets.append(_save_outputs(s["outputs"], res))
            reply = {"status": "ok", "sets": sets}
        except NotImplementedError as exc:  # an op / version / attribute jaxonnxruntime lacks
            reply = {"status": "unsupported", "reason": _first_line(exc)}
        except Exception as exc:  # noqa: BLE001 - anything else is the peer's error
            reply = {"status": "error", "reason": f"runtime_error:{type(exc).__name__}"}
        try:
            jax.clear_caches()  # one process serves every case: keep its compile caches from growing
        except Exception:  # noqa: BLE001
            pass
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]  # our jaxonnxruntime.py is not jaxonnxruntime
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints cannot corrupt the replies
    _serve(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
