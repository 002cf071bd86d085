"""Resource budgets of the NumPy reference, the constant folder and the check's inputs.

One place for the limits that keep a hostile or broken model from exhausting the machine:

* ``max_elements`` / ``max_bytes``: the largest tensor anything may allocate (declared
  initializers, generated inputs, every reference result). Output sizes are computed from
  shapes *before* allocating wherever the op's output size follows from its inputs
  (Range, ConstantOfShape, Expand, Tile, Pad, Resize, ...: ``reference/_sizes.py``).
* ``max_loop_iters``: total Loop/Scan iterations of one reference run (nested loops count
  every inner iteration).
* ``time_limit``: seconds of wall time for one reference run (checked between nodes and
  at every loop iteration).

Defaults are below; the environment overrides them (``OPBRIDGE_MAX_ELEMENTS``,
``OPBRIDGE_MAX_BYTES``, ``OPBRIDGE_MAX_LOOP_ITERS``, ``OPBRIDGE_TIME_LIMIT``), and
``override(...)`` does so for a block of code (tests). A refusal is
``OpbridgeError("too_large", ...)`` (``"time_limit"`` for wall time) naming the limit and
the environment variable that raises it.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Iterator

from .errors import OpbridgeError

DEFAULT_MAX_ELEMENTS = 2 ** 30          # 1 Gi elements (4 GiB of float32)
DEFAULT_MAX_BYTES = 4 * 2 ** 30         # 4 GiB per tensor
DEFAULT_MAX_LOOP_ITERS = 10 ** 6        # Loop/Scan iterations per reference run
DEFAULT_TIME_LIMIT = 600.0              # seconds per reference run

_ENV = {"max_elements": "OPBRIDGE_MAX_ELEMENTS", "max_bytes": "OPBRIDGE_MAX_BYTES",
        "max_loop_iters": "OPBRIDGE_MAX_LOOP_ITERS", "time_limit": "OPBRIDGE_TIME_LIMIT"}


@dataclass(frozen=True)
class Budget:
    max_elements: int = DEFAULT_MAX_ELEMENTS
    max_bytes: int = DEFAULT_MAX_BYTES
    max_loop_iters: int = DEFAULT_MAX_LOOP_ITERS
    time_limit: float = DEFAULT_TIME_LIMIT


_OVERRIDE: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("opbridge_budget", default=None)


def _env_number(name: str, default: float, kind: type) -> Any:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        v = kind(float(raw)) if kind is int else kind(raw)
    except ValueError:
        raise OpbridgeError("bad_model", f"environment variable {name}={raw!r} is not a number") from None
    if v <= 0:
        raise OpbridgeError("bad_model", f"environment variable {name}={raw!r} must be positive")
    return v


def current() -> Budget:
    """The budget in force: an ``override`` block's, else the environment's, else the defaults."""
    b = _OVERRIDE.get()
    if b is not None:
        return b
    r = _RUN.get()
    if r is not None:  # fixed for the duration of a reference run
        return r.budget
    return Budget(_env_number(_ENV["max_elements"], DEFAULT_MAX_ELEMENTS, int),
                  _env_number(_ENV["max_bytes"], DEFAULT_MAX_BYTES, int),
                  _env_number(_ENV["max_loop_iters"], DEFAULT_MAX_LOOP_ITERS, int),
                  _env_number(_ENV["time_limit"], DEFAULT_TIME_LIMIT, float))


@contextlib.contextmanager
def override(**limits: Any) -> Iterator[Budget]:
    """Run a block under other limits (``override(max_elements=1000)``)."""
    b = replace(current(), **limits)
    tok = _OVERRIDE.set(b)
    try:
        yield b
    finally:
        _OVERRIDE.reset(tok)


def _fmt(n: int) -> str:
    return f"{n} (2^{math.log2(n):.1f})" if n >= 2 ** 20 else str(n)


def check_tensor(shape: Any, itemsize: int | None, what: str, *, node: str | None = None, op: str | None = None,
                 where: str | None = None) -> int:
    """Refuse a tensor of ``shape`` (or of that many elements, given an int) over the budget,
    before it is allocated; returns its element count. Negative dims are a bad model."""
    if isinstance(shape, int):
        n = shape
        if n < 0:
            raise OpbridgeError("bad_model", f"{what}: negative element count {n}", node=node, op=op, where=where)
    else:
        dims = [int(d) for d in shape]
        if any(d < 0 for d in dims):
            raise OpbridgeError("bad_model", f"{what}: negative dimension in shape {tuple(dims)}", node=node, op=op,
                                where=where)
        n = math.prod(dims)
    b = current()
    if n > b.max_elements:
        raise OpbridgeError("too_large", f"{what}: {_fmt(n)} elements exceed the budget of {b.max_elements} "
                            f"({_ENV['max_elements']})", node=node, op=op, where=where)
    if itemsize and n * itemsize > b.max_bytes:
        raise OpbridgeError("too_large", f"{what}: {_fmt(n * itemsize)} bytes exceed the budget of {b.max_bytes} "
                            f"({_ENV['max_bytes']})", node=node, op=op, where=where)
    return n


# ----------------------------------------------------------------------------- per-run state
class _Run:
    __slots__ = ("deadline", "iters", "budget")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.deadline = time.monotonic() + budget.time_limit
        self.iters = 0


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("opbridge_run", default=None)


@contextlib.contextmanager
def run_scope() -> Iterator[None]:
    """One reference run: the time limit and the loop-iteration count start here (nested
    scopes, e.g. a subgraph run, share the outer one)."""
    if _RUN.get() is not None:
        yield
        return
    tok = _RUN.set(_Run(current()))
    try:
        yield
    finally:
        _RUN.reset(tok)


def check_time(*, node: str | None = None, op: str | None = None) -> None:
    r = _RUN.get()
    if r is not None and time.monotonic() > r.deadline:
        raise OpbridgeError("time_limit", f"the reference run exceeded its time limit of {r.budget.time_limit:g} s "
                            f"({_ENV['time_limit']})", node=node, op=op)


def loop_iteration(what: str = "loop") -> None:
    """Count one Loop/Scan iteration against the run's budget (and check the time)."""
    r = _RUN.get()
    if r is None:
        return
    r.iters += 1
    if r.iters > r.budget.max_loop_iters:
        raise OpbridgeError("too_large", f"more than {r.budget.max_loop_iters} {what} iterations in one "
                            f"reference run ({_ENV['max_loop_iters']})")
    if r.iters % 64 == 0:
        check_time()


def loop_trip_count(n: int, what: str = "loop") -> None:
    """Refuse up front a loop that must run ``n`` times (no condition can stop it early)."""
    b = current()
    if n > b.max_loop_iters:
        raise OpbridgeError("too_large", f"{what} trip count {_fmt(n)} exceeds the budget of {b.max_loop_iters} "
                            f"iterations ({_ENV['max_loop_iters']})")
