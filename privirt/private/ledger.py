"""A crash-safe, process-safe privacy budget ledger in one SQLite file.

A :class:`Ledger` holds one data set's total budget (ε, δ) and every spend made against it
(time, mechanism, ρ, ε, δ, note).  Private functions given ``ledger=`` debit the ledger in one
transaction **before** any noise is drawn, so:

* a process killed at any point never leaves the ledger showing less than was released —
  the debit is committed (``synchronous=FULL``) before a noisy value exists;
* two processes racing cannot overspend — a debit reads the spends and writes its own
  under ``BEGIN IMMEDIATE``, which takes SQLite's write lock for the whole check-and-insert;
* a refused debit raises :class:`~privirt.BudgetExceeded` and leaves the file unchanged.

Composition rule (see ``docs/privacy.md``): with ρ = Σρᵢ, ε = Σεᵢ and δ₀ = Σδᵢ over all
spends, the total spent is (ε + ε_CKS(ρ, δ_B − δ₀), δ_B)-DP, δ_B the ledger's δ budget and
ε_CKS the tight zCDP conversion; pure spends may instead be folded into ρ as εᵢ²/2, whichever
is smaller (:func:`privirt.accounting.total_epsilon`).  A spend is allowed when that total is
≤ the ε budget (up to a relative 1e-12 that absorbs floating-point rounding of the sums).
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from .accounting import (
    NEIGHBOURING_RELATION,
    ApproxDP,
    Guarantee,
    PrivacyCost,
    check_delta,
    check_epsilon,
    total_epsilon,
)
from ..exceptions import BudgetExceeded, PrivirtError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Ledger", "LEDGER_TOLERANCE"]

LEDGER_TOLERANCE = 1e-12
_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS budget (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    epsilon REAL NOT NULL CHECK (epsilon > 0),
    delta REAL NOT NULL CHECK (delta > 0 AND delta < 1),
    relation TEXT NOT NULL,
    created TEXT NOT NULL,
    schema_version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS spends (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    rho REAL NOT NULL CHECK (rho >= 0),
    epsilon REAL NOT NULL CHECK (epsilon >= 0),
    delta REAL NOT NULL CHECK (delta >= 0),
    note TEXT NOT NULL DEFAULT ''
);
"""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


class Ledger:
    """The privacy budget of one data set, stored in an SQLite file.

    Parameters
    ----------
    path : str or path-like
        The ledger file.  Created (with its parent folder) when ``epsilon`` and ``delta``
        are given and the file does not exist yet.
    epsilon, delta : float, optional
        The total budget.  Required to create a ledger; when opening an existing one they
        may be omitted, and if given must equal the stored budget (a ledger's budget cannot
        be changed: that would defeat its purpose).
    timeout : float, default 60
        Seconds to wait for another process's transaction to finish.

    Notes
    -----
    Keep the file on a local file system: the crash and race guarantees rest on SQLite's
    file locks and ``fsync``, which network file systems do not reliably provide.

    Examples
    --------
    >>> led = Ledger("scores.ledger", epsilon=1.0, delta=1e-5)   # doctest: +SKIP
    >>> led.spend(PrivacyCost(epsilon=0.25), mechanism="laplace")  # doctest: +SKIP
    >>> led.remaining_epsilon()                                  # doctest: +SKIP
    0.75
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        timeout: float = 60.0,
    ) -> None:
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise ValueError("a Ledger needs a file path (an in-memory ledger would not persist)")
        self.path = Path(path)
        self.timeout = float(timeout)
        if (epsilon is None) != (delta is None):
            raise ValueError("give both epsilon and delta (to create a ledger) or neither (to open one)")
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            dlt = check_delta(delta)
            self._create_or_check(eps, dlt)
        else:
            if not self.path.exists():
                raise FileNotFoundError(
                    f"no ledger at {self.path}; create one with Ledger(path, epsilon=..., "
                    "delta=...) or `privirt budget init PATH --epsilon E --delta D`"
                )
            self._read_budget()

    # -- connection handling ----------------------------------------------------------
    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        con = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None)
        try:
            con.execute("PRAGMA synchronous=FULL")
            yield con
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise PrivirtError(
                    f"the ledger {self.path} stayed locked by another process for more than "
                    f"{self.timeout:g} s; nothing was spent — retry, or open the ledger with a "
                    "longer timeout="
                ) from exc
            if "readonly" in str(exc) or "read-only" in str(exc):
                raise PrivirtError(
                    f"the ledger {self.path} cannot be written (read-only file, folder or file "
                    "system); nothing was spent — make it writable or use another ledger"
                ) from exc
            raise
        finally:
            con.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction: the write lock is held from the first read to commit."""
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            else:
                con.execute("COMMIT")

    def _create_or_check(self, epsilon: float, delta: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._write() as con:
                self._create_in(con, epsilon, delta)
                row = con.execute("SELECT epsilon, delta FROM budget WHERE id = 1").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path} is not a privirt ledger ({exc})") from None
        if row[0] != epsilon or row[1] != delta:
            raise ValueError(
                f"the ledger at {self.path} already holds the budget ε={row[0]:g}, δ={row[1]:g}; "
                "a budget cannot be changed — open it without epsilon/delta"
            )
        self._epsilon, self._delta = float(row[0]), float(row[1])

    def _create_in(self, con: sqlite3.Connection, epsilon: float, delta: float) -> None:
        """Create the schema and the budget row (inside the caller's write transaction).

        A database that already holds tables but no ``budget`` table is someone else's file:
        it is refused, never turned into a ledger.
        """
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "budget" not in tables:
            raise ValueError(
                f"{self.path} is not a privirt ledger (an SQLite database with other tables); "
                "choose a new path for the ledger"
            )
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                con.execute(statement)
        con.execute(
            "INSERT OR IGNORE INTO budget (id, epsilon, delta, relation, created, schema_version)"
            " VALUES (1, ?, ?, ?, ?, ?)",
            (epsilon, delta, NEIGHBOURING_RELATION, _now(), _SCHEMA_VERSION),
        )

    def _read_budget(self) -> None:
        try:
            with self._connect() as con:
                row = con.execute("SELECT epsilon, delta FROM budget WHERE id = 1").fetchone()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path} is not a privirt ledger ({exc})") from None
        if row is None:
            raise ValueError(f"{self.path} is not a privirt ledger (no budget row)")
        self._epsilon, self._delta = float(row[0]), float(row[1])

    # -- budget -------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """Total ε budget."""
        return self._epsilon

    @property
    def delta(self) -> float:
        """Total δ budget."""
        return self._delta

    @property
    def relation(self) -> str:
        return NEIGHBOURING_RELATION

    def _costs(self, con: sqlite3.Connection) -> list[PrivacyCost]:
        rows = con.execute("SELECT rho, epsilon, delta FROM spends ORDER BY id").fetchall()
        return [PrivacyCost(rho=r, epsilon=e, delta=d) for r, e, d in rows]

    def _total(self, costs: list[PrivacyCost]) -> float:
        return total_epsilon(costs, self._delta) if costs else 0.0

    def _fits(self, total: float) -> bool:
        return total <= self._epsilon * (1.0 + LEDGER_TOLERANCE)

    def spends(self) -> "pd.DataFrame":
        """Every spend: ``id, time, mechanism, rho, epsilon, delta, note``."""
        import pandas as pd

        with self._connect() as con:
            rows = con.execute(
                "SELECT id, time, mechanism, rho, epsilon, delta, note FROM spends ORDER BY id"
            ).fetchall()
        return pd.DataFrame(
            rows, columns=["id", "time", "mechanism", "rho", "epsilon", "delta", "note"]
        ).set_index("id")

    def spent(self) -> ApproxDP:
        """Total spent so far as (ε, δ_budget)-DP (ε = 0, δ = 0 when nothing was spent)."""
        with self._connect() as con:
            costs = self._costs(con)
        if not costs:
            return ApproxDP(0.0, 0.0)
        return ApproxDP(min(self._total(costs), 1e300), self._delta)

    def remaining_epsilon(self) -> float:
        """ε budget left, assuming the next spends are pure ε (an exact statement for them)."""
        with self._connect() as con:
            costs = self._costs(con)
        return self._remaining(costs)

    def _remaining(self, costs: list[PrivacyCost]) -> float:
        used = self._total(costs)
        if not math.isfinite(used) or used >= self._epsilon:
            return 0.0
        # the largest extra pure ε that still fits, by bisection on the monotone total
        lo, hi = 0.0, self._epsilon - 0.0
        if self._fits(self._total(costs + [PrivacyCost(epsilon=hi)])):
            return hi
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            if self._fits(self._total(costs + [PrivacyCost(epsilon=mid)])):
                lo = mid
            else:
                hi = mid
        return lo

    def would_exceed(self, cost: Guarantee) -> bool:
        """Whether spending ``cost`` now would pass the budget (no lock is taken; advisory)."""
        with self._connect() as con:
            costs = self._costs(con)
        return not self._fits(self._total(costs + [PrivacyCost.of(cost)]))

    def spend(self, cost: Guarantee, *, mechanism: str, note: str = "") -> int:
        """Debit ``cost`` in one transaction, or raise :class:`~privirt.BudgetExceeded`.

        The check and the insert happen under one ``BEGIN IMMEDIATE`` transaction and the
        debit is durable (``synchronous=FULL``) when this returns.  Returns the spend's id.
        """
        c = PrivacyCost.of(cost)
        if not mechanism or not isinstance(mechanism, str):
            raise ValueError("mechanism must be a non-empty string")
        with self._write() as con:
            costs = self._costs(con)
            new_total = self._total(costs + [c])
            if not self._fits(new_total):
                used = self._total(costs)
                raise BudgetExceeded(
                    f"privacy budget exceeded for ledger {self.path.name}: this call costs "
                    f"{c} and would bring the total to ε={new_total:.6g} (δ={self._delta:.3g}) "
                    f"against a budget of ε={self._epsilon:.6g}; already spent ε={used:.6g}, "
                    f"remaining ε={self._remaining(costs):.6g} (as pure ε); nothing was spent"
                )
            cur = con.execute(
                "INSERT INTO spends (time, mechanism, rho, epsilon, delta, note) VALUES (?, ?, ?, ?, ?, ?)",
                (_now(), mechanism, c.rho, c.epsilon, c.delta, str(note)),
            )
            spend_id = int(cur.lastrowid)
        return spend_id

    def summary(self) -> str:
        """A readable multi-line account (what ``privirt budget show`` prints)."""
        df = self.spends()
        spent = self.spent()
        lines = [
            f"ledger: {self.path}",
            f"neighbouring relation: {NEIGHBOURING_RELATION}",
            f"budget: ε = {self._epsilon:g}, δ = {self._delta:g}",
            f"spent: ε = {spent.epsilon:.6g} at δ = {self._delta:g} ({len(df)} spend(s))",
            f"remaining: ε = {self.remaining_epsilon():.6g} (for pure-ε spends)",
        ]
        if len(df):
            lines.append("")
            lines.append(df.to_string())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r}, epsilon={self._epsilon!r}, delta={self._delta!r})"
