"""The noise-aware spectral bootstrap's linearised refits (``intervals.BOOTSTRAP_REFITS``).

Coverage is measured in ``benchmarks/bench_spectral_linboot.py`` (BENCHMARKS.md, "Session 29:
the spectral bootstrap's refits linearised"); here: the switch, that ``"full"`` never touches
the linearised path, that ``"auto"`` decides by the public number of items only, and that the
one-step refit of the simulation law's own expected counts is that law's full fit.
"""

from __future__ import annotations

import numpy as np
import pytest

import privirt
from privirt.private.counts import _linboot
from privirt.private.counts import intervals as iv
from privirt.private.counts._design import graph_design
from privirt.private.counts.ability import _pair_means
from privirt.private.counts.noisy_likelihood import noise_aware_batch


def _release(m: int, eps: float, seed: int, n: int = 2000):
    X, *_ = privirt.simulate_rasch(n, m, seed=seed)
    return privirt.release_counts(X, epsilon=eps, delta=1e-5, seed=seed + 1)


def _fit(rel, seed: int = 5):
    return privirt.spectral_from_release(rel, seed=seed, n_boot=20, estimator="noise_aware")


def test_the_switch_chooses_the_refits_and_says_which(monkeypatch):
    rel = _release(30, 1.0, 97_310_001)
    monkeypatch.setattr(iv, "BOOTSTRAP_REFITS", "one_step")
    one = _fit(rel)
    monkeypatch.setattr(iv, "BOOTSTRAP_REFITS", "full")
    full = _fit(rel)
    assert one.info["bootstrap_refits"] == "one_step" and full.info["bootstrap_refits"] == "full"
    assert not np.array_equal(one.se.to_numpy(), full.se.to_numpy())
    # the same replicates refitted two ways: the one-step se's near the full ones
    assert np.median(one.se.to_numpy() / full.se.to_numpy()) == pytest.approx(1.0, abs=0.1)
    monkeypatch.setattr(iv, "BOOTSTRAP_REFITS", "chord9")
    with pytest.raises(ValueError, match="BOOTSTRAP_REFITS must be"):
        _fit(rel)


def test_full_refits_never_touch_the_linearised_path(monkeypatch):
    rel = _release(30, 1.0, 97_310_011)
    monkeypatch.setattr(iv, "BOOTSTRAP_REFITS", "full")
    first = _fit(rel)

    def boom(*a, **k):
        raise AssertionError("the full refits took the linearised path")

    monkeypatch.setattr(iv, "linear_point", boom)
    monkeypatch.setattr(iv, "one_step_batch", boom)
    again = _fit(rel)  # bit for bit, with the linearised code unreachable
    np.testing.assert_array_equal(first.se.to_numpy(), again.se.to_numpy())
    np.testing.assert_array_equal(first.ci.to_numpy(), again.ci.to_numpy())


@pytest.mark.filterwarnings("ignore::privirt.exceptions.NoiseDominatesWarning")  # the ε = 0.05 release
def test_auto_decides_by_the_public_number_of_items_only(monkeypatch):
    monkeypatch.setattr(iv, "BOOTSTRAP_REFITS", "auto")
    # two releases of 24 items unlike in everything but m: noise-dominated and informative
    releases = [_release(24, 0.05, 97_310_021, n=300), _release(24, 3.0, 97_310_031)]
    for threshold, want in ((24, "one_step"), (25, "full"), (None, "full")):
        monkeypatch.setattr(iv, "LINEAR_REFITS_MIN_ITEMS", threshold)
        assert iv.bootstrap_refits(24) == want
        for rel in releases:
            assert _fit(rel).info["bootstrap_refits"] == want


def test_auto_adopts_the_one_step_refits_from_1000_items(monkeypatch):
    monkeypatch.setattr(iv, "BOOTSTRAP_REFITS", "auto")
    assert [iv.bootstrap_refits(m) for m in (20, 999, 1000, 5000)] == ["full", "full", "one_step", "one_step"]


def test_one_step_of_the_expected_counts_is_their_full_fit():
    # linearised at the full fit of the law's expected counts, one step from there on those
    # counts returns that fit (its τ² by the evidence on the shared factor)
    m, n, nu = 15, 3000, 400.0
    rng = np.random.default_rng(97_310_041)
    beta = rng.normal(size=m)
    beta -= beta.mean()
    G = ~np.eye(m, dtype=bool)
    design = graph_design(G)
    Yx = n * _pair_means(beta, 0.2, 1.1)
    point = _linboot.linear_point(Yx, design, nu, tol=1e-10)
    full = noise_aware_batch(Yx[None], G, nu, tol=1e-10, design=design)[0]
    np.testing.assert_allclose(point.beta0, full, atol=1e-12)
    got = _linboot.one_step_batch(Yx[None], point, design, nu, tol=1e-10)[0]
    np.testing.assert_allclose(got, full, atol=1e-3)
