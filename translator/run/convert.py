"""``opbridge convert`` as a function: any source (``translator.frontends``) → one or more
targets, each written to a scratch folder, checked there, then moved into place.

``convert`` returns the same record the CLI prints (``--json``): per target ``status``
``ok`` | ``check_failed`` (written, the check ran and found a mismatch: kept for
inspection) | ``failed`` | ``check_error`` (nothing written for any target), with reason
codes and details. It never raises for a property of one target; a model that cannot be
read raises ``OpbridgeError``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

#: a check status that is a verdict on the artifact (the rest: the check could not run)
CHECKED = ("pass", "fail")


def model_stem(model: Any) -> str:
    """The output file stem for a model path, a SavedModel folder, a ``pkg.module:factory``
    or an in-memory model (its class name)."""
    import re

    if not isinstance(model, (str, os.PathLike)):
        base = type(model).__name__
    else:
        model = str(model)
        base = os.path.basename(os.path.normpath(model)) or "model"
        if ":" in base and not os.path.exists(model):
            base = base.replace(":", "_")
        if os.path.splitext(base)[1].lower() in (".onnx", ".tflite", ".keras"):
            base = os.path.splitext(base)[0]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", base) or "model"


def staging(final: str) -> Path:
    """A scratch folder beside ``final`` (same file system: moving in is a rename)."""
    parent = Path(os.path.abspath(final)).parent
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=".opbridge-", dir=parent))


def move_into_place(staged: Path, final: str) -> None:
    """``staged`` becomes ``final`` by rename (an existing ``final`` is replaced, as each
    backend's ``save`` does)."""
    dest = Path(final)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_dir() and not dest.is_symlink():
        old = staged.with_name(staged.name + ".old")
        os.replace(dest, old)
        os.replace(staged, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, dest)


def settle_frozen(model: Any) -> Any:
    """What the frozen values decide, decided for every target (the ONNX target folds nothing
    itself): the nodes computed from constants only fold, and the ``If``s they make constant
    are inlined, until nothing changes."""
    from ..compile.passes import control
    from ..compile.passes.fold_constants import fold_nodes
    from ..ir.infer import infer

    g = model.graph
    for _ in range(16):
        changed = len(fold_nodes(g, [n for n in g.nodes if n.op != "constant" and n.inputs
                                     and all(v is None or v.is_const for v in n.inputs)]))
        changed += control.inline_constant_ifs(g)
        if not changed:
            break
    infer(g)
    return model


def _static_clash(ir: Any, feeds: Any) -> str:
    """The inputs of ``feeds`` whose shape differs from the IR's static dims ("x [1, 40, 128, 1]
    vs [batch, 40, 256, 1]"), or "" when every array fits."""
    out = []
    for v in ir.graph.inputs:
        a = feeds.get(v.name) if isinstance(feeds, dict) else None
        shape = v.type.shape if v.type.kind == "tensor" else None
        if a is None or shape is None:
            continue
        got = tuple(getattr(a, "shape", ()))
        if len(got) != len(shape) or any(isinstance(d, int) and d != g for d, g in zip(shape, got)):
            out.append(f"{v.name} {list(got)} vs {[d if isinstance(d, int) else (d or '?') for d in shape]}")
    return "; ".join(out)


def _check_at_sizes(build: Callable[[], Any], t: str, feeds: Any, rec: dict[str, Any], artifact: Any, model: Any,
                    saved: str, opts: dict[str, Any], check_model: Callable[..., Any], report_json: Callable[..., Any],
                    random_inputs: Callable[..., Any],
                    check_dims: dict[str, tuple[int, ...]] | None = None) -> dict[str, Any]:
    """The check of one written artifact: on the user's inputs, or on seeded random inputs at
    each of ``dims.CHECK_SIZES`` for the dims it kept dynamic (fixed dims at their size). The
    first size that fails decides; the record says which sizes ran."""
    from ..ir import dims

    runs: list[tuple[int | None, Any, dict[str, int]]] = [(None, feeds, {})]
    skipped: list[str] = []
    if isinstance(feeds, list):  # the user's input sets: each checked, unless a dim it sets was fixed otherwise
        ir = build()
        fixed = rec.get("fixed_dims") or {}
        runs = []
        for k, f in enumerate(feeds):
            clash = _static_clash(ir, f)
            if clash:  # the model as read has static dims there (a frontend fixed what it could not read unknown)
                skipped.append(f"input set {k + 1} ({clash}): the model as read takes other static dims"
                               + (" (the frontend fixed them)" if (ir.metadata or {}).get("opbridge.fixed_input_shapes")
                                  else ""))
                continue
            sizes = dims.sizes_in(ir, f)
            other = {d: s for d, s in sizes.items() if d in fixed and fixed[d] != s}
            if other:
                skipped.append(f"input set {k + 1} ({', '.join(f'{d}={s}' for d, s in other.items())}): the target "
                               f"fixed {', '.join(f'{d}={fixed[d]}' for d in other)}")
                continue
            runs.append((k if len(feeds) > 1 else None, f, sizes))
        if not runs:
            return {"status": "error", "reason": "bad_option", "outputs": [], "source": "",
                    "detail": "no input set fits the dims the target fixed: " + "; ".join(skipped)}
    elif feeds is None:
        ir = build()
        fixed = rec.get("fixed_dims") or {}
        count = len(dims.CHECK_SIZES) if rec.get("dynamic_dims") else 1
        runs = []
        for k in range(count):
            sizes = {**dims.sizes_for(ir, k, check_dims), **fixed}
            runs.append((k if count > 1 else None, random_inputs(ir, sizes=sizes), sizes))
    b: dict[str, Any] = {}
    for n, f, sizes in runs:
        res = report_json(check_model(build, [t], f, artifacts={t: artifact}, source=model,
                                      written={t: saved}, source_opts=opts))
        b = res["backends"][0]
        b["source"] = res.get("source", "")  # the source runtime, or why it could not run
        if skipped:
            b["skipped_inputs"] = skipped
        if n is not None:
            kept = {d for ds in (rec.get("dynamic_dims") or {}).values() for d in ds}
            b["sizes"] = [{d: v for d, v in s.items() if d in kept} for _, _, s in runs]
            if b["status"] != "pass" and b.get("detail") is not None:
                shown = ", ".join(f"{d}={v}" for d, v in sizes.items() if d in kept)
                b["detail"] = f"at {shown}: {b['detail']}".rstrip(": ")
        if b["status"] != "pass":
            break
    return b


def _fallbacks(features: set[str]) -> list[tuple[dict[str, Any], str, str]]:
    """What ``convert`` writes instead, in order, when an artifact with these features fails its
    check: (the compile options, why, what is written)."""
    out: list[tuple[dict[str, Any], str, str]] = []
    if "channels_last" in features:  # the PyTorch target's NHWC filters
        out.append(({"contiguous": True}, "the channels-last convolutions fail the check",
                    "its convolutions over contiguous (NCHW) tensors"))
    if "int8_recurrence" in features:
        out.append(({"float_recurrence": True}, "the integer LSTM kernels fail the check",
                    "the LSTMs in float over their int8 weights"))
    if {"fake_quant", "dynamic_range", "int8_recurrence"} & features:
        out.append(({"float_quantization": True}, "the int8 model (integer kernels) fails the check",
                    "its quantized arithmetic in float ops"))
    return out


def _features(artifact: Any) -> set[str]:
    """An artifact's features (``fake_quant``, ``dynamic_range``): its options' (every writer
    with an artifact class), or an ONNX model's ``quantized.FEATURES_METADATA`` metadata."""
    from ..compile.quantized import FEATURES_METADATA

    feats = (getattr(artifact, "options", None) or {}).get("features", ())
    if not feats and hasattr(artifact, "metadata_props"):
        feats = next((p.value.split(",") for p in artifact.metadata_props if p.key == FEATURES_METADATA), ())
    return set(feats)


def _input_sets(inputs: Any, load_inputs: Callable[[str], dict[str, Any]]) -> Any:
    """``inputs`` as the check takes them: None, one dict of arrays, or a list of them (several
    ``.npz`` files or dicts: each set is checked, e.g. two image sizes)."""
    if not inputs:
        return None
    one = (lambda x: load_inputs(x) if isinstance(x, (str, os.PathLike)) else dict(x))
    if isinstance(inputs, (list, tuple)):
        sets = [one(x) for x in inputs]
        return sets[0] if len(sets) == 1 else sets
    return one(inputs)


def convert(model: Any, to: str | list[str], out: str, *, check: bool = True, inputs: Any = None,
            example_inputs: Any = None, options: dict[str, Any] | None = None,
            progress: Callable[[str], None] | None = None, verbose: bool = False,
            source_options: dict[str, Any] | None = None, fix_dims: dict[str, int] | None = None,
            check_dims: dict[str, tuple[int, ...]] | None = None, freeze: dict[str, Any] | None = None,
            all_or_nothing: bool = False) -> dict[str, Any]:
    """Convert ``model`` (a path, a SavedModel folder, ``pkg.module:factory``, or an
    ``nn.Module`` with ``example_inputs``) to the targets ``to`` (names, comma-separated, or
    ``all``) at ``out`` (a folder when several targets). ``inputs``: an ``.npz`` path or a
    dict of arrays for the check (default: seeded random inputs). ``options``: target
    options by their CLI dest (e.g. ``{"coreml_target": "iOS17"}``). ``source_options``: what
    the frontend takes besides the model (PyTorch ``dynamic_shapes``, TensorFlow ``signature``).
    ``fix_dims``: symbolic input dims to fix, by symbol or ``input:axis`` (``translator.ir.dims``);
    a target whose artifacts declare static input shapes fixes the others to 1, and says so.
    Dims that stay dynamic are checked at each of ``dims.CHECK_SIZES`` (random inputs only),
    or at the sizes ``check_dims`` gives them (``{"samples": (400, 800)}``). ``freeze``: inputs
    that become constants (``{"sr": 16000}``; ``translator.ir.freeze``).

    Returns ``{"model", "nodes", "targets": [...], "written", "written_targets"}``: every target
    that converts (and checks, or whose check ran and found a mismatch) is written, each
    atomically, and a target that failed leaves nothing; ``written`` is True only when every
    target was. ``all_or_nothing``: when one target fails, none is written."""
    from ..ir import dims
    from .check import check_model, fit_inputs, load_inputs, model_loader, random_inputs, report_json, runnable_sizes
    from ..table.errors import OpbridgeError
    from .harness import classify
    from ..compile.pipeline import compile, fewest_dims_to_fix
    from ..compile.target import aliases, get, names
    from .terminal import internal_error_line

    say = progress or (lambda s: None)
    every = names(include_reference=False)
    targets = [t.strip() for t in (to.split(",") if isinstance(to, str) else to) if t.strip()]
    if targets == ["all"]:
        targets = every
    unknown = [t for t in targets if t not in every]
    if unknown:  # another name of a target (--to jax for stablehlo)
        other = aliases()
        targets = [other.get(t, t) for t in targets]
        unknown = [t for t in targets if t not in every]
    if unknown:
        raise OpbridgeError("bad_option", f"unknown target(s) {', '.join(unknown)} (known: {', '.join(every)}, "
                                          f"{''.join(a + ', ' for a in sorted(aliases()))}all)")
    opts = {**(source_options or {}), **({"example_inputs": example_inputs} if example_inputs is not None else {})}
    t0 = time.perf_counter()
    shown = model if isinstance(model, (str, os.PathLike)) else type(model).__name__
    say(f"reading {shown}")
    try:
        build = model_loader(model, **opts)
    except OpbridgeError as exc:
        # a frontend that must know sizes it cannot read (TensorFlow's unknown non-batch dims)
        # takes them from the first input set when no example inputs were given
        if exc.code != "dynamic_shape" or example_inputs is not None or inputs is None:
            raise
        sets = _input_sets(inputs, load_inputs)
        first = sets[0] if isinstance(sets, list) else sets
        say("the model's unknown dims are read at the first input set's sizes (no --example-inputs)")
        opts = {**opts, "example_inputs": first}
        build = model_loader(model, **opts)
    if freeze:
        from ..ir.freeze import freeze as freeze_inputs

        frozen_model = settle_frozen(freeze_inputs(build().clone(), freeze))
        build = lambda: frozen_model  # noqa: E731 - the same IR for every target, as model_loader's
        say("frozen: " + ", ".join(f"{k}={v}" for k, v in freeze.items()))
    n_nodes = len(build().graph.nodes)
    if fix_dims:
        dims.fix(build().clone(), fix_dims, every=False)  # an unknown name fails here, once, before any target
    unknown_check = sorted(set(check_dims or {}) - {d for ds in dims.symbolic(build()).values() for d in ds})
    if unknown_check:
        raise OpbridgeError("bad_option", f"--check-dim {', '.join(unknown_check)}: the model has no such symbolic "
                            "input dim")
    say(f"read {n_nodes} nodes in {time.perf_counter() - t0:.2f} s")
    feeds, input_notes = fit_inputs(_input_sets(inputs, load_inputs), [v.name for v in build().graph.inputs])
    for note in input_notes:
        say(note)
    derived: dict[str, tuple[int, ...]] = {}
    if check and feeds is None and dims.symbolic(build()):
        sized = runnable_sizes(build, check_dims)
        derived = {d: s for d, s in sized.items() if d not in (check_dims or {}) and s != dims.CHECK_SIZES}
        if derived:
            say("the model cannot run at " + "/".join(map(str, dims.CHECK_SIZES)) + ": checking at " +
                ", ".join(f"{d}={','.join(map(str, s))}" for d, s in derived.items()))
            check_dims = sized
    from functools import lru_cache

    from ..compile.quantized import is_quantized

    quantized_source = lru_cache(maxsize=None)(lambda: is_quantized(build().graph))

    def inspected(rec: dict[str, Any], target: Any, written: str) -> None:
        """What the framework says of the artifact at ``written``: how a quantized model's
        kernels run (``integer_kernels``) and how much of it the runtime's default delegate
        takes (``delegation``: TFLite's XNNPACK). An inspection that fails is said, not hidden."""
        def failure(exc: Exception) -> dict[str, str]:
            return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}" if str(exc) else type(exc).__name__}

        if target.integer_kernels is not None and quantized_source():
            try:
                rec["integer_kernels"] = target.integer_kernels(Path(written)).as_dict()
            except Exception as exc:  # noqa: BLE001
                rec["integer_kernels"] = failure(exc)
        if target.delegation is not None:
            try:
                share = target.delegation(Path(written))
            except Exception as exc:  # noqa: BLE001
                share = failure(exc)
            rec["delegation"] = share if share is not None else {
                "error": "not inspected: the model allocates only at run-time sizes"}
    stem = model_stem(model)
    finals = {t: (str(out) if len(targets) == 1 else os.path.join(out, stem + get(t).suffix)) for t in targets}
    if len(targets) > 1 and os.path.exists(out) and not os.path.isdir(out):
        raise OpbridgeError("bad_option", f"-o {out}: an existing file; {len(targets)} targets write a folder there "
                            "(one file per target)")
    if len(targets) == 1:
        (t,) = targets
        file_artifact = get(t).suffix.startswith(".")  # .onnx, .tflite: one file; the others a folder
        if file_artifact and os.path.isdir(out) and not os.path.islink(out):  # (as cp: into the folder)
            finals[t] = os.path.join(out, stem + get(t).suffix)
        elif not file_artifact and os.path.exists(out) and not os.path.isdir(out):
            raise OpbridgeError("bad_option", f"-o {out}: an existing file; the {t} artifact is a folder "
                                "(give a new path or that folder)")
    stage = staging(str(out))
    staged: dict[str, Path] = {}
    results: list[dict[str, Any]] = []
    worst = 0
    try:
        for t in targets:
            rec: dict[str, Any] = {"target": t, "status": "ok", **({"frozen_inputs": dict(freeze)} if freeze else {})}
            t1 = time.perf_counter()
            try:
                target = get(t)
                say(f"{t}: lowering and emitting")
                kwargs = {o.dest: (options or {})[o.dest] for o in target.options
                          if (options or {}).get(o.dest) not in (None, False)}
                extra = {"fix_dims": fix_dims} if fix_dims else {}
                if check_dims:  # a dim a target must fix takes the first size it is checked at
                    extra["dim_defaults"] = {d: s[0] for d, s in check_dims.items()}
                if feeds is not None:  # ... or its size in the user's (first) inputs
                    first = feeds[0] if isinstance(feeds, list) else feeds
                    extra["dim_defaults"] = {**extra.get("dim_defaults", {}), **dims.sizes_in(build(), first)}
                try:
                    done = compile(build(), target, **kwargs, **extra)
                except OpbridgeError as exc:
                    # a target that keeps symbolic dims but cannot run this model with them
                    # (a rank that depends on a run-time size): every dim fixed, and said so
                    if classify(exc)[1] != "dynamic_shape" or not target.dynamic_dims or not dims.symbolic(build()):
                        raise
                    why = f"{t} cannot run them symbolic: {str(exc).splitlines()[0]}"
                    sizes = {**extra.get("dim_defaults", {}),
                             **dims.sizes_in(build(), feeds[0] if isinstance(feeds, list) else feeds)}
                    done, tried = None, set()
                    while done is None:  # one dim that settles it: the others stay dynamic
                        some = fewest_dims_to_fix(build(), target, None, {**kwargs, **extra}, sizes, tried)
                        if not some:
                            break
                        say(f"{t}: cannot keep the symbolic dims ({str(exc).splitlines()[0]}): fixing {', '.join(some)}")
                        try:
                            done = compile(build(), target, **kwargs, **extra, fix_some_dims=some, fix_reason=why)
                        except OpbridgeError:  # the plan's guess did not hold at emit: the next dim, else all
                            tried.update(some)
                    if done is None:
                        say(f"{t}: cannot keep the symbolic dims ({str(exc).splitlines()[0]}): fixing them")
                        extra = {**extra, "fix_all_dims": why, "dim_defaults": sizes}
                        done = compile(build(), target, **kwargs, **extra)
                artifact = done.artifact
                staged[t] = stage / t / os.path.basename(finals[t])
                staged[t].parent.mkdir()
                saved = str(target.save(artifact, staged[t]))  # atomic; the written path
                say(f"{t}: emitted ({time.perf_counter() - t1:.2f} s)")
                if target.version is not None:
                    rec["library"] = target.version()
                inspected(rec, target, saved)
                if done.ctx.fixed_dims:
                    rec["fixed_dims"] = dict(done.ctx.fixed_dims)
                kept_dims = dims.symbolic(done.model)
                if kept_dims:
                    rec["dynamic_dims"] = kept_dims
                if done.ctx.layout is not None:
                    rec["transposes"] = done.ctx.layout.transposes
                warnings = input_notes + list(done.ctx.warnings)  # the pipeline's, then any the emitter kept apart
                warnings += [w for w in getattr(artifact, "warnings", None) or () if w not in warnings]
                if warnings:
                    rec["warnings"] = warnings
            except Exception as exc:  # noqa: BLE001 - reported with a reason code
                if isinstance(exc, OpbridgeError):
                    code, detail = classify(exc)[1], str(exc).splitlines()[0]
                else:  # a bug of ours, not a property of the model
                    code, detail = "internal_error", internal_error_line(exc)
                    if verbose:
                        import traceback

                        traceback.print_exc()
                rec.update(status="failed", reason=code, detail=detail)
                say(f"{t}: cannot convert: {detail}")
                worst = 2
                results.append(rec)
                continue
            if check:
                say(f"{t}: checking against the NumPy reference and the source's runtime")
                b = _check_at_sizes(build, t, feeds, rec, artifact, model, saved, opts, check_model, report_json,
                                    random_inputs, check_dims)
                for redo_opts, why, how in _fallbacks(_features(artifact)):
                    if b["status"] != "fail":
                        break
                    # integer kernels requantize their own way: when that strays past the check, a
                    # form closer to the source (a float recurrence; the quantized arithmetic in
                    # float ops, exact against the float evaluation)
                    say(f"{t}: {why}; writing {how}")
                    redo = compile(build(), target, **{**done.ctx.options, **redo_opts})
                    alt = stage / f"{t}.{next(iter(redo_opts))}" / os.path.basename(finals[t])  # beside, until it checks
                    alt.parent.mkdir()
                    saved2 = str(target.save(redo.artifact, alt))
                    b2 = _check_at_sizes(build, t, feeds, rec, redo.artifact, model, saved2, opts, check_model,
                                         report_json, random_inputs, check_dims)
                    if b2["status"] != "fail":
                        move_into_place(alt.parent, str(staged[t].parent))
                        inspected(rec, target, str(staged[t]))  # what is written now
                        err = max(((o.get("vs_source") or o).get("max_abs", 0.0) for o in b.get("outputs") or []),
                                  default=0.0)
                        flag = "--" + next(iter(redo_opts)).replace("_", "-")
                        rec["fell_back_to"] = dict(redo_opts)  # (--json: the options the written form took)
                        rec.setdefault("warnings", []).append(
                            f"{t}: {why} (differed from the source by up to {err:.3g}, past the check); "
                            f"written with {how} instead ({flag})")
                        b = b2
                rec["check"] = b
                if b["status"] == "fail":
                    rec["status"] = "check_failed"
                    worst = max(worst, 1)
                elif b["status"] not in CHECKED and b["reason"] == "structural_only":
                    rec["check_note"] = f"{b['reason']}: {b['detail']}".strip()
                elif b["status"] not in CHECKED:  # the check could not run: not a pass
                    rec.update(status="check_error", reason=b["reason"] or "runtime_error",
                               detail=f"the written artifact could not be checked: {b['detail']}")
                    worst = 2
            results.append(rec)
        if worst < 2 or not all_or_nothing:
            for t, path in staged.items():
                rec = next(r for r in results if r["target"] == t)
                if rec["status"] in ("failed", "check_error"):
                    continue
                move_into_place(path, finals[t])
                rec["output"] = finals[t]
                if rec["status"] == "check_failed":
                    rec["kept"] = "kept for inspection: the check ran and found a mismatch"
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    out = {"model": str(shown), "nodes": n_nodes, "targets": results, "written": worst < 2, "exit": worst,
           "written_targets": [r["target"] for r in results if r.get("output")]}
    if derived:
        out["check_sizes"] = {d: list(s) for d, s in derived.items()}
    return out
