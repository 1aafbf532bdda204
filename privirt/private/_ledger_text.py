"""The ledger's texts: the :class:`~privirt.BudgetExceeded` message of a refused debit and the
account ``privirt budget show`` prints (:meth:`privirt.Ledger.summary`).  Spent amounts are
printed rounded up, remaining ones down, the budget itself exactly
(:func:`mechanisms.measures.format_exact`).
``led`` is the :class:`~privirt.Ledger` (not imported here: the ledger imports this module)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from mechanisms.measures import format_down, format_exact, format_up
from .accounting import NEIGHBOURING_RELATION, ApproxDP, PrivacyCost, SpendSums, _round_down
from .spends import _format_spends

__all__ = ["refusal", "summary", "LISTED_SPENDS"]

#: Most spends ``privirt budget show`` lists (the newest; every one of 10⁵ took 30 s and 350 MB
#: to lay out); ``--json`` and :meth:`~privirt.Ledger.spends` give them all.
LISTED_SPENDS = 200


def refusal(led: Any, sums: SpendSums, c: PrivacyCost, new_total: float,
            asked: ApproxDP | None) -> str:
    """The BudgetExceeded message: numbers that add up for a newcomer (``sums``: the spends' sums
    the decision used)."""
    used = led._total(sums)
    d0 = sums.rounded()["delta_spent"]  # (spent amounts are printed rounded up, remaining down)
    what = f"this call costs {c}" + (
        f" (asked ε={asked.epsilon:.6g}, δ={asked.delta:.3g})" if asked is not None else "")
    head = f"privacy budget exceeded for ledger {led.path.name}: {what}"
    tail = "; nothing was spent"
    if sums.plus(c).rounded()["delta_spent"] > led._delta:
        left = max(0.0, led._delta - d0)
        return (f"{head}, but its δ={c.delta:.3g} is more than the ledger's δ left ({format_down(left, 3)} of "
                f"{format_exact(led._delta)}); ask for a smaller delta{tail}")
    if c.rho > 0 and sums.plus(c).rounded()["delta_spent"] >= led._delta:
        return (f"{head}, but the ledger's δ={format_exact(led._delta)} is used up by approximate-DP spends "
                f"(such as shuffled randomized response), and a discrete Gaussian (zCDP) release "
                f"needs some δ left; only pure-ε releases (Laplace, randomized response without "
                f"shuffling) remain: remaining ε={format_down(led._remaining(sums), 6)} for them{tail}")
    if sums.rho > 0 and sums.plus(c).rounded()["delta_spent"] >= led._delta:
        left = max(0.0, led._delta - d0)
        return (f"{head}, but its δ={c.delta:.3g} would use up the ledger's δ left ({format_down(left, 3)} "
                f"of {format_exact(led._delta)}), which its discrete Gaussian (zCDP) releases need "
                f"to stay within ε; ask for a smaller delta{tail}")
    return (f"{head} and would bring the total spent to ε={format_up(new_total, 6)} at the ledger's "
            f"δ={format_exact(led._delta)}, against a budget of ε={format_exact(led._epsilon)}; already spent "
            f"ε={format_up(used, 6)} (spends are composed under zCDP and converted once at the ledger's δ, "
            f"so totals are not sums of the calls' ε); remaining: enough for one more Gaussian "
            f"release of ε={format_down(led._remaining_gaussian(sums), 6)} at δ={format_exact(led._delta)}, or a "
            f"pure-ε one of ε={format_down(led._remaining(sums), 6)}{tail}")


def summary(led: Any) -> str:
    """A readable multi-line account (what ``privirt budget show`` prints)."""
    df, costs = led._snapshot()  # the listing, its count and the sums agree; summed once
    total = led._total(costs)
    d0 = min(1.0, costs.rounded()["delta_spent"])  # spent: printed rounded up; remaining: down
    lines = [
        f"ledger: {led.path}",
        f"neighbouring relation: {NEIGHBOURING_RELATION}",
        f"budget: ε = {format_exact(led._epsilon)}, δ = {format_exact(led._delta)}",
        f"spent: ε = {format_up(min(total, 1e300) if costs.n else 0.0, 6)} at δ = {format_exact(led._delta)} ({len(df)} spend(s); "
        "composed under zCDP, not summed)",
        f"remaining: ε = {format_down(led._remaining(costs), 6)} for pure-ε spends, or ε = "
        f"{format_down(led._remaining_gaussian(costs), 6)} for one discrete Gaussian release at δ = {format_exact(led._delta)}",
    ]
    if d0 > 0:
        state = "exhausted: Gaussian releases are refused" if d0 >= led._delta else \
            f"{format_down(_round_down(Fraction(led._delta) - Fraction(d0)), 3)} left for converting the Gaussian spends"
        lines.append(f"δ used by approximate-DP spends: {format_up(d0, 3)} of {format_exact(led._delta)} ({state})")
    if len(df) > LISTED_SPENDS:
        lines += ["", f"the newest {LISTED_SPENDS} of {len(df)} spends (all of them: `privirt budget show PATH "
                      "--json`, or Ledger(PATH).spends()):", _format_spends(df.tail(LISTED_SPENDS)).to_string()]
    elif len(df):
        lines += ["", _format_spends(df).to_string()]
    return "\n".join(lines)
