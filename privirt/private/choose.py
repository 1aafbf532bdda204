"""Which private estimator to use by default, decided from public quantities only.

The choice may depend on nothing but n (persons), m (items), ε and δ — never on the data —
so that the choice itself reveals nothing.  It follows the accuracy measured by
``benchmarks/bench_private_totals.py`` (``BENCHMARKS.md``): the totals estimator has the lower
error everywhere measured except for short tests taken by few persons (n = 200, m = 10, where
Algorithm 2 was ahead at ε = 0.3 and 1), so Algorithm 2 is the default there.  For data declared missing completely at random
(``missing="mcar"``) ``benchmarks/bench_totals_missing.py`` measured the totals estimator ahead
in all 24 cells of n ∈ {1000, 2000}, m ∈ {20, 50}, ε ∈ {0.3, 1, 3}, 10 %/30 % missing, and
Algorithm 2 ahead in 4 of the 6 cells with m = 10 and n ∈ {200, 500} (the totals estimator
ahead in all three at n = 1000), so the short-test corner is wider there.
"""

from __future__ import annotations

from . import methods

__all__ = ["PRIVATE_METHODS", "default_private_method"]

#: private estimators by name (the registry :mod:`privirt.private.methods`)
PRIVATE_METHODS = methods.names()

#: below both, Algorithm 2 was measured more accurate than the totals estimator
_SMALL_N, _SMALL_M = 500, 10
#: the same corner for declared-MCAR data (n below, m at most)
_MCAR_SMALL_N, _MCAR_SMALL_M = 1000, 10


def default_private_method(n_persons: int, n_items: int, epsilon: float, delta: float,
                           missing: str = "none") -> str:
    """``"totals"`` or ``"spectral"`` (Algorithm 2) from the public n, m, ε, δ and the declared
    input domain ``missing`` (``"none"`` or ``"mcar"``).

    ε and δ are accepted so that the rule can use them as measurements accumulate; the current
    rule depends on n, m and the declared domain.
    """
    if missing not in methods.DOMAINS:
        raise ValueError(f'missing must be "none" or "mcar", got {missing!r}')
    small_n, small_m = (_MCAR_SMALL_N, _MCAR_SMALL_M) if missing == "mcar" else (_SMALL_N, _SMALL_M)
    choice = "spectral" if n_persons < small_n and n_items <= small_m else "totals"
    return methods.get(choice).name  # a registered method

