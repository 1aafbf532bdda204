"""The budget arithmetic of :mod:`privirt.serve.store`: the sums of a set of spends
(:class:`Spent`, the Ledger's exact :class:`~privirt.private._sums.SpendSums`) and the
composition rule applied to them."""

from __future__ import annotations

from fractions import Fraction

from ..private._sums import LEDGER_TOLERANCE, _round_down, _round_up
from ..private._sums import SpendSums as Spent

__all__ = ["Spent", "spent_epsilon", "remaining_epsilon", "LEDGER_TOLERANCE", "MIN_DELTA", "MAX_DELTA",
           "check_delta_limit"]

#: δ of a request must lie in [MIN_DELTA, MAX_DELTA]; so must a data set's and an allowance's δ
#: (an allowance's δ is a request's default δ).
MIN_DELTA = 1e-15
MAX_DELTA = 0.1


def check_delta_limit(delta: float, name: str = "delta") -> float:
    """``delta`` if it lies in the service's limit [MIN_DELTA, MAX_DELTA], else a ValueError
    naming ``name``."""
    if not MIN_DELTA <= float(delta) <= MAX_DELTA:
        raise ValueError(f"{name} must lie in [{MIN_DELTA:g}, {MAX_DELTA:g}] (the limit of a request's δ), "
                         f"got {delta!r}")
    return float(delta)


#: the spends' rows whose sums :class:`Spent` holds, of a data set (``?``: its id) or of one
#: analyst's on it (``+ " AND analyst_id = ?"``); summed exactly in Python, as the Ledger sums
_ROWS = "SELECT rho, epsilon, delta FROM spends WHERE dataset_id = ?"


#: what the database sums for the debit's fast check (:func:`_surely_fits`)
_QUICK = ("SELECT COUNT(*), COALESCE(SUM(rho), 0), COALESCE(SUM(epsilon), 0), COALESCE(SUM(delta), 0)"
          " FROM spends WHERE dataset_id = ?")


def _sum_upper(n: int, total: float) -> Fraction:
    """An upper bound of the exact sum of ``n`` doubles ≥ 0 that the database summed as ``total``.

    Summed in any order with each addition rounded to nearest (PostgreSQL's ``SUM``, SQLite's
    before 3.43) the error is at most γ₍ₙ₋₁₎·S with γₖ = k·u/(1 − k·u), u = 2⁻⁵³ (Higham,
    *Accuracy and Stability of Numerical Algorithms*, §4.2; additions of doubles do not
    underflow), and SQLite's compensated sum (3.43+) is within 2u·S + O(n·u²)·S; both are
    below 2(n + 2)·u·S/(1 − 2(n + 2)·u), so S ≤ total / (1 − 2(n + 2)·u).
    """
    return Fraction(float(total)) / (1 - Fraction(2 * (n + 2), 1 << 53))


def _surely_fits(row, cost, epsilon: float, delta: float) -> bool:
    """Whether the spends the database summed as ``row`` (:data:`_QUICK`) plus ``cost`` surely fit
    (ε, δ): ``Σεᵢ + ε_classic(Σρᵢ, δ − Σδᵢ)`` over upper bounds of the exact sums is at least
    the exact rule's total (it is the rule without folding pure spends, with Bun & Steinke's
    closed form, never below the tight conversion).  False means "decide exactly"."""
    from mechanisms.measures import zcdp_to_approx_dp

    n = int(row[0]) + 1
    rho, eps, d0 = (_round_up(_sum_upper(n, v) + Fraction(c)) for v, c in
                    zip(row[1:4], (cost.rho, cost.epsilon, cost.delta)))
    if d0 > delta:  # the spends' own δ's pass the budget's: refused whatever their ε
        return False
    left = _round_down(Fraction(float(delta)) - Fraction(d0)) if d0 < delta else 0.0
    if rho > 0 and left <= 0:
        return False
    classic = zcdp_to_approx_dp(rho, left, tight=False) if rho > 0 else 0.0
    return _round_up(Fraction(eps) + Fraction(classic)) <= epsilon * (1.0 + LEDGER_TOLERANCE)


def spent_epsilon(spent: Spent, delta: float) -> float:
    """ε of the composed spends at the budget's δ (0 without spends)."""
    return float(spent.total(delta))


def remaining_epsilon(spent: Spent, epsilon: float, delta: float) -> float:
    """The largest extra pure-ε spend that still fits (ε, δ), as :meth:`privirt.Ledger.remaining_epsilon`
    finds it (:meth:`SpendSums.largest_pure_fit`), so that a pure-ε request this large fits.
    (``ε_budget − ε_spent`` was not: where the total folds pure spends into ρ, an extra x costs
    about x·√(2 log(1/δ)); 100 spends of 0.01 against (1, 1e-5) said 0.62 where 0.23 fits.)
    """
    return spent.largest_pure_fit(epsilon, delta)


def _fits(spent: Spent, cost, epsilon: float, delta: float) -> bool:
    """Whether the spends plus ``cost`` fit (ε, δ), composed exactly as :func:`total_epsilon`
    composes (the Ledger's rule and sums)."""
    return spent.fits(epsilon, delta, cost)
