"""A NumPy evaluator of written Core ML ML programs (the project's own, for Linux).

Core ML itself runs only on macOS, and coremltools' value inference covers some MIL ops
only (no ``conv``, ``pool``, ``lstm``...). This module reads the **saved** ``.mlpackage``
(the ``mlProgram`` protobuf: ``Model_pb2``/``MIL_pb2``, weights through coremltools' own
blob reader ``libmilstoragepython``) and computes every operation of the ``main`` function
with NumPy, one function per MIL op type (``mil_eval_ops`` and ``mil_eval_nn`` register
them in ``OPS``), following MIL's documented semantics (coremltools' op definitions).

What it claims: the numbers of the program as written, after coremltools' passes, not the
IR that produced it. A program with an op type this evaluator lacks is not evaluated at
all: ``missing_ops(program)`` names them and ``evaluate`` raises ``MissingOps`` (the caller
reports ``structural_only`` with the names; never a partial or fake result).

Every result is checked against the output type the program declares (dtype, and shape
where the dims are constant): a disagreement is an evaluator error, never silently cast.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

#: MIL op type → evaluator (filled by mil_eval_ops / mil_eval_nn on import)
OPS: dict[str, Callable[["Args"], Any]] = {}
#: op types whose nested blocks the interpreter runs itself
CONTROL = ("cond", "while_loop")


class MissingOps(Exception):
    """The program uses MIL op types the evaluator does not implement."""

    def __init__(self, ops: list[str]) -> None:
        super().__init__(", ".join(ops))
        self.ops = ops


class EvalError(Exception):
    """An op could not be evaluated (bad inputs, or a result unlike the declared type)."""


def op(*names: str) -> Callable[[Callable[["Args"], Any]], Callable[["Args"], Any]]:
    """Register ``fn`` as the evaluator of the MIL op types ``names``."""

    def deco(fn: Callable[["Args"], Any]) -> Callable[["Args"], Any]:
        for n in names:
            OPS[n] = fn
        return fn

    return deco


# ----------------------------------------------------------------------------- types and values
_NP = {"BOOL": np.bool_, "FLOAT16": np.float16, "FLOAT32": np.float32, "FLOAT64": np.float64,
       "INT8": np.int8, "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "UINT8": np.uint8,
       "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64, "STRING": np.str_}
_BYTES = ("FLOAT16", "INT8", "UINT8", "INT16", "UINT16", "UINT32", "INT4", "UINT4")
_BLOB_READ = {"FLOAT32": "read_float_data", "FLOAT16": "read_fp16_data", "INT8": "read_int8_data",
              "UINT8": "read_uint8_data", "INT16": "read_int16_data", "UINT16": "read_uint16_data",
              "INT32": "read_int32_data", "UINT32": "read_uint32_data"}


@dataclass(frozen=True)
class TType:
    """A tensor type as declared: MIL dtype name and shape (None for a non-constant dim)."""

    dtype: str
    shape: tuple[int | None, ...] | None

    @property
    def np(self) -> Any:
        if self.dtype not in _NP:
            raise EvalError(f"dtype {self.dtype} is not evaluated")
        return _NP[self.dtype]


def _ttype(vt: Any) -> TType | None:
    from coremltools.proto import MIL_pb2

    kind = vt.WhichOneof("type")
    if kind != "tensorType":
        return None
    t = vt.tensorType
    dims = tuple(int(d.constant.size) if d.WhichOneof("dimension") == "constant" else None for d in t.dimensions)
    return TType(MIL_pb2.DataType.Name(t.dataType), dims if len(dims) == t.rank else None)


class _Blobs:
    def __init__(self, root: Path) -> None:
        self.root, self.readers = root, {}

    def read(self, file_name: str, offset: int, dtype: str) -> np.ndarray:
        from coremltools.libmilstoragepython import _BlobStorageReader

        rel = file_name.split("@model_path/", 1)[-1]
        path = (self.root / rel).resolve()
        if self.root.resolve() not in path.parents:
            raise EvalError(f"blob file {file_name!r} is outside the package")
        if str(path) not in self.readers:
            self.readers[str(path)] = _BlobStorageReader(str(path))
        if dtype not in _BLOB_READ:
            raise EvalError(f"blob dtype {dtype} is not evaluated")
        data = np.asarray(getattr(self.readers[str(path)], _BLOB_READ[dtype])(offset))
        return data.view(np.float16) if dtype == "FLOAT16" else data


def _value(v: Any, blobs: _Blobs) -> Any:
    """A MIL ``Value`` (immediate or blob file) → a NumPy array (0-d for scalars) or a str."""
    t = _ttype(v.type)
    if t is None:
        raise EvalError(f"a {v.type.WhichOneof('type')} literal is not evaluated")
    shape = tuple(int(d) for d in t.shape or ())
    if v.WhichOneof("value") == "blobFileValue":
        data = blobs.read(v.blobFileValue.fileName, int(v.blobFileValue.offset), t.dtype)
        return data.reshape(shape).astype(t.np, copy=False)
    tv = v.immediateValue.tensor
    kind = tv.WhichOneof("value")
    if t.dtype == "STRING":
        vals = list(tv.strings.values)
        return vals[0] if shape == () else np.array(vals, dtype=object).reshape(shape)
    if kind == "bytes":
        if t.dtype not in _NP:
            raise EvalError(f"packed {t.dtype} literals are not evaluated")
        return np.frombuffer(tv.bytes.values, dtype=t.np).reshape(shape).copy()
    vals = list(getattr(tv, kind).values) if kind else []
    return np.array(vals, dtype=t.np).reshape(shape)


# ----------------------------------------------------------------------------- the program
@dataclass
class Op:
    type: str
    name: str
    inputs: dict[str, list[tuple[str, Any]]]  # input name → [("var", name) | ("val", literal)]
    outputs: list[tuple[str, TType | None]]
    attrs: dict[str, Any]
    blocks: list["Block"] = field(default_factory=list)


@dataclass
class Block:
    inputs: list[str]
    ops: list[Op]
    outputs: list[str]


@dataclass
class Program:
    inputs: list[tuple[str, TType | None]]
    main: Block
    opset: str


def _block(b: Any, blobs: _Blobs) -> Block:
    ops = []
    for o in b.operations:
        ins = {k: [("var", x.name) if x.WhichOneof("binding") == "name" else ("val", _value(x.value, blobs))
                   for x in arg.arguments] for k, arg in o.inputs.items()}
        attrs = {k: _value(v, blobs) for k, v in o.attributes.items() if k != "name" or o.type == "const"}
        name = o.attributes["name"].immediateValue.tensor.strings.values[0] if "name" in o.attributes else ""
        ops.append(Op(o.type, str(name), ins, [(x.name, _ttype(x.type)) for x in o.outputs], attrs,
                      [_block(x, blobs) for x in o.blocks]))
    return Block([x.name for x in b.inputs], ops, list(b.outputs))


def _spec_path(pkg: Path) -> Path:
    manifest = json.loads((pkg / "Manifest.json").read_text())
    item = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
    return pkg / "Data" / item["path"]


def load(pkg: str | Path) -> Program:
    """The ``main`` function of the ``.mlpackage`` at ``pkg`` as written."""
    from coremltools.proto import Model_pb2

    pkg = Path(pkg)
    spec_path = _spec_path(pkg)
    spec = Model_pb2.Model()
    spec.ParseFromString(spec_path.read_bytes())
    if spec.WhichOneof("Type") != "mlProgram":
        raise EvalError(f"the package holds a {spec.WhichOneof('Type')}, not an ML program")
    fn = spec.mlProgram.functions["main"]
    blobs = _Blobs(spec_path.parent)
    return Program([(x.name, _ttype(x.type)) for x in fn.inputs], _block(fn.block_specializations[fn.opset], blobs),
                   fn.opset)


def _walk(block: Block) -> Any:
    for o in block.ops:
        yield o
        for b in o.blocks:
            yield from _walk(b)


def missing_ops(prog: Program) -> list[str]:
    """The op types of ``prog`` this evaluator does not implement (sorted)."""
    ensure_registered()
    return sorted({o.type for o in _walk(prog.main) if o.type != "const" and o.type not in OPS
                   and o.type not in CONTROL})


def first_op_of(prog: Program, types: list[str]) -> str:
    """The name of the first op of one of ``types`` (to name it in a report)."""
    return next((o.name for o in _walk(prog.main) if o.type in types), "?")


# ----------------------------------------------------------------------------- evaluation
class Args:
    """One op's inputs as NumPy values, its declared outputs, and typed accessors."""

    def __init__(self, o: Op, env: Mapping[str, Any]) -> None:
        self.op = o
        self.vals = {k: [env[r] if kind == "var" else r for kind, r in refs] for k, refs in o.inputs.items()}
        self.outs = [t for _, t in o.outputs]

    def has(self, name: str) -> bool:
        return name in self.vals

    def __call__(self, name: str, default: Any = ...) -> Any:
        if name not in self.vals:
            if default is ...:
                raise EvalError(f"{self.op.type} {self.op.name!r}: input {name!r} is missing")
            return default
        vs = self.vals[name]
        if len(vs) != 1:
            raise EvalError(f"{self.op.type} {self.op.name!r}: input {name!r} has {len(vs)} values")
        return vs[0]

    def many(self, name: str) -> list[Any]:
        return list(self.vals.get(name, []))

    def _scalar(self, name: str, default: Any) -> Any:
        if name not in self.vals and default is not ...:
            return None, default
        return np.asarray(self(name)).reshape(()), None

    def int(self, name: str, default: Any = ...) -> Any:
        v, d = self._scalar(name, default)
        return d if v is None else int(v)

    def float(self, name: str, default: Any = ...) -> Any:
        v, d = self._scalar(name, default)
        return d if v is None else float(v)

    def bool(self, name: str, default: Any = ...) -> Any:
        v, d = self._scalar(name, default)
        return d if v is None else bool(v)

    def ints(self, name: str, default: Any = ...) -> Any:
        if name not in self.vals and default is not ...:
            return default
        return [int(i) for i in np.asarray(self(name)).ravel()]

    def str(self, name: str, default: Any = ...) -> Any:
        if name not in self.vals and default is not ...:
            return default
        v = self(name)
        return v if isinstance(v, str) else str(np.asarray(v).reshape(()))

    def out_dtype(self, i: int = 0) -> Any:
        t = self.outs[i]
        if t is None:
            raise EvalError(f"{self.op.type} {self.op.name!r}: output {i} is not a tensor")
        return t.np


def _conform(o: Op, i: int, value: Any, t: TType | None) -> Any:
    """``value`` as output ``i`` of ``o`` declares it: its dtype (a value that changes is an
    error) and its shape where constant."""
    if t is None:
        return value
    a = np.asarray(value)
    want = t.np
    if a.dtype != want:
        b = a.astype(want)
        if a.dtype.kind in "iub" and np.dtype(want).kind in "iub" and not np.array_equal(b, a):
            raise EvalError(f"{o.type} {o.name!r}: output {i} does not fit {t.dtype}")
        a = b
    if t.shape is not None and (len(t.shape) != a.ndim
                                or any(d is not None and d != s for d, s in zip(t.shape, a.shape))):
        raise EvalError(f"{o.type} {o.name!r}: output {i} has shape {a.shape}, the program declares {t.shape}")
    return a


def _run_block(block: Block, env: dict[str, Any]) -> list[Any]:
    for o in block.ops:
        if o.type == "const":
            res: list[Any] = [o.attrs["val"]]
        elif o.type in CONTROL:
            res = _control(o, env)
        else:
            fn = OPS.get(o.type)
            if fn is None:
                raise MissingOps([o.type])
            try:
                r = fn(Args(o, env))
            except (EvalError, MissingOps):
                raise
            except Exception as exc:  # noqa: BLE001 - name the op that failed
                raise EvalError(f"{o.type} {o.name!r}: {type(exc).__name__}: {exc}") from exc
            res = list(r) if isinstance(r, (tuple, list)) and len(o.outputs) > 1 else [r]
        if len(res) != len(o.outputs):
            raise EvalError(f"{o.type} {o.name!r}: {len(res)} results for {len(o.outputs)} outputs")
        for i, ((name, t), v) in enumerate(zip(o.outputs, res)):
            env[name] = v if o.type in CONTROL and t is None else _conform(o, i, v, t)
    return [env[n] for n in block.outputs]


def _control(o: Op, env: dict[str, Any]) -> list[Any]:
    args = Args(o, env)
    if o.type == "cond":
        taken = o.blocks[0] if bool(np.asarray(args("pred")).reshape(())) else o.blocks[1]
        return _run_block(taken, dict(env))
    # while_loop: blocks[0] = cond(loop_vars) -> bool, blocks[1] = body(loop_vars) -> loop_vars
    state = args.many("loop_vars")
    cond, body = o.blocks
    for _ in range(1 << 20):
        scope = dict(env, **dict(zip(cond.inputs, state)))
        if not bool(np.asarray(_run_block(cond, scope)[0]).reshape(())):
            return state
        scope = dict(env, **dict(zip(body.inputs, state)))
        state = _run_block(body, scope)
    raise EvalError(f"while_loop {o.name!r}: no exit after 2**20 iterations")


def evaluate(prog: Program, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``prog`` on ``feeds`` (Core ML input names): {output name: value}."""
    missing = missing_ops(prog)
    if missing:
        raise MissingOps(missing)
    env: dict[str, Any] = {}
    for name, t in prog.inputs:
        if name not in feeds:
            raise EvalError(f"input {name!r} is not fed")
        env[name] = _conform(Op("input", name, {}, [], {}), 0, np.asarray(feeds[name]), t)
    outs = _run_block(prog.main, env)
    return dict(zip(prog.main.outputs, outs))


def ensure_registered() -> None:
    """Import the op modules (they register in ``OPS``)."""
    import importlib

    for mod in ("mil_eval_ops", "mil_eval_nn"):  # the op evaluators register on import
        importlib.import_module(f"{__package__}.{mod}")


__all__ = ["OPS", "MissingOps", "EvalError", "Program", "load", "evaluate", "missing_ops", "first_op_of",
           "ensure_registered", "op", "Args"]
