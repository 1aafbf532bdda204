"""How a :class:`~privirt.Ledger` reads its spends' sums.

A debit far from the limit is decided by the database's sums (:data:`QUICK`, one scan in SQLite,
no row read into Python), widened by their proven rounding error (:func:`~._sums.surely_fits`,
the service's fast check); near the limit, and for the readers, the raw rows are summed exactly
(:class:`~._sums.SpendSums`), each row as written (it was checked then), so the totals are those
the rows' :class:`~privirt.accounting.PrivacyCost` s give, bit for bit.
"""

from __future__ import annotations

import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Callable

from ._ledger_file import check_spends
from ._sums import SpendSums, sum_upper, surely_fits
from .accounting import PrivacyCost

__all__ = ["ASKED_COLUMNS", "QUICK", "ROWS", "checked_costs", "exact_sums", "quick_fits", "quick_sums"]

#: the spends' record of what was asked (schema 2; NULL where the cost was given)
ASKED_COLUMNS = ("asked_epsilon", "asked_delta")

_BIG = "1.7976931348623157e308"  # the largest double: a larger REAL is inf
#: the spends' count, the database's sums of ρ, ε, δ and how many rows are not finite numbers
#: >= 0 (δ <= 1) stored as REAL, nor have an ``asked_*`` (where the table has them) that is NULL or
#: such a number (a ledger holding one is summed through :func:`checked_costs`, which refuses it)
_GOOD = ("typeof(rho) = 'real' AND typeof(epsilon) = 'real' AND typeof(delta) = 'real' AND rho >= 0 AND "
         f"epsilon >= 0 AND delta >= 0 AND rho <= {_BIG} AND epsilon <= {_BIG} AND delta <= 1")
_GOOD_ASKED = (" AND (asked_epsilon IS NULL OR (typeof(asked_epsilon) = 'real' AND asked_epsilon >= 0 AND "
               f"asked_epsilon <= {_BIG})) AND (asked_delta IS NULL OR (typeof(asked_delta) = 'real' AND "
               "asked_delta >= 0 AND asked_delta <= 1))")
QUICK = f"SELECT COUNT(*), TOTAL(rho), TOTAL(epsilon), TOTAL(delta), TOTAL(NOT ({_GOOD})) FROM spends"


def quick_sums(con: sqlite3.Connection, columns: set[str]) -> tuple:
    """The row of :data:`QUICK` for a spends table with ``columns`` (its ``asked_*`` checked too)."""
    good = _GOOD + (_GOOD_ASKED if set(ASKED_COLUMNS) <= columns else "")
    return con.execute(f"SELECT COUNT(*), TOTAL(rho), TOTAL(epsilon), TOTAL(delta), TOTAL(NOT ({good})) "
                       "FROM spends").fetchone()


#: the rows the exact sums are taken over
ROWS = "SELECT rho, epsilon, delta FROM spends ORDER BY id"


def quick_fits(quick: tuple, cost, epsilon: float, delta: float) -> bool:
    """Whether ``cost`` surely fits the budget (``epsilon``, ``delta``) by the database's sums
    ``quick`` (:data:`QUICK`), leaving some δ when it spends δ (so the ledger's warning about the
    last of its δ is not due: ``δ − Σδᵢ − δ_cost > 0`` in floats).  False: decide exactly."""
    if quick[4] or not surely_fits(quick, cost, epsilon, delta):
        return False
    # Σδᵢ + δ_cost ≤ δ(1 − 2⁻⁴⁰) keeps δ − fl(Σδᵢ) above δ_cost by more than its rounding
    return cost.delta == 0 or (sum_upper(int(quick[0]) + 1, quick[3]) + Fraction(cost.delta)
                               <= Fraction(delta) * (1 - Fraction(1, 1 << 40)))


def checked_costs(con: sqlite3.Connection, path: Path, columns: set[str]) -> list[PrivacyCost]:
    """The stored costs, after refusing values that cannot be costs (:func:`~._ledger_file.check_spends`:
    a damaged-ledger error naming ``path``); ``columns``: the spends table's (an older one has no
    ``asked_*``)."""
    asked = ", ".join(c if c in columns else f"NULL AS {c}" for c in ASKED_COLUMNS)
    rows = con.execute(f"SELECT id, rho, epsilon, delta, {asked} FROM spends ORDER BY id").fetchall()
    check_spends(path, rows)
    return [PrivacyCost(rho=r, epsilon=e, delta=d) for _, r, e, d, *_ in rows]


def exact_sums(con: sqlite3.Connection, path: Path, columns: Callable[[sqlite3.Connection], set[str]],
               quick: tuple | None = None) -> SpendSums:
    """The spends' exact sums from their raw rows (checked when written); a ledger holding a row
    that is not a finite number >= 0 (:func:`quick_sums`, or the row ``quick`` it gave) is summed by
    :func:`checked_costs`, which refuses it."""
    if (quick or quick_sums(con, columns(con)))[4]:
        return SpendSums.of(checked_costs(con, path, columns(con)))
    return SpendSums.of(con.execute(ROWS))
