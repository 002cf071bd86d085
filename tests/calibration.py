"""onnxruntime's static quantizer needs a calibration data reader: seeded random inputs for one
input ``x``, drawn from ``rng`` when the reader is made (shared by the quantization tests)."""
from __future__ import annotations

from typing import Any

import numpy as np


def reader(rng: np.random.Generator, shape: tuple[int, ...], count: int = 4) -> Any:
    from onnxruntime.quantization import CalibrationDataReader

    class Data(CalibrationDataReader):
        def __init__(self) -> None:
            self.left = [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(count)]

        def get_next(self):  # noqa: ANN201
            return self.left.pop() if self.left else None

    return Data()
