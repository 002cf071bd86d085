"""Names shared by the light (query) path and the full loader; imports nothing heavy."""
from __future__ import annotations

#: Column keys in seed order (seed 000), then clDNN (seed 004).
API_TITLES = {
    "webnn": "WebNN", "onnx": "ONNX", "dml": "DirectML", "xnnpack": "XNNPACK",
    "stablehlo": "StableHLO", "tosa": "TOSA", "numpy": "NumPy", "tensorflow": "TensorFlow",
    "tflite": "TensorFlow Lite", "pytorch": "PyTorch", "coreml": "CoreML", "bnns": "BNNS",
    "mps": "MPS", "mlx": "MLX", "ncnn": "NCNN", "cntk": "CNTK", "openvino": "OpenVINO",
    "onednn": "oneDNN", "nnapi": "Android NNAPI", "cldnn": "clDNN",
}
API_KEYS = tuple(API_TITLES)
BACKEND_ALIASES = {"torch": "pytorch", "tf": "tensorflow", "tensorflowlite": "tflite", "ov": "openvino",
                   "directml": "dml", "ann": "nnapi", "mil": "coreml", "np": "numpy", "litert": "tflite"}


class TableError(ValueError):
    """A malformed table: the message names the file, the line and the entry."""

    def __init__(self, path: str, line: int | None, where: str, reason: str) -> None:
        self.path, self.line, self.where, self.reason = path, line, where, reason
        loc = f"{path}:{line}" if line else path
        super().__init__(f"{loc}: {where}: {reason}" if where else f"{loc}: {reason}")


def loose(s: str) -> str:
    """Case- and separator-insensitive form: 'Greater_Equal' → 'greaterequal'."""
    return "".join(ch for ch in s.lower() if ch.isalnum())


class UserError(Exception):
    """Bad input on the command line: printed as one line, exit code 2."""
