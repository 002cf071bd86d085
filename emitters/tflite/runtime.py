"""The framework side of the TFLite target: ``runner``/``run`` through ``tf.lite.Interpreter``
(its signature runner), ``save`` (the ``.tflite`` flatbuffer, atomically) and ``load`` (the
written bytes read back). The artifact is the TensorFlow one (``emitters.tensorflow.runtime``)
with its flatbuffer in ``tflite``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from emitters.tensorflow.runtime import TFArtifact, feed_arrays, output_ports, restore_outputs
from translator.table.errors import OpbridgeError, Unsupported

from .registry import NAME


@contextlib.contextmanager
def quiet_stderr() -> Any:
    """The converter's MLIR diagnostics go to file descriptor 2; its errors come back as data."""
    import sys

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def runner(artifact: TFArtifact) -> Callable[[Mapping[str, Any]], list[Any]]:
    """A prepared ``tf.lite.Interpreter`` (built and allocated once) as a callable: model-named
    feeds → outputs in the model's order. Repeated runs (benchmarks) pay no set-up."""
    import warnings

    import tensorflow as tf

    if artifact.tflite is None:
        raise OpbridgeError("bad_model", "tflite: the artifact holds no converted model")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tf.lite.Interpreter's deprecation notice
        try:
            with quiet_stderr():  # the XNNPACK delegate announces itself on stderr
                interp = tf.lite.Interpreter(model_content=artifact.tflite)
        except (RuntimeError, ValueError) as exc:
            _no_flex(exc)
            raise
    signature = interp.get_signature_runner()

    def call(inputs: Mapping[str, Any]) -> list[Any]:
        feeds = feed_arrays(artifact, inputs)
        with quiet_stderr():
            try:
                res = signature(**{k: np.asarray(v) for k, v in feeds.items()})
            except (RuntimeError, ValueError) as exc:  # a select TF op fails to prepare here
                _no_flex(exc)
                if "Invalid tensor size" not in str(exc):
                    raise
                res = _outputs_with_empty(interp, signature)
        return restore_outputs(artifact, [res[p.key] for p in artifact.outputs])

    return call


def _no_flex(exc: BaseException) -> None:
    """A select TF op the interpreter cannot run (no Flex delegate here): the model was written
    as asked (``--allow-select-tf-ops``) and verified as far as the converter goes; a runtime
    that is not here is a reasoned status (``structural_only``), never a failure of the model."""
    if "Flex" in str(exc) or "Select TensorFlow op" in str(exc):
        flex = sorted(set(re.findall(r"\((Flex\w+)\)", str(exc)))) or ["select TF ops"]
        raise Unsupported("tflite", NAME, "structural_only",
                          f"built, converted and saved with {', '.join(flex)}; the TFLite interpreter here "
                          "has no Flex delegate, so it was not run") from None


def _outputs_with_empty(interp: Any, signature: Any) -> dict[str, Any]:
    """The signature's outputs after an invoke whose result fetch failed: the interpreter
    refuses to read a tensor with no elements and no buffer (an empty constant, e.g. a
    zero-length shape vector marked as an output), which is an empty array of its shape."""
    res = {}
    for key, d in signature.get_output_details().items():
        shape = tuple(int(x) for x in d["shape"])
        res[key] = (np.zeros(shape, dtype=d["dtype"]) if 0 in shape
                    else interp.get_tensor(d["index"], signature._subgraph_index))  # noqa: SLF001
    return res


def run(artifact: TFArtifact, inputs: Mapping[str, Any]) -> list[Any]:
    """Run the flatbuffer with ``tf.lite.Interpreter``; outputs in the model's order."""
    return runner(artifact)(inputs)


def save(artifact: TFArtifact, path: str | os.PathLike[str]) -> Path:
    """The ``.tflite`` flatbuffer, written to a temporary file and renamed into place."""
    if artifact.tflite is None:
        raise OpbridgeError("bad_model", "tflite: the artifact holds no converted model")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(artifact.tflite)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return out


def load(path: str | os.PathLike[str], artifact: TFArtifact) -> TFArtifact:
    """``artifact`` holding the written flatbuffer (what the interpreter then runs)."""
    return dataclasses.replace(artifact, tflite=Path(path).read_bytes(), _instance=None)


def version() -> str:
    from translator.compile.target import dist_version

    return dist_version("tensorflow", "tensorflow-cpu") + " (tf.lite)"


__all__ = ["load", "output_ports", "quiet_stderr", "run", "runner", "save", "version"]


#: the builtin compute kernels whose input dtype says integer or float
COMPUTE_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "BATCH_MATMUL", "TRANSPOSE_CONV", "CONV_3D")


def integer_kernels(path: Path) -> Any:
    """The interpreter's compute ops, the dtype of their activation input (int8/uint8/int16:
    an integer kernel) and whether the XNNPACK delegate the interpreter applies by default
    took them: ``integer`` counts the integer compute ops XNNPACK runs (its quantized path)
    and LiteRT's hybrid kernels (XNNPACK has none: int8 weights, activations quantized at run
    time); ``how`` says the rest (integer ops left to the builtin kernels, float ones)."""
    from translator.compile.target import KernelCount

    import warnings

    import tensorflow as tf

    with warnings.catch_warnings(), quiet_stderr():
        warnings.simplefilter("ignore")
        it = tf.lite.Interpreter(model_path=str(path))
        try:
            it.allocate_tensors()  # applies the default delegate (XNNPACK) to the nodes it takes
            delegated: set[int] | None = delegated_nodes(it._get_ops_details())
        except (RuntimeError, ValueError):  # not allocatable without run-time sizes: not inspected
            delegated = None
    types = {t["index"]: np.dtype(t["dtype"]) for t in it.get_tensor_details()}
    ops = [o for o in it._get_ops_details() if o["op_name"] in COMPUTE_OPS]

    def kind(o: dict) -> str:
        ins = [types.get(int(i), np.dtype(np.float32)) for i in o["inputs"] if int(i) >= 0]
        if ins and ins[0].kind in "iu":
            return "integer"
        # a float activation with an int8 weight: LiteRT's hybrid kernel, which quantizes the
        # activation at run time and multiplies in int8 (dynamic-range quantization)
        return "hybrid" if len(ins) > 1 and ins[1] == np.int8 else "float"

    kinds = [kind(o) for o in ops]
    names = {o["op_name"] for o in ops}
    inner = _subgraph_kinds(Path(path))  # the bodies of WHILE/IF (the interpreter lists the main graph's)
    kinds += [k for _, k in inner]
    names |= {name for name, _ in inner}
    n, hybrid, integer = sum(k != "float" for k in kinds), kinds.count("hybrid"), kinds.count("integer")
    how = f"{n} of {len(kinds)} {'/'.join(sorted(names))} read 8/16-bit integers"
    if hybrid:
        how += f" ({hybrid} hybrid: float activations quantized at run time)"
    if inner:
        how += f"; {len(inner)} of the {len(kinds)} in control-flow bodies"
    if delegated is None:
        return KernelCount(n, len(ops), how + "; XNNPACK not inspected (the model allocates only at run-time sizes)")
    in_xnn = sum(1 for o, k in zip(ops, kinds) if k == "integer" and o["index"] in delegated)
    if integer:
        how += f"; XNNPACK runs {in_xnn} of the {integer} integer ones" + (
            f" ({integer - in_xnn} left to the builtin kernels)" if integer > in_xnn else "")
    return KernelCount(in_xnn + hybrid, len(kinds), how)


def _subgraph_kinds(path: Path) -> list[tuple[str, str]]:
    """(op name, ``integer``/``hybrid``/``float``) of each compute op of the model's subgraphs
    after the first (control-flow bodies, which XNNPACK does not take), read from the flatbuffer."""
    from tensorflow.lite.python import schema_py_generated as fb

    from .same_scale import builtin_of

    m = fb.ModelT.InitFromObj(fb.Model.GetRootAsModel(Path(path).read_bytes(), 0))
    names = {v: k for k, v in vars(fb.BuiltinOperator).items() if not k.startswith("_")}
    eight = {fb.TensorType.INT8, fb.TensorType.UINT8, fb.TensorType.INT16}
    out = []
    for g in (m.subgraphs or [])[1:]:
        for op in g.operators or []:
            name = names.get(builtin_of(m.operatorCodes[op.opcodeIndex]), "")
            if name not in COMPUTE_OPS:
                continue
            ins = [g.tensors[int(i)].type for i in op.inputs if int(i) >= 0]
            k = "integer" if ins and ins[0] in eight else (
                "hybrid" if len(ins) > 1 and ins[1] == fb.TensorType.INT8 else "float")
            out.append((name, k))
    return out


def allocated_ops(flat: bytes) -> list[dict] | None:
    """The interpreter's op list (index, op_name, inputs, outputs) once ``allocate_tensors``
    applied the default XNNPACK delegate: the original nodes, then one ``DELEGATE`` node per
    partition it took; None when the model allocates only at run-time sizes."""
    import warnings

    import tensorflow as tf

    with warnings.catch_warnings(), quiet_stderr():
        warnings.simplefilter("ignore")
        try:
            it = tf.lite.Interpreter(model_content=flat)
            it.allocate_tensors()
        except (RuntimeError, ValueError):
            return None
        return op_list(it)


def op_list(interp: Any) -> list[dict]:
    """An allocated interpreter's op list as plain data: index, op_name, inputs, outputs and
    ``compute`` (whether an output holds values: float, or 8/16-bit integers as a quantized
    model computes them; not shape arithmetic on int32/int64)."""
    computed = {int(t["index"]) for t in interp.get_tensor_details() if _computed(np.dtype(t["dtype"]))}
    return [{"index": int(o["index"]), "op_name": o["op_name"], "inputs": [int(i) for i in o["inputs"]],
             "outputs": [int(i) for i in o["outputs"]], "compute": any(int(i) in computed for i in o["outputs"])}
            for o in interp._get_ops_details()]  # noqa: SLF001 - the interpreter's op list


def _computed(dtype: np.dtype) -> bool:
    """A tensor a model computes (float, or the 8/16-bit integers of a quantized one), not
    shape arithmetic (int32/int64 indices and sizes, booleans)."""
    return dtype.kind == "f" or dtype.kind in "iu" and dtype.itemsize <= 2


def delegated_share(ops: list[dict]) -> dict[str, Any]:
    """How much of the main graph the delegate took, from ``allocated_ops``' list (or the
    same list from another LiteRT build): ``nodes`` (the graph's builtin nodes), ``delegated``
    (those inside a delegate partition), ``partitions`` and ``left`` (op name → count of the
    nodes left to LiteRT's builtin kernels); with ``op_list``'s ``compute`` marks, also
    ``compute_nodes`` / ``compute_delegated``: the same over the nodes computing values (float,
    or a quantized model's 8/16-bit integers; the rest is shape arithmetic on int32, which
    XNNPACK does not take in any model)."""
    taken = delegated_nodes(ops)
    nodes = [o for o in ops if o["op_name"] != "DELEGATE"]
    left: dict[str, int] = {}
    for o in nodes:
        if o["index"] not in taken:
            left[o["op_name"]] = left.get(o["op_name"], 0) + 1
    out = {"nodes": len(nodes), "delegated": len(nodes) - sum(left.values()),
           "partitions": sum(1 for o in ops if o["op_name"] == "DELEGATE"), "left": dict(sorted(left.items()))}
    if all("compute" in o for o in nodes):  # the compute alone (XNNPACK has no int32 shape arithmetic)
        compute = [o for o in nodes if o["compute"]]
        out["compute_nodes"] = len(compute)
        out["compute_delegated"] = sum(1 for o in compute if o["index"] in taken)
    return out


def delegation(path: Path) -> dict[str, Any] | None:
    """The written flatbuffer's ``delegated_share`` under the default XNNPACK delegate, with
    ``delegate`` naming it; None when the model allocates only at run-time sizes."""
    ops = allocated_ops(Path(path).read_bytes())
    return None if ops is None else {"delegate": "XNNPACK", **delegated_share(ops)}


def delegated_nodes(ops: list[dict]) -> set[int]:
    """The indices of the nodes a delegate took, from the interpreter's op list after
    ``allocate_tensors``: each ``DELEGATE`` node stands for the original nodes between its
    input and output tensors (walked back from its outputs to its inputs)."""
    producer = {int(t): o for o in ops if o["op_name"] != "DELEGATE" for t in o["outputs"]}
    taken: set[int] = set()
    for d in (o for o in ops if o["op_name"] == "DELEGATE"):
        stop = {int(t) for t in d["inputs"]}
        todo = [int(t) for t in d["outputs"]]
        while todo:
            t = todo.pop()
            o = producer.get(t)
            if t in stop or o is None or o["index"] in taken:
                continue
            taken.add(o["index"])
            todo += [int(i) for i in o["inputs"] if int(i) >= 0]
    return taken
