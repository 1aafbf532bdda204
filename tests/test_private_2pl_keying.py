"""Private 2PNO: an item keyed the other way (true a < 0) got a ≈ 0.001 [0.001, 0.003] without a
word; the estimate now warns from the release alone (``docs/private_2pl.md`` §5)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import ndtr

import privirt
from privirt.private.twopl import estimate_2pl_from_release, release_2pl
from privirt.private.twopl.keying import item_rest_covariance
from privirt.private.twopl.statistics import pair_statistics

pytest.importorskip("mechanisms")


def _negative(n=5000, seed=41_000_600):
    rng = np.random.default_rng(seed)
    th = rng.standard_normal(n)
    A = np.array([1.0, 1.2, 0.8, 1.0, -1.0, 1.5])
    B = np.array([0, 0.5, -0.5, 0.3, 0.2, -0.2])
    return (rng.random((n, 6)) < ndtr(th[:, None] * A - B)).astype(float)


def _estimate(rel):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        est = estimate_2pl_from_release(rel, n_boot=0, progress=False)
    return est, [x for x in w if "correlate negatively" in str(x.message)]


@pytest.mark.parametrize("missing, eps", [("none", 3.0), ("none", 0.3), ("mcar", 1.0)])
def test_a_negatively_keyed_item_is_named_in_one_warning(missing, eps):
    X = _negative()
    if missing == "mcar":
        X[np.random.default_rng(1).random(X.shape) < 0.3] = np.nan
    rel = release_2pl(X, epsilon=eps, missing=missing, seed=7)
    est, w = _estimate(rel)  # from the release alone: no data here
    assert len(w) == 1 and w[0].category is UserWarning
    msg = str(w[0].message)
    assert msg.startswith("item(s) 4 correlate negatively") and "\n" not in msg
    assert "positively keyed" in msg and "X[:, j] = 1 − X[:, j]" in msg
    assert est.info["negative_items"] == [4]


@pytest.mark.parametrize("n, m, eps, missing", [(5000, 6, 3.0, "none"), (300, 10, 0.1, "none"),
                                                (2000, 20, 1.0, "none"), (1000, 5, 0.5, "mcar")])
def test_positively_keyed_items_raise_no_warning(n, m, eps, missing):
    X, _, a, _ = privirt.simulate_2pno(n, m, seed=n + m)
    X = np.asarray(X, float)
    if missing == "mcar":
        X[np.random.default_rng(2).random(X.shape) < 0.4] = np.nan
    est, w = _estimate(release_2pl(X, epsilon=eps, missing=missing, seed=8))
    assert not w and est.info["negative_items"] == []


def test_item_rest_covariance_without_noise_is_the_samples():
    X = _negative(n=3000).astype(np.int8)
    t, d = pair_statistics(X)
    c, sd = item_rest_covariance(t, d, X.shape[0], 0.0, 0.0)
    C = np.cov(X.T.astype(float), bias=True)
    assert np.allclose(c, C.sum(axis=1) - np.diag(C), atol=1e-12)
    assert np.all(sd > 0) and c[4] < -4 * sd[4] and np.all(c[[0, 1, 2, 3, 5]] > 0)
