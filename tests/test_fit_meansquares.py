"""Infit/outfit mean squares: against a cell-by-cell computation and against their known
behaviour on Rasch and 2PL data."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.fit.meansquares import wilson_hilferty


def _naive_fit(X, theta, beta, *, by, drop_extreme=True):
    """Straight from Wright & Masters (1982): loops over cells, the fourth central moment
    written out as P(1−P)⁴ + (1−P)P⁴."""
    n, m = X.shape
    units = m if by == "item" else n
    out = []
    for u in range(units):
        z2, r2, w_sum, c_over_w2, c_minus_w2, count = 0.0, 0.0, 0.0, 0.0, 0.0, 0
        for l in range(n):
            row = X[l]
            answered = ~np.isnan(row)
            score = np.nansum(row)
            if answered.sum() == 0:
                continue
            if drop_extreme and (score == 0 or score == answered.sum()):
                continue
            for i in range(m):
                if (by == "item" and i != u) or (by == "person" and l != u):
                    continue
                x = X[l, i]
                if math.isnan(x):
                    continue
                p = 1.0 / (1.0 + math.exp(-(theta[l] - beta[i])))
                w = p * (1 - p)
                c = p * (1 - p) ** 4 + (1 - p) * p**4
                z2 += (x - p) ** 2 / w
                r2 += (x - p) ** 2
                w_sum += w
                c_over_w2 += c / w**2
                c_minus_w2 += c - w**2
                count += 1
        if count == 0:
            out.append((np.nan, np.nan, np.nan, np.nan, 0))
            continue
        outfit, infit = z2 / count, r2 / w_sum
        q_out = math.sqrt(c_over_w2 / count**2 - 1 / count)
        q_in = math.sqrt(c_minus_w2 / w_sum**2)
        z_out = (outfit ** (1 / 3) - 1) * 3 / q_out + q_out / 3
        z_in = (infit ** (1 / 3) - 1) * 3 / q_in + q_in / 3
        out.append((infit, outfit, z_in, z_out, count))
    return pd.DataFrame(out, columns=["infit", "outfit", "infit_z", "outfit_z", "n"])


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(7)
    X, _, _ = privirt.simulate_rasch(40, 6, p_observed=0.8, seed=7)
    X[3, :] = 1.0  # an all-correct person (extreme)
    X[5, :] = np.nan  # a person without responses
    X[5, 2] = 0.0  # ... except one wrong answer (extreme too)
    theta = rng.normal(0, 1, 40)
    beta = np.array([-1.2, -0.4, 0.0, 0.3, 0.8, 1.5])
    return X, theta, beta


@pytest.mark.parametrize("extreme", ["drop", "keep"])
def test_item_fit_matches_cellwise_formula(small, extreme):
    X, theta, beta = small
    got = privirt.item_fit(X, beta, theta, extreme=extreme)
    want = _naive_fit(X, theta, beta, by="item", drop_extreme=extreme == "drop")
    np.testing.assert_allclose(got.to_numpy(float), want.to_numpy(float), rtol=1e-10)
    assert list(got.columns) == ["infit", "outfit", "infit_z", "outfit_z", "n"]


def test_person_fit_matches_cellwise_formula(small):
    X, theta, beta = small
    got = privirt.person_fit(X, beta, theta)
    want = _naive_fit(X, theta, beta, by="person")
    cols = ["infit", "outfit", "infit_z", "outfit_z"]
    np.testing.assert_allclose(got[cols].to_numpy(), want[cols].to_numpy(), rtol=1e-10)
    # n is the number of items each person answered, fit values NaN for extreme scores
    np.testing.assert_array_equal(got["n"].to_numpy(), (~np.isnan(X)).sum(axis=1))
    assert got.loc[3, ["infit", "outfit"]].isna().all()
    assert got.loc[5, ["infit", "outfit"]].isna().all()
    np.testing.assert_allclose(got["theta"].to_numpy(), theta)


def test_missing_cells_drop_out(small):
    X, theta, beta = small
    fit = privirt.item_fit(X, beta, theta, extreme="keep")
    answered = (~np.isnan(X)).sum(axis=0)
    np.testing.assert_array_equal(fit["n"].to_numpy(), answered)


def test_wilson_hilferty_at_expectation():
    # ms = 1 gives z = q/3 (the transform's small bias correction); q = 0 is undefined
    np.testing.assert_allclose(wilson_hilferty(np.array([1.0]), np.array([0.3])), [0.1])
    assert np.isnan(wilson_hilferty(np.array([1.0]), np.array([0.0]))[0])


def test_default_theta_is_the_wle():
    X, _, _ = privirt.simulate_rasch(300, 8, seed=2)
    est = privirt.cmle_estimate(X)
    wle = privirt.estimate_abilities(X, est.beta, method="wle")
    pd.testing.assert_frame_equal(privirt.item_fit(X, est), privirt.item_fit(X, est, wle))
    pd.testing.assert_frame_equal(privirt.item_fit(X, est),
                                  privirt.item_fit(X, est.beta, wle["theta"].to_numpy()))


@pytest.mark.parametrize("data_labels, beta_labels, cast", [
    ([10, 20, 30, 40, 50], ["10", "20", "30", "40", "50"], "int"),  # beta from JSON / dtype=str CSV
    (["10", "20", "30", "40", "50"], [10, 20, 30, 40, 50], "str"),
])
def test_labels_equal_only_as_text_are_named_as_a_type_difference(data_labels, beta_labels, cast):
    """The message listed two identical-looking lists ("missing from beta: [10, 20, 30, ...], not
    in the responses: [10, 20, 30, ...]") and no remedy; it now names the types and the fix."""
    X, _, _ = privirt.simulate_rasch(300, 5, seed=39000120)
    df = pd.DataFrame(X.astype(int), columns=data_labels)
    beta = pd.Series(np.linspace(-1, 1, 5), index=beta_labels)
    for f in (privirt.item_fit, privirt.person_fit, privirt.estimate_abilities):
        with pytest.raises(ValueError) as info:
            f(df, beta)
        msg = str(info.value)
        assert "\n" not in msg and "equal only as text" in msg, (f.__name__, msg)
        assert f"beta.index = beta.index.astype({cast})" in msg
        fixed = beta.copy()
        fixed.index = fixed.index.astype(cast)
        f(df, fixed)  # the advice works


def test_labels_are_carried_and_order_mismatch_refused():
    X = privirt.load_dataset("lsat7")
    est = privirt.cmle_estimate(X)
    fit = privirt.item_fit(X, est)
    assert list(fit.index) == list(X.columns)
    pf = privirt.person_fit(X, est)
    assert pf.index.equals(X.index)
    with pytest.raises(ValueError, match="different order"):
        privirt.item_fit(X, est.beta.iloc[::-1])
    with pytest.raises(ValueError, match="do not match"):
        privirt.item_fit(X, est.beta.rename({"item1": "other"}))
    with pytest.raises(ValueError, match="5 items"):
        privirt.item_fit(X, np.zeros(4))
    with pytest.raises(ValueError, match="persons"):
        privirt.item_fit(X, est, pd.Series(0.0, index=X.index[::-1]))
    with pytest.raises(ValueError, match="finite"):
        privirt.item_fit(X, [0.0, 0.0, np.inf, 0.0, 0.0])
    mle = privirt.estimate_abilities(X, est.beta, method="mle")
    with pytest.raises(ValueError, match="not finite"):
        privirt.item_fit(X, est, mle, extreme="keep")
    # infinite MLEs only belong to extreme scores, which "drop" leaves out
    assert np.isfinite(privirt.item_fit(X, est, mle)["infit"]).all()
    with pytest.raises(ValueError, match="extreme must be"):
        privirt.item_fit(X, est, extreme="no")


def test_spectral_result_is_accepted():
    X, _, _ = privirt.simulate_rasch(500, 10, seed=4)
    fit = privirt.item_fit(X, privirt.spectral_estimate(X))
    assert fit["infit"].between(0.8, 1.2).all()


def test_mean_squares_near_one_on_rasch_data():
    X, theta, beta = privirt.simulate_rasch(3000, 15, seed=11)
    est = privirt.cmle_estimate(X)
    fit = privirt.item_fit(X, est)
    assert fit[["infit", "outfit"]].stack().between(0.85, 1.15).all(), fit
    pfit = privirt.person_fit(X, est)
    assert abs(pfit["infit"].mean() - 1) < 0.1


def test_z_is_standard_normal_at_the_true_parameters():
    # with the generating θ and β the mean squares' model variances are exact, so the
    # standardized values over many items are close to N(0, 1)
    X, theta, beta = privirt.simulate_rasch(400, 200, seed=5)
    fit = privirt.item_fit(X, beta, theta, extreme="keep")
    for col in ("infit_z", "outfit_z"):
        z = fit[col].to_numpy()
        assert abs(z.mean()) < 0.25, (col, z.mean())
        assert 0.8 < z.std() < 1.25, (col, z.std())


def _two_pl(slopes, n, seed):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal(n)
    b = np.linspace(-1, 1, len(slopes))
    prob = 1 / (1 + np.exp(-(np.asarray(slopes)[None, :] * (theta[:, None] - b[None, :]))))
    return (rng.random(prob.shape) < prob).astype(float)


def test_steep_item_overfits_and_flat_item_underfits():
    slopes = [1.0] * 10
    slopes[3], slopes[7] = 3.0, 0.3
    X = _two_pl(slopes, 3000, seed=12)
    fit = privirt.item_fit(X, privirt.cmle_estimate(X))
    assert fit.loc[3, "infit"] < 0.85 and fit.loc[3, "infit_z"] < -2, fit.loc[3]
    assert fit.loc[7, "infit"] > 1.15 and fit.loc[7, "infit_z"] > 2, fit.loc[7]
    others = fit.drop(index=[3, 7])
    assert others["infit"].between(0.85, 1.15).all()


def test_reversed_person_underfits():
    X, _, beta = privirt.simulate_rasch(500, 12, seed=3)
    order = np.argsort(beta)
    X[0] = 0.0
    X[0, order[-4:]] = 1.0  # right on the four hardest items only
    fit = privirt.person_fit(X, beta)
    assert fit.loc[0, "outfit"] > 2 and fit.loc[0, "outfit_z"] > 2


def test_items_without_responses_follow_the_estimator():
    X, _, _ = privirt.simulate_rasch(300, 6, seed=9)
    X[:, 4] = np.nan  # nobody answered item 4: the estimators drop it with a warning
    with pytest.warns(privirt.EmptyResponsesWarning):
        est = privirt.cmle_estimate(X)
    fit = privirt.item_fit(X, est)
    assert list(fit.index) == [0, 1, 2, 3, 5]
    assert (fit["n"] > 0).all()
    # an array for the six columns still works: item 4 then has no response to judge
    fit6 = privirt.item_fit(X, np.insert(est.beta.to_numpy(), 4, 0.0))
    assert fit6.loc[4, "n"] == 0 and np.isnan(fit6.loc[4, "infit"])
    np.testing.assert_allclose(fit6.drop(index=4).to_numpy(float), fit.to_numpy(float))


@pytest.mark.parametrize("d", [37.0, 40.0, 400.0])
def test_outfit_with_an_item_answered_far_from_the_person_is_finite(d):
    # P rounded to 1 beyond 37 logits, so W = P(1 − P) = 0 and (x − P)²/W = 0/0: outfit and its
    # z were NaN (and spread into the item's); the cell's term is Q/P for a 1 and P/Q for a 0
    X = pd.DataFrame([[1, 0, 1], [0, 1, 1], [1, 1, 0]], columns=["a", "b", "c"], index=["p1", "p2", "p3"])
    beta = pd.Series([-d, 0.0, 1.0], index=X.columns)
    theta = pd.Series([0.5, 0.3, 0.2], index=X.index)
    got = privirt.person_fit(X, beta, theta=theta)
    z = 0.5 - beta.to_numpy()
    terms = [np.exp(-z[0]), np.exp(z[1]), np.exp(-z[2])]  # Q/P = e^(−z) for a 1, P/Q = e^z for a 0
    np.testing.assert_allclose(got.loc["p1", "outfit"], np.mean(terms), rtol=1e-12)
    assert np.isfinite(got.loc["p1", ["outfit", "outfit_z"]].to_numpy(float)).all()
    assert np.isfinite(privirt.item_fit(X, beta, theta=theta).loc["a", ["outfit", "outfit_z"]].to_numpy(float)).all()


def test_outfit_z_where_one_over_w_overflows_is_finite_from_its_logarithm():
    # beyond ~709 logits 1/W overflowed in Σ(1/W − 3), so outfit_z was inf or NaN where the mean
    # square and q (≈ √Σ(1/W) / n, about 8e155 at 720 logits) are finite
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    X = pd.DataFrame({"a": [1, 0, 1, 0], "c": [1, 1, 0, 0]})
    theta = pd.Series([720.0, 0.3, -0.2, -720.0])
    beta = pd.Series([0.0, -0.4], index=["a", "c"])
    got = privirt.item_fit(X, beta, theta, extreme="keep")
    for item in ("a", "c"):
        S = s2 = Decimal(0)
        for p in range(4):
            z = Decimal(theta[p]) - Decimal(beta[item])
            P, Q = 1 / (1 + (-z).exp()), 1 / (1 + z.exp())
            S += 1 / (P * Q) - 3
            s2 += (Q * Q if X[item][p] == 1 else P * P) / (P * Q)
        q, ms = (S / 16 - Decimal(1) / 4).sqrt(), s2 / 4
        want = float((ms ** (Decimal(1) / 3) - 1) * (3 / q) + q / 3)
        np.testing.assert_allclose(got.loc[item, "outfit_z"], want, rtol=1e-10)
        np.testing.assert_allclose(got.loc[item, "outfit"], float(ms), rtol=1e-12)


@pytest.mark.parametrize("far", [700.5, -1e3, 1e308])
def test_a_difficulty_beyond_700_logits_is_refused_naming_the_item(far):
    # beta = 1e308 passed the finiteness check: reliability gave numpy's divide and overflow
    # warnings and NaN, item_fit inf and NaN (from 1000 logits on)
    X = pd.DataFrame([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]], columns=["a", "b", "c"])
    beta = pd.Series([0.0, far, 1.0], index=X.columns)
    for call in (privirt.item_fit, privirt.person_fit, privirt.reliability):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(ValueError, match=r"within ±700 logits.*item 'b' has"):
                call(X, beta)
    privirt.item_fit(X, beta.replace(far, 700.0 if far > 0 else -700.0))  # the bound itself is taken


def test_non_finite_theta_advice_fits_the_persons():
    X, _, _ = privirt.simulate_rasch(80, 6, seed=7)
    X[3] = [1, 0, 1, 0, 1, 0]  # a non-extreme score
    X[5] = 1.0  # an extreme score
    est = privirt.cmle_estimate(X)
    theta = privirt.estimate_abilities(X, est.beta)["theta"].to_numpy().copy()
    nan3 = theta.copy()
    nan3[3] = np.nan
    for check in (privirt.item_fit, privirt.person_fit, privirt.reliability):
        for extreme in ("drop", "keep"):  # leaving extremes out changes nothing for person 3
            with pytest.raises(ValueError, match=r"not finite for 1 person.*\[3\]") as info:
                check(X, est, theta=nan3, extreme=extreme)
            assert "extreme=" not in str(info.value) and "finite theta" in str(info.value)
    inf5 = theta.copy()
    inf5[5] = np.inf
    with pytest.raises(ValueError, match="extreme score") as info:
        privirt.item_fit(X, est, theta=inf5, extreme="keep")
    assert "extreme='drop'" in str(info.value)
    assert np.isfinite(privirt.item_fit(X, est, theta=inf5)["infit"]).all()  # the advice works
    both = inf5.copy()
    both[3] = np.nan
    with pytest.raises(ValueError, match="2 person") as info:
        privirt.item_fit(X, est, theta=both, extreme="keep")
    assert "extreme=" not in str(info.value)


def test_an_item_hundreds_of_logits_from_the_persons_gives_no_numpy_warning():
    # beta = -700 (inside the bound) with theta = 5: Σ 1/W overflowed in the sum, outside the
    # errstate, and numpy's "overflow encountered in reduce" reached the caller
    rng = np.random.default_rng(96_200_301)
    X = pd.DataFrame((rng.random((400, 4)) < 0.5).astype(float), columns=list("abcd"))
    X["a"] = 1.0
    beta = pd.Series([-700.0, -0.5, 0.0, 0.5], index=X.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = privirt.item_fit(X, beta, theta=pd.Series(5.0, index=X.index))
    assert np.isfinite(got.loc["a", "outfit_z"])  # (from the logarithm of Σ 1/W)


def _plain_numpy_fit(X, theta, beta, axis):
    """The defining sums, vectorised with plain numpy (every person used, missing cells out)."""
    z = theta[:, None] - beta[None, :]
    P, Q = 1.0 / (1.0 + np.exp(-z)), 1.0 / (1.0 + np.exp(z))
    W, use = P * Q, ~np.isnan(X)
    C = P * Q**4 + Q * P**4
    r2 = np.where(X == 1, Q * Q, P * P)

    def s(a):
        return np.where(use, a, 0.0).sum(axis=axis)

    n, sw = use.sum(axis=axis), s(W)
    infit, outfit = s(r2) / sw, s(r2 / W) / n
    q_in = np.sqrt(s(C - W * W) / sw**2)
    q_out = np.sqrt(s(C / W**2) / n**2 - 1.0 / n)
    return np.column_stack([infit, outfit, (np.cbrt(infit) - 1) * 3 / q_in + q_in / 3,
                            (np.cbrt(outfit) - 1) * 3 / q_out + q_out / 3])


def test_fit_on_ordinary_data_is_the_defining_formula_to_round_off():
    # the log-domain sums of far cells must leave ordinary data as the plain sums give it
    rng = np.random.default_rng(29_001)
    theta, beta = rng.normal(0, 1.5, 300), np.linspace(-3, 3, 12)
    X = (rng.random((300, 12)) < 1 / (1 + np.exp(-(theta[:, None] - beta)))).astype(float)
    X[rng.random(X.shape) < 0.1] = np.nan
    cols = ["infit", "outfit", "infit_z", "outfit_z"]
    for fit, axis in ((privirt.item_fit, 0), (privirt.person_fit, 1)):
        got = fit(X, beta, theta, extreme="keep")[cols].to_numpy()
        np.testing.assert_allclose(got, _plain_numpy_fit(X, theta, beta, axis), rtol=1e-12)


def _decimal_infit(x, theta, beta):
    """infit and infit_z of one item or person from the defining formula, in 80-digit decimals
    (P and Q each from its own exponential, so neither is 1 − the other)."""
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 80
        r2 = sw = cw = Decimal(0)
        for xi, t, b in zip(x, theta, beta):
            z = Decimal(t) - Decimal(b)
            P, Q = 1 / (1 + (-z).exp()), 1 / (1 + z.exp())
            W = P * Q
            r2 += Q * Q if xi == 1 else P * P
            sw += W
            cw += P * Q**4 + Q * P**4 - W * W  # C − W²
        ms = r2 / sw
        q = (cw / sw**2).sqrt()
        return float(ms), float((ms ** (Decimal(1) / 3) - 1) * (3 / q) + q / 3)


@pytest.mark.parametrize("case", ["item 500 logits above", "item 800 logits above", "person 600 logits above"])
def test_infit_and_its_z_hundreds_of_logits_away_match_a_decimal_reference(case):
    # Σ W and (Σ W)² were summed as plain doubles: from ~400 logits (Σ W)² underflowed and
    # infit_z was inf; from ~745 W itself did and infit was 0/0 = NaN (docs/fit.md)
    if case == "person 600 logits above":
        X = pd.DataFrame({"a": [1, 1, 0, 1], "b": [1, 0, 1, 0], "c": [1, 1, 0, 0], "d": [1, 1, 1, 0]})
        theta = pd.Series([600.0, 600.4, 0.1, -0.3])
        beta = pd.Series([0.0, -0.5, 0.3, 1.0], index=X.columns)
        got, units = privirt.person_fit(X, beta, theta, extreme="keep"), [0, 1]
        cells = {u: (X.loc[u].to_numpy(), [theta[u]] * 4, beta.to_numpy()) for u in units}
    else:
        far, near = (500.0, 0.0) if case == "item 500 logits above" else (700.0, -100.0)
        X = pd.DataFrame({"a": [0, 0, 0, 0], "b": [0, 1, 0, 0], "c": [1, 0, 1, 0], "d": [1, 1, 0, 1]})
        theta = pd.Series(near + np.array([-0.5, 0.2, 0.7, 1.1]))
        beta = pd.Series([far, far - 0.3, near, near - 0.4], index=X.columns)
        # (b's unexpected right answer 800 logits below it makes its infit e^799, beyond doubles)
        got, units = privirt.item_fit(X, beta, theta, extreme="keep"), ["a", "b"][: 2 if far == 500 else 1]
        cells = {u: (X[u].to_numpy(), theta.to_numpy(), [beta[u]] * 4) for u in units}
    for u in units:
        ms, z = _decimal_infit(*cells[u])
        assert np.isfinite(got.loc[u, ["infit", "infit_z"]].to_numpy(float)).all(), got.loc[u]
        np.testing.assert_allclose(got.loc[u, "infit"], ms, rtol=1e-10)
        np.testing.assert_allclose(got.loc[u, "infit_z"], z, rtol=1e-10)
