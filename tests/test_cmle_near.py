"""CML with missing cells and near-tied items: the exact near-pair terms are computed once, for
the covariance, and the results equal an enumerated (slow, exact) CML."""

from __future__ import annotations

import numpy as np
import pytest

import privirt
from privirt.rasch import cmle

from .test_cmle import enumerated_cml


def _near_tied_missing():
    """Seeded 300 × 7 data with 25 % missing cells whose last item copies item 1 except for one
    person: at the estimate the two are 8.6e-4 apart (inside ``_NEAR``, far from a tie)."""
    X = privirt.simulate_rasch(300, 6, p_observed=0.75, seed=23)[0]
    c = X[:, 1].copy()
    i = np.random.default_rng(23).integers(300)
    c[i] = np.nan if not np.isnan(c[i]) else 1.0
    return np.column_stack([X, c])


def test_near_tied_items_with_missing_cells_equal_enumerated_cml():
    X = _near_tied_missing()
    ref_beta, ref_cov = enumerated_cml(X)
    res = privirt.cmle_estimate(X)
    b = res.beta.to_numpy()
    assert 1e-6 < abs(b[1] - b[6]) < cmle._NEAR  # the case is the one meant
    assert res.converged
    np.testing.assert_allclose(b, ref_beta, rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.se.to_numpy(), np.sqrt(np.diag(ref_cov)), rtol=1e-9)
    np.testing.assert_allclose(res.info["cov"], ref_cov, rtol=0, atol=1e-12)


def test_exact_near_pair_terms_only_for_the_final_hessian(monkeypatch):
    # the exact O(k) recursion per (group, near pair) was run on every Newton evaluation
    # (124 CPU s at 10^3 x 10^3 with 20 % missing cells); now only once, for the covariance
    calls = []
    real = cmle.near_pair_terms

    def counting(lg, bt, sizes, counts, gi, ia, ib):
        calls.append(gi.size)
        return real(lg, bt, sizes, counts, gi, ia, ib)

    monkeypatch.setattr(cmle, "near_pair_terms", counting)
    evaluations = []
    real_eval = cmle._evaluate
    monkeypatch.setattr(cmle, "_evaluate", lambda *a: evaluations.append(1) or real_eval(*a))
    X = _near_tied_missing()
    privirt.cmle_estimate(X)
    n_batches = len(cmle._statistics(privirt.as_responses(X).codes).batches)
    assert len(evaluations) > 2
    assert sum(1 for t in calls if t) <= n_batches  # one evaluation's worth
    assert sum(calls) > 0


def _skewed_missing(seed):
    return privirt.simulate_rasch(400, 30, p_observed=0.8, seed=seed)[0]


@pytest.mark.parametrize("spread", [1.0, 300.0])  # plain and log-space ESFs
def test_numba_chain_equals_numpy_chain(monkeypatch, spread):
    pytest.importorskip("numba")
    from privirt.rasch import _esf

    X = privirt.simulate_rasch(400, 30, p_observed=0.8, seed=31)[0]
    stats = cmle._statistics(privirt.as_responses(X).codes)
    beta = np.random.default_rng(31).normal(size=30) * spread
    beta[7] = beta[3] + 4e-4  # a near pair: the exact terms' chains too
    beta -= beta.mean()
    out = {}
    for engine in ("numpy", "auto"):
        monkeypatch.setattr(_esf, "CHAIN_ENGINE", engine)
        monkeypatch.setattr(_esf, "NUMBA_FROM_CELLS", 1)
        ll, g, H = cmle._evaluate(beta, stats, 30)
        for b in stats.batches:
            P = _esf.batch_probabilities(np.append(beta, 0.0)[b.items], b.real, b.sizes, b.lo,
                                         b.hi)[2]
            gsel, rsel = np.nonzero(b.counts > 0)
            out.setdefault(engine, []).append(P[rsel, gsel, :][b.real[gsel]])
        out[engine] += [np.array([ll]), g, H.ravel()]
    for a, b in zip(out["numpy"], out["auto"]):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * max(1.0, np.max(np.abs(a))))


def test_chain_engine_is_checked(monkeypatch):
    from privirt.rasch import _esf

    monkeypatch.setattr(_esf, "CHAIN_ENGINE", "cuda")
    with pytest.raises(ValueError, match="CHAIN_ENGINE"):
        privirt.cmle_estimate(_skewed_missing(1))


@pytest.mark.parametrize("argv, says", [(["--missing", "2"], "--missing must be in (0, 1)"),
                                        (["--fresh", "--rows", "100x5"], "give --missing F")])
def test_benchmark_missing_options_are_checked(argv, says, capsys):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_cmle.py"
    spec = importlib.util.spec_from_file_location("bench_cmle", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with pytest.raises(SystemExit) as exc:
        bench.main([*argv, "--erm-rows", ""])
    assert exc.value.code == 2
    assert says in capsys.readouterr().err


def test_large_spread_groups_run_linear_and_equal_log_space(monkeypatch):
    # groups of 800 spread items (Π(1 + ε) ≈ e^720, beyond float64 unscaled) ran the slow
    # log-space summation (5.7 s per evaluation at 10^3 x 10^3 with 20 % missing cells); the
    # per-group scaled summation keeps them linear, with the same ESFs and probabilities
    from privirt.rasch import _esf

    rng = np.random.default_rng(7)
    m, G = 820, 6
    beta = rng.normal(size=m) * 1.48
    beta -= beta.mean()
    items = np.stack([np.sort(rng.choice(m, 800, replace=False)) for _ in range(G)])
    items = np.concatenate([items, np.full((G, 10), m)], axis=1)  # padded slots
    real = items < m
    sizes = real.sum(axis=1)
    bg = np.append(beta, 0.0)[items]
    bt = bg - np.where(real, bg, 0.0).sum(axis=1, keepdims=True) / sizes[:, None]
    upper = np.where(real, np.log1p(np.exp(-bt)), 0.0).sum(axis=1)
    lower = np.where(real, np.maximum(bt, 0.0), 0.0).sum(axis=1)
    assert upper.min() > 710 and (upper + lower).max() < 2 * _esf._LINEAR_LOG_RANGE
    out = {}
    for path in ("log", "linear"):
        if path == "log":
            monkeypatch.setattr(_esf, "_LINEAR_LOG_RANGE", 0.0)  # forces log space
        else:
            monkeypatch.undo()

            def refuse(le):
                raise AssertionError("log-space ESFs used")

            monkeypatch.setattr(_esf, "_log_esf", refuse)
        lg, shift, P, _ = _esf.batch_probabilities(bg, real, sizes)
        assert np.all(np.isfinite(lg[:, :801]))
        out[path] = (lg[:, :801], np.stack([P[r][real] for r in range(801)]))
    for a, b in zip(out["log"], out["linear"]):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-13)


def test_covariance_reuses_the_last_evaluation(monkeypatch):
    # the covariance's Hessian was a whole extra evaluation at the estimate (~10 CPU s of
    # ESFs and sums at 10^3 x 10^3 with 20 % missing cells besides the exact terms); it now
    # patches the accepted evaluation's Hessian with the exact near-pair terms
    X = _near_tied_missing()
    stats = cmle._statistics(privirt.as_responses(X).codes)
    beta = privirt.cmle_estimate(X).beta.to_numpy()
    keep = {}
    H_iter = cmle._evaluate(beta, stats, 7, cmle._NEAR_ITER, keep)[2]
    H_full = cmle._evaluate(beta, stats, 7, cmle._NEAR)[2]
    assert np.max(np.abs(H_full - H_iter)) > 0  # the exact terms change the Hessian
    np.testing.assert_array_equal(cmle._exact_near_hessian(beta, stats, 7, H_iter, keep), H_full)
    seen = []
    real_eval = cmle._evaluate

    def recording(b, s, m, tol=cmle._NEAR, *rest):
        seen.append(tol)
        return real_eval(b, s, m, tol, *rest)

    monkeypatch.setattr(cmle, "_evaluate", recording)
    privirt.cmle_estimate(X)
    assert seen and all(t == cmle._NEAR_ITER for t in seen)


def test_kept_esfs_are_bounded(monkeypatch):
    # every evaluation held all batches' (lg, bt) (16 bytes per group and slot, twice during
    # the line search: ~3 GB at 10^5 x 10^3 with missing cells); past _KEEP_CELLS the
    # covariance evaluates the batches again, with the same result
    X = _near_tied_missing()  # a pair 8.6e-4 apart: the covariance needs the exact terms
    monkeypatch.setattr(cmle, "_BATCH_CELLS", 500)  # several batches
    ref = privirt.cmle_estimate(X)
    kept, dropped = [], []
    real_eval = cmle._evaluate

    def recording(b, s, m, tol=cmle._NEAR, keep=None):
        out = real_eval(b, s, m, tol, keep)
        if keep is not None:
            kept.append(sum(0 if e is None else e[0].size + e[1].size for e in keep["esf"]))
            dropped.append(sum(e is None for e in keep["esf"]))
        return out

    monkeypatch.setattr(cmle, "_evaluate", recording)
    monkeypatch.setattr(cmle, "_KEEP_CELLS", 300, raising=False)
    res = privirt.cmle_estimate(X)
    assert kept and 0 < max(kept) <= 300 and min(dropped) > 0  # some kept, some not
    np.testing.assert_array_equal(res.info["cov"], ref.info["cov"])
    np.testing.assert_array_equal(res.beta, ref.beta)


@pytest.mark.parametrize("spread", [1.0, 300.0])  # plain and log-space ESFs
def test_numba_near_pair_kernel_equals_numpy(monkeypatch, spread):
    # the exact near-pair terms ran as two W = 1 chains plus numpy passes over (triples, K)
    # arrays, and in numpy's Python loop (~6 K passes) wherever a batch had few triples
    # (~16 of the ~40 CPU s at 10^3 x 10^3 with 20 % missing cells); one numba pass per triple
    # now, wherever the batch's own chain runs in numba, with the same values
    pytest.importorskip("numba")
    from privirt.rasch import _esf, _esf_numba

    m = 120
    X = privirt.simulate_rasch(300, m, p_observed=0.8, seed=41)[0]
    stats = cmle._statistics(privirt.as_responses(X).codes)
    beta = np.random.default_rng(41).normal(size=m) * spread
    beta[7] = beta[3] + 4e-4  # near pairs, a tie and a pair of near-equal hard items
    beta[9] = beta[3] - 2e-4
    beta[11] = beta[3]
    beta[20], beta[21] = 3.0 * spread, 3.0 * spread + 5e-4
    beta -= beta.mean()
    pa, pb = cmle._near_pairs(beta, cmle._NEAR)
    calls = []
    real = _esf_numba.near_pairs_b
    monkeypatch.setattr(_esf_numba, "near_pairs_b", lambda *a: calls.append(1) or real(*a))
    out = {}
    for engine in ("numpy", "auto"):
        monkeypatch.setattr(_esf, "CHAIN_ENGINE", engine)
        terms = []
        for b in stats.batches:
            lg, _, _, bt = _esf.batch_probabilities(np.append(beta, 0.0)[b.items], b.real,
                                                    b.sizes, b.lo, b.hi)
            assert b.items.shape[0] * b.items.shape[1] ** 2 >= _esf.NUMBA_FROM_CELLS
            terms.append(cmle._near_terms(pa, pb, m, [b], [(lg, bt)]))
        out[engine] = np.concatenate(terms)
    assert calls and np.count_nonzero(out["numpy"]) >= 6
    np.testing.assert_allclose(out["auto"], out["numpy"], rtol=1e-12, atol=0)


def _linear_case():
    # the scaled linear summation ran as numpy's Python loop of K whole-array passes over a
    # batch's ~13 groups of ~800 items (~0.8 CPU s per evaluation at 10^3 x 10^3 with 20 %
    # missing cells); one numba pass per group now, with the same products and sums
    rng = np.random.default_rng(3)
    bt = rng.normal(size=(13, 400)) * 1.5 + np.log(400)
    bt[:, -3:] = np.inf  # empty slots
    start = np.exp(-rng.random(13) * 50)
    return "lin_esf", lambda esf: esf._lin_esf(np.exp(-bt), start), 0


def _log_case():
    # groups of more items than the scaled linear summation covers (~1600 of 2000 answered,
    # docs/cmle.md §2) went through numpy's Python loop of K logaddexp passes over a batch of
    # ~3 groups; one numba pass per group now, with numpy's logaddexp (log1p(exp(-|a - b|)) +
    # max, a + log 2 on a tie) in the same order
    rng = np.random.default_rng(21_006)
    bt = rng.normal(size=(3, 900)) * 4.0 + np.log(900)
    bt[:, -5:] = np.inf  # empty slots
    bt[0, 7] = bt[0, 8]  # tied items
    return "log_esf", lambda esf: esf._log_esf(-bt), 5


@pytest.mark.parametrize("case", [_linear_case, _log_case])
def test_numba_esf_summations_equal_numpy_bit_for_bit(monkeypatch, case):
    pytest.importorskip("numba")
    from privirt.rasch import _esf, _esf_numba

    kernel, run, empty = case()
    calls = []
    real = getattr(_esf_numba, kernel)
    monkeypatch.setattr(_esf_numba, kernel, lambda *a: calls.append(1) or real(*a))
    out = {}
    for engine in ("numpy", "auto"):
        monkeypatch.setattr(_esf, "CHAIN_ENGINE", engine)
        out[engine] = run(_esf)
    assert calls
    K = out["numpy"].shape[1]
    assert np.isfinite(out["numpy"][:, : K - empty]).all()
    if empty:  # log space: the empty slots' high scores are −inf
        assert np.isneginf(out["numpy"][:, K - empty:]).all()
    np.testing.assert_array_equal(out["auto"], out["numpy"])
