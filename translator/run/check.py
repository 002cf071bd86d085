"""``opbridge check``: run one model on several backends and compare with the reference.

The NumPy reference runs the IR once (keeping every intermediate value). Each backend
gets a fresh IR, emits, runs on the same inputs, and each output is compared with the
reference under the model's tolerance (the loosest ``tolerance`` of its ops in the
table, else rtol 1e-3 / atol 1e-5). When an output diverges, the model is re-run on that
backend with every intermediate value marked as an output, and the first node (in
topological order) whose output diverges is named.

A whole model's float32/float64 output also passes when its largest error is within
``SCALED_EPS`` machine epsilons of the output's largest magnitude: element-wise relative
tolerances are per-op promises, while a deep model's absolute error grows with its
largest activations (summation order differs between backends). A pass of that kind says
so in the diff's ``reason`` ("scaled: ...").
"""
from __future__ import annotations

import math

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..compile.quantized import is_quantized
from ..ir import cpu
from ..table.errors import OpbridgeError
from .artifact_io import output_ports, run_written
from .harness import Diff, classify, compare, convert, tolerance_for
from ..ir.graph import Model


#: float32: 128 * 1.19e-7 = 1.5e-5 of the output's largest magnitude
SCALED_EPS = 128

#: ops that round (their float input 0 decides an integer step)
ROUNDING_OPS = frozenset({"quantize_linear", "dynamic_quantize_linear", "round", "floor", "ceil",
                          "dynamic_quantize_lstm"})  # (its X is quantized inside the reference op)
#: ops whose presence makes a model's outputs depend on near-tie roundings
QUANTIZING_OPS = frozenset({"quantize_linear", "dynamic_quantize_linear", "dynamic_quantize_lstm"})
#: the rounding-spread runs: each rounds every op's non-integer input scaled by (1 + eps*u)
SPREAD_RUNS = 3
SPREAD_EPS = 2.0 ** -20
#: an output may differ by this many times the spread the reference itself shows
SPREAD_FACTOR = 2.0


def _rounds(model: Model) -> bool:
    """Whether the model quantizes at run time (a quantize op anywhere, subgraphs included,
    or a frontend's ``opbridge.rounding`` mark: TFLite's hybrid kernels)."""
    from ..ir.graph import Graph

    if (model.metadata or {}).get("opbridge.rounding"):
        return True

    def walk(g: Graph) -> bool:
        for n in g.nodes:
            if n.op in QUANTIZING_OPS:
                return True
            for a in n.attrs.values():
                for sub in (a if isinstance(a, list) else [a]):
                    if isinstance(sub, Graph) and walk(sub):
                        return True
        return False

    return walk(model.graph)


def rounding_spread(ref_model: Model, feeds: dict[str, Any], expected: list[Any]) -> list[float] | None:
    """How far each float output of a model that quantizes at run time moves when its
    near-tie roundings flip: the reference re-run ``SPREAD_RUNS`` times with every rounding
    op's non-integer float input scaled by ``1 + SPREAD_EPS * u`` (u uniform in [-1, 1],
    fixed seeds). Backends accumulate in other orders, so a value one ulp from a tie lands
    on either side and the integer step it takes propagates: a difference within the
    spread is that, not a wrong conversion. None: the model does not quantize."""
    from ..compile import interpreter

    if not _rounds(ref_model):
        return None
    spread = [0.0] * len(expected)
    for seed in range(SPREAD_RUNS):
        rng = np.random.default_rng(seed)

        def perturb(node: Any, args: list) -> list:
            x = args[0] if args else None
            if node.op not in ROUNDING_OPS or not isinstance(x, np.ndarray) or x.dtype.kind != "f" or not x.size:
                return args
            jitter = (1.0 + SPREAD_EPS * rng.uniform(-1.0, 1.0, x.shape)).astype(x.dtype)
            return [np.where(x != np.round(x), x * jitter, x), *args[1:]]

        from ..reference import contrib

        contrib.JITTER[0] = (rng, SPREAD_EPS)  # the roundings inside an op (a quantized LSTM's state)
        try:
            got = interpreter.run(ref_model, feeds, None, perturb)
        finally:
            contrib.JITTER[0] = None
        for i, (e, g) in enumerate(zip(expected, got)):
            e, g = np.asarray(e), np.asarray(g)
            if e.shape == g.shape and e.dtype.kind == "f" and e.size:
                both = np.isfinite(e) & np.isfinite(g)
                if both.any():
                    spread[i] = max(spread[i], float(np.max(np.abs(e[both].astype(np.float64) - g[both]))))
    return spread


def _widened(tol: dict[str, float], spread: list[float] | None, i: int) -> dict[str, float]:
    """``tol`` with its atol raised to ``SPREAD_FACTOR`` times output ``i``'s rounding spread."""
    if not spread or spread[i] <= 0.0 or SPREAD_FACTOR * spread[i] <= tol["atol"]:
        return tol
    return {**tol, "atol": SPREAD_FACTOR * spread[i]}


def quantization_steps(model: Model) -> dict[int, float]:
    """Output index → its quantization step, for each output a per-tensor ``dequantize_linear``
    computes from a quantized value (a QDQ model's output): a target that runs the model's
    integer kernels requantizes in its own arithmetic, one step from the float evaluation on
    values near a rounding boundary (what a quantized model's accuracy is measured in)."""
    steps = {}
    for i, v in enumerate(model.graph.outputs):
        n = v.producer
        s = n.inputs[1] if n is not None and n.op == "dequantize_linear" and len(n.inputs) > 1 else None
        if s is not None and s.is_const and np.asarray(s.const).size == 1 and float(np.asarray(s.const).reshape(-1)[0]) > 0:
            steps[i] = float(np.asarray(s.const).reshape(-1)[0])
    return steps


#: a target that quantizes dynamically-quantized activations its own way (or not at all) is held
#: to this many times the source's own activation-rounding error (``dynamic_rounding_error``): 2
#: lets it round no coarser than the source does (the two roundings' errors add up)
DYNAMIC_FACTOR = 2.0


def dynamic_rounding_error(model: Model, feeds: dict[str, Any], expected: list[Any]) -> dict[int, float]:
    """Output index → how far the model's dynamic activation quantization (onnxruntime's
    ``DynamicQuantizeLinear → MatMulInteger``, its ``DynamicQuantizeLSTM``, a dynamic-range
    ``.tflite``'s hybrid kernels) moves it: the reference on the model against the
    reference on the same model with the activations left unrounded (``quantized.
    dynamic_as_weight_only``: int8 weights, float activations). A target's integer kernels
    quantize activations their own way (LiteRT's hybrid kernels per row, in int8), or not at
    all (Core ML's int8 weights): neither is the source's rounding, and both sit as far from
    the unrounded computation as the source does. Empty when the model has no such matmul."""
    from ..compile.pipeline import every_graph
    from ..compile.lowering import decompose_now
    from ..compile.quantized import dynamic_as_weight_only, hybrid_as_weight_only
    from ..ir.infer import infer
    from ..table.loader import load_tables

    clone = model.clone()
    tables = load_tables()
    # DynamicQuantizeLSTM in the table's float form: an LSTM over its dequantized weights, X
    # and the hidden state unrounded (what OpenVINO writes: emitters/openvino/quant.prepare)
    if not sum(dynamic_as_weight_only(g) + hybrid_as_weight_only(g)
               + decompose_now(g, None, ("dynamic_quantize_lstm",), tables) for g in every_graph(clone.graph)):
        return {}
    infer(clone.graph)
    return _moved(clone, feeds, expected)


def _moved(rewritten: Model, feeds: dict[str, Any], expected: list[Any]) -> dict[int, float]:
    """Output index → the largest difference between ``expected`` and the reference on the
    ``rewritten`` model (float outputs of the same shape); empty when it does not run."""
    from ..compile import interpreter

    try:
        got = interpreter.run(convert("numpy", rewritten), feeds)
    except Exception:  # noqa: BLE001 - no widening when the rewritten model does not run
        return {}
    out = {}
    for i, (e, u) in enumerate(zip(expected, got)):
        e, u = np.asarray(e), np.asarray(u)
        if e.dtype.kind == "f" and e.shape == u.shape and e.size:
            out[i] = float(np.max(np.abs(e.astype(np.float64) - u.astype(np.float64))))
    return out


def half_weights_error(model: Model, feeds: dict[str, Any], expected: list[Any]) -> dict[int, float]:
    """Output index → how far the model moves when its float weights (constants of two or more
    dims) are rounded to float16: the reference on the model against the reference on it with
    those constants rounded. An artifact that stores its weights in float16 (ncnn's fp16
    storage) computes on those, so it is held to ``DYNAMIC_FACTOR`` times this, not to the
    float32 tolerance. Empty when the model has no such constant."""
    from ..compile.pipeline import every_graph

    clone = model.clone()
    rounded = 0
    for g in every_graph(clone.graph):
        for v in g.constants.values():
            a = np.asarray(v.const)
            if a.dtype == np.float32 and a.ndim >= 2:
                v.const = a.astype(np.float16).astype(np.float32)
                rounded += 1
    return _moved(clone, feeds, expected) if rounded else {}


def _dynamic(tol: dict[str, float], err: float | None) -> dict[str, float]:
    if err is None or DYNAMIC_FACTOR * err <= tol["atol"]:
        return tol
    return {**tol, "atol": DYNAMIC_FACTOR * err}


def _one_step(tol: dict[str, float], step: float | None) -> dict[str, float]:
    return tol if step is None or step * 1.001 <= tol["atol"] else {**tol, "atol": step * 1.001}


def compare_output(expected: Any, got: Any, tol: dict[str, float], legalized: str | None = None) -> Diff:
    """A model output: the op tolerance element-wise, or scaled to the output's magnitude.
    ``legalized``: the dtype the artifact documents for this output (``artifact_io.OutputPort``)."""
    d = compare(expected, got, **tol, legalized=legalized)
    if d.ok or not d.reason.startswith("max abs"):
        return d
    e = np.asarray(expected)
    if e.dtype not in (np.float32, np.float64) or not e.size:
        return d
    finite = np.abs(e[np.isfinite(e)])
    scale = float(finite.max()) if finite.size else 0.0
    bound = SCALED_EPS * float(np.finfo(e.dtype).eps) * scale
    if d.max_abs <= bound:
        legal = compare(expected, got, rtol=0.0, atol=float("inf"), legalized=legalized).legalized
        return Diff(True, d.max_abs, d.max_rel, d.max_ulp,
                    f"scaled: max abs {d.max_abs:.3g} <= {SCALED_EPS} eps x max|ref| {scale:.3g}", legal)
    return d


@dataclass
class OutputReport:
    name: str
    diff: Diff
    #: the same output against onnxruntime on the original ONNX file (when it runs there)
    vs_source: Diff | None = None
    #: an output a per-tensor DequantizeLinear computes: its step, and against the source
    #: runtime (else the reference) the largest error in steps and the share of exact values
    quantization: dict[str, float] | None = None


@dataclass
class BackendReport:
    backend: str
    status: str  # pass | fail | unsupported | error
    reason: str = ""
    detail: str = ""
    outputs: list[OutputReport] = field(default_factory=list)
    first_divergence: dict[str, Any] | None = None
    seconds: float = 0.0
    #: what the verdict rests on besides the comparisons (e.g. an output where the reference is the outlier)
    notes: list[str] = field(default_factory=list)
    #: ``check --per-node``: every intermediate value the target exposes against the reference
    per_node: list[dict[str, Any]] | None = None


def random_inputs(model: Model, seed: int = 0, dim_default: int = 1,
                  sizes: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded random feeds; a symbolic dim takes its size from ``sizes`` (by its
    ``translator.ir.dims`` label), else ``dim_default``."""
    from ..ir.dims import label
    from ..table.dtypes import numpy_dtype

    rng = np.random.default_rng(seed)
    feeds = {}
    from ..table import budget

    initial = _initial_state(model)
    for v in model.graph.inputs:
        if v.name in initial:  # carried state: the first call starts from the recorded first values
            feeds[v.name] = initial[v.name]
            continue
        t = v.type
        if t.kind != "tensor":
            raise OpbridgeError("dynamic_shape", f"input {v.name!r} is a {t.kind}, random inputs are tensors only; "
                                "pass --inputs file.npz")
        if t.dtype is None or t.shape is None:
            raise OpbridgeError("dynamic_shape", f"input {v.name!r} has type {t} (no element type or rank); "
                                "pass --inputs file.npz")
        shape = tuple(d if isinstance(d, int) else (sizes or {}).get(label(v.name, i, d), dim_default)
                      for i, d in enumerate(t.shape))
        try:
            dt = numpy_dtype(t.dtype)
        except Exception as exc:  # noqa: BLE001 - a dtype NumPy cannot hold
            raise OpbridgeError("unsupported_dtype", f"input {v.name!r}: no random values of dtype {t.dtype} "
                                f"({type(exc).__name__}); pass --inputs file.npz") from None
        budget.check_tensor(shape, None if dt.kind == "O" else max(dt.itemsize, 4),
                            f"random input {v.name!r} of shape {shape}")
        if dt.kind == "b":
            arr = rng.random(shape) < 0.5
        elif dt.kind in "iu":  # small ids, below the size of every table they index
            arr = rng.integers(0, min([8] + _index_limits(v)), size=shape).astype(dt)
        elif dt.kind == "O":
            arr = np.array(rng.choice(["a", "b", "c"], size=shape), dtype=object)
        else:
            arr = rng.standard_normal(shape).astype(np.float32).astype(dt)
        feeds[v.name] = np.asarray(arr)  # a 0-d input is an array too (runtimes refuse NumPy scalars)
    return feeds


#: ops an index passes through unchanged on its way to a table lookup
_INDEX_MOVES = ("cast", "reshape", "squeeze", "unsqueeze", "flatten", "identity", "transpose", "expand")


def _index_limits(v: Any, depth: int = 8) -> list[int]:
    """The sizes of the tables that integer value ``v`` indexes (``Gather``'s indices along an
    axis of static size, through ops that only move or retype it): a token-type input feeding a
    2-row embedding takes ids below 2. Empty when it indexes none."""
    out: list[int] = []
    if depth <= 0:
        return out
    for node, i in v.uses:
        if node.op in _INDEX_MOVES and i == 0:
            out += [lim for o in node.outputs if o is not None for lim in _index_limits(o, depth - 1)]
        elif node.op == "gather" and i == 1 and node.inputs[0] is not None and node.inputs[0].type.shape is not None:
            shape = node.inputs[0].type.shape
            axis = int(node.attrs.get("axis", 0)) % max(len(shape), 1)
            if isinstance(shape[axis], int) and shape[axis] > 0:
                out.append(shape[axis])
    return out


#: sizes tried, smallest first, for symbolic dims a model cannot run at ``dims.CHECK_SIZES``
SIZE_LADDER = (2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
#: wall time the search for runnable sizes may take (reference runs at small sizes)
SIZE_SEARCH_SECONDS = 60.0
#: the most input elements one run of that search feeds: a run is not cut short by the
#: deadline, and three dims raised together (an audio model whose batch, channels and samples
#: are all symbolic) at 512 would be a 2^27-element reference run
SIZE_SEARCH_ELEMENTS = 1 << 22


def runnable_sizes(build_ir: Callable[[], Model], check_dims: dict[str, tuple[int, ...]] | None = None
                   ) -> dict[str, tuple[int, ...]]:
    """Two check sizes for every symbolic input dim the user gave none for, at which the
    model itself runs: ``dims.CHECK_SIZES`` when the NumPy reference runs the model there with
    no empty intermediate tensor (a 2×2 pool of a 1×1 image has no output), else the two
    smallest sizes of ``SIZE_LADDER`` that do, found for the non-batch dims first (axis 0 of
    an input stays at its default sizes where that suffices). ``check_dims`` entries are
    kept as given; dims for which no size is found keep the defaults (the check then says
    what fails). Returns ``check_dims`` with the derived entries added."""
    from ..compile import interpreter
    from ..ir import dims

    given = dict(check_dims or {})
    model = build_ir()
    inputs = {v.name: v for v in model.graph.inputs}
    free = [d for ds in dims.symbolic(model).values() for d in ds if d not in given]
    if not free:
        return given
    # each input's first dim, by its label (an unnamed dim, None, is labelled by input and axis)
    batch = {dims.label(name, 0, v.type.shape[0]) for name, v in inputs.items()
             if v.type.shape and not isinstance(v.type.shape[0], int)} & set(free)
    try:
        ref = convert("numpy", model)
    except Exception:  # noqa: BLE001 - the check itself reports what stops the reference
        return given

    from ..table.loader import load_tables

    tables = load_tables()
    # values a window slides over: empty there means the size is below the window
    windowed = {v.name for n in ref.graph.walk() if n.op in tables.ops and "layout_spatial" in tables.ops[n.op].traits
                for v in n.outputs}
    windowed |= {v.name for v in ref.graph.outputs}
    deadline = time.monotonic() + SIZE_SEARCH_SECONDS

    seen: dict[tuple[tuple[str, int], ...], bool] = {}  # the searches below ask some sizes again

    def runs(sizes: dict[str, int]) -> bool:
        key = tuple(sorted(sizes.items()))
        if key not in seen:
            seen[key] = runs_once(sizes)
        return seen[key]

    def runs_once(sizes: dict[str, int]) -> bool:
        if time.monotonic() > deadline:
            return False
        every = {**{d: s[0] for d, s in given.items()}, **sizes}
        if sum(math.prod(every.get(dims.label(name, i, d), d if isinstance(d, int) else 1)
                         for i, d in enumerate(v.type.shape or ())) for name, v in inputs.items()) > SIZE_SEARCH_ELEMENTS:
            return False  # too big to try within the search's time
        try:
            feeds = random_inputs(ref, sizes=every)
            trace: dict[str, Any] = {}
            interpreter.run(ref, feeds, trace)
        except Exception:  # noqa: BLE001 - the model does not run at these sizes
            return False
        if any(np.size(v) == 0 for v in feeds.values()):
            return True
        return not any(np.size(trace[k]) == 0 for k in windowed if k in trace)

    defaults = dims.CHECK_SIZES

    def search(free: list[str], pinned: dict[str, int]) -> dict[str, tuple[int, ...]] | None:
        if all(runs({**pinned, **{d: size for d in free}}) for size in defaults):
            return {d: defaults for d in free}
        for raised in ([d for d in free if d not in batch], free):
            if not raised:
                continue
            kept = {**pinned, **{d: defaults[0] for d in free if d not in raised}}
            found: list[int] = []
            for m in SIZE_LADDER:
                if runs({**kept, **{d: m for d in raised}}):
                    found.append(m)
                    if len(found) == len(defaults):
                        break
            if len(found) == len(defaults):
                return {**{d: tuple(found) for d in raised}, **{d: defaults for d in free if d not in raised}}
        return None

    if all(runs({d: size for d in free}) for size in defaults):
        return given
    # a dim the model runs at only at size 1 (channels a norm's scale has one of) is checked there
    low = defaults[0]
    at_low = {x: low for x in free}
    ones = [d for d in free if not any(runs({**at_low, d: m}) for m in (defaults[1], 2))] \
        if len(free) > 1 and runs(at_low) else []
    ones = [] if len(ones) == len(free) else ones
    rest = search([d for d in free if d not in ones], {d: low for d in ones})
    sized = None if rest is None else {**rest, **{d: (low,) * len(defaults) for d in ones}}
    for d in free if sized is None and len(free) > 1 else ():  # the same, where the others need sizes found too
        rest = search([x for x in free if x != d], {d: low})
        if rest is not None:
            sized = {**rest, d: (low,) * len(defaults)}
            break
    if sized is None or all(s == defaults for s in sized.values()):
        return given
    return {**given, **sized}


def _initial_state(model: Model) -> dict[str, np.ndarray]:
    from ..ir.state import initial_state

    return initial_state(model.metadata)


def load_inputs(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise OpbridgeError("bad_model", f"cannot read inputs {path!r}: {exc}") from None


def fit_inputs(feeds: Any, names: list[str]) -> tuple[Any, list[str]]:
    """Input sets (one dict or a list of them) matched to the model's input ``names``:
    ``np.savez(f, x, y)`` stores unnamed arrays as ``arr_0``, ``arr_1``…, which are read in
    input order (and said, in the notes returned); a set naming none of the inputs is a
    ``bad_option`` that lists the names the model expects (the model is not at fault)."""
    if feeds is None:
        return None, []
    if isinstance(feeds, list):
        fitted = [fit_inputs(f, names) for f in feeds]
        notes = [n for _, ns in fitted for n in ns]
        return [f for f, _ in fitted], list(dict.fromkeys(notes))
    keys = list(feeds)
    if not keys or any(k in names for k in keys):
        return feeds, []
    positional = [f"arr_{i}" for i in range(len(keys))]
    if sorted(keys, key=lambda k: (len(k), k)) == positional and len(keys) <= len(names):
        mapped = {names[i]: feeds[f"arr_{i}"] for i in range(len(keys))}
        return mapped, ["the inputs file holds unnamed arrays (np.savez(f, x) stores arr_0, ...): read in the "
                        "model's input order: " + ", ".join(f"arr_{i} -> {names[i]!r}" for i in range(len(keys)))]
    shown = ", ".join(repr(k) for k in keys[:8]) + (" ..." if len(keys) > 8 else "")
    raise OpbridgeError("bad_option", f"the inputs file names {shown}, none of the model's inputs: "
                        f"{', '.join(repr(n) for n in names)} (save them by name: np.savez(f, **{{name: array}}))")


def _mark_outputs(model: Model, start: int = 0) -> list[str]:
    """Make every intermediate tensor of the main graph's nodes from ``start`` on an output;
    returns the names of all outputs, the model's first. A value whose rank is not known
    before conversion (a reshape to a shape computed at run time, before folding) stays
    internal: a model output needs its rank declared (ONNX's checker rejects one without),
    and the values after it are still compared."""
    g = model.graph
    names = [v.name for v in g.outputs]
    for n in g.nodes[start:]:
        for v in n.outputs:
            if v.type.kind == "tensor" and v.type.shape is not None and v not in g.outputs:
                g.outputs.append(v)
                names.append(v.name)
    return names


def source_outputs(model: Model, source: Any, feeds: dict[str, np.ndarray], names: list[str],
                   **opts: Any) -> tuple[list[Any] | None, str]:
    """The source model run by its own framework (onnxruntime for ONNX, the TFLite
    interpreter, TensorFlow, eager PyTorch: the frontend's ``run_source``), or
    ``(None, why)`` when it cannot run here."""
    from ..frontends import SourceUnavailable, run_source

    if source is None:
        return None, "no source model"
    try:
        return list(run_source(model, source, feeds, names, **opts)), ""
    except SourceUnavailable as exc:
        return None, str(exc)


def source_tolerance(model: Model, name: str, tol: dict[str, float]) -> dict[str, float]:
    """The tolerance against the source runtime for output ``name``: the model's, widened
    by what the frontend recorded (``metadata['opbridge.source_atol']``, JSON by output name:
    e.g. one quantization step of an int8 output computed in float by the targets)."""
    import json

    extra = json.loads((model.metadata or {}).get("opbridge.source_atol", "{}")).get(name)
    return tol if extra is None else {**tol, "atol": max(tol["atol"], float(extra))}


def compare_source(model: Model, name: str, expected: Any, got: Any, tol: dict[str, float],
                   legalized: str | None) -> Diff:
    """An output against the source runtime's, under ``source_tolerance``; an integer output
    with a recorded tolerance (an int8 result one rounding step apart: the targets compute in
    float and requantize, the source's integer kernels round their own way) may differ by it."""
    wide = source_tolerance(model, name, tol)
    d = compare_output(expected, got, wide, legalized)
    e, g = np.asarray(expected), np.asarray(got)
    if d.ok or wide is tol or e.dtype.kind not in "iu" or g.dtype.kind not in "iu" or e.shape != g.shape:
        return d
    err = np.abs(e.astype(np.int64) - g.astype(np.int64))
    worst = int(err.max()) if err.size else 0
    ok = worst <= wide["atol"]
    return Diff(ok, float(worst), 0.0, 0.0, f"max abs {worst} (within {wide['atol']:g}: the source's integer rounding)"
                if ok else f"max abs {worst}")


def check_model(build_ir: Callable[[], Model], backends: list[str], feeds: dict[str, np.ndarray] | None = None,
                progress: Callable[[str], None] | None = None, artifacts: dict[str, Any] | None = None,
                source: Any = None, written: dict[str, Any] | None = None,
                source_opts: dict[str, Any] | None = None, per_node: bool = False) -> dict[str, Any]:
    """Compare each backend with the NumPy reference and, when ``source`` is the original
    model, with the source framework's own runtime on it (``vs_source``). For an ONNX source
    the reference decides; for any other source format the source runtime decides too (the
    frontend's translation is what is proven). ``artifacts`` holds already-converted
    artifacts (``opbridge convert`` checks what it wrote, not a re-emission). ``per_node``:
    each backend is also run with every intermediate value it can expose marked as an output,
    and every value is compared with the reference's (``BackendReport.per_node``); the first
    that differs is the first divergence."""
    say = progress or (lambda s: None)
    ref_model = build_ir()
    feeds = feeds if feeds is not None else random_inputs(ref_model)
    missing = {k: v for k, v in _initial_state(ref_model).items() if k not in feeds}
    if missing:  # input sets that leave the carried state out start from its first values
        feeds = {**feeds, **missing}
    tol = tolerance_for(sorted(ref_model.op_histogram()))
    from ..compile import interpreter

    say("reference: running the NumPy reference")
    ref_model = convert("numpy", ref_model)  # the reference's own lowering, on a clone
    expected = interpreter.run(ref_model, feeds)
    ref_feeds, traced = feeds, []

    def trace() -> dict[str, Any]:
        """Every intermediate value of the reference, run again only when a backend fails
        (held up to ``TRACE_BYTES``: the earliest values, which the search looks at first)."""
        if not traced:
            traced.append(_BoundedTrace(TRACE_BYTES))
            interpreter.run(ref_model, ref_feeds, traced[0])
        return traced[0]
    out_names = [v.name for v in ref_model.graph.outputs]
    say_spread = rounding_spread(ref_model, feeds, expected)
    steps = quantization_steps(build_ir())
    dynamic = dynamic_rounding_error(build_ir(), feeds, expected)
    if say_spread is not None:
        say("reference: rounding spread " + ", ".join(f"{n}={x:.3g}" for n, x in zip(out_names, say_spread)))
    src_model = build_ir()
    from ..ir.state import state_outputs

    carried = state_outputs(src_model.metadata)  # state written back: no source runtime returns it
    asked = [n for n in out_names if n not in carried]
    from ..ir.freeze import frozen_values

    src_feeds = {**feeds, **frozen_values(src_model.metadata)}  # the source still takes the frozen inputs
    feeds = {k: v for k, v in feeds.items() if k in {i.name for i in ref_model.graph.inputs}}
    src, src_note = (source_outputs(src_model, source, src_feeds, asked, **(source_opts or {}))
                     if source is not None else (None, ""))
    if src is not None and carried:
        got_src = dict(zip(asked, src))
        src = [got_src.get(n) for n in out_names]
    runtime = _runtime_name(src_model) if source is not None else ""
    decisive = src_model.source_format != "onnx"  # the source runtime is the oracle of a non-ONNX frontend
    if source is not None:
        say(f"source: {runtime} on the original model" + (f" ({src_note})" if src_note else ""))
    reports: list[BackendReport] = []
    for b in backends:
        say(f"{b}: converting and running")
        t0 = time.perf_counter()
        rep = BackendReport(b, "pass")
        float64 = _evaluates_in_float64(b)
        try:
            artifact = artifacts[b] if artifacts and b in artifacts else convert(b, build_ir())
            got = run_written(b, artifact, feeds, (written or {}).get(b))  # the written file, loaded back and run
            ports = output_ports(b, artifact)
            half = half_weights_error(build_ir(), feeds, expected) \
                if getattr(artifact, "weight_dtype", "float32") == "float16" else {}
            if len(got) != len(out_names) or [p.name for p in ports] != out_names:
                rep.status, rep.reason = "fail", "outputs"
                rep.detail = f"the artifact returns {[p.name for p in ports]} ({len(got)} values), expected {out_names}"
            for i, (name, e, g, port) in enumerate(zip(out_names, expected, got, ports)):
                tol_i = _dynamic(_dynamic(_one_step(_widened(tol, say_spread, i), steps.get(i)), dynamic.get(i)),
                                 half.get(i))
                d = compare_output(e, g, tol_i, port.legal)
                vs = compare_source(src_model, name, src[i], g, tol_i, port.legal) \
                    if src is not None and src[i] is not None else None
                quant = None
                if i in steps and np.shape(g) == np.shape(e):
                    ref = np.asarray(src[i] if src is not None and src[i] is not None else e, dtype=np.float64)
                    err = np.abs(np.asarray(g, dtype=np.float64) - ref) / steps[i]
                    off = err > 0.5
                    quant = {"step": steps[i], "max_steps": round(float(err.max()) if err.size else 0.0, 3),
                             "exact_share": round(1.0 - float(off.mean()) if off.size else 1.0, 5)}
                rep.outputs.append(OutputReport(name, d, vs, quant))
                if quant is not None and tol_i["atol"] >= steps[i] and (not compare_output(e, g, tol, port.legal).ok or (
                        vs is not None and not compare_source(src_model, name, src[i], g, tol, port.legal).ok)):
                    rep.notes.append(f"output {name!r}: within one quantization step ({steps[i]:.3g}); "
                                     f"{100.0 * quant['exact_share']:.2f}% of {np.size(g)} values exact: "
                                     "integer kernels round their own way")
                elif i in half and tol_i["atol"] == DYNAMIC_FACTOR * half[i] and (
                        not compare_output(e, g, tol, port.legal).ok or (
                        vs is not None and not compare_source(src_model, name, src[i], g, tol, port.legal).ok)):
                    rep.notes.append(f"output {name!r}: within {DYNAMIC_FACTOR:g}x what rounding the weights to "
                                     f"float16 moves the reference ({half[i]:.3g}): the artifact stores them so")
                elif i in dynamic and tol_i["atol"] == DYNAMIC_FACTOR * dynamic[i] and (
                        not compare_output(e, g, tol, port.legal).ok or (
                        vs is not None and not compare_source(src_model, name, src[i], g, tol, port.legal).ok)):
                    rep.notes.append(f"output {name!r}: within {DYNAMIC_FACTOR:g}x the source's own dynamic "
                                     f"activation rounding ({dynamic[i]:.3g} from the unrounded computation): the "
                                     "target quantizes activations its own way")
                elif tol_i is not tol and (not compare_output(e, g, tol, port.legal).ok
                                           or (vs is not None and not compare_source(src_model, name, src[i], g, tol,
                                                                                     port.legal).ok)):
                    rep.notes.append(f"output {name!r}: within the quantization rounding spread (atol "
                                     f"{tol_i['atol']:.3g}: the reference moves {say_spread[i]:.3g} when near-tie "
                                     f"roundings flip)")
                if not d.ok and vs is not None and vs.ok and _reference_is_the_outlier(e, src[i], d, tol):
                    # the artifact computes what the source runtime computes; the float64 reference
                    # parts from both on an ill-conditioned output (a log of near-zero spectra)
                    rep.notes.append(f"output {name!r}: the NumPy reference differs from {runtime} as much as "
                                     f"from the artifact ({d.reason}); the artifact matches {runtime}")
                elif not d.ok:
                    rep.status, rep.reason = "fail", "mismatch"
                elif decisive and vs is not None and not vs.ok and float64 and _reference_is_the_outlier(
                        src[i], e, vs, tol_i):
                    # evaluated in float64 (not the framework's runtime), the artifact agrees with
                    # the float64 reference; the source's float32 runtime parts from both alike
                    rep.notes.append(f"output {name!r}: {runtime} differs from the float64 reference as much as "
                                     f"from the artifact ({vs.reason}), which is evaluated in float64 here and "
                                     f"matches the reference")
                elif decisive and vs is not None and not vs.ok:
                    rep.status, rep.reason = "fail", "source_mismatch"
                    rep.detail = f"output {name!r} differs from {runtime} on the source: {vs.reason}"
            if (rep.status == "fail" and b in SATURATING_INT8 and not cpu.exact_int8_products()
                    and is_quantized(ref_model.graph)):
                rep.notes.append(f"this CPU is {cpu.describe()}: {SATURATING_INT8[b]} can part from the exact 8-bit "
                                 "products here (a full-int8 TFLite model came out up to 91 steps off on such a CPU "
                                 "and exact on one with VNNI)")
            if per_node:
                say(f"{b}: comparing every intermediate value with the reference")
                rep.per_node = []
                found, err = _diverging(b, build_ir, feeds, trace(), tol, 0, collect=rep.per_node)
                if err is not None:
                    rep.notes.append(f"per-node: {err}")
                    rep.per_node = None
                elif found is not None and rep.status == "fail":
                    rep.first_divergence = found
            if rep.status == "fail" and rep.first_divergence is None:
                rep.first_divergence = _first_divergence(b, build_ir, feeds, trace(), tol)
        except Exception as exc:  # noqa: BLE001 - reported per backend with its reason code
            rep.status, rep.reason = classify(exc)
            rep.detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        rep.seconds = time.perf_counter() - t0
        reports.append(rep)
    return {"inputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in feeds.items()},
            "tolerance": tol, "backends": reports, "source": runtime if src is not None else src_note,
            **({"rounding_spread": dict(zip(out_names, say_spread))} if say_spread is not None else {})}


#: targets whose runtime runs a quantized model's 8-bit kernels through oneDNN's x86 paths, which
#: on a CPU without VNNI do not compute every u8 x s8 product exactly (translator/ir/cpu.py)
SATURATING_INT8 = {"openvino": "OpenVINO's CPU plugin (oneDNN's x86 int8 convolutions and matmuls)"}


def _reference_is_the_outlier(expected: Any, source: Any, d: Diff, tol: dict[str, float]) -> bool:
    """Whether the source runtime differs from the reference at least half as much as the
    artifact does: then the reference, not the conversion, is what parts (float32 runtimes
    agreeing with each other on an output the float64 reference computes differently)."""
    e, s = np.asarray(expected), np.asarray(source)
    if e.shape != s.shape or e.dtype.kind != "f" or s.dtype.kind != "f":
        return False
    ds = compare_output(e, s, tol)
    return not ds.ok and ds.max_abs is not None and d.max_abs is not None and ds.max_abs >= 0.5 * d.max_abs


def _evaluates_in_float64(backend: str) -> bool:
    from ..compile.target import get

    try:
        t = get(backend)
    except Exception:  # noqa: BLE001 - an unknown name fails where it is converted
        return False
    return bool(t.float64_evaluation is not None and t.float64_evaluation())


def _runtime_name(model: Model) -> str:
    from ..frontends import get

    return get(model.source_format).RUNTIME


#: at most this many re-emissions when exposing every value hides the divergence (bisection)
BISECT_STEPS = 12


#: the bytes of reference intermediates kept for the first-divergence search
TRACE_BYTES = 2 << 30


class _BoundedTrace(dict):
    """A trace that keeps values until they add up to ``limit`` bytes, then no more."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.left = limit

    def __setitem__(self, key: str, value: Any) -> None:
        size = int(getattr(value, "nbytes", 0) or 0)
        if size <= self.left:
            self.left -= size
            super().__setitem__(key, value)


def _first_divergence(backend: str, build_ir: Callable[[], Model], feeds: dict[str, Any], trace: dict[str, Any],
                      tol: dict[str, float]) -> dict[str, Any] | None:
    """The first node (topological order) whose output differs from the reference's, the
    model re-emitted with every intermediate value marked as an output (dynamic dims kept:
    it runs on the same feeds). A value the artifact documents returning in a narrower
    integer dtype is compared as the check compares outputs; a constant's ``to the end``
    sentinels (INT64_MAX/MIN) are compared saturated to that dtype, as the dtype
    legalization writes them (``passes.legalize_dtypes``).

    When nothing differs with every value exposed (a converter that rewrites a region only
    when its values are not outputs: TFLite's FULLY_CONNECTED for a batched product), the
    values exposed are bisected (those of the nodes from k on, ``BISECT_STEPS`` at most) to
    the node whose exposure makes the artifact right: it is named, with that reason."""
    nodes = [n for n in build_ir().graph.nodes]
    found, err = _diverging(backend, build_ir, feeds, trace, tol, 0)
    if err is not None:
        return {"error": err}
    if found is not None:
        return found
    lo, hi = 0, len(nodes)  # exposing nodes[lo:] hides the divergence, exposing nodes[hi:] (none) does not
    for _ in range(BISECT_STEPS):
        if hi - lo <= 1:
            break
        mid = (lo + hi) // 2
        hit, err = _diverging(backend, build_ir, feeds, trace, tol, mid)
        if err is not None:
            break
        if hit is None:
            lo = mid
        else:
            hi = mid
    if hi - lo != 1:
        return None
    n = nodes[lo]
    return {"node": n.name, "op": n.op, "value": n.outputs[0].name if n.outputs else "", "max_abs": None,
            "reason": "the artifact is right only while this value is also an output: the target's converter "
                      "rewrites the graph around it otherwise"}


def _diverging(backend: str, build_ir: Callable[[], Model], feeds: dict[str, Any], trace: dict[str, Any],
               tol: dict[str, float], start: int,
               collect: list[dict[str, Any]] | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(the first diverging value, None) with the values of the nodes from ``start`` on marked
    as outputs (the model's outputs always compared), or (None, why it could not run). With
    ``collect``, every comparison is appended to it (node, op, value, errors, ok)."""
    from ..compile.target import get

    model = build_ir().clone()
    g = model.graph
    order = _mark_outputs(model, start)
    try:
        try:
            artifact = convert(backend, model)
        except Exception:  # noqa: BLE001 - e.g. coremltools over flexible dims with every value an output
            fixed = _at_feed_sizes(model, feeds)
            if not fixed:
                raise
            artifact = convert(backend, fixed)  # the same feeds run it: the dims at their sizes
        got = list(get(backend).run(artifact, feeds))
        legal = {p.name: p.legal for p in output_ports(backend, artifact)}
    except Exception as exc:  # noqa: BLE001
        return None, f"could not mark intermediate outputs: {str(exc).splitlines()[0] if str(exc) else exc}"
    by_name = dict(zip(order, got))
    first: dict[str, Any] | None = None
    for n in g.nodes:
        for v in n.outputs:
            if v.name in by_name and v.name in trace:
                expected = trace[v.name]
                if n.op == "constant":
                    expected = _saturated(expected, legal.get(v.name))
                d = compare_output(expected, by_name[v.name], tol, legal.get(v.name))
                if collect is not None:
                    collect.append({"node": n.name, "op": n.op, "value": v.name, "ok": d.ok, "max_abs": d.max_abs,
                                    "max_rel": d.max_rel, "max_ulp": d.max_ulp})
                if not d.ok and first is None:
                    first = {"node": n.name, "op": n.op, "value": v.name, "max_abs": d.max_abs, "reason": d.reason}
                    if collect is None:
                        return first, None
    return first, None


def _at_feed_sizes(model: Model, feeds: dict[str, Any]) -> Model | None:
    """A clone of ``model`` whose symbolic input dims are the sizes of ``feeds``, or None
    when it has none."""
    from ..ir import dims

    sizes = dims.sizes_in(model, feeds)
    if not sizes:
        return None
    fixed = model.clone()
    dims.fix(fixed, sizes, every=False)
    return fixed


def _saturated(value: Any, legal: str | None) -> Any:
    """An integer constant with values beyond ``legal``'s range, clipped to it (the
    legalization's sentinel saturation); anything else unchanged."""
    from ..table.dtypes import numpy_dtype

    a = value
    if legal is None or not isinstance(a, np.ndarray) or a.dtype.kind not in "iu" or not a.size:
        return value
    try:
        target = np.dtype(numpy_dtype(legal))
    except Exception:  # noqa: BLE001 - a dtype NumPy cannot hold
        return value
    if target.kind not in "iu" or target.itemsize >= a.dtype.itemsize:
        return value
    info = np.iinfo(target)
    return np.clip(a, info.min, info.max).astype(a.dtype)


def report_json(res: dict[str, Any]) -> dict[str, Any]:
    out = {"inputs": res["inputs"], "tolerance": res["tolerance"], "backends": []}
    if res.get("rounding_spread") is not None:
        out["rounding_spread"] = res["rounding_spread"]
    if res.get("source"):
        out["source"] = res["source"]
    for r in res["backends"]:
        out["backends"].append({
            "backend": r.backend, "status": r.status, "reason": r.reason, "detail": r.detail,
            "seconds": round(r.seconds, 3), "first_divergence": r.first_divergence,
            **({"notes": list(r.notes)} if r.notes else {}),
            **({"per_node": r.per_node} if r.per_node is not None else {}),
            "outputs": [{"name": o.name, "ok": o.diff.ok, "max_abs": o.diff.max_abs, "max_rel": o.diff.max_rel,
                         "max_ulp": o.diff.max_ulp, "verdict": o.diff.verdict,
                         "reason": o.diff.reason or (o.diff.verdict if o.diff.legalized else ""),
                         "legalized": o.diff.legalized,
                         **({"vs_source": {"ok": o.vs_source.ok, "max_abs": o.vs_source.max_abs, "max_rel": o.vs_source.max_rel,
                                           "max_ulp": o.vs_source.max_ulp}} if o.vs_source is not None else {}),
                         **({"quantization": o.quantization} if o.quantization is not None else {})}
                        for o in r.outputs]})
    return out


def model_loader(source: Any, **opts: Any) -> Callable[[], Model]:
    """Read ``source`` once (any frontend: ``translator.frontends.detect``); the returned
    function gives that IR (the pipeline clones it, so every target and the reference share it)."""
    from .. import frontends

    model = frontends.load(source, **opts)  # validated: fails early, with a one-line reason
    return lambda: model
