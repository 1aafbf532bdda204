"""Which private estimator to use by default, decided from public quantities only.

The choice may depend on nothing but n (persons), m (items), ε and δ — never on the data —
so that the choice itself reveals nothing.  It follows the accuracy measured by
``benchmarks/bench_private_totals.py --only shapes_grid`` (``BENCHMARKS.md``, issue 26): on
non-normal ability shapes (bimodal at three separations, skewed, uniform, a point mass plus a
normal) × m ∈ {5, 10, 20} × n ∈ {200, 500, 1000, 5000} × ε ∈ {0.3, 1, 3}, the totals estimator
is ahead of Algorithm 2 averaged over the shapes (geometric mean of the MSE ratios) in every
cell but (m, n, ε) = (10, 500, 0.3), and half of the cells where its worst shape falls below
0.9 are short tests with n·ε < 250 ((10, 500, 0.3), (10, 200, 1), (5, 200, 0.3),
(5, 500, 0.3)), where both estimators are close to knowing nothing.  For declared-MCAR data
``benchmarks/bench_totals_missing.py --corner`` measured Algorithm 2 ahead at m = 10 in exactly
the cells with n·ε < 250 (n = 200 at ε = 0.3 and 1, n = 500 at ε = 0.3) and the totals
estimator ahead in the others (n = 200 at ε = 3, n = 500 at ε ≥ 1, n = 1000), and ahead in all
24 cells with m ≥ 20 and n ≥ 1000.  One rule covers both: Algorithm 2 for tests of at most 10
items when n·ε < 250 (the noise on a proportion correct scales as 1/(nε)) or, as before, n < 500
(there the totals estimator is ahead on average — (5, 200, 3), (10, 200, 3) — but its worst
shapes are close to 0.9 or below, and Algorithm 2 also handles data with missing cells that were
not declared MCAR, which small data sets given to the command line often have).

Re-checked on the grid with 32 data sets per cell and standard errors (``BENCHMARKS.md``, issue 26),
comparing the totals estimator with what the default call gives where the rule picks Algorithm 2
(its default estimator, noise-aware in most of those cells): MSE of the default over the totals
estimator's, geometric mean over the seven shapes, 0.92–1.24 at m = 5 (ties) and
1.03–1.29 at m = 10 (the totals estimator ahead: worst shape ≥ 1.03 ± 0.08 except (10, 200, 0.3),
0.94 ± 0.09); against Algorithm 2 as published the default is within 2 SE of the targets in every
cell.  The rule is kept for now: the n·ε clause alone decides two grid cells, (5, 500, 0.3) (a tie,
0.92) and (10, 500, 0.3) (totals ahead, 1.24, worst shape 1.11 ± 0.09), and the n < 500 clause the
n = 200 cells (totals ahead at m = 10, ε ≥ 1); changing it would move cells that were not measured
against the default call (ε = 0.1, n = 1000–2500) and the declared-MCAR corner, where Algorithm 2
(as published) measured ahead.
"""

from __future__ import annotations

from . import methods

__all__ = ["PRIVATE_METHODS", "default_private_method"]

#: private estimators by name (the registry :mod:`privirt.private.methods`)
PRIVATE_METHODS = methods.names()

#: Algorithm 2 is the default for tests of at most this many items ...
_SMALL_M = 10
#: ... when n·ε is below this (complete data and declared MCAR alike; BENCHMARKS.md, issue 26)
_SMALL_N_EPS = 250.0
#: ... or when there are fewer persons than this
_SMALL_N = 500


def default_private_method(n_persons: int, n_items: int, epsilon: float, delta: float,
                           missing: str = "none") -> str:
    """``"totals"`` or ``"spectral"`` (Algorithm 2) from the public n, m, ε, δ and the declared
    input domain ``missing`` (``"none"`` or ``"mcar"``).

    Algorithm 2 where m ≤ 10 and (n·ε < 250 or n < 500) (measured more accurate there, or not
    clearly worse), the totals estimator elsewhere.  δ is accepted so that the rule can use it as measurements
    accumulate (every measurement so far is at δ = 1e-4); the domain is validated.
    """
    if missing not in methods.DOMAINS:
        raise ValueError(f'missing must be "none" or "mcar", got {missing!r}')
    small = n_items <= _SMALL_M and (n_persons * float(epsilon) < _SMALL_N_EPS or n_persons < _SMALL_N)
    return methods.get("spectral" if small else "totals").name  # a registered method
