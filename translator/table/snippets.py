"""The one snippet grammar: a backend's one line of code for an op, stored in the op's cell.

A snippet is an expression in the backend's language (``torch.add({A}, {B})``,
``ops.relu({X})``, ``tf.math.add({A}, {B})``, ``mb.relu(x={X})``) with placeholders named
by the op's signature in ``optable.yaml``:

``{Name}``      the input port ``Name`` (the backend's expression reading that value;
                an omitted optional input is the backend's ``None``)
``{Name...}``   every value of the variadic input ``Name``, comma-separated
``{@attr}``     the attribute ``attr`` of the node, else the signature default, as a literal
``{$T}``        the backend's spelling of a dtype: ``T`` is a type variable of the
                signature (bound by the node's values) or a port name (that value's dtype)
``{{`` ``}}``   literal braces

``check`` validates a snippet against its op's signature (the table loader's lint runs it
for every cell); ``expand`` fills one in for one node through a backend's ``Binder``.
Values never become code here: the binder renders inputs as identifiers the emitter owns
and attributes through ``render.literal``.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from ..ir.graph import Node, Value
    from .loader import Op

PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([@$]?)([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}")


class SnippetError(ValueError):
    """A snippet that does not fit its op's signature."""


class Binder(Protocol):
    def value(self, v: "Value | None") -> str: ...

    def attr(self, name: str, value: Any) -> str: ...

    def dtype(self, dtype_id: str) -> str: ...


def placeholders(text: str) -> list[tuple[str, str, bool]]:
    """``(sigil, name, variadic)`` of every placeholder, in order."""
    out = []
    for m in PLACEHOLDER.finditer(text):
        if m.group(0) in ("{{", "}}"):
            continue
        out.append((m.group(1), m.group(2), bool(m.group(3))))
    return out


def check(text: str, op: "Op") -> None:
    """Raise ``SnippetError`` unless every placeholder names something of ``op``'s signature."""
    stray = PLACEHOLDER.sub("", text)
    if "{" in stray or "}" in stray:
        raise SnippetError(f"{text!r}: a brace that is no placeholder (write {{{{ or }}}})")
    sig = op.signature
    if sig is None:
        if placeholders(text):
            raise SnippetError(f"{text!r}: op {op.id!r} has no signature to name placeholders by")
        return
    inputs = {p.name: p for p in sig.inputs}
    outputs = {p.name for p in sig.outputs}
    attrs = {a.name for a in sig.attributes}
    for sigil, name, variadic in placeholders(text):
        if sigil == "@":
            if name not in attrs:
                raise SnippetError(f"{text!r}: {op.id} has no attribute {name!r} (has {', '.join(sorted(attrs)) or 'none'})")
        elif sigil == "$":
            if name not in sig.types and name not in inputs and name not in outputs:
                raise SnippetError(f"{text!r}: {name!r} is neither a type variable nor a port of {op.id}")
        else:
            port = inputs.get(name)
            if port is None:
                raise SnippetError(f"{text!r}: {op.id} has no input {name!r} (has {', '.join(inputs) or 'none'})")
            if variadic != port.variadic:
                raise SnippetError(f"{text!r}: input {name!r} is {'' if port.variadic else 'not '}variadic: "
                                   f"write {{{name}{'...' if port.variadic else ''}}}")
        if sigil and variadic:
            raise SnippetError(f"{text!r}: '...' only follows an input name")


def ports(node: "Node", op: "Op") -> tuple[dict[str, list["Value | None"]], dict[str, "Value | None"]]:
    """The node's inputs by signature name (variadic ports get every remaining value) and outputs."""
    ins: dict[str, list[Value | None]] = {}
    k = 0
    values = list(node.inputs)
    for p in op.signature.inputs if op.signature is not None else ():
        if p.variadic:
            ins[p.name] = values[k:]
            k = len(values)
        else:
            ins[p.name] = [values[k] if k < len(values) else None]
            k += 1
    outs = {p.name: (node.outputs[i] if i < len(node.outputs) else None)
            for i, p in enumerate(op.signature.outputs if op.signature is not None else ())}
    return ins, outs


def type_bindings(node: "Node", op: "Op") -> dict[str, str]:
    """Type variable or port name → the dtype id the node has there."""
    out: dict[str, str] = {}
    if op.signature is None:
        return out
    ins, outs = ports(node, op)
    typed = [(p, (ins.get(p.name) or [None])[0]) for p in op.signature.inputs]
    typed += [(p, outs.get(p.name)) for p in op.signature.outputs]
    for p, v in typed:
        d = _dtype(v)
        if d is None:
            continue
        out.setdefault(p.name, d)
        if p.type in op.signature.types:
            out.setdefault(p.type, d)
    return out


def _dtype(v: "Value | None") -> str | None:
    if v is None:
        return None
    t = v.type
    if t.kind != "tensor" and t.elem is not None:
        t = t.elem
    return t.dtype


def attr_value(node: "Node", op: "Op", name: str) -> Any:
    if name in node.attrs:
        return node.attrs[name]
    a = op.signature.attribute(name) if op.signature is not None else None
    return a.default if a is not None else None


def substitute(text: str, attr: "Callable[[str], str]", dtype: "Callable[[str], str]",
               value: "Callable[[str, bool], str]") -> str:
    """The grammar itself: ``{{``/``}}`` become braces, and each placeholder the callback's text:
    ``attr(name)`` for ``{@name}``, ``dtype(name)`` for ``{$name}``, ``value(port, variadic)`` for
    ``{port}`` / ``{port...}``. ``expand`` binds them to an IR node; the provers
    (translator/proofs) to a sample."""
    def sub(m: re.Match[str]) -> str:
        whole = m.group(0)
        if whole == "{{":
            return "{"
        if whole == "}}":
            return "}"
        sigil, name, variadic = m.group(1), m.group(2), m.group(3)
        if sigil == "@":
            return attr(name)
        if sigil == "$":
            return dtype(name)
        return value(name, bool(variadic))

    return PLACEHOLDER.sub(sub, text)


def expand(text: str, node: "Node", op: "Op", binder: Binder) -> str:
    """The snippet filled in for ``node``; a dtype the node leaves unbound is a SnippetError."""
    ins, _ = ports(node, op)
    types: dict[str, str] | None = None

    def dtype(name: str) -> str:
        nonlocal types
        if types is None:
            types = type_bindings(node, op)
        if name not in types:
            raise SnippetError(f"{op.id}: the dtype {name!r} is unknown on node {node.name!r}")
        return binder.dtype(types[name])

    def value(name: str, variadic: bool) -> str:
        vals = ins.get(name, [None])
        if variadic:
            return ", ".join(binder.value(v) for v in vals)
        return binder.value(vals[0] if vals else None)

    return substitute(text, lambda name: binder.attr(name, attr_value(node, op, name)), dtype, value)


def names_used(text: str) -> set[str]:
    """Input port names a snippet reads (a backend may require them present)."""
    return {name for sigil, name, _ in placeholders(text) if not sigil}
