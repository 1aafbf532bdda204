"""Plots for IRT results (matplotlib, from the ``plots`` extra).

Every function returns the matplotlib :class:`~matplotlib.figure.Figure` it drew on and,
when ``path`` is given, also saves it there, creating missing folders (PNG, PDF or SVG by
suffix; a path without a suffix matplotlib writes is refused before anything is drawn).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._plot_base import _literal, _names, _plt, _save, fallback_fonts

__all__ = ["trace_plot"]


@fallback_fonts
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
    max_panels, path
        How many labels to show by default; a file to save the figure to (see the module).
    """
    plt = _plt(path)
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
        axes[row, 0].set_ylabel(f"{param}[{_literal(lab)}]")
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


@fallback_fonts
def item_response_curves(
    posterior: Any,
    items: Sequence[Any] | None = None,
    *,
    model: str | None = None,
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
        Item labels to draw (default: all items, at most 20).  Up to 20 items get distinct
        colours (``tab10``, or ``tab20`` beyond 10) and a legend; more are drawn without one.
    model : {"2pno", "2pl"}, optional
        Response function: Φ(aθ − b) for ``"2pno"``, logistic(aθ − b) for ``"2pl"``.  Default:
        the posterior's own (``posterior.model``: ``"2pno"`` for ``gibbs_2pno``, ``"2pl"`` for
        ``mh_2pl``), else ``"2pno"``; one that contradicts it is refused.
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

    from .data._labels import item_labels

    own = getattr(posterior, "model", "")
    if model is None:
        model = own if own in ("2pno", "2pl") else "2pno"
    if model not in ("2pno", "2pl"):
        raise ValueError(f"model must be '2pno' or '2pl', got {model!r}")
    if own in ("2pno", "2pl") and model != own:
        raise ValueError(f"model={model!r} contradicts the posterior's model ({own!r}): its a and b are "
                         f"those of the {own} response function; leave model out")
    link = special.ndtr if model == "2pno" else special.expit
    plt = _plt(path)
    index = posterior.labels["a"]
    chosen = list(index[:20]) if items is None else list(item_labels(items))
    missing = [lab for lab in chosen if lab not in index]
    if missing:
        raise ValueError(f"unknown item label(s) {missing[:5]}")
    if not chosen:
        raise ValueError("items is empty: give at least one item label (or None for the first 20)")
    grid = _theta_range(None, theta_range, n_points=201)
    cols = [index.get_loc(lab) for lab in chosen]
    a_mean, b_mean = _posterior_means(posterior, "a"), _posterior_means(posterior, "b")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    draws_kept = getattr(posterior, "draws", None) is not None
    labelled = len(chosen) <= 20  # (distinct colours and a legend; beyond, the default cycle)
    cmap = plt.get_cmap("tab10" if len(chosen) <= 10 else "tab20")
    for rank, (lab, j) in enumerate(zip(chosen, cols)):
        line, = ax.plot(grid, link(a_mean[j] * grid - b_mean[j]), lw=1.4, label=_literal(lab),
                        **({"color": cmap(rank)} if labelled else {}))
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
    if labelled:
        ax.legend(fontsize="small", ncol=2, loc="lower right")
    fig.tight_layout()
    return _save(fig, path)


@fallback_fonts
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

    plt = _plt(path)
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


#: the most rows :func:`ideal_point_plot` draws by default (a House of Representatives fits)
IDEAL_POINT_ROWS = 500


@fallback_fonts
def ideal_point_plot(
    posterior: Any,
    *,
    param: str = "theta",
    sort: bool = True,
    center: str = "mean",
    labels: Sequence[Any] | None = None,
    max_rows: int | None = IDEAL_POINT_ROWS,
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
    max_rows : int or None, optional
        The most rows drawn (default 500: 0.28 inch a row, a figure 140 inches tall); more
        are refused in one line (pass ``labels``, or ``None`` for no limit).
    path : str or Path, optional
        Also save the figure there.
    """
    if center not in ("mean", "median"):
        raise ValueError(f"center must be 'mean' or 'median', got {center!r}")
    plt = _plt(path)
    summary = posterior.summary(param)
    if labels is not None:
        labels = list(labels)
        missing = [lab for lab in labels if lab not in summary.index]
        if missing:
            raise ValueError(f"unknown {param} label(s) {missing[:5]}")
        if not labels:
            raise ValueError("labels is empty: give at least one label (or None for all)")
        summary = summary.loc[labels]
    if max_rows is not None and len(summary) > max_rows:
        raise ValueError(f"{len(summary)} rows are more than max_rows={max_rows} (one a person: a figure "
                         f"{0.28 * len(summary) / 12:.0f} feet tall); pass labels= the persons to show, "
                         "or max_rows=None")
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
    ax.set_yticklabels([_literal(x) for x in summary.index], fontsize="small" if k > 30 else None)
    ax.set_ylim(-0.7, k - 0.3)
    ax.axvline(0.0, color="0.8", lw=0.8, zorder=0)
    ax.set_xlabel(f"{param} (posterior {center}, 95 % interval)")
    ax.set_title("Ideal points" if param == "theta" else f"Posterior of {param}")
    fig.tight_layout()
    return _save(fig, path)


# ---------------------------------------------------------------------------------------
# Rasch model checks: information, Wright map, Andersen's graphical test
# ---------------------------------------------------------------------------------------
__all__ += ["item_information_curves", "test_information_curve", "wright_map", "andersen_plot"]


def _theta_range(beta: Any, theta_range: tuple[float, float] | None,
                 n_points: int = 241) -> np.ndarray:
    from .fit.information import theta_grid

    if theta_range is None and beta is not None:
        return theta_grid(beta, n_points=n_points)
    try:
        lo, hi = (float(v) for v in theta_range)  # (2,), "ab", None: not two numbers
    except (TypeError, ValueError):
        lo = hi = np.nan
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ValueError(f"theta_range must be two finite numbers, low < high, got {theta_range!r}")
    return np.linspace(lo, hi, n_points)


@fallback_fonts
def item_information_curves(
    beta: Any,
    items: Sequence[Any] | None = None,
    *,
    theta_range: tuple[float, float] | None = None,
    path: str | Path | None = None,
) -> Any:
    """Rasch item information curves ``P(1 − P)``, one per item.

    Parameters
    ----------
    beta : item estimate, pandas.Series or array-like
        Item difficulties (e.g. the result of :func:`privirt.cmle_estimate`).
    items : sequence, optional
        Item labels to draw (default: all).  Up to 12 items get a legend; more are coloured
        by difficulty with a colour bar (pass ``items`` to pick out a few by name).
    theta_range : (float, float), optional
        Horizontal range (default: the difficulties with 3 logits either side, at least
        −4 to 4).
    path : str or Path, optional
        Also save the figure there.
    """
    from .fit.information import item_information
    from .fit._inputs import as_beta
    from .data._labels import item_labels

    b = as_beta(beta)
    if items is not None:
        chosen = list(item_labels(items))
        missing = [lab for lab in chosen if lab not in b.index]
        if missing:
            raise ValueError(f"unknown item label(s) {missing[:5]}; e.g. {list(b.index[:3])}")
        if not chosen:
            raise ValueError("items is empty: give at least one item label (or None for all)")
        b = b.loc[chosen]
    plt = _plt(path)
    grid = _theta_range(b, theta_range)
    info = item_information(b, grid)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    order = np.argsort(b.to_numpy(), kind="stable")
    if len(b) <= 12:
        cmap = plt.get_cmap("tab10" if len(b) <= 10 else "tab20")
        for rank, j in enumerate(order):
            ax.plot(grid, info.iloc[:, j], lw=1.4, color=cmap(rank), label=_literal(b.index[j]))
        ax.legend(title="item (easiest first)", fontsize="small", ncol=2 if len(b) > 6 else 1,
                  loc="upper right", framealpha=0.9)
    else:  # too many for a legend: colour by difficulty, with a colour bar
        from matplotlib.colors import Normalize

        norm = Normalize(float(b.min()), float(b.max()))
        cmap = plt.get_cmap("viridis")
        for j in order:
            ax.plot(grid, info.iloc[:, j], lw=1.0, color=cmap(norm(b.iloc[j])), alpha=0.85)
        bar = fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.02)
        bar.set_label("item difficulty β")
    ax.set_xlim(grid[0], grid[-1])
    ax.set_ylim(0, 0.3)
    ax.set_xlabel("ability θ (logits)")
    ax.set_ylabel("item information P(1 − P)")
    ax.set_title(f"Item information curves ({len(b)} items)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


@fallback_fonts
def test_information_curve(
    beta: Any,
    *,
    theta: Any = None,
    theta_range: tuple[float, float] | None = None,
    path: str | Path | None = None,
) -> Any:
    """Test information ``Σ P(1 − P)`` (left axis) and the standard error ``1/√I`` (right
    axis) against ability.

    Parameters
    ----------
    beta : item estimate, pandas.Series or array-like
        Item difficulties.
    theta : array-like or DataFrame, optional
        Person abilities (e.g. :func:`privirt.estimate_abilities`): drawn as a rug of ticks
        along the bottom so that one sees where the persons are measured precisely.
    theta_range : (float, float), optional
        Horizontal range (default: the difficulties with 3 logits either side).
    path : str or Path, optional
        Also save the figure there.
    """
    from .fit._inputs import ability_values, as_beta
    from .fit.information import test_information

    plt = _plt(path)

    b = as_beta(beta)
    grid = _theta_range(b, theta_range)
    table = test_information(b, grid)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(grid, table["information"], color="tab:blue", lw=1.8, label="test information")
    ax.set_xlabel("ability θ (logits)")
    ax.set_ylabel("test information", color="tab:blue")
    ax.tick_params(axis="y", colors="tab:blue")
    ax.set_ylim(0, 1.1 * float(table["information"].max()))
    ax2 = ax.twinx()
    se_cap = 2.0 * float(table["se"].min()) * 2.5
    ax2.plot(grid, table["se"], color="tab:red", lw=1.5, ls="--", label="standard error")
    ax2.set_ylabel("standard error 1/√I(θ)", color="tab:red")
    ax2.tick_params(axis="y", colors="tab:red")
    ax2.set_ylim(0, se_cap)
    ax.plot(b.to_numpy(), np.zeros(len(b)), "|", color="k", ms=12, mew=1.2, clip_on=False,
            label="item difficulties")
    if theta is not None:
        th = ability_values(theta)
        th = th[np.isfinite(th)]
        if th.size:
            top = ax.get_ylim()[1]
            ax.plot(th, np.full(th.size, 0.03 * top), "|", color="tab:green",
                    alpha=0.6 if np.unique(th).size < 100 else 0.15, ms=8,
                    label="person abilities")
    ax.set_xlim(grid[0], grid[-1])
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize="small", loc="upper left",
              framealpha=0.9)
    ax.grid(alpha=0.3)
    ax.set_title(f"Test information and standard error ({len(b)} items)")
    fig.tight_layout()
    return _save(fig, path)


test_information_curve.__test__ = False  # a plot, not a pytest test


@fallback_fonts
def wright_map(
    beta: Any,
    theta: Any,
    *,
    bins: int = 30,
    max_item_labels: int = 60,
    path: str | Path | None = None,
) -> Any:
    """Wright map (person–item map): persons' abilities and items' difficulties on one
    logit scale.

    Left, a horizontal histogram of the abilities; right, each item at its difficulty,
    labelled: labels share a row when their difficulties are within one text line of each
    other (long rows end in "+k more").

    Parameters
    ----------
    beta : item estimate, pandas.Series or array-like
        Item difficulties.
    theta : array-like, Series or DataFrame
        Person abilities (the DataFrame of :func:`privirt.estimate_abilities` is accepted);
        non-finite values are left out.
    bins : int
        Histogram bins.
    max_item_labels : int
        With more items than this, items are drawn as ticks without labels.
    path : str or Path, optional
        Also save the figure there.
    """
    from .fit._inputs import ability_values, as_beta

    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive integer (histogram bins), got {bins!r}")
    if (isinstance(max_item_labels, bool) or not isinstance(max_item_labels, (int, np.integer))
            or max_item_labels < 0):
        raise ValueError("max_item_labels must be a non-negative integer (0 labels no item), "
                         f"got {max_item_labels!r}")
    b = as_beta(beta)
    th = ability_values(theta).ravel()
    th = th[np.isfinite(th)]
    if th.size == 0:
        raise ValueError("theta has no finite ability to draw")
    plt = _plt(path)
    values = b.to_numpy()
    lo = min(th.min(), values.min()) - 0.5
    hi = max(th.max(), values.max()) + 0.5
    height = min(10.0, max(4.5, 0.22 * min(len(b), max_item_labels) + 1.5))
    line = (hi - lo) * 1.25 * 9 / (72 * height * 0.82)  # one text line, in logits
    rows = _label_rows(b, line, lo) if len(b) <= max_item_labels else {}
    chars = max([len(t) for t in rows.values()] + [12])
    text_width = 0.6 + 0.075 * chars  # inches for the item panel
    fig, (axp, axi) = plt.subplots(1, 2, sharey=True, figsize=(4.5 + text_width, height),
                                   gridspec_kw={"width_ratios": [4.0, text_width],
                                                "wspace": 0.02})
    levels, counts = np.unique(th, return_counts=True)
    width = min(0.8 * float(np.min(np.diff(levels))) if levels.size > 1 else 0.2,
                0.8 * (hi - lo) / bins)
    # few distinct values (e.g. WLE: one per raw score), as bars if each is visible (1 % of
    # the axis, or a bin): levels that differ by rounding drew bars 0 logits high, a blank panel
    if levels.size <= 2 * bins and width >= min(0.01, 0.8 / bins) * (hi - lo):
        axp.barh(levels, counts, height=width, color="tab:blue", alpha=0.7)
    else:
        axp.hist(th, bins=np.linspace(lo, hi, int(bins) + 1), orientation="horizontal",
                 color="tab:blue", alpha=0.7)
    axp.invert_xaxis()
    axp.set_xlabel("persons")
    axp.set_ylabel("logits (higher = more able / harder)")
    axp.axhline(float(np.mean(th)), color="tab:blue", ls=":", lw=1)
    axp.set_title(f"persons (n = {th.size})", fontsize="medium")
    axi.axhline(float(np.mean(values)), color="tab:red", ls=":", lw=1)
    axi.plot(np.full(len(b), 0.12 / text_width), values, "_", color="tab:red", ms=12, mew=2)
    axi.set_xlim(0, 1.0)
    axi.set_xticks([])
    axi.set_title(f"items (n = {len(b)})", fontsize="medium")
    for y, text in rows.items():
        axi.text(0.3 / text_width + 0.02, y, _literal(text), va="center", fontsize=9)
    axp.set_ylim(lo, hi)
    for ax in (axp, axi):
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("Wright map")
    fig.subplots_adjust(left=0.12, right=0.98, bottom=0.55 / height, top=1 - 0.75 / height)
    return _save(fig, path)


def _label_rows(b: Any, line: float, lo: float) -> dict[float, str]:
    """The classic Wright-map layout: the logit axis cut into rows one text line high; the
    labels of the items in a row side by side (at most ~44 characters, then "+k more")."""
    values = b.to_numpy()
    row_of = np.floor((values - lo) / line).astype(np.int64)
    rows: dict[float, str] = {}
    for r in np.unique(row_of):
        members = np.flatnonzero(row_of == r)
        members = members[np.argsort(values[members], kind="stable")]
        names = [str(b.index[j]) for j in members]
        text, shown = "", 0
        for name in names:
            if shown and len(text) + 2 + len(name) > 44:
                break
            text = f"{text}  {name}" if shown else name
            shown += 1
        if shown < len(names):
            text += f"  +{len(names) - shown} more"
        rows[lo + (r + 0.5) * line] = text
    return rows


@fallback_fonts
def andersen_plot(
    result: Any,
    groups: Sequence[Any] | None = None,
    *,
    path: str | Path | None = None,
) -> Any:
    """Graphical model check for :func:`privirt.andersen_test`: each item's difficulty in one
    group against another, with 95 % intervals; under the Rasch model the points lie on the
    identity line.

    Parameters
    ----------
    result : privirt.AndersenResult
    groups : (label, label), optional
        Which two groups to compare (default: the first two).
    path : str or Path, optional
        Also save the figure there.
    """
    names = list(result.beta.columns)
    pair = names[:2] if groups is None else list(groups)
    if len(pair) != 2 or any(g not in names for g in pair):
        raise ValueError(f"groups must name two of the groups {names}, got {groups!r}")
    plt = _plt(path)
    x, y = result.beta[pair[0]], result.beta[pair[1]]
    sx, sy = 1.96 * result.se[pair[0]], 1.96 * result.se[pair[1]]
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    lo = float(min((x - sx).min(), (y - sy).min())) - 0.3
    hi = float(max((x + sx).max(), (y + sy).max())) + 0.3
    ax.plot([lo, hi], [lo, hi], color="0.5", lw=1, zorder=0)
    ax.errorbar(x, y, xerr=sx, yerr=sy, fmt="o", ms=4, color="tab:blue", ecolor="0.6",
                elinewidth=0.8, capsize=0)
    if len(x) <= 40:
        for lab in x.index:
            ax.annotate(_literal(lab), (x[lab], y[lab]), xytext=(4, 4), textcoords="offset points",
                        fontsize="x-small")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel(f"β in group {_literal(pair[0])}")
    ax.set_ylabel(f"β in group {_literal(pair[1])}")
    dropped = list(getattr(result, "items_dropped", None) or [])
    ax.set_title(f"Andersen test: LR = {result.statistic:.2f}, df = {result.df}, "
                 f"p = {result.pvalue:.3g}"
                 + (f"\nitems dropped (not estimable in a group): {_names(dropped)}"
                    if dropped else ""), fontsize="medium")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)
