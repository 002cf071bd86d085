"""Control flow: if, loop, scan. Graph attributes arrive as callables body(*inputs) -> [outputs]."""
from __future__ import annotations

import numpy as np

from ..table import budget
from . import reference


@reference("if")
def if_(cond, then_branch, else_branch):
    branch = then_branch if bool(np.asarray(cond).reshape(-1)[0]) else else_branch
    return tuple(branch())


def _stack_scan(elems: list, axis: int = 0, reverse: bool = False):
    """Concatenate per-iteration scan elements along a new axis (prepending when reverse)."""
    if reverse:
        elems = elems[::-1]
    return np.stack([np.asarray(e) for e in elems], axis=axis)


@reference("loop")
def loop(M, cond, *v_initial, body):
    trip = None if M is None else int(np.asarray(M).reshape(-1)[0])
    keep = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
    states = list(v_initial)
    n = len(states)
    scans: list[list] | None = None
    i = 0
    if cond is None and trip is not None:
        budget.loop_trip_count(trip)  # a counted loop: its trip count is known up front
    while (trip is None or i < trip) and keep:
        budget.loop_iteration()
        outs = body(np.array(i, dtype=np.int64), np.array(keep), *states)
        keep = bool(np.asarray(outs[0]).reshape(-1)[0])
        states = list(outs[1:1 + n])
        if scans is None:
            scans = [[] for _ in outs[1 + n:]]
        for acc, e in zip(scans, outs[1 + n:]):
            acc.append(e)
        i += 1
    # with zero iterations the scan outputs' element shape is unknown: empty float tensors
    scan_outs = [_stack_scan(acc) if acc else np.zeros((0,), dtype=np.float32) for acc in (scans or [])]
    return tuple(states) + tuple(scan_outs)


@reference("scan")
def scan(*inputs, body, num_scan_inputs, scan_input_axes=None, scan_input_directions=None,
         scan_output_axes=None, scan_output_directions=None):
    if any(x is None for x in inputs):
        raise ValueError("scan: omitted input; the opset-8 form (leading sequence_lens, batched "
                         "scan inputs) is not the newest ONNX form")
    m = num_scan_inputs
    n = len(inputs) - m
    states, xs = list(inputs[:n]), list(inputs[n:])
    in_axes = [a + x.ndim if a < 0 else a for a, x in zip(scan_input_axes or [0] * m, xs)]
    in_dirs = scan_input_directions or [0] * m
    length = xs[0].shape[in_axes[0]] if m else 0
    outs_acc: list[list] = []
    for t in range(length):
        budget.loop_iteration("scan")
        elems = [np.take(x, length - 1 - t if d else t, axis=a) for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = body(*states, *elems)
        states = list(outs[:n])
        if not outs_acc:
            outs_acc = [[] for _ in outs[n:]]
        for acc, e in zip(outs_acc, outs[n:]):
            acc.append(np.asarray(e))
    k = len(outs_acc)
    out_axes = scan_output_axes or [0] * k
    out_dirs = scan_output_directions or [0] * k
    scan_outs = []
    for acc, a, d in zip(outs_acc, out_axes, out_dirs):
        rank = acc[0].ndim + 1
        scan_outs.append(_stack_scan(acc, a + rank if a < 0 else a, bool(d)))
    return tuple(states) + tuple(scan_outs)
