"""PyTorch rules: recurrences (RNN, GRU, LSTM).

Where the ONNX semantics are torch's own (default activations, no clip, no peepholes, no
``input_forget``, GRU with ``linear_before_reset=1``, every sequence running the full length),
the node runs on torch's recurrent kernels (``torch.lstm`` / ``torch.gru`` / ``torch.rnn_tanh`` /
``torch.rnn_relu`` through the ``_rnn_native`` helper) in the input's dtype: the gate blocks are
reordered (ONNX i,o,f,c → torch i,f,g,o; ONNX z,r,h → torch r,z,n) and B split into b_ih / b_hh
when the model is converted (constant weights become torch's flat weights as buffers) or at
run time (``_rnn_flat_weights``); a reverse direction runs forward on the time-flipped input.
Everything else runs the exact ONNX recurrence, one Python loop over time in float64
(the ``_recurrence`` helper).
"""
from __future__ import annotations

import numpy as np

from translator.ir.graph import TensorType, Value
from translator.compile.render import literal

from .node import NodeEmit
from .registry import rule

#: torch's gate blocks as ONNX block indices (LSTM: i,f,g,o from i,o,f,c; GRU: r,z,n from z,r,h)
ORDER = {"lstm": [0, 2, 3, 1], "gru": [1, 0, 2], "rnn": [0]}
#: the ONNX default activations, one direction
DEFAULTS = {"lstm": ["Sigmoid", "Tanh", "Tanh"], "gru": ["Sigmoid", "Tanh"], "rnn": ["Tanh"]}


def native_kernel(e: NodeEmit, kind: str) -> str | None:
    """The torch kernel that computes this node exactly as ONNX does (``lstm``, ``gru``,
    ``rnn_tanh``, ``rnn_relu``), or None when its attributes or inputs ask for more."""
    if e.dtype_id(0) not in ("float32", "float64") or e.attr("clip") is not None:
        return None
    direction = str(e.attr("direction"))
    if direction not in ("forward", "reverse", "bidirectional"):
        return None
    num_dir = 2 if direction == "bidirectional" else 1
    names = e.node.attrs.get("activations")
    acts = [str(a).lower() for a in names] if names else [a.lower() for a in DEFAULTS[kind]] * num_dir
    kernel = kind
    if kind == "rnn":
        if acts not in (["tanh"] * num_dir, ["relu"] * num_dir):
            return None
        kernel = f"rnn_{acts[0]}"
    elif acts != [a.lower() for a in DEFAULTS[kind]] * num_dir:
        return None
    if kind == "gru" and not e.attr("linear_before_reset"):
        return None  # ONNX's default applies r before the recurrent matmul; torch after
    if kind == "lstm":
        if e.attr("input_forget"):
            return None
        if e.has(7):  # peepholes: only all-zero constants are no peepholes
            p = e.const(7)
            if p is None or np.any(p != 0):
                return None
    if e.has(4):  # sequence_lens: only when every sequence runs the whole (static) length
        lens, steps = e.const(4), e.dim(0, 1 if e.attr("layout") else 0)
        if lens is None or not isinstance(steps, int) or np.any(lens != steps):
            return None
    return kernel


def flat_weights(kind: str, w: np.ndarray, r: np.ndarray, b: np.ndarray | None) -> list[np.ndarray]:
    """Constant ONNX W, R, B as torch's flat weights, per direction [w_ih, w_hh, b_ih, b_hh]
    (no B → no biases), gate blocks in torch's order (what ``_rnn_flat_weights`` does at run time)."""
    order = ORDER[kind]
    gates, hidden = len(order), r.shape[-1]

    def blocks(m: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(m.reshape(m.shape[0], gates, hidden, *m.shape[2:])[:, order]
                                    .reshape(m.shape))

    w, r = blocks(w), blocks(r)
    wb, rb = (None, None) if b is None else (blocks(b[:, :gates * hidden]), blocks(b[:, gates * hidden:]))
    out: list[np.ndarray] = []
    for d in range(w.shape[0]):
        out += [w[d], r[d]] + ([] if wb is None or rb is None else [wb[d], rb[d]])
    return out


def _at_load(e: NodeEmit, k: int) -> bool:
    """Input ``k`` is computed once when the weights load (``codegen._load_time``)."""
    v = e.node.inputs[k] if k < len(e.node.inputs) else None
    return v is not None and id(v) in e.cg.load_time


def _native(e: NodeEmit, kind: str, kernel: str) -> list[str]:
    direction = str(e.attr("direction"))
    x = e.x(0)
    h0 = e.x(5) if e.has(5) else "None"
    c0 = e.x(6) if kind == "lstm" and e.has(6) else "None"
    consts = [e.const(1), e.const(2), e.const(3) if e.has(3) else None]
    if consts[0] is not None and consts[1] is not None and (consts[2] is not None or not e.has(3)):
        # known now: torch's flat weights become buffers (named after W, direction and role)
        dtype = e.dtype_id(1)
        names = ["w_ih", "w_hh", "b_ih", "b_hh"] if consts[2] is not None else ["w_ih", "w_hh"]
        base = e.v(1).name  # type: ignore[union-attr]
        flats = flat_weights(kind, *consts)
        refs = []
        for i, arr in enumerate(flats):
            v = Value(f"{base}_{names[i % len(names)]}_d{i // len(names)}", TensorType(dtype, tuple(arr.shape)), arr)
            refs.append(e.cg.buffer(v))
        weights = f"[{', '.join(refs)}]"
    elif _at_load(e, 1) and _at_load(e, 2) and (not e.has(3) or consts[2] is not None or _at_load(e, 3)):
        # weights dequantized when they load (int8 weights): torch's flat weights derived then too
        b = e.x(3) if e.has(3) else "None"
        dtype, (num_dir, rows, inputs), hidden = e.dtype_id(1), e.shape(1), e.shape(2)[-1]
        per = [([rows, inputs], dtype), ([rows, hidden], dtype)] + ([([rows], dtype)] * 2 if e.has(3) else [])
        refs = e.cg.prepared_tensors(f"{e.helper('_rnn_flat_weights')}({literal(ORDER[kind])}, {e.x(1)}, {e.x(2)}, {b})",
                                     f"{e.v(1).name}_flat", per * num_dir)  # type: ignore[union-attr]
        weights = f"[{', '.join(refs)}]"
    else:
        b = e.x(3) if e.has(3) else "None"
        weights = f"{e.helper('_rnn_flat_weights')}({literal(ORDER[kind])}, {e.x(1)}, {e.x(2)}, {b})"
    call = (f"{e.helper('_rnn_native')}({literal(kernel)}, {x}, {weights}, {h0}, {c0}, "
            f"{direction == 'bidirectional'}, {direction == 'reverse'}, {bool(e.attr('layout'))})")
    y, h, c = e.tmp("y"), e.tmp("h_final"), e.tmp("c_final")
    lines = [f"{y}, {h}, {c} = {call}"]
    for name, src in zip(e.outs, [y, h, c]):
        lines.append(f"{name} = {src}")
    return lines


def _recurrent(e: NodeEmit, kind: str, gates: int, defaults: list[str]) -> list[str]:
    """Torch's own kernel where it matches ONNX (``native_kernel``), else the exact ONNX
    recurrence through the ``_recurrence`` helper (one Python loop over time)."""
    kernel = native_kernel(e, kind)
    if kernel is not None:
        return _native(e, kind, kernel)
    names = e.node.attrs.get("activations")
    direction = str(e.attr("direction"))
    num_dir = 2 if direction == "bidirectional" else 1
    acts = [str(a) for a in names] if names else defaults * num_dir
    alphas = [float(a) for a in e.attr("activation_alpha") or []]
    betas = [float(a) for a in e.attr("activation_beta") or []]
    clip = e.attr("clip")
    inputs = [e.x(i) if e.has(i) else "None" for i in range(len(e.node.inputs))]
    inputs += ["None"] * (8 - len(inputs))
    if kind != "lstm":
        inputs = inputs[:6] + ["None", "None"]
    x, w, r, b, lens, h0, c0, p = inputs
    extra = {"linear_before_reset": bool(e.attr("linear_before_reset")) if kind == "gru" else False,
             "input_forget": bool(e.attr("input_forget")) if kind == "lstm" else False}
    call = (f"{e.helper('_recurrence')}({literal(kind)}, {x}, {w}, {r}, {b}, {lens}, {h0}, {c0}, {p}, "
            f"{literal(acts)}, {literal(alphas)}, {literal(betas)}, {literal(None if clip is None else float(clip))}, "
            f"{literal(direction)}, {bool(e.attr('layout'))}, {extra['linear_before_reset']}, {extra['input_forget']})")
    outs = e.outs
    y, rest = e.tmp("y"), [e.tmp("h_final"), e.tmp("c_final")]
    lines = [f"{y}, {rest[0]}, {rest[1]} = {call}"]
    sources = [y] + rest
    for name, src in zip(outs, sources):
        lines.append(f"{name} = {src}")
    return lines


@rule("rnn")
def rnn(e: NodeEmit) -> list[str]:
    return _recurrent(e, "rnn", 1, ["Tanh"])


@rule("gru")
def gru(e: NodeEmit) -> list[str]:
    return _recurrent(e, "gru", 3, ["Sigmoid", "Tanh"])


@rule("lstm")
def lstm(e: NodeEmit) -> list[str]:
    return _recurrent(e, "lstm", 4, ["Sigmoid", "Tanh", "Tanh"])
