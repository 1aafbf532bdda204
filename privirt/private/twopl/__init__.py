"""Private 2PNO/2PL estimation: noisy item totals and pair disagreement counts (discrete
Gaussian, ``release``), a noise-aware limited-information fit of the one-factor normal-ogive
model with shrinkage and parametric-bootstrap intervals (``estimate``, ``fit``).

Maths and proofs: ``docs/private_2pl.md``.
"""

from .estimate import TwoPLEstimate, estimate_2pl_from_release, private_2pl_estimate
from .measurement import TOTALS_SHARE, PairsGaussian
from .release import TwoPLRelease, release_2pl
from .statistics import pair_sensitivity, pair_statistics

__all__ = [
    "TwoPLRelease",
    "TwoPLEstimate",
    "release_2pl",
    "estimate_2pl_from_release",
    "private_2pl_estimate",
    "PairsGaussian",
    "TOTALS_SHARE",
    "pair_statistics",
    "pair_sensitivity",
]
