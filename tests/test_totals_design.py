"""The totals design's helpers (issue 24: the design runs before the debit, so it must be fast
for many items without changing its answer where it searched everything before)."""

from __future__ import annotations

import numpy as np

from privirt.private.totals import marginal


def _edges_loop(pr: np.ndarray, B: int) -> np.ndarray:
    """The original sequential rule, kept as the reference."""
    m = pr.size - 1
    if B >= m + 1:
        return np.arange(m + 2)
    cdf = np.cumsum(pr)
    cuts = [0]
    for b in range(1, B):
        r = int(np.searchsorted(cdf, b / B)) + 1
        cuts.append(min(max(r, cuts[-1] + 1), m + 1 - (B - b)))
    cuts.append(m + 1)
    return np.asarray(cuts)


def test_vectorised_edges_equal_the_sequential_rule():
    rng = np.random.default_rng(24)
    for _ in range(300):
        m = int(rng.integers(2, 40))
        pr = rng.dirichlet(np.full(m + 1, rng.choice([0.05, 1.0, 10.0])))
        for B in range(1, m + 3):
            assert np.array_equal(marginal.equal_probability_edges(pr, B), _edges_loop(pr, B)), (m, B)


def test_design_bins_full_search_for_few_items_and_a_grid_for_many():
    assert marginal.design_bins(50) == list(range(3, 52))
    many = marginal.design_bins(5000)
    assert many[0] == 3 and many[-1] == 5001 and len(many) <= marginal._B_GRID + 1
    assert many == sorted(set(many))
    f, edges = marginal.optimal_split(1000, 1000, 0.5 / 50**2)
    assert 0 < f < 1 and edges[0] == 0 and edges[-1] == 1001 and np.all(np.diff(edges) > 0)


def test_edgeworth_score_distribution_is_close_to_the_exact_one_at_the_reference_model():
    from privirt.private.totals.scores import edgeworth_score_distribution

    for m in (1001, 2500):
        beta = marginal.reference_difficulties(m)[None, :]
        for lt in (-1e-3, 0.0, 1e-3):
            for kappa in marginal.REFERENCE_KAPPAS:
                theta, w = marginal.ability_grid(np.array([lt]), kappa=np.array([kappa]))
                exact = marginal.score_distribution(beta, theta)
                approx = edgeworth_score_distribution(beta, theta)
                assert np.abs(approx - exact).max() < 1e-3  # any node, any score (|θ| ≤ 5)
                pe, pa = (np.einsum("tqr,tq->tr", d, w)[0] for d in (exact, approx))
                assert np.abs(np.cumsum(pa) - np.cumsum(pe)).max() < 2e-5  # the design's cdf
                assert np.abs(pa - pe).max() < 2e-6


def test_design_by_the_expansion_matches_the_exact_design(monkeypatch):
    from privirt.private.totals import scores

    for n, m, rho in ((30, 1500, 0.5 / 50**2), (1000, 1200, 0.01), (100_000, 1100, 0.05)):
        monkeypatch.setattr(scores, "EXACT_DESIGN_ITEMS", 1000)
        f_a, e_a = marginal.optimal_split(n, m, rho)
        monkeypatch.setattr(scores, "EXACT_DESIGN_ITEMS", 10**6)
        f_e, e_e = marginal.optimal_split(n, m, rho)
        assert f_a == f_e and len(e_a) == len(e_e), (n, m)
        assert np.abs(e_a - e_e).max() <= 1, (n, m)


def test_prior_averaged_design_is_the_brute_force_average_of_the_predicted_error(monkeypatch):
    """§4.2: with ``DESIGN_PRIOR_NODES`` = 5 the split minimises the predicted error averaged over
    the public prior log τ ~ N(0, 0.7²); Gauss–Hermite must pick what a 61-point trapezoid rule
    picks, and at (n, m, ε) = (200, 10, 0.3) that is not the reference design's floor f = 0.01."""
    from scipy import stats

    n, m, rho = 200, 10, 0.004650283480834191  # ρ of ε = 0.3, δ = 1e-4 (the release's calibration)
    assert marginal.optimal_split(n, m, rho)[0] == marginal._F_GRID[0]  # the reference τ = 1 design
    monkeypatch.setattr(marginal, "DESIGN_PRIOR_NODES", 5)
    f, edges = marginal.optimal_split(n, m, rho)
    Bs = list(range(3, m + 2))  # the noisy full distribution: the layout is searched (§4.1)
    _, pr = marginal._design_errors(n, m, rho, Bs, 0.0)
    lt = np.linspace(-4.5, 4.5, 61) * marginal.PRIOR_LOG_TAU_SD
    wt = stats.norm.pdf(lt, scale=marginal.PRIOR_LOG_TAU_SD)
    brute = sum(w * marginal._design_errors(n, m, rho, Bs, x, pr)[0] for x, w in zip(lt, wt / wt.sum()))
    i, j = np.unravel_index(int(np.argmin(brute)), brute.shape)
    assert f == marginal._F_GRID[j] and f > 0.03
    assert np.array_equal(edges, marginal.equal_probability_edges(pr, Bs[i]))
    lts, w5 = marginal.design_spreads()
    assert lts.size == 5 and np.isclose(w5.sum(), 1.0) and np.isclose(w5 @ lts**2, marginal.PRIOR_LOG_TAU_SD**2)
