"""Every public function whose docstring has a numpydoc ``Parameters`` section lists every
parameter of its signature there (``release_totals`` lacked ``client``, ``trace_plot``
``max_panels`` and ``path``, ``parse_config`` ``source_text``); functions that describe their
parameters in prose ("Parameters are those of ...") have no section and are not checked."""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

import privirt

_PACKAGES = ["privirt", "privirt.data", "privirt.stats", "privirt.rasch", "privirt.private",
             "privirt.bayes", "privirt.fit", "privirt.sweeps", "privirt.plots"]


def _public_callables():
    seen = {}
    for name in _PACKAGES:
        try:
            module = importlib.import_module(name)
        except ImportError:  # pragma: no cover - an extra's module
            continue
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr, None)
            if inspect.isclass(obj):
                continue
            if (callable(obj) and getattr(obj, "__module__", "").startswith("privirt")
                    and re.search(r"\n\s*Parameters\n\s*-+\n", inspect.getdoc(obj) or "")):
                seen.setdefault(f"{obj.__module__}.{obj.__qualname__}", obj)
    return seen


_DOCUMENTED = _public_callables()


def _listed(doc: str) -> set[str]:
    match = re.search(r"\n\s*Parameters\n\s*-+\n(.*?)(?:\n\s*\n\s*[A-Z][a-z]+\n\s*-+\n|\Z)", doc, re.S)
    names = set()
    for line in match.group(1).splitlines():
        head = re.match(r"^\s{0,8}(\*{0,2}[A-Za-z_][\w, *]*?)\s*(?::|$)", line)
        if head and not line.startswith(" " * 9):
            names.update(n.strip().lstrip("*") for n in head.group(1).split(","))
    return names


def test_the_check_reaches_the_functions_it_was_written_for():
    assert {"privirt.private.totals.api.release_totals", "privirt.plots.trace_plot",
            "privirt.sweeps.config.parse_config"} <= set(_DOCUMENTED)


@pytest.mark.parametrize("qualname", sorted(_DOCUMENTED))
def test_a_parameters_section_lists_every_parameter(qualname):
    fn = _DOCUMENTED[qualname]
    doc = inspect.getdoc(fn) or ""
    params = [p.name for p in inspect.signature(fn).parameters.values()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in ("self", "cls")]
    missing = [p for p in params if p not in _listed(doc)]
    assert not missing, f"{qualname}: {missing} not in its Parameters section"
