"""The curator page in a real headless browser (Debian's chromium driven by playwright; no
browser download), and its login cookie."""

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
    st, body, _ = call(s["url"] + "/curator", headers={"Cookie": f"privirt_curator={s['keys']['alice']}"})
    assert st == 401 and "lsat6" not in body["text"]
    st, body, h = call(s["url"] + "/curator", key=s["keys"]["curator"])
    assert st == 200 and "Audit log (5 spends" in body["text"]
    assert "default-src 'none'" in h["content-security-policy"] and "<script" not in body["text"]


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
            page.fill("input[name=key]", s["keys"]["curator"])
            page.click("button[type=submit]")
            page.wait_for_selector("text=Audit log")
            assert page.url.endswith("/curator")
            cookies = page.context.cookies()
            (cookie,) = [c for c in cookies if c["name"] == "privirt_curator"]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            assert "privirt_curator" not in page.evaluate("document.cookie")  # scripts cannot read it
            # data sets, allowances (bob revoked), one plot per analyst, the audit log
            tables = page.locator("table")
            assert tables.count() == 3
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
            assert not [c for c in page.context.cookies() if c["name"] == "privirt_curator"]
        finally:
            browser.close()
    assert not outside, outside  # no external assets
    assert os.path.getsize(shot) > 10_000
