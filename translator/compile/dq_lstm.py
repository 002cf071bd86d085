"""onnxruntime's ``DynamicQuantizeLSTM`` as IR ops, computing what onnxruntime computes.

onnxruntime quantizes the LSTM's GEMM operands at run time: X once over the whole tensor,
and the hidden state over the whole ``[batch, hidden]`` matrix before every step, each to
uint8 with ``DynamicQuantizeLinear``'s range and rounding; the integer GEMMs are then
scaled back. That is its sequential path (one intra-op thread); split over threads (a batch
above 4, or from 2 with hidden <= 256) it quantizes per chunk of ceil(batch / threads)
rows, which depends on the machine, so the check runs it sequentially (measured against
onnxruntime 1.32, one thread: 4e-7 apart over 60 saturating steps). A float LSTM on the dequantized weights drifts from that (a recurrence with
saturating gates amplifies the rounding: 3.6 apart on a speaker embedder over 80 steps).
So the decomposition is a ``loop`` per direction over the time steps (any sequence
length), with the quantization spelled out:

* outside: ``Xd = dequantized(dynamic_quantize_linear(X))``, ``XW = Xd @ W_d + (Wb + Rb)``
  for all steps at once (W, R dequantized at expansion: they are constants);
* body (carried h, c; scan output h): ``g = XW[t] + dequantized(h) @ R_d``,
  gates i, o, f, c with peepholes as ONNX LSTM; the reverse direction reads XW reversed in
  time and its stacked outputs are reversed back after the loop.

The reference (``reference/contrib.py``) computes the same in NumPy. Not handled (the
node stays refused with the reason): other activations, clip, input_forget, a
``sequence_lens`` input.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Graph, Node, TensorType, Value


def why_not(node: Node) -> str | None:
    a = node.attrs
    if a.get("input_forget") or a.get("clip") is not None or a.get("activations") \
            or a.get("activation_alpha") or a.get("activation_beta"):
        return "only the default activations, no clip and input_forget=0 are decomposed"
    ins = list(node.inputs) + [None] * (12 - len(node.inputs))
    if ins[4] is not None:
        return "a sequence_lens input is not decomposed"
    for i in (1, 2, 3, 7, 8, 9, 10, 11):
        if ins[i] is not None and not ins[i].is_const:
            return "W, R, B, P and the weight scales and zero points must be constants"
    if ins[0] is None or ins[0].type.shape is None or len(ins[0].type.shape) != 3:
        return "X must have rank 3"
    return None


class _G:
    """Adds nodes to ``g`` (before ``at`` in the outer graph), remembering them."""

    def __init__(self, g: Graph, at: Node | None, prefix: str, made: list[Node]) -> None:
        self.g, self.at, self.prefix, self.made = g, at, prefix, made

    def op(self, op: str, *ins: Value | None, n: int = 1, **attrs: Any) -> Any:
        node = self.g.add_node(op, list(ins), attrs, outputs=n, name=f"{self.prefix}/{op}{len(self.made)}",
                               before=self.at)
        node.meta["decomposed_from"] = "dynamic_quantize_lstm"
        self.made.append(node)
        return node.outputs[0] if n == 1 else node.outputs

    def const(self, arr: Any, name: str, dtype: str = "float32") -> Value:
        from ..table.dtypes import numpy_dtype

        data = np.array(arr, dtype=numpy_dtype(dtype))
        return self.g.add_constant(f"{self.prefix}_{name}", data, dtype)

    def dq(self, x: Value) -> Value:
        """(q - zero point) * scale of ``dynamic_quantize_linear(x)``, in float32 (casts, not a
        DequantizeLinear: every target has those at any opset)."""
        q, s, z = self.op("dynamic_quantize_linear", x, n=3)
        return self.op("mul", self.op("sub", self.op("cast", q, to=1), self.op("cast", z, to=1)), s)


def _weights(q: Any, scale: Any, zp: Any) -> np.ndarray:
    shape = (np.asarray(q).shape[0], 1, -1)
    return ((np.asarray(q).astype(np.float32) - np.asarray(zp).astype(np.float32).reshape(shape))
            * np.asarray(scale, np.float32).reshape(shape))  # [D, rows, 4H]


def _reversed(o: _G, v: Value, name: str) -> Value:
    """``v`` reversed along axis 0 (a slice with step -1)."""
    return o.op("slice", v, o.const([-1], f"{name}r0", "int64"), o.const([np.iinfo(np.int64).min], f"{name}r1", "int64"),
                o.const([0], f"{name}r2", "int64"), o.const([-1], f"{name}r3", "int64"))


def expand(graph: Graph, node: Node) -> list[Node]:
    ins = list(node.inputs) + [None] * (12 - len(node.inputs))
    x, h0_all, c0_all = ins[0], ins[5], ins[6]
    W = _weights(ins[1].const, ins[8].const, ins[9].const)
    R = _weights(ins[2].const, ins[10].const, ins[11].const)
    D, H = R.shape[0], R.shape[1]
    B = np.zeros((D, 8 * H), np.float32) if ins[3] is None else np.asarray(ins[3].const, np.float32)
    P = None if ins[7] is None else np.asarray(ins[7].const, np.float32)
    direction = node.attrs.get("direction", "forward")
    made: list[Node] = []
    o = _G(graph, node, node.name, made)
    xd = o.dq(x)
    t_len, batch = x.type.shape[0], x.type.shape[1]
    trips = (o.const(t_len, "steps", "int64") if isinstance(t_len, int)  # a static T: the loop can be unrolled
             else o.op("gather", o.op("shape", x), o.const(0, "t0", "int64"), axis=0))  # T, a scalar
    batch_shape = o.op("slice", o.op("shape", x), o.const([1], "b0", "int64"), o.const([2], "b1", "int64"),
                       o.const([0], "b2", "int64"))
    zeros = o.op("expand", o.const(np.zeros((1, H)), "zero"), o.op("concat", batch_shape, o.const([H], "hd", "int64"),
                                                                      axis=0))
    ys, hs, cs = [], [], []
    for d in range(D):
        xw = o.op("add", o.op("matmul", xd, o.const(W[d], f"W{d}")), o.const(B[d, :4 * H] + B[d, 4 * H:], f"B{d}"))
        backward = direction == "reverse" or (direction == "bidirectional" and d == 1)
        if backward:  # the steps run from the last: the loop reads XW reversed in time
            xw = _reversed(o, xw, f"x{d}")
        h0 = zeros if h0_all is None else o.op("gather", h0_all, o.const(d, f"d{d}", "int64"), axis=0)
        c0 = zeros if c0_all is None else o.op("gather", c0_all, o.const(d, f"dc{d}", "int64"), axis=0)
        body = Graph(f"{node.name}/body{d}")
        body.parent = graph
        it = body.add_input(f"{node.name}/iter{d}", TensorType("int64", ()))
        cond_in = body.add_input(f"{node.name}/cond{d}", TensorType("bool", ()))
        h = body.add_input(f"{node.name}/h{d}", TensorType("float32", (batch if isinstance(batch, int) else None, H)))
        c = body.add_input(f"{node.name}/c{d}", TensorType("float32", (batch if isinstance(batch, int) else None, H)))
        b = _G(body, None, f"{node.name}/step{d}", made)
        g = b.op("add", b.op("gather", xw, it, axis=0), b.op("matmul", b.dq(h), b.const(R[d], f"R{d}")))

        def part(k: int, g: Value = g, b: _G = b) -> Value:
            return b.op("slice", g, b.const([k * H], f"s{k}", "int64"), b.const([(k + 1) * H], f"e{k}", "int64"),
                        b.const([1], f"a{k}", "int64"))

        gi, go, gf, gc = part(0), part(1), part(2), part(3)
        if P is not None:
            gi = b.op("add", gi, b.op("mul", c, b.const(P[d, :H], f"Pi{d}")))
            gf = b.op("add", gf, b.op("mul", c, b.const(P[d, 2 * H:], f"Pf{d}")))
        c_new = b.op("add", b.op("mul", b.op("sigmoid", gf), c), b.op("mul", b.op("sigmoid", gi), b.op("tanh", gc)))
        if P is not None:
            go = b.op("add", go, b.op("mul", c_new, b.const(P[d, H:2 * H], f"Po{d}")))
        gate_o, tc = b.op("sigmoid", go), b.op("tanh", c_new)
        # the carried h and the scan output are two values (no identity: TFLite's while body has none)
        body.outputs = [cond_in, b.op("mul", gate_o, tc), c_new, b.op("mul", tc, gate_o)]
        hf, cf, ystack = o.op("loop", trips, o.const(True, f"go{d}", "bool"), h0, c0, n=3, body=body)
        hf.type = cf.type = TensorType("float32", (batch, H))
        ystack.type = TensorType("float32", (t_len, batch, H))
        if backward:  # the steps ran from the last: put every output back at its own step
            ystack = _reversed(o, ystack, f"y{d}")
        ys.append(o.op("unsqueeze", ystack, o.const([1], f"yax{d}", "int64")))  # [T, 1, B, H]
        hs.append(o.op("unsqueeze", hf, o.const([0], f"hax{d}", "int64")))
        cs.append(o.op("unsqueeze", cf, o.const([0], f"cax{d}", "int64")))
    results = [o.op("concat", *ys, axis=1) if D > 1 else ys[0], o.op("concat", *hs, axis=0) if D > 1 else hs[0],
               o.op("concat", *cs, axis=0) if D > 1 else cs[0]]
    graph.replace_node(node, results[:len(node.outputs)])
    return [n for n in made if n.graph is graph]
