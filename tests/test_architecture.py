"""The package layout (docs/architecture.md): imports only go downward, no circles, small modules.

Every module of ``privirt/`` and ``mechanisms/`` is parsed with :mod:`ast`; every import in it
(top level, inside functions, relative or absolute, under ``TYPE_CHECKING`` too) is an edge of
the module graph.  The test fails on

* an import of a module in a higher layer than the importer's (:data:`LAYERS`);
* a cycle between modules, even within one layer (function-level imports included: a lazy
  import only hides a circle, it does not remove it);
* a module longer than :data:`MAX_LINES` lines that is not in :data:`LONG_MODULES`.

``privirt/__init__.py`` is the lazy public façade (it loads the modules that define the public
names on first use) and is exempt; any module may import it (for ``__version__``).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: the layers, lowest first; a module may import modules of its own layer and of lower ones.
#: A name matches a module and everything below it (``privirt.private`` matches
#: ``privirt.private.totals.api``); the longest matching name wins.
LAYERS: list[tuple[str, ...]] = [
    ("mechanisms",),
    ("privirt.exceptions", "privirt._seeds", "privirt._checks", "privirt._backend",
     "privirt._progress", "privirt._threads", "privirt._results", "privirt._files",
     "privirt._constants", "privirt.metrics"),
    ("privirt.data",),
    ("privirt.stats",),
    ("privirt.rasch",),
    ("privirt.fit",),
    ("privirt.bayes",),
    ("privirt.private",),
    ("privirt.plots", "privirt._plot_base"),
    ("privirt.sweeps",),
    ("privirt.serve", "privirt.client", "privirt._client_results", "privirt._client_transport"),
    ("privirt.cli", "privirt.__main__"),
]
#: the public façade: lazy imports of everything, importable from anywhere
FACADE = "privirt"

MAX_LINES = 600
#: modules allowed to be longer than MAX_LINES, with the reason and their own limit
LONG_MODULES: dict[str, tuple[int, str]] = {
    "privirt/data/responses.py": (
        650,
        "one concept: the Responses type and as_responses with its validation of wide, long and "
        "pattern tables (the file readers live in data/_files.py)",
    ),
}

#: modules removed in 0.2 (CHANGELOG.md); they must stay gone
REMOVED = ["privirt.sweep", "privirt.report", "privirt.gibbs", "privirt.mh",
           "privirt.posterior", "privirt.diagnostics"]


def _module_files() -> dict[str, Path]:
    files = {}
    for top in ("privirt", "mechanisms"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join(parts)] = path
    return files


MODULES = _module_files()


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    base = ".".join(parts)
    return f"{base}.{name}" if name else base


def _imports(module: str, path: Path) -> set[str]:
    """The project modules ``module`` imports (as dotted names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (_resolve(module, is_package, node.level, node.module) if node.level
                    else node.module or "")
            # `from package import submodule` imports the submodule
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            # `import privirt.x.y` names a module; keep the longest project module it names
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != module:
                found.add(target)
    return found


GRAPH: dict[str, set[str]] = {
    mod: (set() if mod == FACADE else _imports(mod, path)) for mod, path in MODULES.items()
}


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = index, len(name)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in "
                             "tests/test_architecture.py and to docs/architecture.md")
    return best


def test_every_module_has_a_layer():
    for module in MODULES:
        if module != FACADE:
            layer_of(module)


def test_imports_only_go_downward():
    upward = []
    for module, targets in GRAPH.items():
        if module == FACADE:
            continue
        for target in targets:
            if target != FACADE and layer_of(target) > layer_of(module):
                upward.append(f"{module} (layer {layer_of(module)}) imports {target} "
                              f"(layer {layer_of(target)})")
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    graph = {m: {t for t in ts if t != FACADE} for m, ts in GRAPH.items() if m != FACADE}
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_cycles():
    # the checker itself: a circle through a function-level import is found
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    src = "def f():\n    from .b import x\n"
    tree_imports = {n.module for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)}
    assert tree_imports == {"b"}


def test_no_module_is_too_long():
    too_long = []
    for path in MODULES.values():
        rel = path.relative_to(ROOT).as_posix()
        n_lines = len(path.read_text(encoding="utf-8").splitlines())
        limit = LONG_MODULES.get(rel, (MAX_LINES, ""))[0]
        if n_lines > limit:
            too_long.append(f"{rel}: {n_lines} lines (limit {limit})")
    assert not too_long, "split these modules:\n" + "\n".join(too_long)


def test_docs_name_every_long_module_and_its_limit():
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    head = " ".join(doc.split("```")[0].split())
    assert f"longer than {MAX_LINES} lines" in head
    for rel, (limit, _reason) in LONG_MODULES.items():
        assert f"`{rel}`, limit {limit}" in head, f"docs/architecture.md must name {rel} ({limit})"


def test_every_package_says_what_it_holds_and_may_import():
    for module, path in MODULES.items():
        if path.name != "__init__.py" or module == FACADE or module.startswith("privirt._data"):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert doc, f"{path.relative_to(ROOT)} needs a docstring"


def test_every_package_is_shipped():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = set(meta["tool"]["setuptools"]["packages"])
    packages = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    assert packages <= shipped, sorted(packages - shipped)


def test_cli_commands_do_not_import_each_other():
    commands = {m for m in MODULES if m.startswith("privirt.cli.")
                and not m.rpartition(".")[2].startswith("_")}
    for command in commands:
        assert not GRAPH[command] & commands, (command, GRAPH[command] & commands)


@pytest.mark.parametrize("name", REMOVED)
def test_removed_modules_are_gone(name):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)
    import privirt

    with pytest.raises(AttributeError):
        getattr(privirt, name.split(".")[1])


def test_public_names_and_submodules_resolve():
    import privirt

    for name in privirt.__all__:
        assert getattr(privirt, name) is not None, name
    for name in ("accounting", "metrics", "sensitivity", "plots", "sweeps", "fit", "bayes"):
        module = getattr(privirt, name)
        assert module.__name__.startswith("privirt."), module
