"""Private release and private spectral estimation: audit, accuracy, ledger, bad input."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privirt
from privirt.private.accounting import zcdp_to_approx_dp
from privirt.stats.api import pairwise_counts
from privirt.private import sample_comparison_graph
from privirt.private.rr import debiased_counts
from privirt.private.sensitivity import max_cut

mechanisms = pytest.importorskip("mechanisms")


def _rasch(n=300, m=6, seed=0, p_observed=1.0):
    X, _, beta = privirt.simulate_rasch(n, m, seed=seed, p_observed=p_observed)
    return X, beta


def _rmse(a, b) -> float:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    return float(np.sqrt(np.mean((a - a.mean() - (b - b.mean())) ** 2)))


# -- the release and its statement ---------------------------------------------------------
def test_release_counts_statement_and_shape():
    X, _ = _rasch()
    rel = privirt.release_counts(X, epsilon=1.0, delta=1e-5)
    m = X.shape[1]
    assert rel.Y.shape == (m, m) and rel.Y.to_numpy().dtype == np.int64
    assert np.all(np.diag(rel.Y.to_numpy()) == 0)
    p = rel.privacy
    assert isinstance(p, privirt.PrivacyStatement)
    assert p.mechanism == "discrete Gaussian" and p.relation == "replace one person's row"
    assert p.private is True and "NOT PRIVATE" not in str(p)
    assert p.sensitivity.l1 == 2 * 3 * 3 and p.sensitivity.bound == "tight"
    assert p.noise_parameter == "sigma" and p.rho == pytest.approx(18 / (2 * p.noise_value**2))
    assert p.epsilon <= 1.0 and p.delta == 1e-5 and p.n_edges == m * (m - 1) // 2 and p.p0 == 1.0
    assert zcdp_to_approx_dp(p.rho, 1e-5) <= 1.0
    assert "(1, 1e-05)" in str(p) or "(0.999" in str(p)


def test_laplace_release_is_pure():
    X, _ = _rasch()
    rel = privirt.release_counts(X, epsilon=0.5, mechanism="laplace")
    p = rel.privacy
    assert p.mechanism == "discrete Laplace" and p.rho is None and p.delta == 0.0
    assert p.noise_value == pytest.approx(p.sensitivity.l1 / 0.5, rel=1e-9)
    assert p.epsilon <= 0.5 and "pure" in str(p)
    assert any("δ is not used" in n for n in p.notes)


def test_seeded_runs_are_reproducible_and_not_private():
    X, _ = _rasch()
    a = privirt.release_counts(X, epsilon=1.0, seed=7)
    b = privirt.release_counts(X, epsilon=1.0, seed=7)
    assert a.Y.equals(b.Y)
    assert a.privacy.private is False and "NOT PRIVATE: seeded noise" in str(a.privacy)
    c = privirt.release_counts(X, epsilon=1.0)
    d = privirt.release_counts(X, epsilon=1.0)
    assert c.privacy.private and not c.Y.equals(d.Y)


def test_noise_is_actually_added_with_the_stated_scale():
    X, _ = _rasch(n=200, m=8)
    Y, _ = pairwise_counts(X, device="cpu")
    rel = privirt.release_counts(X, epsilon=2.0, seed=3)
    off = ~np.eye(8, dtype=bool)
    resid = (rel.Y.to_numpy() - Y)[off]
    sigma = rel.privacy.noise_value
    assert np.any(resid != 0)
    # 56 draws: the sample standard deviation is within a generous band of σ
    assert 0.6 * sigma < resid.std() < 1.4 * sigma


def test_sparse_graph_release():
    X, _ = _rasch(n=200, m=30)
    rel = privirt.release_counts(X, epsilon=1.0, p0="auto", seed=1)
    G = rel.graph.to_numpy()
    assert np.array_equal(G, G.T) and not G.diagonal().any()
    assert rel.privacy.p0 == pytest.approx(1.5 * math.log(30) / 30)
    assert rel.privacy.sensitivity.bound == "sparse-spectral"
    assert rel.privacy.n_edges == int(G.sum() // 2) < 30 * 29 // 2
    Yn = rel.Y.to_numpy()
    assert np.all(Yn[~G] == 0)  # cells outside the graph are not released
    assert len(rel.to_long()) == int(G.sum())
    # the graph is connected
    from scipy.sparse.csgraph import connected_components

    assert connected_components(G, directed=False)[0] == 1


def test_paper_sensitivity_adds_more_noise():
    X, _ = _rasch(m=8)
    tight = privirt.release_counts(X, epsilon=1.0, seed=0).privacy
    paper = privirt.release_counts(X, epsilon=1.0, seed=0, sensitivity="paper").privacy
    assert paper.sensitivity.l1 == 8 * 7 and tight.sensitivity.l1 == 32
    assert paper.noise_value == pytest.approx(tight.noise_value * math.sqrt(56 / 32), rel=1e-6)


# -- exact privacy audit -----------------------------------------------------------------------
def _dg_pmf(sigma: float):
    K = int(math.ceil(40 * sigma)) + 10
    z = np.arange(-K, K + 1)
    w = np.exp(-(z.astype(float) ** 2) / (2 * sigma**2))
    return z, w / w.sum()


def _exact_gaussian_delta(sigma: float, k: int, eps: float) -> float:
    """Hockey-stick divergence of independent discrete Gaussian noise on k coordinates that
    differ by ±1 (the rest identical): L = (2S + k)/(2σ²) with S a sum of k discrete Gaussians."""
    z, p = _dg_pmf(sigma)
    dist = p.copy()
    for _ in range(k - 1):
        dist = np.convolve(dist, p)
    s = np.arange(dist.size) + k * z[0]
    L = (2.0 * s + k) / (2.0 * sigma**2)
    return float(np.sum(dist * np.clip(1.0 - np.exp(eps - L), 0.0, None)))


def _worst_pair(m: int, graph: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows x, x' whose contributions have disjoint supports of maximal size."""
    if graph is None:
        S = np.arange(m) < m // 2
    else:
        best, S = -1, None
        for mask in range(1 << m):
            side = np.array([(mask >> i) & 1 for i in range(m)], dtype=bool)
            cut = int(np.count_nonzero(graph[np.ix_(side, ~side)]))
            if cut > best:
                best, S = cut, side
    return S.astype(float), (~S).astype(float)


@pytest.mark.parametrize("m,n,eps,delta", [(3, 2, 1.0, 1e-4), (4, 3, 0.5, 1e-5), (4, 2, 3.0, 1e-3)])
def test_gaussian_exact_privacy_audit(m, n, eps, delta):
    x, x2 = _worst_pair(m)
    others = np.tile(np.array([1.0, np.nan] + [0.0] * (m - 2)), (n - 1, 1))
    D = np.vstack([x, others])
    D2 = np.vstack([x2, others])
    off = ~np.eye(m, dtype=bool)
    diff = pairwise_counts(D, device="cpu")[0][off] - pairwise_counts(D2, device="cpu")[0][off]
    k = int(np.abs(diff).sum())
    assert set(np.unique(diff)) <= {-1, 0, 1}
    rel = privirt.release_counts(D, epsilon=eps, delta=delta, seed=0)
    sigma = rel.privacy.noise_value
    assert k == rel.privacy.sensitivity.l1  # the worst case is attained
    realised = _exact_gaussian_delta(sigma, k, rel.privacy.epsilon)
    assert realised <= delta
    # the audit has power: half the noise breaks the claim
    assert _exact_gaussian_delta(sigma / 2, k, rel.privacy.epsilon) > delta


def test_gaussian_exact_audit_on_sparse_graph():
    m = 6
    X = np.array([[1, 0, 1, 0, 1, 0], [0, 0, 1, 1, np.nan, 1]], dtype=float)
    rel = privirt.release_counts(X, epsilon=1.0, delta=1e-4, p0=0.5, seed=5)
    G = rel.graph.to_numpy()
    x, x2 = _worst_pair(m, G)
    Ya = pairwise_counts(np.vstack([x, X[1]]), device="cpu")[0][G]
    Yb = pairwise_counts(np.vstack([x2, X[1]]), device="cpu")[0][G]
    k = int(np.abs(Ya - Yb).sum())
    assert k == 2 * max_cut(G) == rel.privacy.sensitivity.l1
    assert _exact_gaussian_delta(rel.privacy.noise_value, k, rel.privacy.epsilon) <= 1e-4


def test_laplace_exact_and_empirical_audit():
    m, eps = 3, 2.0
    rel = privirt.release_counts(np.array([[1.0, 0.0, 0.0]]), epsilon=eps, mechanism="laplace", seed=0)
    scale = rel.privacy.noise_value
    k = int(rel.privacy.sensitivity.l1)
    # exact: the per-coordinate log-ratio of the pmf at a unit shift is at most 1/scale
    z = np.arange(-200, 201)
    logp = -np.abs(z) / scale
    per_coord = np.max(logp[1:] - logp[:-1])
    assert k * per_coord <= eps * (1 + 1e-9)
    # empirical, with the actual sampler: tail events {Z ≥ t} vs {Z ≥ t+1} (shift by one)
    mech = mechanisms.DiscreteLaplace(scale, seed=11)
    draws = mech.sample(1_000_000)
    ratio_bound = math.exp(1.0 / scale)
    for t in range(0, 4):
        a = np.count_nonzero(draws >= t)
        b = np.count_nonzero(draws >= t + 1)
        ratio = a / b
        se = ratio * math.sqrt(1 / a + 1 / b)
        assert ratio <= ratio_bound + 5 * se
        assert ratio >= ratio_bound - 5 * se  # the sampler has the claimed shape


def test_randomized_response_empirical_audit_with_missing_cells():
    """The whole RR release path (missing cells → coin flips) on two neighbouring rows:
    the empirical log-ratio of every output pattern stays within m·ε₀ = ε."""
    from privirt.private.rr import randomize

    eps, m, reps = 1.5, 3, 200_000
    x = np.array([1, 0, -1], dtype=np.int8)  # one missing cell
    x2 = np.array([0, 1, 1], dtype=np.int8)
    mech = mechanisms.RandomizedResponse(eps / m, seed=5)

    def patterns(row):
        resp = privirt.Responses(np.tile(row, (reps, 1)), pd.RangeIndex(reps), pd.Index(["a", "b", "c"]))
        Z = randomize(resp, mech, mechanisms.SecureRNG(seed=9))
        return np.bincount(Z @ np.array([4, 2, 1]), minlength=8) / reps

    p, q = patterns(x), patterns(x2)
    assert np.all(p > 0) and np.all(q > 0)
    log_ratio = np.abs(np.log(p / q))
    se = np.sqrt(1 / (p * reps) + 1 / (q * reps))
    assert np.all(log_ratio <= eps + 5 * se)
    # the missing cell is a fair coin: its marginal is 1/2 whatever the other cells are
    assert abs(p[[1, 3, 5, 7]].sum() - 0.5) < 5 * math.sqrt(0.25 / reps)
    # and the bound is nearly attained by the pattern that flips nothing on observed cells
    assert log_ratio.max() > 0.5 * (2 * eps / m)


# -- ledger integration ----------------------------------------------------------------------
def test_ledger_debited_before_noise(tmp_path, noise_watch):
    X, _ = _rasch()
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=2.0, delta=1e-5)
    seen = noise_watch(led)  # the ledger's spends at each noise draw
    rel = privirt.release_counts(X, epsilon=1.0, delta=1e-5, ledger=led)
    assert seen == [1]
    assert rel.privacy.ledger_spend_id == 1
    assert led.spends().iloc[0]["rho"] == pytest.approx(rel.privacy.rho)


def test_over_budget_raises_before_any_noise(tmp_path, forbid_noise):
    X, _ = _rasch()
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=1.0, delta=1e-5)
    privirt.private_spectral_estimate(X, epsilon=0.8, delta=1e-5, mechanism="laplace", ledger=led)

    forbid_noise()
    before = (tmp_path / "l.ledger").read_bytes()
    for mech in ("gaussian", "laplace", "randomized_response"):
        with pytest.raises(privirt.BudgetExceeded):
            privirt.private_spectral_estimate(X, epsilon=0.5, delta=1e-5, mechanism=mech, ledger=led)
    assert (tmp_path / "l.ledger").read_bytes() == before
    assert len(led.spends()) == 1


def test_ledger_accepts_a_path(tmp_path):
    X, _ = _rasch()
    path = tmp_path / "l.ledger"
    privirt.Ledger(path, epsilon=1.0, delta=1e-5)
    privirt.release_counts(X, epsilon=0.3, mechanism="laplace", ledger=str(path))
    assert privirt.Ledger(path).spent().epsilon == pytest.approx(0.3, rel=1e-6)


# -- private spectral estimation -------------------------------------------------------------
def test_private_spectral_gaussian_result():
    X, beta = _rasch(n=1000, m=8)
    res = privirt.private_spectral_estimate(X, epsilon=2.0)
    assert isinstance(res.beta, pd.Series) and len(res.beta) == 8
    assert abs(res.beta.mean()) < 1e-9
    assert res.privacy.mechanism == "discrete Gaussian" and res.counts is not None
    assert res.top_k(2).size == 2
    assert _rmse(res.beta, beta) < 0.5


def test_labels_are_carried_and_empty_items_kept():
    X, _ = _rasch(n=200, m=5)
    df = pd.DataFrame(X, columns=[f"q{i}" for i in range(5)])
    df["q4"] = np.nan  # an item nobody answered: kept (the item set is public)
    res = privirt.private_spectral_estimate(df, epsilon=1.0, seed=0)
    assert list(res.beta.index) == [f"q{i}" for i in range(5)]
    assert np.isfinite(res.beta).all()


def test_randomized_response_statement_and_estimators():
    X, beta = _rasch(n=3000, m=6, p_observed=0.9)
    res = privirt.private_spectral_estimate(X, epsilon=3.0, mechanism="randomized_response", seed=2)
    p = res.privacy
    assert p.mechanism == "randomized response" and p.noise_parameter == "epsilon0"
    assert p.noise_value == pytest.approx(0.5, rel=1e-6) and p.epsilon <= 3.0 and p.delta == 0.0
    assert any("coin" in n for n in p.notes)  # missing-cell handling is stated
    assert res.beta_plain is not None and res.beta_debiased is not None
    assert res.beta.equals(res.beta_debiased)
    plain = privirt.private_spectral_estimate(
        X, epsilon=3.0, mechanism="randomized_response", seed=2, rr_estimator="plain"
    )
    assert plain.beta.equals(plain.beta_plain)
    # RR shrinks the plain estimate towards 0; the debiased one undoes it on average
    assert np.std(res.beta_plain) < np.std(res.beta_debiased)


def test_randomized_response_warns_when_its_noise_dominates():
    """At n = 3000, m = 5, ε = 1e-6 every debiased count was clipped to zero and β was all 0,
    without the warning Gaussian and Laplace give: it now comes from public n and ε₀ only (the
    same for other data), with and without shuffling, and not where the noise is small."""
    X, _, _ = privirt.simulate_rasch(3000, 5, seed=83000601)
    for shuffle, extra in ((False, {}), (True, {"delta": 1e-6})):
        said = []
        for data in (X, np.zeros_like(X)):
            with pytest.warns(privirt.exceptions.NoiseDominatesWarning, match="debiased counts") as caught:
                privirt.private_spectral_estimate(data, epsilon=1e-6, mechanism="randomized_response",
                                                  shuffle=shuffle, seed=83000602, **extra)
            said.append([str(w.message) for w in caught if "debiased counts" in str(w.message)])
        assert len(said[0]) == 1 and said[0] == said[1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", privirt.exceptions.NoiseDominatesWarning)
        privirt.private_spectral_estimate(X, epsilon=3.0, mechanism="randomized_response", seed=2)


def test_debiased_count_sd_is_a_lower_bound_of_the_noise():
    """The warning's SD, √n·q(1−q)/(2q−1)², is reached by the answers (0, 1) on every row and
    exceeded by any others (simulated randomizations)."""
    from privirt.private.rr import debiased_count_sd

    rng = np.random.default_rng(83000900)
    n, q, reps = 200, 0.6, 1000
    bound = debiased_count_sd(q, n)
    for X in (np.tile([0, 1], (n, 1)), np.tile([1, 0], (n, 1)), rng.integers(0, 2, size=(n, 2))):
        keep = rng.random((reps, n, 2)) < q
        Z = np.where(keep, X[None], 1 - X[None])
        Y01 = [debiased_counts(z, q, pairwise_counts(z.astype(float), device="cpu")[0].astype(float))[0, 1]
               for z in Z]
        assert np.std(Y01) >= 0.9 * bound
    assert bound == pytest.approx(np.sqrt(n) * 0.24 / 0.04)


def test_debiased_counts_formula():
    rng = np.random.default_rng(0)
    Z = rng.integers(0, 2, size=(40, 5)).astype(np.int8)
    q = 0.7
    Y_plain = pairwise_counts(Z.astype(float), device="cpu")[0].astype(float)
    got = debiased_counts(Z.astype(float), q, Y_plain)
    Xh = (Z - (1 - q)) / (2 * q - 1)
    naive = Xh.T @ (1 - Xh)
    np.fill_diagonal(naive, 0)
    assert np.allclose(got, naive)


def test_debiased_counts_are_unbiased():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 2, size=(60, 4)).astype(float)
    Y = pairwise_counts(codes, device="cpu")[0]
    eps0 = 1.0
    acc = np.zeros((4, 4))
    reps = 400
    for r in range(reps):
        mech = mechanisms.RandomizedResponse(eps0, seed=r)
        Z = mech.apply(codes.astype(np.int64)).astype(float)
        Yp = pairwise_counts(Z, device="cpu")[0].astype(float)
        acc += debiased_counts(Z, mech.keep_probability, Yp)
    mean = acc / reps
    off = ~np.eye(4, dtype=bool)
    # the per-replicate sd of Ŷ_ij is about 30 here: 5 standard errors of the mean
    assert np.all(np.abs(mean[off] - Y[off]) < 5 * 30 / math.sqrt(reps))


def test_shuffle_amplification_and_fallback():
    X, _ = _rasch(n=20_000, m=5)
    res = privirt.private_spectral_estimate(
        X, epsilon=1.0, delta=1e-5, mechanism="randomized_response", shuffle=True, seed=0
    )
    p = res.privacy
    assert p.shuffle and p.delta == 1e-5 and p.epsilon <= 1.0
    assert p.noise_value * 5 > 1.0  # each person uses more than ε locally
    small, _ = _rasch(n=5, m=5)  # five reports: under 1% more local ε, pure ε-DP is stated
    res2 = privirt.private_spectral_estimate(
        small, epsilon=1.0, mechanism="randomized_response", shuffle=True, seed=0
    )
    assert not res2.privacy.shuffle and res2.privacy.delta == 0.0
    assert any("no gain" in n for n in res2.privacy.notes)


def test_accuracy_gaussian_beats_laplace_and_rr_and_approaches_nonprivate():
    errs = {"gaussian": [], "laplace": [], "randomized_response": []}
    high, nonpriv = [], []
    for trial in range(3):
        X, _, beta = privirt.simulate_rasch(2000, 20, seed=100 + trial)
        for mech in errs:
            # seeded noise: the check is reproducible (the result says NOT private)
            res = privirt.private_spectral_estimate(X, epsilon=1.0, mechanism=mech, seed=200 + trial)
            errs[mech].append(_rmse(res.beta, beta))
        high.append(_rmse(privirt.private_spectral_estimate(X, epsilon=100.0, seed=300 + trial).beta, beta))
        nonpriv.append(_rmse(privirt.spectral_estimate(X, device="cpu").beta, beta))
    g, lap, rr = (np.mean(errs[k]) for k in ("gaussian", "laplace", "randomized_response"))
    assert g < 0.75 * lap and g < 0.5 * rr  # the paper's finding at moderate ε
    assert np.mean(high) < np.mean(nonpriv) + 0.03  # large ε ≈ the non-private estimate
    # README.md quotes these three RMSEs (it said 0.11, 0.31, 0.85 while the loop gave 0.091, 0.335)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"RMSE ≈ ([\d.]+), ([\d.]+) and ([\d.]+) in the test suite", readme)
    assert quoted, "README.md no longer quotes the RMSEs of this test"
    for q, v in zip(quoted.groups(), (g, lap, rr)):
        assert abs(float(q) - v) <= 0.006, (quoted.groups(), (g, lap, rr))


def test_error_decreases_with_epsilon():
    X, _, beta = privirt.simulate_rasch(1500, 10, seed=9)
    low = np.mean([_rmse(privirt.private_spectral_estimate(X, epsilon=0.2, seed=k).beta, beta) for k in range(3)])
    high = np.mean([_rmse(privirt.private_spectral_estimate(X, epsilon=5.0, seed=10 + k).beta, beta)
                    for k in range(3)])
    assert high < low


# -- the ER graph ------------------------------------------------------------------------------
def test_graph_sampling():
    G = sample_comparison_graph(50, "auto", seed=3)
    from scipy.sparse.csgraph import connected_components

    assert connected_components(G, directed=False)[0] == 1
    assert np.array_equal(G, sample_comparison_graph(50, "auto", seed=3))
    assert sample_comparison_graph(5, 1.0).sum() == 20
    with pytest.raises(ValueError, match="too small"):
        sample_comparison_graph(60, 1e-3, seed=0)


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0.0},
        {"epsilon": -1.0},
        {"epsilon": math.inf},
        {"epsilon": math.nan},
        {"epsilon": 1.0, "delta": 0.0},
        {"epsilon": 1.0, "delta": 1.0},
        {"epsilon": 1.0, "delta": math.nan},
        {"epsilon": 1.0, "p0": 0.0},
        {"epsilon": 1.0, "p0": 1.5},
        {"epsilon": 1.0, "p0": math.nan},
        {"epsilon": 1.0, "p0": "sparse"},
        {"epsilon": 1.0, "mechanism": "gauss"},
        {"epsilon": 1.0, "shuffle": True},
        {"epsilon": 1.0, "seed": -3},
        {"epsilon": 1.0, "sensitivity": "loose"},
        {"epsilon": 1.0, "device": "tpu"},
        {"epsilon": 1.0, "mechanism": "randomized_response", "device": "tpu"},
    ],
)
def test_bad_input(kwargs):
    X, _ = _rasch(n=20, m=4)
    with pytest.raises(ValueError):
        privirt.private_spectral_estimate(X, **kwargs)
    if "shuffle" not in kwargs:
        with pytest.raises(ValueError):
            privirt.release_counts(X, **kwargs)


def test_release_counts_rejects_randomized_response():
    X, _ = _rasch(n=20, m=4)
    with pytest.raises(ValueError, match="randomized response"):
        privirt.release_counts(X, epsilon=1.0, mechanism="randomized_response")


@pytest.mark.gpu
def test_gpu_matches_cpu_with_the_same_seed():
    X, _ = _rasch(n=500, m=10)
    a = privirt.private_spectral_estimate(X, epsilon=1.0, seed=4, device="cpu")
    b = privirt.private_spectral_estimate(X, epsilon=1.0, seed=4, device="gpu")
    assert a.counts.Y.equals(b.counts.Y)
    assert np.allclose(a.beta, b.beta, atol=1e-8)


def test_bad_ledger_argument(tmp_path):
    X, _ = _rasch(n=20, m=4)
    with pytest.raises(ValueError, match="ledger"):
        privirt.release_counts(X, epsilon=1.0, ledger=42)
    with pytest.raises(FileNotFoundError):
        privirt.private_spectral_estimate(X, epsilon=1.0, ledger=tmp_path / "missing.ledger")
    assert not (tmp_path / "missing.ledger").exists()


def test_sampler_tv_bound_is_added_to_delta(monkeypatch):
    X, _ = _rasch(n=100, m=5)
    exact = privirt.release_counts(X, epsilon=1.0, delta=1e-5, seed=0).privacy
    assert exact.cost.delta == 0.0
    monkeypatch.setattr(mechanisms.DiscreteGaussian, "tv_bound", 1e-7, raising=False)
    approx = privirt.release_counts(X, epsilon=1.0, delta=1e-5, seed=0).privacy
    draws = approx.sensitivity.n_released
    assert approx.cost.delta == pytest.approx(draws * 1e-7)
    assert approx.noise_value > exact.noise_value  # less δ left for the conversion
    assert zcdp_to_approx_dp(approx.rho, 1e-5 - draws * 1e-7) <= 1.0
    assert any("TV" in n for n in approx.notes)


@pytest.mark.parametrize("mech", ["gaussian", "laplace", "randomized_response"])
def test_invalid_call_never_debits(tmp_path, mech):
    X, _ = _rasch(n=30, m=4)
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    for bad in ({"device": "tpu"}, {"p0": 2.0}, {"delta": 0.0}):
        with pytest.raises(ValueError):
            privirt.private_spectral_estimate(X, epsilon=1.0, mechanism=mech, ledger=led, **bad)
    assert len(led.spends()) == 0


# ---------------------------------------------------------------------------------------
# the public item set
def test_public_items_keep_an_item_nobody_answered_in_long_data():
    import pandas as pd

    long = pd.DataFrame({
        "person": ["p1", "p1", "p2", "p2", "p3", "p3"] * 20,
        "item": ["q1", "q2", "q1", "q3", "q2", "q3"] * 20,
        "response": [1, 0, 0, 1, 1, 1] * 20,
    })
    long["person"] = long["person"] + "_" + (long.index // 6).astype(str)
    public = ["q1", "q2", "q3", "q4"]  # nobody answered q4
    n = long["person"].nunique()  # the public number of persons (a long table needs it)
    rel = privirt.release_counts(long, epsilon=1.0, items=public, n_persons=n, seed=1)
    assert list(rel.Y.index) == public and list(rel.graph.columns) == public
    assert rel.privacy.sensitivity.l1 == 2 * 2 * 2  # m = 4: 2·⌊4/2⌋·⌈4/2⌉
    res = privirt.private_spectral_estimate(long, epsilon=1.0, items=public, n_persons=n, seed=1)
    assert list(res.beta.index) == public and np.isfinite(res.beta).all()
    rr = privirt.private_spectral_estimate(long, epsilon=4.0, mechanism="randomized_response",
                                           items=public[::-1], n_persons=n, seed=1)
    assert list(rr.beta.index) == public[::-1]


def test_long_data_without_the_public_item_set_is_refused_before_any_debit(tmp_path):
    """A long table's items are read from its rows: whether q3 exists depends on the one
    person who answered it.  Without items= nothing is released and nothing is debited."""
    import pandas as pd

    long = pd.DataFrame({"person": ["a", "a", "b", "b", "c"], "item": ["q1", "q2", "q1", "q2", "q3"],
                         "response": [1, 0, 0, 1, 1]})
    assert privirt.as_responses(long).items_from_data
    assert not privirt.as_responses(long.pivot(index="person", columns="item",
                                               values="response")).items_from_data
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    for call in (privirt.release_counts, privirt.private_spectral_estimate):
        with pytest.raises(ValueError, match="items=\\[...\\]"):
            call(long, epsilon=1.0, ledger=ledger)
        with pytest.raises(ValueError, match="not the string"):
            call(long, epsilon=1.0, items="q1q2q3", ledger=ledger)
    assert ledger.spent().epsilon == 0
    rel = privirt.release_counts(long, epsilon=1.0, items=["q1", "q2", "q3"], n_persons=3, ledger=ledger)
    assert list(rel.Y.index) == ["q1", "q2", "q3"] and ledger.spent().epsilon > 0


def test_a_long_table_that_lost_an_empty_person_keeps_its_items_from_data_flag(tmp_path):
    # Responses.subset (which empty="drop" uses) built its result without the flag: with one more
    # row (p4, q3, NaN) the long table's items and n were released as read from its rows
    import pandas as pd

    long = pd.DataFrame({"person": ["p1", "p1", "p2", "p2", "p3", "p3", "p4"],
                         "item": ["q1", "q2", "q1", "q2", "q1", "q2", "q3"],
                         "response": [1, 0, 0, 1, 1, 1, np.nan]})
    with pytest.warns(privirt.EmptyResponsesWarning):
        resp = privirt.as_responses(long)
    assert resp.items_from_data and resp.subset([0, 1]).items_from_data
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    for call in (privirt.release_counts, privirt.release_totals):
        with pytest.raises(ValueError, match=r"items=\[...\]"):
            call(resp, epsilon=1.0, ledger=ledger)
    assert ledger.spent().epsilon == 0


def test_responses_whose_empty_persons_or_items_were_dropped_need_the_public_n_and_items(tmp_path):
    # as_responses' default empty="drop" removed a person who answered nothing: the private paths
    # then stated n = 49 for the neighbour of a 50-person data set ("persons (public): 49")
    rng = np.random.default_rng(65_100_001)
    X = (rng.random((50, 4)) < 0.5).astype(float)
    X[0] = np.nan
    X[:, 3] = np.nan
    with pytest.warns(privirt.EmptyResponsesWarning):
        resp = privirt.as_responses(X)
    assert (resp.n_persons, resp.n_items, resp.persons_dropped, resp.items_dropped) == (49, 3, True, True)
    assert not privirt.as_responses(X, empty="keep").persons_dropped
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    for call in (privirt.release_counts, privirt.private_spectral_estimate, privirt.release_totals):
        with pytest.raises(ValueError, match=r"persons and items with no response dropped .* number of "
                                             r"persons and item set depend on the data.*n_persons=N "
                                             r"and items=\[\.\.\.\]$"):
            call(resp, epsilon=1.0, missing="mcar", ledger=ledger) if call is privirt.release_totals \
                else call(resp, epsilon=1.0, ledger=ledger)
        with pytest.raises(ValueError, match=r"persons with no response dropped .* depends on the data"):
            call(resp, epsilon=1.0, items=[0, 1, 2, 3], ledger=ledger)
    assert ledger.spent().epsilon == 0
    rel = privirt.release_counts(resp, epsilon=1.0, items=[0, 1, 2, 3], n_persons=50, ledger=ledger)
    assert rel.privacy.n_persons == 50 and list(rel.Y.index) == [0, 1, 2, 3]


def test_public_items_reject_unlisted_and_duplicate_items():
    X = np.array([[1, 0, 1], [0, 1, 1]], dtype=float)
    with pytest.raises(ValueError, match="not in the public item set"):
        privirt.release_counts(X, epsilon=1.0, items=[0, 1], seed=1)
    with pytest.raises(ValueError, match="twice"):
        privirt.release_counts(X, epsilon=1.0, items=[0, 1, 2, 2], seed=1)


@pytest.mark.parametrize("m", [5, 6, 7])
def test_stated_rho_is_never_below_the_proven_rho(m):
    # ρ = Δ₂²/(2σ²) with Δ₂² = Δ₁ (0/±1 differences); the debited ρ must not be smaller
    from fractions import Fraction

    X, _ = _rasch(n=50, m=m)
    for eps in (0.5, 1.0, 2.0):
        p = privirt.release_counts(X, epsilon=eps, delta=1e-5, seed=0).privacy
        sigma = Fraction(p.noise_value)
        proven = Fraction(int(p.sensitivity.l1)) / (2 * sigma * sigma)
        assert Fraction(p.rho) >= proven
        assert Fraction(p.cost.rho) >= proven


def test_shuffled_rr_claim_covers_the_randomizer_actually_run():
    from privirt.private.shuffling import shuffle_delta

    n, m, delta = 2000, 3, 1e-5
    X, _ = _rasch(n=n, m=m)
    p = privirt.private_spectral_estimate(
        X, epsilon=2.0, delta=delta, mechanism="randomized_response", shuffle=True, seed=0
    ).privacy
    assert p.shuffle
    local = mechanisms.RandomizedResponse(p.noise_value).privacy(n_bits=m).epsilon
    # the numerical bound verifies the stated (ε, δ) for this randomizer's local ε
    assert p.epsilon <= 2.0 and shuffle_delta(local, n, p.epsilon) <= delta


def test_rr_epsilon_too_small_to_debias_is_refused_before_the_debit(tmp_path):
    # ε₀ = ε/m so small that the keep probability is 1/2 in double precision: the debiasing
    # divides by 2q − 1 = 0.  A clear ValueError, raised before anything is debited.
    X, _ = _rasch(n=30, m=5)
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="below the smallest ε"):  # the shared rule comes first
        privirt.private_spectral_estimate(X, epsilon=1e-17, mechanism="randomized_response", ledger=led)
    assert len(led.spends()) == 0
    from mechanisms.measures import ApproxDP
    from privirt.private.measurements import ResponsesRR

    with pytest.raises(ValueError, match="below the smallest ε"):  # the measurement applies it too
        ResponsesRR.calibrate(ApproxDP(1e-17, 1e-5), n_items=5, n_persons=30, shuffle=False)


@pytest.mark.parametrize("mechanism,eps", [("laplace", 1e6), ("randomized_response", 1e6)])
def test_out_of_range_epsilon_is_refused_in_its_own_terms_before_any_debit(tmp_path, mechanism, eps):
    """An ε whose calibrated noise the exact samplers cannot produce is refused naming the ε
    the caller chose (not only an internal noise parameter), and nothing is spent."""
    X, _, _ = privirt.simulate_rasch(50, 3, seed=2)
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=1e6, delta=1e-5)
    with pytest.raises(ValueError, match=re.escape(f"epsilon={eps:g} calibrates to") + ".* outside the range"):
        privirt.private_spectral_estimate(X, epsilon=eps, mechanism=mechanism, ledger=ledger)
    assert ledger.spent().epsilon == 0


@pytest.mark.parametrize("eps", [1e-300, 1e-200, 5e-324, 1e-13])
@pytest.mark.parametrize("mechanism", ["gaussian", "laplace", "randomized_response"])
def test_vanishing_epsilon_is_refused_by_the_shared_rule(tmp_path, mechanism, eps):
    """ε = 1e-300 used to escape as ZeroDivisionError, then (δ = 1e-4) as an "internal accounting
    mismatch" from the Gaussian calibration.  One rule for every mechanism now: an ε below
    privirt.accounting.MIN_EPSILON is refused naming that smallest ε, with nothing spent
    (tests/test_epsilon_range.py covers every private method)."""
    X, _, _ = privirt.simulate_rasch(40, 4, seed=3)
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=1.0, delta=1e-5)
    for delta in (1e-5, 1e-4):
        with pytest.raises(ValueError, match=re.escape(f"epsilon={eps:g} is below the smallest ε")):
            privirt.private_spectral_estimate(X, epsilon=eps, delta=delta, mechanism=mechanism, ledger=ledger)
    if mechanism != "randomized_response":
        with pytest.raises(ValueError, match=re.escape(f"epsilon={eps:g}")):
            privirt.release_counts(X, epsilon=eps, mechanism=mechanism, ledger=ledger)
    assert len(ledger.spends()) == 0


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace", "randomized_response"])
def test_seeded_noise_with_a_ledger_is_refused_and_nothing_is_spent(tmp_path, mechanism):
    """Seeded noise is not private, so it must not be charged to (or pass as) a private
    release: refused in one line before anything is computed."""
    X, _ = _rasch(n=40, m=4)
    path = tmp_path / "l.ledger"
    privirt.Ledger(path, epsilon=5.0, delta=1e-5)
    before = path.read_bytes()
    for seed in (0, np.random.SeedSequence(3)):
        with pytest.raises(ValueError, match="seed.*ledger") as info:
            privirt.private_spectral_estimate(X, epsilon=1.0, mechanism=mechanism, seed=seed, ledger=path)
        assert "\n" not in str(info.value)
        if mechanism != "randomized_response":
            with pytest.raises(ValueError, match="seed.*ledger"):
                privirt.release_counts(X, epsilon=1.0, mechanism=mechanism, seed=seed, ledger=path)
    assert path.read_bytes() == before and len(privirt.Ledger(path).spends()) == 0


def test_a_seeded_statement_says_its_guarantee_does_not_apply():
    X, _ = _rasch(n=40, m=4)
    text = str(privirt.release_counts(X, epsilon=1.0, seed=1).privacy)
    lines = text.splitlines()
    assert lines[0].startswith("NOT PRIVATE")
    guarantee = [line for line in lines if "differential privacy" in line]
    assert guarantee and all("does NOT apply" in line for line in guarantee)
    private = str(privirt.release_counts(X, epsilon=1.0).privacy)
    assert "NOT" not in private and private.startswith("privacy: (")
    # shuffled randomized response, where amplification is claimed: no note restates it
    X, _ = _rasch(n=2000, m=3)
    shuffled = privirt.private_spectral_estimate(X, epsilon=2.0, delta=1e-5, seed=0, shuffle=True,
                                                 mechanism="randomized_response").privacy
    assert shuffled.shuffle
    for line in str(shuffled).splitlines():
        if "-DP" in line or "differential privacy" in line:
            assert "does NOT apply" in line, line


# ---------------------------------------------------------------------------------------
# the contract: seeds, typed guarantees, measurement objects, result objects
def test_seed_accepts_int_and_seed_sequence_and_streams_are_named():
    X, _ = _rasch(n=60, m=8)
    a = privirt.release_counts(X, epsilon=1.0, p0="auto", seed=7)
    b = privirt.release_counts(X, epsilon=1.0, p0="auto", seed=np.random.SeedSequence(7))
    assert a.Y.equals(b.Y) and a.graph.equals(b.graph) and not b.privacy.private
    # the graph has its own child stream: the mechanism does not change it
    c = privirt.release_counts(X, epsilon=1.0, p0="auto", mechanism="laplace", seed=7)
    assert c.graph.equals(a.graph)
    child = np.random.SeedSequence(7).spawn(1)[0]
    assert not privirt.release_counts(X, epsilon=1.0, p0="auto", seed=child).Y.equals(a.Y)
    for bad in (np.random.default_rng(0), -1, 1.5, "7", True):
        with pytest.raises(ValueError, match="seed"):
            privirt.release_counts(X, epsilon=1.0, seed=bad)


def test_statements_hold_typed_guarantees():
    from mechanisms import ApproxDP, PureDP, ZCDP

    X, _ = _rasch(n=60, m=5)
    g = privirt.release_counts(X, epsilon=1.0, delta=1e-5, seed=0).privacy
    assert isinstance(g.guarantee, ApproxDP) and g.guarantee.delta == 1e-5 and g.epsilon <= 1.0
    assert g.native == ZCDP(g.rho) and g.cost.rho == g.rho
    assert g.guarantee.epsilon == pytest.approx(zcdp_to_approx_dp(g.rho, 1e-5))
    lap = privirt.release_counts(X, epsilon=1.0, mechanism="laplace", seed=0).privacy
    assert lap.guarantee == lap.native and isinstance(lap.native, PureDP) and lap.delta == 0.0
    assert lap.rho is None
    rr = privirt.private_spectral_estimate(X, epsilon=2.0, mechanism="randomized_response", seed=0).privacy
    assert isinstance(rr.guarantee, PureDP) and rr.to_dict()["measure"] == "PureDP"


def test_measurement_objects_carry_their_privacy_map_and_one_calibration_margin():
    from mechanisms import ApproxDP, PureDP, ZCDP
    from privirt.private.accounting import calibrate_gaussian_sigma
    from privirt.private import CALIBRATION_MARGIN, CountsGaussian, CountsLaplace, ResponsesRR
    from privirt.private.sensitivity import pairwise_counts_sensitivity

    sens = pairwise_counts_sensitivity(6)
    target = ApproxDP(0.7, 1e-6)
    g = CountsGaussian.calibrate(target, sens)
    assert g.measure is ZCDP and isinstance(g.native, ZCDP)
    assert g.noise_value == calibrate_gaussian_sigma(sens.l2, 0.7 * (1 - CALIBRATION_MARGIN), 1e-6)
    assert g.guarantee.epsilon <= 0.7
    lap = CountsLaplace.calibrate(target, sens)
    # (Δ₁/ε rounded to nearest, then stepped up where Δ₁/scale is above ε: at most an ulp more)
    naive = sens.l1 / (0.7 * (1 - CALIBRATION_MARGIN))
    assert lap.measure is PureDP and lap.noise_value in (naive, math.nextafter(naive, math.inf))
    assert lap.native.epsilon <= 0.7
    rr = ResponsesRR.calibrate(target, n_items=6, n_persons=100, shuffle=False)
    assert rr.native == rr.guarantee and rr.native.epsilon <= 0.7 and rr.noise_parameter == "epsilon0"
    # each carries its privacy map: the native guarantee is the map at the calibrated sensitivity
    assert g.map(sens) == g.native and lap.map(sens) == lap.native and rr.map(6) == rr.native
    smaller = pairwise_counts_sensitivity(4)
    assert g.map(smaller).rho < g.native.rho and lap.map(smaller).epsilon < lap.native.epsilon
    assert rr.map(3).epsilon == pytest.approx(rr.native.epsilon / 2)
    st = g.statement(private=True, p0=1.0, n_edges=15, n_persons=100, spend_id=None)
    assert st.guarantee == g.guarantee and st.n_persons == 100 and st.cost == g.cost


def test_private_results_follow_the_item_estimate_contract():
    from privirt._results import ItemEstimate

    X, _ = _rasch(n=300, m=5)
    X = pd.DataFrame(X, columns=list("abcde"))
    res = privirt.private_spectral_estimate(X, epsilon=2.0, seed=1, estimator="spectral")
    assert isinstance(res, ItemEstimate) and isinstance(res.spectral, ItemEstimate)
    assert list(res.items) == list("abcde")
    assert list(res.to_frame().columns) == ["beta", "se", "lo", "hi"]
    assert res.to_frame()["beta"].equals(res.beta)
    assert list(res.spectral.to_frame().columns) == ["beta", "pi", "d"]
    na = privirt.private_spectral_estimate(X, epsilon=2.0, seed=1, estimator="noise_aware")
    assert list(na.to_frame().columns) == ["beta", "se", "lo", "hi"]
    assert list(na.spectral.to_frame().columns) == ["beta", "beta_unshrunk", "se"]
    assert res.top_k(2).equals(res.beta.sort_values(ascending=False).index[:2])
    rr = privirt.private_spectral_estimate(X, epsilon=4.0, mechanism="randomized_response", seed=1)
    assert list(rr.to_frame().columns) == ["beta", "beta_plain", "beta_debiased"]


def test_noise_that_swamps_every_count_is_warned_from_public_quantities_only():
    # a one-person file: the private estimators used to return numbers without a word
    from privirt.exceptions import NoiseDominatesWarning

    one = np.array([[1, 0, 1]])
    with pytest.warns(NoiseDominatesWarning, match=r"number of persons \(1\)"):
        privirt.private_spectral_estimate(one, epsilon=1.0, seed=0)
    with pytest.warns(NoiseDominatesWarning, match="item totals"):
        privirt.private_totals_estimate(one, epsilon=1.0, seed=0, n_boot=0)
    # the warning depends on n, m, ε, δ only: a neighbour (other answers) warns the same
    with pytest.warns(NoiseDominatesWarning):
        privirt.private_spectral_estimate(np.array([[0, 0, 0]]), epsilon=1.0, seed=0)
    X, _ = _rasch(n=2000, m=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoiseDominatesWarning)
        privirt.private_spectral_estimate(X, epsilon=1.0, seed=0)


@pytest.mark.parametrize("items, words", [
    ({"c", "a", "b"}, "ordered sequence of item labels"),  # a set's order changes with the hash seed
    (["a", None, "c"], "missing label"),
    (["a", float("nan"), "c"], "missing label"),
])
def test_public_item_lists_that_cannot_label_an_output_are_refused_before_spending(tmp_path, items, words):
    X = pd.DataFrame([[1, 0, 1], [0, 1, 1], [1, 1, 0]], columns=["a", "b", "c"])
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-4)
    with pytest.raises(ValueError, match=words):
        privirt.private_totals_estimate(X, epsilon=1.0, ledger=ledger, items=items, n_boot=0)
    assert len(ledger.spends()) == 0


def test_totals_intervals_for_one_person_are_unbounded():
    """One person identifies no difference between items; every replicate of its scores refit to
    the same values, which gave se = 0 and zero-width intervals.  The unbounded intervals are
    said by one warning (they were only in info["note"], silently), as on the spectral path."""
    for missing, X in (("none", np.array([[1, 0, 1, 0, 0]])), ("mcar", np.array([[1, 0, np.nan, 0, 0]]))):
        with pytest.warns(privirt.exceptions.NoiseDominatesWarning, match="one person") as caught:
            fit = privirt.private_totals_estimate(X, epsilon=1e4, seed=255, n_boot=20, missing=missing)
        assert len([w for w in caught if "one person" in str(w.message)]) == 1
        assert np.isinf(fit.se).all() and (fit.ci["lo"] == -np.inf).all() and (fit.ci["hi"] == np.inf).all()
        assert "not identified" in fit.info["note"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", privirt.exceptions.NoiseDominatesWarning)
        two = privirt.private_totals_estimate(np.array([[1, 0, 1, 0, 0], [0, 0, 1, 1, 0]]), epsilon=1e4,
                                              seed=255, n_boot=20)
        assert np.isnan(privirt.private_totals_estimate(np.array([[1, 0, 1, 0, 0]]), epsilon=1e4, seed=255,
                                                        n_boot=0).se).all()
    assert np.isfinite(two.se).all()
