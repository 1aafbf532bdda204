"""Noise-aware estimation on released noisy pairwise counts (privirt.private.counts.noisy_likelihood)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.private.counts.noisy_likelihood import (
    NoiseAwareResult,
    noise_aware_estimate,
    noise_aware_se0,
    noise_variance,
)
from privirt.rasch.spectral import spectral_from_counts


def _rel(b, beta):
    b = np.asarray(b, dtype=float) - np.mean(b)
    beta = beta - beta.mean()
    return float(np.linalg.norm(b - beta) / np.linalg.norm(beta))


def _release(n, m, eps, seed, **kw):
    X, _, beta = privirt.simulate_rasch(n, m, seed=seed, **kw)
    return X, beta, privirt.release_counts(X, epsilon=eps, delta=1e-4, seed=seed + 1)


# -- post-processing only ---------------------------------------------------------------------
def test_reads_only_the_release_and_spends_nothing(tmp_path):
    X, _, _ = privirt.simulate_rasch(500, 8, seed=3)
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=2.0, delta=1e-4)
    counts = privirt.release_counts(X, epsilon=1.0, delta=1e-4, ledger=led)
    before = (tmp_path / "l.ledger").read_bytes()
    fit = noise_aware_estimate(counts)
    again = noise_aware_estimate(counts)
    assert (tmp_path / "l.ledger").read_bytes() == before  # no spend, nothing written
    assert len(led.spends()) == 1
    pd.testing.assert_series_equal(fit.beta, again.beta)  # deterministic: no fresh noise
    # the same numbers as from the published table, the public graph and the noise variance
    nu = noise_variance(counts.privacy)
    from_table = noise_aware_estimate(counts.Y, noise_var=nu, graph=counts.graph.to_numpy())
    np.testing.assert_array_equal(fit.beta.to_numpy(), from_table.beta.to_numpy())
    assert fit.items.equals(counts.items) and fit.beta.index.equals(counts.Y.index)
    assert isinstance(fit, NoiseAwareResult)
    assert list(fit.to_frame().columns) == ["beta", "beta_unshrunk", "se"]


def test_result_keeps_the_release_privacy_statement():
    X, _, _ = privirt.simulate_rasch(300, 5, seed=3_800_020)
    seeded = privirt.release_counts(X, epsilon=1.0, delta=1e-4, seed=3_800_021)
    fit = noise_aware_estimate(seeded)
    assert fit.privacy is seeded.privacy and fit.privacy.private is False
    assert str(fit.privacy).startswith("NOT PRIVATE") and "private=False" in repr(fit)
    via = privirt.spectral_from_release(seeded, estimator="noise_aware", n_boot=0)
    assert fit.privacy == via.privacy
    unseeded = privirt.release_counts(X, epsilon=1.0, delta=1e-4)
    assert noise_aware_estimate(unseeded).privacy is unseeded.privacy
    # a bare array of counts: its privacy is unknown
    bare = noise_aware_estimate(seeded.Y, noise_var=noise_variance(seeded.privacy))
    assert bare.privacy is None and "privacy=None" in repr(bare)


def test_benchmark_compares_on_the_release_algorithm_2_uses():
    # bench_noisy_y runs spectral_from_counts on counts.clipped(): that is Algorithm 2's output
    X, _, _ = privirt.simulate_rasch(400, 6, seed=11)
    alg2 = privirt.private_spectral_estimate(X, epsilon=1.0, delta=1e-4, seed=5, estimator="spectral",
                                             n_boot=0)
    counts = privirt.release_counts(X, epsilon=1.0, delta=1e-4, seed=5)
    np.testing.assert_array_equal(alg2.counts.Y.to_numpy(), counts.Y.to_numpy())
    sp = spectral_from_counts(counts.clipped(), items=counts.items, graph=counts.graph.to_numpy(),
                              regularization="auto")
    np.testing.assert_allclose(sp.beta.to_numpy(), alg2.beta.to_numpy(), atol=1e-12)


# -- accuracy ---------------------------------------------------------------------------------
def test_recovers_beta_at_large_epsilon():
    X, beta, counts = _release(4000, 12, 50.0, seed=21)
    fit = noise_aware_estimate(counts)
    assert fit.converged
    assert _rel(fit.beta, beta) < 0.06
    # close to the non-private conditional ML estimate on the same data
    cml = privirt.cmle_estimate(X).beta.to_numpy()
    assert _rel(fit.beta, cml) < 0.03
    # the model standard errors are of the size of the error actually made
    err = fit.beta_unshrunk.to_numpy() - (beta - beta.mean())
    assert 0.3 < np.sqrt(np.mean(err**2)) / np.sqrt(np.mean(fit.se.to_numpy() ** 2)) < 3.0


def test_exact_counts_without_noise():
    X, _, beta = privirt.simulate_rasch(3000, 6, seed=4)
    from privirt.stats.counts import differential_counts

    Y = differential_counts(X)
    fit = noise_aware_estimate(Y, noise_var=0.0, shrink="none")
    assert fit.converged and fit.noise_var == 0.0
    assert _rel(fit.beta, beta) < 0.08


def test_standard_errors_match_the_error_on_exact_counts():
    # the pairs share persons: without the design effect the model variance was ~20x too small
    from privirt.stats.counts import differential_counts

    err2, trv = [], []
    for k in range(4):
        X, _, beta = privirt.simulate_rasch(1000, 30, seed=200 + k)
        fit = noise_aware_estimate(differential_counts(X), noise_var=0.0, shrink="none")
        err2.append(np.sum((fit.beta_unshrunk.to_numpy() - beta) ** 2))
        trv.append(np.sum(fit.se.to_numpy() ** 2))
    assert 0.5 < np.mean(err2) / np.mean(trv) < 2.0


def test_beats_clipped_spectral_where_the_benchmark_says_it_should():
    # (n, m, eps) = (1000, 50, 1): se0 = 0.10, MSE 2x lower in bench_noisy_y
    mse_sp, mse_na = [], []
    for k in range(3):
        _, beta, counts = _release(1000, 50, 1.0, seed=100 + 10 * k)
        b = beta - beta.mean()
        sp = spectral_from_counts(counts.clipped(), graph=counts.graph.to_numpy()).beta.to_numpy()
        na = noise_aware_estimate(counts).beta.to_numpy()
        mse_sp.append(np.sum((sp - sp.mean() - b) ** 2))
        mse_na.append(np.sum((na - na.mean() - b) ** 2))
    assert noise_aware_se0(1000, 50, noise_variance(counts.privacy)) < 0.3
    assert np.mean(mse_sp) / np.mean(mse_na) > 1.3


def test_pure_noise_gives_equal_difficulties():
    # counts that are only noise: the spread is not detectable, so nothing is claimed
    rng = np.random.default_rng(8)
    Y = rng.normal(0.0, 1000.0, (10, 10))
    fit = noise_aware_estimate(Y, noise_var=1e6)
    assert fit.tau2 == 0.0
    assert np.all(fit.beta.to_numpy() == 0.0)


def test_sparse_graph_and_laplace_release():
    X, beta, _ = _release(3000, 15, 1.0, seed=31)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        counts = privirt.release_counts(X, epsilon=5.0, mechanism="laplace", p0=0.5, seed=9)
    G = counts.graph.to_numpy()
    assert not G[~np.eye(15, dtype=bool)].all()
    t = counts.privacy.noise_value
    q = math.exp(-1.0 / t)
    assert noise_variance(counts.privacy) == pytest.approx(2 * q / (1 - q) ** 2)
    fit = noise_aware_estimate(counts)
    assert _rel(fit.beta, beta) < 0.35


def test_noise_variance_of_the_gaussian_release():
    _, _, counts = _release(300, 5, 1.0, seed=41)
    sigma = counts.privacy.noise_value
    assert sigma > 10
    assert noise_variance(counts.privacy) == pytest.approx(sigma**2, rel=1e-12)


def test_se0_is_public_and_monotone():
    assert noise_aware_se0(1000, 50, 0.0) == pytest.approx(1 / math.sqrt(50 * 1000 / 8))
    assert noise_aware_se0(1000, 50, 1e4) < noise_aware_se0(1000, 50, 1e5)
    assert noise_aware_se0(2000, 50, 1e4) < noise_aware_se0(1000, 50, 1e4)


# -- input validation -------------------------------------------------------------------------
def test_input_validation():
    _, _, counts = _release(300, 5, 1.0, seed=51)
    Y = counts.Y.to_numpy()
    with pytest.raises(ValueError, match="noise_var is required"):
        noise_aware_estimate(Y)
    for bad in (-1.0, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="noise_var must be"):
            noise_aware_estimate(Y, noise_var=bad)
    with pytest.raises(ValueError, match="read from the NoisyCounts"):
        noise_aware_estimate(counts, noise_var=1.0)
    with pytest.raises(ValueError, match="square"):
        noise_aware_estimate(np.zeros((3, 4)), noise_var=1.0)
    with pytest.raises(ValueError, match="at least 2 items"):
        noise_aware_estimate(np.zeros((1, 1)), noise_var=1.0)
    with pytest.raises(ValueError, match="finite"):
        Z = Y.astype(float)
        Z[0, 1] = np.nan
        noise_aware_estimate(Z, noise_var=1.0)
    G = ~np.eye(5, dtype=bool)
    G[0, 1] = False
    with pytest.raises(ValueError, match="symmetric"):
        noise_aware_estimate(Y, noise_var=1.0, graph=G)
    G2 = np.zeros((5, 5), dtype=bool)
    G2[0, 1] = G2[1, 0] = G2[2, 3] = G2[3, 2] = G2[3, 4] = G2[4, 3] = True
    with pytest.raises(ValueError, match="not connected"):
        noise_aware_estimate(Y, noise_var=1.0, graph=G2)
    with pytest.raises(ValueError, match="shrink"):
        noise_aware_estimate(counts, shrink="js")
    with pytest.raises(ValueError, match="max_iter"):
        noise_aware_estimate(counts, max_iter=0)
    with pytest.raises(ValueError, match="item labels"):
        noise_aware_estimate(Y, noise_var=1.0, items=["a", "b"])


@pytest.mark.parametrize("tol", [True, np.bool_(True), float("inf"), float("nan"), 0, -1e-6,
                                 "1e-8", None])
def test_tol_is_checked_as_cmle_estimate_checks_it(tol):
    # True and inf were taken: inf stopped after one unconverged step, silently
    Y = np.array([[0, 30, 40, 20], [10, 0, 25, 15], [12, 20, 0, 18], [30, 25, 22, 0]], float)
    with pytest.raises(ValueError, match=r"^tol must be a positive number, got "):
        noise_aware_estimate(Y, noise_var=1.0, tol=tol)


def test_randomized_response_release_is_refused():
    X, _, _ = privirt.simulate_rasch(200, 4, seed=61)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rr = privirt.private_spectral_estimate(X, epsilon=4.0, mechanism="randomized_response", seed=1)
    with pytest.raises(ValueError, match="additive noise"):
        noise_variance(rr.privacy)


# -- wired into private_spectral_estimate -------------------------------------------------------
def test_auto_estimator_is_chosen_from_public_quantities_only():
    from privirt.private.counts.api import NOISE_AWARE_BELOW

    X, _, _ = privirt.simulate_rasch(2000, 12, seed=3)
    auto = privirt.private_spectral_estimate(X, epsilon=1.0, seed=4, n_boot=0)
    se0 = auto.info["noise_aware_se0"]
    nu = noise_variance(auto.privacy)
    assert se0 == noise_aware_se0(2000, 12, nu)  # n, m and the calibrated noise only
    assert se0 < NOISE_AWARE_BELOW and auto.info["estimator"] == "noise_aware"
    na = noise_aware_estimate(auto.counts)
    np.testing.assert_array_equal(auto.beta.to_numpy(), na.beta.to_numpy())
    # a tiny epsilon (large public noise) gives the spectral estimate
    small = privirt.private_spectral_estimate(X, epsilon=0.01, seed=4, n_boot=0)
    assert small.info["estimator"] == "spectral"
    sp = privirt.private_spectral_estimate(X, epsilon=1.0, seed=4, n_boot=0, estimator="spectral")
    assert sp.info["estimator"] == "spectral"
    assert not np.allclose(sp.beta.to_numpy(), auto.beta.to_numpy())


def test_batch_equals_one_at_a_time():
    from privirt.private.counts.noisy_likelihood import noise_aware_batch

    Ys, single = [], []
    for s, eps in enumerate((0.05, 0.3, 1.0, 5.0)):
        X, _, _ = privirt.simulate_rasch(500, 8, seed=s)
        c = privirt.release_counts(X, epsilon=eps, seed=s, p0=1.0)
        Ys.append(c.Y.to_numpy().astype(float))
        single.append(noise_aware_estimate(c.Y, noise_var=noise_variance(c.privacy)).beta.to_numpy())
        # one noise variance per batch: refit each alone through the batch
        got = noise_aware_batch(Ys[-1][None], ~np.eye(8, dtype=bool), noise_variance(c.privacy))[0]
        np.testing.assert_allclose(got, single[-1], atol=1e-9)


def test_noise_aware_intervals_cover_on_a_small_case():
    hits = []
    for d in range(6):
        X, _, beta = privirt.simulate_rasch(1500, 8, seed=21 + d)
        truth = beta - beta.mean()
        r = privirt.private_spectral_estimate(X, epsilon=2.0, seed=100 + d, estimator="noise_aware", n_boot=60)
        assert r.info["bootstrap_estimator"] == "noise_aware"
        hits.append((r.ci["lo"].to_numpy() <= truth) & (truth <= r.ci["hi"].to_numpy()))
    assert 0.75 <= np.mean(hits) <= 1.0


def test_noise_aware_is_refused_for_randomized_response():
    X, _, _ = privirt.simulate_rasch(200, 5, seed=1)
    with pytest.raises(ValueError, match="additive noise"):
        privirt.private_spectral_estimate(X, epsilon=1.0, mechanism="randomized_response",
                                          estimator="noise_aware", n_boot=0)
    with pytest.raises(ValueError, match="estimator must be"):
        privirt.private_spectral_estimate(X, epsilon=1.0, estimator="clip", n_boot=0)


def test_fit_steps_factorise_once_and_keep_the_eigenvalue_evidence_update(monkeypatch):
    """Each Fisher step of the single fit did a dense solve and, in the shrunk fit, an
    eigvalsh of the information for γ (≈ 4× the cost of one Cholesky factor's inverse at
    m = 2000); it now factorises once (γ by the trace identity, as the batch): no eigvalsh or
    general solve is called, and the iterates are the eigenvalue update's up to rounding."""
    from privirt.private.counts import noisy_likelihood as nl

    X, _, _ = privirt.simulate_rasch(3000, 30, seed=1_000_301)
    c = privirt.release_counts(X, epsilon=1.0, seed=1_000_302)
    Y, nu, m = c.Y.to_numpy().astype(float), noise_variance(c.privacy), 30
    I, J = np.nonzero(np.triu(~np.eye(m, dtype=bool), 1))
    a, Dt = Y[I, J], Y[I, J] + Y[J, I]
    Dw, kappa = nl._smoothed_discordant(Dt, I, J, m), nl._design_effect(I.size, m)
    beta, tau2, ones = np.zeros(m), 1.0, np.ones((m, m)) / m
    for _ in range(100):  # the fit before: general solve, γ from the eigenvalues of F
        U, F = nl._score_info(beta, a, Dt, Dw, I, J, m, nu, kappa)
        rhs = U - beta / tau2
        step = np.linalg.solve(F + np.eye(m) / tau2 + ones, rhs - rhs.mean())
        step -= step.mean()
        big = float(np.max(np.abs(step)))
        beta = beta + step / max(big, 1.0)
        beta -= beta.mean()
        f = np.sort(np.linalg.eigvalsh(F))[1:]
        new = float(np.clip(beta @ beta / np.sum(tau2 * f / (1.0 + tau2 * f)), nl.TAU2_FLOOR, 25.0))
        change, tau2 = max(big, abs(new - tau2) / tau2), new
        if change < 1e-8:
            break

    def refused(*args, **kwargs):
        raise AssertionError("an eigendecomposition or general solve in a Fisher step")

    monkeypatch.setattr(np.linalg, "eigvalsh", refused)
    monkeypatch.setattr(np.linalg, "solve", refused)
    fit = noise_aware_estimate(Y, noise_var=nu)
    assert fit.converged and fit.tau2 > 0
    np.testing.assert_allclose(fit.beta.to_numpy(), beta, atol=1e-9)
    assert fit.tau2 == pytest.approx(tau2, rel=1e-9)


def test_standard_errors_come_from_a_cholesky_inverse(monkeypatch):
    """The se took a general m × m inverse of the information (≈ 2.7 m³ flops, 0.55 CPU s at
    m = 2000) for its diagonal alone; the diagonal now comes from the Cholesky factor's inverse
    (⅔ m³): no general inverse, the same se as the Moore–Penrose inverse's diagonal."""
    from privirt.private.counts import noisy_likelihood as nl

    X, _, _ = privirt.simulate_rasch(2000, 25, seed=1_000_311)
    c = privirt.release_counts(X, epsilon=1.0, seed=1_000_312)
    nu, m = noise_variance(c.privacy), 25
    want = noise_aware_estimate(c.Y, noise_var=nu, shrink="none")
    Y = c.Y.to_numpy().astype(float)
    I, J = np.nonzero(np.triu(~np.eye(m, dtype=bool), 1))
    a, Dt = Y[I, J], Y[I, J] + Y[J, I]
    Dw, kappa = nl._smoothed_discordant(Dt, I, J, m), nl._design_effect(I.size, m)
    _, F = nl._score_info(want.beta.to_numpy(), a, Dt, Dw, I, J, m, nu, kappa)
    se = np.sqrt(np.diag(np.linalg.pinv(F)))

    def refused(*args, **kwargs):
        raise AssertionError("a general inverse for the standard errors")

    monkeypatch.setattr(np.linalg, "inv", refused)
    got = noise_aware_estimate(c.Y, noise_var=nu, shrink="none")
    np.testing.assert_allclose(got.se.to_numpy(), se, rtol=1e-9)
    np.testing.assert_array_equal(got.beta.to_numpy(), want.beta.to_numpy())


def test_info_says_whether_the_unshrunk_fit_converged():
    """beta_unshrunk and se come from a separate fit, which could stop at max_iter unconverged
    (measured at m = 2000) while `converged` described the shrunk fit only: nothing said so."""
    from privirt.stats.counts import differential_counts

    X, _, _ = privirt.simulate_rasch(3000, 8, seed=4_100_900)
    Y = differential_counts(X).astype(float)
    full = noise_aware_estimate(Y, noise_var=25.0)
    assert full.info["unshrunk_converged"] is True and 1 <= full.info["unshrunk_n_iter"] < 100
    short = noise_aware_estimate(Y, noise_var=25.0, max_iter=1)
    assert short.info["unshrunk_converged"] is False and short.info["unshrunk_n_iter"] == 1
    none = noise_aware_estimate(Y, noise_var=25.0, shrink="none")
    assert none.info["unshrunk_n_iter"] == none.n_iter and none.info["unshrunk_converged"] == none.converged
