"""``opbridge report``: per-node plans, the whole-table matrix, escaping, and README drift."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"
HOSTILE = "</td><script>alert(1)</script><td>"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True, cwd=ROOT)


def _hostile_model(tmp_path: Path) -> Path:
    g = helper.make_graph([helper.make_node("Relu", ["x"], [HOSTILE], name=HOSTILE),
                           helper.make_node("Neg", [HOSTILE], ["y"], name="neg"),
                           helper.make_node("StringNormalizer", ["s"], ["t"], name="norm", case_change_action="LOWER")],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                                helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
                           helper.make_tensor_value_info("t", TensorProto.STRING, [2])])
    p = tmp_path / "hostile.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    return p


def test_model_report_json_has_every_node_and_backend():
    p = cli("report", str(MODEL), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert set(r["backends"]) == {"onnx", "pytorch", "tensorflow", "tflite", "coreml", "openvino", "stablehlo", "mlx", "ncnn"}
    onnx_nodes = r["backends"]["onnx"]["nodes"]
    assert len(onnx_nodes) == 10 and all(n["status"] == "native" for n in onnx_nodes)
    assert r["backends"]["onnx"]["summary"].startswith("onnx: 10/10 nodes")


def test_unsupported_nodes_carry_a_reason_code(tmp_path):
    p = cli("report", str(_hostile_model(tmp_path)), "--backends", "onnx,pytorch", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)["backends"]
    (norm,) = [n for n in r["pytorch"]["nodes"] if n["node"] == "norm"]
    assert norm["status"] == "unsupported" and norm["reason"] == "unsupported_op" and norm["detail"]
    assert all(n["status"] == "native" for n in r["onnx"]["nodes"])
    assert "1 unsupported: string_normalizer" in r["pytorch"]["summary"]


def test_html_escapes_everything(tmp_path):
    out = tmp_path / "r.html"
    p = cli("report", str(_hostile_model(tmp_path)), "--html", str(out))
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert "<script>alert(1)</script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "http://" not in text and "https://" not in text  # self-contained: no network


def test_markdown_and_table_reports(tmp_path):
    p = cli("report", str(MODEL), "--md", str(tmp_path / "r.md"))
    assert p.returncode == 0 and "| node | op |" in (tmp_path / "r.md").read_text()
    p = cli("report", "--table", "--json")
    m = json.loads(p.stdout)
    assert len(m["ops"]) >= 150 and m["coverage"]["onnx"]["available_pct"] > 90
    p = cli("report", "--table", "--html", str(tmp_path / "t.html"), "--md", str(tmp_path / "t.md"))
    assert p.returncode == 0 and "<table id='m'>" in (tmp_path / "t.html").read_text()


def test_readme_support_matrix_is_generated_from_the_table():
    p = subprocess.run([sys.executable, str(ROOT / "tools" / "update_docs.py"), "--check"], capture_output=True, text=True)
    assert p.returncode == 0, f"README/docs drifted from the tables; run tools/update_docs.py ({p.stderr.strip()})"


def test_report_without_model_or_table_exits_2():
    p = cli("report")
    assert p.returncode == 2 and "--table" in p.stderr


@pytest.mark.slow
def test_html_report_renders_in_headless_chromium(tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("Debian chromium is required for this test (.ci/run installs it: apt-get install chromium)")
    html_path = tmp_path / "table.html"
    assert cli("report", "--table", "--html", str(html_path)).returncode == 0
    shot = tmp_path / "shot.png"
    p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--no-first-run", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                        "--window-size=1400,900", f"--screenshot={shot}", html_path.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000, p.stderr[-2000:]
    console_errors = [ln for ln in p.stderr.splitlines() if "CONSOLE" in ln and ("Error" in ln or "Uncaught" in ln)]
    assert console_errors == []
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--no-first-run", f"--user-data-dir={tmp_path / 'profile2'}", "--dump-dom", html_path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert "conv" in dom.stdout and "<table" in dom.stdout


def test_constants_and_static_shape_subgraphs_are_reported_folded(tmp_path):
    nodes = [helper.make_node("Constant", [], ["k"], value=helper.make_tensor("v", TensorProto.INT64, [1], [-1])),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "z", "one"], ["s0"]),
             helper.make_node("Concat", ["s0", "k"], ["shp"], axis=0),
             helper.make_node("Reshape", ["x", "shp"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [helper.make_tensor("z", TensorProto.INT64, [1], [0]),
                           helper.make_tensor("one", TensorProto.INT64, [1], [1])])
    p = tmp_path / "m.onnx"
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    r = cli("report", str(p), "--json", "--backends", "coreml,tflite")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc["backends"]) == {"coreml", "tflite"}
    for name, b in doc["backends"].items():
        status = {n["op"]: n["status"] for n in b["nodes"]}
        assert status == {"constant": "folded", "shape": "folded", "slice": "folded", "concat": "folded",
                          "reshape": "native"}, (name, status)


def test_a_decomposed_node_named_like_a_path_lists_its_ops():
    """Exported models name nodes like paths (``/blk/shrink``); the plan attributes the ops a
    decomposition left to the model's node by its meta, not by splitting names on '/'."""
    from onnx import TensorProto, helper

    from translator.frontends.onnx import from_proto
    from translator.run.report import plan_model

    g = helper.make_graph([helper.make_node("Shrink", ["x"], ["y"], name="/blk/shrink", lambd=0.5)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = from_proto(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]))
    (plan,) = plan_model(model, ["openvino"])
    (node,) = plan.nodes
    assert node.status == "decomposed" and node.detail == "into add, greater, less, sub, where", node


def test_one_backends_internal_error_does_not_refuse_the_model_on_the_others(monkeypatch, tmp_path):
    """A bug of ours in one backend's planning is that backend's ``internal_error`` on every
    node; the other backends are still judged (as convert judges each target alone)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    from translator.compile import pipeline
    from translator.frontends import load
    from translator.run import report as R

    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g", [h.make_tensor_value_info("x", T.FLOAT, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    real = pipeline.plan

    def broken(model, target, *a, **k):
        if target == "coreml":
            raise IndexError("tuple index out of range")
        return real(model, target, *a, **k)

    monkeypatch.setattr(pipeline, "plan", broken)
    plans = {p.backend: p for p in R.plan_model(load(str(tmp_path / "m.onnx")), ["onnx", "coreml"])}
    assert [n.status for n in plans["onnx"].nodes] == ["native"]
    assert [(n.status, n.reason) for n in plans["coreml"].nodes] == [("unsupported", "internal_error")]


def _openvino_refusing(monkeypatch, refuses, why) -> None:
    """The openvino target, for this test, refuses the nodes ``refuses(node)`` picks with ``why``."""
    import dataclasses

    import emitters.openvino as ov
    from translator.compile import target as TG

    real_accepts, real = ov.TARGET.accepts, TG.get

    def accepts(node, ctx):
        if refuses(node):
            return why
        return real_accepts(node, ctx) if real_accepts is not None else None

    monkeypatch.setattr(TG, "get", lambda name: dataclasses.replace(ov.TARGET, accepts=accepts) if name == "openvino"
                        else real(name))


def test_problems_come_first_grouped_with_a_computed_remedy(tmp_path, monkeypatch):
    """A target that refuses nodes for a reason fixing a dim settles (here openvino's relu,
    refused over a symbolic dim with a code convert does not fix by itself): report groups
    the refused nodes by reason and op, computes the remedy by re-planning with the dims
    fixed, and that remedy, applied, converts them; the HTML opens on the summary matrix and
    the groups, and the nodes every target folds are one collapsed line."""
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    from translator.compile.registry import Refusal
    from translator import frontends
    from translator.run import report as R

    nodes = [h.make_node("Shape", ["x"], ["s"]), h.make_node("Relu", ["x"], ["r1"]), h.make_node("Relu", ["r1"], ["r2"]),
             h.make_node("Add", ["r2", "c"], ["y"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("s", T.INT64, None)],
                     [onnx.numpy_helper.from_array(np.ones(4, np.float32), "c")])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))

    _openvino_refusing(monkeypatch, lambda node: node.op not in ("shape", "add") and not all(
        isinstance(d, int) for d in node.inputs[0].type.shape),
        Refusal("unsupported_attribute_value", "pretend relu needs static dims"))
    model = frontends.load(str(path))
    plans = R.plan_model(model, ["onnx", "openvino"])
    found = R.problems(plans, model)
    assert [(p.backend, p.op, p.reason, len(p.nodes)) for p in found] == \
        [("openvino", "relu", "unsupported_attribute_value", 2)], found
    assert found[0].remedy == "--fix-dim N=1", found
    (fixed,) = R.plan_model(model, ["openvino"], fix_dims={"N": 1})
    assert not any(n.status == "unsupported" for n in fixed.nodes)
    page = R.model_html(str(path), plans, found)
    assert page.index("id='s'") < page.index("Refused nodes") < page.index("id='m'")
    assert "--fix-dim N=1</b> makes them convertible" in page
    assert "refused" in R.problems_text(found) and "--fix-dim N=1 makes them convertible" in R.problems_text(found)
    doc = R.model_json(str(path), plans, found)
    assert doc["problems"][0]["remedy"] == "--fix-dim N=1" and doc["backends"]["openvino"]["counts"]["unsupported"] == 2


def test_report_over_a_folder_agrees_with_each_models_report(tmp_path):
    """``opbridge report DIR/``: every model in the folder (a file that is not a model is a row
    with its reason), judged in worker processes; each cell agrees with ``report MODEL``; exit
    0, ``--json`` for machines, an HTML page with every name escaped."""
    import json
    import shutil
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    folder = tmp_path / "models"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(root / "examples" / "models" / "tiny_cnn.onnx", folder / "tiny_cnn.onnx")
    shutil.copy(root / "examples" / "models" / "tiny_cnn.onnx", folder / "sub" / "<b>copy.onnx")
    (folder / "broken.onnx").write_bytes(b"not a model")
    (folder / "notes.txt").write_text("ignored")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True, cwd=root)

    p = cli("report", str(folder), "--backends", "onnx,tflite", "--json", "--workers", "2", "--html",
            str(tmp_path / "r.html"))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    names = [Path(r["model"]).name for r in doc["models"]]
    assert names == ["broken.onnx", "<b>copy.onnx", "tiny_cnn.onnx"], names
    assert doc["models"][0]["reason"] == "bad_model" and doc["unreadable"] == 1
    assert doc["converts"] == {"onnx": 2, "tflite": 2}
    one = json.loads(cli("report", str(folder / "tiny_cnn.onnx"), "--backends", "onnx,tflite", "--json").stdout)
    for b in ("onnx", "tflite"):
        assert doc["models"][2]["backends"][b]["counts"] == one["backends"][b]["counts"], b
    page = (tmp_path / "r.html").read_text()
    assert "&lt;b&gt;copy.onnx" in page and "<b>copy" not in page
    p = cli("report", str(tmp_path / "empty_dir_missing"), "--backends", "onnx")
    assert p.returncode == 2


def test_report_over_a_folder_runs_on_a_dask_cluster_and_agrees_with_local_workers(tmp_path):
    """``report DIR --scheduler tcp://...``: the same per-model jobs on the workers of a Dask
    ``distributed`` cluster (a local one, started here); the rows equal the process pool's. A
    scheduler nobody answers at is a one-line ``bad_option``, exit 2."""
    import json
    import shutil
    import subprocess
    import sys

    from distributed import LocalCluster

    root = Path(__file__).resolve().parent.parent
    folder = tmp_path / "models"
    folder.mkdir()
    shutil.copy(root / "examples" / "models" / "tiny_cnn.onnx", folder / "a.onnx")
    shutil.copy(root / "examples" / "models" / "tiny_cnn.onnx", folder / "b.onnx")
    (folder / "broken.onnx").write_bytes(b"not a model")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "translator.cli", *args], capture_output=True, text=True, cwd=root)

    local = cli("report", str(folder), "--backends", "onnx,tflite", "--json", "--workers", "2")
    assert local.returncode == 0, local.stderr
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
        far = cli("report", str(folder), "--backends", "onnx,tflite", "--json", "--scheduler", lc.scheduler_address)
        assert far.returncode == 0, far.stderr
        ran = sorted(lc.scheduler.task_prefixes)  # the task names the scheduler handed to its workers
    assert json.loads(far.stdout) == json.loads(local.stdout)
    assert ran == ["judge"], ran
    p = cli("report", str(folder), "--backends", "onnx", "--scheduler", "tcp://127.0.0.1:9")
    assert p.returncode == 2 and "--scheduler" in p.stderr and p.stderr.count("\n") == 1, p.stderr


def _switch_model(path, against_input=False):
    """y = erf(x) unless mode == 7 (then relu(x)); the condition goes through Not, the
    compared value is a Constant node, as exporters write a sample-rate switch."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    erf = h.make_graph([h.make_node("Erf", ["x"], ["e"])], "erf", [], [h.make_tensor_value_info("e", T.FLOAT, [2, 4])])
    relu = h.make_graph([h.make_node("Relu", ["x"], ["r"])], "relu", [], [h.make_tensor_value_info("r", T.FLOAT, [2, 4])])
    nodes = [] if against_input else [h.make_node("Constant", [], ["seven"], value=h.make_tensor("v", T.INT64, [], [7]))]
    nodes += [h.make_node("Equal", ["mode", "seven"], ["is7"]), h.make_node("Not", ["is7"], ["not7"]),
              h.make_node("If", ["not7"], ["y"], then_branch=erf, else_branch=relu)]
    ins = [h.make_tensor_value_info("x", T.FLOAT, [2, 4]), h.make_tensor_value_info("mode", T.INT64, [])]
    ins += [h.make_tensor_value_info("seven", T.INT64, [])] if against_input else []
    g = h.make_graph(nodes, "g", ins, [h.make_tensor_value_info("y", T.FLOAT, [2, 4])])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), str(path))


def test_a_setting_input_that_decides_an_if_gets_a_computed_freeze_remedy(tmp_path, monkeypatch):
    """An If a target refuses, on a setting input compared with a constant (``Equal(mode,
    7)``, through Not): report re-plans with the input frozen to the value the
    model tests, and says ``--freeze mode=7`` only because that plan converts every node."""
    from translator import frontends
    from translator.compile.registry import Refusal
    from translator.ir.freeze import freeze
    from translator.run import report as R
    from translator.run.convert import settle_frozen

    path = tmp_path / "switch.onnx"
    _switch_model(path)
    # as Core ML refused control flow before it was lowered to MIL cond
    _openvino_refusing(monkeypatch, lambda node: node.op == "if",
                       Refusal("unsupported_op", "pretend control flow is not lowered"))
    model = frontends.load(str(path))
    assert R.setting_inputs(model) == [("mode", 7)]
    plans = R.plan_model(model, ["onnx", "openvino"])
    found = R.problems(plans, model)
    assert found and {p.backend for p in found} == {"openvino"}, found
    assert all(p.remedy == "--freeze mode=7" for p in found), found
    assert "--freeze mode=7" in R.problems_text(found)
    (again,) = R.plan_model(settle_frozen(freeze(model.clone(), {"mode": 7})), ["openvino"])
    assert not any(n.status == "unsupported" for n in again.nodes)
    # no pattern, no remedy: compared with another input, mode is not a setting with a known value
    _switch_model(path, against_input=True)
    model = frontends.load(str(path))
    assert R.setting_inputs(model) == []
    found = R.problems(R.plan_model(model, ["openvino"]), model)
    assert found and not any(p.remedy for p in found), found


def test_a_backend_that_refuses_the_whole_model_is_one_problem_naming_the_node(tmp_path, monkeypatch):
    """A refusal of the model as a whole (a pipeline step raised) is one line naming where it
    arose, not one group per op type all saying the same."""
    from translator.compile import pipeline
    from translator.ir.infer import VerifyError
    from translator.run import report as R
    from translator import frontends

    path = tmp_path / "switch.onnx"
    _switch_model(path)
    real = pipeline.plan

    def plan(model, backend, *a, **k):
        if backend == "openvino":
            raise VerifyError("bad_model", "pretend the branch cannot be typed", node="the_node", op="relu")
        return real(model, backend, *a, **k)

    monkeypatch.setattr(pipeline, "plan", plan)
    model = frontends.load(str(path))
    plans = R.plan_model(model, ["onnx", "openvino"])
    (found,) = R.problems(plans, model)
    assert found.backend == "openvino" and found.op == "" and len(found.nodes) == len(plans[1].nodes) > 3
    assert found.what.startswith("the whole model") and "at node 'the_node' (relu)" in found.detail
    assert "openvino: the whole model (" in R.problems_text(found and [found])


def test_ops_no_frontend_reads_are_refused_nodes_in_the_report_not_a_failed_load(tmp_path):
    """An op of a domain we do not read (onnxruntime-extensions' ``ai.onnx.contrib``) and a
    ``com.microsoft`` op with no IR op: report keeps each as one refused node, typed by the
    file's value_info, under the op the file names, and judges the nodes after them; the load
    convert does still refuses the file with exit 2, naming the first."""
    import json

    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
             h.make_node("StringNormalizer2", ["r"], ["c"], name="contrib", domain="ai.onnx.contrib"),
             h.make_node("NoSuchContribOp", ["c"], ["m"], name="ms", domain="com.microsoft"),
             h.make_node("Sigmoid", ["m"], ["y"], name="sig")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                     value_info=[h.make_tensor_value_info("c", T.FLOAT, [2, 3]), h.make_tensor_value_info("m", T.FLOAT, [2, 3])])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.onnx.contrib", 1),
                                             h.make_opsetid("com.microsoft", 1)]), str(path))
    r = cli("report", str(path), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for backend, b in doc["backends"].items():
        status = {n["node"]: (n["op"], n["status"], n["reason"]) for n in b["nodes"]}
        assert status["contrib"] == ("ai.onnx.contrib::StringNormalizer2", "unsupported", "unknown_domain"), (backend, status)
        assert status["ms"][0] == "com.microsoft::NoSuchContribOp" and status["ms"][1] == "unsupported", (backend, status)
        assert status["relu"][1] != "unsupported" and status["sig"][1] != "unsupported", (backend, status)
    r = cli("convert", str(path), "--to", "onnx", "-o", str(tmp_path / "out.onnx"))
    assert r.returncode == 2 and "contrib" in r.stderr and "unknown_domain" in r.stderr, r.stderr
    assert not (tmp_path / "out.onnx").exists()
