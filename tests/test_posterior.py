"""Posterior summaries and MCMC diagnostics against closed forms."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from privirt.bayes import diagnostics
from privirt.bayes.posterior import SUMMARY_COLUMNS, Posterior, StreamingSummary


def ar1(rng, n_chains, n, k, phi):
    d = np.zeros((n_chains, n, k))
    d[:, 0] = rng.normal(size=(n_chains, k)) / np.sqrt(1 - phi**2)
    for t in range(1, n):
        d[:, t] = phi * d[:, t - 1] + rng.normal(size=(n_chains, k))
    return d


def test_ess_matches_ar1_closed_form(rng):
    phi, n, c = 0.8, 5000, 4
    d = ar1(rng, c, n, 5, phi)
    ess = diagnostics.ess_bulk(d)
    theory = c * n * (1 - phi) / (1 + phi)
    assert np.all(np.abs(ess / theory - 1) < 0.2), (ess, theory)


def test_ess_of_independent_draws_is_near_total(rng):
    d = rng.normal(size=(2, 4000, 3))
    ess = diagnostics.ess_bulk(d)
    assert np.all(ess > 0.8 * 8000) and np.all(ess < 1.2 * 8000)


def test_mcse_batch_means_matches_theory(rng):
    phi, n, c = 0.5, 20000, 2
    d = ar1(rng, c, n, 4, phi)
    mcse = diagnostics.mcse_batch_means(d)
    # Var of the mean of an AR(1): sigma^2/(1-phi)^2 / N with innovation variance 1
    theory = np.sqrt(1.0 / (1 - phi) ** 2 / (c * n))
    assert np.all(np.abs(mcse / theory - 1) < 0.35), (mcse, theory)


@pytest.mark.parametrize("phi, shape", [(0.9, (3, 33, 4)), (0.5, (3, 33, 4)),
                                         (-0.5, (2, 100, 4)), (0.0, (1, 50, 4)),
                                         (0.99, (2, 100, 3)), (0.6, (4, 400, 3))])
def test_rhat_and_bulk_ess_match_arviz(rng, phi, shape):
    # the module promises the ArviZ/Stan definitions (rank-normalised split R-hat, bulk
    # ESS with Geyer's initial monotone sequence as Stan truncates and completes it)
    az = pytest.importorskip("arviz")
    c, n, k = shape
    d = ar1(rng, c, n, k, phi)
    ref_ess = np.array([az.ess(d[:, :, j], method="bulk") for j in range(k)], dtype=float)
    np.testing.assert_allclose(diagnostics.ess_bulk(d), ref_ess, rtol=1e-10)
    if c > 1:
        ref_rhat = np.array([az.rhat(d[:, :, j], method="rank") for j in range(k)], dtype=float)
        np.testing.assert_allclose(diagnostics.rhat(d), ref_rhat, rtol=1e-10)


def test_mcse_batch_count_is_validated(rng):
    # n_batches=0 or a negative count was silently turned into one batch (MCSE NaN)
    d = rng.normal(size=(1, 100, 2))
    assert np.all(np.isfinite(diagnostics.mcse_batch_means(d, n_batches=10)))
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="n_batches"):
            diagnostics.mcse_batch_means(d, n_batches=bad)


def test_non_finite_draws_have_no_rhat_or_ess(rng):
    """NaN sorts last, so ranks of draws with a NaN gave a finite R-hat (2.13 on all-NaN draws of a
    sampler); such a parameter now has NaN R-hat and ESS, the others are unchanged."""
    d = rng.normal(size=(2, 40, 3))
    clean = diagnostics.summarize(d)
    d[0, 5, 1] = np.nan
    d[:, :, 2] = np.nan
    out = diagnostics.summarize(d)
    assert np.isnan(out["rhat"][1:]).all() and np.isnan(out["ess"][1:]).all()
    assert out["rhat"][0] == clean["rhat"][0] and out["ess"][0] == clean["ess"][0]


def test_draws_that_never_change_have_no_rhat(rng):
    """A parameter whose draws never change (a stuck chain) has R-hat NaN, as in ArviZ and
    Stan, with kept draws and streamed; it was 1.0, which passed for converged."""
    d = np.concatenate([np.full((4, 500, 1), 0.7), rng.normal(size=(4, 500, 1))], axis=2)
    assert np.isnan(diagnostics.rhat(d)[0]) and diagnostics.rhat(d)[1] < 1.05
    labels = {"b": pd.Index(["stuck", "moving"])}
    acc = StreamingSummary(4, 2, 500)
    for t in range(500):
        acc.update(d[:, t])
    for post in (Posterior(draws={"b": d}, labels=labels),
                 Posterior(draws=None, streaming={"b": acc}, labels=labels)):
        s = post.summary("b")
        assert np.isnan(s.loc["stuck", "rhat"]) and s.loc["moving", "rhat"] < 1.05


@pytest.mark.parametrize("value", [1.5, 0.7, -1.3])
@pytest.mark.parametrize("c, n", [(1, 40), (3, 41), (7, 40)])
def test_draws_that_never_change_have_no_ess_kept_or_streamed(rng, value, c, n):
    """A constant parameter (a θ fixed by an anchor) had ESS = c·n with kept draws (ArviZ's
    convention) but NaN streamed, and, for values whose mean rounds (0.7 over 3 chains),
    R-hat inf, ESS 0 or 1.8 and sd, MCSE ~1e-16 streamed; now both modes give the
    statistics of a pooled variance of 0: ESS and R-hat NaN, sd and MCSE 0."""
    d = np.concatenate([np.full((c, n, 1), value), rng.normal(size=(c, n, 1))], axis=2)
    assert np.isnan(diagnostics.ess_bulk(d)[0]) and diagnostics.ess_bulk(d)[1] > 0
    labels = {"theta": pd.Index(["fixed", "moving"])}
    acc = StreamingSummary(c, 2, n)
    for t in range(n):
        acc.update(d[:, t])
    for post in (Posterior(draws={"theta": d}, labels=labels),
                 Posterior(draws=None, streaming={"theta": acc}, labels=labels)):
        s = post.summary("theta")
        fixed, moving = s.loc["fixed"], s.loc["moving"]
        assert np.isnan(fixed["ess"]) and np.isnan(fixed["rhat"]), fixed
        assert fixed["sd"] == 0 and fixed["mcse"] == 0, fixed
        # its mean is the value itself (7 copies of 0.7 summed: 0.7000000000000017 before)
        assert fixed["mean"] == value and fixed["q2.5"] == fixed["q50"] == fixed["q97.5"] == value, fixed
        assert moving["ess"] > 0 and moving["sd"] > 0
        assert np.isfinite(moving["rhat"]) == (c > 1 or post.draws is not None)


@pytest.mark.parametrize("keep_draws", [True, False])
def test_anchored_theta_has_no_ess_with_or_without_draws(keep_draws):
    """A θ fixed by a numeric anchor reported ESS = number of draws with kept draws and NaN
    streamed; both now say NaN, like its R-hat."""
    import privirt

    X, *_ = privirt.simulate_2pno(60, 5, seed=92100003)
    post = privirt.gibbs_2pno(X, n_iter=60, warmup=20, n_chains=2, seed=92100005,
                              progress=False, device="cpu", anchors={5: 0.7},
                              keep_draws=keep_draws)
    s = post.summary("theta")
    assert np.isnan(s.loc[5, "ess"]) and np.isnan(s.loc[5, "rhat"]) and s.loc[5, "sd"] == 0
    assert np.isfinite(s.drop(index=5)["ess"]).all()


def test_streamed_sd_of_one_draw_is_nan_as_with_kept_draws(rng):
    """One pooled draw (one chain, one draw): the sd (ddof 1) is undefined; the streaming
    summary said 0.0 where the kept-draws summary says NaN."""
    d = rng.normal(size=(1, 1, 3))
    labels = {"b": pd.Index(list("xyz"))}
    acc = StreamingSummary(1, 3, 1)
    acc.update(d[:, 0])
    kept = Posterior(draws={"b": d}, labels=labels).summary("b")
    stream = Posterior(draws=None, streaming={"b": acc}, labels=labels).summary("b")
    assert np.isnan(kept["sd"]).all() and np.isnan(stream["sd"]).all()
    np.testing.assert_array_equal(stream["mean"], kept["mean"])


def test_rhat_detects_disagreeing_chains(rng):
    good = rng.normal(size=(4, 1000, 2))
    bad = good.copy()
    bad[0] += 3.0
    assert np.all(diagnostics.rhat(good) < 1.01)
    assert np.all(diagnostics.rhat(bad) > 1.1)


def test_rhat_detects_different_scales(rng):
    d = rng.normal(size=(4, 2000, 1))
    d[0] *= 4.0  # same location, different spread: only the folded (tail) R-hat sees it
    assert diagnostics.rhat(d)[0] > 1.05


def test_posterior_summary_labels_and_columns(rng):
    draws = {"a": rng.normal(1.0, 0.1, size=(2, 500, 3)), "theta": rng.normal(size=(2, 500, 4))}
    labels = {"a": pd.Index(["q1", "q2", "q3"]), "theta": pd.Index(list("wxyz"))}
    post = Posterior(draws=draws, labels=labels, sampler="test")
    s = post.summary("a")
    assert list(s.columns) == SUMMARY_COLUMNS
    assert list(s.index) == ["q1", "q2", "q3"]
    assert np.allclose(s["mean"], 1.0, atol=0.02)
    assert np.all(s["q2.5"] < s["q50"]) and np.all(s["q50"] < s["q97.5"])
    full = post.summary()
    assert full.index.names == ["parameter", "label"]
    assert full.loc[("theta", "y"), "mean"] == pytest.approx(draws["theta"][:, :, 2].mean())
    frame = post.draws_frame("theta", chain=1)
    assert frame.shape == (500, 4) and list(frame.columns) == list("wxyz")


def test_posterior_rejects_bad_shapes_and_params(rng):
    with pytest.raises(ValueError, match="must be"):
        Posterior(draws={"a": rng.normal(size=(2, 10, 3))}, labels={"a": pd.Index([1, 2])})
    with pytest.raises(ValueError, match="no labels"):
        Posterior(draws={"a": rng.normal(size=(1, 10, 2))}, labels={})
    post = Posterior(draws={"a": rng.normal(size=(1, 10, 2))}, labels={"a": pd.Index([1, 2])})
    with pytest.raises(ValueError, match="unknown parameter"):
        post.summary("b")
    with pytest.raises(ValueError, match="acceptance"):
        post.acceptance_rates()


def test_draws_frame_rejects_a_chain_that_does_not_exist(rng):
    # chain=5 (or -1) of a 2-chain run returned an empty frame instead of an error
    post = Posterior(draws={"a": rng.normal(size=(2, 10, 2))}, labels={"a": pd.Index(["x", "y"])})
    assert post.draws_frame("a", chain=1).shape == (10, 2)
    for bad in (2, 5, -1, 1.5, True):
        with pytest.raises(ValueError, match="chain"):
            post.draws_frame("a", chain=bad)


def test_streaming_summary_agrees_with_full_draws(rng):
    d = ar1(rng, 3, 3000, 4, 0.6)
    labels = {"b": pd.Index(list("abcd"))}
    full = Posterior(draws={"b": d}, labels=labels).summary("b")
    acc = StreamingSummary(3, 4, 3000, max_kept=600)
    for t in range(3000):
        acc.update(d[:, t])
    stream = Posterior(draws=None, streaming={"b": acc}, labels=labels).summary("b")
    assert np.allclose(stream["mean"], full["mean"], atol=1e-12)
    assert np.allclose(stream["sd"], full["sd"], rtol=1e-3)
    assert np.allclose(stream["q50"], full["q50"], atol=0.1)
    assert np.allclose(stream["q97.5"], full["q97.5"], atol=0.25)
    assert np.allclose(stream["mcse"], full["mcse"], rtol=0.35)
    assert np.all(np.abs(stream["rhat"] - 1) < 0.02)
    with pytest.raises(RuntimeError):
        acc.update(d[:, 0])


@pytest.mark.parametrize("n", [3, 10, 100, 500, 2600])
def test_streaming_mcse_is_the_kept_draws_mcse(rng, n):
    # the same draws summarised with and without keeping them: the same batches, so the same
    # MCSE (a short run once got 50 batches of 2 draws streaming against ⌊√n⌋ kept: MCSE 2–6×
    # too small, ESS 10–25× too large)
    d = ar1(rng, 3, n, 4, 0.8)
    acc = StreamingSummary(3, 4, n)
    for t in range(n):
        acc.update(d[:, t])
    stream = acc.summary_arrays()
    assert np.allclose(stream["mcse"], diagnostics.mcse_batch_means(d), rtol=1e-10, atol=0)


def test_gibbs_summary_mcse_does_not_depend_on_keeping_draws():
    import privirt

    from privirt.data.simulate import simulate_2pno

    X = simulate_2pno(60, 6, seed=5_600_001)[0]
    kw = dict(n_chains=3, n_iter=300, warmup=200, seed=5_600_002, progress=False)
    kept = privirt.gibbs_2pno(X, keep_draws=True, **kw).summary("a")
    stream = privirt.gibbs_2pno(X, keep_draws=False, **kw).summary("a")
    assert np.allclose(stream["mean"], kept["mean"], atol=1e-12)
    assert np.allclose(stream["mcse"], kept["mcse"], rtol=1e-10)


def test_streaming_posterior_has_no_draws(rng):
    acc = StreamingSummary(1, 2, 10)
    for t in range(10):
        acc.update(rng.normal(size=(1, 2)))
    post = Posterior(draws=None, streaming={"a": acc}, labels={"a": pd.Index(["x", "y"])})
    assert post.n_draws == 10 and post.n_chains == 1
    with pytest.raises(ValueError, match="kept no draws"):
        post.get_draws("a")


def test_to_arviz_without_arviz_gives_the_install_hint(rng, monkeypatch):
    post = Posterior(draws={"a": rng.normal(size=(2, 50, 2))}, labels={"a": pd.Index(["x", "y"])})
    monkeypatch.setitem(sys.modules, "arviz", None)  # import arviz raises ImportError
    with pytest.raises(ImportError, match="privirt\\[arviz\\]"):
        post.to_arviz()


def test_to_arviz_roundtrip_keeps_draws_and_labels(rng):
    az = pytest.importorskip("arviz")
    d = rng.normal(size=(2, 50, 2))
    post = Posterior(draws={"a": d}, labels={"a": pd.Index(["x", "y"])})
    idata = post.to_arviz()
    assert isinstance(idata, az.InferenceData)
    np.testing.assert_array_equal(idata.posterior["a"].values, d)
    dim = [k for k in idata.posterior["a"].dims if k not in ("chain", "draw")][0]
    assert list(idata.posterior[dim].values) == ["x", "y"]


def test_streaming_select_chains_matches_a_separate_accumulator(rng):
    d = rng.normal(size=(4, 200, 3))
    acc = StreamingSummary(4, 3, 200)
    alone = StreamingSummary(2, 3, 200)
    for t in range(200):
        acc.update(d[:, t])
        alone.update(d[2:, t])
    part = acc.select_chains(slice(2, 4))
    assert part.n_chains == 2 and acc.n_chains == 4
    a, b = part.summary_arrays(), alone.summary_arrays()
    for key in ("mean", "sd", "mcse", "rhat", "q50"):
        np.testing.assert_allclose(a[key], b[key])
    assert acc.select_chains(slice(0, 4)) is acc
    assert acc.to_host() is acc and acc.xp is np


def test_streaming_posterior_pickles_and_deep_copies(rng):
    import copy
    import pickle

    acc = StreamingSummary(2, 2, 20)
    for t in range(20):
        acc.update(rng.normal(size=(2, 2)))
    post = Posterior(draws=None, streaming={"a": acc}, labels={"a": pd.Index(["x", "y"])})
    for back in (pickle.loads(pickle.dumps(post)), copy.deepcopy(post)):
        assert back.streaming["a"].xp is np
        pd.testing.assert_frame_equal(back.summary("a"), post.summary("a"))


def _replicate_posterior(seed):
    """A spawn-pool job (module level, so that it pickles): a streaming replicate posterior."""
    import privirt

    X, *_ = privirt.simulate_2pno(60, 4, seed=seed)
    return privirt.gibbs_2pno_replicate([X], n_iter=20, warmup=10, seed=seed, progress=False)[0]


def test_replicate_posterior_comes_back_from_a_spawn_pool():
    import concurrent.futures as cf
    import multiprocessing as mp

    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        post = pool.submit(_replicate_posterior, 3_800_001).result(timeout=300)
    assert post.draws is None and post.summary("b").shape[0] == 4


@pytest.mark.parametrize("shape, levels", [((4, 60, 5), 3), ((3, 41, 4), 7), ((2, 100, 3), 0)])
def test_batched_diagnostics_match_arviz_with_ties(rng, shape, levels):
    # discrete draws give many tied ranks (average ranks, as scipy's rankdata); odd draw
    # counts drop the middle draw when splitting; the folded R-hat always has the two middle
    # draws tied around the median
    az = pytest.importorskip("arviz")
    c, n, k = shape
    d = ar1(rng, c, n, k, 0.7)
    if levels:
        d = np.floor(d * levels / 3.0)
    ess = np.array([az.ess(d[:, :, j], method="bulk") for j in range(k)], dtype=float)
    rh = np.array([az.rhat(d[:, :, j], method="rank") for j in range(k)], dtype=float)
    got_rhat, got_ess = diagnostics.rhat_ess_bulk(d)
    np.testing.assert_allclose(got_ess, ess, rtol=1e-10)
    np.testing.assert_allclose(got_rhat, rh, rtol=1e-10)
    np.testing.assert_array_equal(diagnostics.ess_bulk(d), got_ess)
    np.testing.assert_array_equal(diagnostics.rhat(d), got_rhat)


@pytest.mark.parametrize("n", [2000, 1999, 1])
def test_summarize_matches_the_one_at_a_time_definitions(rng, n):
    # quantiles read off the sort used for the ranks (n even) equal numpy's; mean, sd and
    # MCSE are numpy's and the batch-means estimator
    d = ar1(rng, 3, n, 6, 0.5)
    d[:, :, 0] = np.round(d[:, :, 0])  # ties
    s = diagnostics.summarize(d, (0.025, 0.5, 0.975, 0.0, 1.0))
    flat = d.reshape(-1, 6)
    np.testing.assert_allclose(s["q"], np.quantile(flat, (0.025, 0.5, 0.975, 0.0, 1.0), axis=0),
                               rtol=1e-15, atol=1e-15)
    np.testing.assert_array_equal(s["mean"], flat.mean(axis=0))
    if n > 1:
        np.testing.assert_allclose(s["sd"], flat.std(axis=0, ddof=1), rtol=1e-14)
        np.testing.assert_array_equal(s["mcse"], diagnostics.mcse_batch_means(d))
        np.testing.assert_array_equal(s["ess"], diagnostics.ess_bulk(d))
        np.testing.assert_array_equal(s["rhat"], diagnostics.rhat(d))


def test_rank_normalize_gives_tied_values_their_average_rank():
    from scipy import special
    from scipy.stats import rankdata

    d = np.array([[3.0, 1.0, 3.0, 2.0, 3.0, 1.0]])[:, :, None]
    z = diagnostics.rank_normalize(d)[0, :, 0]
    r = rankdata(d.ravel())
    np.testing.assert_allclose(z, special.ndtri((r - 0.375) / 6.25), rtol=1e-15)


def _reference_rank_rhat(d: np.ndarray) -> np.ndarray:
    """Vehtari et al. (2021) rank-normalised split R-hat, one parameter at a time, with
    scipy's rankdata (the definition, written plainly)."""
    from scipy import special
    from scipy.stats import rankdata

    c, n, k = d.shape
    h = n // 2
    out = np.empty(k)
    for j in range(k):
        s = np.concatenate([d[:, :h, j], d[:, n - h:, j]])  # (2c, h)

        def basic(z):
            z = special.ndtri((rankdata(z).reshape(z.shape) - 0.375) / (z.size + 0.25))
            w = z.var(axis=1, ddof=1).mean()
            b = h * z.mean(axis=1).var(ddof=1)
            return np.sqrt(((h - 1) / h * w + b / h) / w)

        out[j] = max(basic(s), basic(np.abs(s - np.median(s))))
    return out


@pytest.mark.parametrize("levels", [0, 4])
def test_rank_rhat_matches_the_plain_definition(rng, levels):
    # the folded ranks come from merging the two sorted runs of |draw − median| in the bulk
    # order; the plain definition sorts the folded draws afresh
    d = ar1(rng, 4, 301, 9, 0.8) + np.linspace(0.0, 0.4, 4)[:, None, None]
    if levels:
        d = np.floor(d * levels)
    np.testing.assert_allclose(diagnostics.rhat(d), _reference_rank_rhat(d), rtol=1e-13)


def test_summarize_on_threads_gives_the_same_values(rng, monkeypatch):
    d = ar1(rng, 4, 400, 37, 0.6)
    d[:, :, ::3] = np.round(d[:, :, ::3], 1)  # ties
    monkeypatch.setattr(diagnostics, "_workers", lambda: 1)
    one = diagnostics.summarize(d)
    monkeypatch.setattr(diagnostics, "_workers", lambda: 3)
    monkeypatch.setattr(diagnostics, "PARALLEL_VALUES", 1)
    calls = []
    real = diagnostics._summarize
    monkeypatch.setattr(diagnostics, "_summarize", lambda a, q: calls.append(a.shape) or real(a, q))
    many = diagnostics.summarize(d)
    assert [s[2] for s in calls] == [12, 13, 12]
    assert one.keys() == many.keys()
    for key in one:
        np.testing.assert_array_equal(many[key], one[key])


@pytest.mark.parametrize("shape", [(4, 6), (2, 7), (1, 4), (3, 5)])
def test_bulk_ess_of_short_chains_is_arviz_floor(rng, shape):
    """Bulk ESS was NaN for 4–7 draws per chain (the check counted the split halves); ArviZ's
    rule tests the unsplit chains (>= 4 draws), and with halves of 2–4 draws the Geyer sum
    is empty, so the ESS is the cap N log10(N), N the draws in the split chains."""
    c, n = shape
    d = rng.normal(size=(c, n, 2))
    N = c * 2 * (n // 2)
    np.testing.assert_allclose(diagnostics.ess_bulk(d), N * np.log10(N), rtol=1e-12)
    np.testing.assert_allclose(diagnostics.rhat_ess_bulk(d)[1], N * np.log10(N), rtol=1e-12)


@pytest.mark.parametrize("n", range(2, 12))
@pytest.mark.parametrize("c", [1, 2, 4])
def test_short_chain_rhat_and_ess_match_arviz(rng, c, n):
    """ESS and R-hat are NaN exactly where ArviZ's are (fewer than 4 draws per chain; R-hat of
    one chain excepted, finite here as in Stan) and equal elsewhere."""
    az = pytest.importorskip("arviz", reason="arviz is not installed: no reference values")
    d = rng.normal(size=(c, n, 3))
    with np.errstate(all="ignore"):
        ref_ess = np.array([az.ess(d[:, :, j], method="bulk") for j in range(3)], dtype=float)
        ref_rhat = np.array([az.rhat(d[:, :, j], method="rank") for j in range(3)], dtype=float)
    np.testing.assert_allclose(diagnostics.ess_bulk(d), ref_ess, rtol=1e-10)
    if c > 1:
        np.testing.assert_allclose(diagnostics.rhat(d), ref_rhat, rtol=1e-10)
    else:
        assert np.isnan(diagnostics.rhat(d)).all() == (n < 4)


def test_streamed_summaries_take_a_draw_count_past_int64():
    # gibbs_2pno_replicate(n_iter=2**70) (and any streamed run) failed with numpy's "loop of
    # ufunc does not support argument 0 of type int which has no callable sqrt method"
    assert diagnostics.default_n_batches(2**70) == 50
    assert [diagnostics.default_n_batches(n) for n in (1, 3, 100, 2499, 2500, 10**6)] == [2, 2, 10, 49, 50, 50]
    summary = StreamingSummary(1, 3, 2**70)
    assert summary.n_batches == 50 and summary.batch_size == 2**70 // 50
