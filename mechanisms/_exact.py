"""Exact arithmetic for the samplers' rare slow paths and their precomputed tables.

Everything here works with Python integers, :class:`fractions.Fraction` and
:mod:`decimal` (whose ``exp`` is correctly rounded at any precision), never with binary floats.

Two ideas carry the exactness argument (see ``docs/mechanisms.md``):

* A probability ``p`` is known through *enclosures* ``lo <= p <= hi`` that can be made as
  narrow as wanted (``enclosure(bits)`` returns a pair of width about ``2**-bits``).
* A uniform ``U`` in ``[0, 1)`` is known through a prefix of its binary expansion: ``k`` bits
  ``u`` say ``U`` lies in ``[u / 2**k, (u + 1) / 2**k)``. ``U < p`` is decided as soon as the
  two intervals are disjoint; until then more bits of ``U`` (fresh keystream words) and more
  digits of ``p`` are drawn. This is the classic lazy comparison; it returns the exact
  Bernoulli(p) outcome and stops with probability one.
"""

from __future__ import annotations

from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import Callable

import numpy as np

Enclosure = Callable[[int], "tuple[Fraction, Fraction]"]

TWO64 = 1 << 64
_LARGE_X = 10_000  # exp(-x) < 2**-14000 beyond this


def exp_neg_enclosure(x: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """Rigorous bounds ``lo <= exp(-x) <= hi`` for a rational ``x >= 0``.

    The relative width is below ``2**-bits``. ``x`` is converted to decimal with directed
    rounding (floor and ceiling), ``Decimal.exp`` is correctly rounded (error at most half a unit
    in the last place), and the result is widened by one unit in the last place.
    """
    if x < 0:
        raise ValueError("exp_neg_enclosure needs x >= 0")
    if x == 0:
        return Fraction(1), Fraction(1)
    if x > _LARGE_X and bits <= 14_000:
        return Fraction(0), Fraction(1, 1 << 14_000)
    digits = int(bits * 0.30103) + 12
    with localcontext() as ctx:
        ctx.prec = digits
        ctx.Emax = MAX_EMAX
        ctx.Emin = MIN_EMIN
        num, den = Decimal(x.numerator), Decimal(x.denominator)
        ctx.rounding = ROUND_FLOOR
        x_lo = num / den
        ctx.rounding = ROUND_CEILING
        x_hi = num / den
        ctx.rounding = ROUND_HALF_EVEN
        e_lo = (-x_hi).exp()
        e_hi = (-x_lo).exp()
    ulp = Fraction(1, 10 ** (digits - 1))
    return Fraction(e_lo) * (1 - ulp), Fraction(e_hi) * (1 + ulp)


def fixed64(enclosure: Enclosure) -> int:
    """``floor(2**64 * p)`` exactly, for an irrational (or non-dyadic) ``p`` in ``[0, 1]``.

    Refines the enclosure until both ends have the same 64-bit floor. Raises if that does not
    happen by 4096 bits (which would mean ``p`` sits exactly on a 64-bit grid point).
    """
    bits = 96
    while bits <= 4096:
        lo, hi = enclosure(bits)
        a, b = (lo * TWO64).__floor__(), (hi * TWO64).__floor__()
        if a == b:
            return int(a)
        bits *= 2
    raise ArithmeticError("probability lies on the 64-bit grid; cannot tabulate it")  # pragma: no cover


class LazyUniform:
    """A uniform ``U`` in ``[0, 1)`` revealed 64 bits at a time.

    Parameters
    ----------
    prefix : int
        The bits of ``U`` already drawn (``U`` is in ``[prefix / 2**nbits, (prefix+1) / 2**nbits)``).
    nbits : int
        How many bits ``prefix`` holds.
    word : callable
        Returns a fresh uniform 64-bit integer (the secure keystream).
    """

    __slots__ = ("prefix", "nbits", "_word")

    def __init__(self, prefix: int, nbits: int, word: Callable[[], int]) -> None:
        self.prefix, self.nbits, self._word = int(prefix), int(nbits), word

    def less_than(self, enclosure: Enclosure) -> bool:
        """Exactly decide ``U < p`` for the probability ``p`` described by ``enclosure``."""
        bits = self.nbits + 32
        while True:
            lo, hi = enclosure(bits)
            scale = 1 << self.nbits
            if self.prefix + 1 <= lo * scale:
                return True
            if self.prefix >= hi * scale:
                return False
            if (hi - lo) * scale > Fraction(1, 8):
                bits *= 2  # the enclosure is the bottleneck: more digits of p
            else:
                self.prefix = (self.prefix << 64) | self._word()  # more bits of U
                self.nbits += 64
                bits = max(bits, self.nbits + 32)


def bernoulli_fixed(u: np.ndarray, threshold: int, slow: Callable[[int], bool]) -> np.ndarray:
    """Exact Bernoulli(p) for each uniform word in ``u`` given ``threshold = floor(2**64 p)``.

    ``u < threshold`` implies ``U < (u+1)/2**64 <= p`` (success); ``u > threshold`` implies
    ``U >= u/2**64 > p`` (failure). Only ``u == threshold`` (probability ``2**-64``) is undecided
    and goes to ``slow(u)``, which continues the comparison exactly.
    """
    if threshold >= TWO64:  # p == 1
        return np.ones(u.shape, dtype=bool)
    t = np.uint64(threshold)
    out = u < t
    ties = np.flatnonzero(u == t)
    for i in ties:
        out.flat[i] = slow(int(u.flat[i]))
    return out
