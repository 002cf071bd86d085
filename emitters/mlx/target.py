"""The MLX target (``--to mlx``): what the pipeline needs to know.

* dtypes: what MLX computes in on the CPU (``codegen.MLX_DTYPES``: bool, 8- to 64-bit
  integers, float16, bfloat16, float32, float64, complex64); the others (float8, 4-bit,
  complex128, strings) are refused node by node with the reason, after the table's
  decomposition was tried. Nothing is silently widened.
* ``accepts``: every value a node reads or writes is a tensor of an MLX dtype, and its code
  (rule or the ``mlx`` cell's snippet) runs in MLX on zero inputs of the node's shapes
  (``codegen.trial``).
* dynamic dims stay dynamic: the function is eager Python over ``mlx.core``, shape-polymorphic
  at run time (a dim the IR leaves symbolic is read from the arrays as they come).
* the artifact: a folder ``<stem>_mlx`` with ``model.py`` and ``weights.safetensors``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from translator.compile.pysource import array_refusal
from translator.compile.quantized import float_kernels_plan
from translator.compile.registry import Refusal
from translator.compile.target import Target, package_fields

from . import codegen, runtime
from .codegen import MLX_DTYPES, trial
from .registry import NAME

if TYPE_CHECKING:
    from translator.compile.pipeline import Compilation
    from translator.ir.graph import Node
    from translator.table.loader import Tables


def legal_dtypes(tables: "Tables") -> frozenset[str]:
    """Every dtype: the ones MLX lacks stay, so ``accepts`` refuses each node that touches
    one and names its op; nothing is silently widened."""
    return frozenset(tables.dtypes)


def accepts(node: "Node", ctx: "Compilation") -> Refusal | None:
    return array_refusal(node, MLX_DTYPES, "MLX", "the MLX function") or trial(node, ctx)


TARGET = Target(
    name=NAME, title="MLX", **package_fields(codegen, runtime), suffix="_mlx", written="model",
    legal_dtypes=legal_dtypes, fold=True, dynamic_dims=True, accepts=accepts,
    integer_plan=float_kernels_plan("MLX"),
    doc="a standalone MLX function (model.py over mlx.core / mlx.nn, weights.safetensors), run on mx.cpu",
)
