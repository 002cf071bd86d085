"""Infinite float constants through TensorFlow's TFLite converter.

The converter writes every float32 constant it exports (the model's own, and those its
constant folding produces) with ±inf saturated to ±FLT_MAX (``3.4028235e+38``). A causal
mask built as ``where(mask, 0, -inf)`` then adds ``-FLT_MAX`` instead of ``-inf``: a
fully masked attention row (a padding query, e.g. ``attention_mask[b, 0] == 0``) turns into
a uniform softmax instead of the NaN the exporter's ``IsNaN -> Where`` zeroes, and the
logits differ. (NaN constants pass unchanged.)

``restore(flatbuffer, artifact)`` puts the infinities back: after conversion, every
float32 constant buffer's ±FLT_MAX becomes ±inf, for a sign whose infinity the artifact
holds (a weight, or a ``float('-inf')`` literal of its source) and whose finite extreme it
does not (a weight equal to ±FLT_MAX, or that number written in the source: then a buffer's
value cannot be told apart and is left as the converter wrote it, with a warning). The
buffers are patched in place, so the rest of the flatbuffer keeps the converter's bytes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

FLT_MAX = float(np.finfo(np.float32).max)


def _signs(artifact: Any) -> tuple[set[int], set[int]]:
    """(signs of the infinities the artifact holds, signs of the ±FLT_MAX it holds)."""
    infs: set[int] = set()
    extremes: set[int] = set()
    for w in (artifact.weights or {}).values():
        a = np.asarray(w)
        if a.dtype.kind != "f" or not a.size:
            continue
        a32 = a.astype(np.float32, copy=False)
        for s in (1, -1):
            if s not in infs and np.any(a32 == s * np.inf):
                infs.add(s)
            if s not in extremes and np.any(a32 == np.float32(s * FLT_MAX)):
                extremes.add(s)
    src = artifact.source or ""
    if "float('inf')" in src:
        infs.add(1)
    if "float('-inf')" in src:
        infs.add(-1)
    for text in (repr(FLT_MAX), repr(float(np.float32(FLT_MAX))), "3.4028235e+38", "float32.max", "float32.min", "finfo"):
        if text in src:
            extremes.update((1, -1))
    return infs, extremes


def restore(flatbuffer: bytes, artifact: Any) -> bytes:
    """``flatbuffer`` with the converter's saturated infinities restored (see the module)."""
    infs, extremes = _signs(artifact)
    ambiguous = infs & extremes
    if ambiguous:
        which = " and ".join("+inf" if s > 0 else "-inf" for s in sorted(ambiguous, reverse=True))
        artifact.warnings.append(f"tflite: the converter writes {which} constants as ±FLT_MAX, and the model "
                                 "also has that finite value: left saturated")
    signs = infs - extremes
    if not signs:
        return flatbuffer
    targets = [np.float32(s * FLT_MAX) for s in sorted(signs)]
    if not any(t.tobytes() in flatbuffer for t in targets):
        return flatbuffer
    from tensorflow.lite.python import schema_py_generated as fb

    data = bytearray(flatbuffer)
    model = fb.Model.GetRootAs(data, 0)
    buffers: set[int] = set()
    for i in range(model.SubgraphsLength()):
        g = model.Subgraphs(i)
        for j in range(g.TensorsLength()):
            t = g.Tensors(j)
            if t.Type() == fb.TensorType.FLOAT32 and t.Buffer() > 0:
                buffers.add(t.Buffer())
    for b in sorted(buffers):
        raw = model.Buffers(b).DataAsNumpy()
        if isinstance(raw, int) or raw.size < 4 or raw.size % 4:
            continue  # no data in the flatbuffer (empty, or stored outside it)
        vals = raw.view("<f4")  # a view into ``data``: written in place
        for s, t in zip(sorted(signs), targets):
            vals[vals == t] = np.float32(s * np.inf)
    return bytes(data)


__all__ = ["restore", "FLT_MAX"]
