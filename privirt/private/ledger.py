"""A crash-safe, process-safe privacy budget ledger in one SQLite file.

A :class:`Ledger` holds one data set's total budget (ε, δ) and every spend made against it
(time, mechanism, ρ, ε, δ, note).  Private functions given ``ledger=`` debit the ledger in one
transaction **before** any noise is drawn, so:

* a process killed at any point never leaves the ledger showing less than was released —
  the debit is committed (``synchronous=EXTRA``) before a noisy value exists;
* two processes racing cannot overspend — a debit reads the spends and writes its own
  under ``BEGIN IMMEDIATE``, which takes SQLite's write lock for the whole check-and-insert;
* a refused debit raises :class:`~privirt.BudgetExceeded` and leaves the file unchanged.

Composition rule (see ``docs/privacy.md``): with ρ = Σρᵢ, ε = Σεᵢ and δ₀ = Σδᵢ over all
spends, the total spent is (ε + ε_CKS(ρ, δ_B − δ₀), δ_B)-DP, δ_B the ledger's δ budget and
ε_CKS the tight zCDP conversion; pure spends may instead be folded into ρ as εᵢ²/2, whichever
is smaller (:func:`privirt.accounting.total_epsilon`).  A spend is allowed when that total is
≤ the ε budget (up to a relative 1e-12 that absorbs floating-point rounding of the sums).

Each spend also stores the (ε, δ) the call asked for (``asked_epsilon``, ``asked_delta``;
schema version 2 — older ledgers gain the two columns, empty for their old spends, at their
next debit), so that ``privirt budget show`` lists a Gaussian spend by what was asked beside
its ρ.  A damaged file, a dropped table or a file that is not a ledger raises
:class:`~privirt.exceptions.LedgerError` naming the file, with nothing spent; so does an
empty one, and ``Ledger(path, epsilon=..., delta=...)`` (create, or open the same budget) never
re-creates the schema or the budget row in an existing file: a new ledger is written beside its
path and linked there complete, so a truncated ledger cannot pass for a new one.

Every debit committed by this process is also noted in a small in-memory journal
(:func:`spends_since`), so that a run interrupted or failing **after** its debit can say that the
budget was spent and how much: the private entry points add that note to the exception
(:func:`reports_spends`; ``exc.privirt_spends`` and ``exc.__notes__``) and the CLI prints it.
"""

from __future__ import annotations

import datetime as _dt
import os
import sqlite3
import time
import warnings
from contextlib import contextmanager, suppress
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from mechanisms.measures import format_exact

from .accounting import (
    NEIGHBOURING_RELATION,
    ApproxDP, Guarantee, PrivacyCost,
    SpendSums,
    _round_down,
    check_delta, check_epsilon,
    zcdp_to_approx_dp,
)
from .._checks import check_nonnegative_number, check_note
from ..exceptions import BudgetExceeded, LedgerError, PrivirtError, user_stacklevel
from ._sqlite import (_NotWhole, _damaged, _sqlite_uri, _sync_folder, creating_file, immediate_transaction,
                      make_durable, undecoded)
from . import _ledger_text
from ._ledger_file import (SCHEMA_VERSION, check_budget, check_folders, check_not_folder, check_side_file_names,
                           check_spends, check_stored, file_exists)
from ._ledger_sums import ASKED_COLUMNS, checked_costs, exact_sums, quick_fits, quick_sums
from ._sums import LEDGER_TOLERANCE
from .spends import (Spend, _journal, journal_mark, note_spent, reports_spends,
                     spends_since)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["Ledger", "LEDGER_TOLERANCE", "Spend", "spends_since", "journal_mark", "reports_spends",
           "DEFAULT_DELTA_SHARE"]

#: With a ledger and no δ given, a call whose cost spends δ itself (shuffled randomized response:
#: (ε, δ)-DP composed by adding δ's) asks for this share of the ledger's δ budget, never all of
#: it (the Gaussian's δ is not spent per call: its ρ is converted at the ledger's δ).
DEFAULT_DELTA_SHARE: float = 0.1
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
    note TEXT NOT NULL DEFAULT '',
    asked_epsilon REAL,
    asked_delta REAL
);
"""
#: columns added by schema version 2 (older ledgers gain them at their next debit)
_BUDGET_ROW = "SELECT epsilon, delta, relation, schema_version, created FROM budget WHERE id = 1"
_SPEND_COLUMNS = ["id", "time", "mechanism", "rho", "epsilon", "delta", "note", *ASKED_COLUMNS]


class _Refused(Exception):
    """A debit that does not fit: raised inside the write transaction to roll it back."""


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


class Ledger:
    """The privacy budget of one data set, stored in an SQLite file.

    Parameters
    ----------
    path : str or path-like
        The ledger file.  Created when ``epsilon`` and ``delta`` are given and the file does
        not exist yet; its folder must exist (a missing folder is refused, as by the CLI: a
        mistyped path must not start a fresh budget somewhere else).
    epsilon, delta : float, optional
        The total budget.  Required to create a ledger; when opening an existing one they
        may be omitted, and if given must equal the stored budget (a ledger's budget cannot
        be changed: that would defeat its purpose).
    timeout : float, default 60
        Seconds to wait for another process's transaction to finish (a finite number >= 0).

    Attributes
    ----------
    created : bool
        Whether this call created the file (False: it opened one, a concurrent creator's too).

    Notes
    -----
    Keep the file on a local file system: the crash and race guarantees rest on SQLite's
    file locks and ``fsync``, which network file systems do not reliably provide.

    Examples
    --------
    >>> led = Ledger("scores.ledger", epsilon=1.0, delta=1e-5)   # doctest: +SKIP
    >>> led.spend(PrivacyCost(epsilon=0.25), mechanism="laplace")  # doctest: +SKIP
    1
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
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path must be the ledger's file path (a str or path-like), got {path!r}")
        timeout = check_nonnegative_number("timeout", timeout, " (seconds)")
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise ValueError("a Ledger needs a file path (an in-memory ledger would not persist)")
        self.path = Path(path)  # as given: what messages and summaries print
        # the file itself, resolved once: a later os.chdir or a re-pointed symlink must not
        # move this object's debits to another ledger of the same name
        try:
            self._file = Path(os.path.realpath(path))
        except (OSError, ValueError) as exc:
            raise LedgerError(f"cannot open the ledger {self.path} ({exc}); nothing was spent — "
                              "check the path") from exc
        check_not_folder(self._file, self.path)
        self.timeout = timeout
        self.created = False
        if (epsilon is None) != (delta is None):
            raise ValueError("give both epsilon and delta (to create a ledger) or neither (to open one)")
        if epsilon is not None:
            eps = check_epsilon(epsilon)
            dlt = check_delta(delta)
            self._create_or_check(eps, dlt)
        else:
            if not file_exists(self._file, self.path):
                raise FileNotFoundError(
                    f"no ledger at {self.path}; create one with Ledger(path, epsilon=..., "
                    "delta=...) or `privirt budget init PATH --epsilon E --delta D`"
                )
            self._read_budget()

    # -- connection handling ----------------------------------------------------------
    @contextmanager
    def _connect(self, create: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection to the ledger's file; only ``create`` may make the file (SQLite's
        ``mode=rwc``): opening an existing ledger whose file went away must not leave an empty
        file behind, which the next ``Ledger(path, epsilon=..., delta=...)`` would refuse."""
        try:
            uri = _sqlite_uri(self._file, "rwc" if create else "rw")
            con = sqlite3.connect(uri, uri=True, timeout=self.timeout, isolation_level=None)
        except (sqlite3.Error, OSError, RuntimeError) as exc:  # (RuntimeError: a symlink loop, Python < 3.13)
            raise LedgerError(f"cannot open the ledger {self.path} ({exc}); nothing was spent — "
                              "check the path and its permissions") from exc
        try:
            make_durable(con)
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
            if "unable to open" in str(exc):
                raise LedgerError(f"cannot open the ledger {self.path} ({exc}); nothing was spent — "
                                  "check the path and its permissions") from exc
            if any(w in str(exc) for w in ("no such", "malformed", "Could not decode")):  # a dropped table
                # or column, text stored that is not UTF-8 ("Could not decode to UTF-8 column 'note' ...")
                raise _damaged(self.path, exc) from exc
            raise LedgerError(  # a full disk, an I/O error, ...: the transaction was rolled back
                f"the ledger {self.path} could not be used ({exc}); nothing was spent — fix the "
                "cause (disk space, file system) and retry"
            ) from exc
        except sqlite3.DatabaseError as exc:  # malformed pages, not a database at all, ...
            raise _damaged(self.path, exc) from exc
        except UnicodeDecodeError as exc:  # SQLite's "malformed database schema" quoting bytes not UTF-8
            raise _damaged(self.path, undecoded(exc)) from exc
        finally:
            con.close()

    @contextmanager
    def _write(self, create: bool = False) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction: the write lock is held from the first read to commit."""
        with self._connect(create) as con, immediate_transaction(con):
            yield con

    def _create_or_check(self, epsilon: float, delta: float) -> None:
        check_folders(self._file, self.path)
        if not file_exists(self._file, self.path, creating=True):
            check_side_file_names(self._file, self.path)
            try:
                self.created = self._create_whole(epsilon, delta)
            except (sqlite3.Error, OSError) as exc:  # a read-only or full folder, a name too long, ...
                raise LedgerError(f"cannot create the ledger {self.path} ({exc}); nothing was spent — check "
                                  "the folder, its permissions and free space") from exc
        if not file_exists(self._file, self.path, creating=True):  # a file system without hard links: created in place
            with suppress(OSError):  # private (mode 0600) before SQLite opens it (its own would be 0644)
                os.close(os.open(self._file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            with self._write(create=True) as con:  # (a concurrent creator: one commits, the other finds it)
                self.created = self._create_in(con, epsilon, delta)
                row = con.execute(_BUDGET_ROW).fetchone()
        else:
            # an existing file is opened, never (re)created: a truncated or damaged ledger must not
            # come back with its full budget (a new ledger appears at its path only complete,
            # _create_whole).  The write lock waits for a creator still committing in place.
            row = self._existing_budget()
            if row is None:
                raise _damaged(self.path, "no budget row")
            self._check_integrity()
        check_stored(self.path, row[2], row[3])
        check_budget(self.path, row[0], row[1])
        if row[0] != epsilon or row[1] != delta:
            held = f"ε={format_exact(row[0])}, δ={format_exact(row[1])}"
            raise ValueError(f"the ledger at {self.path} already holds the budget {held}; "
                             "a budget cannot be changed — open it without epsilon/delta")
        self._epsilon, self._delta = float(row[0]), float(row[1])
        self._created = row[4]  # which ledger this object opened (spend re-checks it)

    def _existing_budget(self, waits: int = 20) -> tuple | None:
        """The budget row of the ledger file at ``path`` (None: no row), refusing a file that is
        not a whole ledger.  An empty file is retried for a while (``waits`` × 0.1 s): where hard
        links are missing a creator makes the file in place, empty until its first commit."""
        for attempt in range(waits + 1):
            try:
                with self._write() as con:
                    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                    if "budget" in tables:
                        return con.execute(_BUDGET_ROW).fetchone()
                    raise _NotWhole  # (rolled back: an empty file stays empty, untouched)
            except _NotWhole:
                pass
            if tables and "spends" in tables:
                raise _damaged(self.path, "no budget table")
            if tables:
                raise ValueError(f"{self.path} is not a privirt ledger (an SQLite database with other "
                                 "tables); choose a new path for the ledger")
            if attempt < waits:
                time.sleep(0.1)
        raise _damaged(self.path, "an empty file: a truncated ledger, or one a process created in place and "
                                  "stopped before writing; delete it only if no spend was ever recorded in it")

    def _create_whole(self, epsilon: float, delta: float) -> bool:
        """Create the ledger in a private file beside ``path``, then link it to ``path`` only if
        nothing is there (``os.link`` fails on an existing name: two creators, one ledger).  A
        ledger thus never appears at its path empty or half-written, so an empty or damaged
        file there is refused rather than taken for a creation that stopped.  Where the file
        system has no hard links nothing is linked and the caller creates the file in place.
        True only when this call linked its file at ``path``."""
        # a short name of its own (a long ledger name plus a suffix could pass the name limit);
        # one left by a process killed here is a finished ledger or an unused file, never the
        # ledger, and the next creation in the folder removes it (creating_file)
        with creating_file(self._file) as tmp:
            con = sqlite3.connect(str(tmp), isolation_level=None)
            try:
                make_durable(con)
                with immediate_transaction(con):
                    self._create_in(con, epsilon, delta)
            finally:
                con.close()
            try:
                os.link(tmp, self._file)
            except FileExistsError:
                return False  # another process's ledger: opened by the caller
            except OSError:
                return False  # no hard links here (the caller creates in place)
            _sync_folder(self._file.parent)
            return True

    def _create_in(self, con: sqlite3.Connection, epsilon: float, delta: float) -> bool:
        """Create the schema and the budget row in the caller's write transaction (True: written).

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
        return con.execute(
            "INSERT OR IGNORE INTO budget (id, epsilon, delta, relation, created, schema_version)"
            " VALUES (1, ?, ?, ?, ?, ?)",
            (epsilon, delta, NEIGHBOURING_RELATION, _now(), SCHEMA_VERSION),
        ).rowcount == 1

    def _read_budget(self) -> None:
        with self._connect() as con:
            row = con.execute(_BUDGET_ROW).fetchone()
        if row is None:
            raise _damaged(self.path, "no budget row")
        check_stored(self.path, row[2], row[3])
        self._epsilon, self._delta = check_budget(self.path, row[0], row[1])
        self._created = row[4]  # which ledger this object opened (spend re-checks it)
        self._check_integrity()

    def _check_integrity(self) -> None:
        """Refuse a damaged ledger when it is opened: SQLite's ``quick_check`` (every page and
        index, a few milliseconds for a ledger) and the spends table."""
        with self._connect() as con:
            problems = [r[0] for r in con.execute("PRAGMA quick_check").fetchall()]
            if problems != ["ok"]:
                raise _damaged(self.path, "; ".join(problems[:2]))
            self._spend_columns(con)

    @staticmethod
    def _spend_columns(con: sqlite3.Connection) -> set[str]:
        cols = {r[1] for r in con.execute("PRAGMA table_info(spends)").fetchall()}
        if not cols:
            raise sqlite3.OperationalError("no such table: spends")
        return cols

    def _migrate(self, con: sqlite3.Connection) -> None:
        """Add the version-2 columns to an older ledger (inside the caller's write transaction),
        after refusing a newer one, one for another relation, or another ledger than the one this
        object opened (the file may have been replaced: its budget is not the one checked)."""
        row = con.execute(_BUDGET_ROW).fetchone()
        if row is None:  # a deleted budget row: a damaged ledger, not a newer one
            raise _damaged(self.path, "no budget row")
        check_stored(self.path, row[2], row[3])
        if (*check_budget(self.path, row[0], row[1]), row[4]) != (self._epsilon, self._delta, self._created):
            raise LedgerError(
                f"the ledger {self.path} is not the one this object opened (the file was replaced: "
                f"it now holds the budget ε={format_exact(row[0])}, δ={format_exact(row[1])} made "
                f"{row[4]}); nothing was spent — open the ledger again")
        cols = self._spend_columns(con)
        for name in ASKED_COLUMNS:
            if name not in cols:
                con.execute(f"ALTER TABLE spends ADD COLUMN {name} REAL")
        con.execute("UPDATE budget SET schema_version = ? WHERE id = 1 AND schema_version < ?",
                    (SCHEMA_VERSION, SCHEMA_VERSION))

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
        return checked_costs(con, self.path, self._spend_columns(con))

    def _sums(self, con: sqlite3.Connection, quick: tuple | None = None) -> SpendSums:
        return exact_sums(con, self.path, self._spend_columns, quick)

    def _total(self, costs: "list[PrivacyCost] | SpendSums", extra: PrivacyCost | None = None) -> float:
        # total_epsilon's exact rule, from sums computed once when at hand (bisections add one cost)
        sums = costs if isinstance(costs, SpendSums) else SpendSums.of(costs)
        return (sums if extra is None else sums.plus(extra)).total(self._delta)

    def _fits(self, total: float) -> bool:
        return total <= self._epsilon * (1.0 + LEDGER_TOLERANCE)

    def spends(self) -> "pd.DataFrame":
        """Every spend: ``id, time, mechanism, rho, epsilon, delta, note, asked_epsilon,
        asked_delta`` (``rho``, ``epsilon``, ``delta``: the cost debited; ``asked_*``: the
        (ε, δ) the call asked for, NaN for spends recorded before privirt stored it)."""
        import pandas as pd

        with self._connect() as con:
            cols = self._spend_columns(con)
            asked = ", ".join(c if c in cols else f"NULL AS {c}" for c in ASKED_COLUMNS)
            rows = con.execute(
                f"SELECT id, time, mechanism, rho, epsilon, delta, note, {asked} FROM spends ORDER BY id"
            ).fetchall()
        check_spends(self.path, [(r[0], *r[3:6], *r[7:9]) for r in rows])
        df = pd.DataFrame(rows, columns=_SPEND_COLUMNS).set_index("id")
        return df.astype({c: float for c in ASKED_COLUMNS})

    def spent(self) -> ApproxDP:
        """Total spent so far as (ε, δ_budget)-DP (ε = 0, δ = 0 when nothing was spent)."""
        with self._connect() as con:
            costs = self._sums(con)
        if not costs.n:
            return ApproxDP(0.0, 0.0)
        return ApproxDP(min(self._total(costs), 1e300), self._delta)

    def remaining_epsilon(self) -> float:
        """ε budget left, assuming the next spends are pure ε (an exact statement for them)."""
        with self._connect() as con:
            costs = self._sums(con)
        return self._remaining(costs)

    def _remaining(self, costs: SpendSums) -> float:
        return costs.largest_pure_fit(self._epsilon, self._delta)  # (the service's remaining ε too)

    def delta_spent(self) -> float:
        """δ used by the spends' own δ terms (approximate-DP spends such as shuffled
        randomized response); the Gaussian's ρ is converted at what is left of the δ budget."""
        with self._connect() as con:
            costs = self._sums(con)
        return min(1.0, costs.rounded()["delta_spent"])  # the exact sum, rounded up

    def remaining_gaussian_epsilon(self, delta: float | None = None) -> float:
        """The ε (at δ = ``delta``, default the ledger's δ) that one more discrete Gaussian
        release could ask for: the largest ρ that still fits, as a single release states it.

        0 when the budget, or the ledger's δ (used up by approximate-DP spends), is exhausted.
        """
        with self._connect() as con:
            costs = self._sums(con)
        return self._remaining_gaussian(costs, delta)

    def _remaining_gaussian(self, costs: SpendSums, delta: float | None = None) -> float:
        d = self._delta if delta is None else check_delta(delta)
        if costs.rounded()["delta_spent"] >= self._delta:
            return 0.0
        if not self._fits(self._total(costs)):
            return 0.0
        lo, hi = 0.0, self._epsilon  # ε_CKS(ρ) ≥ ρ: no ρ above the ε budget fits
        for _ in range(80):  # against the exact budget: the tolerance is not handed out as budget
            mid = 0.5 * (lo + hi)
            if self._total(costs, PrivacyCost(rho=mid)) <= self._epsilon:
                lo = mid
            else:
                hi = mid
        return zcdp_to_approx_dp(lo, d) if lo > 0 else 0.0

    def default_delta(self, spends_delta: bool) -> float:
        """The δ a call against this ledger uses when none is given: the ledger's δ for a call
        whose ρ is converted at it (the Gaussian), :data:`DEFAULT_DELTA_SHARE` of it for a
        call that spends δ itself (shuffled randomized response) — never all of it.  The share
        is the exact product of the two as written (decimal), rounded down to a float, so that
        a tenth of 1e-05 is spent and reported as 1e-06 (the float product is above it)."""
        if not spends_delta:
            return self._delta
        return _round_down(Fraction(repr(self._delta)) * Fraction(repr(DEFAULT_DELTA_SHARE)))

    def would_exceed(self, cost: Guarantee) -> bool:
        """Whether spending ``cost`` now would pass the budget (no lock is taken; advisory)."""
        c = PrivacyCost.of(cost)
        with self._connect() as con:
            quick = quick_sums(con, self._spend_columns(con))
            if quick_fits(quick, c, self._epsilon, self._delta):  # (no row read)
                return False
            costs = self._sums(con, quick)
        return not self._fits(self._total(costs, c))

    def spend(self, cost: Guarantee, *, mechanism: str, note: str = "",
              asked: ApproxDP | tuple[float, float] | None = None) -> int:
        """Debit ``cost`` in one transaction, or raise :class:`~privirt.BudgetExceeded`.

        The check and the insert happen under one ``BEGIN IMMEDIATE`` transaction and the
        debit is durable (``synchronous=EXTRA``) when this returns.  ``asked`` (optional) is the
        (ε, δ) the call asked for, stored beside the cost.  Returns the spend's id.  The debit
        is journaled (:func:`spends_since`); an interrupt that arrives once the commit is done
        carries it (``exc.privirt_spends``).
        """
        c = PrivacyCost.of(cost)
        if not mechanism or not isinstance(mechanism, str):
            raise ValueError("mechanism must be a non-empty string")
        note = check_note(note)
        if asked is not None:
            if not isinstance(asked, (ApproxDP, tuple, list)) or (
                    not isinstance(asked, ApproxDP) and len(asked) != 2):
                raise ValueError(f"asked must be an ApproxDP or an (epsilon, delta) pair, got {asked!r}")
            a = asked if isinstance(asked, ApproxDP) else ApproxDP(*asked)
            asked = ApproxDP(float(a.epsilon), float(a.delta))
        spend_id: int | None = None
        time = _now()
        rec: Spend | None = None
        costs: SpendSums | None = None  # (None: far from the limit, the database's sums decided)
        try:
            with self._write() as con:
                self._migrate(con)
                quick = quick_sums(con, self._spend_columns(con))
                if not quick_fits(quick, c, self._epsilon, self._delta):  # near the limit: decided exactly
                    costs = self._sums(con, quick)
                    new_total = self._total(costs, c)
                    if not self._fits(new_total):
                        raise _Refused()  # rolled back; the message is built once the lock is released
                cur = con.execute(
                    "INSERT INTO spends (time, mechanism, rho, epsilon, delta, note, asked_epsilon, "
                    "asked_delta) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (time, mechanism, c.rho, c.epsilon, c.delta, note,
                     None if asked is None else asked.epsilon, None if asked is None else asked.delta),
                )
                spend_id = int(cur.lastrowid)
            rec = _journal(Spend(self.path, spend_id, c, mechanism, asked))
        except _Refused:
            raise BudgetExceeded(self._refusal(costs, c, new_total, asked)) from None
        except BaseException as exc:
            if spend_id is not None and rec is None:  # interrupted at or after the commit
                certain = self._committed(spend_id, time)
                if certain is not False:
                    note_spent(exc, [_journal(Spend(self.path, spend_id, c, mechanism, asked,
                                                    certain=bool(certain)))])
            raise
        # (Σδᵢ rounded to nearest, as math.fsum gave it; a fast debit surely left δ)
        left = self._delta if costs is None else self._delta - costs.delta / (1 << 1074) - c.delta
        if c.delta > 0 and left <= 0:
            try:  # after the commit, about it: a warning turned into an error says the debit stands
                warnings.warn(
                    f"this spend used the last of ledger {self.path.name}'s "
                    f"δ={format_exact(self._delta)}: later discrete Gaussian (zCDP) "
                    "releases against it will be refused; only pure-ε releases (Laplace, "
                    "randomized response without shuffling) remain possible",
                    UserWarning, stacklevel=user_stacklevel(),
                )
            except BaseException as exc:
                note_spent(exc, [rec])
                raise
        return spend_id

    def _committed(self, spend_id: int, time: str) -> bool | None:
        """Whether the row of an interrupted debit is in the file (None: could not tell)."""
        try:
            with self._connect() as con:
                row = con.execute("SELECT 1 FROM spends WHERE id = ? AND time = ?", (spend_id, time)).fetchone()
            return row is not None
        except BaseException:  # noqa: BLE001 - a second interrupt, a locked file: say "may have"
            return None

    def _refusal(self, costs: SpendSums, c: PrivacyCost, new_total: float,
                 asked: ApproxDP | None) -> str:
        """The BudgetExceeded message: numbers that add up for a newcomer."""
        return _ledger_text.refusal(self, costs, c, new_total, asked)

    def _snapshot(self) -> "tuple[pd.DataFrame, SpendSums]":
        """The spends and their sums from one read (a spend may land between two reads)."""
        df = self.spends()
        return df, SpendSums.of((r, e, d) for r, e, d in df[["rho", "epsilon", "delta"]].itertuples(index=False))

    def account(self) -> dict:
        """The spends, the total spent, the remaining ε (pure; one Gaussian release) and the δ used,
        from one read of the spends (what ``privirt budget show --json`` prints)."""
        df, sums = self._snapshot()
        spent = ApproxDP(min(self._total(sums), 1e300), self._delta) if sums.n else ApproxDP(0.0, 0.0)
        return {"spends": df, "spent": spent, "remaining_epsilon": self._remaining(sums),
                "remaining_gaussian_epsilon": self._remaining_gaussian(sums),
                "delta_spent": min(1.0, sums.rounded()["delta_spent"])}

    def summary(self) -> str:
        """A readable multi-line account (what ``privirt budget show`` prints)."""
        return _ledger_text.summary(self)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r}, epsilon={self._epsilon!r}, delta={self._delta!r})"

