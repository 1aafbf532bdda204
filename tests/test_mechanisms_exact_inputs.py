"""Review A of ``mechanisms``: stated privacy parameters are never below the true ones, and bad
input is refused with one ``ValueError`` line."""

from __future__ import annotations

import random
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from mechanisms import ApproxDP, DiscreteGaussian, DiscreteLaplace, PureDP, RandomizedResponse, SecureRNG, ZCDP
from mechanisms.measures import pure_to_zcdp, zcdp_to_approx_dp


def test_pure_to_zcdp_is_rounded_up_never_to_nearest():
    # 0.5 * e * e rounded to nearest: about half of all ε stated a ρ below ε²/2
    rng = random.Random(23_001)
    for _ in range(20_000):
        e = rng.uniform(0, 5)
        rho = pure_to_zcdp(e)
        exact = Fraction(e) ** 2 / 2
        assert Fraction(rho) >= exact and Fraction(np.nextafter(rho, 0)) < exact, e
    e = 3.303448278573664  # the reviewer's case; OpenDP's make_pureDP_to_zCDP gives the same
    assert pure_to_zcdp(e) == 5.456385264605653
    assert PureDP(e).to_zcdp().rho == 5.456385264605653
    assert pure_to_zcdp(1.0) == 0.5 and pure_to_zcdp(0.0) == 0.0  # exact values are kept


def _tight_up(value: float, exact: Fraction) -> bool:
    """``value`` is the smallest double >= ``exact``."""
    return Fraction(value) >= exact and Fraction(np.nextafter(value, -np.inf)) < exact


def test_exact_sensitivities_are_used_exactly_and_rounded_up():
    # check_sensitivity read Fraction(float(value)): Fraction(1, 3), 2**53 + 1 and a longdouble
    # 1/3 were rounded to the nearest double first, which can be below them
    rng = random.Random(23_002)
    for _ in range(2_000):
        d = Fraction(rng.randrange(1, 10 ** 6), rng.randrange(1, 10 ** 6))
        scale = rng.uniform(0.5, 50.0)
        eps = DiscreteLaplace(scale, seed=0).privacy(d).epsilon
        assert _tight_up(eps, d / Fraction(scale)), (d, scale)
        rho = DiscreteGaussian(scale, seed=0).privacy(d).rho
        assert _tight_up(rho, d * d / (2 * Fraction(scale) ** 2)), (d, scale)
    assert DiscreteLaplace(1.0, seed=0).privacy(Fraction(1, 3)).epsilon == 0.33333333333333337
    assert DiscreteLaplace(1.0, seed=0).privacy(2 ** 53 + 1).epsilon == 2.0 ** 53 + 2
    assert _tight_up(DiscreteGaussian(1.0, seed=0).privacy(Fraction(1, 3)).rho, Fraction(1, 18))
    assert _tight_up(DiscreteGaussian(1.0, seed=0).privacy(1, l1_sensitivity=Fraction(1, 3)).rho,
                     Fraction(1, 18))
    third = np.longdouble(1) / np.longdouble(3)
    assert _tight_up(DiscreteLaplace(1.0, seed=0).privacy(third).epsilon,
                     Fraction(*third.as_integer_ratio()))
    # values that are doubles already give the same bits as before
    assert DiscreteLaplace(2.0, seed=0).privacy(np.int64(1)) == PureDP(0.5)


def test_measures_given_exactly_are_stated_rounded_up():
    rng = random.Random(23_003)
    for _ in range(2_000):
        x = Fraction(rng.randrange(1, 10 ** 9), rng.randrange(1, 10 ** 9))
        assert _tight_up(PureDP(x).epsilon, x)
        assert _tight_up(ZCDP(x).rho, x)
        assert _tight_up(ApproxDP(x, x / (x + 1)).delta, x / (x + 1))
        assert _tight_up(pure_to_zcdp(x), x * x / 2)
    assert PureDP(2 ** 53 + 1).epsilon == 2.0 ** 53 + 2
    third = np.longdouble(1) / np.longdouble(3)
    assert _tight_up(PureDP(third).epsilon, Fraction(*third.as_integer_ratio()))
    assert PureDP(0.1).epsilon == 0.1 and ZCDP(np.float32(0.1)).rho == float(np.float32(0.1))


def test_a_target_delta_given_exactly_is_rounded_down_for_the_conversion():
    # δ = 1/10: the nearest double is above it, and ε at a larger δ is smaller
    below = float(np.nextafter(0.1, 0.0))
    assert Fraction(0.1) > Fraction(1, 10) > Fraction(below)
    assert zcdp_to_approx_dp(0.5, Fraction(1, 10)) == zcdp_to_approx_dp(0.5, below)
    assert zcdp_to_approx_dp(0.5, Fraction(1, 10)) >= zcdp_to_approx_dp(0.5, 0.1)
    rho = 9.38595867742349e-05  # here the classic bound at the double 0.1 is below the one at 1/10
    assert (zcdp_to_approx_dp(rho, Fraction(1, 10), tight=False) == zcdp_to_approx_dp(rho, below, tight=False)
            > zcdp_to_approx_dp(rho, 0.1, tight=False))
    g = ZCDP(0.5).to_approx_dp(Fraction(1, 10))
    assert g.epsilon == zcdp_to_approx_dp(0.5, below) and Fraction(g.delta) >= Fraction(1, 10)
    assert zcdp_to_approx_dp(0.5, 1e-5) == ZCDP(0.5).to_approx_dp(1e-5).epsilon  # doubles: as before


@pytest.mark.parametrize("values", [[2 ** 70], [-2 ** 63 - 1], [1, 2 ** 64], [[2 ** 61 + 1, 0]]])
@pytest.mark.parametrize("cls", [DiscreteGaussian, DiscreteLaplace])
def test_integers_beyond_int64_are_refused_in_one_line(cls, values):
    # an object array of Python ints went through astype(int64): OverflowError traceback
    with pytest.raises(ValueError, match=r"^values exceed 2\*\*61 in magnitude"):
        cls(3.0, seed=0).apply(values)
    assert cls(3.0, seed=0).apply(np.array([2 ** 61, -2 ** 61], dtype=object)).dtype == np.int64


@pytest.mark.parametrize("call, message", [
    (lambda: DiscreteGaussian(10 ** 400), r"^sigma=1000.* is outside the supported range"),
    (lambda: DiscreteLaplace(Fraction(10 ** 400, 3)), r"^scale=.* is outside the supported range"),
    (lambda: DiscreteGaussian(-10 ** 400), r"^sigma must be > 0"),
    (lambda: RandomizedResponse(10 ** 400), r"^epsilon=1000.* is above 700"),
    (lambda: DiscreteGaussian(3.0, seed=0).privacy(10 ** 400), r"^rho = .* is above the largest finite"),
    (lambda: DiscreteLaplace(3.0, seed=0).privacy(10 ** 400), r"^epsilon = .* is above the largest finite"),
    (lambda: DiscreteLaplace(3.0, seed=0).privacy(-10 ** 400), r"^l1_sensitivity must be finite and >= 0"),
    (lambda: PureDP(10 ** 400), r"^epsilon must be a finite number >= 0, got 1000"),
    (lambda: ZCDP(Fraction(10 ** 400)), r"^rho must be a finite number >= 0"),
    (lambda: ApproxDP(1.0, 10 ** 400), r"^delta must be in \[0, 1\]"),
    (lambda: zcdp_to_approx_dp(10 ** 400, 1e-5), r"^rho must be a finite number >= 0"),
    (lambda: zcdp_to_approx_dp(1.0, 10 ** 400), r"^delta must be in the open interval"),
])
def test_a_huge_integer_parameter_is_refused_in_one_line(call, message):
    # float(value) raised OverflowError ("int too large to convert to float")
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


@pytest.mark.parametrize("size", [2 ** 70, (2 ** 32, 2 ** 32), (2 ** 61, 0), [2 ** 31, 2 ** 31, 2]])
def test_a_size_beyond_an_int64_array_is_refused_in_one_line(size):
    # the element count was np.prod(..., dtype=int64): an OverflowError for 2**70, and a silent
    # wrap to 0 for 2**32 x 2**32 followed by numpy's "cannot reshape array of size 0"
    with pytest.raises(ValueError, match=r"^size=.* asks for more than 2\*\*60 values, .*; draw fewer"):
        DiscreteGaussian(3.0, seed=0).sample(size)
    assert DiscreteLaplace(3.0, seed=0).sample((0, 2 ** 40)).shape == (0, 2 ** 40)


@pytest.mark.parametrize("high", [2.5, 3.0, None, True, "3", np.float64(4.0)])
def test_rng_integers_refuses_a_non_integer_high(high):
    # int(high) truncated 2.5 to 2 silently and raised TypeError for None
    with pytest.raises(ValueError, match=r"^high must be an integer in \[1, 2\*\*63\], got "):
        SecureRNG(seed=0).integers(high, 3)
    assert SecureRNG(seed=0).integers(np.int64(5), 3).dtype == np.int64


@pytest.mark.parametrize("n, true_mean, name", [
    (0, 0.5, "n"), (-5, 0.5, "n"), (2.5, 0.5, "n"), (True, 0.5, "n"), (None, 0.5, "n"),
    (10, 1.5, "true_mean"), (10, -0.1, "true_mean"), (10, float("nan"), "true_mean"), (10, "0.5", "true_mean"),
])
def test_debias_variance_checks_its_arguments(n, true_mean, name):
    # n = 0 raised ZeroDivisionError; n = -5 returned a negative variance
    with pytest.raises(ValueError, match=rf"^{name} must be "):
        RandomizedResponse(1.0, seed=0).debias_variance(n, true_mean)


def test_debias_variance_values_are_unchanged():
    rr = RandomizedResponse(1.0, seed=0)
    p = rr.keep_probability
    for n, m in [(1, 0.5), (100, 0.0), (np.int64(7), 1), (10, Fraction(1, 4))]:
        r = p * m + (1 - p) * (1 - m)
        assert rr.debias_variance(n, m) == r * (1 - r) / (int(n) * (2 * p - 1) ** 2)


def test_laplace_variance_is_the_closed_form_to_double_precision():
    # 2q/(1 - q)**2 computed with 1 - q in doubles: 4.4e-5 relative error at scale 1e12
    rng = random.Random(23_008)
    scales = [2.0 ** -10, 0.3, 1.0, 1e4, 1e9, 7.77e11, 1e12, 2.0 ** 40]
    scales += [2.0 ** rng.uniform(-10, 40) for _ in range(200)]
    with localcontext() as ctx:
        ctx.prec = 60
        for t in scales:
            q = (-1 / Decimal(t)).exp()
            exact = 2 * q / (1 - q) ** 2
            got = DiscreteLaplace(t, seed=0).variance()
            tiny = 4 * Decimal(2.0 ** -1074)  # scale 2**-10: the variance is below the doubles
            # below scale 1 the rounding of 1/scale to a double (x 1/scale in exp) dominates
            rel = Decimal("4e-15") * max(1, 1 / Decimal(t))
            assert abs(Decimal(got) - exact) <= rel * exact + tiny, t


def test_the_documented_seeded_key_reproduces_the_stream():
    # docs/mechanisms.md gave the key as SHA-256(domain || seed), one hash short of the code's
    import hashlib
    import pathlib

    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    doc = " ".join(pathlib.Path(__file__).resolve().parents[1].joinpath("docs", "mechanisms.md")
                   .read_text(encoding="utf-8").split())
    assert ("the ChaCha20 key for epoch `e = 0, 1, …` is `SHA-256(seed key || e as 8 little-endian bytes)`"
            in doc)
    for seed, encoded in [(28_001_200, b"int:28001200"), ("ab", b"str:ab"), (b"\x00x", b"bytes:\x00x")]:
        seed_key = hashlib.sha256(b"privirt.mechanisms.rng/v1\x00" + encoded).digest()
        key = hashlib.sha256(seed_key + (0).to_bytes(8, "little")).digest()
        stream = Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor().update(bytes(32))
        assert np.array_equal(np.frombuffer(stream, dtype=np.uint64), SecureRNG(seed=seed).random_uint64(4))


def test_the_documented_rate_of_uncertified_laplace_proposals():
    # docs/mechanisms.md said "probability about 10^-10"; at scale 2**40 it is about 1.6e-5
    import pathlib

    from mechanisms._samplers import DiscreteLaplaceSampler

    doc = " ".join(pathlib.Path(__file__).resolve().parents[1].joinpath("docs", "mechanisms.md")
                   .read_text(encoding="utf-8").split())
    assert "10^−10" not in doc and "about `10^−5` of the words at scales near `2^40` (the largest)" in doc
    rng = SecureRNG(seed=23_010)
    total = uncertified = 0
    for chunk in DiscreteLaplaceSampler(Fraction(2.0 ** 40)).geometric.chunks:  # the float proposal
        u = rng.random_uint64(1 << 18)
        uf = (u >> np.uint64(11)).view(np.int64).astype(np.float64) * (-(2.0 ** -53) * chunk._one_minus_zN) + 1.0
        r = np.minimum(np.floor(np.log(uf) * chunk._inv_neg_lam), chunk.N - 1).astype(np.int64)
        ok = (u > np.take(chunk._Cext, r)) & (u < np.take(chunk._Cext1, r))
        total, uncertified = total + u.size, uncertified + int((~ok).sum())
    assert 0 < uncertified / total < 5e-5


@pytest.mark.parametrize("tight", ["no", "yes", 1, 0, 1.5, [True], np.array([True]), None])
def test_tight_must_be_true_or_false(tight):
    # tight="no" gave the tight epsilon
    with pytest.raises(ValueError, match=r"^tight must be True or False, got "):
        ZCDP(0.5).to_approx_dp(1e-6, tight=tight)
    with pytest.raises(ValueError, match=r"^tight must be True or False, got "):
        zcdp_to_approx_dp(0.0, 1e-6, tight=tight)
    assert ZCDP(0.5).to_approx_dp(1e-6, tight=np.bool_(False)) == ZCDP(0.5).to_approx_dp(
        1e-6, tight=False)


@pytest.mark.parametrize("mean", [None, True, np.bool_(False), "0.5", 1j, np.array([True]),
                                  [0.5, None], np.array(["a"])], ids=repr)
def test_debias_refuses_what_is_not_a_mean(mean):
    # None, True and '0.5' gave NaN, 1.58 and 0.5
    rr = RandomizedResponse(1.0, seed=1)
    with pytest.raises(ValueError, match=r"^mean_of_randomized must be a number or an array"):
        rr.debias(mean)
    assert rr.debias(Fraction(1, 2)) == rr.debias(0.5) == pytest.approx(0.5)
    assert rr.debias([0.5, 0.5]).tolist() == pytest.approx([0.5, 0.5])
