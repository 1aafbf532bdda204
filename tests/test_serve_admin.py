"""The curator's administration of a ``privirt serve`` state: changing an allowance (``analyst
allow``), a new key for the same analyst record (``analyst new-key``) and the log of the
curator's actions (``events``: ``serve list``, ``GET /v1/curator/events``, the curator page).
The flows run on SQLite here and on PostgreSQL in ``tests/test_serve_postgres.py``."""

from __future__ import annotations

import json
import math
import sqlite3

import numpy as np
import pytest

pytest.importorskip("fastapi")

from ._serve import asgi_call, cli, last_line  # noqa: E402


def _state(state: str) -> tuple:
    """A state with data set ``d`` (budget (5, 1e-6)) and analyst ``alice`` (allowance (1, 1e-6))."""
    from privirt.serve.store import open_store

    cli("serve", "init", state)
    store = open_store(state)
    ds = store.add_dataset(name="d", epsilon=5.0, delta=1e-6, n_persons=2, items=["q"], missing="none",
                           codes=np.zeros((2, 1), dtype=np.int8), source="test")
    key = last_line(cli("serve", "analyst", "add", state, "alice", "--allowance", "d=1"))
    return store, ds, key


def _spend(store, who, ds: int, epsilon: float, delta: float = 0.0, key_id: str | None = None) -> None:
    from privirt.private.accounting import PrivacyCost

    store.debit(analyst_id=who.id, dataset_id=ds, cost=PrivacyCost(epsilon=epsilon, delta=delta), mechanism="test",
                endpoint="release", params={}, idem_key=None, key_id=key_id)


def _figures(x) -> list[float]:
    """Every number in a JSON document."""
    if isinstance(x, dict):
        return [v for y in x.values() for v in _figures(y)]
    if isinstance(x, list):
        return [v for y in x for v in _figures(y)]
    return [float(x)] if isinstance(x, (int, float)) and not isinstance(x, bool) else []


def allow_flow(state: str) -> None:
    """Raise, lower below what was spent (remaining 0 everywhere, never negative or NaN), grant."""
    from privirt.serve.app import create_app
    from privirt.serve.page import render_page
    from privirt.serve.store import OverBudget

    store, ds, key = _state(state)
    curator = last_line(cli("serve", "curator-key", state))
    alice = store.authenticate(key, "analyst")
    _spend(store, alice, ds, 0.6)
    with pytest.raises(OverBudget):
        _spend(store, alice, ds, 0.6)
    out = cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=2").stdout
    assert "'d': ε = 2, δ = 1e-06 (was ε = 1, δ = 1e-06)" in out and "remaining ε = 0" not in out
    _spend(store, alice, ds, 0.6)  # fits the raised allowance; the first spend still counts
    (row,) = store.allowances()
    assert row["epsilon"] == 2.0 and row["n_spends"] == 2 and row["spent_epsilon"] >= 1.2
    # lowered below the 1.2 spent: allowed, it stops her, and every remaining figure is 0
    out = cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=0.5").stdout
    assert "remaining ε = 0" in out and "refused" in out, out
    with pytest.raises(OverBudget) as exc:
        _spend(store, alice, ds, 1e-3)
    assert exc.value.remaining_allowance == 0.0
    listing = json.loads(cli("serve", "list", state, "--json").stdout)
    (row,) = listing["allowances"]
    assert row["epsilon"] == 0.5 and row["remaining_epsilon"] == 0.0
    app = create_app(store)
    status, mine, _ = asgi_call(app, "GET", "/v1/datasets", key)
    assert status == 200 and mine[0]["remaining"] == 0.0 and mine[0]["allowance"]["remaining_epsilon"] == 0.0
    status, rows, _ = asgi_call(app, "GET", "/v1/curator/allowances", curator)
    assert status == 200 and rows[0]["remaining_epsilon"] == 0.0
    for doc in (listing, mine, rows):
        assert all(math.isfinite(v) and v >= 0 for v in _figures(doc)), doc
    html = render_page(store.datasets(), store.allowances(), store.spends(), store.analysts(), store.events())
    assert "nan" not in html.lower() and "inf<" not in html.lower() and ">-" not in html
    # a new allowance on another data set (δ defaults to the data set's), with the same validation as add
    store.add_dataset(name="e", epsilon=1.0, delta=1e-7, n_persons=2, items=["q"], missing="none",
                      codes=np.zeros((2, 1), dtype=np.int8), source="test")
    out = cli("serve", "analyst", "allow", state, "alice", "--allowance", "e=0.3").stdout
    assert "'e': ε = 0.3, δ = 1e-07 (new)" in out
    n = len(store.events())
    for args, words in [(("--allowance", "nope=1"), "no data set named 'nope'"),
                        (("--allowance", "d=1,0.5"), "must lie in"),
                        (("--allowance", "d=-1"), "finite number > 0"),
                        (("--allowance", "d=1", "--allowance", "d=2"), "twice")]:
        proc = cli("serve", "analyst", "allow", state, "alice", *args, check=False)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0 and len(lines) == 1 and words in lines[0], proc.stderr
    proc = cli("serve", "analyst", "allow", state, "bob", "--allowance", "d=1", check=False)
    assert proc.returncode != 0 and "no analyst named 'bob'" in proc.stderr
    assert [r["epsilon"] for r in store.allowances()] == [0.5, 0.3] and len(store.events()) == n


def new_key_flow(state: str) -> None:
    """A new key: the old one stops at once (an in-flight debit too), record and spends stay; a
    revoked name is not re-added but restored by new-key."""
    from privirt.serve.store import NoAccess

    store, ds, old = _state(state)
    alice = store.authenticate(old, "analyst")
    _spend(store, alice, ds, 0.7, key_id=alice.key_id)
    out = cli("serve", "analyst", "new-key", state, "alice").stdout
    new = last_line(cli("serve", "analyst", "new-key", state, "alice"))  # (twice: the first one leaked too)
    assert "old key no longer works" in out and new.startswith("pva.") and new not in out
    assert store.authenticate(old, "analyst") is None
    assert store.authenticate(new, "analyst").id == alice.id  # the same record
    with pytest.raises(NoAccess):  # a request authenticated with the old key just before
        _spend(store, alice, ds, 0.1, key_id=alice.key_id)
    (row,) = store.allowances()
    assert row["n_spends"] == 1 and row["spent_epsilon"] >= 0.7 and row["remaining_epsilon"] < 0.31
    # revoked: `analyst add` of the name is refused (one line, naming the date and new-key)
    cli("serve", "analyst", "revoke", state, "alice")
    revoked = store.analysts()[0]["revoked"]
    proc = cli("serve", "analyst", "add", state, "alice", "--allowance", "d=1", check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert f"was revoked on {revoked[:10]}" in lines[0] and "analyst new-key" in lines[0]
    proc = cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=3", check=False)
    assert proc.returncode != 0 and "analyst new-key" in proc.stderr
    assert store.allowances()[0]["epsilon"] == 1.0
    newest = last_line(cli("serve", "analyst", "new-key", state, "alice"))
    assert store.analysts()[0]["revoked"] is None and store.authenticate(newest, "analyst").id == alice.id
    assert store.allowances()[0]["n_spends"] == 1  # the spend still counts: no allowance reset
    proc = cli("serve", "analyst", "new-key", state, "bob", check=False)
    assert proc.returncode != 0 and "no analyst named 'bob'" in proc.stderr


def events_flow(state: str) -> None:
    """One event per curator action, with public parameters and who, never a key or key hash."""
    from privirt.serve.app import create_app
    from privirt.serve.store import open_store

    cli("serve", "init", state, "--max-releases", "50")
    store = open_store(state)
    store.add_dataset(name="d", epsilon=5.0, delta=1e-6, n_persons=2, items=["q"], missing="none",
                      codes=np.zeros((2, 1), dtype=np.int8), source="test")
    cli("serve", "limits", state, "--max-releases", "40")
    keys = [last_line(cli("serve", "analyst", "add", state, "alice", "--allowance", "d=1"))]
    cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=0.5,1e-7")
    cli("serve", "analyst", "revoke", state, "alice")
    keys.append(last_line(cli("serve", "analyst", "new-key", state, "alice")))
    keys.append(last_line(cli("serve", "curator-key", state)))
    keys.append(last_line(cli("serve", "analyst", "add", state, "bob", "--allowance", "d=1")))
    app = create_app(store)
    status, _, _ = asgi_call(app, "POST", "/v1/curator/analysts/bob/revoke", keys[2])
    assert status == 200
    events = store.events()
    assert [(e["action"], e["name"]) for e in events] == [
        ("init", "state"), ("dataset add", "d"), ("limits", "state"), ("analyst add", "alice"),
        ("analyst allow", "alice"), ("analyst revoke", "alice"), ("analyst new-key", "alice"),
        ("curator-key", "curator"), ("analyst add", "bob"), ("analyst revoke", "bob")]
    assert events[0]["params"]["max_releases"] == 50 and events[2]["params"] == {"max_releases": 40}
    assert events[1]["params"]["epsilon"] == 5.0 and events[1]["params"]["delta"] == 1e-6
    assert events[4]["params"]["allowances"]["d"]["epsilon"] == 0.5
    assert events[4]["params"]["allowances"]["d"]["delta"] == 1e-7
    curator_id = store.authenticate(keys[2], "curator").id
    assert {e["who"] for e in events[:-1]} == {"cli"} and events[-1]["who"] == f"curator key #{curator_id} (API)"
    # the curator API and `serve list` show them; the curator's key only
    status, body, _ = asgi_call(app, "GET", "/v1/curator/events", keys[2])
    assert status == 200 and body == events
    assert asgi_call(app, "GET", "/v1/curator/events")[0] == 401
    assert asgi_call(app, "GET", "/v1/curator/events", keys[1])[0] == 403
    listing = cli("serve", "list", state).stdout
    assert f"curator actions: {len(events)}" in listing and "analyst allow alice" in listing
    assert json.loads(cli("serve", "list", state, "--json").stdout)["events"] == events
    # never a key, a key's secret, id or hash
    with store._b.read() as con:
        hashes = [r[0] for t in ("analysts", "curator_keys") for r in con.execute(f"SELECT key_hash FROM {t}")]
    text = json.dumps(events) + listing
    for secret in [*keys, *(k.split(".")[1] for k in keys), *(k.split(".")[2] for k in keys), *hashes]:
        assert secret not in text


def test_allow_raises_lowers_and_grants_allowances_keeping_the_spends(tmp_path):
    allow_flow(str(tmp_path / "s.db"))


def test_new_key_keeps_the_record_and_the_old_key_stops(tmp_path):
    new_key_flow(str(tmp_path / "s.db"))


def test_every_curator_action_is_an_event_without_keys(tmp_path):
    events_flow(str(tmp_path / "s.db"))


def test_a_delta_that_leaves_no_room_for_the_delta_spent_is_refused(tmp_path):
    # the composed total would be infinite (its listing and JSON unreadable): refused in one line
    state = str(tmp_path / "s.db")
    store, ds, key = _state(state)
    _spend(store, store.authenticate(key, "analyst"), ds, 0.1, delta=5e-7)
    proc = cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=1,4e-7", check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "already spent" in lines[0], proc.stderr
    assert store.allowances()[0]["delta"] == 1e-6


def test_the_curator_page_shows_the_newest_events(tmp_path):
    from privirt.serve.page import EVENT_ROWS, render_page

    state = str(tmp_path / "s.db")
    store, _, _ = _state(state)
    cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=0.25")
    html = render_page(store.datasets(), store.allowances(), store.spends(), store.analysts(), store.events())
    assert "Curator actions (4, newest first)" in html
    assert html.index("analyst allow") < html.index("analyst add") < html.index("<td>init</td>")
    many = [{"id": i, "time": "2026-01-01T00:00:00", "action": "limits", "name": "state",
             "params": {"max_releases": i}, "who": "cli"} for i in range(1, EVENT_ROWS + 6)]
    html = render_page([], [], [], [], many)
    assert f"the newest {EVENT_ROWS} of {EVENT_ROWS + 5}" in html and "max_releases&quot;: 6}" in html
    assert "max_releases&quot;: 5}" not in html


def schema_2_state(state: str, connect) -> None:
    """Make ``state`` (new, with one analyst) what privirt wrote before the events (schema 2)."""
    with connect() as con:
        con.execute("DROP TABLE events")
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def migrate_flow(state: str, connect) -> None:
    from privirt.serve.store import SCHEMA_VERSION, open_store

    _, _, key = _state(state)
    schema_2_state(state, connect)
    store = open_store(state)
    with connect() as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    assert [e["action"] for e in store.events()] == ["upgrade"]
    cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=2")
    assert [e["action"] for e in open_store(state).events()] == ["upgrade", "analyst allow"]  # once only
    assert store.authenticate(key, "analyst") is not None and store.allowances()[0]["epsilon"] == 2.0


def test_a_schema_2_sqlite_state_gets_the_events_table_in_place(tmp_path):
    state = str(tmp_path / "s.db")
    migrate_flow(state, lambda: sqlite3.connect(state))


def test_backup_of_a_schema_2_state_copies_it_as_it_is_and_leaves_it_unchanged(tmp_path):
    # `serve backup` opened the state with open_store, which upgraded it to schema 3 before the
    # copy: the curator's backup "before upgrading" was neither pre-upgrade nor readable by the old
    # privirt, and the source was changed
    import contextlib

    from privirt.serve.store import open_store

    state, copy = str(tmp_path / "s.db"), str(tmp_path / "copy.db")
    _state(state)
    with contextlib.closing(sqlite3.connect(state)) as con:
        schema_2_state(state, lambda: con)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    files = sorted(p.name for p in tmp_path.iterdir())
    before = {name: (tmp_path / name).read_bytes() for name in files}
    cli("serve", "backup", state, copy)
    assert {name: (tmp_path / name).read_bytes() for name in files} == before  # the source unchanged

    def schema(path: str) -> tuple:
        with contextlib.closing(sqlite3.connect(path)) as con:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0], "events" in tables

    assert schema(state) == schema(copy) == ("2", False)
    assert open_store(copy).allowances()[0]["analyst"] == "alice"  # the copy is a state: opened (and upgraded) later


def test_a_request_whose_key_was_replaced_before_its_debit_gets_401(tmp_path, monkeypatch):
    # authenticated with the old key, then `analyst new-key`: the debit refuses it (the one 401),
    # as it refuses a key revoked meanwhile; nothing is spent
    from privirt.private.accounting import PrivacyCost
    from privirt.serve import service
    from privirt.serve.auth import AuthError

    state = str(tmp_path / "s.db")
    store, _, key = _state(state)
    alice = store.authenticate(key, "analyst")
    monkeypatch.setattr(service, "request_cost", lambda *a: PrivacyCost(epsilon=0.1))
    monkeypatch.setattr(service, "_responses", lambda *a: None)

    def call_library(resp, ds, endpoint, params, ledger):
        cli("serve", "analyst", "new-key", state, "alice")  # while the request runs
        ledger.spend(PrivacyCost(epsilon=0.1), mechanism="test")

    monkeypatch.setattr(service, "_call_library", call_library)
    with pytest.raises(AuthError) as exc:
        service.run_request(store, alice, "d", "release", {"kind": "totals", "epsilon": 0.1, "delta": None}, None)
    assert exc.value.status == 401 and store.counts() == {"requests": 0, "spends": 0}


def test_an_upgrade_that_finds_a_foreign_events_table_is_refused_unchanged(tmp_path):
    # schema 2's init accepted a database holding any other table; the upgrade's own "events"
    # table would collide with one named so: one line saying which table and what to do, the
    # state left as it was (schema 2, the foreign table untouched), not "relation already exists"
    state = str(tmp_path / "s.db")
    _state(state)
    schema_2_state(state, lambda: sqlite3.connect(state))
    with sqlite3.connect(state) as con:
        con.execute("CREATE TABLE events (id INTEGER, what TEXT)")
        con.execute("INSERT INTO events VALUES (7, 'theirs')")
    res = cli("serve", "list", state, check=False)
    assert res.returncode == 2 and res.stdout == ""
    line = res.stderr.strip()
    assert "\n" not in line and "a table named events that is not privirt's" in line
    assert "rename or move that table" in line and "nothing was changed" in line
    with sqlite3.connect(state) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "2"
        assert con.execute("SELECT * FROM events").fetchall() == [(7, "theirs")]


@pytest.mark.parametrize("action", ["new-key", "revoke"])
def test_an_analyst_name_no_analyst_can_have_is_refused_in_one_line(tmp_path, action):
    # (a name that is not UTF-8, as a shell passes bytes: a codec error before)
    state = str(tmp_path / "s.db")
    store, _, key = _state(state)
    res = cli("serve", "analyst", action, state, "\udcff", check=False)
    assert res.returncode == 2 and "\n" not in res.stderr.strip()
    assert "analyst name" in res.stderr and "codec" not in res.stderr
    assert store.authenticate(key, "analyst") is not None and [e["action"] for e in store.events()][-1] == "analyst add"


def test_init_with_a_bad_limit_leaves_nothing_behind(tmp_path):
    # (the limit was checked inside the transaction, after SQLite had made the file: an empty
    # file then blocked every later init as "already exists" and read as "not a state")
    from privirt.serve.store import init_store

    state = tmp_path / "lib.db"
    with pytest.raises(ValueError, match="--max-releases must be a whole number >= 1"):
        init_store(str(state), 0)
    assert not state.exists()
    store = init_store(str(state), 5)
    assert store.max_releases() == 5 and [e["action"] for e in store.events()] == ["init"]


def test_allow_new_key_and_events_against_a_running_service(tmp_path):
    """The administration over loopback, with `privirt serve run` up: the curator's commands
    change what the running service answers at once (a lowered allowance: 402; the old key:
    401, the new one: 200), and GET /v1/curator/events lists them without any key."""
    from pathlib import Path

    from ._serve import Server, call, setup_state

    lsat6 = Path(__file__).resolve().parents[1] / "datasets" / "lsat6.csv"
    state = str(tmp_path / "s.db")
    keys = setup_state(state, {"d": (lsat6, 4.0, 1e-6, ["--weights-col", "frequency"])}, {"alice": ["d=1"]})
    server = Server(state)
    try:
        release = {"kind": "totals", "epsilon": 0.3}
        assert call(f"{server.url}/v1/datasets/d/release", "POST", keys["alice"], release)[0] == 200
        cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=0.2")  # below what she spent
        st, body, _ = call(f"{server.url}/v1/datasets/d/release", "POST", keys["alice"], release)
        assert st == 402, body
        cli("serve", "analyst", "allow", state, "alice", "--allowance", "d=2")
        new = last_line(cli("serve", "analyst", "new-key", state, "alice"))
        assert call(f"{server.url}/v1/datasets/d/release", "POST", keys["alice"], release)[0] == 401
        assert call(f"{server.url}/v1/datasets/d/release", "POST", new, release)[0] == 200
        st, events, _ = call(f"{server.url}/v1/curator/events", key=keys["curator"])
        assert st == 200
        assert [e["action"] for e in events][-3:] == ["analyst allow", "analyst allow", "analyst new-key"]
        text = json.dumps(events)
        assert all(k not in text and k.split(".")[0] not in text for k in (keys["alice"], new, keys["curator"]))
        assert call(f"{server.url}/v1/curator/events", key=new)[0] == 403
    finally:
        server.stop()
