"""``privirt serve`` under concurrency: 50 simultaneous requests against allowances (or a data
set budget) that fit exactly 10 — with 2 uvicorn workers on SQLite, and with 2 service
processes sharing one PostgreSQL state (a real server started here with initdb/pg_ctl) — and
kill -9 of the workers in the middle of requests: never a release without a spend."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ._serve import LSAT6, Server, call, cli, counts, free_port, setup_state  # noqa: E402

EPS, DELTA = 0.5, 1e-6
N_ANALYSTS, PER_ANALYST = 5, 10  # 50 requests
UNCAPPED = ("--max-in-flight", str(PER_ANALYST))


def _cost():
    import privirt

    X = privirt.load_dataset("lsat6")
    return privirt.release_counts(X, epsilon=EPS, delta=DELTA, seed=0).privacy.cost


def _fitting(k: int) -> float:
    """An ε budget (at δ = DELTA) that holds exactly k of these requests, composed as the ledger."""
    from privirt.private.accounting import total_epsilon

    c = _cost()
    lo, hi = total_epsilon([c] * k, DELTA), total_epsilon([c] * (k + 1), DELTA)
    assert lo < hi
    return 0.5 * (lo + hi)


def _setup(state: str) -> dict:
    fits2, fits10 = _fitting(2), _fitting(10)
    freq = ["--weights-col", "frequency"]
    analysts = {f"a{i}": [f"by_allowance={fits2!r},{DELTA}", f"by_total={_fitting(20)!r},{DELTA}"]
                for i in range(N_ANALYSTS)}
    return setup_state(state, {"by_allowance": (LSAT6, 1000.0, DELTA, freq),
                               "by_total": (LSAT6, fits10, DELTA, freq)}, analysts)


def _burst(urls: list[str], keys: dict, dataset: str) -> list[tuple[int, dict]]:
    jobs = [(urls[j % len(urls)], keys[f"a{i}"]) for i in range(N_ANALYSTS) for j in range(PER_ANALYST)]

    def one(job):
        url, key = job
        st, body, _ = call(f"{url}/v1/datasets/{dataset}/release", "POST", key, {"kind": "counts", "epsilon": EPS,
                                                                                   "delta": DELTA}, timeout=300)
        return st, body

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return list(pool.map(one, jobs))


def test_the_default_cap_answers_429_to_an_analysts_burst_and_spends_nothing_for_it(tmp_path):
    """With the default cap (2 in flight per analyst), a burst of one analyst's requests gets
    429s; every answer is 200, 402 or 429, and only the 200s spent."""
    state = str(tmp_path / "state.db")
    keys = _setup(state)
    server = Server(state, workers=1)
    try:
        jobs = [keys["a0"]] * 12

        def one(key):
            return call(f"{server.url}/v1/datasets/by_total/estimate", "POST", key,
                        {"method": "totals", "epsilon": EPS, "delta": DELTA, "n_boot": 200}, timeout=300)

        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            results = list(pool.map(one, jobs))
        statuses = [st for st, _, _ in results]
        assert set(statuses) <= {200, 402, 429} and statuses.count(429) >= 1, statuses
        assert counts(state)["spends"] == statuses.count(200)
    finally:
        server.stop()


def _check_burst(results, curator_spends, dataset: str) -> None:
    ok = [b for st, b in results if st == 200]
    refused = [b for st, b in results if st == 402]
    assert len(ok) == 10 and len(refused) == 40, sorted({st for st, _ in results})
    assert all("nothing was spent" in b["detail"] for b in refused)
    mine = [s for s in curator_spends if s["dataset"] == dataset]
    assert len(mine) == 10 and {s["request_id"] for s in mine} == {b["request_id"] for b in ok}
    if dataset == "by_allowance":  # exactly 2 each: no analyst overspent
        per = {}
        for s in mine:
            per[s["analyst"]] = per.get(s["analyst"], 0) + 1
        assert per == {f"a{i}": 2 for i in range(N_ANALYSTS)}


def _budgets_hold(url: str, curator: str) -> None:
    from privirt.private.accounting import PrivacyCost, total_epsilon

    spends = call(f"{url}/v1/curator/spends", key=curator)[1]
    budgets = {d["name"]: d for d in call(f"{url}/v1/curator/datasets", key=curator)[1]}
    for name, d in budgets.items():
        costs = [PrivacyCost(s["rho"], s["epsilon"], s["delta"]) for s in spends if s["dataset"] == name]
        assert not costs or total_epsilon(costs, d["delta"]) <= d["epsilon"] * (1 + 1e-12)
    for a in call(f"{url}/v1/curator/allowances", key=curator)[1]:
        costs = [PrivacyCost(s["rho"], s["epsilon"], s["delta"]) for s in spends
                 if s["dataset"] == a["dataset"] and s["analyst"] == a["analyst"]]
        assert not costs or total_epsilon(costs, a["delta"]) <= a["epsilon"] * (1 + 1e-12)


@pytest.mark.slow
def test_two_workers_on_sqlite_never_overspend(tmp_path):
    state = str(tmp_path / "state.db")
    keys = _setup(state)
    # 10 in flight per analyst: all 50 requests race for the budget at once (the default cap of
    # 2 would answer most of them 429 before they reach the debit)
    server = Server(state, workers=2, extra=UNCAPPED)
    try:
        for dataset in ("by_allowance", "by_total"):
            results = _burst([server.url], keys, dataset)
            spends = call(f"{server.url}/v1/curator/spends", key=keys["curator"])[1]
            _check_burst(results, spends, dataset)
        _budgets_hold(server.url, keys["curator"])
    finally:
        server.stop()
    assert counts(state) == {"requests": 20, "spends": 20}


# ---------------------------------------------------------------------------------------
# kill -9 in the middle of requests
def _children(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=False)]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.slow
def test_kill_9_of_the_workers_mid_request_leaves_no_release_without_a_spend(tmp_path):
    pytest.importorskip("psutil")
    state = str(tmp_path / "state.db")
    keys = setup_state(state, {"d": (LSAT6, 50.0, DELTA, ["--weights-col", "frequency"])},
                       {"a": ["d=40"]})
    server = Server(state, workers=2)
    body = {"method": "spectral", "epsilon": 0.2, "n_boot": 1000}
    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            futures = [pool.submit(call, f"{server.url}/v1/datasets/d/estimate", "POST", keys["a"], body,
                                   timeout=300) for _ in range(6)]
            deadline = time.monotonic() + 120
            spent = 0
            while time.monotonic() < deadline and not spent:  # a request debited, result not stored yet
                with sqlite3.connect(state) as con:
                    spent = con.execute("SELECT COUNT(*) FROM requests WHERE status = 'spent'").fetchone()[0]
                time.sleep(0.02)
            assert spent, "no request reached its debit in time"
            workers = _children(server.proc.pid)
            assert workers
            for pid in workers:
                os.kill(pid, signal.SIGKILL)
            results = []
            for f in futures:
                try:
                    results.append(f.result())
                except OSError as exc:  # the connection died with the worker
                    results.append((None, {"error": str(exc)}, {}))
    finally:
        server.stop()
    with sqlite3.connect(state) as con:
        rows = con.execute("SELECT r.id, r.status, s.id FROM requests r LEFT JOIN spends s ON s.request_id = r.id"
                           ).fetchall()
        orphans = con.execute("SELECT COUNT(*) FROM spends WHERE request_id NOT IN (SELECT id FROM requests)"
                              ).fetchone()[0]
    assert orphans == 0
    assert all(spend_id is not None for _, _, spend_id in rows)  # every recorded request was debited
    by_id = {rid: status for rid, status, _ in rows}
    for st, b, _ in results:
        if st == 200:  # every result that left the service is debited and stored
            assert by_id[b["request_id"]] == "done"
    interrupted = [rid for rid, status in by_id.items() if status == "spent"]
    assert interrupted, "the kill did not interrupt a debited request"
    assert any(st != 200 for st, _, _ in results)
    # the interrupted request's cost stays spent, and a restarted service says so
    server = Server(state, workers=1)
    try:
        st, b, _ = call(f"{server.url}/v1/requests/{interrupted[0]}", key=keys["a"])
        assert st == 409 and "spent" in b["detail"]
        spends = call(f"{server.url}/v1/spends", key=keys["a"])[1]
        assert len(spends) == len(rows)
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------
# PostgreSQL: a throwaway server from Debian's postgresql package
def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server on a loopback port in a temporary folder, or a skip with the reason.

    PostgreSQL refuses to run as root: when the tests run as root (CI containers), initdb and
    pg_ctl run as the ``postgres`` user (created by Debian's package) through ``runuser``.
    """
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL's initdb/pg_ctl not found (apt-get install postgresql)")
    prefix: list[str] = []
    folder = tempfile.mkdtemp(prefix="privirt-pg-")
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder, ignore_errors=True)
            pytest.skip("running as root and there is no 'postgres' user to run PostgreSQL as")
        runuser = shutil.which("runuser")
        if not runuser:
            shutil.rmtree(folder, ignore_errors=True)
            pytest.skip("running as root without runuser to start PostgreSQL as 'postgres'")
        os.chown(folder, pw.pw_uid, pw.pw_gid)
        prefix = [runuser, "-u", "postgres", "--"]
    data = os.path.join(folder, "data")
    port = free_port()

    def start() -> None:
        # wal_writer_delay at its longest: a commit that does not wait for its WAL flush stays
        # unflushed for seconds, so that a crash right after it surely loses it (stored results)
        subprocess.run([*prefix, pg_ctl, "-D", data, "-l", os.path.join(folder, "log"), "-w", "-t", "120", "-o",
                        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
                        " -c wal_writer_delay=10000", "start"], check=True, capture_output=True, timeout=180)

    def stop(mode: str = "fast") -> None:
        subprocess.run([*prefix, pg_ctl, "-D", data, "-m", mode, "-w", "stop"], check=True, capture_output=True,
                       timeout=120)

    try:
        subprocess.run([*prefix, initdb, "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8"],
                       check=True, capture_output=True, timeout=180)
        start()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"could not start a PostgreSQL server: {getattr(exc, 'stderr', b'')!r:.300}")
    def pid() -> int:  # the postmaster's (the first line of its pid file)
        with open(os.path.join(data, "postmaster.pid")) as f:
            return int(f.readline())

    yield {"port": port, "base": f"postgresql://postgres@127.0.0.1:{port}", "start": start, "stop": stop,
           "pid": pid}
    subprocess.run([*prefix, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, timeout=120)
    shutil.rmtree(folder, ignore_errors=True)


def _new_database(pg: dict, name: str) -> str:
    import psycopg

    with psycopg.connect(pg["base"] + "/postgres", autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    return f"{pg['base']}/{name}"


def test_postgres_state_end_to_end_with_the_client(postgres):
    from privirt.client import BudgetExceeded, Client

    url = _new_database(postgres, "e2e")
    keys = setup_state(url, {"lsat6": (LSAT6, 2.0, DELTA, ["--weights-col", "frequency"])},
                       {"alice": ["lsat6=1"]})
    assert cli("serve", "init", url, check=False).returncode != 0  # never twice
    server = Server(url)
    try:
        c = Client(server.url, keys["alice"])
        fit = c.estimate("lsat6", method="totals", epsilon=0.5, n_boot=20)
        assert list(fit.beta.index) == ["item1", "item2", "item3", "item4", "item5"]
        again = c.release("lsat6", kind="counts", epsilon=0.2, idempotency_key="k1")
        same = c.release("lsat6", kind="counts", epsilon=0.2, idempotency_key="k1")
        assert again.Y.equals(same.Y)
        with pytest.raises(BudgetExceeded):
            c.release("lsat6", kind="totals", epsilon=5.0)
        assert len(c.spends()) == 2
    finally:
        server.stop()
    out = cli("serve", "list", url).stdout
    assert "alice on lsat6" in out and "spends: 2" in out


@pytest.mark.slow
def test_two_service_processes_sharing_postgres_never_overspend(postgres):
    url = _new_database(postgres, "race")
    keys = _setup(url)
    servers = [Server(url, extra=UNCAPPED), Server(url, extra=UNCAPPED)]
    try:
        urls = [s.url for s in servers]
        for dataset in ("by_allowance", "by_total"):
            results = _burst(urls, keys, dataset)
            spends = call(f"{urls[0]}/v1/curator/spends", key=keys["curator"])[1]
            _check_burst(results, spends, dataset)
        _budgets_hold(urls[1], keys["curator"])
    finally:
        for s in servers:
            s.stop()


def test_postgres_a_lost_commit_answer_is_looked_up_not_guessed(postgres, tmp_path, monkeypatch):
    """PostgreSQL, in process: the debit's COMMIT raises a connection error.  Committed: the
    request goes on and returns its result, spent once.  Not committed: 503 saying the budget may
    have been spent, with the request id; the id then shows nothing was, and a retry with the same
    Idempotency-Key spends once."""
    import psycopg

    import privirt
    from privirt.serve import service
    from privirt.serve.store import init_store

    from .test_serve_security import _flaky_commit

    url = _new_database(postgres, "lostcommit")
    store = init_store(url)
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=20.0, delta=DELTA, items=None, n_persons=None,
                             missing="none", source="test")
    who = store.authenticate(store.add_analyst("a", {"d": (20.0, DELTA)}), "analyst")
    params = {"kind": "totals", "epsilon": 0.3, "delta": DELTA, "mechanism": "gaussian"}
    _flaky_commit(monkeypatch, store, committed=True, exc=psycopg.OperationalError("server closed the connection"))
    body, replayed = service.run_request(store, who, "d", "release", params, "pg-1")
    assert not replayed and store.counts() == {"requests": 1, "spends": 1}
    assert store.find_request(who.id, idem_key="pg-1")["result"] == body
    _flaky_commit(monkeypatch, store, committed=False, exc=psycopg.OperationalError("server closed the connection"))
    with pytest.raises(service.RequestFailed) as err:
        service.run_request(store, who, "d", "release", params, "pg-2")
    assert err.value.status == 503 and "may have been spent" in err.value.detail
    assert store.find_request(who.id, request_id=err.value.extra["request_id"]) is None
    assert store.counts() == {"requests": 1, "spends": 1}
    service.run_request(store, who, "d", "release", params, "pg-2")
    assert store.counts() == {"requests": 2, "spends": 2}


# ---------------------------------------------------------------------------------------
# PostgreSQL: the service's connections dropped (pg_terminate_backend), or PostgreSQL down
def _terminate(pg: dict, url: str) -> int:
    """End every connection to ``url``'s database (as an administrator or a restart does) from a
    separate connection, and wait until they are gone; returns how many there were."""
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(pg["base"] + "/postgres", autocommit=True) as con:
        pids = [r[0] for r in con.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> "
                                          "pg_backend_pid()", (name,)).fetchall()]
        for pid in pids:
            con.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 30
        while con.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone()[0]:
            assert time.monotonic() < deadline, "the terminated connections did not end"
            time.sleep(0.05)
    return len(pids)


def _pg_service(pg: dict, name: str):
    """An in-process PostgreSQL state with LSAT6 as data set ``d`` and one analyst ``a``."""
    import privirt
    from privirt.serve import service
    from privirt.serve.store import init_store

    url = _new_database(pg, name)
    store = init_store(url)
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=20.0, delta=DELTA, items=None, n_persons=None,
                             missing="none", source="test")
    who = store.authenticate(store.add_analyst("a", {"d": (20.0, DELTA)}), "analyst")
    return url, store, who


def test_postgres_connections_dropped_mid_request_still_store_and_return_the_result(postgres, monkeypatch):
    """The service's connections end while a debited request computes (PostgreSQL up): its result
    is stored on a fresh connection and returned, and a retry with its key replays it."""
    from privirt.serve import service

    url, store, who = _pg_service(postgres, "midrequest")
    real = service._call_library
    ended = []

    def call_library(*args, **kwargs):
        out = real(*args, **kwargs)  # debited by now
        ended.append(_terminate(postgres, url))
        return out

    monkeypatch.setattr(service, "_call_library", call_library)
    params = {"kind": "totals", "epsilon": 0.3, "delta": DELTA, "mechanism": "gaussian"}
    body, replayed = service.run_request(store, who, "d", "release", params, "mid-1")
    assert ended and ended[0] >= 1 and not replayed
    found = store.find_request(who.id, idem_key="mid-1")
    assert found["status"] == "done" and found["result"] == body
    monkeypatch.setattr(service, "_call_library", real)
    again, replayed = service.run_request(store, who, "d", "release", params, "mid-1")
    assert replayed and again == body and store.counts() == {"requests": 1, "spends": 1}


def test_postgres_unreachable_when_the_debit_begins_answers_nothing_was_spent(postgres, monkeypatch):
    """PostgreSQL becomes unreachable after the budget pre-check, before the debit's transaction
    begins: the documented 503 "nothing was spent" (no request id), and nothing is written."""
    from privirt.serve import service

    url, store, who = _pg_service(postgres, "debitbegin")
    real = service._responses

    def responses(*args, **kwargs):  # (called after the pre-check, just before the debit)
        out = real(*args, **kwargs)
        _terminate(postgres, url)
        store._b.url = url.replace(f":{postgres['port']}/", f":{free_port()}/")  # nothing listens there
        return out

    monkeypatch.setattr(service, "_responses", responses)
    params = {"kind": "totals", "epsilon": 0.3, "delta": DELTA, "mechanism": "gaussian"}
    with pytest.raises(service.RequestFailed) as err:
        service.run_request(store, who, "d", "release", params, "begin-1")
    assert err.value.status == 503 and err.value.detail == service.STATE_UNAVAILABLE
    assert "request_id" not in err.value.extra
    store._b.url = url
    assert store.counts() == {"requests": 0, "spends": 0}


def _release_call(server, key: str, idem: str, epsilon: float = 0.2):
    status, body, headers = call(f"{server.url}/v1/datasets/lsat6/release", "POST", key,
                                 {"kind": "totals", "epsilon": epsilon}, headers={"Idempotency-Key": idem})
    return status, body, {k.lower(): v for k, v in headers.items()}


def test_postgres_a_retry_after_the_connections_dropped_replays_the_stored_result(postgres):
    """The service's connections are ended (PostgreSQL up) after a debited request: a retry with its
    Idempotency-Key, on a stale connection, replays the stored result (200) and spends nothing."""
    url = _new_database(postgres, "stale")
    keys = setup_state(url, {"lsat6": (LSAT6, 5.0, DELTA, ["--weights-col", "frequency"])}, {"alice": ["lsat6=4"]})
    server = Server(url)
    try:
        first = _release_call(server, keys["alice"], "k-stale")
        assert first[0] == 200, first[1]
        for _ in range(3):
            assert _terminate(postgres, url) >= 1
            again = _release_call(server, keys["alice"], "k-stale")
            assert again[0] == 200, again[1]
            assert again[2].get("idempotent-replayed") == "true" and again[1] == first[1]
        _terminate(postgres, url)
        assert call(f"{server.url}/v1/spends", key=keys["alice"])[0] == 200
    finally:
        server.stop()
    assert counts(url) == {"requests": 1, "spends": 1}


UNAVAILABLE = "the service's state is unavailable; nothing was spent; retry later"


def _pg_up(pg: dict) -> bool:
    import psycopg

    try:
        psycopg.connect(pg["base"] + "/postgres", connect_timeout=5).close()
    except psycopg.OperationalError:
        return False
    return True


def test_postgres_down_answers_503_with_retry_after_and_the_client_retries_with_its_key(postgres):
    """PostgreSQL stopped: every request gets the one-line 503 "state unavailable ... nothing was
    spent" with Retry-After; the client retries it with the same Idempotency-Key, and once
    PostgreSQL is back (stale connections and all) it is answered, spent once."""
    import threading

    from privirt.client import Client

    url = _new_database(postgres, "down")
    keys = setup_state(url, {"lsat6": (LSAT6, 5.0, DELTA, ["--weights-col", "frequency"])}, {"alice": ["lsat6=4"]})
    server = Server(url)
    try:
        assert _release_call(server, keys["alice"], "k-up")[0] == 200  # the threads hold connections
        postgres["stop"]()
        restart = threading.Timer(1.0, postgres["start"])
        try:
            answers = [_release_call(server, keys["alice"], "k-down"),
                       call(f"{server.url}/v1/datasets", key=keys["alice"]),
                       call(f"{server.url}/v1/curator/spends", key=keys["curator"])]
            for status, body, headers in answers:
                assert status == 503 and body == {"detail": UNAVAILABLE}
                assert int({k.lower(): v for k, v in headers.items()}["retry-after"]) >= 1
            restart.start()
            Client(server.url, keys["alice"], retries=3).release("lsat6", kind="totals", epsilon=0.2,
                                                                idempotency_key="k-down")
        finally:
            restart.cancel()
            if restart.is_alive():
                restart.join()
            if not _pg_up(postgres):
                postgres["start"]()
        assert _release_call(server, keys["alice"], "k-down")[2].get("idempotent-replayed") == "true"
    finally:
        server.stop()
    assert counts(url) == {"requests": 2, "spends": 2}


def test_postgres_a_result_answered_with_200_survives_an_immediate_crash(postgres):
    """docs/serve.md: the result is stored, then returned.  PostgreSQL crashes (immediate stop: no
    WAL flush) right after the 200: once it is back, the request id still fetches that result."""
    url = _new_database(postgres, "crash")
    keys = setup_state(url, {"lsat6": (LSAT6, 5.0, DELTA, ["--weights-col", "frequency"])}, {"alice": ["lsat6=4"]})
    server = Server(url)
    try:
        status, body, _ = _release_call(server, keys["alice"], "k-crash")
        assert status == 200, body
        postgres["stop"]("immediate")
        postgres["start"]()
        fetched = call(f"{server.url}/v1/requests/{body['request_id']}", key=keys["alice"])
        assert fetched[:2] == (200, body)
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------
# PostgreSQL frozen (SIGSTOP: it answers nothing, as behind a network partition)
def _freeze(pg: dict) -> list:
    """Stop the postmaster and all its processes; returns them (for :func:`_resume`)."""
    import psutil

    main = psutil.Process(pg["pid"]())
    procs = [main, *main.children(recursive=True)]
    for p in procs:
        p.suspend()
    return procs


def _resume(procs: list) -> None:
    import psutil

    for p in procs:
        try:
            p.resume()
        except psutil.NoSuchProcess:
            pass


def _asgi_get(app, path: str, key: str) -> tuple[int, dict]:
    """``GET path`` through the ASGI app in process (no HTTP server)."""
    import asyncio
    import json

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode())],
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    async def run() -> None:
        await app(scope, receive, send)

    asyncio.run(run())
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


def test_postgres_frozen_answers_503_within_the_deadline_and_the_service_recovers(postgres, monkeypatch):
    """PostgreSQL stops answering (SIGSTOP of all its processes): a data set listing and a debit
    blocked on its row lock got no answer at all (and the debit was spent once PostgreSQL woke
    up).  With a 1 s deadline both answer the 503 "nothing was spent"; once PostgreSQL answers
    again, nothing was written and the same threads' next requests succeed on fresh connections."""
    pytest.importorskip("psutil")
    import privirt
    from privirt.serve import _deadline, service
    from privirt.serve._backends import _Postgres
    from privirt.serve.app import create_app
    from privirt.serve.store import init_store

    monkeypatch.setattr(_deadline, "STATE_DEADLINE", 1.0)
    monkeypatch.setitem(_deadline._CONNECT_DEFAULTS, "connect_timeout", "2")  # (a thread's first connection)
    store = init_store(_new_database(postgres, "frozen"))
    service.register_dataset(store, name="d", resp=privirt.as_responses(privirt.load_dataset("lsat6")),
                             epsilon=20.0, delta=DELTA, items=None, n_persons=None, missing="none", source="test")
    key = store.add_analyst("a", {"d": (20.0, DELTA)})
    who = store.authenticate(key, "analyst")
    app = create_app(store)
    params = {"kind": "totals", "epsilon": 0.3, "delta": DELTA, "mechanism": "gaussian"}
    one = ThreadPoolExecutor(max_workers=1)  # the debits' thread: its connection is reused
    other = ThreadPoolExecutor(max_workers=1)  # (not `with`: its exit would wait for a hung thread)
    procs: list = []
    real_lock = _Postgres.lock

    def lock(self, con, table, row_id):  # PostgreSQL stops inside the debit's transaction
        if table == "datasets" and freeze_in_debit:
            procs.extend(_freeze(postgres))
        real_lock(self, con, table, row_id)

    def listing() -> list:  # one event loop: its worker threads keep their connections
        out = [_asgi_get(app, "/v1/datasets", key)]
        procs.extend(_freeze(postgres))
        out.append(_asgi_get(app, "/v1/datasets", key))
        return out

    def debit(idem: str):
        try:
            return service.run_request(store, who, "d", "release", params, idem)
        except service.RequestFailed as exc:
            return exc

    freeze_in_debit = False
    monkeypatch.setattr(_Postgres, "lock", lock)
    try:
        assert not isinstance(one.submit(debit, "k0").result(30), Exception)
        before, frozen = other.submit(listing).result(30)  # (a hang fails here, it does not wait)
        assert before[0] == 200 and [d["name"] for d in before[1]] == ["d"]
        assert frozen == (503, {"detail": service.STATE_UNAVAILABLE})
        _resume(procs)
        freeze_in_debit = True
        failed = one.submit(debit, "k1").result(30)
        assert isinstance(failed, service.RequestFailed), failed
        assert failed.status == 503 and failed.detail == service.STATE_UNAVAILABLE
        assert "request_id" not in failed.extra
    finally:
        _resume(procs)
        freeze_in_debit = False
    try:
        assert store.counts() == {"requests": 1, "spends": 1}  # the first debit only
        body, replayed = one.submit(debit, "k1").result(30)  # the same thread, a fresh connection
        assert not replayed and body["request_id"]
        assert store.counts() == {"requests": 2, "spends": 2}
        assert other.submit(_asgi_get, app, "/v1/datasets", key).result(30)[0] == 200
    finally:
        one.shutdown(wait=False)
        other.shutdown(wait=False)
