"""MLX rules: convolutions and pools whose ``mlx`` snippet covers only explicit, symmetric
pads (the ONNX geometry — auto_pad, asymmetric pads, ceil_mode, dilations — is the
module's ``_same_pads`` / ``_pool`` helpers)."""
from __future__ import annotations

from translator.compile import pysource
from translator.compile.render import literal

from .codegen import NodeEmit
from .registry import rule


def _ints(e: NodeEmit, name: str) -> str:
    v = e.attr(name)
    return literal(None if v is None else [int(i) for i in v])


@rule("conv")
def conv(e: NodeEmit) -> str | list[str]:
    """The cell's snippet for explicit pads; ``auto_pad`` pads are computed from the input's shape."""
    auto = e.attr("auto_pad") or "NOTSET"
    if auto == "NOTSET":
        return e.snippet()
    x, w = e.x(0), e.x(1)
    lo, hi = e.tmp("pad_begin"), e.tmp("pad_end")
    strides = f"{_ints(e, 'strides')} or [1] * ({x}.ndim - 2)"
    dil = f"{_ints(e, 'dilations')} or [1] * ({x}.ndim - 2)"
    bias = "" if e.v(2) is None else f" + {e.x(2)}"
    return [f"{lo}, {hi} = {e.helper('_same_pads')}({x}, list({w}.shape[2:]), {strides}, {dil}, None, {literal(auto)})",
            f"{e.out()} = mx.moveaxis(mx.conv_general(mx.moveaxis({x}, 1, -1), mx.moveaxis({w}, 1, -1), "
            f"stride={strides}, padding=({lo}, {hi}), kernel_dilation={dil}, groups={int(e.attr('group') or 1)})"
            f"{bias}, -1, 1)"]


def _pool(e: NodeEmit, kind: str, **extra: object) -> str:
    args = ", ".join([e.x(0), literal(kind), _ints(e, "kernel_shape"), _ints(e, "strides"), _ints(e, "pads"),
                      _ints(e, "dilations"), literal(int(e.attr("ceil_mode") or 0)),
                      literal(e.attr("auto_pad") or "NOTSET")] + [f"{k}={literal(v)}" for k, v in extra.items()])
    return f"{e.helper('_pool')}({args})"


@rule("average_pool")
def average_pool(e: NodeEmit) -> str:
    return _pool(e, "avg", count_include_pad=int(e.attr("count_include_pad") or 0))


@rule("lp_pool")
def lp_pool(e: NodeEmit) -> str:
    return _pool(e, "lp", p=int(e.attr("p") or 2))


@rule("max_pool")
def max_pool(e: NodeEmit) -> str:
    if len(e.node.outputs) > 1 and e.node.outputs[1] is not None:
        return _pool(e, "max", storage_order=int(e.attr("storage_order") or 0), indices=True)
    return _pool(e, "max")


@rule("negative_log_likelihood_loss")
def negative_log_likelihood_loss(e: NodeEmit) -> str:
    """``_nll``: weights, ``ignore_index`` and the weighted mean as ONNX defines them."""
    weight = e.x(2) if e.v(2) is not None else "None"
    return (f"{e.helper('_nll')}({e.x(0)}, {e.x(1)}, {weight}, {literal(e.attr('ignore_index'))}, "
            f"{literal(e.attr('reduction') or 'mean')})")


@rule("softmax_cross_entropy_loss")
def softmax_cross_entropy_loss(e: NodeEmit) -> list[str]:
    """log_softmax over the classes (axis 1), then ``_nll``; the log-probabilities are the second output."""
    logp = e.out(1) if len(e.outs) > 1 else e.tmp("log_prob")
    weight = e.x(2) if e.v(2) is not None else "None"
    return [f"{logp} = nn.log_softmax({e.x(0)}, axis=1)",
            f"{e.out(0)} = {e.helper('_nll')}({logp}, {e.x(1)}, {weight}, {literal(e.attr('ignore_index'))}, "
            f"{literal(e.attr('reduction') or 'mean')})"]


@rule("resize")
def resize(e: NodeEmit) -> str:
    """ONNX Resize by the shared ``pysource.resize_call`` (roi, scales and sizes read with ``np.array``)."""
    return pysource.resize_call(e, "np.array")
