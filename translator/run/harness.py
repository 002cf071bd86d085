"""Cross-execution: run one model on several backends and compare with the reference.

Backends are targets (``translator.compile.target``): discovered, converted through the one
pipeline (``convert``) and run with ``Target.run``. The pipeline works on a clone, so one IR
serves every backend.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from ..table.errors import OpbridgeError

DEFAULT_TOL = {"rtol": 1e-3, "atol": 1e-5}


def convert(name: str, model: Any, **options: Any) -> Any:
    """``model`` → the artifact of target ``name`` (the one pipeline; ``model`` is not changed)."""
    from ..compile.pipeline import compile

    return compile(model, name, **options).artifact


# ----------------------------------------------------------------------------- comparison
def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind in "fc" or a.dtype.name in ("bfloat16",) or a.dtype.name.startswith("float")


def ulp_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Max ULP distance for float32-representable values (computed via float32 bits)."""
    x = np.asarray(a, dtype=np.float32).ravel().view(np.int32).astype(np.int64)
    y = np.asarray(b, dtype=np.float32).ravel().view(np.int32).astype(np.int64)
    x = np.where(x < 0, np.int64(-(2**31)) - x, x)
    y = np.where(y < 0, np.int64(-(2**31)) - y, y)
    return float(np.max(np.abs(x - y))) if x.size else 0.0


@dataclass
class Diff:
    ok: bool
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: float = 0.0
    reason: str = ""
    #: "int64→int32" when the artifact computes this output in a documented legal dtype
    #: instead of the declared one (a ``pass (legalized …)``, counted apart)
    legalized: str = ""

    @property
    def verdict(self) -> str:
        if not self.ok:
            return "fail"
        return f"pass (legalized {self.legalized})" if self.legalized else "pass"


def _np_dtype(name: str) -> np.dtype:
    from ..table.dtypes import numpy_dtype

    return np.dtype(numpy_dtype(name))


def _dtype_id(dt: np.dtype) -> str:
    from ..table.dtypes import dtype_id

    try:
        return str(dtype_id(dt))
    except Exception:  # noqa: BLE001 - a dtype the tables do not name
        return dt.name


def _int_range(dt: np.dtype) -> tuple[int, int]:
    if dt.kind in "iu":
        info = np.iinfo(dt)
    else:  # int4 / uint4 (ml_dtypes)
        import ml_dtypes

        info = ml_dtypes.iinfo(dt)
    return int(info.min), int(info.max)


def _is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu" or dt.name in ("int4", "uint4", "int2", "uint2")


def feed_arrays(names: list[str], inputs: Mapping[str, Any], dtypes: Mapping[str, str]) -> list[np.ndarray]:
    """The fed values of the inputs ``names`` in order, as NumPy arrays, each converted to the
    dtype an artifact documents taking it as (``dtypes``: a legalized input); a missing one is a
    ``bad_model`` error naming it."""
    from ..table.errors import OpbridgeError

    out = []
    for name in names:
        if name not in inputs:
            raise OpbridgeError("bad_model", f"no value fed for input {name!r}")
        x = np.asarray(inputs[name])
        out.append(x.astype(dtypes[name]) if name in dtypes else x)
    return out


def declared_outputs(outs: list[Any], dtypes: Mapping[int, str]) -> list[Any]:
    """Outputs computed in a documented wider dtype, back in their declared one when every value fits."""
    for i, d in dtypes.items():
        outs[i] = exact_astype(outs[i], d)
    return outs


def exact_astype(y: Any, dtype: Any) -> Any:
    """``y`` converted to ``dtype`` when every value survives the conversion unchanged (a
    documented legalization converted back), else ``y`` as it is: a runner may restore a
    legalized dtype, never wrap or round values — the comparison then reports the dtype."""
    a = np.asarray(y)
    dt = np.dtype(dtype)
    if a.dtype == dt or a.dtype.kind in "OSU":
        return a
    if not a.size:
        return a.astype(dt)
    if _is_int(dt):
        if not (_is_int(a.dtype) or a.dtype.kind == "b"):
            return a
        lo, hi = _int_range(dt)
        wide = a.astype(np.int64) if a.dtype.kind != "u" else a.astype(np.uint64)
        if wide.min() < lo or wide.max() > hi:
            return a
        return a.astype(dt)
    if dt.kind == "b":
        return a.astype(dt) if _is_int(a.dtype) and set(np.unique(a).tolist()) <= {0, 1} else a
    if _is_float(np.empty(0, dt)) and _is_float(a) and a.dtype.kind != "c":
        with np.errstate(all="ignore"):
            back = a.astype(dt)
            same = back.astype(a.dtype)
        nan = np.isnan(a.astype(np.float64))
        if np.array_equal(np.isnan(same.astype(np.float64)), nan) and np.array_equal(same[~nan], a[~nan]):
            return back
    return a


def compare(expected: Any, got: Any, rtol: float = 1e-3, atol: float = 1e-5, legalized: str | None = None) -> Diff:
    """Floats: |got-exp| <= atol + rtol*|exp| (NaN matches NaN); others: exact.

    ``got`` must have the declared dtype (``expected``'s), or ``legalized``: the dtype id the
    artifact documents returning instead (its interface, e.g. TFLite's int64 outputs as
    int32); such a pass carries ``legalized = "int64→int32"``. Values are compared in the
    declared dtype's semantics: a legalized integer outside the declared range (an int4
    result of -9) fails, it is never wrapped here."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return Diff(False, reason="sequence length differs")
        worst = Diff(True)
        for e, g in zip(expected, got):
            d = compare(e, g, rtol, atol, legalized)
            if not d.ok:
                return d
            worst.max_abs = max(worst.max_abs, d.max_abs)
            worst.legalized = worst.legalized or d.legalized
        return worst
    if expected is None or got is None:
        return Diff(expected is None and got is None, reason="optional presence differs")
    e = np.asarray(expected)
    g = np.asarray(got)
    if e.shape != g.shape:
        return Diff(False, reason=f"shape {g.shape} != expected {e.shape}")
    if e.dtype.kind in "OSU" or g.dtype.kind in "OSU":
        if (e.dtype.kind in "OSU") != (g.dtype.kind in "OSU"):
            return Diff(False, reason=f"dtype {g.dtype} != declared {e.dtype}")
        same = e.shape == g.shape and all(str(x) == str(y) for x, y in zip(e.ravel().tolist(), g.ravel().tolist()))
        return Diff(same, reason="" if same else "strings differ")
    tag = ""
    legal = _np_dtype(legalized) if legalized else None
    if legal is not None and legal != e.dtype:
        tag = f"{_dtype_id(e.dtype)}→{legalized}"
    if g.dtype != e.dtype and not (e.dtype.kind == g.dtype.kind == "b"):
        if legal is None or g.dtype != legal:
            documented = f" (documented: {legalized})" if legalized else ""
            return Diff(False, reason=f"dtype {g.dtype} != declared {e.dtype}{documented}")
        if _is_int(e.dtype) or e.dtype.kind == "b":  # the declared dtype's values, exactly
            if not (_is_int(g.dtype) or g.dtype.kind == "b"):
                return Diff(False, reason=f"dtype {g.dtype} != declared {e.dtype}")
            back = exact_astype(g, e.dtype)
            if back.dtype != e.dtype:
                return Diff(False, reason=f"values outside {_dtype_id(e.dtype)} (legalized as {legalized})",
                            legalized=tag)
            g = back
    d = _compare_values(e, g, rtol, atol)
    d.legalized = tag if d.ok else ""
    return d


def _compare_values(e: np.ndarray, g: np.ndarray, rtol: float, atol: float) -> Diff:
    if _is_float(e):
        try:
            ef = e.astype(np.complex128 if e.dtype.kind == "c" else np.float64)
            gf = g.astype(ef.dtype)
        except (TypeError, ValueError):
            return Diff(False, reason=f"dtype {g.dtype} not comparable to {e.dtype}")
        nan_e, nan_g = np.isnan(ef), np.isnan(gf)
        if not np.array_equal(nan_e, nan_g):
            return Diff(False, reason="NaN positions differ")
        mask = ~nan_e
        ef, gf = ef[mask], gf[mask]
        inf = np.isinf(ef) | np.isinf(gf)
        if not np.array_equal(ef[inf], gf[inf]):
            return Diff(False, reason="infinities differ")
        fin = ~inf
        err = np.abs(gf[fin] - ef[fin])
        max_abs = float(err.max()) if err.size else 0.0
        denom = np.abs(ef[fin])
        rel = err / np.where(denom == 0, 1, denom)
        max_rel = float(rel.max()) if rel.size else 0.0
        ok = bool(np.all(err <= atol + rtol * np.abs(ef[fin])))
        ulp = ulp_distance(ef[fin], gf[fin]) if e.dtype.kind == "f" and e.dtype.itemsize <= 4 and fin.any() else 0.0
        return Diff(ok, max_abs, max_rel, ulp, "" if ok else f"max abs {max_abs:.3g}, max rel {max_rel:.3g}")
    if _is_int(e.dtype) and e.dtype != g.dtype:  # a legalized integer, checked in range above
        same = bool(np.array_equal(e.astype(np.int64), g.astype(np.int64)))
        return Diff(same, reason="" if same else "values differ")
    same = bool(np.array_equal(e, g))
    return Diff(same, reason="" if same else "values differ")


# ----------------------------------------------------------------------------- model checks
@dataclass
class BackendResult:
    backend: str
    status: str  # pass | fail | unsupported | error
    reason: str = ""
    outputs: list[Any] = field(default_factory=list)
    diffs: list[Diff] = field(default_factory=list)
    seconds: float = 0.0


UNSUPPORTED_CODES = ("unsupported_op", "unsupported_dtype", "unsupported_attribute_value", "unknown_domain",
                     "rank_limit", "requires_constant_input", "dynamic_shape", "no_reference",
                     "structural_only")


def classify(exc: BaseException) -> tuple[str, str]:
    """(status, reason code) for an exception raised while converting or running."""
    if isinstance(exc, OpbridgeError):
        return ("unsupported" if exc.code in UNSUPPORTED_CODES else "error"), exc.code
    return "error", f"runtime_error:{type(exc).__name__}"


def run_backend(name: str, build_ir: Callable[[], Any], feeds: Mapping[str, Any]) -> tuple[Any, list[Any]]:
    from ..compile.target import get

    artifact = convert(name, build_ir())
    return artifact, list(get(name).run(artifact, feeds))


def tolerance_for(op_ids: list[str]) -> dict[str, float]:
    """The loosest tolerance among the ops of a model (table ``tolerance``, else default)."""
    from ..table.loader import load_tables

    tables = load_tables()
    tol = dict(DEFAULT_TOL)
    for op_id in op_ids:
        op = tables.ops.get(op_id)
        if op is not None and op.tolerance:
            for k in ("rtol", "atol"):
                if k in op.tolerance:
                    tol[k] = max(tol[k], float(op.tolerance[k]))
    return tol


def finite_or_none(x: float) -> float | None:
    return None if (x is None or math.isnan(x)) else x


def single_op_model(op_id: str, inputs: list[Any], attrs: dict[str, Any], n_outputs: int = 1,
                    const: tuple[int, ...] = ()) -> tuple[Any, dict[str, Any]]:
    """A one-node IR model for ``op_id`` fed by ``inputs`` (None = omitted; the indices in
    ``const`` become constants instead of graph inputs); returns (model, feeds)."""
    from ..table.dtypes import dtype_id
    from ..ir.graph import Graph, Model, TensorType

    g = Graph(op_id)
    vals = []
    feeds = {}
    for i, x in enumerate(inputs):
        if x is None:
            vals.append(None)
            continue
        arr = np.asarray(x)
        if i in const:
            vals.append(g.add_constant(f"c{i}", arr, dtype_id(arr.dtype)))
            continue
        v = g.add_input(f"in{i}", TensorType(dtype_id(arr.dtype), tuple(arr.shape)))
        feeds[v.name] = arr
        vals.append(v)
    node = g.add_node(op_id, vals, attrs, outputs=[f"out{i}" for i in range(n_outputs)], name=op_id)
    g.outputs = list(node.outputs)
    return Model(g, source=f"<{op_id}>", source_format="ir"), feeds
