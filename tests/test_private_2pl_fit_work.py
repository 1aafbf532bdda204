"""Work the 2PNO fit no longer does, each without changing a result (session 29: the private 2PL
on MCAR data with many items): trial points of steps that cannot be taken are not evaluated."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import special

from privirt.exceptions import NoiseDominatesWarning
from privirt.private.twopl import _pairs as pairs_mod
from privirt.private.twopl import fit as fit_mod
from privirt.private.twopl import release_2pl
from privirt.private.twopl.fit import fit_factor
from privirt.private.twopl.mcar import fit_inputs

def _swamped_mcar_batch(m: int, reps: int = 6, n: int = 300, eps: float = 0.3):
    """Fit inputs of ``reps`` noisy MCAR releases where the noise swamps the pairs (there some of
    the Newton steps are not descent directions)."""
    rng = np.random.default_rng(290_110 + m)
    a, b = np.exp(rng.normal(0.0, 0.3, m)), rng.normal(0.0, 1.0, m)
    X = (rng.random((n, m)) < special.ndtr(rng.standard_normal(n)[:, None] * a - b)).astype(float)
    X[rng.random((n, m)) < 0.1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        rel = release_2pl(X, epsilon=eps, delta=1e-4, seed=11, missing="mcar")
    t, d, nn, st, sp = fit_inputs(rel)
    return t + st * rng.standard_normal((reps, m)), d + sp * rng.standard_normal((reps, d.size)), nn, st, sp


@pytest.mark.parametrize("common", [False, True])
def test_only_descent_trials_are_evaluated_and_the_fit_is_unchanged(monkeypatch, common):
    t, d, n, st, sp = _swamped_mcar_batch(30)
    evaluated, solved, descents = [], [], []
    model, solve = fit_mod._model, fit_mod._solve

    def counted_model(theta, *args):
        evaluated.append(theta.shape[0])  # rows whose model is evaluated (numpy engine at 435 pairs)
        return model(theta, *args)

    def counted_solve(H, g):
        step = solve(H, g)
        solved.append(g.shape[0])
        descents.append(int((np.einsum("rk,rk->r", step, g) > 0).sum()))
        return step

    monkeypatch.setattr(fit_mod, "_model", counted_model)
    monkeypatch.setattr(fit_mod, "_solve", counted_solve)
    fits, counts = {}, {}
    for only in (False, True):
        monkeypatch.setattr(fit_mod, "EVALUATE_DESCENT_ONLY", only, raising=False)  # (absent before: all evaluated)
        for x in (evaluated, solved, descents):
            x.clear()
        fits[only] = fit_factor(t, d, n, st, sp, common=common, hessian=True)
        counts[only] = (sum(evaluated), sum(solved), sum(descents))
    (old, (ev_old, sv_old, de_old)), (new, (ev_new, sv_new, de_new)) = (fits[False], counts[False]), \
        (fits[True], counts[True])
    R = t.shape[0]
    assert de_new < sv_new  # some steps were not descent directions here
    assert ev_old == R + sv_old  # before: every trial evaluated (and the start)
    assert ev_new == R + de_new  # now: the descent trials alone
    # the same steps to the same point, bit for bit
    assert (sv_new, de_new) == (sv_old, de_old)
    assert np.array_equal(new.row_iterations, old.row_iterations)
    for name in ("tau", "lam", "log_a", "mean_log_a"):
        assert np.array_equal(getattr(new, name), getattr(old, name)), name
    assert np.array_equal(new.hessian[0], old.hessian[0]) and np.array_equal(new.gauss_newton, old.gauss_newton)
