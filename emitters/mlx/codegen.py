"""Lowered IR → a standalone MLX module (``model.py``: one eager function over ``mlx.core``
/ ``mlx.nn``) and its weights (``weights.safetensors``).

Only code generation: the pipeline has verified, folded, legalized dtypes and lowered the
graph, so every node has a rule (``@rule`` in the family modules) or the ``snippet`` of its
``mlx`` cell in ``optable.yaml`` (the same expression the table's proof ran in MLX).
``forward(params, *inputs)`` is straight-line code, one line per node.

Constants: a snippet reads the inputs that steer it (shapes, axes, pads, scales) as Python
values (``.tolist()``, ``.item()``), so they stay ``mx.array``s: integer constants up to
``INLINE_MAX`` elements are written inline as ``mx.array([...], dtype=mx.int64)``, and so is
every other real constant of up to ``INLINE_ANY`` elements (a resize's scales). Every other
constant is a weight: ``params[<name>]``, read from the safetensors file.

A rule or snippet that cannot write a node (``e.refuse``) does not end the conversion here:
every such node is reported to the pipeline at once (``Rejected``), which decomposes it
where the table can. Names from the model become sanitized, de-duplicated identifiers
(``render.ident``); literals pass through ``render.literal``. The module's own helpers
(``templates/mlx/helpers.py``) start with an underscore, which no sanitized name does.
"""
from __future__ import annotations

import builtins
import math
import os
from typing import TYPE_CHECKING

import numpy as np

from translator.compile import pysource
from translator.compile.registry import Refusal
from translator.compile.render import literal
from translator.ir.graph import Model, Node, Value
from translator.ir.names import io_names
from translator.table import paths
from translator.table.errors import Unsupported

from .registry import NAME
from .runtime import WEIGHTS_FILE, MlxArtifact

if TYPE_CHECKING:
    from translator.compile.pipeline import Compilation

#: constants written inline up to this many elements: integers and booleans (shapes, axes,
#: pads, indices), and any real dtype (a resize's scales, a clip's bounds)
INLINE_MAX = 64
INLINE_ANY = 8
#: the dtypes MLX computes in on the CPU, by the IR's dtype ids
MLX_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
              "bfloat16", "float32", "float64", "complex64")
#: the trial runs a node's code on zeros when its inputs hold at most this many elements
TRIAL_MAX = 1 << 16
#: a node with an input this small (rank <= 1) is not run for a trial: its values may steer
#: the code (a shape, axes, a slice's steps, a range's bounds), and zeros are not its values
STEERING_MAX = 16
_RESERVED = frozenset(dir(builtins)) | {"os", "math", "itertools", "np", "mx", "nn", "params", "forward", "load",
                                        "SOURCE", "OPS", "INPUTS", "OUTPUTS", "VERSION", "WEIGHTS_FILE",
                                        "FLOAT64_WEIGHTS", "LEGALIZED"}


def _helpers_file() -> str:
    return os.path.join(paths.templates_dir(), NAME, "helpers.py")


def mx_dtype(dtype: str | None) -> str:
    """``mx.<dtype>`` (``mx.bool_`` for bool)."""
    if dtype not in MLX_DTYPES:
        raise Unsupported("cast", NAME, "unsupported_dtype", f"MLX has no {dtype} arrays")
    return "mx.bool_" if dtype == "bool" else f"mx.{dtype}"


class Codegen(pysource.SourceCodegen):
    """The body of ``forward``: constants inline (``mx.array``) or as ``params[...]``."""

    name = NAME
    reserved = _RESERVED

    def helpers_path(self) -> str:
        return _helpers_file()

    def dtype_code(self, dtype: str | None) -> str:
        return mx_dtype(dtype)

    def const_code(self, v: Value) -> str:
        arr = np.asarray(v.const)
        if arr.dtype.kind in "OSUV":
            raise Unsupported("constant", NAME, "unsupported_dtype", f"MLX has no {arr.dtype} arrays")
        dt = mx_dtype(v.type.dtype or arr.dtype.name)
        if arr.size == 0:
            return f"mx.zeros({literal(list(arr.shape))}, dtype={dt})"
        if arr.dtype.kind != "c" and (arr.size <= INLINE_ANY or (arr.size <= INLINE_MAX and arr.dtype.kind in "biu")):
            values = arr.astype(np.float64) if arr.dtype.kind == "f" else arr
            return f"mx.array({literal(values.tolist())}, dtype={dt})"
        return self.param(v)


NodeEmit = pysource.SourceEmit


def trial(node: Node, ctx: "Compilation") -> Refusal | None:
    """Whether the node's rule or snippet writes it, and the code runs in MLX on zero inputs of
    the node's shapes and dtypes: what fails here is a refusal while lowering, so the table's
    decomposition applies and ``report`` agrees with ``convert``. Nodes with subgraphs, inputs
    of unknown shape, empty, of more than ``TRIAL_MAX`` elements or with a small input that may
    steer the code (``STEERING_MAX``) are judged by writing the code only."""
    cg = Codegen(ctx.tables, ctx.target.columns)
    args: list[tuple[str, Value]] = []
    for v in node.inputs:
        if v is not None and not v.is_const and cg.scope.lookup(v) is None:
            args.append((cg.bind(v), v))
    e = NodeEmit(cg, node)
    try:
        code = cg.code(e)
    except Unsupported as exc:
        return pysource.refusal(NAME, exc)
    if any(True for _ in node.subgraphs()):
        return None
    specs = []
    for _, v in args:
        if not v.type.is_static or v.type.dtype not in MLX_DTYPES or v.type.kind != "tensor":
            return None
        specs.append((tuple(int(d) for d in v.type.shape), v.type.dtype))
    if sum(math.prod(s) for s, _ in specs) > TRIAL_MAX or any(0 in s for s, _ in specs):
        return None  # too big to run for a trial, or empty (MLX's CPU reductions over no elements can hang)
    if any(len(s) <= 1 and math.prod(s) <= STEERING_MAX for s, _ in specs):
        return None  # its values may steer the code (zero slice steps crash MLX: SIGFPE)
    lines = [f"{', '.join(e.outs) if len(e.outs) != 1 else e.outs[0]} = {code}"] if isinstance(code, str) else code
    why = _runs(cg, [a for a, _ in args], specs, lines, e.outs)
    if why is None:
        return None
    return Refusal("unsupported_attr", f"MLX rejects the code: {why}")


def _runs(cg: Codegen, names: list[str], specs: list[tuple[tuple[int, ...], str]], lines: list[str],
          outs: list[str]) -> str | None:
    """None when ``lines`` run in MLX on zero inputs of ``specs``, else why not."""
    import mlx.core as mx

    from .runtime import mx_array, namespace, quiet_compile

    text = "\n".join([f"def _trial(params{''.join(', ' + n for n in names)}):"] + ["    " + ln for ln in lines]
                     + [f"    return ({', '.join(outs)},)"])
    ns = namespace(cg.helper_sources())
    try:
        exec(quiet_compile(text, "<opbridge-mlx-trial>"), ns)  # noqa: S102 - our own generated code
        params = {k: mx_array(a) for k, a in cg.params.values()}
        with mx.stream(mx.cpu):
            args = [mx.zeros(s, dtype=getattr(mx, "bool_" if d == "bool" else d)) for s, d in specs]
            got = ns["_trial"](params, *args)
            arrays = [o for o in got if isinstance(o, mx.array)]
            if len(arrays) != len(got):
                return f"the code gave {[type(o).__name__ for o in got if not isinstance(o, mx.array)]}, not arrays"
            mx.eval(*arrays)
    except Exception as exc:  # noqa: BLE001 - any failure is the reason
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
    return None


# ----------------------------------------------------------------------------- emit
def emit(model: Model, ctx: "Compilation") -> MlxArtifact:
    """The lowered IR → ``MlxArtifact`` (the pipeline ran every pass before this)."""
    from translator import __version__
    from translator.compile.pipeline import Rejected
    from translator.compile.render import code_lines, render

    g = model.graph
    cg = Codegen(ctx.tables, ctx.target.columns)
    io = io_names(NAME, [v.name for v in g.inputs], [v.name for v in g.outputs], extra_reserved=_RESERVED)
    args = [cg.bind(v, name) for v, name in zip(g.inputs, io.inputs)]
    cg.graph_body(g)
    if cg.refused:
        raise Rejected(cg.refused)
    returns = [cg.ref(v) for v in g.outputs]
    source_in = dict(zip((v.name for v in g.inputs), ctx.source_inputs))
    in_dtypes = {v.name: str(v.type.dtype) for v in g.inputs
                 if source_in.get(v.name) is not None and v.type.dtype is not None
                 and source_in[v.name] != v.type.dtype}
    out_dtypes: dict[int, str] = {}
    out_legal: dict[int, str] = {}
    for i, (v, before) in enumerate(zip(g.outputs, ctx.source_outputs)):
        if before is not None and v.type.dtype is not None and before != v.type.dtype:
            out_dtypes[i], out_legal[i] = before, v.type.dtype
    weights = {name: arr for name, arr in cg.params.values()}
    float64 = sorted(name for name, arr in weights.items() if arr.dtype == np.float64)
    source = render(NAME, "module.py.j2", version=__version__, source=str(model.source), ops=model.op_histogram(),
                    weights_file=WEIGHTS_FILE, helpers=code_lines(cg.helper_sources()), params=bool(cg.params),
                    float64=float64, input_names=code_lines(args), output_names=list(io.outputs),
                    body=code_lines(cg.scope.lines), returns=code_lines(returns), legalized=list(ctx.warnings))
    return MlxArtifact(source, weights, [v.name for v in g.inputs], [v.name for v in g.outputs],
                       list(ctx.decomposed), list(ctx.warnings), in_dtypes, out_dtypes, out_legal, io.renamed(),
                       list(io.warnings))
