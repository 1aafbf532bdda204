"""The remaining ε of ``GET /v1/datasets``: cached on exactly what it is a function of (the spends'
sums and the (ε, δ) target), the same value as the bisection computed before, and computed under
the analyst's in-flight cap (one analyst's listings cannot take the server's threads from others)."""

from __future__ import annotations

import threading

import pytest

import privirt.private._sums as sums_module
from privirt.private._sums import SpendSums


def _load_reference():
    """The bisection as it was (100 halvings, no early stop, no cache): the benchmark's peer."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_remaining_epsilon.py"
    spec = importlib.util.spec_from_file_location("bench_remaining_epsilon", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._full_bisection


_old_largest_pure_fit = _load_reference()


_SPENDS = [
    [],
    [(0.0, 0.01, 0.0)] * 100,
    [(0.0, 0.3, 0.0), (0.0, 0.2, 0.0)],
    [(0.002, 0.0, 0.0)] * 7 + [(0.0, 0.05, 0.0)] * 3,
    [(0.01, 0.0, 0.0), (0.0, 0.1, 1e-7)],
    [(0.0, 0.01, 0.0)] * 3 + [(0.0004, 0.0, 2e-9)] * 4,
    [(0.2, 0.0, 0.0)],  # over a small budget: 0
    [(0.0, 0.999999999, 0.0)],  # a remainder tiny beside ε
    [(0.0, 1e-6, 0.0)] * 5,
]
_TARGETS = [(1.0, 1e-5), (0.5, 1e-6), (3.0, 1e-9), (1e-3, 0.1)]


@pytest.fixture
def classic(monkeypatch):
    """The closed-form conversion (cheap) in place of the tight one, and an empty cache before and
    after (the cache's key does not hold the conversion)."""
    convert = sums_module.zcdp_to_approx_dp
    monkeypatch.setattr(sums_module, "zcdp_to_approx_dp",
                        lambda rho, delta, tight=True: convert(rho, delta, tight=False))
    sums_module._largest_pure_fit.cache_clear()
    yield
    sums_module._largest_pure_fit.cache_clear()


def test_the_remaining_epsilon_equals_the_full_bisection_on_many_sums(classic):
    for spends in _SPENDS:
        sums = SpendSums.of(spends)
        for epsilon, delta in _TARGETS:
            assert sums.largest_pure_fit(epsilon, delta) == _old_largest_pure_fit(sums, epsilon, delta), \
                (spends[:2], epsilon, delta)


def test_the_remaining_epsilon_equals_the_full_bisection_with_the_tight_conversion():
    sums_module._largest_pure_fit.cache_clear()
    sums = SpendSums.of([(0.0, 0.005, 0.0)] * 40 + [(0.0005, 0.0, 1e-8)] * 3)
    assert sums.largest_pure_fit(1.0, 1e-5) == _old_largest_pure_fit(sums, 1.0, 1e-5)


def test_a_second_call_on_the_same_sums_converts_nothing(classic, monkeypatch):
    calls = []
    convert = sums_module.zcdp_to_approx_dp

    def counted(*args, **kwargs):
        calls.append(args)
        return convert(*args, **kwargs)

    monkeypatch.setattr(sums_module, "zcdp_to_approx_dp", counted)
    sums = SpendSums.of([(0.002, 0.0, 0.0)] * 7 + [(0.0, 0.05, 0.0)] * 3)
    first = sums.largest_pure_fit(1.0, 1e-5)
    assert calls  # the first call computes
    calls.clear()
    assert SpendSums.of([(0.002, 0.0, 0.0)] * 7 + [(0.0, 0.05, 0.0)] * 3).largest_pure_fit(1.0, 1e-5) == first
    assert calls == []
    # other sums or another target are computed afresh (the key is exactly what the value reads)
    assert sums.plus((0.0, 0.01, 0.0)).largest_pure_fit(1.0, 1e-5) < first and calls
    calls.clear()
    assert sums.largest_pure_fit(1.0, 1e-6) != first and calls


def test_an_analysts_listings_beyond_the_cap_are_429_while_anothers_is_served(tmp_path, monkeypatch):
    """With ``max_in_flight=1``: while one ``GET /v1/datasets`` of analyst a is being computed, a's
    next one is a 429 (Retry-After) and b's is answered; a's slot is given back after."""
    pytest.importorskip("fastapi")
    import privirt
    from privirt.serve import service
    from privirt.serve.app import create_app
    from privirt.serve.store import Store, init_store

    from ._serve import asgi_call

    store = init_store(str(tmp_path / "s.db"))
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=5.0, delta=1e-6, items=None, n_persons=None,
                             missing="none", source="test")
    key_a = store.add_analyst("a", {"d": (2.0, 1e-6)})
    key_b = store.add_analyst("b", {"d": (2.0, 1e-6)})
    a = store.authenticate(key_a, "analyst")
    app = create_app(store, max_in_flight=1)

    entered, go = threading.Event(), threading.Event()
    listing = Store.datasets_for

    def slow(self, analyst_id):
        if analyst_id == a.id:
            entered.set()
            go.wait(30)
        return listing(self, analyst_id)

    monkeypatch.setattr(Store, "datasets_for", slow)
    first = {}
    thread = threading.Thread(target=lambda: first.update(r=asgi_call(app, "GET", "/v1/datasets", key_a)))
    thread.start()
    try:
        assert entered.wait(30)
        status, body, headers = asgi_call(app, "GET", "/v1/datasets", key_a)
        assert status == 429 and "retry" in body["detail"] and headers["retry-after"] == "5"
        status, body, _ = asgi_call(app, "GET", "/v1/datasets", key_b)
        assert status == 200 and [d["name"] for d in body] == ["d"]
    finally:
        go.set()
        thread.join(30)
    assert first["r"][0] == 200 and [d["name"] for d in first["r"][1]] == ["d"]
    assert app.state.in_flight.running(a.id) == 0
    assert asgi_call(app, "GET", "/v1/datasets", key_a)[0] == 200


@pytest.mark.parametrize("listing", ["datasets_for", "allowances", "datasets"])
def test_the_listings_compute_remaining_epsilon_after_their_transaction(tmp_path, monkeypatch, listing):
    # the bisection ran inside the read transaction, whose PostgreSQL deadline (30 s) it then used
    # up: about 500 allowances made every `privirt serve list` fail as "PostgreSQL stopped"
    import privirt
    from privirt.serve import service, store as store_module
    from privirt.serve.store import init_store

    store = init_store(str(tmp_path / "s.db"))
    resp = privirt.as_responses(privirt.load_dataset("lsat6"))
    service.register_dataset(store, name="d", resp=resp, epsilon=5.0, delta=1e-6, items=None, n_persons=None,
                             missing="none", source="test")
    key = store.add_analyst("a", {"d": (2.0, 1e-6)})
    who = store.authenticate(key, "analyst")
    service.run_request(store, who, "d", "release", {"kind": "totals", "epsilon": 0.3}, None)
    real_read, real_remaining, open_now, calls = store._b.read, store_module.remaining_epsilon, [], []

    def read(*args, **kwargs):
        class Watched:
            def __enter__(self):
                self.inner = real_read(*args, **kwargs)
                open_now.append(True)
                return self.inner.__enter__()

            def __exit__(self, *exc):
                open_now.pop()
                return self.inner.__exit__(*exc)
        return Watched()

    def remaining(*args):
        calls.append(bool(open_now))
        return real_remaining(*args)

    monkeypatch.setattr(store._b, "read", read)
    monkeypatch.setattr(store_module, "remaining_epsilon", remaining)
    rows = store.datasets_for(who.id) if listing == "datasets_for" else getattr(store, listing)()
    assert rows and calls and not any(calls), calls
