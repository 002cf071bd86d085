"""The template machinery shared by all emitters, and the one rule for outside values.

Templates (``templates/<backend>/*.j2``) are skeletons: they lay out a file (imports,
class, weights loading, the body of straight-line code) and hold no decisions. Every
decision — which snippet an op gets, how names are sanitized, what gets legalized — is
made in Python and passed in as plain data.

**The rule for generated source** (``*.py.j2``): a value from outside (a file name, a
tensor/node/graph name, a doc string, metadata, a CLI option) reaches generated Python
only as a literal rendered by :func:`literal`, or as an identifier sanitized by
:func:`ident`. The environment enforces it: every ``{{ expression }}`` of a code template
goes through :func:`_finalize`, which passes :class:`Code` (text an emitter built from
literals and identifiers) through unchanged and renders *any other value* with
:func:`literal`. A template cannot splice raw text: a plain string becomes a quoted
literal wherever it lands. Consequently a template never puts ``{{ }}`` inside a string
or docstring (a literal inside a literal could close it): docstrings are whole values,
rendered with ``literal(text, multiline=True)``.

Other templates (the ONNX model's ``doc_string``) are text, not code, and are rendered
as text. The environment is strict (an undefined variable is an error) and
deterministic (no timestamps).
"""
from __future__ import annotations

import keyword
import math
import os
from functools import lru_cache
from typing import Any

from ..table import paths
from ..ir.names import io_identifier

#: names generated code binds itself (imports, parameters): a model's name never shadows them
RESERVED = frozenset({"self", "torch", "tf", "np", "F", "ops", "ops17", "mb", "ct", "ov", "math", "os", "sys",
                      "types", "W", "feeds", "fn", "prog"})


class Code(str):
    """Source text an emitter built from :func:`literal` and :func:`ident` parts: the only
    string a code template outputs as it is."""

    __slots__ = ()


def ident(name: Any, prefix: str = "v") -> Code:
    """Sanitize ``name`` into a Python identifier (deterministic, never raises)."""
    s = io_identifier(name, prefix)
    if keyword.iskeyword(s) or keyword.issoftkeyword(s) or s in RESERVED:
        s = f"{s}_"
    return Code(s)


def _multiline_ok(text: str) -> bool:
    """``text`` reads back unchanged between triple double quotes."""
    return ('"""' not in text and "\\" not in text and not text.endswith('"')
            and all(ch == "\n" or ch.isprintable() for ch in text))


def literal(value: Any, multiline: bool = False) -> Code:
    """``value`` (plain data: None, bool, int, float, str, list, tuple, dict) as a Python
    literal that evaluates back to it. ``multiline``: a string is written between triple
    quotes when that reads back unchanged (docstrings), else as ``repr`` does."""
    if isinstance(value, Code):
        value = str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return Code(f"float({str(value)!r})")
    if isinstance(value, str) and multiline and _multiline_ok(value):
        return Code(f'"""{value}"""')
    if isinstance(value, (bool, int, float, str, type(None))):
        return Code(repr(value))
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v) for v in value)
        return Code(f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})")
    if isinstance(value, dict):
        return Code("{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}")
    raise TypeError(f"refusing to render {type(value).__name__} into source code")


#: the name the emitters have always used for :func:`literal` (the same function)
pyrepr = literal


def code_lines(lines: Any) -> list[Code]:
    """An emitter's generated statements, declared as code (each built from literals and
    identifiers by the emitter itself)."""
    return [Code(line) for line in lines]


def _finalize(value: Any) -> Any:
    return value if isinstance(value, Code) else literal(value)


def _code_join(values: Any, sep: str = ", ") -> Code:
    """``join`` for code: each item rendered by the code rule, joined by ``sep``."""
    return Code(sep.join(_finalize(v) for v in values))


@lru_cache(maxsize=None)
def _env(backend: str, code: bool) -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(paths.templates_dir(), backend)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize if code else None,
    )
    env.filters["ident"] = ident
    env.filters["literal"] = literal
    env.filters["pyrepr"] = literal
    env.filters["basename"] = lambda p: os.path.basename(str(p))
    if code:
        env.filters["join"] = _code_join
    return env


def is_code_template(template: str) -> bool:
    return template.endswith(".py.j2")


def render(backend: str, template: str, **context: Any) -> str:
    return str(_env(backend, is_code_template(template)).get_template(template).render(**context))
