"""Values that several layers share are written once, in ``privirt/_constants.py``, and
imported everywhere else: the package's source is parsed with :mod:`ast` and a literal copy
outside that module fails the test (docstrings, which cannot cheaply import a value, are left
out of the scan)."""

from __future__ import annotations

import ast
from pathlib import Path

from privirt import _constants

ROOT = Path(__file__).resolve().parents[1]
DEFINING = ROOT / "privirt" / "_constants.py"


def _trees() -> dict[str, ast.Module]:
    return {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text(encoding="utf-8"))
            for path in sorted((ROOT / "privirt").rglob("*.py")) if path != DEFINING}


TREES = _trees()


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring nodes of ``tree`` (module, classes, functions)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _parents(tree: ast.Module) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _names(node: ast.AST) -> set[str]:
    """The identifiers written in ``node``: names, attributes, keywords and parameters."""
    found = set()
    for sub in ast.walk(node):
        for attr in ("id", "attr", "arg"):
            value = getattr(sub, attr, None)
            if isinstance(value, str):
                found.add(value)
    return found


def _where_used(node: ast.AST, parents: dict[int, ast.AST]) -> set[str]:
    """The identifiers of the context a constant is written in: the keyword argument it is passed
    as, or the parameter it is the default of, else the header of the compound statement or the whole simple statement around it."""
    parent = parents.get(id(node))
    if isinstance(parent, ast.keyword):
        return {parent.arg} if parent.arg else set()
    if isinstance(parent, ast.arguments):
        positional = parent.posonlyargs + parent.args
        pairs = list(zip(positional[len(positional) - len(parent.defaults):], parent.defaults))
        pairs += [(a, d) for a, d in zip(parent.kwonlyargs, parent.kw_defaults) if d is not None]
        return {a.arg for a, d in pairs if d is node}
    while parent is not None and not isinstance(parent, ast.stmt):
        node, parent = parent, parents.get(id(parent))
    if isinstance(parent, (ast.If, ast.While)):
        return _names(parent.test)
    if isinstance(parent, (ast.For, ast.With, ast.FunctionDef, ast.ClassDef, ast.Try)):
        return _names(node)
    return _names(parent) if parent is not None else set()


def default_delta_copies(tree: ast.Module) -> list[int]:
    """Lines of ``tree`` that write the default δ (1e-4) as a literal where a δ is meant (a
    context that names a ``delta``), or a text that states it."""
    parents, docs = _parents(tree), _docstrings(tree)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
            continue
        if isinstance(node.value, float) and node.value == _constants.DEFAULT_DELTA:
            if any("delta" in name.lower() for name in _where_used(node, parents)):
                lines.append(node.lineno)
        elif isinstance(node.value, str) and id(node) not in docs \
                and _constants.DEFAULT_DELTA_TEXT in node.value:
            lines.append(node.lineno)
    return sorted(lines)


def test_the_default_delta_is_written_once():
    copies = [f"{path}:{line}" for path, tree in TREES.items()
              for line in default_delta_copies(tree)]
    assert not copies, ("the default δ written out again (import DEFAULT_DELTA or "
                        "DEFAULT_DELTA_TEXT from privirt._constants):\n" + "\n".join(copies))


def test_the_default_delta_scan_finds_copies():
    src = ('DEFAULT_DELTA = 1e-4\n'
           'def f(x, delta=1e-4, tol=1e-4):\n'
           '    """δ defaults to 1e-4 (a docstring: not scanned)."""\n'
           '    g(x, delta=1e-4, tol=1e-4)\n'
           '    d = ledger.delta if ledger is not None else 1e-4\n'
           '    if step < 1e-4 * gain:\n'
           '        print(f"({x}, 1e-4)-DP")\n'
           '    return np.geomspace(1e-4, 3.0, 30)\n')
    assert default_delta_copies(ast.parse(src)) == [1, 2, 4, 5, 7]


def test_the_default_delta_is_the_one_value_everywhere():
    from privirt.private import _inputs
    from privirt.sweeps import config

    assert _constants.DEFAULT_DELTA == 1e-4 and str(_constants.DEFAULT_DELTA_TEXT) == "1e-4"
    assert _inputs.DEFAULT_DELTA is _constants.DEFAULT_DELTA
    assert config.DEFAULT_DELTA is _constants.DEFAULT_DELTA


def collections_of(tree: ast.Module, names: tuple[str, ...]) -> list[int]:
    """Lines of ``tree`` with a tuple, list or set (a ``Literal[...]``'s too) that writes out
    every one of ``names`` as a string literal."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            written = {e.value for e in node.elts if isinstance(e, ast.Constant)}
            if set(names) <= written:
                lines.append(node.lineno)
    return sorted(lines)


def test_the_missing_data_domains_are_written_once():
    copies = [f"{path}:{line}" for path, tree in TREES.items()
              for line in collections_of(tree, _constants.MISSING_DOMAINS)]
    assert not copies, ("the missing-data domains written out again (import MISSING_DOMAINS "
                        "from privirt._constants):\n" + "\n".join(copies))


def test_the_collection_scan_finds_copies():
    src = ('A = ("none", "mcar")\n'
           'x: Literal["mcar", "none"]\n'
           'p.add_argument("--missing", choices=["none", "mcar", "other"])\n'
           'B = ("eb", "none")\n'
           'if missing == "mcar" or missing in MISSING_DOMAINS:\n'
           '    pass\n')
    assert collections_of(ast.parse(src), ("none", "mcar")) == [1, 2, 3]


def test_the_missing_data_domains_are_the_one_value_everywhere():
    import typing

    from privirt.private import methods
    from privirt.private.totals import api as totals_api
    from privirt.private.twopl import release

    assert _constants.MISSING_DOMAINS == ("none", "mcar")
    for value in (methods.DOMAINS, totals_api.MISSING_DOMAINS, release.MISSING_DOMAINS):
        assert value is _constants.MISSING_DOMAINS
    assert methods.get("totals").missing == methods.get("twopl").missing == ("none", "mcar")
    try:
        from privirt.serve.models import DatasetInfo
    except ImportError:  # the serve extra is not installed
        return
    assert typing.get_args(DatasetInfo.model_fields["missing"].annotation) == ("none", "mcar")


def test_the_mechanism_names_are_written_once():
    copies = [f"{path}:{line}" for path, tree in TREES.items()
              for line in collections_of(tree, _constants.MECHANISMS)]
    assert not copies, ("the mechanism names written out again (import MECHANISMS from "
                        "privirt._constants):\n" + "\n".join(copies))


def test_the_mechanism_names_are_the_one_value_everywhere(capsys):
    import typing

    import pytest

    from privirt.cli import main
    from privirt.private import methods
    from privirt.private.counts import api as counts_api

    assert _constants.MECHANISMS == ("gaussian", "laplace", "randomized_response")
    assert methods.get("spectral").mechanisms is _constants.MECHANISMS
    assert typing.get_args(counts_api.Mechanism) == _constants.MECHANISMS
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    assert "{gaussian,laplace,randomized_response}" in capsys.readouterr().out
