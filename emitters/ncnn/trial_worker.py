"""The trial's ncnn, in a process of its own: a layer that ncnn crashes on (a segmentation
fault, a double free) ends this process, not the conversion, and the node is refused with
that reason (``codegen.trial``).

Protocol over stdin/stdout, each message a 4-byte little-endian length then that many
bytes: the request is a JSON header (``param``, ``bin`` size, ``feeds`` as [blob, shape]
pairs, ``outs``) followed by the ``.bin`` bytes and each feed's float32 bytes; the answer
is a JSON header (``error``, or ``outs`` as shapes) followed by each output's float32 bytes.
No pickling: only JSON and raw float32.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO


def read_message(stream: BinaryIO) -> bytes | None:
    head = stream.read(4)
    if len(head) < 4:
        return None
    (n,) = struct.unpack("<I", head)
    data = stream.read(n)
    if len(data) < n:
        return None
    return data


def write_message(stream: BinaryIO, data: bytes) -> None:
    stream.write(struct.pack("<I", len(data)))
    stream.write(data)
    stream.flush()


def _serve() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import numpy as np

    src, dst = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the answer stream
    while True:
        head = read_message(src)
        if head is None:
            return
        req = json.loads(head)
        weights = read_message(src) or b""
        feeds = {}
        for blob, shape in req["feeds"]:
            raw = read_message(src) or b""
            feeds[blob] = np.frombuffer(raw, dtype="<f4").reshape(shape)
        try:
            outs = _run(req["param"], weights, feeds, req["outs"])
        except Exception as exc:  # noqa: BLE001 - the reason goes back to the writer
            write_message(dst, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            continue
        write_message(dst, json.dumps({"outs": [list(o.shape) for o in outs]}).encode())
        for o in outs:
            write_message(dst, np.ascontiguousarray(o, dtype="<f4").tobytes())


def _run(param: str, weights: bytes, feeds: dict, outs: list[str]) -> list:
    from translator.proofs.ncnn import extract, open_net

    with tempfile.TemporaryDirectory(prefix="opbridge-ncnn-") as d:
        pp, bp = os.path.join(d, "trial.param"), os.path.join(d, "trial.bin")
        with open(pp, "w", encoding="ascii") as fh:
            fh.write(param)
        with open(bp, "wb") as fh:
            fh.write(weights)
        net = open_net(pp, bp)
    try:
        return extract(net, feeds, outs)
    finally:
        net.clear()


if __name__ == "__main__":
    _serve()
