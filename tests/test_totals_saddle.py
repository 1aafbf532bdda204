"""The totals fit at many items (issue 24): pseudo-items, saddlepoint bins and shared inversion
tables, brute-forced against the exact score distributions and the exact bootstrap refit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special

from privirt.private.totals import api, manyitems, marginal, saddle


def _models():
    """Ability models of the fit's grids: narrow to wide, normal to two groups, skewed."""
    lt = np.log([0.1, 0.5, 1.0, 2.0, 6.0, 1.0, 3.0, 1.5])
    kap = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.85, 0.97, 0.7])
    lam = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.15])
    return marginal.ability_grid(lt, kappa=kap, lam=lam)


def _exact_node_bins(beta, theta, edges):
    sd = marginal.score_distribution(beta, theta)
    c = np.concatenate([np.zeros(sd.shape[:2] + (1,)), np.cumsum(sd, axis=2)], axis=2)
    return np.diff(c[:, :, edges], axis=2)


def _difficulties(rng, T, m):
    beta = rng.normal(0.0, 1.5, (T, m))
    beta[1] *= 0.2  # nearly equal items
    beta[4] *= 3.0  # a wide test
    beta[2, : m // 2] = beta[2, 0]  # many tied difficulties
    return beta


def test_pseudo_items_keep_five_moments_and_bound_the_log_partition():
    rng = np.random.default_rng(1)
    beta = _difficulties(rng, 8, 700)
    b, W = saddle.pseudo_items(beta)
    assert b.shape[1] < beta.shape[1]
    for k in range(6):  # Lagrange weights of degree 5: the first five moments exactly
        np.testing.assert_allclose((W * b**k).sum(axis=1), (beta**k).sum(axis=1), rtol=1e-9, atol=1e-6)
    h = b[:, 1] - b[:, 0]
    for th in (-4.0, 0.0, 3.0):
        exact = np.logaddexp(0.0, th - beta).sum(axis=1)
        approx = (W * np.logaddexp(0.0, th - b)).sum(axis=1)
        bound = 1.22e-3 * h**6 * beta.shape[1] + 1e-9  # max|f⁽⁶⁾|·3.52/720·h⁶ per item
        assert np.all(np.abs(approx - exact) <= bound), (th, np.abs(approx - exact) / bound)
    # few items: the items themselves
    b1, W1 = saddle.pseudo_items(beta[:, :50])
    assert np.array_equal(b1, beta[:, :50]) and np.all(W1 == 1.0)


@pytest.mark.parametrize("m", [450, 800])
def test_saddlepoint_bins_match_the_exact_score_distribution(m):
    rng = np.random.default_rng(m)
    theta, w = _models()
    beta = _difficulties(rng, theta.shape[0], m)
    pr = np.einsum("tqr,tq->tr", marginal.score_distribution(marginal.reference_difficulties(m)[None], theta[2:3]),
                   w[2:3])[0]
    for B in (6, 30, 60):
        edges = marginal.equal_probability_edges(pr, B)
        assert saddle.use_saddlepoint(m, edges)
        exact = _exact_node_bins(beta, theta, edges)
        approx = saddle.node_bin_probabilities(beta, theta, edges)
        np.testing.assert_allclose(approx.sum(axis=2), 1.0, atol=1e-12)
        # per ability node, and mixed over the nodes as the fit uses them (docs/totals.md §4b)
        assert np.abs(approx - exact).max() < 1e-4, B
        mixed = np.abs(np.einsum("tqb,tq->tb", approx - exact, w)).max()
        assert mixed < 1e-5, (B, mixed)
        np.testing.assert_allclose(marginal.bin_probabilities(beta, theta, w, edges),
                                   np.einsum("tqb,tq->tb", approx, w), atol=1e-15)


def test_saddlepoint_at_a_node_on_the_saddlepoint_itself():
    """A node exactly at a cut's saddlepoint (w = u = 0): the limit of the formula."""
    rng = np.random.default_rng(3)
    m = 600
    beta = rng.normal(0.0, 1.0, (1, m))
    cuts = np.array([150, 300, 451])
    b, W = saddle.pseudo_items(beta)
    star = saddle._saddlepoints(b, W, cuts[None, :] - 0.5, np.zeros((1, 3)))[0]
    theta = np.sort(np.concatenate([star[0], star[0] + 1e-7, star[0] - 0.02, [-3.0, 3.0]]))[None, :]
    edges = np.concatenate([[0], cuts, [m + 1]])
    exact = _exact_node_bins(beta, theta, edges)
    approx = saddle.node_bin_probabilities(beta, theta, edges)
    assert np.abs(approx - exact).max() < 1e-4


def test_saddlepoint_is_used_only_for_many_items_and_interior_cuts():
    assert not saddle.use_saddlepoint(saddle.EXACT_FIT_ITEMS, np.array([0, 100, 200, saddle.EXACT_FIT_ITEMS + 1]))
    m = 1000
    assert saddle.use_saddlepoint(m, np.array([0, 308, 501, 694, m + 1]))
    assert not saddle.use_saddlepoint(m, np.array([0, 5, 501, m + 1]))  # a cut next to score 0
    assert not saddle.use_saddlepoint(m, np.arange(m + 2))  # the full score distribution


def test_inverse_table_matches_newton_inversion():
    rng = np.random.default_rng(4)
    theta, w = _models()
    y = special.logit(rng.uniform(0.002, 0.998, (3, 500)))
    table = manyitems.InverseTable(theta, w, float(y.min()), float(y.max()))
    got = table(y)  # (3, T, 500)
    for r in range(3):
        want = marginal.invert_marginals(special.expit(y[r]), theta, w, tol=1e-12)
        assert np.abs(got[r] - want).max() < 1e-6


def _replicates(rng, m, R, n=600):
    support = (np.log([0.8, 1.0, 1.25, 1.0, 1.0]), np.array([0.0, 0.0, 0.0, 0.4, 0.7]), np.full(5, 0.5))
    theta, w = marginal.ability_grid(np.array([0.0]))
    beta0 = rng.normal(0.0, 1.0, m)
    p0 = marginal.item_marginals(beta0[None], theta, w)[0]
    p = np.clip(p0 + rng.normal(0.0, 0.02, (R, m)), 0.01, 0.99)
    pr = np.einsum("qr,q->r", marginal.score_distribution(beta0[None], theta)[0], w[0])
    edges = marginal.equal_probability_edges(pr, 8)
    P = marginal.bin_probabilities(beta0[None], theta, w, edges)[0]
    hist = n * P + rng.normal(0.0, 30.0, (R, len(edges) - 1))
    return p, hist, n, 900.0, edges, support


def test_bootstrap_refits_match_the_exact_refits(monkeypatch):
    rng = np.random.default_rng(5)
    p, hist, n, var_h, edges, support = _replicates(rng, 420, 6)
    fast = manyitems.fit_support_batch(p, hist, n, var_h, edges, support)
    exact = marginal.fit_support_batch(p, hist, n, var_h, edges, support)
    monkeypatch.setattr(saddle, "EXACT_FIT_ITEMS", 10**9)  # the exact path through the same entry
    np.testing.assert_allclose(manyitems.fit_support_batch(p, hist, n, var_h, edges, support), exact)
    assert np.abs(fast - exact).max() < 1e-5


def test_estimate_at_many_items_matches_the_exact_estimate(monkeypatch):
    """End to end (release → fit → bootstrap) at m = 420: the saddlepoint path against the exact one."""
    from privirt.data.simulate import simulate_rasch

    X = simulate_rasch(800, 420, seed=7)[0]
    rel = api.release_totals(X, epsilon=2.0, delta=1e-4, seed=11)
    fast = api.estimate_from_release(rel, n_boot=20, seed=3)
    monkeypatch.setattr(saddle, "EXACT_FIT_ITEMS", 10**9)
    exact = api.estimate_from_release(rel, n_boot=20, seed=3)
    se = exact.se.to_numpy()
    assert np.abs(fast.beta.to_numpy() - exact.beta.to_numpy()).max() < 1e-3 * np.median(se)
    assert np.abs(fast.se.to_numpy() - se).max() < 1e-3 * np.median(se)
    assert fast.info["tau"] == pytest.approx(exact.info["tau"], rel=1e-4)


def test_the_fit_at_many_items_has_a_progress_bar_only_when_asked(capsys):
    from privirt.data.simulate import simulate_rasch

    X = simulate_rasch(300, saddle.EXACT_FIT_ITEMS + 20, seed=8)[0]
    rel = api.release_totals(X, epsilon=1.0, delta=1e-4, seed=1)
    api.estimate_from_release(rel, n_boot=0, progress=True)
    err = capsys.readouterr().err
    assert "ability model fit" in err and "100%" in err
    api.estimate_from_release(rel, n_boot=0)  # auto: capsys' stderr is not a terminal
    api.estimate_from_release(rel, n_boot=0, progress=False)
    assert capsys.readouterr().err == ""
    few = api.release_totals(X[:, :50], epsilon=1.0, delta=1e-4, seed=1)
    api.estimate_from_release(few, n_boot=0, progress=True)  # short tests: fast, no bar
    assert "ability model fit" not in capsys.readouterr().err


def test_free_ability_weights_at_many_items_match_the_exact_ones(monkeypatch):
    """``flexible_fit`` (EM on the nodes' bin probabilities) through the saddlepoint and exactly."""
    rng = np.random.default_rng(9)
    m, n = 420, 100_000
    beta0 = rng.normal(0.0, 1.0, m)
    z = marginal.Z_NODES
    skewed = np.exp(-0.5 * ((z + 1.0) / 0.6) ** 2) + 0.5 * np.exp(-0.5 * ((z - 1.2) / 0.5) ** 2)
    theta, wt = z[None, :], (skewed / skewed.sum())[None, :]
    p = marginal.item_marginals(beta0[None], theta, wt)[0]
    pr = np.einsum("qr,q->r", marginal.score_distribution(beta0[None], theta)[0], wt[0])
    edges = marginal.equal_probability_edges(pr, 12)
    assert saddle.use_saddlepoint(m, edges)
    hist = n * np.diff(np.concatenate([[0.0], np.cumsum(pr)])[edges])
    start = marginal.ability_grid(np.array([0.0]))[1][0]  # the normal model: rejected
    fast = marginal.flexible_fit(p, hist, n, 1.0, edges, z, start)
    monkeypatch.setattr(saddle, "EXACT_FIT_ITEMS", 10**9)
    exact = marginal.flexible_fit(p, hist, n, 1.0, edges, z, start)
    assert exact[4] > 0 and fast[4] == exact[4]  # EM ran, for as many steps
    np.testing.assert_allclose(fast[1], exact[1], atol=1e-6)
    np.testing.assert_allclose(fast[0], exact[0], atol=1e-5)
    assert fast[3] == pytest.approx(exact[3], rel=1e-3)
