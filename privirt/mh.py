"""Deprecated: the 2PL Metropolis–Hastings sampler lives in :mod:`privirt.bayes` (importing
this module warns once)."""

from __future__ import annotations

import warnings

from .bayes.mh import mh_2pl
from .bayes.twopl_setup import (
    ACCEPTANCE_BAND,
    DEFAULT_PRIORS,
    DEFAULT_PROPOSAL_SD,
    TARGET_ACCEPTANCE,
)

__all__ = ["mh_2pl", "DEFAULT_PRIORS", "DEFAULT_PROPOSAL_SD", "TARGET_ACCEPTANCE",
           "ACCEPTANCE_BAND"]

warnings.warn(
    "privirt.mh is deprecated; use privirt.mh_2pl or privirt.bayes.mh_2pl",
    DeprecationWarning, stacklevel=2,
)
