"""The bootstraps' fast solver paths agree with the plain ones (issue 24).

No timings here (they live in ``benchmarks/bench_defaults.py``): only that the restructured
batched solvers return the estimates of the one-at-a-time fits, to tolerance, and that the
intervals do not move beyond Monte-Carlo error.
"""

from __future__ import annotations

import numpy as np
import pytest

import privirt
from privirt.private.counts import ability
from privirt.private.counts import intervals as iv
from privirt.private.counts.graph import sample_comparison_graph
from privirt.private.counts.noisy_likelihood import noise_aware_batch, noise_aware_estimate
from privirt.stats.counts import differential_counts


def _noisy_stack(m: int, reps: int, nu: float, seed: int, p0: float = 1.0):
    rng = np.random.default_rng(seed)
    G = sample_comparison_graph(m, p0, seed=seed)
    Ys = []
    for _ in range(reps):
        X, _, _ = privirt.simulate_rasch(300, m, seed=int(rng.integers(1 << 30)))
        Y = differential_counts(X).astype(float)
        Ys.append(np.where(G, Y + rng.normal(0.0, np.sqrt(nu), Y.shape), 0.0))
    return np.stack(Ys), G


@pytest.mark.parametrize("p0,nu", [(1.0, 50.0), (0.5, 400.0), (0.6, 5.0)])
def test_noise_aware_batch_equals_single_fits(p0, nu):
    Y, G = _noisy_stack(12, 5, nu, seed=int(nu), p0=p0)
    got = noise_aware_batch(Y, G, nu)
    for r in range(Y.shape[0]):
        want = noise_aware_estimate(Y[r], noise_var=nu, graph=G).beta.to_numpy()
        np.testing.assert_allclose(got[r], want, atol=1e-8)


def test_noise_aware_bootstrap_tolerance_moves_the_intervals_by_far_less_than_their_width(monkeypatch):
    X, _, _ = privirt.simulate_rasch(3000, 10, seed=5)
    kw = dict(epsilon=1.0, seed=6, estimator="noise_aware", n_boot=40, progress=False)
    fast = privirt.private_spectral_estimate(X, **kw)
    monkeypatch.setattr(iv, "BOOT_TOL", 1e-10)
    tight = privirt.private_spectral_estimate(X, **kw)
    np.testing.assert_array_equal(fast.beta.to_numpy(), tight.beta.to_numpy())
    width = (tight.ci["hi"] - tight.ci["lo"]).to_numpy()
    assert np.all(width > 0.05)
    np.testing.assert_allclose(fast.se.to_numpy(), tight.se.to_numpy(), rtol=1e-3)
    np.testing.assert_allclose(fast.ci.to_numpy(), tight.ci.to_numpy(), atol=1e-3 * width.min())


@pytest.mark.parametrize("m,p0,signal", [(12, 1.0, 150.0), (12, 0.4, 150.0), (80, 1.0, 20.0), (80, 0.15, 400.0)])
def test_power_iteration_chain_equals_the_dense_solve(m, p0, signal):
    rng = np.random.default_rng(m)
    G = sample_comparison_graph(m, p0, seed=3)
    beta = rng.normal(0, 1, m)
    base = 200.0 * (1 / (1 + np.exp(beta[:, None] - beta[None, :])))  # more wins for easier items
    Y = np.clip(base + rng.normal(0, signal, (5, m, m)), 0, None)
    dense = iv.spectral_batch(Y, G, method="solve")
    np.testing.assert_allclose(iv.spectral_batch(Y, G, method="power"), dense, atol=1e-8)
    np.testing.assert_allclose(iv.spectral_batch(Y, G, method="power", start=beta), dense, atol=1e-8)
    np.testing.assert_allclose(iv.spectral_batch(Y, G, 0.3, method="power"),
                               iv.spectral_batch(Y, G, 0.3, method="solve"), atol=1e-8)


def test_power_iteration_falls_back_to_the_solve_when_it_does_not_converge(monkeypatch):
    rng = np.random.default_rng(2)
    G = sample_comparison_graph(10, 1.0, seed=1)
    Y = rng.uniform(0, 500, (3, 10, 10))
    monkeypatch.setattr(iv, "POWER_MAX_ITER", 1)
    np.testing.assert_allclose(iv.spectral_batch(Y, G, method="power"), iv.spectral_batch(Y, G, method="solve"),
                               atol=1e-10)


def test_ability_fit_reaches_the_least_squares_optimum():
    from scipy import optimize

    X, _, beta = privirt.simulate_rasch(1500, 30, seed=8)
    rel = privirt.release_counts(X, epsilon=0.5, seed=2, p0=0.5)
    Y, G = rel.Y.to_numpy().astype(float), rel.graph.to_numpy()
    b = np.asarray(beta) - np.mean(beta)
    r, c = np.nonzero(G)

    def resid(x):
        return ability._pair_means(b, x[0], np.exp(x[1]))[r, c] - Y[r, c] / 1500

    ref = optimize.least_squares(resid, x0=[0.0, 0.0], xtol=1e-12, ftol=1e-12, gtol=1e-12).x
    mu, tau = ability.fit_ability_normal(Y, G, b, 1500)
    np.testing.assert_allclose([mu, np.log(tau)], ref, atol=1e-4)
    warm = ability.fit_ability_normal(Y, G, b, 1500, x0=(mu + 0.3, tau * 1.5))
    np.testing.assert_allclose(warm, (mu, tau), atol=1e-4)


@pytest.mark.slow
def test_fewer_simulated_persons_beyond_100_items_keep_the_intervals(monkeypatch):
    X, _, _ = privirt.simulate_rasch(2000, 150, seed=11)
    rel = privirt.release_counts(X, epsilon=3.0, seed=0)
    few = privirt.spectral_from_release(rel, n_boot=60, seed=1, estimator="spectral", progress=False)
    monkeypatch.setattr(iv, "FEWEST_SIMULATED_PERSONS", 1000)  # the floor before issue 24
    many = privirt.spectral_from_release(rel, n_boot=60, seed=1, estimator="spectral", progress=False)
    assert few.info["simulated_persons"] == 666 and many.info["simulated_persons"] == 1000
    np.testing.assert_allclose(np.median(few.se), np.median(many.se), rtol=0.1)
    np.testing.assert_allclose(few.se, many.se, rtol=0.5)
    centre_gap = np.abs(np.array(few.info["centre"]) - np.array(many.info["centre"]))
    assert np.median(centre_gap) < 0.2 * np.median(many.se)


# -- issue 24, target 2: the spectral bootstrap at many items ------------------------------
def test_table_noise_has_the_rounded_normal_law():
    from scipy import stats

    for sigma in (4.0, 3000.0):
        z = iv._table_noise(np.random.default_rng(3), sigma, np.zeros(1_000_000, np.float32))
        assert z.dtype == np.float32 and np.all(z == np.rint(z))
        assert abs(z.mean()) < 4 * sigma / 1000 and abs(z.std() / np.sqrt(sigma**2 + 1 / 12) - 1) < 0.004
        # distribution function within sampling error of the rounded normal's
        k = np.arange(-4 * sigma, 4 * sigma + 1, max(1.0, sigma / 50))
        emp = np.searchsorted(np.sort(z), k + 0.5, side="right") / z.size
        assert np.max(np.abs(emp - stats.norm.cdf((k + 0.5) / sigma))) < 0.003
    a = iv._table_noise(np.random.default_rng(4), 10.0, np.zeros((2, 50, 50), np.float32))
    b = iv._table_noise(np.random.default_rng(4), 10.0, np.zeros((2, 50, 50), np.float32))
    np.testing.assert_array_equal(a, b)  # seeded: the same draws
    assert abs(np.corrcoef(a[0].ravel(), a[1].ravel())[0, 1]) < 0.1  # replicates independent


@pytest.mark.parametrize("p0", [1.0, 0.3])
def test_single_precision_chain_equals_the_double_one(p0):
    rng = np.random.default_rng(5)
    m = 90
    G = sample_comparison_graph(m, p0, seed=2)
    beta = rng.normal(0, 1, m)
    base = 300.0 / (1 + np.exp(beta[:, None] - beta[None, :]))
    Y = np.clip(base + np.rint(rng.normal(0, 200.0, (3, m, m))), 0, None)
    dense = iv.spectral_batch(Y, G, method="solve")
    single = iv.spectral_batch(Y.astype(np.float32), G, start=beta)
    assert single.dtype == np.float64
    np.testing.assert_allclose(single, dense, atol=2e-4)
    assert np.abs(single - dense).max() < 1e-3 * dense.std()


def test_ability_fit_on_the_complete_graph_uses_the_same_sums():
    X, _, beta = privirt.simulate_rasch(800, 40, seed=9)
    rel = privirt.release_counts(X, epsilon=0.3, seed=4)
    Y, G = rel.Y.to_numpy().astype(float), rel.graph.to_numpy()
    b = np.asarray(beta) - np.mean(beta)
    for x in (np.array([0.3, np.log(0.8)]), np.array([-1.0, 0.2])):
        def E(x):
            return ability._pair_means(b, x[0], np.exp(x[1]))
        h = 1e-6
        R = np.where(G, E(x) - Y / 800, 0.0)
        Em = np.where(G, (E(x + [h, 0]) - E(x - [h, 0])) / (2 * h), 0.0)
        Es = np.where(G, (E(x + [0, h]) - E(x - [0, h])) / (2 * h), 0.0)
        Yd = np.diagonal(Y).copy()
        cost, JJ, Jr = ability._complete_parts(x, Y, Yd, float((Y * Y).sum() - Yd @ Yd) / 800**2, b, 800, True)
        np.testing.assert_allclose(cost, (R * R).sum(), rtol=1e-10)
        np.testing.assert_allclose(JJ, [[(Em * Em).sum(), (Em * Es).sum()], [(Em * Es).sum(), (Es * Es).sum()]],
                                   rtol=1e-6)
        np.testing.assert_allclose(Jr, [(Em * R).sum(), (Es * R).sum()], rtol=1e-6, atol=1e-9)


def test_calibration_replicates_fall_with_the_items_and_the_last_step_is_not_evaluated(monkeypatch):
    assert [iv.calibration_replicates(m) for m in (6, 100, 200, 1000, 5000)] == [50, 50, 25, 10, 10]
    drawn = []
    orig = iv._replicates

    def spy(rng, truth, *a, **k):
        drawn.append(a[3])
        return orig(rng, truth, *a, **k)

    monkeypatch.setattr(iv, "_replicates", spy)
    monkeypatch.setattr(iv, "CALIBRATION_TOL", 0.0)  # every step runs
    X, _, _ = privirt.simulate_rasch(500, 6, seed=1)
    res = privirt.private_spectral_estimate(X, epsilon=1.0, seed=2, n_boot=20, progress=False)
    assert res.info["calibration_steps"] == iv.CALIBRATION_STEPS
    assert drawn == [50] * iv.CALIBRATION_STEPS + [20]


@pytest.mark.slow
def test_the_fast_spectral_bootstrap_keeps_the_intervals(monkeypatch):
    # single precision, table noise, fewer calibration replicates, the complete graph's ability
    # sums: against the double-precision path with normal deviates and 50 calibration replicates
    X, _, _ = privirt.simulate_rasch(2000, 120, seed=12)
    rel = privirt.release_counts(X, epsilon=2.0, seed=0)
    kw = dict(n_boot=80, estimator="spectral", progress=False)
    fast = [privirt.spectral_from_release(rel, seed=s, **kw) for s in (1, 2)]
    monkeypatch.setattr(iv, "SINGLE_FROM_ITEMS", 10**9)
    monkeypatch.setattr(iv, "CALIBRATION_MIN_REPLICATES", 50)
    slow = privirt.spectral_from_release(rel, seed=1, **kw)
    assert fast[0].info["calibration_replicates"] == 41 and slow.info["calibration_replicates"] == 50
    se = slow.se.to_numpy()
    for f in fast:
        np.testing.assert_allclose(np.median(f.se), np.median(se), rtol=0.08)
        gap = np.abs(np.array(f.info["centre"]) - np.array(slow.info["centre"]))
        assert np.median(gap) < 0.25 * np.median(se)
    # the two fast runs differ from each other by as much (Monte-Carlo error, not a shift)
    gap_ff = np.abs(np.array(fast[0].info["centre"]) - np.array(fast[1].info["centre"]))
    gap_fs = np.abs(np.array(fast[0].info["centre"]) - np.array(slow.info["centre"]))
    assert np.median(gap_fs) < 2.0 * np.median(gap_ff)


def test_single_precision_counts_are_the_exact_counts():
    rng = np.random.default_rng(6)
    X = iv._responses(rng, rng.normal(0, 1, 70), 0.2, 1.1, 3, 40)
    single = iv._exact_counts(X, np.float32)
    assert single.dtype == np.float32
    np.testing.assert_array_equal(single, iv._exact_counts(X))
    np.testing.assert_array_equal(single[1], differential_counts(X[1].astype(int)))
    # the rescaling folded into the product: c·Y + (n − c·k)·f, as _rescale does it
    f = ability._pair_means(np.zeros(70), 0.0, 1.0)
    want = iv._rescale(iv._exact_counts(X), 400, 40, f)
    got = iv._exact_counts(X, np.float32, scale=np.sqrt(10.0)) + ((400 - np.sqrt(10.0) * 40) * f).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)


def test_fused_noise_and_rates_equal_the_separate_passes():
    rng = np.random.default_rng(8)
    m = 70
    G = sample_comparison_graph(m, 1.0, seed=1)
    Y = rng.uniform(0, 300, (2, m, m)).astype(np.float32)
    a = iv._table_noise(np.random.default_rng(2), 250.0, Y.copy())
    b = iv._table_noise(np.random.default_rng(2), 250.0, Y.copy(), rates=0.7)
    np.testing.assert_array_equal(b, np.maximum(a, 0) + np.float32(0.7))
    start = rng.normal(0, 1, m)
    sep = iv.spectral_batch(np.maximum(a, 0), G, 0.7, start=start)
    np.testing.assert_allclose(iv.spectral_batch(b, G, 0.7, start=start, rates=True), sep, atol=1e-6)


def test_default_replicates_fall_beyond_1000_items_and_are_used_by_default(monkeypatch):
    assert [iv.default_n_boot(m) for m in (6, 1000, 1500, 2000, 5000, 10**4)] == [200, 200, 88, 50, 50, 50]
    monkeypatch.setattr(iv, "FULL_BOOT_ITEMS", 5)  # a small case past the threshold: 200·(5/8)² = 78
    X, _, _ = privirt.simulate_rasch(300, 8, seed=2)
    res = privirt.private_spectral_estimate(X, epsilon=1.0, seed=1, progress=False)
    assert res.info["n_boot"] == 78
    rel = privirt.release_counts(X, epsilon=1.0, seed=1)
    assert privirt.spectral_from_release(rel, seed=1).info["n_boot"] == 78
    assert privirt.spectral_from_release(rel, seed=1, n_boot=30).info["n_boot"] == 30


def test_row_effects_use_a_cholesky_solve_and_lstsq_only_on_a_singular_design(monkeypatch):
    """The row-effect fit of the weights (``_smoothed_discordant`` and ``noise_aware_batch``)
    solved an m × m system by an SVD least-squares, > 10× a Cholesky solve at m = 2000; it now
    factorises, and falls back to least squares only where the design is singular (bipartite)."""
    from privirt.private.counts import noisy_likelihood as nl

    Y, G = _noisy_stack(12, 3, 50.0, seed=11, p0=0.6)
    I, J = np.nonzero(np.triu(G, 1))
    Dt = Y[0][I, J] + Y[0][J, I]
    lstsq = np.linalg.lstsq
    want_u = nl._smoothed_discordant(Dt, I, J, 12)
    want_b = noise_aware_batch(Y, G, 50.0)

    def refuse(*a, **k):
        raise AssertionError("lstsq called on a positive definite design")

    monkeypatch.setattr(np.linalg, "lstsq", refuse)
    np.testing.assert_allclose(nl._smoothed_discordant(Dt, I, J, 12), want_u, rtol=1e-12)
    np.testing.assert_allclose(noise_aware_batch(Y, G, 50.0), want_b, atol=1e-10)
    monkeypatch.setattr(np.linalg, "lstsq", lstsq)
    # bipartite designs (two items; an even cycle, whose Cholesky factor gets a ~1e-8 pivot)
    cycle = np.zeros((6, 6), dtype=bool)
    cycle[np.arange(6), (np.arange(6) + 1) % 6] = True
    for g in (~np.eye(2, dtype=bool), cycle | cycle.T):
        A = g.astype(float) + np.diag(g.sum(axis=1).astype(float))
        rhs = np.arange(1.0, g.shape[0] + 1.0)
        np.testing.assert_allclose(nl._row_effects(A, rhs), lstsq(A, rhs, rcond=None)[0], atol=1e-12)


def test_noise_aware_batch_in_chunks_equals_one_batch(monkeypatch):
    """noise_aware_batch held (replicates, m, m) arrays for all replicates at once (R·m²·8 bytes
    each: 1.6 GB at m = 2000, R = 50); it now fits them in chunks of at most _BATCH_BYTES, with
    the same result bit for bit (the replicates are independent)."""
    from privirt.private.counts import noisy_likelihood as nl

    Y, G = _noisy_stack(10, 7, 80.0, seed=21, p0=0.7)
    whole = noise_aware_batch(Y, G, 80.0, tol=1e-6)
    seen = []
    score = nl._score_batch
    monkeypatch.setattr(nl, "_score_batch", lambda Yc, *a, **k: seen.append(Yc.shape[0]) or score(Yc, *a, **k))
    for size in (1, 2 * 8 * 10 * 10 * 3):  # one replicate a chunk; 3, 3 and 1
        seen.clear()
        monkeypatch.setattr(nl, "_BATCH_BYTES", size)
        np.testing.assert_array_equal(noise_aware_batch(Y, G, 80.0, tol=1e-6), whole)
        assert seen == ([1] * 7 if size == 1 else [3, 3, 1])


def test_noise_aware_bootstrap_builds_the_graph_design_once_per_call(monkeypatch):
    """Each noise_aware_batch call of the bootstrap (one replicate a call at m = 2000) rebuilt
    what depends only on the public graph: the pairs, the incidence and the row-effect design's
    Cholesky factor (≈ 1 CPU s of each ≈ 5 s replicate).  The intervals now build it once per
    call (the row-effect factorisation: once for the estimate, once for all bootstrap fits) and
    pass it to every batch, with the results of the per-call rebuild bit for bit."""
    from scipy.linalg import lapack

    from privirt.private.counts import noisy_likelihood as nl

    X, _, _ = privirt.simulate_rasch(2000, 12, seed=4_900_011)
    kw = dict(epsilon=1.0, seed=4_900_012, estimator="noise_aware", n_boot=20, progress=False)
    pocon, calls, fits = lapack.dpocon, [], []

    def counted(*a, **k):
        calls.append(1)
        return pocon(*a, **k)

    monkeypatch.setattr(lapack, "dpocon", counted)
    batch = iv.noise_aware_batch
    monkeypatch.setattr(iv, "noise_aware_batch", lambda *a, **k: fits.append(1) or batch(*a, **k))
    got = privirt.private_spectral_estimate(X, **kw)
    assert len(fits) > 2 and len(calls) == 2  # the estimate's factorisation and the bootstrap's one

    def rebuilt(*a, design=None, **k):  # every call builds its own design (the other callers' path)
        return nl.noise_aware_batch(*a, **k)

    monkeypatch.setattr(iv, "noise_aware_batch", rebuilt)
    calls.clear()
    want = privirt.private_spectral_estimate(X, **kw)
    assert len(calls) == 2 + len(fits)  # the unused design built by the intervals, then one a fit
    for a, b in ((got.beta, want.beta), (got.se, want.se), (got.ci, want.ci)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # a given design gives the stack's fit bit for bit; a design of another size is refused
    Y, G = _noisy_stack(10, 3, 60.0, seed=4_900_013, p0=0.7)
    np.testing.assert_array_equal(nl.noise_aware_batch(Y, G, 60.0, design=nl.graph_design(G)),
                                  nl.noise_aware_batch(Y, G, 60.0))
    with pytest.raises(ValueError, match="design is for 12 items"):
        nl.noise_aware_batch(Y, G, 60.0, design=nl.graph_design(~np.eye(12, dtype=bool)))


def test_noise_aware_bootstrap_tolerance_is_public_and_relative_to_the_predicted_se(monkeypatch):
    """The bootstrap's replicates were fitted to 1e-6 whatever their spread (19 Fisher steps
    of an m × m factor and its inverse each at m = 2000, against 14 to 1e-4); the tolerance is
    now min(BOOT_TOL, BOOT_TOL_SE · noise_aware_se0(n, m, ν)): public, ≤ 1 % of the predicted se."""
    from privirt.private.counts.noisy_likelihood import noise_aware_se0

    seen = []
    real = iv.noise_aware_batch

    def spy(Y, G, nu, **kw):
        seen.append(kw["tol"])
        return real(Y, G, nu, **kw)

    monkeypatch.setattr(iv, "noise_aware_batch", spy)
    for n, eps in ((3000, 1.0), (200_000, 50.0)):
        X, _, _ = privirt.simulate_rasch(n, 10, seed=1_000_321)
        r = privirt.private_spectral_estimate(X, epsilon=eps, seed=1_000_322, estimator="noise_aware",
                                              n_boot=20, progress=False)
        se0 = noise_aware_se0(n, 10, noise_variance_of(r))
        want = min(1e-4, 0.01 * se0)
        assert seen and all(t == pytest.approx(want, rel=1e-12) for t in seen)
        assert iv.boot_tol(n, 10, noise_variance_of(r)) == pytest.approx(want, rel=1e-12)
        seen.clear()
    assert want < 1e-4  # the large release: the tolerance follows the se


def noise_variance_of(result):
    from privirt.private.counts.noisy_likelihood import noise_variance

    return noise_variance(result.privacy)


def test_noise_aware_bootstrap_computes_its_tolerance_once_per_call(monkeypatch):
    """boot_tol(n, m, ν) (public inputs only) was recomputed for every batch of replicates
    inside the bootstrap loop; it is now computed once per run of replicates, same value."""
    X, _, _ = privirt.simulate_rasch(2000, 12, seed=5_100_010)
    tol, tols, fits = iv.boot_tol, [], []
    monkeypatch.setattr(iv, "boot_tol", lambda *a: tols.append(tol(*a)) or tols[-1])
    batch, replicates, runs = iv.noise_aware_batch, iv._replicates, []
    monkeypatch.setattr(iv, "noise_aware_batch", lambda *a, **k: fits.append(k["tol"]) or batch(*a, **k))
    monkeypatch.setattr(iv, "_replicates", lambda *a, **k: runs.append(1) or replicates(*a, **k))
    monkeypatch.setattr(iv, "_CHUNK_CELLS", 1)  # one replicate a batch, as at m = 2000
    privirt.private_spectral_estimate(X, epsilon=1.0, seed=5_100_011, estimator="noise_aware",
                                      n_boot=20, progress=False)
    assert len(fits) > len(runs) >= 1 and len(tols) == len(runs) and set(fits) == set(tols)
