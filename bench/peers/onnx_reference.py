"""Peer: onnx's own Python reference evaluator on the original model."""
from __future__ import annotations

import warnings
from typing import Any

from ._common import check_outputs, feeds_for


def run(case: Any) -> tuple[str, str]:
    """onnx's own Python reference evaluator on the original model (the peer of our NumPy reference)."""
    from onnx.reference import ReferenceEvaluator

    try:
        ev = ReferenceEvaluator(case.model)
    except Exception as exc:  # noqa: BLE001
        return "unsupported", f"load_error:{type(exc).__name__}"
    try:
        for inputs, expected in case.data_sets:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = ev.run(None, feeds_for(case.model, inputs))
            ok, why = check_outputs(expected, list(got))
            if not ok:
                return "fail", why
        return "pass", ""
    except Exception as exc:  # noqa: BLE001
        return "error", f"runtime_error:{type(exc).__name__}"
