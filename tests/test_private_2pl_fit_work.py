"""Work the 2PNO fit no longer does, each without changing a result (session 29: the private 2PL
on MCAR data with many items): trial points of steps that cannot be taken are not evaluated, and
the numba pair kernel takes φ(τ) once an item rather than twice a pair."""

from __future__ import annotations

import importlib.util
import math
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

needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")


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


class _CountingMath:
    """``math`` with its exp counted (for the kernels' Python source, ``py_func``)."""

    def __init__(self):
        self.exp_calls = 0

    def __getattr__(self, name):
        return getattr(math, name)

    def exp(self, x):
        self.exp_calls += 1
        return math.exp(x)


def _pair_terms_inputs(R: int = 3, m: int = 9):
    rng = np.random.default_rng(290_111)
    i, j = np.triu_indices(m, 1)
    return (rng.normal(0.0, 1.2, (R, m)), rng.uniform(0.2, 0.98, (R, m)), rng.normal(0.0, 3.0, (R, i.size)),
            rng.uniform(0.01, 0.05, (R, i.size)), np.array([True, False, True][:R]), i.astype(np.int64),
            j.astype(np.int64))


def _run(kernel, args):
    tau, _, _, _, _, i, _ = args
    R, m = tau.shape
    own, gn, grad = (np.zeros((R, c, m)) for c in (3, 2, 2))
    cross = np.empty((R, 4, i.size))
    kernel(*args, own, gn, grad, cross)
    return own, gn, grad, cross


@needs_numba
def test_pair_terms_take_phi_once_an_item_and_give_the_same_values(monkeypatch):
    from privirt.private.twopl import _pairs_numba

    args = _pair_terms_inputs()
    R, m = args[0].shape
    P = args[5].size
    compiled = _run(_pairs_numba.pair_terms, args)
    plain = _run(_pairs_numba.pair_terms.py_func, args)
    counter = _CountingMath()
    monkeypatch.setattr(_pairs_numba, "math", counter)
    _run(_pairs_numba.pair_terms.py_func, args)
    # exp: φ(τ) once an item and φ₂ once a pair (before: φ(τ) twice a pair, 3P a row)
    assert counter.exp_calls == R * (m + P)
    # the compiled kernel is its source, bit for bit (φ(τ) per item: the same operations on the same
    # values as per pair; the fits' bit-identity is checked in BENCHMARKS.md, session 29)
    for x, y in zip(compiled, plain):
        assert np.array_equal(x, y)
