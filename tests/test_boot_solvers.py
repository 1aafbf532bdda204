"""The bootstraps' fast solver paths agree with the plain ones (issue 24).

No timings here (they live in ``benchmarks/bench_defaults.py``): only that the restructured
batched solvers return the estimates of the one-at-a-time fits, to tolerance, and that the
intervals do not move beyond Monte-Carlo error.
"""

from __future__ import annotations

import numpy as np
import pytest

import privirt
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
        return iv._pair_means(b, x[0], np.exp(x[1]))[r, c] - Y[r, c] / 1500

    ref = optimize.least_squares(resid, x0=[0.0, 0.0], xtol=1e-12, ftol=1e-12, gtol=1e-12).x
    mu, tau = iv.fit_ability_normal(Y, G, b, 1500)
    np.testing.assert_allclose([mu, np.log(tau)], ref, atol=1e-4)
    warm = iv.fit_ability_normal(Y, G, b, 1500, x0=(mu + 0.3, tau * 1.5))
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
