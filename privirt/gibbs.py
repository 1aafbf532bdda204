"""Deprecated: the 2PNO Gibbs sampler lives in :mod:`privirt.bayes` (importing this module
warns once)."""

from __future__ import annotations

import warnings

from .bayes.gibbs import gibbs_2pno, gibbs_2pno_replicate

__all__ = ["gibbs_2pno", "gibbs_2pno_replicate"]

warnings.warn(
    "privirt.gibbs is deprecated; use privirt.gibbs_2pno or privirt.bayes.gibbs_2pno",
    DeprecationWarning, stacklevel=2,
)
