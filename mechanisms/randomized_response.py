"""Randomized response on bits (Warner 1965)."""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np

from ._exact import exp_neg_enclosure
from ._samplers import BLOCK, BernoulliSampler
from ._validation import check_epsilon, round_up
from .measures import PureDP
from .rng import SecureRNG

__all__ = ["RandomizedResponse"]


class RandomizedResponse:
    """Keep each bit with probability ``e^ε / (1 + e^ε)``, flip it otherwise.

    Every person's bit is randomized independently, so a person whose ``n_bits`` bits may all
    change is protected with pure ``ε · n_bits``-DP (``ε`` per bit). The keep/flip decision is an
    exact Bernoulli draw from the secure keystream (``tv_bound`` is 0).

    Parameters
    ----------
    epsilon : float
        Privacy parameter per bit, ``0 < ε ≤ 700``.
    seed : int, str, bytes or None, default None
        As for :class:`mechanisms.DiscreteGaussian`; a seed makes ``private=False``.

    Examples
    --------
    >>> from mechanisms import RandomizedResponse
    >>> rr = RandomizedResponse(1.0, seed=0)
    >>> noisy = rr.apply([0, 1, 1, 0])
    >>> est = rr.debias(noisy.mean())         # unbiased estimate of the true mean
    """

    tv_bound: float = 0.0

    def __init__(self, epsilon: float, *, seed: object = None) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.private = seed is None
        self.seed = seed
        self._rng = SecureRNG(seed)
        eps = Fraction(self.epsilon)

        def keep_enc(bits: int):  # 1 / (1 + e^{-ε}) is increasing in ε, decreasing in e^{-ε}
            lo, hi = exp_neg_enclosure(eps, bits + 8)
            return 1 / (1 + hi), 1 / (1 + lo)

        self._keep = BernoulliSampler(keep_enc)

    @property
    def keep_probability(self) -> float:
        """``e^ε / (1 + e^ε)`` (float, for reporting; sampling uses the exact value)."""
        return 1.0 / (1.0 + math.exp(-self.epsilon))

    def apply(self, bits: object) -> np.ndarray:
        """Randomize a 0/1 array; returns an int64 0/1 array of the same shape.

        Booleans, integers and floats equal to 0.0 or 1.0 are accepted; anything else (2, NaN,
        strings) raises ``ValueError``.
        """
        arr = np.asarray(bits)
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"bits must be 0/1 integers (or booleans), got dtype {arr.dtype}")
        bad = (arr != 0) & (arr != 1)
        if np.any(bad):
            raise ValueError(f"bits must be 0 or 1, found {arr[bad].reshape(-1)[0].item()!r}")
        arr = arr.astype(np.int64, copy=False)
        flat = arr.reshape(-1)
        out = np.empty_like(flat)
        for start in range(0, flat.size, BLOCK):
            stop = min(flat.size, start + BLOCK)
            keep = self._keep.sample_words(self._rng.random_uint64(stop - start), self._rng)
            out[start:stop] = np.where(keep, flat[start:stop], 1 - flat[start:stop])
        return out.reshape(arr.shape)

    def privacy(self, n_bits: int = 1) -> PureDP:
        """Pure ε-DP for a person whose ``n_bits`` bits may all change: ``ε · n_bits`` (rounded up)."""
        if isinstance(n_bits, bool) or not isinstance(n_bits, numbers.Integral) or n_bits < 0:
            raise ValueError(f"n_bits must be a non-negative integer, got {n_bits!r}")
        return PureDP(round_up(Fraction(self.epsilon) * int(n_bits), what="epsilon * n_bits",
                               fix="fewer n_bits"))

    def debias(self, mean_of_randomized: float | np.ndarray) -> float | np.ndarray:
        """Unbiased estimate of the true mean from the mean of randomized bits.

        With keep probability ``p``, ``E[randomized] = p·m + (1 − p)(1 − m)``, so
        ``m̂ = (mean − (1 − p)) / (2p − 1)``. The estimate is unbiased but not clipped to
        ``[0, 1]``. Given the true bits, its variance over ``n`` bits is exactly
        ``p(1 − p) / (n (2p − 1)²)`` (each randomized bit has variance ``p(1 − p)`` whatever its
        true value); see :meth:`debias_variance` for the variance when the true bits are
        themselves i.i.d.
        """
        p = self.keep_probability
        raw = np.asarray(mean_of_randomized)
        if raw.dtype.kind not in "iuf" and not (raw.dtype.kind == "O" and all(
                isinstance(v, numbers.Real) and not isinstance(v, bool) for v in raw.ravel())):
            # None, True and '0.5' were read as NaN, 1.0 and 0.5
            raise ValueError("mean_of_randomized must be a number or an array of numbers (a mean "
                             f"of randomized bits), got {mean_of_randomized!r}"[:200])
        m = np.asarray(mean_of_randomized, dtype=np.float64)
        est = (m - (1.0 - p)) / (2.0 * p - 1.0)
        return float(est) if est.ndim == 0 else est

    def debias_variance(self, n: int, true_mean: float = 0.5) -> float:
        """Variance of :meth:`debias` over ``n`` i.i.d. Bernoulli(``true_mean``) true bits.

        Equals ``r(1 − r) / (n (2p − 1)²)`` with ``r = p m + (1 − p)(1 − m)``, i.e. the
        randomization variance ``p(1 − p) / (n (2p − 1)²)`` plus the sampling variance
        ``m(1 − m)/n``.

        Raises
        ------
        ValueError
            If ``n`` is not a positive integer or ``true_mean`` is not in ``[0, 1]``.
        """
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be a positive integer (the number of bits), got {n!r}")
        if isinstance(true_mean, bool) or not isinstance(true_mean, numbers.Real) or not 0 <= true_mean <= 1:
            raise ValueError(f"true_mean must be a number in [0, 1] (a proportion of 1 bits), got {true_mean!r}")
        n = int(n)
        p = self.keep_probability
        r = p * true_mean + (1 - p) * (1 - true_mean)
        return r * (1 - r) / (n * (2 * p - 1) ** 2)

    def __repr__(self) -> str:
        return f"RandomizedResponse(epsilon={self.epsilon!r}, private={self.private})"
