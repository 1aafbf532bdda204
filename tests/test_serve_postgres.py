"""``privirt serve`` on a ``postgresql://`` state: a URL libpq cannot parse, secrets in the URL
(never printed), a role without rights on the state's tables, and concurrent ``init``/``add``
(one line each, never a traceback).  The tests that need a server use the throwaway PostgreSQL
of :mod:`tests.test_serve_concurrency` and skip, saying why, without one."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("psycopg")

from ._serve import cli  # noqa: E402

SECRET = "Sekr3tPw"


def _one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("privirt: error:"), proc.stderr
    assert proc.stdout == ""
    return lines[0]


@pytest.mark.parametrize("url", [
    f"postgresql://postgres:{SECRET}@127.0.0.1:1/st?foo=bar",  # an unknown query parameter
    f"postgresql://postgres:{SECRET}@127.0.0.1:1/st?connect_timeout=abc",
    f"postgresql://postgres:{SECRET}@[::1:1/st",  # no closing bracket
    f"postgresql://postgres:{SECRET}%ZZ@127.0.0.1:1/st",  # a raw '%' in the password
    f"postgresql://postgres@127.0.0.1:1/st?password={SECRET}%ZZ",
])
def test_a_url_libpq_cannot_parse_is_one_line_without_the_password(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (("serve", "list", url), ("serve", "init", url), ("serve", "run", url)):
        line = _one_line(cli(*args, check=False))
        assert "cannot connect to the state" in line and SECRET not in line, line
    assert list(tmp_path.iterdir()) == []



def test_every_secret_query_parameter_of_the_url_is_masked():
    from privirt.serve._backends import _redact

    url = ("postgresql://u:pw1@h/db?sslpassword=KeyPass77&SSLPassword=KeyPass78&oauth_client_secret=Oa79"
           "&sslmode=require&passfile=/home/u/.pgpass&sslkey=/k.pem")
    assert _redact(url) == ("postgresql://u:***@h/db?sslpassword=***&SSLPassword=***&oauth_client_secret=***"
                            "&sslmode=require&passfile=/home/u/.pgpass&sslkey=/k.pem")
    line = _one_line(cli("serve", "list", "postgresql://u@127.0.0.1:1/x?sslpassword=KeyPass77", check=False))
    assert "sslpassword=***" in line and "KeyPass77" not in line, line

def test_a_state_url_in_the_wrong_place_is_not_echoed_with_its_password(tmp_path):
    # argparse's "unrecognized arguments: ..." repeated a mistyped state URL, password and all
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:1/st?sslpassword=KeyPass77"
    line = _one_line(cli("serve", "list", str(tmp_path / "s"), url, check=False))
    assert "unrecognized arguments: postgresql://postgres:***@127.0.0.1:1/st?sslpassword=***" in line
    assert SECRET not in line and "KeyPass77" not in line


@pytest.mark.parametrize("password", ["Se#cret9", "Se?cret9", "Se cret9", "Se@cret9"])
def test_a_password_with_hash_question_mark_or_space_is_masked_whole(password, tmp_path):
    # libpq takes the user part up to the first '@' before any '/': '#' and '?' belong to the
    # password, which urlsplit read as a fragment or a query and printed
    from privirt.serve._backends import _redact, _secrets

    url = f"postgresql://u:{password}@127.0.0.1:1/st?sslmode=disable"
    assert _redact(url) == "postgresql://u:***@127.0.0.1:1/st?sslmode=disable"
    assert password in _secrets(url)
    line = _one_line(cli("serve", "list", url, check=False))
    assert password not in line and "postgresql://u:***@127.0.0.1:1/st" in line, line


@pytest.mark.parametrize("action", ["list", "init", "curator-key", "run"])
def test_a_raw_at_in_the_password_is_refused_before_connecting(action, tmp_path, monkeypatch):
    # libpq ends the password at its first '@' and printed the rest as the host it could not resolve
    import psycopg

    def connect(*args, **kwargs):
        raise AssertionError("connected")

    monkeypatch.setattr(psycopg, "connect", connect)
    monkeypatch.chdir(tmp_path)
    line = _one_line(cli("serve", action, "postgresql://postgres:Tr0ub4dor@horse@127.0.0.1:1/st", check=False))
    assert "raw '@'" in line and "%40" in line and "postgresql://postgres:***@127.0.0.1:1/st" in line, line
    assert "Tr0ub4dor" not in line and "horse" not in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("password", ["Tr0ub4dor@horse", "Tr0ub4dor%40horse", "a@Tr0ub4dor@horse"])
def test_every_at_separated_piece_of_a_password_is_masked(password):
    # libpq ends a password at its first '@': what it prints as the host is the password's rest
    from privirt.serve._backends import _libpq_text

    url = f"postgresql://postgres:{password}@127.0.0.1:1/st"
    text = _libpq_text("failed to resolve host 'horse@127.0.0.1' for Tr0ub4dor@horse (Tr0ub4dor)", url, quoted=True)
    assert "horse" not in text and "Tr0ub4dor" not in text, text


@pytest.mark.parametrize("url", ["postgresql://u:ab/c@127.0.0.1:1/st", "postgresql://u:x/@127.0.0.1/st"])
def test_a_raw_slash_in_the_password_is_refused_without_showing_it(url, tmp_path, monkeypatch):
    # libpq read 'u' as the host and 'ab' as the port, and the whole URL, password and all, was
    # printed: neither the refusal nor any mask had found the user part past the first '/'
    from privirt.serve._backends import _redact

    monkeypatch.chdir(tmp_path)
    line = _one_line(cli("serve", "list", url, check=False))
    assert "raw '/'" in line and "%2F" in line, line
    assert "ab/c" not in line and "x/" not in line and ":***@" in line, line
    assert ":***@" in _redact(url)


def test_a_short_password_or_piece_of_one_leaves_the_message_readable():
    # every '@'-piece was masked wherever it occurred as text: 'e' gave 'conn***ction fail***d'
    from privirt.serve._backends import _libpq_text

    said = 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    for password in ("e", "e%40n", "p%40ss"):
        text = _libpq_text(said, f"postgresql://u:{password}@127.0.0.1:1/db")
        assert "connection to server" in text and "failed: Connection refused" in text, (password, text)
    text = _libpq_text("auth failed for p@ss (p@ss)", "postgresql://u:p%40ss@127.0.0.1:1/db")
    assert "p@ss" not in text, text  # the whole password stays masked


@pytest.mark.parametrize("argv", [
    ("serve", f"postgresql://u:{SECRET}@h/db", "list"),  # argparse quotes an invalid choice
    ("serve", "run", "s.db", "--port", f"postgresql://u:{SECRET}@h/db"),  # ... and a bad value
    ("serve", "list", "s.db", f"postgresql://u:{SECRET}@h/db?sslpassword=Key 77"),
])
def test_usage_errors_mask_a_quoted_or_spaced_state_url(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = _one_line(cli(*argv, check=False))
    assert SECRET not in line and "77" not in line and "postgresql://u:***@h/db" in line, line


def test_secret_fields_are_masked_wherever_the_query_starts():
    # with no '/' before it, libpq reads "h?user=a" as a user part: the password field that
    # follows must still be masked
    from privirt.serve._backends import _redact

    assert _redact("postgresql://h?user=a@b&password=Pw1") == "postgresql://h?user=a@b&password=***"


def test_usage_errors_leave_other_urls_as_typed(tmp_path):
    proc = cli("estimate", str(tmp_path / "x.csv"), "tcp://[::1:8786", check=False)
    assert proc.returncode == 2 and "unrecognized arguments: tcp://[::1:8786" in proc.stderr, proc.stderr


def test_connections_get_time_limits_unless_the_url_or_the_environment_sets_them(monkeypatch, tmp_path):
    # psycopg.connect(url) had libpq's defaults: no keepalives, and a connection to a server that
    # answers nothing waited 130 s; psycopg's keyword arguments override the URL's own parameters
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from privirt.serve._backends import StateUnavailable, _Postgres

    seen = []

    def connect(conninfo, **kwargs):
        kwargs.pop("autocommit")
        seen.append(conninfo_to_dict(make_conninfo(conninfo, **kwargs)))
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(psycopg, "connect", connect)
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    own = "postgresql://u@127.0.0.1:1/db?connect_timeout=60&keepalives=0&tcp_user_timeout=7"
    for url in ("postgresql://u@127.0.0.1:1/db", own):
        with pytest.raises(StateUnavailable):
            _Postgres(url)._conn()
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "40")
    with pytest.raises(StateUnavailable):
        _Postgres("postgresql://u@127.0.0.1:1/db")._conn()
    limits = {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
              "tcp_user_timeout"}
    plain, given, env = seen
    assert limits <= set(plain) and plain["keepalives"] == "1"
    assert (given["connect_timeout"], given["keepalives"], given["tcp_user_timeout"]) == ("60", "0", "7")
    assert limits - {"connect_timeout"} <= set(env) and "connect_timeout" not in env  # libpq reads the variable
    # a service file's settings would be overridden by keyword arguments: a URL naming one gets none
    from privirt.serve._deadline import _connect_options

    service_file = tmp_path / "pg_service.conf"
    service_file.write_text("[svc]\nhost=127.0.0.1\nconnect_timeout=60\ntcp_user_timeout=0\n")
    monkeypatch.setenv("PGSERVICEFILE", str(service_file))
    monkeypatch.delenv("PGSYSCONFDIR", raising=False)
    for url, service in (("postgresql://?service=svc", None), ("postgresql://u@127.0.0.1:1/db", "svc")):
        if service:
            monkeypatch.setenv("PGSERVICE", service)
        options = _connect_options(url)  # the file's own settings kept, the others still given
        assert "connect_timeout" not in options and "tcp_user_timeout" not in options, options
        assert options["keepalives"] == "1", options
    assert _connect_options("postgresql://?service=other")["tcp_user_timeout"] == "15000"  # (no such section)


# ---------------------------------------------------------------------------------------
# with a PostgreSQL server (trust authentication: a password in the URL is accepted and ignored)
from .test_serve_concurrency import _new_database, postgres  # noqa: E402,F401


def _with_password(url: str, password: str = SECRET) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{password}@", 1)


def test_init_and_revoke_never_print_the_password_of_the_state_url(postgres):  # noqa: F811
    url = _with_password(_new_database(postgres, "leak"))
    out = cli("serve", "init", url).stdout
    assert "next: privirt serve dataset add postgresql://postgres:***@" in out and SECRET not in out, out
    line = _one_line(cli("serve", "analyst", "revoke", url, "nobody", check=False))
    assert "privirt serve list postgresql://postgres:***@" in line and SECRET not in line, line


def test_a_role_without_rights_on_the_state_gets_one_line_and_nothing_is_written(postgres):  # noqa: F811
    import psycopg

    owner = _new_database(postgres, "norights")
    empty = _new_database(postgres, "norights_empty")
    cli("serve", "init", owner)
    with psycopg.connect(postgres["base"] + "/postgres", autocommit=True) as con:
        con.execute("CREATE ROLE lim LOGIN")
    with psycopg.connect(empty, autocommit=True) as con:  # (PostgreSQL >= 15 does this by default)
        con.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    lim = _with_password(owner).replace("postgres:", "lim:", 1)
    for args in (("list", lim), ("curator-key", lim), ("limits", lim, "--max-releases", "3"),
                 ("init", _with_password(empty).replace("postgres:", "lim:", 1))):
        line = _one_line(cli("serve", *args, check=False))
        assert "cannot be used: permission denied for" in line and SECRET not in line and "lim:***@" in line, line
        assert "LINE" not in line  # not the SQL statement
    with psycopg.connect(owner, autocommit=True) as con:  # may read, not write
        con.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO lim")
    assert "spends: 0" in cli("serve", "list", lim).stdout
    line = _one_line(cli("serve", "curator-key", lim, check=False))
    assert "permission denied for table curator_keys" in line and SECRET not in line, line
    with psycopg.connect(owner) as con:
        assert con.execute("SELECT count(*) FROM curator_keys").fetchone()[0] == 0
    with psycopg.connect(empty) as con:
        assert con.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()[0] == 0


def _race(monkeypatch, first, second):
    """``first()`` in a thread, held just before its transaction's commit; ``second()`` in another
    thread meanwhile; then ``first`` commits.  Returns what each returned or raised."""
    import threading
    from contextlib import contextmanager

    from privirt.serve._backends import _Postgres

    held, go, results = threading.Event(), threading.Event(), {}
    write = _Postgres.write

    @contextmanager
    def paused(self, durable: bool = True):
        with write(self, durable) as con:
            yield con
            if threading.current_thread().name == "first":
                held.set()
                go.wait(30)

    monkeypatch.setattr(_Postgres, "write", paused)

    def run(name, work):
        try:
            results[name] = work()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            results[name] = exc

    threads = [threading.Thread(target=run, args=("first", first), name="first"),
               threading.Thread(target=run, args=("second", second), name="second")]
    threads[0].start()
    assert held.wait(30)
    threads[1].start()
    threads[1].join(1.5)  # the second has reached the lock (or the conflicting row) by now
    go.set()
    for t in threads:
        t.join(60)
    return results["first"], results["second"]


def test_two_inits_or_adds_of_one_name_at_once_refuse_the_second_in_one_line(postgres, monkeypatch):  # noqa: F811
    import numpy as np

    from privirt.serve.store import StateError, Store, init_store, open_store

    url = _new_database(postgres, "race_init")
    first, second = _race(monkeypatch, lambda: init_store(url), lambda: init_store(url))
    assert isinstance(first, Store), first
    assert isinstance(second, StateError) and "already holds a privirt serve state" in str(second), repr(second)
    first, second = _race(monkeypatch, lambda: open_store(url).add_analyst("ann", {}),
                          lambda: open_store(url).add_analyst("ann", {}))
    assert isinstance(first, str), first
    assert isinstance(second, StateError) and "an analyst named 'ann' exists already" in str(second), repr(second)

    def add_dataset():
        return open_store(url).add_dataset(name="d", epsilon=1.0, delta=1e-6, n_persons=2, items=["q"],
                                           missing="none", codes=np.zeros((2, 1)), source="test")

    first, second = _race(monkeypatch, add_dataset, add_dataset)
    assert isinstance(first, int), first
    assert isinstance(second, StateError) and "a data set named 'd' exists already" in str(second), repr(second)
    assert open_store(url).counts() == {"requests": 0, "spends": 0}


@pytest.mark.parametrize("isolation", ["repeatable read", "serializable"])
def test_two_debits_at_once_never_overspend_whatever_the_default_isolation(postgres, isolation):  # noqa: F811
    # the debit's sums must see a spend committed while it waited for the data set's row lock:
    # under a server default of REPEATABLE READ its snapshot predated that spend and both debits
    # of 0.3 went through on a budget of 0.5 (SERIALIZABLE: a serialization failure instead)
    import threading
    import time

    import numpy as np
    import psycopg

    from privirt.private.accounting import PrivacyCost
    from privirt.serve.store import OverBudget, init_store

    name = "iso_" + isolation.replace(" ", "_")
    url = _new_database(postgres, name)
    with psycopg.connect(postgres["base"] + "/postgres", autocommit=True) as con:
        con.execute(f"ALTER DATABASE {name} SET default_transaction_isolation = '{isolation}'")
    store = init_store(url)
    ds = store.add_dataset(name="d", epsilon=0.5, delta=1e-6, n_persons=2, items=["q"], missing="none",
                           codes=np.zeros((2, 1)), source="test")
    ids = [store.authenticate(store.add_analyst(a, {"d": (0.5, 1e-6)}), "analyst").id for a in ("a1", "a2")]
    results: dict = {}

    def debit(analyst_id: int) -> None:
        try:
            store.debit(analyst_id=analyst_id, dataset_id=ds, cost=PrivacyCost(epsilon=0.3), mechanism="test",
                        endpoint="release", params={}, idem_key=None)
            results[analyst_id] = "debited"
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            results[analyst_id] = exc

    # a third connection holds the data set's row: both debits begin (and lock their analyst's
    # row) and wait for it, then it is released and they go one after the other
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as watch:
        holder.execute("SELECT id FROM datasets WHERE id = %s FOR UPDATE", (ds,))
        threads = [threading.Thread(target=debit, args=(a,)) for a in ids]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while watch.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
                            (name,)).fetchone()[0] < 2:
            assert time.monotonic() < deadline, "the two debits never waited for the data set's row"
            time.sleep(0.02)
        holder.rollback()
    for t in threads:
        t.join(60)
    outcomes = sorted(results.values(), key=lambda r: r != "debited")
    assert len(outcomes) == 2 and outcomes[0] == "debited" and isinstance(outcomes[1], OverBudget), results
    assert store.counts() == {"requests": 1, "spends": 1}


@pytest.mark.parametrize("setting, used", [("off", "on"), ("local", "local"), ("remote_apply", "remote_apply")])
def test_the_service_commits_durably_whatever_the_databases_synchronous_commit(postgres, setting, used):  # noqa: F811
    # docs/serve.md: a debit (and a result) answered survives a crash of PostgreSQL; with the
    # database's synchronous_commit = off an answered debit could be lost.  A setting that flushes
    # the WAL locally (local, remote_apply) is left as the administrator chose it
    import psycopg

    from privirt.serve.store import init_store

    name = f"sync_{setting}"
    url = _new_database(postgres, name)
    with psycopg.connect(postgres["base"] + "/postgres", autocommit=True) as con:
        con.execute(f"ALTER DATABASE {name} SET synchronous_commit = {setting}")
    with psycopg.connect(url) as con:
        assert con.execute("SHOW synchronous_commit").fetchone()[0] == setting
    b = init_store(url)._b
    for begin in (b.read, b.write, b.read):
        with begin() as con:
            assert con.execute("SHOW synchronous_commit").fetchone()[0] == used
    b._drop()  # a fresh connection (one lost meanwhile) too
    with b.write() as con:
        assert con.execute("SHOW synchronous_commit").fetchone()[0] == used


@pytest.mark.parametrize("flow", ["allow", "new_key", "events", "migrate"])
def test_curator_administration_on_postgres(postgres, flow):  # noqa: F811
    # the flows of tests/test_serve_admin.py (allowances changed, a new key for the same record,
    # the curator's events, the in-place upgrade of a schema-2 state) on a PostgreSQL state
    import psycopg

    from . import test_serve_admin as admin

    url = _new_database(postgres, f"admin_{flow}")
    if flow == "migrate":
        admin.migrate_flow(url, lambda: psycopg.connect(url))
    else:
        getattr(admin, f"{flow}_flow")(url)


def test_serve_run_state_deadline_reaches_every_workers_backend_and_ends_a_blocked_debit(postgres, monkeypatch):  # noqa: F811
    """``privirt serve run --workers 2 --state-deadline 0.5``: each worker process builds its app
    with ``app_from_env`` from the environment it inherits; there, a debit waiting on the data
    set's row lock (held by another connection) ends at 0.5 s, not 30 s, with the 503 "nothing
    was spent", and nothing is written."""
    import os

    import psycopg
    import uvicorn

    from privirt.cli import main
    from privirt.serve import service
    from privirt.serve.app import app_from_env

    from ._serve import free_port
    from .test_serve_concurrency import DELTA, _pg_service

    url, _, who = _pg_service(postgres, "deadline_option")
    started: dict = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: started.update(k))
    for name in ("STATE", "MAX_IN_FLIGHT", "TLS_PROXY", "STATE_DEADLINE"):  # (restored after the test)
        monkeypatch.setenv(f"PRIVIRT_SERVE_{name}", "7")
    assert main(["serve", "run", url, "--port", str(free_port()), "--workers", "2", "--state-deadline", "0.5"]) == 0
    assert started["workers"] == 2 and os.environ["PRIVIRT_SERVE_STATE_DEADLINE"] == "0.5"
    store = app_from_env().state.store  # what each worker runs
    params = {"kind": "totals", "epsilon": 0.3, "delta": DELTA, "mechanism": "gaussian"}
    with psycopg.connect(url) as holder:
        holder.execute("SELECT id FROM datasets FOR UPDATE")
        with pytest.raises(service.RequestFailed) as err:
            service.run_request(store, who, "d", "release", params, "k1")
    assert err.value.status == 503 and err.value.detail == service.STATE_UNAVAILABLE
    causes, exc = [], err.value
    while exc is not None:
        causes.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    assert any("did not answer within 0.5 s" in text for text in causes), causes
    assert store.counts() == {"requests": 0, "spends": 0}
    assert main(["serve", "run", url, "--port", str(free_port())]) == 0  # without it: the default again
    assert "PRIVIRT_SERVE_STATE_DEADLINE" not in os.environ
