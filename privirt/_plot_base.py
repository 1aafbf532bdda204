"""The figure plumbing of :mod:`privirt.plots` and the sweep report: pyplot on a headless
backend where there is no display, user labels drawn as written, and saving a figure to a
path whose suffix names its format (checked before anything is drawn)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ._files import figure_path

def _plt(path: str | Path | None = None) -> Any:
    """pyplot (with a headless backend where there is no display); ``path`` is checked first."""
    try:
        import matplotlib

        if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "cairo"):
            import os

            if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
                matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError('plotting needs matplotlib: python -m pip install "privirt[plots]"') from exc
    if path is not None:
        figure_path(path)
    return plt


def _literal(label: Any) -> str:
    """A user-supplied label (an item, person, group or data-set name) as text that matplotlib
    draws as written: ``$`` is escaped, so that ``"$a^$"`` is not read as mathtext (which drew
    it as a formula, or failed with a parse error, after other files were written)."""
    return str(label).replace("$", r"\$")


def _names(labels: Sequence[Any], most: int = 5) -> str:
    """``labels`` as ``"a, b, c"`` for a figure: the first ``most``, then ``"+k more"``."""
    shown = ", ".join(_literal(lab) for lab in labels[:most])
    return shown + (f" +{len(labels) - most} more" if len(labels) > most else "")


def _save(fig: Any, path: str | Path | None) -> Any:
    """Save ``fig`` to ``path`` (creating missing folders) when a path is given; return it."""
    if path is not None:
        path = figure_path(path)  # (refused before any folder is made)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig
