"""Sample inputs per op for the table-driven tests (decompositions, cross-execution).

The generic rule reads the op's signature: each required input becomes a random tensor
of shape (2, 3, 4) of the requested dtype, attributes keep their defaults. Ops that
need other shapes, value domains or attributes say so in their ``sample`` key in
optable.yaml (docs/TABLES.md): ``domain`` (of the generic inputs), ``attrs``, ``outputs``
(how many outputs are compared, e.g. max_pool's optional Indices) and ``inputs``, a list
whose entries are ``{shape, dtype?, domain?}`` (a graph input of random values; no dtype:
the requested one), ``{shape, dtype?, domain?, constant: true}`` (a random constant, e.g.
normalization parameters), ``{value, dtype}`` (a constant with exactly that value: shapes,
axes, indices — what a real model carries as an initializer), ``{value}`` (constant values
in the requested dtype, e.g. boxes) or null (an omitted optional input).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..table.loader import Op

S = (2, 3, 4)
# value domains (tables.SAMPLE_DOMAINS): "any" N(0,1), "nonzero" N(0,1) kept away from 0 for divisions,
# "pos" (0.1, 2), "unit" (-0.9, 0.9), "ge1" (1.1, 3), "small" small non-negative ints, "bool", "lo"/"hi"
# the scalars -0.5/0.5, "scale" (0.02, 0.1), "sparse" half zeros


#: an op whose category starts with one of these has inputs with structure (no generic sample)
NO_GENERIC_CATEGORIES = frozenset({"Sequence", "Optional", "String", "Signal Processing", "Generation", "Imaging",
                                   "Control Flow", "Quantization", "Recurrent", "Attention", "Input", "Sparse",
                                   "NGram", "Loss"})


def generic_ok(op: Op) -> bool:
    """Whether (2, 3, 4) tensors of one dtype for every required input make sense for the op.

    True when every required input shares the first input's type variable and the op
    is not of a category whose inputs have structure (sequences, windows, indices...).
    """
    sig = op.signature
    if sig is None or not sig.inputs or op.categories[0] in NO_GENERIC_CATEGORIES:
        return False
    t = sig.inputs[0].type
    return all(p.type == t for p in sig.inputs if not p.optional)


@dataclass
class Sample:
    inputs: list[np.ndarray | None]
    attrs: dict[str, Any]
    #: indices of the inputs that are constants (initializers) rather than graph inputs
    const: tuple[int, ...] = ()
    #: how many outputs are compared (None: all the reference returns)
    outputs: int | None = None


def _values(shape: tuple[int, ...], dtype: Any, domain: str, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(dtype)
    if domain == "bool" or dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo = 1 if domain == "nonzero" else 0
        return rng.integers(lo, 9, size=shape).astype(dt)
    if domain == "pos":
        x = rng.uniform(0.1, 2.0, shape)
    elif domain == "unit":
        x = rng.uniform(-0.9, 0.9, shape)
    elif domain == "ge1":
        x = rng.uniform(1.1, 3.0, shape)
    elif domain == "lo":
        x = np.asarray(-0.5)
    elif domain == "hi":
        x = np.asarray(0.5)
    elif domain == "scale":
        x = rng.uniform(0.02, 0.1, shape)
    elif domain == "sparse":
        x = np.where(rng.random(shape) < 0.5, 0.0, rng.standard_normal(shape))
    else:
        x = rng.standard_normal(shape)
        if domain == "nonzero":
            x = np.where(np.abs(x) < 0.1, 0.5, x)
    return np.asarray(x).astype(dt)


def _thaw(v: Any) -> Any:
    if hasattr(v, "items"):
        return {k: _thaw(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [_thaw(x) for x in v]
    return v


def sample(op: Op, dtype: Any = np.float32, seed: int = 0) -> Sample | None:
    """A sample for ``op`` at ``dtype``, or None when the op needs inputs we cannot make."""
    from ..table.dtypes import numpy_dtype

    rng = np.random.default_rng(seed)
    spec = _thaw(op.sample) if op.sample is not None else {}
    attrs = dict(spec.get("attrs") or {})
    if "inputs" in spec:
        inputs: list[np.ndarray | None] = []
        const = []
        for i, item in enumerate(spec["inputs"]):
            if item is None:
                inputs.append(None)
                continue
            if "value" in item:  # a constant: exactly this value, or these values in the requested dtype
                dt = numpy_dtype(item["dtype"]) if "dtype" in item else dtype
                inputs.append(np.asarray(item["value"]).astype(dt) if "dtype" not in item
                              else np.asarray(item["value"], dtype=dt))
                const.append(i)
                continue
            dt = numpy_dtype(item["dtype"]) if "dtype" in item else dtype
            inputs.append(_values(tuple(item["shape"]), dt, item.get("domain", "any"), rng))
            if item.get("constant"):
                const.append(i)
        return Sample(inputs, attrs, tuple(const), spec.get("outputs"))
    if op.signature is None or not generic_ok(op):
        return None
    inputs: list[np.ndarray | None] = []
    for p in op.signature.inputs:
        if p.optional:
            inputs.append(None)
            continue
        inputs.append(_values(S, dtype, spec.get("domain", "any"), rng))
    while inputs and inputs[-1] is None:
        inputs.pop()
    for a in op.signature.attributes:
        if a.required and a.name not in attrs:
            return None
    return Sample(inputs, attrs)


# ----------------------------------------------------------------------------- cases from the table
def kinds(op: Op, tables: Any) -> list:
    """The dtypes to sample ``op`` at: its sample's fixed first-input dtype, else float32 (and
    float16) / int32 / bool from the first input's type constraint (the generated tests'
    rule: tests/test_ops.py and tests/test_proofs.py)."""
    from ..table.dtypes import numpy_dtype

    if op.signature is None or not op.signature.inputs:
        return []
    fixed = (op.sample or {}).get("inputs") or [None]
    if fixed[0] is not None and "dtype" in fixed[0]:
        return [np.dtype(numpy_dtype(fixed[0]["dtype"]))]
    first = op.signature.inputs[0]
    allowed = set(tables.expand_dtypes(op.signature.types.get(first.type, (first.type,))))
    out: list = []
    if "float32" in allowed:
        out.append(np.float32)
        if "float16" in allowed:
            out.append(np.float16)
    elif "int32" in allowed:
        out.append(np.int32)
    elif allowed == {"bool"}:
        out.append(np.bool_)
    return out


def evaluated(op: Op, dt: Any) -> "tuple[Sample, tuple[np.ndarray, ...]] | None":
    """``(sample, expected outputs)`` from the op's NumPy reference, or None when the sampler
    has no sample for the op at ``dt``. Raises when the sample does not fit the op."""
    from .. import reference

    fn = reference.get(op.id)
    if fn is None:
        return None
    smp = sample(op, dt)
    if smp is None:
        return None
    with np.errstate(all="ignore"):
        out = fn(*smp.inputs, **smp.attrs)
    outs = out if isinstance(out, tuple) else (out,)
    if smp.outputs is not None:
        outs = outs[: smp.outputs]
    bad = [type(o).__name__ for o in outs if not isinstance(o, np.ndarray)]
    if bad:
        raise TypeError(f"the reference returned {', '.join(bad)} where tensors are compared")
    return smp, tuple(outs)


def op_samples(op: Op, tables: Any, errors: Any = None):
    """The generated tests' samples of ``op``: ``(dtype name, sample, expected outputs)``, once per
    dtype the samples really have (a sample may fix it, e.g. uint8). A sample the reference
    rejects goes to ``errors(dtype name, exception)`` (dropped when ``errors`` is None)."""
    seen: set[str] = set()
    for dt in kinds(op, tables):
        try:
            got = evaluated(op, dt)
        except Exception as exc:  # noqa: BLE001 - the caller reports it (tests/test_ops.py)
            if errors is not None:
                errors(np.dtype(dt).name, exc)
            continue
        if got is None:
            continue
        smp, outs = got
        name = next((np.asarray(x).dtype for x in smp.inputs if x is not None), np.dtype(dt)).name
        if name not in seen:
            seen.add(name)
            yield name, smp, outs


def xfail_reasons(op: Op, api: str, dtype: str) -> list[str]:
    """The reasons of the op's ``xfail`` entries for ``api`` at ``dtype`` (strict in the tests)."""
    return [xf["reason"] for xf in op.xfail if xf["backend"] == api and xf.get("dtype") in (None, dtype)]


def tolerance(op: Op, dtype: str) -> dict:
    """The comparison of a generated case: 1e-3/1e-5 (float16: 2e-2/2e-3), or the op's own."""
    tol = {"rtol": 1e-3, "atol": 1e-5}
    if dtype == "float16":
        tol = {"rtol": 2e-2, "atol": 2e-3}
    if op.tolerance:
        tol.update({k: float(v) for k, v in op.tolerance.items() if k in ("rtol", "atol")})
    return tol


def output_tolerances(op: Op, dtype: str, model: Any, feeds: dict[str, Any], expected: list[Any]) -> list[dict]:
    """Per output of a generated case, ``tolerance`` widened as the check widens it: a target
    that does not round dynamically quantized activations the source's way (a float
    DynamicQuantizeLSTM over int8 weights) is held to ``check.DYNAMIC_FACTOR`` times the
    source's own rounding (``check.dynamic_rounding_error``)."""
    from .check import DYNAMIC_FACTOR, dynamic_rounding_error

    dynamic = dynamic_rounding_error(model, feeds, expected)
    out = []
    for i in range(len(expected)):
        tol = tolerance(op, dtype)
        if i in dynamic:
            tol["atol"] = max(tol["atol"], DYNAMIC_FACTOR * dynamic[i])
        out.append(tol)
    return out
