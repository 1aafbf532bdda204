"""A SQLite state write-locked by another process: the debit's write transaction cannot be opened,
so the answer is the documented "nothing was spent" 503 (not "the budget may have been spent");
a failure at the COMMIT itself still answers that the debit is unconfirmed."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

import pytest

import privirt
from privirt.serve import _backends, service
from privirt.serve.store import Store, init_store

PARAMS = {"kind": "counts", "epsilon": 0.3, "delta": None, "mechanism": "gaussian"}


@pytest.fixture
def state(tmp_path):
    """A state with one data set and one analyst, opened with a 0.2 s busy timeout."""
    path = str(tmp_path / "s.db")
    store = init_store(path)
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=5.0, delta=1e-6, items=None, n_persons=None,
                             missing="none", source="test")
    key = store.add_analyst("a", {"d": (2.0, 1e-6)})
    store._b.close()  # (its connection has the default 60 s timeout)
    quick = Store(_backends._SQLite(path, timeout=0.2))
    yield path, quick, quick.authenticate(key, "analyst")
    quick._b.close()


def test_a_state_locked_by_another_process_answers_nothing_was_spent(state):
    path, store, who = state
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock past the timeout
    try:
        with pytest.raises(service.RequestFailed) as err:
            service.run_request(store, who, "d", "release", PARAMS, None)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert err.value.status == 503 and err.value.detail == service.STATE_UNAVAILABLE
    assert "nothing was spent" in err.value.detail and "may have been spent" not in err.value.detail
    assert err.value.headers["Retry-After"] == "5" and "request_id" not in err.value.extra
    assert store.counts() == {"requests": 0, "spends": 0}
    body, replayed = service.run_request(store, who, "d", "release", PARAMS, None)  # unlocked: it runs
    assert not replayed and store.counts() == {"requests": 1, "spends": 1}


def test_a_failure_at_the_commit_still_says_the_budget_may_have_been_spent(state, monkeypatch):
    path, store, who = state
    real = _backends.immediate_transaction

    @contextmanager
    def commit_locked(con):
        with real(con):
            yield
            raise sqlite3.OperationalError("database is locked")  # as a COMMIT that found the file busy

    monkeypatch.setattr(_backends, "immediate_transaction", commit_locked)
    monkeypatch.setattr(service, "_confirm", lambda store, request_id: None)  # (no waits for its retries)
    with pytest.raises(service.RequestFailed) as err:
        service.run_request(store, who, "d", "release", PARAMS, None)
    assert err.value.status == 503 and "may have been spent" in err.value.detail
    assert err.value.extra["request_id"]
