"""translator/compile/passes/recognize.py: a hard swish (a GELU, a layer norm) spelled in elementwise pieces is one
``hard_swish`` (``gelu``, ``layer_normalization``) node, in every spelling exporters write, and nothing else is; each target
with the kernel runs it."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from translator.compile.passes import recognize
from translator.frontends.onnx import from_proto


def _model(nodes, extra_out=None):
    consts = [nh.from_array(np.array(v, np.float32), n) for n, v in
              (("three", 3.0), ("zero", 0.0), ("six", 6.0), ("sixth", np.float32(1 / 6)), ("five", 5.0))]
    outs = [h.make_tensor_value_info("y", T.FLOAT, [2, 3])]
    if extra_out:
        outs.append(h.make_tensor_value_info(extra_out, T.FLOAT, [2, 3]))
    g = h.make_graph(nodes, "hs", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], outs, consts)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _gate(top="c"):
    return [h.make_node("Add", ["x", "three"], ["a"]), h.make_node("Clip", ["a", "zero", "six"], [top])]


SPELLINGS = {
    "div_after": _gate() + [h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Div", ["m", "six"], ["y"])],
    "mul_sixth_after": _gate() + [h.make_node("Mul", ["c", "x"], ["m"]), h.make_node("Mul", ["sixth", "m"], ["y"])],
    "div_inside": _gate() + [h.make_node("Div", ["c", "six"], ["d"]), h.make_node("Mul", ["x", "d"], ["y"])],
    "mul_sixth_inside": _gate() + [h.make_node("Mul", ["c", "sixth"], ["d"]), h.make_node("Mul", ["d", "x"], ["y"])],
    "hard_sigmoid": [h.make_node("HardSigmoid", ["x"], ["d"], alpha=1 / 6, beta=0.5), h.make_node("Mul", ["x", "d"], ["y"])],
}


@pytest.mark.parametrize("name", sorted(SPELLINGS))
def test_every_spelling_is_one_hard_swish(name):
    from translator import reference

    m = from_proto(_model(SPELLINGS[name]))
    x = np.linspace(-5, 5, 6, dtype=np.float32).reshape(2, 3)
    want = x * np.clip(x + 3, 0, 6) / 6
    assert recognize.hard_swish(m.graph) == 1
    assert [n.op for n in m.graph.nodes] == ["hard_swish"] and m.graph.outputs[0].name == "y"
    got = reference.get("hard_swish")(x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", ["other_constant", "piece_read_elsewhere", "other_alpha", "other_input"])
def test_look_alikes_are_left_as_they_are(case):
    nodes = {
        "other_constant": _gate() + [h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Div", ["m", "five"], ["y"])],
        "piece_read_elsewhere": _gate() + [h.make_node("Mul", ["x", "c"], ["m"]), h.make_node("Div", ["m", "six"], ["y"]),
                                           h.make_node("Neg", ["c"], ["z"])],
        "other_alpha": [h.make_node("HardSigmoid", ["x"], ["d"], alpha=0.2, beta=0.5), h.make_node("Mul", ["x", "d"], ["y"])],
        "other_input": [h.make_node("Neg", ["x"], ["n"]), h.make_node("Add", ["n", "three"], ["a"]),
                        h.make_node("Clip", ["a", "zero", "six"], ["c"]), h.make_node("Mul", ["x", "c"], ["m"]),
                        h.make_node("Div", ["m", "six"], ["y"])],
    }[case]
    m = from_proto(_model(nodes, extra_out="z" if case == "piece_read_elsewhere" else None))
    before = [n.op for n in m.graph.nodes]
    assert recognize.hard_swish(m.graph) == 0
    assert [n.op for n in m.graph.nodes] == before


def _gelu_model(nodes, extra_out=None):
    consts = [nh.from_array(np.array(v, np.float32), n) for n, v in
              (("sqrt2", np.sqrt(2.0)), ("rsqrt2", 1 / np.sqrt(2.0)), ("one", 1.0), ("half", 0.5), ("two", 2.0),
               ("three", 3.0), ("cubic", 0.044715), ("k", np.sqrt(2 / np.pi)), ("cubic_other", 0.05))]
    outs = [h.make_tensor_value_info("y", T.FLOAT, [2, 5])]
    if extra_out:
        outs.append(h.make_tensor_value_info(extra_out, T.FLOAT, [2, 5]))
    g = h.make_graph(nodes, "gelu", [h.make_tensor_value_info("x", T.FLOAT, [2, 5])], outs, consts)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def _erf_gate(scale="Div", top="g"):
    first = h.make_node("Div", ["x", "sqrt2"], ["s"]) if scale == "Div" else h.make_node("Mul", ["rsqrt2", "x"], ["s"])
    return [first, h.make_node("Erf", ["s"], ["e"]), h.make_node("Add", ["e", "one"], [top])]


GELU_SPELLINGS = {  # PyTorch's export, paddle2onnx and Keras through tf2onnx write these orders
    "half_last": _erf_gate() + [h.make_node("Mul", ["x", "g"], ["m"]), h.make_node("Mul", ["m", "half"], ["y"])],
    "half_first": _erf_gate() + [h.make_node("Mul", ["x", "half"], ["m"]), h.make_node("Mul", ["m", "g"], ["y"])],
    "half_of_gate": _erf_gate() + [h.make_node("Mul", ["g", "half"], ["m"]), h.make_node("Mul", ["x", "m"], ["y"])],
    "times_rsqrt2": _erf_gate("Mul") + [h.make_node("Mul", ["g", "x"], ["m"]), h.make_node("Mul", ["half", "m"], ["y"])],
}


@pytest.mark.parametrize("name", sorted(GELU_SPELLINGS))
def test_every_spelling_is_one_gelu(name):
    from math import erf

    from translator import reference

    m = from_proto(_gelu_model(GELU_SPELLINGS[name]))
    x = np.linspace(-4, 4, 10, dtype=np.float32).reshape(2, 5)
    want = np.array([[v * 0.5 * (1 + erf(v / np.sqrt(2))) for v in row] for row in x.astype(np.float64)])
    assert recognize.gelu(m.graph) == 1
    assert [n.op for n in m.graph.nodes] == ["gelu"] and m.graph.outputs[0].name == "y"
    assert m.graph.nodes[0].attrs == {"approximate": "none"}
    np.testing.assert_allclose(reference.get("gelu")(x), want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("case", ["other_scale", "other_half", "gate_read_elsewhere", "other_input"])
def test_gelu_look_alikes_are_left_as_they_are(case):
    nodes = {
        "other_scale": [h.make_node("Div", ["x", "two"], ["s"]), h.make_node("Erf", ["s"], ["e"]),
                        h.make_node("Add", ["e", "one"], ["g"]), h.make_node("Mul", ["x", "g"], ["m"]),
                        h.make_node("Mul", ["m", "half"], ["y"])],
        "other_half": _erf_gate() + [h.make_node("Mul", ["x", "g"], ["m"]), h.make_node("Mul", ["m", "two"], ["y"])],
        "gate_read_elsewhere": _erf_gate() + [h.make_node("Mul", ["x", "g"], ["m"]), h.make_node("Mul", ["m", "half"], ["y"]),
                                              h.make_node("Neg", ["g"], ["z"])],
        "other_input": [h.make_node("Neg", ["x"], ["n"]), h.make_node("Div", ["n", "sqrt2"], ["s"]),
                        h.make_node("Erf", ["s"], ["e"]), h.make_node("Add", ["e", "one"], ["g"]),
                        h.make_node("Mul", ["x", "g"], ["m"]), h.make_node("Mul", ["m", "half"], ["y"])],
    }[case]
    m = from_proto(_gelu_model(nodes, extra_out="z" if case == "gate_read_elsewhere" else None))
    before = [n.op for n in m.graph.nodes]
    assert recognize.gelu(m.graph) == 0
    assert [n.op for n in m.graph.nodes] == before


@pytest.mark.parametrize("target", ["tflite", "tensorflow", "pytorch"])
def test_a_spelled_out_gelu_is_the_targets_gelu_kernel(target, tmp_path):
    """On each target with a GELU kernel the five pieces are one op: TFLite's GELU (which
    XNNPACK runs, where the pieces' erf was a polynomial with a SIGN the delegate leaves to the
    builtin kernels), tf.nn.gelu, F.gelu; the conversion's check against onnxruntime passes."""
    import opbridge

    src, out = tmp_path / "m.onnx", tmp_path / ("m.tflite" if target == "tflite" else "m_out")
    onnx.save(_gelu_model(GELU_SPELLINGS["half_last"]), str(src))
    rec = opbridge.convert(str(src), to=target, out=str(out), check=True)["targets"][0]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    if target == "tflite":
        from emitters.tflite.runtime import allocated_ops, delegated_share

        share = delegated_share(allocated_ops(out.read_bytes()))
        assert share["nodes"] == share["delegated"] == 1, share
    else:
        text = "\n".join(p.read_text() for p in out.rglob("*.py"))
        assert ("tf.nn.gelu(" if target == "tensorflow" else "F.gelu(") in text
        assert "erf" not in text.replace("F.gelu", "").lower()


def _ln_model(kind="pow", affine=True, axes=(-1,), eps=1e-5, shape=(2, 3, 4), extra_out=None, gamma_shape=None):
    """PyTorch's export of nn.LayerNorm below opset 17 (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
    Div, Mul, Add), with the variations the look-alikes need."""
    rng = np.random.default_rng(0)
    norm = tuple(shape[a] for a in sorted(a % len(shape) for a in axes))
    gshape = gamma_shape or norm
    consts = [nh.from_array(np.array(axes, np.int64), "axes"), nh.from_array(np.array(2.0, np.float32), "two"),
              nh.from_array(np.array(eps, np.float32), "eps"),
              nh.from_array(rng.standard_normal(gshape).astype(np.float32), "gamma"),
              nh.from_array(rng.standard_normal(gshape).astype(np.float32), "beta")]
    nodes = [h.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1), h.make_node("Sub", ["x", "m"], ["d"]),
             h.make_node("Pow", ["d", "two"], ["p"]) if kind == "pow" else h.make_node("Mul", ["d", "d"], ["p"]),
             h.make_node("ReduceMean", ["p", "axes"], ["v"], keepdims=1), h.make_node("Add", ["v", "eps"], ["ve"]),
             h.make_node("Sqrt", ["ve"], ["s"]), h.make_node("Div", ["d", "s"], ["n" if affine else "y"])]
    if affine:
        nodes += [h.make_node("Mul", ["n", "gamma"], ["g"]), h.make_node("Add", ["g", "beta"], ["y"])]
    outs = [h.make_tensor_value_info("y", T.FLOAT, list(shape))]
    if extra_out:
        outs.append(h.make_tensor_value_info(extra_out, T.FLOAT, None))
    g = h.make_graph(nodes, "ln", [h.make_tensor_value_info("x", T.FLOAT, list(shape))], outs, consts)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


def _ln_reference(x, axes, eps, gamma=None, beta=None):
    m = x.mean(axis=axes, keepdims=True)
    y = (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axes, keepdims=True) + eps)
    return y if gamma is None else y * gamma + beta


@pytest.mark.parametrize("kind,affine,axes", [("pow", True, (-1,)), ("square", True, (-1,)), ("pow", False, (-1,)),
                                              ("pow", True, (1, 2))])
def test_every_spelling_is_one_layer_norm(kind, affine, axes):
    from translator import reference

    proto = _ln_model(kind, affine, axes)
    m = from_proto(proto)
    assert recognize.layer_norm(m.graph) == 1
    assert [n.op for n in m.graph.nodes] == ["layer_normalization"]
    ln = m.graph.nodes[0]
    assert ln.attrs["axis"] == 1 if axes == (1, 2) else ln.attrs["axis"] == 2
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    init = {t.name: nh.to_array(t) for t in proto.graph.initializer}
    want = _ln_reference(x, tuple(a % 3 for a in axes), 1e-5, *((init["gamma"], init["beta"]) if affine else ()))
    got = reference.get("layer_normalization")(x, ln.inputs[1].const, ln.inputs[2].const,
                                                axis=ln.attrs["axis"], epsilon=ln.attrs["epsilon"])
    got = got[0] if isinstance(got, tuple) else got
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["leading_axes", "difference_read_elsewhere", "eps_outside_sqrt", "gamma_wider"])
def test_layer_norm_look_alikes_are_left_as_they_are(case):
    if case == "leading_axes":  # a mean over axis 1 of 3: not the trailing axes
        proto = _ln_model(axes=(1,))
    elif case == "difference_read_elsewhere":
        proto = _ln_model(extra_out="d")
    elif case == "gamma_wider":  # a scale along an axis the norm does not cover changes the output's shape rule
        proto = _ln_model(gamma_shape=(3, 4))
    else:  # (x - m) / (sqrt(var) + eps)
        proto = _ln_model()
        nodes = proto.graph.node
        nodes[4].CopyFrom(h.make_node("Sqrt", ["v"], ["ve"]))
        nodes[5].CopyFrom(h.make_node("Add", ["ve", "eps"], ["s"]))
        onnx.checker.check_model(proto)
    m = from_proto(proto)
    before = [n.op for n in m.graph.nodes]
    found = recognize.layer_norm(m.graph)
    if case == "gamma_wider":  # the normalization itself is recognized; the wider affine stays outside
        assert found == 1 and [n.op for n in m.graph.nodes] == ["layer_normalization", "mul", "add"]
        return
    assert found == 0
    assert [n.op for n in m.graph.nodes] == before


@pytest.mark.parametrize("target", ["pytorch", "ncnn"])
def test_a_spelled_out_layer_norm_is_the_targets_layer_norm(target, tmp_path):
    """The nine pieces are one layer norm over the model's own scale and bias: PyTorch's
    F.layer_norm, ncnn's LayerNorm layer; the check against onnxruntime passes."""
    import opbridge

    src, out = tmp_path / "m.onnx", tmp_path / "m_out"
    onnx.save(_ln_model(), str(src))
    rec = opbridge.convert(str(src), to=target, out=str(out), check=True)["targets"][0]
    assert rec["status"] == "ok" and rec["check"]["status"] == "pass", rec
    if target == "pytorch":
        text = (out / "model.py").read_text()
        assert "F.layer_norm(" in text and "torch.sqrt" not in text and "torch.pow" not in text
    else:
        layers = [line.split()[0] for p in out.glob("*.param") for line in p.read_text().splitlines()[2:]]
        assert layers.count("LayerNorm") == 1 and "Reduction" not in layers and "UnaryOp" not in layers, layers


def _tanh_gate(cube="jax", cubic="cubic", top="g"):
    """``1 + tanh(√(2/π) · (x + 0.044715 · x³))``: JAX's (via jax2tf) ``((x · c) · x) · x``, or
    PyTorch's ``approximate='tanh'`` export ``(x ** 3) · c``."""
    if cube == "jax":
        nodes = [h.make_node("Mul", ["x", cubic], ["c1"]), h.make_node("Mul", ["x", "c1"], ["c2"]),
                 h.make_node("Mul", ["x", "c2"], ["c3"])]
    else:
        nodes = [h.make_node("Pow", ["x", "three"], ["p3"]), h.make_node("Mul", ["p3", cubic], ["c3"])]
    return nodes + [h.make_node("Add", ["x", "c3"], ["i"]), h.make_node("Mul", ["i", "k"], ["ik"]),
                    h.make_node("Tanh", ["ik"], ["t"]), h.make_node("Add", ["t", "one"], [top])]


@pytest.mark.parametrize("cube", ["jax", "pow"])
def test_the_tanh_form_is_one_tanh_gelu(cube):
    from translator import reference

    nodes = _tanh_gate(cube) + [h.make_node("Mul", ["g", "half"], ["m"]), h.make_node("Mul", ["x", "m"], ["y"])]
    m = from_proto(_gelu_model(nodes))
    assert recognize.gelu(m.graph) == 1
    assert [n.op for n in m.graph.nodes] == ["gelu"] and m.graph.nodes[0].attrs == {"approximate": "tanh"}
    x = np.linspace(-4, 4, 10, dtype=np.float32).reshape(2, 5).astype(np.float64)
    want = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(reference.get("gelu")(x.astype(np.float32), approximate="tanh"), want,
                               rtol=1e-6, atol=1e-7)


def test_a_tanh_gelu_look_alike_is_left():
    """Another cubic coefficient: not the GELU."""
    nodes = _tanh_gate("jax", "cubic_other") + [h.make_node("Mul", ["g", "half"], ["m"]),
                                               h.make_node("Mul", ["x", "m"], ["y"])]
    m = from_proto(_gelu_model(nodes))
    before = [n.op for n in m.graph.nodes]
    assert recognize.gelu(m.graph) == 0 and [n.op for n in m.graph.nodes] == before


def _keras_ln_model(mean_op="GlobalAveragePool", extra_out=None):
    """Keras' LayerNormalization as tf2onnx writes it: moments (GlobalAveragePool over a rank-3
    tensor's last axis, or ReduceMean), Rsqrt as Sqrt and Reciprocal, the affine folded into a
    scale ``g = gamma / sqrt(var + eps)`` and a shift ``beta - mean · g``."""
    rng = np.random.default_rng(2)
    consts = [nh.from_array(np.array([-1], np.int64), "axes"), nh.from_array(np.array(1e-3, np.float32), "eps"),
              nh.from_array(rng.standard_normal(4).astype(np.float32), "gamma"),
              nh.from_array(rng.standard_normal(4).astype(np.float32), "beta")]

    def mean(src, out):
        if mean_op == "GlobalAveragePool":
            return h.make_node("GlobalAveragePool", [src], [out])
        return h.make_node("ReduceMean", [src, "axes"], [out], keepdims=1)

    nodes = [mean("x", "m"), h.make_node("Sub", ["x", "m"], ["d"]), h.make_node("Mul", ["d", "d"], ["sq"]),
             mean("sq", "v"), h.make_node("Add", ["v", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["s"]),
             h.make_node("Reciprocal", ["s"], ["r"]), h.make_node("Mul", ["r", "gamma"], ["g"]),
             h.make_node("Mul", ["m", "g"], ["mg"]), h.make_node("Sub", ["beta", "mg"], ["shift"]),
             h.make_node("Mul", ["x", "g"], ["xg"]), h.make_node("Add", ["xg", "shift"], ["y"])]
    outs = [h.make_tensor_value_info("y", T.FLOAT, [2, 3, 4])]
    if extra_out:
        outs.append(h.make_tensor_value_info(extra_out, T.FLOAT, None))
    g = h.make_graph(nodes, "kln", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])], outs, consts)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)])


@pytest.mark.parametrize("mean_op", ["GlobalAveragePool", "ReduceMean"])
def test_keras_layer_norm_through_tf2onnx_is_one_layer_norm(mean_op):
    from translator import reference

    proto = _keras_ln_model(mean_op)
    m = from_proto(proto)
    assert recognize.layer_norm(m.graph) == 1
    assert [n.op for n in m.graph.nodes] == ["layer_normalization"]
    ln = m.graph.nodes[0]
    assert ln.attrs["axis"] == 2 and np.float32(ln.attrs["epsilon"]) == np.float32(1e-3)
    init = {t.name: nh.to_array(t) for t in proto.graph.initializer}
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    want = _ln_reference(x, (2,), np.float32(1e-3), init["gamma"], init["beta"])
    got = reference.get("layer_normalization")(x, ln.inputs[1].const, ln.inputs[2].const, axis=2,
                                                epsilon=ln.attrs["epsilon"])
    np.testing.assert_allclose(got[0] if isinstance(got, tuple) else got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("read", ["m", "g"])
def test_a_keras_layer_norm_whose_pieces_are_read_elsewhere_is_left(read):
    m = from_proto(_keras_ln_model(extra_out=read))
    before = [n.op for n in m.graph.nodes]
    assert recognize.layer_norm(m.graph) == 0 and [n.op for n in m.graph.nodes] == before
