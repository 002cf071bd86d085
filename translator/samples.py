"""Sample inputs per op for the table-driven tests (decompositions, cross-execution).

The generic rule reads the op's signature: each required input becomes a random tensor
of shape (2, 3, 4) of the requested dtype, attributes keep their defaults. Ops that
need other shapes, value domains or attributes are listed in ``SPECIAL``. An input spec is
``(shape, dtype-or-None, domain)`` (a graph input; None dtype = the requested one), an
``np.ndarray`` (a constant input with exactly that value: shapes, axes, indices — what a
real model carries as an initializer), ``("as", values)`` (constant values in the requested
dtype, e.g. boxes), ``("const", shape, dtype-or-None, domain)`` (a random
constant, e.g. normalization parameters) or None (an omitted optional input). ``outputs``
limits the compared outputs (e.g. max_pool's optional Indices).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .tables import Op

S = (2, 3, 4)
# value domains: "any" N(0,1) kept away from 0 for divisions, "pos" (0.1, 2), "unit" (-0.9, 0.9), "ge1" (1.1, 3),
# "small" small non-negative ints, "bool"
DOMAIN = {
    "log": "pos", "sqrt": "pos", "reciprocal": "nonzero", "asin": "unit", "acos": "unit", "atanh": "unit",
    "acosh": "ge1", "reduce_log_sum": "pos", "root": "pos", "div": "nonzero", "floor_mod": "nonzero",
    "trunc_mod": "nonzero", "pow": "pos",
}

def _i64(*v: Any) -> np.ndarray:
    return np.asarray(v[0] if len(v) == 1 else v, dtype=np.int64)


IMG = (1, 2, 6, 6)

SPECIAL: dict[str, dict[str, Any]] = {
    # shapes and indices are constants, as in exported models
    "pow": {"inputs": [(S, None, "pos"), (S, None, "any")]},
    "eye_like": {"inputs": [((3, 4), None, "any")]},
    "trilu": {"inputs": [(S, None, "any")]},
    "cast": {"inputs": [(S, None, "any")], "attrs": {"to": 6}},
    "cast_like": {"inputs": [(S, None, "any"), ("const", (1,), "int32", "small")]},
    "expand": {"inputs": [((3, 1), None, "any"), _i64([2, 3, 4])]},
    "reshape": {"inputs": [(S, None, "any"), _i64([4, -1])]},
    "unsqueeze": {"inputs": [(S, None, "any"), _i64([1])]},
    "tile": {"inputs": [(S, None, "any"), _i64([1, 2, 1])]},
    "slice": {"inputs": [(S, None, "any"), _i64([0, 0]), _i64([2, 4]), _i64([1, 2]), _i64([1, 2])]},
    "concat": {"inputs": [(S, None, "any"), ((2, 2, 4), None, "any")], "attrs": {"axis": 1}},
    "gather": {"inputs": [(S, None, "any"), _i64([2, 0, 1])], "attrs": {"axis": 1}},
    "gather_elements": {"inputs": [(S, None, "any"), _i64([[[0, 2, 1, 0], [2, 2, 0, 1]], [[1, 0, 0, 2], [0, 1, 2, 2]]])],
                        "attrs": {"axis": 1}},
    "gather_nd": {"inputs": [(S, None, "any"), _i64([[0, 1], [1, 2]])]},
    "scatter_elements": {"inputs": [(S, None, "any"), _i64([[[0, 2, 1, 0]], [[2, 1, 0, 1]]]), ((2, 1, 4), None, "any")],
                         "attrs": {"axis": 1}},
    "scatter_nd": {"inputs": [(S, None, "any"), _i64([[0, 1], [1, 2]]), ((2, 4), None, "any")]},
    "pad": {"inputs": [(S, None, "any"), _i64([0, 1, 0, 0, 2, 1])]},
    "top_k": {"inputs": [(S, None, "any"), _i64([2])], "attrs": {"axis": -1}},
    "compress": {"inputs": [(S, None, "any"), np.asarray([True, False, True])], "attrs": {"axis": 1}},
    "center_crop_pad": {"inputs": [(S, None, "any"), _i64([1, 2, 6])]},
    "cum_sum": {"inputs": [(S, None, "any"), _i64(1)]},
    "cum_prod": {"inputs": [(S, None, "any"), _i64(1)]},
    "reverse_sequence": {"inputs": [((4, 2, 3), None, "any"), _i64([4, 2])], "attrs": {"batch_axis": 1, "time_axis": 0}},
    "one_hot": {"inputs": [((2, 3), "int64", "small"), _i64(9), ("const", (2,), None, "any")]},
    # windows and images
    "average_pool": {"inputs": [(IMG, None, "any")], "attrs": {"kernel_shape": [2, 2], "strides": [2, 2]}},
    "max_pool": {"inputs": [(IMG, None, "any")], "attrs": {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]},
                 "outputs": 1},
    "lp_pool": {"inputs": [(IMG, None, "any")], "attrs": {"kernel_shape": [2, 2], "strides": [2, 2], "p": 2}},
    "resize": {"inputs": [((1, 2, 3, 4), None, "any"), None, np.asarray([1, 1, 2, 2], dtype=np.float32)]},
    "lrn": {"inputs": [((1, 5, 3, 3), None, "any")], "attrs": {"size": 3}},
    "batch_normalization": {"inputs": [((2, 3, 4, 5), None, "any"), ("const", (3,), None, "any"),
                                       ("const", (3,), None, "any"), ("const", (3,), None, "any"),
                                       ("const", (3,), None, "pos")]},
    "group_normalization": {"inputs": [((2, 4, 3, 3), None, "any"), ("const", (4,), None, "any"),
                                       ("const", (4,), None, "any")], "attrs": {"num_groups": 2}},
    "rms_normalization": {"inputs": [(S, None, "any"), ("const", (4,), None, "any")]},
    "einsum": {"inputs": [((3, 4), None, "any"), ((4, 5), None, "any")], "attrs": {"equation": "ij,jk->ik"}},
    "grid_sample": {"inputs": [((1, 1, 3, 4), None, "any"), ((1, 2, 2, 2), None, "unit")]},
    "affine_grid": {"inputs": [((1, 2, 3), None, "any"), _i64([1, 1, 3, 4])]},
    # quantization (uint8 activations, constant scales and zero points)
    "quantize_linear": {"inputs": [(S, None, "any"), ("const", (), None, "scale"), np.asarray(128, np.uint8)]},
    "dequantize_linear": {"inputs": [(S, "uint8", "small"), np.asarray(0.05, np.float32), np.asarray(3, np.uint8)]},
    "dynamic_quantize_linear": {"inputs": [(S, None, "any")]},
    "matmul_integer": {"inputs": [((3, 4), "uint8", "small"), ("const", (4, 5), "uint8", "small")]},
    "conv_integer": {"inputs": [((1, 1, 4, 4), "uint8", "small"), ("const", (1, 1, 2, 2), "uint8", "small")]},
    "qlinear_matmul": {"inputs": [((3, 4), "uint8", "small"), np.asarray(0.05, np.float32), np.asarray(2, np.uint8),
                                  ("const", (4, 5), "uint8", "small"), np.asarray(0.04, np.float32),
                                  np.asarray(3, np.uint8), np.asarray(0.1, np.float32), np.asarray(1, np.uint8)]},
    "qlinear_conv": {"inputs": [((1, 1, 4, 4), "uint8", "small"), np.asarray(0.05, np.float32), np.asarray(2, np.uint8),
                                ("const", (1, 1, 2, 2), "uint8", "small"), np.asarray(0.04, np.float32),
                                np.asarray(3, np.uint8), np.asarray(0.1, np.float32), np.asarray(1, np.uint8)]},
    # recurrent (seq 3, batch 2, input 4, hidden 5; weights constant)
    "rnn": {"inputs": [((3, 2, 4), None, "any"), ("const", (1, 5, 4), None, "unit"), ("const", (1, 5, 5), None, "unit"),
                       ("const", (1, 10), None, "unit")], "attrs": {"hidden_size": 5}},
    "gru": {"inputs": [((3, 2, 4), None, "any"), ("const", (1, 15, 4), None, "unit"), ("const", (1, 15, 5), None, "unit"),
                       ("const", (1, 30), None, "unit")], "attrs": {"hidden_size": 5}},
    "lstm": {"inputs": [((3, 2, 4), None, "any"), ("const", (1, 20, 4), None, "unit"), ("const", (1, 20, 5), None, "unit"),
                        ("const", (1, 40), None, "unit")], "attrs": {"hidden_size": 5}},
    # attention and friends (batch 1, 2 heads, head size 4)
    "attention": {"inputs": [((1, 2, 3, 4), None, "any"), ((1, 2, 5, 4), None, "any"), ((1, 2, 5, 4), None, "any")],
                  "outputs": 1},
    "rotary_embedding": {"inputs": [((1, 2, 3, 4), None, "any"), ("const", (8, 2), None, "unit"),
                                    ("const", (8, 2), None, "unit"), _i64([[0, 1, 2]])]},
    "roi_align": {"inputs": [((1, 2, 6, 6), None, "any"), ("as", [[0, 0, 3, 3], [1, 1, 5, 5]]),
                             _i64([0, 0])], "attrs": {"output_height": 2, "output_width": 2}},
    "max_roi_pool": {"inputs": [((1, 1, 4, 4), None, "any"), ("as", [[0, 0, 0, 3, 3]])],
                     "attrs": {"pooled_shape": [2, 2]}},
    "max_unpool": {"inputs": [((1, 1, 2, 2), None, "any"), _i64([[[[0, 3], [9, 14]]]])],
                   "attrs": {"kernel_shape": [2, 2], "strides": [2, 2]}},
    "upsample": {"inputs": [((1, 1, 2, 2), None, "any"), np.asarray([1, 1, 2, 2], np.float32)]},
    "non_zero": {"inputs": [(S, None, "sparse")]},
    "col2im": {"inputs": [((1, 4, 4), None, "any"), _i64([3, 3]), _i64([2, 2])]},
    "dft": {"inputs": [((1, 8, 1), None, "any")]},
    "stft": {"inputs": [((1, 16, 1), None, "any"), _i64(4), None, _i64(8)]},
    # losses (integer class labels are constants)
    "softmax_cross_entropy_loss": {"inputs": [((3, 5), None, "any"), _i64([0, 2, 4])], "outputs": 1},
    "negative_log_likelihood_loss": {"inputs": [((3, 5), None, "any"), _i64([0, 2, 4])]},
    "prelu": {"inputs": [(S, None, "any"), ((4,), None, "any")]},
    "root": {"inputs": [(S, None, "pos"), (S, None, "ge1")]},
    "mean": {"inputs": [(S, None, "any"), (S, None, "any"), (S, None, "any")]},
    "sum": {"inputs": [(S, None, "any"), (S, None, "any"), (S, None, "any")]},
    "max": {"inputs": [(S, None, "any"), (S, None, "any")]},
    "min": {"inputs": [(S, None, "any"), (S, None, "any")]},
    "not_equal": {"inputs": [(S, "int32", "small"), (S, "int32", "small")]},
    "logical_xor": {"inputs": [(S, "bool", "bool"), (S, "bool", "bool")]},
    "logical_and": {"inputs": [(S, "bool", "bool"), (S, "bool", "bool")]},
    "logical_or": {"inputs": [(S, "bool", "bool"), (S, "bool", "bool")]},
    "logical_not": {"inputs": [(S, "bool", "bool")]},
    "layer_normalization": {"inputs": [(S, None, "any"), ((4,), None, "any"), ((4,), None, "any")]},
    "clip": {"inputs": [(S, None, "any"), ((), None, "lo"), ((), None, "hi")]},
    "threshold": {"attrs": {"min_value": 0.25}},
    "reverse": {"attrs": {"axes": [1]}},
    "lp_normalization": {"attrs": {"p": 2}},
    "mean_variance_normalization": {"inputs": [((2, 3, 4, 5), None, "any")]},
    "cos_grad": {"inputs": [(S, None, "any"), (S, None, "any")]},
    "where": {"inputs": [(S, "bool", "bool"), (S, None, "any"), (S, None, "any")]},
    "matmul": {"inputs": [((2, 3, 4), None, "any"), ((2, 4, 5), None, "any")]},
    "gemm": {"inputs": [((3, 4), None, "any"), ((4, 5), None, "any"), ((5,), None, "any")]},
    "softmax": {"attrs": {"axis": -1}},
    "log_softmax": {"attrs": {"axis": -1}},
    "size": {"inputs": [(S, None, "any")]},
    "depth_to_space": {"inputs": [((1, 8, 2, 3), None, "any")], "attrs": {"blocksize": 2}},
    "space_to_depth": {"inputs": [((1, 2, 4, 6), None, "any")], "attrs": {"blocksize": 2}},
}


#: an op whose category starts with one of these has inputs with structure (no generic sample)
NO_GENERIC_CATEGORIES = frozenset({"Sequence", "Optional", "String", "Signal Processing", "Generation", "Imaging",
                                   "Control Flow", "Quantization", "Recurrent", "Attention", "Input", "Sparse",
                                   "NGram", "Loss"})


def generic_ok(op: Op) -> bool:
    """Whether (2, 3, 4) tensors of one dtype for every required input make sense for the op.

    True when every required input shares the first input's type variable and the op
    is not of a category whose inputs have structure (sequences, windows, indices...).
    """
    sig = op.signature
    if sig is None or not sig.inputs or op.categories[0] in NO_GENERIC_CATEGORIES:
        return False
    t = sig.inputs[0].type
    return all(p.type == t for p in sig.inputs if not p.optional)


@dataclass
class Sample:
    inputs: list[np.ndarray | None]
    attrs: dict[str, Any]
    #: indices of the inputs that are constants (initializers) rather than graph inputs
    const: tuple[int, ...] = ()
    #: how many outputs are compared (None: all the reference returns)
    outputs: int | None = None


def _values(shape: tuple[int, ...], dtype: Any, domain: str, rng: np.random.Generator) -> np.ndarray:
    dt = np.dtype(dtype)
    if domain == "bool" or dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo = 1 if domain == "nonzero" else 0
        return rng.integers(lo, 9, size=shape).astype(dt)
    if domain == "pos":
        x = rng.uniform(0.1, 2.0, shape)
    elif domain == "unit":
        x = rng.uniform(-0.9, 0.9, shape)
    elif domain == "ge1":
        x = rng.uniform(1.1, 3.0, shape)
    elif domain == "lo":
        x = np.asarray(-0.5)
    elif domain == "hi":
        x = np.asarray(0.5)
    elif domain == "scale":
        x = rng.uniform(0.02, 0.1, shape)
    elif domain == "sparse":
        x = np.where(rng.random(shape) < 0.5, 0.0, rng.standard_normal(shape))
    else:
        x = rng.standard_normal(shape)
        if domain == "nonzero":
            x = np.where(np.abs(x) < 0.1, 0.5, x)
    return np.asarray(x).astype(dt)


def sample(op: Op, dtype: Any = np.float32, seed: int = 0) -> Sample | None:
    """A sample for ``op`` at ``dtype``, or None when the op needs inputs we cannot make."""
    rng = np.random.default_rng(seed)
    spec = SPECIAL.get(op.id, {})
    attrs = dict(spec.get("attrs", {}))
    if "inputs" in spec:
        inputs: list[np.ndarray | None] = []
        const = []
        for i, item in enumerate(spec["inputs"]):
            if item is None:
                inputs.append(None)
            elif isinstance(item, np.ndarray):
                inputs.append(item.copy())
                const.append(i)
            elif item[0] == "as":  # a constant with these values, in the requested dtype
                inputs.append(np.asarray(item[1]).astype(dtype))
                const.append(i)
            elif item[0] == "const":
                _, shape, dt, dom = item
                inputs.append(_values(shape, dt or dtype, dom, rng))
                const.append(i)
            else:
                shape, dt, dom = item
                inputs.append(_values(shape, dt or dtype, dom, rng))
        return Sample(inputs, attrs, tuple(const), spec.get("outputs"))
    if op.signature is None or not generic_ok(op):
        return None
    inputs: list[np.ndarray | None] = []
    for p in op.signature.inputs:
        if p.optional:
            inputs.append(None)
            continue
        inputs.append(_values(S, dtype, DOMAIN.get(op.id, "any"), rng))
    while inputs and inputs[-1] is None:
        inputs.pop()
    for a in op.signature.attributes:
        if a.required and a.name not in attrs:
            return None
    return Sample(inputs, attrs)
