"""Sparse TFLite weights (``DENSIFY`` over a constant with ``sparsity`` metadata), as the TFLite
converter writes them with ``Optimize.EXPERIMENTAL_SPARSITY`` (MediaPipe's pose detector,
face-detection-lite's sparse model): the frontend expands them at load time.

* ``densify`` against dense arrays encoded here from the format's definition: CSR levels,
  dense levels, a traversal order that is not the identity, and block sparsity (block dims
  walked after the dims they block);
* a model the converter sparsifies converts and checks against LiteRT on three targets;
* metadata that does not describe the buffer is a one-line ``bad_model``.
"""
from __future__ import annotations

import os
from types import SimpleNamespace as NS

import numpy as np
import pytest

from translator.frontends.tflite_sparse import densify

DENSE, CSR = 0, 1


def _dense(n):
    return NS(format=DENSE, denseSize=n, arraySegments=None, arrayIndices=None)


def _csr(seg, ind):
    return NS(format=CSR, denseSize=0, arraySegments=NS(values=list(seg)), arrayIndices=NS(values=list(ind)))


def _encode_2d_csr(a: np.ndarray, order=(0, 1)):
    """(values, sparsity): the outer dim of ``order`` dense, the inner one CSR."""
    t = a if tuple(order) == (0, 1) else a.T
    seg, ind, vals = [0], [], []
    for row in t:
        nz = np.flatnonzero(row)
        ind += nz.tolist()
        vals += row[nz].tolist()
        seg.append(len(ind))
    sp = NS(traversalOrder=list(order), blockMap=None, dimMetadata=[_dense(t.shape[0]), _csr(seg, ind)])
    return np.asarray(vals, a.dtype), sp


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_csr_levels_in_either_traversal_order(order):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    a[rng.random(a.shape) < 0.7] = 0
    vals, sp = _encode_2d_csr(a, order)
    np.testing.assert_array_equal(densify(vals, a.shape, sp), a)


def test_all_dense_levels_are_the_buffer_in_traversal_order():
    a = np.arange(24, dtype=np.float16).reshape(2, 3, 4)
    sp = NS(traversalOrder=[2, 0, 1], blockMap=None, dimMetadata=[_dense(4), _dense(2), _dense(3)])
    np.testing.assert_array_equal(densify(a.transpose(2, 0, 1).reshape(-1), a.shape, sp), a)


def test_block_sparse_blocks_are_placed_inside_the_dim_they_block():
    """[4, 8] in 1x4 blocks: d0 dense, d1 (2 blocks) CSR over nonzero blocks, the block dim dense."""
    rng = np.random.default_rng(2)
    a = rng.integers(-5, 6, (4, 8)).astype(np.int8)
    a[0, 4:] = 0
    a[2, :4] = 0
    a[3, :] = 0
    seg, ind, vals = [0], [], []
    for r in range(4):
        for b in range(2):
            blk = a[r, 4 * b:4 * b + 4]
            if blk.any():
                ind.append(b)
                vals += blk.tolist()
        seg.append(len(ind))
    sp = NS(traversalOrder=[0, 1, 2], blockMap=[1], dimMetadata=[_dense(4), _csr(seg, ind), _dense(4)])
    np.testing.assert_array_equal(densify(np.asarray(vals, np.int8), a.shape, sp), a)


def test_metadata_that_does_not_describe_the_buffer_is_refused():
    a = np.eye(3, dtype=np.float32)
    vals, sp = _encode_2d_csr(a)
    with pytest.raises(ValueError, match="buffer holds 2"):
        densify(vals[:2], a.shape, sp)
    sp.dimMetadata[1].arraySegments.values[-1] = 9
    with pytest.raises(ValueError, match="do not index"):
        densify(vals, a.shape, sp)


# ----------------------------------------------------------------------------- end to end
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _sparse_model(tmp_path, int8: bool):
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3, 4, 16)).astype(np.float32)
    w[rng.random(w.shape) < 0.85] = 0
    d = rng.standard_normal((16, 8)).astype(np.float32)
    d[rng.random(d.shape) < 0.85] = 0
    m = tf.keras.Sequential([tf.keras.Input((10, 10, 4)), tf.keras.layers.Conv2D(16, 3, use_bias=False),
                             tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(8, use_bias=False)])
    m.layers[0].set_weights([w])
    m.layers[2].set_weights([d])
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    if int8:
        conv.optimizations.append(tf.lite.Optimize.DEFAULT)
        conv.representative_dataset = lambda: ([rng.standard_normal((1, 10, 10, 4)).astype(np.float32)]
                                               for _ in range(8))
    path = tmp_path / ("sparse_int8.tflite" if int8 else "sparse.tflite")
    path.write_bytes(conv.convert())
    return path


@pytest.mark.parametrize("int8", [False, True], ids=["float", "int8"])
def test_sparse_weights_convert_and_check_against_litert(tmp_path, int8):
    import opbridge
    from translator.frontends import tflite

    path = _sparse_model(tmp_path, int8)
    _, model, _ = tflite.read_model(path)
    assert any(t.sparsity is not None for t in model.subgraphs[0].tensors), "the converter wrote no sparse tensor"
    rec = opbridge.convert(str(path), to="onnx,tflite,openvino", out=str(tmp_path / "out"))
    for t in rec["targets"]:
        assert t["status"] == "ok", (t["target"], t.get("reason"), t.get("detail"))


def test_corrupt_sparse_metadata_is_a_one_line_bad_model(tmp_path):
    from translator.frontends import tflite
    from translator.table.errors import FrontendError

    path = _sparse_model(tmp_path, False)
    s, model, _ = tflite.read_model(path)
    t = next(t for t in model.subgraphs[0].tensors if t.sparsity is not None)
    seg = t.sparsity.dimMetadata[-1].arraySegments.values
    seg[-1] = seg[-1] + 1  # one more value than the indices hold
    import flatbuffers

    b = flatbuffers.Builder(0)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(bytes(b.Output()))
    with pytest.raises(FrontendError) as e:
        tflite.load(str(bad))
    assert e.value.code == "bad_model" and "sparse tensor" in str(e.value) and "\n" not in str(e.value)
