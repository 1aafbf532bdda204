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
    missing = [lab for lab in chosen if lab not in index]
    if missing:
        raise ValueError(f"unknown {param} label(s) {missing[:5]}; e.g. {list(index[:3])}")
    if not chosen:
        raise ValueError("labels is empty: give at least one label (or None for the first "
                         f"{max_panels})")
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


# ---------------------------------------------------------------------------------------
# 2PNO Gibbs sampler plots (Sheng, Welling & Zhu 2014, Figs. 9 and 10)
# ---------------------------------------------------------------------------------------
__all__ += ["item_response_curves", "theta_density"]


def _posterior_means(posterior: Any, param: str) -> np.ndarray:
    if getattr(posterior, "draws", None) is not None:  # cheap: no diagnostics needed
        return np.asarray(posterior.get_draws(param), dtype=float).mean(axis=(0, 1))
    return np.asarray(posterior.summary(param)["mean"], dtype=float)


def item_response_curves(
    posterior: Any,
    items: Sequence[Any] | None = None,
    *,
    model: str = "2pno",
    band: bool = True,
    theta_range: tuple[float, float] = (-4.0, 4.0),
    path: str | Path | None = None,
) -> Any:
    """Item response curves at the posterior means (the paper's Fig. 9).

    Parameters
    ----------
    posterior : privirt.Posterior
        A posterior with blocks ``"a"`` and ``"b"`` (2PNO Gibbs or 2PL MH).
    items : sequence, optional
        Item labels to draw (default: all items, at most 20).
    model : {"2pno", "2pl"}
        Response function: Φ(aθ − b) for ``"2pno"``, logistic(aθ − b) for ``"2pl"``.
    band : bool
        When draws were kept, shade the pointwise 95% posterior band of each curve.
    theta_range : (float, float)
        Range of θ on the horizontal axis.
    path : str or Path, optional
        Save the figure there as well.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from scipy import special

    if model not in ("2pno", "2pl"):
        raise ValueError(f"model must be '2pno' or '2pl', got {model!r}")
    link = special.ndtr if model == "2pno" else special.expit
    plt = _plt()
    index = posterior.labels["a"]
    chosen = list(index[:20]) if items is None else list(items)
    missing = [lab for lab in chosen if lab not in index]
    if missing:
        raise ValueError(f"unknown item label(s) {missing[:5]}")
    cols = [index.get_loc(lab) for lab in chosen]
    a_mean, b_mean = _posterior_means(posterior, "a"), _posterior_means(posterior, "b")
    grid = np.linspace(theta_range[0], theta_range[1], 201)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    draws_kept = getattr(posterior, "draws", None) is not None
    for lab, j in zip(chosen, cols):
        line, = ax.plot(grid, link(a_mean[j] * grid - b_mean[j]), lw=1.4, label=str(lab))
        if band and draws_kept:
            a_d = posterior.get_draws("a")[:, :, j].ravel()
            b_d = posterior.get_draws("b")[:, :, j].ravel()
            step = max(1, a_d.size // 500)
            curves = link(np.outer(a_d[::step], grid) - b_d[::step, None])
            lo, hi = np.quantile(curves, [0.025, 0.975], axis=0)
            ax.fill_between(grid, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
    ax.set_xlabel("θ")
    ax.set_ylabel("P(correct)")
    ax.set_ylim(0, 1)
    ax.set_title(f"Item response curves ({model.upper()}, posterior means)")
    if len(chosen) <= 12:
        ax.legend(fontsize="small", ncol=2, loc="lower right")
    fig.tight_layout()
    return _save(fig, path)


def theta_density(
    posterior: Any,
    *,
    bins: int = 40,
    path: str | Path | None = None,
) -> Any:
    """Density of the persons' posterior mean abilities θ (the paper's Fig. 10).

    A histogram of the posterior means with a kernel density estimate and the N(0, 1)
    prior density for reference.

    Parameters
    ----------
    posterior : privirt.Posterior
        A posterior with a ``"theta"`` block.
    bins : int
        Histogram bins.
    path : str or Path, optional
        Save the figure there as well.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from scipy import stats

    plt = _plt()
    means = _posterior_means(posterior, "theta")
    fig, ax = plt.subplots(figsize=(6.5, 4))
    ax.hist(means, bins=bins, density=True, alpha=0.35, color="tab:blue", label="posterior means")
    lo, hi = min(means.min(), -3.5), max(means.max(), 3.5)
    grid = np.linspace(lo, hi, 300)
    if means.size > 1 and np.ptp(means) > 0:
        ax.plot(grid, stats.gaussian_kde(means)(grid), color="tab:blue", lw=1.6, label="KDE")
    ax.plot(grid, stats.norm.pdf(grid), color="grey", ls="--", lw=1.0, label="N(0, 1) prior")
    ax.set_xlabel("posterior mean of θ")
    ax.set_ylabel("density")
    ax.set_title(f"Posterior θ ({means.size} persons)")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return _save(fig, path)


# ---------------------------------------------------------------------------------------
# 2PL Metropolis–Hastings / ideal-point plots
# ---------------------------------------------------------------------------------------
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
