"""The orbit moves of the 2PNO Gibbs sampler (privirt.bayes.moves): each must leave the target
distribution invariant.

The check is exact and cheap: draw many states (θ, a, b, Z) from the model's joint
distribution with y unobserved — the priors and Z_ij ~ N(a_j θ_i − b_j, 1) — apply the moves
once (the scale and shift of θ, and every item's latent scale, as the sampler applies them),
and test that the moved states have the same distribution (Kolmogorov–Smirnov on every
marginal and on the residual Z − (aθ − b)).  The sign of every Z is kept by the moves, so the
same holds given y.  A wrong Jacobian (the power of c or g off by one) moves these
distributions far beyond the tests' thresholds: the mutation tests below check that.
Whole chains against exact posteriors of tiny problems (with the moves on) are in
test_gibbs.py, test_gibbs_cpu.py and test_gpu_static.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import privirt
from privirt.bayes import moves, slopes, twopno

N_REP = 6000


def _prior_states(rng, B, n, k, pa, pb, positive, con):
    """B draws of (θ, a, b, Z) from the priors and the augmentation."""
    theta = rng.standard_normal((B, n))
    theta[:, con == 1] = np.abs(theta[:, con == 1])
    theta[:, con == -1] = -np.abs(theta[:, con == -1])
    if positive:
        a = stats.truncnorm.rvs(-pa[0] / math.sqrt(pa[1]), np.inf, loc=pa[0],
                                scale=math.sqrt(pa[1]), size=(B, k), random_state=rng)
    else:
        a = pa[0] + math.sqrt(pa[1]) * rng.standard_normal((B, k))
    b = pb[0] + math.sqrt(pb[1]) * rng.standard_normal((B, k))
    Z = theta[:, :, None] * a[:, None, :] - b[:, None, :] + rng.standard_normal((B, n, k))
    return theta, a, b, Z


def _move(theta, a, b, Z, pa, pb, anchors=None, seed=0):
    """Apply the sampler's moves (numpy engine code) to every state."""
    B, n, k = Z.shape
    codes = np.zeros((1, n, k), dtype=np.int8)  # every cell observed; y plays no part
    data = twopno.CpuData.build(codes, B, {"a": pa, "b": pb}, anchors=anchors)
    draws = twopno.GeneratorDraws([], [np.random.default_rng([seed, i]) for i in range(B)])
    rss = ((Z - (theta[:, :, None] * a[:, None, :] - b[:, None, :])) ** 2).sum(axis=1)
    c, d, g = twopno.orbit_moves(theta, a, b, data, draws, rss)
    th2 = c[:, None] * theta + d[:, None]
    a2 = a / c[:, None]
    b2 = b + a2 * d[:, None]
    return th2, g * a2, g * b2, g[:, None, :] * Z, (c, d, g)


def _pvalues(before, after):
    """Two-sample KS p-values of every marginal and of the residuals."""
    (t0, a0, b0, z0), (t1, a1, b1, z1) = before, after
    r0 = (z0 - (t0[:, :, None] * a0[:, None, :] - b0[:, None, :])).reshape(len(z0), -1)
    r1 = (z1 - (t1[:, :, None] * a1[:, None, :] - b1[:, None, :])).reshape(len(z1), -1)
    out = []
    for x, y in ((t0, t1), (a0, a1), (b0, b1), (r0, r1)):
        out += [stats.ks_2samp(x[:, j], y[:, j]).pvalue for j in range(x.shape[1])]
    # the scales, where a wrong Jacobian shows most: Σθ², Σa², Σr² per state
    for x, y in ((t0, t1), (a0, a1), (r0, r1)):
        out.append(stats.ks_2samp((x * x).sum(axis=1), (y * y).sum(axis=1)).pvalue)
    return np.array(out)


CASES = {
    # (n, k, prior a, prior b, positive slopes, anchors)
    "positive, proper priors": (3, 2, (0.8, 0.5), (0.3, 1.0), True, None),
    "free, centred a prior": (4, 3, (0.0, 1.0), (0.3, 2.0), False, None),
    "free, sign anchors": (4, 2, (0.3, 1.0), (0.0, 1.0), False, {"p0": "+", "p1": "-"}),
}


def _case(name, seed):
    n, k, pa, pb, positive, anchors = CASES[name]
    anc = slopes.check_anchors(anchors, pd.Index([f"p{i}" for i in range(n)]))
    con = np.zeros(n, np.int8) if anc is None else anc.con
    rng = np.random.default_rng(seed)
    before = _prior_states(rng, N_REP, n, k, pa, pb, positive, con)
    return before, pa, pb, anc


@pytest.mark.parametrize("name", list(CASES))
def test_moves_leave_the_joint_distribution_invariant(name):
    before, pa, pb, anc = _case(name, 1)
    *after, (c, d, g) = _move(*before, pa, pb, anc, seed=2)
    p = _pvalues(before, after)
    assert p.min() > 1e-4 / len(p), (name, p.min())
    # the moves really move: c and g spread around 1, d around 0, mostly accepted
    assert np.mean(c != 1) > 0.5 and np.mean(g != 1) > 0.5 and np.mean(d != 0) > 0.5
    assert 0.05 < np.std(np.log(c)) and 0.05 < np.std(np.log(g)) and 0.05 < np.std(d)
    if anc is not None:  # sign anchors hold
        assert np.all(after[0][:, 0] > 0) and np.all(after[0][:, 1] < 0)


@pytest.mark.parametrize("which", ["scale+1", "scale-1", "latent+1"])
def test_a_wrong_jacobian_is_detected(monkeypatch, which):
    """Mutation check of the test above: the power of c (n' − k) or of g (n_j + 2) off by
    one breaks the invariance far beyond the threshold."""
    before, pa, pb, anc = _case("free, centred a prior", 3)
    if which.startswith("scale"):
        real = moves.move_spec

        def wrong(*args, **kwargs):
            spec = real(*args, **kwargs)
            return moves.MoveSpec(spec.scale, spec.shift, spec.latent, spec.n_free,
                                  spec.power + (1 if which.endswith("+1") else -1))

        monkeypatch.setattr(moves, "move_spec", wrong)
        monkeypatch.setattr(twopno._moves, "move_spec", wrong)
    else:
        real_mh = moves.log_scale_mh

        def latent_wrong(rss, a, b, n_obs, pa_prec, pa_lin, pb_prec, pb_lin, z, u):
            al = 0.5 * (rss + pa_prec * a * a + pb_prec * b * b)
            return math.exp(real_mh(n_obs + 3.0, al, 0.0, 0.0, pa_lin * a + pb_lin * b, z, u))

        monkeypatch.setattr(moves, "latent_scale", latent_wrong)
    *after, _ = _move(*before, pa, pb, anc, seed=4)
    assert _pvalues(before, after).min() < 1e-9


def test_move_spec_turns_moves_off_where_they_break_an_anchor():
    idx = pd.Index(["p0", "p1", "p2"])
    spec = moves.move_spec(3, 5, slopes.check_anchors({"p0": "+", "p1": "-"}, idx))
    assert spec.scale and spec.shift and spec.latent and spec.power == 3 - 5
    spec = moves.move_spec(3, 5, slopes.check_anchors({"p0": 0.7}, idx))
    assert not spec.scale and not spec.shift and spec.latent  # fixed at 0.7: no θ move
    spec = moves.move_spec(3, 5, slopes.check_anchors({"p0": 0.0}, idx))
    assert spec.scale and not spec.shift and spec.n_free == 2 and spec.power == 2 - 5
    spec = moves.move_spec(3, 5, None, enabled=False)
    assert not (spec.scale or spec.shift or spec.latent)


def test_improper_scale_density_is_not_sampled():
    """Flat prior on a (β = γ = 0) with n' ≤ k: c^{n'−k−1} e^{−c²Σθ²/2} is not integrable at
    0, so the step returns t = 0 (no move); with n' > k it is the exact mode's proposal."""
    assert moves.log_scale_mh(-3.0, 2.0, 0.0, 0.0, 0.0, 0.5, 0.5) == 0.0
    assert moves.log_scale_mh(0.0, 2.0, 0.0, 0.0, 0.0, 0.5, 0.5) == 0.0
    # p > 0, flat a: c² ~ Gamma(p/2, rate α); its mode in t = log c is ½ log(p / 2α)
    t = moves.log_scale_mh(8.0, 2.0, 0.0, 0.0, 0.0, 0.0, 1e-300)  # z = 0: the mode, accepted
    assert t == pytest.approx(0.5 * math.log(8.0 / 4.0), rel=1e-10)


def test_scale_move_draws_the_exact_gamma_law():
    """With a flat prior on a the scale's density is exact: c² ~ Gamma((n' − k)/2, rate
    Σθ²/2).  Chained MH steps from t = 0 (each move's output becomes the next state's scale)
    have that stationary law."""
    rng = np.random.default_rng(5)
    p, al = 6.0, 3.0
    t_now, out = 0.0, []
    for _ in range(20000):
        # the state rescaled by e^{t_now}: α scales by e^{2 t_now}
        t = moves.log_scale_mh(p, al * math.exp(2 * t_now), 0.0, 0.0, 0.0,
                               rng.standard_normal(), rng.random())
        t_now += t
        out.append(math.exp(2 * t_now))
    law = stats.gamma(p / 2, scale=1.0 / al)
    assert stats.kstest(out[::5], law.cdf).pvalue > 1e-3


@pytest.mark.parametrize("engine", ["numpy", "fused"])
def test_moves_on_by_default_and_off_for_the_plain_sampler(monkeypatch, engine):
    """gibbs_2pno runs the moves by default (they change the chain); ORBIT_MOVES = False gives
    the plain three-step sampler, and both agree in distribution on simulated data."""
    from privirt.bayes import gibbs

    if engine == "fused":
        pytest.importorskip("numba")
    X, theta, a, b = privirt.simulate_2pno(200, 6, seed=3)
    kw = dict(n_iter=300, warmup=100, seed=4, progress=False, device="cpu", engine=engine,
              priors={"a": (1.0, 1.0)})
    on = privirt.gibbs_2pno(X, **kw)
    assert on.info["orbit_moves"] == ["scale", "shift", "latent"]
    monkeypatch.setattr(gibbs, "ORBIT_MOVES", False)
    off = privirt.gibbs_2pno(X, **kw)
    assert off.info["orbit_moves"] == []
    assert not np.array_equal(on.draws["theta"], off.draws["theta"])
    for p, truth in (("a", a), ("b", b)):
        m_on, m_off = on.summary(p)["mean"].to_numpy(), off.summary(p)["mean"].to_numpy()
        assert np.corrcoef(m_on, truth)[0, 1] > 0.8 and np.corrcoef(m_off, truth)[0, 1] > 0.8


@pytest.mark.filterwarnings("ignore")  # (items all correct / all incorrect in 6 persons)
@pytest.mark.parametrize("engine", ["numpy", "fused"])
def test_scale_move_is_off_and_unlisted_where_it_cannot_move(monkeypatch, engine):
    """Flat prior on a with n' ≤ k: info["orbit_moves"] listed "scale" although the move never
    moved (log_scale_mh returns t = 0 for β = 0, p ≤ 0).  It is now off (move_spec) and not
    listed; the draws are bit-identical to the old spec's (the moves' random numbers are drawn
    whether or not the scale runs, and c = 1 either way), and it still runs with a prior on a
    or with n' > k."""
    if engine == "fused":
        pytest.importorskip("numba")
    X = privirt.simulate_2pno(6, 10, seed=3_600_030)[0]
    kw = dict(n_iter=60, warmup=20, n_chains=2, seed=3_600_031, progress=False, device="cpu",
              engine=engine)
    flat = privirt.gibbs_2pno(X, **kw)
    assert flat.info["orbit_moves"] == ["shift", "latent"]
    assert moves.move_spec(6, 10, None, flat_a=True).scale is False
    assert moves.move_spec(11, 10, None, flat_a=True).scale is True
    assert moves.move_spec(6, 10, None, flat_a=False).scale is True
    prior = privirt.gibbs_2pno(X, priors={"a": (1.0, 1.0)}, **kw)
    assert prior.info["orbit_moves"] == ["scale", "shift", "latent"]
    real = moves.move_spec

    def old(n, k, anchors=None, enabled=True, flat_a=False):  # the spec before the fix
        return real(n, k, anchors, enabled)

    monkeypatch.setattr(moves, "move_spec", old)  # (twopno, gibbs, fused: the same module)
    before = privirt.gibbs_2pno(X, **kw)
    assert before.info["orbit_moves"] == ["scale", "shift", "latent"]
    for p in ("a", "b", "theta"):
        assert np.array_equal(before.draws[p], flat.draws[p]), p
