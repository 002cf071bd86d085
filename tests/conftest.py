from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
SEEDS = ROOT.parent / "shared" / "seeds"

import json

import pytest

_VERIFIED: dict = {}


@pytest.fixture
def record_verified():
    """Record a passing (op, backend, dtype) cell; written to verified.json at the end."""
    def rec(op_id: str, backend: str, dtype: str, how: str, by: str = "tests/test_ops.py", evidence: str = "") -> None:
        cell = _VERIFIED.setdefault(op_id, {}).setdefault(backend, {"status": how, "dtypes": [], "by": by})
        if evidence:  # the runtime and version that ran it (execution proofs of the non-target APIs)
            cell["runtime"] = evidence
        if how == "structural":  # some dtype only built and saved: the cell claims no more than that
            cell["status"] = how
        if dtype not in cell["dtypes"]:
            cell["dtypes"].append(dtype)
            cell["dtypes"].sort()
    return rec


def _verified_dir() -> Path:
    """This run's record folder (one per controller process: two runs at once never mix records;
    xdist workers are the controller's children)."""
    run = os.getpid() if os.environ.get("PYTEST_XDIST_WORKER") is None else os.getppid()
    return ROOT / ".pytest_cache" / "verified" / str(run)


def pytest_sessionstart(session):
    """The controller starts from a clean record folder: an interrupted earlier run's worker
    files must never be merged into this run's verified.json."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        import shutil

        shutil.rmtree(_verified_dir(), ignore_errors=True)
        d = _verified_dir().parent  # folders of runs whose controller is gone
        for old in d.glob("*") if d.is_dir() else ():
            if old.name.isdigit() and not Path(f"/proc/{old.name}").exists():
                shutil.rmtree(old, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if _VERIFIED:
        d = _verified_dir()
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{worker or 'main'}.json").write_text(json.dumps(_VERIFIED))
    if worker is None and exitstatus in (0, 1):
        if session.config.getoption("keyword", "") or session.config.getoption("lf", False):
            # a -k / --lf selection is not a backend's whole column: it must not replace one
            import shutil

            shutil.rmtree(_verified_dir(), ignore_errors=True)
            return
        _merge_verified()


def _merge_verified() -> None:
    """Controller: merge the workers' records into verified.json (only after a test_ops run)."""
    d = _verified_dir()
    if not d.is_dir():
        return
    merged: dict = {}
    for f in sorted(d.glob("*.json")):
        for op_id, cells in json.loads(f.read_text()).items():
            for backend, cell in cells.items():
                m = merged.setdefault(op_id, {}).setdefault(backend, {"status": cell["status"], "dtypes": [], "by": cell["by"]})
                if cell.get("runtime"):
                    m["runtime"] = cell["runtime"]
                m["dtypes"] = sorted(set(m["dtypes"]) | set(cell["dtypes"]))
                if cell["status"] == "structural":
                    m["status"] = "structural"
        f.unlink()
    import shutil

    shutil.rmtree(d, ignore_errors=True)
    if merged:
        out = ROOT / "verified.json"
        # a run of some backends (OPBRIDGE_TEST_BACKENDS=...) replaces only those backends' records
        ran = {b for cells in merged.values() for b in cells}
        try:
            previous = json.loads(out.read_text())
        except (OSError, ValueError):
            previous = {}
        for op_id, cells in previous.items():
            for backend, cell in cells.items():
                if backend not in ran:
                    merged.setdefault(op_id, {})[backend] = cell
        ordered = {k: dict(sorted(v.items())) for k, v in sorted(merged.items())}
        tmp = out.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(ordered, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, out)


# ----------------------------------------------------------------------------- real models
#: Exported by bench/export_models.py in the bench venv (torchvision lives there only).
MODELS_DIR = ROOT / "bench" / ".cache" / "models"
PEERS_PY = ROOT / "bench" / ".venv-peers" / "bin" / "python"
MODEL_NAMES = ("resnet18", "mobilenet_v3_small", "resnet50", "mobilenet_v3_large", "efficientnet_b0", "vit_small",
               "transformer_encoder", "gpt2_blocks")


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """bench/.cache/models with every model of MODEL_NAMES exported (once; a file lock keeps
    pytest-xdist workers from exporting the same files at the same time)."""
    import fcntl
    import subprocess

    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    with open(MODELS_DIR / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [m for m in MODEL_NAMES if not (MODELS_DIR / f"{m}.onnx").is_file()]
        if missing:
            if not PEERS_PY.exists():
                subprocess.run(["bash", str(ROOT / "bench" / "setup_peers.sh")], check=True, timeout=1800)
            subprocess.run([str(PEERS_PY), str(ROOT / "bench" / "export_models.py"), "--models", ",".join(missing)],
                           check=True, timeout=1800)
    return MODELS_DIR


# ----------------------------------------------------------------------------- node-test gates
def run_nodetests(backend: str, peers: str, tmp_path: Path, timeout: int) -> dict:
    """``bench/nodetests.py --backend B --peers P --json`` as a subprocess; its JSON report.
    (The slow acceptance gates of every backend call this.)"""
    import subprocess

    out = tmp_path / f"{backend}.json"
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "nodetests.py"), "--backend", backend, "--peers", peers,
                        "--json", str(out), "-q"], capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    keep = os.environ.get("OPBRIDGE_NODETESTS_KEEP")  # a folder: keep each report for the closing figures
    if keep:
        import shutil

        os.makedirs(keep, exist_ok=True)
        shutil.copy(out, os.path.join(keep, f"{backend}.json"))
    return json.loads(out.read_text())


def convert_keeping_batch(model: object, targets: "tuple[str, ...] | list[str]", out: object) -> dict:
    """``opbridge.convert`` to ``targets``; asserts each converted, kept the input ``x``'s
    ``batch`` symbolic (nothing fixed) and passed its check at every size of
    ``dims.CHECK_SIZES`` (1 and 3). Returns the records by target."""
    import opbridge
    from translator.ir import dims

    res = opbridge.convert(str(model), to=",".join(targets), out=str(out))
    by = {r["target"]: r for r in res["targets"]}
    for t in targets:
        rec = by[t]
        assert rec["status"] == "ok", (t, rec)
        assert "fixed_dims" not in rec, (t, rec)
        assert "batch" in rec["dynamic_dims"]["x"], (t, rec)
        assert rec["check"]["status"] == "pass", (t, rec)
        assert [s["batch"] for s in rec["check"]["sizes"]] == list(dims.CHECK_SIZES) == [1, 3], (t, rec)
    assert res["written"], res
    return by
