"""Item and test information, separation reliability and KR-20: against direct formulas
and their known behaviour."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.fit.reliability import separation


def test_item_information_is_p_times_q():
    beta = pd.Series([-1.0, 0.5, 2.0], index=["a", "b", "c"])
    grid = [-2.0, 0.0, 0.5, 3.0]
    info = privirt.item_information(beta, grid)
    assert list(info.columns) == ["a", "b", "c"]
    for t in grid:
        for lab, b in beta.items():
            p = 1 / (1 + math.exp(-(t - b)))
            assert info.loc[t, lab] == pytest.approx(p * (1 - p), rel=1e-12)
    # an item is most informative (1/4) at its own difficulty
    assert info.loc[0.5, "b"] == pytest.approx(0.25)


def test_test_information_and_standard_error():
    est = privirt.cmle_estimate(privirt.load_dataset("lsat7"))
    table = privirt.test_information(est)
    items = privirt.item_information(est)
    np.testing.assert_allclose(table["information"], items.sum(axis=1))
    np.testing.assert_allclose(table["se"], 1 / np.sqrt(items.sum(axis=1)))
    # default grid covers the difficulties with room either side
    assert table.index.min() <= -4 and table.index.max() >= 4
    with pytest.raises(ValueError, match="finite"):
        privirt.test_information(est, [0.0, np.nan])


def test_test_information_is_the_inverse_squared_se_of_the_abilities():
    X, _, beta = privirt.simulate_rasch(200, 10, seed=1)
    ab = privirt.estimate_abilities(X, beta)
    table = privirt.test_information(beta, ab["theta"].to_numpy())
    np.testing.assert_allclose(table["se"].to_numpy(), ab["se"].to_numpy(), rtol=1e-8)


def test_separation_matches_wright_masters():
    rng = np.random.default_rng(3)
    measures = rng.normal(0, 1.5, 50)
    se = rng.uniform(0.3, 0.6, 50)
    got = separation(measures, se)
    obs_var = np.sum((measures - measures.mean()) ** 2) / 50
    mse = np.sum(se**2) / 50
    rel = (obs_var - mse) / obs_var
    sep = math.sqrt(obs_var - mse) / math.sqrt(mse)
    assert got["reliability"] == pytest.approx(rel)
    assert got["separation"] == pytest.approx(sep)
    assert got["strata"] == pytest.approx((4 * sep + 1) / 3)
    # reliability and separation are two views of one quantity: R = G² / (1 + G²)
    assert got["reliability"] == pytest.approx(sep**2 / (1 + sep**2))
    # error variance above the observed variance: no true spread, reliability 0
    assert separation(measures, np.full(50, 5.0))["reliability"] == 0.0
    assert math.isnan(separation(measures[:1], se[:1])["reliability"])


def test_reliability_against_direct_computation():
    X, _, _ = privirt.simulate_rasch(400, 12, p_observed=0.9, seed=8)
    est = privirt.cmle_estimate(X)
    rel = privirt.reliability(X, est)
    ab = privirt.estimate_abilities(X, est.beta)
    answered = (~np.isnan(X)).sum(axis=1)
    extreme = (ab["score"] == 0) | (ab["score"] == answered)
    used = ab[~extreme.to_numpy()]
    expect = separation(used["theta"].to_numpy(), used["se"].to_numpy())
    assert rel.person == pytest.approx(expect)
    assert rel.item_se_source == "estimate"
    assert rel.item == pytest.approx(separation(est.beta.to_numpy(), est.se.to_numpy()))
    # KR-20 as Cronbach's α on the complete rows: k/(k−1)(1 − Σ var_i / var_total)
    full = X[~np.isnan(X).any(axis=1)]
    k = full.shape[1]
    alpha = k / (k - 1) * (1 - full.var(axis=0).sum() / full.sum(axis=1).var())
    assert rel.kr20 == pytest.approx(alpha)
    assert rel.kr20_n == len(full)
    frame = rel.to_frame()
    assert list(frame.index) == ["person", "item"]
    assert frame.loc["person", "reliability"] == pytest.approx(rel.person_reliability)


def test_item_se_from_information_without_estimate_se():
    X, _, beta = privirt.simulate_rasch(300, 8, seed=2)
    rel = privirt.reliability(X, beta)
    assert rel.item_se_source == "information"
    assert 0.8 < rel.item_reliability <= 1


def test_person_reliability_tracks_kr20_and_test_length():
    # on Rasch data the measure-based reliability is close to the raw-score KR-20, and
    # both grow with the number of items
    short, _, _ = privirt.simulate_rasch(2000, 8, beta_scale=0.8, seed=21)
    long_, _, _ = privirt.simulate_rasch(2000, 40, beta_scale=0.8, seed=21)
    r_short = privirt.reliability(short, privirt.cmle_estimate(short))
    r_long = privirt.reliability(long_, privirt.cmle_estimate(long_))
    assert r_long.person_reliability > r_short.person_reliability + 0.2
    assert abs(r_long.person_reliability - r_long.kr20) < 0.06
    assert "person separation reliability" in str(r_long)


def test_docstring_examples_run():
    import doctest
    import importlib

    for name in ("meansquares", "information", "reliability", "andersen"):
        module = importlib.import_module(f"privirt.fit.{name}")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, name
        assert result.attempted > 0, name


def test_overview_describes_each_function_by_its_parameters():
    """docs/fit.md and privirt.fit's docstring said every function takes the responses and an item
    estimate; andersen_test takes a split, the information functions no responses."""
    import inspect
    import re
    from pathlib import Path

    import privirt.fit

    names = ["item_fit", "person_fit", "reliability", "item_information", "test_information",
             "andersen_test"]
    doc = (Path(__file__).resolve().parent.parent / "docs" / "fit.md").read_text(encoding="utf-8")
    for text in (doc.split("\n\n")[1], privirt.fit.__doc__.split("\n\n")[1]):
        text = " ".join(text.split())
        assert "Every function" not in text
        for name in names:
            found = re.search(rf"`{name}\(([^)]*)\)`", text)
            assert found, (name, text)
            params = list(inspect.signature(getattr(privirt, name)).parameters)
            written = [p.strip() for p in found.group(1).split(",")]
            assert written == params[: len(written)], (name, written, params)


@pytest.mark.parametrize("make", [
    lambda: [True, False, True, False],
    lambda: np.array([True, False, True, False]),
    lambda: pd.Series([True, False, True, False], dtype="boolean"),
    lambda: [0.5, True, -0.5, 0.0],
], ids=["list", "array", "nullable", "mixed"])
def test_bool_difficulties_are_refused(make):
    # True/False were read as 1.0/0.0 difficulties (bools are refused wherever a number goes)
    X, _, _ = privirt.simulate_rasch(40, 4, seed=45_000_007)
    with pytest.raises(ValueError, match=r"^beta must hold numbers, not True/False"):
        privirt.estimate_abilities(X, make())
    with pytest.raises(ValueError, match=r"^beta must hold numbers, not True/False"):
        privirt.item_information(make())
    with pytest.raises(ValueError, match=r"^beta must hold numbers, not True/False"):
        privirt.item_fit(X, make())


@pytest.mark.parametrize("make", [
    lambda n: [True, False] * (n // 2),
    lambda n: np.array([True, False] * (n // 2)),
    lambda n: pd.Series([True, False] * (n // 2), dtype="boolean"),
    lambda n: [0.5, True] + [0.0] * (n - 2),
    lambda n: pd.DataFrame({"theta": np.array([True, False] * (n // 2))}),
], ids=["list", "array", "nullable", "mixed", "frame"])
def test_bool_abilities_are_refused(make):
    # True/False given as theta were read as abilities 1.0/0.0 (bools are refused as numbers,
    # as they are as difficulties)
    X, _, beta = privirt.simulate_rasch(40, 4, seed=54_000_001)
    message = r"^theta must hold numbers, not True/False$"
    for call in (privirt.item_fit, privirt.person_fit, privirt.reliability):
        with pytest.raises(ValueError, match=message):
            call(X, beta, make(40))
    if isinstance(make(6), pd.DataFrame):
        return  # the information functions take a grid of abilities, not estimate_abilities' table
    with pytest.raises(ValueError, match=message):
        privirt.item_information(beta, make(6))
    with pytest.raises(ValueError, match=message):
        privirt.test_information(beta, make(6))


def test_a_bool_ability_point_is_refused():
    with pytest.raises(ValueError, match=r"^theta must hold numbers, not True/False$"):
        privirt.item_information([0.0, 1.0], theta=True)


def test_information_that_underflows_to_zero_gives_se_inf_without_a_warning():
    # 1/√0 made numpy warn "divide by zero" (an error in this suite); se = inf is the value
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = privirt.test_information([800.0], theta=[0.0])
    assert table["information"].iloc[0] == 0.0 and table["se"].iloc[0] == np.inf


@pytest.mark.parametrize("x", [38.0, 40.0, 100.0, 300.0, 700.0])
def test_information_is_symmetric_about_beta_in_the_far_tails(x):
    # P(1 − P) with 1 − P rounded to 0 from 37 logits above an item: information 0 and se inf
    # there, though e^(−x) is a normal double (3.1e-17 at 38 logits); the lower tail was exact
    from scipy import special

    info = privirt.item_information([0.0], theta=[x, -x])
    want = np.exp(special.log_expit(x) + special.log_expit(-x))
    np.testing.assert_allclose(info.iloc[:, 0].to_numpy(), [want, want], rtol=1e-12)
    test = privirt.test_information([0.0], theta=[x])
    assert np.isfinite(test["se"].iloc[0]) and test["se"].iloc[0] > 1e8


def test_reliability_of_a_person_far_above_the_items_has_a_finite_se():
    # the person se of reliability(extreme="keep") took 1/√Σ P(1 − P): inf 40 logits above
    import warnings

    X = pd.DataFrame([[1, 1, 1], [1, 0, 0], [0, 1, 0], [1, 1, 0]], columns=list("abc"))
    beta = pd.Series([0.0, 0.5, -0.5], index=list("abc"))
    theta = pd.Series([40.0, -0.3, 0.2, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rel = privirt.reliability(X, beta, theta=theta, extreme="keep")
    assert np.isfinite(rel.person["rmse"]) and rel.person["rmse"] > 1e7


def test_a_theta_grid_too_wide_for_doubles_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"too wide for a θ grid; pass theta="):
        privirt.test_information([1e308, -1e308])


def test_duplicate_beta_labels_are_refused_naming_them():
    X, _, _ = privirt.simulate_rasch(60, 4, seed=9)
    X = pd.DataFrame(X, columns=["q0", "q1", "q2", "q3"])
    beta = privirt.cmle_estimate(X).beta
    dup = pd.concat([beta, beta.iloc[:1]])
    calls = [lambda b: privirt.item_fit(X, b), lambda b: privirt.person_fit(X, b),
             lambda b: privirt.reliability(X, b), privirt.item_information, privirt.test_information,
             lambda b: privirt.item_fit(X, b.to_frame("beta"))]
    for call in calls:
        with pytest.raises(ValueError, match=r"^beta has duplicate item label\(s\) \['q0'\]; pass "
                                             r"one difficulty per item$"):
            call(dup)


@pytest.mark.parametrize("far", [400.0, 740.0, 800.0])
def test_reliability_person_se_hundreds_of_logits_away_is_summed_in_logs(far):
    # the person se 1/√Σ W: Σ W lost its digits as a subnormal from ~708 logits and was 0 from
    # ~745 (se inf, numpy's "divide by zero"); then se² overflowed in the mean squared error
    from decimal import Decimal, localcontext

    X = pd.DataFrame([[1, 1, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], columns=list("abc"))
    beta = pd.Series([0.0, 0.5, -0.5], index=list("abc"))
    theta = pd.Series([far, -0.3, 0.2, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rel = privirt.reliability(X, beta, theta=theta)
    with localcontext() as ctx:
        ctx.prec = 60
        se2 = []
        for t in theta:
            sw = sum(1 / (1 + (Decimal(t) - Decimal(b)).exp()) / (1 + (Decimal(b) - Decimal(t)).exp())
                     for b in beta)
            se2.append(1 / sw)
        rmse = float((sum(se2) / 4).sqrt())
    np.testing.assert_allclose(rel.person["rmse"], rmse, rtol=1e-10)
    assert rel.person["reliability"] == 0.0 and rel.person["separation"] == 0.0
