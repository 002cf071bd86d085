"""Rules for ops whose ``stablehlo`` cell has no one-line snippet."""
from __future__ import annotations

import numpy as np

from translator.compile import pysource
from translator.compile.render import literal

from .codegen import RULE_STATIC_PORTS, NodeEmit, computed, jax_dtype
from .registry import rule


@rule("constant_of_shape")
def constant_of_shape(e: NodeEmit) -> str:
    """``jnp.full`` of the shape input (a static port: read with NumPy) and the ``value``
    attribute's one element (default 0.0 as float32), in the output's dtype."""
    value = e.attr("value")
    fill = np.asarray(value).reshape(-1)[0].item() if value is not None else 0.0
    dtype = jax_dtype(e.node.outputs[0].type.dtype or "float32")
    dims = e.cg.sized(e.node.outputs[0]) if computed(e.v(0)) else None
    if dims is not None:  # computed from symbolic dims: the inferred output shape (shape.py)
        return f"jnp.full({dims}, {literal(fill)}, dtype={dtype})"
    return f"jnp.full(tuple(np.asarray({e.x(0)}).reshape(-1).tolist()), {literal(fill)}, dtype={dtype})"


RULE_STATIC_PORTS["constant_of_shape"] = frozenset({"input"})


@rule("resize")
def resize(e: NodeEmit) -> str:
    """ONNX Resize by the shared ``pysource.resize_call`` (roi, scales, sizes: static ports)."""
    return pysource.resize_call(e, "np.asarray")


RULE_STATIC_PORTS["resize"] = frozenset({"roi", "scales", "sizes"})


@rule("attention")
def attention(e: NodeEmit) -> str:
    """ONNX Attention by the shared ``_attention`` helper over ``jax.numpy`` (the outputs the node has)."""
    ins = [e.x(i) if e.v(i) is not None else "None" for i in range(7)]
    scale = e.attr("scale")
    args = ["jnp", "jax.nn.softmax"] + ins + [literal(int(e.attr("q_num_heads") or 0)), literal(int(e.attr("kv_num_heads") or 0)),
                  literal(None if scale is None else float(scale)), literal(float(e.attr("softcap") or 0.0)),
                  literal(bool(e.attr("is_causal"))), literal(int(e.attr("left_window_size"))),
                  literal(int(e.attr("right_window_size"))), literal(int(e.attr("qk_matmul_output_mode") or 0))]
    return f"{e.helper('_first_outputs')}({e.helper('_attention')}({', '.join(args)}), {len(e.node.outputs)})"


def _pool(e: NodeEmit, kind: str) -> str:
    """The pads a pool runs with, from its attributes and the static shapes (SAME pads, and the
    extra end window of ceil_mode so the result has the op's shape), then the ``pool`` helper."""
    from translator.reference.conv import _conv_pads

    x = e.v(0)
    shape = x.type.shape if x is not None and x.type.is_static else None
    if len(e.node.outputs) > 1:
        raise e.refuse("unsupported_attr", "the Indices output of MaxPool is not written")
    if shape is None:
        return _pool_symbolic(e, kind)
    spatial = [int(d) for d in shape[2:]]
    r = len(spatial)
    k = [int(a) for a in e.attr("kernel_shape")]
    s = [int(a) for a in (e.attr("strides") or [1] * r)]
    d = [int(a) for a in (e.attr("dilations") or [1] * r)]
    span = [(k[i] - 1) * d[i] + 1 for i in range(r)]
    pads = [int(a) for a in _conv_pads(spatial, k, s, d, e.attr("pads"), e.attr("auto_pad") or "NOTSET")]
    begin, end = pads[:r], pads[r:]
    out = e.node.outputs[0].type.shape
    if out is not None and e.node.outputs[0].type.is_static:
        want = [int(a) for a in out[2:]]
    else:
        rnd = (lambda a, b: -(-a // b)) if e.attr("ceil_mode") else (lambda a, b: a // b)
        want = [rnd(spatial[i] + begin[i] + end[i] - span[i], s[i]) + 1 for i in range(r)]
    extra = [max(0, (want[i] - 1) * s[i] + span[i] - (spatial[i] + begin[i] + end[i])) for i in range(r)]
    counted = bool(e.attr("count_include_pad")) if kind == "avg" else False
    inside = [(0, begin[i] + spatial[i] + end[i]) if counted else (begin[i], begin[i] + spatial[i]) for i in range(r)]
    args = [e.x(0), literal(kind), literal(k), literal(s), literal(d), literal(begin),
            literal([a + b for a, b in zip(end, extra)]), literal([list(p) for p in inside])]
    return f"{e.helper('_pool')}({', '.join(args)})"


def _pool_symbolic(e: NodeEmit, kind: str) -> str:
    """A pool over spatial sizes known only at run time (the export's symbolic dims): the
    ``_pool_symbolic`` helper resolves SAME pads on the traced sizes and counts an average's
    window on them. ceil_mode's extra window depends on the sizes' remainders: refused."""
    if e.attr("ceil_mode"):
        raise e.refuse("dynamic_shape", "pooling with ceil_mode needs the input's static shape")
    x = e.v(0)
    if x is None or x.type.shape is None:
        raise e.refuse("dynamic_shape", "pooling needs the input's rank")
    r = len(x.type.shape) - 2
    k = [int(a) for a in e.attr("kernel_shape")]
    s = [int(a) for a in (e.attr("strides") or [1] * r)]
    d = [int(a) for a in (e.attr("dilations") or [1] * r)]
    auto = e.attr("auto_pad") or "NOTSET"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = literal(auto)
    else:
        p = [0] * (2 * r) if auto == "VALID" else [int(a) for a in (e.attr("pads") or [0] * (2 * r))]
        pads = literal([[p[i], p[r + i]] for i in range(r)])
    counted = bool(e.attr("count_include_pad")) if kind == "avg" else False
    return (f"{e.helper('_pool_symbolic')}({e.x(0)}, {literal(kind)}, {literal(k)}, {literal(s)}, {literal(d)}, "
            f"{pads}, {literal(counted)})")


#: a depthwise convolution with at most this many kernel taps is written as their sum
DEPTHWISE_TAPS = 49


@rule("conv")
def conv(e: NodeEmit) -> str:
    """The cell's ``lax.conv_general_dilated``, except a depthwise convolution (one group per
    input channel) over static sizes: the ``_depthwise`` helper sums its kernel's taps, each a
    strided slice of the padded input times one weight per channel. XLA's CPU backend runs a
    grouped convolution in a generic loop (a 3x3 depthwise layer of 64 channels at 48x48: 10.9 ms
    against 0.39 ms as taps); the taps fuse into one loop. Symbolic sizes keep the convolution
    (the slices' bounds would need comparisons JAX cannot settle)."""
    x, w = e.v(0), e.v(1)
    group = int(e.attr("group") or 1)
    shape = [int(d) for d in x.type.shape] if x is not None and x.type.is_static else None
    wshape = list(w.type.shape) if w is not None and w.type.shape is not None else None
    if shape is None or wshape is None or group == 1 or shape[1] != group or wshape[1] != 1 or \
            len(shape) not in (3, 4) or int(np.prod(wshape[2:])) > DEPTHWISE_TAPS:
        return e.snippet()
    from translator.reference.conv import _conv_pads

    nd = len(shape) - 2
    kernel = [int(k) for k in wshape[2:]]
    strides = [int(a) for a in (e.attr("strides") or [1] * nd)]
    dil = [int(a) for a in (e.attr("dilations") or [1] * nd)]
    pads = [int(a) for a in _conv_pads(shape[2:], kernel, strides, dil, e.attr("pads"), e.attr("auto_pad") or "NOTSET")]
    bias = e.x(2) if e.v(2) is not None else "None"
    return (f"{e.helper('_depthwise')}({e.x(0)}, {e.x(1)}, {bias}, {literal(strides)}, {literal(pads)}, "
            f"{literal(dil)})")


@rule("max_pool")
def max_pool(e: NodeEmit) -> str:
    return _pool(e, "max")


@rule("average_pool")
def average_pool(e: NodeEmit) -> str:
    return _pool(e, "avg")


@rule("cast")
def cast(e: NodeEmit) -> str:
    """``cast`` helper: ONNX's saturation into float8 and NumPy's wrap into 4-bit integers."""
    out = e.node.outputs[0].type.dtype
    return f"{e.helper('_cast')}({e.x(0)}, {jax_dtype(out)}, {literal(bool(e.attr('saturate')))})"


@rule("cast_like")
def cast_like(e: NodeEmit) -> str:
    out = e.node.outputs[0].type.dtype
    return f"{e.helper('_cast')}({e.x(0)}, {jax_dtype(out)}, {literal(bool(e.attr('saturate')))})"


@rule("dequantize_linear")
def dequantize_linear(e: NodeEmit) -> str:
    """Per tensor, per axis or blocked, by the ``dequantize`` helper."""
    zero = e.x(2) if e.v(2) is not None else "None"
    out = jax_dtype(e.node.outputs[0].type.dtype or e.v(1).type.dtype)
    return (f"{e.helper('_dequantize')}(jnp, {e.x(0)}, jnp.asarray({e.x(1)}), {zero if zero == 'None' else f'jnp.asarray({zero})'}, "
            f"{int(e.attr('axis'))}, {int(e.attr('block_size') or 0)}, {out})")


@rule("quantize_linear")
def quantize_linear(e: NodeEmit) -> str:
    """Per tensor, per axis or blocked, by the ``quantize`` helper, into the output's dtype."""
    out = e.node.outputs[0].type.dtype
    if out is None:
        raise e.refuse("unsupported_dtype", "the quantized output's dtype is unknown")
    zero = "None" if e.v(2) is None else f"jnp.asarray({e.x(2)})"
    return (f"{e.helper('_quantize')}({e.x(0)}, jnp.asarray({e.x(1)}), {zero}, {int(e.attr('axis'))}, "
            f"{int(e.attr('block_size') or 0)}, {jax_dtype(out)}, {literal(bool(e.attr('saturate')))})")


@rule("if")
def if_(e: NodeEmit) -> list[str]:
    """``lax.cond`` over the two branches as nested functions (their results must agree in shape
    and dtype, as StableHLO's ``if`` requires)."""
    then_fn = e.body(e.attr("then_branch"), "then")
    else_fn = e.body(e.attr("else_branch"), "else")
    outs = e.outs
    lhs = outs[0] + "," if len(outs) == 1 else ", ".join(outs)
    return [f"{lhs} = lax.cond(jnp.reshape({e.x(0)}, (-1,))[0].astype(bool), {then_fn}, {else_fn})"]
