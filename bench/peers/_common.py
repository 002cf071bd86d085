"""Shared helpers of the node-test peers (case data → runtime values, output comparison)."""
from __future__ import annotations

from typing import Any

from translator.run.harness import compare

RTOL, ATOL = 1e-3, 1e-5


def as_value(x: Any) -> Any:
    """Case data → what runtimes take: arrays (TensorProto and numpy scalars converted), lists."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, onnx.SequenceProto):
        return [as_value(t) for t in numpy_helper.to_list(x)]
    if isinstance(x, onnx.OptionalProto):
        return as_value(numpy_helper.to_optional(x))
    if isinstance(x, list):
        return [as_value(t) for t in x]
    if isinstance(x, np.generic):
        return np.asarray(x)
    return x


def feeds_for(model: Any, inputs: list[Any]) -> dict[str, Any]:
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    return dict(zip(names, (as_value(x) for x in inputs)))


def check_outputs(expected: list[Any], got: list[Any], names: list[str] | None = None,
                  ports: list[Any] | None = None) -> tuple[bool, str]:
    """Exactly the expected outputs (count, and names when both sides know them), each of the
    declared dtype or of the dtype the artifact's interface documents (``ports[i].legal``).
    ``(True, "legalized int64→int32")`` is a pass on a documented legalization."""
    if len(got) != len(expected):
        return False, "missing_outputs" if len(got) < len(expected) else "extra_outputs"
    if names is not None and ports is not None and [p.name for p in ports] != list(names):
        return False, "output_names"
    legalized = []
    for i, (e, g) in enumerate(zip(expected, got)):
        d = compare(as_value(e), g, RTOL, ATOL, legalized=ports[i].legal if ports is not None else None)
        if not d.ok:
            return False, "dtype" if d.reason.startswith("dtype") else "mismatch"
        if d.legalized and d.legalized not in legalized:
            legalized.append(d.legalized)
    return True, ("legalized " + ", ".join(legalized)) if legalized else ""
