"""Sensitivity of the pairwise differential counts Y to one person's row.

For a person with response row x ∈ {0, 1, missing}^m let ``c`` be the 0/1 indicator of the
items answered correctly and ``w`` of the items answered incorrectly (disjoint; both zero on
missing items).  The person adds the outer product ``c wᵀ`` to the count matrix
Y (Y_ij = #persons with i correct and j incorrect, both observed).  On a comparison graph G
(an undirected edge set; both Y_ij and Y_ji are released for each edge {i, j}) the released
contribution is ``c wᵀ`` restricted to the directed pairs of G.

Theorem (proved in ``docs/privacy.md``).  Under the **replace-one-row** relation, the
difference D between the released counts of two neighbouring data sets is a 0/±1 vector with

* complete graph: ‖D‖₁ = ‖D‖₂² ≤ 2⌊m/2⌋⌈m/2⌉, attained (so the bound is tight);
* any graph G: ‖D‖₁ = ‖D‖₂² ≤ 2·maxcut(G) ≤ 2|E|, attained by a maximum cut.

Under the add/remove-one-row relation the bounds halve: ⌊m/2⌋⌈m/2⌉ and maxcut(G).

``bound="paper"`` reproduces the (looser) m(m−1) of Nguyen & Zhang's Lemma 4.1 — every
released cell changing by one — for comparison only.

maxcut(G) is computed exactly by enumeration for up to :data:`EXACT_MAXCUT_MAX_ITEMS` items;
above that the spectral bound maxcut(G) ≤ (m/4)·λ_max(L_G) (L_G the graph Laplacian;
Mohar & Poljak 1990), capped at |E|, is used.  The comparison graph is public (drawn
independently of the data), so computing with it costs no privacy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

from .._checks import brief
from .accounting import NEIGHBOURING_RELATION

__all__ = [
    "Sensitivity",
    "pairwise_counts_sensitivity",
    "max_cut",
    "max_cut_upper_bound",
    "count_contribution",
    "EXACT_MAXCUT_MAX_ITEMS",
]

EXACT_MAXCUT_MAX_ITEMS = 20
Bound = Literal["tight", "paper"]
Relation = Literal["replace", "add_remove"]


@dataclass(frozen=True)
class Sensitivity:
    """Sensitivities of a released integer vector to one person.

    Attributes
    ----------
    l1, l2 : float
        Upper bounds on ‖f(X) − f(X')‖₁ and ‖f(X) − f(X')‖₂ over neighbouring X, X'.
    bound : str
        Which bound: ``"tight"`` (complete graph, exact), ``"sparse-maxcut"`` (exact max cut
        of the graph), ``"sparse-spectral"`` (spectral max-cut bound) or ``"paper"``.
    relation : str
        The neighbouring relation the bound is for.
    n_released : int
        Number of released integer coordinates (directed pairs).
    """

    l1: float
    l2: float
    bound: str
    relation: str
    n_released: int

    def __str__(self) -> str:
        return (
            f"L1 = {bound_text(self.l1)}, L2 = {bound_text(self.l2)} ({self.bound} bound, {self.relation}, "
            f"{self.n_released} released counts)"
        )


def bound_text(x: float) -> str:
    """A sensitivity bound as printed: exact when it is an integer, else rounded up (never below it)."""
    if float(x).is_integer() and abs(x) < 2**53:
        return str(int(x))
    from mechanisms.measures import format_up

    return format_up(float(x), 6)


def _sqrt_up(s: int) -> float:
    """The smallest float whose square is ≥ the integer ``s``: Δ₂ = √s rounded up.

    ``math.sqrt`` rounds to nearest and so falls below √s for many integers (e.g. 18), which
    would make Δ₂ — and ρ = Δ₂²/(2σ²) — smaller than the proven value.
    """
    r = math.sqrt(s)
    while Fraction(r) ** 2 < s:
        r = math.nextafter(r, math.inf)
    return r


def _adjacency(graph: np.ndarray | None, m: int) -> np.ndarray | None:
    if graph is None:
        return None
    A = np.asarray(graph)
    if A.shape != (m, m):
        raise ValueError(f"graph must be an {m} × {m} adjacency matrix, got shape {A.shape}")
    A = A.astype(bool)
    if (A != A.T).any():
        raise ValueError("graph must be symmetric (an undirected comparison graph)")
    if np.diagonal(A).any():
        raise ValueError("graph must have no self-loops")
    return A


def _square(adjacency: np.ndarray) -> np.ndarray:
    """``adjacency`` as a boolean array, checked to be a square (m × m) matrix of numbers."""
    A = np.asarray(adjacency)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"adjacency must be a square (m × m) adjacency matrix, got shape {A.shape}")
    if A.dtype.kind not in "biuf":
        raise ValueError(f"adjacency must hold 0/1 (or bool) entries, got dtype {A.dtype}")
    A = A.astype(bool)
    if (A != A.T).any():
        raise ValueError(
            "adjacency must be symmetric (an undirected graph); pass A | A.T to keep every edge"
        )
    if np.diagonal(A).any():
        raise ValueError("adjacency must have no self-loops (a zero diagonal)")
    return A


def max_cut(adjacency: np.ndarray) -> int:
    """Exact maximum cut of a small undirected graph by enumeration (m ≤ 20).

    Enumerates the 2^(m−1) vertex subsets containing a fixed vertex's complement in chunks;
    runs in well under a second for m ≤ 20.
    """
    A = _square(adjacency)
    m = A.shape[0]
    if m > EXACT_MAXCUT_MAX_ITEMS:
        raise ValueError(
            f"exact max cut is enumerated only up to {EXACT_MAXCUT_MAX_ITEMS} items, got {m}; "
            "use max_cut_upper_bound"
        )
    if m < 2:
        return 0
    iu, ju = np.nonzero(np.triu(A, 1))
    if iu.size == 0:
        return 0
    best = 0
    total = 1 << (m - 1)  # vertex m-1 fixed outside the set: each cut counted once
    chunk = 1 << 12
    for start in range(0, total, chunk):
        s = np.arange(start, min(total, start + chunk), dtype=np.int64)
        side_i = (s[:, None] >> iu[None, :]) & 1
        side_j = (s[:, None] >> ju[None, :]) & 1
        cut = np.count_nonzero(side_i != side_j, axis=1)
        best = max(best, int(cut.max()))
    return best


def max_cut_upper_bound(adjacency: np.ndarray) -> tuple[int, str]:
    """An upper bound on maxcut(G) and how it was obtained.

    Exact (``"sparse-maxcut"``) for m ≤ :data:`EXACT_MAXCUT_MAX_ITEMS`; otherwise
    ``min(|E|, ⌊(m/4) λ_max(L)⌋, ⌊|E|/2 − (m/4) λ_min(A)⌋)`` (``"sparse-spectral"``), where
    A is the adjacency and L = D − A the Laplacian.  For a cut (S, S̄) let x = ±1 on S/S̄
    (‖x‖² = m); then cut(S) = xᵀLx/4 ≤ m λ_max(L)/4, and xᵀAx = 2(|E| − 2 cut(S)) gives
    cut(S) = |E|/2 − xᵀAx/4 ≤ |E|/2 − m λ_min(A)/4.  The eigenvalues are padded by a small
    tolerance against round-off so the bound stays an upper bound.
    """
    A = _square(adjacency)
    m = A.shape[0]
    n_edges = int(np.count_nonzero(np.triu(A, 1)))
    if m <= EXACT_MAXCUT_MAX_ITEMS:
        return max_cut(A), "sparse-maxcut"
    Af = A.astype(float)
    L = np.diag(Af.sum(axis=1)) - Af
    lam_L = float(np.linalg.eigvalsh(L)[-1])
    lam_A = float(np.linalg.eigvalsh(Af)[0])  # most negative adjacency eigenvalue
    tol = 1e-9 * max(1.0, float(m))  # guard against round-off in the eigenvalues
    laplacian = math.floor(m * (lam_L + tol) / 4.0)
    adjacency_bound = math.floor(n_edges / 2.0 - m * (lam_A - tol) / 4.0)
    return min(n_edges, laplacian, adjacency_bound), "sparse-spectral"


def pairwise_counts_sensitivity(
    n_items: int,
    *,
    graph: np.ndarray | None = None,
    bound: Bound = "tight",
    relation: Relation = "replace",
) -> Sensitivity:
    """L1 and L2 sensitivity of the pairwise counts Y (released on ``graph``).

    Parameters
    ----------
    n_items : int
        Number of items m.
    graph : (m, m) boolean array, optional
        Symmetric adjacency of the comparison graph; ``None`` is the complete graph.  Both
        directions Y_ij and Y_ji of each edge are released.
    bound : {"tight", "paper"}
        ``"tight"``: the proven bound of ``docs/privacy.md`` (2⌊m/2⌋⌈m/2⌉ for the complete
        graph, 2·maxcut(G) on a sparse graph).  ``"paper"``: one per released cell (m(m−1)
        on the complete graph), as in Nguyen & Zhang, for comparison.
    relation : {"replace", "add_remove"}
        ``"replace"`` (default; the relation of every private function in privirt) or
        ``"add_remove"`` (documented variant: half the replace bound).

    Returns
    -------
    Sensitivity
    """
    if isinstance(n_items, (bool, np.bool_)) or not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be a positive integer, got {brief(n_items)}")
    if bound not in ("tight", "paper"):
        raise ValueError(f"bound must be 'tight' or 'paper', got {bound!r}")
    if relation not in ("replace", "add_remove"):
        raise ValueError(f"relation must be 'replace' or 'add_remove', got {relation!r}")
    m = int(n_items)
    A = _adjacency(graph, m)
    complete = A is None or int(np.count_nonzero(A)) == m * (m - 1)
    n_released = m * (m - 1) if A is None else int(np.count_nonzero(A))
    factor = 2 if relation == "replace" else 1
    rel = NEIGHBOURING_RELATION if relation == "replace" else "add or remove one person's row"
    if bound == "paper":
        # one unit per released cell (what the paper's Lemma 4.1 assumes); under add/remove
        # a single person touches at most every cell once too.
        s = n_released
        return Sensitivity(float(s), _sqrt_up(s), "paper", rel, n_released)
    if complete:
        s = factor * (m // 2) * ((m + 1) // 2)
        label = "tight"
    else:
        cut, label = max_cut_upper_bound(A)
        s = factor * cut
    return Sensitivity(float(s), _sqrt_up(s), label, rel, n_released)


def count_contribution(row: np.ndarray) -> np.ndarray:
    """One person's contribution c wᵀ to Y (m × m int64) from a row of codes (1/0/−1).

    Used by the tests and the proof's exhaustive check; equals
    ``pairwise_counts`` of a one-row data set.
    """
    r = np.asarray(row)
    if r.ndim != 1 or r.dtype.kind not in "biuf" or not np.isin(r, (1, 0, -1)).all():
        raise ValueError("row must be a 1-D array of response codes 1 (correct), 0 (incorrect) "
                         "or -1 (missing)")
    c = (r == 1).astype(np.int64)
    w = (r == 0).astype(np.int64)
    return np.outer(c, w)
