"""The exported shuffling bounds did not check δ: δ = 0 raised a bare ZeroDivisionError, a
negative δ 'math domain error', δ = 2 gave ε = 0 and δ = NaN gave ε = ε₀.  They now refuse any δ
outside (0, 1) in one line, as accounting.shuffle_amplified_epsilon does."""

from __future__ import annotations

import pytest

from privirt.private import shuffling as S

_CALLS = [
    lambda d: S.closed_form_epsilon(1.0, 100_000, d),
    lambda d: S.numerical_epsilon(1.0, 100_000, d),
    lambda d: S.closed_form_validity_limit(1000, d),
]


@pytest.mark.parametrize("call", _CALLS)
@pytest.mark.parametrize("bad", [0.0, -1e-6, 1.0, 2.0, float("nan"), float("inf"), None, "x"])
def test_a_delta_outside_the_open_unit_interval_is_refused_in_one_line(call, bad):
    with pytest.raises(ValueError, match=r"^delta must ") as info:
        call(bad)
    assert "\n" not in str(info.value)


def test_a_valid_delta_gives_the_same_bounds_as_before():
    assert S.numerical_epsilon(4.0, 100_000, 1e-6) == pytest.approx(0.16977, abs=1e-5)
    assert S.closed_form_epsilon(1.0, 100_000, 1e-6) == pytest.approx(0.0752901, rel=1e-6)
    assert S.closed_form_validity_limit(100_000, 1e-6) == pytest.approx(6.0189226, rel=1e-7)
