"""Intervals where the privacy noise dominates (docs/totals.md §5.2, docs/intervals.md §3b).

Totals: the shrinkage makes every difficulty equal, so a bootstrap holding the truth at the
point estimate covered the true difficulties almost never; the replicates' truths are now
drawn from their posterior, for complete data and under MCAR (§7.3 step 4).  Spectral: when the estimate does not respond to the difficulties
the calibration stops and the intervals are unbounded, with a warning.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import privirt
from privirt.exceptions import NoiseDominatesWarning
from privirt.private.totals import intervals as totals_intervals
from privirt.private.totals.api import private_totals_estimate


def _rasch(n: int, m: int, seed: int, missing: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Responses with difficulties and abilities drawn N(0, 1), a share ``missing`` of the cells
    missing independently (NaN); the centred difficulties."""
    rng = np.random.default_rng(seed)
    beta, theta = rng.normal(size=m), rng.normal(size=n)
    X = (rng.random((n, m)) < 1.0 / (1.0 + np.exp(beta[None, :] - theta[:, None]))).astype(np.int8)
    if missing:
        X = np.where(rng.random((n, m)) < missing, np.nan, X)
    return X, beta - beta.mean()


def _coverage(fit, beta: np.ndarray) -> float:
    return float(np.mean((fit.ci["lo"].to_numpy() <= beta) & (beta <= fit.ci["hi"].to_numpy())))


def _swamped(n: int, m: int, seed0: int, share: float = 0.0, **kw) -> tuple[list, list]:
    """Coverage and median width of the totals' intervals at ε = 0.1 on two seeded data sets
    where the shrinkage sets every difficulty equal (checked); ``share`` of the cells missing,
    ``kw`` passed to the estimator."""
    covs, widths = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        for s in range(2):
            X, beta = _rasch(n, m, seed0 + s, missing=share)
            fit = private_totals_estimate(X, epsilon=0.1, seed=s, n_boot=40, **kw)
            assert fit.info["shrinkage"] < 0.05
            covs.append(_coverage(fit, beta))
            widths.append(float(np.median(fit.ci["hi"] - fit.ci["lo"])))
    return covs, widths


def _moved(new, old) -> np.ndarray:
    """Each item's largest endpoint move between two fits of the same point estimate, over the
    old interval's width."""
    np.testing.assert_array_equal(new.beta, old.beta)
    width = (old.ci["hi"] - old.ci["lo"]).to_numpy()
    return np.maximum(np.abs(new.ci["lo"] - old.ci["lo"]), np.abs(new.ci["hi"] - old.ci["hi"])).to_numpy() / width


def test_totals_intervals_cover_the_difficulties_where_noise_dominates():
    # n = 30, m = 500, ε = 0.1: the totals' noise SD (hundreds) dwarfs n, every difficulty is shrunk to 0;
    # holding the bootstrap's truth there gave coverage ≈ 0.04 and a width of 0.08 logits
    covs, widths = _swamped(30, 500, 100)
    assert 0.85 <= np.mean(covs) <= 0.995, covs
    assert 2.0 < np.median(widths) < 6.0, widths  # about ±2 prior SDs of the difficulties, not the real line


def test_totals_intervals_barely_move_where_noise_is_small(monkeypatch):
    # n = 1000, m = 20, ε = 1 (shrinkage factor ≈ 0.99): redrawing the truths from their narrow
    # posterior leaves the intervals where the bootstrap at the point estimate put them
    X, beta = _rasch(1000, 20, 7)
    new = private_totals_estimate(X, epsilon=1.0, seed=3, n_boot=100)
    monkeypatch.setattr(totals_intervals, "true_difficulties", lambda rng, fit, *a, **k: fit.beta)
    old = private_totals_estimate(X, epsilon=1.0, seed=3, n_boot=100)
    r = _moved(new, old)
    assert np.all(r < 0.1), r.max()
    assert np.median(r) < 0.05


def test_mcar_totals_intervals_cover_the_difficulties_where_noise_dominates():
    # n = 300, m = 50, ε = 0.1, half the cells missing: the ratios' noise swamps their spread and
    # every difficulty is shrunk to 0; holding the bootstrap's truth there gave coverage 0 and
    # intervals 1e-4 logits wide (docs/totals.md §7.3 step 4)
    covs, widths = _swamped(300, 50, 200, share=0.5, missing="mcar")
    assert 0.8 <= np.mean(covs) <= 0.995, covs  # 0.96 and 0.84 on these seeds
    assert 2.0 < np.median(widths) < 6.0, widths


def test_mcar_totals_intervals_barely_move_where_noise_is_small(monkeypatch):
    # n = 2000, m = 20, ε = 1, 20 % missing (two bins of the number answered): the truths'
    # posterior is narrow and the intervals stay where the bootstrap at the point estimate put them
    X, beta = _rasch(2000, 20, 8, missing=0.2)
    new = private_totals_estimate(X, epsilon=1.0, seed=3, n_boot=60, missing="mcar")
    assert new.info["k_bins"] >= 2 and new.info["shrinkage"] > 0.9
    monkeypatch.setattr(totals_intervals, "true_difficulties", lambda rng, fit, *a, **k: fit.beta)
    old = private_totals_estimate(X, epsilon=1.0, seed=3, n_boot=60, missing="mcar")
    r = _moved(new, old)
    assert np.all(r < 0.1), r.max()
    assert np.median(r) < 0.05


def test_spectral_all_noise_stops_the_calibration_with_unbounded_intervals():
    # n = 30, m = 50, ε = 0.1: the replicates' mean does not follow the truth (slope ≈ 0); the
    # secant used to run all its steps at the 0.05 floor and return finite, mis-centred intervals
    X, beta = _rasch(30, 50, 11)
    with pytest.warns(NoiseDominatesWarning, match="does not respond to the difficulties"):
        fit = privirt.private_spectral_estimate(X, epsilon=0.1, seed=1, n_boot=20, estimator="spectral")
    assert fit.info["informative"] is False
    assert fit.info["calibration_steps"] == 0
    assert abs(fit.info["attenuation"]) < 0.05
    assert np.all(np.isinf(fit.se)) and np.all(fit.ci["lo"] == -np.inf) and np.all(fit.ci["hi"] == np.inf)
    assert np.all(np.isfinite(fit.beta))


def test_spectral_intervals_for_one_person_are_unbounded_with_a_warning():
    """One person (the public n = 1) identifies no difference between items, as the totals path
    says; the one-person release's attenuation (0.07-0.09) passed the 0.05 floor and gave finite
    intervals that excluded both the estimate and the truth, silently."""
    X = np.array([[1.0, 0.0]])
    for estimator in ("spectral", "noise_aware"):
        with pytest.warns(NoiseDominatesWarning, match="one person") as caught:
            fit = privirt.private_spectral_estimate(X, epsilon=100.0, seed=83000603, n_boot=20,
                                                    estimator=estimator)
        assert len([w for w in caught if "one person" in str(w.message)]) == 1
        assert np.all(np.isinf(fit.se)) and np.all(fit.ci["lo"] == -np.inf) and np.all(fit.ci["hi"] == np.inf)
        assert fit.info["informative"] is False and "not identified" in fit.info["note"]
        assert np.all(np.isfinite(fit.beta))
    with warnings.catch_warnings():  # n = 0 replicates asked for: no intervals, nothing to warn of
        warnings.simplefilter("error", NoiseDominatesWarning)
        assert np.isnan(privirt.private_spectral_estimate(X, epsilon=100.0, seed=1, n_boot=0).se).all()
        two = privirt.private_spectral_estimate(np.array([[1.0, 0.0], [0.0, 1.0]]), epsilon=100.0, seed=1,
                                                n_boot=20)
    assert np.all(np.isfinite(two.se)) and two.info["informative"] is True


def test_spectral_informative_intervals_stay_finite():
    X, beta = _rasch(1000, 20, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        fit = privirt.private_spectral_estimate(X, epsilon=1.0, seed=2, n_boot=40, estimator="spectral")
    assert fit.info["informative"] is True and fit.info["attenuation"] > 0.5
    assert np.all(np.isfinite(fit.se)) and _coverage(fit, beta) >= 0.8


def test_spectral_items_alike_are_not_mistaken_for_noise():
    # all six items equally hard, 300 persons, ε = 1: the counts carry the data well, but the
    # ratio slope (mean·β₀)/(β₀·β₀) divided Monte-Carlo noise by a tiny spread and fell below
    # 0.05 for 5 of 60 seeds, giving unbounded intervals; the probe re-measures it
    rng = np.random.default_rng(5)
    X = (rng.random((300, 6)) < 0.6).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        for seed in (7, 11, 13):  # the seeds the ratio slope failed on
            fit = privirt.private_spectral_estimate(X, epsilon=1.0, seed=seed, n_boot=40)
            assert fit.info["informative"] is True and fit.info["attenuation"] > 0.2
            assert np.all(np.isfinite(fit.se)) and np.all((fit.ci["lo"] < 0) & (fit.ci["hi"] > 0))
