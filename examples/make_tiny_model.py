"""Build the bundled demo model ``examples/models/tiny_cnn.onnx`` (deterministic weights).

Conv → BatchNormalization → Relu → MaxPool → Conv → HardSwish → GlobalAveragePool →
Flatten → Gemm → Softmax, opset 17, 1x3x16x16 input.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent / "models" / "tiny_cnn.onnx"


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(1234)

    def w(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [w("c1_w", 8, 3, 3, 3), w("c1_b", 8), w("bn_scale", 8), w("bn_bias", 8), w("bn_mean", 8),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn_var"),
             w("c2_w", 16, 8, 3, 3), w("c2_b", 16), w("fc_w", 10, 16), w("fc_b", 10)]
    nodes = [
        helper.make_node("Conv", ["input", "c1_w", "c1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"], name="bn1"),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "c2_w", "c2_b"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("HardSwish", ["c2"], ["hs"], name="hswish"),
        helper.make_node("GlobalAveragePool", ["hs"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "tiny_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="opbridge-examples")
    onnx.checker.check_model(m, full_check=True)
    return m


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(build().SerializeToString(deterministic=True))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
