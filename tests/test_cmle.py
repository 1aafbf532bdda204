"""Conditional ML against a brute-force conditional likelihood maximised by scipy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import optimize

import privirt
from privirt import metrics
from privirt.exceptions import DisconnectedComparisonGraph


def brute_conditional_nll(beta: np.ndarray, X: np.ndarray) -> float:
    """−log Π_persons P(x | score, observed items), by enumerating all patterns."""
    total = 0.0
    for row in X:
        obs = ~np.isnan(row)
        x = row[obs].astype(int)
        b = beta[obs]
        k, s = int(obs.sum()), int(x.sum())
        if s in (0, k):
            continue
        patterns = [p for p in itertools.product([0, 1], repeat=k) if sum(p) == s]
        log_den = np.log(sum(np.exp(-np.dot(p, b)) for p in patterns))
        total += -np.dot(x, b) - log_den
    return -total


@pytest.fixture(scope="module")
def tiny():
    X, _, _ = privirt.simulate_rasch(250, 5, p_observed=0.8, seed=3)
    opt = optimize.minimize(
        brute_conditional_nll, np.zeros(5), args=(X,), method="BFGS", options={"gtol": 1e-9}
    )
    return X, opt


def test_matches_brute_force_with_missing(tiny):
    X, opt = tiny
    res = privirt.cmle_estimate(X)
    ref = opt.x - opt.x.mean()
    assert res.converged
    np.testing.assert_allclose(res.beta.to_numpy(), ref, atol=2e-5)
    assert res.loglik == pytest.approx(-opt.fun, rel=1e-9)
    assert res.beta.mean() == pytest.approx(0, abs=1e-12)


def test_standard_errors_match_brute_force_information(tiny):
    X, opt = tiny
    res = privirt.cmle_estimate(X)
    b = res.beta.to_numpy()
    m, h = b.size, 1e-4
    H = np.empty((m, m))
    for i in range(m):
        for j in range(m):
            ei, ej = np.eye(m)[i] * h, np.eye(m)[j] * h
            H[i, j] = (
                brute_conditional_nll(b + ei + ej, X) - brute_conditional_nll(b + ei - ej, X)
                - brute_conditional_nll(b - ei + ej, X) + brute_conditional_nll(b - ei - ej, X)
            ) / (4 * h * h)
    P = np.eye(m) - 1.0 / m
    cov = np.linalg.pinv(P @ H @ P, hermitian=True)
    np.testing.assert_allclose(res.se.to_numpy(), np.sqrt(np.diag(cov)), rtol=1e-3)


def test_lsat6_order_and_labels():
    X = privirt.load_dataset("lsat6")
    res = privirt.cmle_estimate(X)
    assert list(res.beta.index) == list(X.columns)
    # difficulty order is the reverse of the proportion-correct order
    p = X.mean()
    assert list(res.beta.sort_values().index) == list(p.sort_values(ascending=False).index)
    assert np.all(res.se > 0) and np.all(res.se < 0.2)
    assert res.n_persons_used < len(X)  # all-correct persons carry no information


def test_recovery_on_simulated_data():
    X, _, beta = privirt.simulate_rasch(4000, 15, p_observed=0.6, seed=9)
    res = privirt.cmle_estimate(X)
    assert res.converged
    assert metrics.linf_error(res.beta, beta) < 0.15
    # roughly 95 % of true values within 2 SE
    z = np.abs(res.beta.to_numpy() - beta) / res.se.to_numpy()
    assert np.mean(z < 2.5) >= 0.8


def test_extreme_item_raises():
    X = np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0], [1, 1, 0]], dtype=float)
    with pytest.raises(ValueError, match="infinite"):
        privirt.cmle_estimate(X)


def test_disconnected_items_raise():
    rng = np.random.default_rng(0)
    X = np.full((400, 4), np.nan)
    X[:200, :2] = rng.integers(0, 2, (200, 2))
    X[200:, 2:] = rng.integers(0, 2, (200, 2))
    with pytest.raises(DisconnectedComparisonGraph):
        privirt.cmle_estimate(X)


def test_one_way_linked_item_sets_raise_instead_of_huge_estimates():
    # every item has a non-extreme total and all items share persons, but nobody gets item
    # 2 or 3 right while getting item 0 or 1 wrong: the CML likelihood grows without bound
    # as beta_2, beta_3 - beta_0, beta_1 -> infinity (Fischer's condition fails)
    X = np.array([[1, 1, 1, 0], [1, 1, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0]] * 5, dtype=float)
    with pytest.raises(ValueError, match=r"infinite.*\[2, 3\]|\[2, 3\].*infinite"):
        privirt.cmle_estimate(X)


def test_option_validation():
    X = privirt.load_dataset("lsat6")
    with pytest.raises(ValueError, match="tol"):
        privirt.cmle_estimate(X, tol=-1)
    with pytest.raises(ValueError, match="max_iter"):
        privirt.cmle_estimate(X, max_iter=0)


def test_non_numeric_tol_is_a_value_error():
    X = privirt.load_dataset("lsat6")
    for bad in ("x", None, float("nan")):
        with pytest.raises(ValueError, match="tol"):
            privirt.cmle_estimate(X, tol=bad)


def test_top_k():
    res = privirt.cmle_estimate(privirt.load_dataset("lsat6"))
    assert list(res.top_k(2)) == list(res.beta.sort_values(ascending=False).index[:2])
