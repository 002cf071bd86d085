"""bench/zoo_models.py and bench/zoo.py: the model list, the table's bookkeeping (totals, the
grouping of failures by mechanism, report vs convert agreement). The exports themselves run
in bench/.venv-zoo and the conversions take minutes: not here."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import zoo  # noqa: E402
import zoo_models  # noqa: E402


def test_zoo_lists_forty_architectures_without_heavy_imports():
    code = ("import sys; sys.path.insert(0, 'bench'); import zoo_models, zoo; "
            "print(len(zoo_models.MODELS), sorted(m for m in ('torch', 'transformers', 'timm', 'tensorflow', 'onnx') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), check=True)
    n, heavy = out.stdout.split(" ", 1)
    assert int(n) >= 40
    assert heavy.strip() == "[]"
    families = {f for f, _ in zoo_models.SPECS.values()}
    assert families <= {"text", "causal", "seq2seq", "mel", "audio", "image", "seq"}
    libs = {lib for _, lib in zoo_models.SPECS.values()}
    assert {"transformers", "timm", "torchvision", "torch"} <= libs


def test_dynamic_axes_batch_everywhere_sequence_for_text_and_audio():
    text = zoo_models.dynamic_axes("bert", {"input_ids": 0, "attention_mask": 0})
    assert text == {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    s2s = zoo_models.dynamic_axes("t5", {"input_ids": 0, "attention_mask": 0, "decoder_input_ids": 0})
    assert s2s["decoder_input_ids"] == {0: "batch"}
    assert zoo_models.dynamic_axes("resnet18", {"pixel_values": 0}) == {"pixel_values": {0: "batch"}}
    assert zoo_models.dynamic_axes("whisper", {"input_features": 0, "decoder_input_ids": 0})["input_features"] == {0: "batch"}


def _cell(target, status, reason="", detail="", seconds=1.0):
    return {"target": target, "status": status, "reason": reason, "detail": detail, "seconds": seconds}


def test_failures_group_the_same_mechanism_across_models():
    a = _cell("coreml", "refused", "unsupported_dtype",
              "bench/.cache/zoo/bert/ts.onnx: node '/model/bert/Gather_3' (gather): bool input of shape (1, 16) not legal")
    b = _cell("coreml", "refused", "unsupported_dtype",
              "bench/.cache/zoo/roberta/dynamo.onnx: node 'val_42' (gather): bool input of shape (2, 7) not legal")
    c = _cell("tflite", "refused", "dynamic_shape", "bench/.cache/zoo/swin/ts.onnx: node '/x/Pad' (pad): dynamic pads")
    rows = [{"model": "bert", "exporter": "ts", "opbridge": [a]}, {"model": "roberta", "exporter": "dynamo", "opbridge": [b]},
            {"model": "swin", "exporter": "ts", "opbridge": [c]}]
    key_a, node_a = zoo.mechanism(a)
    assert key_a == zoo.mechanism(b)[0] != zoo.mechanism(c)[0]
    assert node_a == "/model/bert/Gather_3"
    lines = zoo.failures(rows)
    assert lines[0].startswith("×2 refused unsupported_dtype")
    assert "bert/ts→coreml" in lines[0] and "roberta/dynamo→coreml" in lines[0]
    assert lines[1].startswith("×1 ")


def test_totals_and_report_agreement():
    rows = [
        {"model": "m1", "exporter": "ts", "opbridge": [_cell("onnx", "ok"), _cell("coreml", "refused", "unsupported_op")],
         "report": {"onnx": {"status": "ok"}, "coreml": {"status": "ok"}}},
        {"model": "m2", "exporter": "ts", "opbridge": [_cell("onnx", "check_failed"), _cell("coreml", "error", "timeout")],
         "report": {"onnx": {"status": "refused", "reason": "unsupported_op", "op": "x", "node": "n"},
                    "coreml": {"status": "refused", "reason": "unsupported_op"}}},
    ]
    tot = zoo.totals(rows, ["onnx", "coreml"], [])
    assert tot["onnx"]["ok"] == 1 and tot["onnx"]["check_failed"] == 1 and tot["onnx"]["pct_ok"] == 50.0
    assert tot["all"]["cells"] == 4 and tot["all"]["pct_ok"] == 25.0
    n, nbad, lines = zoo.agreement(rows)
    assert n == 3  # the crashed cell is not compared
    assert nbad == 2
    assert any(ln.startswith("m1/ts→coreml: report ok; convert refused") for ln in lines)
    assert any(ln.startswith("m2/ts→onnx: report refuses") for ln in lines)


def test_predicted_reads_the_first_unsupported_node():
    rep = {"backends": {"onnx": {"nodes": [{"status": "native"}]},
                        "tflite": {"nodes": [{"status": "native"}, {"status": "unsupported", "reason": "dynamic_shape",
                                                                    "node": "/a", "op": "pad", "detail": "d"},
                                             {"status": "unsupported", "reason": "unsupported_op", "node": "/b"}]}}}
    p = zoo.predicted(rep)
    assert p["onnx"] == {"status": "ok"}
    assert p["tflite"]["reason"] == "dynamic_shape" and p["tflite"]["node"] == "/a" and p["tflite"]["unsupported"] == 2


def test_render_reprints_a_json_run(tmp_path, capsys):
    rows = [{"model": "bert", "exporter": "ts", "source": "x", "report": None, "peers": {},
             "opbridge": [dict(_cell("onnx", "ok"), max_err=1e-7), _cell("tflite", "refused", "dynamic_shape")]}]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"rows": rows, "notes": ["n1"]}))
    assert zoo.main(["--render", str(path), "--targets", "onnx,tflite"]) == 0
    out = capsys.readouterr().out
    assert "ok 1.0e-07" in out and "✗dynamic_shape" in out
    assert "onnx                   ok 1, cells 1, pct_ok 100.0" in out


def test_agreement_lists_a_same_code_on_another_node_apart():
    c = _cell("tflite", "refused", "bad_model", "f.onnx: node '/conv/Conv' (conv): shape inference failed")
    rows = [{"model": "m", "exporter": "ts", "opbridge": [c],
             "report": {"tflite": {"status": "refused", "reason": "bad_model", "node": "Identity_1", "unsupported": 9}}}]
    n, nbad, lines = zoo.agreement(rows)
    assert (n, nbad) == (1, 0)
    assert lines == ["m/ts→tflite: same reason bad_model, different node: report 'Identity_1' (9 unsupported), "
                     "convert '/conv/Conv'"]
