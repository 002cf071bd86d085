"""Core ML rules: GRU and LSTM.

One MIL ``gru`` / ``lstm`` per direction, always run forward: the reverse direction reverses
the sequence before and after (``mb.reverse`` on the time axis), so Y keeps ONNX's time order
whatever MIL's convention for ``direction="reverse"`` outputs is. Weights are constants,
re-laid out in Python:

* GRU: ONNX gates z, r, h -> MIL r, o, z; one bias = Wb + Rb. MIL's GRU (without iOS18's
  ``reset_after``) is ONNX ``linear_before_reset=0``: o = act(W_o x + R_o (r * h) + b_o)
  (coremltools' own numpy reference in its MIL tests). ``linear_before_reset=1`` over a
  static length and batch is unrolled by the table's decomposition; over symbolic ones it is a
  MIL ``while_loop`` of the cell (``_gru_reset_after_loop``), so the dims stay flexible.
* LSTM: ONNX gates i, o, f, c -> MIL i, f, o, z; bias = Wb + Rb; peepholes i, o, f -> i, f, o.

Outputs get ONNX's layouts: Y [seq, num_directions, batch, hidden] (layout=1: [batch, seq,
num_directions, hidden]), Y_h / Y_c [num_directions, batch, hidden] (layout=1: [batch,
num_directions, hidden]). MIL has no value inference for gru/lstm: results are structural.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from translator.compile.quantized import weight_only_dequantization, weight_only_parts
from translator.ir.graph import Node, Value

from .mil import const_of, lit, np_dtype, np_lit
from .registry import Refusal, rule

if TYPE_CHECKING:
    from .codegen import Gen


#: ONNX activation -> MIL activation string (only those without alpha/beta)
_ACT = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}
#: per op: ONNX default activations, gate count, MIL gate order as ONNX gate indices
_SPEC = {"gru": (["Sigmoid", "Tanh"], 3, [1, 2, 0]), "lstm": (["Sigmoid", "Tanh", "Tanh"], 4, [0, 2, 1, 3])}


def _int8_weight(v: "Value | None") -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``quantized.weight_only_parts`` with the integers in their quantized dtype (legalized to
    int32 meanwhile: ``quant.note_quant_dtypes`` noted it on the dequantization)."""
    from .quant import quant_dtype

    parts = weight_only_parts(v)
    if parts is None:
        return None
    dt = np.dtype(quant_dtype(weight_only_dequantization(v)))
    return parts[0].astype(dt), parts[1], parts[2].astype(dt)


def _rnn_check(node: Node) -> Refusal | None:
    acts_default = _SPEC[node.op][0]
    ins = list(node.inputs) + [None] * (8 - len(node.inputs))
    x = ins[0].type.shape
    if x is None or len(x) != 3:
        return Refusal("dynamic_shape", f"{node.op} needs a rank-3 X")
    for i in (1, 2, 3, 7):
        if ins[i] is not None and ins[i].is_const is False and (i not in (1, 2) or weight_only_dequantization(ins[i]) is None):
            return Refusal("requires_constant_input", f"input {i} (weights, bias, peepholes) must be a constant for MIL")
    if ins[4] is not None:
        lens = const_of(ins[4])
        seq = x[1] if int(node.attrs.get("layout", 0)) else x[0]
        if lens is None or not isinstance(seq, int) or not np.all(lens == seq):
            return Refusal("unsupported_attribute_value", "sequence_lens: MIL runs every sequence to the full length")
    if any(v.type.rank != 3 for v in ins[5:7] if v is not None):
        return Refusal("dynamic_shape", "initial states need rank 3")
    acts = list(node.attrs.get("activations") or [])
    per_dir = len(acts_default)
    if acts and (len(acts) % per_dir or any(a not in _ACT for a in acts)
                 or (len(acts) == 2 * per_dir and acts[:per_dir] != acts[per_dir:])):
        return Refusal("unsupported_attribute_value",
                f"activations {acts}: MIL takes Sigmoid/Tanh/Relu without alpha/beta, the same for both directions")
    if node.attrs.get("clip") is not None:
        return Refusal("unsupported_attribute_value", "clip: ONNX clips every gate input; MIL gru has no clip and MIL lstm "
                                               "clips the cell gate only")
    why = None
    static = all(isinstance(d, int) for d in x[:2])
    if node.op == "gru" and int(node.attrs.get("linear_before_reset", 0)):
        if not static:  # the steps as a MIL while_loop (``_gru_reset_after_loop``)
            return None
        why = "linear_before_reset=1: MIL gru needs reset_after (iOS18)"
    if node.op == "lstm" and int(node.attrs.get("input_forget", 0)):
        why = "input_forget=1: MIL lstm has no coupled input/forget gate"
    if why is None:
        return None
    # the table's decomposition unrolls the steps, which needs a static length and batch
    return Refusal("unsupported_attribute_value" if static else "dynamic_shape",
                   why if static else f"{why}; unrolled instead over a static sequence length and batch")


def _gru_reset_after_loop(gen: "Gen", node: Node, step, d: int, xd: str, h0: str, w: np.ndarray, r: np.ndarray,
                          b: np.ndarray, acts: list[str], npdt: np.dtype) -> tuple[str, str]:
    """GRU with ``linear_before_reset=1`` over a symbolic time or batch, as a MIL while_loop
    (MIL's gru has no ``reset_after`` before iOS18, and unrolling needs a static length):
    ``x W^T + Wb`` for every step at once, then per step ``t`` (ONNX gates z, r, h):
    ``z = f(xz + h Rz^T + Rbz)``, ``r = f(xr + h Rr^T + Rbr)``, ``h~ = g(xh + r * (h Rh^T + Rbh))``,
    ``h' = h~ + z * (h - h~)``, written at ``t`` of a list whose element shape is symbolic.
    Returns (Y [seq, batch, hidden], Y_h [batch, hidden])."""
    hidden = r.shape[-1]
    dt = {np.dtype(np.float16): "fp16"}.get(np.dtype(npdt), "fp32")
    wt = gen.const(node, f"gru_w{d}", np.ascontiguousarray(w.T).astype(npdt))  # [input, 3 * hidden]
    rt = gen.const(node, f"gru_r{d}", np.ascontiguousarray(r.T).astype(npdt))  # [hidden, 3 * hidden]
    wb = gen.const(node, f"gru_wb{d}", b[:3 * hidden].astype(npdt))
    rb = gen.const(node, f"gru_rb{d}", b[3 * hidden:].astype(npdt))
    xm = step(f"gru_xm{d}", f"mb.matmul(x={xd}, y={wt}")
    xw = step(f"gru_xw{d}", f"mb.add(x={xm}, y={wb}")
    dims = step(f"gru_dims{d}", f"mb.shape(x={xw}")
    first = step(f"gru_len1_{d}", f"mb.slice_by_index(x={dims}, begin=[0], end=[1]")
    length = step(f"gru_len{d}", f"mb.reshape(x={first}, shape=np.zeros((0,), dtype=np.int32)")
    ls = step(f"gru_list{d}", f"mb.make_list(init_length=1, dynamic_length=True, elem_shape=['gru_batch', {hidden}], "
                               f"dtype={lit(dt)}")
    t, h, lv = gen.tmp(node, f"gru_t{d}")[0], gen.tmp(node, f"gru_h{d}")[0], gen.tmp(node, f"gru_ls{d}")[0]
    cond_fn, body_fn = gen.tmp(node, f"gru_cond{d}")[0], gen.tmp(node, f"gru_body{d}")[0]
    with gen.block(f"def {cond_fn}({t}, {h}, {lv}):"):
        go = step(f"gru_go{d}", f"mb.less(x={t}, y={length}")
        gen.emit(f"return {go}")
    with gen.block(f"def {body_fn}({t}, {h}, {lv}):"):
        xt = step(f"gru_xt{d}", f"mb.gather(x={xw}, indices={t}, axis=0")
        hm = step(f"gru_hm{d}", f"mb.matmul(x={h}, y={rt}")
        hr = step(f"gru_hr{d}", f"mb.add(x={hm}, y={rb}")

        def gate(v: str, k: int, tag: str) -> str:
            return step(f"gru_{tag}{d}", f"mb.slice_by_index(x={v}, begin=[0, {k * hidden}], end=[0, {(k + 1) * hidden}], "
                                         f"begin_mask=[True, False], end_mask=[True, False]")

        def act(fn: str, tag: str, a: str, b_: str) -> str:
            summed = step(f"gru_{tag}s{d}", f"mb.add(x={a}, y={b_}")
            return step(f"gru_{tag}{d}", f"mb.{fn}(x={summed}")

        z = act(acts[0], "z", gate(xt, 0, "xz"), gate(hr, 0, "hz"))
        rg = act(acts[0], "rg", gate(xt, 1, "xr"), gate(hr, 1, "hrr"))
        scaled = step(f"gru_rh{d}", f"mb.mul(x={rg}, y={gate(hr, 2, 'hh')}")
        cand = act(acts[1], "c", gate(xt, 2, "xh"), scaled)
        diff = step(f"gru_d{d}", f"mb.sub(x={h}, y={cand}")
        zd = step(f"gru_zd{d}", f"mb.mul(x={z}, y={diff}")
        hn = step(f"gru_hn{d}", f"mb.add(x={cand}, y={zd}")
        wrote = step(f"gru_write{d}", f"mb.list_write(ls={lv}, index={t}, value={hn}")
        nxt = step(f"gru_next{d}", f"mb.add(x={t}, y=np.int32(1)")
        gen.emit(f"return ({nxt}, {hn}, {wrote})")
    t_end, h_end, ls_end = (gen.tmp(node, f"gru_{k}{d}")[0] for k in ("steps", "h_end", "filled"))
    _, loop_name = gen.tmp(node, f"gru_while{d}")
    gen.emit(f"{t_end}, {h_end}, {ls_end} = mb.while_loop(_cond={cond_fn}, _body={body_fn}, "
             f"loop_vars=(np.int32(0), {h0}, {ls}), name={loop_name})")
    idx = step(f"gru_index{d}", f"mb.range_1d(start=np.int32(0), end={t_end}, step=np.int32(1)")
    return step(f"gru_y{d}", f"mb.list_gather(ls={ls_end}, indices={idx}"), h_end


def _reorder(w: np.ndarray, order: list[int]) -> np.ndarray:
    """Gate blocks along axis 0 (each ``len(w) // len(order)`` rows) in MIL's order."""
    blocks = np.split(w, len(order), axis=0)
    return np.concatenate([blocks[k] for k in order], axis=0)


def _weight(gen: "Gen", node: Node, key: str, w: "np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]",
            order: list[int], npdt: np.dtype) -> str:
    """One direction's ``[gates * H, rows]`` weight in MIL's gate order: a constant, or for
    8-bit integers (with their scale and zero point per row or for the whole weight)
    ``constexpr_affine_dequantize`` (iOS16+), stored as 8 bits and dequantized at load."""
    if not isinstance(w, tuple):
        return gen.const(node, key, _reorder(w, order).astype(npdt))
    q, scale, zp = (_reorder(a, order) for a in w)
    scale, zp = scale[:, 0].astype(npdt), zp[:, 0].astype(q.dtype)  # (one per row: a scale never varies along the rows' input)
    if np.all(scale == scale[0]) and np.all(zp == zp[0]):
        scale, zp = scale[:1].reshape(()), zp[:1].reshape(())
    t, tn = gen.tmp(node, key)
    gen.emit(f"{t} = mb.constexpr_affine_dequantize(quantized_data={gen.const(node, key + '_q', np.ascontiguousarray(q))}, "
             f"zero_point={gen.const(node, key + '_zp', zp)}, scale={gen.const(node, key + '_scale', scale)}, "
             f"axis=0, name={tn})")
    return t


@rule("gru", "lstm", check=_rnn_check)
def _rnn(gen: Gen, node: Node) -> None:
    acts_default, gates, order = _SPEC[node.op]
    ins = list(node.inputs) + [None] * (8 - len(node.inputs))
    X, W, R, B = ins[:4]
    npdt = np.dtype(np_dtype(X.type.dtype))
    layout = int(gen.attr(node, "layout") or 0)
    direction = str(gen.attr(node, "direction") or "forward")
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    qw, qr = _int8_weight(W), _int8_weight(R)
    w = np.asarray(const_of(W)) if qw is None else qw[0]
    r = np.asarray(const_of(R)) if qr is None else qr[0]
    hidden = r.shape[-1]
    b = np.asarray(const_of(B)) if B is not None else np.zeros((len(dirs), 2 * gates * hidden), npdt)
    p = np.asarray(const_of(ins[7])) if node.op == "lstm" and ins[7] is not None else None
    acts = [_ACT[a] for a in (list(gen.attr(node, "activations") or []) or acts_default)[:len(acts_default)]]
    outs = node.outputs
    used = [i < len(outs) and outs[i] is not None for i in range(3)]

    def step(key: str, call: str) -> str:
        t, tn = gen.tmp(node, key)
        gen.emit(f"{t} = {call}, name={tn})")
        return t

    x = gen.var(X)
    if layout:
        x = step("x_seq_first", f"mb.transpose(x={x}, perm=[1, 0, 2]")
    batch = X.type.shape[0 if layout else 1]
    zeros: list[str] = []

    def state(v: object, d: int, key: str) -> str:
        if v is None:
            if isinstance(batch, int):
                return gen.const(node, f"{key}0_{d}", np.zeros((batch, hidden), npdt))
            if not zeros:  # a symbolic batch: (batch, hidden) zeros from x's run-time shape
                dims = step("x_shape", f"mb.shape(x={x}")
                rows = step("batch", f"mb.slice_by_index(x={dims}, begin=[1], end=[2]")
                size = step("state_shape", f"mb.concat(values=[{rows}, {gen.const(node, 'hidden', np.array([hidden], np.int32))}], axis=0")
                zeros.append(step("zero_state", f"mb.fill(shape={size}, value={np_lit(0.0, X.type.dtype)}"))
            return zeros[0]
        s = gen.var(v)
        # the direction's [batch, hidden] (end masks: the batch may be symbolic)
        if layout:  # [batch, num_directions, hidden]
            return step(f"{key}0_{d}", f"mb.squeeze(x=mb.slice_by_index(x={s}, begin={lit([0, d, 0])}, "
                                       f"end={lit([0, d + 1, 0])}, end_mask=[True, False, True]), axes=[1]")
        return step(f"{key}0_{d}", f"mb.squeeze(x=mb.slice_by_index(x={s}, begin={lit([d, 0, 0])}, "
                                   f"end={lit([d + 1, 0, 0])}, end_mask=[False, True, True]), axes=[0]")

    ys, hs, cs = [], [], []
    for d, name in enumerate(dirs):
        xd = x if name == "forward" else step(f"x_rev{d}", f"mb.reverse(x={x}, axes=[0]")
        wi = _weight(gen, node, f"w_ih{d}", w[d] if qw is None else (qw[0][d], qw[1][d], qw[2][d]), order, npdt)
        wh = _weight(gen, node, f"w_hh{d}", r[d] if qr is None else (qr[0][d], qr[1][d], qr[2][d]), order, npdt)
        bias = gen.const(node, f"bias{d}", _reorder(b[d][:gates * hidden] + b[d][gates * hidden:], order).astype(npdt))
        h0 = state(ins[5], d, "h")
        if node.op == "gru" and int(gen.attr(node, "linear_before_reset") or 0):
            ys_d, hn_d = _gru_reset_after_loop(gen, node, step, d, xd, h0, w[d], r[d], b[d], acts, npdt)
            seq, hn, cn = (ys_d, None), (hn_d, None), None
        elif node.op == "gru":
            args = (f"x={xd}, initial_h={h0}, weight_ih={wi}, weight_hh={wh}, bias={bias}, direction='forward', "
                    f"output_sequence=True, recurrent_activation={lit(acts[0])}, activation={lit(acts[1])}")
            seq, hn = gen.tmp(node, f"y{d}"), gen.tmp(node, f"yh{d}")
            gen.emit(f"{seq[0]}, {hn[0]} = mb.gru({args}, name={seq[1]})")
            cn = None
        else:
            c0 = state(ins[6], d, "c")
            peep = ""
            if p is not None:
                peep = f", peephole={gen.const(node, f'peephole{d}', _reorder(p[d], [0, 2, 1]).astype(npdt))}"
            args = (f"x={xd}, initial_h={h0}, initial_c={c0}, weight_ih={wi}, weight_hh={wh}, bias={bias}{peep}, "
                    f"direction='forward', output_sequence=True, recurrent_activation={lit(acts[0])}, "
                    f"cell_activation={lit(acts[1])}, activation={lit(acts[2])}")
            seq, hn, cn = gen.tmp(node, f"y{d}"), gen.tmp(node, f"yh{d}"), gen.tmp(node, f"yc{d}")
            gen.emit(f"{seq[0]}, {hn[0]}, {cn[0]} = mb.lstm({args}, name={seq[1]})")
        yd = seq[0] if name == "forward" else step(f"y_rev{d}", f"mb.reverse(x={seq[0]}, axes=[0]")
        ys.append(step(f"y_dir{d}", f"mb.expand_dims(x={yd}, axes=[1]"))  # [seq, 1, batch, hidden]
        hs.append(step(f"yh_dir{d}", f"mb.expand_dims(x={hn[0]}, axes=[0]"))  # [1, batch, hidden]
        if cn is not None:
            cs.append(step(f"yc_dir{d}", f"mb.expand_dims(x={cn[0]}, axes=[0]"))

    def finish(i: int, parts: list[str], axis: int, perm: list[int]) -> None:
        if not used[i] or not parts:
            return
        joined = parts[0] if len(parts) == 1 else step(f"cat{i}", f"mb.concat(values=[{', '.join(parts)}], axis={axis}")
        if layout:
            gen.emit(f"{gen.out(node, i)} = mb.transpose(x={joined}, perm={lit(perm)}, name={gen.name(node, i)})")
        else:
            gen.emit(f"{gen.out(node, i)} = mb.identity(x={joined}, name={gen.name(node, i)})")

    finish(0, ys, 1, [2, 0, 1, 3])
    finish(1, hs, 0, [1, 0, 2])
    finish(2, cs, 0, [1, 0, 2])


__all__: list[str] = []
