"""The DFT as a product with a constant matrix (``translator/compile/spectral.py``), the form
every target without an FFT of its own runs: against the NumPy reference of ONNX ``DFT`` for
real and complex signals, one-sided or full, forward or inverse, the signal on a middle axis,
cut or zero-padded to ``dft_length``."""
from __future__ import annotations

import numpy as np
import pytest


def _model(shape, axis, length, inverse, onesided):
    from translator.ir.graph import Graph, Model, TensorType

    g = Graph("g")
    x = g.add_input("x", TensorType("float32", tuple(shape)))
    ins = [x, g.add_constant("n", np.asarray(length, np.int64), "int64") if length else None,
           g.add_constant("axis", np.asarray(axis, np.int64), "int64")]
    n = g.add_node("dft", ins, {"inverse": inverse, "onesided": onesided})
    g.outputs = [n.outputs[0]]
    return Model(g, "", "onnx", 20, {}, ())


@pytest.mark.parametrize("shape,axis,length,inverse,onesided", [
    ((2, 16, 1), 1, None, 0, 1),   # rfft of a real signal
    ((2, 16, 1), 1, None, 0, 0),   # full DFT of a real signal
    ((2, 12, 2), 1, None, 0, 0),   # complex, forward
    ((2, 12, 2), 1, None, 1, 0),   # complex, inverse
    ((3, 10, 4, 2), 1, 16, 0, 0),  # a middle axis, zero-padded to 16
    ((3, 10, 4, 1), 1, 6, 0, 1),   # a middle axis, cut to 6, one-sided
])
def test_the_matrix_form_is_the_dft(shape, axis, length, inverse, onesided):
    from translator.compile import interpreter, spectral
    from translator.ir.infer import infer

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    want = interpreter.run(_model(shape, axis, length, inverse, onesided), {"x": x})[0]
    m = _model(shape, axis, length, inverse, onesided)
    infer(m.graph)
    (node,) = m.graph.nodes
    assert spectral.why_not(node) is None
    spectral.expand(m.graph, node)
    infer(m.graph)
    assert "dft" not in {n.op for n in m.graph.nodes}
    got = interpreter.run(m, {"x": x})[0]
    assert got.shape == want.shape and m.graph.outputs[0].type.shape == want.shape
    np.testing.assert_allclose(got, want, atol=2e-5 * max(1.0, float(np.abs(want).max())))


def test_a_run_time_length_or_the_inverse_rfft_is_left_with_its_reason():
    from translator.compile import spectral
    from translator.ir.infer import infer

    m = _model(("N", "T", 1), 1, None, 0, 1)
    infer(m.graph)
    assert "static" in spectral.why_not(m.graph.nodes[0])
    m = _model((2, 9, 2), 1, None, 1, 1)
    infer(m.graph)
    assert "inverse one-sided" in spectral.why_not(m.graph.nodes[0])
