"""The MCAR intervals' centre (the unshrunk fit, ``shrinkage.centre_totals``) when one item is
answered by few or no persons (``docs/totals.md`` §7.3 step 1, session 28)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.private.totals import marginal_missing, shrinkage
from privirt.private.totals.api import private_totals_estimate, release_totals

pytest.importorskip("mechanisms")


def _unanswered_first_item() -> pd.DataFrame:
    """n = 400, m = 6, 20 % of the cells missing, column q0 answered by nobody."""
    X, _, _ = privirt.simulate_rasch(400, 6, seed=95_500_051)
    df = pd.DataFrame(np.asarray(X, dtype=float), columns=[f"q{i}" for i in range(6)])
    df = df.mask(np.random.default_rng(95_500_052).random(df.shape) < 0.2)
    df["q0"] = np.nan
    return df


def _ratios(rel):
    n = rel.n_persons
    tp, _, v = marginal_missing.ratio_proportions(rel.totals.to_numpy(float), rel.answered.to_numpy(float), n,
                                                  rel.sigma_totals**2, rel.sigma_answered**2)
    return tp, n, v


def test_every_point_estimate_lies_in_its_interval_when_one_item_is_unanswered():
    # the centre pooled the items' noise variances: q0's (≈ 1e6) pulled every proportion toward
    # 1/2 and the unshrunk difficulties spanned ~0.6 logits against ~2.9 for the point estimate
    fit = private_totals_estimate(_unanswered_first_item(), epsilon=1.0, missing="mcar", seed=95_500_060,
                                  n_boot=50)
    d = fit.to_frame()
    assert ((d["lo"] <= d["beta"]) & (d["beta"] <= d["hi"])).all(), d
    span = np.ptp(d["beta_unshrunk"].to_numpy()[1:]) / np.ptp(d["beta"].to_numpy()[1:])
    assert span > 0.8, span


def test_one_noisy_ratio_neither_compresses_nor_moves_the_other_items_centre():
    rel = release_totals(_unanswered_first_item(), epsilon=1.0, seed=95_500_061, missing="mcar")
    tp, n, v = _ratios(rel)
    assert v[0] > 100 * v[1:].max()
    raw = tp[1:] / n
    for t0, v0 in ((tp[0], v[0]), (3.0 * n, 5e7), (-2.0 * n, 5e7)):
        t, vv = tp.copy(), v.copy()
        t[0], vv[0] = t0, v0
        p = shrinkage.centre_totals(t, n, vv)
        assert np.std(p[1:]) > 0.97 * np.std(raw), (t0, np.std(p[1:]), np.std(raw))
        assert abs(np.mean(p[1:]) - np.mean(raw)) < 0.01, (t0, np.mean(p[1:]), np.mean(raw))
    # equal variances, given one per item, are the one-variance (complete-data) centre exactly
    v1 = float(np.mean(v[1:]))
    assert np.array_equal(shrinkage.centre_totals(tp, n, np.full(tp.size, v1)), shrinkage.centre_totals(tp, n, v1))
