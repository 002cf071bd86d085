"""State a frontend carries as explicit graph inputs and outputs (a streaming model's
variables), as recorded in the model's metadata:

* ``opbridge.state``: JSON list of ``{variable, input, output}`` (output None when the model
  never writes the variable back);
* ``opbridge.initial_state``: JSON ``{input: {dtype, shape, values}}``, the first values.

The check feeds the first values (so a first call is compared with the source runtime's
first call) and compares the state outputs with the reference only: no source runtime
returns them.
"""
from __future__ import annotations

import json

import numpy as np


def initial_state(metadata: dict[str, str] | None) -> dict[str, np.ndarray]:
    """The state inputs' first values (input name → array)."""
    raw = (metadata or {}).get("opbridge.initial_state")
    if not raw:
        return {}
    return {k: np.asarray(v["values"], dtype=v["dtype"]).reshape(v["shape"]) for k, v in json.loads(raw).items()}


def state_outputs(metadata: dict[str, str] | None) -> set[str]:
    """The output names that carry state back."""
    raw = (metadata or {}).get("opbridge.state")
    return {p["output"] for p in json.loads(raw) if p.get("output")} if raw else set()
