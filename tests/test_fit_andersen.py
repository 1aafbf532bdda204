"""Andersen's likelihood-ratio test: the statistic from separate CML fits, its null
distribution on Rasch data, its power against 2PL data, and subgroup-extreme items."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privirt


def test_statistic_from_separate_cml_fits():
    X, _, _ = privirt.simulate_rasch(400, 6, seed=31)
    res = privirt.andersen_test(X)
    score = np.nansum(X, axis=1)
    high = score > np.median(score)
    ll_all = privirt.cmle_estimate(X).loglik
    ll_low = privirt.cmle_estimate(X[~high]).loglik
    ll_high = privirt.cmle_estimate(X[high]).loglik
    assert res.statistic == pytest.approx(2 * (ll_low + ll_high - ll_all), rel=1e-6, abs=1e-6)
    assert res.df == 5
    assert res.pvalue == pytest.approx(stats.chi2.sf(res.statistic, 5))
    assert list(res.n_persons.index) == ["low", "high"]
    assert res.n_persons.sum() == 400 and res.n_persons["high"] == high.sum()
    assert res.beta.shape == (6, 2) and res.items_dropped == []
    np.testing.assert_allclose(res.beta["high"], privirt.cmle_estimate(X[high]).beta, atol=1e-6)
    assert "df = 5" in str(res)


def test_covariate_split_with_three_groups():
    X, _, _ = privirt.simulate_rasch(600, 5, seed=32)
    persons = pd.Index([f"p{i}" for i in range(600)])
    frame = pd.DataFrame(X, index=persons)
    group = pd.Series(np.tile(["a", "b", "c"], 200), index=persons, name="site")
    res = privirt.andersen_test(frame, group)
    assert res.df == 2 * 4
    assert list(res.beta.columns) == ["a", "b", "c"]
    assert "by site" in res.split
    ll = [privirt.cmle_estimate(X[group.to_numpy() == g]).loglik for g in "abc"]
    assert res.statistic == pytest.approx(2 * (sum(ll) - privirt.cmle_estimate(X).loglik),
                                          rel=1e-6, abs=1e-6)
    # an array in row order does the same
    assert privirt.andersen_test(frame, group.to_numpy()).statistic == pytest.approx(res.statistic)


def test_mean_split():
    X = privirt.load_dataset("lsat7")
    res = privirt.andersen_test(X, "mean")
    assert res.df == 4 and 0 < res.pvalue < 1
    assert "mean" in res.split


def test_bad_splits_are_refused():
    X = privirt.load_dataset("lsat7")
    # the median raw score of LSAT-7 is 4 of 5: the upper group holds only perfect scores
    with pytest.raises(ValueError, match="no person with a non-extreme score"):
        privirt.andersen_test(X)
    with pytest.raises(ValueError, match="split must be"):
        privirt.andersen_test(X, "quartile")
    with pytest.raises(ValueError, match="one group"):
        privirt.andersen_test(X, np.zeros(len(X)))
    with pytest.raises(ValueError, match="labels but"):
        privirt.andersen_test(X, np.zeros(10))
    with pytest.raises(ValueError, match="no group for"):
        privirt.andersen_test(X, np.where(np.arange(len(X)) == 3, np.nan, np.arange(len(X)) % 2))
    with pytest.raises(ValueError, match="persons do not match"):
        privirt.andersen_test(X, pd.Series(np.arange(len(X)) % 2, index=X.index[::-1]))


def test_item_extreme_within_a_group_is_dropped_with_a_warning():
    X, _, _ = privirt.simulate_rasch(500, 6, seed=33)
    group = np.arange(500) % 2
    X[group == 1, 2] = 1.0  # item 2 right for everyone in group 1: infinite there
    with pytest.warns(UserWarning, match="dropped 1 item"):
        res = privirt.andersen_test(X, group)
    assert res.items_dropped == [2]
    assert res.df == 4 and 2 not in res.beta.index
    keep = [0, 1, 3, 4, 5]
    ll = [privirt.cmle_estimate(X[group == g][:, keep]).loglik for g in (0, 1)]
    full = privirt.cmle_estimate(X[:, keep]).loglik
    assert res.statistic == pytest.approx(2 * (sum(ll) - full), rel=1e-6, abs=1e-6)


@pytest.mark.slow
def test_pvalues_are_uniform_on_rasch_data():
    pvalues = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # occasional subgroup-extreme items
        for rep in range(50):
            X, _, _ = privirt.simulate_rasch(200, 6, seed=5000 + rep)
            pvalues.append(privirt.andersen_test(X).pvalue)
    assert stats.kstest(pvalues, "uniform").pvalue > 0.01
    assert 0 <= np.mean(np.array(pvalues) < 0.05) <= 0.16


@pytest.mark.slow
def test_power_against_2pl_data():
    rng = np.random.default_rng(34)
    rejected = 0
    for _ in range(10):
        theta = rng.standard_normal(400)
        a = np.linspace(0.3, 2.5, 8)  # unequal slopes: the Rasch model does not hold
        b = rng.normal(0, 1, 8)
        prob = 1 / (1 + np.exp(-(a[None, :] * theta[:, None] - b[None, :])))
        X = (rng.random(prob.shape) < prob).astype(float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            rejected += privirt.andersen_test(X).pvalue < 0.05
    assert rejected >= 8


def test_a_covariate_split_matching_the_data_works_with_an_empty_person():
    """The empty person is dropped inside; a split naming the data's persons was refused."""
    X = (np.random.default_rng(0).random((300, 4)) < 0.5).astype(float)
    df = pd.DataFrame(X, columns=list("abcd"), index=[f"p{i}" for i in range(300)])
    df.iloc[7] = np.nan
    groups = np.arange(300) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", privirt.exceptions.EmptyResponsesWarning)
        by_series = privirt.andersen_test(df, pd.Series(groups, index=df.index))
        by_array = privirt.andersen_test(df, groups)
        kept = privirt.andersen_test(df.drop(index="p7"), np.delete(groups, 7))
    assert by_series.statistic == by_array.statistic == kept.statistic


def test_a_score_split_that_fails_on_scattered_missing_cells_says_why():
    rng = np.random.default_rng(3)
    X = (rng.random((400, 60)) < 0.5).astype(float)
    X[rng.random(X.shape) < 0.3] = np.nan  # nearly every person answers a set of their own
    with pytest.raises(ValueError, match="puts every person in one group.*split by a covariate"):
        privirt.andersen_test(X, "median")


@pytest.mark.filterwarnings("ignore:Andersen test. dropped")
def test_a_lopsided_median_split_of_data_with_missing_cells_warns():
    # most persons answered a set of items of their own (20 % missing of 30 items): the cut per
    # pattern puts them all in "low"; the test ran on 1993 against 7 without a word
    X, _, _ = privirt.simulate_rasch(2000, 30, p_observed=0.8, seed=310_001)
    with pytest.warns(UserWarning, match=r"the median split put (\d+) of 2000 persons in 'high'.*little power"):
        res = privirt.andersen_test(X)
    assert res.n_persons["high"] < 0.1 * 2000
    # complete data (a balanced split) and a covariate split of the same data: no such warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        privirt.andersen_test(privirt.simulate_rasch(2000, 30, seed=310_002)[0])
    group = np.arange(2000) % 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        privirt.andersen_test(X, group)
    assert not any("little power" in str(w.message) for w in caught)


def test_a_group_fit_that_does_not_converge_warns_naming_it():
    # andersen_test passed max_iter to cmle_estimate and never looked at .converged: max_iter=1
    # gave LR 5.2867 (converged: 5.2604) without a word
    X = privirt.simulate_rasch(2000, 10, seed=400300)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        privirt.andersen_test(X)  # the default converges
    with pytest.warns(UserWarning, match=r"whole sample: the CML fit did not converge in max_iter=1"):
        privirt.andersen_test(X, max_iter=1)


def test_split_advice_names_another_split():
    # 100 persons with score 0 of 160: the median (0) and the mean (0.8) both leave 'low' with
    # score 0 only; the advice must suggest neither the split that just failed nor the other,
    # which fails too (each sent the user to the other)
    rows = [[0, 0, 0]] * 100 + [[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 1, 1]] * 15
    X = pd.DataFrame(rows, columns=["a", "b", "c"], dtype=float)
    for split in ("median", "mean"):
        with pytest.raises(ValueError, match="group 'low' has no person") as info:
            privirt.andersen_test(X, split)
        assert str(info.value).endswith("no raw-score split leaves a non-extreme score in both groups; "
                                        "split by a covariate (one group label per person) or add items")
        assert "split='" not in str(info.value)
    # median 2 (scores 0 ×40, 1 ×12, 2 ×30, 3 ×36): 'high' holds only full scores, while the mean
    # (1.6) cut leaves non-extreme scores on both sides: that split is named
    ones, twos = [[1, 0, 0], [0, 1, 0], [0, 0, 1]], [[1, 1, 0], [0, 1, 1], [1, 0, 1]]
    Y = pd.DataFrame([[0, 0, 0]] * 40 + ones * 4 + twos * 10 + [[1, 1, 1]] * 36, columns=["a", "b", "c"],
                     dtype=float)
    with pytest.raises(ValueError, match="group 'high' has no person") as info:
        privirt.andersen_test(Y, "median")
    assert str(info.value).endswith("split differently (e.g. split='mean' or a covariate)")
    assert privirt.andersen_test(Y, "mean").df == 2
    # two items: every non-extreme score is 1, so no score split can work (the command line's
    # --andersen median and --andersen mean each advised the other)
    two = pd.DataFrame([[0, 0], [1, 0], [0, 1], [1, 1]] * 20, columns=["a", "b"], dtype=float)
    for split in ("median", "mean"):
        with pytest.raises(ValueError, match="no raw-score split leaves"):
            privirt.andersen_test(two, split)
    with pytest.raises(ValueError, match="group 0 has no person") as info:
        privirt.andersen_test(X, np.r_[[0] * 100, [1] * 60])
    assert str(info.value).endswith("(e.g. split='median', split='mean' or another covariate) or "
                                    "merge groups")


def test_cml_failure_inside_the_test_gets_remedies_that_apply():
    # nobody in group 'g1' got c or d right and a or b wrong: Fischer's condition fails there
    X, _, _ = privirt.simulate_rasch(200, 4, seed=35)
    X = pd.DataFrame(X, columns=list("abcd"))
    linked = pd.DataFrame([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 1]] * 10,
                          columns=list("abcd"), dtype=float)
    with pytest.raises(ValueError, match="group 'g1'") as info:
        privirt.andersen_test(pd.concat([X, linked], ignore_index=True),
                              np.r_[["g2"] * 200, ["g1"] * 50])
    text = str(info.value)
    assert "spectral" not in text  # the test fits CML in every group
    assert text.endswith("collect responses that link them, drop those items from the data or split "
                         "differently (e.g. split='median', split='mean' or another covariate) or "
                         "merge groups"), text
    # failing on the whole sample, it fails in every group whatever the split: no split advised
    with pytest.raises(ValueError, match="whole sample") as info:
        privirt.andersen_test(linked, np.arange(50) % 2)
    assert str(info.value).endswith("collect responses that link them or drop those items from "
                                    "the data"), str(info.value)


def test_too_few_items_names_the_groups_and_a_remedy():
    # group 'y' is one person with a non-extreme score: every item is right or wrong for all of
    # its non-extreme persons, so no item can be estimated in every group
    X = pd.DataFrame([[1, 0, 0], [1, 1, 0], [0, 1, 0], [1, 0, 1], [1, 1, 1], [0, 0, 1]],
                     columns=["a", "b", "c"], dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(ValueError, match="item") as info:
            privirt.andersen_test(X, ["x"] * 5 + ["y"])
        text = str(info.value)
        assert "group(s) 'y' " in text and "'x'" not in text, text
        assert text.endswith("or merge groups, or add items"), text
        # many groups that each drop items are named a few at a time
        with pytest.raises(ValueError, match="item") as info:
            more = pd.DataFrame([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 1, 1]], columns=["a", "b", "c"])
            privirt.andersen_test(pd.concat([X.iloc[:5], more], ignore_index=True),
                                  ["x"] * 5 + list("pqrs"))
        text = str(info.value)
        assert "group(s) 'p', 'q', 'r', ..." in text and "'s'" not in text, text


def test_a_split_into_one_group_says_what_to_do():
    X = pd.DataFrame([[1, 0, 0], [1, 1, 0], [0, 1, 0], [1, 0, 1]], columns=["a", "b", "c"],
                     dtype=float)
    with pytest.raises(ValueError, match="one group") as info:
        privirt.andersen_test(X, ["x"] * 4)
    assert str(info.value).endswith("split differently (e.g. split='median', split='mean' or a "
                                    "covariate with two or more groups)"), str(info.value)
    # scores 1, 2, 2, 2, 2: nobody is above the median, while the mean (1.8) splits them
    Y = pd.DataFrame([[1, 0, 0], [1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]], columns=["a", "b", "c"],
                     dtype=float)
    with pytest.raises(ValueError, match="one group") as info:
        privirt.andersen_test(Y, "median")
    assert str(info.value).endswith("split differently (e.g. split='mean' or a covariate)"), \
        str(info.value)
