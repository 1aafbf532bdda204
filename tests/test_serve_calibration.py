"""The totals release is calibrated once per public (ε, δ, n, m, domain) in a process: the
service prices a request and the library runs it on one calibration (``docs/serve.md``)."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms.measures import ApproxDP


def test_totals_calibration_is_computed_once_and_handed_out_as_copies(monkeypatch):
    from privirt.private import measurements as M

    M._calibrated_totals.cache_clear()
    calls = []
    inner = M.TotalsGaussian._calibrate.__func__

    def counting(cls, target, **kw):
        calls.append((target, kw))
        return inner(cls, target, **kw)

    monkeypatch.setattr(M.TotalsGaussian, "_calibrate", classmethod(counting))
    target = ApproxDP(0.5, 1e-6)
    a = M.TotalsGaussian.calibrate(target, n_persons=1000, n_items=5)
    b = M.TotalsGaussian.calibrate(ApproxDP(0.5, 1e-6), n_persons=1000, n_items=5)
    assert len(calls) == 1
    assert a is not b and a.sigmas == b.sigmas and a.cost == b.cost and np.array_equal(a.edges, b.edges)
    a.edges[0] = 99  # a caller's change never reaches the cache
    c = M.TotalsGaussian.calibrate(target, n_persons=1000, n_items=5)
    assert c.edges[0] == b.edges[0] != 99
    # other public values are other calibrations, each exactly the uncached one
    d = M.TotalsGaussian.calibrate(target, n_persons=1001, n_items=5, missing="mcar")
    assert len(calls) == 2
    fresh = inner(M.TotalsGaussian, target, n_persons=1001, n_items=5, missing="mcar")
    assert d.sigmas == fresh.sigmas and d.cost == fresh.cost and d.notes == fresh.notes
    assert np.array_equal(d.k_edges, fresh.k_edges)
    with pytest.raises(ValueError):  # errors are raised every time, never cached
        M.TotalsGaussian.calibrate(ApproxDP(1e-12, 1e-6), n_persons=1000, n_items=5)


def test_a_service_request_calibrates_the_totals_release_once(tmp_path, monkeypatch):
    import privirt
    from privirt.private import measurements as M
    from privirt.serve import service as S
    from privirt.serve.service import register_dataset, run_request
    from privirt.serve.store import init_store

    store = init_store(tmp_path / "s.db")
    X = privirt.as_responses(privirt.load_dataset("lsat6"))
    register_dataset(store, name="lsat6", resp=X, epsilon=10.0, delta=1e-6, items=None, n_persons=None,
                     missing="none", source="t")
    who = store.authenticate(store.add_analyst("a", {"lsat6": (10.0, 1e-6)}), "analyst")
    M._calibrated_totals.cache_clear()
    S._calibrated_cost.cache_clear()
    calls = []
    inner = M.TotalsGaussian._calibrate.__func__
    monkeypatch.setattr(M.TotalsGaussian, "_calibrate",
                        classmethod(lambda cls, t, **kw: calls.append(1) or inner(cls, t, **kw)))
    body, _ = run_request(store, who, "lsat6", "estimate",
                          {"method": "totals", "epsilon": 0.37, "delta": 1e-6, "confidence": 0.95, "n_boot": 0},
                          None)
    assert len(calls) == 1  # priced and run on one calibration
    assert body["cost"]["rho"] == M.TotalsGaussian.calibrate(ApproxDP(0.37, 1e-6), n_persons=1000,
                                                             n_items=5).cost.rho
