"""The fused CPU engine of the 2PNO Gibbs sampler (privirt.bayes.twopno_fused): its random numbers,
Φ⁻¹, agreement of the numba kernel with the numpy fallback, the exact posterior of a tiny
problem, and the posterior of the current sampler on a moderate one."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

import privirt
from privirt.bayes import slopes, twopno_fused
from privirt.bayes.diagnostics import mcse_batch_means
from privirt._seeds import child as _child
from privirt.bayes.twopno import default_init as _default_init
from privirt.bayes.posterior import Posterior
from tests._exact_posterior import assert_moments_match, tiny_2pno_problem
from tests._philox import KNOWN_ANSWERS
from tests._philox import uniform2 as reference_uniform2

needs_numba = pytest.mark.skipif(not twopno_fused.numba_available(), reason="needs numba")


def _codes(X) -> np.ndarray:
    return privirt.as_responses(X, empty="keep").codes


def _engine(codes, n_chains=1, priors=None, seed=0, engine="numpy", keep_z=False, jitter=True,
            threads=None, free=False, anchors=None):
    codes3 = codes if codes.ndim == 3 else codes[None]
    D = codes3.shape[0]
    ss = np.random.SeedSequence(seed)
    inits = []
    for d in range(D):
        for c in range(n_chains):
            inits.append(_default_init(codes3[d], np.random.default_rng([seed, d, c]), jitter))
    seeds = [_child(ss, b, 1) for b in range(D * n_chains)]
    return twopno_fused.FusedGibbs(
        codes3, n_chains=n_chains, priors=priors,
        theta=np.stack([i["theta"] for i in inits]), a=np.stack([i["a"] for i in inits]),
        b=np.stack([i["b"] for i in inits]), keys=twopno_fused.philox_keys(seeds),
        engine=engine, keep_z=keep_z, threads=threads, free=free, anchors=anchors,
    )


# ---------------------------------------------------------------------------------------
# random numbers and Φ⁻¹
# ---------------------------------------------------------------------------------------
def test_numpy_philox_matches_random123_and_the_gpu_port():
    from tests._philox import philox4x32_10

    for ctr, key, expected in KNOWN_ANSWERS:
        assert tuple(int(v) for v in philox4x32_10(*ctr, *key)) == expected
    rng = np.random.default_rng(0)
    c = rng.integers(0, 2**32, size=(4, 500), dtype=np.uint64)
    k = rng.integers(0, 2**32, size=(2, 500), dtype=np.uint64)
    for got, ref in zip(twopno_fused.uniform2(*c, *k), reference_uniform2(*c, *k)):
        np.testing.assert_array_equal(got, ref)
        assert np.all((got > 0) & (got < 1))


@needs_numba
def test_numba_philox_and_ndtri_match_numpy():
    from privirt.bayes import twopno_numba

    rng = np.random.default_rng(1)
    c = rng.integers(0, 2**32, size=(4, 500), dtype=np.uint64)
    k = rng.integers(0, 2**32, size=(2, 500), dtype=np.uint64)
    got = twopno_numba.uniform2_array(*c, *k)
    ref = reference_uniform2(*c, *k)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_array_equal(got[1], ref[1])
    # AS 241 against scipy's Φ⁻¹ over the body and both tails, down to 1e-300
    p = np.concatenate([rng.random(20000), np.exp(-rng.random(20000) * 690.0),
                        1.0 - (1.0 + rng.random(20000)) * 1e-12, [0.075, 0.925, 0.5, 1e-300]])
    ref = special.ndtri(p)
    rel = np.abs(twopno_numba.ndtri_array(p) - ref) / np.maximum(np.abs(ref), 1e-300)
    assert rel.max() < 1e-14
    # the branch-free block version the Z step uses, down to its limit p = e^-25 (the
    # scalar function takes over below)
    p = p[np.abs(p - 0.5) <= twopno_numba._DEEP]
    ref = special.ndtri(p)
    got = -twopno_numba.neg_ndtri_array(p)
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)) < 1e-14


@needs_numba
def test_numba_branch_free_ndtr_matches_scipy():
    """The vectorised Φ (Cody's algorithm, the Z step's bound) against scipy's ndtr: to
    1e-15 in the body; in the far lower tail scipy's own error grows like x² · 1e-16 (it
    evaluates erfc(−x/√2) with a rounded argument), so the tolerance does too."""
    from privirt.bayes import twopno_numba

    rng = np.random.default_rng(2)
    x = np.concatenate([np.linspace(-37.5, 9.0, 40001), rng.normal(size=20000) * 4.0,
                        [0.0, -0.0, 0.67448975, -0.67448975, 0.6744898, 5.656854249492381,
                         -5.656854249492381, -5.6568542494924, 1e-300, -1e-300]])
    ref = special.ndtr(x)
    got = twopno_numba.ndtr_array(x)
    assert np.all(np.abs(got - ref) <= 5e-16 * (1.0 + x * x) * ref)
    np.testing.assert_array_equal(twopno_numba.ndtr_array(np.array([0.0, np.inf, -np.inf,
                                                                   -40.0, 9.0])),
                                  [0.5, 1.0, 0.0, 0.0, 1.0])
    assert np.isnan(twopno_numba.ndtr_array(np.array([np.nan]))[0])


def test_far_tail_draw_ends_for_every_finite_bound():
    """X | X > L for L beyond L·L's overflow (1.3e154): Robert's loop never accepted there
    (gibbs --prior-a 1e160 1 or --anchor p0=1e308 hung); now L itself, which is what every
    draw rounds to from 1e150 on, on the numpy twin and the numba kernel alike."""
    L = np.array([6.0, 30.0, 1e149, 1e150, 1e155, 1e200, 1e308, np.inf])
    c = np.arange(L.size, dtype=np.uint64)
    got = twopno_fused.std_tn_lower(L, 3, 0, c, 0, 12345, 678)
    assert np.all(got >= L) and np.all(got[:2] < L[:2] + 1.0)
    np.testing.assert_array_equal(got[2:], L[2:])
    if twopno_fused.numba_available():
        from privirt.bayes import twopno_numba

        k0, k1, zero = np.uint64(12345), np.uint64(678), np.uint64(0)
        kernel = [twopno_numba.std_tn_lower(v, np.uint64(3), zero, np.uint64(j), zero, k0, k1)
                  for j, v in enumerate(L)]
        np.testing.assert_array_equal(kernel, got)


def test_numpy_engine_far_tail_draw_is_the_bound_as_the_kernels_return():
    """The numpy engine's log-space draw gave ±inf from |L| ≈ 2e154 on (log_ndtr overflowed),
    while the fused kernels return L from 1e150 on: both engines agree over 1e149..1e308, each
    draw finite and on its side of the bound, exactly the bound from 1e150 on."""
    from privirt.bayes.truncnorm import std_truncnorm_lower, std_truncnorm_upper

    L = np.array([1e149, 1e150, 1e154, 2e154, 1e155, 1e200, 1e300, 1e308])
    v = 1.0 - np.random.default_rng(5).random(L.size)
    lower = std_truncnorm_lower(L, v.copy())
    upper = std_truncnorm_upper(-L, v.copy())
    assert np.all(np.isfinite(lower)) and np.all(lower >= L) and np.all(upper <= -L)
    np.testing.assert_array_equal(lower[1:], L[1:])
    np.testing.assert_array_equal(upper[1:], -L[1:])
    fused = twopno_fused.std_tn_lower(L, 3, 0, np.arange(L.size, dtype=np.uint64), 0, 12345, 678)
    np.testing.assert_allclose(lower, fused, rtol=1e-15, atol=0)  # (1e149: within an ulp)
    np.testing.assert_allclose(-upper, fused, rtol=1e-15, atol=0)
    if twopno_fused.numba_available():
        from privirt.bayes import twopno_numba

        k0, k1, zero = np.uint64(12345), np.uint64(678), np.uint64(0)
        kernel = [twopno_numba.std_tn_lower(x, np.uint64(3), zero, np.uint64(j), zero, k0, k1)
                  for j, x in enumerate(L)]
        np.testing.assert_allclose(lower, kernel, rtol=1e-15, atol=0)


# ---------------------------------------------------------------------------------------
# the engines
# ---------------------------------------------------------------------------------------
def test_engine_argument_and_missing_numba(monkeypatch):
    codes = _codes(privirt.simulate_2pno(20, 3, seed=1)[0])
    with pytest.raises(ValueError, match="engine"):
        _engine(codes, engine="cuda")
    monkeypatch.setattr(twopno_fused, "numba_available", lambda: False)
    assert _engine(codes, engine="auto").engine == "numpy"
    with pytest.raises(ImportError, match=r"privirt\[fast\]"):
        _engine(codes, engine="numba")


def test_numpy_fallback_runs_a_chain_with_missing_data():
    """The fallback (engine="numpy", what runs without numba): one iteration keeps the signs
    of Z and skips missing cells, and a short run recovers the simulated parameters."""
    X, theta, a, b = privirt.simulate_2pno(400, 6, seed=4, p_observed=0.8)
    codes = _codes(X)
    eng = _engine(codes, n_chains=2, engine="numpy", keep_z=True)
    for _ in range(3):
        eng.step()
        Z = eng.Z
        assert np.all(Z[:, codes == 1] > 0) and np.all(Z[:, codes == 0] < 0)
        assert np.all(Z[:, codes < 0] == 0)
        assert np.all(eng.a > 0) and np.all(np.isfinite(eng.theta))
    draws = twopno_fused.run_chain(
        codes, n_iter=400, warmup=150, n_chains=1, engine="numpy",
        inits=[_default_init(codes, None, False)], seeds=[np.random.SeedSequence(3)],
    )
    assert draws["a"].shape == (1, 250, 6) and draws["theta"].shape == (1, 250, 400)
    assert np.corrcoef(draws["b"].mean(axis=(0, 1)), b)[0, 1] > 0.9
    assert np.corrcoef(draws["theta"].mean(axis=(0, 1)), theta)[0, 1] > 0.7


def _fork_child_uses_the_pool(queue) -> None:
    """Run in a forked child: the sweep's pool takes work (and, with numba on 2+ cores, the
    threaded numba sweep runs), else a TimeoutError ends the child with a non-zero code."""
    assert twopno_fused._pool().submit(int, "7").result(timeout=20) == 7
    if twopno_fused.numba_available() and (os.cpu_count() or 1) > 1:
        X = privirt.simulate_rasch(300, 60, seed=11)[0]  # 18 000 cells: the pool is used
        eng = _engine(_codes(X), engine="numba")
        assert eng._ranges is not None
        eng.step()
    queue.put("done")


def test_forked_child_after_the_parent_used_the_sweep_pool_does_not_hang():
    """The pool is cached per process; a 'fork' child inherited it without its threads, and
    as its idle count said workers were waiting, none started: the child waited forever."""
    import multiprocessing

    assert twopno_fused._pool().submit(int, "3").result(timeout=20) == 3  # the parent uses it
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_fork_child_uses_the_pool, args=(queue,))
    child.start()
    child.join(60)
    if child.is_alive():  # pragma: no cover - the regression: kill it rather than hang
        child.kill()
        child.join()
        pytest.fail("the forked child hung in the sweep's thread pool")
    assert child.exitcode == 0 and queue.get(timeout=5) == "done"


@needs_numba
@pytest.mark.parametrize("priors", [None, {"a": (1.0, 0.5), "b": (0.2, 2.0)}])
def test_numba_kernel_equals_the_numpy_fallback(priors):
    """Same random numbers, same arithmetic up to rounding (AS 241 vs scipy's Φ⁻¹ and the
    order of the sums): two data sets × two chains with missing cells agree to 1e-9 after 15
    iterations, Z included, and the draws stored at a slot are the state."""
    data = [privirt.simulate_2pno(150, 7, seed=s, p_observed=0.85)[0] for s in (5, 6)]
    codes = np.stack([_codes(x) for x in data])
    fast = _engine(codes, n_chains=2, priors=priors, engine="numba", keep_z=True)
    slow = _engine(codes, n_chains=2, priors=priors, engine="numpy", keep_z=True)
    store = {p: np.zeros((4, 3, s)) for p, s in (("theta", 150), ("a", 7), ("b", 7))}
    for it in range(15):
        fast.step(store, 1) if it == 14 else fast.step()
        slow.step()
        np.testing.assert_allclose(fast.Z, slow.Z, atol=1e-9)
    for p in ("theta", "a", "b"):
        np.testing.assert_allclose(getattr(fast, p), getattr(slow, p), atol=1e-9, rtol=1e-9)
        np.testing.assert_array_equal(store[p][:, 1], getattr(fast, p))
        assert not store[p][:, 0].any() and not store[p][:, 2].any()


@needs_numba
@pytest.mark.parametrize("threads", [1, None])
def test_numba_kernel_equals_the_numpy_fallback_with_free_slopes_and_anchors(monkeypatch,
                                                                             threads):
    """slopes="free" and anchors (θ > 0, θ < 0, θ fixed): the numba kernel (serial and
    threaded sweep) and the numpy fallback draw the same chain from the same counters, the
    anchors hold and the slopes take both signs."""
    monkeypatch.setattr(twopno_fused, "PARALLEL_CELLS", 0)
    monkeypatch.setattr(twopno_fused.os, "cpu_count", lambda: 3)
    X = privirt.simulate_2pno(150, 7, seed=8, p_observed=0.85)[0]
    X[:, ::2] = 1 - X[:, ::2]  # reversed items: negative slopes
    codes = _codes(X)
    anc = slopes.check_anchors({0: "+", 1: "-", 2: 0.5, 3: -1.0}, pd.RangeIndex(150))
    kw = dict(n_chains=2, priors={"b": (0.0, 4.0)}, free=True, anchors=anc, threads=threads)
    fast = _engine(codes, engine="numba", **kw)
    slow = _engine(codes, engine="numpy", **kw)
    for it in range(15):
        fast.step()
        slow.step()
    for p in ("theta", "a", "b"):
        np.testing.assert_allclose(getattr(fast, p), getattr(slow, p), atol=1e-9, rtol=1e-9)
    th = fast.theta
    assert np.all(th[:, 0] > 0) and np.all(th[:, 1] < 0)
    assert np.all(th[:, 2] == 0.5) and np.all(th[:, 3] == -1.0)
    assert (fast.a < 0).any() and (fast.a > 0).any()


@needs_numba
def test_numba_draws_do_not_depend_on_the_thread_count(monkeypatch):
    monkeypatch.setattr(twopno_fused, "PARALLEL_CELLS", 0)  # the threaded sweep, even this small
    monkeypatch.setattr(twopno_fused.os, "cpu_count", lambda: 3)  # three block ranges
    codes = _codes(privirt.simulate_2pno(300, 5, seed=7)[0])
    runs = []
    for threads in (1, None):
        eng = _engine(codes, n_chains=2, engine="numba", threads=threads)
        assert (eng._ranges is None) == (threads == 1)
        store = {p: np.zeros((2, 2, s)) for p, s in (("theta", 300), ("a", 5), ("b", 5))}
        for it in range(5):
            eng.step(store, it - 3) if it >= 3 else eng.step()
        runs.append((eng.theta.copy(), eng.a.copy(), eng.b.copy(), *store.values()))
    assert len(eng._ranges) == 3
    for x, y in zip(*runs):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("engine", ["numpy", pytest.param("numba", marks=needs_numba)])
def test_latent_z_in_the_body_and_the_far_tail_is_truncated_normal(engine):
    """First-iteration Z over 1200 chains with the same state: a cell whose bound is 10 sd
    from the mean (Robert's rejection sampler) and one near the mean (inverse CDF), by
    Kolmogorov–Smirnov against scipy's truncated normal."""
    codes = np.array([[0, 1], [1, 0]], dtype=np.int8)
    B = 1200
    keys = twopno_fused.philox_keys(np.random.SeedSequence(9).spawn(B))
    eng = twopno_fused.FusedGibbs(
        codes, n_chains=B, priors={"a": (1.0, 1.0), "b": (0.0, 1.0)},
        theta=np.tile([10.0, 0.3], (B, 1)), a=np.ones((B, 2)), b=np.zeros((B, 2)),
        keys=keys, engine=engine, keep_z=True,
    )
    eng.step()
    far = eng.Z[:, 0, 0]  # N(10, 1) truncated to Z < 0
    body = eng.Z[:, 1, 0]  # N(0.3, 1) truncated to Z > 0
    assert np.all(far < 0) and np.all(body > 0)
    assert stats.kstest(far, stats.truncnorm(-np.inf, -10.0, loc=10.0).cdf).pvalue > 1e-3
    assert stats.kstest(body, stats.truncnorm(-0.3, np.inf, loc=0.3).cdf).pvalue > 1e-3


# ---------------------------------------------------------------------------------------
# the posterior
# ---------------------------------------------------------------------------------------
@needs_numba
def test_fused_chain_matches_the_exact_posterior_of_a_tiny_problem():
    """The whole chain (Z, θ, (a, b); proper priors on a and b; a missing cell) against the
    exact moments of a 4 × 2 problem by importance sampling."""
    Y, priors, exact = tiny_2pno_problem()
    codes = _codes(Y)
    C = 40
    ss = np.random.SeedSequence(7)
    inits = [_default_init(codes, np.random.default_rng(c), True) for c in range(C)]
    draws = twopno_fused.run_chain(
        codes, n_iter=3000, warmup=500, n_chains=C, priors=priors, inits=inits,
        seeds=[_child(ss, c, 1) for c in range(C)], engine="numba",
    )
    labels = {"theta": pd.RangeIndex(4), "a": pd.RangeIndex(2), "b": pd.RangeIndex(2)}
    assert_moments_match(Posterior(draws=draws, labels=labels), exact)


@needs_numba
def test_fused_chain_agrees_with_the_current_sampler():
    """Posterior means and sds of a, b and θ from the fused kernel and from
    privirt.gibbs_2pno's numpy engine on a 300 × 8 problem with missing cells."""
    X, *_ = privirt.simulate_2pno(300, 8, seed=12, p_observed=0.9)
    priors = {"a": (1.0, 1.0), "b": None}
    ref = privirt.gibbs_2pno(X, n_iter=2500, warmup=500, n_chains=3, seed=3, progress=False,
                             device="cpu", priors=priors, engine="numpy")
    codes = privirt.as_responses(X).codes
    ss = np.random.SeedSequence(21)
    inits = [_default_init(codes, np.random.default_rng(c), True) for c in range(3)]
    draws = twopno_fused.run_chain(codes, n_iter=2500, warmup=500, n_chains=3, priors=priors,
                                 inits=inits, seeds=[_child(ss, c, 1) for c in range(3)],
                                 engine="numba")
    for p in ("a", "b", "theta"):
        ours, theirs = draws[p], ref.get_draws(p)
        se = np.sqrt(mcse_batch_means(ours) ** 2 + mcse_batch_means(theirs) ** 2)
        z = (ours.mean(axis=(0, 1)) - theirs.mean(axis=(0, 1))) / se
        assert np.all(np.abs(z) < 4.5), (p, np.abs(z).max())
        ratio = ours.reshape(-1, ours.shape[2]).std(axis=0) / theirs.reshape(
            -1, ours.shape[2]).std(axis=0)
        assert abs(np.median(ratio) - 1) < 0.1 and np.all((ratio > 0.7) & (ratio < 1.4)), p


@needs_numba
@pytest.mark.slow
def test_benchmark_peer_samples_the_same_posterior():
    """benchmarks/bench_gibbs.py's peer (vectorised numpy, rejection for a ≤ 0) against the
    fused kernel on complete data under the default flat priors."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_gibbs.py"
    spec = importlib.util.spec_from_file_location("bench_gibbs", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    X, *_ = privirt.simulate_2pno(800, 15, seed=8)  # enough items to pin θ, so a, b mix
    peer = bench.peer_gibbs(X.astype(np.int8), 3000, 500, seed=1)
    ours = bench.run_fused(X, 3000, 500, "numba", n_chains=2, seed=2)
    for p in ("a", "b", "theta"):
        se = np.sqrt(mcse_batch_means(peer[p][None]) ** 2 + mcse_batch_means(ours[p]) ** 2)
        z = (peer[p].mean(axis=0) - ours[p].mean(axis=(0, 1))) / se
        assert np.all(np.abs(z) < 4.5), (p, np.abs(z).max())


@pytest.mark.parametrize("engine", ["numpy", "fused"])
def test_a_named_cpu_engine_runs_on_the_cpu_where_a_gpu_is_visible(monkeypatch, engine):
    """engine="numpy"/"fused" with the default device="auto" was refused on a GPU machine
    ("selects a CPU engine; pass device='cpu'") while the same call ran on a machine without
    one; "auto" with a CPU engine named is the CPU.  device="gpu" with it is still refused."""
    from privirt.bayes import gibbs as gibbs_mod

    if engine == "fused" and not twopno_fused.numba_available():
        pytest.skip("the fused engine needs numba")
    monkeypatch.setattr(gibbs_mod, "resolve_device", lambda d: "cpu" if d == "cpu" else "gpu")
    X = privirt.simulate_2pno(40, 4, seed=5)[0]
    post = privirt.gibbs_2pno(X, n_iter=20, warmup=10, seed=6, progress=False, engine=engine)
    assert post.info["engine"] == engine and post.info["device"] == "cpu"
    reps = privirt.gibbs_2pno_replicate([X, X], n_iter=20, warmup=10, seed=6, progress=False,
                                        engine=engine)
    assert reps[0].info["engine"] == engine
    with pytest.raises(ValueError, match="selects a CPU engine"):
        privirt.gibbs_2pno(X, n_iter=20, warmup=10, progress=False, engine=engine, device="gpu")
