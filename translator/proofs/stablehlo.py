"""StableHLO prover: a cell's snippet (a JAX expression over ``lax.`` / ``jnp.``) is lowered
with ``jax.jit(...).lower`` to a StableHLO module, every name the cell gives must appear as an
op of that module (the proof that the named StableHLO op is what runs), then the module is
compiled by XLA and run on the CPU.

Snippet placeholders (translator/snippets.py): a graph input is a traced argument; a constant
input (an initializer: shapes, axes, indices) is a NumPy array, static at trace time like an
attribute of the StableHLO op; ``{@attr}`` is the attribute's Python literal; ``{$T}`` is the
``jnp`` dtype. Programs run with 64-bit types enabled only inside the run (ONNX's int64
outputs), restored afterwards.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import numpy as np

from . import ProofError, dist_version
from .. import snippets
from ..render import literal

API = "stablehlo"
EXTRA = "stablehlo"


def missing() -> str | None:
    try:
        import jax  # noqa: F401
        from jaxlib.mlir.dialects import stablehlo  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means the runtime is absent
        return f"jax/jaxlib not installed ({type(e).__name__}: {e}); pip install jax jaxlib"
    return None


def version() -> str:
    return dist_version("jaxlib") or "jaxlib"


@lru_cache(maxsize=1)
def _dialect_ops() -> frozenset[str]:
    from jaxlib.mlir.dialects import stablehlo

    out = set()
    for n in dir(stablehlo):
        name = getattr(getattr(stablehlo, n), "OPERATION_NAME", None)
        if isinstance(name, str) and name.startswith("stablehlo."):
            out.add(name)
    return frozenset(out)


def resolves(name: str) -> bool:
    return name in _dialect_ops()


def provable(op: Any, cell: Any) -> bool:
    return bool(cell.snippet) and op.signature is not None


_DTYPES = {"float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "bfloat16",
           "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8",
           "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "bool": "bool_"}


def _source(op: Any, cell: Any, sample: Any) -> tuple[str, list[str], list[Any], dict[str, Any]]:
    """The snippet as a lambda's source, its traced argument names and values, and the
    namespace of constants."""
    sig = op.signature
    inputs = list(sample.inputs)
    names: dict[int, str] = {}
    args: list[str] = []
    vals: list[Any] = []
    consts: dict[str, Any] = {}
    for i, x in enumerate(inputs):
        if x is None:
            continue
        if i in sample.const:
            names[i] = f"c{i}"
            consts[f"c{i}"] = np.asarray(x)
        else:
            names[i] = f"x{i}"
            args.append(f"x{i}")
            vals.append(np.asarray(x))
    ports: dict[str, list[int | None]] = {}
    k = 0
    for p in sig.inputs:
        if p.variadic:
            ports[p.name] = list(range(k, len(inputs)))
            k = len(inputs)
        else:
            ports[p.name] = [k if k < len(inputs) else None]
            k += 1
    dtypes: dict[str, str] = {}
    for p in sig.inputs:
        idx = ports[p.name]
        i = idx[0] if idx else None
        if i is not None and i < len(inputs) and inputs[i] is not None:
            d = np.asarray(inputs[i]).dtype.name
            dtypes.setdefault(p.name, d)
            if p.type in sig.types:
                dtypes.setdefault(p.type, d)

    def val(i: int | None) -> str:
        if i is None or i >= len(inputs) or inputs[i] is None:
            return "None"
        return names[i]

    def sub(m: re.Match[str]) -> str:
        whole = m.group(0)
        if whole == "{{":
            return "{"
        if whole == "}}":
            return "}"
        sigil, name, variadic = m.group(1), m.group(2), m.group(3)
        if sigil == "@":
            if name in sample.attrs:
                v = sample.attrs[name]
            else:
                a = sig.attribute(name)
                v = a.default if a is not None else None
            if isinstance(v, np.ndarray):
                v = v.tolist()
            return str(literal(v))
        if sigil == "$":
            if name not in dtypes:
                raise ProofError(f"{op.id}: the dtype {name!r} is unbound in this sample")
            return "jnp." + _DTYPES[dtypes[name]]
        idx = ports.get(name, [None])
        if variadic:
            return ", ".join(val(i) for i in idx)
        return val(idx[0] if idx else None)

    body = snippets.PLACEHOLDER.sub(sub, cell.snippet)
    return body, args, vals, consts


def _namespace() -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    return {"jax": jax, "jnp": jnp, "lax": lax, "np": np}


def _op_names(text: str) -> set[str]:
    return set(re.findall(r"\b(stablehlo\.[a-z_0-9]+)\b", text))


def lower(op: Any, cell: Any, sample: Any) -> tuple[Any, str, list[Any]]:
    """The jitted snippet lowered for ``sample``: (lowered, StableHLO text, argument values)."""
    import jax

    body, args, vals, consts = _source(op, cell, sample)
    ns = _namespace()
    ns.update(consts)
    try:
        fn = eval(compile(f"lambda {', '.join(args)}: {body}", f"<{op.id} stablehlo snippet>", "eval"), ns)  # noqa: S307
        lowered = jax.jit(fn).lower(*vals)
        text = lowered.as_text()
    except Exception as e:  # noqa: BLE001 - the runtime's refusal is the proof's failure
        raise ProofError(f"{op.id}: {body!r} does not lower: {type(e).__name__}: {e}") from e
    return lowered, text, vals


def run(op: Any, cell: Any, sample: Any) -> list[np.ndarray]:
    import jax

    with jax.enable_x64(True):
        lowered, text, vals = lower(op, cell, sample)
        have = _op_names(text)
        lacking = [n for n in cell.names if n not in have]
        if lacking:
            raise ProofError(f"{op.id}: the lowered module has no {', '.join(lacking)} "
                             f"(it has {', '.join(sorted(have))})")
        try:
            out = lowered.compile()(*vals)
        except Exception as e:  # noqa: BLE001
            raise ProofError(f"{op.id}: XLA rejected the module: {type(e).__name__}: {e}") from e
    if isinstance(out, (list, tuple)):
        return [np.asarray(o) for o in out]
    return [np.asarray(out)]
