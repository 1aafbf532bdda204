"""Private totals estimator: sensitivity (exhaustive), release discipline, estimation, intervals."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.private.totals import marginal, shrinkage
from privirt.private.accounting import zcdp_to_approx_dp
from privirt.private.totals.api import (
    estimate_from_release,
    private_totals_estimate,
    release_totals,
    totals_sensitivity,
    totals_statistics,
)
from tests._memory import traced_peak

mechanisms = pytest.importorskip("mechanisms")


def _rasch(n=400, m=6, seed=0):
    X, _, beta = privirt.simulate_rasch(n, m, seed=seed)
    return X, beta


def _layouts(m):
    """Every bin layout of the scores 0..m into 1 … m+1 contiguous bins."""
    for B in range(1, m + 2):
        for cuts in itertools.combinations(range(1, m + 1), B - 1):
            yield np.array((0,) + cuts + (m + 1,))


# -- sensitivity ----------------------------------------------------------------------------
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
def test_sensitivity_exhaustive_over_all_pairs_of_rows(m):
    rows = np.array(list(itertools.product([0, 1], repeat=m)), dtype=np.int8)
    for edges in _layouts(m):
        B = len(edges) - 1
        stats_ = [np.concatenate(totals_statistics(r[None, :], edges)) for r in rows]
        worst_l2 = worst_l1 = 0
        for a, b in itertools.combinations(range(len(rows)), 2):
            d = stats_[a] - stats_[b]
            worst_l2 = max(worst_l2, int(d @ d))
            worst_l1 = max(worst_l1, int(np.abs(d).sum()))
        sens = totals_sensitivity(m, B)
        assert worst_l2 <= sens.l2**2 and worst_l1 <= sens.l1
        # the bound is attained (all-ones vs all-zeros fall in different bins when B >= 2)
        assert worst_l2 == (m + 2 if B >= 2 else m) == worst_l1


def _grid_layouts(m):
    """Every product layout (answered bins) × (score bins), each contiguous over 0..m."""
    one = list(_layouts(m))
    return [(ke, re) for ke in one for re in one]


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_missing_sensitivity_exhaustive_over_all_pairs_of_rows_and_masks(m):
    from privirt.private.totals.api import missing_sensitivity, missing_statistics

    rows = np.array(list(itertools.product([0, 1, -1], repeat=m)), dtype=np.int8)
    for ke, re in _grid_layouts(m):
        K, R = len(ke) - 1, len(re) - 1
        S = np.array([np.concatenate([v.ravel() for v in missing_statistics(r[None, :], ke, re)]) for r in rows])
        D = S[:, None, :] - S[None, :, :]
        worst_l2 = int((D * D).sum(axis=2).max())
        worst_l1 = int(np.abs(D).sum(axis=2).max())
        sens = missing_sensitivity(m, K * R)
        assert worst_l2 <= sens.l2**2 + 1e-9 and worst_l1 <= sens.l1
        assert worst_l2 == worst_l1 == (2 * m + 2 if K * R >= 2 else 2 * m)  # attained


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_add_remove_sensitivities_of_the_totals_are_m_plus_1_and_2m_plus_1(m):
    """Under add/remove the difference between neighbours is one row's own statistics, so the
    bound is the largest of those: m + 1 (complete) and 2m + 1 (mcar), for every bin layout —
    not half of the replace bounds m + 2 and 2m + 2 (issue 21.2)."""
    from privirt.private.totals.api import missing_sensitivity, missing_statistics

    rows = np.array(list(itertools.product([0, 1], repeat=m)), dtype=np.int8)
    for edges in _layouts(m):
        S = np.array([np.concatenate(totals_statistics(r[None, :], edges)) for r in rows])
        sens = totals_sensitivity(m, len(edges) - 1, relation="add_remove")
        assert int((S * S).sum(axis=1).max()) == int(np.abs(S).sum(axis=1).max()) == m + 1
        assert sens.l1 == m + 1 and sens.l2 ** 2 == pytest.approx(m + 1) and "add or remove" in sens.relation
    rows = np.array(list(itertools.product([0, 1, -1], repeat=m)), dtype=np.int8)
    for ke, re in _grid_layouts(m):
        S = np.array([np.concatenate([v.ravel() for v in missing_statistics(r[None, :], ke, re)]) for r in rows])
        sens = missing_sensitivity(m, (len(ke) - 1) * (len(re) - 1), relation="add_remove")
        assert int((S * S).sum(axis=1).max()) == int(np.abs(S).sum(axis=1).max()) == 2 * m + 1
        assert sens.l1 == 2 * m + 1 and sens.l2 ** 2 == pytest.approx(2 * m + 1)
    with pytest.raises(ValueError, match="relation"):
        totals_sensitivity(m, 2, relation="add")


def test_missing_statistics_of_a_larger_data_set_add_up():
    from privirt.private.totals.api import missing_statistics

    rng = np.random.default_rng(3)
    X = rng.choice(np.array([0, 1, -1], dtype=np.int8), size=(500, 7), p=[0.4, 0.4, 0.2])
    ke, re = np.array([0, 3, 6, 8]), np.array([0, 2, 8])
    t, a, j = missing_statistics(X, ke, re)
    assert t.tolist() == (X == 1).sum(axis=0).tolist() and a.tolist() == (X != -1).sum(axis=0).tolist()
    h2 = np.histogram2d((X != -1).sum(axis=1), (X == 1).sum(axis=1), bins=[ke, re])[0]
    assert j.sum() == 500 and j.tolist() == h2.astype(int).tolist()


def test_statistics_of_a_larger_data_set_add_up():
    X, _ = _rasch(n=300, m=7)
    edges = np.array([0, 2, 5, 8])
    t, h = totals_statistics(X.astype(np.int8), edges)
    assert t.tolist() == X.sum(axis=0).astype(int).tolist()
    assert h.sum() == 300 and h.tolist() == np.histogram(X.sum(axis=1), bins=edges)[0].tolist()


# -- calibration and the statement ------------------------------------------------------------
# -- the marginal maths ------------------------------------------------------------------------
def test_score_distribution_matches_enumeration_of_all_patterns():
    rng = np.random.default_rng(7)
    m = 6
    beta = rng.normal(0, 2, size=(2, m))
    theta, _ = marginal.ability_grid(np.log([0.5, 3.0]), kappa=np.array([0.0, 0.8]))
    pats = np.array(list(itertools.product([0, 1], repeat=m)))
    got = marginal.score_distribution(beta, theta)
    for t in range(2):
        pr = 1.0 / (1.0 + np.exp(beta[t][None, :, None] - theta[t][None, None, :]))  # (1, m, Q)
        like = np.prod(np.where(pats[:, :, None] == 1, pr, 1 - pr), axis=1)  # (patterns, Q)
        want = np.stack([like[pats.sum(axis=1) == r].sum(axis=0) for r in range(m + 1)], axis=1)
        assert np.allclose(got[t], want, atol=1e-12)


def test_batched_bootstrap_fit_equals_one_fit_at_a_time():
    X, _ = _rasch(n=1500, m=8, seed=4)
    rel = release_totals(X, epsilon=2.0, seed=3)
    n, edges = rel.n_persons, rel.edges
    vt, vh = rel.sigma_totals**2, rel.sigma_histogram**2
    p0 = shrinkage.centre_totals(rel.totals.to_numpy(float), n, vt)
    fit = marginal.fit_spread(p0, rel.histogram.to_numpy(float), n, vh, edges)
    support = fit.support()
    rng = np.random.default_rng(0)
    P = np.clip(p0[None, :] + rng.normal(0, 0.02, (5, p0.size)), 0.01, 0.99)
    H = rel.histogram.to_numpy(float)[None, :] + rng.normal(0, 20, (5, len(edges) - 1))
    theta, w = marginal.ability_grid(support[0], kappa=support[1], lam=support[2])
    start = marginal.invert_marginals(p0, theta, w)
    got = marginal.fit_support_batch(P, H, n, vh, edges, support, initial=start)
    for r in range(5):
        one = marginal.fit_spread(P[r], H[r], n, vh, edges, support=support).beta
        assert np.allclose(got[r], one, atol=1e-5)


@pytest.mark.parametrize("eps", [0.05, 1.0, 5.0])
def test_release_meets_the_target_and_states_it(eps):
    X, _ = _rasch()
    rel = release_totals(X, epsilon=eps, delta=1e-5)
    p = rel.privacy
    m, B = X.shape[1], len(rel.edges) - 1
    rho = m / (2 * rel.sigma_totals**2) + 2 / (2 * rel.sigma_histogram**2)
    assert p.rho == pytest.approx(rho, rel=1e-9) and p.rho >= rho * (1 - 1e-12)
    assert p.epsilon <= eps * (1 + 1e-12) and zcdp_to_approx_dp(p.rho, 1e-5) <= eps * (1 + 1e-12)
    assert p.epsilon >= eps * 0.999  # the budget is used, not wasted
    assert p.sensitivity.l2**2 >= m + 2 and p.private and "NOT PRIVATE" not in str(p)
    assert "comparison graph" not in str(p) and "item totals" in str(p)
    # the split is the ρ share of the histogram
    assert rel.split == pytest.approx((2 / (2 * rel.sigma_histogram**2)) / rho, rel=1e-6)
    assert rel.histogram.size == B and rel.totals.dtype == np.int64
    assert rel.to_dict()["n_persons"] == X.shape[0]


def test_design_depends_on_public_quantities_only():
    f1, e1 = marginal.optimal_split(1000, 20, 0.04)
    f2, e2 = marginal.optimal_split(1000, 20, 0.04)
    assert f1 == f2 and np.array_equal(e1, e2)
    assert 0.0 < f1 < 0.6 and e1[0] == 0 and e1[-1] == 21 and np.all(np.diff(e1) > 0)
    # more budget never gives fewer bins
    _, e_big = marginal.optimal_split(1000, 20, 4.0)
    assert len(e_big) >= len(e1)


# -- ledger, seeds, bad input ----------------------------------------------------------------------
def test_ledger_debited_before_noise(tmp_path, noise_watch):
    X, _ = _rasch()
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=2.0, delta=1e-5)
    seen = noise_watch(led)  # the ledger's spends at each noise draw
    rel = release_totals(X, epsilon=1.0, delta=1e-5, ledger=led)
    assert seen == [1, 1]  # totals and histogram, both after the one debit
    assert rel.privacy.ledger_spend_id == 1
    assert led.spends().iloc[0]["rho"] == pytest.approx(rel.privacy.rho)


def test_bad_input_spends_nothing(tmp_path, forbid_noise):
    X, _ = _rasch()
    path = tmp_path / "l.ledger"
    led = privirt.Ledger(path, epsilon=1.0, delta=1e-5)

    forbid_noise()
    before = path.read_bytes()
    Xm = X.copy()
    Xm[0, 0] = np.nan
    cases = [
        (dict(X=Xm, epsilon=0.5), "private_spectral_estimate"),
        (dict(X=X, epsilon=0.0), "epsilon"),
        (dict(X=X, epsilon=float("inf")), "epsilon"),
        (dict(X=X, epsilon=0.5, delta=2.0), "delta"),
        (dict(X=X, epsilon=0.5, confidence=1.5), "confidence"),
        (dict(X=X, epsilon=0.5, n_boot=5), "n_boot"),
        (dict(X=X, epsilon=0.5, seed=-1), "seed"),
        (dict(X=X, epsilon=0.5, seed=3), "seed"),  # seeded noise with a ledger
        (dict(X=pd.DataFrame(X, columns=list("abcdef")), epsilon=0.5, items=list("abcde")), "not in the public item set"),
    ]
    for kwargs, word in cases:
        with pytest.raises(ValueError, match=word) as exc:
            private_totals_estimate(ledger=led, **kwargs)
        assert "\n" not in str(exc.value)
    with pytest.raises(privirt.BudgetExceeded):
        private_totals_estimate(X, epsilon=1.5, ledger=led)
    assert path.read_bytes() == before and len(led.spends()) == 0
    # ε = 1e-300: refused by the rule every private method shares (accounting.MIN_EPSILON,
    # docs/privacy.md §5), in one line, with nothing spent
    with pytest.raises(ValueError, match="below the smallest ε") as exc:
        private_totals_estimate(X, epsilon=1e-300, delta=1e-5, n_boot=0, ledger=led)
    assert "\n" not in str(exc.value) and len(led.spends()) == 0
    with pytest.raises(ValueError, match="TotalsRelease"):
        estimate_from_release({"totals": [1, 2]})


def test_seeded_is_reproducible_and_not_private():
    X, _ = _rasch()
    a = private_totals_estimate(X, epsilon=1.0, seed=7, n_boot=20)
    b = private_totals_estimate(X, epsilon=1.0, seed=np.random.SeedSequence(7), n_boot=20)
    assert a.privacy.private is False and "NOT PRIVATE" in str(a.privacy)
    assert a.release.totals.equals(b.release.totals) and a.beta.equals(b.beta) and a.ci.equals(b.ci)
    c = private_totals_estimate(X, epsilon=1.0, n_boot=20)
    assert c.privacy.private is True and "NOT PRIVATE" not in str(c.privacy)


def test_labels_carried_through_and_result_contract():
    X, _ = _rasch(m=5)
    df = pd.DataFrame(X, columns=["q1", "q2", "q3", "q4", "q5"], index=[f"p{i}" for i in range(len(X))])
    fit = private_totals_estimate(df, epsilon=2.0, seed=1, n_boot=20)
    for obj in (fit.beta, fit.se, fit.ci, fit.to_frame(), fit.release.totals):
        assert list(obj.index) == ["q1", "q2", "q3", "q4", "q5"]
    assert list(fit.ci.columns) == ["lo", "hi"] and list(fit.items) == ["q1", "q2", "q3", "q4", "q5"]
    assert list(fit.to_frame().columns) == ["beta", "se", "lo", "hi", "beta_unshrunk"]
    assert abs(fit.beta.sum()) < 1e-9 and np.all(fit.ci["lo"] < fit.ci["hi"]) and np.all(fit.se > 0)
    assert fit.top_k(2).size == 2 and isinstance(fit.info["shrinkage"], float)
    # long input needs the public item list and number of persons, and then keeps the order
    long = df.stack().rename("response").reset_index()
    long.columns = ["person", "item", "response"]
    fit2 = private_totals_estimate(long, epsilon=2.0, seed=1, n_boot=20, items=["q5", "q4", "q3", "q2", "q1"],
                                   n_persons=len(df))
    assert list(fit2.beta.index) == ["q5", "q4", "q3", "q2", "q1"]


def test_estimate_is_post_processing_of_the_release(tmp_path):
    X, _ = _rasch()
    rel = release_totals(X, epsilon=1.0, seed=3)
    a = estimate_from_release(rel, n_boot=20, seed=5)
    b = estimate_from_release(rel, n_boot=20, seed=5)
    assert a.beta.equals(b.beta) and a.ci.equals(b.ci) and a.privacy is rel.privacy
    none = estimate_from_release(rel, n_boot=0)
    assert none.beta.equals(a.beta) and none.se.isna().all()


def test_estimate_from_release_with_the_release_seed_reproduces_the_one_call_result():
    """The bootstrap drew from the seed itself here and from its "estimate" stream in
    private_totals_estimate: same beta, other intervals for the same seed."""
    X, _ = _rasch()
    for seed in (7, np.random.SeedSequence(7)):
        one = private_totals_estimate(X, epsilon=1.0, seed=seed, n_boot=20)
        two = estimate_from_release(release_totals(X, epsilon=1.0, seed=seed), n_boot=20, seed=seed)
        pd.testing.assert_frame_equal(one.to_frame(), two.to_frame())


def _noisy_releases():
    """A complete and an MCAR release of 60 persons at ε = 0.3: noise pushes counts below 0."""
    X, _ = _rasch(n=60, m=5, seed=1)
    Xm = X.astype(float)
    Xm[np.random.default_rng(0).random(X.shape) < 0.2] = np.nan
    return release_totals(X, epsilon=0.3, seed=11), release_totals(Xm, epsilon=0.3, seed=12, missing="mcar")


def test_a_tampered_release_is_refused_in_one_line_naming_the_field():
    import dataclasses

    rel, mcar = _noisy_releases()
    assert (rel.histogram < 0).any() and (mcar.totals < 0).any()  # legitimately noisy: kept below
    r = dataclasses.replace
    t_nan = rel.totals.astype(float)
    t_nan.iloc[0] = np.nan
    cases = [
        (r(rel, n_persons=0), "n_persons"), (r(rel, n_persons=-5), "n_persons"),
        (r(rel, n_persons=60.5), "n_persons"), (r(rel, n_persons="60"), "n_persons"),
        (r(rel, n_persons=10), "privacy"), (r(rel, privacy=None), "privacy"),
        (r(rel, sigma_totals=-1.0), "sigma_totals"), (r(rel, sigma_totals=0.0), "sigma_totals"),
        (r(rel, sigma_totals=np.nan), "sigma_totals"), (r(rel, sigma_histogram=np.inf), "sigma_histogram"),
        (r(rel, totals=t_nan), "totals"), (r(rel, totals=rel.totals.astype(str)), "totals"),
        (r(rel, totals=rel.totals.iloc[:1]), "totals"),
        (r(rel, totals=pd.Series(rel.totals.to_numpy(), index=["a"] * 5)), "items"),
        (r(rel, histogram=rel.histogram.iloc[:-1]), "histogram"),
        (r(rel, edges=rel.edges[:-1]), "edges"), (r(rel, edges=rel.edges[::-1].copy()), "edges"),
        (r(rel, edges=rel.edges.astype(float)), "edges"),
        (r(rel, missing="foo"), "missing"), (r(rel, missing="mcar"), "missing"),
        (r(rel, split=5.0), "split"), (r(rel, split=0.0), "split"),
        (r(mcar, missing="none"), "answered"), (r(mcar, answered=None), "missing"),
        (r(mcar, k_edges=None), "missing"), (r(mcar, k_edges=np.array([0, 3])), "k_edges"),
        (r(mcar, answered=mcar.answered.iloc[::-1]), "answered"),
        (r(mcar, answered=mcar.answered.iloc[:-1]), "answered"),
        (r(mcar, sigma_answered=np.nan), "sigma_answered"),
    ]
    for bad, name in cases:
        with pytest.raises(ValueError, match=rf"^the release's {name} .*; pass the TotalsRelease as "
                                             r"release_totals made it$") as exc:
            estimate_from_release(bad, n_boot=0)
        assert "\n" not in str(exc.value)
    for good in (rel, mcar):  # as made, negative counts and all
        beta = estimate_from_release(good, n_boot=0).beta
        assert list(beta.index) == list(good.items) and np.isfinite(beta).all()


# -- statistical behaviour --------------------------------------------------------------------
def test_accurate_when_the_budget_is_large():
    X, beta = _rasch(n=4000, m=8, seed=2)
    fit = private_totals_estimate(X, epsilon=20.0, n_boot=20)
    ref = privirt.cmle_estimate(X).beta.to_numpy()
    assert np.max(np.abs(fit.beta.to_numpy() - (ref - ref.mean()))) < 0.1
    assert fit.info["shrinkage"] > 0.99


def test_shrinkage_is_against_the_privacy_noise_only():
    n = 1000
    X, _ = _rasch(n=n, m=5, seed=6)
    s = X.sum(axis=0).astype(float)
    # no privacy noise: the data's own totals, sampling error and all, are kept as they are
    p, c, _ = shrinkage.shrink_totals(s, n, 0.0)
    assert c == 1.0 and np.array_equal(p, shrinkage.centre_totals(s, n, 0.0))
    # the factor falls as the noise grows and reaches 0 (all zeros) when it swamps the spread
    cs = [shrinkage.shrink_totals(s, n, v)[1] for v in (1.0, 1e2, 1e4, 1e6, 1e8)]
    assert np.all(np.diff(cs) <= 0) and cs[0] > 0.999 and cs[-1] == 0.0
    # equal difficulties: the sampling spread n p(1 - p) of the totals is the data's, not noise
    rng = np.random.default_rng(7)
    X0 = rng.random((n, 5)) < 1.0 / (1.0 + np.exp(-rng.standard_normal(n)))[:, None]
    c0 = shrinkage.shrink_totals(X0.sum(axis=0).astype(float), n, 10.0)[1]
    assert c0 > 0.9, c0


@pytest.mark.slow
def test_never_worse_than_all_zeros_at_tiny_epsilon():
    errs = []
    for k in range(30):
        X, _, beta = privirt.simulate_rasch(200, 10, seed=100 + k)
        rel = release_totals(X, epsilon=0.01, seed=k)
        b = estimate_from_release(rel, n_boot=0).beta.to_numpy()
        errs.append(np.linalg.norm(b - beta) / np.linalg.norm(beta))
    # all zeros has relative error exactly 1; a margin for the test's own noise
    assert np.mean(errs) <= 1.02


@pytest.mark.slow
def test_interval_coverage_on_a_small_case():
    hits = []
    for k in range(24):
        X, _, beta = privirt.simulate_rasch(600, 6, seed=300 + k)
        fit = private_totals_estimate(X, epsilon=1.0, seed=k, n_boot=40)
        hits.append((fit.ci["lo"].to_numpy() <= beta) & (beta <= fit.ci["hi"].to_numpy()))
    cov = float(np.mean(hits))
    assert 0.85 <= cov <= 0.995, cov


def test_benchmark_helpers_compare_on_the_same_data():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_private_totals.py"
    spec = importlib.util.spec_from_file_location("bench_private_totals", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(0)
    for shape in ("normal", "bimodal", "skewed"):
        X, beta = bench.simulate(4000, 6, shape, np.random.default_rng(1))
        assert X.shape == (4000, 6) and abs(beta.sum()) < 1e-9 and set(np.unique(X)) <= {0, 1}
    with pytest.raises(ValueError):
        bench.simulate(10, 3, "uniform", rng)
    r_t, r_a, mse_t, mse_a = bench.one_pair(X, beta, 2.0, seed=3)
    assert 0 < r_t < 1 and 0 < r_a < 1.5 and mse_t == pytest.approx((r_t * np.linalg.norm(beta)) ** 2)


def test_precise_histogram_recovers_a_bimodal_population_between_coarse_grid_points():
    # abilities ±1.5 + N(0, 0.5²): τ = √2.5, κ = 0.9 — between the refined grid's κ = 0.855 and 0.93,
    # so only the second refinement reaches it
    rng = np.random.default_rng(11)
    n, m = 20000, 30
    beta = np.linspace(-2, 2, m)
    theta = np.where(rng.random(n) < 0.5, -1.5, 1.5) + 0.5 * rng.standard_normal(n)
    X = (rng.random((n, m)) < 1 / (1 + np.exp(beta[None, :] - theta[:, None]))).astype(np.int8)
    rel = release_totals(X, epsilon=50.0, seed=2)
    p = shrinkage.centre_totals(rel.totals.to_numpy(float), n, rel.sigma_totals**2)
    fit = marginal.fit_spread(p, rel.histogram.to_numpy(float), n, rel.sigma_histogram**2, rel.edges)
    assert abs(fit.kappa_mean - 0.9) < 0.03 and abs(fit.tau - np.sqrt(2.5)) < 0.05
    assert np.any(np.abs(fit.kappa - 0.9) < 0.01)  # the grid itself got fine enough


def _skewed_population_statistics(n, m, edges):
    """Expected proportions and bin counts (no sampling) under standardised Gamma(2) abilities."""
    beta = np.linspace(-2.0, 2.0, m)
    beta -= beta.mean()
    z = np.linspace(-1.41, 8.0, 400)  # (Γ(2) − 2)/√2 has support (−√2, ∞)
    g = 2.0 + np.sqrt(2.0) * z
    w = g * np.exp(-g)
    w /= w.sum()
    theta = z[None, :]
    p = marginal.item_marginals(beta[None, :], theta, w[None, :])[0]
    P = marginal.bin_probabilities(beta[None, :], theta, w[None, :], edges)[0]
    return beta, p, n * P


def test_free_ability_weights_beat_the_mixture_on_a_skewed_population_at_precise_statistics():
    n, m = 10000, 30
    edges = np.arange(m + 2)  # the full score distribution (what the design gives at large ρn)
    beta, p, hist = _skewed_population_statistics(n, m, edges)
    free = marginal.fit_spread(p, hist, n, 1.0, edges)
    mix = marginal.fit_spread(p, hist, n, 1.0, edges, flexible=False)
    assert free.flexible and not mix.flexible
    assert free.chi2_mixture > 5 * (len(edges) - 1)  # the mixture is rejected by the histogram
    assert free.chi2 <= len(edges) - 1  # stopped once the fit is as close as the noise allows
    err_free, err_mix = np.linalg.norm(free.beta - beta), np.linalg.norm(mix.beta - beta)
    assert err_free < 0.5 * err_mix
    theta, w = free.ability_distribution()  # what the bootstrap simulates from
    assert w.sum() == pytest.approx(1.0) and np.sum(w * theta**3) > 0  # right-skewed


def test_free_ability_weights_are_not_used_when_the_histogram_is_noisy():
    n, m = 2000, 30
    edges = np.arange(0, m + 2, 3)
    edges[-1] = m + 1
    _, p, hist = _skewed_population_statistics(n, m, edges)
    B = len(edges) - 1
    fit = marginal.fit_spread(p, hist, n, 1.0, edges, flexible=False)
    k = fit.map_index
    theta, w = marginal.ability_grid(fit.log_tau[k:k + 1], kappa=fit.kappa[k:k + 1], lam=fit.lam[k:k + 1])
    # a histogram far off the mixture (X² ≫ its 95% point), declared with noise variance just
    # above and just below a bin's sampling variance n/B: free weights only in the second case
    bad = hist + 3.0 * np.sqrt(2.0 * n / B) * np.where(np.arange(B) % 2 == 0, 1.0, -1.0)
    for var_h, freed in ((1.05 * n / B, False), (0.95 * n / B, True)):
        b, wf, x0, x1, steps = marginal.flexible_fit(p, bad, n, var_h, edges, theta[0], w[0])
        assert x0 > 3 * B
        assert (steps > 0) == freed and (x1 < x0) == freed
        if not freed:
            np.testing.assert_allclose(wf, w[0])
    # and with a noise-dominated histogram the fitted model is the mixture the bootstrap uses
    noisy = marginal.fit_spread(p, hist, n, 10.0 * n / B, edges)
    assert not noisy.flexible and noisy.free_weights is None
    t1, w1 = noisy.ability_distribution()
    k = noisy.map_index
    t0, w0 = marginal.ability_grid(noisy.log_tau[k:k + 1], kappa=noisy.kappa[k:k + 1], lam=noisy.lam[k:k + 1])
    np.testing.assert_allclose(t1, t0[0])
    np.testing.assert_allclose(w1, w0[0])


def test_design_uses_the_full_score_distribution_only_when_the_histogram_is_precise():
    _, e_small = marginal.optimal_split(1000, 50, 0.04)
    _, e_big = marginal.optimal_split(10000, 50, 2.0)
    assert len(e_small) - 1 <= 10 and len(e_big) - 1 > 16  # beyond the old cap of 16 bins


def test_a_bootstrap_replicate_larger_than_a_batch_is_simulated_in_chunks_with_the_same_draws(monkeypatch):
    # one replicate of n × m cells was drawn as whole float64 arrays (several × n·m·8 bytes: 4 GB
    # at 10⁶ × 100); its persons are now drawn in chunks, from the same stream in the same order

    from privirt.private.totals import marginal

    nodes = np.linspace(-3, 3, 31)
    w = np.exp(-nodes ** 2 / 2)
    w /= w.sum()
    n, m = 300, 40
    beta = np.random.default_rng(1).normal(size=m)
    edges = np.arange(-0.5, m + 1.5, 1.0)

    def draw(cells):
        monkeypatch.setattr(marginal, "SIMULATION_CELLS", cells)
        return marginal.simulate_releases(np.random.default_rng(42), None, beta, n, edges, 3.0, 2.0, 2,
                                          ability=(nodes, w))

    whole = draw(n * m)  # one replicate per batch, drawn whole
    for cells in (n * m - 1, 1000, 41):  # one replicate per batch, persons in chunks
        chunked = draw(cells)
        assert np.array_equal(whole[0], chunked[0]) and np.array_equal(whole[1], chunked[1])
    monkeypatch.undo()
    n, m = 20_000, 500  # 10⁷ cells: 80 MB a float64 array
    beta = np.random.default_rng(2).normal(size=m)
    edges = np.arange(-0.5, m + 1.5, 1.0)
    _, peak = traced_peak(marginal.simulate_releases, np.random.default_rng(3), None, beta, n, edges,
                          3.0, 2.0, 1, ability=(nodes, w))
    assert peak < 60e6, peak
