"""``Target``: the frozen description of one backend, and how backends are found.

Every backend is a package that exposes ``TARGET`` (a ``Target``): ``emitters/<name>/`` for
the built-in ones, or any installed package that declares an ``opbridge.targets`` entry
point (``name = "package.module:TARGET"``). ``targets()`` finds them all; nothing in the
project lists backends by hand. ``translator.compile.pipeline.compile(model, target)`` runs the same
ordered passes for every target and calls its ``emit`` on the lowered IR; ``convert``,
``check``, ``report`` and the benches only talk to targets through this shape.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..table.errors import OpbridgeError

if TYPE_CHECKING:
    from ..ir.graph import Model, Node
    from .registry import Refusal
    from ..table.loader import Tables

ENTRY_POINT_GROUP = "opbridge.targets"


@dataclass(frozen=True)
class OutputPort:
    """One output of an artifact: the model's name and the dtype the artifact documents
    returning instead of the declared one (a legalization), else None."""

    name: str
    legal: str | None = None


@dataclass(frozen=True)
class Option:
    """A command-line option of one target (``convert --opset``); ``dest`` is the keyword
    ``compile`` passes on in ``Compilation.options``."""

    flag: str
    dest: str
    help: str
    type: Callable[[str], Any] | None = None
    action: str | None = None
    default: Any = None
    metavar: str | None = None


@dataclass(frozen=True)
class Target:
    """What the pipeline needs to know about a backend. Functions, not subclasses: a
    backend package fills one in, and every field has one meaning for every backend."""

    name: str
    title: str
    #: lowered IR → artifact (``ctx`` holds the tables, options, warnings, source dtypes)
    emit: Callable[["Model", "Compilation"], Any]
    #: artifact → outputs (NumPy, graph order) for model-named inputs
    run: Callable[[Any, Mapping[str, Any]], list[Any]]
    #: artifact → a callable(inputs) → outputs that keeps its session/compiled model between
    #: calls (the benches time repeated runs); None: ``run`` each time
    runner: Callable[[Any], Callable[[Mapping[str, Any]], list[Any]]] | None = None
    #: artifact, path → written path (atomic: a temporary sibling, then a rename)
    save: Callable[[Any, Path], Path] | None = None
    #: written path, in-memory artifact → the artifact as the framework's own loader reads it back
    load: Callable[[Path, Any], Any] | None = None
    #: artifact → its outputs' names and documented dtype legalizations
    output_ports: Callable[[Any], "list[OutputPort]"] | None = None
    #: ``convert -o DIR``: ``DIR/<stem><suffix>``; ``written``: the name inside a scratch folder
    suffix: str = ""
    written: str = "model"
    #: dtypes the backend computes in (``legalize`` maps the others); None: every dtype
    legal_dtypes: Callable[["Tables"], frozenset[str]] | None = None
    #: nodes the backend runs channels-last (the layout pass); None: no layout change
    channels_last: Callable[["Node"], bool] | None = None
    #: fold constant and static-shape subgraphs before lowering
    fold: bool = True
    #: artifacts keep symbolic input dims; False: the pipeline fixes them first (``translator.ir.dims``)
    dynamic_dims: bool = True
    #: optable columns whose snippets and rules this target emits (default: its own name)
    code_columns: tuple[str, ...] = ()
    #: a backend-wide node check before the op's own rule (value kinds, element types)
    accepts: Callable[["Node", "Compilation"], "Refusal | None"] | None = None
    #: lowering holds a node to its cell's ``dtypes`` and ``rank``; False: the writer maps IR
    #: dtypes and ranks onto the API's itself and refuses in ``accepts`` what it cannot (ncnn:
    #: integers as float32 blob values, a scalar as a one-element blob, the batch dropped)
    cell_limits: bool = True
    #: backend-specific IR preparation after folding, before legalization (documented per target)
    prepare: Callable[["Model", "Compilation"], None] | None = None
    #: the chosen per-model settings before lowering (the ONNX opset) → stored in ctx.options
    configure: Callable[["Model", "Compilation"], None] | None = None
    options: tuple[Option, ...] = ()
    #: the NumPy reference (not a conversion target)
    reference: bool = False
    #: whether ``run`` evaluates the artifact in float64 arithmetic instead of the framework's
    #: runtime (Core ML's MIL evaluator off macOS): the check then holds it to the source runtime
    #: no tighter than the float64 reference is held (``run.check``)
    float64_evaluation: Callable[[], bool] | None = None
    #: the library version string the artifact is built with
    version: Callable[[], str] | None = None
    #: written path → how its compute kernels run, read from the framework itself (a quantized
    #: model's record says which stayed integer): ``KernelCount``; None: not inspectable
    integer_kernels: Callable[[Path], "KernelCount"] | None = None
    #: written path → how much of its graph the runtime's default accelerator delegate takes:
    #: ``{"delegate", "nodes", "delegated", "partitions", "left": {op: count}}`` (None: not
    #: inspectable, e.g. sizes known only at run time); None: the target has no delegate
    delegation: Callable[[Path], dict[str, Any] | None] | None = None
    #: a compute node of the planned graph → (``integer`` | ``int8 weights`` | ``float``, why):
    #: how the target will run it, by the writer's own rules (``report`` on a quantized model)
    integer_plan: Callable[["Node", "Compilation"], tuple[str, str]] | None = None
    doc: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: other names the command line and ``get`` take for it (``jax`` for ``stablehlo``)
    aliases: tuple[str, ...] = ()

    @property
    def columns(self) -> tuple[str, ...]:
        return self.code_columns or (self.name,)

    def prepared(self, artifact: Any) -> Callable[[Mapping[str, Any]], list[Any]]:
        """A callable running ``artifact`` repeatedly (``runner``, else ``run`` each time)."""
        if self.runner is not None:
            return self.runner(artifact)
        return lambda inputs: list(self.run(artifact, inputs))


@dataclass(frozen=True)
class KernelCount:
    """The compute kernels (convolutions, fully connected layers, matmuls) of a written
    quantized model: ``integer`` of ``total`` run on 8-bit integers (``stored``: the target
    keeps int8 weights but its runtime is not inspected or not integer, e.g. Core ML off macOS,
    PyTorch's dequantize-once weights); ``how``: what was read, in the framework's terms."""
    integer: int
    total: int
    how: str
    stored: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"integer": self.integer, "total": self.total, "how": self.how,
                **({"stored_only": True} if self.stored else {})}


@dataclass
class Compilation:
    """What one compile knows and reports; the target's hooks read and extend it."""

    target: Target
    tables: "Tables"
    options: dict[str, Any] = field(default_factory=dict)
    #: legalizations and other conversion warnings, in order, without repeats
    warnings: list[str] = field(default_factory=list)
    #: (node name, op) of every decomposed node
    decomposed: list[tuple[str, str]] = field(default_factory=list)
    #: node name → refusal for nodes a previous emit attempt's library rejected
    rejected: dict[str, "Refusal"] = field(default_factory=dict)
    #: the model's input/output dtypes before legalization
    source_inputs: list[str | None] = field(default_factory=list)
    source_outputs: list[str | None] = field(default_factory=list)
    #: ``plan``: node name → refusal (instead of raising)
    refusals: dict[str, "Refusal"] | None = None
    #: node name → how it was lowered ("native", "decomposed", "folded")
    how: dict[str, str] = field(default_factory=dict)
    #: the layout pass's report (``LayoutReport``) when the target has one
    layout: Any = None
    #: the lowered IR (``plan`` keeps it for the report)
    model: "Model | None" = None
    #: symbolic input dims fixed before folding (label → size: ``translator.ir.dims``)
    fixed_dims: dict[str, int] = field(default_factory=dict)

    def warn(self, messages: list[str] | str) -> None:
        for m in [messages] if isinstance(messages, str) else messages:
            if m not in self.warnings:
                self.warnings.append(m)

    @cached_property
    def legal(self) -> frozenset[str] | None:
        """The target's legal dtypes (None: it takes every dtype), computed once per compile."""
        fn = self.target.legal_dtypes
        return fn(self.tables) if fn is not None else None


def column_dtypes(api: str) -> Callable[["Tables"], frozenset[str]]:
    """``Target.legal_dtypes`` of a backend whose ``dtypes.yaml`` column says what it computes in."""

    def legal(tables: "Tables") -> frozenset[str]:
        from .passes.legalize_dtypes import backend_dtypes

        return backend_dtypes(api, tables)

    return legal


def dist_version(*distributions: str) -> str:
    """``"<name> <version>"`` of the first installed distribution of ``distributions`` (a library
    ships under several names: tensorflow, tensorflow-cpu), without importing it."""
    from importlib import metadata

    for name in distributions:
        try:
            return f"{distributions[0]} {metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return f"{distributions[0]} (not installed)"


def write_folder(out_dir: Any, files: Mapping[str, bytes]) -> Path:
    """An artifact folder written atomically: every file into a temporary sibling, then the
    folder renamed into place (or, when it exists, each file renamed over its old one)."""
    import os
    import shutil

    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        if not out.exists():
            os.replace(tmp, out)
        else:
            for name in files:
                os.replace(tmp / name, out / name)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out


def package_fields(codegen: Any, runtime: Any) -> dict[str, Any]:
    """The functions a backend package provides under the shared inner names, as ``Target``
    fields: ``codegen.emit``; ``runtime.run``, ``runner``, ``save``, ``load``, ``output_ports``,
    ``version``, ``integer_kernels`` and ``delegation`` (those it has)."""
    fields = {"emit": codegen.emit}
    for name in ("run", "runner", "save", "load", "output_ports", "version", "integer_kernels", "delegation"):
        fn = getattr(runtime, name, None)
        if fn is not None:
            fields[name] = fn
    return fields


def _builtin_names() -> list[str]:
    import emitters

    return sorted(m.name for m in pkgutil.iter_modules(emitters.__path__) if m.ispkg)


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


@lru_cache(maxsize=None)
def _discover() -> tuple[tuple[str, str], ...]:
    """(name, "module:attr") of every target: built-in packages, then entry points."""
    found: dict[str, str] = {n: f"emitters.{n}:TARGET" for n in _builtin_names()}
    for name, ep in sorted(_entry_points().items()):
        found.setdefault(name, ep.value)
    return tuple(sorted(found.items(), key=lambda kv: (kv[0] != "numpy", kv[0])))


def names(include_reference: bool = True) -> list[str]:
    """Every target's name, the NumPy reference first, then alphabetical."""
    return [n for n, _ in _discover() if include_reference or n != "numpy"]


def get(name: str) -> Target:
    """The target called ``name`` (importing its package); an unknown name is a ``bad_option``."""
    where = dict(_discover()).get(name)
    if where is None and name:
        owner = _alias_owner(name)
        if owner is not None:
            return get(owner)
    if where is None:
        raise OpbridgeError("bad_option", f"unknown backend {name!r} (known: {', '.join(names())})")
    module, _, attr = where.partition(":")
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise OpbridgeError("unsupported_op", f"backend {name!r} is not available here: {exc}") from None
    except ImportError as exc:  # a broken backend package: named, and the others keep working
        raise OpbridgeError("internal_error", f"backend {name!r} failed to import: {exc}") from None
    target = getattr(mod, attr or "TARGET", None)
    if not isinstance(target, Target) or target.name != name:
        raise OpbridgeError("internal_error", f"{where} is not the Target {name!r}")
    return target


@lru_cache(maxsize=None)
def _alias_owner(alias: str) -> str | None:
    """The target that declares ``alias`` in its ``aliases`` (each target imported to ask; only
    for a name that is no target's own)."""
    for n in names():
        try:
            if alias in get(n).aliases:
                return n
        except OpbridgeError:
            continue
    return None


def aliases() -> dict[str, str]:
    """Every alias → its target's name."""
    out = {}
    for n in names():
        try:
            out.update({a: n for a in get(n).aliases})
        except OpbridgeError:
            continue
    return out


def targets(include_reference: bool = True) -> list[Target]:
    return [get(n) for n in names(include_reference)]
