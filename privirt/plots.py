"""Plots for IRT results (matplotlib, from the ``plots`` extra).

Every function returns the matplotlib :class:`~matplotlib.figure.Figure` it drew on and,
when ``path`` is given, also saves it there (PNG, PDF or SVG by suffix).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["trace_plot"]


def _plt() -> Any:
    try:
        import matplotlib

        if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "cairo"):
            import os

            if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
                matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "plotting needs matplotlib: python -m pip install \"privirt[plots]\""
        ) from exc
    return plt


def _save(fig: Any, path: str | Path | None) -> Any:
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig


def trace_plot(
    posterior: Any,
    param: str,
    labels: Sequence[Any] | None = None,
    *,
    max_panels: int = 6,
    path: str | Path | None = None,
) -> Any:
    """Trace plots (draw against iteration, one line per chain) beside a density per label.

    Parameters
    ----------
    posterior : privirt.Posterior
        A posterior with draws kept.
    param : str
        Block name, e.g. ``"a"``, ``"b"``, ``"theta"``.
    labels : sequence, optional
        Which labels to show (default: the first ``max_panels``).
    """
    plt = _plt()
    draws = posterior.get_draws(param)
    index = posterior.labels[param]
    chosen = list(index[:max_panels]) if labels is None else list(labels)
    cols = [index.get_loc(lab) for lab in chosen]
    fig, axes = plt.subplots(len(cols), 2, figsize=(9, 1.8 * len(cols) + 0.6), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1]})
    for row, (lab, j) in enumerate(zip(chosen, cols)):
        for c in range(draws.shape[0]):
            axes[row, 0].plot(draws[c, :, j], lw=0.5, alpha=0.8, label=f"chain {c}")
            axes[row, 1].hist(draws[c, :, j], bins=40, histtype="step", density=True)
        axes[row, 0].set_ylabel(f"{param}[{lab}]")
    axes[-1, 0].set_xlabel("draw (after burn-in)")
    if draws.shape[0] > 1:
        axes[0, 0].legend(loc="upper right", fontsize="small", ncol=draws.shape[0])
    fig.suptitle(f"Trace and density: {param}")
    fig.tight_layout()
    return _save(fig, path)


__all__ += ["ideal_point_plot"]


def ideal_point_plot(
    posterior: Any,
    *,
    param: str = "theta",
    sort: bool = True,
    center: str = "mean",
    labels: Sequence[Any] | None = None,
    path: str | Path | None = None,
) -> Any:
    """Dot-and-interval plot of ideal points (or abilities): one row per person.

    The dot is the posterior mean (``center="mean"``) or median (``center="median"``), the
    line the central 95 % interval (2.5 % and 97.5 % quantiles); person labels are on the
    y axis.

    Parameters
    ----------
    posterior : privirt.Posterior
        E.g. the result of :func:`privirt.mh_2pl` or :func:`privirt.gibbs_2pno`.
    param : str
        The person block (default ``"theta"``).
    sort : bool
        Order rows by the point estimate (lowest at the bottom); otherwise keep the data
        order (first person at the top).
    center : {"mean", "median"}
        Which point estimate the dot shows.
    labels : sequence, optional
        Show only these persons.
    path : str or Path, optional
        Also save the figure there.
    """
    if center not in ("mean", "median"):
        raise ValueError(f"center must be 'mean' or 'median', got {center!r}")
    plt = _plt()
    summary = posterior.summary(param)
    if labels is not None:
        missing = [lab for lab in labels if lab not in summary.index]
        if missing:
            raise ValueError(f"unknown {param} label(s) {missing[:5]}")
        summary = summary.loc[list(labels)]
    point = summary["mean" if center == "mean" else "q50"]
    if sort:
        order = np.argsort(point.to_numpy(), kind="stable")
    else:
        order = np.arange(len(summary))[::-1]
    summary, point = summary.iloc[order], point.iloc[order]
    k = len(summary)
    ypos = np.arange(k)
    fig, ax = plt.subplots(figsize=(6.5, 0.6 + 0.28 * max(k, 3)))
    ax.hlines(ypos, summary["q2.5"], summary["q97.5"], color="0.45", lw=1.5)
    ax.plot(point, ypos, "o", color="C0", ms=5)
    ax.set_yticks(ypos)
    ax.set_yticklabels([str(x) for x in summary.index], fontsize="small" if k > 30 else None)
    ax.set_ylim(-0.7, k - 0.3)
    ax.axvline(0.0, color="0.8", lw=0.8, zorder=0)
    ax.set_xlabel(f"{param} (posterior {center}, 95 % interval)")
    ax.set_title("Ideal points" if param == "theta" else f"Posterior of {param}")
    fig.tight_layout()
    return _save(fig, path)
