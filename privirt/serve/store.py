"""The service's state: data sets, analysts, allowances, requests and spends.

One interface (:class:`Store`), two backends:

* **SQLite** (``STATE`` is a file path; the default, no server needed).  Every write runs in a
  ``BEGIN IMMEDIATE`` transaction (SQLite's write lock is held from the first read to the
  commit) with ``synchronous=EXTRA``, as :class:`privirt.Ledger` does: a debit is durable when
  :meth:`Store.debit` returns, and two processes racing cannot overspend.  The journal is in
  WAL mode so that readers do not wait for writers.
* **PostgreSQL** (``STATE`` is a ``postgresql://`` URL; several service replicas may share
  it).  A debit locks the analyst's row and then the data set's row (``SELECT ... FOR
  UPDATE``, always in that order, so two debits cannot deadlock), sums the spends, checks and
  inserts, then commits: every debit against a data set is serialised by its row lock.

Either way the debit reads the spends' (ρ, ε, δ) inside the transaction (those of the data set
and those of the analyst's allowance) and sums them exactly, as the Ledger does
(:class:`Spent`, in whole units of 2⁻¹⁰⁷⁴), so the service and a Ledger with the same budget
and spends state the same totals and decisions.  A debit first asks the database for the sums
(``SELECT SUM(...)``) and accepts at once when these, widened by their proven rounding error,
surely fit (:func:`~privirt.private._sums.surely_fits`, the Ledger's check too); only a debit near the limit reads
and sums the rows.

The validated data of a data set is stored **in the state** (an uncompressed ``.npy`` blob of
the 0/1/missing codes as int8, with its SHA-256): one thing to back up and to protect, and the
same for both backends.  Its size, hence the time to read, hash and decode it, depends only on
n × m (a compressed blob's would depend on the values); states written before keep their
compressed ``.npz`` blobs, which still decode (each process loads every data set at start-up).

Budget rule: the analyst's allowance on the data set and the data set's total budget are
checked and debited together, in one transaction, before any noise is drawn; each is composed
as :mod:`privirt.ledger` composes a ledger (zCDP, :func:`privirt.accounting.total_epsilon` at
the allowance's or the budget's δ).
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .._checks import storable_text
from ..private._sqlite import _sqlite_uri
from . import _admin, _records, keys as _keys
from ._admin import CLI, SCHEMA_VERSION, _now, log_event
from ._codes import decode_codes, encode_codes  # noqa: F401 (the state's blob format)
from ._backends import (NotDebited, StateError, _backend, _SQLite, backup_target, new_private_file,
                        unavailable, usable)
from ._modes import readable_by_others
from ._limits import (OverQuota, check_count, check_release_limit, max_releases,
                      write_max_releases)
from ..private._sums import surely_fits
from ._budget import (_QUICK, _ROWS, Spent, _fits, check_delta_limit,  # noqa: F401
                      check_stored_values, damaged, remaining_epsilon, spent_epsilon, spent_rows, stored_budget)

__all__ = ["Store", "open_store", "init_store", "Principal", "OverBudget", "OverQuota", "DuplicateRequest",
           "NoAccess", "StateError", "Spent", "SCHEMA_VERSION"]


class NoAccess(Exception):
    """The analyst is revoked or has no allowance on the data set (shown as 404/401)."""

    def __init__(self, revoked: bool = False):
        super().__init__("revoked" if revoked else "no access")
        self.revoked = revoked


class DuplicateRequest(Exception):
    """An ``Idempotency-Key`` already used by this analyst: nothing is spent again."""

    def __init__(self, request_id: str):
        super().__init__(request_id)
        self.request_id = request_id


class OverBudget(Exception):
    """The request does not fit the allowance or the data set's budget; nothing was spent."""

    def __init__(self, cost, remaining_allowance: float, remaining_dataset: float, which: str):
        self.cost = cost
        self.remaining_allowance = remaining_allowance
        self.remaining_dataset = remaining_dataset
        self.which = which
        super().__init__(which)


@dataclass(frozen=True)
class Principal:
    """Who a key belongs to."""

    role: str  # "analyst" or "curator"
    id: int
    name: str
    key_id: str | None = field(default=None, compare=False)  # an analyst's: a debit checks it is still theirs


def new_request_id() -> str:
    """A request's id: 128 random bits as 32 hex digits."""
    return uuid.uuid4().hex


# ---------------------------------------------------------------------------------------
def init_store(state: str | Path, max_releases: int | None = None, who: str = CLI) -> "Store":
    """Create a new, empty state (refused if one exists there), with the state's limit of
    releases per analyst and data set (:mod:`._limits`) if given."""
    if max_releases is not None:
        check_count(max_releases)  # before anything exists (a bad limit left an empty file behind)
    b = _backend(state)
    if isinstance(b, _SQLite):
        if b.path.exists():  # (messages name the path as given, b.describe, not as resolved)
            raise StateError(f"{b.describe} already exists; a state is created once — use it, or choose a new path")
        if not Path(b.describe).parent.is_dir():  # as given: realpath collapses "nosuchdir/.." by text
            raise StateError(f"folder {Path(b.describe).parent} does not exist; create it first")
    with ExitStack() as stack:
        if isinstance(b, _SQLite):  # created 0600; removed with its side files if init fails (a full disk)
            stack.enter_context(new_private_file(b.path, f"{b.describe} already exists; a state is created "
                                                          "once — use it, or choose a new path"))
            stack.callback(b.close)  # (first, on the way out: the connection closed before the files go)
        _admin.create_schema(b, max_releases, who)
    return Store(b)


def backup_store(state: str | Path, copy: str | Path) -> int:
    """Copy a SQLite state to the new file ``copy`` while the service may be running: SQLite's
    online backup (a consistent snapshot that includes what is still in the write-ahead log; a
    plain file copy of a running state can miss recent spends, and a state restored from it
    would give their budget back).  The state is copied as it is: an older schema is not
    upgraded (neither in ``state`` nor in ``copy``), so a backup taken before upgrading privirt
    stays readable by the privirt that wrote it.  Returns the number of spends copied."""
    b = _backend(state)
    if not isinstance(b, _SQLite):
        raise StateError(f"{b.describe} is a PostgreSQL state: back it up with PostgreSQL's own tools "
                         "(pg_dump)")
    _schema_version(b)  # refuses what is not a state (of a schema this privirt knows)
    target = Path(copy)
    if not target.parent.is_dir():
        raise StateError(f"folder {target.parent} does not exist; create it first")
    src = sqlite3.connect(_sqlite_uri(b.path, "ro"), uri=True, timeout=b.timeout)
    try:
        with backup_target(target):  # removed if the backup fails
            dst = sqlite3.connect(str(target))
            try:
                src.backup(dst)
                spends = dst.execute("SELECT COUNT(*) FROM spends").fetchone()[0]
            finally:
                dst.close()
    except sqlite3.Error as exc:
        raise StateError(f"the backup of {b.describe} to {target} failed ({exc}); nothing was written") from None
    finally:
        src.close()
    return int(spends)


def open_store(state: str | Path) -> "Store":
    """Open an existing state (a path or a ``postgresql://`` URL), upgrading an older schema in
    place (once)."""
    b = _backend(state)
    version = _schema_version(b)
    if version != SCHEMA_VERSION:
        _admin.upgrade(b, version)  # (in place, once: the sessions and events tables)
    with usable(b), b.read() as con:
        check_stored_values(con, b)  # one line for a hand-edited budget or cost, not an unlimited budget
    return Store(b)


def _schema_version(b) -> int:
    """The schema version of the state of backend ``b``, changing nothing: 1, 2 (upgraded by
    :func:`open_store`) or :data:`SCHEMA_VERSION`; a :class:`StateError` in one line for no
    state, what is not a state, or an unknown version."""
    if not b.exists():
        raise StateError(f"no state at {b.describe}; create one with `privirt serve init {b.describe}`")
    try:
        with usable(b), b.read() as con:
            if "meta" not in b.tables(con):
                raise StateError(f"{b.describe} is not a privirt serve state; create one with "
                                 "`privirt serve init STATE`")
            row = con.execute(b.q("SELECT value FROM meta WHERE key = ?"), ("schema_version",)).fetchone()
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{b.describe} is not a privirt serve state ({exc})") from None
    version = int(row[0]) if row is not None and str(row[0]).isdigit() else None
    if version not in (1, 2, SCHEMA_VERSION):
        raise StateError(f"{b.describe} has an unknown schema version; use a matching privirt")
    return version


class Store:
    """Everything the service reads and writes (see the module docstring)."""

    def __init__(self, backend) -> None:
        self._b = backend

    @property
    def kind(self) -> str:
        return self._b.kind

    @property
    def describe(self) -> str:
        return self._b.describe

    def readable_by_others(self) -> str | None:  # (a warning: :func:`._modes.readable_by_others`)
        return readable_by_others(self._b.path, self._b.describe) if isinstance(self._b, _SQLite) else None

    def set_deadline(self, seconds: float, name: str = "--state-deadline") -> None:
        """Give each transaction of a PostgreSQL state ``seconds`` (``privirt serve run
        --state-deadline``; checked by :func:`~privirt.serve._deadline.check_state_deadline`);
        a one-line ValueError naming ``name`` for a SQLite state, whose waits are bounded by its
        busy timeout."""
        if self.kind != "postgresql":
            raise ValueError(f"{name} applies to a postgresql:// state only; a SQLite state waits at "
                             f"most {self._b.timeout:g} s for its file lock (its busy timeout): leave it out")
        self._b.deadline = seconds

    # -- curator set-up -----------------------------------------------------------------
    def add_dataset(self, *, name: str, epsilon: float, delta: float, n_persons: int,
                    items: Sequence[str], missing: str, codes, source: str, who: str = CLI) -> int:
        import hashlib

        blob = encode_codes(codes)
        digest = hashlib.sha256(blob).hexdigest()
        source = storable_text(str(source))  # (a file name with bytes UTF-8 cannot hold, escaped)
        b = self._b
        with b.write() as con:
            if b.named(con, "datasets", name):
                raise StateError(f"a data set named {name!r} exists already; its budget cannot be "
                                 "reset — choose another name")
            row = con.execute(
                b.q("INSERT INTO datasets (name, epsilon, delta, n_persons, items, missing, data, sha256,"
                    " source, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"),
                (name, float(epsilon), float(delta), int(n_persons), json.dumps(list(items)), missing,
                 blob, digest, source, _now()),
            ).fetchone()
            log_event(con, b, "dataset add", name, {"epsilon": float(epsilon), "delta": float(delta),
                                                    "n_persons": int(n_persons), "n_items": len(items),
                                                    "missing": missing}, who)
        return int(row[0])

    def add_analyst(self, name: str, allowances: dict[str, tuple[float, float]], who: str = CLI) -> str:
        """Create an analyst with allowances; returns the key (shown once, stored hashed)."""
        return _admin.add_analyst(self._b, name, allowances, who)

    def set_allowances(self, name: str, allowances: dict[str, tuple[float, float | None]],
                       who: str = CLI) -> list[dict]:
        """Grant or change an analyst's allowances (:func:`._admin.set_allowances`)."""
        return _admin.set_allowances(self._b, name, allowances, who)

    def new_analyst_key(self, name: str, who: str = CLI) -> tuple[str, str | None]:
        """A new key for an analyst, same record (:func:`._admin.new_analyst_key`)."""
        return _admin.new_analyst_key(self._b, name, who)

    def new_curator_key(self, who: str = CLI) -> str:
        """A new curator key; every earlier curator key stops working."""
        return _admin.new_curator_key(self._b, who)

    def revoke_analyst(self, name: str, who: str = CLI) -> bool:
        """Revoke an analyst's key (their spends stay on record); False if unknown or revoked."""
        return _admin.revoke_analyst(self._b, name, who)

    def events(self) -> list[dict]:
        """Every curator action, oldest first (:mod:`._admin`)."""
        return _admin.events(self._b)

    # -- authentication -----------------------------------------------------------------
    def authenticate(self, key: str | None, role: str) -> Principal | None:
        """The principal of a valid, unrevoked key of ``role`` ("analyst"/"curator"), else None."""
        prefix = _keys.ANALYST if role == "analyst" else _keys.CURATOR
        parsed = _keys.parse_key(key, prefix)
        key_id, secret = parsed if parsed else ("", "x")
        table = "analysts" if role == "analyst" else "curator_keys"
        name_col = "name" if role == "analyst" else "'curator'"
        b = self._b
        with b.read() as con:
            row = con.execute(
                b.q(f"SELECT id, {name_col}, key_hash FROM {table} WHERE key_id = ? AND revoked IS NULL"),
                (key_id,)).fetchone()
        ok = _keys.secret_matches(secret, None if row is None else row[2])
        if not (ok and parsed):
            return None
        return Principal(role, int(row[0]), str(row[1]), key_id if role == "analyst" else None)

    # -- the curator page's sessions ------------------------------------------------------
    def new_session(self, curator_id: int, ttl: float) -> str:
        """Open a page session for the curator key ``curator_id``: a fresh random token (returned
        once, for the cookie); only its SHA-256 and expiry are stored.  Expired sessions are
        deleted on the way."""
        import secrets
        import time

        token = secrets.token_urlsafe(32)
        now = time.time()
        b = self._b
        with b.write(durable=False) as con:
            con.execute(b.q("DELETE FROM sessions WHERE expires <= ?"), (now,))
            con.execute(b.q("INSERT INTO sessions (token_hash, curator_key_id, created, expires) VALUES (?, ?, ?, ?)"),
                        (_keys.hash_secret(token), int(curator_id), now, now + float(ttl)))
        return token

    def session(self, token: str | None) -> Principal | None:
        """The curator of an open, unexpired session whose key is not revoked, else None."""
        import time

        if not token or len(token) > _keys.MAX_KEY_LENGTH:
            return None
        b = self._b
        with b.read() as con:
            row = con.execute(
                b.q("SELECT k.id FROM sessions s JOIN curator_keys k ON k.id = s.curator_key_id"
                    " WHERE s.token_hash = ? AND s.expires > ? AND k.revoked IS NULL"),
                (_keys.hash_secret(token), time.time())).fetchone()
        return None if row is None else Principal("curator", int(row[0]), "curator")

    def end_session(self, token: str | None) -> None:
        """Close a page session (logout): its token stops working at once."""
        if not token or len(token) > _keys.MAX_KEY_LENGTH:
            return
        b = self._b
        with b.write(durable=False) as con:
            con.execute(b.q("DELETE FROM sessions WHERE token_hash = ?"), (_keys.hash_secret(token),))

    # -- data sets ------------------------------------------------------------------------
    def dataset_names(self) -> list[str]:
        b = self._b
        with b.read() as con:
            return [r[0] for r in con.execute("SELECT name FROM datasets ORDER BY id")]

    def stored_datasets(self) -> list[dict]:
        """The id, hash, items and name of every data set (what :meth:`load_codes` needs)."""
        with self._b.read() as con:
            rows = con.execute("SELECT id, sha256, items, name FROM datasets ORDER BY id").fetchall()
        return [{"id": int(r[0]), "sha256": r[1], "items": json.loads(r[2]), "name": r[3]} for r in rows]

    def dataset_for(self, analyst_id: int, name: str) -> dict | None:
        """Public metadata of a data set the analyst holds an allowance on, else None."""
        b = self._b
        with b.read() as con:
            row = con.execute(
                b.q("SELECT d.id, d.name, d.n_persons, d.items, d.missing, d.epsilon, d.delta, d.sha256,"
                    " a.epsilon, a.delta FROM datasets d JOIN allowances a ON a.dataset_id = d.id"
                    " WHERE a.analyst_id = ? AND d.name = ?"), (analyst_id, name)).fetchone()
        if row is None:
            return None
        (e, d), (a_e, a_d) = (stored_budget(b.describe, f"the data set {name!r}", *row[5:7]),
                              stored_budget(b.describe, f"the allowance on {name!r}", *row[8:10]))
        return {"id": int(row[0]), "name": row[1], "n_persons": int(row[2]), "items": json.loads(row[3]),
                "missing": row[4], "epsilon": e, "delta": d, "sha256": row[7],
                "allowance_epsilon": a_e, "allowance_delta": a_d}

    def load_codes(self, dataset_id: int, sha256: str):
        import hashlib

        b = self._b
        with b.read() as con:
            row = con.execute(b.q("SELECT data FROM datasets WHERE id = ?"), (dataset_id,)).fetchone()
        blob = bytes(row[0])
        if hashlib.sha256(blob).hexdigest() != sha256:  # pragma: no cover - tampered state
            raise RuntimeError("the stored data set does not match its hash")
        return decode_codes(blob)

    def _spent(self, con, dataset_id: int, analyst_id: int | None = None) -> Spent:
        """The exact sums of a data set's spends (or of one analyst's on it), as the Ledger sums."""
        b = self._b
        if analyst_id is None:
            return spent_rows(b.describe, con.execute(b.q(_ROWS), (dataset_id,)).fetchall())
        return spent_rows(b.describe, con.execute(b.q(_ROWS + " AND analyst_id = ?"), (dataset_id, analyst_id)).fetchall())

    def datasets_for(self, analyst_id: int) -> list[dict]:
        """Public metadata and remaining budgets of the data sets an analyst may use."""
        b = self._b
        out = []
        with b.read() as con:
            rows = con.execute(
                b.q("SELECT d.id, d.name, d.n_persons, d.items, d.missing, d.epsilon, d.delta,"
                    " a.epsilon, a.delta FROM datasets d JOIN allowances a ON a.dataset_id = d.id"
                    " WHERE a.analyst_id = ? ORDER BY d.name"), (analyst_id,)).fetchall()
            sums = [(r, self._spent(con, int(r[0]), analyst_id), self._spent(con, int(r[0]))) for r in rows]
        # the remaining ε (a bisection, when not cached) is computed after the transaction: the
        # state's deadline (_deadline.STATE_DEADLINE) is for the server's answers, not this work
        for r, mine, every in sums:
            stored_budget(b.describe, f"the data set {r[1]!r}", *r[5:7])  # (hand edits: text, an infinity)
            stored_budget(b.describe, f"the allowance on {r[1]!r}", *r[7:9])
            out.append({
                "name": r[1], "n_persons": int(r[2]), "items": json.loads(r[3]), "missing": r[4],
                "allowance": {"epsilon": float(r[7]), "delta": float(r[8]),
                              "spent_epsilon": spent_epsilon(mine, float(r[8])),
                              "remaining_epsilon": remaining_epsilon(mine, float(r[7]), float(r[8]))},
                "budget": {"epsilon": float(r[5]), "delta": float(r[6]),
                           "spent_epsilon": spent_epsilon(every, float(r[6])),
                           "remaining_epsilon": remaining_epsilon(every, float(r[5]), float(r[6]))},
            })
        return out

    def check_fits(self, analyst_id: int, dataset_id: int, cost) -> None:
        """Advisory pre-check (no lock): raise :class:`OverBudget` if ``cost`` cannot fit now."""
        b = self._b
        with b.read() as con:
            self._check(con, analyst_id, dataset_id, cost)

    def _check(self, con, analyst_id: int, dataset_id: int, cost) -> None:
        b = self._b
        a = con.execute(b.q("SELECT epsilon, delta FROM allowances WHERE analyst_id = ? AND dataset_id = ?"),
                        (analyst_id, dataset_id)).fetchone()
        if a is None:
            raise NoAccess()
        d = con.execute(b.q("SELECT epsilon, delta FROM datasets WHERE id = ?"), (dataset_id,)).fetchone()
        a, d = stored_budget(b.describe, "an allowance", *a), stored_budget(b.describe, f"data set #{dataset_id}", *d)
        # fast: the database's sums, widened by their proven error, surely fit; else decide exactly
        quick_a = con.execute(b.q(_QUICK + " AND analyst_id = ?"), (dataset_id, analyst_id)).fetchone()
        check_release_limit(con, b, int(quick_a[0]))  # the allowance's releases (the state's storage: _limits)
        quick_d = con.execute(b.q(_QUICK), (dataset_id,)).fetchone()
        if quick_d[4]:
            raise damaged(b.describe, f"a spend on data set #{dataset_id} holds a value that is not a finite number")
        if (surely_fits(quick_a, cost, float(a[0]), float(a[1]))
                and surely_fits(quick_d, cost, float(d[0]), float(d[1]))):
            return
        mine = self._spent(con, dataset_id, analyst_id)
        every = self._spent(con, dataset_id)
        ok_a = _fits(mine, cost, float(a[0]), float(a[1]))
        ok_d = _fits(every, cost, float(d[0]), float(d[1]))
        if not (ok_a and ok_d):
            which = "allowance" if not ok_a else "dataset"
            raise OverBudget(cost, remaining_epsilon(mine, float(a[0]), float(a[1])),
                             remaining_epsilon(every, float(d[0]), float(d[1])), which)

    # -- requests and the debit ---------------------------------------------------------
    def find_request(self, analyst_id: int, *, request_id: str | None = None,
                     idem_key: str | None = None) -> dict | None:
        b = self._b
        with b.read() as con:
            if request_id is not None:
                row = con.execute(b.q("SELECT id, endpoint, params, status, result, error, created, finished,"
                                      " dataset_id FROM requests WHERE analyst_id = ? AND id = ?"),
                                  (analyst_id, request_id)).fetchone()
            else:
                row = con.execute(b.q("SELECT id, endpoint, params, status, result, error, created, finished,"
                                      " dataset_id FROM requests WHERE analyst_id = ? AND idem_key = ?"),
                                  (analyst_id, idem_key)).fetchone()
        if row is None:
            return None
        return {"id": row[0], "endpoint": row[1], "params": json.loads(row[2]), "status": row[3],
                "result": None if row[4] is None else json.loads(row[4]), "error": row[5],
                "created": row[6], "finished": row[7], "dataset_id": row[8]}

    def debit(self, *, analyst_id: int, dataset_id: int, cost, mechanism: str, endpoint: str,
              params: dict, idem_key: str | None, note: str = "",
              request_id: str | None = None, key_id: str | None = None) -> tuple[str, int]:
        """Check the allowance and the data set's budget and debit both, in one transaction.

        Records the request (status ``"spent"``) and its spend together; returns
        ``(request_id, spend_id)``.  Raises :class:`OverBudget` (nothing written),
        :class:`DuplicateRequest` (the ``Idempotency-Key`` was used: nothing spent again) or
        :class:`NoAccess` (revoked, the key ``key_id`` replaced, or the allowance is gone) or :class:`NotDebited` (the state
        unavailable before the COMMIT was sent: nothing written).  ``request_id`` (default: a new
        one) is chosen by the caller before the debit, so that a debit whose commit was not
        confirmed can be looked up (:meth:`spend_of`).
        """
        from ..private.accounting import PrivacyCost

        c = PrivacyCost.of(cost)
        b = self._b
        request_id = request_id or new_request_id()
        now = _now()
        committing = False  # (until the body's end no COMMIT was sent: a failure before wrote nothing)
        try:
            with b.write() as con:
                b.lock(con, "analysts", analyst_id)
                b.lock(con, "datasets", dataset_id)
                r = con.execute(b.q("SELECT revoked, key_id FROM analysts WHERE id = ?"), (analyst_id,)).fetchone()
                if r is None or r[0] is not None or (key_id is not None and r[1] != key_id):
                    raise NoAccess(revoked=True)
                if idem_key is not None:
                    dup = con.execute(b.q("SELECT id FROM requests WHERE analyst_id = ? AND idem_key = ?"),
                                      (analyst_id, idem_key)).fetchone()
                    if dup is not None:
                        raise DuplicateRequest(dup[0])
                self._check(con, analyst_id, dataset_id, c)
                con.execute(b.q("INSERT INTO requests (id, analyst_id, dataset_id, idem_key, endpoint, params,"
                                " status, created) VALUES (?, ?, ?, ?, ?, ?, 'spent', ?)"),
                            (request_id, analyst_id, dataset_id, idem_key, endpoint,
                             json.dumps(params, sort_keys=True), now))
                spend_id = int(con.execute(
                    b.q("INSERT INTO spends (request_id, analyst_id, dataset_id, time, mechanism, rho, epsilon,"
                        " delta, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"),
                    (request_id, analyst_id, dataset_id, now, mechanism, c.rho, c.epsilon, c.delta,
                     storable_text(str(note)))).fetchone()[0])
                committing = True
        except Exception as exc:
            if b.is_unique_violation(exc) and idem_key is not None:  # a racing twin won
                found = self.find_request(analyst_id, idem_key=idem_key)
                if found is not None:
                    raise DuplicateRequest(found["id"]) from None
            if not committing and unavailable(exc):
                raise NotDebited(f"{exc} (before the debit's commit: nothing was written)") from exc
            raise
        return request_id, spend_id

    def spend_of(self, request_id: str) -> int | None:
        """The spend id of a request's debit if it is committed, else None (a fresh read)."""
        b = self._b
        with b.read() as con:
            row = con.execute(b.q("SELECT id FROM spends WHERE request_id = ?"), (request_id,)).fetchone()
        return None if row is None else int(row[0])

    def finish(self, request_id: str, *, result: dict | None = None, error: str | None = None) -> None:
        """Store a spent request's result (status ``"done"``) or its error (``"failed"``); once more
        on a fresh connection if the connection was lost (the update may be applied twice)."""
        b = self._b
        text = None if result is None else json.dumps(result, separators=(",", ":"))
        row = ("done" if error is None else "failed", text, error, _now(), request_id)

        def update() -> None:
            with b.write(durable=False) as con:
                con.execute(b.q("UPDATE requests SET status = ?, result = ?, error = ?, finished = ? WHERE id = ?"), row)
        b.idempotent(update)

    # -- reading the record ---------------------------------------------------------------
    def spends(self, analyst_id: int | None = None) -> list[dict]:
        """Every spend (of one analyst, or of all), oldest first."""
        return _records.spends(self._b, analyst_id)

    def newest_spends(self, limit: int) -> tuple[list[dict], int]:
        """The newest ``limit`` spends, oldest of them first, and the number of all spends."""
        return _records.newest_spends(self._b, limit)

    def spend_costs(self) -> list[dict]:
        """Every spend's time, analyst, data set and (ρ, ε, δ), oldest first (:mod:`._records`)."""
        return _records.spend_costs(self._b)

    def allowances(self) -> list[dict]:
        """Every allowance with what its analyst spent and what remains."""
        out = []
        for r, mine in _records.allowance_sums(self._b):  # after the transaction (see datasets_for)
            stored_budget(self._b.describe, f"the allowance of {r[1]!r} on {r[4]!r}", *r[5:7])
            out.append({"analyst": r[1], "revoked": r[2], "dataset": r[4], "epsilon": float(r[5]),
                        "delta": float(r[6]), "n_spends": mine.n,
                        "spent_epsilon": spent_epsilon(mine, float(r[6])),
                        "remaining_epsilon": remaining_epsilon(mine, float(r[5]), float(r[6]))})
        return out

    def datasets(self) -> list[dict]:
        """Every data set with its budget, what was spent and what remains (curator view)."""
        b = self._b
        out = []
        with b.read() as con:
            rows = con.execute("SELECT id, name, n_persons, items, missing, epsilon, delta, sha256, source,"
                               " created FROM datasets ORDER BY name").fetchall()
            sums = [(r, self._spent(con, int(r[0]))) for r in rows]
        for r, every in sums:  # after the transaction (see datasets_for)
            stored_budget(b.describe, f"the data set {r[1]!r}", *r[5:7])
            out.append({"name": r[1], "n_persons": int(r[2]), "items": json.loads(r[3]), "missing": r[4],
                        "epsilon": float(r[5]), "delta": float(r[6]), "sha256": r[7], "source": r[8],
                        "created": r[9], "n_spends": every.n,
                        "spent_epsilon": spent_epsilon(every, float(r[6])),
                        "remaining_epsilon": remaining_epsilon(every, float(r[5]), float(r[6]))})
        return out

    def analysts(self) -> list[dict]:
        b = self._b
        with b.read() as con:
            rows = con.execute("SELECT name, created, revoked FROM analysts ORDER BY name").fetchall()
        return [{"name": r[0], "created": r[1], "revoked": r[2]} for r in rows]

    def counts(self) -> dict:
        """Row counts of the request and spend tables (tests: nothing written on an error)."""
        b = self._b
        with b.read() as con:
            return {t: int(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                    for t in ("requests", "spends")}

    def max_releases(self) -> int:
        """The state's limit of releases per analyst and data set (:mod:`._limits`)."""
        with self._b.read() as con:
            return max_releases(con, self._b)

    def set_max_releases(self, limit: int, who: str = CLI) -> None:
        """Set the state's limit of releases per analyst and data set (releases made stay)."""
        with self._b.write() as con:
            limit = write_max_releases(con, self._b, limit)
            log_event(con, self._b, "limits", "state", {"max_releases": limit}, who)
