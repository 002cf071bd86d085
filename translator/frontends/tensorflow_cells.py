"""Keras recurrent cells recognised by structure in a ``While`` loop's body (a FunctionDef).

A body is read as a graph (``Body``: references resolved through ``Identity`` to a loop
argument or a node output) and matched against the cell's equations, not against one list of
op types: TensorFlow writes the same cell differently (a SavedModel with a static batch of 1
has ``BiasAdd(x@W, Squeeze(h@R))`` where a ``.keras`` trace has ``Add``). A sum of terms is
read however it is written (``Add``/``AddV2``/``BiasAdd`` in any order; a ``Squeeze`` only drops
a dimension of 1 the sum broadcasts back). Any node the equations do not account for, except
the loop counters (``arg + const``) and nodes nobody reads, makes the body refused.

``match_lstm`` / ``match_gru`` return the loop-argument positions of the cell's parts (or a
string: why the body is not that cell).
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

PLUMBING = frozenset({"Identity", "NoOp", "Const"})
_SUM = frozenset({"Add", "AddV2", "BiasAdd"})
_LSTM_GATES = ("Sigmoid", "Sigmoid", "Tanh", "Sigmoid")  # Keras' i, f, c, o

Key = tuple[str, int]  # ("arg", position) or (node name, output index)


class Body:
    """A FunctionDef seen as a graph: references resolved to ('arg', i) or (node, output index)."""

    def __init__(self, fdef: Any) -> None:
        self.fdef = fdef
        self.args = {a.name: i for i, a in enumerate(fdef.signature.input_arg)}
        self.nodes = {n.name: n for n in fdef.node_def}
        self.rets = [fdef.ret[a.name] for a in fdef.signature.output_arg]
        self._uses: dict[Key, list[Any]] | None = None

    def src(self, ref: str) -> tuple[Any, int]:
        ref = ref.lstrip("^")
        while True:
            if ref in self.args:
                return "arg", self.args[ref]
            parts = ref.split(":")
            node = self.nodes[parts[0]]
            if node.op == "Identity":
                ref = node.input[0]
                continue
            return node, int(parts[2]) if len(parts) == 3 else 0

    def key(self, ref: str) -> Key:
        node, k = self.src(ref)
        return ("arg", k) if node == "arg" else (node.name, k)

    def arg_of(self, ref: str) -> int | None:
        kind, i = self.src(ref)
        return i if kind == "arg" else None

    def const(self, ref: str) -> np.ndarray | None:
        import tensorflow as tf

        node, _ = self.src(ref)
        if node == "arg" or node.op != "Const":
            return None
        return tf.make_ndarray(node.attr["value"].tensor)

    def ops(self) -> Counter:
        return Counter(n.op for n in self.fdef.node_def if n.op not in PLUMBING)

    def find(self, op: str) -> list[Any]:
        return [n for n in self.fdef.node_def if n.op == op]

    def data_inputs(self, node: Any) -> list[str]:
        return [i for i in node.input if not i.startswith("^")]

    def uses(self, key: Key) -> list[Any]:
        """The nodes reading a value (through Identity), plumbing excluded."""
        if self._uses is None:
            self._uses = {}
            for n in self.fdef.node_def:
                if n.op not in PLUMBING:
                    for i in self.data_inputs(n):
                        self._uses.setdefault(self.key(i), []).append(n)
        return self._uses.get(key, [])

    def only(self, key: Key, *ops: str) -> Any:
        """The one node reading ``key``, if it is one of ``ops``."""
        us = self.uses(key)
        return us[0] if len(us) == 1 and us[0].op in ops else None

    def terms(self, ref: str, used: set[str]) -> list[tuple[Any, int]]:
        """The addends of the sum at ``ref`` (the sum's nodes go into ``used``)."""
        node, k = self.src(ref)
        if node != "arg" and node.op in _SUM:
            used.add(node.name)
            return [t for i in self.data_inputs(node) for t in self.terms(i, used)]
        if node != "arg" and node.op == "Squeeze":
            used.add(node.name)
            return self.terms(self.data_inputs(node)[0], used)
        return [(node, k)]

    def other_input(self, node: Any, known: Key) -> Key | None:
        """The input of binary ``node`` that is not ``known``."""
        ins = [self.key(i) for i in self.data_inputs(node)]
        if len(ins) != 2 or known not in ins:
            return None
        ins.remove(known)
        return ins[0]

    def leftover(self, used: set[str]) -> str | None:
        """Why nodes outside ``used`` matter: None when they are only loop counters or unread."""
        rest = {n.name: n for n in self.fdef.node_def if n.op not in PLUMBING and n.name not in used}
        rets = {self.key(r)[0] for r in self.rets}
        changed = True
        while changed:
            changed = False
            for name, n in list(rest.items()):
                ins = self.data_inputs(n)
                counter = (n.op in ("Add", "AddV2") and len(ins) == 2 and self.arg_of(ins[0]) is not None
                           and self.const(ins[1]) is not None)
                read = name in rets or any(u.name in rest or u.name in used
                                           for k in range(8) for u in self.uses((name, k)))
                if counter or not read:
                    del rest[name]
                    changed = True
        if rest:
            return "an extra " + ", ".join(sorted({n.op for n in rest.values()})) + " in the cell"
        return None

    def step(self) -> tuple[Any, Any] | str:
        gets, sets = self.find("TensorListGetItem"), self.find("TensorListSetItem")
        if len(gets) != 1 or len(sets) != 1:
            return "not one step read and one step write"
        return gets[0], sets[0]

    def matmul(self, node: Any, get: Any) -> tuple[str, int, int | None] | str:
        """A cell matmul: ('x', weight arg, None) for x_t @ W, ('h', weight arg, state arg) for h @ R."""
        if node == "arg" or node.op != "MatMul" or node.attr["transpose_a"].b or node.attr["transpose_b"].b:
            return f"a gate term is {'an input' if node == 'arg' else node.op}, not x@W, h@R or the bias"
        a, w = self.data_inputs(node)
        w_arg = self.arg_of(w)
        if w_arg is None:
            return "a cell weight is not a loop input"
        if self.src(a)[0] is get:
            return "x", w_arg, None
        if self.arg_of(a) is not None:
            return "h", w_arg, self.arg_of(a)
        return "a cell matmul reads neither the step input nor the state"

    def writes(self, setitem: Any, value: Any, state_arg: int) -> str | None:
        key = (value.name, 0)
        if self.uses(key) != [setitem] or self.key(self.data_inputs(setitem)[2]) != key:
            return "the step output is not the new state h"
        if self.key(self.rets[state_arg]) != key:
            return "the new state is not carried to the next step"
        return None


def _split_of(body: Body, n: int) -> Any | str:
    splits = [s for s in body.find("Split") if s.attr["num_split"].i == n
              and body.arg_of(body.data_inputs(s)[1]) is None]
    if len(splits) != 1:
        return f"not one {n}-way split of the gate pre-activations"
    axis = body.const(splits[0].input[0])
    if axis is None or int(axis) not in (1, -1):
        return "the gates are not split along the features"
    return splits[0]


def match_lstm(body: Body) -> dict[str, Any] | str:
    """A Keras LSTM cell (default activations, any bias): its parts' loop-argument positions."""
    got = body.step()
    if isinstance(got, str):
        return got
    get, setitem = got
    split = _split_of(body, 4)
    if isinstance(split, str):
        return split
    used = {get.name, setitem.name, split.name}
    parts: dict[str, Any] = {"b_arg": None}
    for node, k in body.terms(split.input[1], used):
        if node == "arg":
            if parts["b_arg"] is not None:
                return "more than one bias term"
            parts["b_arg"] = k
            continue
        mm = body.matmul(node, get)
        if isinstance(mm, str):
            return mm
        role = "w_arg" if mm[0] == "x" else "r_arg"
        if role in parts:
            return "two matmuls of the same kind"
        parts[role] = mm[1]
        if mm[2] is not None:
            parts["h_arg"] = mm[2]
        used.add(node.name)
    if "w_arg" not in parts or "r_arg" not in parts:
        return "the gates do not sum x@W and h@R"
    gate = [body.only((split.name, k), want) for k, want in enumerate(_LSTM_GATES)]
    if None in gate:
        return "the gate activations are not sigmoid, sigmoid, tanh, sigmoid"
    i, f, g, o = gate
    mul_fc, mul_ig = body.only((f.name, 0), "Mul"), body.only((i.name, 0), "Mul")
    if mul_fc is None or mul_ig is None or body.only((g.name, 0), "Mul") is not mul_ig:
        return "the cell state update is not f*c + i*g"
    c = body.other_input(mul_fc, (f.name, 0))
    if c is None or c[0] != "arg":
        return "the forget gate does not scale the cell state input"
    parts["c_arg"] = c[1]
    c_new = body.only((mul_fc.name, 0), "Add", "AddV2")
    if c_new is None or body.only((mul_ig.name, 0), "Add", "AddV2") is not c_new:
        return "the cell state update is not f*c + i*g"
    tc = body.only((c_new.name, 0), "Tanh")
    h_new = body.only((o.name, 0), "Mul")
    if tc is None or h_new is None or body.only((tc.name, 0), "Mul") is not h_new:
        return "the output is not o*tanh(c)"
    why = body.writes(setitem, h_new, parts["h_arg"])
    if why:
        return why
    if body.key(body.rets[parts["c_arg"]]) != (c_new.name, 0):
        return "the new cell state is not carried to the next step"
    used.update(n.name for n in (i, f, g, o, mul_fc, mul_ig, c_new, tc, h_new))
    return body.leftover(used) or parts


def _columns(body: Body, node: Any) -> tuple[int, int | None] | None:
    """``node`` as ``t[:, a:b]`` of a rank-2 tensor (b None: to the end), else None."""
    if node == "arg" or node.op != "StridedSlice":
        return None
    if any(node.attr[m].i for m in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        return None
    ins = body.data_inputs(node)
    begin, end, strides = (body.const(r) for r in ins[1:4])
    if begin is None or end is None or strides is None or begin.shape != (2,) or list(strides) != [1, 1]:
        return None
    bm, em = node.attr["begin_mask"].i, node.attr["end_mask"].i
    if not (bm & 1 or begin[0] == 0) or not em & 1:
        return None
    a = 0 if bm & 2 else int(begin[1])
    b = None if em & 2 else int(end[1])
    return a, b


def _bias_term(body: Body, node: Any, k: int) -> tuple[int, int | None] | None:
    """A bias addend: (bias arg, None) for the whole bias, (bias arg, row) for row ``row`` of a
    2-row bias split in two (Keras' GRU ``reset_after=True`` input/recurrent biases)."""
    if node == "arg":
        return k, None
    if node.op == "Split" and node.attr["num_split"].i == 2:
        b_arg = body.arg_of(body.data_inputs(node)[1])
        axis = body.const(node.input[0])
        if b_arg is not None and axis is not None and int(axis) == 0:
            return b_arg, k
    return None


def match_gru(body: Body) -> dict[str, Any] | str:
    """A Keras GRU cell (default activations; ``reset_after`` True or False; any bias): its parts.

    z = σ(xz + hz), r = σ(xr + hr); reset_after: hh = tanh(xh + r * (h@R)[:, 2u:]), else
    hh = tanh(xh + (r*h) @ R[:, 2u:]) with hz, hr from h @ R[:, :2u]; h' = z*h + (1-z)*hh."""
    got = body.step()
    if isinstance(got, str):
        return got
    get, setitem = got
    split = _split_of(body, 3)
    if isinstance(split, str):
        return split
    used = {get.name, setitem.name, split.name}
    parts: dict[str, Any] = {"bias": []}
    for node, k in body.terms(split.input[1], used):
        bt = _bias_term(body, node, k)
        if bt is not None:
            parts["bias"].append(("x",) + bt)
            if node != "arg":
                used.add(node.name)
            continue
        mm = body.matmul(node, get)
        if isinstance(mm, str) or mm[0] != "x" or "w_arg" in parts:
            return mm if isinstance(mm, str) else "the input gates are not x@W plus a bias"
        parts["w_arg"] = mm[1]
        used.add(node.name)
    if "w_arg" not in parts:
        return "the input gates are not x@W"
    gates = []
    for k in range(2):  # z, r: σ(x_k + h_k) with h_k = (h@R)[:, k*u:(k+1)*u]
        add = body.only((split.name, k), "Add", "AddV2")
        act = body.only((add.name, 0), "Sigmoid") if add is not None else None
        other = body.other_input(add, (split.name, k)) if add is not None else None
        if act is None or other is None or other[0] == "arg":
            return "the update/reset gates are not sigmoid(x part + h part)"
        gates.append((body.nodes[other[0]], act))
        used.update((add.name, act.name))
    (hz, z), (hr, r) = gates
    cz, cr = _columns(body, hz), _columns(body, hr)
    if cz is None or cr is None or cz[0] != 0 or cr[0] != cz[1] or cr[1] != 2 * cz[1]:
        return "the recurrent gates are not columns [0:u] and [u:2u] of one h@R"
    units = cz[1]
    inner = body.data_inputs(hz)[0]
    if body.key(body.data_inputs(hr)[0]) != body.key(inner):
        return "the recurrent gates are not columns of one h@R"
    used.update((hz.name, hr.name))
    r_arg = None
    for node, k in body.terms(inner, used):
        bt = _bias_term(body, node, k)
        if bt is not None:
            parts["bias"].append(("h",) + bt)
            if node != "arg":
                used.add(node.name)
            continue
        if node == "arg" or node.op != "MatMul" or r_arg is not None:
            return "the recurrent part is not h@R plus a bias"
        a, w = body.data_inputs(node)
        parts["h_arg"] = body.arg_of(a)
        wnode, _ = body.src(w)
        r_arg = body.arg_of(w)
        if r_arg is None and _columns(body, wnode) == (0, 2 * units):  # reset_after=False: R[:, :2u]
            r_arg = body.arg_of(body.data_inputs(wnode)[0])
            used.add(wnode.name)
            parts["reset_after"] = False
        if parts["h_arg"] is None or r_arg is None or node.attr["transpose_a"].b or node.attr["transpose_b"].b:
            return "the recurrent part is not h@R"
        used.add(node.name)
    if r_arg is None:
        return "the recurrent part is not h@R"
    parts["r_arg"], parts["units"] = r_arg, units
    reset_after = parts.setdefault("reset_after", True)
    add_h = body.only((split.name, 2), "Add", "AddV2")
    tanh = body.only((add_h.name, 0), "Tanh") if add_h is not None else None
    hpart = body.other_input(add_h, (split.name, 2)) if add_h is not None else None
    if tanh is None or hpart is None or hpart[0] == "arg":
        return "the candidate is not tanh(x part + h part)"
    hnode = body.nodes[hpart[0]]
    if reset_after:  # r * (h@R)[:, 2u:3u]
        hh = body.nodes.get((body.other_input(hnode, (r.name, 0)) or ("", 0))[0]) if hnode.op == "Mul" else None
        ch = _columns(body, hh) if hh is not None else None
        if ch is None or ch[0] != 2 * units or ch[1] not in (3 * units, None) \
                or body.key(body.data_inputs(hh)[0]) != body.key(inner):
            return "the candidate's h part is not r * (h@R)[:, 2u:]"
        used.update((hnode.name, hh.name))
    else:  # (r*h) @ R[:, 2u:]
        ok = hnode.op == "MatMul" and not hnode.attr["transpose_a"].b and not hnode.attr["transpose_b"].b
        rh, rw = (body.src(i)[0] for i in body.data_inputs(hnode)) if ok else (None, None)
        ok = ok and rh != "arg" and rh.op == "Mul" and body.other_input(rh, (r.name, 0)) == ("arg", parts["h_arg"])
        ok = ok and _columns(body, rw) in ((2 * units, None), (2 * units, 3 * units)) \
            and body.arg_of(body.data_inputs(rw)[0]) == r_arg
        if not ok:
            return "the candidate's h part is not (r*h) @ R[:, 2u:]"
        used.update((hnode.name, rh.name, rw.name))
    used.update((add_h.name, tanh.name))
    # h' = z*h + (1-z)*hh
    z_uses = sorted(body.uses((z.name, 0)), key=lambda n: n.op)
    if [n.op for n in z_uses] != ["Mul", "Sub"]:
        return "the new state is not z*h + (1-z)*hh"
    zh, one_minus = z_uses
    one = body.const(body.data_inputs(one_minus)[0])
    if one is None or one.size != 1 or float(one.reshape(-1)[0]) != 1.0 \
            or body.key(body.data_inputs(one_minus)[1]) != (z.name, 0):
        return "the new state is not z*h + (1-z)*hh"
    if body.other_input(zh, (z.name, 0)) != ("arg", parts["h_arg"]):
        zh = None
    mh = body.only((one_minus.name, 0), "Mul")
    if zh is None or mh is None or body.other_input(mh, (one_minus.name, 0)) != (tanh.name, 0) \
            or body.only((tanh.name, 0), "Mul") is not mh:
        return "the new state is not z*h + (1-z)*hh"
    h_new = body.only((zh.name, 0), "Add", "AddV2")
    if h_new is None or body.only((mh.name, 0), "Add", "AddV2") is not h_new:
        return "the new state is not z*h + (1-z)*hh"
    why = body.writes(setitem, h_new, parts["h_arg"])
    if why:
        return why
    used.update(n.name for n in (z, r, one_minus, zh, mh, h_new))
    return body.leftover(used) or parts
