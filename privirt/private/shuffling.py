"""Privacy amplification by shuffling (Feldman, McMillan & Talwar 2021, "FMT").

Two upper bounds on the central (ε, δ) of n shuffled reports of an ε₀-LDP randomizer, for the
replace-one relation on the n reports (derivations and citations in ``docs/privacy.md``):

* :func:`numerical_epsilon` (the default) — the clone reduction of FMT §3 (arXiv:2012.12803;
  the quantity their Appendix E computes numerically): the shuffled output is a post-processing
  of one sample of the pair P, Q below, so any (ε, δ) for which P and Q are indistinguishable holds for
  the shuffled output.  δ(ε) of the pair is computed here exactly (closed-form cut-off per
  conditioning value, a rigorous bound on the truncated tail, a floating-point margin), then
  the smallest ε with δ(ε) ≤ δ is found by bisection.  This is the quantity the authors'
  reference implementation approximates (their Appendix E); it is computed here without their
  step-wise approximation.
* :func:`closed_form_epsilon` — the conservative closed form of the authors' reference code,
  ε = log(1 + (1 − e^{−ε₀}) / (1 + e^{−ε₀−ε_a}) · (a + c)) with a = 8√(e^{ε₀} log(4/δ)/n),
  c = 8e^{ε₀}/n, ε_a = log(1 + a + c), valid for ε₀ ≤ log(n / (16 log(4/δ))).  It is never
  smaller than the Theorem 3.1 expression usually quoted (which has (e^{ε₀}−1)/(e^{ε₀}+1) and a
  log(2/δ) validity limit) and serves as the fallback.

The pair: C ~ Bin(n−1, e^{−ε₀}), A ~ Bin(C, ½), Δ ~ Bern(e^{ε₀}/(e^{ε₀}+1));
P = (A + Δ, C − A + 1 − Δ), Q = (A + 1 − Δ, C − A + Δ).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from mechanisms.measures import _open_delta, _real_down

__all__ = [
    "shuffle_delta",
    "numerical_epsilon",
    "closed_form_epsilon",
    "closed_form_validity_limit",
]

#: Conditioning values C whose total Bin(n−1, e^{−ε₀}) mass is below this are not summed; their
#: mass is added to δ in full (the divergence given C is at most 1), so the bound stays valid.
_TAIL_MASS = 1e-15

#: Above this ε + ε₀ the closed forms below would overflow (e^710 > the largest double).
_EXP_LIMIT = 700.0


def _check(epsilon0: float, n: int) -> tuple[float, int]:
    e0 = float(epsilon0)
    if not (math.isfinite(e0) and e0 >= 0):
        raise ValueError(f"epsilon0 must be a finite number >= 0, got {epsilon0!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer (the number of shuffled reports), got {n!r}")
    return e0, int(n)


def _check_delta(delta: float) -> float:
    """δ strictly between 0 and 1 (one line otherwise), read as the largest double not above it."""
    _open_delta(delta, "delta")
    return _open_delta(_real_down(delta, "delta"), "delta")


def _divergence_given_c(c: np.ndarray, eps0: float, eps: float) -> np.ndarray:
    """D_{e^ε}(P_c ‖ Q_c) for each conditioning value c (vectorised, exact up to rounding).

    Given C = c the first coordinates are P_c = A + Δ and Q_c = A + 1 − Δ with A ~ Bin(c, ½) (the
    second coordinate is c + 1 minus the first).  With r(x) = b_c(x−1)/b_c(x) = x/(c+1−x) the
    likelihood ratio P_c(x)/Q_c(x) = ((1−α) + αr)/(α + (1−α)r) is increasing in x, so the
    positive part of P_c − e^ε Q_c lives on {x > t}, t = (c+1)·r*/(1+r*), r* the ratio at which
    the likelihood ratio equals e^ε.
    """
    # with α = e^{ε0}/(1+e^{ε0}), written with expm1 so that tiny ε, ε0 keep their digits:
    # r* = (e^ε α − (1−α)) / (α − e^ε (1−α)) = expm1(ε+ε0) / (e^ε expm1(ε0−ε)), finite as ε < ε0
    up = math.expm1(eps + eps0)  # e^{ε+ε0} − 1
    gap = math.exp(eps) * math.expm1(eps0 - eps)  # e^{ε0} − e^ε > 0
    t = (c + 1.0) * (up / (up + gap))  # (c+1)·r*/(1+r*)
    k = np.floor(t)  # the positive part is on x >= k + 1
    ge_k1 = stats.binom.sf(k, c, 0.5)  # P(A >= k + 1)
    ge_k = stats.binom.sf(k - 1.0, c, 0.5)  # P(A >= k)
    # P_c(X > t) − e^ε Q_c(X > t) = [(1 − e^{ε+ε0}) P(A ≥ k+1) + (e^{ε0} − e^ε) P(A ≥ k)] / (1 + e^{ε0})
    scale = math.exp(-eps0) / (1.0 + math.exp(-eps0))  # 1/(1+e^{ε0}); ε0 ≤ _EXP_LIMIT here
    return np.maximum((gap * ge_k - up * ge_k1) * scale, 0.0)


def shuffle_delta(epsilon0: float, n: int, epsilon: float) -> float:
    """An upper bound on the δ at which n shuffled ε₀-LDP reports are (ε, δ)-DP (FMT §3 pair).

    Exact for the pair (P, Q) up to the tail mass left out (added in full) and a rounding margin
    of 1e-14·e^ε (added), so the returned value is an upper bound on δ(ε) of the pair.
    """
    e0, n = _check(epsilon0, n)
    eps = float(epsilon)
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    if eps >= e0:
        return 0.0  # the likelihood ratio of the pair never exceeds e^{ε0}
    if eps + e0 > _EXP_LIMIT:
        # e^{ε+ε0} overflows a double: claim nothing (δ ≤ 1 always holds) rather than risk a
        # bound computed from overflowed or flushed terms; such a local ε gains nothing anyway
        return 1.0
    p = math.exp(-e0)
    C = stats.binom(n - 1, p)
    lo = int(C.ppf(_TAIL_MASS / 2))
    hi = int(C.isf(_TAIL_MASS / 2))
    lo, hi = max(lo, 0), min(hi, n - 1)
    tail = float(C.cdf(lo - 1) + C.sf(hi)) if n > 1 else 0.0
    c = np.arange(lo, hi + 1, dtype=float)
    weights = C.pmf(c)
    body = math.fsum((weights * _divergence_given_c(c, e0, eps)).tolist())
    return min(1.0, body + tail + 1e-14 * math.exp(eps))


def numerical_epsilon(epsilon0: float, n: int, delta: float, *, tol: float = 1e-12) -> float | None:
    """The smallest ε (to ``tol``, rounded up) with :func:`shuffle_delta` ≤ δ; ``None`` if even
    ε = ε₀ does not meet δ (then no amplified claim is made).

    The returned ε always satisfies ``shuffle_delta(epsilon0, n, ε) <= delta``: the bisection
    keeps the end point at which the check passed.
    """
    e0, n = _check(epsilon0, n)
    delta = _check_delta(delta)
    if shuffle_delta(e0, n, e0) > delta:
        return None
    lo, hi = 0.0, e0
    if shuffle_delta(e0, n, 0.0) <= delta:
        return 0.0
    while hi - lo > tol * max(hi, 1e-300):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if shuffle_delta(e0, n, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def closed_form_validity_limit(n: int, delta: float) -> float:
    """Largest ε₀ for the closed form: log(n / (16 log(4/δ))) (−inf when n is too small)."""
    arg = n / (16.0 * math.log(4.0 / _check_delta(delta)))
    return math.log(arg) if arg > 1.0 else -math.inf


def closed_form_epsilon(epsilon0: float, n: int, delta: float) -> float | None:
    """The authors' conservative closed form (see the module docstring); ``None`` outside its
    validity range ε₀ ≤ log(n / (16 log(4/δ)))."""
    e0, n = _check(epsilon0, n)
    delta = _check_delta(delta)
    if e0 > closed_form_validity_limit(n, delta):
        return None
    a = 8.0 * math.sqrt(math.exp(e0) * math.log(4.0 / delta)) / math.sqrt(n)
    c = 8.0 * math.exp(e0) / n
    e_a = math.log1p(a + c)
    b = -math.expm1(-e0)
    d = 1.0 + math.exp(-e0 - e_a)
    return math.log1p(b / d * (a + c))
