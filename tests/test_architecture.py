"""The shape of the code: no import cycles, no private names across the translator/emitter line.

The import graph is built with ``ast`` from EVERY import statement of ``translator/`` and
``emitters/``, including imports inside functions (a lazy import that closes a cycle is
still a cycle). ``from pkg import name`` is an edge to the module ``pkg.name`` when that is a
module, else to ``pkg``.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("translator", "emitters")


def modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _targets(mod: str, is_pkg: bool, node: ast.AST, known: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for one import statement."""
    if isinstance(node, ast.Import):
        return [(a.name, []) for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    base = node.module or ""
    if node.level:
        parts = mod.split(".") if is_pkg else mod.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([base] if base else []))
    out = []
    for a in node.names:
        sub = f"{base}.{a.name}"
        out.append((sub, []) if sub in known else (base, [a.name]))
    return out


def _typing_only(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` / ``if typing.TYPE_CHECKING:`` / ``if False:`` (never executed)."""
    if isinstance(test, ast.Constant) and test.value is False:
        return True
    name = test.attr if isinstance(test, ast.Attribute) else test.id if isinstance(test, ast.Name) else ""
    return name == "TYPE_CHECKING"


def _runtime_imports(tree: ast.AST) -> list[ast.AST]:
    """Every import statement that can execute (all but those under a typing-only ``if``)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
            continue
        if isinstance(node, ast.If) and _typing_only(node.test):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """module → modules it imports (within the packages); and every (importer, module, name) imported by name."""
    known = modules(root, packages)
    edges: dict[str, set[str]] = {m: set() for m in known}
    names: list[tuple[str, str, str]] = []
    for mod, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _runtime_imports(tree):
            for target, taken in _targets(mod, path.name == "__init__.py", node, known):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != mod:
                    edges[mod].add(target)
                    names += [(mod, target, n) for n in taken]
    return edges, names


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles():
    found = cycles(import_graph()[0])
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_finder_finds_a_lazy_cycle(tmp_path):
    pkg = tmp_path / "translator"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "c.py").write_text("from translator import a\n")
    edges, _ = import_graph(tmp_path, ("translator",))
    assert cycles(edges) == [["translator.a", "translator.b"]]


def test_translator_imports_no_private_emitter_name():
    _, names = import_graph()
    bad = [(m, t, n) for m, t, n in names if m.startswith("translator") and t.startswith("emitters")
           and n.startswith("_")]
    assert not bad, bad
    edges, _ = import_graph()
    private = [(m, t) for m, es in edges.items() if m.startswith("translator") for t in es
               if t.startswith("emitters") and t.rpartition(".")[2].startswith("_")]
    assert not private, private


def test_backends_are_packages_with_the_same_inner_names():
    """Every built-in target is a package exposing TARGET, with a leaf registry module."""
    from translator.compile.target import get, names

    shared = {"__init__.py", "registry.py", "target.py", "codegen.py", "runtime.py"}
    families = {"elementwise.py", "shape.py", "nn.py", "quant.py", "rnn.py", "control.py", "attention.py",
                "misc.py"}
    for name in names():
        t = get(name)
        assert t.name == name
        folder = ROOT / "emitters" / name
        assert folder.is_dir(), f"{name} is not a package under emitters/"
        files = {p.name for p in folder.glob("*.py")}
        if t.reference:
            continue
        assert shared <= files, f"{name} lacks {sorted(shared - files)}"
        prefixed = sorted(f for f in files if f.startswith(name + "_") or f.startswith(name.rstrip("s") + "_ops"))
        assert not prefixed, f"{name}: inner modules repeat the backend's name: {prefixed}"
        from translator.compile.registry import RULES

        if any(b == name for (_, b) in RULES):  # a target with rules of its own files them by family
            assert files & families, f"{name} has none of the family modules {sorted(families)}"
    edges, _ = import_graph()
    for name in names(include_reference=False):
        reg = f"emitters.{name}.registry"
        inner = {e for e in edges.get(reg, ()) if e.startswith(f"emitters.{name}")}
        assert not inner, f"{reg} is not a leaf: imports {sorted(inner)}"


#: translator/'s rooms, bottom first: a room imports from its own room and those before it only.
#: ``proofs`` and ``cli`` share the top (neither imports the other); ``resolvers`` import no room.
LAYERS = (("table",), ("reference",), ("ir",), ("compile",), ("frontends",), ("run",), ("proofs", "cli"),
          ("resolvers",))


def room(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if parts[0] == "translator" and len(parts) > 1 else None


def layering_violations(edges: dict[str, set[str]], layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[str]:
    """(importer → imported) edges of translator/ that go up or sideways between rooms."""
    rank = {r: i for i, level in enumerate(layers) for r in level}
    out = []
    for mod, targets in sorted(edges.items()):
        a = room(mod)
        if a is None:
            continue
        for t in sorted(targets):
            b = room(t)
            if b is None or b == a:
                continue
            if a not in rank or b not in rank or rank[b] >= rank[a]:
                out.append(f"{mod} -> {t}")
    return out


def test_translator_top_level_holds_only_packages():
    loose = sorted(p.name for p in (ROOT / "translator").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside the rooms: {loose}"
    for d in (ROOT / "translator").iterdir():
        if d.is_dir() and not d.name.startswith(("_", ".")):
            assert (d / "__init__.py").is_file(), d
            assert d.name in {r for level in LAYERS for r in level}, f"translator/{d.name} is in no layer"
            doc = ast.get_docstring(ast.parse((d / "__init__.py").read_text(encoding="utf-8"))) or ""
            assert "import" in doc, f"translator/{d.name}/__init__.py does not say what it may import"


def test_rooms_import_only_the_rooms_below():
    bad = layering_violations(import_graph()[0])
    assert not bad, "imports against the layers: " + "; ".join(bad)


def test_the_layering_check_finds_an_upward_import(tmp_path):
    pkg = tmp_path / "translator"
    for sub, code in (("table", "def f():\n    from ..ir import graph\n"), ("ir", "from ..table import a\n")):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
        (pkg / sub / ("a.py" if sub == "table" else "graph.py")).write_text(code)
    (pkg / "__init__.py").write_text("")
    edges, _ = import_graph(tmp_path, ("translator",))
    assert layering_violations(edges) == ["translator.table.a -> translator.ir.graph"]
