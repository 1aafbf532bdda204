"""Private 2PNO difficulties beside the Rasch totals estimator (issue 25): the marginal
difficulties τ with their intervals, and why b itself carries the discriminations' error (the fit
attains the information bound of the release, ``docs/private_2pl.md`` §5).  Seeded noise: the
results are deterministic."""

from __future__ import annotations

import numpy as np
import pytest

import privirt
from privirt.private.twopl import estimate_2pl_from_release, pair_statistics, release_2pl
from privirt.private.twopl.bound import noise_covariance, relative_noise_bounds
from privirt.private.twopl.fit import fit_factor, to_2pno
from ._twopno import lognormal_2pno

pytest.importorskip("mechanisms")


def _data(n, m, seed):
    return lognormal_2pno(n, m, seed)


def _relc(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    x, y = x - x.mean(), y - y.mean()
    return float(np.linalg.norm(x - y) / np.linalg.norm(y))


def _noise_free(X):
    ref = fit_factor(*pair_statistics(X), X.shape[0], 0.0, 0.0)
    a0, b0 = to_2pno(ref.tau[0], ref.lam[0])
    return a0, b0, ref.tau[0]


def test_marginal_difficulties_no_worse_than_the_totals_estimator():
    # each against the non-private fit of its own model on the same data: τ against the noise-free
    # one-factor fit, the totals estimator's β against CML (both functions of marginal information)
    et, ebeta = [], []
    for k in range(4):
        X, _, _ = _data(3000, 10, 500 + k)
        _, _, tau0 = _noise_free(X)
        fit = estimate_2pl_from_release(release_2pl(X, epsilon=1.0, seed=k), n_boot=0)
        cml = privirt.cmle_estimate(X).beta.to_numpy()
        beta = privirt.private_totals_estimate(X, epsilon=1.0, seed=k, n_boot=0).beta.to_numpy()
        et.append(_relc(fit.tau, tau0))
        ebeta.append(_relc(beta, cml))
        assert np.allclose(fit.tau, fit.b / np.sqrt(1.0 + fit.a**2))
        assert fit.tau.index.equals(fit.b.index) and fit.tau.name == "tau"
    assert np.mean(et) < np.mean(ebeta), (et, ebeta)


def test_tau_intervals_and_standard_errors():
    X, a, b = _data(2000, 6, 11)
    fit = privirt.private_2pl_estimate(X, epsilon=2.0, seed=4, n_boot=40)
    ci, tau = fit.ci["tau"], fit.tau
    assert list(ci.columns) == ["lo", "hi"] and ci.index.equals(tau.index)
    assert (ci["lo"] < ci["hi"]).all() and (fit.se["tau"] > 0).all()
    # the interval of τ is narrower than b's: b carries the error of a as well
    assert ((ci["hi"] - ci["lo"]) < (fit.ci["b"]["hi"] - fit.ci["b"]["lo"])).mean() >= 0.5
    none = privirt.private_2pl_estimate(X, epsilon=2.0, seed=4, n_boot=0)
    assert none.ci["tau"].isna().all().all() and none.se["tau"].isna().all()


def test_bound_scales_with_the_noise_variance():
    # m = 3: 3 totals and 3 pairs for 6 parameters (m = 2 is not identified without the prior)
    tau, a = np.array([-0.5, 0.2, 0.8]), np.array([0.8, 1.0, 1.3])
    C1 = noise_covariance(tau, a, 1000, 5.0, 5.0)
    C2 = noise_covariance(tau, a, 1000, 10.0, 10.0)
    assert np.allclose(C2, 4.0 * C1, rtol=1e-5)  # the bound scales with σ²
    r = relative_noise_bounds(tau, a, 1000, 5.0, 5.0)
    assert 0 < r["tau"] and 0 < r["b_from_a"] < r["b"]


def test_b_error_attains_the_information_bound():
    # the cause of b's larger error: b = τ √(1 + a²) carries the error of a, and the fit is
    # already efficient — its root mean squared noise error of b (against the noise-free fit on
    # the same data) matches the linearised bound that no unbiased post-processing beats
    X, _, _ = _data(4000, 10, 7)
    a0, b0, tau0 = _noise_free(X)
    errs = []
    for r in range(12):
        rel = release_2pl(X, epsilon=1.0, seed=100 + r)
        fit = estimate_2pl_from_release(rel, n_boot=0)
        errs.append(_relc(fit.b, b0))
    bound = relative_noise_bounds(tau0, a0, 4000, rel.sigma_totals, rel.sigma_pairs)
    rms = float(np.sqrt(np.mean(np.square(errs))))
    assert 0.75 * bound["b"] < rms < 1.3 * bound["b"], (rms, bound)
    assert bound["b_from_a"] > bound["b_from_tau"]  # and most of it comes from a


@pytest.mark.slow
def test_common_level_where_the_noise_swamps_everything():
    # n = 1000, m = 50, ε = 0.1 (noise SD 1.3 on a disagreement proportion, 0.6 on a total): pure
    # noise pushes the all-equal fit toward λ → 1; before its bias was subtracted (and the level's
    # prior narrowed to log a ~ N(0, 0.5²)) these releases gave a ≈ 2.4 for all items, relative
    # errors 1.34 and 1.14 (worse than all a equal at the true level, 0.27 and 0.30)
    for k, r in ((1, 0), (2, 1)):
        X, a, _ = _data(1000, 50, 58_000 + k)
        fit = privirt.private_2pl_estimate(X, epsilon=0.1, seed=1000 * k + r, n_boot=0)
        err = np.linalg.norm(fit.a.to_numpy() - a) / np.linalg.norm(a)
        assert err < 0.8, (k, err)
        assert fit.info["noise_bias_mean_log_a"] > 0.3  # the bias that was subtracted
