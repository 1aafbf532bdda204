"""Privacy measures as typed guarantees: what a mechanism's ``privacy(...)`` returns.

* :class:`PureDP` — ε-differential privacy (discrete Laplace, randomized response);
* :class:`ZCDP` — ρ-zero-concentrated differential privacy (discrete Gaussian);
* :class:`ApproxDP` — (ε, δ)-differential privacy.

Each is a small immutable value; ``float(g)`` is its single parameter for :class:`PureDP`
(ε) and :class:`ZCDP` (ρ).  The conversions between them (pure → zCDP, zCDP → (ε, δ)) live
here too; composition and calibration are in :mod:`privirt.accounting`.  See
``docs/privacy.md`` for the conversions used.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

__all__ = ["PureDP", "ZCDP", "ApproxDP", "Measure", "pure_to_zcdp", "zcdp_to_approx_dp",
           "format_up", "format_down", "format_exact"]


def _as_float(value: numbers.Real) -> float:
    """``float(value)``, with a finite value beyond the doubles (an int or ``Fraction`` of
    10**400) as ``±inf`` (refused by the callers with a message) instead of an ``OverflowError``."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _brief(value: object, limit: int = 40, keep: int = 20) -> str:
    """``repr(value)`` for a message, on one line (a 2-D array's repr has several) and cut
    short (a huge int has hundreds of digits): beyond ``limit`` characters, the first ``keep``."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else f"{text[:keep]}...({len(text)} characters)"


def _finite_number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {_brief(value)}")
    v = _as_float(value)
    if math.isnan(v):
        raise ValueError(f"{name} must not be NaN")
    return v


def _exact(value: numbers.Real, *, up: bool = True) -> Fraction:
    """The exact rational value of a finite real ``value``, not ``Fraction(float(value))``.

    An int, a ``Fraction`` (any :class:`numbers.Rational`), a float or a numpy scalar
    (``np.longdouble`` included, through ``as_integer_ratio``) is converted exactly.  Another
    real type is read as the nearest double, moved one step ``up`` (or down) when the value
    compares above (below) it, so the result is never on the wrong side of the value.
    """
    if isinstance(value, numbers.Rational):
        return Fraction(int(value.numerator), int(value.denominator))
    ratio = getattr(value, "as_integer_ratio", None)
    if ratio is not None:
        return Fraction(*ratio())
    f = float(value)
    if (value > f) if up else (value < f):
        f = math.nextafter(f, math.inf if up else -math.inf)
    return Fraction(f)


def _is_finite(value: numbers.Real) -> bool:
    """Whether ``value`` is finite, without overflowing on a huge int or ``Fraction``."""
    if isinstance(value, numbers.Rational):
        return True
    ratio = getattr(value, "as_integer_ratio", None)
    if ratio is None:
        return math.isfinite(float(value))
    try:
        ratio()
    except (ValueError, OverflowError):  # nan, inf
        return False
    return True


def _real_up(value: object, name: str) -> float:
    """``value`` as the smallest double >= its exact value (``inf`` and ``nan`` as themselves):
    a privacy parameter given exactly (``Fraction(1, 3)``, ``2**53 + 1``, ``np.longdouble``) is
    never stated below itself."""
    v = _finite_number(value, name)
    return _round_up(_exact(value)) if math.isfinite(v) and _is_finite(value) else v


def _real_down(value: object, name: str) -> float:
    """``value`` as the largest double <= its exact value (``inf`` and ``nan`` as themselves):
    a target or a budget (an ε to calibrate for, a δ to convert at) given exactly is never
    taken above itself."""
    v = _finite_number(value, name)
    if not (math.isfinite(v) and _is_finite(value)):
        return v
    return _round_down(_exact(value, up=False))  # (finite: v is)


def _non_negative(value: object, name: str) -> float:
    v = _real_up(value, name)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {_brief(value)}")
    return v


def _flag(value: object, name: str) -> bool:
    """``value`` as a bool: only ``True``/``False`` (and numpy's); a truthy ``"no"`` is refused."""
    numpy_bool = getattr(value, "dtype", None) is not None and value.dtype.kind == "b" \
        and getattr(value, "shape", None) == ()  # np.bool_ (numpy is imported lazily here)
    if not (isinstance(value, bool) or numpy_bool):
        raise ValueError(f"{name} must be True or False, got {_brief(value)}")
    return bool(value)


def _open_delta(value: object, name: str = "delta") -> float:
    v = _finite_number(value, name)
    if not (0.0 < v < 1.0):
        raise ValueError(f"{name} must be in the open interval (0, 1), got {_brief(value)}")
    return v


def format_up(x: float, digits: int) -> str:
    """``x`` printed like ``f"{x:.{digits}g}"`` but rounded up at that precision, not to nearest.

    A stated privacy parameter must never be displayed below the one claimed.  The rounding
    starts from the shortest decimal that reads back as ``x`` (``repr``), so a round value
    prints as itself (the double nearest 1e-5 prints ``1e-05``, not ``1.01e-05``), a value a
    hair below a round one prints as that round one (0.9999999999 as ``1``), and the printed
    number, read back as a double, is never below ``x``.

    Parameters
    ----------
    x : float
        The value to print.
    digits : int
        Significant digits.

    Returns
    -------
    str
        The formatted value.
    """
    return _format_directed(x, digits, ROUND_CEILING)


def format_exact(x: float) -> str:
    """A budget's ε or δ as stated: ``:g`` where that reads back as ``x`` (1, 1e-05), else the
    shortest text that does (``repr``: 0.1234567, 2.0000004e-06) — never rounded to a nearby
    value, which could state a total at a δ below the ledger's."""
    short = f"{x:g}"
    return short if float(short) == x else repr(float(x))


def format_down(x: float, digits: int) -> str:
    """``x`` printed like ``f"{x:.{digits}g}"`` but rounded down at that precision, not to nearest.

    For amounts that remain (of a budget): the printed number, read back as a double, is never
    above ``x``, so asking for it fits wherever ``x`` fits.  As :func:`format_up`, the rounding
    starts from ``repr`` (round values print as themselves: 0.5 as ``0.5``).

    Parameters
    ----------
    x : float
        The value to print.
    digits : int
        Significant digits.

    Returns
    -------
    str
        The formatted value.
    """
    return _format_directed(x, digits, ROUND_FLOOR)


def _format_directed(x: float, digits: int, rounding: str) -> str:
    """:func:`format_up` (``ROUND_CEILING``) or :func:`format_down` (``ROUND_FLOOR``)."""
    if not math.isfinite(x) or x == 0.0:
        return f"{x:.{digits}g}"
    with localcontext() as ctx:
        ctx.prec, ctx.rounding = digits, rounding
        rounded = +Decimal(repr(float(x)))  # unary plus rounds to the context
    text = f"{float(rounded):.{digits}g}"  # the float's own style ("1e-05", "50", "0.95")
    kept = Decimal(text) >= rounded if rounding == ROUND_CEILING else Decimal(text) <= rounded
    return text if kept else f"{rounded:.{digits}g}"  # subnormals: the decimal itself


@dataclass(frozen=True)
class PureDP:
    """ε-differential privacy (replace-one neighbours)."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _non_negative(self.epsilon, "epsilon"))

    def __float__(self) -> float:
        return self.epsilon

    def to_zcdp(self) -> "ZCDP":
        """ρ = ε²/2 (Bun & Steinke 2016, Proposition 1.4)."""
        return ZCDP(pure_to_zcdp(self.epsilon))

    def to_approx_dp(self, delta: float = 0.0) -> "ApproxDP":
        return ApproxDP(self.epsilon, delta)

    def __str__(self) -> str:
        return f"{format_up(self.epsilon, 6)}-DP"


@dataclass(frozen=True)
class ZCDP:
    """ρ-zero-concentrated differential privacy (replace-one neighbours)."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", _non_negative(self.rho, "rho"))

    def __float__(self) -> float:
        return self.rho

    def to_approx_dp(self, delta: float, *, tight: bool = True) -> "ApproxDP":
        """The (ε, δ) guarantee implied at the given δ (see :func:`zcdp_to_approx_dp`)."""
        return ApproxDP(zcdp_to_approx_dp(self.rho, delta, tight=tight), delta)

    def __str__(self) -> str:
        return f"{format_up(self.rho, 6)}-zCDP"


@dataclass(frozen=True)
class ApproxDP:
    """(ε, δ)-differential privacy (replace-one neighbours)."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _non_negative(self.epsilon, "epsilon"))
        d = _real_up(self.delta, "delta")
        if not (0.0 <= d <= 1.0):
            raise ValueError(f"delta must be in [0, 1], got {_brief(self.delta)}")
        object.__setattr__(self, "delta", d)

    def __str__(self) -> str:
        return f"({format_up(self.epsilon, 6)}, {format_up(self.delta, 3)})-DP"


Measure = PureDP | ZCDP | ApproxDP


def pure_to_zcdp(epsilon: float) -> float:
    """ρ = ε²/2: an ε-DP mechanism is ε²/2-zCDP (Bun & Steinke 2016, Prop. 1.4), computed
    exactly and rounded up to the next double (never below the true ρ)."""
    _non_negative(epsilon, "epsilon")
    return _round_up(_exact(epsilon) ** 2 / 2)


def _cks_epsilon_at(t: float, rho: float, log_inv_delta: float) -> float:
    """CKS 2020 Cor. 13 bound at the Rényi order α = 1 + e^t (valid for every α > 1), in doubles.

    αρ + (log(1/δ) + (α−1) log(1−1/α) − log α)/(α−1), written with α − 1 = e^t,
    log α = log1p(e^t) and log(1 − 1/α) = −log1p(e^{−t}) so that no cancellation occurs for
    α near 1 or for large α (small ρ, where ``t − log α`` would lose every digit and
    understate ε).  Rounded to nearest: used only to *choose* α; the claim is
    :func:`_cks_epsilon_upper` at that α.
    """
    am1 = math.exp(t)
    log_alpha = math.log1p(am1)
    return (1.0 + am1) * rho + log_inv_delta / am1 - math.log1p(math.exp(-t)) - log_alpha / am1


#: Decimal digits of the rigorous evaluations below (the objective's terms cancel by at most
#: about 10 digits in the range privirt calibrates for; 60 leave the result exact to the ulp).
_DIGITS = 60


def _ln_enclosure(x: Fraction) -> tuple[Fraction, Fraction]:
    """Rigorous ``lo <= log(x) <= hi`` for a rational ``x > 0``.

    ``Decimal.ln`` is correctly rounded (error ≤ ½ unit in the last place); the argument is
    rounded to :data:`_DIGITS` digits first (relative error ≤ 10^(1−DIGITS), hence an absolute
    error ≤ 10^(1−DIGITS)·(1 + small) in the log), and both ends are widened by
    10^(2−DIGITS) absolute plus one unit in the last place of the result.
    """
    with localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = _DIGITS, MAX_EMAX, MIN_EMIN
        v = (Decimal(x.numerator) / Decimal(x.denominator)).ln()
    mid = Fraction(v)
    pad = abs(mid) / 10 ** (_DIGITS - 1) + Fraction(1, 10 ** (_DIGITS - 2))
    return mid - pad, mid + pad


def _log1p_lower(x: Fraction) -> Fraction:
    """A rigorous lower bound on ``log(1 + x)`` for a rational ``x > 0`` (relative error
    below 10^(3−DIGITS)).  For ``x < 1/1000`` the alternating series x − x²/2 + x³/3 − …
    (terms decreasing: every partial sum ending on a negative term is below the value);
    otherwise :func:`_ln_enclosure` of ``1 + x`` (≥ 1.001, so its absolute error is small
    against ``log(1 + x)``)."""
    if x >= Fraction(1, 1000):
        return _ln_enclosure(1 + x)[0]
    # x < 1e-3: stop after a negative term once the next term is below x·10^-DIGITS
    tol = x / 10 ** _DIGITS
    total, term, k = Fraction(0), x, 1
    while True:
        total += term / k if k % 2 else -term / k
        if k % 2 == 0 and term * x / (k + 1) < tol:
            return total
        term *= x
        k += 1


def _cks_epsilon_upper(am1: float, rho: float, delta: float) -> Fraction:
    """A rigorous upper bound on the CKS 2020 Cor. 13 bound at α = 1 + ``am1`` (exact rational
    α − 1 = the double ``am1`` > 0), computed in outward-rounded rational arithmetic:

    ε(α) = αρ + log(1/δ)/(α−1) − log1p(1/(α−1)) − log1p(α−1)/(α−1).

    Every α > 1 gives a valid ε, and this value is ≥ ε(α), so it is a valid claim.
    """
    a = Fraction(am1)
    log_inv_delta_hi = -_ln_enclosure(Fraction(delta))[0]
    return ((1 + a) * Fraction(rho) + log_inv_delta_hi / a - _log1p_lower(1 / a)
            - _log1p_lower(a) / a)


def _classic_upper(rho: float, delta: float) -> Fraction:
    """A rigorous upper bound on Bun & Steinke's ρ + 2√(ρ log(1/δ))."""
    q = Fraction(rho) * -_ln_enclosure(Fraction(delta))[0]
    with localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = _DIGITS, MAX_EMAX, MIN_EMIN
        r = Fraction((Decimal(q.numerator) / Decimal(q.denominator)).sqrt())
    r = r * (1 + Fraction(1, 10 ** (_DIGITS - 2)))  # ≥ √q: two roundings of ≤ ½ ulp each
    return Fraction(rho) + 2 * r


def _cks_log_delta_upper(am1: float, rho: float, epsilon: float) -> Fraction:
    """A rigorous upper bound on log δ(α) of the CKS 2020 conversion at ε, at α = 1 + ``am1``
    (exact rational α − 1 = the double ``am1`` > 0):

    log δ(α) = (α−1)(αρ − ε) − (α−1)·log1p(1/(α−1)) − log1p(α−1).

    Every α > 1 gives a valid δ, and this value is ≥ log δ(α), so its exp is a valid claim.
    """
    a = Fraction(am1)
    return a * ((1 + a) * Fraction(rho) - Fraction(epsilon)) - a * _log1p_lower(1 / a) - _log1p_lower(a)


def _exp_round_up(x: Fraction) -> float:
    """The smallest double ≥ exp(``x``) for a rational ``x`` < 0 (1.0 for ``x`` ≥ 0): the
    argument rounded up to :data:`_DIGITS` digits, ``Decimal.exp`` (correctly rounded, error
    ≤ ½ unit in the last place) widened by one unit in the last place, then rounded up."""
    if x >= 0:
        return 1.0
    if x < -746:  # exp(x) < 2^-1076: the smallest positive double is above it (and Decimal is slow)
        return math.ulp(0.0)
    with localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin, ctx.rounding = _DIGITS, MAX_EMAX, MIN_EMIN, ROUND_CEILING
        v = (Decimal(x.numerator) / Decimal(x.denominator)).exp()
    return _round_up(Fraction(v) * (1 + Fraction(1, 10 ** (_DIGITS - 1))))


def _round_down(x: Fraction) -> float:
    """The largest float ≤ the rational ``x`` (the largest double above it, −inf below its negative)."""
    try:
        f = float(x)
    except OverflowError:
        return math.nextafter(math.inf, 0.0) if x > 0 else -math.inf
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def _round_up(x: Fraction) -> float:
    """The smallest double ≥ the rational ``x`` (``inf`` above the largest double)."""
    try:
        f = float(x)
    except OverflowError:
        return math.inf
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def zcdp_to_approx_dp(rho: float, delta: float, tight: bool = True) -> float:
    """The ε such that a ρ-zCDP mechanism is (ε, δ)-DP.

    Parameters
    ----------
    rho : float
        zCDP parameter, ≥ 0.
    delta : float
        Target δ in (0, 1).
    tight : bool, default True
        ``True``: the conversion of Canonne, Kamath & Steinke (2020), Corollary 13,
        ε = inf_{α>1} αρ + (log(1/δ) + (α−1) log(1−1/α) − log α)/(α−1), minimised numerically
        over α in doubles; the value returned is the objective at the α found, bounded from
        above in exact arithmetic and rounded up, so it is never below the true infimum.  It
        agrees with OpenDP's ``make_zCDP_to_approxDP`` to 1e-6 relative for ρ ≤ 30 and
        δ ≤ 0.2 (``docs/privacy.md`` §5; in practice to ~1e-15 there); at very large ρ
        OpenDP's value is the more conservative one (ρ = 10⁴, δ = 0.5: 2.9e-4 relative above
        this, the exact infimum).  ``False``: Bun & Steinke (2016), Lemma 3.5,
        ε = ρ + 2√(ρ log(1/δ)), rounded up.

    Returns
    -------
    float
        ε ≥ 0.
    """
    rho = _non_negative(rho, "rho")
    tight = _flag(tight, "tight")
    given, delta = delta, _open_delta(delta)
    if _is_finite(given) and Fraction(delta) > _exact(given, up=False):
        # a target δ given exactly: the largest double <= it (ε at a larger δ would be smaller)
        delta = math.nextafter(delta, 0.0)
        if delta == 0.0:
            raise ValueError(f"delta must be in the open interval (0, 1), got {given!r}")
    if rho == 0.0:
        return 0.0
    L = math.log(1.0 / delta)
    classic = _round_up(_classic_upper(rho, delta))
    if not tight:
        return classic
    import numpy as np
    from scipy import optimize

    # Minimise over t = log(α − 1) in doubles to choose α; the objective is smooth and unimodal
    # in practice, and the minimiser lies near α ≈ 1 + √(L/ρ) (where the classic bound's α is).
    # The doubles only choose α: the claim is the objective at that α bounded from above in
    # exact arithmetic (near ε ≈ 0 with large δ the terms cancel and doubles understate ε).
    def f(t: float) -> float:
        return _cks_epsilon_at(t, rho, L)

    t0 = 0.5 * (math.log(L) - math.log(rho))  # in logs: ρ may be subnormal
    lo, hi = t0 - 30.0, min(t0 + 30.0, 700.0)  # exp(t) must stay finite
    lo = min(lo, hi - 1.0)
    grid = np.linspace(lo, hi, 241)
    vals = np.array([f(t) for t in grid])
    k = int(np.argmin(vals))
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    res = optimize.minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-12})
    t_best = float(res.x) if float(res.fun) <= float(vals[k]) else float(grid[k])
    am1 = math.exp(t_best)
    if not (0.0 < am1 < math.inf):  # pragma: no cover - t is within [-730, 700]
        return classic
    best = _round_up(_cks_epsilon_upper(am1, rho, delta))
    return max(0.0, min(best, classic))
