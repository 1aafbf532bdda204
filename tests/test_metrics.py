"""Metrics on hand-computed examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privirt import metrics


def test_l2_and_linf_compare_centred_vectors():
    truth = np.array([-1.0, 0.0, 1.0])
    est = truth + 5.0  # a pure shift is no error
    assert metrics.l2_error(est, truth) == pytest.approx(0.0)
    assert metrics.linf_error(est, truth) == pytest.approx(0.0)
    est = np.array([-1.0, 0.0, 2.0])  # centred: [-4/3, -1/3, 5/3]
    diff = np.array([-1 / 3, -1 / 3, 2 / 3])
    assert metrics.l2_error(est, truth) == pytest.approx(np.sqrt(np.sum(diff**2)))
    assert metrics.linf_error(est, truth) == pytest.approx(2 / 3)
    assert metrics.l2_error(est, truth, relative=True) == pytest.approx(
        np.sqrt(np.sum(diff**2)) / np.sqrt(2)
    )


def test_top_k_accuracy():
    truth = [5, 4, 3, 2, 1]
    est = [5, 3, 4, 1, 2]
    assert metrics.top_k_accuracy(est, truth, 1) == 1.0
    assert metrics.top_k_accuracy(est, truth, 2) == 0.5  # {0,2} vs {0,1}
    assert metrics.top_k_accuracy(est, truth, 3) == 1.0
    assert metrics.top_k_accuracy(est, truth, 1, largest=False) == 0.0
    with pytest.raises(ValueError, match="k must"):
        metrics.top_k_accuracy(est, truth, 0)


def test_kendall_tau():
    assert metrics.kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert metrics.kendall_tau([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # one discordant pair of 6: (5 - 1) / 6
    assert metrics.kendall_tau([1, 2, 3, 4], [1, 2, 4, 3]) == pytest.approx(4 / 6)


def test_series_are_aligned_by_label():
    truth = pd.Series({"a": 0.0, "b": 1.0, "c": 2.0})
    est = pd.Series({"c": 2.0, "a": 0.0, "b": 1.0})
    assert metrics.linf_error(est, truth) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="only in est"):
        metrics.l2_error(pd.Series({"a": 0.0, "z": 1.0}), pd.Series({"a": 0.0, "b": 1.0}))


def test_length_and_finiteness_checks():
    with pytest.raises(ValueError, match="same length"):
        metrics.l2_error([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        metrics.linf_error([1, np.nan], [1, 2])


def test_series_with_duplicate_labels_are_refused_naming_them():
    # pandas' bare "cannot reindex on an axis with duplicate labels" once came through
    est = pd.Series([1.0, 2.0, 3.0], index=["a", "a", "b"])
    truth = pd.Series([3.0, 1.0, 2.0], index=["b", "a", "a"])
    for f in (metrics.l2_error, metrics.kendall_tau):
        with pytest.raises(ValueError, match=r"est has duplicate item labels \['a'\]; give each"):
            f(est, truth)
    # the same labels in the same order were compared by position, silently
    with pytest.raises(ValueError, match=r"truth has duplicate item labels \['a'\]"):
        metrics.l2_error(pd.Series([1.0, 2.0], index=["a", "b"]),
                         pd.Series([1.0, 2.0], index=["a", "a"]))
    with pytest.raises(ValueError, match=r"est has duplicate item labels \['x'\]"):
        metrics.linf_error(pd.Series([1.0, 2.0], index=["x", "x"]),
                           pd.Series([1.0, 2.0], index=["x", "x"]))


def test_kendall_tau_of_a_constant_estimate_is_zero():
    # scipy's tau-b is NaN (0/0) there; a sweep recorded it and its report dropped the cell
    # from the mean silently, which biased the mean upward (0.267 where 0.080 was right)
    truth = [0.3, -1.0, 2.0, 0.5]
    assert metrics.kendall_tau([0.0, 0.0, 0.0, 0.0], truth) == 0.0
    assert metrics.kendall_tau(pd.Series([1.5] * 3, index=list("abc")),
                               pd.Series([3.0, 1.0, 2.0], index=list("cab"))) == 0.0
    # a constant reference has no ranking to recover: undefined
    assert np.isnan(metrics.kendall_tau([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]))
    assert np.isnan(metrics.kendall_tau([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]))


def test_top_k_accuracy_gives_an_estimates_ties_fractional_credit():
    # ties broken by position gave an all-zero estimate (noise swamping the data) full marks
    # when the hardest items came first: 1.0 for np.zeros(5) against [.5, .4, -1, -1, -1], k = 2
    truth = [0.5, 0.4, -1.0, -0.9, -0.8]
    assert metrics.top_k_accuracy(np.zeros(5), truth, 2) == pytest.approx(2 / 5)
    assert metrics.top_k_accuracy(np.zeros(5), truth[::-1], 2) == pytest.approx(2 / 5)
    # one item clearly first, then four tied for the second place: 1/2 + (1/4)/2 ... of k = 2
    est = np.array([3.0, 0.0, 0.0, 0.0, 0.0])
    assert metrics.top_k_accuracy(est, truth, 2) == pytest.approx((1 + 1 / 4) / 2)
    assert metrics.top_k_accuracy(np.array([3.0, 2.0, 0, 0, 0]), truth, 2) == 1.0  # no ties: as before
    assert np.isnan(metrics.top_k_accuracy(est, np.ones(5), 2))  # a constant truth: no top k
