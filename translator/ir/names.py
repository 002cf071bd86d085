"""Unique names in linear time (no project imports): the IR's value names and the
emitters' generated identifiers both come from here."""
from __future__ import annotations

import builtins as _builtins
import keyword as _keyword
import re as _re
from dataclasses import dataclass as _dataclass, field as _field, replace as _replace
from typing import Iterable


class NameSet:
    """A set of taken names that hands out ``root``, else ``root_1``, ``root_2``, … (``sep`` between; the
    smallest free suffix, as a plain scan from 1 would give).

    Names are never released, so every suffix below a root's counter is taken: the scan
    resumes where that root's last one stopped. Many names from one root (a decomposition
    repeated over a large graph, constants all hinted ``c``) then cost O(1) each instead of
    O(count).
    """

    __slots__ = ("taken", "sep", "_next")

    def __init__(self, taken: Iterable[str] = (), sep: str = "_") -> None:
        self.taken: set[str] = set(taken)
        self.sep = sep
        self._next: dict[str, int] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.taken

    def add(self, name: str) -> None:
        self.taken.add(name)

    def take(self, root: str) -> str:
        if root not in self.taken:
            self.taken.add(root)
            return root
        k = self._next.get(root, 1)
        name = f"{root}{self.sep}{k}"
        while name in self.taken:
            k += 1
            name = f"{root}{self.sep}{k}"
        self._next[root] = k + 1
        self.taken.add(name)
        return name


# ----------------------------------------------------------------------------- graph I/O names per backend
_NOT_IDENT = _re.compile(r"[^0-9A-Za-z_]")
_KEYWORDS = frozenset(_keyword.kwlist) | frozenset(_keyword.softkwlist)
#: what a parameter of generated Python can never be: keywords, soft keywords, builtins, ``self``
PYTHON_RESERVED = _KEYWORDS | frozenset(dir(_builtins)) | {"self"}
#: names coremltools' NameSanitizer renames (``passes/defs/preprocess.py``: it appends ``_workaround``)
COREML_RESERVED = frozenset({"any", "bool", "program", "func", "tensor", "list", "dict", "tuple", "true", "false",
                             "string", "bf16", "fp16", "fp32", "fp64", "int8", "int16", "int32", "int64", "uint8",
                             "uint16", "uint32", "uint64", "state"})


@_dataclass(frozen=True)
class IORules:
    """How one backend may name a graph input or output.

    ``identifier``: ASCII ``[A-Za-z_][A-Za-z0-9_]*`` (other characters become ``_``, leading
    and trailing ``_`` are dropped, a leading digit gets ``prefix_``: what ``render.ident``
    does); ``lowercase``: the runtime lowercases names (so ``x`` and ``X`` collide);
    ``case_insensitive``: names that differ only in case collide; ``reserved``: names the
    runtime or the generated code owns (compared case-insensitively when names are),
    suffixed with ``_``; ``python``: the name is an identifier of generated Python (keywords,
    builtins and the names the generated code binds are reserved too); ``shared``: inputs
    and outputs are one namespace; ``silent``: no runtime sees the names (PyTorch returns a
    tuple; its output names only document ``forward``), so a change is not warned about.
    """

    label: str
    identifier: bool = True
    lowercase: bool = False
    case_insensitive: bool = False
    reserved: frozenset[str] = frozenset()
    python: bool = False
    shared: bool = False
    silent: bool = False
    prefix: str = "v"
    why_lower: str = ""

    def with_reserved(self, names: Iterable[str]) -> "IORules":
        return _replace(self, reserved=self.reserved | frozenset(names))


#: backend -> (input rules, output rules). ONNX and OpenVINO keep any string as it is;
#: parameters of generated Python (PyTorch ``forward``, the TensorFlow module) are
#: identifiers that are no keyword, builtin or ``self``; TensorFlow lowercases signature argument
#: names (``tf.TensorSpec`` names go through ``sanitize_spec_name``: lowercase,
#: ``[a-z0-9_]``, a letter first); Core ML names are identifiers (MIL names; the builder's
#: Python variables are ``v_<name>``) that are no keyword and no type name coremltools
#: renames (``tuple`` → ``tuple_workaround``).
IO_RULES: dict[str, tuple[IORules, IORules]] = {
    "onnx": (IORules("the ONNX graph", identifier=False),) * 2,
    "openvino": (IORules("the OpenVINO model", identifier=False),) * 2,
    "pytorch": (IORules("the PyTorch forward()", python=True), IORules("the PyTorch forward()", silent=True)),
    "tensorflow": (IORules("the TensorFlow signature", lowercase=True, case_insensitive=True, python=True,
                           why_lower="TensorFlow lowercases signature argument names"),
                   IORules("the TensorFlow signature")),
    "tflite": (IORules("the TFLite signature", lowercase=True, case_insensitive=True, python=True,
                       why_lower="TensorFlow lowercases signature argument names"),
               IORules("the TFLite signature")),
    "coreml": (IORules("the Core ML model", reserved=COREML_RESERVED | _KEYWORDS, shared=True),) * 2,
    "stablehlo": (IORules("the JAX forward()", python=True), IORules("the JAX forward()", silent=True)),
    "mlx": (IORules("the MLX forward()", python=True), IORules("the MLX forward()", silent=True)),
}


def io_identifier(name: str, prefix: str = "v") -> str:
    """``name`` as an ASCII identifier, as ``render.ident`` spells it (without its reserved words)."""
    s = _NOT_IDENT.sub("_", str(name)).strip("_") or prefix
    return f"{prefix}_{s}" if s[0].isdigit() else s


@_dataclass
class IONames:
    """The backend's name for each graph input and output (in graph order), and why a name changed."""

    backend: str
    inputs: list[str]
    outputs: list[str]
    source_inputs: list[str]
    source_outputs: list[str]
    warnings: list[str] = _field(default_factory=list)

    def input_map(self) -> dict[str, str]:
        return dict(zip(self.source_inputs, self.inputs))

    def output_map(self) -> dict[str, str]:
        return dict(zip(self.source_outputs, self.outputs))

    def renamed(self) -> dict[str, dict[str, str]]:
        """Only the names that changed: ``{"inputs": {original: backend}, "outputs": {...}}``."""
        return {"inputs": {a: b for a, b in zip(self.source_inputs, self.inputs) if a != b},
                "outputs": {a: b for a, b in zip(self.source_outputs, self.outputs) if a != b}}

    def as_dict(self) -> dict[str, dict[str, str]]:
        return {"inputs": self.input_map(), "outputs": self.output_map()}


def io_names(backend: str, inputs: Iterable[str], outputs: Iterable[str], extra_reserved: Iterable[str] = (),
             rules: "tuple[IORules, IORules] | None" = None) -> IONames:
    """The deterministic mapping model name -> ``backend``'s name for the graph's inputs and
    outputs (graph order decides who keeps a contested name), with one warning per renamed
    name saying why. ``extra_reserved``: names the emitter's generated code binds itself
    (reserved where the rules say the names are identifiers of generated Python)."""
    rin, rout = rules or IO_RULES[backend]
    extra = PYTHON_RESERVED | frozenset(extra_reserved)
    rin, rout = (r.with_reserved(extra) if r.python else r for r in (rin, rout))
    src_in, src_out = [str(n) for n in inputs], [str(n) for n in outputs]
    res = IONames(backend, [], [], src_in, src_out)
    taken_in: dict[str, str] = {}
    taken_out = taken_in if rin.shared and rout.shared else {}
    for kind, names, rule, taken, dest in (("input", src_in, rin, taken_in, res.inputs),
                                           ("output", src_out, rout, taken_out, res.outputs)):
        fold = str.lower if rule.case_insensitive or rule.lowercase else str
        reserved = {fold(r) for r in rule.reserved}
        for name in names:
            new, why = _backend_name(name, rule, taken, reserved)
            dest.append(new)
            if new != name and not rule.silent:
                res.warnings.append(f"{backend}: {kind} {name!r} is named {new!r} in {rule.label} ({why})")
    return res


def _backend_name(name: str, rule: IORules, taken: dict[str, str], reserved: set[str]) -> tuple[str, str]:
    """One name under ``rule``; ``taken`` maps the comparison key (lowercased where names
    are compared case-insensitively, as ``reserved`` is) of every name handed out so far to
    the model name that got it. Returns (backend name, why it differs)."""
    fold = str.lower if rule.case_insensitive or rule.lowercase else str
    why = []
    s = io_identifier(name, rule.prefix) if rule.identifier else (name or rule.prefix)
    if s != name:
        why.append("not a valid name there" if rule.identifier else "empty")
    if rule.lowercase and s != s.lower():
        s = s.lower()
        why.append(rule.why_lower or "lowercased")
    if fold(s) in reserved:
        why.append(_reserved_why(s))
        s = f"{s}_"
    if fold(s) in taken:
        why.append(f"collides with {taken[fold(s)]!r}")
    root, k = s, 0
    while fold(s) in taken or fold(s) in reserved:
        k += 1
        s = f"{root}_{k}"
    taken[fold(s)] = name
    return s, "; ".join(why)


def _reserved_why(s: str) -> str:
    low = s.lower()
    if low in COREML_RESERVED:
        return f"coremltools renames {s!r}"
    if s in _KEYWORDS:
        return f"{s!r} is a Python keyword"
    if s in dir(_builtins):
        return f"{s!r} is a Python builtin"
    if s == "self":
        return "'self' is the generated method's own parameter"
    return f"{s!r} is a name the generated code uses"
