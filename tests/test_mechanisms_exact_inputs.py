"""Review A of ``mechanisms``: stated privacy parameters are never below the true ones, and bad
input is refused with one ``ValueError`` line."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from mechanisms import PureDP
from mechanisms.measures import pure_to_zcdp


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
