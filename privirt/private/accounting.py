"""Privacy accounting: costs as values, conversions, composition and noise calibration.

Three kinds of guarantee appear in privirt, each a small immutable value defined beside the
mechanisms (:mod:`mechanisms.measures`, re-exported here):

* :class:`PureDP` — ε-differential privacy (the discrete Laplace mechanism, randomized
  response without shuffling);
* :class:`ZCDP` — ρ-zero-concentrated differential privacy (the discrete Gaussian mechanism);
* :class:`ApproxDP` — (ε, δ)-differential privacy (what a user's budget is written in, and
  what shuffled randomized response gives).

The neighbouring relation throughout is **replace one person's row** (the relation of the
paper this package implements); every guarantee computed here is with respect to it unless a
function says otherwise.

Conversions
-----------
* pure ε → ρ = ε²/2 (Bun & Steinke 2016, Proposition 1.4);
* ρ → (ε, δ) by Bun & Steinke 2016, Lemma 3.5: ε = ρ + 2√(ρ log 1/δ) (``tight=False``), or by
  the tight conversion of Canonne, Kamath & Steinke 2020 (Corollary 13, ``tight=True``,
  default), ε = inf_{α>1} αρ + (log 1/δ + (α−1) log(1−1/α) − log α)/(α−1).
  Any α > 1 gives a valid ε, so the numerical minimisation (in doubles) only affects
  tightness; the value claimed at the chosen α is bounded from above in exact rational
  arithmetic and rounded up, so it is never below the true bound.

Composition
-----------
ρ's add (zCDP composition); ε's and δ's add (basic composition).  A general cost
(:class:`PrivacyCost`) is a triple ``(rho, epsilon, delta)`` meaning "the composition of a
ρ-zCDP mechanism with an (ε, δ)-DP mechanism"; :func:`total_epsilon` turns a list of such
spends into one (ε, δ) statement — the rule the :class:`~privirt.Ledger` uses (see
``docs/privacy.md``).

Calibration
-----------
:func:`calibrate_gaussian_sigma`, :func:`calibrate_laplace_scale` and
:func:`calibrate_rr_epsilon0` find the smallest noise meeting a target (ε, δ) for a given
sensitivity; :func:`shuffle_amplified_epsilon` bounds the amplification by shuffling of Feldman,
McMillan & Talwar (2021): numerically from the pair of their §3 by default, or by the authors'
conservative closed form (:mod:`privirt.private.shuffling`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Iterable, Sequence, Union

import numpy as np
from scipy import optimize

from mechanisms.measures import (  # noqa: F401 - re-exported: the measure types and conversions
    ApproxDP,
    PureDP,
    ZCDP,
    _cks_log_delta_upper,
    _exp_round_up,
    _brief,
    _is_finite,
    _open_delta,
    _real_down,
    _real_up,
    format_up,
    pure_to_zcdp,
    zcdp_to_approx_dp,
)

from .._checks import check_flag, check_positive_int
from . import shuffling
from ._sums import (  # noqa: F401 - re-exported: the exact sums of the composition rule
    SpendSums,
    _round_down,
    _round_up,
    sum_up,
    total_epsilon_of_sums,
)

__all__ = [
    "NEIGHBOURING_RELATION",
    "PureDP",
    "ZCDP",
    "ApproxDP",
    "PrivacyCost",
    "pure_to_zcdp",
    "zcdp_to_approx_dp",
    "zcdp_delta",
    "compose",
    "total_epsilon",
    "total_epsilon_of_sums",
    "calibrate_gaussian_sigma",
    "calibrate_laplace_scale",
    "calibrate_rr_epsilon0",
    "shuffle_amplified_epsilon",
    "shuffle_validity_limit",
    "SHUFFLE_BOUNDS",
    "check_epsilon",
    "check_target_epsilon",
    "check_delta",
    "MIN_EPSILON",
]

NEIGHBOURING_RELATION = "replace one person's row"


# ---------------------------------------------------------------------------------------
# validation helpers (shared with the private release functions)
#: The largest ε privirt states or calibrates for (a release, a budget, an allowance): beyond it
#: the noise falls below the samplers' resolution (every mechanism refuses ε ≳ 1e7 at its own
#: calibration) and the guarantee says nothing; near 1e308 the arithmetic overflowed (a ledger of
#: ε = 1e155 could not print its summary; ρ = ε²/2 became infinite).
MAX_EPSILON: float = 1e6


def check_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """Validate a privacy parameter ε: a finite number in (0, :data:`MAX_EPSILON`] (ε = ∞ would
    mean no privacy).  An ε given exactly (a ``Fraction``, a huge int, ``np.longdouble``) is
    read as the largest double not above it: here ε is a target or a budget, never a statement."""
    v = _real_down(epsilon, name)
    beyond = v > MAX_EPSILON and _is_finite(epsilon)  # a huge int or Fraction reads as inf
    if not beyond and (not math.isfinite(v) or v <= 0):
        raise ValueError(
            f"{name} must be a finite number > 0, got {_brief(epsilon)}; privirt has no "
            "non-private path through its private functions (use spectral_estimate instead)"
        )
    if beyond:
        raise ValueError(f"{name} must be at most {MAX_EPSILON:g}, the largest ε privirt states a guarantee for "
                         f"(beyond it the noise is below the samplers' resolution and the guarantee says "
                         f"nothing), got {_brief(epsilon) if math.isinf(v) else repr(v)} (nothing was spent)")
    return v


#: The smallest ε a private release is calibrated for.  Below it the (ε, δ) claims would rest on
#: rounding (the tight zCDP conversion is bounded from above in exact arithmetic, but its
#: minimiser over α is found in doubles, so the claim can exceed the infimum by up to about
#: 1e-14 relative (≈ 1e-14·αρ, at small ρ), about 2e-15 absolute at ordinary ρ; and a Laplace scale Δ₁/ε
#: leaves the samplers' range), and the noise would drown any count: every private entry point
#: refuses a smaller ε, in one line, before anything is spent.
MIN_EPSILON: float = 1e-6


def check_target_epsilon(epsilon: object, name: str = "epsilon") -> float:
    """Validate the ε of a private release: :func:`check_epsilon` and ε ≥ :data:`MIN_EPSILON`.

    The one rule every private method shares (Algorithm 2 with each mechanism, shuffled
    randomized response, the totals release), checked before any calibration or debit.
    """
    v = check_epsilon(epsilon, name)
    if v < MIN_EPSILON:
        raise ValueError(
            f"{name}={v:g} is below the smallest ε privirt calibrates a release for, {MIN_EPSILON:g} "
            f"(smaller values would rest on floating-point rounding, and the noise would drown the "
            f"data); choose {name} >= {MIN_EPSILON:g} (nothing was spent)"
        )
    return v


def check_delta(delta: object, name: str = "delta") -> float:
    """Validate δ: a number strictly between 0 and 1 (a target or a budget, read as the
    largest double not above its exact value)."""
    _open_delta(delta, name)
    return _open_delta(_real_down(delta, name), name)


def _check_rho(rho: object) -> float:
    """A stated ρ (a cost): read as the smallest double not below its exact value."""
    v = _real_up(rho, "rho")
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"rho must be a finite number >= 0, got {_brief(rho)}")
    return v


# ---------------------------------------------------------------------------------------
# guarantees as values: the measure types live with the mechanisms (mechanisms.measures)
@dataclass(frozen=True)
class PrivacyCost:
    """A general spend: the composition of a ρ-zCDP part and an (ε, δ)-DP part.

    ``PrivacyCost(rho=ρ)`` is a zCDP mechanism, ``PrivacyCost(epsilon=ε)`` a pure-DP one,
    ``PrivacyCost(epsilon=ε, delta=δ)`` an approximate-DP one, and a discrete Gaussian whose
    sampler is within total variation ``t`` of the exact distribution is
    ``PrivacyCost(rho=ρ, delta=t)``.  This is the row format of the :class:`~privirt.Ledger`.
    """

    rho: float = 0.0
    epsilon: float = 0.0
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _check_rho(self.rho))
        # a cost is a statement: each part is read as the smallest double not below it
        e = _real_up(self.epsilon, "epsilon")
        if not math.isfinite(e) or e < 0:
            raise ValueError(f"epsilon must be a finite number >= 0, got {_brief(self.epsilon)}")
        d = _real_up(self.delta, "delta")
        if not (0.0 <= d <= 1.0):
            raise ValueError(f"delta must be in [0, 1], got {_brief(self.delta)}")
        object.__setattr__(self, "epsilon", e)
        object.__setattr__(self, "delta", d)

    @classmethod
    def of(cls, guarantee: "Guarantee") -> "PrivacyCost":
        """The cost of a :class:`PureDP`, :class:`ZCDP`, :class:`ApproxDP` or cost."""
        if isinstance(guarantee, PrivacyCost):
            return guarantee
        if isinstance(guarantee, PureDP):
            return cls(epsilon=guarantee.epsilon)
        if isinstance(guarantee, ZCDP):
            return cls(rho=guarantee.rho)
        if isinstance(guarantee, ApproxDP):
            return cls(epsilon=guarantee.epsilon, delta=guarantee.delta)
        raise TypeError(f"not a privacy guarantee: {_brief(guarantee)}")

    def __add__(self, other: "PrivacyCost") -> "PrivacyCost":
        other = PrivacyCost.of(other)  # each sum exact, rounded up (never stated below the truth)
        return PrivacyCost(sum_up((self.rho, other.rho)), sum_up((self.epsilon, other.epsilon)),
                           min(1.0, sum_up((self.delta, other.delta))))

    def to_approx_dp(self, delta: float) -> ApproxDP:
        """The (ε, δ) guarantee of this single spend at total δ (see :func:`total_epsilon`)."""
        return ApproxDP(total_epsilon([self], delta), float(delta))

    def __str__(self) -> str:
        parts = []
        if self.rho:  # printed rounded up, as every stated privacy parameter
            parts.append(f"ρ={format_up(self.rho, 6)}")
        if self.epsilon or not parts:
            parts.append(f"ε={format_up(self.epsilon, 6)}")
        if self.delta:
            parts.append(f"δ={format_up(self.delta, 3)}")
        return ", ".join(parts)


Guarantee = Union[PureDP, ZCDP, ApproxDP, PrivacyCost]


# ---------------------------------------------------------------------------------------
# conversions
def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest δ (tight CKS 2020 conversion) with ρ-zCDP ⇒ (ε, δ)-DP.

    δ = inf_{α>1} exp((α−1)(αρ−ε)) (1−1/α)^(α−1) / α, capped at 1, and for ρ > 0 at
    least the smallest positive double (5e-324; a zCDP mechanism is never (ε, 0)-DP).  An
    exact upper bound, never below the infimum: α is chosen in doubles, and the δ at that α
    is bounded in outward-rounded exact arithmetic and rounded up.
    """
    rho = _check_rho(rho)
    eps = _real_down(epsilon, "epsilon")  # the target ε: δ is larger at a smaller ε
    if not (0 <= eps < math.inf):  # (ε = inf overflowed the exact arithmetic; NaN fails too)
        raise ValueError(f"epsilon must be a finite number >= 0, got {_brief(epsilon)}")
    if rho == 0.0:
        return 0.0

    def logd(t: float) -> float:
        a = 1.0 + math.exp(t)
        return (a - 1.0) * (a * rho - eps) + (a - 1.0) * math.log1p(-1.0 / a) - math.log(a)

    # doubles only choose α (as in zcdp_to_approx_dp); the δ claimed is the bound at that α
    # evaluated in outward-rounded exact arithmetic and rounded up, never below the infimum
    grid = np.linspace(-30.0, 30.0, 481)
    vals = np.array([logd(t) for t in grid])
    k = int(np.argmin(vals))
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(logd, bounds=(a, b), method="bounded", options={"xatol": 1e-12})
    t_best = float(res.x) if float(res.fun) <= float(vals[k]) else float(grid[k])
    d = min(1.0, _exp_round_up(_cks_log_delta_upper(math.exp(t_best), rho, eps)))
    # exp underflows to 0 below about e^-745, which would state a zCDP mechanism as (ε, 0)-DP,
    # i.e. pure DP: a positive ρ never gives δ = 0, so report at least the smallest double
    return float(max(d, math.ulp(0.0)))


# ---------------------------------------------------------------------------------------
# composition
def compose(costs: Iterable[Guarantee]) -> PrivacyCost:
    """Compose spends: ρ's add (zCDP), ε's and δ's add (basic composition)."""
    total = PrivacyCost()
    for c in costs:
        total = total + PrivacyCost.of(c)
    return total


def total_epsilon(costs: Sequence[Guarantee], delta: float) -> float:
    """The ε of the composition of ``costs`` as an (ε, ``delta``)-DP guarantee.

    Rule (documented in ``docs/privacy.md``): with ρ = Σρᵢ, ε = Σεᵢ and δ₀ = Σδᵢ, the
    composition is (ε + ε_CKS(ρ, δ − δ₀), δ)-DP — the ρ-zCDP part converted with the tight
    conversion at the δ left after the spends' own δ's, plus the ε's composed basic.  As an
    alternative that is also valid, pure spends (δᵢ = 0) may be folded into the zCDP part as
    εᵢ²/2; the smaller of the two results is returned.

    Returns ``inf`` when the spends' own δ's already reach ``delta`` while a zCDP part
    remains, or exceed it.
    """
    delta = _real_down(delta, "delta")  # the target δ: ε is larger at a smaller δ
    if not (0.0 <= delta <= 1.0):
        raise ValueError(f"delta must be in [0, 1], got {_brief(delta)}")
    return SpendSums.of(PrivacyCost.of(c) for c in costs).total(delta)


# ---------------------------------------------------------------------------------------
# calibration
TvBound = Union[float, Callable[[float], float]]

#: Above this the classic bound's σ is not used as the start of the calibration search.
_SIGMA_START_MAX = 1e150


def _tv(tv_bound: TvBound, sigma: float) -> float:
    """The sampler's TV distance per draw at ``sigma``, rounded up and checked to be finite and
    >= 0: a negative value would grow the δ left for the noise and make σ too small."""
    value = tv_bound(sigma) if callable(tv_bound) else tv_bound
    what = f"tv_bound({_brief(sigma)}) returned {_brief(value)}; it" if callable(tv_bound) else "tv_bound"
    try:
        tv = _real_up(value, "tv_bound")
    except (TypeError, ValueError):
        tv = math.nan
    if not (math.isfinite(tv) and tv >= 0):
        raise ValueError(f"{what} must be a finite number >= 0 (the sampler's TV distance per draw)"
                         + ("" if callable(tv_bound) else f", got {_brief(value)}"))
    return tv


def calibrate_gaussian_sigma(
    l2_sensitivity: float,
    epsilon: float,
    delta: float,
    *,
    draws: int = 0,
    tv_bound: TvBound = 0.0,
) -> float:
    """The smallest σ of the discrete Gaussian meeting (ε, δ)-DP at this L2 sensitivity.

    The discrete Gaussian with scale σ on a query of L2 sensitivity Δ₂ is ρ-zCDP with
    ρ = Δ₂²/(2σ²) (Canonne, Kamath & Steinke 2020, Theorem 14).  A sampler that is within
    total variation ``tv_bound`` (per draw; a number or a function of σ) of the exact
    distribution adds ``draws · tv_bound`` to δ.  The returned σ is the smallest with
    ``zcdp_to_approx_dp(ρ, δ − draws·tv, tight=True) ≤ ε``, found by
    :func:`scipy.optimize.brentq` on that monotone function and then checked.

    Raises
    ------
    ValueError
        For invalid inputs, or when the sampler's TV term alone uses up δ.
    """
    l2 = _real_up(l2_sensitivity, "l2_sensitivity")
    if not (l2 > 0 and math.isfinite(l2)):
        raise ValueError(f"l2_sensitivity must be a finite number > 0, got {_brief(l2_sensitivity)}")
    epsilon = check_epsilon(epsilon)
    delta = check_delta(delta)
    if isinstance(draws, (bool, np.bool_)) or not isinstance(draws, (int, np.integer)) or draws < 0:
        raise ValueError(f"draws must be an integer >= 0 (the sampler's draws), got {_brief(draws)}")
    draws = int(draws)
    if not callable(tv_bound):  # a bad number is refused before the search (a function, in it)
        _tv(tv_bound, l2)

    def slack(sigma: float) -> float:
        d = delta - draws * _tv(tv_bound, sigma)
        if d <= 0:
            return math.inf
        return zcdp_to_approx_dp(l2 * l2 / (2.0 * sigma * sigma), d) - epsilon

    # bracket: the classic bound's σ is an upper bound on the answer (the tight conversion
    # is never worse); search below it.
    # ρ = (√(L + ε) − √L)² = (ε / (√(L + ε) + √L))², so σ = Δ₂ (√(L + ε) + √L) / (√2 ε),
    # computed without forming ρ (which underflows to 0 below ε ≈ 1e-150).  For tiny ε that
    # σ overflows, while the tight conversion is met by a moderate σ (where it gives ε = 0,
    # i.e. the δ alone covers the shift): start the search from σ = Δ₂ then.
    log_inv = math.log(1.0 / delta)
    hi = l2 * (math.sqrt(log_inv + epsilon) + math.sqrt(log_inv)) / (math.sqrt(2.0) * epsilon) * 1.01
    if not hi < _SIGMA_START_MAX:
        hi = l2
    tries = 0
    while slack(hi) > 0:
        hi *= 2.0
        tries += 1
        if tries > 200:
            raise ValueError(
                f"cannot meet (ε={epsilon}, δ={delta}): the sampler's total-variation term "
                f"({draws} draws) uses up δ; increase delta"
            )
    lo = hi / 2.0
    while slack(lo) <= 0:
        hi, lo = lo, lo / 2.0
        if lo < 1e-300:
            raise ValueError("calibration failed: no noise needed?")  # pragma: no cover
    sigma = optimize.brentq(slack, lo, hi, xtol=1e-14 * hi, rtol=4 * np.finfo(float).eps, maxiter=500)
    # brentq's root may sit a hair on the wrong side: step up until the guarantee holds.
    for _ in range(200):
        if slack(sigma) <= 0:
            return float(sigma)
        sigma = math.nextafter(sigma, math.inf) * (1 + 1e-15)
    return float(hi)  # pragma: no cover


def calibrate_laplace_scale(l1_sensitivity: float, epsilon: float) -> float:
    """Scale of the discrete Laplace meeting ε-DP: ``Δ₁/ε`` (pure DP, δ unused).

    The discrete Laplace with pmf ∝ exp(−|z|/scale) on a query of L1 sensitivity Δ₁ is
    (Δ₁/scale)-DP (Ghosh, Roughgarden & Sundararajan 2009; Canonne, Kamath & Steinke 2020).
    """
    l1 = _real_up(l1_sensitivity, "l1_sensitivity")
    if not (l1 > 0 and math.isfinite(l1)):
        raise ValueError(f"l1_sensitivity must be a finite number > 0, got {_brief(l1_sensitivity)}")
    epsilon = check_epsilon(epsilon)
    scale = l1 / epsilon  # rounded to nearest: step up until Δ₁/scale ≤ ε exactly
    if not math.isfinite(scale):
        raise ValueError(f"the Laplace scale Δ₁/ε = {_brief(l1)}/{_brief(epsilon)} is not a finite "
                         "number; use a smaller l1_sensitivity or a larger epsilon")
    while Fraction(l1) > Fraction(epsilon) * Fraction(scale):
        scale = math.nextafter(scale, math.inf)
    return scale


def shuffle_validity_limit(n: int, delta: float) -> float:
    """Largest local ε₀ for the conservative closed form (:func:`privirt.private.shuffling.closed_form_epsilon`):
    log(n / (16 log(4/δ))).  The default numerical bound has no such limit."""
    delta = check_delta(delta)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be >= 1, got {_brief(n)}")
    return shuffling.closed_form_validity_limit(int(n), delta)


#: Amplification is claimed only when it lets each person use at least this factor more local
#: ε than ε itself: below that, pure ε-DP (δ = 0) is the stronger statement for the same noise.
SHUFFLE_MIN_GAIN = 1.01

#: How shuffled randomized response is accounted: "numerical" (the FMT §3 pair computed
#: exactly, the default) or "closed_form" (the authors' conservative closed form, the fallback).
SHUFFLE_BOUNDS = ("numerical", "closed_form")


def shuffle_amplified_epsilon(
    epsilon0: float, n: int, delta: float, *, bound: str = "numerical"
) -> float | None:
    """Central ε after shuffling n reports of an ε₀-LDP randomizer (Feldman, McMillan & Talwar).

    ``bound="numerical"`` (default) is the smallest ε at which the pair of FMT §3 is
    (ε, δ)-indistinguishable, computed exactly (:mod:`privirt.private.shuffling`); ``"closed_form"`` is
    the authors' conservative closed form, valid for ε₀ ≤ :func:`shuffle_validity_limit`.
    Returns ``None`` when the bound gives nothing (then no amplification may be claimed).  The
    guarantee is (ε, δ)-DP for the replace-one relation on the n reports.
    """
    e0 = _real_up(epsilon0, "epsilon0")
    if e0 < 0 or not math.isfinite(e0):
        raise ValueError(f"epsilon0 must be a finite number >= 0, got {_brief(epsilon0)}")
    delta = check_delta(delta)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be >= 1, got {_brief(n)}")
    if bound == "numerical":
        return shuffling.numerical_epsilon(e0, int(n), delta)
    if bound == "closed_form":
        return shuffling.closed_form_epsilon(e0, int(n), delta)
    raise ValueError(f"bound must be one of {SHUFFLE_BOUNDS}, got {_brief(bound)}")


def calibrate_rr_epsilon0(
    epsilon: float,
    n_bits: int,
    *,
    delta: float | None = None,
    n_persons: int | None = None,
    shuffle: bool = False,
    bound: str = "numerical",
) -> tuple[float, float, bool]:
    """Per-bit ε₀ of randomized response for a user-level target.

    Each person reports ``n_bits`` independently randomized bits, so the person-level local
    guarantee is ε_L = n_bits · ε₀ (basic composition).  Without shuffling ε₀ = ε / n_bits,
    pure ε-DP.  With ``shuffle=True`` the largest ε_L whose amplified guarantee
    (:func:`shuffle_amplified_epsilon` with ``bound``, n = ``n_persons``) is ≤ ε at ``delta`` is
    used if it beats ε_L = ε by the factor :data:`SHUFFLE_MIN_GAIN` (else pure ε-DP is the
    stronger statement); amplification is only claimed where the bound verifies it.

    Returns
    -------
    epsilon0 : float
        The per-bit parameter.
    epsilon_user : float
        The guarantee claimed (ε-DP without amplification, (ε, δ) with it: the target ε with
        the numerical bound, the closed form's amplified ε ≤ ε with ``bound="closed_form"``).
    amplified : bool
        Whether the shuffle amplification bound was used.
    """
    epsilon = check_epsilon(epsilon)
    n_bits = check_positive_int("n_bits", n_bits)
    shuffle = check_flag("shuffle", shuffle)
    base = epsilon / n_bits  # rounded to nearest: step down until n_bits·ε₀ ≤ ε exactly
    while Fraction(base) * n_bits > Fraction(epsilon):
        base = math.nextafter(base, 0.0)
    if not shuffle:
        return base, epsilon, False
    if delta is None or n_persons is None:
        raise ValueError("shuffle=True needs delta and n_persons")
    delta = check_delta(delta)
    if bound not in SHUFFLE_BOUNDS:
        raise ValueError(f"bound must be one of {SHUFFLE_BOUNDS}, got {_brief(bound)}")
    if isinstance(n_persons, bool) or not isinstance(n_persons, (int, np.integer)) or n_persons < 1:
        raise ValueError(f"n_persons must be a positive integer, got {_brief(n_persons)}")
    n_persons = int(n_persons)
    if bound == "numerical":
        eL = _largest_amplified_local_epsilon(epsilon, n_persons, delta)
    else:
        eL = _largest_local_epsilon_closed_form(epsilon, n_persons, delta)
    if eL is None or eL < SHUFFLE_MIN_GAIN * epsilon:
        return base, epsilon, False
    # The randomizer runs with the float ε₀ and is (n_bits·ε₀)-LDP for the exact product, which
    # fl(ε_L / n_bits) can push an ulp above ε_L (and above the validity limit when ε_L is at
    # it).  Take ε₀ with n_bits·ε₀ ≤ ε_L exactly, and state the amplified ε of that local ε
    # rounded up (what the mechanism reports), so the claim covers the randomizer actually run.
    e0 = eL / n_bits
    for _ in range(64):
        while Fraction(e0) * n_bits > Fraction(eL):
            e0 = math.nextafter(e0, 0.0)
        e_local = _round_up(Fraction(e0) * n_bits)
        if bound == "numerical":
            # the claim is the target ε itself, verified directly for the local ε actually run
            if shuffling.shuffle_delta(e_local, n_persons, epsilon) <= delta:
                return e0, epsilon, True
        else:
            amp = shuffle_amplified_epsilon(e_local, n_persons, delta, bound=bound)
            if amp is not None and amp <= epsilon:
                return e0, amp, True
        e0 = math.nextafter(e0, 0.0)  # pragma: no cover - float noise in the formula
    return base, epsilon, False  # pragma: no cover


def _largest_amplified_local_epsilon(epsilon: float, n: int, delta: float) -> float | None:
    """Largest person-level ε_L > ε whose shuffled reports are (ε, δ)-DP by the numerical bound
    (δ(ε_L; ε) is increasing in ε_L); ``None`` when nothing above ε qualifies."""
    def ok(eL: float) -> bool:
        return shuffling.shuffle_delta(eL, n, epsilon) <= delta

    lo = epsilon  # δ(ε; ε) = 0: always feasible
    hi = 2.0 * epsilon
    while ok(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 64.0 + math.log(n):  # e^{-ε_L}·n ≪ 1: no amplification left to find
            return lo
    while hi - lo > 1e-13 * hi:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo if lo > epsilon else None


def _largest_local_epsilon_closed_form(epsilon: float, n: int, delta: float) -> float | None:
    """Largest ε_L whose closed-form amplified ε is ≤ ε (within its validity range)."""
    limit = shuffle_validity_limit(n, delta)
    if not (limit > epsilon):  # amplification cannot allow a larger ε_L than ε itself
        return None

    def g(eL: float) -> float:
        out = shuffle_amplified_epsilon(eL, n, delta, bound="closed_form")
        return math.inf if out is None else out - epsilon

    if g(limit) <= 0:
        return limit
    if g(epsilon) > 0:  # amplified bound at ε_L = ε is already above ε: no gain
        return None
    # xtol relative to ε: an absolute 1e-13 is far coarser than an ulp of a small root
    eL = optimize.brentq(g, epsilon, limit, xtol=1e-15 * epsilon, rtol=4 * np.finfo(float).eps, maxiter=1000)
    for _ in range(64):
        if g(eL) <= 0:
            return eL
        eL = math.nextafter(eL, -math.inf)
    return epsilon  # pragma: no cover - brentq's root is within a few ulps; g(ε) ≤ 0 was checked
