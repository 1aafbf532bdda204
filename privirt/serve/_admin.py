"""The curator's administration of a state (:mod:`privirt.serve.store`): analysts, their keys and
allowances, the curator key, the log of the curator's actions, and the schema upgrade.

Every curator action — ``init``, ``limits``, ``dataset add``, ``analyst add``, ``analyst allow``,
``analyst revoke``, ``analyst new-key``, ``curator-key``, and ``upgrade`` of an older state —
writes one row of the ``events`` table (schema 3) in the very transaction that makes the change:
its time, the action, the object's name, its public parameters (ε, δ, the limit) and who
(``cli``, or ``curator key #N (API)``: the row id of the curator key the request used).  An
``upgrade`` is always ``cli``: it is made when a state is opened (by the command that first opens
it, ``privirt serve run`` included, before its workers start, or a program's own
:func:`~privirt.serve.create_app`), never by an API request.  An event never holds a key or a key's hash.

An analyst is one record whatever their keys: ``analyst new-key`` replaces the key (the old one
stops at once; a revoked analyst is restored) and keeps the record, so their allowances keep
counting every spend they made; ``analyst allow`` grants or changes an allowance (lowering it
below what was spent is allowed: nothing remains, and their requests on it are refused).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from typing import Any

from . import keys as _keys
from ._backends import _TABLES, StateError, _SQLite, events_table, sessions_table, usable
from ._limits import DEFAULT_MAX_RELEASES, write_max_releases
from ._budget import _ROWS, Spent, check_delta_limit, remaining_epsilon, spent_epsilon

__all__ = ["SCHEMA_VERSION", "CLI", "curator_who", "log_event", "events", "upgrade", "add_analyst",
           "set_allowances", "revoke_analyst", "new_analyst_key", "new_curator_key"]

#: the state's schema: 2 added the curator page's sessions, 3 the events
SCHEMA_VERSION = 3
#: who an event of a ``privirt serve`` command names
CLI = "cli"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="microseconds")


def curator_who(curator_id: int, via: str) -> str:
    """Who an event of the curator's API or page names: the curator key's row id (never the key)."""
    return f"curator key #{int(curator_id)} ({via})"


def log_event(con: Any, b: Any, action: str, name: str, params: dict, who: str) -> None:
    """One event, inside the transaction of ``con`` that makes the change."""
    con.execute(b.q("INSERT INTO events (time, action, name, params, who) VALUES (?, ?, ?, ?, ?)"),
                (_now(), action, name, json.dumps(params, sort_keys=True), who))


def events(b: Any) -> list[dict]:
    """Every event, oldest first."""
    with b.read() as con:
        rows = con.execute("SELECT id, time, action, name, params, who FROM events ORDER BY id").fetchall()
    return [{"id": int(r[0]), "time": r[1], "action": r[2], "name": r[3], "params": json.loads(r[4]),
             "who": r[5]} for r in rows]


def upgrade(b: Any, found: int) -> None:
    """Schema ``found`` (1 or 2) → :data:`SCHEMA_VERSION`, once, under the write lock: the
    sessions table (2) and the events table (3); a state upgraded meanwhile is left alone."""
    with b.write() as con:
        q = "SELECT value FROM meta WHERE key = ?" + ("" if isinstance(b, _SQLite) else " FOR UPDATE")
        found = int(con.execute(b.q(q), ("schema_version",)).fetchone()[0])
        if found >= SCHEMA_VERSION:  # another process upgraded it meanwhile
            return
        theirs = ({"sessions"} if found < 2 else set()) | {"events"}
        clash = sorted(theirs & b.tables(con))
        if clash:  # (earlier versions' init accepted a database holding such tables)
            raise StateError(
                f"{b.describe} is a privirt serve state of schema {found}, but its database also holds "
                f"a table named {', '.join(clash)} that is not privirt's, where the upgrade to schema "
                f"{SCHEMA_VERSION} puts its own; rename or move that table, then run again (nothing "
                "was changed)")
        if found < 2:
            con.execute(sessions_table(b.real))
        con.execute(events_table(b.serial))
        con.execute(b.q("UPDATE meta SET value = ? WHERE key = ?"), (str(SCHEMA_VERSION), "schema_version"))
        log_event(con, b, "upgrade", "state", {"from_schema": found, "to_schema": SCHEMA_VERSION}, CLI)


def _dataset(con: Any, b: Any, ds: str) -> tuple[int, float]:
    """The id and δ of data set ``ds``, or a one-line :class:`StateError`."""
    r = con.execute(b.q("SELECT id, delta FROM datasets WHERE name = ?"), (ds,)).fetchone()
    if r is None:
        raise StateError(f"--allowance {ds}=...: no data set named {ds!r}; add it first with "
                         "`privirt serve dataset add`")
    return int(r[0]), float(r[1])


def _analyst(con: Any, b: Any, name: str) -> tuple[int, str | None] | None:
    r = con.execute(b.q("SELECT id, revoked FROM analysts WHERE name = ?"), (name,)).fetchone()
    return None if r is None else (int(r[0]), r[1])


def _new_key_hint(b: Any, name: str, revoked: str) -> str:
    return (f"analyst {name!r} was revoked on {revoked[:10]}; their record and spends stay: give them a new "
            f"key with `privirt serve analyst new-key {b.describe} {name}` (it restores them, with their "
            "allowances and spends)")


def add_analyst(b: Any, name: str, allowances: dict[str, tuple[float, float]], who: str) -> str:
    """Create an analyst with allowances; returns the key (shown once, stored hashed)."""
    for ds, (_, dlt) in allowances.items():
        check_delta_limit(dlt, f"the allowance's delta on {ds!r}")
    key, key_id, key_hash = _keys.new_key(_keys.ANALYST)
    with b.write() as con:
        if b.named(con, "analysts", name):
            _, revoked = _analyst(con, b, name)
            if revoked is not None:
                raise StateError(_new_key_hint(b, name, revoked) + ", or choose another name")
            raise StateError(f"an analyst named {name!r} exists already; change their allowances with "
                             f"`privirt serve analyst allow {b.describe} {name} --allowance DATASET=EPS`, "
                             "or choose another name")
        ids = {ds: _dataset(con, b, ds)[0] for ds in allowances}
        aid = int(con.execute(
            b.q("INSERT INTO analysts (name, key_id, key_hash, created) VALUES (?, ?, ?, ?) RETURNING id"),
            (name, key_id, key_hash, _now())).fetchone()[0])
        for ds, (eps, dlt) in allowances.items():
            con.execute(b.q("INSERT INTO allowances (analyst_id, dataset_id, epsilon, delta) VALUES (?, ?, ?, ?)"),
                        (aid, ids[ds], float(eps), float(dlt)))
        log_event(con, b, "analyst add", name, {"allowances": {ds: {"epsilon": float(e), "delta": float(d)}
                                                               for ds, (e, d) in allowances.items()}}, who)
    return key


def set_allowances(b: Any, name: str, allowances: dict[str, tuple[float, float | None]], who: str) -> list[dict]:
    """Grant or change allowances of the unrevoked analyst ``name`` (``{data set: (ε, δ or None)}``;
    a δ left out keeps the allowance's, or is the data set's for a new one), under the analyst's
    row lock (the one every debit of theirs takes first).  Lowering ε below what was spent is
    allowed (nothing remains); a δ that leaves no room for the δ already spent is refused.

    Returns
    -------
    list of dict
        Per data set: ``dataset``, ``epsilon``, ``delta``, ``was`` (the old ε, δ or None),
        ``spent_epsilon`` and ``remaining_epsilon`` (≥ 0).
    """
    for ds, (_, dlt) in allowances.items():
        if dlt is not None:
            check_delta_limit(dlt, f"--allowance {ds}=...: DELTA")
    changed: dict[str, dict] = {}
    sums = {}
    with b.write() as con:
        found = _analyst(con, b, name)
        if found is None:
            raise StateError(f"no analyst named {name!r}; add them with `privirt serve analyst add`")
        aid, _ = found
        b.lock(con, "analysts", aid)  # (then read: a revocation meanwhile is seen)
        revoked = con.execute(b.q("SELECT revoked FROM analysts WHERE id = ?"), (aid,)).fetchone()[0]
        if revoked is not None:
            raise StateError(_new_key_hint(b, name, revoked) + " first")
        for ds, (eps, dlt) in allowances.items():
            did, ds_delta = _dataset(con, b, ds)
            was = con.execute(b.q("SELECT epsilon, delta FROM allowances WHERE analyst_id = ? AND dataset_id = ?"),
                              (aid, did)).fetchone()
            if dlt is None:
                dlt = float(was[1]) if was is not None else ds_delta
                check_delta_limit(dlt, f"--allowance {ds}=...: DELTA (defaulted to "
                                       f"{'the allowance' if was is not None else 'the data set'}'s δ)")
            mine = Spent.of(con.execute(b.q(_ROWS + " AND analyst_id = ?"), (did, aid)).fetchall())
            if not math.isfinite(spent_epsilon(mine, dlt)):
                raise StateError(f"--allowance {ds}=...: δ = {dlt:g} leaves no room for the δ {name!r} already "
                                 f"spent on {ds!r}; give a larger DELTA (lower EPS to stop them)")
            if was is None:
                con.execute(b.q("INSERT INTO allowances (analyst_id, dataset_id, epsilon, delta) VALUES (?, ?, ?, ?)"),
                            (aid, did, float(eps), float(dlt)))
            else:
                con.execute(b.q("UPDATE allowances SET epsilon = ?, delta = ? WHERE analyst_id = ? AND dataset_id = ?"),
                            (float(eps), float(dlt), aid, did))
            changed[ds] = {"epsilon": float(eps), "delta": float(dlt),
                           "was": None if was is None else {"epsilon": float(was[0]), "delta": float(was[1])}}
            sums[ds] = mine
        log_event(con, b, "analyst allow", name, {"allowances": changed}, who)
    return [{"dataset": ds, **c, "spent_epsilon": spent_epsilon(sums[ds], c["delta"]),
             "remaining_epsilon": remaining_epsilon(sums[ds], c["epsilon"], c["delta"])}
            for ds, c in changed.items()]


def revoke_analyst(b: Any, name: str, who: str) -> bool:
    """Revoke an analyst's key (their spends stay on record); False if unknown or revoked."""
    with b.write() as con:
        r = con.execute(b.q("SELECT id FROM analysts WHERE name = ? AND revoked IS NULL"), (name,)).fetchone()
        if r is None:
            return False
        b.lock(con, "analysts", int(r[0]))
        con.execute(b.q("UPDATE analysts SET revoked = ? WHERE id = ?"), (_now(), int(r[0])))
        log_event(con, b, "analyst revoke", name, {}, who)
    return True


def new_analyst_key(b: Any, name: str, who: str) -> tuple[str, str | None]:
    """A new key for analyst ``name``: the old one stops at once, the record (allowances, spends)
    stays, and a revoked analyst is restored.  Returns the key and when they had been revoked."""
    key, key_id, key_hash = _keys.new_key(_keys.ANALYST)
    with b.write() as con:
        found = _analyst(con, b, name)
        if found is None:
            raise StateError(f"no analyst named {name!r}; add them with `privirt serve analyst add`")
        aid, revoked = found
        b.lock(con, "analysts", aid)
        con.execute(b.q("UPDATE analysts SET key_id = ?, key_hash = ?, revoked = NULL WHERE id = ?"),
                    (key_id, key_hash, aid))
        log_event(con, b, "analyst new-key", name, {"was_revoked": revoked}, who)
    return key, revoked


def new_curator_key(b: Any, who: str) -> str:
    """A new curator key; every earlier curator key and page session stops working."""
    key, key_id, key_hash = _keys.new_key(_keys.CURATOR)
    now = _now()
    with b.write() as con:
        con.execute(b.q("UPDATE curator_keys SET revoked = ? WHERE revoked IS NULL"), (now,))
        con.execute("DELETE FROM sessions")  # every page session ends with its key
        kid = int(con.execute(b.q("INSERT INTO curator_keys (key_id, key_hash, created) VALUES (?, ?, ?) RETURNING id"),
                              (key_id, key_hash, now)).fetchone()[0])
        log_event(con, b, "curator-key", "curator", {"curator_key": kid}, who)
    return key


def create_schema(b, max_releases: int | None, who: str) -> None:
    """The tables of a new state and its first rows (``init``), in one write transaction."""
    with usable(b), b.write() as con:
        if b.tables_to_create(con) & set(_TABLES):
            raise StateError(f"{b.describe} already holds a privirt serve state (or other tables "
                             "with the same names); use it, or choose an empty database")
        for stmt in b.schema:
            con.execute(stmt)
        con.execute(b.q("INSERT INTO meta (key, value) VALUES (?, ?)"), ("schema_version", str(SCHEMA_VERSION)))
        con.execute(b.q("INSERT INTO meta (key, value) VALUES (?, ?)"), ("created", _now()))
        limit = DEFAULT_MAX_RELEASES if max_releases is None else write_max_releases(con, b, max_releases)
        log_event(con, b, "init", "state", {"max_releases": limit, "schema": SCHEMA_VERSION}, who)
    if isinstance(b, _SQLite):
        with b.read() as con:
            b.prepare(con)
