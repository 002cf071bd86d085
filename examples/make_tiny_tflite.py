"""Build the bundled TFLite demo model ``examples/models/tiny_cnn.tflite`` with TensorFlow's own converter.

A small Keras CNN (Conv2D+ReLU → DepthwiseConv2D+ReLU6 → MaxPool → Conv2D (stride 2) →
BatchNormalization → ReLU → GlobalAveragePooling → Dense → Softmax, 1x16x16x3 NHWC input)
with fixed seeds, converted by ``tf.lite.TFLiteConverter.from_keras_model`` (float32). The
same TensorFlow version writes the same bytes; the file is the input of the demo's
"TFLite in, every target out" step.

    python examples/make_tiny_tflite.py [--out PATH]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "models" / "tiny_cnn.tflite"


def build_keras() -> object:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf

    tf.keras.utils.set_random_seed(1234)
    L = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((16, 16, 3), batch_size=1, name="image"),
        L.Conv2D(8, 3, padding="same", activation="relu", name="conv1"),
        L.DepthwiseConv2D(3, padding="same", activation="relu6", name="dwconv"),
        L.MaxPool2D(name="pool"),
        L.Conv2D(16, 3, strides=2, padding="valid", name="conv2"),
        L.BatchNormalization(name="bn"),
        L.ReLU(name="relu"),
        L.GlobalAveragePooling2D(name="gap"),
        L.Dense(10, name="fc"),
        L.Softmax(name="probs"),
    ])
    bn = model.get_layer("bn")  # non-trivial statistics (a fresh layer is the identity)
    rng = np.random.default_rng(1234)
    bn.set_weights([rng.uniform(0.5, 1.5, 16).astype("float32"), rng.normal(0, 0.1, 16).astype("float32"),
                    rng.normal(0, 0.1, 16).astype("float32"), rng.uniform(0.5, 1.5, 16).astype("float32")])
    return model


def convert(model: object) -> bytes:
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    return conv.convert()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    data = convert(build_keras())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
