"""``privirt serve``: the stored copy's encoding, the δ limits, the page's plot, the CLI's checks
of its options and the order of the request checks (no service process needed)."""

from __future__ import annotations

import hashlib
import io
import sqlite3

import numpy as np
import pytest

pytest.importorskip("fastapi")

from ._serve import LSAT6, cli, setup_state  # noqa: E402


def test_the_stored_copy_has_a_size_that_depends_only_on_the_shape():
    from privirt.serve.store import decode_codes, encode_codes

    rng = np.random.default_rng(14_600_001)
    zeros = np.zeros((3000, 40), np.int8)
    noisy = rng.integers(-1, 2, (3000, 40)).astype(np.int8)
    assert len(encode_codes(zeros)) == len(encode_codes(noisy))
    np.testing.assert_array_equal(decode_codes(encode_codes(noisy)), noisy)
    assert decode_codes(encode_codes(noisy)).dtype == np.int8


def test_a_state_written_with_a_compressed_blob_still_decodes(tmp_path):
    from privirt.serve.store import open_store

    state = str(tmp_path / "s.db")
    setup_state(state, {"lsat6": (LSAT6, 1.0, 1e-6, ["--weights-col", "frequency"])}, {})
    store = open_store(state)
    ds = store.datasets()[0]
    con = sqlite3.connect(state)
    did, blob = con.execute("SELECT id, data FROM datasets").fetchone()
    codes = np.load(io.BytesIO(blob), allow_pickle=False)
    old = io.BytesIO()
    np.savez_compressed(old, codes=codes)  # how states were written before
    old = old.getvalue()
    with con:
        con.execute("UPDATE datasets SET data = ?, sha256 = ? WHERE id = ?",
                    (old, hashlib.sha256(old).hexdigest(), did))
    con.close()
    np.testing.assert_array_equal(open_store(state).load_codes(did, hashlib.sha256(old).hexdigest()), codes)
    assert ds["n_persons"] == codes.shape[0]


def test_a_compressed_blob_is_decoded_when_the_service_starts_not_within_a_request(tmp_path):
    """Its decode time depends on the data, so it is kept out of every answer's time."""
    from privirt.serve import create_app, service

    state = str(tmp_path / "s.db")
    setup_state(state, {"lsat6": (LSAT6, 1.0, 1e-6, ["--weights-col", "frequency"])}, {})
    con = sqlite3.connect(state)
    did, blob = con.execute("SELECT id, data FROM datasets").fetchone()
    old = io.BytesIO()
    np.savez_compressed(old, codes=np.load(io.BytesIO(blob), allow_pickle=False))
    old = old.getvalue()
    with con:
        con.execute("UPDATE datasets SET data = ?, sha256 = ? WHERE id = ?",
                    (old, hashlib.sha256(old).hexdigest(), did))
    con.close()
    app = create_app(state)
    assert (app.state.store.describe, did, hashlib.sha256(old).hexdigest()) in service._cache


def _one_line_error(proc):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("privirt: error:"), proc.stderr
    return lines[0]


def test_a_data_set_or_allowance_delta_outside_the_request_limit_is_refused(tmp_path):
    state = str(tmp_path / "s.db")
    setup_state(state, {"lsat6": (LSAT6, 1.0, 1e-6, ["--weights-col", "frequency"])}, {})
    from privirt.serve.store import open_store

    for flag, args in (("--delta", ("dataset", "add", state, "x", LSAT6, "--epsilon", "1", "--delta", "0.5",
                                    "--weights-col", "frequency")),
                       ("--delta", ("dataset", "add", state, "x", LSAT6, "--epsilon", "1", "--delta", "1e-20",
                                    "--weights-col", "frequency")),
                       ("--allowance", ("analyst", "add", state, "a", "--allowance", "lsat6=1,0.5"))):
        assert flag in _one_line_error(cli("serve", *args, check=False))
    store = open_store(state)
    assert store.dataset_names() == ["lsat6"] and store.analysts() == []
    with pytest.raises(ValueError, match="allowance's delta"):
        store.add_analyst("a", {"lsat6": (1.0, 0.5)})


def test_a_defaulted_delta_outside_the_limit_is_422_and_spends_nothing(tmp_path):
    from privirt.serve.models import ReleaseRequest
    from privirt.serve.service import RequestFailed, run_request
    from privirt.serve.store import Principal, open_store

    state = str(tmp_path / "s.db")
    setup_state(state, {"lsat6": (LSAT6, 1.0, 1e-6, ["--weights-col", "frequency"])}, {"carol": ["lsat6=2"]})
    con = sqlite3.connect(state)  # a state made before the limit held: δ = 0.5
    with con:
        con.execute("UPDATE datasets SET delta = 0.5")
        con.execute("UPDATE allowances SET delta = 0.5")
    con.close()
    store = open_store(state)
    # an allowance whose δ defaults to such a data set's δ is refused at creation too
    assert "defaulted" in _one_line_error(cli("serve", "analyst", "add", state, "dave", "--allowance", "lsat6=1",
                                              check=False))
    n0 = store.counts()
    carol = Principal("analyst", 1, "carol")
    with pytest.raises(RequestFailed) as err:
        run_request(store, carol, "lsat6", "release", ReleaseRequest(epsilon=1.0).model_dump(), None)
    assert err.value.status == 422 and err.value.detail.startswith("delta:")
    assert store.counts() == n0
    body, _ = run_request(store, carol, "lsat6", "release", ReleaseRequest(epsilon=1.0, delta=1e-6).model_dump(),
                          None)
    assert body["params"]["delta"] == 1e-6


def test_dataset_add_reads_a_long_table_with_named_item_and_response_columns(tmp_path):
    from privirt.serve.store import open_store

    table = tmp_path / "long.csv"
    table.write_text("id,question,answer\np1,a,1\np1,b,0\np2,a,0\np2,b,1\np3,a,1\n")
    state = str(tmp_path / "s.db")
    cli("serve", "init", state)
    proc = cli("serve", "dataset", "add", state, "lg", table, "--epsilon", "1", "--delta", "1e-6", "--missing",
               "mcar", "--person-col", "id", "--item-col", "question", "--response-col", "answer",
               "--items", "a,b", "--n-persons", "3")
    assert "3 persons × 2 items" in proc.stdout
    store = open_store(state)
    ds = store.datasets()[0]
    codes = store.load_codes(1, ds["sha256"])
    assert ds["items"] == ["a", "b"] and codes.shape == (3, 2) and int((codes == 1).sum()) == 3


@pytest.fixture
def state_without_uvicorn(tmp_path, monkeypatch) -> str:
    """A new service state, with uvicorn.run failing the test if a check lets it start."""
    import uvicorn

    def never(*a, **k):
        raise AssertionError("uvicorn started")

    monkeypatch.setattr(uvicorn, "run", never)
    state = str(tmp_path / "s.db")
    cli("serve", "init", state)
    return state


def test_serve_run_checks_the_port_and_the_tls_files_before_uvicorn(tmp_path, state_without_uvicorn):
    state = state_without_uvicorn
    pem = tmp_path / "cert.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\n")
    missing = str(tmp_path / "nokey.pem")
    cases = [
        (("--port", "70000"), "--port must be 1-65535"),
        (("--ssl-keyfile", missing, "--ssl-certfile", str(pem)), f"--ssl-keyfile {missing}: no such file"),
        (("--ssl-keyfile", str(pem), "--ssl-certfile", missing), f"--ssl-certfile {missing}: no such file"),
        (("--ssl-keyfile", str(tmp_path), "--ssl-certfile", str(pem)), "--ssl-keyfile"),
        (("--ssl-keyfile", str(pem)), "both --ssl-keyfile and --ssl-certfile"),
        # files that exist but are not a PEM pair ('[SSL] PEM lib (_ssl.c:3905)', naming nothing)
        (("--ssl-keyfile", str(pem), "--ssl-certfile", str(pem)), "are not a PEM certificate and its private key"),
    ]
    for extra, text in cases:
        line = _one_line_error(cli("serve", "run", state, *extra, check=False))
        assert text in line, (extra, line)


def test_serve_run_refuses_more_workers_than_the_machine_can_hold_before_uvicorn(state_without_uvicorn):
    # --workers 100000 started processes until the machine ran out of memory, and SIGTERM did not end it
    from privirt.cli.serve import max_workers

    limit = max_workers()
    assert limit >= 8
    line = _one_line_error(cli("serve", "run", state_without_uvicorn, "--workers", str(limit + 1), check=False))
    assert f"--workers must be at most {limit}" in line and f"got {limit + 1}" in line


def test_serve_run_lets_go_of_its_own_store_before_uvicorn_starts(tmp_path, monkeypatch):
    # the parent kept the store it checked the state with, and so (on PostgreSQL) a connection,
    # for the server's whole life
    import gc
    import weakref

    import uvicorn

    from privirt.serve import store as store_module

    state = str(tmp_path / "s.db")
    cli("serve", "init", state)
    opened = []
    real_open = store_module.open_store

    def recording_open(*args, **kwargs):
        store = real_open(*args, **kwargs)
        opened.append(weakref.ref(store))
        return store

    def run(*args, **kwargs):
        gc.collect()
        alive.extend(ref for ref in opened if ref() is not None)

    alive: list = []
    monkeypatch.setattr(store_module, "open_store", recording_open)
    monkeypatch.setattr(uvicorn, "run", run)
    from ._serve import free_port

    proc = cli("serve", "run", state, "--port", str(free_port()), check=False)
    assert proc.returncode == 0, proc.stderr
    assert opened and not alive


def test_the_readable_state_warning_quotes_the_path_in_its_command(tmp_path):
    # "run: chmod 600 my state.db" changed two other files
    import os
    import shlex

    from privirt.serve._modes import readable_by_others

    path = tmp_path / "my state.db"
    path.write_bytes(b"")
    os.chmod(path, 0o644)
    warning = readable_by_others(path, str(path))
    command = warning.split(" — run: ")[1]
    assert shlex.split(command) == ["chmod", "600", str(path)]


def test_serve_run_names_an_encrypted_tls_key_without_asking_for_its_passphrase(tmp_path, state_without_uvicorn):
    # OpenSSL asked "Enter PEM pass phrase:" on the terminal (twice), and without one the message
    # said the valid pair was "not a PEM certificate and its private key"
    import shutil
    import subprocess
    import sys

    from ._serve import env

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make an encrypted key")
    key, cert = tmp_path / "enc.pem", tmp_path / "cert.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-keyout", str(key), "-out", str(cert),
                           "-days", "2", "-subj", "/CN=localhost", "-passout", "pass:abcd"], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"openssl could not make an encrypted key: {made.stderr.decode()[-200:]}")
    # a subprocess with no terminal (OpenSSL prompts on one), as under a service manager
    proc = subprocess.run([sys.executable, "-m", "privirt", "serve", "run", state_without_uvicorn, "--ssl-keyfile",
                           str(key), "--ssl-certfile", str(cert)], capture_output=True, text=True, env=env(),
                          stdin=subprocess.DEVNULL, start_new_session=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "" and "pass phrase" not in proc.stderr
    line = _one_line_error(proc)
    assert f"--ssl-keyfile {key} is encrypted with a passphrase" in line and "openssl pkey" in line


def test_serve_run_checks_that_it_can_listen_on_the_host_and_port_before_uvicorn(state_without_uvicorn):
    # uvicorn printed a TLS warning and six log lines, exit 3, for a host it could not bind
    import socket

    state = state_without_uvicorn
    before = hashlib.sha256(open(state, "rb").read()).hexdigest()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cases = [
            (("--host", "256.1.1.1"), "--host 256.1.1.1: not an address or host name this machine can resolve"),
            (("--host", "nosuchhost.invalid"), "--host nosuchhost.invalid: not an address"),
            (("--host", "192.0.2.1"), "--host 192.0.2.1: cannot listen on 192.0.2.1"),  # TEST-NET-1
            (("--port", str(port)), f"--port {port}: already in use on 127.0.0.1"),
            (("--port", str(port), "--workers", "2"), f"--port {port}: already in use"),
        ]
        for extra, text in cases:
            proc = cli("serve", "run", state, *extra, check=False)
            line = _one_line_error(proc)
            assert proc.returncode == 2 and proc.stdout == "" and text in line, (extra, line)
    assert hashlib.sha256(open(state, "rb").read()).hexdigest() == before


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf", "601", ""])
def test_serve_run_refuses_a_bad_state_deadline_in_one_line_before_uvicorn(state_without_uvicorn, value):
    # the PostgreSQL state's 30 s transaction deadline had no option
    from pathlib import Path

    before = hashlib.sha256(Path(state_without_uvicorn).read_bytes()).hexdigest()
    proc = cli("serve", "run", state_without_uvicorn, "--state-deadline", value, check=False)
    line = _one_line_error(proc)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert "--state-deadline" in line and "at most 600" in line and "default, 30 s" in line, line
    assert hashlib.sha256(Path(state_without_uvicorn).read_bytes()).hexdigest() == before


def test_serve_run_refuses_a_state_deadline_for_a_sqlite_state_in_one_line(state_without_uvicorn):
    # its --help says the deadline is for a postgresql:// state only: a SQLite state does not take it
    proc = cli("serve", "run", state_without_uvicorn, "--state-deadline", "5", check=False)
    line = _one_line_error(proc)
    assert proc.returncode == 2 and "postgresql:// state only" in line and "leave it out" in line, line
    assert "postgresql:// state only" in " ".join(cli("serve", "run", "--help").stdout.split())
    with pytest.raises(ValueError, match="postgresql:// state only"):
        from privirt.serve import create_app

        create_app(state_without_uvicorn, state_deadline=5)


def test_a_postgres_backend_gives_each_transaction_its_own_deadline(monkeypatch):
    """No server needed: the deadline each transaction starts is the backend's (set by
    ``--state-deadline``), else the module's default."""
    pytest.importorskip("psycopg")
    import psycopg

    from privirt.serve import _backends, _deadline
    from privirt.serve.store import Store

    started = []

    class Recorded:
        passed = False

        def __init__(self, seconds):
            started.append(seconds)

        def cancel(self):
            pass

    def begin(self, stack):
        raise psycopg.OperationalError("no server here")

    monkeypatch.setattr(_backends, "_Deadline", Recorded)
    monkeypatch.setattr(_backends._Postgres, "_begin", begin)
    backend = _backends._Postgres("postgresql://u@127.0.0.1:1/x")
    for _ in range(2):
        with pytest.raises(psycopg.OperationalError), backend.read():
            pass
        Store(backend).set_deadline(_deadline.check_state_deadline("2.5"))
    assert started == [_deadline.STATE_DEADLINE, 2.5]


def test_a_password_in_the_urls_query_string_is_not_printed():
    from privirt.serve._backends import _redact

    assert _redact("postgresql://u@h:5432/db?sslmode=require&password=s3cret") == \
        "postgresql://u@h:5432/db?sslmode=require&password=***"
    assert _redact("postgresql://u:s3cret@h/db?password=s3cret") == "postgresql://u:***@h/db?password=***"
    assert _redact("postgresql://u@h/db?sslmode=require") == "postgresql://u@h/db?sslmode=require"
    # the rest of the URL exactly as given (an empty host kept its //, the query its quoting)
    assert _redact("postgresql:///mydb?host=/run/sock&password=s3cret") == \
        "postgresql:///mydb?host=/run/sock&password=***"
    assert _redact("postgresql://h/db?pass%77ord=s3cret&a=b%20c") == "postgresql://h/db?pass%77ord=***&a=b%20c"
    pytest.importorskip("psycopg")
    url = "postgresql://nobody@127.0.0.1:1/x?password=s3cret"  # nothing listens on port 1
    for args in (("serve", "init", url), ("serve", "list", url)):
        line = _one_line_error(cli(*args, check=False))
        assert "s3cret" not in line and "password=***" in line, line


@pytest.mark.parametrize("argv", [
    ("list", "{s}"), ("init", "{s}"), ("limits", "{s}", "--max-releases", "5"), ("curator-key", "{s}"),
    ("analyst", "revoke", "{s}", "bob"), ("backup", "{s}", "copy.db"), ("run", "{s}"),
    ("dataset", "add", "{s}", "d", "x.csv", "--epsilon", "1", "--delta", "1e-6"),
])
def test_a_conninfo_string_is_refused_in_one_line_without_its_password(argv, tmp_path, monkeypatch):
    # "host=... password=..." was taken for a SQLite path and echoed, password and all
    monkeypatch.chdir(tmp_path)
    state = "host=127.0.0.1 port=1 password=WRONGPW"
    line = _one_line_error(cli("serve", *(a.format(s=state) for a in argv), check=False))
    assert "looks like a PostgreSQL conninfo string" in line and "postgresql://" in line, line
    assert "WRONGPW" not in line and "password=*** hidden" in line, line
    assert list(tmp_path.iterdir()) == []
    line = _one_line_error(cli("serve", "list", "dbname=st user=u", check=False))
    assert "looks like a PostgreSQL conninfo string" in line and "hidden" not in line, line


def test_a_state_in_a_read_only_folder_says_so_and_what_to_do(tmp_path, monkeypatch):
    # SQLite cannot open a WAL state whose folder is read-only (no -shm beside it): it said only
    # "unable to open database file".  Root writes anywhere, so the read-only file system is
    # modelled where it acts: the folder is not writable, and SQLite's open fails as it then does
    import os
    import sqlite3 as sqlite

    (tmp_path / "ro").mkdir()
    state = tmp_path / "ro" / "s.db"
    cli("serve", "init", state)
    connect, access = sqlite.connect, os.access

    def cannot_open(path, *args, **kwargs):
        inside = str(path).startswith(str(state.parent) + os.sep)
        return connect(str(tmp_path / "nowhere" / "s.db") if inside else path, *args, **kwargs)

    monkeypatch.setattr(sqlite, "connect", cannot_open)
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(state.parent) and
                        mode == os.W_OK else access(p, mode, **kw))
    for argv in (("list", state), ("curator-key", state), ("analyst", "revoke", state, "bob")):
        line = _one_line_error(cli("serve", *argv, check=False))
        assert f"cannot be opened: its folder {state.parent} is read-only" in line, line
        assert "s.db-shm" in line and "copy the state to a writable folder" in line, line
    new = state.parent / "new.db"  # no state to copy yet: `init` is told to make it elsewhere
    line = _one_line_error(cli("serve", "init", new, check=False))
    assert "its folder" in line and "create the state in a writable folder" in line and not new.exists(), line
    monkeypatch.setattr(os, "access", access)  # a writable folder: not this message
    assert "read-only" not in _one_line_error(cli("serve", "list", state, check=False))


def test_a_backup_to_a_read_only_file_system_says_so_in_one_line(tmp_path, monkeypatch):
    # it printed "[Errno 30] Read-only file system: '...'" (removing the copy SQLite could not
    # create raised).  A read-only file system is modelled where it acts: creating, opening and
    # removing the copy each fail as there
    import errno
    import os
    import pathlib
    import sqlite3 as sqlite

    state, copy = tmp_path / "s.db", tmp_path / "bk.db"
    cli("serve", "init", state)
    real_open, connect, unlink = os.open, sqlite.connect, pathlib.Path.unlink

    def read_only(path) -> None:
        if str(path) == str(copy):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def os_open(path, *args, **kwargs):
        read_only(path)
        return real_open(path, *args, **kwargs)

    def sqlite_connect(path, *args, **kwargs):
        return connect(str(tmp_path / "nowhere" / "x.db") if str(path) == str(copy) else path, *args, **kwargs)

    def path_unlink(self, *args, **kwargs):
        read_only(self)
        return unlink(self, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(sqlite, "connect", sqlite_connect)
    monkeypatch.setattr(pathlib.Path, "unlink", path_unlink)
    line = _one_line_error(cli("serve", "backup", state, copy, check=False))
    assert line == f"privirt: error: cannot create {copy} ({os.strerror(errno.EROFS)}); nothing was written", line
    assert not copy.exists()


def test_an_mcar_data_set_of_more_items_than_the_totals_release_holds_is_served_without_it(tmp_path):
    # dataset add ran the totals dry run, which refuses m > MCAR_MAX_ITEMS: such a test could not
    # be added at all (and the refusal named --method, which dataset add does not have)
    import pandas as pd

    from privirt.private.totals.marginal_missing import MCAR_MAX_ITEMS
    from privirt.serve.models import EstimateRequest, ReleaseRequest
    from privirt.serve.service import RequestFailed, run_request
    from privirt.serve.store import Principal, open_store

    m = MCAR_MAX_ITEMS + 1
    rng = np.random.default_rng(310_090)
    X = (rng.random((60, m)) < 0.5).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    path = tmp_path / "long_test.csv"
    pd.DataFrame(X, columns=[f"q{k}" for k in range(m)]).to_csv(path, index=False)
    state = str(tmp_path / "s.db")
    keys = setup_state(state, {"wide": (path, 10.0, 1e-6, ["--missing", "mcar"])}, {"carol": ["wide=5"]})
    store = open_store(state)
    carol = Principal("analyst", 1, "carol")
    n0 = store.counts()
    for model in (EstimateRequest(epsilon=1.0, method="totals"), ReleaseRequest(epsilon=1.0, kind="totals")):
        endpoint = "estimate" if isinstance(model, EstimateRequest) else "release"
        with pytest.raises(RequestFailed) as err:
            run_request(store, carol, "wide", endpoint, model.model_dump(), None)
        assert err.value.status == 422 and f"built for up to {MCAR_MAX_ITEMS} items" in err.value.detail
        # (in the service's words: an analyst has no privirt.private_spectral_estimate to call)
        other = '"method": "spectral"' if endpoint == "estimate" else '"kind": "counts"'
        assert f"ask for {other}" in err.value.detail and "privirt." not in err.value.detail
    # the same answers from a running service over loopback (the default method is totals)
    from ._serve import Server, call

    server = Server(state)
    try:
        for endpoint, body, other in (("estimate", {"epsilon": 1.0}, '"method": "spectral"'),
                                      ("release", {"epsilon": 1.0}, '"kind": "counts"')):
            st, answer, _ = call(f"{server.url}/v1/datasets/wide/{endpoint}", "POST", keys["carol"], body)
            assert st == 422 and f"ask for {other}" in answer["detail"], (st, answer)
            assert "nothing was spent" in answer["detail"] and "privirt." not in answer["detail"]
    finally:
        server.stop()
    assert store.counts() == n0
    body, _ = run_request(store, carol, "wide", "release", ReleaseRequest(epsilon=1.0, kind="counts").model_dump(),
                          None)
    assert body["params"]["kind"] == "counts"


def test_the_states_limit_of_releases_per_allowance_is_enforced_in_the_debit(tmp_path):
    # an analyst could store ~10⁹ releases at the smallest ε (ρ = ε²/2 composes slowly): storage
    from privirt.serve._limits import DEFAULT_MAX_RELEASES
    from privirt.serve.models import ReleaseRequest
    from privirt.serve.service import RequestFailed, run_request
    from privirt.serve.store import Principal, open_store

    state = str(tmp_path / "s.db")
    assert "--max-releases: expected a positive integer" in _one_line_error(
        cli("serve", "init", state, "--max-releases", "0", check=False))
    setup_state(state, {"lsat6": (LSAT6, 5.0, 1e-6, ["--weights-col", "frequency"])}, {"carol": ["lsat6=5"]})
    store = open_store(state)
    assert store.max_releases() == DEFAULT_MAX_RELEASES  # a state without the key: the default
    cli("serve", "limits", state, "--max-releases", "2")
    assert store.max_releases() == 2
    carol = Principal("analyst", 1, "carol")
    request = ReleaseRequest(epsilon=0.01).model_dump()
    for _ in range(2):
        run_request(store, carol, "lsat6", "release", request, None)
    n0 = store.counts()
    with pytest.raises(RequestFailed) as err:
        run_request(store, carol, "lsat6", "release", request, None)
    assert err.value.status == 403 and "release limit reached: this service allows 2 releases" in err.value.detail
    assert store.counts() == n0  # nothing spent or stored
    # the debit itself enforces it (the advisory pre-check aside)
    from privirt.private.accounting import PrivacyCost
    from privirt.serve.store import OverQuota

    with pytest.raises(OverQuota):
        store.debit(analyst_id=1, dataset_id=1, cost=PrivacyCost(rho=1e-6), mechanism="x", endpoint="release",
                    params={}, idem_key=None)
    cli("serve", "limits", state, "--max-releases", "3")
    run_request(store, carol, "lsat6", "release", request, None)
    assert "at most 3 releases per analyst and data set" in cli("serve", "list", state).stdout


def test_the_services_remaining_epsilon_is_a_pure_request_that_fits_as_the_ledgers_is(tmp_path):
    # it was ε_budget − ε_spent: 100 pure spends of 0.01 against (1, 1e-5) said 0.62, and a pure
    # request of 0.62 (or 0.5, or 0.3) was refused; 0.23 fits
    from privirt.private.accounting import PrivacyCost
    from privirt.private.ledger import Ledger
    from privirt.serve.store import OverBudget, init_store

    store = init_store(str(tmp_path / "s.db"))
    import privirt
    from privirt.serve import service

    service.register_dataset(store, name="d", resp=privirt.as_responses(privirt.load_dataset("lsat6")),
                             epsilon=1.0, delta=1e-5, items=None, n_persons=None, missing="none", source="t")
    who = store.authenticate(store.add_analyst("a", {"d": (1.0, 1e-5)}), "analyst")
    ledger = Ledger(tmp_path / "l.db", epsilon=1.0, delta=1e-5)
    for _ in range(100):
        store.debit(analyst_id=who.id, dataset_id=1, cost=PrivacyCost(epsilon=0.01), mechanism="m",
                    endpoint="release", params={}, idem_key=None)
        ledger.spend(PrivacyCost(epsilon=0.01), mechanism="m")
    mine = store.datasets_for(who.id)[0]["allowance"]
    assert mine["remaining_epsilon"] == pytest.approx(ledger.remaining_epsilon(), rel=1e-12)
    assert mine["remaining_epsilon"] < 0.3
    store.debit(analyst_id=who.id, dataset_id=1, cost=PrivacyCost(epsilon=mine["remaining_epsilon"]),
                mechanism="m", endpoint="release", params={}, idem_key=None)  # fits
    with pytest.raises(OverBudget):
        store.debit(analyst_id=who.id, dataset_id=1, cost=PrivacyCost(epsilon=1e-3), mechanism="m",
                    endpoint="release", params={}, idem_key=None)


def test_the_release_limit_and_the_remaining_epsilon_over_loopback(tmp_path):
    """Through a real `privirt serve run` on 127.0.0.1: releases up to the state's limit, then a
    403 with nothing spent; the remaining ε an analyst is shown is a request that is accepted."""
    from ._serve import Server, call

    state = str(tmp_path / "s.db")
    keys = setup_state(state, {"lsat6": (LSAT6, 5.0, 1e-6, ["--weights-col", "frequency"])}, {"carol": ["lsat6=1"]})
    cli("serve", "limits", state, "--max-releases", "3")
    server = Server(state)
    try:
        url, key = f"{server.url}/v1/datasets", keys["carol"]
        for _ in range(2):  # pure-ε releases (Laplace counts): the remaining ε is then ε − Σ composed
            st, _, _ = call(f"{url}/lsat6/release", "POST", key, {"kind": "counts", "mechanism": "laplace",
                                                                   "epsilon": 0.3})
            assert st == 200
        st, body, _ = call(url, key=key)
        left = body[0]["allowance"]["remaining_epsilon"]
        assert st == 200 and 0.39 < left <= 0.4 + 1e-9  # (each release costs at most its 0.3)
        st, _, _ = call(f"{url}/lsat6/release", "POST", key, {"kind": "counts", "mechanism": "laplace",
                                                               "epsilon": left})
        assert st == 200  # the stated remaining fits
        st, body, _ = call(f"{url}/lsat6/release", "POST", key, {"kind": "counts", "mechanism": "laplace",
                                                                 "epsilon": 1e-4})
        assert st == 403 and "release limit reached: this service allows 3 releases" in body["detail"]
    finally:
        server.stop()
    from privirt.serve.store import open_store

    assert open_store(state).counts()["spends"] == 3


def test_a_damaged_data_set_stops_serve_run_in_one_line(tmp_path):
    """A stored copy that no longer matches its hash was a traceback from every worker."""
    from privirt.serve import create_app

    state = str(tmp_path / "s.db")
    setup_state(state, {"lsat6": (LSAT6, 1.0, 1e-6, ["--weights-col", "frequency"])}, {})
    con = sqlite3.connect(state)
    did, blob = con.execute("SELECT id, data FROM datasets").fetchone()
    damaged = bytearray(blob)
    damaged[-1] ^= 1
    with con:
        con.execute("UPDATE datasets SET data = ? WHERE id = ?", (bytes(damaged), did))
    con.close()
    proc = cli("serve", "run", state, "--port", "8765", "--workers", "2", check=False, subprocess_=True)
    line = _one_line_error(proc)
    assert "'lsat6'" in line and "does not match its hash" in line and "backup" in line
    with pytest.raises(ValueError, match="'lsat6'"):
        create_app(state)


def test_state_messages_name_the_path_as_given_not_as_resolved(tmp_path, monkeypatch, capsys):
    # `privirt serve init st.db` twice printed the resolved absolute path ("<abs>/st.db already exists"), and the
    # backend's SQLite errors named the resolved path too, though its docstring says as given
    import sqlite3

    from privirt.cli import main
    from privirt.serve._backends import StateError, _backend
    from privirt.serve.store import init_store

    monkeypatch.chdir(tmp_path)
    assert main(["serve", "init", "st.db"]) == 0
    capsys.readouterr()
    assert main(["serve", "init", "st.db"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("privirt: error: st.db already exists;") and str(tmp_path) not in err
    with pytest.raises(StateError, match="^folder nofolder does not exist; create it first$"):
        init_store("nofolder/st.db")
    sqlite3.connect("other.db").close()
    b = _backend("other.db")
    with pytest.raises(StateError, match=r"^other\.db is not a privirt serve state; create one with "
                                         r"`privirt serve init other\.db`$"):
        with b.read() as con:
            con.execute("SELECT * FROM meta")
    b.close()


def test_a_state_folder_is_checked_as_given_not_as_resolved_by_text(tmp_path, monkeypatch):
    # `privirt serve init nosuchdir/../st.db` created ./st.db (realpath collapses the "..")
    from privirt.serve._backends import StateError
    from privirt.serve.store import init_store

    monkeypatch.chdir(tmp_path)
    with pytest.raises(StateError, match=r"^folder nosuchdir/\.\. does not exist; create it first$"):
        init_store("nosuchdir/../st.db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, asks", [
    (("dataset", "add", "{state}", "x", LSAT6, "--epsilon", "0", "--delta", "1e-6", "--weights-col", "frequency"),
     "--epsilon must be a finite number > 0, got 0.0; give the data set's total budget ε (> 0)"),
    (("dataset", "add", "{state}", "x", LSAT6, "--epsilon", "nan", "--delta", "1e-6"),
     "--epsilon must be a finite number > 0, got nan; give the data set's total budget ε (> 0)"),
    (("analyst", "add", "{state}", "a", "--allowance", "lsat6=0"),
     "the allowance's epsilon must be a finite number > 0, got 0.0; give the ε the analyst may spend on 'lsat6'"),
    (("analyst", "add", "{state}", "a", "--allowance", "lsat6=-1,1e-7"),
     "the allowance's epsilon must be a finite number > 0, got -1.0; give the ε the analyst may spend on"),
])
def test_a_budget_or_allowance_epsilon_of_zero_asks_for_one_and_not_to_leave_it_out(tmp_path, args, asks):
    # `privirt estimate`'s advice ("for the non-private estimate leave out --epsilon") cannot be
    # followed here: --epsilon is required, and `analyst add` has no such flag
    state = str(tmp_path / "s.db")
    setup_state(state, {"lsat6": (LSAT6, 1.0, 1e-6, ["--weights-col", "frequency"])}, {})
    proc = cli("serve", *[state if a == "{state}" else a for a in args], check=False)
    line = _one_line_error(proc)
    assert proc.returncode == 2 and asks in line
    assert "leave out" not in line and "non-private" not in line and "spectral_estimate" not in line
    from privirt.serve.store import open_store

    store = open_store(state)
    assert store.dataset_names() == ["lsat6"] and store.analysts() == []


def test_the_cli_keeps_the_library_advice_only_where_leaving_out_epsilon_is_a_path():
    from privirt.cli._words import cli_message

    exc = ValueError("epsilon must be a finite number > 0, got 0; privirt has no non-private path through its "
                     "private functions (use spectral_estimate instead)")
    assert cli_message(exc, non_private=True) == \
        "--epsilon must be a finite number > 0, got 0; for the non-private estimate leave out --epsilon"
    assert cli_message(exc, non_private=False) == "--epsilon must be a finite number > 0, got 0"


def test_a_state_whose_schema_text_is_not_utf8_is_one_line(tmp_path):
    """One byte of the stored schema text made invalid UTF-8: Python's sqlite3 cannot decode SQLite's
    "malformed database schema" message quoting it, and every command printed the raw
    UnicodeDecodeError ("'utf-8' codec can't decode byte 0xff ...") as its line."""
    from privirt.serve._backends import StateError
    from privirt.serve.store import open_store

    state = tmp_path / "s.db"
    cli("serve", "init", state)
    raw = bytearray(state.read_bytes())
    at = raw.find(b"CREATE TABLE meta")
    assert at >= 0
    raw[at + 7] = 0xFF
    state.write_bytes(bytes(raw))
    for args in (("list", state), ("curator-key", state), ("backup", state, tmp_path / "copy.db")):
        line = _one_line_error(cli("serve", *args, check=False))
        assert f"{state} is damaged or is not a privirt serve state" in line and "backup copy" in line, line
    with pytest.raises(StateError, match="malformed database schema"):
        open_store(state)
    assert state.read_bytes() == bytes(raw) and sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]
