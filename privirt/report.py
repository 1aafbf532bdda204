"""Deprecated: the sweep reports moved to :mod:`privirt.sweeps.report` (re-exported here)."""

from __future__ import annotations

import warnings

from .sweeps.report import (
    DEFAULT_METRIC,
    DEFAULT_TARGET,
    METRICS,
    ReportFiles,
    build_report,
    plot_dataset,
    smallest_epsilon,
    summarize,
)

warnings.warn("privirt.report is deprecated; use privirt.sweeps.report",
              DeprecationWarning, stacklevel=2)

__all__ = ["METRICS", "summarize", "smallest_epsilon", "plot_dataset", "build_report",
           "ReportFiles"]
