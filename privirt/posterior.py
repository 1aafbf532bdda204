"""Deprecated location of :mod:`privirt.bayes.posterior`; import from :mod:`privirt.bayes`."""

from __future__ import annotations

from .bayes.posterior import SUMMARY_COLUMNS, Posterior, StreamingSummary
from .bayes.schedule import warn_once

__all__ = ["Posterior", "StreamingSummary", "SUMMARY_COLUMNS"]

warn_once(
    "privirt.posterior",
    "privirt.posterior is deprecated; import Posterior, StreamingSummary and SUMMARY_COLUMNS "
    "from privirt.bayes",
    stacklevel=2,
)
