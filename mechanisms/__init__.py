"""Exact, fast, cryptographically secure noise for differential privacy.

* :class:`DiscreteGaussian` – discrete Gaussian noise, ρ-zCDP for an L2 sensitivity.
* :class:`DiscreteLaplace` – discrete Laplace (two-sided geometric) noise, pure ε for an L1
  sensitivity.
* :class:`RandomizedResponse` – per-bit randomized response, pure ε per bit.

Samples follow the target pmf exactly (``tv_bound == 0``); random bits come from a ChaCha20
keystream keyed by the operating system (:class:`mechanisms.rng.SecureRNG`) unless a seed is
given, in which case the object reports ``private=False``. Each object's ``privacy(...)``
returns a typed guarantee from :mod:`mechanisms.measures` (:class:`PureDP`, :class:`ZCDP`,
:class:`ApproxDP`). See ``docs/mechanisms.md``.
"""

from ._validation import EPSILON_MAX, MAX_SCALE, MIN_SCALE
from .measures import ApproxDP, PureDP, ZCDP
from .noise import DiscreteGaussian, DiscreteLaplace
from .randomized_response import RandomizedResponse
from .rng import SecureRNG

__all__ = [
    "DiscreteGaussian", "DiscreteLaplace", "RandomizedResponse", "SecureRNG",
    "MIN_SCALE", "MAX_SCALE", "EPSILON_MAX", "PureDP", "ZCDP", "ApproxDP",
]
