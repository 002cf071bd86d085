"""NumPy column: dotted ``numpy.`` paths resolved against the installed ``numpy``.

``numpy.linalg.norm`` -> ``numpy`` then ``linalg`` -> ``norm`` by ``getattr``; a
component that is a not-yet-imported submodule is imported on the way. Names must start
with ``numpy.`` (the table convention, docs/TABLES.md; ``np.`` is not accepted). NumPy is
imported only on the first call.
"""
from __future__ import annotations

import functools
import importlib
import warnings
from types import ModuleType


@functools.lru_cache(maxsize=1)
def _numpy() -> ModuleType:
    import numpy

    return numpy


def _walk(root: object, root_name: str, parts: list[str]) -> bool:
    obj, path = root, root_name
    for part in parts:
        path = f"{path}.{part}"
        try:
            with warnings.catch_warnings():  # deprecated aliases warn on access
                warnings.simplefilter("ignore")
                obj = getattr(obj, part)
            continue
        except AttributeError:
            pass
        except Exception:
            return False
        if not isinstance(obj, ModuleType):
            return False
        try:
            obj = importlib.import_module(path)
        except Exception:
            return False
    return True


@functools.lru_cache(maxsize=None)
def resolve(name: str) -> bool:
    if not isinstance(name, str):
        return False
    parts = name.strip().split(".")
    if len(parts) < 2 or parts[0] != "numpy" or not all(p.isidentifier() for p in parts):
        return False
    return _walk(_numpy(), "numpy", parts[1:])


def library_version() -> str:
    return f"numpy {_numpy().__version__}"
