"""The IR's edit API keeps producer/consumer links exact; iteration is deterministic."""
from __future__ import annotations

import numpy as np
import pytest

from translator.ir import Graph, TensorType


def _chain():
    g = Graph()
    x = g.add_input("x", TensorType("float32", (2,)))
    a = g.add_node("relu", [x], outputs=["a"]).outputs[0]
    b = g.add_node("neg", [a], outputs=["b"]).outputs[0]
    c = g.add_node("add", [a, b], outputs=["c"]).outputs[0]
    g.outputs = [c]
    return g, x, a, b, c


def test_values_know_producer_and_consumers():
    g, x, a, b, c = _chain()
    assert a.producer.op == "relu" and x.producer is None
    assert [n.op for n in a.consumers()] == ["neg", "add"]
    assert a.uses == [(g.nodes[1], 0), (g.nodes[2], 0)]


def test_replace_all_uses_and_remove():
    g, x, a, b, c = _chain()
    g.replace_all_uses_with(a, x)
    assert a.uses == [] and [n.op for n in x.consumers()] == ["relu", "neg", "add"]
    g.remove_node(a.producer)
    assert [n.op for n in g.nodes] == ["neg", "add"]


def test_remove_refuses_a_node_still_in_use():
    g, x, a, b, c = _chain()
    with pytest.raises(ValueError, match="still used"):
        g.remove_node(a.producer)


def test_toposort_orders_producers_first_and_detects_cycles():
    g, x, a, b, c = _chain()
    g.nodes.reverse()
    g.toposort()
    assert [n.op for n in g.nodes] == ["relu", "neg", "add"]
    g.nodes[0].replace_input(0, c)
    with pytest.raises(ValueError, match="cycle"):
        g.toposort()


def test_unique_names_and_constants_are_not_copied():
    g = Graph()
    arr = np.arange(6, dtype=np.float32)
    c = g.add_constant("w", arr, "float32")
    d = g.add_constant("w", arr, "float32")
    assert c.name == "w" and d.name == "w_1"
    assert c.const is arr


def test_insert_before_keeps_order():
    g, x, a, b, c = _chain()
    n = g.add_node("abs", [x], outputs=["z"], before=b.producer)
    assert [m.op for m in g.nodes] == ["relu", "abs", "neg", "add"]
    assert n.graph is g
