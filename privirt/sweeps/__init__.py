"""ε sweeps: accuracy of private item estimates over a grid of data sets, mechanisms and budgets.

A TOML file (``docs/sweeps.md``) describes data sets, mechanisms and budgets; the sweep runs
one cell per (data set, mechanism, ε, trial) over processes, appends a row per finished cell
to a CSV and can resume; :func:`build_report` draws the plots and tables.  Every cell uses
seeded noise, so sweeps measure accuracy and release nothing.

Modules: :mod:`.config` (schema), :mod:`.registry` (mechanism name → estimator),
:mod:`.grid` (cells, seeds), :mod:`.execute` (one cell), :mod:`.runner` (pool, lock, resume,
manifest; :mod:`._spawn`: an unguarded script where workers are spawned), :mod:`.results`
(the CSV), :mod:`.report` and :mod:`.reach` (the smallest ε reaching a target).  Names load
on first use.
Imports every layer below it (estimators, :mod:`privirt.private`, :mod:`privirt.plots`), never
:mod:`privirt.cli`.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "SweepConfig": "config",
    "DatasetSpec": "config",
    "DEFAULT_EPSILONS": "config",
    "load_config": "config",
    "parse_config": "config",
    "Estimator": "registry",
    "REGISTRY": "registry",
    "register": "registry",
    "Cell": "grid",
    "expand_grid": "grid",
    "cell_seed": "grid",
    "data_seed": "grid",
    "SweepStats": "runner",
    "run_sweep": "runner",
    "FolderLock": "runner",
    "RESULT_COLUMNS": "results",
    "PRIVACY_NOTE": "results",
    "METRICS": "results",
    "read_results": "results",
    "summarize": "report",
    "smallest_epsilon": "reach",
    "plot_dataset": "report",
    "build_report": "report",
    "ReportFiles": "report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'privirt.sweeps' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
