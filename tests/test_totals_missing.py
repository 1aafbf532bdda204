"""Private totals under missing completely at random (``missing="mcar"``): release discipline,
calibration to the proven sensitivity, the derived design, the MCAR fit and its intervals."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import special

import privirt
from privirt.private.totals import marginal, marginal_missing, mcar_bootstrap, shrinkage
from privirt.private.accounting import zcdp_to_approx_dp
from privirt.private.totals.api import (
    estimate_from_release,
    missing_statistics,
    private_totals_estimate,
    release_totals,
)
from ._opendp import assert_statement_matches_opendp
from ._silent import assert_se_scales_with_difficulty, silent_histogram

mechanisms = pytest.importorskip("mechanisms")


def _mcar(n=600, m=6, rate=0.2, seed=0):
    X, _, beta = privirt.simulate_rasch(n, m, seed=seed)
    X = X.astype(float)
    X[np.random.default_rng(seed + 1000).random(X.shape) < rate] = np.nan
    return X, beta - beta.mean()


# -- release discipline ----------------------------------------------------------------------
def test_complete_domain_refuses_missing_cells_and_spends_nothing(tmp_path, forbid_noise):
    X, _ = _mcar()
    path = tmp_path / "l.ledger"
    led = privirt.Ledger(path, epsilon=5.0, delta=1e-5)

    forbid_noise()
    before = path.read_bytes()
    for fn in (release_totals, private_totals_estimate):
        with pytest.raises(ValueError) as exc:
            fn(X, epsilon=1.0, ledger=led)  # missing="none" is the default
        msg = str(exc.value)
        assert "\n" not in msg and 'missing="mcar"' in msg and "private_spectral_estimate" in msg
        for bad in ("MCAR", "yes", None, True):
            with pytest.raises(ValueError, match="missing must be"):
                fn(X, epsilon=1.0, ledger=led, missing=bad)
    assert path.read_bytes() == before and led.spends().empty


def test_mcar_ledger_debited_once_before_any_noise(tmp_path, noise_watch):
    X, _ = _mcar()
    led = privirt.Ledger(tmp_path / "l.ledger", epsilon=2.0, delta=1e-5)
    seen = noise_watch(led)  # the ledger's spends at each noise draw
    rel = release_totals(X, epsilon=1.0, delta=1e-5, ledger=led, missing="mcar")
    assert seen == [1, 1, 1]  # correct counts, answered counts, histogram: all after the one debit
    assert rel.privacy.ledger_spend_id == 1 and len(led.spends()) == 1
    assert led.spends().iloc[0]["rho"] == pytest.approx(rel.privacy.rho)
    assert rel.privacy.private and "NOT PRIVATE" not in str(rel.privacy)


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0])
def test_mcar_calibration_uses_the_proven_sensitivity_and_meets_the_target(eps):
    X, _ = _mcar(m=7)
    n, m = X.shape
    rel = release_totals(X, epsilon=eps, delta=1e-5, missing="mcar", seed=1)
    p = rel.privacy
    # the proven joint bound (docs/totals.md §7), tight
    assert p.sensitivity.l2**2 == pytest.approx(2 * m + 2) and p.sensitivity.l1 == 2 * m + 2
    cells = (len(rel.edges) - 1) * (len(rel.k_edges) - 1)
    assert p.sensitivity.bound == "tight" and p.sensitivity.n_released == 2 * m + cells == 2 * m + rel.histogram.size
    # each part composed with its own sensitivity: m (correct), m (answered), 2 (histogram)
    rho = m / (2 * rel.sigma_totals**2) + m / (2 * rel.sigma_answered**2) + 1 / rel.sigma_histogram**2
    assert p.rho == pytest.approx(rho, rel=1e-9) and p.rho >= rho * (1 - 1e-12)
    assert zcdp_to_approx_dp(p.rho, 1e-5) <= eps * (1 + 1e-12) and p.epsilon >= eps * 0.999
    # the derived design: histogram share f, answered share g of the rest
    f, g, edges, k_edges = marginal_missing.mcar_design(n, m, p.rho)
    assert rel.split == pytest.approx(f, rel=1e-6) and np.array_equal(rel.edges, edges)
    assert np.array_equal(rel.k_edges, k_edges)
    g_got = (m / (2 * rel.sigma_answered**2)) / (m / (2 * rel.sigma_totals**2) + m / (2 * rel.sigma_answered**2))
    assert g_got == pytest.approx(g, rel=1e-6)
    notes = " ".join(p.notes)
    assert "missing completely at random" in notes and "answered counts" in notes and f"L2² ≤ {2 * m + 2}" in notes
    assert rel.missing == "mcar" and rel.answered.index.equals(rel.totals.index)
    d = rel.to_dict()
    assert d["missing"] == "mcar" and len(d["answered"]) == m and d["sigma_answered"] == rel.sigma_answered
    assert d["k_edges"] == rel.k_edges.tolist() and len(d["histogram"]) == cells


def test_complete_data_declared_mcar_costs_the_mcar_calibration():
    X, _ = _mcar(rate=0.0)
    Xm, _ = _mcar(rate=0.3)
    full = release_totals(X, epsilon=1.0, missing="mcar", seed=2)
    holes = release_totals(Xm, epsilon=1.0, missing="mcar", seed=2)
    plain = release_totals(X, epsilon=1.0, seed=2)
    # the release depends on the declared domain only, never on whether cells are missing
    assert str(full.privacy) == str(holes.privacy)
    assert (full.sigma_totals, full.sigma_answered, full.sigma_histogram) == (
        holes.sigma_totals, holes.sigma_answered, holes.sigma_histogram)
    m = X.shape[1]
    assert full.privacy.sensitivity.l2**2 == pytest.approx(2 * m + 2)
    assert plain.privacy.sensitivity.l2**2 == pytest.approx(m + 2) and plain.answered is None
    assert full.sigma_totals > plain.sigma_totals  # hiding the mask costs noise
    fit = estimate_from_release(full, n_boot=0)
    assert fit.info["missing"] == "mcar" and np.all(np.isfinite(fit.beta))


def test_mcar_statistics_are_what_is_released():
    X, _ = _mcar(n=800, m=5, rate=0.25)
    rel = release_totals(X, epsilon=200.0, missing="mcar", seed=3)
    codes = np.where(np.isnan(X), -1, X).astype(np.int8)
    s, a, h = missing_statistics(codes, rel.k_edges, rel.edges)
    for noisy, exact, sig in ((rel.totals, s, rel.sigma_totals), (rel.answered, a, rel.sigma_answered),
                              (rel.histogram, h.ravel(), rel.sigma_histogram)):
        assert np.all(np.abs(noisy.to_numpy() - exact) <= 6 * sig + 1)
    assert h.sum() == 800 and 0 < a.min() and a.max() < 800


def test_mcar_seeded_is_reproducible_and_not_private():
    X, _ = _mcar()
    a = private_totals_estimate(X, epsilon=1.0, seed=7, n_boot=20, missing="mcar")
    b = private_totals_estimate(X, epsilon=1.0, seed=np.random.SeedSequence(7), n_boot=20, missing="mcar")
    assert a.privacy.private is False and "NOT PRIVATE" in str(a.privacy)
    assert a.release.answered.equals(b.release.answered) and a.beta.equals(b.beta) and a.ci.equals(b.ci)
    assert private_totals_estimate(X, epsilon=1.0, n_boot=0, missing="mcar").privacy.private is True


@pytest.mark.parametrize("eps", [1.0, 30.0])
def test_mcar_estimate_is_post_processing_with_labels(eps):
    X, _ = _mcar(m=5)
    df = pd.DataFrame(X, columns=[f"q{i}" for i in range(5)])
    rel = release_totals(df, epsilon=eps, seed=3, missing="mcar")
    K = rel.k_edges.size - 1
    assert (K > 1) == (eps > 1)  # the design keeps one bin of k at ε = 1, several at ε = 30 (n = 600, m = 5)
    a = estimate_from_release(rel, n_boot=20, seed=5)
    assert a.info["k_bins"] == K and a.release is rel
    b = estimate_from_release(rel, n_boot=20, seed=5)
    assert a.beta.equals(b.beta) and a.ci.equals(b.ci) and a.privacy is rel.privacy
    assert list(a.to_frame().index) == list(df.columns) and list(a.to_frame().columns) == [
        "beta", "se", "lo", "hi", "beta_unshrunk"]
    assert abs(a.beta.sum()) < 1e-9 and np.all(a.ci["lo"] < a.ci["hi"]) and np.all(a.se > 0)
    assert estimate_from_release(rel, n_boot=0).se.isna().all()


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_each_part_has_the_sensitivity_the_calibration_composes(m):
    # ρ = m/(2σ_s²) + m/(2σ_a²) + 2/(2σ_h²) needs L2² ≤ m, m, 2 part by part, attained together
    rows = np.array(list(itertools.product([0, 1, -1], repeat=m)), dtype=np.int8)
    parts = [missing_statistics(r[None, :], np.array([0, m + 1]), np.array([0, 1, m + 1])) for r in rows]
    worst = [0, 0, 0]
    for x, y in itertools.combinations(parts, 2):
        d = [int(np.sum((np.asarray(u, dtype=np.int64) - v) ** 2)) for u, v in zip(x, y)]
        worst = [max(w, e) for w, e in zip(worst, d)]
    assert worst == [m, m, 2]
    full, empty = (missing_statistics(np.full((1, m), v, dtype=np.int8), np.array([0, m + 1]),
                                      np.array([0, 1, m + 1])) for v in (1, -1))
    assert [int(np.sum((np.asarray(u, dtype=np.int64) - v) ** 2)) for u, v in zip(full, empty)] == [m, m, 2]


@pytest.mark.parametrize("missing", ["none", "mcar"])
def test_totals_measurement_carries_its_privacy_map(missing):
    from mechanisms import ApproxDP, ZCDP
    from privirt.private import Measurement, TotalsGaussian
    from privirt.private.totals.api import missing_sensitivity, totals_sensitivity

    target = ApproxDP(0.7, 1e-6)
    meas = TotalsGaussian.calibrate(target, n_persons=800, n_items=9, missing=missing)
    assert isinstance(meas, Measurement) and meas.measure is ZCDP and isinstance(meas.native, ZCDP)
    assert meas.guarantee.epsilon <= 0.7 and meas.guarantee.epsilon >= 0.7 * 0.999
    B = len(meas.edges) - 1
    proven = missing_sensitivity(9, B) if missing == "mcar" else totals_sensitivity(9, B)
    assert (meas.sensitivity.l1, meas.sensitivity.l2, meas.sensitivity.n_released) == (
        proven.l1, proven.l2, proven.n_released)
    assert len(meas.sigmas) == (3 if missing == "mcar" else 2) and meas.noise_value == meas.sigmas[0]
    assert meas.map() == meas.native and meas.cost.rho == meas.native.rho
    halved = [(d / 2, k) for d, k in meas._part_sens]
    assert meas.map(halved).rho == pytest.approx(meas.native.rho / 4, rel=1e-6)
    st = meas.statement(private=False, n_persons=800, spend_id=None)
    assert st.guarantee == meas.guarantee and st.n_persons == 800 and "NOT PRIVATE" in str(st)
    assert ("missing completely at random" in " ".join(st.notes)) == (missing == "mcar")


# -- the maths ----------------------------------------------------------------------------
def _ratio_error(n, m, g, rho_t, rng, reps=300, rates_sd=None):
    """Monte-Carlo centred error Σ_i (u_i e_a,i − d_i e_s,i)² of the ratios' linearised β noise
    at the reference model, the answered counts shrunk as the estimator shrinks them
    (answer rate 0.8, binomial counts; docs/totals.md §7.2), in units of S·A_d.  ``rates_sd``:
    the items' logit answer rates spread with an SD drawn per replicate from a half-normal of
    that scale (the answered counts' prior) instead of being equal."""
    p, w = marginal_missing._reference_marginals(m)
    d, u = np.sqrt(w), p * np.sqrt(w)
    S = m / (2 * rho_t)
    vs, va = S / (1 - g), S / g
    tot = 0.0
    for _ in range(reps):
        sd = 0.0 if rates_sd is None else abs(rng.normal(0.0, rates_sd))
        a = rng.binomial(n, special.expit(special.logit(0.8) + sd * rng.normal(size=m))).astype(float)
        noisy = a + rng.normal(0.0, math.sqrt(va), m)
        c = marginal_missing.answered_factor(noisy, n, va)
        ea = noisy.mean() + c * (noisy - noisy.mean()) - a
        e = d * rng.normal(0.0, math.sqrt(vs), m) - u * ea
        tot += float(np.sum((e - e.mean()) ** 2))
    return tot / reps / (S * (1 - 1 / m) * np.sum(w))


def test_answered_share_minimises_the_ratio_noise():
    # unshrunk limit (the answered counts' noise far below their sampling spread): g = √P/(1 + √P)
    for m in (3, 10, 40):
        p, w = marginal_missing._reference_marginals(m)
        P = np.sum(w * p * p) / np.sum(w)
        g, E = marginal_missing.answered_share(10**9, m, 1e3)
        assert abs(g - math.sqrt(P) / (1 + math.sqrt(P))) < 2e-3
        assert abs(E - (1 + math.sqrt(P)) ** 2) < 2e-3 * E
        assert 0.3 < g < 0.4  # p near ½: about a third of the totals' budget on the answered counts
    # the estimator shrinks the answered counts toward their mean: where their noise swamps any
    # spread of answer rates the prior allows, most of it goes and the share they need falls
    # (s9: 0.35 everywhere) ...
    g_small, _ = marginal_missing.answered_share(200, 20, 0.004)
    assert g_small < 0.2
    # ... but not where a real spread of the rates would be detectable: the risk is averaged over
    # the prior's spreads, not taken at equal rates (which gave 0.2 here and lost up to 23 % of
    # MSE when the items' answer rates differed; docs/totals.md §7.2)
    g_big, _ = marginal_missing.answered_share(2000, 20, 0.004)
    assert g_big > 0.25
    # g is the minimum of E on its grid, E from the shrinkage's risk and the mean's weight
    Ad, Au, Ac = marginal_missing._reference_weights(10)
    va = 10 / (2 * 0.005) / marginal_missing._G_GRID
    E = 1 / (1 - marginal_missing._G_GRID) + (marginal_missing.answered_risk(500, 10, va) * Au
                                              + marginal_missing.mean_weight(500, 10, va) / 10) / Ad / marginal_missing._G_GRID
    gs, Es = marginal_missing.answered_share(500, 10, np.array([0.005, 0.05]))
    assert gs.shape == Es.shape == (2,)
    assert gs[0] == marginal_missing._G_GRID[np.argmin(E)] and Es[0] == pytest.approx(E.min())
    f, g, e, ke = marginal_missing.mcar_design(1000, 20, 0.05)
    assert (f, g) == marginal_missing.mcar_design(1000, 20, 0.05)[:2]
    assert g == pytest.approx(float(marginal_missing.answered_share(1000, 20, (1 - f) * 0.05)[0]))
    for x in (e, ke):
        assert x[0] == 0 and x[-1] == 21 and np.all(np.diff(x) > 0)
    assert 0 < f < 0.6 and len(ke) - 1 in marginal_missing.K_BINS
    assert abs(marginal_missing.mcar_design(1000, 20, 0.05, q=0.7)[0] - f) < 0.5 * f  # moves little with q


def test_answered_risk_is_what_the_shrinkage_leaves():
    # the tabulated risk of the shrunk answered counts (docs/totals.md §7.2) against simulation,
    # averaged over the prior's spreads of the answer rates as the table is
    rng = np.random.default_rng(11)
    n, m, q = 500, 10, 0.8
    A = n * q * (1 - q) * (1 - marginal_missing.REFERENCE_ICC)
    for ratio in (0.3, 3.0, 30.0):
        va = ratio * A
        err = []
        for _ in range(600):
            # the reference's sampling spread plus a spread of the items' answer rates drawn
            # from the answered counts' prior (half-normal SD of the logit rates, scale 0.8)
            sd = abs(rng.normal(0.0, 0.8))
            t = n * q + rng.normal(0.0, math.sqrt(A), m) + n * q * (1 - q) * sd * rng.normal(size=m)
            x = t + rng.normal(0.0, math.sqrt(va), m)
            c = marginal_missing.answered_factor(x, n, va)
            err.append(np.sum((c * (x - x.mean()) - (t - t.mean())) ** 2))
        got = np.mean(err) / ((m - 1) * va)
        assert got == pytest.approx(float(marginal_missing.answered_risk(n, m, va)), rel=0.12), ratio


def test_derived_answered_share_lowers_the_ratios_noise():
    # the items' answer rates spread as the answered counts' prior says (what the share is
    # derived for, docs/totals.md §7.2).  Where the noise swamps that spread (n = 200, m = 10,
    # ε = 0.3) the derived share beats the unshrunk rule's 0.35 on the ratios' simulated error
    # (this linearised simulation leaves out the answered mean's non-linear cost, mean_weight,
    # so it does not locate the minimum at this n) ...
    n, m, rho_t = 200, 10, 0.0043
    g, E = marginal_missing.answered_share(n, m, rho_t)
    new = _ratio_error(n, m, float(g), rho_t, np.random.default_rng(3), rates_sd=0.8)
    old = _ratio_error(n, m, 0.351, rho_t, np.random.default_rng(3), rates_sd=0.8)
    assert g < 0.2 and new < 0.9 * old, (g, new, old)
    assert new == pytest.approx(float(E), rel=0.12)
    # ... and where a real spread of the rates is detectable (n = 2000, the mean precise) it keeps
    # about the unshrunk share, the minimum: the equal-rate reference's 0.17 there loses when the
    # rates differ
    g2, E2 = marginal_missing.answered_share(2000, m, rho_t)
    new2 = _ratio_error(2000, m, float(g2), rho_t, np.random.default_rng(3), rates_sd=0.8)
    equal_ref = _ratio_error(2000, m, 0.17, rho_t, np.random.default_rng(3), rates_sd=0.8)
    assert g2 > 0.25 and new2 < 0.95 * equal_ref, (g2, new2, equal_ref)
    assert new2 == pytest.approx(float(E2), rel=0.12)
    for other in (0.5 * g2, 1.6 * g2):
        assert _ratio_error(2000, m, float(other), rho_t, np.random.default_rng(3), rates_sd=0.8) > 0.97 * new2


def test_answered_mean_weight_is_linear_only_while_the_mean_is_precise():
    # the answered counts' mean divides every p_i: linear (A_c) while its relative error is
    # small; where it is not (few persons, a large σ_a) clipped proportions and the inversion's
    # curvature cost more, and that keeps g from collapsing (docs/totals.md §7.2)
    for m in (5, 10):
        Ac = marginal_missing._reference_weights(m)[2]
        n, q = 200, marginal_missing.REFERENCE_ANSWERED
        tiny = m * (1e-3 * n * q) ** 2  # σ_a² for a relative error of 0.1 % in the mean
        assert float(marginal_missing.mean_weight(n, m, tiny)) == pytest.approx(Ac, rel=0.01)
        big = m * (0.15 * n * q) ** 2
        assert float(marginal_missing.mean_weight(n, m, big)) > 3 * Ac
        K = marginal_missing.mean_weight(n, m, tiny * np.geomspace(1, 1e8, 40))
        assert np.all(np.diff(K) >= 0)
    assert 0.1 < float(marginal_missing.answered_share(200, 10, 0.0045)[0]) < 0.3  # not the linear 0.07


def test_mcar_score_distribution_matches_enumeration():
    rng = np.random.default_rng(5)
    m = 5
    beta = rng.normal(0, 1.5, size=(2, m))
    q = rng.uniform(0.5, 1.0, size=m)
    theta, _ = marginal.ability_grid(np.log([0.7, 2.0]))
    got = marginal_missing.score_distribution_mcar(beta, q, theta)
    cells = np.array(list(itertools.product([0, 1, -1], repeat=m)))  # -1: not answered
    for t in range(2):
        pr = special.expit(theta[t][None, None, :] - beta[t][None, :, None])
        like = np.prod(np.where(cells[:, :, None] == 1, q[None, :, None] * pr,
                                np.where(cells[:, :, None] == 0, q[None, :, None] * (1 - pr),
                                         1 - q[None, :, None])), axis=1)
        r = (cells == 1).sum(axis=1)
        want = np.stack([like[r == k].sum(axis=0) for k in range(m + 1)], axis=1)
        assert np.allclose(got[t], want, atol=1e-12)
    # q = 1 is the complete-data score distribution
    assert np.allclose(marginal_missing.score_distribution_mcar(beta, np.ones(m), theta),
                       marginal.score_distribution(beta, theta), atol=1e-12)


@pytest.mark.parametrize("thinned", [False, True])
def test_batched_mcar_fit_equals_one_at_a_time(thinned):
    X, _ = _mcar(n=1500, m=7, seed=4)
    rel = release_totals(X, epsilon=2.0, seed=3, missing="mcar")
    n, edges, B = rel.n_persons, rel.edges, len(rel.edges) - 1
    tp, q, v = marginal_missing.ratio_proportions(rel.totals.to_numpy(float), rel.answered.to_numpy(float), n,
                                                  rel.sigma_totals**2, rel.sigma_answered**2)
    p0 = shrinkage.centre_totals(tp, n, v)
    vh = rel.sigma_histogram**2
    k_edges = np.array([0, 4, 6, 8])  # three bins of the number answered
    if thinned:  # a (k, r) histogram of three k-bins, each data set with its own fitted φ
        codes = np.where(np.isnan(X), -1, X).astype(np.int8)
        h0 = missing_statistics(codes, k_edges, edges)[2].ravel().astype(float)
    else:
        h0 = rel.histogram.to_numpy(float).reshape(-1, B).sum(axis=0)
    rng = np.random.default_rng(0)
    P = np.clip(p0[None, :] + rng.normal(0, 0.02, (4, p0.size)), 0.01, 0.99)
    Q = np.clip(q[None, :] + rng.normal(0, 0.01, (4, q.size)), 0.5, 1.0)
    H = h0[None, :] + rng.normal(0, 20, (4, h0.size))
    if thinned:
        mu = Q.mean(axis=1)
        icc = marginal_missing.fit_answered_icc(H, n, vh, mu, k_edges, B)
        A = marginal_missing.thinning_matrix(
            marginal_missing.answered_distribution(7, mu[:, None], icc[:, None])[:, 0], k_edges, edges)
    else:
        A = None
    fit = marginal_missing.fit_spread_mcar(p0, q, h0, n, vh, edges, A=None if A is None else A[0])
    support = fit.support()
    theta, w = marginal.ability_grid(support[0], kappa=support[1], lam=support[2])
    got = marginal_missing.fit_support_batch_mcar(P, Q, H, n, vh, edges, support,
                                                  initial=marginal.invert_marginals(p0, theta, w), A=A)
    for r in range(4):
        one = marginal_missing.fit_spread_mcar(P[r], Q[r], H[r], n, vh, edges, support=support,
                                               A=None if A is None else A[r]).beta
        assert np.allclose(got[r], one, atol=1e-5)


def test_answered_counts_shrink_toward_their_mean_only_where_the_noise_hides_their_spread():
    # issue 26's MCAR corner (n = 2000, m = 5, ε = 0.3: σ_a ≈ 41 against answered counts that
    # differ by ≈ 18 under a common 20 % missing rate): the ratios s_i/a_i used each noisy a_i
    # as it came; shrunk toward their mean (the totals' empirical Bayes, docs/totals.md §7.3
    # step 1) the answered counts' error falls, and counts that really differ are kept
    n, m, sig = 2000, 5, 41.0
    rng = np.random.default_rng(5)
    s = np.full(m, 900.0)
    err_raw, err_new, v_ratio = [], [], []
    for _ in range(200):
        a = rng.binomial(n, 0.8, m).astype(float)
        noisy = a + rng.normal(0.0, sig, m)
        _, q, v = marginal_missing.ratio_proportions(s, noisy, n, 30.0**2, sig**2)
        _, _, v_raw = marginal_missing.ratio_proportions(s, noisy, n, 30.0**2, 0.0)
        err_raw.append(np.mean((noisy - a) ** 2))
        err_new.append(np.mean((n * q - a) ** 2))
        v_ratio.append(v / v_raw)
    assert np.mean(err_new) < 0.6 * np.mean(err_raw), (np.mean(err_new), np.mean(err_raw))
    assert np.median(v_ratio) > 1.0  # the ratios' noise variance still counts what is left of σ_a
    # answer rates from 0.5 to 0.95: a spread of ≈ 300 against σ_a = 41, kept
    a = n * np.linspace(0.5, 0.95, m)
    noisy = a + rng.normal(0.0, sig, m)
    _, q, _ = marginal_missing.ratio_proportions(s, noisy, n, 30.0**2, sig**2)
    assert np.max(np.abs(n * q - noisy)) < 0.05 * sig * m


# -- statistical behaviour ------------------------------------------------------------------
def test_mcar_accurate_when_the_budget_is_large():
    X, beta = _mcar(n=4000, m=8, rate=0.3, seed=2)
    fit = private_totals_estimate(X, epsilon=20.0, n_boot=20, missing="mcar")
    ref = privirt.cmle_estimate(X).beta.to_numpy()
    assert np.max(np.abs(fit.beta.to_numpy() - (ref - ref.mean()))) < 0.12
    assert np.max(np.abs(fit.beta.to_numpy() - beta)) < 0.2
    assert fit.info["shrinkage"] > 0.99 and abs(fit.info["answered_share"] - 0.7) < 0.02


@pytest.mark.slow
def test_mcar_interval_coverage_on_a_small_case():
    hits = []
    for k in range(24):
        X, beta = _mcar(n=600, m=6, rate=0.2, seed=500 + k)
        fit = private_totals_estimate(X, epsilon=1.0, seed=k, n_boot=40, missing="mcar")
        hits.append((fit.ci["lo"].to_numpy() <= beta) & (beta <= fit.ci["hi"].to_numpy()))
    cov = float(np.mean(hits))
    assert 0.85 <= cov <= 0.995, cov
    assert math.isfinite(cov)


def test_mcar_intervals_are_centred_on_the_unshrunk_fit_as_for_complete_data():
    # the MCAR fit is the mixture: its bootstrap bias is the priors', not subtracted (§5.3, §7.3)
    X, _ = _mcar(n=300, m=8, rate=0.3, seed=77)
    fit = private_totals_estimate(X, epsilon=0.3, seed=5, n_boot=40, missing="mcar")
    centre = ((fit.ci["lo"] + fit.ci["hi"]) / 2).to_numpy()
    np.testing.assert_allclose(centre, fit.beta_unshrunk.to_numpy(), atol=1e-12)
    assert fit.info["missing"] == "mcar" and np.all(fit.se.to_numpy() > 0)


# -- several bins of the number answered ------------------------------------------------------
def _persons_mask(n, m, rate, seed):
    """Rasch data with a per-person missing rate ~ Beta (mean ``rate``): MCAR, overdispersed k."""
    X, _, beta = privirt.simulate_rasch(n, m, seed=seed)
    X = X.astype(float)
    rng = np.random.default_rng(seed + 2000)
    r = rng.beta(2.0, 2.0 * (1 - rate) / rate, size=(n, 1))
    X[rng.random(X.shape) < r] = np.nan
    return X, beta - beta.mean()


def _proportions(rel):
    n = rel.n_persons
    tp, q, v = marginal_missing.ratio_proportions(rel.totals.to_numpy(float), rel.answered.to_numpy(float), n,
                                                  rel.sigma_totals**2, rel.sigma_answered**2)
    return shrinkage.centre_totals(tp, n, v), q


def test_answered_distribution_is_the_beta_binomial():
    from scipy import stats

    for mu, icc in ((0.8, 0.1), (0.3, 0.02), (0.6, 0.5)):
        a = mu * (1 / icc - 1)
        got = marginal_missing.answered_distribution(9, mu, icc)
        assert np.allclose(got, stats.betabinom.pmf(np.arange(10), 9, a, a * (1 - mu) / mu), atol=1e-12)
    assert np.allclose(marginal_missing.answered_distribution(9, 0.7, 0.0), stats.binom.pmf(np.arange(10), 9, 0.7))


def test_thinned_cells_match_enumeration():
    # P(k bin, r bin | ability model) when k ~ pk and the answered set is a uniform k-subset
    m = 4
    rng = np.random.default_rng(8)
    beta = rng.normal(0, 1.2, size=(2, m))
    theta, w = marginal.ability_grid(np.log([0.6, 1.8]), kappa=np.array([0.0, 0.7]))
    pk = rng.dirichlet(np.ones(m + 1))
    k_edges, r_edges = np.array([0, 2, 4, 5]), np.array([0, 1, 3, 5])
    A = marginal_missing.thinning_matrix(pk, k_edges, r_edges)
    got = marginal_missing.thinned_cell_probabilities(beta, theta, w, A)
    xs = np.array(list(itertools.product([0, 1], repeat=m)))
    for t in range(2):
        pr = special.expit(theta[t][None, :] - beta[t][:, None])  # (m, Q)
        px = np.prod(np.where(xs[:, :, None] == 1, pr[None], 1 - pr[None]), axis=1) @ w[t]  # P(x)
        want = np.zeros((3, 3))
        for subset in itertools.product([0, 1], repeat=m):
            k = sum(subset)
            r = xs @ np.array(subset)
            kb = np.searchsorted(k_edges, k, side="right") - 1
            rb = np.searchsorted(r_edges, r, side="right") - 1
            np.add.at(want[kb], rb, px * pk[k] / math.comb(m, k))
        assert np.allclose(got[t], want.ravel(), atol=1e-12)


def test_simulated_masks_follow_the_fitted_number_answered():
    X, _ = _persons_mask(3000, 10, 0.3, seed=11)
    fit = private_totals_estimate(X, epsilon=50.0, seed=2, n_boot=0, missing="mcar")
    rel = fit.release
    assert rel.k_edges.size >= 3 and rel.histogram.index.names == ["answered", "score"]
    p, q = _proportions(rel)
    sf = marginal_missing.fit_spread_mcar(p, q, rel.histogram.to_numpy(float), rel.n_persons,
            rel.sigma_histogram**2, rel.edges, A=marginal_missing.thinning_matrix(
                marginal_missing.answered_distribution(10, q.mean(), fit.info["answered_icc"]), rel.k_edges, rel.edges))
    _s, a, h = mcar_bootstrap.simulate_mcar_statistics(np.random.default_rng(0), sf, fit.beta.to_numpy(), q,
                                                      rel.n_persons, rel.edges, 20, k_edges=rel.k_edges,
                                                      icc=fit.info["answered_icc"])
    assert np.allclose(a.mean(axis=0) / rel.n_persons, q, atol=0.02)  # items keep their answer rates
    K, B = rel.k_edges.size - 1, rel.edges.size - 1
    hk = h.reshape(20, K, B).sum(axis=2).mean(axis=0)
    observed = rel.histogram.to_numpy(float).reshape(K, B).sum(axis=1)
    assert np.allclose(hk, observed, atol=0.02 * rel.n_persons)  # the released k-margins are reproduced
    assert np.allclose(h.sum(axis=1), rel.n_persons)


def test_answered_mixing_is_the_average_over_active_subsets():
    from privirt.private.totals.answered_mask import answered_mixing, mask_rates

    q = np.array([0.05, 1.0, 0.97, 0.6, 0.3])
    mu, lo, hi = mask_rates(q)
    assert np.allclose(lo * (1 - mu) + hi * mu, q) and np.all((lo >= 0) & (hi <= 1))  # E p_i(U) = q_i
    C = answered_mixing(q)
    m = q.size
    for j in range(m + 1):
        subsets = list(itertools.combinations(range(m), j))
        want = np.zeros(m + 1)
        for S in subsets:
            d = np.array([1.0])
            for i in range(m):
                d = np.convolve(d, [1 - (hi[i] if i in S else lo[i]), hi[i] if i in S else lo[i]])
            want += d / len(subsets)
        assert np.allclose(C[:, j], want, atol=1e-12)
    assert np.allclose(answered_mixing(np.full(6, 0.8)), np.eye(7), atol=1e-12)  # equal rates: beta-binomial
    assert np.allclose(marginal_missing.answered_distribution(6, 0.8, 0.2, answered_mixing(np.full(6, 0.8))),
                       marginal_missing.answered_distribution(6, 0.8, 0.2), atol=1e-12)


@pytest.mark.parametrize("icc", [0.0, 0.3])
def test_simulated_masks_keep_strongly_unequal_answer_rates(icc):
    # one item answered by 5 %, others by everyone: the simulated mask keeps every item's rate
    # and the number answered has the distribution the fit uses (the weighted k-subset of a
    # beta-binomial k gave the rare item 0.3-0.8 and under-covered its interval)
    q = np.array([0.05, 1.0, 1.0, 0.98, 0.6, 0.3, 1.0, 0.9])
    m, n, reps = q.size, 4000, 10
    theta, w = marginal.ability_grid(np.array([0.0]))
    _s, a, h = mcar_bootstrap.simulate_mcar_statistics(
        np.random.default_rng(12), None, np.linspace(-1, 1, m), q, n, np.array([0, 3, 6, m + 1]), reps,
        k_edges=np.arange(m + 2), icc=icc, ability=(theta[0], w[0]))
    assert np.allclose(a.mean(axis=0) / n, q, atol=0.01), a.mean(axis=0) / n
    pk = h.reshape(reps, m + 1, 3).sum(axis=(0, 2)) / (n * reps)
    want = marginal_missing.answered_distribution(m, q.mean(), icc, marginal_missing.answered_mixing(q))
    assert np.allclose(pk, want, atol=0.01), (pk, want)


@pytest.mark.slow
def test_mcar_interval_coverage_of_a_rarely_answered_item():
    # item 0 answered by 10 % of persons, the others by everyone (planned missingness, §7.3):
    # its interval covered about 0.3 when the simulated mask gave it 0.8 of the persons
    hits = []
    for k in range(16):
        X, beta = _mcar(n=1500, m=6, rate=0.0, seed=900 + k)
        X[np.random.default_rng(k).random(X.shape[0]) > 0.1, 0] = np.nan
        fit = private_totals_estimate(X, epsilon=1.0, seed=k, n_boot=60, missing="mcar")
        hits.append((fit.ci["lo"].to_numpy() <= beta) & (beta <= fit.ci["hi"].to_numpy()))
    hits = np.array(hits)
    assert hits[:, 0].mean() >= 0.75 and hits.mean() >= 0.85, hits.mean(axis=0)


def test_person_level_missingness_is_fitted_at_large_epsilon():
    # per-person missing rates (still MCAR) overdisperse the observed score; one bin of k with
    # independently answered cells overestimates the ability spread, the (k, r) fit does not
    X, beta = _persons_mask(4000, 10, 0.3, seed=21)
    fit = private_totals_estimate(X, epsilon=20.0, seed=3, n_boot=0, missing="mcar")
    assert fit.info["k_bins"] >= 2 and 0.05 < fit.info["answered_icc"] < 0.3  # Beta(2, 4.67): φ = 0.13
    rel = fit.release
    n, B = rel.n_persons, rel.edges.size - 1
    p, q = _proportions(rel)
    one_bin = marginal_missing.fit_spread_mcar(p, q, rel.histogram.to_numpy(float).reshape(-1, B).sum(axis=0),
                                               n, rel.sigma_histogram**2, rel.edges)
    assert abs(fit.info["tau"] - 1.0) < 0.1 and one_bin.tau > fit.info["tau"] + 0.1
    err = fit.beta.to_numpy() - beta
    err_one = one_bin.beta - beta
    assert np.max(np.abs(err)) < 0.15 and err @ err < 0.5 * (err_one @ err_one)


@pytest.mark.slow
def test_mcar_interval_coverage_with_person_level_missingness():
    hits = []
    for k in range(16):
        X, beta = _persons_mask(1500, 6, 0.3, seed=700 + k)
        fit = private_totals_estimate(X, epsilon=3.0, seed=k, n_boot=40, missing="mcar")
        assert fit.info["k_bins"] >= 2
        hits.append((fit.ci["lo"].to_numpy() <= beta) & (beta <= fit.ci["hi"].to_numpy()))
    cov = float(np.mean(hits))
    assert 0.85 <= cov <= 0.995, cov


@pytest.mark.parametrize("missing", ["none", "mcar"])
def test_totals_accounting_matches_opendp(missing):
    # each part as OpenDP's Gaussian on a vector with its proven L2 sensitivity (√m for the
    # totals and answered counts, √2 for the histogram), the ρ summed (zCDP composition) and
    # converted by OpenDP's zCDP → (ε, δ): the statement claims no less ρ and no smaller ε
    X, _, _ = privirt.simulate_rasch(500, 7, seed=1)
    for eps in (0.3, 1.0, 4.0):
        rel = release_totals(X, epsilon=eps, delta=1e-5, seed=1, missing=missing)
        sigmas = [rel.sigma_totals] + ([rel.sigma_answered] if missing == "mcar" else []) + [rel.sigma_histogram]
        sens = [math.sqrt(7)] * (len(sigmas) - 1) + [math.sqrt(2)]
        assert_statement_matches_opendp(rel.privacy, zip(sigmas, sens), eps)


def test_mcar_intervals_carry_the_ability_scale_the_histogram_leaves_open():
    # as for complete data (tests/test_totals_short.py, docs/totals.md §5.4): where the (k, r)
    # histogram says nothing about the ability spread τ, every difficulty is uncertain by a
    # common scale factor. The MCAR bootstrap held every replicate at the posterior mode and saw
    # only the ratios' noise; each replicate's ability model is now drawn from the posterior
    # (§7.4), so the se grows with |β̂|.
    X, _ = _mcar(3000, 10, 0.2, seed=3)
    rel = release_totals(X, epsilon=10.0, seed=1, missing="mcar")  # precise totals and answered counts
    vague = silent_histogram(rel)
    assert_se_scales_with_difficulty([estimate_from_release(vague, n_boot=60, seed=s) for s in range(6)])


def test_mcar_simulation_takes_the_ability_model_it_is_given():
    from privirt.private.totals.api import _fit_mcar

    X, _ = _mcar(800, 6, 0.2, seed=4)
    rel = private_totals_estimate(X, epsilon=5.0, seed=2, n_boot=0, missing="mcar").release
    sf, beta, _c, _d, q, icc = _fit_mcar(rel, shrink=True)
    k_edges = None if rel.k_edges is None or rel.k_edges.size < 3 else rel.k_edges
    theta, w = marginal.ability_grid(np.log([3.0]))
    args = (sf, beta, q, rel.n_persons, rel.edges, 40, k_edges, icc)
    _, _, h_mode = mcar_bootstrap.simulate_mcar_statistics(np.random.default_rng(0), *args)
    _, _, h_wide = mcar_bootstrap.simulate_mcar_statistics(np.random.default_rng(0), *args,
                                                           ability=(theta[0], w[0]))
    # abilities of SD 3: most persons answer all or none of what they saw, the extreme bins fill
    B = rel.edges.size - 1
    ends = [h.reshape(40, -1, B)[:, :, [0, -1]].sum(axis=(1, 2)).mean() for h in (h_mode, h_wide)]
    assert ends[1] > ends[0] + 0.15 * rel.n_persons, ends


def test_mcar_design_searches_only_the_score_bins_it_is_given():
    # the benchmark's design variants (docs/totals.md §7.5): the default search is unchanged
    rho = 0.05
    f, g, edges, k_edges = marginal_missing.mcar_design(500, 5, rho)
    assert edges.size - 1 == 6  # the full observed-score distribution at this (n, m, ρ)
    f3, g3, e3, _ = marginal_missing.mcar_design(500, 5, rho, score_bins=[3])
    assert e3.size - 1 == 3 and e3[0] == 0 and e3[-1] == 6 and 0 < f3 < 0.6


def _two_groups(n, m, rate, seed):
    """Abilities in two groups at ±2.5 (SD 0.5 each), difficulties N(0, 1), cells missing at ``rate``."""
    rng = np.random.default_rng(seed)
    theta = np.where(rng.random(n) < 0.5, -2.5, 2.5) + 0.5 * rng.standard_normal(n)
    beta = rng.standard_normal(m)
    X = (rng.random((n, m)) < special.expit(theta[:, None] - beta[None, :])).astype(float)
    X[rng.random(X.shape) < rate] = np.nan
    return X, beta - beta.mean()


@pytest.mark.parametrize("rule", ["mean", "mode"])
def test_mcar_point_rules_of_the_benchmark(monkeypatch, rule):
    # the benchmark's alternatives to β at the grid point nearest the posterior mean (docs/totals.md
    # §7.4, session 12: measured, not adopted): the posterior mean of β, or β at the posterior mode,
    # taken alike by the point fit and the replicates' batched refits
    X, _ = _two_groups(300, 6, 0.2, seed=2)
    rel = release_totals(X, epsilon=1.0, seed=5, missing="mcar")
    n = rel.n_persons
    tp, q, v = marginal_missing.ratio_proportions(rel.totals.to_numpy(float), rel.answered.to_numpy(float), n,
                                                  rel.sigma_totals**2, rel.sigma_answered**2)
    p = shrinkage.centre_totals(tp, n, v)
    h, vh = rel.histogram.to_numpy(float), rel.sigma_histogram**2
    nearest = marginal_missing.fit_spread_mcar(p, q, h, n, vh, rel.edges)
    monkeypatch.setattr(marginal_missing, "MCAR_POINT", rule)
    fit = marginal_missing.fit_spread_mcar(p, q, h, n, vh, rel.edges)
    post, beta, nll = marginal_missing._posterior(p, q, h, n, vh, rel.edges, fit.log_tau, fit.kappa, fit.lam)
    bc = beta - beta.mean(axis=1, keepdims=True)
    assert np.allclose(fit.beta, post @ bc if rule == "mean" else bc[np.argmin(nll)], atol=1e-9)
    assert not np.allclose(fit.beta, nearest.beta, atol=1e-3)
    got = marginal_missing.fit_support_batch_mcar(p, q, h, n, vh, rel.edges, fit.support())[0]
    one = marginal_missing.fit_spread_mcar(p, q, h, n, vh, rel.edges, support=fit.support()).beta
    assert np.allclose(got, one, atol=1e-5)


def test_the_hypergeometric_table_is_built_once_per_design_and_equals_scipys(monkeypatch):
    """The design built the (m + 1)³ table through scipy once per candidate (K, B): 113 times,
    22 s at m = 150 (hours at m = 1000).  Once now, from log binomial coefficients."""
    from privirt.private.totals import marginal_missing as mm

    for m in (1, 2, 7, 40):
        H = mm._hypergeometric(m)
        ref = np.concatenate([np.zeros((m + 1, m + 1, 1)), np.cumsum(H, axis=2)], axis=2)
        np.testing.assert_allclose(mm._hypergeometric_cumulative(m), ref, rtol=0, atol=1e-13)
    built = []
    real = mm._hypergeometric_cumulative
    monkeypatch.setattr(mm, "_hypergeometric_cumulative", lambda m: built.append(m) or real(m))
    mm.mcar_design(1000, 30, 0.5)
    assert built == [30]


@pytest.mark.parametrize("m", [0, 1])
def test_an_mcar_design_of_fewer_than_two_items_is_refused_in_one_line(m):
    from privirt.private.accounting import ApproxDP
    from privirt.private.measurements import TotalsGaussian

    with pytest.raises(ValueError, match=rf"^the totals estimator's MCAR design needs at least 2 items, got {m}$"):
        marginal_missing.mcar_design(500, m, 0.5)
    with pytest.raises(ValueError, match="needs at least 2 items, got 1"):
        TotalsGaussian.calibrate(ApproxDP(1.0, 1e-5), n_persons=500, n_items=1, missing="mcar")


def test_an_mcar_release_of_more_items_than_its_design_holds_is_refused_and_the_default_is_algorithm_2(tmp_path, capsys):
    from privirt.private.choose import default_private_method
    from privirt.private.ledger import Ledger
    from privirt.private.totals.marginal_missing import MCAR_MAX_ITEMS

    m = MCAR_MAX_ITEMS + 1
    rng = np.random.default_rng(310_030)
    X = (rng.random((40, m)) < 0.5).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    ledger = Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-3)
    # the advice was method='spectral', a keyword neither function has (a TypeError followed it)
    with pytest.raises(ValueError, match=rf"built for up to {MCAR_MAX_ITEMS} items.*use privirt\.private_spectral_estimate \("):
        privirt.release_totals(X, epsilon=1.0, delta=1e-5, missing="mcar", ledger=ledger)
    with pytest.raises(ValueError, match=r"use privirt\.private_spectral_estimate \("):
        privirt.private_totals_estimate(X, epsilon=1.0, delta=1e-5, missing="mcar", seed=310_032)
    assert len(ledger.spends()) == 0
    assert default_private_method(40, m, 1.0, 1e-5, missing="mcar") == "spectral"
    assert default_private_method(40, MCAR_MAX_ITEMS, 1.0, 1e-5, missing="mcar") == "totals"
    assert default_private_method(40, m, 1.0, 1e-5, missing="none") == "totals"
    # the command line's --missing mcar takes the default (it forced the totals method)
    from privirt.cli import main

    path = tmp_path / "x.csv"
    pd.DataFrame(X, columns=[f"i{k}" for k in range(m)]).to_csv(path, index=False)
    out = tmp_path / "o.json"
    assert main(["estimate", str(path), "--epsilon", "1", "--missing", "mcar", "--seed", "310031",
                 "--out", str(out), "--no-progress"]) == 0
    import json
    assert json.loads(out.read_text())["method"] == "spectral"
    # --method totals on such data suggests what works (it suggested --missing mcar, then refused it)
    capsys.readouterr()
    assert main(["estimate", str(path), "--epsilon", "1", "--method", "totals", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "use --method spectral" in err and "--missing mcar" not in err
    assert main(["estimate", str(path), "--epsilon", "1", "--method", "totals", "--missing", "mcar",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "use --method spectral" in err and 'missing="mcar"' not in err


def _rare_first_item(n, m, share, seed):
    """Rasch responses (difficulties evenly from −1.5 to 1.5) with item 0 answered by ``share``
    of the persons and the others by everyone."""
    rng = np.random.default_rng(seed)
    beta = np.linspace(-1.5, 1.5, m)
    X = (rng.random((n, m)) < special.expit(rng.normal(0, 1, n)[:, None] - beta)).astype(float)
    X[rng.random(n) > share, 0] = np.nan
    return X, beta - beta.mean()


def test_one_rarely_answered_item_does_not_shrink_the_others():
    # item 0 answered by 3 % (n = 2000, m = 10, ε = 1): its ratio's noise variance (≈ 5e5 on
    # the totals scale against ≈ 300 for the others) was pooled over the items, and one factor
    # of 0.3–0.9 shrank every difficulty; each item now has its own noise variance and factor
    n, m = 2000, 10
    X, _ = _rare_first_item(n, m, 0.03, 29_000_080)
    rel = release_totals(X, epsilon=1.0, seed=29_000_081, missing="mcar")
    tp, q, v = marginal_missing.ratio_proportions(rel.totals.to_numpy(float), rel.answered.to_numpy(float), n,
                                                  rel.sigma_totals**2, rel.sigma_answered**2)
    p, c, diag = shrinkage.shrink_totals(tp, n, v)
    p0 = shrinkage.centre_totals(tp, n, v)  # unshrunk
    kept = np.std(p[1:]) / np.std(p0[1:])
    assert kept > 0.97, kept
    assert np.shape(v) == (m,) and v[0] > 100 * v[1:].max()
    assert diag["shrinkage_items"][0] < 0.5 and min(diag["shrinkage_items"][1:]) > 0.97
    # equal variances given one per item are the one-variance model exactly
    v1 = float(np.mean(v[1:]))
    same = shrinkage.shrink_totals(tp, n, np.full(m, v1)), shrinkage.shrink_totals(tp, n, v1)
    assert np.array_equal(same[0][0], same[1][0]) and same[0][1] == same[1][1]
    draws = [shrinkage.population_draws(np.random.default_rng(1), tp, n, x, 5) for x in (np.full(m, v1), v1)]
    assert np.array_equal(*draws)
    # an item answered by 4 persons (its ratio 3, noise variance 5e7) moves neither the
    # others' level nor their spread (shrunk toward s̄, it moved every item by 0.3)
    t = tp.copy()
    t[0], vv = 3.0 * n, v.copy()
    vv[0] = 5e7
    p4 = shrinkage.shrink_totals(t, n, vv)[0]
    assert abs(np.mean(p4[1:]) - np.mean(tp[1:]) / n) < 0.01 and np.std(p4[1:]) > 0.97 * np.std(tp[1:] / n)
    draws = shrinkage.population_draws(np.random.default_rng(2), t, n, vv, 200)
    assert abs(np.mean(draws[:, 1:]) - np.mean(tp[1:]) / n) < 0.01


def test_estimate_keeps_the_spread_of_the_items_everyone_answered():
    n, m = 2000, 10
    err = []
    for k in range(3):
        X, beta = _rare_first_item(n, m, 0.03, 40 + k)
        fit = private_totals_estimate(X, epsilon=1.0, seed=k, n_boot=0, missing="mcar")
        b, bu = fit.beta.to_numpy(), fit.beta_unshrunk.to_numpy()
        assert np.std(b[1:]) > 0.95 * np.std(bu[1:]), (np.std(b[1:]), np.std(bu[1:]))
        err.append(b[1:] - beta[1:])
    assert np.sqrt(np.mean(np.square(err))) < 0.25


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_complete_data_with_persons_the_public_n_counts_beyond_them_is_named_so(engine, tmp_path):
    # the totals refusal said "the data have missing cells" for complete data whose public
    # n_persons counted 100 persons more (fdf22b0 fixed only the 2PL's wording)
    if engine == "dask":
        pytest.importorskip("distributed")
        pytest.importorskip("pyarrow")
    rng = np.random.default_rng(65_300_004)
    X = pd.DataFrame((rng.random((200, 4)) < 0.5).astype(float), columns=[f"q{j}" for j in range(4)])
    source = X
    if engine == "dask":
        source = tmp_path / "ok.parquet"
        X.to_parquet(source)
        source = str(source)
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-3)
    with pytest.raises(ValueError, match=r"^n_persons=300 counts persons absent from the data; they are "
                                         r"all-missing rows, but missing=\"none\" declares complete data"):
        privirt.release_totals(source, epsilon=1.0, n_persons=300, ledger=ledger, engine=engine,
                               items=list(X.columns))
    assert len(ledger.spends()) == 0
    X.iloc[0, 0] = np.nan  # a missing cell of the data themselves: the generic words
    with pytest.raises(ValueError, match=r"the data have missing cells"):
        privirt.release_totals(X, epsilon=1.0, ledger=ledger)
