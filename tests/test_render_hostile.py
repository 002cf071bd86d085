"""Outside values reach generated Python only as literals or sanitized identifiers.

Every code template (``templates/*/*.py.j2``) is rendered with a hostile value in every
field it accepts: the fields and the shape of their values are taken from a real
emission (the context each emitter passes to ``render``), then every string in it is
replaced by a payload that tries each way out of a literal (triple quotes, both quotes,
newlines, backslashes, a Unicode line separator, Jinja syntax). The result must parse
and contain no executable trace of the payload. Then a model *file* named with the
payload goes through every code-generating target with the check on (the Core ML check
runs ``builder.py``), and nothing runs.
"""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from translator.table import paths
from translator.compile import render as R

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "models" / "tiny_cnn.onnx"
CODE_BACKENDS = ("pytorch", "tensorflow", "openvino", "coreml", "stablehlo", "mlx")

PAYLOADS = (
    '"""\n__import__("os").system("touch PWNED")\n"""',
    "'''\n__import__('os').system('touch PWNED')#",
    "x'); __import__('os').system('touch PWNED'); ('",
    'x"); __import__("os").system("touch PWNED"); ("',
    "\\\n__import__('os').system('touch PWNED')",
    "\r__import__('os').system('touch PWNED')",
    "\u2028__import__('os').system('touch PWNED')",
    "{{ 7*7 }}{% raw %}\"\"\"__import__('os')",
)


def _templates() -> list[tuple[str, str]]:
    root = Path(paths.templates_dir())
    return sorted((p.parent.name, p.name) for p in root.glob("*/*.py.j2"))


@pytest.fixture(scope="module")
def contexts() -> dict[tuple[str, str], dict[str, Any]]:
    """The context each code template is rendered with, captured from a real emission."""
    from translator.run.check import model_loader
    from translator.run.harness import convert

    seen: dict[tuple[str, str], dict[str, Any]] = {}
    real = R.render

    def spy(backend: str, template: str, **context: Any) -> str:
        seen.setdefault((backend, template), context)
        return real(backend, template, **context)

    R.render = spy  # the emitters import render inside emit()
    try:
        for b in CODE_BACKENDS:
            convert(b, model_loader(str(MODEL))())
    finally:
        R.render = real
    return seen


def _hostile(value: Any, payload: str, record: bool = False) -> Any:
    """The same shape of value with every string replaced by ``payload`` (an identifier
    an emitter built becomes the identifier it would build from the payload)."""
    if isinstance(value, R.Code):
        return R.ident(payload)
    if isinstance(value, str):
        return payload
    if isinstance(value, bool):
        return True  # take the template's optional branches too
    if isinstance(value, dict) and record:  # a record the template reads by field name: keep the names
        return {k: _hostile(v, payload) for k, v in value.items()}
    if isinstance(value, dict):
        items = list(value.items()) or [("k", "v")]
        return {_hostile(k, payload): _hostile(v, payload) for k, v in items}
    if isinstance(value, (list, tuple)):
        out = [_hostile(v, payload, record=True) for v in value]
        return out if isinstance(value, list) else tuple(out)
    return value


def _no_trace(source: str, where: str) -> None:
    tree = ast.parse(source)  # SyntaxError: a value broke out of its literal
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            assert name not in ("__import__", "system"), f"{where}: executable payload at line {node.lineno}"
        if isinstance(node, ast.Name):
            assert node.id != "__import__", f"{where}: payload name at line {node.lineno}"


def test_every_code_template_is_exercised(contexts):
    assert set(_templates()) == set(contexts), "a code template no emitter rendered (or a new one to capture)"


@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"p{i}" for i in range(len(PAYLOADS))])
@pytest.mark.parametrize("backend,template", _templates())
def test_hostile_values_in_every_field_stay_literals(contexts, backend, template, payload):
    import jinja2.meta

    env = R._env(backend, True)
    fields = jinja2.meta.find_undeclared_variables(env.parse(env.loader.get_source(env, template)[0]))
    context = contexts[(backend, template)]
    assert fields <= set(context), f"fields not captured: {fields - set(context)}"
    hostile = {k: _hostile(v, payload) for k, v in context.items()}
    source = R.render(backend, template, **hostile)
    _no_trace(source, f"{backend}/{template}")
    consts = {n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert payload in consts, "the payload should survive as data, unchanged"


def test_a_raw_string_never_reaches_code_unquoted():
    out = R.render("pytorch", "module.py.j2", **{**_minimal_pytorch(), "body": ["import os"]})
    assert "        'import os'" in out and "\n        import os\n" not in out


def _minimal_pytorch() -> dict[str, Any]:
    return dict(class_name="M", version="0", source="m.onnx", ops={}, weights_file="w.safetensors", helpers=[],
                buffers=[], modules=[], input_names=R.code_lines(["x"]), output_names=["y"], body=R.code_lines(["y = x"]),
                returns=R.code_lines(["y"]), legalized={}, prepared=[], prepare=R.code_lines([]), channels_last=False)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e-300, "a\u2028b", "é", b"x".decode()])
def test_literal_reads_back(value):
    got = eval(R.literal(value), {"__builtins__": {"float": float}})  # noqa: S307 - our own literal
    assert (got != got and value != value) or got == value


def test_multiline_literal_falls_back_when_triple_quotes_would_change_the_text():
    for text in ('a"""b', "a\\nb", 'ends"', "nul\x00", "ok\ntext"):
        assert ast.literal_eval(R.literal(text, multiline=True)) == text


def test_a_model_file_named_to_break_out_runs_nothing(tmp_path):
    marker = tmp_path / "PWNED"
    name = 'x"""; __import__("os").system("touch PWNED") #\'.onnx'  # run with the tmp folder as cwd
    src = tmp_path / name
    shutil.copy(MODEL, src)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "translator.cli", "convert", str(src), "--to", ",".join(CODE_BACKENDS),
                        "-o", str(out), "--quiet"], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert not marker.exists(), "the file name was executed"
    for f in out.rglob("*.py"):
        _no_trace(f.read_text(), str(f))
