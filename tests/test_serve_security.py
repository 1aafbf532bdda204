"""``privirt serve``: the per-analyst cap on requests in flight (429), HSTS over TLS (uvicorn's
own certificate, or a declared TLS proxy), the library's warnings under concurrent requests, and
a debit whose commit is not confirmed (the answer says whether the budget may be spent), and a key
revoked while its request runs."""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
import ssl
import subprocess
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ._serve import LSAT6, Server, asgi_call, call, counts, env, setup_state  # noqa: E402

ONE_LINE = "\n"


def _lower(headers: dict) -> dict:
    return {k.lower(): v for k, v in headers.items()}


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """A service that declares a TLS-terminating proxy in front (--tls-proxy), cap 2 in flight."""
    d = tmp_path_factory.mktemp("sec")
    state = str(d / "state.db")
    keys = setup_state(state, {"lsat6": (LSAT6, 50.0, 1e-6, ["--weights-col", "frequency"])},
                       {"alice": ["lsat6=10"], "bob": ["lsat6=10"]})
    server = Server(state, extra=("--tls-proxy", "--max-in-flight", "2"))
    yield {"url": server.url, "state": state, "keys": keys}
    server.stop()


def test_an_analyst_has_at_most_k_requests_in_flight(proxied):
    s = proxied
    n0 = counts(s["state"])["spends"]
    slow = {"method": "totals", "epsilon": 0.1, "n_boot": 1000}
    gate = threading.Barrier(3)

    def alice(_):
        gate.wait()
        return call(f"{s['url']}/v1/datasets/lsat6/estimate", "POST", s["keys"]["alice"], slow, timeout=300)

    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(alice, i) for i in range(3)]
        # while alice's two run, bob is served
        st_b, _, _ = call(f"{s['url']}/v1/datasets/lsat6/release", "POST", s["keys"]["bob"],
                          {"kind": "totals", "epsilon": 0.1})
        results = [f.result() for f in futures]
    assert st_b == 200
    statuses = sorted(st for st, _, _ in results)
    assert statuses == [200, 200, 429], statuses
    (refused,) = [(b, h) for st, b, h in results if st == 429]
    body, headers = refused
    assert ONE_LINE not in body["detail"] and "nothing was spent" in body["detail"]
    assert int(_lower(headers)["retry-after"]) > 0
    assert counts(s["state"])["spends"] == n0 + 3  # alice's two and bob's one
    # the slots are given back: alice is served again
    st, _, _ = call(f"{s['url']}/v1/datasets/lsat6/release", "POST", s["keys"]["alice"], {"kind": "totals",
                                                                                       "epsilon": 0.1})
    assert st == 200


def test_hsts_on_every_answer_behind_a_declared_tls_proxy(proxied):
    s = proxied
    for url, kw in ((s["url"] + "/v1/health", {}), (s["url"] + "/v1/datasets", {}),
                    (s["url"] + "/v1/datasets/nope/release", {"key": s["keys"]["alice"], "body": {"epsilon": 1}}),
                    (s["url"] + "/v1/datasets/lsat6/release", {"key": s["keys"]["alice"], "raw": b"x" * 20000})):
        st, _, h = call(url, "POST" if "body" in kw or "raw" in kw else "GET", **kw)
        assert _lower(h).get("strict-transport-security") == "max-age=31536000", (url, st)
        assert "default-src 'none'" in _lower(h)["content-security-policy"]
    import http.client

    con = http.client.HTTPConnection("127.0.0.1", int(s["url"].rsplit(":", 1)[1]), timeout=60)
    con.request("POST", "/curator/login", body=f"key={s['keys']['curator']}",
                headers={"Content-Type": "application/x-www-form-urlencoded"})
    r = con.getresponse()
    r.read()
    con.close()
    cookie = r.getheader("set-cookie")  # behind the declared TLS proxy: Secure
    assert r.status == 303 and "Secure" in cookie and "HttpOnly" in cookie and s["keys"]["curator"] not in cookie


def test_the_curator_forms_take_the_https_origin_behind_a_declared_tls_proxy(proxied):
    """Behind --tls-proxy the page's own origin is https://HOST (as the Secure flag); its plain
    http twin is another origin and cannot log the curator in or out."""
    import http.client

    s = proxied
    port = int(s["url"].rsplit(":", 1)[1])

    def login(origin: str):
        con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        con.request("POST", "/curator/login", body=f"key={s['keys']['curator']}",
                    headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": origin})
        r = con.getresponse()
        r.read()
        con.close()
        return r.status, r.getheader("set-cookie")

    st, cookie = login(f"https://127.0.0.1:{port}")
    assert st == 303 and "Secure" in cookie
    assert login(f"http://127.0.0.1:{port}") == (403, None)


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.timezone.utc)
    import ipaddress

    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    kp, cp = tmp_path / "key.pem", tmp_path / "cert.pem"
    kp.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption()))
    cp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return kp, cp


@pytest.mark.slow
def test_uvicorns_own_tls_sends_hsts_and_a_secure_session_cookie(tmp_path):
    import http.client

    from privirt.client import Client

    state = str(tmp_path / "state.db")
    keys = setup_state(state, {"lsat6": (LSAT6, 5.0, 1e-6, ["--weights-col", "frequency"])}, {"alice": ["lsat6=1"]})
    kp, cp = _self_signed(tmp_path)
    ctx = ssl.create_default_context(cafile=str(cp))
    server = Server(state, extra=("--ssl-keyfile", kp, "--ssl-certfile", cp), scheme="https", context=ctx)
    try:
        st, _, h = call(server.url + "/v1/datasets", key=keys["alice"], context=ctx)
        assert st == 200 and _lower(h)["strict-transport-security"] == "max-age=31536000"
        con = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=60)
        con.request("POST", "/curator/login", body=f"key={keys['curator']}",
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
        r = con.getresponse()
        r.read()
        cookie = r.getheader("set-cookie")
        assert r.status == 303 and "Secure" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
        assert keys["curator"] not in cookie
        con.close()
        # the client refuses the self-signed certificate by default and trusts it with cafile=
        with pytest.raises(ConnectionError, match="certificate verification failed.*cafile="):
            Client(server.url, keys["alice"], retries=0).datasets()
        assert [d["name"] for d in Client(server.url, keys["alice"], cafile=cp).datasets()] == ["lsat6"]
    finally:
        server.stop()


def test_plain_http_sends_no_hsts(tmp_path):
    from privirt.serve.app import _Limits, HSTS

    sent = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(msg):
        sent.append(msg)

    import asyncio

    for scheme, proxy, want in (("http", False, False), ("https", False, True), ("http", True, True)):
        sent.clear()
        asyncio.run(_Limits(app, 1024, tls_proxy=proxy)({"type": "http", "scheme": scheme, "headers": []},
                                                         receive, send))
        assert (HSTS in sent[0]["headers"]) is want, (scheme, proxy)


# ---------------------------------------------------------------------------------------
def _in_process(tmp_path, eps=20.0):
    import privirt
    from privirt.serve import service
    from privirt.serve.store import init_store

    store = init_store(str(tmp_path / "s.db"))
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=eps, delta=1e-6, items=None, n_persons=None,
                             missing="none", source="test")
    who = store.authenticate(store.add_analyst("a", {"d": (eps, 1e-6)}), "analyst")
    return store, who


def test_warnings_go_to_the_log_and_requests_leave_the_filters_alone(tmp_path, monkeypatch, caplog):
    """Concurrent requests never swap the process-wide warning filters (``catch_warnings`` is not
    thread-safe); a warning the library raises during a request reaches the curator's log."""
    from privirt.private.totals import api as totals_api
    from privirt.serve import service
    from privirt.serve.app import create_app

    store, who = _in_process(tmp_path)
    logging.captureWarnings(False)  # as in a fresh process (another test may have routed them)
    create_app(store)  # routes warnings to logging once
    main = threading.main_thread()
    touched = []
    real_catch, real_simple = warnings.catch_warnings, warnings.simplefilter

    def guard(real):
        def f(*a, **k):
            if threading.current_thread() is not main:
                touched.append(real.__name__)
            return real(*a, **k)
        return f

    monkeypatch.setattr(warnings, "catch_warnings", guard(real_catch))
    monkeypatch.setattr(warnings, "simplefilter", guard(real_simple))

    def noisy(sd, n, what):
        warnings.warn(f"test warning about the {what}", UserWarning, stacklevel=2)

    monkeypatch.setattr(totals_api, "warn_if_noise_dominates", noisy)
    before = list(warnings.filters)
    params = {"kind": "totals", "epsilon": 0.2, "delta": 1e-6, "mechanism": "gaussian"}
    try:
        with caplog.at_level(logging.WARNING, logger="py.warnings"), warnings.catch_warnings():
            warnings.simplefilter("always")
            before = list(warnings.filters)
            with ThreadPoolExecutor(4) as pool:
                out = list(pool.map(lambda _: service.run_request(store, who, "d", "release", params, None),
                                    range(8)))
            assert list(warnings.filters) == before
    finally:
        logging.captureWarnings(False)
    assert not touched, touched
    assert len(out) == 8 and all("test warning" not in str(b) for b, _ in out)
    assert any("test warning about the item totals" in r.getMessage() for r in caplog.records)


def test_route_warnings_writes_each_warning_as_one_line_to_stderr_once(tmp_path):
    """In a fresh process (as ``privirt serve run`` under uvicorn, which configures only its own
    loggers) ``py.warnings`` had no handler, so logging gave it a NullHandler and every warning
    was dropped; each now reaches stderr as one line, without the script's path, and a second
    :func:`route_warnings` does not print it twice."""
    script = tmp_path / "warns.py"
    script.write_text(
        "import warnings\n"
        "from privirt.exceptions import NoiseDominatesWarning\n"
        "from privirt.serve.app import route_warnings\n"
        "warnings.simplefilter('always')\n"
        "route_warnings()\n"
        "warnings.warn('hello from the test', NoiseDominatesWarning)\n"
        "route_warnings()\n"
        "warnings.warn('again from the test', NoiseDominatesWarning)\n"
        "import logging\n"
        "logging.basicConfig()  # an application embedding the app configures logging later\n"
        "warnings.warn('third from the test', NoiseDominatesWarning)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 3, proc.stderr  # (the third was printed twice, by the root handler too)
    assert "hello from the test" in lines[0] and "again from the test" in lines[1]
    assert "third from the test" in lines[2]
    assert all("NoiseDominatesWarning" in line and str(tmp_path) not in line for line in lines)
    assert proc.stdout == ""


def test_a_key_revoked_while_its_request_runs_gets_the_one_401_answer(tmp_path, monkeypatch):
    """Revoked between its authentication and its debit, the request got its own 401 (another
    detail, no WWW-Authenticate); it is now the answer every other 401 gets, and nothing is spent."""
    from privirt.serve.app import create_app

    store, who = _in_process(tmp_path)
    key = store.add_analyst("b", {"d": (1.0, 1e-6)})
    app = create_app(store)
    wrong = asgi_call(app, "POST", "/v1/datasets/d/release", "pva.x.y", {"epsilon": 0.1})
    assert wrong[0] == 401 and wrong[2]["www-authenticate"] == "Bearer"
    real = store.dataset_for

    def revoke_first(analyst_id, name):  # the curator revokes b once b is authenticated
        store.revoke_analyst("b")
        return real(analyst_id, name)

    monkeypatch.setattr(store, "dataset_for", revoke_first)
    st, b, h = asgi_call(app, "POST", "/v1/datasets/d/release", key, {"epsilon": 0.1})
    assert (st, b) == wrong[:2] and h["www-authenticate"] == "Bearer", (st, b, h)
    assert store.counts() == {"requests": 0, "spends": 0}


def _flaky_commit(monkeypatch, store, *, committed: bool, exc: BaseException):
    """The next durable write (the debit) raises ``exc`` after (or instead of) its commit."""
    real = store._b.write
    armed = [True]

    @contextmanager
    def write(durable: bool = True):
        if not (durable and armed):
            with real(durable) as con:
                yield con
            return
        armed.clear()
        if committed:
            with real(durable) as con:
                yield con
            raise exc
        try:
            with real(durable) as con:
                yield con
                raise exc  # rolls back
        finally:
            pass

    monkeypatch.setattr(store._b, "write", write)


def test_a_lost_commit_answer_of_a_committed_debit_still_returns_the_result(tmp_path, monkeypatch):
    from privirt.serve import service

    store, who = _in_process(tmp_path)
    _flaky_commit(monkeypatch, store, committed=True, exc=sqlite3.OperationalError("disk I/O error"))
    params = {"kind": "totals", "epsilon": 0.3, "delta": 1e-6, "mechanism": "gaussian"}
    body, replayed = service.run_request(store, who, "d", "release", params, "k-1")
    assert not replayed and body["result"]["type"] == "TotalsRelease"
    assert store.counts() == {"requests": 1, "spends": 1}
    found = store.find_request(who.id, idem_key="k-1")
    assert found["status"] == "done" and found["result"] == body
    again, replayed = service.run_request(store, who, "d", "release", params, "k-1")
    assert replayed and again == body and store.counts()["spends"] == 1


def test_an_unconfirmed_debit_says_the_budget_may_be_spent_and_the_id_finds_out(tmp_path, monkeypatch):
    from privirt.serve import service

    store, who = _in_process(tmp_path)
    _flaky_commit(monkeypatch, store, committed=False, exc=sqlite3.OperationalError("disk I/O error"))
    monkeypatch.setattr(store, "spend_of", _once_unreachable(store.spend_of))
    params = {"kind": "totals", "epsilon": 0.3, "delta": 1e-6, "mechanism": "gaussian"}
    with pytest.raises(service.RequestFailed) as err:
        service.run_request(store, who, "d", "release", params, "k-2")
    e = err.value
    assert e.status == 503 and "may have been spent" in e.detail and "\n" not in e.detail
    rid = e.extra["request_id"]
    assert rid in e.detail and e.headers["Retry-After"]
    assert store.find_request(who.id, request_id=rid) is None  # (404: nothing was spent)
    assert store.counts() == {"requests": 0, "spends": 0}
    body, replayed = service.run_request(store, who, "d", "release", params, "k-2")  # the retry
    assert not replayed and store.counts() == {"requests": 1, "spends": 1}


def _once_unreachable(real):
    state = {"n": 0}

    def f(request_id):
        state["n"] += 1
        if state["n"] == 1:
            raise sqlite3.OperationalError("unable to open database file")
        return real(request_id)

    return f


def test_a_schema_1_state_gets_the_sessions_table_when_opened(tmp_path):
    from privirt.serve.store import SCHEMA_VERSION, init_store, open_store

    state = str(tmp_path / "old.db")
    init_store(state)
    with sqlite3.connect(state) as con:  # as privirt 0.x wrote it
        con.execute("DROP TABLE sessions")
        con.execute("DROP TABLE events")  # (schema 3)
        con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    store = open_store(state)
    with sqlite3.connect(state) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    key = store.new_curator_key()
    who = store.authenticate(key, "curator")
    token = store.new_session(who.id, 60)
    assert store.session(token) == who and store.session(token + "x") is None
    store.end_session(token)
    assert store.session(token) is None
    open_store(state)  # opening again changes nothing


def test_the_client_waits_and_retries_a_429_with_the_same_idempotency_key():
    """A stub service answers 429 (Retry-After: 0) then a result: the client retries with the
    same Idempotency-Key; with retries=0 it raises TooManyRequests."""
    import http.server
    import json

    from privirt.client import Client, TooManyRequests

    seen = []

    class Stub(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers["Idempotency-Key"])
            if len(seen) % 2 == 1:
                body, status, extra = {"detail": "you already have 2 requests running"}, 429, {"Retry-After": "0"}
            else:
                body, status, extra = {"detail": "no such data set"}, 404, {}
            data = json.dumps(body).encode()
            self.send_response(status)
            for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **extra}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):  # quiet
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        from privirt.client import NotFound

        with pytest.raises(NotFound):  # 429, then the retry's answer
            Client(url, "pva.x.y").release("d", epsilon=0.1)
        assert len(seen) == 2 and seen[0] == seen[1]
        with pytest.raises(TooManyRequests) as err:
            Client(url, "pva.x.y", retries=0).release("d", epsilon=0.1)
        assert err.value.status == 429 and err.value.retry_after == 0.0
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_an_unknown_revoked_or_malformed_key_id_is_hashed_and_compared_as_an_existing_one(tmp_path, monkeypatch):
    """Every wrong key takes the steps of an existing id's: one SHA-256 of the secret and one
    ``compare_digest`` of two digests of the same length (against a dummy for an unknown id)."""
    import hmac

    from privirt.serve import keys

    store, _ = _in_process(tmp_path)
    key = store.add_analyst("b", {"d": (1.0, 1e-6)})
    revoked = store.add_analyst("c", {"d": (1.0, 1e-6)})
    store.revoke_analyst("c")
    calls, real = [], hmac.compare_digest

    def counting(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(keys.hmac, "compare_digest", counting)
    kid = key.split(".")[1]
    wrong = {"existing id": f"pva.{kid}.{'x' * 43}", "unknown id": f"pva.{'0' * 16}.{'x' * 43}",
             "revoked": revoked, "malformed": "pva.nodots", "curator prefix": key.replace("pva.", "pvc.", 1)}
    for what, k in wrong.items():
        calls.clear()
        assert store.authenticate(k, "analyst") is None, what
        assert calls == [(64, 64)], (what, calls)
    calls.clear()
    assert store.authenticate(key, "analyst").name == "b" and calls == [(64, 64)]


def test_the_openapi_description_has_the_request_bodies_and_the_one_line_error_body(proxied):
    # the spending endpoints read their bodies by hand (one-line 422s), so FastAPI saw no body and
    # advertised its list-shaped HTTPValidationError, which the service never sends
    status, spec, _ = call(proxied["url"] + "/openapi.json")
    assert status == 200
    schemas = spec["components"]["schemas"]
    for path, model, field in (("/v1/datasets/{name}/estimate", "EstimateRequest", "method"),
                               ("/v1/datasets/{name}/release", "ReleaseRequest", "kind")):
        op = spec["paths"][path]["post"]
        body = op["requestBody"]
        assert body["required"] is True
        ref = body["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{model}"
        props = schemas[model]["properties"]
        assert {"epsilon", "delta", "mechanism", field} <= set(props) and "epsilon" in schemas[model]["required"]
        assert schemas[model]["additionalProperties"] is False  # unknown fields are refused
        for code in ("402", "404", "409", "413", "422", "429"):
            assert op["responses"][code]["content"]["application/json"]["schema"] == \
                {"$ref": "#/components/schemas/ErrorBody"}
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert "HTTPValidationError" not in str(spec["paths"])
    assert schemas["ErrorBody"]["properties"] == {"detail": {"type": "string", "title": "Detail"}}
    # the body limit (413) and the catch-all handler (500) answer on any route: every operation
    # declares them, with the auth and state statuses
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for code in ("401", "403", "413", "500", "503"):
                assert op["responses"][code]["content"]["application/json"]["schema"] == \
                    {"$ref": "#/components/schemas/ErrorBody"}, (method, path, code)
    # the handlers still parse by hand: a bad body is the service's one line, not FastAPI's list
    status, body, _ = call(proxied["url"] + "/v1/datasets/lsat6/estimate", "POST", proxied["keys"]["alice"],
                           {"epsilon": "0.5"})
    assert status == 422 and isinstance(body["detail"], str) and ONE_LINE not in body["detail"]
