"""The smallest ε of a sweep's grid that reaches a target accuracy (see :mod:`.report`).

"Reaches" is deliberately strict: the smallest ε of the grid at which the mean over trials
meets the target *and keeps meeting it at every larger ε of the grid*, so that one lucky grid
point does not count.  The grid is the configured one (``sweep.json``), not the ε present in
the results: an ε whose cells were not all computed (an interrupted sweep) does not meet the
target, and the answer is marked incomplete when such an ε decides it.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .results import DEFAULT_METRIC, METRICS

__all__ = ["smallest_epsilon", "configured_grid", "configured_mechanisms"]

#: relative tolerance of "meets the target": a mean equal to it but for round-off meets it
_TIE_TOLERANCE = 1e-9

#: data set -> (ε of its grid, trials per cell)
Grid = Mapping[str, tuple[Sequence[float], int]]


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")


def _configured(manifest: Mapping[str, Any]) -> list:
    """The data set tables of a sweep's ``sweep.json`` (``config.datasets``; empty when the
    manifest does not hold them, e.g. a results file without its manifest)."""
    config = manifest.get("config") if isinstance(manifest, Mapping) else None
    datasets = config.get("datasets") if isinstance(config, Mapping) else None
    return datasets if isinstance(datasets, list) else []


def configured_grid(manifest: Mapping[str, Any]) -> dict[str, tuple[list[float], int]]:
    """Each data set's configured ε and trials, from a sweep's ``sweep.json`` (empty when the
    manifest does not hold them, e.g. a results file without its manifest)."""
    grid: dict[str, tuple[list[float], int]] = {}
    for ds in _configured(manifest):
        try:
            grid[str(ds["name"])] = ([float(e) for e in ds["epsilons"]], int(ds["trials"]))
        except (KeyError, TypeError, ValueError):
            continue
    return grid


def configured_mechanisms(manifest: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each data set's configured private mechanisms, from a sweep's ``sweep.json`` (empty
    when the manifest does not hold them): a mechanism with no cell yet has no row in the
    results, and was missing from the reach table of an interrupted sweep."""
    from .registry import nonprivate_names

    out: dict[str, list[str]] = {}
    for ds in _configured(manifest):
        try:
            out[str(ds["name"])] = [str(m) for m in ds["mechanisms"] if str(m) not in nonprivate_names()]
        except (KeyError, TypeError):
            continue
    return out


def cells(summary: pd.DataFrame) -> pd.Series:
    """Cells computed of each row of :func:`~privirt.sweeps.summarize`'s table: averaged, failed
    and undefined alike (an interrupted sweep has fewer than its trials)."""
    return summary["trials"] + summary["failed"] + summary.get("undefined", 0)


def _expected(summary: pd.DataFrame, dataset: str,
              grid: Grid | None) -> tuple[np.ndarray, int]:
    """The ε grid and trials per cell of ``dataset``: configured, joined with what the results
    hold (every ε any mechanism of it reached; the most cells any (mechanism, ε) has)."""
    rows = summary[(summary["dataset"] == dataset) & summary["epsilon"].notna()]
    eps = sorted(rows["epsilon"].astype(float).unique())
    done = cells(rows)
    trials = int(done.max()) if len(done) else 0
    if grid is not None and dataset in grid:
        conf_eps, conf_trials = grid[dataset]
        eps += [e for e in conf_eps if not np.isclose(e, eps, rtol=1e-9, atol=0).any()]
        trials = max(trials, int(conf_trials))
    return np.array(sorted(eps), dtype=float), trials


def smallest_epsilon(
    summary: pd.DataFrame, target: float, metric: str = DEFAULT_METRIC,
    grid: Grid | None = None, mechanisms: Mapping[str, Sequence[str]] | None = None,
) -> pd.DataFrame:
    """Smallest ε per (data set, private mechanism) whose mean ``metric`` meets ``target``.

    For error metrics "meets" means ``mean <= target``, for accuracies ``mean >= target``, up
    to a relative tolerance of 1e-9 (``max(1, |target|) · 1e-9``), so that a mean equal to the
    target but for round-off (mean of 0.6, 0.8, 1.0 = 0.7999999999999999) meets it.
    The ε returned is the smallest grid point from which the target is met at it and at every
    larger ε of the grid (NaN when the largest ε does not meet it).

    Parameters
    ----------
    summary : DataFrame
        :func:`~privirt.sweeps.summarize`'s table.
    target : float
        The target value of ``metric``.
    metric : str
        One of :data:`~privirt.sweeps.METRICS`.
    grid : mapping, optional
        Data set -> (configured ε, trials per cell), e.g. :func:`configured_grid` of the
        sweep's manifest.  An ε of the grid with fewer cells (ok, failed or undefined) than
        the trials, none included, does not meet the target.  Without it, the grid of a data
        set is every ε its mechanisms reached and the trials the most cells one has.
    mechanisms : mapping, optional
        Data set -> its configured private mechanisms (:func:`configured_mechanisms`); one
        without any cell in ``summary`` gets a row, NaN and incomplete.

    Returns
    -------
    DataFrame
        Columns ``dataset, mechanism, epsilon, mean_at_epsilon, incomplete``; ``incomplete``
        is True where an ε with cells not computed stopped the search, so that finishing the
        sweep (``--resume``) may give a smaller ε.
    """
    _check_metric(metric)
    lower = METRICS[metric][1]
    tol = _TIE_TOLERANCE * max(1.0, abs(target))
    rows = []
    private = summary[summary["epsilon"].notna()]
    for (dataset, mech), grp in private.groupby(["dataset", "mechanism"], sort=False):
        grid_eps, trials = _expected(summary, dataset, grid)
        eps, value, incomplete = math.nan, math.nan, False
        for e in grid_eps[::-1]:
            at = grp[np.isclose(grp["epsilon"].astype(float), e, rtol=1e-9, atol=0)]
            done = int(cells(at).sum())
            mean = float(at["mean"].iloc[0]) if len(at) else math.nan
            if done < trials:
                incomplete = True
                break
            if not (mean <= target + tol if lower else mean >= target - tol):
                break  # (a NaN mean does not meet it either)
            eps, value = float(at["epsilon"].iloc[0]), mean
        rows.append({"dataset": dataset, "mechanism": mech, "epsilon": eps,
                     "mean_at_epsilon": value, "incomplete": incomplete})
    seen = {(r["dataset"], r["mechanism"]) for r in rows}
    for dataset, mechs in (mechanisms or {}).items():
        rows += [{"dataset": dataset, "mechanism": mech, "epsilon": math.nan, "mean_at_epsilon": math.nan,
                  "incomplete": True} for mech in mechs if (dataset, mech) not in seen]
    return pd.DataFrame(rows, columns=["dataset", "mechanism", "epsilon", "mean_at_epsilon",
                                       "incomplete"])
