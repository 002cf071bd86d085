"""Peer: onnxruntime running the original model natively (CPU provider)."""
from __future__ import annotations

from typing import Any

from ._common import check_outputs, feeds_for


def run(case: Any) -> tuple[str, str]:
    import onnxruntime as ort

    from translator.ir.ort_run import run_session

    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        sess = ort.InferenceSession(case.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        msg = str(exc)
        code = "unsupported_ir_version" if "IR version" in msg or "ir_version" in msg else \
            "unsupported_opset" if "opset" in msg.lower() else "load_error"
        return "unsupported", code
    try:
        for inputs, expected in case.data_sets:
            got = run_session(sess, feeds_for(case.model, inputs))
            ok, why = check_outputs(expected, got)
            if not ok:
                return "fail", why
        return "pass", ""
    except Exception as exc:  # noqa: BLE001
        return "error", f"runtime_error:{type(exc).__name__}"
