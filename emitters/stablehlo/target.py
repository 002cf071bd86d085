"""The StableHLO target (``--to stablehlo``, also ``--to jax``): what the pipeline needs to know.

* dtypes: what JAX computes in with 64-bit types enabled (``codegen.JAX_DTYPES``: bool,
  8- to 64-bit integers, float16, bfloat16, float32, float64, complex); the others (float8,
  4-bit, strings) are refused node by node with the reason, after the table's decomposition
  was tried.
* ``accepts``: every tensor a node reads or writes has a JAX dtype, and its code (rule or
  the ``stablehlo`` cell's snippet) traces in JAX on the node's shapes (``codegen.trial``).
* shapes: symbolic input dims stay symbolic (``dynamic_dims``): the export declares them as
  ``jax.export`` symbolic dimensions (shape polymorphism). A node whose code JAX traces only
  at fixed sizes, or that reads as a value (a reshape's shape) what the model computes from a
  symbolic dim, is a ``dynamic_shape`` refusal, and ``convert`` fixes the fewest dims that
  settle it (all, else), and says so.
* the artifact: a folder ``<stem>_jax`` with ``model.py``, ``weights.safetensors``,
  ``model.jax_export`` and ``model.mlir``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from translator.compile.pysource import array_refusal
from translator.compile.quantized import float_kernels_plan
from translator.compile.registry import Refusal
from translator.compile.target import Target, package_fields

from . import codegen, runtime
from .codegen import JAX_DTYPES, trial
from .registry import NAME

if TYPE_CHECKING:
    from translator.compile.pipeline import Compilation
    from translator.ir.graph import Node
    from translator.table.loader import Tables


def legal_dtypes(tables: "Tables") -> frozenset[str]:
    """Every dtype but the ones JAX has: those stay, so ``accepts`` refuses each node that
    touches one and names its op; nothing is silently widened."""
    return frozenset(tables.dtypes)


def accepts(node: "Node", ctx: "Compilation") -> Refusal | None:
    return array_refusal(node, JAX_DTYPES, "JAX", "the JAX module") or trial(node, ctx)


TARGET = Target(
    name=NAME, title="StableHLO (JAX)", **package_fields(codegen, runtime), suffix="_jax", written="model",
    legal_dtypes=legal_dtypes, fold=True, dynamic_dims=True, accepts=accepts,
    integer_plan=float_kernels_plan("JAX"), aliases=("jax",),
    doc="a standalone JAX function (model.py, weights.safetensors) and its jax.export StableHLO module",
)
