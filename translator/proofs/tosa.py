"""TOSA prover: a cell's snippet is the body of a one-op MLIR TOSA function; tosa-opt (from the
tosa-tools wheel) serializes it to a TOSA flatbuffer and Arm's TOSA reference model runs it.

The runtime lives in its own venv, ``.venv-tosa`` (tools/setup_tosa.sh: the wheel's
flatbuffers/numpy pins clash with TensorFlow's), driven through one persistent worker process
(translator/proofs/_tosa_runner.py) per test session.

Snippet (one line, translator/table/snippets.py placeholders): MLIR TOSA statements separated by
``;``, each ``[%r[, %s] =] tosa.<op> %operand, ... [{{attr-dict}}] [-> <element type>]``, without
the type signature: the prover writes it. ``{Name}`` is the SSA value of input ``Name``
(``%Name``); ``{@attr}`` is the attribute as an MLIR literal (a float in exponent form, a list
comma-separated without brackets so it fits ``array<i64: {@x}>`` and ``dense<[{@x}]>``, a
negative ``axis`` made non-negative against the first input's rank, as TOSA requires); ``{$T}``
is the MLIR element type (f32, f16, i32, i1...). The outputs are the results of the last
statement, or of a final ``yield %a, %b``.

What the prover adds, as any TOSA legalization must: the statements' types (result ranks and
element types per op; dimensions are left dynamic and resolved by tosa-tools' ``infer_shapes``
from the input shapes); constant inputs (initializers) as ``tosa.const``, or ``tosa.const_shape``
where an op takes a shape operand; int64 inputs as int32 (TOSA has no int64 in its base
profiles), and int32 results widened back to a declared int64 output (argmax indices);
operands of lower rank reshaped to the rank of the others for the broadcasting element-wise
ops (TOSA broadcasts only between equal ranks); and the zero ``shift`` / zero-point / pad-value
operands TOSA 1.0 requires when the snippet leaves them out. The proof checks that the
serialized flatbuffer contains every operator the cell names.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from . import ProofError
from ..table import snippets

API = "tosa"
EXTRA = "tosa"

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("OPBRIDGE_TOSA_VENV", ROOT / ".venv-tosa"))
RUNNER = Path(__file__).with_name("_tosa_runner.py")

ELEM = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "i32", "int16": "i16", "int8": "i8",
        "bool": "i1", "int64": "i64", "uint8": "ui8", "uint16": "ui16", "float64": "f64"}
NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i16": np.int16, "i8": np.int8, "i1": np.bool_}


# ----------------------------------------------------------------------------- the worker
def _python() -> Path:
    return VENV / "bin" / "python"


def missing() -> str | None:
    if not _python().exists():
        return f"no TOSA runtime venv at {VENV}: run tools/setup_tosa.sh"
    if not list(VENV.glob("lib/python*/site-packages/tosa_reference_model")):
        return f"tosa-tools is not installed in {VENV}: run tools/setup_tosa.sh"
    return None


def version() -> str:
    found = sorted(VENV.glob("lib/python*/site-packages/tosa_tools-*.dist-info"))
    if not found:
        return "tosa-tools"
    return "tosa-tools " + found[-1].name[len("tosa_tools-"):-len(".dist-info")]


_proc: subprocess.Popen | None = None


def _ask(req: dict) -> dict:
    global _proc
    for attempt in (0, 1):
        if _proc is None or _proc.poll() is not None:
            why = missing()
            if why:
                raise ProofError(why)
            # PATH without gdb: the reference model's crash handler would attach a debugger
            env = {**os.environ, "PATH": str(VENV / "bin")}
            _proc = subprocess.Popen([str(_python()), str(RUNNER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env, cwd=tempfile.gettempdir())
            atexit.register(_stop)
        try:
            _proc.stdin.write(json.dumps(req) + "\n")
            _proc.stdin.flush()
            line = _proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if line:
            return json.loads(line)
        _stop()
    raise ProofError("the TOSA worker died")


def _stop() -> None:
    global _proc
    if _proc is not None:
        try:
            _proc.stdin.close()
            _proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            _proc.kill()
        _proc = None


@lru_cache(maxsize=None)
def resolves(name: str) -> bool:
    if not name.startswith("tosa."):
        return False
    ans = _ask({"cmd": "resolves", "name": name})
    return bool(ans.get("ok") and ans.get("resolves"))


def provable(op: Any, cell: Any) -> bool:
    return bool(cell.snippet) and op.signature is not None


# ----------------------------------------------------------------------------- types
class Ty:
    """A tensor type (rank, static shape or None, element type) or a ``!tosa.shape<rank>``."""

    def __init__(self, rank: int, elem: str, shape: tuple[int, ...] | None = None, is_shape: bool = False):
        self.rank, self.elem, self.shape, self.is_shape = rank, elem, shape, is_shape

    def mlir(self) -> str:
        if self.is_shape:
            return f"!tosa.shape<{self.rank}>"
        dims = self.shape if self.shape is not None else ("?",) * self.rank
        return "tensor<" + "".join(f"{d}x" for d in dims) + self.elem + ">"


def _tensor_literal(t: str) -> Ty:
    m = re.fullmatch(r"tensor<((?:\d+x)*)(\w+)>", t.strip())
    if not m:
        raise ProofError(f"cannot read the constant type {t!r}")
    shape = tuple(int(d) for d in m.group(1).split("x") if d)
    return Ty(len(shape), m.group(2), shape)


ELTWISE = {"add", "sub", "mul", "maximum", "minimum", "pow", "select", "equal", "greater", "greater_equal",
           "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "intdiv",
           "arithmetic_right_shift", "logical_left_shift", "logical_right_shift"}
CHAINED = {"add", "maximum", "minimum"}
BOOL_OUT = {"equal", "greater", "greater_equal"}
SHAPE_OPERANDS = {"reshape": (1,), "tile": (1,), "pad": (1,), "slice": (1, 2), "resize": (1, 2, 3)}
RANK4 = {"conv2d", "depthwise_conv2d", "transpose_conv2d", "avg_pool2d", "max_pool2d", "resize"}


def _results(op: str, args: list[Ty], attrs: str, explicit: str | None, nres: int) -> list[Ty]:
    first = args[0] if args else None
    elem = explicit
    if op == "const":
        m = re.search(r":\s*(tensor<[^>]*>)\s*$", attrs.strip().rstrip("}").strip())
        if not m:
            raise ProofError("tosa.const needs `values = dense<...> : tensor<...>`")
        return [_tensor_literal(m.group(1))]
    if op == "const_shape":
        m = re.search(r"tensor<(\d+)xindex>", attrs)
        if not m:
            raise ProofError("tosa.const_shape needs `values = dense<[...]> : tensor<Nxindex>`")
        return [Ty(int(m.group(1)), "index", is_shape=True)]
    if first is None:
        raise ProofError(f"tosa.{op} has no operands")
    if op in ELTWISE:
        rank = max(a.rank for a in args[:3] if not a.is_shape)
        base = args[1] if op == "select" else first
        return [Ty(rank, elem or ("i1" if op in BOOL_OUT else base.elem))]
    if op == "argmax":
        return [Ty(first.rank - 1, elem or "i32")]
    if op == "reshape":
        return [Ty(args[1].rank, elem or first.elem)]
    if op in ("matmul", "gather", "scatter"):
        e = first.elem if op != "matmul" else {"i8": "i32", "i16": "i64"}.get(first.elem, first.elem)
        return [Ty(3, elem or e)]
    if op in RANK4:
        return [Ty(4, elem or first.elem)]
    if op == "conv3d":
        return [Ty(5, elem or first.elem)]
    if op in ("rfft2d", "fft2d"):
        return [Ty(3, elem or first.elem), Ty(3, elem or first.elem)]
    if op == "table":
        return [Ty(first.rank, elem or {"i16": "i32"}.get(first.elem, first.elem))]
    if op == "select":
        return [Ty(args[1].rank, elem or args[1].elem)]
    return [Ty(first.rank, elem or first.elem)] * max(nres, 1)


def _zero(elem: str) -> str:
    return "0.0" if elem.startswith(("f", "bf")) else "0"


# ----------------------------------------------------------------------------- building the module
STMT = re.compile(r"^\s*(?:(?P<res>%\w+(?:\s*,\s*%\w+)*)\s*=\s*)?(?P<op>tosa\.\w+)(?P<rest>.*)$")


def _split_rest(rest: str) -> tuple[list[str], str, str | None]:
    rest = rest.strip()
    operands = []
    m = re.match(r"^(%\w+(?:\s*,\s*%\w+)*)", rest)
    if m:
        operands = [x.strip() for x in m.group(1).split(",")]
        rest = rest[m.end():].strip()
    attrs = ""
    if rest.startswith("{"):
        depth = 0
        for i, ch in enumerate(rest):
            depth += ch == "{"
            depth -= ch == "}"
            if depth == 0:
                attrs, rest = rest[: i + 1], rest[i + 1:].strip()
                break
    explicit = None
    if rest.startswith("->"):
        explicit = rest[2:].strip()
        rest = ""
    if rest:
        raise ProofError(f"cannot read {rest!r} in the snippet statement")
    return operands, attrs, explicit


def _attr_literal(name: str, value: Any, rank: int) -> str:
    if value is None:
        raise ProofError(f"attribute {name!r} has no value")
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        if name == "axis" and value < 0:
            value += rank
        return str(value)
    if isinstance(value, float):
        return format(value, ".9e")
    if isinstance(value, (list, tuple)):
        return ", ".join(_attr_literal(name if name != "axes" else "axis", v, rank) for v in value)
    if isinstance(value, str):
        return value
    raise ProofError(f"attribute {name!r}: cannot render {value!r}")


def _dense(arr: np.ndarray) -> str:
    flat = arr.ravel().tolist()
    if arr.dtype.kind == "b":
        vals = ["true" if v else "false" for v in flat]
    elif arr.dtype.kind == "f":
        vals = [format(float(v), ".9e") for v in flat]
    else:
        vals = [str(int(v)) for v in flat]
    if arr.ndim == 0:
        return vals[0]

    def nest(flat: list[str], shape: tuple[int, ...]) -> str:
        if len(shape) == 1:
            return "[" + ", ".join(flat) + "]"
        step = len(flat) // shape[0] if shape[0] else 0
        return "[" + ", ".join(nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"

    return nest(vals, arr.shape)


def _np_input(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype == np.int64:
        return x.astype(np.int32)
    return x


def build(op: Any, cell: Any, sample: Any, out_dtypes: list[np.dtype] | None = None) -> tuple[str, list[np.ndarray]]:
    """The MLIR module and the graph inputs, in order."""
    sig = op.signature
    smp_inputs = list(sample.inputs)
    ports = {}
    k = 0
    for p in sig.inputs:
        if p.variadic:
            ports[p.name] = [i for i in range(k, len(smp_inputs))]
            k = len(smp_inputs)
        else:
            ports[p.name] = [k] if k < len(smp_inputs) else []
            k += 1
    # dtype bindings for {$T}
    types: dict[str, str] = {}
    for p in sig.inputs:
        for i in ports.get(p.name, []):
            if smp_inputs[i] is not None:
                dt = _np_input(smp_inputs[i]).dtype.name
                types.setdefault(p.name, dt)
                types.setdefault(p.type, dt)
    for p, dt in zip(sig.outputs, out_dtypes or []):
        types.setdefault(p.name, np.dtype(dt).name)
        types.setdefault(p.type, np.dtype(dt).name)
    first = next((x for x in smp_inputs if x is not None), None)
    rank0 = np.ndim(first) if first is not None else 0

    def name_of(i: int, p: str, n: int) -> str:
        return f"%{p}" if n == 1 else f"%{p}_{i}"

    def dtype(name: str) -> str:
        if name not in types:
            raise ProofError(f"the dtype {name!r} is unbound")
        return ELEM[types[name]]

    def value(name: str, variadic: bool) -> str:
        idx = [i for i in ports.get(name, []) if smp_inputs[i] is not None]
        if not idx:
            raise ProofError(f"input {name!r} is absent from the sample")
        return ", ".join(name_of(j, name, len(ports[name])) for j, _ in enumerate(idx))

    body = snippets.substitute(
        cell.snippet, lambda name: _attr_literal(name, snippets.attr_value(_FakeNode(sample.attrs), op, name), rank0),
        dtype, value)
    stmts = [s.strip() for s in body.split(";") if s.strip()]

    # which constant inputs feed a shape operand
    const_idx = set(sample.const)
    shape_vals: set[str] = set()
    parsed = []
    for s in stmts:
        if s.startswith("yield"):
            parsed.append(("yield", [x.strip() for x in s[5:].split(",") if x.strip()], None, "", None))
            continue
        m = STMT.match(s)
        if not m:
            raise ProofError(f"cannot read the snippet statement {s!r}")
        res = [x.strip() for x in (m.group("res") or "").split(",") if x.strip()]
        operands, attrs, explicit = _split_rest(m.group("rest"))
        opname = m.group("op")[5:]
        for pos in SHAPE_OPERANDS.get(opname, ()):
            if pos < len(operands):
                shape_vals.add(operands[pos])
        parsed.append((opname, operands, res, attrs, explicit))

    env: dict[str, Ty] = {}
    lines: list[str] = []
    args: list[str] = []
    feeds: list[np.ndarray] = []
    counter = [0]

    def fresh() -> str:
        counter[0] += 1
        return f"%_t{counter[0]}"

    def const(arr: np.ndarray, as_shape: bool = False) -> str:
        v = fresh()
        return _emit_const(v, arr, as_shape)

    def _emit_const(v: str, arr: np.ndarray, as_shape: bool) -> str:
        arr = _np_input(arr)
        if as_shape:
            vals = [int(x) for x in np.ravel(arr)]
            n = len(vals)
            lines.append(f"{v} = tosa.const_shape {{values = dense<[{', '.join(map(str, vals))}]> : tensor<{n}xindex>}}"
                         f" : () -> !tosa.shape<{n}>")
            env[v] = Ty(n, "index", is_shape=True)
            return v
        ty = Ty(arr.ndim, ELEM[arr.dtype.name], tuple(arr.shape))
        lines.append(f'{v} = "tosa.const"() <{{values = dense<{_dense(arr)}> : {ty.mlir()}}}> : () -> {ty.mlir()}')
        env[v] = ty
        return v

    for p in sig.inputs:
        idx = ports.get(p.name, [])
        for j, i in enumerate(idx):
            x = smp_inputs[i]
            if x is None:
                continue
            v = name_of(j, p.name, len(idx))
            if i in const_idx:
                _emit_const(v, np.asarray(x), v in shape_vals)
            else:
                x = _np_input(x)
                ty = Ty(x.ndim, ELEM[x.dtype.name], tuple(x.shape))
                args.append(f"{v}: {ty.mlir()}")
                env[v] = ty
                feeds.append(x)

    outs: list[str] = []
    for opname, operands, res, attrs, explicit in parsed:
        if opname == "yield":
            outs = operands
            continue
        for v in operands:
            if v not in env:
                raise ProofError(f"{v} is not defined before tosa.{opname}")
        operands = list(operands)
        if opname in CHAINED and len(operands) > 2:  # a variadic sum/max/min: a chain of binary ops
            acc = operands[0]
            for v in operands[1:-1]:
                nv = fresh()
                lines.append(f"{nv} = tosa.{opname} {acc}, {v} : ({env[acc].mlir()}, {env[v].mlir()}) -> {env[acc].mlir()}")
                env[nv] = env[acc]
                acc = nv
            operands = [acc, operands[-1]]
        tys = [env[v] for v in operands]
        if opname in ELTWISE:
            n = 3 if opname == "select" else 2
            r = max(t.rank for t in tys[:n])
            for i in range(min(n, len(operands))):
                t = tys[i]
                if t.rank < r:
                    shp = (1,) * (r - t.rank) + (t.shape if t.shape is not None else ())
                    if t.shape is None and t.rank != 0:
                        raise ProofError(f"cannot broadcast {operands[i]} of unknown shape to rank {r}")
                    s = const(np.asarray(shp, np.int64), as_shape=True)
                    nv = fresh()
                    nt = Ty(r, t.elem, shp)
                    lines.append(f"{nv} = tosa.reshape {operands[i]}, {s} : ({t.mlir()}, {env[s].mlir()}) -> {nt.mlir()}")
                    env[nv] = nt
                    operands[i], tys[i] = nv, nt
        # the zero operands TOSA 1.0 requires
        e0 = tys[0].elem if tys else "f32"
        if opname == "mul" and len(operands) == 2:
            operands.append(const(np.zeros((1,), np.int8)))
        elif opname == "negate" and len(operands) == 1:
            z = np.zeros((1,), NP.get(e0, np.float32))
            operands += [const(z), const(z)]
        elif opname == "matmul" and len(operands) == 2:
            z0 = np.zeros((1,), NP.get(e0, np.float32))
            z1 = np.zeros((1,), NP.get(tys[1].elem, np.float32))
            operands += [const(z0), const(z1)]
        elif opname in ("conv2d", "depthwise_conv2d", "conv3d", "transpose_conv2d"):
            if len(operands) == 2:
                operands.append(const(np.zeros((1,), NP.get(e0, np.float32))))
            if len(operands) == 3:
                operands += [const(np.zeros((1,), NP.get(e0, np.float32))),
                             const(np.zeros((1,), NP.get(tys[1].elem, np.float32)))]
        elif opname == "avg_pool2d" and len(operands) == 1:
            z = np.zeros((1,), NP.get(e0, np.float32))
            operands += [const(z), const(z)]
        elif opname == "pad" and len(operands) == 2:
            operands.append(const(np.zeros((1,), NP.get(e0, np.float32))))
        tys = [env[v] for v in operands]
        rtys = _results(opname, tys, attrs, explicit, len(res))
        if not res:
            res = [fresh() for _ in rtys]
        for v, t in zip(res, rtys):
            env[v] = t
        sig_in = ", ".join(t.mlir() for t in tys)
        sig_out = ", ".join(t.mlir() for t in rtys[: len(res)])
        if len(res) > 1:
            sig_out = f"({sig_out})"
        lhs = ", ".join(res)
        if opname == "const":  # no custom assembly form: the generic one
            lines.append(f'{lhs} = "tosa.const"() <{attrs}> : () -> {sig_out}')
        else:
            lines.append(f"{lhs} = tosa.{opname} {', '.join(operands)} {attrs} : ({sig_in}) -> {sig_out}".replace("  ", " "))
        outs = res
    if not outs:
        raise ProofError("the snippet has no statement")
    rtypes = ", ".join(env[v].mlir() for v in outs)
    text = (f"func.func @main({', '.join(args)}) -> ({rtypes}) {{\n  " + "\n  ".join(lines)
            + f"\n  return {', '.join(outs)} : {rtypes}\n}}\n")
    return text, feeds


class _FakeNode:
    def __init__(self, attrs: dict):
        self.attrs = attrs


# ----------------------------------------------------------------------------- running
def _expected_dtypes(op: Any, sample: Any) -> list[np.dtype]:
    from .. import reference

    fn = reference.get(op.id)
    if fn is None:
        return []
    try:
        with np.errstate(all="ignore"):
            out = fn(*sample.inputs, **sample.attrs)
    except Exception:  # noqa: BLE001 - only the dtypes are wanted
        return []
    outs = out if isinstance(out, tuple) else (out,)
    return [np.asarray(o).dtype for o in outs]


def run(op: Any, cell: Any, sample: Any) -> list[np.ndarray]:
    declared = _expected_dtypes(op, sample)
    text, feeds = build(op, cell, sample, declared)
    with tempfile.TemporaryDirectory(prefix="opbridge-tosa-") as d:
        ip, opath = Path(d) / "in.npz", Path(d) / "out.npz"
        np.savez(ip, **{f"i{k}": x for k, x in enumerate(feeds)})
        ans = _ask({"cmd": "run", "mlir": text, "inputs": str(ip), "out": str(opath)})
        if not ans.get("ok"):
            raise ProofError(f"{ans.get('error')}\n{text}")
        ran = set(ans.get("ops", []))
        absent = [n for n in cell.names if n.startswith("tosa.") and n[5:].upper() not in ran]
        if absent:
            raise ProofError(f"the program did not run {absent} (ran {sorted(ran)})")
        with np.load(opath) as z:
            got = [z[f"o{k}"] for k in range(len(z.files))]
    for k, g in enumerate(got):
        if k < len(declared) and declared[k] == np.int64 and g.dtype == np.int32:
            got[k] = g.astype(np.int64)  # TOSA's index type is int32 (argmax)
    return got
