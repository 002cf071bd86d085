"""The template machinery shared by all emitters.

Templates (``templates/<backend>/*.j2``) are skeletons: they lay out a file (imports,
class, weights loading, the body of straight-line code) and hold no decisions. Every
decision — which snippet an op gets, how names are sanitized, what gets legalized — is
made in Python and passed in as plain data. The environment is strict (an undefined
variable is an error), deterministic (no timestamps), and offers only safe filters:

* ``ident``: a model-supplied name → a valid, non-keyword Python identifier;
* ``pyrepr``: a literal rendered with ``repr`` of plain data (ints, floats, strings,
  lists), never raw text from the model spliced into code;
* ``basename``: the file name of a path.
"""
from __future__ import annotations

import keyword
import os
import re
from functools import lru_cache
from typing import Any

from . import paths

_IDENT_BAD = re.compile(r"[^0-9A-Za-z_]")


def ident(name: str, prefix: str = "v") -> str:
    """Sanitize ``name`` into a Python identifier (deterministic, never raises)."""
    s = _IDENT_BAD.sub("_", str(name)).strip("_") or prefix
    if s[0].isdigit():
        s = f"{prefix}_{s}"
    if keyword.iskeyword(s) or keyword.issoftkeyword(s) or s in ("self", "torch", "tf", "np", "F", "ops", "mb"):
        s = f"{s}_"
    return s


def pyrepr(value: Any) -> str:
    if isinstance(value, (bool, int, float, str, type(None))):
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(pyrepr(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{pyrepr(k)}: {pyrepr(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"refusing to render {type(value).__name__} into source code")


@lru_cache(maxsize=None)
def _env(backend: str) -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(paths.templates_dir(), backend)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ident"] = ident
    env.filters["pyrepr"] = pyrepr
    env.filters["basename"] = lambda p: os.path.basename(str(p))
    return env


def render(backend: str, template: str, **context: Any) -> str:
    return _env(backend).get_template(template).render(**context)
