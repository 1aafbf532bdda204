"""Private 2PNO intervals: the route where the noise swamps the pairs (the fit's Laplace
posterior instead of the bootstrap, ``docs/private_2pl.md`` §3) and the bootstrap elsewhere."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import optimize, special, stats

import privirt
import privirt.private.twopl.estimate as E
from privirt.private.twopl import estimate_2pl_from_release, private_2pl_estimate, release_2pl
from privirt.private.twopl import fit as F
from privirt.private.twopl.fit import fit_factor
from ._twopno import lognormal_2pno, objective_residuals

mechanisms = pytest.importorskip("mechanisms")


def _release(n, m, eps, seed):
    X, a, b = lognormal_2pno(n, m, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return release_2pl(X, epsilon=eps, delta=1e-4, seed=seed + 1), a, b


@pytest.mark.parametrize("m", [2, 5])
def test_fit_curvature_is_the_objectives_hessian(m):
    # the Laplace covariance is the inverse of this matrix: the analytic Newton matrix at the
    # optimum must be the Hessian of half the objective (finite differences); it also checks the
    # assembly of the pairs' entries by per-item sums (every kind of entry occurs at m = 5)
    rel, _, _ = _release(3000, m, 1.0, 11)
    n, m = rel.n_persons, rel.totals.size
    t, d = rel.totals.to_numpy(float), rel.pairs.to_numpy(float)
    f = fit_factor(t, d, n, rel.sigma_totals, rel.sigma_pairs, hessian=True)
    H, Hp = f.hessian
    res = objective_residuals(rel)

    def half_cost(x):
        r = res(x)
        return 0.5 * float(r @ r)

    x0 = f.start()[0]
    k = x0.size
    h = 1e-4
    num = np.empty((k, k))
    for a in range(k):
        for b in range(a, k):
            ea, eb = np.eye(k)[a] * h, np.eye(k)[b] * h
            num[a, b] = num[b, a] = (half_cost(x0 + ea + eb) - half_cost(x0 + ea - eb)
                                     - half_cost(x0 - ea + eb) + half_cost(x0 - ea - eb)) / (4 * h * h)
    assert np.allclose(H[0], num, rtol=2e-3, atol=2e-3 * np.abs(num).max()), np.abs(H[0] - num).max()
    # the priors' part is the Hessian of the prior terms alone
    assert np.allclose(Hp[np.arange(m), np.arange(m)], 1 / F.TAU_PRIOR_SD**2)
    assert np.isclose(Hp[-1, -1], m / F.LOG_A_PRIOR_SD**2 + 1 / F.MEAN_PRIOR_SD**2)


@pytest.mark.slow
def test_intervals_of_a_cover_where_the_noise_swamps_the_pairs():
    # n = 400, m = 30, ε = 0.1: the pairs' noise SD is 1.2 on a proportion; the bootstrap's refits
    # are pinned by the fit's priors near λ → 1 wherever they start, so its intervals of a are
    # the prior-held scatter (log width ≈ 0.7) and covered the true a 0.62 of the time over 6
    # data sets (0.45–0.9 per data set); the fit's Laplace posterior says the release holds
    # ~5 % of the precision of log a
    cov_a, cov_b, routes = [], [], []
    for k in range(4):
        rel, a, b = _release(400, 30, 0.1, 900 + k)
        fit = estimate_2pl_from_release(rel, seed=k)
        routes.append(fit.info["intervals"])
        cov_a.append(np.mean((fit.ci["a"]["lo"].to_numpy() <= a) & (a <= fit.ci["a"]["hi"].to_numpy())))
        cov_b.append(np.mean((fit.ci["b"]["lo"].to_numpy() <= b) & (b <= fit.ci["b"]["hi"].to_numpy())))
    assert routes == ["laplace"] * 4
    assert np.mean(cov_a) >= 0.9 and min(cov_a) >= 0.8, cov_a
    assert np.mean(cov_b) >= 0.85, cov_b


def test_default_call_refits_are_few_where_the_noise_swamps_the_pairs(monkeypatch):
    # the whole default estimate at (400, 30, 0.1): the point fits and the shrinkage's noise
    # simulation only; no bootstrap refits (200 × ~25 iterations, 2/3 of the call) where the
    # release holds less than half the precision of the discriminations; counted, not timed
    counts = []
    orig = E.fit_factor

    def spy(*args, **kwargs):
        f = orig(*args, **kwargs)
        counts.append((f.row_iterations.size, int(f.row_iterations.sum()), f.iterations))
        return f

    monkeypatch.setattr(E, "fit_factor", spy)
    rel, _, _ = _release(400, 30, 0.1, 71)
    fit = estimate_2pl_from_release(rel, seed=1)
    assert fit.info["intervals"] == "laplace" and fit.info["data_share_log_a"] < E.PRIOR_HELD_SHARE
    assert fit.info["n_boot"] == 0
    rows = sum(c[0] for c in counts)
    work = sum(c[1] for c in counts)
    assert rows == 2 + 2 * E.NULL_REPLICATES
    assert work <= 30 * rows, counts
    assert counts[0][2] < 100 and counts[1][2] < 100  # the point fits converge (no cap)
    assert np.all(np.isfinite(fit.ci["a"].to_numpy())) and np.all(fit.ci["a"]["lo"] < fit.a)
    assert np.all(fit.a < fit.ci["a"]["hi"]) and np.all(np.isfinite(fit.se["b"]))


def test_auto_is_the_bootstrap_where_the_release_holds_the_discriminations():
    rel, _, _ = _release(4000, 8, 3.0, 21)
    auto = estimate_2pl_from_release(rel, seed=5, n_boot=40)
    boot = estimate_2pl_from_release(rel, seed=5, n_boot=40, intervals="bootstrap")
    assert auto.info["intervals"] == "bootstrap" and auto.info["data_share_log_a"] > 0.9
    for key in ("a", "b", "tau"):
        assert np.array_equal(auto.ci[key].to_numpy(), boot.ci[key].to_numpy())
    # there the fit's Laplace SD of log a is the bootstrap's to within its Monte-Carlo error
    lap = estimate_2pl_from_release(rel, seed=5, n_boot=40, intervals="laplace")
    assert lap.info["intervals"] == "laplace"
    ratio = lap.se["log_a"].to_numpy() / boot.se["log_a"].to_numpy()
    assert 0.7 < np.median(ratio) < 1.3, ratio
    assert np.array_equal(lap.a.to_numpy(), boot.a.to_numpy())  # the estimate does not depend on the route


def test_intervals_option_is_checked_before_anything_is_spent(tmp_path):
    X, _, _ = lognormal_2pno(300, 5, 0)
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="intervals") as exc:
        private_2pl_estimate(X, epsilon=0.5, ledger=led, intervals="jackknife")
    assert "\n" not in str(exc.value) and len(led.spends()) == 0
    assert private_2pl_estimate(X, epsilon=0.5, seed=1, n_boot=0).info["intervals"] == "none"


# -- the noise-variance refits at many items: pooled over τ ------------------------------------
def test_pool_by_tau_is_a_local_line_within_its_window():
    from privirt.private.twopl.estimate import _pool_by_tau

    rng = np.random.default_rng(270121)
    tau = rng.normal(size=300)
    line = 0.3 + 0.1 * tau
    assert np.allclose(_pool_by_tau(tau, line, 16), line, rtol=0, atol=1e-12)  # a line is kept
    f = 0.2 + 0.05 * tau**2  # a smooth variance, observed as means of 8 squared normals
    y = f * rng.chisquare(8, tau.size) / 8
    pooled = _pool_by_tau(tau, y, 16)
    assert np.sqrt(np.mean((pooled - f) ** 2)) < 0.5 * np.sqrt(np.mean((y - f) ** 2))
    order = np.argsort(tau)
    top = order[-16:]  # the last window: the values stay within its range
    assert y[top].min() <= pooled[order[-1]] <= y[top].max()
    assert np.array_equal(_pool_by_tau(np.array([0.0, 1.0]), np.array([1.0, 2.0]), 16), [1.0, 2.0])
    bad = y.copy()
    bad[5] = np.nan  # never from a refit; kept item by item rather than spread by the running sums
    assert np.array_equal(_pool_by_tau(tau, bad, 16), bad, equal_nan=True)


def test_noise_variance_pooled_from_many_items_agrees_with_each_items_own(monkeypatch):
    """From NULL_POOL_FROM items (no missingness) 2 × 8 refits pooled over τ: the same variances as
    2 × 32 refits item by item, within the latter's own noise (±25 % an item), the tails of a
    normal spread of τ included (where the variances rise steeply and a line through their raw
    values overshoots: up to 4× at the items next to the ends); MCAR keeps 32 draws each."""
    rel, _, _ = _release(2000, E.NULL_POOL_FROM, 1.0, 73)
    m = len(rel.items)
    assert E.null_replicates(m, "none") == E.NULL_REPLICATES_MANY < E.NULL_REPLICATES
    assert E.null_replicates(m, "mcar") == E.NULL_REPLICATES == E.null_replicates(m - 1, "none")
    tau0, lam0 = np.sort(np.random.default_rng(270131).standard_normal(m)), np.full(m, np.sqrt(0.5))
    pooled = E._null_noise_variance(rel, tau0, lam0)
    monkeypatch.setattr(E, "NULL_POOL_FROM", m + 1)
    own = E._null_noise_variance(rel, tau0, lam0)
    basis = np.vander(tau0, 5)  # the variances are smooth in τ: a quartic's residuals are their noise
    for p, o in zip(pooled[:3], own[:3]):  # v_tau, v (log a), v_within
        ratio = p / o
        assert 0.85 < np.median(ratio) < 1.2, ratio  # the same quantity
        # as close as the own 32 draws' noise allows (measured 0.30 in log; 32 against 128 own
        # draws: 0.24), and nowhere off by the raw-scale line's factor at the ends
        assert np.sqrt(np.mean(np.log(ratio) ** 2)) < 0.45 and np.all((ratio > 0.35) & (ratio < 3.2)), ratio
        scatter = [np.std(np.log(x) - basis @ np.linalg.lstsq(basis, np.log(x), rcond=None)[0]) for x in (p, o)]
        assert scatter[0] < 0.85 * scatter[1], scatter  # 32 draws an item scatter ±25 %; pooled, less (0.17 vs 0.24)
    assert 0.3 < pooled[3] / own[3] < 3.0  # the level's variance, from 8 vs 32 all-equal refits


def test_laplace_intervals_from_the_gauss_newton_matrix_where_the_newton_matrix_is_indefinite():
    """Some releases where the noise swamps the pairs stop (by the gain criterion) where the fit's
    Newton matrix is indefinite. The route fell back to the bootstrap, whose refits are pinned
    there: at (500, 200, 0.3) its intervals covered a 0.00 of the time (b 0.99, with a median
    se(b) of 18). The Laplace intervals now come from the Gauss–Newton matrix (positive definite
    with the priors): a 1.00, b 0.89–0.94 on those releases (BENCHMARKS.md, eleventh round)."""
    X, a, b = lognormal_2pno(400, 60, 278_061)
    rel = release_2pl(X, epsilon=0.2, delta=1e-4, seed=278_161)
    t, d, n, st, sp = E.fit_inputs(rel)
    fit = fit_factor(t, d, n, st, sp, hessian=True)
    assert np.linalg.eigvalsh(fit.hessian[0][0]).min() < 0  # the case
    assert np.linalg.eigvalsh(fit.gauss_newton[0]).min() > 0
    est = E.estimate_2pl_from_release(rel, n_boot=20, seed=1, progress=False)
    assert est.info["intervals"] == "laplace" and est.info["laplace_curvature"] == "gauss_newton"
    assert est.info["data_share_log_a"] < E.PRIOR_HELD_SHARE
    for key, truth in (("a", a), ("b", b)):
        lo, hi = est.ci[key]["lo"].to_numpy(), est.ci[key]["hi"].to_numpy()
        assert np.mean((lo <= truth) & (truth <= hi)) > 0.85, key


def test_laplace_intervals_come_from_the_gauss_newton_matrix_where_the_newton_matrix_is_positive_definite():
    """The Laplace covariance is the inverse of the fit's Gauss–Newton matrix (the expected
    information) on every release; the Newton matrix gives only the share. Where the noise swamps
    the pairs its residual curvature is the noise's: at m = 200–300 its intervals of τ covered
    0.86–0.90, and whether it was positive definite turned on round-off (BENCHMARKS.md, "Issue 25,
    fourteenth round")."""
    X, a, b = lognormal_2pno(400, 30, 279_070)
    rel = release_2pl(X, epsilon=0.1, delta=1e-4, seed=279_071)
    t, d, n, st, sp = E.fit_inputs(rel)
    fit = fit_factor(t, d, n, st, sp, hessian=True)
    assert np.linalg.eigvalsh(fit.hessian[0][0]).min() > 0  # the case: the Newton matrix would do
    est = E.estimate_2pl_from_release(rel, n_boot=20, seed=1, progress=False)
    assert est.info["intervals"] == "laplace" and est.info["laplace_curvature"] == "newton"
    m = a.size
    gn = np.sqrt(np.diag(np.linalg.inv(fit.gauss_newton[0])))
    newton = np.sqrt(np.diag(np.linalg.inv(fit.hessian[0][0])))
    assert np.allclose(est.se["log_a"].to_numpy(), gn[m:2 * m], rtol=1e-9, atol=0)
    assert np.allclose(est.se["tau"].to_numpy(), gn[:m], rtol=1e-9, atol=0)
    assert np.max(np.abs(est.se["tau"].to_numpy() / newton[:m] - 1.0)) > 0.01  # (the two matrices differ here)
    tau = b / np.sqrt(1.0 + a * a)
    lo, hi = est.ci["tau"]["lo"].to_numpy(), est.ci["tau"]["hi"].to_numpy()
    assert np.mean((lo <= tau) & (tau <= hi)) > 0.8


@pytest.mark.parametrize("seed, missing", [(91_500_023, 0.0), (91_500_036, 0.0), (91_500_200, 0.3),
                                           (91_500_206, 0.3)])
def test_published_estimate_lies_inside_its_own_bootstrap_interval(seed, missing):
    """The bootstrap intervals are centred on the unshrunk fit (b and τ bias-corrected) while a
    and b are shrunk toward the common level: at (1000, 20, ε = 0.3) an item's a, b or τ fell
    outside its own interval in 40 % of data sets (here a and b, b and τ; under MCAR at
    (2000, 10, ε = 1, 30 % missing) b, a).  Each interval is now widened just enough to hold the
    estimate: every published a, b, τ lies inside, and each interval is the old one
    (centre ± z·se) or that widened to the estimate on one side, never narrower."""
    n, m, eps = (1000, 20, 0.3) if not missing else (2000, 10, 1.0)
    X, _, _ = lognormal_2pno(n, m, seed)
    if missing:
        X = X.astype(float)
        X[np.random.default_rng(seed + 3).random(X.shape) < missing] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = release_2pl(X, epsilon=eps, seed=seed + 1, missing="mcar" if missing else "none")
    fit = estimate_2pl_from_release(rel, n_boot=20, seed=seed + 2, progress=False)
    assert fit.info["intervals"] == "bootstrap"
    z = float(stats.norm.isf(0.025))
    boot = ~fit.items.isin(fit.info["laplace_items"])
    widened = 0
    for name, est, se, scale in (("a", fit.a, fit.se["log_a"], np.log), ("b", fit.b, fit.se["b"], None),
                                 ("tau", fit.tau, fit.se["tau"], None)):
        lo, hi, x = (np.asarray(v, float) for v in (fit.ci[name]["lo"], fit.ci[name]["hi"], est))
        assert np.all((lo <= x) & (x <= hi)), (name, np.flatnonzero((x < lo) | (x > hi)))
        if scale is not None:  # log a: about the unshrunk estimate itself, its old interval inside
            lo, hi, x = scale(lo), scale(hi), scale(x)
            c = np.log(fit.a_unshrunk.to_numpy())[boot]
            old = (c - z * se.to_numpy()[boot], c + z * se.to_numpy()[boot])
            assert np.all((lo[boot] <= old[0] + 1e-12) & (old[1] - 1e-12 <= hi[boot])), name
        width, want = hi - lo, 2.0 * z * se.to_numpy()
        assert np.all(width >= want * (1 - 1e-9)), name
        wide = width > want * (1 + 1e-9)  # widened: one end is the estimate
        assert np.all(np.isclose(lo, x, rtol=0, atol=1e-12)[wide] | np.isclose(hi, x, rtol=0, atol=1e-12)[wide])
        widened += int(wide.sum())
    assert widened > 0  # (the case: an estimate lay outside its unwidened interval)


def test_docstring_says_which_intervals_are_bias_corrected():
    """The docstring called the bootstrap intervals of log a bias-corrected; they are centred at
    the unshrunk estimate (BIAS_CORRECT_LOG_A is False, docs/private_2pl.md §3)."""
    doc = " ".join(estimate_2pl_from_release.__doc__.split())
    assert not E.BIAS_CORRECT_LOG_A
    assert "bias-corrected, normal quantiles on log a" not in doc
    assert "log a (centred at the unshrunk estimate, not bias-corrected" in doc
    assert "on b and τ (bias-corrected)" in doc


def _one_item_unmeasured(kind, seed):
    """6 items, n = 2000: item 0 (true a = 0.3) one the release says almost nothing about: b = 4
    (0–1 persons correct), or declared MCAR and answered by 10 persons (revM's reproducers)."""
    from scipy.special import ndtr

    A = np.array([0.3, 1.5, 1.2, 1.6, 1.4, 1.3])
    B = np.array([4.0 if kind == "extreme" else 0.0, 0.3, -0.3, 0.5, -0.5, 0.1])
    rng = np.random.default_rng(seed)
    th = rng.standard_normal(2000)
    X = (rng.random((2000, 6)) < ndtr(th[:, None] * A - B)).astype(float)
    if kind == "mcar":
        X[rng.random(X.shape) < 0.1] = np.nan
        keep = rng.choice(2000, 10, replace=False)
        col = X[:, 0].copy()
        X[:, 0] = np.nan
        X[keep, 0] = col[keep]
    return X, A


@pytest.mark.parametrize("kind, seed", [("extreme", 41_001_100), ("mcar", 41_001_000)])
def test_an_item_the_release_says_nothing_about_gets_the_laplace_interval(kind, seed):
    """The route was chosen from the median item's data share only: an item whose own share is ~0
    got bootstrap intervals pinned by the priors (a = 1.3 [1.03, 1.63] for a true 0.3).  It now
    gets the Laplace interval, as the whole fit would; the other items' are unchanged, bit for bit."""
    X, A = _one_item_unmeasured(kind, seed)
    missing = "mcar" if kind == "mcar" else "none"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = release_2pl(X, epsilon=1.0, seed=seed, missing=missing)
        kw = dict(seed=seed, n_boot=40, progress=False)
        auto = estimate_2pl_from_release(rel, **kw)
        boot = estimate_2pl_from_release(rel, intervals="bootstrap", **kw)
        lap = estimate_2pl_from_release(rel, intervals="laplace", **kw)
    lo, hi = auto.ci["a"].iloc[0]
    assert lo < A[0] < hi and hi / lo > 20  # says how little the release tells
    shares = np.asarray(auto.info["data_shares_log_a"])
    assert auto.info["intervals"] == "bootstrap" and auto.info["data_share_log_a"] == np.median(shares)
    assert shares[0] < E.PRIOR_HELD_SHARE <= shares[1:].min()
    assert auto.info["laplace_items"] == [0]
    for key in ("a", "b", "tau"):
        assert auto.ci[key].iloc[0].equals(lap.ci[key].iloc[0])
        assert auto.ci[key].iloc[1:].equals(boot.ci[key].iloc[1:])
    for key in ("log_a", "b", "tau"):
        assert auto.se[key].iloc[1:].equals(boot.se[key].iloc[1:]) and auto.se[key].iloc[0] == lap.se[key].iloc[0]
    assert boot.info["laplace_items"] == [] and lap.info["laplace_items"] == list(range(6))


def test_pair_regression_is_the_two_by_two_tables_conditional_variance():
    # the disagreement proportion's variance given its two totals, from the 2 × 2 table's
    # multinomial covariance: at P(correct) ≈ 0.8 and 0.2 some 50 times below D(1 − D)/n
    from scipy import stats

    from privirt.private.twopl._pairs import pair_regression

    p1, p2, r, n = 0.8, 0.2, 0.7, 5000.0
    p11 = stats.multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf(stats.norm.ppf([p1, p2]))
    d = p1 + p2 - 2 * p11
    V = np.array([[p1 * (1 - p1), p11 - p1 * p2], [p11 - p1 * p2, p2 * (1 - p2)]])
    c = np.array([p1 - p11 - p1 * d, p2 - p11 - p2 * d])
    bi, bj, sd = pair_regression(np.array([[p1, p2]]), np.array([[d]]), n, n, 0.0, 0.0,
                                 np.array([0]), np.array([1]))
    assert np.allclose([bi[0, 0], bj[0, 0]], np.linalg.solve(V, c))
    assert sd[0, 0] ** 2 * n == pytest.approx(d * (1 - d) - c @ np.linalg.solve(V, c), rel=1e-9)
    assert sd[0, 0] ** 2 * n < d * (1 - d) / 20


def test_two_items_on_opposite_sides_keep_their_level_at_large_epsilon():
    # m = 2, P(correct) ≈ 0.8 and 0.2: the pair's marginal variance made it look uninformative,
    # the priors took the level (log a 0.19 against the data's 0.49 at ε = 1000) and the shrunk
    # a and b fell outside their own intervals
    from scipy import stats

    a, b, n = np.array([1.55, 1.73]), np.array([-1.6, 1.66]), 5000
    rng = np.random.default_rng(75000100)
    X = (rng.random((n, 2)) < special.ndtr(rng.standard_normal(n)[:, None] * a - b)).astype(np.int8)
    # the single a that gives the data's tetrachoric correlation
    t = stats.norm.ppf(1 - X.mean(0))
    p11 = np.mean(X[:, 0] * X[:, 1])
    r = optimize.brentq(lambda r: stats.multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf(-t) - p11, 0.0, 0.99)
    log_a_equal = 0.5 * np.log(r / (1 - r))
    fit = private_2pl_estimate(X, epsilon=1000.0, seed=75000101, n_boot=40)
    info = fit.info
    assert abs(info["mean_log_a"] - info["release_mean_log_a"]) < 0.03  # (was 0.19)
    assert info["release_sd_mean_log_a"] < 0.15  # (was 0.52)
    assert abs(np.log(fit.a.to_numpy()).mean() - log_a_equal) < 0.1  # (was 0.31 below)
    for name, x in (("a", fit.a), ("b", fit.b)):
        ci = fit.ci[name]
        assert np.all((ci["lo"] <= x) & (x <= ci["hi"])), name
