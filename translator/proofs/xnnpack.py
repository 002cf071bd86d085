"""XNNPACK through LiteRT: the op's one-op model is built with opbridge's own TFLite target,
loaded in LiteRT's interpreter with its default XNNPACK delegate, and run there.

The proof that XNNPACK (not a builtin TFLite kernel) computed the result: after the
delegate is applied, every graph output must be produced by a ``DELEGATE`` node whose
inputs are graph inputs, constants or other delegate outputs — no builtin kernel is left
on the path. A cell's ``attrs.tflite`` names the TFLite op(s) the XNNPACK node is reached
through; the converted model must contain one of them. The cell's native name is an
``xnn_define_*`` function of XNNPACK's subgraph API (``_xnnpack_names``, from the public header).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import ProofError, dist_version, importable

API = "xnnpack"
EXTRA = "litert"
_DIST = "ai-edge-litert"


def missing() -> str | None:
    return (importable("ai_edge_litert.interpreter", hint="LiteRT carries the XNNPACK delegate: pip install 'opbridge[litert]'")
            or importable("tensorflow", hint="opbridge's TFLite target builds the one-op model: pip install 'opbridge[tf]'"))


def version() -> str:
    return dist_version(_DIST) or "ai-edge-litert (unknown version)"


def resolves(name: str) -> bool:
    from ._xnnpack_names import DEFINES

    return name in DEFINES


#: the TFLite builtins LiteRT's XNNPACK delegate takes (its VisitNode switch:
#: https://github.com/google-ai-edge/LiteRT/blob/f67457790c9c2ab67347d6fe53270e8d3df20868/tflite/delegates/xnnpack/xnnpack_delegate.cc)
DELEGATED = frozenset({
    "ABS", "CEIL", "COS", "DEQUANTIZE", "ELU", "EXP", "FLOOR", "GELU", "HARD_SWISH", "LEAKY_RELU", "LOGISTIC", "LOG",
    "NEG", "QUANTIZE", "RELU", "RELU6", "RELU_N1_TO_1", "ROUND", "RSQRT", "SIN", "SQRT", "SQUARE", "TANH",
    "ADD", "DIV", "MAXIMUM", "MINIMUM", "MUL", "PRELU", "SQUARED_DIFFERENCE", "SUB",
    "AVERAGE_POOL_2D", "BATCH_MATMUL", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "DEPTH_TO_SPACE", "EXPAND_DIMS",
    "FULLY_CONNECTED", "MAX_POOL_2D", "REDUCE_MIN", "REDUCE_MAX", "SUM", "MEAN", "PAD", "RESHAPE", "RESIZE_BILINEAR",
    "SLICE", "SOFTMAX", "SPACE_TO_DEPTH", "SPLIT", "STRIDED_SLICE", "TRANSPOSE", "TRANSPOSE_CONV",
})

_BUILT: dict = {}


def _build(op: Any, cell: Any, sample: Any) -> Any:
    """opbridge's TFLite artifact for the case (memoized on the op, the static inputs and the sample's bytes)."""
    from translator.compile import target as targets
    from translator.table.errors import OpbridgeError
    from translator.run.harness import single_op_model
    from translator.compile.pipeline import compile

    const = tuple(sorted(set(sample.const) | _static(cell, sample)))
    key = (op.id, const, tuple(None if x is None else (np.asarray(x).dtype.str, np.asarray(x).shape, np.asarray(x).tobytes())
                               for x in sample.inputs), repr(sorted(sample.attrs.items())))
    if key not in _BUILT:
        model, feeds = single_op_model(op.id, sample.inputs, sample.attrs, n_outputs=_n_outputs(op, sample), const=const)
        try:
            art = compile(model, targets.get("tflite")).artifact
        except OpbridgeError as exc:
            _BUILT[key] = (None, feeds, f"opbridge's TFLite target cannot build {op.id}: {exc}")
        else:
            _BUILT[key] = (art, feeds, None if art.tflite is not None else "the TFLite target produced no flatbuffer")
    return _BUILT[key]


def _model_ops(tflite: bytes) -> list[str]:
    from ai_edge_litert import schema_py_generated as fb

    m = fb.Model.GetRootAsModel(tflite, 0)
    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    codes = [max(m.OperatorCodes(i).BuiltinCode(), m.OperatorCodes(i).DeprecatedBuiltinCode()) for i in range(m.OperatorCodesLength())]
    sg = m.Subgraphs(0)
    return [names.get(codes[sg.Operators(i).OpcodeIndex()], "?") for i in range(sg.OperatorsLength())]


def provable(op: Any, cell: Any) -> bool:
    """Whether opbridge's TFLite target turns the op's float32 sample into a model the delegate
    can take whole (every builtin in DELEGATED, at least one op; a native cell's ``attrs.tflite``
    among them). Cells whose route stays on builtin kernels are not proven here (their notes say why)."""
    if cell.status not in ("native", "composite") or missing() is not None:
        return False
    want = _tflite_ops(cell)
    if cell.status == "native" and not want:
        return False
    from translator.run.samples import evaluated

    try:
        got = evaluated(op, np.float32)
    except Exception:  # noqa: BLE001 - a sample the reference rejects is test_ops' finding
        return False
    if got is None:
        return False
    art, _, why = _build(op, cell, got[0])
    if why is not None:
        return False
    ops = _model_ops(art.tflite)
    return bool(ops) and set(ops) <= DELEGATED and (not want or bool(want & set(ops)))


def _tflite_ops(cell: Any) -> set[str]:
    v = (cell.attrs or {}).get("tflite")
    if v is None:
        return set()
    return {str(x) for x in (v if isinstance(v, (list, tuple)) else [v])}


def _static(cell: Any, sample: Any) -> set[int]:
    """The inputs the cell says XNNPACK needs as constants (``attrs.static_inputs``: weights,
    biases, slopes — what a real model carries as initializers)."""
    idx = (cell.attrs or {}).get("static_inputs") or ()
    return {int(i) for i in idx if int(i) < len(sample.inputs) and sample.inputs[int(i)] is not None}


def _n_outputs(op: Any, sample: Any) -> int:
    """How many outputs the case compares: the sample's count, else what the reference returns."""
    if sample.outputs is not None:
        return int(sample.outputs)
    from translator import reference

    with np.errstate(all="ignore"):
        out = reference.get(op.id)(*sample.inputs, **sample.attrs)
    return len(out) if isinstance(out, tuple) else 1


def delegated(interp: Any) -> tuple[list[str], int]:
    """(the model's builtin op names, number of XNNPACK delegate nodes); raises ProofError
    unless every graph output comes from a delegate node fed only by graph inputs,
    constants or other delegate nodes."""
    ops = interp._get_ops_details()
    builtin = [o for o in ops if o["op_name"] != "DELEGATE"]
    dele = [o for o in ops if o["op_name"] == "DELEGATE"]
    if not dele:
        raise ProofError("XNNPACK did not take any node: the model ran on builtin TFLite kernels ("
                         + ", ".join(sorted({o["op_name"] for o in builtin})) + ")")
    by_delegate = {int(t) for o in dele for t in o["outputs"]}
    by_builtin = {int(t) for o in builtin for t in o["outputs"]} - by_delegate
    graph_out = {int(d["index"]) for d in interp.get_output_details()}
    left = sorted(graph_out - by_delegate)
    if left:
        raise ProofError(f"graph output tensor(s) {left} stay on builtin kernels, not the XNNPACK delegate "
                         f"(model ops: {', '.join(o['op_name'] for o in builtin)})")
    fed = sorted({int(t) for o in dele for t in o["inputs"] if int(t) in by_builtin})
    if fed:
        raise ProofError(f"the XNNPACK partition is fed by builtin kernels (tensors {fed})")
    return [o["op_name"] for o in builtin], len(dele)


def run(op: Any, cell: Any, sample: Any) -> list[np.ndarray]:
    import warnings

    from emitters.tensorflow.runtime import feed_arrays, restore_outputs
    from emitters.tflite.runtime import quiet_stderr
    from ai_edge_litert import interpreter as litert

    art, feeds, why = _build(op, cell, sample)
    if why is not None:
        raise ProofError(why)
    with warnings.catch_warnings(), quiet_stderr():  # the delegate announces itself on stderr
        warnings.simplefilter("ignore")
        interp = litert.Interpreter(model_content=art.tflite,
                                    experimental_op_resolver_type=litert.OpResolverType.AUTO)
        interp.allocate_tensors()  # applies the default XNNPACK delegate
    names, _ = delegated(interp)
    want = _tflite_ops(cell)
    if want and not want & set(names):
        raise ProofError(f"the cell reaches XNNPACK through {sorted(want)}, but the model holds {names}")
    runner = interp.get_signature_runner()
    fa = feed_arrays(art, feeds)
    with quiet_stderr():
        res = runner(**{k: np.asarray(v) for k, v in fa.items()})
    return restore_outputs(art, [res[p.key] for p in art.outputs])
