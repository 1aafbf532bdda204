"""The 2PNO fit's Levenberg–Marquardt iterations: work saved without changing a step (the normal
equations of a failed step reused, the all-a-equal fit's matrix assembled in its subspace)."""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
from scipy import special

from privirt.exceptions import NoiseDominatesWarning
from privirt.private.twopl import _pairs as pairs_mod
from privirt.private.twopl import fit as fit_mod
from privirt.private.twopl import release_2pl
from privirt.private.twopl.fit import _common_subspace, fit_factor
from privirt.private.twopl.mcar import fit_inputs


def _swamped_batch(m: int, reps: int = 6, n: int = 400, eps: float = 0.2):
    """Noisy moments of ``reps`` releases of one data set where the noise swamps the pairs (a
    quarter to a half of the fit's steps fail there)."""
    rng = np.random.default_rng(279_000 + m)
    a, b = np.exp(rng.normal(0.0, 0.3, m)), rng.normal(0.0, 1.0, m)
    X = (rng.random((n, m)) < special.ndtr(rng.standard_normal(n)[:, None] * a - b)).astype(np.int8)
    with warnings.catch_warnings():  # (the noise-dominates warning, where it is)
        warnings.simplefilter("ignore", NoiseDominatesWarning)
        rel = release_2pl(X, epsilon=eps, delta=1e-4, seed=5)
    t, d, nn, st, sp = fit_inputs(rel)
    return (t + st * rng.standard_normal((reps, m)), d + sp * rng.standard_normal((reps, d.size)), nn, st, sp)


@pytest.mark.parametrize("m", [40, 70])  # 2m + 1 below and above fit.CHOLESKY_FROM (LU / Cholesky)
@pytest.mark.parametrize("common", [False, True])
def test_failed_steps_reuse_their_normal_equations_and_take_the_same_steps(monkeypatch, m, common):
    t, d, n, st, sp = _swamped_batch(m)
    calls = []
    jacobian = pairs_mod._scaled_jacobian

    def counted(tau, *args):
        calls.append(tau.shape[0])  # rows whose normal equations are computed
        return jacobian(tau, *args)

    monkeypatch.setattr(pairs_mod, "_scaled_jacobian", counted)
    fits = {}
    for reuse in (False, True):
        monkeypatch.setattr(fit_mod, "REUSE_FAILED_STEPS", reuse)
        calls.clear()
        fits[reuse] = (fit_factor(t, d, n, st, sp, common=common, hessian=True), sum(calls))
    (old, rows_old), (new, rows_new) = fits[False], fits[True]
    # every row takes the same steps to the same point: bitwise for the per-item fit
    assert np.array_equal(new.row_iterations, old.row_iterations)
    for name in ("tau", "lam", "log_a", "mean_log_a"):
        assert np.array_equal(getattr(new, name), getattr(old, name)), name
    assert np.array_equal(new.hessian[0], old.hessian[0]) and np.array_equal(new.gauss_newton, old.gauss_newton)
    # the computed normal equations: one per row and step (plus two at the end with hessian=True) without
    # reuse, fewer with it (failed steps were a quarter or more here)
    assert rows_old == new.row_iterations.sum() + 2 * t.shape[0]
    assert rows_new < rows_old - 0.2 * new.row_iterations.sum(), (rows_new, rows_old)


@pytest.mark.parametrize("m", [6, 70])
def test_all_equal_fit_matrix_assembled_in_its_subspace_is_the_full_matrix_reduced(monkeypatch, m):
    # the all-a-equal fit's first step solves (TᵀJᵀJT + priors + μ₀ diag) s = Tᵀg, assembled in the
    # subspace from the pairs' entries: it must be the full Gauss–Newton matrix (priors included) at the
    # start, reduced by T ((τ, ℓ) ↦ (τ, ℓ, …, ℓ, μ = ℓ)), and damped by the reduced Gauss–Newton diagonal
    t, d, n, st, sp = _swamped_batch(m, reps=2)
    rng = np.random.default_rng(3)
    start = np.concatenate([rng.normal(0.0, 1.0, (2, m)), np.repeat(rng.normal(0.0, 0.3, (2, 1)), m + 1, axis=1)],
                           axis=1)
    at_start = fit_factor(t, d, n, st, sp, start=start, max_iter=0, hessian=True)
    seen = []
    solve = fit_mod._solve

    def spy(A, g):
        seen.append((A.copy(), g.copy()))
        return solve(A, g)

    monkeypatch.setattr(fit_mod, "_solve", spy)
    fit_factor(t, d, n, st, sp, start=start, common=True, max_iter=1)
    A, g = seen[0]
    gn = at_start.gauss_newton
    reduced, _, _ = _common_subspace(gn, np.zeros((2, 2 * m + 1)), np.zeros((2, 2 * m + 1)), m)
    diag = np.diagonal(gn, axis1=1, axis2=2)
    damping = np.concatenate([diag[:, :m], diag[:, m:].sum(axis=1, keepdims=True)], axis=1)
    k = np.arange(m + 1)
    reduced[:, k, k] += 1e-2 * damping + 1e-12  # the first step's damping μ₀ = 10⁻²
    scale = np.abs(reduced).max()
    assert np.allclose(A, reduced, rtol=1e-12, atol=1e-12 * scale), np.abs(A - reduced).max() / scale
    assert np.array_equal(A, np.transpose(A, (0, 2, 1)))


def test_all_equal_fit_newton_steps_solve_the_full_newton_matrix_reduced(monkeypatch):
    # every step of the all-a-equal fit, Gauss–Newton or Newton (the residuals' curvature, the τ
    # diagonal's included), solves Tᵀ H T + μ diag(Tᵀ D T) for the full matrix H at its point: the
    # off-diagonal entries match one of the two reduced matrices, and the diagonal's excess over it
    # is one damping μ ≥ 0 times the reduced Gauss–Newton diagonal
    m = 40
    t, d, n, st, sp = _swamped_batch(m, reps=1)
    seen = []
    solve = fit_mod._solve

    def spy(A, g):
        seen.append(A[0].copy())
        return solve(A, g)

    monkeypatch.setattr(fit_mod, "_solve", spy)
    fit_factor(t, d, n, st, sp, common=True, max_iter=30)
    monkeypatch.setattr(fit_mod, "_solve", solve)
    zero = np.zeros((1, 2 * m + 1))
    off = ~np.eye(m + 1, dtype=bool)
    kinds = []
    for it, A in enumerate(seen):
        x = fit_factor(t, d, n, st, sp, common=True, max_iter=it).start()  # the point of step it + 1
        at = fit_factor(t, d, n, st, sp, start=x, max_iter=0, hessian=True)
        gn = at.gauss_newton
        diag = np.diagonal(gn, axis1=1, axis2=2)[0]
        damping = np.concatenate([diag[:m], [diag[m:].sum()]])
        for kind, H in (("newton", at.hessian[0]), ("gauss_newton", gn)):
            reduced = _common_subspace(H, zero, zero, m)[0][0]
            scale = np.abs(reduced).max()
            if np.allclose(A[off], reduced[off], rtol=1e-10, atol=1e-10 * scale):
                mu = (np.diagonal(A) - np.diagonal(reduced) - 1e-12) / damping
                assert np.allclose(mu, mu[0], rtol=1e-8, atol=1e-12) and mu[0] >= 0, (it, kind, mu.min(), mu.max())
                kinds.append(kind)
                break
        else:
            raise AssertionError(f"step {it + 1} solves neither reduced matrix")
    assert "newton" in kinds and "gauss_newton" in kinds, kinds


needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="needs numba (the fast extra)")


@needs_numba
def test_numba_pair_kernels_match_numpy():
    # the one-pass kernels compute the numpy path's pair terms: the disagreement probabilities
    # (8 and 12 orthant nodes both used) and the normal equations' pair parts, with and without the
    # residuals' curvature, to round-off
    from privirt.private.twopl import _pairs_numba
    from privirt.private.twopl.orthant import _RULES, FEW_NODES_UP_TO

    rng = np.random.default_rng(279_050)
    R, m = 3, 30
    sums = pairs_mod._pair_sums(m)
    i, j = sums.i, sums.j
    tau = rng.normal(0.0, 1.2, (R, m))
    lam = rng.uniform(0.2, 0.98, (R, m))
    r = lam[:, i] * lam[:, j]
    assert (r > FEW_NODES_UP_TO).any() and (r <= FEW_NODES_UP_TO).any()
    rn, sn, st = rng.normal(0.0, 3.0, (R, i.size)), rng.uniform(0.01, 0.05, (R, i.size)), rng.uniform(0.01, 0.05, (R, m))
    newton = np.array([True, False, True])
    want = pairs_mod._pair_terms(tau, lam, r, st, sn, rn, newton, sums)
    own, gn, grad = (np.zeros((R, c, m)) for c in (3, 2, 2))
    cross = np.empty((R, 4, i.size))
    _pairs_numba.pair_terms(tau, lam, rn, sn, newton, i, j, own, gn, grad, cross)
    got = (*own.transpose(1, 0, 2), *gn.transpose(1, 0, 2), *grad.transpose(1, 0, 2), tuple(cross.transpose(1, 0, 2)))
    for name, x, y in zip(("own_tt", "own_ll", "own_tl", "gn_tt", "gn_ll", "g_t", "g_l", "cross"), got, want[:8]):
        for xx, yy in zip(x if name == "cross" else (x,), y if name == "cross" else (y,)):
            assert np.allclose(xx, yy, rtol=0, atol=1e-12 * np.abs(yy).max()), name
    assert not np.allclose(own[0, 0], gn[0, 0])  # the curvature was added on the Newton rows ...
    assert np.array_equal(own[1, :2], gn[1])  # ... and only there
    pt = special.ndtr(-tau)
    pn = np.empty((R, i.size))
    (x8, w8), (x12, w12) = _RULES[8], _RULES[12]
    _pairs_numba.disagreement(tau, lam, pt, i, j, FEW_NODES_UP_TO, x8, w8, x12, w12, pn)
    theta = np.concatenate([tau, np.log(lam / np.sqrt(1.0 - lam * lam)), np.zeros((R, 1))], axis=1)
    assert np.allclose(pn, fit_mod._model(theta, m, i, j)[4], rtol=0, atol=1e-14)


@needs_numba
@pytest.mark.parametrize("common", [False, True])
def test_fits_by_the_numba_kernels_equal_the_numpy_fits(monkeypatch, common):
    # where the objective is not flat the two engines take the same steps to the same optimum
    rng = np.random.default_rng(279_060)
    m = 25
    a, b = np.exp(rng.normal(0.0, 0.3, m)), rng.normal(0.0, 1.0, m)
    X = (rng.random((3000, m)) < special.ndtr(rng.standard_normal(3000)[:, None] * a - b)).astype(np.int8)
    t, d, n, st, sp = fit_inputs(release_2pl(X, epsilon=3.0, delta=1e-4, seed=7))
    t, d = t + st * rng.standard_normal((3, m)), d + sp * rng.standard_normal((3, d.size))
    monkeypatch.setattr(pairs_mod, "NUMBA_FROM_PAIRS", 0)
    fits = {}
    for engine in ("numpy", "auto"):
        monkeypatch.setattr(pairs_mod, "PAIR_ENGINE", engine)
        fits[engine] = fit_factor(t, d, n, st, sp, common=common, hessian=True)
    old, new = fits["numpy"], fits["auto"]
    assert np.array_equal(new.row_iterations, old.row_iterations)
    assert np.allclose(new.tau, old.tau, rtol=0, atol=1e-9) and np.allclose(new.log_a, old.log_a, rtol=0, atol=1e-9)
    scale = np.abs(old.hessian[0]).max()
    assert np.allclose(new.hessian[0], old.hessian[0], rtol=0, atol=1e-9 * scale)
    assert np.allclose(new.gauss_newton, old.gauss_newton, rtol=0, atol=1e-9 * scale)


def test_pair_engine_switch(monkeypatch):
    assert pairs_mod._numba_kernels(pairs_mod.NUMBA_FROM_PAIRS - 1) is None  # small fits: numpy, nothing compiled
    if importlib.util.find_spec("numba") is not None:
        assert pairs_mod._numba_kernels(pairs_mod.NUMBA_FROM_PAIRS) is not None
    monkeypatch.setattr(pairs_mod, "PAIR_ENGINE", "numpy")
    assert pairs_mod._numba_kernels(10**9) is None
    monkeypatch.setattr(pairs_mod, "PAIR_ENGINE", "gpu")
    with pytest.raises(ValueError, match="PAIR_ENGINE"):
        pairs_mod._numba_kernels(10**9)


def test_the_laplace_and_level_linear_algebra_runs_on_one_blas_thread(monkeypatch):
    """The (2m + 1)² inverses, eigenvalues and the level's Cholesky ran on OpenBLAS's own threads,
    which spin on shared cores (eigvalsh at m = 1000: 3.5–6 CPU s on two threads of a busy 2-core
    machine against 0.8 s on one; BENCHMARKS.md, "Session 22")."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from privirt.private.twopl import estimate as estimate_mod
    from privirt.private.twopl import level as level_mod

    def blas_threads():
        return {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}

    t, d, n, st, sp = _swamped_batch(12, reps=1)
    fit = fit_factor(t, d, n, st, sp, hessian=True)
    same = fit_factor(t, d, n, st, sp, common=True, hessian=True)
    seen = []
    for name in ("inv", "eigvalsh", "cholesky"):
        original = getattr(np.linalg, name)
        monkeypatch.setattr(np.linalg, name, lambda *a, _f=original, **k: (seen.append(blas_threads()), _f(*a, **k))[1])
    controller = threadpoolctl.ThreadpoolController()
    limiter = controller.limit(limits=2, user_api="blas")
    clear = getattr(getattr(threadpoolctl, "OpenBLASController", None), "clear_controlling_thread", None)
    try:
        if clear is not None:
            clear()
        if blas_threads() != {2}:
            pytest.skip("no BLAS whose thread count threadpoolctl can set")
        share, cov, _ = estimate_mod._laplace(fit)
        v = level_mod.level_curvature_variance(same)
    finally:
        limiter.restore_original_limits()
        if clear is not None:
            clear()
    assert cov is not None and np.isfinite(v) and len(seen) >= 3
    assert all(s == {1} for s in seen), seen


def test_the_cholesky_solves_take_the_symmetric_matrix_in_fortran_order(monkeypatch):
    """``_solve`` handed LAPACK each C-ordered row matrix, which f2py copied by transposing (15 of
    89 ms a solve at 2001 unknowns); the transpose of a symmetric matrix is itself in Fortran order:
    the same solutions, bit for bit, with or without the LU fallback."""
    from scipy.linalg import lapack

    rng = np.random.default_rng(1_500_020)
    k = fit_mod.CHOLESKY_FROM + 3
    B = rng.standard_normal((3, k, k))
    A = B @ B.transpose(0, 2, 1) / k + np.eye(k)
    A[2] -= 5.0 * np.eye(k)  # indefinite: the LU fallback
    A = 0.5 * (A + A.transpose(0, 2, 1))
    g = rng.standard_normal((3, k))
    seen = []

    class Recording:
        def __getattr__(self, name):
            def call(a, b, *args, **kwargs):
                seen.append((name, a.flags.f_contiguous))
                return getattr(lapack, name)(a, b, *args, **kwargs)
            return call

    monkeypatch.setattr(fit_mod, "lapack", Recording())
    x = fit_mod._solve(A, g)
    assert ("dgesv", True) in seen and all(f for _, f in seen), seen
    for r in range(2):
        assert np.array_equal(x[r], lapack.dposv(A[r], g[r])[1])
    assert np.array_equal(x[2], lapack.dgesv(A[2], g[2])[2])
    assert np.allclose(np.einsum("rij,rj->ri", A, x), g, atol=1e-10)


@needs_numba
def test_the_all_equal_fit_evaluates_its_pairs_with_one_loading_a_row(monkeypatch):
    """With all a equal every pair has the same r = λ², so the orthant rule's sines are computed
    once a row (``disagreement_one_loading``, 2.4× the general kernel at m = 1000): the same values
    bit for bit, on either rule (8 and 12 nodes), and so the same fit where the objective is flat."""
    from privirt.private.twopl import _pairs_numba
    from privirt.private.twopl.orthant import _RULES, FEW_NODES_UP_TO

    rng = np.random.default_rng(1_500_050)
    m = 30
    i, j = pairs_mod._pair_sums(m).i, pairs_mod._pair_sums(m).j
    tau = rng.normal(0.0, 1.2, (2, m))
    lam = np.array([0.6, 0.95])  # r = 0.36 and 0.9025, either side of FEW_NODES_UP_TO
    pt = special.ndtr(-tau)
    rules = (FEW_NODES_UP_TO, *_RULES[8], *_RULES[12])
    general, one = np.empty((2, i.size)), np.empty((2, i.size))
    _pairs_numba.disagreement(tau, np.repeat(lam[:, None], m, axis=1), pt, i, j, *rules, general)
    _pairs_numba.disagreement_one_loading(tau, lam, pt, i, j, *rules, one)
    assert np.array_equal(one, general)

    used = []

    class Kernels:  # the numba kernels, recording which are called; ``general``: the one-loading kernel
        def __init__(self, general):  # replaced by the general kernel on the row's loading repeated
            self.general = general

        def __getattr__(self, name):
            used.append(name)
            if name == "disagreement_one_loading" and self.general:
                return lambda tau, lam, *rest: _pairs_numba.disagreement(
                    tau, np.repeat(lam[:, None], tau.shape[1], axis=1), *rest)
            return getattr(_pairs_numba, name)

    t, d, n, st, sp = _swamped_batch(m, reps=2)
    fits = []
    for general in (False, True):
        monkeypatch.setattr(fit_mod, "_numba_kernels", lambda P, g=general: Kernels(g))
        fits.append(fit_factor(t, d, n, st, sp, common=True, hessian=True))
    assert "disagreement_one_loading" in used and "disagreement" not in used
    new, old = fits
    assert np.array_equal(new.row_iterations, old.row_iterations)
    for x, y in ((new.tau, old.tau), (new.log_a, old.log_a), (new.hessian[0], old.hessian[0]),
                 (new.gauss_newton, old.gauss_newton)):
        assert np.array_equal(x, y)
