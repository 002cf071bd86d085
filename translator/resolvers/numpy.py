"""NumPy column: dotted ``numpy.`` paths resolved against the installed ``numpy``.

``numpy.linalg.norm`` -> ``numpy`` then ``linalg`` -> ``norm`` by ``getattr``; a
component that is a not-yet-imported submodule is imported on the way. Names must start
with ``numpy.`` (the table convention, docs/TABLES.md; ``np.`` is not accepted). NumPy is
imported only on the first call.
"""
from __future__ import annotations

import functools
from types import ModuleType

from . import dotted_name_parts, walk_dotted


@functools.lru_cache(maxsize=1)
def _numpy() -> ModuleType:
    import numpy

    return numpy


@functools.lru_cache(maxsize=None)
def resolve(name: str) -> bool:
    parts = dotted_name_parts(name, "numpy")
    return parts is not None and walk_dotted(_numpy(), "numpy", parts)


def library_version() -> str:
    return f"numpy {_numpy().__version__}"
