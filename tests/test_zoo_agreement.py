"""``report`` and ``convert`` agree on the zoo (issue 12): for each zoo model and target,
report predicts ok exactly when convert writes the artifact, and when it predicts a refusal
it names the node and reason convert gives. The zoo's ONNX files are built by
``bench/zoo_models.py`` in ``bench/.venv-zoo`` (``sh bench/setup_zoo.sh``); where they are not
built the cases are expected failures that say so."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "bench" / ".cache" / "zoo"
TARGETS = ("onnx", "pytorch", "tensorflow", "tflite", "openvino", "coreml")
#: one of each kind (CNN, text encoder, causal LM, recurrent); bench/zoo.py checks agreement on all of them
MODELS = ("resnet18", "bert", "gpt2", "lstm_2layer")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("variant", ["ts", "dynamo"])
def test_report_predicts_what_convert_does(model, variant, tmp_path):
    src = ZOO / model / f"{variant}.onnx"
    if not src.exists():
        pytest.xfail(f"zoo model {model}/{variant} not built here (sh bench/setup_zoo.sh; python bench/zoo_models.py)")
    import opbridge

    rep = opbridge.report(str(src), backends=list(TARGETS))
    for target in TARGETS:
        plan = rep["backends"][target]
        bad = [n for n in plan.get("nodes", []) if n.get("status") == "unsupported"]
        res = opbridge.convert(str(src), to=target, out=str(tmp_path / target), check=False)
        rec = res["targets"][0]
        if not bad:
            assert rec["status"] == "ok", f"{target}: report predicted ok, convert: {rec.get('detail')}"
        else:
            assert rec["status"] == "failed", f"{target}: report predicted a refusal at {bad[0].get('node')!r}"
            assert rec["reason"] == bad[0].get("reason"), (target, rec, bad[0])
            assert str(bad[0].get("node")) in rec["detail"], (target, rec["detail"], bad[0])
