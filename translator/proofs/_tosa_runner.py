"""The TOSA worker of translator/proofs/tosa.py, run by .venv-tosa/bin/python (tools/setup_tosa.sh).

It is a separate process because the tosa-tools wheel pins flatbuffers/numpy/ml-dtypes that
clash with the main venv. Protocol: one JSON request per stdin line, one JSON answer per
stdout line.

``{"cmd": "run", "mlir": <module text>, "inputs": <.npz path>, "out": <.npz path>}``
    ``tosa-opt --tosa-serialize`` turns the MLIR TOSA module into a TOSA flatbuffer,
    ``infer_shapes`` resolves its dynamic (``?``) dimensions from the input shapes, and Arm's
    reference model (``tosa_reference_model.run``) runs it in a forked child (a graph the
    model rejects aborts the process). The outputs are written to ``out`` as ``o0, o1, ...``
    and the answer lists the flatbuffer's operators (``{"ok": true, "ops": [...]}``).
``{"cmd": "resolves", "name": "tosa.abs"}``
    whether tosa-opt's TOSA dialect registers the op (``{"ok": true, "resolves": bool}``).
``{"cmd": "version"}``
    ``{"ok": true, "version": "tosa-tools 2026.8.0"}``

Errors answer ``{"ok": false, "error": <one paragraph>}``.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

BIN = Path(str(metadata.distribution("tosa-tools").locate_file("bin")))
TOSA_OPT = BIN / "tosa-opt"
INFER = BIN / "infer_shapes"
SCHEMA = BIN / "tosa.fbs"
_resolved: dict[str, bool] = {}


def _tail(text: str, n: int = 6) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return " | ".join(lines[:n])


def _serialize(work: Path, mlir: str) -> Path:
    src = work / "m.mlir"
    src.write_text(mlir)
    fb = work / "m.tosa"
    p = subprocess.run([str(TOSA_OPT), str(src), "--tosa-serialize", f"--tosa-flatbuffer-filename={fb}",
                        "-o", os.devnull], capture_output=True, text=True, timeout=60)
    if p.returncode != 0 or not fb.exists():
        raise RuntimeError(f"tosa-opt rejected the module: {_tail(p.stderr)}")
    return fb


def _ops(work: Path, mlir: str) -> list[str]:
    js = work / "m.json"
    subprocess.run([str(TOSA_OPT), str(work / "m.mlir"), "--tosa-serialize-json", f"--tosa-flatbuffer-filename={js}",
                    f"--tosa-flatbuffer-schema={SCHEMA}", "-o", os.devnull], capture_output=True, timeout=60)
    try:
        doc = json.loads(js.read_text())
    except Exception:  # noqa: BLE001 - the op list is evidence only
        return []
    return [o["op"] for r in doc.get("regions", []) for b in r.get("blocks", []) for o in b.get("operators", [])]


def _run(req: dict) -> dict:
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="tosa-") as d:
        work = Path(d)
        fb = _serialize(work, req["mlir"])
        ops = _ops(work, req["mlir"])
        with np.load(req["inputs"]) as z:
            inputs = [z[f"i{k}"] for k in range(len(z.files))]
        cfg = work / "shapes.json"
        cfg.write_text(json.dumps({"tosa_file": str(fb),
                                   "shapes": {f"TosaInput_{k}": list(x.shape) for k, x in enumerate(inputs)}}))
        p = subprocess.run([str(INFER), str(cfg)], cwd=work, capture_output=True, text=True, timeout=60)
        m = re.search(r'saved as "([^"]+)"', p.stdout + p.stderr)
        resolved = (work / m.group(1)) if m else work / f"resolved_{fb.name}"
        if p.returncode != 0 or not resolved.exists():
            raise RuntimeError(f"infer_shapes failed: {_tail(p.stdout + p.stderr)}")
        err = work / "child.err"
        pid = os.fork()
        if pid == 0:  # the child runs the reference model: an invalid graph aborts only it
            code = 1
            try:
                fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                import tosa_reference_model as trm

                outs, status = trm.run(resolved.read_bytes(), inputs)
                if str(status).endswith("TOSA_VALID"):
                    np.savez(req["out"], **{f"o{k}": np.asarray(o) for k, o in enumerate(outs)})
                    code = 0
                else:
                    print(f"graph status {status}", flush=True)
            except BaseException as e:  # noqa: BLE001 - reported through the exit code and err file
                print(f"{type(e).__name__}: {e}", flush=True)
            os._exit(code)
        _, st = os.waitpid(pid, 0)
        if st != 0:
            text = err.read_text(errors="replace") if err.exists() else ""
            raise RuntimeError(f"the reference model rejected the graph: {_tail(text)}")
        return {"ok": True, "ops": ops}


def _resolves(name: str) -> bool:
    if name not in _resolved:
        with tempfile.TemporaryDirectory(prefix="tosa-") as d:
            src = Path(d) / "r.mlir"
            src.write_text(f'func.func @f() {{\n  "{name}"() : () -> ()\n  return\n}}\n')
            p = subprocess.run([str(TOSA_OPT), str(src), "-o", os.devnull], capture_output=True, text=True, timeout=60)
            msg = p.stderr
            # a registered op fails its verifier (operand counts); an unknown one is "unregistered"
            _resolved[name] = name.startswith("tosa.") and "unregistered operation" not in msg \
                and "does not allow unknown operations" not in msg and "not found for custom op" not in msg
    return _resolved[name]


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            cmd = req.get("cmd")
            if cmd == "run":
                ans = _run(req)
            elif cmd == "resolves":
                ans = {"ok": True, "resolves": _resolves(req["name"])}
            elif cmd == "version":
                ans = {"ok": True, "version": f"tosa-tools {metadata.version('tosa-tools')}"}
            else:
                ans = {"ok": False, "error": f"unknown command {cmd!r}"}
        except Exception as e:  # noqa: BLE001 - every failure is an answer
            ans = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(ans) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
