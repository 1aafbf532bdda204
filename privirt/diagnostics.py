"""Deprecated location of :mod:`privirt.bayes.diagnostics`; import from there."""

from __future__ import annotations

from .bayes.diagnostics import *  # noqa: F401,F403
from .bayes.diagnostics import __all__  # noqa: F401
from .bayes.schedule import warn_once

warn_once(
    "privirt.diagnostics",
    "privirt.diagnostics is deprecated; import from privirt.bayes.diagnostics "
    "(rhat, ess_bulk and mcse_batch_means are also in privirt.bayes)",
    stacklevel=2,
)
