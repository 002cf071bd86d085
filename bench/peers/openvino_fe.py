"""Peer: OpenVINO's own ONNX frontend on the original model, compiled on the CPU plugin
with f32 inference precision (the runtime settings of ``emitters/openvino/runtime.py``, so the
two differ only in how the model was translated).

The model goes through the ONNX frontend that ``openvino.convert_model`` dispatches ONNX
input to (``FrontEndManager().load_by_framework("onnx")``: ``load`` + ``convert``),
called directly: ``convert_model``'s wrapper adds nothing for an ONNX model without
options but sends a telemetry event per call from a subprocess (about 0.8 s per case
here, and network traffic). ``OPBRIDGE_OV_CONVERT_MODEL=1`` uses ``convert_model`` anyway.
"""
from __future__ import annotations

import io
import os
from functools import lru_cache
from typing import Any

from ._common import check_outputs, feeds_for


@lru_cache(maxsize=None)
def _frontend() -> Any:
    from openvino.frontend import FrontEndManager

    return FrontEndManager().load_by_framework("onnx")


def convert(model_proto: Any) -> Any:
    data = io.BytesIO(model_proto.SerializeToString())
    if os.environ.get("OPBRIDGE_OV_CONVERT_MODEL") == "1":
        import openvino as ov

        return ov.convert_model(data)
    fe = _frontend()
    return fe.convert(fe.load(data))


def run(case: Any) -> tuple[str, str]:
    from emitters.openvino import compile_model, infer

    try:
        model = convert(case.model)
    except Exception as exc:  # noqa: BLE001 - the frontend's refusal is the answer
        return "unsupported", f"convert_error:{type(exc).__name__}"
    try:
        compiled = compile_model(model)
    except Exception as exc:  # noqa: BLE001
        return "error", f"compile_error:{type(exc).__name__}"
    try:
        for inputs, expected in case.data_sets:
            feeds = feeds_for(case.model, inputs)
            names = [p.get_any_name() if p.get_names() else "" for p in compiled.inputs]
            values = list(feeds.values())
            ordered = [feeds[n] if n in feeds else values[i] for i, n in enumerate(names)]
            got = infer(compiled, ordered)
            ok, why = check_outputs(expected, got)
            if not ok:
                return "fail", why
        return "pass", ""
    except Exception as exc:  # noqa: BLE001
        return "error", f"runtime_error:{type(exc).__name__}"
