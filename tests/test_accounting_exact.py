"""Stated privacy parameters against an independent high-precision computation.

The zCDP → (ε, δ) conversion of Canonne, Kamath & Steinke (2020, Cor. 13) is recomputed here
with 80-digit :mod:`decimal` arithmetic (a grid over t = log(α − 1) then golden-section
refinement), independently of privirt's own code, and every claim must be at least that
infimum (rounded up, never to nearest) and at most the target the caller chose.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from privirt.private.accounting import ApproxDP, zcdp_to_approx_dp
from privirt.private.measurements import CountsGaussian
from privirt.private.sensitivity import pairwise_counts_sensitivity

EPSILONS = [1e-6, 2e-6, 0.01, 1.0, 50.0]
DELTAS = [1e-12, 1e-5, 0.5, 0.95]


def _dec(x: float) -> Decimal:
    q = Fraction(x)
    return Decimal(q.numerator) / Decimal(q.denominator)


def _grid_then_golden_minimum(f, grid: list, steps: int) -> Decimal:
    """min of f: the best point of ``grid``, then ``steps`` golden-section steps between its
    neighbours (Decimal arithmetic in the caller's context)."""
    k = min(range(len(grid)), key=lambda i: f(grid[i]))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    g = (Decimal(5).sqrt() - 1) / 2
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(steps):
        if f1 < f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = f(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = f(x2)
    return min(f1, f2)


def cks_infimum(rho: float, delta: float) -> Decimal:
    """inf over α > 1 of αρ + (log(1/δ) + (α−1) log(1−1/α) − log α)/(α−1), to ~40 digits."""
    with localcontext() as ctx:
        ctx.prec = 80
        R, L = _dec(rho), -_dec(delta).ln()

        def f(t: Decimal) -> Decimal:
            a = 1 + t.exp()
            return a * R + (L + (a - 1) * (1 - 1 / a).ln() - a.ln()) / (a - 1)

        t0 = (L.ln() - R.ln()) / 2
        grid = [t0 + Decimal(k) / 20 for k in range(-400, 401)]
        return max(Decimal(0), _grid_then_golden_minimum(f, grid, 160))


@pytest.mark.parametrize("rho, delta", [(0.5, 0.5), (10.0, 1e-300), (2.85537, 0.95), (1e-4, 1e-10),
                                        (30.0, 0.2), (1e4, 0.5), (0.01, 0.95)])
def test_conversion_is_never_below_the_exact_infimum(rho, delta):
    claimed = zcdp_to_approx_dp(rho, delta)
    exact = cks_infimum(rho, delta)
    assert Decimal(claimed) >= exact
    # and tight: well within the calibration margin (1e-10 relative) above it
    assert Decimal(claimed) - exact <= exact * Decimal("1e-10") + Decimal("1e-300")


@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_gaussian_claims_cover_the_exact_conversion_and_meet_the_target(epsilon, delta):
    m = CountsGaussian.calibrate(ApproxDP(epsilon, delta), pairwise_counts_sensitivity(10))
    claimed = m.guarantee.epsilon
    exact = cks_infimum(m.native.rho, delta)
    assert claimed <= epsilon
    assert Decimal(claimed) >= exact  # the claim covers the true conversion ...
    assert exact <= _dec(epsilon)  # ... which is within the target


def test_tiny_epsilon_large_delta_release_regression():
    # reviewer's case: a claim 9.99999999029555e-07 whose true conversion was 1.000000002023e-06
    m = CountsGaussian.calibrate(ApproxDP(1e-6, 0.95), pairwise_counts_sensitivity(10))
    assert cks_infimum(m.native.rho, 0.95) <= Decimal(m.guarantee.epsilon) <= Decimal("1e-6")


def test_zcdp_delta_is_never_flushed_to_zero():
    from privirt.private.accounting import zcdp_delta

    # exp underflows here; δ = 0 would state the zCDP mechanism as pure (50, 0)-DP
    assert zcdp_delta(0.01, 50.0) == 5e-324
    assert zcdp_delta(1e-300, 700.0) > 0.0
    assert zcdp_delta(0.0, 1.0) == 0.0  # ρ = 0 is (0, 0)-DP


def test_composed_sums_are_rounded_up_never_to_nearest():
    from mechanisms import DiscreteLaplace

    from privirt.private.accounting import PrivacyCost, sum_up, total_epsilon

    below = 0
    for k in range(2, 60):
        for e in (0.01, 0.1, 1 / 3, 0.7):
            eps = DiscreteLaplace(1 / e).privacy(1).epsilon
            exact = Fraction(eps) * k
            tot = total_epsilon([PrivacyCost(epsilon=eps)] * k, 0.0)
            below += Fraction(tot) < exact
            assert Fraction(tot) - exact < Fraction(math.ulp(tot))  # the next float up at most
            assert Fraction(sum_up([eps] * k)) >= exact
    assert below == 0
    # zCDP spends: ρ's add up exactly, then the conversion
    rhos = [0.1, 1 / 3, 0.07, 1e-5 / 3] * 7
    exact_rho = sum(map(Fraction, rhos))
    assert Fraction(sum_up(rhos)) >= exact_rho
    tot = total_epsilon([PrivacyCost(rho=r) for r in rhos], 1e-5)
    assert Decimal(tot) >= cks_infimum(float(exact_rho), 1e-5)


def test_parts_gaussian_rho_is_the_rounded_up_sum_of_its_parts():
    import mechanisms

    from privirt.private.measurements import TotalsGaussian

    g = TotalsGaussian.calibrate(ApproxDP(1e-6, 1e-12), n_persons=500, n_items=12, missing="mcar")
    parts = [mechanisms.DiscreteGaussian(s).privacy(l2, dimension=k).rho
             for s, (l2, k) in zip(g.sigmas, g._part_sens)]
    exact = sum(map(Fraction, parts))
    assert Fraction(g.native.rho) >= exact  # was 2.5473156017004683e-14 < 2.5473156017004686e-14
    assert Fraction(g.native.rho) - exact < Fraction(math.ulp(g.native.rho))


@pytest.mark.parametrize("value, digits, shown", [
    (0.12345639998765434, 6, "0.123457"),  # was 0.123456, below the claim
    (0.9999999999, 6, "1"),  # a hair below a round value: the round value
    (1.0000000001, 6, "1.00001"),  # a hair above: never printed below it
    (1e-5, 3, "1e-05"), (0.95, 3, "0.95"), (1.0, 6, "1"), (50.0, 6, "50"), (0.1, 6, "0.1"),
    (1.0001e-5, 3, "1.01e-05"), (123456789.0, 6, "1.23457e+08"), (5e-324, 3, "5e-324"),
])
def test_printed_parameters_round_up(value, digits, shown):
    from mechanisms.measures import format_up

    assert format_up(value, digits) == shown
    assert float(shown) >= value


def test_statement_prints_epsilon_rounded_up():
    import numpy as np

    import privirt
    from mechanisms.measures import ApproxDP as A, PureDP

    X = (np.random.default_rng(1).random((300, 6)) < 0.5).astype(int)
    for mech in ("gaussian", "laplace"):
        st = privirt.release_counts(X, epsilon=0.1234564, delta=1e-5, mechanism=mech).privacy
        line = next(x for x in str(st).splitlines() if x.startswith("privacy:"))
        assert "0.123457" in line and "0.123456" not in line
    assert str(A(0.9999999999, 1e-5)) == "(1, 1e-05)-DP"
    assert str(A(1.0000000001, 1e-5)) == "(1.00001, 1e-05)-DP"
    assert str(PureDP(0.12345639998765434)) == "0.123457-DP"


def test_agrees_with_opendp_in_the_documented_range_and_is_tighter_beyond():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")

    def odp(rho: float, delta: float) -> float:
        # a float Gaussian with sensitivity 1 and scale 1/sqrt(2ρ) is ρ-zCDP in OpenDP
        meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                                  scale=1 / math.sqrt(2 * rho))
        return dp.c.make_zCDP_to_approxDP(meas).map(1.0).epsilon(delta)

    for rho in (1e-4, 0.01, 1.0, 30.0):
        for delta in (1e-10, 1e-5, 0.2):
            ours, theirs = zcdp_to_approx_dp(rho, delta), odp(rho, delta)
            assert abs(ours - theirs) <= 1e-6 * theirs
    # at very large ρ OpenDP is looser (more conservative); ours is the exact infimum, rounded up
    ours, theirs = zcdp_to_approx_dp(1e4, 0.5), odp(1e4, 0.5)
    assert cks_infimum(1e4, 0.5) <= Decimal(ours) < Decimal(theirs)
    assert (theirs - ours) / ours > 1e-6


def _delta_infimum(rho: float, eps: float) -> Decimal:
    """inf over α > 1 of exp((α−1)(αρ−ε)) (1−1/α)^(α−1)/α, with 100-digit arithmetic (a grid over
    t = log(α − 1), then golden-section refinement), independently of privirt's code."""
    with localcontext() as ctx:
        ctx.prec = 100
        R, E = _dec(rho), _dec(eps)

        def f(t: Decimal) -> Decimal:  # log δ at α = 1 + e^t
            a = t.exp()
            return a * ((1 + a) * R - E) - a * (1 + 1 / a).ln() - (1 + a).ln()

        grid = [Decimal(k) / 10 for k in range(-300, 301)]
        return min(Decimal(1), _grid_then_golden_minimum(f, grid, 200).exp())


_DELTA_GRID = [(2.0, 8.0), (0.5, 1.0), (0.1, 0.3), (30.0, 60.0)] + [
    (rho, zcdp_to_approx_dp(rho, d)) for rho in (1e-4, 0.01, 0.5, 2.0) for d in (1e-12, 1e-5, 1e-2)]


@pytest.mark.parametrize("rho, eps", _DELTA_GRID)
def test_zcdp_delta_is_never_below_the_exact_infimum(rho, eps):
    # zcdp_delta(2.0, 8.0) was 0.0020028453852465587 < 0.00200284538524656003... (rounded to nearest)
    from privirt.private.accounting import zcdp_delta

    z = Decimal(zcdp_delta(rho, eps))
    exact = _delta_infimum(rho, eps)
    assert z >= exact
    assert z - exact <= exact * Decimal("1e-10")  # and tight


def test_the_documented_excess_over_the_infimum_holds():
    """docs/privacy.md said the claim exceeds the infimum by 'a few times 1e-16·αρ'; at small ρ
    it is up to ~1.07e-14·αρ (≈1e-14 relative), ~2e-15 absolute at ordinary ρ: what it says now."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "privacy.md").read_text(encoding="utf-8")
    assert "a few times 1e-16·αρ" not in text and "up to about 1e-14·αρ" in text
    for rho, delta in [(1.0145642407320603e-11, 9.757987910011583e-08), (1.8380293934080297e-11, 1.6515273941527017e-06)]:
        claim, exact = Decimal(zcdp_to_approx_dp(rho, delta)), cks_infimum(rho, delta)
        assert exact <= claim <= exact * (1 + Decimal("2e-14"))  # about 1e-14 relative
    for rho, delta in [(2.0, 1e-9), (5.0, 1e-6), (0.7, 1e-7), (3.0, 1e-5)]:
        claim, exact = Decimal(zcdp_to_approx_dp(rho, delta)), cks_infimum(rho, delta)
        assert exact <= claim <= exact + Decimal("4e-15")  # about 2e-15 absolute at ordinary ρ


def test_the_ledgers_delta_spent_and_delta_left_are_rounded_outward(tmp_path):
    # δ used was math.fsum (to nearest: 1e-05 below the exact 1e-05 + 4.2e-22) and δ left a float
    # subtraction (9e-05, above the exact value)
    from fractions import Fraction

    from privirt.private.accounting import PrivacyCost, check_epsilon
    from privirt.private.ledger import Ledger

    led = Ledger(tmp_path / "l.db", epsilon=1.0, delta=1e-4)
    for _ in range(3):
        led.spend(PrivacyCost(epsilon=0.01, delta=1e-5 / 3), mechanism="rr")
    exact = 3 * Fraction(1e-5 / 3)
    assert Fraction(led.delta_spent()) >= exact
    left = [line for line in led.summary().splitlines() if "left for converting" in line][0]
    shown = left.split("(")[1].split(" left")[0]
    assert Fraction(float(shown)) <= Fraction(1e-4) - exact
    # the ε above the largest is named as given, not rounded to the limit
    with pytest.raises(ValueError, match=r"epsilon must be at most 1e\+06, .* got 1000001\b"):
        check_epsilon(1000001)


def test_the_summary_states_the_spends_it_lists(tmp_path, monkeypatch):
    # the listing and the total came from two reads: a spend landing between them was counted
    # in one and not the other ("spent ε = 0.004 with (0 spend(s))")
    from privirt.private.accounting import PrivacyCost
    from privirt.private.ledger import Ledger

    led = Ledger(tmp_path / "l.db", epsilon=1.0, delta=1e-4)
    led.spend(PrivacyCost(epsilon=0.25), mechanism="laplace")
    real = Ledger.spends

    def spends_then_another(self):
        df = real(self)
        Ledger(self.path).spend(PrivacyCost(epsilon=0.25), mechanism="laplace")  # another process, meanwhile
        return df

    monkeypatch.setattr(Ledger, "spends", spends_then_another)
    text = led.summary()
    assert "spent: ε = 0.25 at δ" in text and "(1 spend(s);" in text


def test_a_pure_spend_above_the_largest_double_is_refused_as_over_budget(tmp_path):
    # Σε²/2 overflowed a double: OverflowError from the exact sums (it said 'rho must be finite')
    from privirt.exceptions import BudgetExceeded
    from privirt.private.accounting import PureDP, total_epsilon
    from privirt.private.ledger import Ledger

    assert total_epsilon([PureDP(1e200)], 1e-5) == 1e200
    led = Ledger(tmp_path / "l.db", epsilon=1.0, delta=1e-5)
    assert led.would_exceed(PureDP(1e200))
    with pytest.raises(BudgetExceeded):
        led.spend(PureDP(1e200), mechanism="laplace")
    assert len(led.spends()) == 0


def test_composed_costs_and_every_printed_rho_are_rounded_up():
    # PrivacyCost.__add__ (compose) added to nearest, and ρ printed to nearest (0.0406327 for a
    # ρ above it): a stated ρ must never be below the claim
    import re
    from fractions import Fraction

    import privirt
    from mechanisms.measures import ZCDP
    from privirt.private.accounting import PrivacyCost, compose

    c = PrivacyCost(rho=0.1) + PrivacyCost(rho=0.2)
    assert Fraction(c.rho) >= Fraction(0.1) + Fraction(0.2)
    assert Fraction(compose([PrivacyCost(epsilon=0.1)] * 3).epsilon) >= 3 * Fraction(0.1)
    assert Fraction(float(str(c).split("=")[1])) >= Fraction(c.rho)
    assert Fraction(float(str(ZCDP(c.rho)).split("-")[0])) >= Fraction(c.rho)
    X = privirt.simulate_rasch(300, 20, seed=310_110)[0]
    st = privirt.release_counts(X, epsilon=1.0, delta=1e-4, seed=310_111).privacy
    shown = float(re.search(r"zCDP: rho = (\S+)", str(st)).group(1))
    assert Fraction(shown) >= Fraction(st.rho)


def test_budget_show_json_states_the_spends_it_lists(tmp_path, monkeypatch, capsys):
    # spends, total, remaining amounts and δ used came from separate reads
    import json

    from privirt.cli import main
    from privirt.private.accounting import PrivacyCost, total_epsilon
    from privirt.private.ledger import Ledger

    led = Ledger(tmp_path / "l.db", epsilon=1.0, delta=1e-4)
    led.spend(PrivacyCost(epsilon=0.25), mechanism="laplace")
    real = Ledger.spends

    def spends_then_another(self):
        df = real(self)
        Ledger(self.path).spend(PrivacyCost(epsilon=0.25), mechanism="laplace")
        return df

    monkeypatch.setattr(Ledger, "spends", spends_then_another)
    assert main(["budget", "show", str(led.path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["spends"]) == 1 and doc["spent"]["epsilon"] == total_epsilon([PrivacyCost(epsilon=0.25)], 1e-4)
    monkeypatch.setattr(Ledger, "spends", real)
    fresh = Ledger(led.path)
    assert fresh.account()["remaining_epsilon"] == fresh.remaining_epsilon()
    assert fresh.account()["spent"] == fresh.spent() and fresh.account()["delta_spent"] == fresh.delta_spent()


def test_accounting_reads_exact_values_on_the_safe_side():
    # a cost (a statement) is read rounded up, a target or a budget rounded down; an exact
    # value (Fraction, huge int, longdouble) was read to nearest, e.g. 1/3 as a double below it
    from fractions import Fraction

    from privirt.private import accounting as A

    rng = np.random.default_rng(5_600_010)
    for _ in range(2000):
        x = Fraction(int(rng.integers(1, 10**12)), int(rng.integers(2, 10**12)))
        if x >= 1:
            x = 1 / x
        cost = A.PrivacyCost(rho=x, epsilon=x, delta=x)
        assert Fraction(cost.rho) >= x and Fraction(cost.epsilon) >= x and Fraction(cost.delta) >= x
        assert Fraction(A.check_epsilon(x)) <= x and Fraction(A.check_delta(x)) <= x
    third = Fraction(1, 3)
    assert Fraction(A.PrivacyCost(rho=third).rho) > third
    assert A.calibrate_laplace_scale(third, 1.0) > float(third)  # the sensitivity read up
    assert A.calibrate_gaussian_sigma(third, 1.0, 1e-6) >= A.calibrate_gaussian_sigma(float(third), 1.0, 1e-6)
    assert Fraction(A.check_epsilon(np.longdouble(1) / 3)) <= Fraction(*(np.longdouble(1) / 3).as_integer_ratio())


@pytest.mark.parametrize("value", [10**400, Fraction(10**400, 7)], ids=["int", "fraction"])
def test_a_huge_exact_epsilon_is_refused_as_above_the_largest(value):
    from privirt.private import accounting as A

    with pytest.raises(ValueError, match=r"at most 1e\+06.*\(\d+ characters\) \(nothing was spent\)$") as err:
        A.check_epsilon(value)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


@pytest.mark.parametrize("epsilon", [0.7, 0.3, 1.1, 2.9, 0.01, 7.3])
@pytest.mark.parametrize("k", [1, 3, 7, 9, 11, 13])
def test_rr_and_laplace_calibrations_meet_the_target_exactly(epsilon, k):
    # ε/n_bits and Δ₁/ε were rounded to nearest: calibrate_rr_epsilon0(0.7, 9) gave
    # 9·ε₀ = 0.7 + 5.6e-17 (the randomizer reported 0.7000000000000001 for a claim of 0.7), and
    # calibrate_laplace_scale(1, 0.7) a scale whose Δ₁/scale was above 0.7 (89 of 266 and 74
    # of 273 pairs, a review)
    from privirt.private.accounting import calibrate_laplace_scale, calibrate_rr_epsilon0

    e0, claimed, amplified = calibrate_rr_epsilon0(epsilon, k)
    assert not amplified and claimed == epsilon
    assert Fraction(e0) * k <= Fraction(epsilon) < Fraction(math.nextafter(e0, math.inf)) * k
    scale = calibrate_laplace_scale(k, epsilon)
    assert Fraction(k) <= Fraction(epsilon) * Fraction(scale)
    assert Fraction(k) > Fraction(epsilon) * Fraction(math.nextafter(scale, 0.0))


def test_a_laplace_scale_that_overflows_is_refused_in_one_line():
    # the safe-side stepping took Fraction(inf): OverflowError "cannot convert Infinity to integer
    # ratio" (a review of this session's change; it returned inf before)
    from privirt.private.accounting import calibrate_laplace_scale

    with pytest.raises(ValueError, match=r"^the Laplace scale Δ₁/ε = .* is not a finite number; use a smaller"):
        calibrate_laplace_scale(1e308, 1e-3)
    assert calibrate_laplace_scale(1e300, 1e-3) >= 1e303
