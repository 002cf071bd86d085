"""opbridge from Python: the same jobs as the CLI.

    import opbridge
    opbridge.query("conv")                                   # opbridge query conv --json
    opbridge.report("model.tflite")                          # opbridge report model.tflite --json
    opbridge.convert("model.onnx", to="tflite,coreml", out="out/")
    opbridge.convert(module, example_inputs=(x,), to="coreml", out="m.mlpackage")
    opbridge.check("model.keras", backends="numpy,onnx")

``model`` is anything ``opbridge convert`` reads (an ``.onnx``/``.tflite`` file, a
SavedModel folder, a ``.keras`` file, ``"pkg.module:factory"``), or a ``torch.nn.Module``
with ``example_inputs``. Importing this package imports no ML framework.
"""
from __future__ import annotations

from typing import Any, Iterable

from translator import __version__, backends, dtype, load_tables, ops, query


def _quiet() -> Any:
    """A context in which framework log lines are off, as in the CLI without ``-v`` (native
    libraries' stderr lines filtered for the duration of the call only), unless
    ``OPBRIDGE_VERBOSE`` is set."""
    import contextlib
    import os

    if os.environ.get("OPBRIDGE_VERBOSE"):
        return contextlib.nullcontext()
    from translator.cli.main import native_stderr_filtered, quiet_frameworks

    quiet_frameworks()
    return native_stderr_filtered()


def _quietly(fn: Any) -> Any:
    """``fn`` run inside ``_quiet()``."""
    import functools

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with _quiet():
            return fn(*args, **kwargs)

    return run


__all__ = ["convert", "query", "report", "check", "dtype", "ops", "backends", "load_tables", "__version__"]


@_quietly
def convert(model: Any, example_inputs: Any = None, *, to: str | list[str], out: str, check: bool = True,
            inputs: Any = None, options: dict[str, Any] | None = None, progress: Any = None,
            dynamic_shapes: Any = None, signature: str | None = None,
            fix_dims: dict[str, int] | None = None,
            check_dims: dict[str, tuple[int, int]] | None = None,
            freeze: dict[str, Any] | None = None, all_or_nothing: bool = False) -> dict[str, Any]:
    """``opbridge convert MODEL --to TO -o OUT [--no-check]``: the ``--json`` record as a dict
    (``written`` False means a target failed: the others are written, ``written_targets``;
    ``all_or_nothing=True`` writes none then, ``--all-or-nothing``). ``dynamic_shapes``:
    ``torch.export``'s, for an ``nn.Module`` (``torch.export.Dim`` dims stay dynamic where the
    target allows); ``signature``: a SavedModel's signature (default ``serving_default``);
    ``fix_dims``: symbolic input dims to fix (``{"batch": 1}``; ``convert --fix-dim``);
    ``check_dims``: the two sizes a dynamic dim is checked at (``{"samples": (400, 800)}``);
    ``freeze``: inputs that become constants (``{"sr": 16000}``; ``convert --freeze``)."""
    from translator.run.convert import convert as _convert


    extra = {k: v for k, v in (("dynamic_shapes", dynamic_shapes), ("signature", signature)) if v is not None}
    return _convert(model, to, out, check=check, inputs=inputs, example_inputs=example_inputs, options=options,
                    progress=progress, source_options=extra, fix_dims=fix_dims,
                    check_dims=check_dims, freeze=freeze, all_or_nothing=all_or_nothing)


@_quietly
def report(model: Any = None, example_inputs: Any = None, backends: Iterable[str] | None = None,
           fix_dims: dict[str, int] | None = None, check_dims: dict[str, Any] | None = None,
           freeze: dict[str, Any] | None = None) -> dict[str, Any]:
    """``opbridge report MODEL --json`` (per target: what converts, what is decomposed, what is
    refused and why); without ``model``, the whole operator table (``report --table --json``).
    ``fix_dims`` / ``check_dims`` as for ``convert`` (a target that fixes a symbolic dim takes
    the first size it is checked at), so the prediction is made at the same sizes; ``freeze``
    as for ``convert``."""
    import json

    from translator.run import report as R


    if model is None:
        return json.loads(R.dumps(R.table_matrix()))
    from translator.run.check import model_loader
    from translator.compile.target import names

    opts = {"example_inputs": example_inputs} if example_inputs is not None else {}
    ir = model_loader(model, **opts, keep_unread=True)()  # an unreadable op: one refused node
    if freeze:
        from translator.ir.freeze import freeze as freeze_inputs
        from translator.run.convert import settle_frozen

        ir = settle_frozen(freeze_inputs(ir.clone(), freeze))
    chosen = list(backends) if backends else names(include_reference=False)
    opts = R.dim_options(fix_dims, check_dims, ir, chosen)
    plans = R.plan_model(ir, chosen, **opts)
    shown = model if isinstance(model, str) else type(model).__name__
    return json.loads(R.dumps(R.model_json(str(shown), plans, R.problems(plans, ir, **opts))))


@_quietly
def check(model: Any, example_inputs: Any = None, backends: str | Iterable[str] = "numpy,onnx",
          inputs: Any = None) -> dict[str, Any]:
    """``opbridge check MODEL --backends B --json``: each backend against the NumPy reference
    and the source framework's own runtime."""
    from translator.run.check import check_model, load_inputs, model_loader, report_json


    opts = {"example_inputs": example_inputs} if example_inputs is not None else {}
    names = [b.strip() for b in backends.split(",")] if isinstance(backends, str) else list(backends)
    feeds = (load_inputs(inputs) if isinstance(inputs, str) else dict(inputs)) if inputs else None
    return report_json(check_model(model_loader(model, **opts), names, feeds, source=model, source_opts=opts))
