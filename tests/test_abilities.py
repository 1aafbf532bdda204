"""Person abilities: WLE / MLE / EAP against independent scalar root finding and quadrature."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, special, stats

import privirt
from tests._memory import traced_peak

BETA = np.array([-1.5, -0.5, 0.0, 0.7, 1.3])


def wle_equation(theta, beta, r):
    p = special.expit(theta - beta)
    info = np.sum(p * (1 - p))
    d_info = np.sum(p * (1 - p) * (1 - 2 * p))
    return r - p.sum() + d_info / (2 * info)


def all_patterns():
    rows = [[(k >> j) & 1 for j in range(5)] for k in range(32)]
    return np.array(rows, dtype=float)


def test_wle_solves_warm_equation_and_is_finite():
    X = all_patterns()
    ab = privirt.estimate_abilities(X, BETA, device="cpu")
    assert np.all(np.isfinite(ab["theta"])) and np.all(np.isfinite(ab["se"]))
    for r in range(6):
        ref = optimize.brentq(wle_equation, -30, 30, args=(BETA, r), xtol=1e-12)
        got = ab.loc[ab["score"] == r, "theta"]
        np.testing.assert_allclose(got, ref, atol=1e-8)


def test_monotone_in_score():
    X = all_patterns()
    for method in ("wle", "eap", "mle"):
        ab = privirt.estimate_abilities(X, BETA, method=method, device="cpu")
        by_score = ab.groupby("score")["theta"].agg(["min", "max"])
        # persons with the same score and items get the same θ (Rasch sufficiency)
        np.testing.assert_allclose(by_score["min"], by_score["max"])
        assert np.all(np.diff(by_score["min"].to_numpy()) > 0)


def test_mle_infinite_for_extremes_and_matches_root():
    X = all_patterns()
    ab = privirt.estimate_abilities(X, BETA, method="mle", device="cpu")
    assert ab.loc[ab["score"] == 0, "theta"].eq(-np.inf).all()
    assert ab.loc[ab["score"] == 5, "theta"].eq(np.inf).all()
    ref = optimize.brentq(lambda t: 2 - special.expit(t - BETA).sum(), -20, 20, xtol=1e-12)
    np.testing.assert_allclose(ab.loc[ab["score"] == 2, "theta"], ref, atol=1e-8)
    info = np.sum(special.expit(ref - BETA) * (1 - special.expit(ref - BETA)))
    np.testing.assert_allclose(ab.loc[ab["score"] == 2, "se"], 1 / np.sqrt(info), rtol=1e-8)


def test_eap_matches_numerical_integration():
    x = np.array([[1, 0, 1, np.nan, 0]])
    ab = privirt.estimate_abilities(x, BETA, method="eap", device="cpu")
    obs = ~np.isnan(x[0])

    def lik(t):
        p = special.expit(t - BETA[obs])
        return np.prod(np.where(x[0][obs] == 1, p, 1 - p)) * stats.norm.pdf(t)

    z = integrate.quad(lik, -10, 10)[0]
    mean = integrate.quad(lambda t: t * lik(t), -10, 10)[0] / z
    var = integrate.quad(lambda t: (t - mean) ** 2 * lik(t), -10, 10)[0] / z
    assert ab["theta"].iloc[0] == pytest.approx(mean, abs=1e-6)
    assert ab["se"].iloc[0] == pytest.approx(np.sqrt(var), abs=1e-6)


def test_missing_responses_drop_out():
    full = np.array([[1.0, 0.0, 1.0]])
    with_missing = np.array([[1.0, 0.0, 1.0, np.nan]])
    b3 = BETA[:3]
    a = privirt.estimate_abilities(full, b3, device="cpu")
    b = privirt.estimate_abilities(with_missing, np.append(b3, 2.0), device="cpu")
    assert a["theta"].iloc[0] == pytest.approx(b["theta"].iloc[0], abs=1e-10)
    assert b["n_answered"].iloc[0] == 3


def test_labels_and_series_alignment():
    X = pd.DataFrame([[1, 0], [0, 0], [1, 1]], index=["ann", "bob", "cy"], columns=["q1", "q2"])
    beta = pd.Series({"q2": 0.5, "q1": -0.5})  # other order: aligned by label
    ab = privirt.estimate_abilities(X, beta, device="cpu")
    assert list(ab.index) == ["ann", "bob", "cy"]
    ab2 = privirt.estimate_abilities(X, np.array([-0.5, 0.5]), device="cpu")
    np.testing.assert_allclose(ab["theta"], ab2["theta"])
    with pytest.raises(ValueError, match="no value for item"):
        privirt.estimate_abilities(X, pd.Series({"q1": 0.0}))
    with pytest.raises(ValueError, match="one value per item"):
        privirt.estimate_abilities(X, np.zeros(3))
    with pytest.raises(ValueError, match="method"):
        privirt.estimate_abilities(X, beta, method="map")


def test_solver_options_are_validated():
    # max_iter=0 returned the starting values as if they were estimates
    X = pd.DataFrame([[1, 0], [0, 0], [1, 1]], columns=["q1", "q2"])
    beta = np.array([-0.5, 0.5])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_iter"):
            privirt.estimate_abilities(X, beta, max_iter=bad, device="cpu")
    for bad in (0.0, -1.0, float("nan"), "x", None):
        with pytest.raises(ValueError, match="tol"):
            privirt.estimate_abilities(X, beta, tol=bad, device="cpu")


def test_wle_root_found_for_difficulties_far_from_zero():
    # the root bracket was fixed at ±40: with difficulties beyond it the estimate was
    # silently clamped to the bracket's end
    beta = np.array([-45.0, 0.0, 45.0])
    X = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 0]], dtype=float)
    ab = privirt.estimate_abilities(X, beta, device="cpu")
    for (_, row), x in zip(ab.iterrows(), X):
        assert abs(wle_equation(row["theta"], beta, x.sum())) < 1e-8
    assert ab["theta"].iloc[0] > 45 and ab["theta"].iloc[1] < -45


def test_recovers_simulated_abilities():
    X, theta, beta = privirt.simulate_rasch(2000, 40, p_observed=0.8, seed=4)
    ab = privirt.estimate_abilities(X, beta, device="cpu")
    assert np.corrcoef(ab["theta"], theta)[0, 1] > 0.85
    # WLE is nearly unbiased: mean error small
    assert abs(float(np.mean(ab["theta"] - theta))) < 0.1


def test_abilities_take_the_estimators_difficulties_when_an_item_has_no_response():
    """The estimators drop an item nobody answered; abilities refused their β for lacking it
    (the docstring: such an item's β is unused)."""
    X = (np.random.default_rng(0).random((300, 4)) < 0.5).astype(float)
    df = pd.DataFrame(X, columns=list("abcd"))
    df["c"] = np.nan
    with pytest.warns(privirt.exceptions.EmptyResponsesWarning):
        beta = privirt.cmle_estimate(df).beta
    assert "c" not in beta.index
    ab = privirt.estimate_abilities(df, beta)
    ref = privirt.estimate_abilities(df.drop(columns="c"), beta)
    assert np.allclose(ab["theta"], ref["theta"], equal_nan=True)
    with pytest.raises(ValueError, match=r"no value for item\(s\) \['d'\]"):
        privirt.estimate_abilities(df, beta.drop("d"))


def _dense_grid_eap(X, beta):
    """Posterior mean and SD under N(0, 1) on a 48 001-point grid over [−12, 12]."""
    g = np.linspace(-12.0, 12.0, 48_001)
    log_p = -np.logaddexp(0.0, beta[:, None] - g[None, :])  # m × grid
    log_q = -np.logaddexp(0.0, g[None, :] - beta[:, None])
    right, wrong = np.nan_to_num(X) == 1, np.nan_to_num(X, nan=1.0) == 0
    ll = right @ log_p + wrong @ log_q - g**2 / 2
    w = np.exp(ll - ll.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    mean = w @ g
    return mean, np.sqrt((w * (g - mean[:, None]) ** 2).sum(axis=1))


@pytest.mark.parametrize("m", [200, 1000])
def test_eap_on_long_tests_matches_a_dense_grid(m):
    # the fixed 61-node rule on the prior had the SD 9 % too small at m = 200 and 14× at 1000
    rng = np.random.default_rng(16000700 + m)
    beta = np.linspace(-3, 3, m)
    theta = np.array([-2.0, 0.0, 1.3, 2.2, 0.5, 0.0, 0.0])
    X = (rng.random((7, m)) < special.expit(theta[:, None] - beta)).astype(float)
    X[4, rng.random(m) < 0.3] = np.nan  # missing cells
    X[5], X[6] = 1.0, 0.0  # all right, all wrong
    X[6, : m // 2] = np.nan
    X = np.vstack([X, np.full(m, np.nan)])  # nothing answered
    ab = privirt.estimate_abilities(X, beta, method="eap", device="cpu")
    mean, sd = _dense_grid_eap(X[:-1], beta)
    np.testing.assert_allclose(ab["theta"].to_numpy()[:-1], mean, atol=1e-9)
    np.testing.assert_allclose(ab["se"].to_numpy()[:-1], sd, atol=1e-9)
    assert np.isnan(ab["theta"].iloc[-1]) and np.isnan(ab["se"].iloc[-1])


def test_eap_on_short_tests_is_unchanged_from_the_fixed_rule():
    # on 5 items the previous fixed 61-node Gauss–Hermite rule on the prior was exact
    X = np.vstack([all_patterns(), [[1, np.nan, 0, np.nan, 1], [np.nan] * 4 + [0]]])
    ab = privirt.estimate_abilities(X, BETA, method="eap", device="cpu")
    z, w = np.polynomial.hermite_e.hermegauss(61)
    obs = ~np.isnan(X)
    x = np.nan_to_num(X)
    ll = (obs * x) @ np.log(special.expit(z[None, :] - BETA[:, None])) + (
        obs * (1 - x)) @ np.log(special.expit(BETA[:, None] - z[None, :])) + np.log(w)
    p = np.exp(ll - ll.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    mean = p @ z
    np.testing.assert_allclose(ab["theta"], mean, atol=1e-10)
    np.testing.assert_allclose(ab["se"], np.sqrt((p * (z - mean[:, None]) ** 2).sum(axis=1)), atol=1e-10)


def test_eap_with_extreme_difficulties_is_silent_and_exact():
    # |β| = 1000: the logistic is taken through logaddexp, as the fixed rule did (no overflow)
    b = np.array([-1000.0, -2.0, 0.0, 1.0, 1000.0])
    X = np.array([[1, 0, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, np.nan, 0, 1, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ab = privirt.estimate_abilities(X, b, method="eap", device="cpu")
    mean, sd = _dense_grid_eap(X, b)
    np.testing.assert_allclose(ab["theta"], mean, atol=1e-9)
    np.testing.assert_allclose(ab["se"], sd, atol=1e-9)


def _missing_batch(n=400, m=60, seed=20011):
    X, _, beta = privirt.simulate_rasch(n, m, seed=seed)
    X = np.asarray(X, dtype=float)
    X[np.random.default_rng(seed + 1).random(X.shape) < 0.2] = np.nan
    X[0], X[1, ::2] = 1.0, 0.0  # an all-right row and a row with every answer wrong
    X[1, 1::2] = np.nan
    return X, np.asarray(beta, dtype=float)


@pytest.mark.parametrize("method", ["wle", "mle", "eap"])
def test_batch_gives_each_person_the_theta_they_get_alone(method):
    # a group that had converged was thrown out of its bracket on the next pass (the strict
    # bracket test failed on a step below one ulp) and bisected back from ~20 logits away, while
    # the others converged: with max_iter=10 (ample alone) 206 of 10^4 persons were > 1 logit off
    X, beta = _missing_batch()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        batch = privirt.estimate_abilities(X, beta, method=method, max_iter=10, device="cpu")
        for i in range(0, len(X), 7):
            alone = privirt.estimate_abilities(X[i:i + 1], beta, method=method, max_iter=10,
                                               device="cpu")
            for col in ("theta", "se"):
                a, b = alone[col].iloc[0], batch[col].iloc[i]
                assert a == b or abs(a - b) < 1e-9, (i, col, a, b)
    ref = privirt.estimate_abilities(X, beta, method=method, device="cpu")
    np.testing.assert_allclose(batch["theta"], ref["theta"], atol=1e-9)


@pytest.mark.parametrize("method", ["wle", "mle"])
def test_solver_passes_stay_few_with_missing_cells(method, monkeypatch):
    # each person alone converges in 3-4 Newton steps; the batch took ~40 passes more (94 at
    # 10^4 x 100 with 20 % missing) as converged groups bisected back into their brackets
    from privirt.rasch import abilities

    calls = []
    moments = abilities._moments
    monkeypatch.setattr(abilities, "_moments", lambda xp, t, *a: calls.append(t.size) or moments(xp, t, *a))
    X, beta = _missing_batch()
    privirt.estimate_abilities(X, beta, method=method, device="cpu")
    assert len(calls) <= 9  # passes + the final standard errors
    assert calls[-2] < calls[0]  # converged groups are no longer computed


def test_warns_when_max_iter_leaves_persons_unconverged():
    X, beta = _missing_batch()
    for method in ("wle", "mle"):
        with pytest.warns(RuntimeWarning, match=r"\d+ of 400 persons' .* did not converge within "
                                                 r"max_iter=1 .*raise max_iter"):
            privirt.estimate_abilities(X, beta, method=method, max_iter=1, device="cpu")


def test_eap_does_not_depend_on_the_root_finder_s_settings():
    # its mode search took the caller's max_iter: max_iter=1 gave θ off by up to 33 and se = 0
    X, beta = _missing_batch()
    ref = privirt.estimate_abilities(X, beta, method="eap", device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for kw in ({"max_iter": 1}, {"max_iter": 2}, {"tol": 1e-2}):
            got = privirt.estimate_abilities(X, beta, method="eap", device="cpu", **kw)
            np.testing.assert_allclose(got[["theta", "se"]], ref[["theta", "se"]], atol=1e-9)


@pytest.mark.parametrize("method", ["wle", "mle", "eap"])
def test_a_tol_below_the_resolution_of_the_doubles_does_not_warn(method):
    # tol=1e-16 made the iterate alternate between neighbouring doubles and warn "did not converge"
    X, beta = _missing_batch()
    ref = privirt.estimate_abilities(X, beta, method=method, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = privirt.estimate_abilities(X, beta, method=method, tol=1e-16, device="cpu")
    np.testing.assert_allclose(got["theta"], ref["theta"], atol=1e-9)


def _weighted_loglik(theta, beta, r):
    p = special.expit(theta - beta)
    return r * theta - np.logaddexp(0, theta - beta).sum() + 0.5 * np.log(np.sum(p * (1 - p)))


def _dense_grid_wle(beta, r):
    # brute force: the largest weighted log-likelihood on a fine grid, polished by a bounded
    # scalar maximiser around that grid point
    grid = np.linspace(beta.min() - 12, beta.max() + 12, 40001)
    p = special.expit(grid[:, None] - beta)
    ell = (r * grid - np.logaddexp(0, grid[:, None] - beta).sum(axis=1)
           + 0.5 * np.log((p * (1 - p)).sum(axis=1)))
    j = int(np.argmax(ell >= ell.max() - 1e-9))  # the lowest of tied maxima (2 items, r = 1)
    res = optimize.minimize_scalar(lambda t: -_weighted_loglik(t, beta, r),
                                   bounds=(grid[max(j - 2, 0)], grid[min(j + 2, grid.size - 1)]),
                                   method="bounded", options={"xatol": 1e-12})
    return res.x, -res.fun


def test_wle_with_three_roots_is_a_maximum_and_the_lower_of_a_tie():
    # roots -1.2105, 0 (a minimum of the weighted likelihood) and +1.2105, equally high
    beta = np.array([-2.5, 2.5])
    ab = privirt.estimate_abilities(np.array([[1.0, 0.0], [0.0, 1.0]]), beta, device="cpu")
    ref = optimize.brentq(wle_equation, -5, -0.5, args=(beta, 1), xtol=1e-13)
    np.testing.assert_allclose(ab["theta"], [ref, ref], atol=1e-9)
    assert ref == pytest.approx(-1.2105413, abs=1e-6)


def test_wle_is_the_largest_of_several_maxima():
    beta = np.array([-6.77, -3.91, 1.28, 3.75])
    x = np.array([[1.0, 1.0, 0.0, 0.0]])
    got = privirt.estimate_abilities(x, beta, device="cpu")["theta"].iloc[0]
    ref, _ = _dense_grid_wle(beta, 2)
    assert abs(got - ref) < 1e-7 and abs(ref - 0.039) < 5e-3
    assert abs(wle_equation(got, beta, 2)) < 1e-10


def test_wle_matches_a_dense_grid_maximiser_of_the_weighted_likelihood():
    rng = np.random.default_rng(20_500)
    worst = 0.0
    for _ in range(150):
        k = int(rng.integers(2, 7))
        beta = np.sort(rng.normal(0, 3, k)) + rng.choice([0.0, 6.0, -6.0])
        r = int(rng.integers(0, k + 1))
        x = np.zeros((1, k))
        x[0, rng.permutation(k)[:r]] = 1
        got = privirt.estimate_abilities(x, beta, device="cpu")["theta"].iloc[0]
        ref, ell = _dense_grid_wle(beta, r)
        # as high as the brute-force maximum, and the lower θ of a tie
        assert _weighted_loglik(got, beta, r) >= ell - 1e-10, (beta, r, got, ref)
        worst = max(worst, abs(got - ref))
    assert worst < 1e-5


def test_wle_with_difficulties_hundreds_of_logits_apart_divides_no_zero_by_zero():
    # I(θ)² underflowed to 0 between items ~1000 logits apart: numpy's 0/0 warning leaked
    rng = np.random.default_rng(330001)
    beta = rng.normal(0, 1000, 6)
    X = (rng.random((50, 6)) < 0.5).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        est = privirt.estimate_abilities(X, beta, method="wle")
    assert np.isfinite(est["theta"].to_numpy()).all()


@pytest.mark.parametrize("method", ["wle", "mle", "eap"])
def test_blocks_of_groups_give_the_unblocked_result_bit_for_bit(method, monkeypatch):
    # the groups are solved in blocks of _BLOCK_CELLS cells: blocks of a few groups give what
    # one block gives, including for groups the WLE scans for other maxima (short, spread tests)
    from privirt.rasch import abilities

    rng = np.random.default_rng(21_004)
    X, beta = _missing_batch()
    Y = (rng.random((600, 6)) < 0.5).astype(float)
    Y[rng.random(Y.shape) < 0.3] = np.nan
    spread = np.array([-2.5, 2.5, -4.0, 4.0, 0.0, 6.0])
    whole = [privirt.estimate_abilities(X, beta, method=method, device="cpu"),
             privirt.estimate_abilities(Y, spread, method=method, device="cpu")]
    monkeypatch.setattr(abilities, "_BLOCK_CELLS", 256, raising=False)
    small = [privirt.estimate_abilities(X, beta, method=method, device="cpu"),
             privirt.estimate_abilities(Y, spread, method=method, device="cpu")]
    for a, b in zip(whole, small):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.mark.parametrize("method", ["wle", "mle", "eap"])
def test_memory_stays_near_the_input_size_with_missing_cells(method, monkeypatch):
    # with random missing cells each person is a group of their own: the G x m float64 mask and
    # the solver's ~5 temporaries of that size took 6.6 x the float64 input at 2e4 x 100
    # (2e5 x 100: 1035 MiB; 10^6 x 100: 5.9 GB peak RSS); blocks bound them

    from privirt.rasch import abilities

    monkeypatch.setattr(abilities, "_BLOCK_CELLS", 2**16, raising=False)  # 2e4 x 100 = 2e6 cells
    X = np.asarray(privirt.simulate_rasch(20_000, 100, p_observed=0.8, seed=21_005)[0], float)
    _, peak = traced_peak(privirt.estimate_abilities, X, np.zeros(100), method=method, device="cpu")
    assert peak < 3 * X.nbytes, peak / X.nbytes


@pytest.mark.parametrize("beta_hard", [40.0, 60.0, 80.0, 100.0])
def test_mle_far_above_an_item_solves_the_score_equation_without_cancellation(beta_hard):
    # r − Σ P_i cancelled to exactly 0 once 1 − P rounded to 0 (θ − β > 37): Newton stopped
    # at θ ≈ 38 for β = [0, 1, 80]; the exact root of Q_1 + Q_2 = P_3, solved in log space
    b = np.array([0.0, 1.0, beta_hard])
    got = privirt.estimate_abilities(pd.DataFrame([[1, 0, 1]], columns=list("abc")), b,
                                     method="mle", device="cpu")

    def g(t):
        return (np.logaddexp(special.log_expit(-t), special.log_expit(1.0 - t))
                - special.log_expit(t - beta_hard))

    root = optimize.brentq(g, 0.0, beta_hard, xtol=1e-13)
    se = 1.0 / np.sqrt(np.exp(special.log_expit(root - b) + special.log_expit(b - root)).sum())
    np.testing.assert_allclose(got["theta"].iloc[0], root, rtol=0, atol=1e-8)
    np.testing.assert_allclose(got["se"].iloc[0], se, rtol=1e-6)


def test_wle_with_a_far_item_answered_right_warns_nothing_and_keeps_its_value():
    # _sure_unique's 1 + P (e^h − 1) was 0 where P rounded to 1: numpy warned "divide by zero"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = privirt.estimate_abilities(pd.DataFrame([[1, 0, 1]]), np.array([0.0, 1.0, 5000.0]),
                                         method="wle", device="cpu")
    assert est["theta"].iloc[0] == pytest.approx(2.2460, abs=1e-3)  # Warm's maximiser


@pytest.mark.parametrize("beta, x, root", [
    ([0.0, 1.0, 1000.0], [1, 0, 1], (1000.0 + np.log1p(np.e)) / 2),
    ([0.0, 1.0, 5000.0], [1, 0, 1], (5000.0 + np.log1p(np.e)) / 2),
    ([-1e6, 0.0, 1e6], [1, 1, 0], 5e5),
    ([0.0, 0.0, 3000.0, 5000.0], [1, 1, 0, 1], 4000.0),  # + log(1 + 2e^(−3000)) / 2
], ids=["1000", "5000", "1e6", "two-sided"])
def test_mle_hundreds_of_logits_from_every_item_solves_in_log_space(beta, x, root):
    # Newton moved one logit a step where every term is e^(−|θ − β|), and beyond ~745 logits
    # they underflowed to 0: θ stopped at 1667.5 (β 5000) or at 37.3 (β ±1e6) with no warning.
    # The roots: Σ_{β_i<θ} e^(−(θ − β_i)) = Σ_{β_i>θ} e^(θ − β_i)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = privirt.estimate_abilities(pd.DataFrame([x]), np.array(beta), method="mle",
                                         device="cpu")
    np.testing.assert_allclose(got["theta"].iloc[0], root, rtol=1e-13)


@pytest.mark.parametrize("method", ["mle", "wle"])
@pytest.mark.parametrize("d", [300.0, 800.0, 1400.0])
def test_se_far_from_every_item_is_one_over_root_information_not_a_floor(method, d):
    # the information was floored at 1e-300, so the se stopped at 1e150 where 1/√I is larger
    # (800 logits from both items: e^400/√2 = 3.7e173); it is now summed in log space
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = privirt.estimate_abilities(pd.DataFrame([[1, 0]]), np.array([-d, d]), method=method,
                                         device="cpu")
    theta = got["theta"].iloc[0]
    z = theta - np.array([-d, d])
    log_info = special.logsumexp(special.log_expit(z) + special.log_expit(-z))
    np.testing.assert_allclose(got["se"].iloc[0], np.exp(-0.5 * log_info), rtol=1e-10)
    if method == "mle":  # (the WLE's roots lie 1.1 logits inside an item)
        assert got["se"].iloc[0] > 1e60


def test_duplicate_beta_labels_are_refused_naming_them():
    X = pd.DataFrame(np.tile([[1, 0, 1], [0, 1, 1], [1, 1, 0]], (4, 1)), columns=["q0", "q1", "q2"])
    beta = pd.Series([-0.5, 0.0, 0.5], index=X.columns)
    with pytest.raises(ValueError, match=r"^beta has duplicate item label\(s\) \['q0'\]; pass one "
                                         r"difficulty per item$"):
        privirt.estimate_abilities(X, pd.concat([beta, beta.iloc[:1]]))
    # a duplicated label that replaces an item is named too (not as a missing item)
    with pytest.raises(ValueError, match=r"duplicate item label\(s\) \['q1'\]"):
        privirt.estimate_abilities(X, pd.Series([-0.5, 0.0, 0.5], index=["q0", "q1", "q1"]))
