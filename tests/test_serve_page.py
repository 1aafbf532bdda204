"""The curator page in a real headless browser (Debian's chromium driven by playwright; no
browser download), and its login session (a random token in the cookie, never the key)."""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ._serve import LSAT6, Server, call, setup_state  # noqa: E402


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp("page")
    state = str(d / "state.db")
    keys = setup_state(state, {"lsat6": (LSAT6, 4.0, 1e-6, ["--weights-col", "frequency"]),
                               "lsat7": (LSAT6.with_name("lsat7.csv"), 3.0, 1e-6, ["--weights-col", "frequency"])},
                       {"alice": ["lsat6=2", "lsat7=1"], "bob": ["lsat6=1"]})
    server = Server(state)
    for who, ds, eps in (("alice", "lsat6", 0.3), ("bob", "lsat6", 0.2), ("alice", "lsat7", 0.4),
                         ("alice", "lsat6", 0.5), ("bob", "lsat6", 0.3)):
        st, _, _ = call(f"{server.url}/v1/datasets/{ds}/release", "POST", keys[who], {"kind": "counts", "epsilon": eps})
        assert st == 200
    call(f"{server.url}/v1/curator/analysts/bob/revoke", "POST", keys["curator"])
    yield {"url": server.url, "keys": keys, "dir": d}
    server.stop()


def test_page_needs_the_curator_key(served):
    s = served
    st, body, _ = call(s["url"] + "/curator")
    assert st == 401 and "Log in" in body["text"]
    for name in ("privirt_curator", "privirt_session"):  # a key in a cookie is not a session
        for key in (s["keys"]["alice"], s["keys"]["curator"]):
            st, body, _ = call(s["url"] + "/curator", headers={"Cookie": f"{name}={key}"})
            assert st == 401 and "lsat6" not in body["text"]
    st, body, h = call(s["url"] + "/curator", key=s["keys"]["curator"])
    assert st == 200 and "Audit log (5 spends" in body["text"]
    assert "default-src 'none'" in h["content-security-policy"] and "<script" not in body["text"]


def _login(url: str, key: str):
    import http.client

    port = int(url.rsplit(":", 1)[1])
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    con.request("POST", "/curator/login", body=f"key={key}", headers={"Content-Type": "application/x-www-form-urlencoded"})
    r = con.getresponse()
    r.read()
    con.close()
    return r.status, r.getheader("set-cookie")


def _token(set_cookie: str) -> str:
    first = set_cookie.split(";")[0]
    name, _, value = first.partition("=")
    assert name == "privirt_session"
    return value


def test_the_login_opens_a_server_side_session_that_logout_and_rotation_end(served, tmp_path):
    import http.client
    import sqlite3

    s = served
    st, cookie = _login(s["url"], s["keys"]["curator"])
    assert st == 303 and "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/curator" in cookie
    assert "Max-Age=28800" in cookie and "Secure" not in cookie  # plain http on loopback
    token = _token(cookie)
    assert len(token) >= 43 and token != s["keys"]["curator"] and s["keys"]["curator"].split(".")[2] not in cookie
    st, body, _ = call(s["url"] + "/curator", headers={"Cookie": f"privirt_session={token}"})
    assert st == 200 and "Audit log" in body["text"]
    # only the token's hash is stored
    state = str(s["dir"] / "state.db")
    raw = b"".join(open(p, "rb").read() for p in (state, state + "-wal") if os.path.exists(p))
    assert token.encode() not in raw
    # an expired session is refused
    st2, cookie2 = _login(s["url"], s["keys"]["curator"])
    token2 = _token(cookie2)
    with sqlite3.connect(state) as con:
        import hashlib

        con.execute("UPDATE sessions SET expires = 0 WHERE token_hash = ?", (hashlib.sha256(token2.encode()).hexdigest(),))
    st, _, _ = call(s["url"] + "/curator", headers={"Cookie": f"privirt_session={token2}"})
    assert st == 401
    # logging out ends the session on the server: the old cookie no longer works
    port = int(s["url"].rsplit(":", 1)[1])
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    con.request("POST", "/curator/logout", headers={"Cookie": f"privirt_session={token}"})
    r = con.getresponse()
    r.read()
    con.close()
    assert r.status == 303 and "privirt_session=" in r.getheader("set-cookie")
    st, _, _ = call(s["url"] + "/curator", headers={"Cookie": f"privirt_session={token}"})
    assert st == 401


def _post(url: str, path: str, headers: dict, body: str = ""):
    import http.client

    port = int(url.rsplit(":", 1)[1])
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    con.request("POST", path, body=body, headers={"Content-Type": "application/x-www-form-urlencoded", **headers})
    r = con.getresponse()
    r.read()
    con.close()
    return r.status, r.getheader("set-cookie")


def _sessions(served) -> int:
    import sqlite3

    with sqlite3.connect(str(served["dir"] / "state.db")) as con:
        return con.execute("SELECT count(*) FROM sessions").fetchone()[0]


def test_the_login_and_logout_forms_refuse_other_origins(served):
    """A page of another origin (another site, or another port of the same host: SameSite=Strict
    does not separate ports) could log the curator out; now such a POST gets 403 and changes
    nothing, while the page's own forms, a same-origin Origin and curl (neither header) pass."""
    s = served
    port = int(s["url"].rsplit(":", 1)[1])
    token = _token(_login(s["url"], s["keys"]["curator"])[1])
    cookie = {"Cookie": f"privirt_session={token}"}
    login = f"key={s['keys']['curator']}"
    foreign = [{"Sec-Fetch-Site": "cross-site", "Origin": f"http://localhost:{port + 1}"},
               {"Sec-Fetch-Site": "same-site", "Origin": f"http://127.0.0.1:{port + 1}"},
               {"Sec-Fetch-Site": "same-site", "Origin": "null"},
               {"Origin": f"http://127.0.0.1:{port + 1}"}, {"Origin": f"http://localhost:{port}"},
               {"Origin": f"https://127.0.0.1:{port}"}, {"Origin": "null"},
               {"Sec-Fetch-Site": "same-origin", "Origin": f"http://evil.example:{port}"}]
    for h in foreign:
        before = _sessions(s)
        st, set_cookie = _post(s["url"], "/curator/logout", {**h, **cookie})
        assert (st, set_cookie) == (403, None), h
        assert call(s["url"] + "/curator", headers=cookie)[0] == 200, h  # the session is still open
        st, set_cookie = _post(s["url"], "/curator/login", {**h, **cookie}, login)
        assert (st, set_cookie) == (403, None), h
        assert _sessions(s) == before, h
    # Chromium's own form under the page's Referrer-Policy: no-referrer; a matching Origin; the
    # default port left out of the origin is not at issue here (the test server has its own port)
    for h in ({"Sec-Fetch-Site": "same-origin", "Origin": "null"}, {"Sec-Fetch-Site": "none"},
              {"Origin": f"http://127.0.0.1:{port}"}, {"Sec-Fetch-Site": "same-origin", "Origin": s["url"]}):
        st, set_cookie = _post(s["url"], "/curator/login", h, login)
        assert st == 303 and set_cookie.startswith("privirt_session="), h
        st, set_cookie = _post(s["url"], "/curator/logout", {**h, "Cookie": set_cookie.split(";")[0]})
        assert st == 303 and "privirt_session=" in set_cookie, h
    assert _post(s["url"], "/curator/logout", cookie)[0] == 303  # neither header (curl): as before
    assert call(s["url"] + "/curator", headers=cookie)[0] == 401


def test_logging_in_again_ends_the_browsers_earlier_session(served):
    """"log in, log in again, log out" left the first session open for 8 hours (login replaced
    the cookie without ending its session); now the second login ends it."""
    s = served
    login = f"key={s['keys']['curator']}"
    first = _token(_login(s["url"], s["keys"]["curator"])[1])
    st, cookie = _post(s["url"], "/curator/login", {"Cookie": f"privirt_session={first}"}, login)
    second = _token(cookie)
    assert st == 303 and second != first
    assert call(s["url"] + "/curator", headers={"Cookie": f"privirt_session={first}"})[0] == 401
    assert _post(s["url"], "/curator/logout", {"Cookie": f"privirt_session={second}"})[0] == 303
    for token in (first, second):
        assert call(s["url"] + "/curator", headers={"Cookie": f"privirt_session={token}"})[0] == 401
    # a wrong key ends nothing
    third = _token(_login(s["url"], s["keys"]["curator"])[1])
    assert _post(s["url"], "/curator/login", {"Cookie": f"privirt_session={third}"}, "key=pvc.0.wrong")[0] == 401
    assert call(s["url"] + "/curator", headers={"Cookie": f"privirt_session={third}"})[0] == 200


def _raw(url: str, method: str, path: str, headers: dict | None = None, body=None):
    """One request by :mod:`http.client` (no redirect followed): ``(status, headers, text)``."""
    import http.client

    con = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=60)
    try:
        chunked = body is not None and not isinstance(body, str)  # an iterator: sent chunked
        con.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        r = con.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        con.close()


#: the security headers the curator page is served with (app._SECURITY_HEADERS)
_PAGE_HEADERS = ("content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy",
                 "cache-control")


@pytest.mark.parametrize("chunked", [False, True])
def test_a_key_over_the_body_limit_answers_the_login_page_not_json(served, chunked):
    """The login form with a key over the 16 KiB body limit answered the API's raw JSON 413."""
    s = served
    page = _raw(s["url"], "GET", "/curator")
    before = _sessions(s)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    body = "key=" + "A" * 20000
    status, headers, text = _raw(s["url"], "POST", "/curator/login", form, iter([body.encode()]) if chunked else body)
    assert status == 413 and headers["content-type"].startswith("text/html")
    assert "far too long" in text and "action='/curator/login'" in text and "detail" not in text
    assert {h: headers.get(h) for h in _PAGE_HEADERS} == {h: page[1][h] for h in _PAGE_HEADERS}
    assert _sessions(s) == before
    # the API's own 413 stays one JSON line
    status, headers, text = _raw(s["url"], "POST", "/v1/datasets/lsat6/release",
                                 {"Authorization": f"Bearer {s['keys']['alice']}"}, "x" * 20000)
    assert status == 413 and headers["content-type"] == "application/json" and "nothing was spent" in text


def test_get_of_the_login_and_logout_addresses_redirects_to_the_page(served):
    """After a failed login the address bar shows /curator/login: reloading it (a GET) answered
    405 with raw JSON; so did GET /curator/logout.  A GET must not log out (nothing changes)."""
    s = served
    page = _raw(s["url"], "GET", "/curator")
    token = _token(_login(s["url"], s["keys"]["curator"])[1])
    cookie = {"Cookie": f"privirt_session={token}"}
    for path in ("/curator/login", "/curator/logout"):
        status, headers, _ = _raw(s["url"], "GET", path, cookie)
        assert status == 303 and headers["location"] == "/curator"
        assert {h: headers.get(h) for h in _PAGE_HEADERS} == {h: page[1][h] for h in _PAGE_HEADERS}
    assert call(s["url"] + "/curator", headers=cookie)[0] == 200  # the session is still open


def test_rotating_the_curator_key_ends_the_page_sessions(tmp_path):
    from ._serve import cli, last_line

    state = str(tmp_path / "state.db")
    keys = setup_state(state, {"lsat6": (LSAT6, 4.0, 1e-6, ["--weights-col", "frequency"])}, {"alice": ["lsat6=1"]})
    server = Server(state)
    try:
        st, cookie = _login(server.url, keys["curator"])
        token = _token(cookie)
        assert call(server.url + "/curator", headers={"Cookie": f"privirt_session={token}"})[0] == 200
        new = last_line(cli("serve", "curator-key", state))
        assert call(server.url + "/curator", headers={"Cookie": f"privirt_session={token}"})[0] == 401
        assert call(server.url + "/curator", key=new)[0] == 200
    finally:
        server.stop()


def test_curator_page_in_headless_chromium(served):
    sync_api = pytest.importorskip("playwright.sync_api")
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium on the PATH (apt-get install chromium)")
    s = served
    shot = os.environ.get("PRIVIRT_SCREENSHOT") or str(s["dir"] / "curator.png")
    outside = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(s["url"]) else None)
            page.goto(s["url"] + "/curator")
            assert page.locator("input[name=key]").count() == 1
            page.fill("input[name=key]", "pvc.0000.wrong")
            page.click("button[type=submit]")
            assert "not accepted" in page.content()
            assert page.url.endswith("/curator/login")  # the address bar after a failed login: reloading
            page.goto(s["url"] + "/curator/login")  # it (a GET) lands on the page, not a 405's raw JSON
            assert page.url.endswith("/curator") and page.locator("input[name=key]").count() == 1
            page.fill("input[name=key]", s["keys"]["curator"])
            page.click("button[type=submit]")
            page.wait_for_selector("text=Audit log")
            assert page.url.endswith("/curator")
            cookies = page.context.cookies()
            (cookie,) = [c for c in cookies if c["name"] == "privirt_session"]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/curator"
            assert cookie["value"] != s["keys"]["curator"] and s["keys"]["curator"] not in cookie["value"]
            assert "privirt_session" not in page.evaluate("document.cookie")  # scripts cannot read it
            # the page survives a reload on the session alone
            page.reload()
            page.wait_for_selector("text=Audit log")
            # data sets, allowances (bob revoked), one plot per analyst, the audit log and the curator's actions
            tables = page.locator("table")
            assert tables.count() == 4
            assert {"analyst revoke", "curator-key"} <= set(tables.nth(3).locator("tbody td").all_inner_texts())
            assert tables.nth(0).locator("tbody tr").count() == 2
            assert tables.nth(1).locator("tbody tr").count() == 3
            assert "revoked" in tables.nth(1).inner_text()
            assert page.locator("figure svg").count() == 2
            assert page.locator("figure svg polyline").count() == 3  # alice: 2 data sets, bob: 1
            assert tables.nth(2).locator("tbody tr").count() == 5
            page.screenshot(path=shot, full_page=True)
            # logging out drops the cookie
            page.click("text=log out")
            page.wait_for_selector("input[name=key]")
            assert not [c for c in page.context.cookies() if c["name"] == "privirt_session"]
            # the server ended the session: putting the old cookie back does not log in
            page.context.add_cookies([{k: cookie[k] for k in ("name", "value", "domain", "path", "httpOnly",
                                                             "sameSite", "secure", "expires")}])
            page.goto(s["url"] + "/curator")
            assert page.locator("input[name=key]").count() == 1 and "Audit log" not in page.content()
        finally:
            browser.close()
    assert not outside, outside  # no external assets
    assert os.path.getsize(shot) > 10_000


def test_other_origins_cannot_log_the_curator_out_in_headless_chromium(served):
    """The reviewer's attack pages, now refused: a cross-site form that submits itself (the
    browser used to drop the cookie) and a same-site, other-port ``no-cors`` fetch (the server
    used to end the session)."""
    import http.server
    import threading

    sync_api = pytest.importorskip("playwright.sync_api")
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium on the PATH (apt-get install chromium)")
    s = served
    target = s["url"] + "/curator/logout"
    pages = {"/form": f"<form id=f method=post action='{target}'></form><script>f.submit()</script>",
             "/fetch": f"<script>fetch('{target}',{{method:'POST',mode:'no-cors',credentials:'include'}})"
                       ".then(()=>document.title='sent',()=>document.title='sent')</script>"}

    class Attacker(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = pages[self.path].encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    other = attacker.server_address[1]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        try:
            ctx = browser.new_context()
            page = ctx.new_page()
            page.goto(s["url"] + "/curator")
            page.fill("input[name=key]", s["keys"]["curator"])
            page.click("button[type=submit]")
            page.wait_for_selector("text=Audit log")
            (cookie,) = [c for c in ctx.cookies() if c["name"] == "privirt_session"]
            for url in (f"http://localhost:{other}/form", f"http://127.0.0.1:{other}/fetch"):
                evil = ctx.new_page()
                with evil.expect_response(lambda r: r.url == target) as answer:
                    evil.goto(url)
                assert answer.value.status == 403, url
                evil.close()
                assert [c["value"] for c in ctx.cookies() if c["name"] == "privirt_session"] == [cookie["value"]]
                st, _, _ = call(s["url"] + "/curator", headers={"Cookie": f"privirt_session={cookie['value']}"})
                assert st == 200, url  # the server did not end the session either
        finally:
            browser.close()
            attacker.shutdown()


def test_the_plot_composes_every_spend_and_shows_the_latest_400():
    """Over 400 spends the curve still ends at the composed total of every spend (it restarted
    from 0 at the 401st-latest spend)."""
    import datetime as dt
    import re

    from privirt.private.accounting import PrivacyCost, total_epsilon
    from privirt.serve.page import cumulative_epsilon, render_page

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    spends = [{"id": k + 1, "request_id": f"{k:032x}", "time": (t0 + dt.timedelta(minutes=k)).isoformat(),
               "analyst": "alice", "dataset": "d", "endpoint": "release", "mechanism": "laplace",
               "rho": 0.0 if k % 3 else 1e-4, "epsilon": 0.01 if k % 3 else 0.0, "delta": 0.0,
               "status": "done", "params": {"kind": "counts"}} for k in range(500)]
    total = float(total_epsilon([PrivacyCost(s["rho"], s["epsilon"], s["delta"]) for s in spends], 1e-6))
    shown = cumulative_epsilon(spends, 1e-6, last=400)
    assert len(shown) == 400 and shown == pytest.approx(cumulative_epsilon(spends, 1e-6)[-400:], rel=1e-12)
    assert shown[-1] == pytest.approx(total, rel=1e-9)
    allowance = 2.0
    html = render_page([], [{"analyst": "alice", "revoked": None, "dataset": "d", "epsilon": allowance,
                             "delta": 1e-6, "n_spends": 500, "spent_epsilon": total, "remaining_epsilon": 0.0}],
                       spends, [{"name": "alice", "created": "", "revoked": None}])
    ys = [float(p.split(",")[1]) for p in re.search(r'<polyline points="([^"]+)"', html).group(1).split()]
    H, T, B = 190, 10, 38
    ymax = max(allowance, total) * 1.08
    eps = [(1 - (y - T) / (H - T - B)) * ymax for y in ys]
    assert eps[-1] == pytest.approx(total, abs=0.02)
    assert eps[0] == pytest.approx(cumulative_epsilon(spends[:100], 1e-6)[-1], abs=0.02)  # not 0


def test_the_page_prints_spent_up_and_remaining_down():
    """The curator page printed spent and remaining ε to nearest (:.4g): 0.12345 spent showed as
    0.1234 (below it), 0.87655 remaining as 0.8766 (above it)."""
    from privirt.serve.page import render_page

    html = render_page([{"name": "d", "n_persons": 3, "items": ["a", "b"], "missing": "none", "epsilon": 1.0,
                         "delta": 1e-6, "spent_epsilon": 0.12345, "remaining_epsilon": 0.87655, "n_spends": 1}],
                       [], [], [])
    assert "<td class='num'>0.1235</td><td class='num'>0.8765</td>" in html


def test_the_login_page_says_the_cookie_holds_a_session_not_the_key():
    """It said "The key is kept in an HttpOnly cookie"; the cookie holds a random session token."""
    from privirt.serve.page import login_page

    for text in (login_page(), login_page(error=True)):
        assert "key is kept" not in text and "never the key" in text and "session" in text


def test_the_audit_log_heading_says_when_it_shows_only_the_newest_spends():
    """Over 1000 spends the heading counted all of them ("1200 spends") above the newest 1000
    rows; now it says that only those are shown and where all of them are."""
    import datetime as dt
    import re

    from privirt.serve.page import render_page

    AUDIT_ROWS = 1000  # the cap (privirt.serve.page.AUDIT_ROWS) is kept
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    spends = [{"id": k + 1, "request_id": f"{k:032x}", "time": (t0 + dt.timedelta(minutes=k)).isoformat(),
               "analyst": "alice", "dataset": "d", "endpoint": "release", "mechanism": "laplace", "rho": 0.0,
               "epsilon": 0.01, "delta": 0.0, "status": "done", "params": {"kind": "counts"}} for k in range(1200)]
    for n, heading in ((5, "Audit log (5 spends, newest first)"), (AUDIT_ROWS, f"({AUDIT_ROWS} spends, newest"),
                       (1200, f"the newest {AUDIT_ROWS} of 1200 spends")):
        html = render_page([], [], spends[:n], [])
        assert heading in html, n
        assert len(re.findall(r"<tr><td class='num'>\d+</td><td>2026", html)) == min(n, AUDIT_ROWS)
    assert "privirt serve list STATE</code> or <code>GET /v1/curator/spends" in html


def test_a_login_waiting_for_the_state_does_not_hold_the_workers_other_requests(served):
    """The login route ran the state's reads and writes on the event loop: while another process
    held the SQLite write lock, one login (even a wrong key's) froze every request of the worker,
    for up to the 60 s busy timeout."""
    import sqlite3
    import threading
    import time

    s = served
    lock = sqlite3.connect(str(s["dir"] / "state.db"), isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # a curator's `dataset add`, another worker's debits
    try:
        answered = {}
        login = threading.Thread(target=lambda: answered.update(login=_login(s["url"], s["keys"]["curator"])))
        login.start()
        time.sleep(1.0)  # the login reaches the state and waits for the lock
        status, body, _ = call(s["url"] + "/v1/health", timeout=15)  # (froze until the lock was let go)
        assert status == 200 and body == {"status": "ok"} and login.is_alive() and not answered
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    login.join(120)
    assert answered["login"][0] == 303 and answered["login"][1].startswith("privirt_session=")
