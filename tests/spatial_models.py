"""ONNX models with symbolic height and width (and a recognizer with a symbolic width that
becomes an LSTM's sequence), in the shapes real exporters write them: paddle2onnx OCR
detectors and recognizers, torch.onnx CNNs and FPN heads. Shared by the dynamic-spatial
tests; each builder writes ``path`` and returns it. Weights are seeded, small, trained-like
in scale; nothing here is a file from the wild (tests/ never ships one)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

#: check sizes (H, W) every builder's model runs at: multiples of 8 over the strides used
CHECK_DIMS = {"H": (32, 48), "W": (32, 64)}


def _w(name: str, shape: tuple, seed: int, scale: float = 0.3) -> object:
    from onnx import numpy_helper as nh

    return nh.from_array((np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32), name)


def _i64(name: str, values: list) -> object:
    from onnx import numpy_helper as nh

    return nh.from_array(np.array(values, np.int64), name)


def _f32(name: str, values: list) -> object:
    from onnx import numpy_helper as nh

    return nh.from_array(np.array(values, np.float32), name)


def _save(path: Path, nodes: list, inits: list, x_shape: list, y_shape: list, opset: int = 17) -> Path:
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, y_shape)], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), str(path))
    return path


def cnn_pools(path: Path, x_shape: tuple = ("N", 3, "H", "W")) -> Path:
    """conv → batch norm → relu → 2×2 max pool → conv 3×3 (no pad) → 3×3 average pool (pad 1,
    pads excluded from the mean) → global average pool → softmax. ``x_shape``'s None dims are
    unnamed (Paddle's exporter writes -1 and "?")."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c1", "s", "bi", "mu", "va"], ["bn"]),
             h.make_node("Relu", ["bn"], ["r"]),
             h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p", "w2"], ["c2"], kernel_shape=[3, 3]),
             h.make_node("AveragePool", ["c2"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("GlobalAveragePool", ["a"], ["g"]), h.make_node("Flatten", ["g"], ["f"]),
             h.make_node("Softmax", ["f"], ["y"])]
    inits = [_w("w1", (8, 3, 3, 3), 1), _w("b1", (8,), 2), _f32("s", [1.0] * 8), _w("bi", (8,), 3),
             _w("mu", (8,), 4), _f32("va", [0.5] * 8), _w("w2", (6, 8, 3, 3), 5)]
    return _save(path, nodes, inits, list(x_shape), [x_shape[0], 6])


def same_and_ceil(path: Path) -> Path:
    """SAME_UPPER strided conv and pool, a ceil-mode 3×3/2 max pool (ResNet/Paddle stems), then a
    conv (its input channels must stay known through the run-time padding: TFLite's conv needs them)."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
             h.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
             h.make_node("MaxPool", ["p1"], ["p2"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             h.make_node("Conv", ["p2", "w2"], ["y"], kernel_shape=[1, 1])]
    return _save(path, nodes, [_w("w1", (4, 3, 3, 3), 6), _w("w2", (5, 4, 1, 1), 23)], ["N", 3, "H", "W"],
                 ["N", 5, "h", "w"])


def db_head(path: Path, full_mode: str = "linear") -> Path:
    """A DB text detector's neck and head (paddle2onnx): two stride-2 convs, a ×2 nearest
    resize by scales, an add, a Resize (``full_mode``) to the input's own spatial size taken
    from ``Shape``, a stride-2 ConvTranspose back up, sigmoid."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("Resize", ["c2", "", "sc"], ["u2"], mode="nearest"),
             h.make_node("Add", ["u2", "r1"], ["s1"]),
             h.make_node("Shape", ["x"], ["xs"]),
             h.make_node("Slice", ["xs", "st", "en"], ["hw"]),
             h.make_node("Shape", ["s1"], ["ss"]),
             h.make_node("Slice", ["ss", "z", "st"], ["nc"]),
             h.make_node("Concat", ["nc", "hw"], ["size"], axis=0),
             h.make_node("Resize", ["s1", "", "", "size"], ["full"], mode=full_mode),
             h.make_node("ConvTranspose", ["full", "wt", "bt"], ["ct"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Sigmoid", ["ct"], ["y"])]
    inits = [_w("w1", (4, 3, 3, 3), 7), _w("w2", (4, 4, 3, 3), 8), _f32("sc", [1, 1, 2, 2]),
             _i64("st", [2]), _i64("en", [4]), _i64("z", [0]), _w("wt", (4, 1, 2, 2), 9), _w("bt", (1,), 10)]
    return _save(path, nodes, inits, ["N", 3, "H", "W"], ["N", 1, "h2", "w2"])


def reflect_pad(path: Path) -> Path:
    """Reflect padding by constant pads, then a conv (style transfer, super resolution)."""
    from onnx import helper as h

    nodes = [h.make_node("Pad", ["x", "pads"], ["xp"], mode="reflect"),
             h.make_node("Conv", ["xp", "w1"], ["c1"], kernel_shape=[3, 3]),
             h.make_node("Pad", ["c1", "pads2", "zero"], ["c1p"], mode="constant"),
             h.make_node("Relu", ["c1p"], ["y"])]
    inits = [_i64("pads", [0, 0, 1, 1, 0, 0, 1, 1]), _w("w1", (4, 3, 3, 3), 11),
             _i64("pads2", [0, 0, 2, 0, 0, 0, 1, 3]), _f32("zero", [0.5])]
    return _save(path, nodes, inits, ["N", 3, "H", "W"], ["N", 4, "h", "w"], opset=13)


def crnn(path: Path) -> Path:
    """A CRNN text recognizer (PP-OCR style, fixed height 32, symbolic width): convs and
    pools down to height 1, ``Squeeze`` of the height, transpose to (W', N, C), an LSTM over
    the symbolic width, a MatMul to classes, softmax."""
    from onnx import helper as h

    hid = 6
    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c1"], ["r1"]),
             h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Conv", ["p1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             h.make_node("MaxPool", ["c2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("AveragePool", ["p2"], ["p3"], kernel_shape=[8, 1], strides=[8, 1]),
             h.make_node("Squeeze", ["p3", "ax2"], ["sq"]),
             h.make_node("Transpose", ["sq"], ["seq"], perm=[2, 0, 1]),
             h.make_node("LSTM", ["seq", "W", "R", "B"], ["yall", "yh", "yc"], hidden_size=hid,
                         direction="bidirectional"),
             h.make_node("Transpose", ["yall"], ["yt"], perm=[0, 2, 1, 3]),
             h.make_node("Reshape", ["yt", "shp"], ["flat"]),
             h.make_node("MatMul", ["flat", "wc"], ["logits"]),
             h.make_node("Softmax", ["logits"], ["y"], axis=-1)]
    inits = [_w("w1", (4, 3, 3, 3), 12), _w("w2", (8, 4, 3, 3), 13), _i64("ax2", [2]),
             _w("W", (2, 4 * hid, 8), 14), _w("R", (2, 4 * hid, hid), 15), _w("B", (2, 8 * hid), 16),
             _i64("shp", [0, 0, -1]), _w("wc", (2 * hid, 11), 17)]
    return _save(path, nodes, inits, ["N", 3, 32, "W"], ["s", "N", 11])


def crop_slice(path: Path) -> Path:
    """Spatial crops by constant starts/ends (one negative end), a strided slice, a concat."""
    from onnx import helper as h

    nodes = [h.make_node("Slice", ["x", "s1", "e1", "a1"], ["c"]),
             h.make_node("Slice", ["x", "s2", "e2", "a1", "st2"], ["d"]),
             h.make_node("MaxPool", ["c"], ["cp"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Concat", ["cp", "d"], ["y"], axis=1)]
    inits = [_i64("s1", [0, 0]), _i64("e1", [-2, -2]), _i64("a1", [2, 3]), _i64("s2", [2, 2]),
             _i64("e2", [2 ** 62, 2 ** 62]), _i64("st2", [2, 2])]
    return _save(path, nodes, inits, ["N", 3, "H", "W"], ["N", 6, "h", "w"])


def fpn_concat(path: Path) -> Path:
    """A DB detector's FPN (paddle2onnx PP-OCRv3): feature maps upsampled by constant scales
    (1, 1, 2, 2) and (1, 1, 4, 4), concatenated on channels, then a conv that needs the
    concatenated channel count known."""
    from onnx import helper as h

    nodes = [h.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["c1", "w2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("Conv", ["c2", "w3"], ["c3"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             h.make_node("Resize", ["c2", "", "s2"], ["u2"], mode="nearest", coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor"),
             h.make_node("Resize", ["c3", "", "s4"], ["u3"], mode="nearest", coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor"),
             h.make_node("Concat", ["c1", "u2", "u3"], ["cat"], axis=1),
             h.make_node("Conv", ["cat", "w4"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    inits = [_w("w1", (4, 3, 3, 3), 31), _w("w2", (4, 4, 3, 3), 32), _w("w3", (4, 4, 3, 3), 33),
             _f32("s2", [1, 1, 2, 2]), _f32("s4", [1, 1, 4, 4]), _w("w4", (2, 12, 3, 3), 34)]
    return _save(path, nodes, inits, ["N", 3, "H", "W"], ["N", 2, "h", "w"])


MODELS: dict[str, Callable[[Path], Path]] = {
    "cnn_pools": cnn_pools, "same_and_ceil": same_and_ceil, "db_head": db_head, "reflect_pad": reflect_pad,
    "crnn": crnn, "crop_slice": crop_slice, "fpn_concat": fpn_concat,
}
