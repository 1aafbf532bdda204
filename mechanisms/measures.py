"""Privacy measures as typed guarantees: what a mechanism's ``privacy(...)`` returns.

* :class:`PureDP` — ε-differential privacy (discrete Laplace, randomized response);
* :class:`ZCDP` — ρ-zero-concentrated differential privacy (discrete Gaussian);
* :class:`ApproxDP` — (ε, δ)-differential privacy.

Each is a small immutable value; ``float(g)`` is its single parameter for :class:`PureDP`
(ε) and :class:`ZCDP` (ρ).  The conversions between them (pure → zCDP, zCDP → (ε, δ)) live
here too; composition and calibration are in :mod:`privirt.accounting`.  See
``docs/privacy.md`` for the conversions used.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["PureDP", "ZCDP", "ApproxDP", "Measure", "pure_to_zcdp", "zcdp_to_approx_dp"]


def _finite_number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if math.isnan(v):
        raise ValueError(f"{name} must not be NaN")
    return v


def _non_negative(value: object, name: str) -> float:
    v = _finite_number(value, name)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def _open_delta(value: object, name: str = "delta") -> float:
    v = _finite_number(value, name)
    if not (0.0 < v < 1.0):
        raise ValueError(f"{name} must be in the open interval (0, 1), got {value!r}")
    return v


@dataclass(frozen=True)
class PureDP:
    """ε-differential privacy (replace-one neighbours)."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _non_negative(self.epsilon, "epsilon"))

    def __float__(self) -> float:
        return self.epsilon

    def to_zcdp(self) -> "ZCDP":
        """ρ = ε²/2 (Bun & Steinke 2016, Proposition 1.4)."""
        return ZCDP(pure_to_zcdp(self.epsilon))

    def to_approx_dp(self, delta: float = 0.0) -> "ApproxDP":
        return ApproxDP(self.epsilon, float(delta))

    def __str__(self) -> str:
        return f"{self.epsilon:.6g}-DP"


@dataclass(frozen=True)
class ZCDP:
    """ρ-zero-concentrated differential privacy (replace-one neighbours)."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _non_negative(self.rho, "rho"))

    def __float__(self) -> float:
        return self.rho

    def to_approx_dp(self, delta: float, *, tight: bool = True) -> "ApproxDP":
        """The (ε, δ) guarantee implied at the given δ (see :func:`zcdp_to_approx_dp`)."""
        return ApproxDP(zcdp_to_approx_dp(self.rho, delta, tight=tight), float(delta))

    def __str__(self) -> str:
        return f"{self.rho:.6g}-zCDP"


@dataclass(frozen=True)
class ApproxDP:
    """(ε, δ)-differential privacy (replace-one neighbours)."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _non_negative(self.epsilon, "epsilon"))
        d = _finite_number(self.delta, "delta")
        if not (0.0 <= d <= 1.0):
            raise ValueError(f"delta must be in [0, 1], got {self.delta!r}")
        object.__setattr__(self, "delta", d)

    def __str__(self) -> str:
        return f"({self.epsilon:.6g}, {self.delta:.3g})-DP"


Measure = PureDP | ZCDP | ApproxDP


def pure_to_zcdp(epsilon: float) -> float:
    """ρ = ε²/2: an ε-DP mechanism is ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
    e = _non_negative(epsilon, "epsilon")
    return 0.5 * e * e


def _cks_epsilon_at(t: float, rho: float, log_inv_delta: float) -> float:
    """CKS 2020 Cor. 13 bound at the Rényi order α = 1 + e^t (valid for every α > 1).

    αρ + (log(1/δ) + (α−1) log(1−1/α) − log α)/(α−1), written with α − 1 = e^t,
    log α = log1p(e^t) and log(1 − 1/α) = −log1p(e^{−t}) so that no cancellation occurs for
    α near 1 or for large α (small ρ, where ``t − log α`` would lose every digit and
    understate ε).
    """
    am1 = math.exp(t)
    log_alpha = math.log1p(am1)
    return (1.0 + am1) * rho + log_inv_delta / am1 - math.log1p(math.exp(-t)) - log_alpha / am1


def zcdp_to_approx_dp(rho: float, delta: float, tight: bool = True) -> float:
    """The ε such that a ρ-zCDP mechanism is (ε, δ)-DP.

    Parameters
    ----------
    rho : float
        zCDP parameter, ≥ 0.
    delta : float
        Target δ in (0, 1).
    tight : bool, default True
        ``True``: the conversion of Canonne, Kamath & Steinke (2020), Corollary 13,
        ε = inf_{α>1} αρ + (log(1/δ) + (α−1) log(1−1/α) − log α)/(α−1), minimised numerically
        over α (every α > 1 gives a valid bound, so the result is always valid; it agrees with
        OpenDP's ``make_zCDP_to_approxDP`` to 1e-6 relative).  ``False``: Bun & Steinke
        (2016), Lemma 3.5, ε = ρ + 2√(ρ log(1/δ)).

    Returns
    -------
    float
        ε ≥ 0.
    """
    rho = _non_negative(rho, "rho")
    delta = _open_delta(delta)
    if rho == 0.0:
        return 0.0
    L = math.log(1.0 / delta)
    classic = rho + 2.0 * math.sqrt(rho * L)
    if not tight:
        return classic
    import numpy as np
    from scipy import optimize

    # Minimise over t = log(α − 1); the objective is smooth and unimodal in practice, and the
    # minimiser lies near α ≈ 1 + √(L/ρ) (where the classic bound's α is).
    def f(t: float) -> float:
        return _cks_epsilon_at(t, rho, L)

    t0 = 0.5 * (math.log(L) - math.log(rho))  # in logs: ρ may be subnormal
    lo, hi = t0 - 30.0, min(t0 + 30.0, 700.0)  # exp(t) must stay finite
    lo = min(lo, hi - 1.0)
    grid = np.linspace(lo, hi, 241)
    vals = np.array([f(t) for t in grid])
    k = int(np.argmin(vals))
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-12})
    best = min(float(res.fun), float(vals[k]), classic)
    return max(0.0, best)
