"""A service state edited by hand (the curator may: docs/serve.md) with a budget or a cost that
SQLite's CHECK constraints let through — text, an infinity — is a damaged state: one line at
``serve list`` / ``serve run``, a 503 with nothing spent for a request of a running service;
never a traceback or an unlimited budget."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from ._serve import asgi_call, cli  # noqa: E402

EDITS = [
    "UPDATE allowances SET epsilon = 9e999",
    "UPDATE allowances SET epsilon = 'abc'",
    "UPDATE datasets SET epsilon = 9e999",
    "UPDATE datasets SET epsilon = 'abc'",
    "UPDATE spends SET rho = 9e999",
    "UPDATE spends SET rho = 'abc'",
    "UPDATE spends SET epsilon = 9e999",
]


def _edit(path: Path, sql: str) -> None:
    con = sqlite3.connect(path)
    try:
        assert con.execute(sql).rowcount == 1
        con.commit()
    finally:
        con.close()


def _state(tmp_path):
    """A state with data set ``d`` (ε = 20), analyst ``a`` (allowance ε = 1) and one spend of ε = 0.5."""
    import privirt
    from privirt.serve import service
    from privirt.serve.app import create_app
    from privirt.serve.store import init_store

    store = init_store(str(tmp_path / "s.db"))
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=20.0, delta=1e-6, items=None, n_persons=None,
                             missing="none", source="test")
    key = store.add_analyst("a", {"d": (1.0, 1e-6)})
    app = create_app(store)
    status, body, _ = asgi_call(app, "POST", "/v1/datasets/d/release", key, {"epsilon": 0.5})
    assert status == 200, body
    return store, app, key


@pytest.mark.parametrize("sql", EDITS)
def test_a_running_service_answers_503_and_spends_nothing(tmp_path, sql):
    store, app, key = _state(tmp_path)
    _edit(tmp_path / "s.db", sql)
    status, body, _ = asgi_call(app, "POST", "/v1/datasets/d/release", key, {"epsilon": 0.9})  # over ε = 1
    assert status == 503 and "nothing was spent" in body["detail"], (status, body)
    assert store.counts()["spends"] == 1
    status, body, _ = asgi_call(app, "GET", "/v1/datasets", key)  # the analyst's listing too
    assert status == 503, (status, body)
    curator = store.new_curator_key()
    for listing in ("/v1/curator/datasets", "/v1/curator/allowances", "/v1/curator/spends"):
        status, body, _ = asgi_call(app, "GET", listing, curator)
        assert status in (200, 503), (listing, status, body)  # (a listing without the bad value is whole)


@pytest.mark.parametrize("sql", EDITS)
def test_serve_list_and_run_say_the_state_is_damaged_in_one_line(tmp_path, sql, monkeypatch):
    import uvicorn

    def never(*a, **k):
        raise AssertionError("uvicorn started")

    monkeypatch.setattr(uvicorn, "run", never)
    _state(tmp_path)
    state = tmp_path / "s.db"
    _edit(state, sql)
    for args in (("list", state), ("run", state)):
        proc = cli("serve", *args, check=False)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert f"the state {state} is damaged" in proc.stderr and "nothing was spent" in proc.stderr
