"""The exact sums of the composition rule (:func:`privirt.accounting.total_epsilon`).

The Ledger and the service compose spends through five sums (Σρᵢ, Σεᵢ, Σδᵢ and, over the pure
spends, Σεᵢ and Σεᵢ²/2); :class:`SpendSums` keeps them exact and
:func:`total_epsilon_of_sums` applies the rule to them, rounding every step in the direction
that can only raise the ε stated.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable

import numpy as np

from mechanisms.measures import _brief, _round_down, _round_up, zcdp_to_approx_dp  # (inf above the largest double)

__all__ = ["SpendSums", "total_epsilon_of_sums", "sum_up", "sum_upper", "surely_fits", "LEDGER_TOLERANCE"]

#: A composed total within this relative margin of the ε budget fits (the Ledger's and the
#: service's rule: a budget spent in k equal parts must not be refused for rounding).
LEDGER_TOLERANCE = 1e-12


def sum_up(values: Iterable[float]) -> float:
    """The sum of floats rounded up: the exact rational sum, then the smallest float ≥ it.

    Used for composed privacy parameters (ρ's, ε's, δ's), which must never be stated below
    the true sum (``sum`` and :func:`math.fsum` round to nearest).
    """
    return _round_up(sum((Fraction(float(v)) for v in values), Fraction(0)))


def sum_upper(n: int, total: float) -> Fraction:
    """An upper bound of the exact sum of ``n`` doubles ≥ 0 that a database summed as ``total``.

    Summed in any order with each addition rounded to nearest (PostgreSQL's ``SUM``, SQLite's
    before 3.43) the error is at most γ₍ₙ₋₁₎·S with γₖ = k·u/(1 − k·u), u = 2⁻⁵³ (Higham,
    *Accuracy and Stability of Numerical Algorithms*, §4.2; additions of doubles do not
    underflow), and SQLite's compensated sum (3.43+) is within 2u·S + O(n·u²)·S; both are
    below 2(n + 2)·u·S/(1 − 2(n + 2)·u), so S ≤ total / (1 − 2(n + 2)·u).
    """
    return Fraction(float(total)) / (1 - Fraction(2 * (n + 2), 1 << 53))


def surely_fits(row, cost, epsilon: float, delta: float) -> bool:
    """Whether the spends a database summed as ``row`` (their count, Σρᵢ, Σεᵢ, Σδᵢ, each ≥ 0)
    plus ``cost`` surely fit (ε, δ): ``Σεᵢ + ε_classic(Σρᵢ, δ − Σδᵢ)`` over upper bounds of the
    exact sums is at least the exact rule's total (it is the rule without folding pure spends,
    with Bun & Steinke's closed form, never below the tight conversion).  False means "decide
    exactly" (:class:`SpendSums`); so does a sum that is not finite.  The fast check of a debit
    far from the limit, in the Ledger and the service: no row is read."""
    if not all(math.isfinite(float(v)) for v in row[1:4]):
        return False
    n = int(row[0]) + 1
    rho, eps, d0 = (_round_up(sum_upper(n, v) + Fraction(c)) for v, c in
                    zip(row[1:4], (cost.rho, cost.epsilon, cost.delta)))
    if d0 > delta:  # the spends' own δ's pass the budget's: refused whatever their ε
        return False
    left = _round_down(Fraction(float(delta)) - Fraction(d0)) if d0 < delta else 0.0
    if rho > 0 and left <= 0:
        return False
    classic = zcdp_to_approx_dp(rho, left, tight=False) if rho > 0 else 0.0
    return _round_up(Fraction(eps) + Fraction(classic)) <= epsilon * (1.0 + LEDGER_TOLERANCE)


@dataclass(frozen=True)
class SpendSums:
    """The exact sums :func:`total_epsilon` composes: Σρᵢ, Σεᵢ, Σδᵢ and, over the pure spends
    (δᵢ = 0 < εᵢ), Σεᵢ and Σεᵢ²/2, as integers in units of 2⁻¹⁰⁷⁴ (2⁻²¹⁴⁹ for Σεᵢ²/2; every
    double is a whole multiple of 2⁻¹⁰⁷⁴), so that spends add exactly and fast.  The one
    summation of the Ledger and the service; :meth:`total` rounds each sum in the direction
    that can only raise the ε (``pure_epsilon``, subtracted, down; the others up)."""

    n: int = 0
    rho: int = 0
    epsilon: int = 0
    delta: int = 0
    pure_epsilon: int = 0
    pure_rho: int = 0

    @classmethod
    def of(cls, costs: Iterable) -> "SpendSums":
        """The sums of ``costs`` (objects with ``rho``, ``epsilon``, ``delta`` such as
        :class:`~privirt.accounting.PrivacyCost`, or ``(rho, epsilon, delta)`` rows)."""
        n = r = e = d = pe = pr = 0
        for c in costs:
            rho, eps, dl = (c.rho, c.epsilon, c.delta) if hasattr(c, "rho") else map(float, c)
            es = _units(eps)
            n, r, e, d = n + 1, r + _units(rho), e + es, d + _units(dl)
            if dl == 0.0 and eps > 0:
                pe, pr = pe + es, pr + es * es
        return cls(n, r, e, d, pe, pr)

    def __add__(self, other: "SpendSums") -> "SpendSums":
        return SpendSums(*(getattr(self, f) + getattr(other, f)
                           for f in ("n", "rho", "epsilon", "delta", "pure_epsilon", "pure_rho")))

    def plus(self, cost) -> "SpendSums":
        """These spends and one more."""
        return self + SpendSums.of([cost])

    def fits(self, epsilon: float, delta: float, extra=None) -> bool:
        """Whether these spends (and ``extra``, a cost) fit the budget (``epsilon``, ``delta``)."""
        return (self if extra is None else self.plus(extra)).total(delta) <= epsilon * (1.0 + LEDGER_TOLERANCE)

    def largest_pure_fit(self, epsilon: float, delta: float) -> float:
        """The largest extra pure-ε spend that still fits (``epsilon``, ``delta``): bisection on the
        composed total, which grows with it (the Ledger's and the service's "remaining ε").

        Found against the exact budget (total ≤ ``epsilon``), rounding down: the relative
        :data:`LEDGER_TOLERANCE` of :meth:`fits` absorbs rounding in the acceptance check only
        and is never handed out as budget.  A pure function of the sums and (``epsilon``,
        ``delta``), so it is cached on exactly those (it takes hundreds of conversions, and the
        service's ``GET /v1/datasets`` asks for it twice a data set each time)."""
        return _largest_pure_fit(self, epsilon, delta)

    def rounded(self) -> dict[str, float]:
        """The sums as :func:`total_epsilon_of_sums` takes them, each rounded outward."""
        one = Fraction(1, 1 << 1074)
        return {"rho": _round_up(self.rho * one), "epsilon": _round_up(self.epsilon * one),
                "delta_spent": _round_up(self.delta * one),
                "pure_epsilon": _round_down(self.pure_epsilon * one),
                "pure_rho": _round_up(Fraction(self.pure_rho, 1 << 2149))}

    def total(self, delta: float) -> float:
        """ε of the composition at ``delta`` (:func:`total_epsilon`; 0 without spends)."""
        return total_epsilon_of_sums(**self.rounded(), delta=delta) if self.n else 0.0


@functools.lru_cache(maxsize=4096, typed=True)
def _largest_pure_fit(sums: SpendSums, epsilon: float, delta: float) -> float:
    """:meth:`SpendSums.largest_pure_fit` (cached: never stale, its key is all it reads)."""
    used = sums.total(delta)
    if not math.isfinite(used) or used >= epsilon:
        return 0.0
    lo, hi = 0.0, float(epsilon)
    if sums.plus((0.0, hi, 0.0)).total(delta) <= epsilon:
        return hi
    for _ in range(100):  # (a remainder tiny beside ε needs more than 64 halvings)
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):  # lo fits and hi does not: every further halving would keep both
            break
        if sums.plus((0.0, mid, 0.0)).total(delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def _units(x: float) -> int:
    """The double ``x`` as an integer number of 2⁻¹⁰⁷⁴ (exact)."""
    num, den = float(x).as_integer_ratio()
    return num << (1075 - den.bit_length())


def total_epsilon_of_sums(*, rho: float, epsilon: float, delta_spent: float, pure_epsilon: float,
                          pure_rho: float, delta: float) -> float:
    """:func:`total_epsilon` from the sums it reads.

    The rule needs only Σρᵢ (``rho``), Σεᵢ (``epsilon``), Σδᵢ (``delta_spent``) and, over the
    pure spends (δᵢ = 0 < εᵢ), Σεᵢ (``pure_epsilon``) and Σεᵢ²/2 (``pure_rho``); a ledger that
    keeps these sums (:class:`SpendSums`, which the Ledger and the service both use) composes
    with it without going through every spend again.  All zeros give 0.  Every operation on these sums is done
    exactly and rounded in the direction that can only raise the ε returned (the δ left for
    the conversion down, the ε's and ρ's added up), so the result is never below the rule's
    exact value.
    """
    for name, value in (("rho", rho), ("epsilon", epsilon), ("delta_spent", delta_spent),
                        ("pure_epsilon", pure_epsilon), ("pure_rho", pure_rho), ("delta", delta)):
        ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
        if not ok or not (0.0 <= value <= (1.0 if name == "delta" else math.inf)):  # NaN fails too
            want = "a number in [0, 1]" if name == "delta" else "a sum >= 0 (a number, inf above the largest double)"
            raise ValueError(f"{name} must be {want}, got {_brief(value)}")
    d0 = delta_spent
    if d0 > delta:
        return math.inf

    def conv(r: float, e: float) -> float:
        if not (math.isfinite(r) and math.isfinite(e)):  # a sum above the largest double (ε = 1e200)
            return math.inf
        if r <= 0.0:
            return e
        left = _round_down(Fraction(delta) - Fraction(d0)) if d0 < delta else 0.0
        if left <= 0.0:
            return math.inf
        return _round_up(Fraction(e) + Fraction(zcdp_to_approx_dp(r, left, tight=True)))

    best = conv(rho, epsilon)
    finite = all(math.isfinite(v) for v in (rho, epsilon, pure_epsilon, pure_rho))
    if pure_epsilon > 0 and delta > d0 and finite:
        best = min(best, conv(_round_up(Fraction(rho) + Fraction(pure_rho)),
                              max(0.0, _round_up(Fraction(epsilon) - Fraction(pure_epsilon)))))
    return best
