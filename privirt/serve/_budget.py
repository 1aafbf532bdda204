"""The budget arithmetic of :mod:`privirt.serve.store`: the sums of a set of spends
(:class:`Spent`, the Ledger's exact :class:`~privirt.private._sums.SpendSums`) and the
composition rule applied to them."""

from __future__ import annotations

from ..private._ledger_file import budget_delta_ok, budget_epsilon_ok, finite_real
from ..private._sums import LEDGER_TOLERANCE
from ..private._sums import SpendSums as Spent
from ..private.accounting import MAX_EPSILON
from ._backends import NotDebited

__all__ = ["Spent", "spent_epsilon", "remaining_epsilon", "LEDGER_TOLERANCE", "MIN_DELTA", "MAX_DELTA",
           "check_delta_limit", "check_stored_values", "stored_budget", "spent_rows", "StateDamaged"]

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


#: a spend whose stored values are finite numbers (δ at most 1): a hand edit the CHECKs let through
#: (text, which SQLite orders above every number, or an infinity) fails it, in SQLite and PostgreSQL
_GOOD_SPEND = "rho <= 1e308 AND epsilon <= 1e308 AND delta <= 1"

#: what the database sums for the debit's fast check (:func:`privirt.private._sums.surely_fits`, the Ledger's check too), and its bad spends
_QUICK = ("SELECT COUNT(*), COALESCE(SUM(rho), 0), COALESCE(SUM(epsilon), 0), COALESCE(SUM(delta), 0),"
          f" COALESCE(SUM(CASE WHEN {_GOOD_SPEND} THEN 0 ELSE 1 END), 0) FROM spends WHERE dataset_id = ?")


class StateDamaged(NotDebited):
    """A state holding a budget or cost no privirt wrote (a hand edit the CHECKs let through): one
    line for a command; a request is answered 503 before its debit, the cause in the log."""


def damaged(state: str, what: str) -> StateDamaged:
    """The one line for a state holding a value no privirt wrote (a hand edit)."""
    return StateDamaged(f"the state {state} is damaged: {what}; nothing was spent — correct the value or restore "
                      "the state from a backup copy (one `privirt serve backup` made)")


def stored_budget(state: str, what: str, epsilon: object, delta: object) -> tuple[float, float]:
    """A stored (ε, δ) budget as floats, or :func:`damaged` (text, an infinite ε: no limit); the
    ledger's rule (:func:`~privirt.private._ledger_file.check_budget`)."""
    if not (budget_epsilon_ok(epsilon) and budget_delta_ok(delta)):
        raise damaged(state, f"{what} has the budget ε = {epsilon!r}, δ = {delta!r}, not numbers in "
                             f"(0, {MAX_EPSILON:g}] and (0, 1)")
    return float(epsilon), float(delta)


def spent_rows(state: str, rows: list) -> Spent:
    """The exact sums of the spends' ``(rho, epsilon, delta)`` rows, or :func:`damaged` for a value
    that is not a finite number >= 0 (Spent's exact sum overflowed on an infinity)."""
    for r in rows:
        if not all(finite_real(v) and v >= 0 for v in r):
            raise damaged(state, f"a spend holds ρ = {r[0]!r}, ε = {r[1]!r}, δ = {r[2]!r}, not finite numbers >= 0")
    return Spent.of(rows)


def check_stored_values(con, b) -> None:
    """Refuse (:func:`damaged`) a state whose data sets, allowances or spends hold values that
    cannot be budgets or costs; read when a state is opened."""
    for name, e, d in con.execute("SELECT name, epsilon, delta FROM datasets").fetchall():
        stored_budget(b.describe, f"the data set {name!r}", e, d)
    for name, ds, e, d in con.execute("SELECT an.name, d.name, a.epsilon, a.delta FROM allowances a JOIN analysts an"
                                      " ON an.id = a.analyst_id JOIN datasets d ON d.id = a.dataset_id").fetchall():
        stored_budget(b.describe, f"the allowance of {name!r} on {ds!r}", e, d)
    bad = con.execute(f"SELECT id, rho, epsilon, delta FROM spends WHERE NOT ({_GOOD_SPEND})").fetchone()
    if bad is not None:
        raise damaged(b.describe, f"spend #{bad[0]} has ρ = {bad[1]!r}, ε = {bad[2]!r}, δ = {bad[3]!r}, not "
                                  "finite numbers >= 0")


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
