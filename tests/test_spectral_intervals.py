"""Bootstrap intervals of Algorithm 2 (privirt.private.counts.intervals): labels, post-processing,
seeds, validation, the batched estimator and coverage on small cases."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privirt
from privirt.private.counts import ability
from privirt.private.counts import intervals as iv
from privirt.private import sample_comparison_graph
from privirt.rasch.spectral import spectral_from_counts


def _data(n=600, m=6, seed=0, labels=True):
    X, _, beta = privirt.simulate_rasch(n, m, seed=seed)
    if labels:
        X = pd.DataFrame(np.asarray(X), columns=[f"q{j}" for j in range(m)])
    return X, np.asarray(beta) - np.mean(beta)


def test_intervals_are_present_and_labelled():
    X, _ = _data()
    res = privirt.private_spectral_estimate(X, epsilon=2.0, seed=3, n_boot=40)
    items = [f"q{j}" for j in range(6)]
    assert list(res.se.index) == items and list(res.ci.index) == items
    assert list(res.ci.columns) == ["lo", "hi"]
    assert (res.se > 0).all() and (res.ci["lo"] < res.ci["hi"]).all()
    frame = res.to_frame()
    assert list(frame.columns) == ["beta", "se", "lo", "hi"] and list(frame.index) == items
    assert res.info["n_boot"] == 40 and res.info["confidence"] == 0.95
    assert res.info["ability_sd"] > 0 and 0 < res.info["attenuation"] <= 2
    # the interval is centre ± z·se
    z = stats.norm.ppf(0.975)
    np.testing.assert_allclose((res.ci["hi"] - res.ci["lo"]).to_numpy(), 2 * z * res.se.to_numpy())


def test_laplace_and_sparse_graph_have_intervals_too():
    X, _ = _data(n=800, m=8)
    for kw in ({"mechanism": "laplace"}, {"p0": 0.5}):
        res = privirt.private_spectral_estimate(X, epsilon=3.0, seed=1, n_boot=30, **kw)
        assert np.isfinite(res.se).all() and (res.ci["lo"] < res.ci["hi"]).all()


def test_n_boot_zero_gives_nan_intervals_and_the_same_beta():
    X, _ = _data()
    a = privirt.private_spectral_estimate(X, epsilon=1.0, seed=7, n_boot=0)
    b = privirt.private_spectral_estimate(X, epsilon=1.0, seed=7, n_boot=30)
    assert a.se.isna().all() and a.ci.isna().all().all()
    pd.testing.assert_series_equal(a.beta, b.beta)  # the bootstrap never touches the estimate
    assert "attenuation" not in a.info


def test_bootstrap_is_post_processing_only(tmp_path):
    X, _ = _data()
    spent = {}
    for n_boot in (0, 40):
        led = privirt.Ledger(tmp_path / f"{n_boot}.ledger", epsilon=3.0, delta=1e-4)
        res = privirt.private_spectral_estimate(X, epsilon=1.0, ledger=led, n_boot=n_boot)
        rows = led.spends()
        assert len(rows) == 1 and res.privacy.ledger_spend_id == 1
        spent[n_boot] = (led.spent().epsilon, led.spent().delta, rows["mechanism"].tolist())
        assert res.privacy.private
    assert spent[0] == spent[40]
    # from a release: no ledger involved, the release's statement is carried as is
    led = privirt.Ledger(tmp_path / "r.ledger", epsilon=3.0, delta=1e-4)
    rel = privirt.release_counts(X, epsilon=1.0, ledger=led)
    before = (tmp_path / "r.ledger").read_bytes()
    est = privirt.spectral_from_release(rel, n_boot=30)
    assert (tmp_path / "r.ledger").read_bytes() == before
    assert est.privacy is rel.privacy and est.counts is rel


def test_spectral_from_release_matches_the_one_call_path():
    """The release's seed given to spectral_from_release reproduces the one-call result (the
    bootstrap drew from the seed itself there and from its "estimate" stream in the one call)."""
    X, _ = _data()
    for seed in (11, np.random.SeedSequence(11)):
        one = privirt.private_spectral_estimate(X, epsilon=1.0, seed=seed, n_boot=30)
        rel = privirt.release_counts(X, epsilon=1.0, seed=seed)
        two = privirt.spectral_from_release(rel, n_boot=30, seed=seed)
        pd.testing.assert_frame_equal(one.counts.Y, rel.Y)
        pd.testing.assert_frame_equal(one.to_frame(), two.to_frame())
        assert one.info["bootstrap_seed"] == two.info["bootstrap_seed"]


def test_seed_reproduces_the_intervals_and_a_new_seed_changes_them():
    X, _ = _data()
    a = privirt.private_spectral_estimate(X, epsilon=1.0, seed=5, n_boot=30)
    b = privirt.private_spectral_estimate(X, epsilon=1.0, seed=5, n_boot=30)
    pd.testing.assert_frame_equal(a.to_frame(), b.to_frame())
    rel = a.counts
    c1 = privirt.spectral_from_release(rel, n_boot=30, seed=1)
    c2 = privirt.spectral_from_release(rel, n_boot=30, seed=1)
    c3 = privirt.spectral_from_release(rel, n_boot=30, seed=2)
    pd.testing.assert_frame_equal(c1.ci, c2.ci)
    assert not np.allclose(c1.se, c3.se)
    # without a seed the bootstrap draws fresh randomness
    d1 = privirt.spectral_from_release(rel, n_boot=30)
    d2 = privirt.spectral_from_release(rel, n_boot=30)
    assert not np.allclose(d1.se, d2.se)


def test_confidence_scales_the_same_replicates():
    X, _ = _data()
    rel = privirt.release_counts(X, epsilon=1.0, seed=2)
    a = privirt.spectral_from_release(rel, n_boot=30, seed=4, confidence=0.95)
    b = privirt.spectral_from_release(rel, n_boot=30, seed=4, confidence=0.8)
    np.testing.assert_allclose(a.se, b.se)
    ratio = (b.ci["hi"] - b.ci["lo"]) / (a.ci["hi"] - a.ci["lo"])
    np.testing.assert_allclose(ratio, stats.norm.ppf(0.9) / stats.norm.ppf(0.975))


@pytest.mark.parametrize("bad", [5, 19, -1, True, 2.5, "200"])
def test_bad_n_boot_is_refused_before_anything_is_spent(tmp_path, bad):
    X, _ = _data(n=50, m=4)
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=3.0, delta=1e-4)
    before = (tmp_path / "l.ledger").read_bytes()
    with pytest.raises(ValueError, match=r"n_boot must be 0 \(no intervals\) or an integer >= 20"):
        privirt.private_spectral_estimate(X, epsilon=1.0, ledger=led, n_boot=bad)
    assert (tmp_path / "l.ledger").read_bytes() == before
    rel = privirt.release_counts(X, epsilon=1.0, seed=0)
    with pytest.raises(ValueError, match="n_boot must be"):
        privirt.spectral_from_release(rel, n_boot=bad)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, True, "0.95", float("nan")])
def test_bad_confidence_is_refused(bad):
    X, _ = _data(n=50, m=4)
    with pytest.raises(ValueError, match=r"confidence must be a number in \(0, 1\)"):
        privirt.private_spectral_estimate(X, epsilon=1.0, seed=0, confidence=bad)


def test_randomized_response_refuses_intervals_before_spending(tmp_path):
    X, _ = _data(n=50, m=4)
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=30.0, delta=1e-4)
    before = (tmp_path / "l.ledger").read_bytes()
    with pytest.raises(ValueError, match="randomized response has no bootstrap intervals"):
        privirt.private_spectral_estimate(X, epsilon=8.0, mechanism="randomized_response",
                                          ledger=led, n_boot=200)
    assert (tmp_path / "l.ledger").read_bytes() == before
    rr = privirt.private_spectral_estimate(X, epsilon=8.0, mechanism="randomized_response", seed=0)
    assert rr.se is None and rr.ci is None and "se" not in rr.to_frame().columns


def test_spectral_from_release_refuses_other_inputs():
    with pytest.raises(ValueError, match="counts must be a NoisyCounts"):
        privirt.spectral_from_release(np.zeros((3, 3)))


@pytest.mark.parametrize("estimator", ["spectral", "noise_aware"])
def test_a_release_is_read_by_item_label_not_by_position(estimator):
    from privirt.private import NoisyCounts

    X, _ = _data(n=2000, m=8, seed=3_800_050)
    rel = privirt.release_counts(X, epsilon=20.0, p0=0.6, seed=3_800_051)
    ref = privirt.spectral_from_release(rel, n_boot=0, estimator=estimator).beta
    rev = list(rel.items[::-1])
    for Y, G in ((rel.Y.loc[:, rev], rel.graph), (rel.Y, rel.graph.loc[rev, rev]),
                 (rel.Y, rel.graph.loc[rev, :])):
        got = privirt.spectral_from_release(NoisyCounts(Y, G, rel.privacy), n_boot=0, estimator=estimator)
        pd.testing.assert_series_equal(got.beta, ref)
        assert list(got.graph.index) == list(rel.items) and list(got.counts.Y.columns) == list(rel.items)
    got = privirt.noise_aware_estimate(NoisyCounts(rel.Y.loc[:, rev], rel.graph.loc[rev, rev], rel.privacy))
    pd.testing.assert_series_equal(got.beta, privirt.noise_aware_estimate(rel).beta)


def _bad_releases(rel):
    from privirt.private import NoisyCounts

    G = rel.graph.to_numpy()
    i, j = (int(t[0]) for t in np.nonzero(np.triu(G, 1)))
    asym, loop = rel.graph.copy(), rel.graph.copy()
    asym.iloc[j, i] = False
    loop.iloc[0, 0] = True
    other = rel.Y.rename(columns={rel.items[0]: "zz"})
    return [
        (NoisyCounts(rel.Y, asym, rel.privacy), r"^the release's graph must be symmetric; it pairs "),
        (NoisyCounts(rel.Y, loop, rel.privacy), r"^the release's graph has self-loops"),
        (NoisyCounts(other, rel.graph, rel.privacy), r"^the release's Y columns must carry the items of Y.index"),
        (NoisyCounts(rel.Y, rel.graph.iloc[:-1, :-1], rel.privacy), r"^the release's graph index must carry"),
    ]


@pytest.mark.parametrize("estimator", ["auto", "spectral", "noise_aware"])
def test_a_release_without_its_privacy_statement_is_refused_in_one_line(estimator):
    import dataclasses

    X, _ = _data(n=300, m=5)
    rel = privirt.release_counts(X, epsilon=1.0, seed=3_800_054)
    for privacy in (None, rel.privacy.to_dict()):
        bad = dataclasses.replace(rel, privacy=privacy)
        with pytest.raises(ValueError, match=r"^the release's privacy must be a PrivacyStatement .*; pass the "
                                             r"NoisyCounts as release_counts made it$") as e:
            privirt.spectral_from_release(bad, n_boot=0, estimator=estimator)
        assert "\n" not in str(e.value)
    assert privirt.spectral_from_release(rel, n_boot=0, estimator=estimator).privacy is rel.privacy


@pytest.mark.parametrize("estimator", ["auto", "spectral", "noise_aware"])
def test_a_malformed_release_is_refused_in_one_line_by_every_estimator(estimator):
    X, _ = _data(n=600, m=6)
    rel = privirt.release_counts(X, epsilon=2.0, p0=0.7, seed=3_800_052)
    for bad, msg in _bad_releases(rel):
        with pytest.raises(ValueError, match=msg) as e:
            privirt.spectral_from_release(bad, n_boot=0, estimator=estimator)
        assert "\n" not in str(e.value)
        with pytest.raises(ValueError, match=msg):
            privirt.noise_aware_estimate(bad)


def test_a_tampered_release_from_the_service_json_is_refused():
    import json

    from privirt.client import result_from_json
    from privirt.serve.service import _body

    X, _ = _data(n=600, m=6)
    rel = privirt.release_counts(X, epsilon=2.0, p0=0.7, seed=3_800_053)
    body = json.loads(json.dumps(_body("r-1", "ds", "release_counts", {}, rel)))
    assert result_from_json(body).graph.equals(rel.graph)
    G = np.asarray(body["result"]["graph"])
    i, j = (int(t[0]) for t in np.nonzero(np.triu(G, 1)))
    body["result"]["graph"][j][i] = False
    with pytest.raises(ValueError, match=r"^the release's graph must be symmetric"):
        result_from_json(body)
    body["result"]["graph"][j][i] = True
    body["privacy"]["n_persons"] = 0
    with pytest.raises(ValueError, match=r"^the release's number of persons \(privacy.n_persons\) must"):
        result_from_json(body)


@pytest.mark.parametrize("estimator", ["auto", "noise_aware", "spectral"])
@pytest.mark.parametrize("bad", ["cuda", None, 7])
def test_spectral_from_release_checks_device_whichever_estimator_runs(estimator, bad):
    X, _ = _data(n=300, m=5)
    rel = privirt.release_counts(X, epsilon=1.0, seed=3_800_040)
    assert privirt.spectral_from_release(rel, n_boot=0).info["estimator"] == "noise_aware"  # auto's pick
    with pytest.raises(ValueError, match=r"^device must be one of \('auto', 'cpu', 'gpu'\), got "):
        privirt.spectral_from_release(rel, device=bad, estimator=estimator, n_boot=0)


@pytest.mark.parametrize("p0", [1.0, 0.4])
def test_batched_estimator_is_the_spectral_estimator(p0):
    rng = np.random.default_rng(0)
    G = sample_comparison_graph(12, p0, seed=3)
    Y = np.clip(rng.normal(200, 150, (4, 12, 12)), 0, None)
    ref = np.stack([spectral_from_counts(y, graph=G).beta.to_numpy() for y in Y])
    np.testing.assert_allclose(iv.spectral_batch(Y, G), ref, atol=1e-10)


def test_ability_fit_recovers_mean_and_spread_from_exact_counts():
    from privirt.stats.counts import differential_counts
    from privirt.data.responses import as_responses

    X, theta, beta = privirt.simulate_rasch(20_000, 10, seed=4)
    b = np.asarray(beta) - np.mean(beta)
    Y = differential_counts(as_responses(X), device="cpu")
    mu, tau = ability.fit_ability_normal(Y, ~np.eye(10, dtype=bool), b, 20_000)
    assert abs(mu - (np.mean(theta) - np.mean(beta))) < 0.05
    assert abs(tau - np.std(theta)) < 0.05


def test_noise_draws_have_the_released_law():
    rng = np.random.default_rng(1)
    g = iv._noise(rng, "sigma", 4.0, (200_000,))
    assert np.all(g == np.rint(g)) and abs(g.std() - 4.0) < 0.05
    lap = iv._noise(rng, "scale", 3.0, (200_000,))
    # discrete Laplace: P(k) ∝ exp(−|k|/b), variance 2 e^{-1/b} / (1 − e^{-1/b})²
    e = np.exp(-1 / 3.0)
    assert np.all(lap == np.rint(lap)) and abs(lap.var() / (2 * e / (1 - e) ** 2) - 1) < 0.03
    assert abs(np.mean(lap == 0) - (1 - e) / (1 + e)) < 0.005


def test_many_persons_are_simulated_in_part_and_rescaled(monkeypatch):
    X, _ = _data(n=2400, m=6, labels=False)
    rel = privirt.release_counts(X, epsilon=2.0, seed=0)
    full = privirt.spectral_from_release(rel, n_boot=200, seed=1)
    monkeypatch.setattr(iv, "MAX_SIMULATED_PERSONS", 600)
    part = privirt.spectral_from_release(rel, n_boot=200, seed=1)
    assert full.info["simulated_persons"] == 2400 and part.info["simulated_persons"] == 600
    np.testing.assert_allclose(part.se, full.se, rtol=0.25)


def test_sweep_registry_runs_without_the_bootstrap():
    from privirt.sweeps.registry import get

    for name in ("gaussian", "gaussian_sparse", "gaussian_paper", "laplace"):
        assert get(name).fixed["n_boot"] == 0
    X, _ = _data(n=300, m=5)
    res = get("gaussian")(X, epsilon=1.0, delta=1e-4, seed=0, device="cpu")
    assert res.se.isna().all()


@pytest.mark.slow
@pytest.mark.parametrize("mechanism,eps", [("gaussian", 2.0), ("laplace", 4.0)])
def test_small_case_coverage(mechanism, eps):
    # 25 data sets × 6 items: the nominal 95 % intervals cover between 85 % and 99.5 %
    hits = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for d in range(25):
            X, truth = _data(n=500, m=6, seed=100 + d, labels=False)
            res = privirt.private_spectral_estimate(X, epsilon=eps, mechanism=mechanism, seed=d,
                                                    n_boot=60)
            hits.append((res.ci["lo"].to_numpy() <= truth) & (truth <= res.ci["hi"].to_numpy()))
    cover = np.mean(hits)
    assert 0.85 <= cover <= 0.995, cover


def test_privacy_doc_says_what_each_estimator_does_and_what_auto_picks():
    """docs/privacy.md described the default post-processing as clipping + spectral λ = 1, while
    the default estimator="auto" may run the noise-aware fit on the unclipped counts."""
    from pathlib import Path

    from privirt.private.counts.api import NOISE_AWARE_BELOW

    doc = (Path(__file__).resolve().parents[1] / "docs" / "privacy.md").read_text(encoding="utf-8")
    start = doc.index("`private_spectral_estimate(...)` runs Algorithm 2")
    section = " ".join(doc[start:doc.index("For randomized response", start)].split())
    for phrase in ("by `estimator=`", '`"spectral"` (Algorithm 2 as published): clips the noisy counts at zero',
                   '`"noise_aware"`: fits the unclipped noisy counts', '`"auto"` (the default)',
                   f"`noise_aware_se0(n, m, ν)` is below `NOISE_AWARE_BELOW` = {NOISE_AWARE_BELOW:g}"):
        assert phrase in section, phrase
    X, _ = _data(n=2000, m=20, seed=3_800_080)
    res = privirt.private_spectral_estimate(X, epsilon=1.0, seed=3_800_081, n_boot=0)
    assert res.info["estimator"] == "noise_aware" and res.info["noise_aware_se0"] < NOISE_AWARE_BELOW
