"""The model zoo of ``bench/keras_models.py``: Keras applications and small attention /
recurrent Keras models built with random weights (``weights=None``, fixed seeds), each saved
as ``model.keras``, as a SavedModel (``model.export``), and converted by TensorFlow's own
``tf.lite.TFLiteConverter`` to ``float32.tflite`` and full-int8 ``int8.tflite``.

Imported only by the bench's build worker (it imports TensorFlow). The cache is
``bench/.cache/keras/<name>/`` with a ``meta.json`` saying how the int8 file was made (full
int8 with int8 I/O, or why not and which fallback was used).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Callable

CACHE = Path(__file__).resolve().parent / ".cache" / "keras"
SEED = 1234
#: representative samples for the int8 calibration (standard normal, like the check's inputs)
N_CALIB = 8


def _apps() -> Any:
    import keras

    return keras.applications


def _app(ctor: str, size: int) -> Callable[[], Any]:
    def build() -> Any:
        fn = getattr(_apps(), ctor)
        return fn(weights=None, input_shape=(size, size, 3), classes=10, include_top=True,
                  classifier_activation=None)
    build.__doc__ = f"keras.applications.{ctor} at {size}x{size}, 10 classes, logits"
    return build


def _transformer() -> Any:
    """A tiny transformer encoder block: MultiHeadAttention + LayerNormalization + FFN."""
    import keras
    from keras import layers

    x = inp = keras.Input((16, 32), name="tokens")
    for i in range(2):
        a = layers.MultiHeadAttention(num_heads=2, key_dim=16, name=f"mha{i}")(x, x)
        x = layers.LayerNormalization(epsilon=1e-6, name=f"ln{i}a")(x + a)
        f = layers.Dense(64, activation="gelu", name=f"ffn{i}a")(x)
        f = layers.Dense(32, name=f"ffn{i}b")(f)
        x = layers.LayerNormalization(epsilon=1e-6, name=f"ln{i}b")(x + f)
    x = layers.GlobalAveragePooling1D()(x)
    out = layers.Dense(10, name="head")(x)
    return keras.Model(inp, out, name="transformer_encoder")


def _rnn(kind: str) -> Callable[[], Any]:
    def build() -> Any:
        import keras
        from keras import layers

        inp = keras.Input((16, 8), name="seq")
        if kind == "lstm":
            x = layers.LSTM(32, name="lstm")(inp)
        elif kind == "lstm_unrolled":  # the usual form for TFLite deployment: no WHILE loop
            x = layers.LSTM(32, unroll=True, name="lstm")(inp)
        elif kind == "gru":
            x = layers.GRU(32, name="gru")(inp)
        elif kind == "bilstm_stacked":
            x = layers.Bidirectional(layers.LSTM(16, return_sequences=True), name="bilstm")(inp)
            x = layers.LSTM(16, name="lstm2")(x)
        elif kind == "gru_stacked":
            x = layers.GRU(16, return_sequences=True, name="gru1")(inp)
            x = layers.GRU(16, return_sequences=True, name="gru2")(x)
            x = layers.GlobalAveragePooling1D()(x)
        else:
            raise ValueError(kind)
        out = layers.Dense(10, name="head")(x)
        return keras.Model(inp, out, name=kind)
    build.__doc__ = f"a Keras {kind} model, sequence length 16"
    return build


#: name → builder (input sizes: the smallest each application accepts, or 64/96)
MODELS: dict[str, Callable[[], Any]] = {
    "mobilenet_v3_small": _app("MobileNetV3Small", 96),
    "resnet50": _app("ResNet50", 64),
    "nasnet_mobile": _app("NASNetMobile", 64),
    "xception": _app("Xception", 71),
    "inception_v3": _app("InceptionV3", 75),
    "convnext_tiny": _app("ConvNeXtTiny", 64),
    "efficientnet_v2_b0": _app("EfficientNetV2B0", 64),
    "transformer_encoder": _transformer,
    "lstm": _rnn("lstm"),
    "lstm_unrolled": _rnn("lstm_unrolled"),
    "gru": _rnn("gru"),
    "bilstm_stacked": _rnn("bilstm_stacked"),
    "gru_stacked": _rnn("gru_stacked"),
}

#: the source formats, in table order, and their file under the model's cache folder
FORMATS = {"keras": "model.keras", "savedmodel": "saved_model", "tflite": "float32.tflite", "int8": "int8.tflite"}


def _randomize_norms(model: Any, rng: Any) -> None:
    """BatchNormalization layers get non-trivial statistics (a fresh layer is the identity:
    mean 0, variance 1, gamma 1, beta 0), so that folding them is actually exercised."""
    import numpy as np

    for layer in model.layers:
        if type(layer).__name__ == "BatchNormalization":
            vals = []
            for w in layer.weights:
                shape, n = w.shape, w.path.rsplit("/", 1)[-1]
                if n == "gamma":
                    vals.append(rng.uniform(0.5, 1.5, shape))
                elif n == "beta":
                    vals.append(rng.normal(0, 0.1, shape))
                elif n == "moving_mean":
                    vals.append(rng.normal(0, 0.1, shape))
                elif n == "moving_variance":
                    vals.append(rng.uniform(0.5, 1.5, shape))
                else:
                    vals.append(np.asarray(w.numpy()))
            layer.set_weights([v.astype("float32") for v in vals])


def calibration(shape: tuple[int, ...], seed: int = SEED) -> list[Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1,) + tuple(shape[1:])).astype(np.float32) for _ in range(N_CALIB)]


def _tflite(saved: Path, shape: tuple[int, ...], mode: str) -> bytes:
    import tensorflow as tf

    conv = tf.lite.TFLiteConverter.from_saved_model(str(saved))
    if mode == "float32":
        return conv.convert()
    samples = calibration(shape)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if mode == "int8_weights_only":  # dynamic-range quantization: int8 weights, float activations
        return conv.convert()
    conv.representative_dataset = lambda: ([s] for s in samples)
    if mode in ("int8", "int8_float_io"):
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if mode == "int8":
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def _tflite_child(name: str, mode: str, dest: Path, shape: tuple[int, ...]) -> str | None:
    """TF's converter in a child process (its int8 calibrator can crash the process on a
    WHILE loop); None when ``dest`` was written, else the converter's first error line."""
    import subprocess
    import sys

    dest.unlink(missing_ok=True)
    try:
        proc = subprocess.run([sys.executable, __file__, "--tflite", name, mode, str(dest), json.dumps(list(shape))],
                              capture_output=True, text=True, timeout=900, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    except subprocess.TimeoutExpired:
        return "the converter timed out (900 s)"
    if proc.returncode == 0 and dest.exists():
        return None
    lines = [ln.strip() for ln in proc.stderr.splitlines() if "error:" in ln.lower() and "log messages" not in ln]
    if proc.returncode < 0:
        import signal

        return f"the converter crashed ({signal.Signals(-proc.returncode).name}) during {mode} conversion"
    return (lines[-1] if lines else (proc.stderr.strip().splitlines() or ["no output"])[-1])[:400]


def build(name: str, force: bool = False) -> dict[str, Any]:
    """Build ``name`` into the cache (skipped when its ``meta.json`` exists); its metadata."""
    import fcntl

    folder = CACHE / name
    meta_path = folder / "meta.json"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:  # one builder per model at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if meta_path.exists() and not force:
            return json.loads(meta_path.read_text())
        return _build(name, folder, meta_path)


def _build(name: str, folder: Path, meta_path: Path) -> dict[str, Any]:
    import keras
    import numpy as np
    import tensorflow as tf

    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    keras.utils.set_random_seed(SEED)
    model = MODELS[name]()
    _randomize_norms(model, np.random.default_rng(SEED))
    shape = tuple(1 if d is None else int(d) for d in model.inputs[0].shape)
    model.save(folder / FORMATS["keras"])
    # a static batch of 1: with a free batch dimension TF's converter cannot lower the
    # recurrent layers' TensorList loops to builtins
    model.export(str(folder / FORMATS["savedmodel"]), verbose=False,
                 input_signature=[tf.TensorSpec(shape, tf.float32, name=model.inputs[0].name)])
    (folder / FORMATS["tflite"]).write_bytes(_tflite(folder / FORMATS["savedmodel"], shape, "float32"))
    float_err = _tflite_child(name, "float32", folder / FORMATS["tflite"], shape)
    int8_mode, why = None, []
    for mode in ("int8", "int8_float_io", "int8_mixed", "int8_weights_only"):
        err = _tflite_child(name, mode, folder / FORMATS["int8"], shape)
        if err is None:
            int8_mode = mode
            break
        why.append(f"{mode}: {err}")
    x = calibration(shape)[0]
    y = np.asarray(model(x))
    meta = {"name": name, "doc": MODELS[name].__doc__, "input_shape": list(shape), "keras": keras.__version__,
            "tensorflow": tf.__version__, "params": int(model.count_params()), "float32_error": float_err, "int8_mode": int8_mode,
            "int8_fallback_reasons": why, "output_abs_max": float(np.abs(y).max()),
            "build_seconds": round(time.perf_counter() - t0, 1)}
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def paths(name: str) -> dict[str, Path]:
    return {f: CACHE / name / rel for f, rel in FORMATS.items()}


if __name__ == "__main__":  # python bench/keras_zoo.py NAME...: build into the cache
    import sys

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if sys.argv[1:2] == ["--tflite"]:
        _, _, n, m, d, shp = sys.argv
        Path(d).write_bytes(_tflite(CACHE / n / FORMATS["savedmodel"], tuple(json.loads(shp)), m))
        sys.exit(0)
    for n in sys.argv[1:] or list(MODELS):
        print(json.dumps(build(n)))
