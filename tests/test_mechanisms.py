"""Tests for the `mechanisms` package: exactness (goodness of fit), API, privacy maps, OpenDP."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

import mechanisms
from mechanisms import DiscreteGaussian, DiscreteLaplace, PureDP, RandomizedResponse, SecureRNG, ZCDP
from mechanisms import _exact, _samplers

P_MIN = 1e-4  # fixed seeds: a failing p-value is reproducible, not flaky


# ---------------------------------------------------------------------------------------------
# exact reference pmfs (independent of the samplers: plain float64 summation)
# ---------------------------------------------------------------------------------------------
def gaussian_pmf(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    L = int(40 * sigma) + 40
    x = np.arange(-L, L + 1)
    w = np.exp(-(x.astype(float) ** 2) / (2 * sigma * sigma))
    return x, w / w.sum()


def laplace_pmf(scale: float) -> tuple[np.ndarray, np.ndarray]:
    q = math.exp(-1 / scale)
    L = int(60 * scale) + 60
    x = np.arange(-L, L + 1)
    p = (1 - q) / (1 + q) * q ** np.abs(x).astype(float)
    return x, p


def chisquare_gof(draws: np.ndarray, support: np.ndarray, pmf: np.ndarray, n_bins: int = 60) -> float:
    """Chi-square test with bins of roughly equal probability (tails merged)."""
    cdf = np.cumsum(pmf)
    edges_idx = np.searchsorted(cdf, np.linspace(0, 1, n_bins + 1)[1:-1])
    edges_idx = np.unique(edges_idx)
    # bin k holds support[edges[k-1]+1 .. edges[k]]
    expected = np.diff(np.concatenate([[0.0], cdf[edges_idx], [1.0]]))
    cuts = support[edges_idx]
    observed = np.bincount(np.searchsorted(cuts, draws, side="left"), minlength=expected.size)
    assert observed.size == expected.size
    keep = expected * draws.size >= 5
    assert keep.sum() >= 2
    exp_counts = expected * draws.size
    # merge bins with tiny expectation into their neighbours (only happens for sigma < 1)
    obs2, exp2 = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(observed, exp_counts):
        acc_o += o
        acc_e += e
        if acc_e >= 5:
            obs2.append(acc_o)
            exp2.append(acc_e)
            acc_o = acc_e = 0.0
    obs2[-1] += acc_o
    exp2[-1] += acc_e
    obs2, exp2 = np.array(obs2), np.array(exp2)
    stat = float(np.sum((obs2 - exp2) ** 2 / exp2))
    return float(stats.chi2.sf(stat, len(obs2) - 1))


# ---------------------------------------------------------------------------------------------
# goodness of fit, symmetry, variance
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7, 100.0, 1e4])
def test_discrete_gaussian_goodness_of_fit(sigma):
    x = DiscreteGaussian(sigma, seed=11).sample(200_000)
    assert x.dtype == np.int64
    support, pmf = gaussian_pmf(sigma)
    assert chisquare_gof(x, support, pmf) > P_MIN
    # exact point probabilities at the centre for small sigma (no binning)
    if sigma <= 1:
        for v in (0, 1, 2):
            p = pmf[support == v][0]
            z = (np.mean(x == v) - p) / math.sqrt(p * (1 - p) / x.size)
            assert abs(z) < 4.5


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 50.0, 1e4, 1e6])
def test_discrete_laplace_goodness_of_fit(scale):
    x = DiscreteLaplace(scale, seed=12).sample(200_000)
    assert x.dtype == np.int64
    if scale <= 1e4:
        support, pmf = laplace_pmf(scale)
        assert chisquare_gof(x, support, pmf) > P_MIN
    else:
        # closed-form tail: P(|X| >= k) = 2 q^k / (1 + q) for k >= 1
        q = math.exp(-1 / scale)
        for k in (1, int(scale // 2), int(scale), int(3 * scale), int(8 * scale)):
            p = 2 * q**k / (1 + q)
            z = (np.mean(np.abs(x) >= k) - p) / math.sqrt(p * (1 - p) / x.size)
            assert abs(z) < 4.5, (k, z)


@pytest.mark.parametrize("mech", [DiscreteGaussian(2.3, seed=5), DiscreteLaplace(0.7, seed=5),
                                  DiscreteGaussian(1e5, seed=6), DiscreteLaplace(3e3, seed=6)])
def test_symmetry(mech):
    x = mech.sample(100_000)
    pos, neg = int(np.sum(x > 0)), int(np.sum(x < 0))
    assert stats.binomtest(pos, pos + neg, 0.5).pvalue > P_MIN
    # same magnitude distribution on both sides
    assert stats.ks_2samp(x[x > 0], -x[x < 0]).pvalue > P_MIN


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7, 100.0, 1e4])
def test_gaussian_variance_matches_exact_sum(sigma):
    support, pmf = gaussian_pmf(sigma)
    var = float(np.sum(pmf * support.astype(float) ** 2))
    m4 = float(np.sum(pmf * support.astype(float) ** 4))
    mech = DiscreteGaussian(sigma, seed=21)
    assert mech.variance() == pytest.approx(var, rel=1e-10)
    if sigma < 1:
        assert var < sigma**2  # the discrete Gaussian is less spread than its parameter
    x = mech.sample(200_000).astype(float)
    z = (np.mean(x * x) - var) / math.sqrt((m4 - var * var) / x.size)
    assert abs(z) < 4.5
    assert abs(np.mean(x)) < 5 * math.sqrt(var / x.size)


@pytest.mark.parametrize("scale", [0.3, 1.0, 2.5, 50.0, 1e4])
def test_laplace_variance_closed_form(scale):
    q = math.exp(-1 / scale)
    var = 2 * q / (1 - q) ** 2
    support, pmf = laplace_pmf(scale)
    assert float(np.sum(pmf * support.astype(float) ** 2)) == pytest.approx(var, rel=1e-9)
    m4 = float(np.sum(pmf * support.astype(float) ** 4))
    mech = DiscreteLaplace(scale, seed=22)
    assert mech.variance() == pytest.approx(var, rel=1e-12)
    x = mech.sample(200_000).astype(float)
    z = (np.mean(x * x) - var) / math.sqrt((m4 - var * var) / x.size)
    assert abs(z) < 4.5


# ---------------------------------------------------------------------------------------------
# building blocks
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(7, 5), Fraction(22, 7), Fraction(1, 1000),
                                   Fraction(9, 2)])
def test_exp_enclosure_contains_true_value(gamma):
    for bits in (64, 200):
        lo, hi = _exact.exp_neg_enclosure(gamma, bits)
        assert lo <= hi
        assert float(lo) <= math.exp(-float(gamma)) * (1 + 1e-15)
        assert float(hi) >= math.exp(-float(gamma)) * (1 - 1e-15)
        assert (hi - lo) / hi < Fraction(1, 2**bits)


@pytest.mark.parametrize("gamma", [Fraction(1, 3), Fraction(7, 5), Fraction(22, 7), Fraction(1, 1000)])
def test_bernoulli_exp_neg_gamma_on_rationals(gamma):
    """Fast path (64-bit threshold) and fully lazy path both give Bernoulli(exp(-gamma))."""
    p = math.exp(-float(gamma))
    rng = SecureRNG(seed=f"bern{gamma}")
    sampler = _samplers.BernoulliSampler(lambda b: _exact.exp_neg_enclosure(gamma, b))
    assert sampler.threshold == math.floor(p * 2**64) or abs(sampler.threshold - p * 2**64) < 2**12
    draws = sampler.sample_words(rng.random_uint64(200_000), rng)
    z = (draws.mean() - p) / math.sqrt(p * (1 - p) / draws.size)
    assert abs(z) < 4.5
    # the lazy comparison alone, starting from zero known bits
    n = 4000
    hits = sum(_exact.LazyUniform(0, 0, rng.word).less_than(lambda b: _exact.exp_neg_enclosure(gamma, b))
               for _ in range(n))
    assert stats.binomtest(hits, n, p).pvalue > P_MIN


def test_bernoulli_fixed_decides_ties_with_slow_path():
    calls = []

    def slow(w):
        calls.append(w)
        return True

    u = np.array([5, 6, 7, 6], dtype=np.uint64)
    out = _exact.bernoulli_fixed(u, 6, slow)
    assert out.tolist() == [True, True, False, True]
    assert calls == [6, 6]


def test_lazy_uniform_known_prefixes():
    word = SecureRNG(seed=0).word
    half = lambda b: (Fraction(1, 2), Fraction(1, 2))  # noqa: E731
    assert _exact.LazyUniform(0, 1, word).less_than(half) is True   # U in [0, 1/2)
    assert _exact.LazyUniform(1, 1, word).less_than(half) is False  # U in [1/2, 1)
    third = lambda b: _exact.exp_neg_enclosure(Fraction(1), b)  # e^-1 = 0.3678...
    assert _exact.LazyUniform(0b0101, 4, word).less_than(third) is True   # [0.3125, 0.375)
    assert _exact.LazyUniform(0b0110, 4, word).less_than(third) is False  # [0.375, 0.4375)


def test_fixed64_matches_float():
    for x in (Fraction(1, 2), Fraction(3), Fraction(1, 10**6)):
        t = _exact.fixed64(lambda b: _exact.exp_neg_enclosure(x, b))
        assert abs(t - math.exp(-float(x)) * 2**64) < 2**13


def test_truncated_geometric_table_and_ties():
    lam = Fraction(1, 3)
    tg = _samplers.TruncatedGeometric(lam, 4)
    q = math.exp(-1 / 3)
    F = [(1 - q**j) / (1 - q**16) for j in range(1, 16)]
    assert np.all(np.abs(tg.C.astype(float) - np.array(F) * 2.0**64) < 2.0**14)
    assert np.all(np.diff(tg.C.astype(object)) > 0)
    word = SecureRNG(seed=1).word
    C = tg.C
    # words just above / below a breakpoint are decided by the table, equal words exactly
    assert tg.sample_words(C + np.uint64(1), word).tolist() == list(range(1, 16))
    assert tg.sample_words(C - np.uint64(1), word).tolist() == list(range(0, 15))
    tie = tg.sample_words(C.copy(), word)
    assert np.all((tie == np.arange(1, 16)) | (tie == np.arange(0, 15)))


@pytest.mark.parametrize("lam,K", [(Fraction(1, 3), 4), (Fraction(1, 10**6), 13), (Fraction(2), 5)])
def test_tables_equal_independent_high_precision_values(lam, K):
    """The 64-bit thresholds are exactly floor(2**64 p): check against 80-digit decimal values."""
    from decimal import Decimal, localcontext

    tg = _samplers.TruncatedGeometric(lam, K)
    N = 1 << K
    with localcontext() as ctx:
        ctx.prec = 80
        lam_d = Decimal(lam.numerator) / Decimal(lam.denominator)
        den = 1 - (-lam_d * N).exp()
        for j in sorted({1, 2, N // 3, N // 2, N - 1}):
            F = (1 - (-lam_d * j).exp()) / den
            assert int(tg.C[j - 1]) == int((F * (1 << 64)).to_integral_value(rounding="ROUND_FLOOR"))
        t = _samplers.DiscreteLaplaceSampler(1 / lam).zero_threshold
        q = (-lam_d).exp()
        assert t == int(((1 - q) / (1 + q) * (1 << 64)).to_integral_value(rounding="ROUND_FLOOR"))


def test_truncated_geometric_distribution():
    lam = Fraction(2, 7)
    tg = _samplers.TruncatedGeometric(lam, 5)
    rng = SecureRNG(seed=2)
    r = tg.sample_words(rng.random_uint64(200_000), rng.word)
    w = np.exp(-float(lam) * np.arange(32))
    p = stats.chisquare(np.bincount(r, minlength=32), w / w.sum() * r.size).pvalue
    assert p > P_MIN


def test_geometric_high_part_slow_path(monkeypatch):
    """Force the rare 'beyond the tabulated chunks' branch and check the geometric law."""
    monkeypatch.setattr(_samplers, "_HIGH_TAIL", 0.5)
    lam = Fraction(1, 4)
    g = _samplers.Geometric(lam)
    assert g.high_threshold > 2**62  # the slow branch is taken often
    rng = SecureRNG(seed=3)
    x = g.sample(20_000, rng)
    q = math.exp(-0.25)
    k = np.arange(0, 40)
    pmf = (1 - q) * q**k
    obs = np.bincount(np.minimum(x, 40), minlength=41)
    exp = np.append(pmf, q**40) * x.size
    assert stats.chisquare(obs, exp).pvalue > P_MIN


def test_gaussian_acceptance_slow_path(monkeypatch):
    """With a huge margin most acceptance tests go through the exact lazy path."""
    monkeypatch.setattr(_samplers, "_MARGIN", 0.25)
    mech = DiscreteGaussian(1.3, seed=4)
    x = mech.sample(6_000)
    support, pmf = gaussian_pmf(1.3)
    assert chisquare_gof(x, support, pmf, n_bins=12) > P_MIN


def test_exp_neg_approx_error_bound():
    g = np.concatenate([np.linspace(0, 64, 20_001), [63.999, 64.0, 100.0, np.inf]])
    approx = _samplers._exp_neg_approx(g)
    exact = np.array([float(_exact.exp_neg_enclosure(Fraction(v), 80)[0]) if np.isfinite(v) else 0.0 for v in g])
    assert np.max(np.abs(approx - exact)) < 2.0**-44


# ---------------------------------------------------------------------------------------------
# OpenDP: same distribution, same privacy maps
# ---------------------------------------------------------------------------------------------
def _binned_two_sample_p(a: np.ndarray, b: np.ndarray, n_bins: int = 20) -> float:
    edges = np.unique(np.quantile(np.concatenate([a, b]), np.linspace(0, 1, n_bins + 1)[1:-1]))
    ca = np.bincount(np.searchsorted(edges, a, side="right"), minlength=edges.size + 1)
    cb = np.bincount(np.searchsorted(edges, b, side="right"), minlength=edges.size + 1)
    table = np.vstack([ca, cb])
    table = table[:, table.sum(axis=0) > 0]
    return float(stats.chi2_contingency(table)[1])


@pytest.mark.parametrize("cls,param", [(DiscreteGaussian, 3.7), (DiscreteGaussian, 250.0),
                                       (DiscreteLaplace, 2.5), (DiscreteLaplace, 400.0)])
def test_agrees_with_opendp_samples(cls, param):
    native = cls(param, seed=31).sample(20_000)
    ref = cls(param, backend="opendp").sample(20_000)  # OpenDP cannot be seeded
    assert ref.dtype == np.int64
    assert _binned_two_sample_p(native, ref) > 1e-6
    assert stats.ks_2samp(native, ref).pvalue > 1e-6


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.7, 7.0, 100.0, 1e4, 1e6, 0.3, 2.2])
@pytest.mark.parametrize("d_in", [0, 1, 2, 3, 10, 123])
def test_privacy_maps_equal_opendp(scale, d_in):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    vec = dp.vector_domain(dp.atom_domain(T="i64"))
    g = dp.m.make_gaussian(vec, dp.l2_distance(T="i64"), scale=scale)
    lap = dp.m.make_laplace(vec, dp.l1_distance(T="i64"), scale=scale)
    assert DiscreteGaussian(scale, seed=0).privacy(d_in) == ZCDP(g.map(d_in))
    assert DiscreteLaplace(scale, seed=0).privacy(d_in) == PureDP(lap.map(d_in))


def test_privacy_maps_closed_form_and_rounding():
    g = DiscreteGaussian(2.0, seed=0)
    assert g.privacy(1) == ZCDP(0.125) and g.privacy(1).rho == float(g.privacy(1)) == 0.125
    assert g.privacy(3, l1_sensitivity=2) == g.privacy(2)  # ||v||_2 <= ||v||_1
    assert g.privacy(2, dimension=1000) == g.privacy(2)    # zCDP map is dimension free (CKS20 multivariate theorem)
    assert Fraction(DiscreteGaussian(3.0, seed=0).privacy(1).rho) >= Fraction(1, 18)  # rounded up
    assert Fraction(DiscreteLaplace(3.0, seed=0).privacy(1).epsilon) >= Fraction(1, 3)
    assert RandomizedResponse(0.5, seed=0).privacy() == PureDP(0.5)
    assert RandomizedResponse(0.5, seed=0).privacy(n_bits=7).epsilon == 3.5
    with pytest.raises(ValueError, match="dimension"):
        g.privacy(1, dimension=0)
    with pytest.raises(ValueError, match="l2_sensitivity"):
        g.privacy(-1)
    with pytest.raises(ValueError, match="l1_sensitivity"):
        DiscreteLaplace(1.0).privacy(float("nan"))
    with pytest.raises(ValueError, match="n_bits"):
        RandomizedResponse(1.0).privacy(-2)


def test_privacy_maps_return_typed_guarantees_that_the_accounting_and_ledger_accept(tmp_path):
    from mechanisms import ApproxDP
    from privirt import Ledger
    from privirt.private.accounting import PrivacyCost, compose

    rho = DiscreteGaussian(2.0, seed=0).privacy(1)
    eps = DiscreteLaplace(4.0, seed=0).privacy(1)
    assert isinstance(rho, ZCDP) and isinstance(eps, PureDP)
    assert isinstance(RandomizedResponse(0.5, seed=0).privacy(3), PureDP)
    total = compose([rho, eps, ApproxDP(0.1, 1e-7)])
    assert isinstance(total, PrivacyCost)
    assert (total.rho, total.epsilon, total.delta) == pytest.approx((0.125, 0.35, 1e-7))
    led = Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    led.spend(rho, mechanism="discrete Gaussian")
    led.spend(eps, mechanism="discrete Laplace")
    assert led.spends()["rho"].tolist() == [0.125, 0.0] and led.spends()["epsilon"].tolist() == [0.0, 0.25]
    assert str(rho) == "0.125-zCDP" and str(eps) == "0.25-DP"
    with pytest.raises(ValueError, match="rho"):
        ZCDP(-1.0)


# ---------------------------------------------------------------------------------------------
# randomized response
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.1, 1.0, math.log(3), 5.0])
def test_randomized_response_keep_probability_and_debias(eps):
    rr = RandomizedResponse(eps, seed=7)
    p = math.exp(eps) / (1 + math.exp(eps))
    assert rr.keep_probability == pytest.approx(p, rel=1e-15)
    bits = np.zeros(200_000, dtype=np.int64)
    bits[:60_000] = 1  # true mean 0.3
    out = rr.apply(bits)
    assert out.dtype == np.int64 and set(np.unique(out)) <= {0, 1}
    kept = np.mean(out == bits)
    assert abs(kept - p) < 4.5 * math.sqrt(p * (1 - p) / bits.size)
    est = rr.debias(out.mean())
    assert abs(est - 0.3) < 4.5 * math.sqrt(rr.debias_variance(bits.size, 0.3))
    assert rr.debias(p) == pytest.approx(1.0) and rr.debias(1 - p) == pytest.approx(0.0, abs=1e-12)


def test_randomized_response_input_checks():
    rr = RandomizedResponse(1.0, seed=0)
    assert rr.apply(np.array([[True, False]])).shape == (1, 2)
    with pytest.raises(ValueError, match="0 or 1"):
        rr.apply([0, 2])
    with pytest.raises(ValueError, match="0/1"):
        rr.apply(["a"])
    for bad in (0, -1, float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="epsilon"):
            RandomizedResponse(bad)


# ---------------------------------------------------------------------------------------------
# API: parameters, seeds, shapes, integer-only apply
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls,name", [(DiscreteGaussian, "sigma"), (DiscreteLaplace, "scale")])
@pytest.mark.parametrize("bad,reason", [(0, "> 0"), (-1.5, "> 0"), (float("nan"), "NaN"),
                                        (float("inf"), "finite"), ("2", "real"), (True, "real"),
                                        (1e300, "range")])
def test_bad_scale_raises(cls, name, bad, reason):
    with pytest.raises(ValueError, match=reason):
        cls(bad)


def test_backend_checks():
    with pytest.raises(ValueError, match="backend"):
        DiscreteGaussian(1.0, backend="torch")
    with pytest.raises(ValueError, match="cannot be seeded"):
        DiscreteLaplace(1.0, seed=1, backend="opendp")
    assert DiscreteLaplace(1.0, backend="opendp").private is True


def test_seed_reproducible_and_private_flag():
    a = DiscreteGaussian(5.0, seed=123)
    b = DiscreteGaussian(5.0, seed=123)
    c = DiscreteGaussian(5.0, seed=124)
    assert a.private is False and a.tv_bound == 0.0
    xa, xb, xc = a.sample(1000), b.sample(1000), c.sample(1000)
    assert np.array_equal(xa, xb) and not np.array_equal(xa, xc)
    assert np.array_equal(DiscreteLaplace(2.0, seed="s").sample(500), DiscreteLaplace(2.0, seed="s").sample(500))
    assert np.array_equal(RandomizedResponse(1.0, seed=b"k").apply(np.ones(500, int)),
                          RandomizedResponse(1.0, seed=b"k").apply(np.ones(500, int)))
    u1, u2 = DiscreteGaussian(5.0), DiscreteGaussian(5.0)
    assert u1.private and u2.private and RandomizedResponse(1.0).private
    assert not np.array_equal(u1.sample(1000), u2.sample(1000))


def test_shapes_and_integer_only_apply():
    g = DiscreteGaussian(2.0, seed=9)
    assert g.sample((3, 4)).shape == (3, 4)
    assert g.sample(0).shape == (0,)
    vals = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = g.apply(vals)
    assert out.shape == (3, 4) and out.dtype == np.int64
    assert not np.array_equal(out, vals)
    assert DiscreteLaplace(1.0, seed=1).apply([1, 2, 3]).dtype == np.int64
    empty = DiscreteLaplace(1.0, seed=1).apply([])
    assert empty.shape == (0,) and empty.dtype == np.int64
    for bad in (np.array([1.0, 2.0]), [0.5], np.array([1 + 0j]), ["a"]):
        with pytest.raises(ValueError, match="integer"):
            g.apply(bad)
    for huge in (np.array([2**62]), np.array([-(2**63)], dtype=np.int64), np.array([2**63], dtype=np.uint64)):
        with pytest.raises(ValueError, match="2\\*\\*61"):
            g.apply(huge)
    with pytest.raises(ValueError, match="size"):
        g.sample(-1)
    with pytest.raises(ValueError, match="size"):
        g.sample(2.5)
    ref = DiscreteGaussian(2.0, backend="opendp").apply(vals)
    assert ref.shape == (3, 4) and ref.dtype == np.int64


def test_sample_spans_multiple_blocks():
    n = 2 * _samplers.BLOCK + 17
    x = DiscreteLaplace(4.0, seed=3).sample(n)
    assert x.shape == (n,)
    first, second = x[: _samplers.BLOCK], x[_samplers.BLOCK: 2 * _samplers.BLOCK]
    assert not np.array_equal(first, second)


def test_package_exports():
    assert set(mechanisms.__all__) >= {"DiscreteGaussian", "DiscreteLaplace", "RandomizedResponse"}
    r = repr(DiscreteGaussian(1.5, seed=0))
    assert "sigma=1.5" in r and "private=False" in r


# ---------------------------------------------------------------------------------------------
# secure generator
# ---------------------------------------------------------------------------------------------
def test_rng_uniformity_and_reproducibility():
    rng = SecureRNG(seed=42)
    assert rng.private is False and SecureRNG().private is True
    w = rng.random_uint64(100_000)
    assert w.dtype == np.uint64
    # each of the 64 bit positions is fair
    bits = np.unpackbits(w.view(np.uint8)).reshape(-1, 64).mean(axis=0)
    assert np.all(np.abs(bits - 0.5) < 4.5 * 0.5 / math.sqrt(w.size))
    ints = rng.integers(10, 100_000)
    assert ints.min() >= 0 and ints.max() <= 9
    assert stats.chisquare(np.bincount(ints, minlength=10)).pvalue > P_MIN
    assert np.array_equal(SecureRNG(seed=42).random_uint64(10), SecureRNG(seed=42).random_uint64(10))
    assert not np.array_equal(SecureRNG().random_uint64(4), SecureRNG().random_uint64(4))
    u = rng.random(10_000)
    assert u.min() >= 0 and u.max() < 1
    with pytest.raises(ValueError, match="seed"):
        SecureRNG(seed=1.5)
    with pytest.raises(ValueError, match="high"):
        rng.integers(0, 3)


def test_rng_rekeys_deterministically(monkeypatch):
    from mechanisms import rng as rng_mod

    monkeypatch.setattr(rng_mod, "REKEY_BYTES", 1024)
    a = SecureRNG(seed=5).random_uint64(1000)  # 8000 bytes: several keys
    b = SecureRNG(seed=5).random_uint64(1000)
    assert np.array_equal(a, b)
    # after re-keying the stream is not a repeat of the first key's stream
    assert not np.array_equal(a[:128], a[128:256])


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_rng_rekeys_after_fork():
    import os

    rng = SecureRNG()
    rng.random_uint64(1)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: write its next words and exit
        os.write(w, rng.random_uint64(4).tobytes())
        os._exit(0)
    os.waitpid(pid, 0)
    child = np.frombuffer(os.read(r, 32), dtype=np.uint64)
    parent = rng.random_uint64(4)
    assert child.size == 4 and not np.array_equal(child, parent)


def test_readme_example_runs():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Mechanisms", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    ns: dict = {}
    exec(compile(code, "README-mechanisms", "exec"), ns)
    assert ns["rho"] == ZCDP(1 / 32) and ns["eps"] == PureDP(0.5)  # typed guarantees
    assert ns["noisy"].dtype == np.int64 and ns["noisy"].shape == (4,)
    assert ns["gauss"].private and not ns["lap"].private
    assert set(np.unique(ns["randomized"])) <= {0, 1}


def test_extreme_scales():
    big = 2.0**40
    x = DiscreteGaussian(big, seed=1).sample(20_000).astype(float)
    assert abs(x.std() / big - 1) < 0.05 and abs(x.mean()) < 5 * big / math.sqrt(x.size)
    y = DiscreteLaplace(big, seed=1).sample(20_000).astype(float)
    assert abs(y.std() / (math.sqrt(2) * big) - 1) < 0.06
    assert not DiscreteGaussian(2.0**-10, seed=1).sample(1000).any()  # P(x != 0) ~ e^-500000
    assert not DiscreteLaplace(2.0**-10, seed=1).sample(1000).any()
    with pytest.raises(ValueError, match="range"):
        DiscreteGaussian(2.0**-11)


def test_docstring_examples():
    import doctest

    from mechanisms import noise, randomized_response, rng

    for mod in (noise, randomized_response, rng):
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, mod.__name__
    assert mechanisms.SecureRNG.seeded(3).private is False
    with pytest.raises(ValueError, match="seed"):
        mechanisms.SecureRNG.seeded(None)


@pytest.mark.parametrize("call", [
    lambda: RandomizedResponse(1.0, seed=0).privacy(n_bits=2 ** 1100),  # float() overflowed
    # just above the largest double: it rounded to it, and nextafter gave inf ("epsilon must be finite")
    lambda: RandomizedResponse(1.0, seed=0).privacy(n_bits=int(np.finfo(float).max) + 1),
    lambda: DiscreteLaplace(2.0 ** -10, seed=0).privacy(np.finfo(float).max),
    lambda: DiscreteGaussian(2.0 ** -10, seed=0).privacy(1e300),
])
def test_a_privacy_parameter_above_the_largest_double_is_refused_in_one_line(call):
    # mechanisms' round_up lacked the overflow guard of measures._round_up: an OverflowError
    # traceback, or a bound rounded up to inf and refused under another name
    with pytest.raises(ValueError, match=r"is above the largest finite number .* no finite privacy bound "
                                         r"can be stated; use (fewer n_bits|a smaller l[12]_sensitivity)"):
        call()


def test_the_mechanisms_round_up_is_the_measures_one():
    from mechanisms._validation import round_up
    from mechanisms.measures import _round_up

    top = float(np.finfo(float).max)
    for x in (Fraction(1, 3), Fraction(top), Fraction(0), Fraction(1, 10 ** 400)):
        assert round_up(x, what="x", fix="y") == _round_up(x) and Fraction(_round_up(x)) >= x
    assert RandomizedResponse(1.0, seed=0).privacy(n_bits=int(top)).epsilon == top  # exactly the largest: kept
