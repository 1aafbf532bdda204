"""The analyst client :class:`privirt.client.Client` against fake HTTP servers (a thread of
:mod:`http.server` on a loopback port): its arguments, malformed answers and TLS; the real
service's side is in ``test_serve.py``."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading

import pytest

from privirt.client import Client

KEY = "pva.0123456789abcdef.ZxunEzcG2IMgSECRETSECRETSECRETSECRETSECRETs"
SECRET = "ZxunEzcG2IMg"


class _Fake(http.server.BaseHTTPRequestHandler):
    """Answers ``server.answers[path] = (status, headers, body bytes)``; records each request's
    headers and body in ``server.seen``."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append({"path": self.path, "headers": dict(self.headers), "body": body})
        status, headers, payload = self.server.answers.get(self.path, (404, {}, b'{"detail": "not found"}'))
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(payload)), **headers}.items():
            if v is not None:
                self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.fixture
def fake():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    srv.answers, srv.seen = {}, []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.shutdown()
    srv.server_close()


# ---------------------------------------------------------------------------------------
# the key never appears in an error
@pytest.mark.parametrize("suffix", ["\n", "\r\n", "  \n", "\t"])
def test_a_key_read_from_a_file_with_its_newline_is_stripped(fake, suffix):
    fake.answers["/v1/datasets"] = (200, {}, b"[]")
    assert Client(fake.url, " " + KEY + suffix, retries=0).datasets() == []
    assert fake.seen[-1]["headers"]["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("bad", [KEY[:20] + "\n" + KEY[20:], KEY[:20] + " " + KEY[20:], KEY[:20] + "\x00" + KEY[20:],
                                 KEY[:20] + "é" + KEY[20:], KEY + "\n" + KEY])
def test_a_key_with_inner_whitespace_or_control_characters_is_one_line_without_the_key(bad):
    with pytest.raises(ValueError) as err:
        Client("http://127.0.0.1:9", bad)
    msg = str(err.value)
    assert "key" in msg and "\n" not in msg and SECRET not in msg and "pva." not in msg


@pytest.mark.parametrize("bad", ['"' + KEY + '"', "'" + KEY + "'", ' "' + KEY + '"\n', "`" + KEY + "`",
                                 "\u201c" + KEY + "\u201d", KEY + '"', '"' + KEY[:20] + "\n" + KEY[20:] + '"'],
                         ids=["double", "single", "spaced", "backtick", "typographic", "trailing", "broken"])
def test_a_key_pasted_with_quotes_is_one_line_saying_so_before_anything_is_sent(fake, bad):
    # a key copied with its quotes (from an email, a JSON file) was sent as it was: a bare 401
    with pytest.raises(ValueError) as err:
        Client(fake.url, bad, retries=0).datasets()
    msg = str(err.value)
    assert "quotes" in msg and "one line" in msg and "\n" not in msg
    assert SECRET not in msg and "pva." not in msg and fake.seen == []


def test_swapped_url_and_key_do_not_echo_the_key():
    with pytest.raises(ValueError) as err:
        Client(KEY, "http://127.0.0.1:9")
    msg = str(err.value)
    assert "url must be" in msg and "looks like an API key" in msg and SECRET not in msg
    with pytest.raises(ValueError, match="got 'ftp://x'"):  # other bad urls are still quoted
        Client("ftp://x", KEY)


# ---------------------------------------------------------------------------------------
# a success answer that is not a usable JSON body
_UNUSABLE = {
    "html": (200, {"Content-Type": "text/html"}, b"<html>proxy login</html>"),
    "cut": (200, {"Content-Length": None}, b'{"request_id": "abc", "privacy": {"mech'),
    "badutf": (200, {}, b"\xff{}"),
    "empty": (200, {}, b"{}"),
    "null": (200, {}, b"null"),
    "list": (200, {}, b"[1, 2]"),
    "partial": (200, {}, b'{"request_id": "r-42", "privacy": {}, "result": {"type": "TotalsRelease"}}'),
    "badtype": (200, {}, b'{"request_id": "r-42", "privacy": null, "result": 3}'),
    # nested past Python's recursion limit: json.loads raised a bare RecursionError
    "deep": (200, {}, b"[" * 100_000 + b"]" * 100_000),
}


@pytest.mark.parametrize("case", sorted(_UNUSABLE))
def test_an_unusable_success_answer_of_a_spend_is_one_service_error_naming_the_key(fake, case):
    from privirt.client import ServiceError

    fake.answers["/v1/datasets/d/release"] = _UNUSABLE[case]
    c = Client(fake.url, KEY, retries=0)
    with pytest.raises(ServiceError) as err:
        c.release("d", epsilon=0.1, idempotency_key="idem-X")
    msg = str(err.value)
    assert "\n" not in msg and "budget may have been spent" in msg and "Idempotency-Key idem-X" in msg
    if case in ("partial",):
        assert "r-42" in msg
    fake.answers["/v1/requests/r-1"] = _UNUSABLE[case]
    with pytest.raises(ServiceError) as err:
        c.result("r-1")
    assert "\n" not in str(err.value) and "Idempotency-Key" not in str(err.value)


@pytest.mark.parametrize("case", ["html", "badutf", "empty", "null", "list", "deep"])
def test_an_unusable_answer_to_a_listing_is_one_service_error(fake, case):
    from privirt.client import ServiceError

    fake.answers["/v1/datasets"] = fake.answers["/v1/spends"] = _UNUSABLE[case]
    c = Client(fake.url, KEY, retries=0)
    for call in (c.datasets, c.spends):
        with pytest.raises(ServiceError) as err:
            call()
        assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------
# non-finite values of a result: sent distinctly, rebuilt as the library's
def _uninformative_spectral():
    """A spectral estimate that does not respond to the difficulties (se = inf, ci = (-inf, inf))
    and one with ``n_boot=0`` (se and ci NaN), of the library."""
    import warnings

    import numpy as np
    import pandas as pd

    import privirt

    from ._serve import LSAT6

    df = pd.read_csv(LSAT6)
    X = pd.DataFrame(np.repeat(df.drop(columns="frequency").to_numpy(), df["frequency"].to_numpy(), axis=0),
                     columns=df.drop(columns="frequency").columns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the library warns about the uninformative estimate
        flat = privirt.private_spectral_estimate(X, epsilon=0.002, delta=1e-6, n_boot=20, seed=24000017)
        nob = privirt.private_spectral_estimate(X, epsilon=0.5, delta=1e-6, n_boot=0, seed=1)
    return flat, nob


def test_infinite_and_nan_se_and_interval_ends_survive_the_service_json():
    import math

    import numpy as np
    import pandas as pd

    from privirt.client import result_from_json
    from privirt.serve.service import _body

    flat, nob = _uninformative_spectral()
    assert flat.info["informative"] is False and np.isinf(flat.se).all()  # the case under test
    assert np.isnan(nob.se).all()
    for lib in (flat, nob):
        body = json.loads(json.dumps(_body("r-1", "lsat6", "estimate", {"method": "spectral"}, lib), allow_nan=False))
        got = result_from_json(body)
        pd.testing.assert_frame_equal(got.to_frame(), lib.to_frame(), check_names=False)
        assert body["result"]["se"][0] in ("inf", "nan") and not any(
            isinstance(v, float) and not math.isfinite(v) for v in body["result"]["se"])
    # a result stored by an older service has null for every non-finite value: read as NaN
    body["result"]["se"] = [None] * len(body["result"]["se"])
    body["result"]["lo"] = [None] * len(body["result"]["lo"])
    got = result_from_json(body)
    assert got.se.isna().all() and got.ci["lo"].isna().all()


def test_numpy_scalars_the_library_accepts_are_sent_as_numbers(fake):
    import numpy as np

    from privirt.client import ServiceError

    fake.answers["/v1/datasets/d/estimate"] = (200, {}, b"{}")  # the body is what is tested
    c = Client(fake.url, KEY, retries=0)
    with pytest.raises(ServiceError):
        c.estimate("d", epsilon=np.float64(0.5), n_boot=np.int64(20), confidence=np.float32(0.9),
                   delta=np.float32(1e-6), mechanism=np.str_("gaussian"), method="spectral")
    sent = json.loads(fake.seen[-1]["body"])
    assert sent["n_boot"] == 20 and isinstance(sent["n_boot"], int)
    assert sent["confidence"] == float(np.float32(0.9)) and sent["epsilon"] == 0.5
    assert sent["delta"] == float(np.float32(1e-6)) and sent["mechanism"] == "gaussian"


@pytest.mark.parametrize("kw, name", [({"retries": -1}, "retries"), ({"retries": 1.5}, "retries"),
                                      ({"retries": "2"}, "retries"), ({"retries": True}, "retries"),
                                      ({"timeout": -1}, "timeout"), ({"timeout": 0}, "timeout"),
                                      ({"timeout": float("nan")}, "timeout"), ({"timeout": float("inf")}, "timeout"),
                                      ({"timeout": "soon"}, "timeout"), ({"timeout": None}, "timeout"),
                                      ({"timeout": 1e10}, "timeout"), ({"timeout": 1e300}, "timeout")])
def test_bad_retries_or_timeout_are_refused_in_one_line_naming_the_argument(fake, kw, name):
    with pytest.raises(ValueError, match=f"^{name} must be") as err:
        Client(fake.url, KEY, **kw)
    assert "\n" not in str(err.value)
    assert fake.seen == []


def test_good_retries_and_timeout_are_taken(fake):
    import numpy as np

    fake.answers["/v1/datasets"] = (200, {}, b"[]")
    c = Client(fake.url, KEY, retries=np.int64(0), timeout=np.float32(5))
    assert c.retries == 0 and c.timeout == 5.0 and c.datasets() == []


# ---------------------------------------------------------------------------------------
# TLS with a self-signed certificate: refused by default, trusted with cafile=
@pytest.fixture
def tls_fake(tmp_path):
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a self-signed certificate")
    kp, cp = tmp_path / "key.pem", tmp_path / "cert.pem"
    made = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(kp),
                           "-out", str(cp), "-days", "1", "-subj", "/CN=127.0.0.1",
                           "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"openssl could not make a self-signed certificate: {made.stderr.decode()[-200:]}")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cp, kp)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.answers, srv.seen = {"/v1/datasets": (200, {}, b"[]")}, []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.url, srv.cafile = f"https://127.0.0.1:{srv.server_address[1]}", cp
    yield srv
    srv.shutdown()
    srv.server_close()


def test_a_self_signed_certificate_is_refused_by_default_and_trusted_with_cafile(tls_fake, tmp_path):
    with pytest.raises(ConnectionError) as err:
        Client(tls_fake.url, KEY, retries=0).datasets()
    msg = str(err.value)
    assert msg.startswith("certificate verification failed") and "cafile=" in msg and "\n" not in msg
    assert tls_fake.seen == []  # nothing (no key) was sent
    for cafile in (tls_fake.cafile, str(tls_fake.cafile)):
        assert Client(tls_fake.url, KEY, retries=0, cafile=cafile).datasets() == []
    assert tls_fake.seen[-1]["headers"]["Authorization"] == f"Bearer {KEY}"
    # the host name is still checked: the certificate names 127.0.0.1, not localhost
    with pytest.raises(ConnectionError, match="certificate verification failed"):
        Client(tls_fake.url.replace("127.0.0.1", "localhost"), KEY, retries=0, cafile=tls_fake.cafile).datasets()


@pytest.mark.parametrize("what", ["missing", "not_pem", "directory", "number", "empty", "blank"])
def test_a_cafile_that_is_not_pem_certificates_is_one_line_naming_cafile(tmp_path, what):
    # "" was taken by ssl as "no file", trusting the system's certificates instead of the CA
    bad = {"missing": tmp_path / "nope.pem", "not_pem": tmp_path / "x.pem", "directory": tmp_path, "number": 3,
           "empty": "", "blank": "  "}[what]
    (tmp_path / "x.pem").write_text("not a certificate\n")
    with pytest.raises(ValueError, match="^cafile") as err:
        Client("https://127.0.0.1:9", KEY, cafile=bad)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------
# a body over the service's limit: the service answers 413 and closes before reading it
class _Refusing(http.server.BaseHTTPRequestHandler):
    """Answers 413 without reading the body and closes, as the service's body limit does."""

    def do_POST(self) -> None:
        self.server.seen.append(self.path)
        payload = b'{"detail": "request body larger than 16384 bytes; nothing was spent"}'
        self.send_response(413)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True

    def log_message(self, *args) -> None:  # quiet
        pass


@contextlib.contextmanager
def _running(handler, ssl_context=None):
    """A loopback server of ``handler`` in a thread (``srv.seen`` for the handler's records),
    over TLS with ``ssl_context``; shut down on exit."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if ssl_context is not None:
        srv.socket = ssl_context.wrap_socket(srv.socket, server_side=True)
    srv.seen = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.url = f"{'https' if ssl_context else 'http'}://127.0.0.1:{srv.server_address[1]}"
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_body_far_over_the_limit_is_one_invalid_request_not_a_connection_error_and_is_not_retried():
    from privirt.client import InvalidRequest
    with _running(_Refusing) as srv:
        client = Client(srv.url, key=KEY, retries=2)
        with pytest.raises(InvalidRequest) as err:
            client.estimate("d", epsilon=1.0, label="x" * 20_000_000)
        msg = str(err.value)
        assert err.value.status == 413 and "over the service's limit" in msg and "nothing was spent" in msg
        assert "\n" not in msg and SECRET not in msg
        assert len(srv.seen) == 1  # not sent again


def test_the_clients_body_limit_is_the_services():
    pytest.importorskip("fastapi")
    from privirt import client
    from privirt.serve.app import MAX_BODY
    assert client.MAX_BODY == MAX_BODY


def test_a_body_far_over_the_limit_over_tls_is_the_same_invalid_request(tls_fake):
    # over https the closed connection surfaced as ssl.SSLEOFError: a ConnectionError, sent 3 times
    import ssl

    from privirt.client import InvalidRequest
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tls_fake.cafile, tls_fake.cafile.parent / "key.pem")
    with _running(_Refusing, ctx) as srv:
        client = Client(srv.url, key=KEY, retries=2, cafile=tls_fake.cafile)
        with pytest.raises(InvalidRequest) as err:
            client.estimate("d", epsilon=1.0, label="x" * 20_000_000)
        assert err.value.status == 413 and "nothing was spent" in str(err.value)
        assert len(srv.seen) == 1


class _ReadsThenCloses(http.server.BaseHTTPRequestHandler):
    """Reads the whole body, then closes without an answer (a service with a larger limit,
    which may have debited): not the 413 of a body it refused unread."""

    def do_POST(self) -> None:
        self.server.seen.append(len(self.rfile.read(int(self.headers["Content-Length"]))))
        self.close_connection = True

    def log_message(self, *args) -> None:  # quiet
        pass


def test_a_large_body_read_whole_then_no_answer_is_a_connection_error_retried_with_the_key():
    with _running(_ReadsThenCloses) as srv:
        client = Client(srv.url, key=KEY, retries=1)
        with pytest.raises(ConnectionError) as err:
            client.estimate("d", epsilon=1.0, label="x" * 20_000, idempotency_key="k1")
        assert "nothing was spent" not in str(err.value) and "Idempotency-Key k1" in str(err.value)
        assert srv.seen == [srv.seen[0]] * 2 and srv.seen[0] > 20_000  # sent whole, retried once


# ---------------------------------------------------------------------------------------
# a request sent whole whose answer is lost: a spend may have been debited
class _ReadsThenLoses(http.server.BaseHTTPRequestHandler):
    """Reads the whole request, then closes without an answer (``/close...``), answers too
    late for the client's timeout (``/stall...``), or dribbles a valid ``[]`` padded to 14
    bytes one byte per 0.2 s, its body only (``/body...``) or the whole answer (``/all...``):
    the service may have debited a spend."""

    def _lose(self) -> None:
        import time

        self.server.seen.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path.startswith("/stall"):
            time.sleep(1.0)
        elif self.path.startswith(("/body", "/all")):
            body = b"[" + b" " * 12 + b"]"
            head = f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            if self.path.startswith("/body"):
                self.wfile.write(head)
                head = b""
            try:
                for byte in head + body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:  # the client gave up
                pass
        self.close_connection = True

    do_GET = do_POST = _lose

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.mark.parametrize("how", ["close", "stall", "body", "all"])
def test_a_lost_answer_to_a_spend_says_the_budget_may_have_been_spent_and_a_get_does_not(how):
    # body, all: urllib applied timeout to each socket read, so 14 bytes at 0.2 s each came whole
    # with timeout=0.5 (now the attempt ends at its deadline: a lost answer)
    with _running(_ReadsThenLoses) as srv:
        client = Client(f"{srv.url}/{how}", key=KEY, timeout=0.5, retries=0)
        with pytest.raises(ConnectionError) as err:
            client.release("d", epsilon=0.1, idempotency_key="idem-L")
        msg = str(err.value)
        assert "\n" not in msg and "the budget may have been spent" in msg
        assert "retry with Idempotency-Key idem-L (it never spends twice)" in msg
        with pytest.raises(ConnectionError) as err:
            client.datasets()
        assert "spent" not in str(err.value) and "Idempotency-Key" not in str(err.value)


def test_an_answer_longer_than_the_clients_limit_is_a_lost_answer(fake, monkeypatch):
    from privirt import _client_transport

    monkeypatch.setattr(_client_transport, "MAX_ANSWER", 1000)
    fake.answers["/v1/datasets/d/release"] = fake.answers["/v1/datasets"] = (200, {}, b"[" + b" " * 2000 + b"]")
    c = Client(fake.url, KEY, retries=1)
    with pytest.raises(ConnectionError) as err:
        c.release("d", epsilon=0.1, idempotency_key="idem-B")
    msg = str(err.value)
    assert "1000 bytes" in msg and "retry with Idempotency-Key idem-B" in msg and "\n" not in msg
    assert len(fake.seen) == 2  # retried with the key, as a lost answer
    fake.answers["/v1/datasets"] = (200, {}, b"[" + b" " * 900 + b"]")
    assert c.datasets() == []  # (within the limit)



# ---------------------------------------------------------------------------------------
# redirects are refused (urllib would send the key along) in one line saying where they pointed
@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_refused_in_one_line_naming_where_it_pointed(fake, status):
    from privirt.client import ServiceError

    with _running(_ReadsThenLoses) as other:
        fake.answers["/v1/datasets"] = (status, {"Location": f"{other.url}/v1/datasets"}, b"")
        fake.answers["/v1/datasets/d/release"] = (status, {"Location": f"{other.url}/v1/datasets/d/release"}, b"")
        c = Client(fake.url, KEY, retries=0)
        for call in (c.datasets, lambda: c.release("d", epsilon=0.1)):
            with pytest.raises(ServiceError) as err:
                call()
            msg = str(err.value)
            assert err.value.status == status and "\n" not in msg and SECRET not in msg
            assert f"redirect ({status}) to {other.url}/v1/" in msg and "does not follow redirects" in msg
            assert msg.endswith(f"pass {other.url} as url")
        assert other.seen == []  # the key went nowhere else


def test_a_relative_or_missing_location_is_made_absolute_or_said(fake):
    from privirt.client import ServiceError

    fake.answers["/v1/datasets"] = (308, {"Location": "/api/v1/datasets"}, b"")
    with pytest.raises(ServiceError) as err:
        Client(fake.url, KEY, retries=0).datasets()
    assert f"to {fake.url}/api/v1/datasets;" in str(err.value) and str(err.value).endswith(f"pass {fake.url}/api as url")
    fake.answers["/v1/datasets"] = (307, {}, b"")
    with pytest.raises(ServiceError) as err:
        Client(fake.url, KEY, retries=0).datasets()
    assert "redirect (307) without a Location" in str(err.value) and "does not follow redirects" in str(err.value)


# ---------------------------------------------------------------------------------------
# a lost answer, then "nothing was spent" on the retry: the lost try may have been debited
class _LosesThenRefuses(http.server.BaseHTTPRequestHandler):
    """Answers the first request too late for the client's timeout (the service may debit it),
    every later one with ``server.refusal = (status, body)`` and ``Retry-After: 0``."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append(self.headers.get("Idempotency-Key"))
        if len(self.server.seen) == 1:
            import time

            time.sleep(0.6)
            self.close_connection = True
            return
        status, payload = self.server.refusal
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(payload)),
                     "Retry-After": "0"}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:  # quiet
        pass


_NOTHING_SPENT = {
    429: b'{"detail": "you already have 1 requests running (the most one analyst may); retry when one '
         b'has finished; nothing was spent"}',
    503: b'{"detail": "the service\'s state is unavailable; nothing was spent; retry later"}',
}


@pytest.mark.parametrize("status", [429, 503])
@pytest.mark.parametrize("retries", [1, 2])
def test_nothing_spent_after_an_unanswered_try_says_the_budget_may_have_been_spent(status, retries):
    from privirt.client import ServerError, TooManyRequests

    with _running(_LosesThenRefuses) as srv:
        srv.refusal = (status, _NOTHING_SPENT[status])
        client = Client(srv.url, key=KEY, timeout=0.2, retries=retries)
        with pytest.raises(TooManyRequests if status == 429 else ServerError) as err:
            client.estimate("d", epsilon=0.01, idempotency_key="idem-R")
        msg = str(err.value)
        assert err.value.status == status and "\n" not in msg and SECRET not in msg
        assert "nothing was spent" not in msg and "earlier try of this request went unanswered" in msg
        assert msg.endswith("the budget may have been spent: retry with Idempotency-Key idem-R "
                            "(it never spends twice)")
        assert srv.seen == ["idem-R"] * (1 + retries)  # every try with the same key


_REFUSED_AFTER = {
    402: b'{"detail": "this request needs \\u03b5 = 0.5 and the most you can spend is 0.1: your allowance '
         b'on \'d\' 0.1, the data set 4; nothing was spent", "remaining_epsilon": 0.1}',
    403: b'{"detail": "the state allows 100 releases per analyst and data set, and you have made them on '
         b'\'d\'; nothing was spent"}',
    500: b'{"detail": "internal error before the budget was debited; nothing was spent"}',
}


@pytest.mark.parametrize("status", sorted(_REFUSED_AFTER))
def test_a_refusal_after_an_unanswered_try_says_the_earlier_try_may_have_spent(status):
    # the retry of an unanswered spend found its budget taken (by that try's own debit, made in the
    # moment before its record could be found) and answered 402 "nothing was spent", passed on as
    # it was: the analyst read that the request had spent nothing
    from privirt.client import ServiceError

    with _running(_LosesThenRefuses) as srv:
        srv.refusal = (status, _REFUSED_AFTER[status])
        with pytest.raises(ServiceError) as err:
            Client(srv.url, key=KEY, timeout=0.2, retries=1).estimate("d", epsilon=0.5, idempotency_key="idem-B")
        msg = str(err.value)
        assert err.value.status == status and "\n" not in msg and SECRET not in msg
        assert "nothing was spent" not in msg and "earlier try of this request went unanswered" in msg
        assert msg.endswith("retry with Idempotency-Key idem-B (it never spends twice)")
        assert srv.seen == ["idem-B"] * 2


class _UnconfirmedThenRefuses(_LosesThenRefuses):
    """Answers the first request with the service's 503 for a debit its state did not confirm
    (with a request id: the budget may have been spent), every later one with
    ``server.refusal``."""

    def do_POST(self) -> None:
        if not self.server.seen:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.server.seen.append(self.headers.get("Idempotency-Key"))
            payload = json.dumps({"detail": "the state did not confirm this request's debit: the budget may "
                                  "have been spent", "request_id": "r" * 32}).encode()
            self.send_response(503)
            for k, v in {"Content-Type": "application/json", "Content-Length": str(len(payload)),
                         "Retry-After": "0"}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
            return
        super().do_POST()


@pytest.mark.parametrize("status", [429, 503])
def test_nothing_spent_after_an_unconfirmed_debit_says_the_budget_may_have_been_spent(status):
    # the retry of a 503 "did not confirm this request's debit" got "nothing was spent" (429, or
    # 503 state unavailable), which the client passed on as it was
    from privirt.client import ServerError, TooManyRequests

    with _running(_UnconfirmedThenRefuses) as srv:
        srv.refusal = (status, _NOTHING_SPENT[status])
        with pytest.raises(TooManyRequests if status == 429 else ServerError) as err:
            Client(srv.url, key=KEY, retries=1).estimate("d", epsilon=0.01, idempotency_key="idem-U")
        msg = str(err.value)
        assert "nothing was spent" not in msg and "earlier try of this request was not confirmed" in msg
        assert msg.endswith(f"retry with Idempotency-Key idem-U (it never spends twice) or fetch "
                            f"Client.result({'r' * 32!r})")
        assert srv.seen == ["idem-U"] * 2


@pytest.mark.parametrize("status", [429, 503])
def test_nothing_spent_without_an_unanswered_try_still_says_nothing_was_spent(fake, status):
    from privirt.client import ServiceError

    fake.answers["/v1/datasets/d/estimate"] = (status, {"Retry-After": "0"}, _NOTHING_SPENT[status])
    with pytest.raises(ServiceError) as err:
        Client(fake.url, KEY, retries=1).estimate("d", epsilon=0.01, idempotency_key="idem-N")
    assert "nothing was spent" in str(err.value) and "Idempotency-Key" not in str(err.value)
    assert len(fake.seen) == 2


# ---------------------------------------------------------------------------------------
# an error answer that is not the service's (a proxy's 502/504 page) to a spend: may be spent
_PROXY_PAGES = {
    "502html": (502, {"Content-Type": "text/html"}, b"<html><h1>502 Bad Gateway</h1>nginx</html>"),
    "504json": (504, {}, b'{"message": "upstream timed out"}'),
    "504detail": (504, {}, b'{"detail": "Gateway Timeout"}'),
    "500bare": (500, {}, b'{"detail": "internal error"}'),
    "503html": (503, {"Content-Type": "text/html", "Retry-After": "0"}, b"<html>unavailable</html>"),
}


@pytest.mark.parametrize("case", sorted(_PROXY_PAGES))
def test_a_proxy_error_page_to_a_spend_says_the_budget_may_have_been_spent_and_names_the_key(fake, case):
    # a proxy that forwarded the request (the service debited) then answered 502 said only
    # "502: Bad Gateway": the auto-generated key was lost, a retry paid again
    from privirt.client import ServerError

    fake.answers["/v1/datasets/d/release"] = fake.answers["/v1/datasets"] = _PROXY_PAGES[case]
    c = Client(fake.url, KEY, retries=1)
    with pytest.raises(ServerError) as err:
        c.release("d", epsilon=0.1)
    msg, key = str(err.value), fake.seen[-1]["headers"]["Idempotency-Key"]
    assert "\n" not in msg and f"the budget may have been spent: retry with Idempotency-Key {key}" in msg
    assert err.value.status == _PROXY_PAGES[case][0] and err.value.body["idempotency_key"] == key
    with pytest.raises(ServerError) as err:  # a GET spends nothing
        c.datasets()
    assert "spent" not in str(err.value) and "Idempotency-Key" not in str(err.value)


@pytest.mark.parametrize("body", [b'{"detail": "internal error before the budget was debited; nothing was spent"}',
                                  b'{"detail": "internal error after the budget was debited: this request\'s cost '
                                  b'was spent; request id r1", "request_id": "r1"}'])
def test_the_services_own_500_is_passed_on_as_it_is(fake, body):
    from privirt.client import ServerError

    fake.answers["/v1/datasets/d/release"] = (500, {}, body)
    with pytest.raises(ServerError) as err:
        Client(fake.url, KEY, retries=0).release("d", epsilon=0.1, idempotency_key="idem-5")
    assert str(err.value) == "500: " + json.loads(body)["detail"]


def test_an_error_answer_nested_too_deep_is_its_reason_line_naming_the_key(fake):
    # json.loads of the error body raised a bare RecursionError out of the client
    from privirt.client import ServerError

    fake.answers["/v1/datasets/d/release"] = (500, {}, b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(ServerError) as err:
        Client(fake.url, KEY, retries=0).release("d", epsilon=0.1, idempotency_key="idem-R")
    msg = str(err.value)
    assert msg.startswith("500: ") and "\n" not in msg
    assert "the budget may have been spent: retry with Idempotency-Key idem-R" in msg


@pytest.mark.parametrize("status", [500, 422])
def test_an_error_answer_cut_off_is_one_service_error_not_an_incomplete_read(fake, status):
    # exc.read() of the error body raised http.client.IncompleteRead out of the client
    from privirt.client import ServiceError

    cut = (status, {"Content-Length": "150"}, b'{"detail": "internal error after the budget')
    fake.answers["/v1/datasets/d/release"] = fake.answers["/v1/datasets"] = cut
    c = Client(fake.url, KEY, retries=0)
    with pytest.raises(ServiceError) as err:
        c.release("d", epsilon=0.1, idempotency_key="idem-C")
    msg = str(err.value)
    assert err.value.status == status and "\n" not in msg
    assert "the budget may have been spent: retry with Idempotency-Key idem-C" in msg
    with pytest.raises(ServiceError) as err:
        c.datasets()
    assert err.value.status == status and "Idempotency-Key" not in str(err.value)


def test_ctrl_c_during_a_spend_stays_a_keyboard_interrupt_naming_the_key(fake):
    # a KeyboardInterrupt after the request was sent said nothing, and the auto-generated key was lost
    fake.answers["/v1/datasets/d/estimate"] = fake.answers["/v1/datasets"] = (200, {}, b"[]")
    c = Client(fake.url, KEY, retries=2)
    real = c._opener

    class _Interrupted:  # sends the request, then Ctrl-C before the answer is read
        def open(self, req, timeout):
            real.open(req, timeout=timeout).close()
            raise KeyboardInterrupt

    c._opener = _Interrupted()
    with pytest.raises(KeyboardInterrupt) as err:
        c.estimate("d", epsilon=0.1)
    key = fake.seen[-1]["headers"]["Idempotency-Key"]
    assert str(err.value) == (f"interrupted; the budget may have been spent: retry with Idempotency-Key {key} "
                              "(it never spends twice)")
    assert len(fake.seen) == 1  # not retried
    with pytest.raises(KeyboardInterrupt) as err:  # a GET spends nothing
        c.datasets()
    assert str(err.value) == ""


# ---------------------------------------------------------------------------------------
# nothing sent: no "may have been spent"; a url with whitespace or control characters inside
def test_a_url_read_from_a_file_is_stripped(fake):
    fake.answers["/v1/datasets"] = (200, {}, b"[]")
    assert Client(f" {fake.url}/\n", KEY, retries=0).datasets() == []


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/a b", "http://127.0.0.1:9\n/x", "http://127.0.0.1:9/\x00",
                                 "http://127.0.0.1:99999", "http://127.0.0.1:nine", "http://127.0.0.1:0"])
def test_a_url_with_whitespace_control_characters_or_a_bad_port_is_one_line_naming_url(url):
    with pytest.raises(ValueError, match="^url must be") as err:
        Client(url, KEY)
    assert "\n" not in str(err.value)


def test_a_refused_connection_or_an_invalid_address_does_not_say_the_budget_may_have_been_spent():
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = Client(f"http://127.0.0.1:{port}", KEY, retries=1)
    with pytest.raises(ConnectionError) as err:
        c.release("d", epsilon=0.1, idempotency_key="idem-F")
    msg = str(err.value)
    assert "spent" not in msg.replace("nothing was sent", "") and "Idempotency-Key" not in msg
    assert msg.endswith("; nothing was sent") and "\n" not in msg
    c.url = "http://127.0.0.1:9/a b"  # http.client refuses it before sending: not retried as lost
    with pytest.raises(ValueError, match="^url 'http://127.0.0.1:9/a b' does not make a valid request") as err:
        c.release("d", epsilon=0.1, idempotency_key="idem-F")
    assert "spent" not in str(err.value)


# ---------------------------------------------------------------------------------------
# arguments: real numbers the library takes are sent as numbers; others named in one line
def test_a_fraction_is_sent_as_its_float_and_other_types_are_named_in_one_line(fake):
    from decimal import Decimal
    from fractions import Fraction

    import numpy as np

    fake.answers["/v1/datasets/d/release"] = (200, {}, b"{}")  # the body is what is tested
    c = Client(fake.url, KEY, retries=0)
    with pytest.raises(Exception, match="not a result"):
        c.release("d", epsilon=Fraction(1, 20), delta=Fraction(1, 10**6))
    sent = json.loads(fake.seen[-1]["body"])
    assert sent["epsilon"] == 0.05 and sent["delta"] == 1e-6
    for name, bad in [("epsilon", Decimal("0.05")), ("epsilon", np.array(0.05)), ("delta", object())]:
        with pytest.raises(ValueError, match=f"^{name} must be a number or a string, got ") as err:
            c.release("d", **{"epsilon": 0.1, name: bad})
        assert "\n" not in str(err.value)
    assert len(fake.seen) == 1  # nothing sent


@pytest.mark.parametrize("key", ["a\nb", "a€", "", "a b", "x" * 129, 5])
def test_a_malformed_idempotency_key_is_one_line_naming_it_before_anything_is_sent(fake, key):
    with pytest.raises(ValueError, match="^idempotency_key must be 1-128 characters") as err:
        Client(fake.url, KEY, retries=0).estimate("d", epsilon=0.1, idempotency_key=key)
    assert "\n" not in str(err.value) and fake.seen == []


def test_the_clients_idempotency_key_form_is_the_services():
    pytest.importorskip("fastapi")
    from privirt import client
    from privirt.serve.service import IDEMPOTENCY_KEY
    assert client.IDEMPOTENCY_KEY is IDEMPOTENCY_KEY


@pytest.mark.parametrize("answer", [(404, {}, b'{"detail": "no such data set"}'), (200, {}, b"{}"), None])
def test_the_key_is_not_in_the_locals_of_a_failed_requests_traceback(fake, answer):
    # headers = {'Authorization': 'Bearer pva....'} was a local of Client._request, printed by
    # tools that show locals (pytest --showlocals, IPython's verbose mode, error trackers)
    import traceback

    from privirt.client import ServiceError

    url = fake.url
    if answer is None:  # a connection that fails
        fake.shutdown()
        fake.server_close()
    else:
        fake.answers["/v1/datasets/d/release"] = answer
    c = Client(url, KEY, retries=0)
    with pytest.raises((ServiceError, ConnectionError)) as err:
        c.release("d", epsilon=0.1)
    text = "".join(traceback.TracebackException.from_exception(err.value, capture_locals=True).format())
    assert SECRET not in text and "self = Client(" in text and repr(c._key) == "<hidden>"
    if answer is not None:
        assert fake.seen[-1]["headers"]["Authorization"] == f"Bearer {KEY}"


def _chain_with_locals(exc: BaseException) -> str:
    """Every exception chained to ``exc`` (causes and contexts, suppressed ones too), each
    formatted with its frames' locals."""
    import traceback

    out, todo, seen = [], [exc], set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        out.append("".join(traceback.TracebackException(type(e), e, e.__traceback__,
                                                        capture_locals=True).format(chain=False)))
        todo += [e.__cause__, e.__context__]
    return "\n".join(out)


_CALLS = {"datasets": lambda c: c.datasets(), "spends": lambda c: c.spends(), "result": lambda c: c.result("r1"),
          "estimate": lambda c: c.estimate("d", epsilon=0.1), "release": lambda c: c.release("d", epsilon=0.1)}


@pytest.mark.parametrize("call", sorted(_CALLS))
@pytest.mark.parametrize("failure", ["interrupted", "refused", "no answer", "404"])
def test_no_exception_chained_to_a_failed_call_holds_the_key_in_its_frames(fake, monkeypatch, call, failure):
    # urllib's do_open holds headers = {'Authorization': 'Bearer pva....'} in its locals: a Ctrl-C
    # during a GET kept its frame in the traceback, and every call's error chained (a suppressed
    # context) to urllib's error, whose traceback holds that frame
    import http.client
    import socket

    from privirt.client import ServiceError

    url, hold = fake.url, None
    if failure == "interrupted":
        def _interrupt(self, *args, **kwargs):  # Ctrl-C inside urllib's do_open
            raise KeyboardInterrupt
        monkeypatch.setattr(http.client.HTTPConnection, "request", _interrupt)
    elif failure == "refused":
        fake.shutdown()
        fake.server_close()
    elif failure == "no answer":  # a service that accepts and never answers
        hold = socket.socket()
        hold.bind(("127.0.0.1", 0))
        hold.listen(8)
        url = f"http://127.0.0.1:{hold.getsockname()[1]}"
    c = Client(url, KEY, retries=0, timeout=0.3)
    try:
        with pytest.raises((ServiceError, ConnectionError, KeyboardInterrupt)) as err:
            _CALLS[call](c)
    finally:
        if hold is not None:
            hold.close()
    if failure == "interrupted":  # it stays a KeyboardInterrupt
        assert err.type is KeyboardInterrupt
    text = _chain_with_locals(err.value)
    assert SECRET not in text and "self = Client(" in text


@pytest.mark.parametrize("failure", ["interrupted", "refused"])
def test_the_callers_own_exception_keeps_its_traceback(fake, monkeypatch, failure):
    # the frames were cut along the whole __context__ chain, into the exception the caller was
    # handling when it called the client: its traceback was set to None, in place (2769a67)
    import http.client
    import traceback

    if failure == "interrupted":
        def _interrupt(self, *args, **kwargs):
            raise KeyboardInterrupt
        monkeypatch.setattr(http.client.HTTPConnection, "request", _interrupt)
    else:
        fake.shutdown()
        fake.server_close()
    c = Client(fake.url, KEY, retries=0, timeout=0.3)

    def users_own_work():
        raise KeyError("row 17 of my own table")

    try:
        users_own_work()
    except KeyError as mine:
        saved = mine
        with pytest.raises((KeyboardInterrupt, ConnectionError)) as err:
            c.datasets()
    assert len(traceback.extract_tb(saved.__traceback__)) == 2  # this test and users_own_work
    assert SECRET not in _chain_with_locals(err.value)


def test_the_certificate_hint_follows_the_verify_error_and_the_cafile(tls_fake, tmp_path):
    # a host name mismatch with the right cafile, or a cafile of another CA, was told "use cafile="
    import subprocess

    with pytest.raises(ConnectionError) as err:  # the certificate names 127.0.0.1, not localhost
        Client(tls_fake.url.replace("127.0.0.1", "localhost"), KEY, retries=0, cafile=tls_fake.cafile).datasets()
    msg = str(err.value)
    assert "cafile=" not in msg and "put in url the host name or address the service's certificate was issued for" \
        in msg
    other = tmp_path / "other.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "o.key"),
                    "-out", str(other), "-days", "1", "-subj", "/CN=127.0.0.1"], capture_output=True, timeout=120,
                   check=True)
    with pytest.raises(ConnectionError) as err:
        Client(tls_fake.url, KEY, retries=0, cafile=other).datasets()
    msg = str(err.value)
    assert "cafile=" not in msg and f"cafile {str(other)!r} does not trust this certificate" in msg
    assert "\n" not in msg and tls_fake.seen == []



@pytest.mark.parametrize("bad, secret", [({"timeout": -1}, SECRET), ({"retries": -1}, SECRET),
                                         ({"cafile": ""}, SECRET), ({"url": "ftp://x"}, SECRET),
                                         ({"key": "pva.a bSECRET"}, "bSECRET"),
                                         ({"url": KEY, "key": "http://h"}, SECRET)])
def test_a_refused_argument_does_not_leave_the_key_in_the_frames_of_its_traceback(bad, secret):
    # the key was a local of Client.__init__ (and of _check_key) when another argument was
    # refused: a traceback shown with its locals printed it
    args = {"url": "http://127.0.0.1:9", "key": KEY, **bad}
    url, key = args.pop("url"), args.pop("key")
    with pytest.raises(ValueError) as err:
        Client(url, key, **args)
    assert "\n" not in str(err.value) and err.value.__context__ is None
    tb, held = err.value.__traceback__, []
    while tb is not None:  # the library's frames (the test's own hold the key, of course)
        if tb.tb_frame.f_globals["__name__"] == "privirt.client":
            held += [name for name, value in tb.tb_frame.f_locals.items() if secret in repr(value)]
        tb = tb.tb_next
    assert held == []


# ---------------------------------------------------------------------------------------
# a data set or request id that is not a str (an unset variable) is refused before sending
@pytest.mark.parametrize("call, name, bad", [("release", "dataset", None), ("estimate", "dataset", None),
                                            ("release", "dataset", 123), ("estimate", "dataset", b"d"),
                                            ("release", "dataset", ""), ("result", "request_id", None),
                                            ("result", "request_id", 7), ("result", "request_id", "")])
def test_a_dataset_or_request_id_that_is_not_a_str_is_one_line_naming_it_before_anything_is_sent(
        fake, call, name, bad):
    # str(None) == "None" was sent: an unset variable spent budget on a data set named "None"
    c = Client(fake.url, KEY, retries=0)
    run = {"release": lambda: c.release(bad, epsilon=0.1), "estimate": lambda: c.estimate(bad, epsilon=0.1),
           "result": lambda: c.result(bad)}[call]
    with pytest.raises(ValueError, match=f"^{name} must be ") as err:
        run()
    assert "\n" not in str(err.value) and fake.seen == []

# ---------------------------------------------------------------------------------------
# a url holding an API key (a connection file read whole, a key pasted into the address)
def _free_port() -> int:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("url", [f"http://127.0.0.1:9\n{KEY}\n", f"ftp://{KEY}", f"http://127.0.0.1:9/ {KEY}",
                                 f"http://127.0.0.1:99999/{KEY}", f"{KEY.upper()}\nhttp://127.0.0.1:9"])
def test_a_refused_url_holding_an_api_key_does_not_show_it(url):
    with pytest.raises(ValueError, match="^url must be") as err:
        Client(url, KEY)
    msg = str(err.value)
    assert SECRET.lower() not in msg.lower() and KEY[4:20] not in msg and "\n" not in msg


def test_a_url_holding_an_api_key_is_not_shown_by_later_errors_nor_by_repr(fake):
    from privirt.client import ServiceError

    port = _free_port()
    c = Client(f"http://127.0.0.1:{port}/{KEY}", KEY, retries=0)
    with pytest.raises(ConnectionError, match="^no answer from http://127.0.0.1") as err:
        c.datasets()
    assert SECRET not in str(err.value) and SECRET not in repr(c) and "<API key>" in repr(c)
    fake.answers[f"/{KEY}/v1/datasets"] = (302, {"Location": "elsewhere"}, b"")  # relative: joined to the url
    with pytest.raises(ServiceError, match="redirect") as err:
        Client(f"{fake.url}/{KEY}", KEY, retries=0).datasets()
    assert SECRET not in str(err.value) and SECRET not in str(err.value.body)


# ---------------------------------------------------------------------------------------
# https:// to a service that speaks plain HTTP: the TLS handshake fails before anything is sent
def test_https_to_a_plain_http_service_says_nothing_was_sent_and_to_use_http(fake):
    c = Client(fake.url.replace("http://", "https://"), KEY, retries=2)
    with pytest.raises(ConnectionError) as err:
        c.release("d", epsilon=0.1, idempotency_key="idem-T")
    msg = str(err.value)
    assert msg.endswith("; nothing was sent (the service did not answer TLS: is its address http://?)")
    assert "spent" not in msg and "Idempotency-Key" not in msg and "\n" not in msg
    assert fake.seen == []  # (the fake answers the handshake's bytes with a 400 and records nothing)


def _totals_body(missing: str = "none"):
    """A noisy totals release (counts below 0) and its service JSON."""
    import numpy as np

    import privirt
    from privirt.serve.service import _body

    X, _, _ = privirt.simulate_rasch(60, 5, seed=1)
    if missing == "mcar":
        X = X.astype(float)
        X[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    rel = privirt.release_totals(X, epsilon=0.3, seed=11, missing=missing)
    return rel, json.loads(json.dumps(_body("r-1", "ds", "release", {"kind": "totals"}, rel)))


def test_a_totals_release_from_the_service_json_is_checked_and_never_cast():
    import privirt
    from privirt.client import result_from_json

    bodies = {}
    for missing in ("none", "mcar"):  # as sent, negative counts and all: the same estimate
        rel, body = bodies[missing] = _totals_body(missing)
        assert min(body["result"]["totals"] + body["result"]["histogram"]) < 0
        got = result_from_json(body)
        assert (privirt.estimate_from_release(got, n_boot=0).beta.to_numpy()
                == privirt.estimate_from_release(rel, n_boot=0).beta.to_numpy()).all()
    cases = [
        (("totals", 0, 1.5), r"^the service's answer has totals entry 1\.5, not an integer"),
        (("totals", 0, None), r"^the service's answer has totals entry None, not an integer"),
        (("histogram", 1, "3"), r"^the service's answer has histogram entry '3', not an integer"),
        (("answered", 0, 2.5), r"^the service's answer has answered entry 2\.5, not an integer"),
        (("edges", 1, 1.5), r"^the service's answer has edges entry 1\.5, not an integer"),
        (("totals", 0, 10**30), r"^the service's answer has totals entry 10+, not an integer of 64 bits"),
        (("histogram", 0, 2**63), r"^the service's answer has histogram entry 9223372036854775808, not an "),
        (("edges", 0, 1e300), r"^the service's answer has edges entry 1e\+300, not an integer of 64 bits"),
        (("n_persons", None, 0), r"^the release's n_persons must be an integer ≥ 1, got 0; pass the TotalsRelease"),
        (("sigma_totals", None, -3), r"^the release's sigma_totals must be a finite number > 0, got -3; pass"),
        (("split", None, 5), r"^the release's split .* got 5; pass"),
    ]
    for (key, at, value), msg in cases:
        body = json.loads(json.dumps(bodies["mcar"][1]))
        if at is None:
            body["result"][key] = value
        else:
            body["result"][key][at] = value
        with pytest.raises(ValueError, match=msg) as exc:
            result_from_json(body)
        assert "\n" not in str(exc.value)


def test_a_body_of_another_result_type_or_lacking_a_field_is_refused_in_one_line():
    import numpy as np

    import privirt
    from privirt.client import result_from_json
    from privirt.serve.service import _body

    X, _, _ = privirt.simulate_rasch(60, 5, seed=1)
    counts = privirt.release_counts(X, epsilon=1.0, seed=3)
    base = json.loads(json.dumps(_body("r-1", "ds", "release", {"kind": "counts"}, counts)))
    assert np.array_equal(result_from_json(base).Y.to_numpy(), counts.Y.to_numpy())
    cases = [
        (lambda b: b["result"].__setitem__("type", "TwoPLRelease"),
         r"^unknown result type 'TwoPLRelease' \(a newer service\?\); update privirt"),
        (lambda b: b["result"].pop("type"), r"^unknown result type None"),
        (lambda b: b["result"].__setitem__("type", "TotalsRelease"),
         r"^the service's answer lacks the field 'totals' of a TotalsRelease; fetch the result again$"),
        (lambda b: b["result"].__setitem__("type", "PrivateSpectralResult"),
         r"^the service's answer lacks the field 'se' of a PrivateSpectralResult"),
        (lambda b: b["result"].pop("graph"), r"^the service's answer lacks the field 'graph' of a NoisyCounts"),
        (lambda b: b.pop("privacy"), r"^the service's answer lacks the field 'privacy' of a NoisyCounts"),
    ]
    for tamper, msg in cases:
        body = json.loads(json.dumps(base))
        tamper(body)
        with pytest.raises(ValueError, match=msg) as exc:
            result_from_json(body)
        assert "\n" not in str(exc.value)
