"""The bootstrap's linearised refits (``estimate.BOOTSTRAP_REFITS``: one step by default from
``LINEAR_REFITS_MIN_PERSONS`` persons; ``privirt.private.twopl.linboot``): the one-step and chord
refits are the Gauss–Newton and chord steps of the fit's objective with the weights of the
simulation point, checked against a dense finite-difference Jacobian of that objective written
out independently."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import privirt.private.twopl.estimate as E
from privirt.private.twopl import estimate_2pl_from_release, release_2pl
from privirt.private.twopl import fit as F
from privirt.private.twopl.fit import fit_factor
from privirt.private.twopl.linboot import linear_refits
from ._twopno import lognormal_2pno

mechanisms = pytest.importorskip("mechanisms")


def _point(m, seed=0):
    rng = np.random.default_rng(seed)
    a, b = np.exp(rng.normal(0.0, 0.3, m)), rng.normal(0.0, 1.0, m)
    la = np.log(a)
    return np.concatenate([b / np.sqrt(1 + a * a), la, [la.mean()]])


def _dense(x0, n, sig_t, sig_p):
    """Residuals r(x; y) of the objective with the weights of the MODEL at x0, and their
    Jacobian at x by central differences."""
    m = (x0.size - 1) // 2
    i, j = np.triu_indices(m, 1)
    _, _, _, pt0, pn0 = F._model(x0[None], m, i, j)
    pc, qc = np.clip(pt0[0], 1 / n, 1 - 1 / n), np.clip(pn0[0], 1 / n, 1 - 1 / n)
    sd_t = np.sqrt(pc * (1 - pc) / n + (sig_t / n) ** 2)
    sd_n = np.sqrt(qc * (1 - qc) / n + (sig_p / n) ** 2)

    def res(x, t, d):
        _, _, _, pt, pn = F._model(x[None], m, i, j)
        return np.concatenate([(t / n - pt[0]) / sd_t, (d / n - pn[0]) / sd_n,
                               (x[-1] - x[m:2 * m]) / F.LOG_A_PRIOR_SD, [-x[-1] / F.MEAN_PRIOR_SD],
                               -x[:m] / F.TAU_PRIOR_SD])

    def jac(x, t, d, h=1e-5):
        cols = [(res(x + h * e, t, d) - res(x - h * e, t, d)) / (2 * h) for e in np.eye(x.size)]
        return np.array(cols).T

    return res, jac, (pt0[0], pn0[0], sd_t, sd_n)


def _replicates(x0, n, sig_t, sig_p, R, seed):
    res, jac, (pt, pn, sd_t, sd_n) = _dense(x0, n, sig_t, sig_p)
    rng = np.random.default_rng(seed)
    t = n * (pt + sd_t * rng.standard_normal((R, pt.size)))
    d = n * (pn + sd_n * rng.standard_normal((R, pn.size)))
    return t, d, res, jac


@pytest.mark.parametrize("m", [2, 5])
def test_one_step_and_chord_are_the_gauss_newton_and_chord_steps(m):
    # m = 5: every kind of entry of A (own, cross ττ, ℓℓ, τℓ, ℓτ) occurs
    x0, n, sig_t, sig_p = _point(m, 1), 3000.0, 4.0, 7.0
    t, d, res, jac = _replicates(x0, n, sig_t, sig_p, 3, 2)
    one = linear_refits(t, d, n, sig_t, sig_p, x0, steps=1).start()
    two = linear_refits(t, d, n, sig_t, sig_p, x0, steps=2).start()
    for k in range(t.shape[0]):
        J = jac(x0, t[k], d[k])  # the Jacobian does not depend on the data (weights fixed at x0)
        A = J.T @ J
        x1 = x0 - np.linalg.solve(A, J.T @ res(x0, t[k], d[k]))
        x2 = x1 - np.linalg.solve(A, J.T @ res(x1, t[k], d[k]))  # chord: A and J of x0
        assert np.max(np.abs(one[k] - x1)) < 1e-8 * (1 + np.max(np.abs(x1 - x0)))
        assert np.max(np.abs(two[k] - x2)) < 1e-8 * (1 + np.max(np.abs(x2 - x0)))
        assert np.max(np.abs(x1 - x0)) > 1e-3  # a step that could be wrong
        assert np.max(np.abs(x2 - x1)) > 1e-6


def test_steps_approach_the_full_refit_as_the_residuals_shrink():
    # replicates about the model with residuals 10× smaller (n 100× larger): the refit's move
    # from x0 shrinks ~10× (linear in r), the one-step's error against fit_factor's converged
    # refit ~100× (quadratic: fit_factor's weights are the observed proportions', O(r) off the
    # model's, so the chord's error is O(r²) too, but not larger)
    m = 6
    x0 = _point(m, 3)
    size, e1, e2 = [], [], []
    for n in (1e6, 1e8):
        t, d, _, _ = _replicates(x0, n, 0.0, 0.0, 4, 4)
        full = fit_factor(t, d, n, 0.0, 0.0, start=x0, tol=1e-14, max_iter=200).start()
        one = linear_refits(t, d, n, 0.0, 0.0, x0, steps=1).start()
        two = linear_refits(t, d, n, 0.0, 0.0, x0, steps=2).start()
        size.append(np.max(np.abs(full - x0)[:-1]))  # μ: the prior pull, exact in any step
        e1.append(np.max(np.abs(one - full)))
        e2.append(np.max(np.abs(two - full)))
    assert 3 < size[0] / size[1] < 30
    assert e1[0] / e1[1] > 30
    assert e2[0] <= e1[0] and e2[1] <= e1[1]
    assert e1[1] < 0.05 * size[1]


def _release(n=3000, m=6, eps=1.0, seed=11, X=None):
    if X is None:
        X, _, _ = lognormal_2pno(n, m, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return release_2pl(X, epsilon=eps, delta=1e-4, seed=seed + 1,
                           missing="none" if not np.isnan(X).any() else "mcar")


def test_switch_changes_only_the_intervals_and_auto_takes_one_step_from_enough_persons_or_items(monkeypatch):
    assert E.BOOTSTRAP_REFITS == "auto"
    rel = _release()  # n = 3000: below LINEAR_REFITS_MIN_PERSONS, auto refits in full
    assert rel.n_persons < E.LINEAR_REFITS_MIN_PERSONS
    full = estimate_2pl_from_release(rel, n_boot=60, seed=3, intervals="bootstrap")
    assert full.info["bootstrap_refits"] == "full"
    monkeypatch.setattr(E, "BOOTSTRAP_REFITS", "full")
    forced = estimate_2pl_from_release(rel, n_boot=60, seed=3, intervals="bootstrap")
    np.testing.assert_array_equal(forced.ci["b"].to_numpy(), full.ci["b"].to_numpy())
    monkeypatch.setattr(E, "BOOTSTRAP_REFITS", "one_step")
    one = estimate_2pl_from_release(rel, n_boot=60, seed=3, intervals="bootstrap")
    monkeypatch.setattr(E, "BOOTSTRAP_REFITS", "auto")
    monkeypatch.setattr(E, "LINEAR_REFITS_MIN_PERSONS", rel.n_persons)  # auto: one step from n on
    auto = estimate_2pl_from_release(rel, n_boot=60, seed=3, intervals="bootstrap")
    assert auto.info["bootstrap_refits"] == "one_step"
    for k in ("a", "b", "tau"):
        np.testing.assert_array_equal(auto.ci[k].to_numpy(), one.ci[k].to_numpy())
    monkeypatch.setattr(E, "LINEAR_REFITS_MIN_PERSONS", 10_000)
    assert len(rel.items) < E.LINEAR_REFITS_MIN_ITEMS  # or from enough items, at any n
    monkeypatch.setattr(E, "LINEAR_REFITS_MIN_ITEMS", len(rel.items) + 1)
    assert estimate_2pl_from_release(rel, n_boot=20, seed=3, intervals="bootstrap").info["bootstrap_refits"] == "full"
    monkeypatch.setattr(E, "LINEAR_REFITS_MIN_ITEMS", len(rel.items))
    by_m = estimate_2pl_from_release(rel, n_boot=60, seed=3, intervals="bootstrap")
    assert by_m.info["bootstrap_refits"] == "one_step"
    for k in ("a", "b", "tau"):
        np.testing.assert_array_equal(by_m.ci[k].to_numpy(), one.ci[k].to_numpy())
    for mode in ("one_step", "chord2"):
        monkeypatch.setattr(E, "BOOTSTRAP_REFITS", mode)
        lin = estimate_2pl_from_release(rel, n_boot=60, seed=3, intervals="bootstrap")
        assert lin.info["bootstrap_refits"] == mode
        for x, y in ((lin.a, full.a), (lin.b, full.b), (lin.a_unshrunk, full.a_unshrunk)):
            np.testing.assert_array_equal(x.to_numpy(), y.to_numpy())
        for k in ("log_a", "b", "tau"):
            ratio = lin.se[k].to_numpy() / full.se[k].to_numpy()
            assert not np.allclose(ratio, 1.0, rtol=1e-9, atol=0.0)  # refitted otherwise
            assert np.all(np.abs(ratio - 1.0) < 0.2), (mode, k, ratio)


def test_mcar_releases_keep_the_full_refits(monkeypatch):
    X, _, _ = lognormal_2pno(2000, 5, 5)
    X = X.astype(float)
    X[np.random.default_rng(6).random(X.shape) < 0.2] = np.nan
    rel = _release(X=X)
    full = estimate_2pl_from_release(rel, n_boot=20, seed=3, intervals="bootstrap")
    monkeypatch.setattr(E, "BOOTSTRAP_REFITS", "one_step")
    lin = estimate_2pl_from_release(rel, n_boot=20, seed=3, intervals="bootstrap")
    assert lin.info["bootstrap_refits"] == "full"
    for k in ("a", "b", "tau"):
        np.testing.assert_array_equal(lin.ci[k].to_numpy(), full.ci[k].to_numpy())


def test_steps_are_checked():
    x0 = _point(3)
    with pytest.raises(ValueError, match="steps"):
        linear_refits(np.zeros((1, 3)), np.zeros((1, 3)), 100.0, 1.0, 1.0, x0, steps=3)


def test_auto_refits_in_full_by_items_where_the_priors_hold_the_discriminations(monkeypatch):
    """From LINEAR_REFITS_MIN_ITEMS items the one-step refits only where the release holds the
    discriminations: where the noise swamps the pairs one linearised step misses the refits' pull
    toward λ → 1 (at (500, 200, 0.3), with an indefinite Newton matrix and so the bootstrap route,
    the one-step intervals covered a 0.00 and b 0.11–0.14 of the time)."""
    X, _, _ = lognormal_2pno(400, 30, 277_800)
    rel = _release(X=X, eps=0.1, seed=277_801)
    m = len(rel.items)
    monkeypatch.setattr(E, "LINEAR_REFITS_MIN_ITEMS", m)
    fit = estimate_2pl_from_release(rel, n_boot=20, seed=3, intervals="bootstrap")
    assert fit.info["data_share_log_a"] < E.PRIOR_HELD_SHARE
    assert fit.info["bootstrap_refits"] == "full"
    rel2 = _release()  # n = 3000, m = 6, ε = 1: the release holds them
    monkeypatch.setattr(E, "LINEAR_REFITS_MIN_ITEMS", len(rel2.items))
    fit2 = estimate_2pl_from_release(rel2, n_boot=20, seed=3, intervals="bootstrap")
    assert fit2.info["data_share_log_a"] >= E.PRIOR_HELD_SHARE and fit2.info["bootstrap_refits"] == "one_step"
