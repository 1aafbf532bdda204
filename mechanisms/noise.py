"""Discrete Gaussian and discrete Laplace noise for integer-valued queries."""

from __future__ import annotations

import functools
import math
import numbers
from fractions import Fraction
from typing import Literal

import numpy as np

from ._samplers import BLOCK, DiscreteGaussianSampler, DiscreteLaplaceSampler
from ._validation import as_integer_array, check_scale, check_sensitivity, check_shape, round_up
from .measures import PureDP, ZCDP
from .rng import SecureRNG

__all__ = ["DiscreteGaussian", "DiscreteLaplace"]

Backend = Literal["native", "opendp"]


def _check_backend(backend: object, seed: object) -> str:
    if backend not in ("native", "opendp"):
        raise ValueError(f"backend must be 'native' or 'opendp', got {backend!r}")
    if backend == "opendp" and seed is not None:
        raise ValueError("backend='opendp' draws from OpenDP's own secure generator and cannot be "
                         "seeded; use backend='native' with seed= for reproducible (non-private) noise")
    return str(backend)


def _opendp():
    try:
        import opendp.prelude as dp
    except ImportError as exc:  # pragma: no cover - opendp is a core dependency
        raise ImportError("backend='opendp' needs the opendp package: pip install opendp") from exc
    dp.enable_features("contrib")
    return dp


class _AdditiveNoise:
    """Shared machinery: block-wise sampling, integer-only ``apply``, OpenDP backend."""

    _param: float

    def __init__(self, *, seed: object, backend: str) -> None:
        self.backend = _check_backend(backend, seed)
        self.private = seed is None
        self.seed = seed
        self._rng = SecureRNG(seed) if self.backend == "native" else None
        self._opendp_measurement = None
        self._sampler_built: DiscreteGaussianSampler | DiscreteLaplaceSampler | None = None

    def _make_sampler(self) -> DiscreteGaussianSampler | DiscreteLaplaceSampler:
        raise NotImplementedError

    @property
    def _sampler(self) -> DiscreteGaussianSampler | DiscreteLaplaceSampler:
        # built on the first draw: its exact tables take seconds at large scales and are not
        # needed by privacy(), variance() or tv_bound
        if self._sampler_built is None:
            self._sampler_built = self._make_sampler()
        return self._sampler_built

    #: Per-sample total-variation distance from the exact pmf: the samplers are exact.
    tv_bound: float = 0.0

    def sample(self, size: int | tuple[int, ...]) -> np.ndarray:
        """Draw independent noise values.

        Parameters
        ----------
        size : int or tuple of int
            Output shape.

        Returns
        -------
        numpy.ndarray of int64
        """
        shape = check_shape(size)
        n = math.prod(shape)
        if self.backend == "opendp":
            return self._opendp_apply(np.zeros(n, dtype=np.int64)).reshape(shape)
        out = np.empty(n, dtype=np.int64)
        for start in range(0, n, BLOCK):
            stop = min(n, start + BLOCK)
            if isinstance(self._sampler, DiscreteGaussianSampler):
                self._sampler.sample(stop - start, self._rng, out=out[start:stop])
            else:
                out[start:stop] = self._sampler.sample(stop - start, self._rng)
        return out.reshape(shape)

    def apply(self, values: object) -> np.ndarray:
        """Return ``values + noise`` with independent noise per entry (int64, same shape).

        Parameters
        ----------
        values : array_like of int
            Integer query answers (for example counts). Float input raises ``ValueError``:
            noise is never added to floating-point data.
        """
        arr = as_integer_array(values)
        if self.backend == "opendp":
            return self._opendp_apply(arr.reshape(-1)).reshape(arr.shape)
        return arr + self.sample(arr.shape)

    def _opendp_apply(self, flat: np.ndarray) -> np.ndarray:
        if flat.size == 0:
            return flat.astype(np.int64)
        meas = self._opendp()
        return np.asarray(meas([int(v) for v in flat]), dtype=np.int64)


class DiscreteGaussian(_AdditiveNoise):
    """Discrete Gaussian noise ``P(x) ∝ exp(-x²/(2σ²))`` on the integers.

    Exact sampling (Canonne, Kamath & Steinke 2020 rejection from a discrete Laplace proposal,
    with every Bernoulli decided exactly); ``tv_bound`` is 0.

    Parameters
    ----------
    sigma : float
        Scale ``σ > 0`` (the pmf's parameter; the variance is slightly below ``σ²``).
        Supported range ``[2**-10, 2**40]``.
    seed : int, str, bytes or None, default None
        ``None`` (default): noise from a ChaCha20 keystream keyed by ``os.urandom``
        (``private=True``). A seed gives reproducible noise and ``private=False``: such noise
        must not be released as differentially private.
    backend : {"native", "opendp"}, default "native"
        ``"opendp"`` samples through OpenDP's ``make_gaussian`` (its vetted implementation and
        secure generator, about 10 µs per draw); it cannot be seeded.

    Examples
    --------
    >>> from mechanisms import DiscreteGaussian
    >>> mech = DiscreteGaussian(3.0, seed=0)
    >>> noisy = mech.apply([10, 20, 30])      # int64 array
    >>> mech.privacy(l2_sensitivity=1.0).rho  # rho of zCDP = 1 / (2 * 9), rounded up
    0.05555555555555556
    """

    def __init__(self, sigma: float, *, seed: object = None, backend: Backend = "native") -> None:
        self.sigma = check_scale("sigma", sigma)
        super().__init__(seed=seed, backend=backend)

    def _make_sampler(self) -> DiscreteGaussianSampler:
        return _gaussian_sampler(self.sigma)

    def _opendp(self):
        if self._opendp_measurement is None:
            dp = _opendp()
            self._opendp_measurement = dp.m.make_gaussian(
                dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=self.sigma)
        return self._opendp_measurement

    def privacy(self, l2_sensitivity: float, *, l1_sensitivity: float | None = None,
                dimension: int | None = None) -> ZCDP:
        """The ρ-zCDP guarantee for a query with the given sensitivity (per privacy unit).

        Reports ``ρ = Δ₂² / (2σ²)`` rounded up to the next float, where ``Δ₂`` is the L2
        sensitivity, replaced by ``min(Δ₂, Δ₁)`` when an L1 sensitivity is also given (every
        vector has ``‖v‖₂ ≤ ‖v‖₁``). This is valid in any dimension: Canonne, Kamath & Steinke
        (2020, multivariate discrete Gaussian theorem) show that adding independent discrete
        Gaussian noise to each of ``d`` integer coordinates satisfies ``½ε²``-concentrated DP with ``ε² = Σ_j Δ_j²/σ²``, i.e. the
        same ρ as the continuous Gaussian, with no dimension-dependent correction. ``dimension``
        is checked and kept only for the caller's bookkeeping; the dimension-dependent
        refinement of that paper concerns direct (ε, δ) conversion, which is done by the
        accounting module, not here.

        Parameters
        ----------
        l2_sensitivity : float
            Proven upper bound on ``‖f(D) − f(D')‖₂`` over neighbouring datasets.
        l1_sensitivity : float, optional
            Proven upper bound on ``‖f(D) − f(D')‖₁``.
        dimension : int, optional
            Number of noisy coordinates (must be a positive integer if given).

        Returns
        -------
        ZCDP
            ``ZCDP(ρ)``; ρ equals OpenDP's ``make_gaussian(...).map(Δ₂)`` for integer inputs.
        """
        d2 = check_sensitivity("l2_sensitivity", l2_sensitivity)
        if l1_sensitivity is not None:
            d2 = min(d2, check_sensitivity("l1_sensitivity", l1_sensitivity))
        if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, numbers.Integral)
                                      or dimension < 1):
            raise ValueError(f"dimension must be a positive integer, got {dimension!r}")
        s = Fraction(self.sigma)
        return ZCDP(round_up(d2 * d2 / (2 * s * s), what="rho = l2_sensitivity**2 / (2 * sigma**2)",
                             fix="a smaller l2_sensitivity or a larger sigma"))

    def variance(self) -> float:
        """Variance ``Σ x² p(x)``, slightly below ``σ²``.

        Summed over ``|x| ≤ 40σ + 40`` for ``σ < 10``; for ``σ ≥ 10`` it equals ``σ²`` to double
        precision (by Poisson summation the relative deficit is about
        ``4π²σ² e^{−2π²σ²} < 10^{−800}``).
        """
        return _dg_variance(self.sigma)

    def __repr__(self) -> str:
        return f"DiscreteGaussian(sigma={self.sigma!r}, private={self.private}, backend={self.backend!r})"


class DiscreteLaplace(_AdditiveNoise):
    """Discrete Laplace (two-sided geometric) noise ``P(x) ∝ exp(-|x|/scale)`` on the integers.

    Exact sampling by independent geometric chunks (see ``docs/mechanisms.md``); ``tv_bound``
    is 0.

    Parameters
    ----------
    scale : float
        ``t > 0`` (supported range ``[2**-10, 2**40]``). Pure ε-DP with ``ε = Δ₁ / t``.
    seed, backend
        As for :class:`DiscreteGaussian` (``"opendp"`` uses ``make_laplace``).

    Examples
    --------
    >>> from mechanisms import DiscreteLaplace
    >>> DiscreteLaplace(2.0, seed=1).privacy(l1_sensitivity=1)
    PureDP(epsilon=0.5)
    """

    def __init__(self, scale: float, *, seed: object = None, backend: Backend = "native") -> None:
        self.scale = check_scale("scale", scale)
        super().__init__(seed=seed, backend=backend)

    def _make_sampler(self) -> DiscreteLaplaceSampler:
        return _laplace_sampler(self.scale)

    def _opendp(self):
        if self._opendp_measurement is None:
            dp = _opendp()
            self._opendp_measurement = dp.m.make_laplace(
                dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=self.scale)
        return self._opendp_measurement

    def privacy(self, l1_sensitivity: float) -> PureDP:
        """Pure ε-DP for a query with L1 sensitivity ``Δ₁``: ``ε = Δ₁ / scale``, rounded up."""
        d1 = check_sensitivity("l1_sensitivity", l1_sensitivity)
        return PureDP(round_up(d1 / Fraction(self.scale), what="epsilon = l1_sensitivity / scale",
                               fix="a smaller l1_sensitivity or a larger scale"))

    def variance(self) -> float:
        """Closed form ``2q / (1 − q)²`` with ``q = e^{−1/scale}``; ``1 − q`` is computed as
        ``−expm1(−1/scale)``, so no digits cancel at large scales."""
        q = math.exp(-1.0 / self.scale)
        one_minus_q = -math.expm1(-1.0 / self.scale)
        return 2 * q / one_minus_q**2

    def __repr__(self) -> str:
        return f"DiscreteLaplace(scale={self.scale!r}, private={self.private}, backend={self.backend!r})"


# The samplers hold only exact tables (no randomness, read-only after construction), so one per
# scale is shared: a service or a calibration loop drawing at the same scale again skips the
# seconds the tables take at large scales.
@functools.lru_cache(maxsize=16)
def _gaussian_sampler(sigma: float) -> DiscreteGaussianSampler:
    return DiscreteGaussianSampler(sigma)


@functools.lru_cache(maxsize=16)
def _laplace_sampler(scale: float) -> DiscreteLaplaceSampler:
    return DiscreteLaplaceSampler(Fraction(scale))


def _dg_variance(sigma: float) -> float:
    if sigma >= 10:
        return sigma * sigma
    L = int(40 * sigma) + 40
    x = np.arange(0, L + 1, dtype=np.float64)
    w = np.exp(-(x * x) / (2 * sigma * sigma))
    w[1:] *= 2
    return float(np.sum(w * x * x) / np.sum(w))
