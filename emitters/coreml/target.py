"""``TARGET``: the Core ML backend as the pipeline sees it (``translator.compile.target.Target``).

* ``configure``: the deployment target (``--target``, default iOS17), checked against
  coremltools' ``ct.target`` → ``ctx.options["deployment_target"]`` (not ``target``: that is
  ``compile``'s own parameter);
* ``prepare``: ``prepare.prepare`` (counted loops unrolled, cast_like folding, re-inference,
  slice-bound clamping, quantized dtypes noted before legalization);
* ``legal_dtypes``: the coreml column of ``dtypes.yaml`` (the dtypes MIL programs compute
  in: fp16, fp32, int32, bool);
* ``emit``: ``codegen.emit`` (the builder script), then ``runtime.package`` (build,
  convert, save, reload, interface check).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from translator.compile.target import Option, Target, column_dtypes

from . import quant
from .codegen import emit as generate
from .mil import DEFAULT_TARGET, CoreMLArtifact, deployment_target
from .prepare import prepare
from .registry import NAME
from translator.table.errors import OpbridgeError, Unsupported

from .runtime import _can_predict as can_predict, integer_kernels, load, output_ports, package, run, save, smoke, version

if TYPE_CHECKING:
    from translator.ir.graph import Model
    from translator.compile.pipeline import Compilation


#: the dtypes MIL programs compute in: the native cells of the coreml column of dtypes.yaml
legal_dtypes = column_dtypes(NAME)


def configure(model: "Model", ctx: "Compilation") -> None:
    ctx.options["deployment_target"] = deployment_target(ctx.options.get("deployment_target") or DEFAULT_TARGET)


def emit(model: "Model", ctx: "Compilation") -> CoreMLArtifact:
    art = generate(model, ctx)
    if not art.flexible:
        return package(art)
    # flexible input dims: coremltools builds and types the program over MIL symbols, and its
    # shape logic can go where the graph's own does not (a squeeze of a symbolic dim, a reshape
    # to a run-time shape); a program it cannot build, or that the MIL evaluator cannot run at
    # the default sizes, is a dynamic_shape refusal, so the dims are fixed and the reason said
    try:
        package(art)
        why = smoke(art)
    except OpbridgeError as exc:
        why = str(exc).splitlines()[0]
    if why:
        raise Unsupported("input", NAME, "dynamic_shape", f"MIL cannot run the program over flexible input dims: "
                          f"{why}", None)
    return art


TARGET = Target(
    name=NAME, title="Core ML", emit=emit, run=run, save=save, load=load, output_ports=output_ports,
    suffix="_coreml", written="model", legal_dtypes=legal_dtypes, prepare=prepare, configure=configure,
    dynamic_dims=True,  # symbolic input dims become flexible ones (ct.RangeDim); fixed, and said so, where MIL cannot
    options=(Option("--target", "deployment_target", "CoreML deployment target (e.g. iOS17)", metavar="TARGET"),),
    float64_evaluation=lambda: not can_predict(),  # the MIL evaluator sums in float64
    version=version, integer_kernels=integer_kernels, integer_plan=quant.integer_plan, doc=__doc__ or "", extra={"spell": lambda name: f"mb.{name}("},
)

__all__ = ["TARGET", "legal_dtypes"]
