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
