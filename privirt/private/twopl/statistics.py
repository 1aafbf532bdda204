"""The released statistics of the private 2PNO estimator and their sensitivity.

For a person with a complete 0/1 row x the release adds the item totals s_i = Σ_l x_li and the
disagreement counts D_ij = #{l : x_li ≠ x_lj}, i < j (persons with exactly one of items i and j
right; D_ij = s_i + s_j − 2 N_ij with N_ij the co-correct count).

Theorem (``docs/private_2pl.md`` §2).  Replacing one person's row x by x′ with F = {i : x_i ≠ x′_i}
changes the totals in the |F| coordinates of F and the indicator [x_i ≠ x_j] exactly for the
pairs with one item in F and one outside, each by ±1.  So the totals part has ‖Δ‖₁ = ‖Δ‖₂² ≤ m
(|F| = m), the disagreements part ≤ ⌊m/2⌋⌈m/2⌉ (|F| = ⌊m/2⌋), both tight; the two are not
attained together: jointly ‖Δ‖₂² = |F|(m + 1 − |F|) ≤ ⌊(m + 1)/2⌋⌈(m + 1)/2⌉.
"""

from __future__ import annotations

import numpy as np

from ..accounting import NEIGHBOURING_RELATION
from ..sensitivity import Sensitivity, _sqrt_up

__all__ = ["pair_index", "pair_statistics", "pair_sensitivity"]


def pair_index(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices (i < j) of the released pairs, in release order."""
    return np.triu_indices(int(m), 1)


def pair_statistics(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Item totals (m,) and disagreement counts D_ij = #{l : x_li ≠ x_lj} for i < j
    (m(m − 1)/2,), both int64.

    ``codes`` is a complete persons × items 0/1 matrix.  Counted exactly in chunks of rows
    (float32 sums are exact below 2²⁴ per chunk; ``einsum`` rather than BLAS, whose threads
    crawl on a busy machine).
    """
    X = np.asarray(codes)
    n, m = X.shape
    G = np.zeros((m, m), dtype=np.int64)
    step = 1 << 20
    for a in range(0, n, step):
        block = X[a:a + step].astype(np.float32)
        G += np.rint(np.einsum("li,lj->ij", block, block)).astype(np.int64)
    iu = pair_index(m)
    s = np.diag(G).copy()
    return s, s[iu[0]] + s[iu[1]] - 2 * G[iu]


def pair_sensitivity(n_items: int, part: str = "joint") -> Sensitivity:
    """Replace-one-person sensitivity of the totals (``part="totals"``: L2² = m), the
    disagreement counts (``"pairs"``: ⌊m/2⌋⌈m/2⌉) or both together (``"joint"``:
    ⌊(m + 1)/2⌋⌈(m + 1)/2⌉); L1 = L2² (every coordinate moves by at most 1).  All tight (the
    rows differing in m, ⌊m/2⌋, ⌊(m + 1)/2⌋ items).  ``n_released`` is the number of released
    coordinates: m, m(m − 1)/2, m + m(m − 1)/2."""
    m = int(n_items)
    sizes = {"totals": m, "pairs": (m // 2) * ((m + 1) // 2), "joint": ((m + 1) // 2) * ((m + 2) // 2)}
    if part not in sizes:
        raise ValueError(f"part must be one of {sorted(sizes)}, got {part!r}")
    s = sizes[part]
    # the number of released coordinates (not the sensitivity): m totals, m(m − 1)/2 pairs
    released = {"totals": m, "pairs": m * (m - 1) // 2, "joint": m + m * (m - 1) // 2}[part]
    return Sensitivity(float(s), _sqrt_up(s), "tight", NEIGHBOURING_RELATION, released)
