"""Errors with reason codes. Every message is one line naming the file/node/op and why."""
from __future__ import annotations

REASON_CODES = (
    "unsupported_op", "unsupported_dtype", "unsupported_attribute_value", "unknown_domain",
    "rank_limit", "requires_constant_input", "dynamic_shape", "bad_model", "missing_external_data",
    "broadcast_mismatch", "type_mismatch", "verifier", "runtime_error", "no_reference",
    "structural_only",  # built and serialized, but no numeric result could be computed here (coreml on Linux)
    "bad_option",  # a command-line option's value is not one the target knows
    "internal_error",  # an unexpected exception inside opbridge (a bug): reported at the CLI boundary
    "too_large",  # over a resource budget (tensor elements/bytes, loop iterations): translator/table/budget.py
    "time_limit",  # the reference run exceeded its wall-time budget: translator/table/budget.py
)


class OpbridgeError(Exception):
    """Base class: ``code`` is one of REASON_CODES."""

    def __init__(self, code: str, detail: str, *, node: str | None = None, op: str | None = None,
                 where: str | None = None) -> None:
        self.code, self.detail, self.node, self.op, self.where = code, detail, node, op, where
        parts = [p for p in (where, f"node {node!r}" if node else None, f"op {op}" if op else None) if p]
        super().__init__(f"{': '.join(parts) + ': ' if parts else ''}{detail} [{code}]")


class FrontendError(OpbridgeError):
    """The source model cannot be read into the IR."""


class Unsupported(OpbridgeError):
    """(op, backend) has no native mapping, lowering or decomposition that applies."""

    def __init__(self, op: str, backend: str, code: str, detail: str, node: str | None = None) -> None:
        self.backend = backend
        super().__init__(code, f"{backend}: {detail}", node=node, op=op)


class VerifyError(OpbridgeError):
    """The IR violates a type, shape or attribute constraint."""
