"""Inputs frozen to values (``convert --freeze sr=16000``): a graph input that is a setting
rather than data (a sample rate, a mode flag) becomes a constant before anything folds, so
the ``If`` it decides is inlined and the branch never taken is gone (OpenVINO's
``convert_model(input=...)`` freezes inputs the same way).

``metadata["opbridge.frozen_inputs"]`` (JSON: name → dtype, shape, values) keeps what was
frozen: the check feeds it to the source runtime, which still takes the input.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

from ..table.errors import OpbridgeError
from .graph import Model


def parse(specs: list[str] | None) -> dict[str, Any]:
    """``NAME=VALUE`` (a number, or numbers separated by commas for a 1-D input)."""
    out: dict[str, Any] = {}
    for spec in specs or []:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value:
            raise OpbridgeError("bad_option", f"--freeze {spec!r}: expected NAME=VALUE (e.g. sr=16000)")
        try:
            parts = [float(p) if any(c in p for c in ".eE") or p.strip().lower() in ("inf", "-inf", "nan")
                     else int(p) for p in value.split(",")]
        except ValueError:
            raise OpbridgeError("bad_option", f"--freeze {spec!r}: {value!r} is not a number or a comma list of "
                                "numbers") from None
        out[name] = parts[0] if len(parts) == 1 else parts
    return out


def freeze(model: Model, values: Mapping[str, Any]) -> Model:
    """``model`` with the named inputs replaced by constants (in place; returned)."""
    from ..table.dtypes import numpy_dtype

    g = model.graph
    by_name = {v.name: v for v in g.inputs}
    unknown = sorted(set(values) - set(by_name))
    if unknown:
        raise OpbridgeError("bad_option", f"--freeze {', '.join(unknown)}: the model has no such input (it has: "
                            f"{', '.join(by_name) or 'none'})")
    record: dict[str, Any] = dict(json.loads((model.metadata or {}).get("opbridge.frozen_inputs", "{}")))
    for name, value in values.items():
        v = by_name[name]
        t = v.type
        if t.kind != "tensor" or t.dtype is None:
            raise OpbridgeError("bad_option", f"--freeze {name}: the input is a {t.kind} of unknown element type")
        arr = np.asarray(value, dtype=numpy_dtype(t.dtype))
        if t.shape is not None:
            want = tuple(t.shape)
            if arr.ndim != len(want) and arr.size == int(np.prod([d for d in want if isinstance(d, int)] or [1])) \
                    and all(isinstance(d, int) for d in want):
                arr = arr.reshape(want)  # 16000 for an input declared [1]
            if arr.ndim != len(want) or any(isinstance(d, int) and d != s for d, s in zip(want, arr.shape)):
                raise OpbridgeError("bad_option", f"--freeze {name}: a value of shape {list(arr.shape)} for an input "
                                    f"of shape {[d if isinstance(d, int) else '?' for d in want]}")
        c = g.add_constant(f"{name}_frozen", arr, t.dtype)
        g.replace_all_uses_with(v, c)
        g.inputs = [i for i in g.inputs if i is not v]
        record[name] = {"dtype": str(arr.dtype), "shape": list(arr.shape), "values": arr.reshape(-1).tolist()}
    model.metadata = {**(model.metadata or {}), "opbridge.frozen_inputs": json.dumps(record)}
    return model


def frozen_values(metadata: Mapping[str, str] | None) -> dict[str, np.ndarray]:
    raw = (metadata or {}).get("opbridge.frozen_inputs")
    if not raw:
        return {}
    return {k: np.asarray(v["values"], dtype=v["dtype"]).reshape(v["shape"]) for k, v in json.loads(raw).items()}
