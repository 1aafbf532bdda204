"""The samplers' common contract (privirt.bayes): one Schedule and thinning rule, the same
``info`` keys, ``warmup`` with ``burn_in`` as a deprecated alias, the seed contract and the
pointwise log-likelihood for ArviZ's LOO / WAIC."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special, stats

import privirt
from privirt.bayes import COMMON_INFO_KEYS, Schedule, pointwise_log_likelihood


@pytest.fixture(scope="module")
def small():
    X, *_ = privirt.simulate_2pno(40, 5, seed=1, p_observed=0.9)
    return X


def _gibbs(X, **kw):
    return privirt.gibbs_2pno(X, progress=False, device="cpu", **kw)


def _mh(X, **kw):
    return privirt.mh_2pl(X, progress=False, device="cpu", **kw)


SAMPLERS = {"gibbs": _gibbs, "mh": _mh}


# ---------------------------------------------------------------------------------------
# schedule and thinning
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_iter, warmup, thin, n_draws", [
    (10, 5, 1, 5), (105, 50, 10, 6), (100, 50, 50, 1), (101, 50, 25, 3), (7, 0, 3, 3),
])
def test_schedule_keeps_first_post_warmup_draw_then_every_thin(n_iter, warmup, thin, n_draws):
    s = Schedule(n_iter, warmup, thin)
    kept = [it for it in range(n_iter) if s.is_kept(it)]
    assert s.n_draws == n_draws == len(kept) == -(-(n_iter - warmup) // thin)
    assert kept == list(s.kept_iterations()) and kept[0] == warmup
    assert np.all(np.diff(kept) == thin)


@given(st.integers(1, 400), st.integers(0, 399), st.integers(1, 400))
def test_schedule_rule_holds_for_any_valid_schedule(n_iter, warmup, thin):
    if warmup >= n_iter or thin > n_iter - warmup:
        with pytest.raises(ValueError):
            Schedule(n_iter, warmup, thin)
        return
    s = Schedule(n_iter, warmup, thin)
    kept = np.flatnonzero([s.is_kept(it) for it in range(n_iter)])
    np.testing.assert_array_equal(kept, np.arange(warmup, n_iter, thin))
    assert s.n_draws == len(kept) >= 1 and kept[-1] <= n_iter - 1 < kept[-1] + thin


@pytest.mark.parametrize("args, message", [
    ((10, 10), r"warmup \(10\) must be smaller than n_iter"),
    ((10, -1), "warmup must be at least 0"),
    ((10, 5, 6), "thin=6 is larger than the 5 post-warmup"),
    ((10, 5, 0), "thin must be at least 1"),
    ((10, 5, 1, 0), "n_chains must be at least 1"),
    ((10.0, 5), "n_iter must be an integer"),
])
def test_schedule_refuses_bad_values(args, message):
    with pytest.raises(ValueError, match=message):
        Schedule(*args)


@pytest.mark.parametrize("name", ["gibbs", "mh"])
def test_one_thinning_rule_in_both_samplers(small, name):
    """Thinning selects iterations and changes nothing else: thin=3 keeps exactly
    iterations warmup, warmup + 3, … of the thin=1 chain."""
    run = SAMPLERS[name]
    full = run(small, n_iter=50, warmup=20, seed=3, n_chains=2)
    thinned = run(small, n_iter=50, warmup=20, thin=3, seed=3, n_chains=2)
    assert thinned.n_draws == 10 == Schedule(50, 20, 3).n_draws
    for p in ("a", "b", "theta"):
        np.testing.assert_array_equal(thinned.get_draws(p), full.get_draws(p)[:, ::3])


def test_info_keys_are_the_same_for_both_samplers(small):
    g = _gibbs(small, n_iter=30, warmup=10, thin=2, seed=1)
    m = _mh(small, n_iter=30, warmup=10, thin=2, seed=1)
    for post in (g, m):
        assert set(COMMON_INFO_KEYS) <= set(post.info)
        assert post.info["warmup"] == 10 and post.info["n_draws"] == 10 == post.n_draws
        assert post.info["seconds"] > 0 and post.info["device"] == "cpu"
    assert [g.info[k] for k in ("n_iter", "warmup", "thin", "n_chains", "n_draws", "seed",
                                "n_persons", "n_items", "observed_fraction")] == \
        [m.info[k] for k in ("n_iter", "warmup", "thin", "n_chains", "n_draws", "seed",
                             "n_persons", "n_items", "observed_fraction")]
    assert (g.info["sampler"], m.info["sampler"]) == ("gibbs_2pno", "mh_2pl")


@pytest.mark.parametrize("name, old", [("gibbs", "burn_in"), ("mh", "time_s")])
def test_old_info_keys_are_gone(small, name, old):
    """The 0.1 names (removed in 0.2, CHANGELOG.md) are not keys of ``info`` any more."""
    post = SAMPLERS[name](small, n_iter=20, warmup=10, seed=1)
    with pytest.raises(KeyError):
        post.info[old]


@pytest.mark.parametrize("name", ["gibbs", "mh"])
def test_burn_in_keyword_is_gone(small, name):
    """``burn_in=`` (removed in 0.2) is an unknown keyword: ``warmup=`` is the one spelling."""
    with pytest.raises(TypeError, match="burn_in"):
        SAMPLERS[name](small, n_iter=30, burn_in=12, seed=4)
    with pytest.raises(TypeError, match="burn_in"):
        privirt.gibbs_2pno_replicate([small, small], n_iter=20, burn_in=10, seed=1)


# ---------------------------------------------------------------------------------------
# seeds
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gibbs", "mh"])
def test_seed_contract(small, name):
    run = SAMPLERS[name]
    kw = dict(n_iter=20, warmup=10)
    by_int = run(small, seed=7, **kw)
    by_seq = run(small, seed=np.random.SeedSequence(7), **kw)
    np.testing.assert_array_equal(by_int.get_draws("a"), by_seq.get_draws("a"))
    assert by_int.info["seed"] == {"entropy": 7, "spawn_key": []}
    child = np.random.SeedSequence(7).spawn(2)[1]
    assert run(small, seed=child, **kw).info["seed"]["spawn_key"] == [1]
    unseeded = run(small, seed=None, **kw)
    assert isinstance(unseeded.info["seed"]["entropy"], int)
    for bad in (np.random.default_rng(1), -1, 1.5, "1", True):
        with pytest.raises(ValueError, match="seed must be"):
            run(small, seed=bad, **kw)


# ---------------------------------------------------------------------------------------
# pointwise log-likelihood, LOO and WAIC
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("model, logcdf", [("2pno", stats.norm.logcdf),
                                           ("2pl", lambda x: np.log(special.expit(x)))])
def test_pointwise_log_likelihood_against_a_direct_computation(model, logcdf):
    rng = np.random.default_rng(0)
    C, D, n, k = 2, 3, 6, 4
    codes = rng.integers(0, 2, (n, k)).astype(np.int8)
    codes[1, 2] = codes[4, 0] = -1
    draws = {"theta": rng.normal(size=(C, D, n)), "a": rng.uniform(0.3, 2, (C, D, k)),
             "b": rng.normal(size=(C, D, k))}
    cell = pointwise_log_likelihood(model, draws, codes)
    person = pointwise_log_likelihood(model, draws, codes, by="person")
    assert cell.shape == (C, D, n * k - 2) and person.shape == (C, D, n)
    for c in range(C):
        for d in range(D):
            terms, sums = [], np.zeros(n)
            for i in range(n):
                for j in range(k):
                    if codes[i, j] < 0:
                        continue
                    eta = draws["a"][c, d, j] * draws["theta"][c, d, i] - draws["b"][c, d, j]
                    t = logcdf(eta if codes[i, j] == 1 else -eta)
                    terms.append(t)
                    sums[i] += t
            np.testing.assert_allclose(cell[c, d], terms, rtol=1e-12)
            np.testing.assert_allclose(person[c, d], sums, rtol=1e-12)
    with pytest.raises(ValueError, match="model must be"):
        pointwise_log_likelihood("3pl", draws, codes)
    with pytest.raises(ValueError, match="by must be"):
        pointwise_log_likelihood(model, draws, codes, by="item")


@pytest.mark.parametrize("name", ["gibbs", "mh"])
def test_to_arviz_has_the_log_likelihood_and_loo_waic_run(small, name):
    az = pytest.importorskip("arviz")
    post = SAMPLERS[name](small, n_iter=80, warmup=30, n_chains=2, seed=2)
    idata = post.to_arviz()
    ll = idata.log_likelihood["y"]
    n_obs = int((privirt.as_responses(small).codes >= 0).sum())
    assert ll.shape == (2, 50, n_obs) and ll.dims == ("chain", "draw", "obs")
    assert str(ll.coords["obs"].values[0]) == "0|0"
    # log P(y) ≤ 0; exactly 0 where P rounds to 1 (a steep item far from the person)
    assert np.all(ll.values <= 0) and np.isfinite(ll.values).all() and np.mean(ll.values < 0) > 0.9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k notes on a short run
        loo = az.loo(idata)
        waic = az.waic(idata)
    assert np.isfinite(loo.elpd_loo) and np.isfinite(waic.elpd_waic)
    # the sum of the per-person terms equals the sum of the per-cell terms, draw by draw
    per_person = post.to_arviz(log_likelihood="person").log_likelihood["y"]
    assert per_person.shape == (2, 50, 40)
    np.testing.assert_allclose(per_person.values.sum(-1), ll.values.sum(-1), rtol=1e-10)
    assert "log_likelihood" not in post.to_arviz(log_likelihood=None).groups()
    with pytest.raises(ValueError, match="log_likelihood must be"):
        post.to_arviz(log_likelihood="item")


@given(st.lists(st.tuples(st.text("x|\\", max_size=4), st.text("x|\\", max_size=4)),
                min_size=2, max_size=2))
def test_obs_label_is_injective(cells):
    # labels made of "|" and backslashes: escaped, two different cells never share a label
    from privirt.bayes.posterior import obs_label

    (p1, i1), (p2, i2) = cells
    assert (obs_label(p1, i1) == obs_label(p2, i2)) == ((p1, i1) == (p2, i2))


def test_to_arviz_gives_every_observed_cell_its_own_obs_label(tmp_path):
    """Persons "x|y" and "x", items "qA" and "y|qA" were both joined to "x|y|qA": two cells
    under one ``obs`` label (``.sel`` returned both).  Now the labels are unique, the
    ``person`` and ``item`` coordinates along ``obs`` name each cell, and LOO, WAIC and a
    NetCDF round trip still work."""
    az = pytest.importorskip("arviz")
    import pandas as pd
    from privirt.bayes import posterior
    from privirt.bayes.posterior import Posterior

    persons = ["x|y", "x", "a\\", "a", "p4", "p5"]
    items = ["qA", "y|qA", "|b", "b"]
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 2, (6, 4)).astype(np.int8)
    codes[5, 1] = -1
    draws = {"theta": rng.normal(size=(2, 30, 6)), "a": rng.uniform(0.5, 2, (2, 30, 4)),
             "b": rng.normal(size=(2, 30, 4))}
    post = Posterior(draws=draws, labels={"theta": pd.Index(persons),
                                          "a": pd.Index(items), "b": pd.Index(items)},
                     sampler="gibbs_2pno", model="2pno", codes=codes)
    rows, cols = np.nonzero(codes >= 0)
    ll = post.to_arviz().log_likelihood["y"]
    obs = ll.coords["obs"].values
    assert len(obs) == len(set(obs)) == len(rows) == 23
    assert ll.coords["person"].values.tolist() == [persons[i] for i in rows]
    assert ll.coords["item"].values.tolist() == [items[j] for j in cols]
    cell = ll.sel(obs=posterior.obs_label("x|y", "qA"))
    assert cell.dims == ("chain", "draw")
    np.testing.assert_array_equal(cell.values, post.log_likelihood()[:, :, 0])
    assert ll.where(ll.person == "x", drop=True).sizes["obs"] == 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ArviZ's Pareto k notes on random draws
        idata = post.to_arviz()
        idata.to_netcdf(tmp_path / "post.nc")
        back = az.from_netcdf(tmp_path / "post.nc")
        assert back.log_likelihood["y"].coords["item"].values.tolist() == [items[j] for j in cols]
        assert np.isfinite(az.loo(back).elpd_loo) and np.isfinite(az.waic(idata).elpd_waic)
        other = Posterior(draws=dict(draws, a=np.ones((2, 30, 4))), labels=post.labels,
                          model="2pno", codes=codes).to_arviz()
        assert len(az.compare({"free": idata, "fixed": other})) == 2
    per_person = post.to_arviz(log_likelihood="person").log_likelihood["y"]
    assert per_person.coords["obs"].values.tolist() == persons


def test_to_arviz_falls_back_to_per_person_terms_for_huge_runs(small, monkeypatch):
    pytest.importorskip("arviz")
    from privirt.bayes import loglik

    post = _gibbs(small, n_iter=30, warmup=10, seed=2)
    monkeypatch.setattr(loglik, "MAX_CELL_TERMS", 100)
    with pytest.warns(UserWarning, match="one term per person"):
        idata = post.to_arviz()
    assert idata.log_likelihood["y"].shape == (1, 20, 40)
    assert post.to_arviz(log_likelihood="cell").log_likelihood["y"].shape[2] > 40


def _slopes_data(seed):
    """2PNO/2PL-style data whose items discriminate very differently (slopes 0.3 to 3)."""
    n, k = 200, 8
    rng = np.random.default_rng(seed)
    a = np.tile([0.3, 3.0], k // 2)
    b = rng.normal(0.0, 0.5, k)
    theta = rng.normal(size=n)
    return theta, a, b, rng


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gibbs", "mh"])
def test_loo_prefers_free_slopes_on_data_with_unequal_slopes(name):
    """Data from a model whose slopes differ (0.3 vs 3): the sampler with free slopes beats
    the same sampler with every slope pinned at 1 (a prior of variance 1e-6), by more than
    four standard errors of the leave-one-person-out difference."""
    az = pytest.importorskip("arviz")
    theta, a, b, rng = _slopes_data(5)
    eta = theta[:, None] * a - b
    p = special.ndtr(eta) if name == "gibbs" else special.expit(1.7 * eta)
    X = (rng.random(p.shape) < p).astype(float)
    if name == "gibbs":
        kw = dict(n_iter=400, warmup=150, n_chains=2, seed=1)
        free = _gibbs(X, **kw)
        fixed = _gibbs(X, priors={"a": (1.0, 1e-6)}, **kw)
    else:
        kw = dict(n_iter=1200, warmup=400, n_chains=2, seed=1, thin=2)
        free = _mh(X, **kw)
        fixed = _mh(X, priors={"a": (1.0, 1e-6)}, **kw)
    np.testing.assert_allclose(fixed.get_draws("a"), 1.0, atol=0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        table = az.compare({"free": free.to_arviz(log_likelihood="person"),
                            "fixed": fixed.to_arviz(log_likelihood="person")})
    assert table.index[0] == "free"
    assert table.loc["fixed", "elpd_diff"] > 4 * table.loc["fixed", "dse"]
