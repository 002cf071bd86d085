"""StableHLO prover: a cell's snippet (a JAX expression over ``lax.`` / ``jnp.``) is lowered
with ``jax.jit(...).lower`` to a StableHLO module, every name the cell gives must appear as an
op of that module (the proof that the named StableHLO op is what runs), then the module is
compiled by XLA and run on the CPU.

Snippet placeholders (translator/table/snippets.py): a graph input is a traced argument; a constant
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

from . import ProofError, dist_version, importable
from ..table import snippets
from ..compile.render import literal

API = "stablehlo"
EXTRA = "stablehlo"


def missing() -> str | None:
    return importable("jax", "jaxlib.mlir.dialects.stablehlo", hint="pip install 'opbridge[stablehlo]'")


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


#: ops the jaxlib dialect still defines that the StableHLO spec does not have (removed or never
#: specified: the "remove redundant ops" RFC) or that are no standalone op: a cell must not name them
NOT_IN_SPEC = frozenset({"stablehlo.broadcast", "stablehlo.dot", "stablehlo.einsum", "stablehlo.unary_einsum",
                         "stablehlo.torch_index_select", "stablehlo.create_token", "stablehlo.cross-replica-sum",
                         "stablehlo.real_dynamic_slice", "stablehlo.set_dimension_size", "stablehlo.async_start",
                         "stablehlo.async_done", "stablehlo.return"})


def resolves(name: str) -> bool:
    return name in _dialect_ops() and name not in NOT_IN_SPEC


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

    def attr(name: str) -> str:
        if name in sample.attrs:
            v = sample.attrs[name]
        else:
            a = sig.attribute(name)
            v = a.default if a is not None else None
        if isinstance(v, np.ndarray):
            v = v.tolist()
        return str(literal(v))

    def dtype(name: str) -> str:
        if name not in dtypes:
            raise ProofError(f"{op.id}: the dtype {name!r} is unbound in this sample")
        return "jnp." + _DTYPES[dtypes[name]]

    def value(name: str, variadic: bool) -> str:
        idx = ports.get(name, [None])
        if variadic:
            return ", ".join(val(i) for i in idx)
        return val(idx[0] if idx else None)

    body = snippets.substitute(cell.snippet, attr, dtype, value)
    return body, args, vals, consts


class _Direct:
    """``hlo.<op>(...)``: emits that StableHLO op itself, for the ops JAX's lax never emits
    (``lax.logistic`` lowers to exp/divide; lax has no batch_norm_inference). Each is a JAX
    primitive whose lowering builds exactly the named op; the result has the first
    operand's shape and element type (true of every op listed in ``_OPS``)."""

    _OPS = {"logistic": ("LogisticOp", ()), "batch_norm_inference": ("BatchNormInferenceOp", ("epsilon", "feature_index"))}

    def __init__(self) -> None:
        self._prims: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._OPS:
            raise AttributeError(f"hlo.{name}: not one of {sorted(self._OPS)}")
        if name not in self._prims:
            self._prims[name] = self._make(name)
        prim = self._prims[name]
        return lambda *args, **attrs: prim.bind(*args, **attrs)

    def _make(self, name: str) -> Any:
        from jax import core as jcore
        from jax._src.lib.mlir import ir
        from jax._src.lib.mlir.dialects import hlo
        from jax.extend.core import Primitive
        from jax.interpreters import mlir

        cls_name, attr_names = self._OPS[name]
        prim = Primitive(f"stablehlo_{name}")
        prim.def_abstract_eval(lambda x, *rest, **attrs: jcore.ShapedArray(x.shape, x.dtype))

        def lowering(ctx, *args, **attrs):
            kw = {}
            for a in attr_names:
                v = attrs[a]
                kw[a] = ir.FloatAttr.get(ir.F32Type.get(), float(v)) if isinstance(v, float) else \
                    ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(v))
            return [getattr(hlo, cls_name)(*args, **kw).result]

        mlir.register_lowering(prim, lowering)
        return prim


_DIRECT = _Direct()


def _namespace() -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    import functools
    import itertools
    import math

    from ..reference.misc import np_dtype

    # DT: an ONNX dtype attribute (enum int or name) as the dtype JAX takes
    return {"jax": jax, "jnp": jnp, "lax": lax, "np": np, "functools": functools, "itertools": itertools,
            "math": math, "DT": np_dtype, "hlo": _DIRECT}


def _op_names(text: str, dialect: str = "stablehlo") -> set[str]:
    """The ops of ``dialect`` in a module's text: ``stablehlo.add`` (pretty) or ``"stablehlo.gather"``
    (generic form), never an attribute such as ``#stablehlo.gather<...>``."""
    return set(re.findall(r"(?<![#\w.])(" + dialect + r"\.[a-z_0-9]+)\b", text))


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
        foreign = sorted(_op_names(text, "chlo"))
        if "stablehlo.custom_call" in have and "stablehlo.custom_call" not in cell.names:
            foreign.append("stablehlo.custom_call")
        if foreign:
            raise ProofError(f"{op.id}: the lowered module is not plain StableHLO: {', '.join(foreign)}")
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
