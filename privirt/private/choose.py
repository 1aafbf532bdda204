"""Which private estimator to use by default, decided from public quantities only.

The choice may depend on nothing but n (persons), m (items), ε and δ — never on the data —
so that the choice itself reveals nothing.  It follows the accuracy measured by
``benchmarks/bench_private_totals.py`` (``BENCHMARKS.md``): the totals estimator has the lower
error everywhere measured except for short tests taken by few persons (n = 200, m = 10, where
Algorithm 2 was ahead at ε = 0.3 and 1), so Algorithm 2 is the default there.
"""

from __future__ import annotations

__all__ = ["PRIVATE_METHODS", "default_private_method"]

#: private estimators by name: the noisy-totals estimator and Algorithm 2 (spectral)
PRIVATE_METHODS = ("totals", "spectral")

#: below both, Algorithm 2 was measured more accurate than the totals estimator
_SMALL_N, _SMALL_M = 500, 10


def default_private_method(n_persons: int, n_items: int, epsilon: float, delta: float,
                           missing: str = "none") -> str:
    """``"totals"`` or ``"spectral"`` (Algorithm 2) from the public n, m, ε, δ and the declared
    input domain ``missing`` (``"none"`` or ``"mcar"``).

    ε and δ are accepted so that the rule can use them as measurements accumulate; the current
    rule depends on n and m (and, for ``missing="mcar"``, on ε).
    """
    if missing not in ("none", "mcar"):
        raise ValueError(f'missing must be "none" or "mcar", got {missing!r}')
    if missing == "mcar" and _mcar_spectral(n_persons, n_items, epsilon):
        return "spectral"
    if n_persons < _SMALL_N and n_items <= _SMALL_M:
        return "spectral"
    return "totals"


def _mcar_spectral(n_persons: int, n_items: int, epsilon: float) -> bool:
    """Where Algorithm 2 measured ahead on declared-MCAR data (``bench_totals_missing.py``)."""
    return False
